//! The raw `events` table: one row per record, record by record (no fold: a turn's rows are
//! [`super::rows`]'), and the `attachments` table, which follows the attachment records.

use std::borrow::Cow;

use axocoatl_store::extracted;
use axocoatl_store::ledger::record::{
    ActivationDecided, AttachmentAdded, AttachmentScope, Bounded, Millis, ModelCallCost, PlanMade,
    ToolStarted, TurnBegun, TurnOverrides, UsageCost,
};
use axocoatl_store::ledger::Record;
use rusqlite::params;
use serde_json::json;

use super::{usd, Applier};
use crate::clock::rfc3339;
use crate::error::Result;
use crate::export::sqlite::sql_error;

/// Tools whose calls edit core memory (their events are `memory_edit`).
pub(super) const MEMORY_EDIT_PREFIX: &str = "core_memory_";

/// One event row.
struct Event<'r> {
    kind: &'static str,
    agent: Option<&'r str>,
    name: Option<&'r str>,
    text: Option<Cow<'r, str>>,
    detail: Option<serde_json::Value>,
}

impl Applier<'_> {
    /// Writes the event row of record `seq` of `session` (empty: of no session).
    pub(super) fn event(&mut self, seq: u64, record: &Record, session: &str) -> Result<()> {
        let ev = event_of(record);
        let err = sql_error(&self.path);
        self.stmts
            .event
            .execute(params![
                seq as i64,
                ev.kind,
                Some(session).filter(|s| !s.is_empty()),
                record.turn(),
                ev.agent,
                ev.name,
                record.at().map(rfc3339),
                ev.text.as_deref(),
                ev.detail.map(|d| d.to_string()),
            ])
            .map_err(err)?;
        Ok(())
    }

    /// A new attachment's row: the text without the header of OCR text, and what OCR said
    /// about it (engine, languages, confidence) as JSON beside it.
    pub(super) fn attachment_added(&mut self, a: &AttachmentAdded) -> Result<()> {
        let bytes = match &a.text_object {
            Some(h) => self.repo.objects().get(h).ok(),
            None => None,
        };
        let (text, ocr) = match bytes.as_deref().map(extracted::decode) {
            Some(Ok(e)) => (
                Some(e.text().to_owned()),
                e.ocr().map(|info| json!(info).to_string()),
            ),
            Some(Err(_)) => (
                bytes
                    .as_deref()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
                None,
            ),
            None => (None, None),
        };
        self.tx
            .execute(
                "INSERT OR IGNORE INTO attachments (reference, session, name, media_type, size, scope, object, text_object, text_truncated, text, ocr, added_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![a.reference, a.session, a.name, a.media_type, a.size as i64, scope_name(a.scope), a.object, a.text_object, a.text_truncated, text, ocr, rfc3339(a.at)],
            )
            .map_err(self.err())?;
        Ok(())
    }

    pub(super) fn attachment_removed(&mut self, reference: &str, at: Millis) -> Result<()> {
        self.tx
            .execute(
                "UPDATE attachments SET removed_at = ?2 WHERE reference = ?1",
                params![reference, rfc3339(at)],
            )
            .map_err(self.err())?;
        Ok(())
    }
}

fn scope_name(s: AttachmentScope) -> &'static str {
    match s {
        AttachmentScope::Once => "once",
        AttachmentScope::Session => "session",
    }
}

fn bounded_detail(b: &Bounded) -> serde_json::Value {
    json!({"object": b.object, "len": b.len})
}

impl<'r> Event<'r> {
    fn new(kind: &'static str) -> Event<'r> {
        Event {
            kind,
            agent: None,
            name: None,
            text: None,
            detail: None,
        }
    }

    fn agent(mut self, agent: &'r str) -> Self {
        self.agent = Some(agent);
        self
    }

    fn name(mut self, name: &'r str) -> Self {
        self.name = Some(name);
        self
    }

    fn text(mut self, text: &'r str) -> Self {
        self.text = Some(Cow::Borrowed(text));
        self
    }

    fn owned_text(mut self, text: String) -> Self {
        self.text = Some(Cow::Owned(text));
        self
    }

    fn detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(detail);
        self
    }
}

