//! `axocoatl mcp serve`: the repository as an MCP server over stdio, so other agents
//! (Claude Code, Codex, …) can delegate turns to its durable, budgeted agents and search
//! their history.
//!
//! Tools: `send`, `stop`, `approve` (not with `read_only`), `approvals`,
//! `history_search`, `show_turn`, `memory_search`. Each call opens the repository afresh on a blocking thread (the turn
//! engine is synchronous), so the configuration is read as it is at the call, and a call
//! never holds the repository between calls. A `send` whose request the client cancels is
//! stopped like `axocoatl stop` would.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use crate::clock;
use crate::engine::{self, Attachments, SendOptions};
use crate::error::{Next, Result, RuntimeError};
use crate::history::TurnView;
use crate::memory::AgentMemory;
use crate::provider::Cancel;
use crate::workspace::{Locator, Workspace};

/// How many turns `history_search` returns when the caller does not say.
const DEFAULT_LIMIT: usize = 20;
/// How much of a turn's request and answer `history_search` shows (`show_turn` has all).
const EXCERPT: usize = 400;

/// The tools a server offers.
pub fn tool_names(read_only: bool) -> Vec<&'static str> {
    tools(read_only)
        .into_iter()
        .map(|(name, _, _)| name)
        .collect()
}

fn tools(read_only: bool) -> Vec<(&'static str, &'static str, Value)> {
    let mut out = Vec::new();
    if !read_only {
        out.push((
            "send",
            "Send a message to an agent of this axocoatl repository: one durable, budgeted turn. Returns the turn id, its state and the agent's answer.",
            json!({"type": "object", "properties": {
                "message": {"type": "string", "description": "What to ask the agent."},
                "agent": {"type": "string", "description": "The agent id (default: the repository's default agent)."},
                "session": {"type": "string", "description": "The session (default: the repository's current session); a new name creates it."},
                "wait": {"type": "boolean", "description": "Queue behind an active turn of the session instead of failing (default false)."}
            }, "required": ["message"]}),
        ));
        out.push((
            "stop",
            "Stop an active turn by its id (or a unique prefix of at least 4 characters). Effects already made are not rolled back.",
            json!({"type": "object", "properties": {
                "turn": {"type": "string", "description": "The turn id or a unique prefix."}
            }, "required": ["turn"]}),
        ));
        out.push((
            "approve",
            "Approve (or deny) the tool calls a turn waits on (see `approvals`), and continue the turn: returns its answer as `send` does. Of decisions that arrive at once exactly one is recorded.",
            json!({"type": "object", "properties": {
                "turn": {"type": "string", "description": "The waiting turn's id or a unique prefix."},
                "call": {"type": "string", "description": "One held call's id (default: every undecided call of the turn)."},
                "deny": {"type": "boolean", "description": "Deny instead: the call does not run and the model reads why (default false)."},
                "reason": {"type": "string", "description": "Why it is denied (the model reads it)."},
                "no_run": {"type": "boolean", "description": "Record the decision only and leave the turn waiting (default false)."}
            }, "required": ["turn"]}),
        ));
    }
    out.push((
        "history_search",
        "Search the durable history of turns (requests, answers, errors, tool calls) for a literal, case-insensitive text. Returns the newest matching turns, oldest first, each with `match`: the field it matched in and a short snippet around the match.",
        json!({"type": "object", "properties": {
            "text": {"type": "string", "description": "The text to find."},
            "session": {"type": "string", "description": "Only this session (default: every session)."},
            "limit": {"type": "integer", "minimum": 1, "description": "At most this many turns, the newest (default 20)."}
        }, "required": ["text"]}),
    ));
    out.push((
        "show_turn",
        "Show one turn whole: request, context, answer, tool calls, state, usage.",
        json!({"type": "object", "properties": {
            "turn": {"type": "string", "description": "The turn id or a unique prefix."}
        }, "required": ["turn"]}),
    ));
    out.push((
        "memory_search",
        "Search an agent's semantic memory for records close in meaning to a query.",
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for, in your own words."},
            "agent": {"type": "string", "description": "The agent id (default: the repository's default agent)."},
            "session": {"type": "string", "description": "The session (default: the current session)."},
            "top_k": {"type": "integer", "minimum": 1, "description": "How many records (default: the agent's memory.recall.top_k)."}
        }, "required": ["query"]}),
    ));
    out.push((
        "approvals",
        "List the tool calls that wait for a person's approval: turn, session, agent, call id, tool, arguments, the rule that held it and since when.",
        json!({"type": "object", "properties": {
            "session": {"type": "string", "description": "Only this session (default: every session)."}
        }}),
    ));
    out
}

