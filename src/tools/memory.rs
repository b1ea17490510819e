//! The core memory tools: core_memory_append, core_memory_replace, core_memory_set.

use axocoatl_store::memory::CoreMemory;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::registry::Handler;
use super::{Context, ToolOutput};
use crate::config::CoreBlock;

/// The schema of `A` with `label` limited to the agent's blocks.
pub fn schema<A: JsonSchema>(cx: &Context<'_>) -> Value {
    let mut v = super::schema::generate::<A>();
    let labels: Vec<&str> = cx.blocks.iter().map(|b| b.label.as_str()).collect();
    v["properties"]["label"] =
        json!({"type": "string", "enum": labels, "description": "The core memory block"});
    v
}

/// Arguments of `core_memory_append`.
#[derive(Deserialize, JsonSchema)]
pub struct Append {
    label: String,
    /// The text to append.
    content: String,
}

/// Arguments of `core_memory_replace`.
#[derive(Deserialize, JsonSchema)]
pub struct Replace {
    label: String,
    /// The exact text to replace.
    old: String,
    /// Its replacement.
    new: String,
}

/// Arguments of `core_memory_set`.
#[derive(Deserialize, JsonSchema)]
pub struct Set {
    label: String,
    /// The whole new value.
    value: String,
}

impl Handler for Append {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        update(cx, &self.label, |current| {
            Ok(if current.is_empty() {
                self.content.clone()
            } else {
                format!("{current}\n{}", self.content)
            })
        })
    }
}

impl Handler for Replace {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        update(cx, &self.label, |current| {
            if self.old.is_empty() || !current.contains(&self.old) {
                return Err(format!("{:?} is not in block {:?}", self.old, self.label));
            }
            Ok(current.replacen(&self.old, &self.new, 1))
        })
    }
}

impl Handler for Set {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        update(cx, &self.label, |_| Ok(self.value.clone()))
    }
}

fn update(
    cx: &Context<'_>,
    label: &str,
    change: impl FnOnce(&str) -> Result<String, String>,
) -> ToolOutput {
    let Some(block) = cx.blocks.iter().find(|b| b.label == label) else {
        return ToolOutput::err(format!("no core memory block {label:?}"));
    };
    let current = match cx.memory.get(label, block.shared) {
        Ok(c) => c,
        Err(e) => return ToolOutput::err(e.to_string()),
    };
    let new = match change(&current) {
        Ok(n) => n,
        Err(e) => return ToolOutput::err(e),
    };
    let chars = new.chars().count();
    if chars > block.limit as usize {
        return ToolOutput::err(format!(
            "block {label:?} would hold {chars} characters; its limit is {}",
            block.limit
        ));
    }
    match cx.memory.set(label, block.shared, &new) {
        Ok(()) => ToolOutput::ok(format!("block {label:?} now holds {chars} characters")),
        Err(e) => ToolOutput::err(e.to_string()),
    }
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

#[cfg(test)]
mod tests {
    use super::super::testing::Fixture;
    use crate::config::SandboxMode;
    use serde_json::json;

    #[test]
    fn blocks_are_edited_within_their_limits() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        let set = f.call("core_memory_set", json!({"label": "human", "value": "Ana"}));
        assert_eq!(set.text, "block \"human\" now holds 3 characters");
        f.call(
            "core_memory_append",
            json!({"label": "human", "content": "likes tea"}),
        );
        let rep = f.call(
            "core_memory_replace",
            json!({"label": "human", "old": "tea", "new": "coffee"}),
        );
        assert!(!rep.is_error, "{}", rep.text);
        assert_eq!(
            f.memory().get("human", false).expect("get"),
            "Ana\nlikes coffee"
        );
        assert!(
            f.call("core_memory_set", json!({"label": "nope", "value": "x"}))
                .is_error
        );
        let long = "x".repeat(3000);
        assert!(
            f.call("core_memory_set", json!({"label": "human", "value": long}))
                .is_error
        );
    }
}
