//! The spans of one turn, built from its ledger records alone: a turn traced as it ends and
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

use axocoatl_store::ledger::record::{
    Millis, ModelCallCost, Record, SubtaskEnded, SubtaskStarted, ToolStarted, TurnBegun, TurnEnded,
    TurnState, UsageDetail,
};

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

struct Sub {
    subtask: String,
    worker: String,
    /// The agent id its records carry: the worker, or `adhoc:<subtask>`.
    agent: String,
    span_id: [u8; 8],
    seq: u64,
    start: Millis,
    end: Option<Millis>,
    state: Option<TurnState>,
    error: Option<String>,
    usage: Option<axocoatl_store::ledger::record::Usage>,
    /// The cache tokens and cost its end recorded.
    detail: Option<UsageDetail>,
    output: String,
}

/// Prompt tokens a provider's cache wrote, read (OpenTelemetry's GenAI conventions), and
/// what calls cost in US dollars (axocoatl's own: the conventions have no cost).
const CACHE_WRITE_ATTR: &str = "gen_ai.usage.cache_creation.input_tokens";
const CACHE_READ_ATTR: &str = "gen_ai.usage.cache_read.input_tokens";
const COST_ATTR: &str = "axocoatl.cost.usd";

/// The cache and cost attributes of a span summing `d`; no cost when some call had none.
fn detail_attrs(
    attrs: &mut Attributes,
    usage: &axocoatl_store::ledger::record::Usage,
    d: &UsageDetail,
) {
    attrs.push((CACHE_WRITE_ATTR, Value::Int(d.cache_write_tokens as i64)));
    attrs.push((CACHE_READ_ATTR, Value::Int(d.cache_read_tokens as i64)));
    if d.cost_complete(usage) {
        attrs.push((
            COST_ATTR,
            Value::Double(d.cost_nanos as f64 / crate::cost::NANOS_PER_USD),
        ));
    }
}

/// The spans of the turn whose records (in ledger order, with their sequence numbers) are
/// `records`; `None` while it has not ended. The turn's span comes first.
pub fn turn_spans(records: &[(u64, &Record)], content: &Content) -> Option<Vec<Span>> {
    let begun = records.iter().find_map(|(_, r)| match r {
        Record::TurnBegun(b) => Some(b),
        _ => None,
    })?;
    let ended = records.iter().find_map(|(_, r)| match r {
        Record::TurnEnded(e) if e.turn == begun.turn => Some(e),
        _ => None,
    })?;
    let turn = begun.turn.as_str();
    let trace = trace_id(turn);
    let root = span_id(turn, 0);
    let common = |attrs: &mut Attributes| {
        attrs.push(("axocoatl.turn.id", Value::Str(turn.to_owned())));
        attrs.push(("axocoatl.session", Value::Str(begun.session.clone())));
    };
    let cx = TurnSpans {
        turn,
        trace,
        root,
        content,
        common: &common,
    };
    let mut spans = vec![root_span(begun, ended, records, content, trace, root)];
    let mut subs: Vec<Sub> = Vec::new();
    let mut tasks: HashMap<&str, &str> = HashMap::new();
    let mut last_at: HashMap<&str, Millis> = HashMap::from([(begun.agent.as_str(), begun.at)]);
    let mut latest = begun.at;
    let mut open: Vec<(u64, &ToolStarted)> = Vec::new();
    for &(seq, record) in records {
        match record {
            Record::PlanMade(m) => {
                for s in &m.subtasks {
                    tasks.insert(&s.id, &s.task);
                }
                last_at.insert(&m.coordinator, m.at);
            }
            Record::SubtaskStarted(s) => subs.push(Sub::started(s, span_id(turn, seq), seq)),
            Record::SubtaskEnded(e) => {
                if let Some(s) = subs
                    .iter_mut()
                    .rev()
                    .find(|s| s.subtask == e.subtask && s.end.is_none())
                {
                    s.end(e);
                }
                // The coordinator waits for its subtasks: its next call starts after them.
                let c = last_at.entry(&begun.agent).or_insert(e.at);
                *c = (*c).max(e.at);
            }
            Record::ModelCall(_) | Record::ModelCallCost(_) => {
                if let Some((agent, c)) = model_call(record) {
                    let start = start_of(&last_at, &subs, agent, latest);
                    let parent = parent_of(&subs, agent, c.at, root);
                    spans.push(chat_span(&cx, seq, &c, start, parent));
                    last_at.insert(agent, c.at);
                }
            }
            Record::UsageCost(c) => subtask_detail(&mut subs, c),
            Record::ToolStarted(s) => {
                open.push((seq, s));
                last_at.insert(&s.agent, s.at);
            }
            Record::ToolFinished(r) => {
                let result = Some((r.output.inline.as_str(), r.is_error, r.exit_code));
                spans.extend(close_tool(&cx, &mut open, &subs, &r.call_id, r.at, result));
                last_at.insert(&r.agent, r.at);
            }
            Record::ToolResult(r) => {
                let result = Some((r.output.inline.as_str(), r.is_error, None));
                spans.extend(close_tool(&cx, &mut open, &subs, &r.call_id, r.at, result));
                last_at.insert(&r.agent, r.at);
            }
            _ => {}
        }
        if let Some(at) = record.at() {
            latest = latest.max(at);
        }
    }
    for (seq, s) in open {
        let parent = parent_of(&subs, &s.agent, s.at, root);
        spans.push(tool_span(
            turn, seq, s, ended.at, None, parent, content, &common,
        ));
    }
    for s in &subs {
        let task = tasks.get(s.subtask.as_str()).copied();
        spans.push(subtask_span(&cx, s, task, ended.at));
    }
    // The turn first, then in the order they started (the ledger's order breaks ties).
    spans[1..].sort_by_key(|s| (s.start, s.seq));
    Some(spans)
}