/// Serves the repository `locator` points at on stdin and stdout until the client closes
/// stdin. Runs a current-thread runtime of its own.
pub fn serve_stdio(locator: Locator, read_only: bool) -> Result<()> {
    // The repository and its configuration must open now: a client is told at once.
    let ws = Workspace::open(&locator)?;
    ws.config()?;
    drop(ws);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RuntimeError::io(
            "start",
            "the async runtime of `mcp serve`",
        ))?;
    let handler = Handler {
        locator: Arc::new(locator),
        read_only,
    };
    rt.block_on(async move {
        let running = handler
            .serve((
                crate::mcp::limit::RequestGuard::new(tokio::io::stdin()),
                tokio::io::stdout(),
            ))
            .await
            .map_err(|e| RuntimeError::Invalid {
                message: format!("the MCP client's handshake failed: {e}"),
                hint: crate::error::Next::RunFromMcpClient,
            })?;
        let _ = running.waiting().await;
        Ok(())
    })
}

struct Handler {
    locator: Arc<Locator>,
    read_only: bool,
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn done(result: CallToolResult) -> std::result::Result<CallToolResponse, ErrorData> {
    Ok(CallToolResponse::Complete(result))
}

/// A result whose text is `value` as JSON, also given as structured content.
fn structured(value: Value, is_error: bool) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content = Some(value);
    r
}

fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The error as a caller can act on it: the message, what it lists, and what to do next in
/// this server's terms (its tools and their arguments, never a command line).
fn describe(e: &RuntimeError) -> String {
    let mut s = match e {
        RuntimeError::Config(diags) => {
            let mut s = "the repository's configuration is not valid:".to_owned();
            for d in diags {
                s.push_str(&format!(
                    "\n  {}:{}:{}: {}",
                    d.file.display(),
                    d.line,
                    d.column,
                    d.message
                ));
            }
            s
        }
        RuntimeError::UnknownAgent { id, known } => {
            return format!("unknown agent {id:?}; the agents are: {}", known.join(", "));
        }
        other => other.to_string(),
    };
    let hints: Vec<String> = e.next().iter().filter_map(mcp_words).collect();
    if !hints.is_empty() {
        s.push_str(&format!(" (hint: {})", hints.join("; ")));
    }
    s
}

/// What to do next, as a caller of this server does it; `None` for a step only a person at
/// the repository can take (fix the configuration, repair the store), which the message
/// already names.
fn mcp_words(next: &Next) -> Option<String> {
    Some(match next {
        Next::Say { text } => text.clone(),
        Next::StopOrWait { turn, .. } => {
            let stop = turn
                .as_ref()
                .map(|t| format!("call `stop` with turn {t:?}, or "))
                .unwrap_or_default();
            format!(
                "{stop}call again with \"wait\": true to queue behind it, or use another session"
            )
        }
        Next::ListTurns | Next::GiveTurnId | Next::ListSessionTurns { .. } => {
            "`history_search` finds turns and their ids".into()
        }
        Next::RefreshTurns => {
            "only an active turn can be stopped; `show_turn` shows its state".into()
        }
        Next::ListModels { known } => format!("known models: {}", known.join(", ")),
        Next::Approve { turn } => {
            format!("`approve` with turn {turn:?} answers its held calls (\"deny\": true to deny)")
        }
        Next::ApproveOrStop { turn } => format!(
            "`approve` with turn {turn:?} answers it, or `stop` stops it; `approvals` lists what waits"
        ),
        Next::ListApprovals => "`approvals` lists what waits for approval".into(),
        _ => return None,
    })
}

