//! The tools an agent may call: the workspace tools (read_file, list_dir, find_files, grep,
//! write_file, edit_file, run_command) and the memory tools, all dispatched through one
//! table ([`registry::TOOLS`]), and the tools of the agent's MCP servers (`crate::mcp`),
//! named `mcp__<server>__<tool>`.
//!
//! An agent's `tools:` list, when empty, gives the baseline of its sandbox; when non-empty
//! it is the exact allowlist of what is advertised and dispatched. A call to anything else,
//! a path outside the workspace, or a write in a read-only sandbox is an error result for
//! the model (recorded like any other result), never a failure of the turn.

mod beneath;
mod command;
pub mod diff;
#[cfg(test)]
mod escapes;
mod fs;
mod handler;
mod launch;
mod limits;
mod memory;
mod mountns;
mod path;
pub mod registry;
pub mod sandbox;
mod schema;
mod search;
mod walk;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::config::{split_mcp_tool_name, CommandLimits, SandboxMode};
use crate::mcp::{Hub, McpTool};
use crate::memory::AgentMemory;
use crate::provider::{Cancel, ToolSchema};

pub use command::{DEFAULT_TIMEOUT_SECS, GRACE, NOT_UTF8_NOTE};
pub use launch::{
    process_limit_enforced, sandbox_unavailable,
    supervised_namespaces as full_access_has_pid_namespace,
};
pub use path::{Root, Workplace};
pub use registry::{baseline, is_known, names, spec, Access, ToolSpec, TOOLS};

pub use crate::catalog::{for_model, MODEL_OUTPUT_CAP};

/// What a tool call produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// The whole output (the model sees it through [`for_model`]).
    pub text: String,
    /// The exact bytes when the output was not UTF-8 (`text` is their lossy decoding, with a
    /// note saying so): the ledger keeps these.
    pub raw: Option<Vec<u8>>,
    pub is_error: bool,
    /// A command's exit code (`None` for other tools, or a command ended by a signal).
    pub exit_code: Option<i32>,
    /// A command was ended because the turn was stopped.
    pub stopped: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            ..ToolOutput::default()
        }
    }

    pub fn err(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
            ..ToolOutput::default()
        }
    }
}

/// What a tool sees of the turn that calls it.
pub struct Context<'a> {
    pub root: &'a Root,
    pub sandbox: SandboxMode,
    /// Set when the turn is stopped (a running command is then terminated).
    pub cancel: &'a Cancel,
    /// The calling agent's memory tiers (core blocks, daily log).
    pub memory: &'a AgentMemory,
    /// The turn making the call (memory edits are logged with it).
    pub turn: Option<&'a str>,
    /// Environment variables providers read keys from: never passed to commands.
    pub secret_env: &'a [String],
    /// What each `run_command` may use (sandboxed commands).
    pub limits: CommandLimits,
}

/// The tools of one agent: its allowlist, or the baseline of its sandbox, and the tools of
/// its MCP servers.
#[derive(Clone, Debug)]
pub struct Toolbox {
    tools: Vec<&'static ToolSpec>,
    sandbox: SandboxMode,
    mcp: Option<McpTools>,
}

/// The MCP part of a toolbox: the servers' tools it offers, and the servers that are down.
#[derive(Clone, Debug)]
struct McpTools {
    hub: Arc<Hub>,
    tools: Vec<McpTool>,
    /// Servers the agent lists that are not running, and why.
    down: Vec<(String, String)>,
}

/// A finished call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub output: ToolOutput,
    pub duration: Duration,
    /// What the user should be told besides the result (an MCP server that died, …).
    pub warnings: Vec<String>,
}

impl Toolbox {
    /// `allowlist` as configured (validated: known names, no write tool when read-only);
    /// whatever slipped through is left out here too.
    pub fn new(allowlist: &[String], sandbox: SandboxMode) -> Toolbox {
        let tools = if allowlist.is_empty() {
            TOOLS
                .iter()
                .filter(|t| t.access.in_baseline(sandbox))
                .collect()
        } else {
            TOOLS
                .iter()
                .filter(|t| allowlist.iter().any(|a| a == t.name))
                .filter(|t| t.access.permitted(sandbox))
                .collect()
        };
        Toolbox {
            tools,
            sandbox,
            mcp: None,
        }
    }

    /// This toolbox without the memory tools (for a coordinator's own calls, which advertise
    /// no Tier 2-4 memory tools, and for ad-hoc workers, which own no memory).
    pub fn without_memory(mut self) -> Toolbox {
        self.tools
            .retain(|t| t.access != crate::catalog::Access::Memory);
        self
    }