/// What the event row of a record says.
fn event_of(record: &Record) -> Event<'_> {
    match record {
        Record::TurnBegun(b) => request(b),
        Record::AgentOutput(o) => Event::new("answer").agent(&o.agent).text(&o.text),
        Record::AgentOutputBounded(o) => Event::new("answer")
            .agent(&o.agent)
            .text(&o.text.inline)
            .detail(bounded_detail(&o.text)),
        Record::TurnEnded(e) => {
            let ev = Event::new("turn_ended")
                .name(e.state.as_str())
                .detail(json!({"usage": e.usage}));
            match &e.error {
                Some(error) => ev.text(error),
                None => ev,
            }
        }
        Record::TurnOrigin(o) => Event::new("origin").name(&o.automation).detail(
            json!({"occurrence": rfc3339(o.occurrence), "trigger": o.trigger, "runner": o.runner, "pid": o.pid}),
        ),
        Record::ModelCall(c) => model_call(&c.agent, &c.model, &ModelCallCost::from(c.clone())),
        Record::ModelCallCost(c) => model_call(&c.agent, &c.model, c),
        Record::UsageCost(c) => usage_cost(c),
        Record::ToolStarted(s) => tool_call(s),
        Record::ToolFinished(r) => Event::new("tool_result")
            .agent(&r.agent)
            .name(&r.name)
            .text(&r.output.inline)
            .detail(json!({"call_id": r.call_id, "is_error": r.is_error, "exit_code": r.exit_code, "duration_ms": r.duration_ms, "output_object": r.output.object, "output_len": r.output.len})),
        Record::ToolResult(r) => Event::new("tool_result")
            .agent(&r.agent)
            .name(&r.name)
            .text(&r.output.inline)
            .detail(json!({"call_id": r.call_id, "is_error": r.is_error, "output_object": r.output.object, "output_len": r.output.len})),
        Record::StopRequested(s) => Event::new("stop_requested").detail(json!({"pid": s.pid})),
        Record::Warning(w) => Event::new("warning").name(&w.code).text(&w.message),
        Record::RewindBoundary(r) => Event::new("rewind").agent(&r.agent).name(&r.target),
        Record::PlanMade(m) => plan(m),
        Record::SubtaskStarted(s) => Event::new("subtask_started")
            .agent(&s.worker)
            .name(&s.subtask),
        Record::SubtaskEnded(e) => Event::new("subtask_ended")
            .agent(&e.worker)
            .name(&e.subtask)
            .text(e.error.as_deref().unwrap_or(&e.output.inline))
            .detail(json!({"state": e.state.as_str(), "usage": e.usage, "output_object": e.output.object})),
        Record::ActivationDecided(a) => activation(a),
        Record::TurnOverrides(o) => overrides(o),
        Record::TurnWorkdir(w) => Event::new("turn_workdir").text(&w.dir),
        Record::ApprovalRequested(r) => Event::new("approval_requested")
            .agent(&r.agent)
            .name(&r.tool)
            .text(&r.arguments.inline)
            .detail(json!({"call_id": r.call_id, "rule": r.rule, "expires_at": r.expires_at.map(rfc3339)})),
        Record::ApprovalDecided(d) => {
            let ev = Event::new("approval_decided")
                .name(d.decision.as_str())
                .detail(json!({"call_id": d.call_id, "by": d.by}));
            match &d.reason {
                Some(reason) => ev.text(reason),
                None => ev,
            }
        }
        r @ (Record::SessionAgents(_)
        | Record::SessionCreated(_)
        | Record::AttachmentAdded(_)
        | Record::AttachmentRemoved(_)
        | Record::AttachmentConsumed(_)
        | Record::LegacyImportBegun(_)
        | Record::LegacyImportEnded(_)
        | Record::Note(_)) => session_event(r),
    }
}

