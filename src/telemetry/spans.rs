//! The spans of one turn, built from the turn as [`crate::fold`] folds its ledger records: a turn traced as it ends and
//! the same turn exported later (`export --format otlp`) give the same trace, span for
//! span (the ids derive from the turn id and the records' sequence numbers).
//!
//! The shape follows OpenTelemetry's GenAI semantic conventions: the turn is an
//! `invoke_agent` span; under it each model call is a `chat` span (client), each tool call
//! an `execute_tool` span and each subtask of a coordinator an `invoke_agent` span of its
//! worker, with that worker's calls under it. Every span carries `axocoatl.turn.id`, so a
//! trace leads back to `axocoatl show`.
//!
//! The ledger records when a model call ended, not when it started: a call starts when its
//! agent's previous step ended (the turn's begin, the subtask's start, the previous call or
//! tool result), which is when the engine sends it.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{Millis, Usage, UsageDetail};

use crate::fold::{ApprovalView, CallView, SubtaskView, ToolEvent, TurnView, ViewState};

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Strs(Vec<String>),
}

/// A span's attributes, in the order they were added.
pub type Attributes = Vec<(&'static str, Value)>;

/// OTLP's span kinds that turns use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Internal,
    Client,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start: Millis,
    pub end: Millis,
    pub attributes: Attributes,
    /// Set: the span's status is ERROR with this message.
    pub error: Option<String>,
    /// The sequence number of the ledger record it stems from (0: the turn): siblings that
    /// start in the same millisecond are in this order.
    pub seq: u64,
}

/// What spans may carry beyond ids, names, times and counts.
#[derive(Clone, Debug, Default)]
pub struct Content {
    /// Requests, answers, tool arguments and results go into the spans.
    pub capture: bool,
    /// Values replaced with `<redacted>` wherever content appears (the providers' keys).
    pub redact: Vec<String>,
    /// The provider system (`ollama`, `openai`…) of each configured provider name.
    pub systems: HashMap<String, String>,
}

/// The most bytes of one content attribute (receivers cut or refuse longer ones).
pub const CONTENT_LIMIT: usize = 32 * 1024;

impl Content {
    fn text(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for key in &self.redact {
            out = crate::provider::redact::redact(&out, key);
        }
        if out.len() > CONTENT_LIMIT {
            let mut cut = CONTENT_LIMIT;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str("…[cut]");
        }
        out
    }

    fn messages(&self, role: &str, text: &str, finish: Option<&str>) -> Value {
        let mut m = serde_json::json!({
            "role": role,
            "parts": [{"type": "text", "content": self.text(text)}],
        });
        if let Some(f) = finish {
            m["finish_reason"] = serde_json::Value::String(f.to_owned());
        }
        Value::Str(serde_json::Value::Array(vec![m]).to_string())
    }
}

/// The trace id of a turn.
pub fn trace_id(turn: &str) -> [u8; 16] {
    let h = blake3::hash(format!("axocoatl trace\0{turn}").as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&h.as_bytes()[..16]);
    id[15] |= 1;
    id
}

/// The id of the span a record (by sequence number; 0: the turn itself) opens.
pub fn span_id(turn: &str, seq: u64) -> [u8; 8] {
    let h = blake3::hash(format!("axocoatl span\0{turn}\0{seq}").as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&h.as_bytes()[..8]);
    id[7] |= 1;
    id
}

/// Prompt tokens a provider's cache wrote, read (OpenTelemetry's GenAI conventions), and
/// what calls cost in US dollars (axocoatl's own: the conventions have no cost).
const CACHE_WRITE_ATTR: &str = "gen_ai.usage.cache_creation.input_tokens";
const CACHE_READ_ATTR: &str = "gen_ai.usage.cache_read.input_tokens";
const COST_ATTR: &str = "axocoatl.cost.usd";
/// The model calls a turn or subtask made, as its usage counts them: a call cut short by a
/// stop counts, though no record (so no `chat` span) says what it used.
const CALLS_ATTR: &str = "axocoatl.usage.model_calls";

/// The cache and cost attributes of a span summing `d`; no cost when some call had none.
fn detail_attrs(attrs: &mut Attributes, usage: &Usage, d: &UsageDetail) {
    attrs.push((CACHE_WRITE_ATTR, Value::Int(d.cache_write_tokens as i64)));
    attrs.push((CACHE_READ_ATTR, Value::Int(d.cache_read_tokens as i64)));
    if d.cost_complete(usage) {
        attrs.push((
            COST_ATTR,
            Value::Double(d.cost_nanos as f64 / crate::cost::NANOS_PER_USD),
        ));
    }
}