    /// A toolbox with no tools at all.
    pub fn empty(sandbox: SandboxMode) -> Toolbox {
        Toolbox {
            tools: Vec::new(),
            sandbox,
            mcp: None,
        }
    }

    /// Adds the tools of the MCP servers `servers` (an agent's `mcp_servers:`), starting
    /// those that are not running through `hub`: every tool of each server when `allowlist`
    /// is empty, else exactly the `mcp__<server>__<tool>` names it lists (a server none of
    /// whose tools it names is not started). Returns what the user should be told: servers
    /// that did not start (their tools are left out), allowlisted tools no server has.
    pub fn add_mcp(
        &mut self,
        hub: Arc<Hub>,
        servers: &[String],
        allowlist: &[String],
        cancel: &Cancel,
    ) -> Vec<String> {
        let needed: Vec<String> = servers
            .iter()
            .filter(|s| {
                allowlist.is_empty()
                    || allowlist
                        .iter()
                        .any(|a| split_mcp_tool_name(a).is_some_and(|(server, _)| server == *s))
            })
            .cloned()
            .collect();
        if needed.is_empty() {
            return Vec::new();
        }
        let prepared = hub.prepare(&needed, cancel);
        let mut warnings = prepared.warnings.clone();
        let mut tools = Vec::new();
        let mut down = Vec::new();
        for report in &prepared.servers {
            if let Some(why) = &report.error {
                warnings.push(format!("{why}; its tools are left out of this turn"));
                down.push((report.server.clone(), why.clone()));
                continue;
            }
            for t in &report.tools {
                if allowlist.is_empty() || allowlist.contains(&t.qualified) {
                    tools.push(t.clone());
                }
            }
        }
        for name in allowlist {
            let Some((server, tool)) = split_mcp_tool_name(name) else {
                continue;
            };
            let Some(report) = prepared
                .servers
                .iter()
                .find(|r| r.server == server && r.error.is_none())
            else {
                continue;
            };
            if !report.tools.iter().any(|t| &t.qualified == name) {
                let theirs: Vec<&str> = report.tools.iter().map(|t| t.name.as_str()).collect();
                warnings.push(format!(
                    "`tools:` lists `{name}`, but MCP server `{server}` has no tool `{tool}` (its tools: {})",
                    if theirs.is_empty() { "none".to_owned() } else { theirs.join(", ") }
                ));
            }
        }
        self.mcp = Some(McpTools { hub, tools, down });
        warnings
    }

