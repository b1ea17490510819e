//! A small MCP server over stdio, built on rmcp's server side: the peer the integration
//! tests give agents (`tests/cli/mcp.rs`). Not part of axocoatl.
//!
//! Tools: `echo` (text back), `add` (a sum, also as structured content), `slow` (waits,
//! noting a cancellation), `crash` (exits in the middle of the call), `malformed` (answers
//! with a result whose `content` is not a list), `noisy` (prints a line that is not JSON to
//! stdout, then answers).
//!
//! `--slow-start SECS` waits that long before reading anything (a server that never starts
//! in time); `--tools a,b` offers only those tools. With `PEER_LOG` set, what happened is
//! appended to that file: `started <sorted environment variable names>`, `pid <its process id>`, `call <tool>`,
//! `cancelled <tool>`, `eof`.
//!
//! Run: `cargo run --example mcp_peer`, then type JSON-RPC lines.

#![expect(
    clippy::print_stderr,
    reason = "a test program says why it fails on stderr"
)]

use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::io::AsyncWrite;

fn log(line: &str) {
    if let Some(path) = std::env::var_os("PEER_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

struct Peer {
    only: Option<Vec<String>>,
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Default::default()),
    }
}

fn all_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Echo the text back.",
            schema(
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
        ),
        Tool::new(
            "add",
            "Add two integers.",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            ),
        ),
        Tool::new(
            "slow",
            "Wait `millis` milliseconds, then answer.",
            schema(json!({"type": "object", "properties": {"millis": {"type": "integer"}}})),
        ),
        Tool::new(
            "crash",
            "Exit in the middle of the call.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "malformed",
            "Answer with a malformed result.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "noisy",
            "Print a line that is not JSON, then answer.",
            schema(json!({"type": "object"})),
        ),
        Tool::new(
            "huge",
            "Answer with `bytes` bytes of text.",
            schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}})),
        ),
    ]
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResponse::Complete(CallToolResult::success(vec![
        ContentBlock::text(t),
    ])))
}

impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = all_tools()
            .into_iter()
            .filter(|t| {
                self.only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|o| *o == t.name))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let name = request.name.to_string();
        log(&format!("call {name}"));
        match name.as_str() {
            "echo" => text(args.get("text").and_then(Value::as_str).unwrap_or("")),
            "add" => {
                let n = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
                let sum = n("a") + n("b");
                let mut r = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
                r.structured_content = Some(json!({"sum": sum}));
                Ok(CallToolResponse::Complete(r))
            }
            "slow" => {
                let ms = args.get("millis").and_then(Value::as_u64).unwrap_or(60_000);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("waited {ms} ms")),
                    _ = context.ct.cancelled() => {
                        log("cancelled slow");
                        text("cancelled")
                    }
                }
            }
            "crash" => {
                eprintln!("peer: crashing on purpose");
                std::process::exit(3);
            }
            "malformed" => text("__MALFORMED__"),
            "noisy" => text("__NOISY__ quiet now"),
            "huge" => {
                let n = args
                    .get("bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(100 << 20);
                text("x".repeat(n as usize))
            }
            other => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text(format!("no tool {other}")),
            ]))),
        }
    }
}

/// stdout, with answers to `malformed` and `noisy` rewritten on their way out.
struct Out {
    inner: tokio::io::Stdout,
    line: Vec<u8>,
    pending: Vec<u8>,
}

impl Out {
    fn rewrite(line: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(line);
        if text.contains("__MALFORMED__") {
            let id = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .unwrap_or(Value::Null);
            return format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": id, "result": {"content": "not a list"}})
            )
            .into_bytes();
        }
        if text.contains("__NOISY__") {
            let mut out = b"peer log: this line is not JSON\n".to_vec();
            out.extend_from_slice(text.replace("__NOISY__ ", "").as_bytes());
            out.push(b'\n');
            return out;
        }
        let mut out = line.to_vec();
        out.push(b'\n');
        out
    }

    fn flush_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.pending.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.pending) {
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Out {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.flush_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        for &b in buf {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                let out = Out::rewrite(&line);
                self.pending.extend_from_slice(&out);
            } else {
                self.line.push(b);
            }
        }
        let _ = self.flush_pending(cx)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.flush_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.flush_pending(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut only = None;
    let mut slow_start = 0u64;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--tools" => {
                only = args
                    .get(i + 1)
                    .map(|l| l.split(',').map(str::to_owned).collect());
                i += 1;
            }
            "--slow-start" => {
                slow_start = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(0);
                i += 1;
            }
            other => {
                eprintln!("mcp_peer: unknown argument {other}");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    let mut keys: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    keys.sort();
    log(&format!("started {}", keys.join(",")));
    log(&format!("pid {}", std::process::id()));
    tokio::time::sleep(Duration::from_secs(slow_start)).await;
    let out = Out {
        inner: tokio::io::stdout(),
        line: Vec::new(),
        pending: Vec::new(),
    };
    let served = Peer { only }.serve((tokio::io::stdin(), out)).await;
    match served {
        Ok(running) => {
            let _ = running.waiting().await;
            log("eof");
        }
        Err(e) => {
            eprintln!("mcp_peer: {e}");
            std::process::exit(1);
        }
    }
}