fn string_arg(args: &Map<String, Value>, key: &str) -> std::result::Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

fn required(args: &Map<String, Value>, key: &str) -> std::result::Result<String, String> {
    match string_arg(args, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(format!("`{key}` is required and must not be empty")),
    }
}

fn count_arg(args: &Map<String, Value>, key: &str) -> std::result::Result<Option<usize>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n as usize)),
            _ => Err(format!("`{key}` must be a positive integer, not {v}")),
        },
    }
}

/// `s` cut to about `max` bytes, with `…`.
fn excerpt(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn summary(t: &TurnView) -> Value {
    json!({
        "turn": t.turn,
        "session": t.session,
        "agent": t.agent,
        "state": t.state.as_str(),
        "superseded": t.superseded,
        "started_at": clock::rfc3339(t.started_at),
        "request": excerpt(&t.request, EXCERPT),
        "answer": excerpt(&t.output, EXCERPT),
        "error": t.error,
    })
}

impl Handler {
    fn send(&self, args: &Map<String, Value>, cancel: &Cancel) -> CallToolResult {
        let parsed = (|| {
            let message = required(args, "message")?;
            let agent = string_arg(args, "agent")?;
            let session = string_arg(args, "session")?;
            let wait = match args.get("wait") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => return Err(format!("`wait` must be true or false, not {other}")),
            };
            Ok((message, agent, session, wait))
        })();
        let (message, agent, session, wait) = match parsed {
            Ok(x) => x,
            Err(why) => return failure(why),
        };
        let run = || -> Result<engine::TurnOutcome> {
            let ws = Workspace::open(&self.locator)?;
            let session = ws.session_or_head(session.as_deref())?;
            let opts = SendOptions {
                session,
                agent,
                message,
                inline_context: Vec::new(),
                attachments: Attachments::Selection,
                attach_files: Vec::new(),
                retry_of: None,
                wait,
                origin: None,
                overrides: Default::default(),
                schema: None,
                schema_retries: None,
                resume: None,
                ask_at_once: false,
                workdir: None,
            };
            engine::send(&ws, opts, cancel, &mut |_| {})
        };
        turn_result(run())
    }

    fn approvals(&self, args: &Map<String, Value>) -> CallToolResult {
        let session = match string_arg(args, "session") {
            Ok(s) => s,
            Err(why) => return failure(why),
        };
        let run = || -> Result<Value> {
            let ws = Workspace::open(&self.locator)?;
            let session = session.map(|s| ws.ledger_name(&s)).transpose()?;
            let calls: Vec<Value> = crate::approvals::list(&ws, session.as_deref())?
                .iter()
                .flat_map(|t| {
                    t.calls.iter().map(|c| {
                        json!({
                            "turn": t.turn,
                            "session": ws.shown_session(&t.session),
                            "agent": t.agent,
                            "call_id": c.call_id,
                            "tool": c.tool,
                            "arguments": c.arguments,
                            "rule": c.rule,
                            "requested_at": clock::rfc3339(c.requested_at),
                            "expires_at": c.expires_at.map(clock::rfc3339),
                            "decision": c.decision,
                        })
                    })
                })
                .collect();
            Ok(json!({ "waiting": calls }))
        };
        match run() {
            Ok(v) => structured(v, false),
            Err(e) => failure(describe(&e)),
        }
    }

    fn approve(&self, args: &Map<String, Value>, cancel: &Cancel) -> CallToolResult {
        let flag = |key: &str| match args.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("`{key}` must be true or false, not {other}")),
        };
        let parsed = (|| {
            Ok::<_, String>((
                required(args, "turn")?,
                string_arg(args, "call")?,
                flag("deny")?,
                string_arg(args, "reason")?,
                flag("no_run")?,
            ))
        })();
        let (turn, call, deny, reason, no_run) = match parsed {
            Ok(x) => x,
            Err(why) => return failure(why),
        };
        let decision = if deny {
            axocoatl_store::ledger::record::Decision::Denied
        } else {
            axocoatl_store::ledger::record::Decision::Approved
        };
        let ws = match Workspace::open(&self.locator) {
            Ok(ws) => ws,
            Err(e) => return failure(describe(&e)),
        };
        let by = crate::approval::answered_by("mcp serve");
        let d = match crate::approvals::decide(&ws, &turn, call.as_deref(), decision, reason, by) {
            Ok(d) => d,
            Err(e) => return failure(describe(&e)),
        };
        if no_run || !d.undecided.is_empty() {
            let names = |v: &[(String, String)]| -> Vec<String> {
                v.iter().map(|(c, t)| format!("{c} ({t})")).collect()
            };
            return structured(
                json!({
                    "turn": d.turn,
                    "session": ws.shown_session(&d.session),
                    "decision": d.decision.as_str(),
                    "decided": names(&d.decided),
                    "undecided": names(&d.undecided),
                    "continued": false,
                }),
                false,
            );
        }
        let opts = SendOptions {
            session: d.session.clone(),
            agent: Some(d.agent.clone()),
            resume: Some(d.turn.clone()),
            ..SendOptions::default()
        };
        turn_result(engine::send(&ws, opts, cancel, &mut |_| {}))
    }
}