    /// Every tool name it offers, the MCP ones last.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        let mcp = self.mcp.iter().flat_map(|m| m.tools.iter());
        self.tools
            .iter()
            .map(|t| t.name)
            .chain(mcp.map(|t| t.qualified.as_str()))
    }

    pub fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }

    /// What is advertised to the model.
    pub fn schemas(&self, cx: &Context<'_>) -> Vec<ToolSchema> {
        let mcp = self.mcp.iter().flat_map(|m| m.tools.iter());
        self.tools
            .iter()
            .map(|t| ToolSchema {
                name: t.name.to_owned(),
                description: t.description.to_owned(),
                parameters: (t.schema)(cx),
            })
            .chain(mcp.map(|t| ToolSchema {
                name: t.qualified.clone(),
                description: t.description.clone(),
                parameters: t.input_schema.clone(),
            }))
            .collect()
    }

    /// Runs one call. Tools outside the toolbox are refused with an error result.
    pub fn call(&self, cx: &Context<'_>, name: &str, args: &Value) -> Call {
        let started = Instant::now();
        let mut warnings = Vec::new();
        let output = if let Some(tool) = self.tools.iter().find(|t| t.name == name) {
            (tool.run)(cx, args.clone())
        } else if let Some((mcp, tool)) = self.mcp_tool(name) {
            let r = mcp.hub.call(&tool.server, &tool.name, args, cx.cancel);
            warnings = r.warnings;
            ToolOutput {
                text: r.text,
                raw: None,
                is_error: r.is_error,
                exit_code: None,
                stopped: r.stopped,
            }
        } else {
            ToolOutput::err(self.refusal(name))
        };
        Call {
            output,
            duration: started.elapsed(),
            warnings,
        }
    }

    fn mcp_tool(&self, name: &str) -> Option<(&McpTools, &McpTool)> {
        let mcp = self.mcp.as_ref()?;
        mcp.tools
            .iter()
            .find(|t| t.qualified == name)
            .map(|t| (mcp, t))
    }

    /// Why `name` is not called.
    fn refusal(&self, name: &str) -> String {
        let available: Vec<&str> = self.names().collect();
        let down = split_mcp_tool_name(name).and_then(|(server, _)| {
            self.mcp
                .as_ref()?
                .down
                .iter()
                .find(|(s, _)| s == server)
                .map(|(_, why)| why.clone())
        });
        let why = match (spec(name), down) {
            (_, Some(why)) => format!("tool {name:?} is unavailable: {why}"),
            (Some(t), _) if !t.access.permitted(self.sandbox) => format!(
                "tool {name:?} is refused: this agent's sandbox is {}",
                self.sandbox.as_str()
            ),
            (Some(_), _) => format!("tool {name:?} is not in this agent's tools"),
            (None, _) => format!("there is no tool {name:?}"),
        };
        format!("{why}; available: {}", available.join(", "))
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use super::*;

    /// A workspace with a repository in it, and a context to call tools with.
    pub struct Fixture {
        _tmp: tempfile::TempDir,
        pub root: Root,
        pub sandbox: SandboxMode,
        pub cancel: Cancel,
        pub limits: CommandLimits,
        pub secret_env: Vec<String>,
        memory: AgentMemory,
    }

    impl Fixture {
        pub fn new(sandbox: SandboxMode) -> Fixture {
            let tmp = tempfile::tempdir().expect("tempdir");
            let ws = tmp.path().join("ws");
            std::fs::create_dir_all(&ws).expect("mkdir");
            let repo_dir = axocoatl_store::repo::init(&ws).expect("init");
            let repo = axocoatl_store::Repo::open(&repo_dir, &Default::default()).expect("open");
            let memory = AgentMemory::for_id(&repo, "main:a", &Default::default());
            Fixture {
                root: Root::new(&ws, &repo_dir).expect("root"),
                _tmp: tmp,
                sandbox,
                cancel: Cancel::new(),
                limits: CommandLimits::default(),
                secret_env: Vec::new(),
                memory,
            }
        }

        pub fn cx(&self) -> Context<'_> {
            Context {
                root: &self.root,
                sandbox: self.sandbox,
                cancel: &self.cancel,
                memory: &self.memory,
                turn: None,
                secret_env: &self.secret_env,
                limits: self.limits,
            }
        }

        pub fn memory(&self) -> &AgentMemory {
            &self.memory
        }

        /// Calls a tool directly (whatever the baseline).
        pub fn call(&self, name: &str, args: Value) -> ToolOutput {
            let tool = spec(name).expect("known tool");
            (tool.run)(&self.cx(), args)
        }

        pub fn write(&self, rel: &str, text: &str) {
            let p = self.root.dir().join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(Path::new("."))).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }

        pub fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.root.dir().join(rel)).expect("read")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Fixture;
    use super::*;
    use serde_json::json;

    #[test]
    fn the_toolbox_is_the_baseline_or_the_allowlist() {
        let ro = Toolbox::new(&[], SandboxMode::ReadOnly);
        let names: Vec<&str> = ro.names().collect();
        assert_eq!(names, baseline(SandboxMode::ReadOnly));
        let list = vec!["grep".to_string(), "run_command".to_string()];
        let only = Toolbox::new(&list, SandboxMode::ReadOnly);
        assert_eq!(only.names().collect::<Vec<_>>(), ["grep", "run_command"]);
        // A write tool never reaches a read-only agent, even allowlisted.
        let forced = Toolbox::new(&["write_file".to_string()], SandboxMode::ReadOnly);
        assert_eq!(forced.names().count(), 0);
    }

    #[test]
    fn calls_outside_the_toolbox_are_refused() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        let cx = f.cx();
        let tb = Toolbox::new(&["read_file".to_string()], SandboxMode::ReadOnly);
        let out = tb.call(&cx, "grep", &json!({"pattern": "x"})).output;
        assert!(
            out.is_error && out.text.contains("not in this agent's tools"),
            "{}",
            out.text
        );
        let out = tb.call(&cx, "write_file", &json!({})).output;
        assert!(out.text.contains("sandbox is read-only"), "{}", out.text);
        let out = tb.call(&cx, "nope", &json!({})).output;
        assert_eq!(out.text, "there is no tool \"nope\"; available: read_file");
        assert_eq!(tb.schemas(&cx).len(), 1);
        assert_eq!(tb.schemas(&cx)[0].parameters["required"], json!(["path"]));
    }

    #[test]
    fn long_output_is_cut_for_the_model_with_a_note() {
        let text = "é".repeat(MODEL_OUTPUT_CAP);
        let shown = for_model(&text);
        assert!(shown.len() < MODEL_OUTPUT_CAP + 200);
        assert!(shown.ends_with(&format!(
            "[output cut: {MODEL_OUTPUT_CAP} of {} bytes shown; the whole output is kept in the ledger]",
            text.len()
        )));
        assert_eq!(for_model("short"), "short");
    }
}
