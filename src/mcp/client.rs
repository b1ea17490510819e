//! One running MCP server: its process, the SDK's client session over its stdio, and its
//! tools.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, Implementation,
    Request, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::oneshot::error::RecvError;

use super::process::{self, cut, StderrTail};
use super::tap::{Tap, TapReader};
use super::{content_text, mcp_tool_name, model_safe, CallResult, McpTool, MAX_TOOL_NAME};
use crate::config::McpServerConfig;
use crate::provider::{Cancel, CANCEL_POLL};

/// How long a server whose stdin closed has to exit before it is signalled.
const EXIT_WAIT: Duration = Duration::from_millis(500);

pub struct Server {
    name: String,
    service: RunningService<RoleClient, ClientConfig>,
    proc: process::Proc,
    stderr: StderrTail,
    tap: Arc<Tap>,
    tool_timeout: Duration,
    pub tools: Vec<McpTool>,
    /// Tools left out (names no model accepts), said once.
    pub warnings: Vec<String>,
}

/// Resolves when `cancel` is set (looked at every [`CANCEL_POLL`]).
async fn cancelled(cancel: &Cancel) {
    while !cancel.is_cancelled() {
        tokio::time::sleep(CANCEL_POLL).await;
    }
}

/// "1 line to stdout that is not an MCP message", "3 lines … that are not MCP messages".
fn noise(n: u64) -> String {
    if n == 1 {
        "1 line to stdout that is not an MCP message".to_owned()
    } else {
        format!("{n} lines to stdout that are not MCP messages")
    }
}

/// Why a server is not usable: the reason, with what its stdout and stderr add.
fn explain(name: &str, what: String, tap: &Tap, stderr: &StderrTail) -> String {
    let mut msg = format!("MCP server `{name}` {what}");
    if let Some((n, first)) = tap.take_garbage() {
        msg.push_str(&format!("; it wrote {}, the first: `{first}`", noise(n)));
    }
    if let Some(tail) = stderr.summary() {
        msg.push_str(&format!("; its stderr ends: {tail}"));
    }
    msg
}

/// The parameters of a call of `tool` on server `name`, or the error result of a call that
/// is not sent: arguments that are not a JSON object, or too large for one MCP message.
fn call_params(name: &str, tool: &str, args: &Value) -> Result<CallToolRequestParams, CallResult> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    match args {
        Value::Object(map) => params.arguments = Some(map.clone()),
        Value::Null => {}
        other => {
            if let Some(why) = other.as_str().and_then(crate::catalog::arguments_not_json) {
                let call = mcp_tool_name(name, tool);
                return Err(CallResult::error(format!("`{call}`: {why}")));
            }
            return Err(CallResult::error(format!(
                "the arguments of `{}` must be a JSON object, not {other}",
                mcp_tool_name(name, tool)
            )));
        }
    }
    let size = serde_json::to_vec(&params).map_or(0, |v| v.len());
    if size >= super::limit::MESSAGE_LIMIT {
        return Err(CallResult::error(format!(
            "the arguments of `{}` are {size} bytes, more than the {} MiB one MCP message may hold; the call was not sent",
            mcp_tool_name(name, tool),
            super::limit::MESSAGE_LIMIT >> 20
        )));
    }
    Ok(params)
}

/// Waits until the tap sees that the answer to call `id` is malformed or too large; why.
async fn malformed_answer(tap: &Tap, id: &Value, name: &str, tool: &str) -> String {
    loop {
        let notified = tap.malformed.notified();
        if let Some(why) = tap.bad_answer(id) {
            return format!(
                "MCP server `{name}` sent a malformed answer to the call of `{tool}`: {why}"
            );
        }
        if tap.oversized(id) {
            return format!(
                "MCP server `{name}` answered the call of `{tool}` with a message longer than {} MiB, the most one MCP message may be; the answer was dropped",
                super::limit::MESSAGE_LIMIT >> 20
            );
        }
        notified.await;
    }
}

/// The result of a call the turn's stop cancelled.
fn stopped_call() -> CallResult {
    CallResult {
        text: "stopped: the turn was stopped, so the call was cancelled and the MCP server's processes were terminated (effects so far are not rolled back)".to_owned(),
        is_error: true,
        stopped: true,
        warnings: Vec::new(),
    }
}

/// Why an answer that is some other kind of result than a tool's is refused.
fn not_a_tool_result(name: &str, tool: &str, other: &ServerResult) -> String {
    format!(
        "MCP server `{name}` answered the call of `{tool}` with something other than a tool result: {}",
        cut(&serde_json::to_string(other).unwrap_or_default(), 200)
    )
}

