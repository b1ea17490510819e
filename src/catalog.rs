//! Names and limits the runtime defines that lower layers quote: the tools (which a
//! configuration may name, with what each may do), the sandbox modes, how much tool output
//! a model reads, and the attachment types (which error hints list).
//!
//! A leaf module, so that configuration validation (`crate::config`), the tool registry
//! (`crate::tools`) and the conversation rebuilt from the ledger all read it without
//! depending on each other. The registry's table is checked against [`TOOL_NAMES`] by a test.

use serde::{Deserialize, Serialize};

/// What an agent's tools may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Tools read the workspace; `run_command` (only when allowlisted) writes nowhere but a
    /// private temporary directory.
    #[default]
    ReadOnly,
    /// Tools write inside the workspace; commands run under Landlock with writes confined
    /// to the workspace and a private temporary directory, and no network.
    WorkspaceWrite,
    /// Commands run unconfined.
    FullAccess,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

/// What a tool may do, which decides the baselines that include it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads the workspace: in every baseline.
    Read,
    /// Writes the workspace: in the workspace-write and full-access baselines, and refused
    /// in a read-only agent's allowlist.
    Write,
    /// Runs commands: in the workspace-write and full-access baselines; a read-only agent
    /// may allowlist it, and its commands then write nowhere but a private temp dir.
    Exec,
    /// Edits the agent's own memory (never the workspace): in every baseline.
    Memory,
}

impl Access {
    /// Whether an empty `tools:` list (the baseline) of an agent in `sandbox` includes it.
    pub fn in_baseline(self, sandbox: SandboxMode) -> bool {
        match self {
            Access::Read | Access::Memory => true,
            Access::Write | Access::Exec => sandbox != SandboxMode::ReadOnly,
        }
    }

    /// Whether an agent in `sandbox` may have it at all.
    pub fn permitted(self, sandbox: SandboxMode) -> bool {
        self != Access::Write || sandbox != SandboxMode::ReadOnly
    }
}

/// A tool as configuration sees it: its name, what it may do, and at least how many tokens
/// advertising it costs each model call (the fallback estimate of its name, description
/// and schema; a test keeps it at most the real estimate), for `validate` to tell a budget
/// that no call can fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolName {
    pub name: &'static str,
    pub access: Access,
    pub schema_tokens: u64,
}

const fn tool(name: &'static str, access: Access, schema_tokens: u64) -> ToolName {
    ToolName {
        name,
        access,
        schema_tokens,
    }
}

/// The completion bound each call reserves when an agent has a budget and no
/// `sampling.max_tokens`.
pub const DEFAULT_COMPLETION_BOUND: u32 = 1024;

/// Every tool this build knows, in the order they are advertised.
pub const TOOL_NAMES: &[ToolName] = &[
    tool("read_file", Access::Read, 253),
    tool("list_dir", Access::Read, 133),
    tool("find_files", Access::Read, 178),
    tool("grep", Access::Read, 338),
    tool("write_file", Access::Write, 175),
    tool("edit_file", Access::Write, 297),
    tool("run_command", Access::Exec, 245),
    tool("core_memory_append", Access::Memory, 148),
    tool("core_memory_replace", Access::Memory, 160),
    tool("core_memory_set", Access::Memory, 135),
    tool("recall_search", Access::Memory, 267),
    tool("recall_timeframe", Access::Memory, 281),
];

/// The tool of that name.
pub fn tool_named(name: &str) -> Option<&'static ToolName> {
    TOOL_NAMES.iter().find(|t| t.name == name)
}

/// Whether a tool name is one this build knows.
pub fn is_known_tool(name: &str) -> bool {
    tool_named(name).is_some()
}

/// Tool output longer than this reaches the model (and `--json` events) cut, with a note;
/// the ledger keeps the whole output in the object store.
pub const MODEL_OUTPUT_CAP: usize = 64 * 1024;

/// `text` as the model and events see it: whole up to [`MODEL_OUTPUT_CAP`] bytes, else its
/// start and a note saying how much was cut.
pub fn for_model(text: &str) -> String {
    if text.len() <= MODEL_OUTPUT_CAP {
        return text.to_owned();
    }
    let mut cut = MODEL_OUTPUT_CAP;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[output cut: {} of {} bytes shown; the whole output is kept in the ledger]",
        &text[..cut],
        cut,
        text.len()
    )
}

/// What a tool call is answered when its arguments are not JSON (a provider hands over the
/// text it could not parse): says so and quotes their start. `None` when they are JSON.
pub fn arguments_not_json(text: &str) -> Option<String> {
    const QUOTED: usize = 80;
    let e = serde_json::from_str::<serde_json::Value>(text).err()?;
    let start: String = text.chars().take(QUOTED).collect();
    let more = if text.chars().nth(QUOTED).is_some() {
        "…"
    } else {
        ""
    };
    Some(format!(
        "arguments are not valid JSON ({e}); they start {start:?}{more}; send one JSON object as the tool's schema describes"
    ))
}

/// What `attach add` accepts, for the message that refuses everything else.
pub const SUPPORTED_ATTACHMENTS: &str =
    "images (PNG, JPEG, GIF, WebP; TIFF and BMP through OCR) up to 10 MiB; PDF and UTF-8 \
     text (plain text, Markdown, source code, JSON, CSV, HTML, XML, YAML) up to 25 MiB";

#[cfg(test)]
mod tests {
    #[test]
    fn arguments_that_are_not_json_are_named_with_their_start() {
        let e = super::arguments_not_json("{\"path\": ").expect("not json");
        assert!(e.starts_with("arguments are not valid JSON (EOF"), "{e}");
        assert!(e.contains(r#"they start "{\"path\": ""#), "{e}");
        let long = format!("{{\"content\": \"{}", "x".repeat(500));
        let e = super::arguments_not_json(&long).expect("not json");
        assert!(e.contains("xxx\"…;"), "{e}");
        assert!(e.len() < 300, "{e}");
        assert_eq!(super::arguments_not_json("{\"path\": \"a\"}"), None);
    }

    /// Each tool's `schema_tokens` is at most the estimate of what is advertised for it
    /// (so a budget `validate` says no call fits really fits none), and within a quarter of
    /// it.
    #[test]
    fn schema_tokens_are_a_floor_of_the_advertised_schemas() {
        let fixture = crate::tools::testing::Fixture::new(super::SandboxMode::FullAccess);
        let cx = fixture.cx();
        let mut report = Vec::new();
        for t in crate::tools::registry::TOOLS {
            let schema = (t.schema)(&cx);
            let real = crate::budget::estimate_text(t.name)
                + crate::budget::estimate_text(t.description)
                + crate::budget::estimate_text(&schema.to_string());
            let floor = super::tool_named(t.name).map_or(0, |n| n.schema_tokens);
            // A floor above the estimate would call a budget that fits unmeetable; one far
            // below it is stale.
            if floor > real || floor < real * 3 / 4 {
                report.push(format!(
                    "{}: {floor} in the catalog, estimated {real}",
                    t.name
                ));
            }
        }
        assert!(report.is_empty(), "set schema_tokens: {report:#?}");
    }
}
