//! MCP servers' tools for agents: the client side of the Model Context Protocol.
//!
//! An entry of `mcp_servers:` is a program speaking MCP (JSON-RPC, one message per line) on
//! its stdin and stdout. A [`Hub`] starts the servers a turn needs, as children in their
//! own process groups with only `PATH`, `HOME` and the entry's `env`, through the `rmcp`
//! SDK on a current-thread tokio runtime of its own: commands and turns that use no MCP
//! server never start a runtime.
//!
//! Each server's tools reach the model as `mcp__<server>__<tool>` ([`McpTool`]) with the
//! server's own JSON Schema, and join the agent's toolbox (`crate::tools`), so they share
//! the allowlist, the records and search of every tool.
//!
//! What goes wrong becomes an error result for the model and a warning for the user, never
//! a failed turn: a server that cannot start (or list its tools) within
//! `startup_timeout_secs`, a call that takes longer than `tool_timeout_secs` (cancelled with
//! `notifications/cancelled`), a server that exits during a call, an answer that is not a
//! valid MCP message. A stopped turn cancels its running call the same way and then ends the
//! server's process group. A server that failed or died is started again at the next turn
//! that needs it; in one-shot commands every server ends with the hub, at the end of the
//! turn.

#[cfg(feature = "mcp")]
mod client;
#[cfg(not(feature = "mcp"))]
mod disabled;
#[cfg(feature = "mcp")]
mod hub;
#[cfg(feature = "mcp")]
pub(crate) mod limit;
#[cfg(feature = "mcp")]
mod process;
#[cfg(feature = "mcp")]
mod tap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(not(feature = "mcp"))]
pub use disabled::Hub;
#[cfg(feature = "mcp")]
pub use hub::Hub;

pub use crate::config::{mcp_tool_name, split_mcp_tool_name, MCP_TOOL_PREFIX};

/// The MCP servers a turn may start: the configuration's entries, and the directory
/// (the config file's) their relative commands and working directory are taken from.
#[derive(Clone, Debug, Default)]
pub struct ServerSet {
    pub configs: std::collections::BTreeMap<String, crate::config::McpServerConfig>,
    pub dir: std::path::PathBuf,
    /// Servers that outlive the turn (an actor's); `None`: the turn starts its own and
    /// they end with it.
    pub hub: Option<std::sync::Arc<Hub>>,
}

/// The longest tool name models accept (OpenAI's function-name limit).
pub const MAX_TOOL_NAME: usize = 64;

/// One tool of a running server, as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpTool {
    pub server: String,
    /// Its name on its server.
    pub name: String,
    /// Its name for the model: `mcp__<server>__<name>`, with characters other than ASCII
    /// letters, digits, `_` and `-` written as `_`.
    pub qualified: String,
    pub description: String,
    /// The server's JSON Schema of the arguments.
    pub input_schema: Value,
}

/// One server of a hub that outlives turns (an actor's, under `serve`), as `agents status`
/// shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpServerStatus {
    pub server: String,
    /// `running` or `down`.
    pub state: String,
    pub pid: Option<u32>,
    /// Starts after the first (at a turn, or by the actor when it had died).
    pub restarts: u32,
    /// Why it last ended or failed to start.
    pub last_error: Option<String>,
}

/// What became of one server when a hub was asked for it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerReport {
    pub server: String,
    /// `None`: running; else why it is not.
    pub error: Option<String>,
    pub tools: Vec<McpTool>,
}

/// The servers of one turn (or one `mcp list`), started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prepared {
    pub servers: Vec<ServerReport>,
    /// Things the user should know that are not a server's failure (tools left out).
    pub warnings: Vec<String>,
}

impl Prepared {
    /// Every tool of every running server, in server order.
    pub fn tools(&self) -> impl Iterator<Item = &McpTool> {
        self.servers.iter().flat_map(|s| s.tools.iter())
    }
}

/// What a call produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallResult {
    /// The result's content as text (whole; the caller cuts what the model sees).
    pub text: String,
    pub is_error: bool,
    /// The turn was stopped during the call.
    pub stopped: bool,
    /// What the user should be told besides the result (the server died, timed out, …).
    pub warnings: Vec<String>,
}

impl CallResult {
    fn error(text: String) -> CallResult {
        CallResult {
            text,
            is_error: true,
            ..CallResult::default()
        }
    }

    /// An error result that the user is warned about too.
    #[cfg_attr(
        not(feature = "mcp"),
        expect(dead_code, reason = "only running servers fail this way")
    )]
    fn failure(text: String) -> CallResult {
        CallResult {
            warnings: vec![text.clone()],
            ..CallResult::error(text)
        }
    }
}

/// `tool` written with only the characters tool names may have everywhere.
pub fn model_safe(tool: &str) -> String {
    tool.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The text of a `tools/call` result's content blocks, as the model reads it: text as is,
/// other blocks as a bracketed note; without content, the structured result as JSON.
pub fn content_text(content: &[Value], structured: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in content {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let part = match kind {
            "text" => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes of base64 data not shown]",
                block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type"),
                block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len)
            ),
            "resource" => {
                let r = block.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!("[resource {uri}: binary data not shown]"),
                }
            }
            "resource_link" => format!(
                "[resource link: {}]",
                block.get("uri").and_then(Value::as_str).unwrap_or("?")
            ),
            other => format!("[{other} content not shown]"),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        if let Some(v) = structured {
            return v.to_string();
        }
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_split_and_made_safe() {
        assert_eq!(mcp_tool_name("files", "read"), "mcp__files__read");
        assert_eq!(
            split_mcp_tool_name("mcp__files__read__all"),
            Some(("files", "read__all"))
        );
        assert_eq!(split_mcp_tool_name("mcp__files"), Some(("files", "")));
        assert_eq!(split_mcp_tool_name("read_file"), None);
        assert_eq!(model_safe("fs.read/file-2"), "fs_read_file-2");
    }

    #[test]
    fn content_becomes_text() {
        let content = [
            json!({"type": "text", "text": "hello"}),
            json!({"type": "image", "mimeType": "image/png", "data": "AAAA"}),
            json!({"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}),
            json!({"type": "resource_link", "uri": "file:///b", "name": "b"}),
        ];
        assert_eq!(
            content_text(&content, None),
            "hello\n[image: image/png, 4 bytes of base64 data not shown]\n[resource file:///a]\nbody\n[resource link: file:///b]"
        );
        assert_eq!(content_text(&[], Some(&json!({"n": 1}))), r#"{"n":1}"#);
        assert_eq!(content_text(&[], None), "");
    }
}