/// The spans of turn `t` as the fold made it; `None` while it has no terminal record. The
/// turn's span comes first.
pub fn turn_spans(t: &TurnView, content: &Content) -> Option<Vec<Span>> {
    t.end_seq?;
    let ended_at = t.ended_at?;
    let turn = t.turn.as_str();
    let trace = trace_id(turn);
    let root = span_id(turn, 0);
    let common = |attrs: &mut Attributes| {
        attrs.push(("axocoatl.turn.id", Value::Str(turn.to_owned())));
        attrs.push(("axocoatl.session", Value::Str(t.session.clone())));
    };
    let cx = TurnSpans {
        turn,
        trace,
        root,
        content,
        common: &common,
    };
    let parent =
        |subtask: Option<usize>| subtask.map_or(root, |i| span_id(turn, t.subtasks[i].seq));
    let mut spans = vec![root_span(t, ended_at, content, trace, root)];
    for c in &t.calls {
        spans.push(chat_span(&cx, c, parent(c.subtask)));
    }
    for x in &t.tools {
        spans.push(tool_span(&cx, x, ended_at, parent(x.subtask)));
    }
    let tasks: HashMap<&str, &str> = t
        .plan
        .iter()
        .flat_map(|p| p.subtasks.iter().map(|s| (s.id.as_str(), s.task.as_str())))
        .collect();
    for s in &t.subtasks {
        let task = tasks.get(s.subtask.as_str()).copied();
        spans.push(subtask_span(&cx, s, task, ended_at));
    }
    for a in &t.approvals {
        spans.push(approval_span(&cx, a, ended_at));
    }
    // The turn first, then in the order they started (the ledger's order breaks ties).
    spans[1..].sort_by_key(|s| (s.start, s.seq));
    Some(spans)
}

/// The wait for a person's decision on a held call: from its request to its decision (or
/// the turn's end, when none came).
fn approval_span(cx: &TurnSpans, a: &ApprovalView, turn_end: Millis) -> Span {
    let mut attrs = vec![
        ("gen_ai.tool.name", Value::Str(a.tool.clone())),
        ("gen_ai.tool.call.id", Value::Str(a.call_id.clone())),
        ("gen_ai.agent.name", Value::Str(a.agent.clone())),
        ("axocoatl.approval.rule", Value::Str(a.rule.clone())),
    ];
    if let Some(decision) = &a.decision {
        attrs.push(("axocoatl.approval.decision", Value::Str(decision.clone())));
        if let Some(by) = &a.by {
            attrs.push(("axocoatl.approval.by", Value::Str(by.clone())));
        }
        if let Some(reason) = a.reason.as_deref().filter(|_| cx.content.capture) {
            attrs.push((
                "axocoatl.approval.reason",
                Value::Str(cx.content.text(reason)),
            ));
        }
    }
    if cx.content.capture {
        attrs.push((
            "gen_ai.tool.call.arguments",
            Value::Str(cx.content.text(&a.arguments)),
        ));
    }
    (cx.common)(&mut attrs);
    let error = match a.decision.as_deref() {
        None => Some("no decision came before the turn ended".to_owned()),
        Some("expired") => Some("no decision came within approval_timeout".to_owned()),
        Some(_) => None,
    };
    let end = a.decided_at.unwrap_or(turn_end);
    Span {
        trace_id: cx.trace,
        span_id: span_id(cx.turn, a.seq),
        parent: Some(cx.root),
        name: format!("await_approval {}", a.tool),
        kind: Kind::Internal,
        start: a.requested_at,
        end: end.max(a.requested_at),
        attributes: attrs,
        error,
        seq: a.seq,
    }
}

