//! Every tool this build knows, in one table.
//!
//! A tool is a name, a description, a Rust argument type (its JSON Schema is generated from
//! the type, and calls are parsed into it), a handler, and an [`Access`] class that says
//! which sandbox baselines include it. Registering a tool is one [`ToolSpec::of`] line in
//! [`TOOLS`] plus its argument type implementing [`Handler`].

use serde_json::Value;

use super::{fs, memory, schema, search, Context, ToolOutput};
use crate::config::SandboxMode;

pub use super::handler::Handler;
pub use crate::catalog::Access;

/// One registered tool.
#[derive(Debug)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub access: Access,
    /// The JSON Schema of the arguments (the agent's memory blocks fill in label enums).
    pub schema: fn(&Context<'_>) -> Value,
    pub run: fn(&Context<'_>, Value) -> ToolOutput,
}

impl ToolSpec {
    /// A tool whose arguments are `A`.
    pub const fn of<A: Handler>(
        name: &'static str,
        access: Access,
        description: &'static str,
    ) -> ToolSpec {
        ToolSpec {
            name,
            description,
            access,
            schema: schema::of::<A>,
            run: call::<A>,
        }
    }

    /// The same tool with its schema adjusted for the calling agent.
    pub const fn with_schema(mut self, schema: fn(&Context<'_>) -> Value) -> ToolSpec {
        self.schema = schema;
        self
    }
}

fn call<A: Handler>(cx: &Context<'_>, args: Value) -> ToolOutput {
    // Some models send no arguments at all for a tool whose arguments are all optional.
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        // What a provider could not parse as JSON arrives as its text.
        Value::String(text) => match crate::catalog::arguments_not_json(&text) {
            Some(why) => return ToolOutput::err(why),
            None => Value::String(text),
        },
        args => args,
    };
    match serde_json::from_value::<A>(args) {
        Ok(a) => a.run(cx),
        Err(e) => ToolOutput::err(format!(
            "invalid arguments: {e}; see the tool's schema for its arguments"
        )),
    }
}

/// Every tool, in the order they are advertised.
pub static TOOLS: &[ToolSpec] = &[
    ToolSpec::of::<fs::ReadFile>(
        "read_file",
        Access::Read,
        "Read a text file of the workspace. `offset` is the first line (1-based), `limit` the number of lines.",
    ),
    ToolSpec::of::<fs::ListDir>(
        "list_dir",
        Access::Read,
        "List a directory of the workspace (`.` for its root); directories end with `/`.",
    ),
    ToolSpec::of::<search::FindFiles>(
        "find_files",
        Access::Read,
        "Find files whose workspace-relative path matches a glob such as `*.rs` or `src/**/test_*.py`; .gitignore is honoured.",
    ),
    ToolSpec::of::<search::Grep>(
        "grep",
        Access::Read,
        "Search file contents with a regular expression (or a literal string); prints `path:line:text` for each matching line.",
    ),
    ToolSpec::of::<fs::WriteFile>(
        "write_file",
        Access::Write,
        "Create or replace a file of the workspace with `content` (parent directories are created).",
    ),
    ToolSpec::of::<fs::EditFile>(
        "edit_file",
        Access::Write,
        "Replace the exact text `old` with `new` in a file. Refused unless `old` occurs exactly once, or `replace_all` is true.",
    ),
    ToolSpec::of::<super::command::RunCommand>(
        "run_command",
        Access::Exec,
        "Run a shell command (`/bin/sh -c`) in the workspace root; returns its output and exit code. `timeout_secs` defaults to 120.",
    ),
    ToolSpec::of::<memory::Append>(
        "core_memory_append",
        Access::Memory,
        "Append text to a core memory block (shown to you on every turn).",
    )
    .with_schema(memory::schema::<memory::Append>),
    ToolSpec::of::<memory::Replace>(
        "core_memory_replace",
        Access::Memory,
        "Replace an exact piece of text in a core memory block.",
    )
    .with_schema(memory::schema::<memory::Replace>),
    ToolSpec::of::<memory::Set>(
        "core_memory_set",
        Access::Memory,
        "Set the whole value of a core memory block.",
    )
    .with_schema(memory::schema::<memory::Set>),
    ToolSpec::of::<memory::RecallSearch>(
        "recall_search",
        Access::Memory,
        "Search your long-term memory (earlier conversations, facts you were given) for passages close in meaning to `query`; returns the closest, best first, with scores.",
    ),
    ToolSpec::of::<memory::RecallTimeframe>(
        "recall_timeframe",
        Access::Memory,
        "Read your daily activity log (requests, answers, tool calls, memory edits) between `from` and `to`, oldest first, at most 50 records; `query` keeps only records containing it.",
    ),
];

/// The tool of that name.
pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Whether a tool name is one this build knows.
pub fn is_known(name: &str) -> bool {
    spec(name).is_some()
}

/// Every tool name, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    TOOLS.iter().map(|t| t.name)
}

/// The tool names an empty `tools:` list gives an agent in `sandbox`.
pub fn baseline(sandbox: SandboxMode) -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|t| t.access.in_baseline(sandbox))
        .map(|t| t.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Configuration validation reads the names from `crate::catalog` (so that config does
    /// not depend on the tools): the two lists are one.
    #[test]
    fn the_catalog_lists_every_tool_with_its_access() {
        let here: Vec<(&str, Access)> = TOOLS.iter().map(|t| (t.name, t.access)).collect();
        let catalog: Vec<(&str, Access)> = crate::catalog::TOOL_NAMES
            .iter()
            .map(|t| (t.name, t.access))
            .collect();
        assert_eq!(here, catalog);
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = names().collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn baselines_follow_the_sandbox() {
        let ro = baseline(SandboxMode::ReadOnly);
        assert!(ro.contains(&"read_file") && ro.contains(&"grep"));
        assert!(ro.contains(&"core_memory_set"));
        assert!(!ro.contains(&"write_file") && !ro.contains(&"run_command"));
        let ww = baseline(SandboxMode::WorkspaceWrite);
        assert!(ww.contains(&"edit_file") && ww.contains(&"run_command"));
        assert_eq!(ww, baseline(SandboxMode::FullAccess));
        assert!(Access::Exec.permitted(SandboxMode::ReadOnly));
        assert!(!Access::Write.permitted(SandboxMode::ReadOnly));
    }
}