impl Server {
    /// Starts the server, completes the MCP handshake and lists its tools, within
    /// `startup_timeout_secs`. `Err` says why not, naming the server.
    pub async fn start(
        name: &str,
        cfg: &McpServerConfig,
        dir: &Path,
        cancel: &Cancel,
    ) -> Result<Server, String> {
        let spawned = process::spawn(cfg, dir).map_err(|e| {
            format!(
                "MCP server `{name}` could not be started: `{}`: {e}",
                process::program(&cfg.command, dir).display()
            )
        })?;
        let mut proc = spawned.proc;
        let stderr = spawned.stderr;
        let tap = Arc::new(Tap::default());
        let pipes = tokio::process::ChildStdout::from_std(spawned.stdout).and_then(|out| {
            tokio::process::ChildStdin::from_std(spawned.stdin).map(|input| (out, input))
        });
        let (stdout, stdin) = match pipes {
            Ok(p) => p,
            Err(e) => {
                proc.terminate(Duration::ZERO).await;
                return Err(format!("MCP server `{name}`: cannot read its output: {e}"));
            }
        };
        let secs = cfg.startup_timeout_secs();
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("axocoatl", env!("CARGO_PKG_VERSION")),
        );
        let reader = TapReader::new(stdout, tap.clone());
        let handshake = async {
            let service = info
                .serve((reader, stdin))
                .await
                .map_err(|e| format!("failed the MCP handshake: {e}"))?;
            let tools = service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("did not list its tools: {e}"))?;
            Ok::<_, String>((service, tools))
        };
        let outcome = tokio::select! {
            r = handshake => r,
            _ = tokio::time::sleep(Duration::from_secs(secs)) => {
                Err(format!("did not start within {secs} s (startup_timeout_secs)"))
            }
            _ = cancelled(cancel) => Err("was not started: the turn was stopped".to_owned()),
        };
        match outcome {
            Ok((service, tools)) => {
                let mut server = Server {
                    name: name.to_owned(),
                    service,
                    proc,
                    stderr,
                    tap,
                    tool_timeout: Duration::from_secs(cfg.tool_timeout_secs()),
                    tools: Vec::new(),
                    warnings: Vec::new(),
                };
                server.take_tools(tools);
                Ok(server)
            }
            Err(what) => {
                // A handshake that failed because the process ended says how it ended.
                let what = match proc.ended() {
                    Some(how) if !what.starts_with("did not start") => {
                        format!("exited during startup ({how})")
                    }
                    _ => what,
                };
                proc.terminate(Duration::ZERO).await;
                stderr.settled(EXIT_WAIT).await;
                Err(explain(name, what, &tap, &stderr))
            }
        }
    }

    fn take_tools(&mut self, tools: Vec<rmcp::model::Tool>) {
        for t in tools {
            let qualified = mcp_tool_name(&self.name, &model_safe(&t.name));
            if qualified.len() > MAX_TOOL_NAME {
                self.warnings.push(format!(
                    "MCP server `{}`: tool `{}` is left out: `{qualified}` is longer than the {MAX_TOOL_NAME} characters models accept",
                    self.name, t.name
                ));
                continue;
            }
            if let Some(other) = self.tools.iter().find(|x| x.qualified == qualified) {
                self.warnings.push(format!(
                    "MCP server `{}`: tool `{}` is left out: its name for models, `{qualified}`, is already that of `{}`",
                    self.name, t.name, other.name
                ));
                continue;
            }
            let description = t
                .description
                .as_deref()
                .or(t.title.as_deref())
                .unwrap_or("")
                .to_owned();
            self.tools.push(McpTool {
                server: self.name.clone(),
                name: t.name.to_string(),
                qualified,
                description,
                input_schema: Value::Object((*t.input_schema).clone()),
            });
        }
    }

    /// Calls `tool`. `alive` in the answer is false when the server is gone afterwards (it
    /// exited, or the call was stopped and its process group ended).
    pub async fn call(&mut self, tool: &str, args: &Value, cancel: &Cancel) -> (CallResult, bool) {
        let name = self.name.clone();
        let params = match call_params(&name, tool, args) {
            Ok(params) => params,
            Err(refused) => return (refused, true),
        };
        let peer = self.service.peer().clone();
        let sent = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(Request::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await;
        let mut handle = match sent {
            Ok(h) => h,
            Err(_) => return self.gone(tool, "before the call could be sent").await,
        };
        let id = serde_json::to_value(&handle.id).unwrap_or(Value::Null);
        let tap = self.tap.clone();
        let malformed = malformed_answer(&tap, &id, &name, tool);
        enum Ending {
            Answer(Box<Result<Result<ServerResult, ServiceError>, RecvError>>),
            Malformed(String),
            TimedOut,
            Stopped,
        }
        let ending = tokio::select! {
            r = &mut handle.rx => Ending::Answer(Box::new(r)),
            why = malformed => Ending::Malformed(why),
            _ = tokio::time::sleep(self.tool_timeout) => Ending::TimedOut,
            _ = cancelled(cancel) => Ending::Stopped,
        };
        let ending = match ending {
            Ending::Answer(answer) => Ok(*answer),
            Ending::Malformed(why) => Err(Some(why)),
            Ending::TimedOut => Err(None),
            Ending::Stopped => {
                // The server hears the cancellation first; then its process group ends.
                let _ = handle.cancel(Some("the turn was stopped".into())).await;
                let _ = tokio::time::timeout(process::GRACE, self.service.close()).await;
                // A server that exits on its closed stdin is given the moment to do so.
                self.proc.terminate(EXIT_WAIT).await;
                return (stopped_call(), false);
            }
        };
        let mut result = match ending {
            Ok(Ok(Ok(ServerResult::CallToolResult(r)))) => {
                let content: Vec<Value> = r
                    .content
                    .iter()
                    .filter_map(|c| serde_json::to_value(c).ok())
                    .collect();
                CallResult {
                    text: content_text(&content, r.structured_content.as_ref()),
                    is_error: r.is_error == Some(true),
                    ..CallResult::default()
                }
            }
            // The SDK takes a misshapen result for some other kind of result; the tap
            // knows what is wrong with it.
            Ok(Ok(Ok(other))) => CallResult::failure(match self.tap.bad_answer(&id) {
                Some(why) => format!(
                    "MCP server `{name}` sent a malformed answer to the call of `{tool}`: {why}"
                ),
                None => not_a_tool_result(&name, tool, &other),
            }),
            Ok(Ok(Err(ServiceError::McpError(e)))) => CallResult::error(format!(
                "MCP server `{name}` refused the call of `{tool}`: {} (JSON-RPC error {})",
                e.message, e.code.0
            )),
            Ok(Ok(Err(ServiceError::TransportClosed)) | Err(_)) => {
                return self.gone(tool, "during the call").await;
            }
            Ok(Ok(Err(e))) => CallResult::failure(format!(
                "MCP server `{name}`: the call of `{tool}` failed: {e}"
            )),
            Err(Some(why)) => {
                let _ = handle.cancel(Some("malformed answer".into())).await;
                CallResult::failure(why)
            }
            Err(None) => {
                let _ = handle.cancel(Some("timeout".into())).await;
                CallResult::failure(format!(
                    "MCP server `{name}`: `{tool}` did not answer within {} s (tool_timeout_secs); the call was cancelled",
                    self.tool_timeout.as_secs()
                ))
            }
        };
        if let Some((n, first)) = self.tap.take_garbage() {
            result.warnings.push(format!(
                "MCP server `{name}` wrote {} (ignored), the first: `{first}`",
                noise(n)
            ));
        }
        (result, true)
    }

    /// The answer for a call the server did not live through.
    async fn gone(&mut self, tool: &str, when: &str) -> (CallResult, bool) {
        let how = self.proc.terminate(EXIT_WAIT).await;
        self.stderr.settled(EXIT_WAIT).await;
        let text = explain(
            &self.name,
            format!("exited {when} of `{tool}` ({how})"),
            &self.tap,
            &self.stderr,
        );
        (CallResult::failure(text), false)
    }

    /// Ends the server: its stdin is closed; a server still running after [`EXIT_WAIT`]
    /// gets SIGTERM, then SIGKILL.
    pub async fn shutdown(mut self) {
        let _ = tokio::time::timeout(process::GRACE, self.service.close()).await;
        drop(self.service);
        self.proc.terminate(EXIT_WAIT).await;
    }

    /// Its process's id (the leader of its process group).
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Why it cannot take calls anymore, when its process has ended.
    pub fn exited(&mut self) -> Option<String> {
        self.proc.ended().map(|how| {
            explain(
                &self.name,
                format!("exited ({how})"),
                &self.tap,
                &self.stderr,
            )
        })
    }
}