/// A turn's result as `send` and `approve` return it: its answer, or that it waits.
fn turn_result(result: Result<engine::TurnOutcome>) -> CallToolResult {
    {
        match result {
            Err(RuntimeError::Waiting {
                turn,
                session,
                calls,
            }) => structured(
                json!({
                    "turn": turn,
                    "session": session,
                    "state": "waiting",
                    "waiting_for": calls,
                    "hint": "a person approves or denies these calls: `approve` with this turn (\"deny\": true to deny)",
                }),
                false,
            ),
            Ok(o) => structured(
                json!({
                    "turn": o.turn,
                    "session": o.session,
                    "agent": o.agent,
                    "state": o.state.as_str(),
                    "answer": o.output,
                    "error": o.error,
                    "usage": {
                        "prompt_tokens": o.usage.prompt_tokens,
                        "completion_tokens": o.usage.completion_tokens,
                        "calls": o.usage.calls,
                    },
                }),
                o.state != axocoatl_store::ledger::record::TurnState::Completed,
            ),
            Err(e) => failure(describe(&e)),
        }
    }
}

impl Handler {
    fn stop(&self, args: &Map<String, Value>) -> CallToolResult {
        let turn = match required(args, "turn") {
            Ok(t) => t,
            Err(why) => return failure(why),
        };
        let run = || -> Result<Value> {
            let ws = Workspace::open(&self.locator)?;
            let accepted = crate::control::stop(&ws, &turn)?;
            Ok(json!({"turn": accepted.turn, "session": accepted.session, "stop_requested": true}))
        };
        match run() {
            Ok(v) => structured(v, false),
            Err(e) => failure(describe(&e)),
        }
    }

    fn history_search(&self, args: &Map<String, Value>) -> CallToolResult {
        let parsed = (|| {
            Ok::<_, String>((
                required(args, "text")?,
                string_arg(args, "session")?,
                count_arg(args, "limit")?.unwrap_or(DEFAULT_LIMIT),
            ))
        })();
        let (text, session, limit) = match parsed {
            Ok(x) => x,
            Err(why) => return failure(why),
        };
        let run = || -> Result<Value> {
            let ws = Workspace::open(&self.locator)?;
            let re = crate::search::matcher(&text)?;
            let listing = crate::query::history(
                ws.repo(),
                session.as_deref(),
                Some((&text, &re)),
                Some(limit),
            )?;
            let problems: Vec<String> = listing.problems.iter().map(|p| p.to_string()).collect();
            Ok(json!({
                "turns": listing
                    .turns
                    .iter()
                    .zip(&listing.hits)
                    .map(|(t, hit)| {
                        let mut v = summary(t);
                        v["match"] = serde_json::to_value(hit).unwrap_or(Value::Null);
                        v
                    })
                    .collect::<Vec<_>>(),
                "matched": listing.matched,
                "problems": problems,
            }))
        };
        match run() {
            Ok(v) => structured(v, false),
            Err(e) => failure(describe(&e)),
        }
    }