/// The span of subtask `s`, which ran `task`: it ends with the turn (`turn_end`) if it did
/// not end.
fn subtask_span(cx: &TurnSpans, s: &Sub, task: Option<&str>, turn_end: Millis) -> Span {
    let content = cx.content;
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("invoke_agent".into())),
        ("gen_ai.agent.name", Value::Str(s.worker.clone())),
        ("axocoatl.subtask.id", Value::Str(s.subtask.clone())),
        (
            "axocoatl.subtask.state",
            Value::Str(s.state.map_or("interrupted", TurnState::as_str).into()),
        ),
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
    let error = match s.state {
        Some(TurnState::Failed) => Some(s.error.as_deref().map_or_else(
            || "the subtask failed".to_owned(),
            |e| content_or(content, e, "the subtask failed"),
        )),
        None | Some(TurnState::Interrupted) => Some("the subtask did not end".to_owned()),
        _ => None,
    };
    if error.is_some() {
        attrs.push((
            "error.type",
            Value::Str(s.state.map_or("interrupted", TurnState::as_str).into()),
        ));
    }
    Span {
        trace_id: cx.trace,
        span_id: s.span_id,
        parent: Some(cx.root),
        name: format!("invoke_agent {}", s.worker),
        kind: Kind::Internal,
        start: s.start,
        end: s.end.unwrap_or(turn_end),
        attributes: attrs,
        error,
        seq: s.seq,
    }
}

/// A model call of either record kind, and the agent it ran as (borrowed from the record).
fn model_call(record: &Record) -> Option<(&str, std::borrow::Cow<'_, ModelCallCost>)> {
    use std::borrow::Cow;
    match record {
        Record::ModelCall(c) => Some((&c.agent, Cow::Owned(ModelCallCost::from(c.clone())))),
        Record::ModelCallCost(c) => Some((&c.agent, Cow::Borrowed(c))),
        _ => None,
    }
}

