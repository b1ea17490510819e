//! The baseline tools an autonomous Agent may call. An agent's `tools:` list, when
//! non-empty, is the exact allowlist of what is advertised and dispatched.

use axocoatl_store::memory::CoreMemory;
use serde_json::{json, Value};

use crate::config::CoreBlock;
use crate::provider::ToolSchema;

pub const BASELINE: &[&str] = &[
    "core_memory_append",
    "core_memory_replace",
    "core_memory_set",
];

/// What a tool call produced: text for the model, and whether it is an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }

    fn err(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// The tools available to an agent: the allowlist if given, else the baseline.
pub fn allowed(allowlist: &[String]) -> Vec<String> {
    if allowlist.is_empty() {
        BASELINE.iter().map(|s| s.to_string()).collect()
    } else {
        allowlist.to_vec()
    }
}

/// Whether a tool name is one this build knows.
pub fn is_known(name: &str) -> bool {
    BASELINE.contains(&name)
}

pub fn schema(name: &str, blocks: &[CoreBlock]) -> Option<ToolSchema> {
    let labels: Vec<&str> = blocks.iter().map(|b| b.label.as_str()).collect();
    let label = json!({"type": "string", "enum": labels, "description": "The core memory block"});
    let (description, parameters) = match name {
        "core_memory_append" => (
            "Append text to a core memory block (shown to you on every turn).",
            json!({"type": "object", "properties": {"label": label, "content": {"type": "string"}}, "required": ["label", "content"]}),
        ),
        "core_memory_replace" => (
            "Replace an exact piece of text in a core memory block.",
            json!({"type": "object", "properties": {"label": label, "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["label", "old", "new"]}),
        ),
        "core_memory_set" => (
            "Set the whole value of a core memory block.",
            json!({"type": "object", "properties": {"label": label, "value": {"type": "string"}}, "required": ["label", "value"]}),
        ),
        _ => return None,
    };
    Some(ToolSchema {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    })
}

fn arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, ToolOutput> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolOutput::err(format!("missing string argument {name:?}")))
}

/// Runs a tool. Unknown or disallowed tools are answered with an error for the model.
pub fn run(
    name: &str,
    args: &Value,
    allowed: &[String],
    memory: &CoreMemory,
    blocks: &[CoreBlock],
) -> ToolOutput {
    if !allowed.iter().any(|a| a == name) {
        return ToolOutput::err(format!("tool {name:?} is not available to this agent"));
    }
    match run_inner(name, args, memory, blocks) {
        Ok(out) | Err(out) => out,
    }
}

fn run_inner(
    name: &str,
    args: &Value,
    memory: &CoreMemory,
    blocks: &[CoreBlock],
) -> Result<ToolOutput, ToolOutput> {
    let label = arg(args, "label")?;
    let block = blocks
        .iter()
        .find(|b| b.label == label)
        .ok_or_else(|| ToolOutput::err(format!("no core memory block {label:?}")))?;
    let current = memory
        .get(label, block.shared)
        .map_err(|e| ToolOutput::err(e.to_string()))?;
    let new = match name {
        "core_memory_append" => {
            let content = arg(args, "content")?;
            if current.is_empty() {
                content.to_owned()
            } else {
                format!("{current}\n{content}")
            }
        }
        "core_memory_replace" => {
            let old = arg(args, "old")?;
            if old.is_empty() || !current.contains(old) {
                return Err(ToolOutput::err(format!(
                    "{old:?} is not in block {label:?}"
                )));
            }
            current.replacen(old, arg(args, "new")?, 1)
        }
        "core_memory_set" => arg(args, "value")?.to_owned(),
        other => return Err(ToolOutput::err(format!("unknown tool {other:?}"))),
    };
    let chars = new.chars().count();
    if chars > block.limit as usize {
        return Err(ToolOutput::err(format!(
            "block {label:?} would hold {chars} characters; its limit is {}",
            block.limit
        )));
    }
    memory
        .set(label, block.shared, &new)
        .map_err(|e| ToolOutput::err(e.to_string()))?;
    Ok(ToolOutput::ok(format!(
        "block {label:?} now holds {chars} characters"
    )))
}

/// The core memory section injected into the system prompt on every turn.
pub fn core_memory_prompt(memory: &CoreMemory, blocks: &[CoreBlock]) -> String {
    let mut out = String::new();
    let wanted: Vec<(&str, bool)> = blocks
        .iter()
        .map(|b| (b.label.as_str(), b.shared))
        .collect();
    let values = memory.get_many(&wanted).unwrap_or_default();
    for (b, value) in blocks.iter().zip(values) {
        if !value.is_empty() {
            out.push_str(&format!("<{}>\n{}\n</{}>\n", b.label, value, b.label));
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("Core memory:\n{out}")
    }
}