/// The events of records of a session rather than of a turn (the kinds [`event_of`] sends
/// here).
fn session_event(record: &Record) -> Event<'_> {
    match record {
        Record::SessionAgents(s) => {
            Event::new("session_agents").owned_text(json!(s.agents).to_string())
        }
        Record::SessionCreated(_) => Event::new("session_created"),
        Record::AttachmentAdded(a) => Event::new("attachment_added")
            .name(&a.reference)
            .text(&a.name),
        Record::AttachmentRemoved(a) => Event::new("attachment_removed").name(&a.reference),
        Record::AttachmentConsumed(a) => Event::new("attachment_consumed").name(&a.reference),
        Record::LegacyImportBegun(l) => Event::new("legacy_import_begun")
            .agent(&l.agent)
            .name(&l.source)
            .detail(json!({"digest": l.digest, "format": l.format, "turns": l.turns})),
        Record::LegacyImportEnded(l) => Event::new("legacy_import_ended")
            .agent(&l.agent)
            .detail(json!({"digest": l.digest, "turns": l.turns})),
        Record::Note(n) => Event::new("note").text(&n.text),
        // Of a turn: `event_of`'s.
        _ => Event::new("note"),
    }
}

fn request(b: &TurnBegun) -> Event<'_> {
    let ev = Event::new("request")
        .agent(&b.agent)
        .name(&b.mode)
        .text(&b.request);
    if b.inline_context.is_empty() && b.attachments.is_empty() && b.retry_of.is_none() {
        return ev;
    }
    ev.detail(json!({
        "retry_of": b.retry_of,
        "inline_context": b.inline_context.iter().map(|c| json!({"label": c.label, "len": c.text.len, "object": c.text.object})).collect::<Vec<_>>(),
        "attachments": b.attachments.iter().map(|a| &a.reference).collect::<Vec<_>>(),
    }))
}

fn usage_cost(c: &UsageCost) -> Event<'_> {
    let d = &c.detail;
    let ev = Event::new("usage_cost").agent(&c.agent).detail(json!({
        "calls": d.calls,
        "cache_write_tokens": d.cache_write_tokens,
        "cache_read_tokens": d.cache_read_tokens,
        "priced_calls": d.priced_calls,
        "cost_usd": usd(d.cost_nanos),
    }));
    match &c.subtask {
        Some(s) => ev.name(s),
        None => ev,
    }
}

fn tool_call(s: &ToolStarted) -> Event<'_> {
    let kind = if s.name.starts_with(MEMORY_EDIT_PREFIX) {
        "memory_edit"
    } else {
        "tool_call"
    };
    Event::new(kind)
        .agent(&s.agent)
        .name(&s.name)
        .text(&s.arguments.inline)
        .detail(json!({"call_id": s.call_id, "arguments_object": s.arguments.object}))
}

fn plan(m: &PlanMade) -> Event<'_> {
    let lines: Vec<String> = m
        .subtasks
        .iter()
        .map(|s| format!("{} ({}): {}", s.id, s.worker, s.task))
        .collect();
    Event::new("plan")
        .agent(&m.coordinator)
        .name(&m.method)
        .owned_text(lines.join("\n"))
        .detail(json!({"subtasks": m.subtasks, "rejected": m.rejected}))
}

fn activation(a: &ActivationDecided) -> Event<'_> {
    let text = a
        .agents
        .iter()
        .map(|x| format!("{}: {}", x.agent, x.reason))
        .collect::<Vec<_>>()
        .join("\n");
    Event::new("activation")
        .owned_text(text)
        .detail(json!({"agents": a.agents}))
}

fn overrides(o: &TurnOverrides) -> Event<'_> {
    let mut ev = Event::new("overrides").detail(json!({
        "model": o.model,
        "system": o.system,
        "options": o.options.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
    }));
    ev.name = o.model.as_deref();
    ev.text = o.system.as_deref().map(Cow::Borrowed);
    ev
}

/// A model call's event (of either record kind: its agent and model borrowed from the
/// record itself).
fn model_call<'r>(agent: &'r str, model: &'r str, c: &ModelCallCost) -> Event<'r> {
    Event::new("model_call")
        .agent(agent)
        .name(model)
        .detail(json!({
            "provider": c.provider,
            "reserved_tokens": c.reserved_tokens,
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "cache_write_tokens": c.cache_write_tokens,
            "cache_read_tokens": c.cache_read_tokens,
            "cost_usd": c.cost_nanos.map(usd),
            "finish_reason": c.finish_reason,
        }))
}