/// A worker's subtask's cache tokens and cost, for its span.
fn subtask_detail(subs: &mut [Sub], c: &axocoatl_store::ledger::record::UsageCost) {
    let ended = c.subtask.as_deref().and_then(|id| {
        subs.iter_mut()
            .rev()
            .find(|s| s.subtask == id && s.end.is_some())
    });
    if let Some(s) = ended {
        s.detail = Some(c.detail);
    }
}

/// A model call's span: `chat {model}`.
fn chat_span(cx: &TurnSpans, seq: u64, c: &ModelCallCost, start: Millis, parent: [u8; 8]) -> Span {
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
        span_id: span_id(cx.turn, seq),
        parent: Some(parent),
        name: format!("chat {}", c.model),
        kind: Kind::Client,
        start: start.min(c.at),
        end: c.at,
        attributes: attrs,
        error: None,
        seq,
    }
}

/// The span an agent's step at `at` is under: the subtask running that agent then, else
/// the turn's (`root`).
fn parent_of(subs: &[Sub], agent: &str, at: Millis, root: [u8; 8]) -> [u8; 8] {
    subs.iter()
        .rev()
        .find(|s| s.agent == agent && s.start <= at && s.end.is_none_or(|e| at <= e))
        .map_or(root, |s| s.span_id)
}