/// The span of subtask `s`, which ran `task`: it ends with the turn (`turn_end`) if it did
/// not end.
fn subtask_span(cx: &TurnSpans, s: &SubtaskView, task: Option<&str>, turn_end: Millis) -> Span {
    let content = cx.content;
    let ended = s.ended_at.is_some() && s.state != ViewState::Interrupted;
    let state = if ended {
        s.state.as_str()
    } else {
        "interrupted"
    };
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("invoke_agent".into())),
        ("gen_ai.agent.name", Value::Str(s.worker.clone())),
        ("axocoatl.subtask.id", Value::Str(s.subtask.clone())),
        ("axocoatl.subtask.state", Value::Str(state.into())),
    ];
    if let Some(u) = s.usage {
        attrs.push((
            "gen_ai.usage.input_tokens",
            Value::Int(u.prompt_tokens as i64),
        ));
        attrs.push((
            "gen_ai.usage.output_tokens",
            Value::Int(u.completion_tokens as i64),
        ));
        attrs.push((CALLS_ATTR, Value::Int(u.calls as i64)));
        if let Some(d) = &s.detail {
            detail_attrs(&mut attrs, &u, d);
        }
    }
    if content.capture {
        if let Some(task) = task {
            attrs.push((
                "gen_ai.input.messages",
                content.messages("user", task, None),
            ));
        }
        if !s.output.is_empty() {
            attrs.push((
                "gen_ai.output.messages",
                content.messages("assistant", &s.output, None),
            ));
        }
    }
    (cx.common)(&mut attrs);
    let error = if !ended {
        Some("the subtask did not end".to_owned())
    } else if s.state == ViewState::Failed {
        Some(s.error.as_deref().map_or_else(
            || "the subtask failed".to_owned(),
            |e| content_or(content, e, "the subtask failed"),
        ))
    } else {
        None
    };
    if error.is_some() {
        attrs.push(("error.type", Value::Str(state.into())));
    }
    Span {
        trace_id: cx.trace,
        span_id: span_id(cx.turn, s.seq),
        parent: Some(cx.root),
        name: format!("invoke_agent {}", s.worker),
        kind: Kind::Internal,
        start: s.started_at,
        end: s.ended_at.unwrap_or(turn_end),
        attributes: attrs,
        error,
        seq: s.seq,
    }
}

/// A model call's span: `chat {model}`, under `parent`.
fn chat_span(cx: &TurnSpans, c: &CallView, parent: [u8; 8]) -> Span {
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("chat".into())),
        (
            "gen_ai.provider.name",
            Value::Str(
                cx.content
                    .systems
                    .get(&c.provider)
                    .cloned()
                    .unwrap_or_else(|| c.provider.clone()),
            ),
        ),
        ("gen_ai.request.model", Value::Str(c.model.clone())),
        ("gen_ai.agent.name", Value::Str(c.agent.clone())),
        ("axocoatl.provider", Value::Str(c.provider.clone())),
    ];
    if let Some(f) = &c.finish_reason {
        attrs.push((
            "gen_ai.response.finish_reasons",
            Value::Strs(vec![f.clone()]),
        ));
    }
    if let Some(n) = c.prompt_tokens {
        attrs.push(("gen_ai.usage.input_tokens", Value::Int(n as i64)));
    }
    if let Some(n) = c.completion_tokens {
        attrs.push(("gen_ai.usage.output_tokens", Value::Int(n as i64)));
    }
    if let Some(n) = c.cache_write_tokens {
        attrs.push((CACHE_WRITE_ATTR, Value::Int(n as i64)));
    }
    if let Some(n) = c.cache_read_tokens {
        attrs.push((CACHE_READ_ATTR, Value::Int(n as i64)));
    }
    if let Some(n) = c.cost_nanos {
        attrs.push((
            COST_ATTR,
            Value::Double(n as f64 / crate::cost::NANOS_PER_USD),
        ));
    }
    (cx.common)(&mut attrs);
    Span {
        trace_id: cx.trace,
        span_id: span_id(cx.turn, c.seq),
        parent: Some(parent),
        name: format!("chat {}", c.model),
        kind: Kind::Client,
        start: c.started_at,
        end: c.at,
        attributes: attrs,
        error: None,
        seq: c.seq,
    }
}

/// What the spans of one turn share.
struct TurnSpans<'a> {
    turn: &'a str,
    trace: [u8; 16],
    root: [u8; 8],
    content: &'a Content,
    /// Adds the attributes every span of the turn has.
    common: &'a dyn Fn(&mut Attributes),
}

/// An error message with the tool's or model's own words only when content is captured
/// (they may quote what the agent read).
fn content_or(content: &Content, text: &str, generic: &str) -> String {
    if content.capture {
        content.text(text)
    } else {
        generic.to_owned()
    }
}

