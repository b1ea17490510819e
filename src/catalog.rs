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

/// A tool as configuration sees it: its name and what it may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolName {
    pub name: &'static str,
    pub access: Access,
}

const fn tool(name: &'static str, access: Access) -> ToolName {
    ToolName { name, access }
}

/// Every tool this build knows, in the order they are advertised.
pub const TOOL_NAMES: &[ToolName] = &[
    tool("read_file", Access::Read),
    tool("list_dir", Access::Read),
    tool("find_files", Access::Read),
    tool("grep", Access::Read),
    tool("write_file", Access::Write),
    tool("edit_file", Access::Write),
    tool("run_command", Access::Exec),
    tool("core_memory_append", Access::Memory),
    tool("core_memory_replace", Access::Memory),
    tool("core_memory_set", Access::Memory),
    tool("recall_search", Access::Memory),
    tool("recall_timeframe", Access::Memory),
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

/// What `attach add` accepts, for the message that refuses everything else.
pub const SUPPORTED_ATTACHMENTS: &str =
    "images (PNG, JPEG, GIF, WebP; TIFF and BMP through OCR) up to 10 MiB; PDF and UTF-8 \
     text (plain text, Markdown, source code, JSON, CSV, HTML, XML, YAML) up to 25 MiB";