/// Ends the open tool call `call_id` at `end` with `result`: its span (none when no call of
/// that id is open).
fn close_tool(
    cx: &TurnSpans,
    open: &mut Vec<(u64, &ToolStarted)>,
    subs: &[Sub],
    call_id: &str,
    end: Millis,
    result: Option<(&str, bool, Option<i32>)>,
) -> Option<Span> {
    let i = open.iter().rposition(|(_, s)| s.call_id == call_id)?;
    let (seq, s) = open.remove(i);
    let parent = parent_of(subs, &s.agent, s.at, cx.root);
    Some(tool_span(
        cx.turn, seq, s, end, result, parent, cx.content, cx.common,
    ))
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

impl Sub {
    fn started(s: &SubtaskStarted, span_id: [u8; 8], seq: u64) -> Sub {
        let agent = if s.worker == "adhoc" {
            format!("adhoc:{}", s.subtask)
        } else {
            s.worker.clone()
        };
        Sub {
            subtask: s.subtask.clone(),
            worker: s.worker.clone(),
            agent,
            span_id,
            seq,
            start: s.at,
            end: None,
            state: None,
            error: None,
            usage: None,
            detail: None,
            output: String::new(),
        }
    }

    fn end(&mut self, e: &SubtaskEnded) {
        self.end = Some(e.at);
        self.state = Some(e.state);
        self.error = e.error.clone();
        self.usage = Some(e.usage);
        self.output = e.output.inline.clone();
    }
}

/// When an agent's next call started: after its own previous step, else (its first call
/// in this turn) after the subtask that runs it started, else after the turn's latest
/// record.
fn start_of(last_at: &HashMap<&str, Millis>, subs: &[Sub], agent: &str, latest: Millis) -> Millis {
    if let Some(at) = last_at.get(agent) {
        return *at;
    }
    subs.iter()
        .rev()
        .find(|s| s.agent == agent)
        .map_or(latest, |s| s.start)
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
    begun: &TurnBegun,
    ended: &TurnEnded,
    records: &[(u64, &Record)],
    content: &Content,
    trace: [u8; 16],
    root: [u8; 8],
) -> Span {
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("invoke_agent".into())),
        ("gen_ai.agent.name", Value::Str(begun.agent.clone())),
        ("gen_ai.conversation.id", Value::Str(begun.session.clone())),
        ("axocoatl.turn.id", Value::Str(begun.turn.clone())),
        ("axocoatl.session", Value::Str(begun.session.clone())),
        (
            "axocoatl.turn.state",
            Value::Str(ended.state.as_str().into()),
        ),
        ("axocoatl.turn.mode", Value::Str(begun.mode.clone())),
        (
            "gen_ai.usage.input_tokens",
            Value::Int(ended.usage.prompt_tokens as i64),
        ),
        (
            "gen_ai.usage.output_tokens",
            Value::Int(ended.usage.completion_tokens as i64),
        ),
    ];
    let mut detail = None::<UsageDetail>;
    for (_, r) in records {
        if let Record::UsageCost(c) = r {
            detail
                .get_or_insert_with(UsageDetail::default)
                .add(&c.detail);
        }
    }
    if let Some(d) = &detail {
        detail_attrs(&mut attrs, &ended.usage, d);
    }
    if let Some(r) = &begun.retry_of {
        attrs.push(("axocoatl.turn.retry_of", Value::Str(r.clone())));
    }
    for (_, r) in records {
        if let Record::TurnOrigin(o) = r {
            attrs.push(("axocoatl.automation", Value::Str(o.automation.clone())));
        }
    }
    if content.capture {
        attrs.push((
            "gen_ai.input.messages",
            content.messages("user", &begun.request, None),
        ));
        let answer: Vec<&str> = records
            .iter()
            .filter_map(|(_, r)| match r {
                Record::AgentOutput(o) => Some(o.text.as_str()),
                Record::AgentOutputBounded(o) => Some(o.text.inline.as_str()),
                _ => None,
            })
            .filter(|t| !t.is_empty())
            .collect();
        if !answer.is_empty() {
            attrs.push((
                "gen_ai.output.messages",
                content.messages("assistant", &answer.join("\n"), None),
            ));
        }
    }
    let error = match ended.state {
        TurnState::Failed => Some(
            ended
                .error
                .as_deref()
                .map_or_else(|| "the turn failed".to_owned(), |e| content.text(e)),
        ),
        TurnState::Interrupted => Some("the process running the turn ended before it".to_owned()),
        TurnState::Completed | TurnState::Stopped => None,
    };
    if error.is_some() {
        attrs.push(("error.type", Value::Str(ended.state.as_str().into())));
    }
    Span {
        trace_id: trace,
        span_id: root,
        parent: None,
        name: format!("invoke_agent {}", begun.agent),
        kind: Kind::Internal,
        start: begun.at,
        end: ended.at.max(begun.at),
        seq: 0,
        attributes: attrs,
        error,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one tool call: its start record, end, result, place in the trace and what spans carry"
)]
fn tool_span(
    turn: &str,
    seq: u64,
    s: &ToolStarted,
    end: Millis,
    result: Option<(&str, bool, Option<i32>)>,
    parent: [u8; 8],
    content: &Content,
    common: &dyn Fn(&mut Attributes),
) -> Span {
    let mut attrs = vec![
        ("gen_ai.operation.name", Value::Str("execute_tool".into())),
        ("gen_ai.tool.name", Value::Str(s.name.clone())),
        ("gen_ai.tool.call.id", Value::Str(s.call_id.clone())),
        ("gen_ai.tool.type", Value::Str("function".into())),
        ("gen_ai.agent.name", Value::Str(s.agent.clone())),
    ];
    if let Some((_, _, Some(code))) = result {
        attrs.push(("axocoatl.tool.exit_code", Value::Int(i64::from(code))));
    }
    if content.capture {
        attrs.push((
            "gen_ai.tool.call.arguments",
            Value::Str(content.text(&s.arguments.inline)),
        ));
        if let Some((output, _, _)) = result {
            attrs.push(("gen_ai.tool.call.result", Value::Str(content.text(output))));
        }
    }
    common(&mut attrs);
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
    Span {
        trace_id: trace_id(turn),
        span_id: span_id(turn, seq),
        parent: Some(parent),
        name: format!("execute_tool {}", s.name),
        kind: Kind::Internal,
        start: s.at,
        end: end.max(s.at),
        attributes: attrs,
        error,
        seq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axocoatl_store::ledger::record::{
        Bounded, ModelCall, SubtaskEnded, SubtaskStarted, ToolFinished, Usage,
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
        let refs: Vec<(u64, &Record)> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64 + 1, r))
            .collect();
        turn_spans(&refs, content)
    }

    fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
        spans.iter().filter(|s| s.name == name).collect()
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