fn root_span(
    t: &TurnView,
    ended_at: Millis,
    content: &Content,
    trace: [u8; 16],
    root: [u8; 8],
) -> Span {
    let usage = t.usage.unwrap_or(Usage::ZERO);
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("invoke_agent".into())),
        ("gen_ai.agent.name", Value::Str(t.agent.clone())),
        ("gen_ai.conversation.id", Value::Str(t.session.clone())),
        ("axocoatl.turn.id", Value::Str(t.turn.clone())),
        ("axocoatl.session", Value::Str(t.session.clone())),
        ("axocoatl.turn.state", Value::Str(t.state.as_str().into())),
        ("axocoatl.turn.mode", Value::Str(t.mode.clone())),
        (
            "gen_ai.usage.input_tokens",
            Value::Int(usage.prompt_tokens as i64),
        ),
        (
            "gen_ai.usage.output_tokens",
            Value::Int(usage.completion_tokens as i64),
        ),
        (CALLS_ATTR, Value::Int(usage.calls as i64)),
    ];
    // Cache and cost when the turn recorded them (a turn from before they were did not).
    if t.detail.calls > 0 {
        detail_attrs(&mut attrs, &usage, &t.detail);
    }
    if let Some(r) = &t.retry_of {
        attrs.push(("axocoatl.turn.retry_of", Value::Str(r.clone())));
    }
    if let Some(o) = &t.origin {
        attrs.push(("axocoatl.automation", Value::Str(o.automation.clone())));
    }
    if content.capture {
        attrs.push((
            "gen_ai.input.messages",
            content.messages("user", &t.request, None),
        ));
        if !t.output.is_empty() {
            attrs.push((
                "gen_ai.output.messages",
                content.messages("assistant", &t.output, None),
            ));
        }
    }
    let error = match t.state {
        ViewState::Failed => Some(
            t.error
                .as_deref()
                .map_or_else(|| "the turn failed".to_owned(), |e| content.text(e)),
        ),
        ViewState::Interrupted => Some("the process running the turn ended before it".to_owned()),
        ViewState::Completed | ViewState::Stopped | ViewState::Running | ViewState::Waiting => None,
    };
    if error.is_some() {
        attrs.push(("error.type", Value::Str(t.state.as_str().into())));
    }
    Span {
        trace_id: trace,
        span_id: root,
        parent: None,
        name: format!("invoke_agent {}", t.agent),
        kind: Kind::Internal,
        start: t.started_at,
        end: ended_at.max(t.started_at),
        seq: 0,
        attributes: attrs,
        error,
    }
}