    fn show_turn(&self, args: &Map<String, Value>) -> CallToolResult {
        let turn = match required(args, "turn") {
            Ok(t) => t,
            Err(why) => return failure(why),
        };
        let run = || -> Result<Value> {
            let ws = Workspace::open(&self.locator)?;
            let t = crate::query::show(ws.repo(), &turn)?;
            let mut v = serde_json::to_value(&t).unwrap_or(Value::Null);
            v["started_at"] = clock::rfc3339(t.started_at).into();
            v["ended_at"] = t.ended_at.map(clock::rfc3339).into();
            Ok(v)
        };
        match run() {
            Ok(v) => structured(v, false),
            Err(e) => failure(describe(&e)),
        }
    }

    fn memory_search(&self, args: &Map<String, Value>) -> CallToolResult {
        let parsed = (|| {
            Ok::<_, String>((
                required(args, "query")?,
                string_arg(args, "agent")?,
                string_arg(args, "session")?,
                count_arg(args, "top_k")?,
            ))
        })();
        let (query, agent, session, top_k) = match parsed {
            Ok(x) => x,
            Err(why) => return failure(why),
        };
        let run = || -> Result<Value> {
            let ws = Workspace::open(&self.locator)?;
            let (memory, agent) = AgentMemory::resolve(&ws, session.as_deref(), agent.as_deref())?;
            let top_k = top_k.unwrap_or(agent.memory.recall.top_k as usize).max(1);
            let mut store = memory.semantic(ws.repo())?;
            let hits = store.search(&query, top_k)?;
            let records: Vec<Value> = hits
                .iter()
                .map(|h| {
                    json!({
                        "score": h.score,
                        "text": h.text,
                        "kind": h.source.kind.as_str(),
                        "turn": h.source.turn,
                        "at": clock::rfc3339(h.source.at),
                    })
                })
                .collect();
            Ok(json!({"agent": memory.id, "records": records}))
        };
        match run() {
            Ok(v) => structured(v, false),
            Err(e) => failure(describe(&e)),
        }
    }

    fn call(&self, name: &str, args: &Map<String, Value>, cancel: &Cancel) -> CallToolResult {
        match name {
            "send" | "stop" | "approve" if self.read_only => failure(format!(
                "`{name}` is refused: this server runs with --read-only (it offers history_search, show_turn, memory_search and approvals)"
            )),
            "send" => self.send(args, cancel),
            "stop" => self.stop(args),
            "approve" => self.approve(args, cancel),
            "approvals" => self.approvals(args),
            "history_search" => self.history_search(args),
            "show_turn" => self.show_turn(args),
            "memory_search" => self.memory_search(args),
            other => failure(format!(
                "there is no tool {other:?}; the tools are: {}",
                tool_names(self.read_only).join(", ")
            )),
        }
    }
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("axocoatl", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "axocoatl: durable, budgeted LLM agents with a searchable history. `send` runs one turn of an agent and returns its answer and turn id; `history_search` and `show_turn` read past turns.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        let tools = tools(self.read_only)
            .into_iter()
            .map(|(name, description, input)| Tool::new(name, description, schema(input)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if name == crate::mcp::limit::OVERSIZED_CALL {
            return Err(ErrorData::invalid_request(
                format!(
                    "the request is longer than {} MiB, the most one MCP message may be: it was not read",
                    crate::mcp::limit::MESSAGE_LIMIT >> 20
                ),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let cancel = Cancel::new();
        let handler = Handler {
            locator: self.locator.clone(),
            read_only: self.read_only,
        };
        let for_call = cancel.clone();
        let mut call = tokio::task::spawn_blocking(move || handler.call(&name, &args, &for_call));
        // A cancelled request stops its turn; the call still ends through the engine, which
        // records the turn as stopped.
        let joined = tokio::select! {
            r = &mut call => r,
            _ = context.ct.cancelled() => {
                cancel.cancel();
                call.await
            }
        };
        match joined {
            Ok(result) => done(result),
            Err(e) => done(failure(format!("the call failed: {e}"))),
        }
    }
}