/// A tool call's span, under `parent`: it ends with the turn (`turn_end`), as an error,
/// when no result was recorded.
fn tool_span(cx: &TurnSpans, x: &ToolEvent, turn_end: Millis, parent: [u8; 8]) -> Span {
    let content = cx.content;
    let result = x
        .ended_at
        .map(|_| (x.output.as_deref().unwrap_or(""), x.is_error, x.exit_code));
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("execute_tool".into())),
        ("gen_ai.tool.name", Value::Str(x.name.clone())),
        ("gen_ai.tool.call.id", Value::Str(x.call_id.clone())),
        ("gen_ai.tool.type", Value::Str("function".into())),
        ("gen_ai.agent.name", Value::Str(x.agent.clone())),
    ];
    if let Some((_, _, Some(code))) = result {
        attrs.push(("axocoatl.tool.exit_code", Value::Int(i64::from(code))));
    }
    if content.capture {
        attrs.push((
            "gen_ai.tool.call.arguments",
            Value::Str(content.text(&x.arguments)),
        ));
        if let Some((output, _, _)) = result {
            attrs.push(("gen_ai.tool.call.result", Value::Str(content.text(output))));
        }
    }
    (cx.common)(&mut attrs);
    let error = match result {
        None => Some("no result was recorded".to_owned()),
        Some((_, true, Some(code))) => Some(format!("the command exited with {code}")),
        Some((output, true, None)) => {
            Some(content_or(content, output, "the tool reported an error"))
        }
        Some((_, false, _)) => None,
    };
    if error.is_some() {
        attrs.push(("error.type", Value::Str("tool_error".into())));
    }
    let end = x.ended_at.unwrap_or(turn_end);
    Span {
        trace_id: cx.trace,
        span_id: span_id(cx.turn, x.seq),
        parent: Some(parent),
        name: format!("execute_tool {}", x.name),
        kind: Kind::Internal,
        start: x.started_at,
        end: end.max(x.started_at),
        attributes: attrs,
        error,
        seq: x.seq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axocoatl_store::ledger::record::{
        ApprovalDecided, ApprovalRequested, Bounded, Decision, ModelCall, Record, SubtaskEnded,
        SubtaskStarted, ToolFinished, ToolStarted, TurnBegun, TurnEnded, TurnState,
    };

    fn bounded(s: &str) -> Bounded {
        Bounded {
            inline: s.into(),
            object: None,
            len: s.len() as u64,
        }
    }

    fn begun(at: Millis) -> Record {
        Record::TurnBegun(TurnBegun {
            turn: "t1".into(),
            session: "main".into(),
            agent: "lead".into(),
            mode: "single".into(),
            request: "key sk-0123456789 please".into(),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at,
            schema: None,
        })
    }

    fn ended(at: Millis) -> Record {
        Record::TurnEnded(TurnEnded {
            turn: "t1".into(),
            session: "main".into(),
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at,
        })
    }

    fn call(agent: &str, at: Millis) -> Record {
        Record::ModelCall(ModelCall {
            turn: "t1".into(),
            agent: agent.into(),
            provider: "llm".into(),
            model: format!("{agent}-m"),
            reserved_tokens: 1,
            prompt_tokens: Some(3),
            completion_tokens: None,
            finish_reason: None,
            at,
        })
    }

    fn started(subtask: &str, worker: &str, at: Millis) -> Record {
        Record::SubtaskStarted(SubtaskStarted {
            turn: "t1".into(),
            subtask: subtask.into(),
            worker: worker.into(),
            at,
        })
    }

    fn sub_ended(subtask: &str, worker: &str, at: Millis) -> Record {
        Record::SubtaskEnded(SubtaskEnded {
            turn: "t1".into(),
            session: "main".into(),
            coordinator: "lead".into(),
            subtask: subtask.into(),
            worker: worker.into(),
            state: TurnState::Completed,
            error: None,
            output: bounded("out"),
            usage: Usage::ZERO,
            at,
        })
    }

    fn spans_of(records: &[Record], content: &Content) -> Option<Vec<Span>> {
        let mut all = records.iter().cloned().zip(1u64..);
        let (first, seq) = all.next()?;
        let mut t = TurnView::start(first, Default::default(), seq).ok()?;
        for (r, seq) in all {
            t.fold(seq, r);
        }
        turn_spans(&t, content)
    }

    fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
        spans.iter().filter(|s| s.name == name).collect()
    }

    #[test]
    fn a_held_call_is_an_await_approval_span_from_request_to_decision() {
        let request = |call: &str, at: Millis| {
            Record::ApprovalRequested(ApprovalRequested {
                turn: "t1".into(),
                session: "main".into(),
                agent: "lead".into(),
                call_id: call.into(),
                tool: "run_command".into(),
                arguments: bounded("{\"command\":\"make\"}"),
                rule: "run_command".into(),
                state: "ab".repeat(32),
                expires_at: None,
                pid: 1,
                at,
            })
        };
        let decided = Record::ApprovalDecided(ApprovalDecided {
            turn: "t1".into(),
            session: "main".into(),
            call_id: "c1".into(),
            decision: Decision::Denied,
            reason: Some("not now".into()),
            by: "alice via approve".into(),
            pid: 2,
            at: 40,
        });
        let records = [
            begun(0),
            call("lead", 10),
            request("c1", 11),
            request("c2", 11),
            decided,
            ended(60),
        ];
        let spans = spans_of(&records, &Content::default()).expect("ended");
        let held = named(&spans, "await_approval run_command");
        let times: Vec<(Millis, Millis, bool)> = held
            .iter()
            .map(|s| (s.start, s.end, s.error.is_some()))
            .collect();
        // The first was denied at 40; the second had no decision before the turn ended.
        assert_eq!(times, [(11, 40, false), (11, 60, true)]);
        assert!(held[0]
            .attributes
            .contains(&("axocoatl.approval.decision", Value::Str("denied".into()))));
        assert!(held[0].attributes.contains(&(
            "axocoatl.approval.by",
            Value::Str("alice via approve".into())
        )));
        assert_eq!(held[0].parent, Some(spans[0].span_id));
        // A reason is a person's words: only with content capture.
        let has_reason = |spans: &[Span]| {
            named(spans, "await_approval run_command")[0]
                .attributes
                .iter()
                .any(|(k, _)| *k == "axocoatl.approval.reason")
        };
        assert!(!has_reason(&spans));
        let captured = Content {
            capture: true,
            ..Content::default()
        };
        assert!(has_reason(&spans_of(&records, &captured).expect("ended")));
    }

    #[test]
    fn a_turn_that_has_not_ended_has_no_trace_yet() {
        assert!(spans_of(&[begun(0), call("lead", 5)], &Content::default()).is_none());
    }

    #[test]
    fn calls_start_when_their_agent_s_previous_step_ended_and_nest_under_their_subtask() {
        // Two subtasks of two workers at once, then the coordinator's answer.
        let records = [
            begun(0),
            call("lead", 10),
            started("a", "w1", 11),
            started("b", "w2", 12),
            call("w1", 20),
            call("w2", 25),
            call("w1", 30),
            sub_ended("a", "w1", 31),
            sub_ended("b", "w2", 33),
            call("lead", 50),
            ended(51),
        ];
        let spans = spans_of(&records, &Content::default()).expect("ended");
        let root = &spans[0];
        assert_eq!((root.start, root.end, root.parent), (0, 51, None));
        let sub = |id: &str| {
            spans
                .iter()
                .find(|s| {
                    s.attributes
                        .contains(&("axocoatl.subtask.id", Value::Str(id.into())))
                })
                .expect("subtask span")
        };
        assert_eq!((sub("a").start, sub("a").end), (11, 31));
        let w1: Vec<(Millis, Millis, Option<[u8; 8]>)> = named(&spans, "chat w1-m")
            .iter()
            .map(|s| (s.start, s.end, s.parent))
            .collect();
        assert_eq!(
            w1,
            [
                (11, 20, Some(sub("a").span_id)),
                (20, 30, Some(sub("a").span_id))
            ]
        );
        let w2 = named(&spans, "chat w2-m");
        assert_eq!((w2[0].start, w2[0].parent), (12, Some(sub("b").span_id)));
        // The coordinator's answer waited for both subtasks.
        let lead: Vec<(Millis, Millis)> = named(&spans, "chat lead-m")
            .iter()
            .map(|s| (s.start, s.end))
            .collect();
        assert_eq!(lead, [(0, 10), (33, 50)]);
        assert!(spans.iter().all(|s| s.trace_id == root.trace_id));
    }

    #[test]
    fn a_tool_without_a_result_ends_with_the_turn_as_an_error() {
        let records = [
            begun(0),
            call("lead", 5),
            Record::ToolStarted(ToolStarted {
                turn: "t1".into(),
                agent: "lead".into(),
                call_id: "c1".into(),
                name: "run_command".into(),
                arguments: bounded("{}"),
                at: 6,
            }),
            ended(40),
        ];
        let spans = spans_of(&records, &Content::default()).expect("ended");
        let tool = named(&spans, "execute_tool run_command")[0];
        assert_eq!((tool.start, tool.end), (6, 40));
        assert_eq!(tool.error.as_deref(), Some("no result was recorded"));
    }

    #[test]
    fn content_is_captured_only_when_asked_and_keys_are_redacted() {
        let records = [
            begun(0),
            call("lead", 5),
            Record::ToolStarted(ToolStarted {
                turn: "t1".into(),
                agent: "lead".into(),
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: bounded("{\"path\":\"sk-0123456789\"}"),
                at: 6,
            }),
            Record::ToolFinished(ToolFinished {
                turn: "t1".into(),
                agent: "lead".into(),
                call_id: "c1".into(),
                name: "read_file".into(),
                is_error: true,
                output: bounded("no file sk-0123456789"),
                exit_code: None,
                duration_ms: 1,
                at: 7,
            }),
            ended(9),
        ];
        let off = spans_of(&records, &Content::default()).expect("ended");
        let text = format!("{off:?}");
        assert!(
            !text.contains("sk-0123456789") && !text.contains("please"),
            "{text}"
        );
        let on = Content {
            capture: true,
            redact: vec!["sk-0123456789".into()],
            ..Content::default()
        };
        let spans = spans_of(&records, &on).expect("ended");
        let text = format!("{spans:?}");
        assert!(!text.contains("sk-0123456789"), "{text}");
        assert!(text.contains("key <redacted> please"), "{text}");
        let tool = named(&spans, "execute_tool read_file")[0];
        assert_eq!(tool.error.as_deref(), Some("no file <redacted>"));
    }

    #[test]
    fn ids_are_the_same_for_the_same_turn_and_record() {
        assert_eq!(trace_id("t1"), trace_id("t1"));
        assert_ne!(trace_id("t1"), trace_id("t2"));
        assert_ne!(span_id("t1", 0), span_id("t1", 1));
        assert_ne!(trace_id("t1"), [0; 16]);
    }
}
