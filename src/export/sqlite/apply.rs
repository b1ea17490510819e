//! One ledger record at a time into the tables of `schema.rs`.
//!
//! Every record in scope becomes a row of `events` (its sequence number is the row id, so
//! events never change once written); records of a turn also fill `turns`, `model_calls`,
//! `tool_calls` and `subtasks`. A turn begun during this export is kept in memory until
//! its terminal record and then written once (a ledger of a million turns is mostly
//! inserts); a record of a turn written by an earlier export updates its row.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use axocoatl_store::automation::{Runs, Trigger};
use axocoatl_store::extracted;
use axocoatl_store::ledger::record::{
    AttachmentAdded, Bounded, Millis, ModelCallCost, PlanMade, RewindBoundary, StopRequested,
    SubtaskEnded, SubtaskStarted, ToolFinished, ToolResult, ToolStarted, TurnBegun, TurnEnded,
    TurnOrigin, TurnOverrides, UsageDetail,
};
use axocoatl_store::ledger::{Entry, Record};
use axocoatl_store::Repo;
use rusqlite::{params, OptionalExtension, Statement, Transaction};
use serde_json::json;

use super::sql_error;
use crate::clock::rfc3339;
use crate::error::{Result, RuntimeError};
use crate::export::SqliteReport;

mod cost;

/// Tools whose calls edit core memory (their events are `memory_edit`).
const MEMORY_EDIT_PREFIX: &str = "core_memory_";

/// A turn begun during this export, not yet written.
#[derive(Debug)]
struct TurnRow {
    seq: u64,
    session: String,
    agent: String,
    mode: String,
    state: &'static str,
    request: String,
    answer: String,
    answer_object: Option<String>,
    answer_len: Option<u64>,
    error: Option<String>,
    started_at: Millis,
    ended_at: Option<Millis>,
    retry_of: Option<String>,
    stop_requested: bool,
    origin: Option<(String, Millis, String, String)>,
    usage: Option<axocoatl_store::ledger::record::Usage>,
    /// The cache tokens and cost of its calls, its workers' included (`None`: no
    /// `UsageCost` record, a turn from before they were written).
    detail: Option<UsageDetail>,
}

impl TurnRow {
    fn begun(seq: u64, b: &TurnBegun) -> TurnRow {
        TurnRow {
            seq,
            session: b.session.clone(),
            agent: b.agent.clone(),
            mode: b.mode.clone(),
            state: "running",
            request: b.request.clone(),
            answer: String::new(),
            answer_object: None,
            answer_len: None,
            error: None,
            started_at: b.at,
            ended_at: None,
            retry_of: b.retry_of.clone(),
            stop_requested: false,
            origin: None,
            usage: None,
            detail: None,
        }
    }

    fn add_answer(&mut self, text: &str) {
        if !self.answer.is_empty() && !text.is_empty() {
            self.answer.push('\n');
        }
        self.answer.push_str(text);
    }

    fn end(&mut self, e: &TurnEnded) {
        if self.ended_at.is_none() {
            self.state = e.state.as_str();
            self.error = e.error.clone();
            self.usage = Some(e.usage);
            self.ended_at = Some(e.at);
        }
    }
}

/// What a session's records in this export add to its row.
#[derive(Debug, Default)]
struct SessionAcc {
    created_at: Option<Millis>,
    last_activity: Option<Millis>,
    turns: u64,
    agents: Option<String>,
}

/// One event row.
struct Event<'r> {
    kind: &'static str,
    session: Option<&'r str>,
    turn: Option<&'r str>,
    agent: Option<&'r str>,
    name: Option<&'r str>,
    at: Option<Millis>,
    text: Option<Cow<'r, str>>,
    detail: Option<serde_json::Value>,
}

impl<'r> Event<'r> {
    fn new(kind: &'static str) -> Event<'r> {
        Event {
            kind,
            session: None,
            turn: None,
            agent: None,
            name: None,
            at: None,
            text: None,
            detail: None,
        }
    }
}

struct Stmts<'c> {
    event: Statement<'c>,
    turn: Statement<'c>,
    turn_session: Statement<'c>,
}

pub(crate) struct Applier<'c> {
    repo: &'c Repo,
    tx: &'c Transaction<'c>,
    scope: Option<String>,
    path: PathBuf,
    stmts: Stmts<'c>,
    pending: HashMap<String, TurnRow>,
    sessions: HashMap<String, SessionAcc>,
    report: SqliteReport,
}

impl<'c> Applier<'c> {
    pub fn new(
        repo: &'c Repo,
        tx: &'c Transaction<'c>,
        scope: Option<&str>,
        path: &Path,
    ) -> Result<Applier<'c>> {
        let err = sql_error(path);
        let stmts = Stmts {
            event: tx
                .prepare("INSERT OR IGNORE INTO events (seq, kind, session, turn, agent, name, at, text, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
                .map_err(&err)?,
            turn: tx
                .prepare("INSERT OR IGNORE INTO turns (turn, seq, session, agent, mode, state, request, answer, answer_object, answer_len, error, started_at, ended_at, duration_ms, superseded, retry_of, stop_requested, origin_automation, origin_occurrence, origin_trigger, origin_runner, prompt_tokens, completion_tokens, model_calls, usage_complete, cache_write_tokens, cache_read_tokens, cost_usd, priced_calls) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 0, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)")
                .map_err(&err)?,
            turn_session: tx
                .prepare("SELECT session FROM turns WHERE turn = ?1")
                .map_err(&err)?,
        };
        Ok(Applier {
            repo,
            tx,
            scope: scope.map(str::to_owned),
            path: path.to_owned(),
            stmts,
            pending: HashMap::new(),
            sessions: HashMap::new(),
            report: SqliteReport::default(),
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> RuntimeError + '_ {
        sql_error(&self.path)
    }

    fn in_scope(&self, session: &str) -> bool {
        self.scope.as_deref().is_none_or(|s| s == session)
    }

    /// The session of a turn this export holds (begun now or written before); `None` for a
    /// turn out of scope or unknown (its begin record damaged).
    fn turn_session(&mut self, turn: &str) -> Result<Option<String>> {
        if let Some(row) = self.pending.get(turn) {
            return Ok(Some(row.session.clone()));
        }
        let err = sql_error(&self.path);
        self.stmts
            .turn_session
            .query_row([turn], |r| r.get(0))
            .optional()
            .map_err(err)
    }

    fn note_session(&mut self, session: &str, at: Option<Millis>) {
        if !self.sessions.contains_key(session) {
            self.sessions
                .insert(session.to_owned(), SessionAcc::default());
        }
        if let (Some(acc), Some(at)) = (self.sessions.get_mut(session), at) {
            acc.created_at = Some(acc.created_at.map_or(at, |c| c.min(at)));
            acc.last_activity = Some(acc.last_activity.map_or(at, |l| l.max(at)));
        }
    }

    fn event(&mut self, seq: u64, e: Event<'_>) -> Result<()> {
        let err = sql_error(&self.path);
        self.stmts
            .event
            .execute(params![
                seq as i64,
                e.kind,
                e.session,
                e.turn,
                e.agent,
                e.name,
                e.at.map(rfc3339),
                e.text.as_deref(),
                e.detail.map(|d| d.to_string()),
            ])
            .map_err(err)?;
        Ok(())
    }

    /// Applies one record (records out of scope, and of kinds this build does not know,
    /// are left out).
    pub fn apply(&mut self, entry: Entry) -> Result<()> {
        let seq = entry.seq;
        let Some(record) = entry.record else {
            self.report.unknown_kinds += 1;
            return Ok(());
        };
        let session = match (&record, record.turn()) {
            (Record::TurnBegun(b), _) => Some(b.session.clone()).filter(|s| self.in_scope(s)),
            (_, Some(turn)) => self.turn_session(turn)?,
            (_, None) => match record.session() {
                Some(s) => Some(s.to_owned()).filter(|s| self.in_scope(s)),
                None => self.scope.is_none().then(String::new),
            },
        };
        let Some(session) = session else {
            return Ok(());
        };
        if let Some(s) = record.session() {
            self.note_session(s, record.at());
        }
        let mut ev = Event::new("note");
        ev.session = Some(&session).filter(|s| !s.is_empty()).map(String::as_str);
        ev.turn = record.turn();
        ev.at = record.at();
        self.record(seq, &record, ev)
    }

    fn record<'r>(&mut self, seq: u64, record: &'r Record, mut ev: Event<'r>) -> Result<()> {
        match record {
            Record::TurnBegun(b) => self.turn_begun(seq, b, &mut ev)?,
            Record::AgentOutput(o) => {
                self.answer(&o.turn, &o.text, None)?;
                ev.kind = "answer";
                ev.agent = Some(&o.agent);
                ev.text = Some(Cow::Borrowed(&o.text));
            }
            Record::AgentOutputBounded(o) => {
                self.answer(&o.turn, &o.text.inline, Some(&o.text))?;
                ev.kind = "answer";
                ev.agent = Some(&o.agent);
                ev.text = Some(Cow::Borrowed(&o.text.inline));
                ev.detail = Some(bounded_detail(&o.text));
            }
            Record::TurnEnded(e) => {
                self.end(e)?;
                ev.kind = "turn_ended";
                ev.name = Some(e.state.as_str());
                ev.text = e.error.as_deref().map(Cow::Borrowed);
                ev.detail = Some(json!({"usage": e.usage}));
            }
            Record::TurnOrigin(o) => self.turn_origin(o, &mut ev)?,
            Record::ModelCall(c) => {
                (ev.agent, ev.name) = (Some(c.agent.as_str()), Some(c.model.as_str()));
                self.model_call(seq, &ModelCallCost::from(c.clone()), &mut ev)?;
            }
            Record::ModelCallCost(c) => {
                (ev.agent, ev.name) = (Some(c.agent.as_str()), Some(c.model.as_str()));
                self.model_call(seq, c, &mut ev)?;
            }
            Record::UsageCost(c) => self.usage_cost(c, &mut ev)?,
            Record::ToolStarted(s) => self.tool_started(seq, s, &mut ev)?,
            Record::ToolFinished(r) => self.tool_finished(r, &mut ev)?,
            Record::ToolResult(r) => self.tool_result_record(r, &mut ev)?,
            Record::StopRequested(s) => self.stop_requested(s, &mut ev)?,
            Record::Warning(w) => {
                ev.kind = "warning";
                ev.name = Some(&w.code);
                ev.text = Some(Cow::Borrowed(&w.message));
            }
            Record::RewindBoundary(r) => self.rewind_boundary(r, &mut ev)?,
            Record::PlanMade(m) => self.plan_made(m, &mut ev)?,
            Record::SubtaskStarted(s) => self.subtask_started(s, &mut ev)?,
            Record::SubtaskEnded(e) => self.subtask_ended(e, &mut ev)?,
            Record::ActivationDecided(a) => {
                ev.kind = "activation";
                let text = a
                    .agents
                    .iter()
                    .map(|x| format!("{}: {}", x.agent, x.reason))
                    .collect::<Vec<_>>()
                    .join("\n");
                ev.detail = Some(json!({"agents": a.agents}));
                ev.text = Some(Cow::Owned(text));
            }
            Record::SessionAgents(s) => {
                let agents = json!(s.agents).to_string();
                if let Some(acc) = self.sessions.get_mut(&s.session) {
                    acc.agents = Some(agents.clone());
                }
                ev.kind = "session_agents";
                ev.text = Some(Cow::Owned(agents));
            }
            Record::SessionCreated(_) => ev.kind = "session_created",
            Record::TurnOverrides(o) => self.overrides(o, &mut ev)?,
            Record::AttachmentAdded(a) => self.attachment_added(a, &mut ev)?,
            Record::AttachmentRemoved(a) => {
                self.tx
                    .execute(
                        "UPDATE attachments SET removed_at = ?2 WHERE reference = ?1",
                        params![a.reference, rfc3339(a.at)],
                    )
                    .map_err(self.err())?;
                ev.kind = "attachment_removed";
                ev.name = Some(&a.reference);
            }
            Record::AttachmentConsumed(a) => {
                ev.kind = "attachment_consumed";
                ev.name = Some(&a.reference);
            }
            Record::LegacyImportBegun(l) => {
                ev.kind = "legacy_import_begun";
                ev.agent = Some(&l.agent);
                ev.name = Some(&l.source);
                ev.detail = Some(json!({"digest": l.digest, "format": l.format, "turns": l.turns}));
            }
            Record::LegacyImportEnded(l) => {
                ev.kind = "legacy_import_ended";
                ev.agent = Some(&l.agent);
                ev.detail = Some(json!({"digest": l.digest, "turns": l.turns}));
            }
            Record::Note(n) => {
                ev.kind = "note";
                ev.text = Some(Cow::Borrowed(&n.text));
            }
        }
        self.event(seq, ev)
    }

    fn attachment_added<'r>(&mut self, a: &'r AttachmentAdded, ev: &mut Event<'r>) -> Result<()> {
        // The text without the header of OCR text; what OCR said about it (engine,
        // languages, confidence) as JSON beside it.
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
        ev.kind = "attachment_added";
        ev.name = Some(&a.reference);
        ev.text = Some(Cow::Borrowed(&a.name));
        Ok(())
    }

    fn subtask_ended<'r>(&mut self, e: &'r SubtaskEnded, ev: &mut Event<'r>) -> Result<()> {
        let values = params![
            e.turn,
            e.subtask,
            e.worker,
            e.state.as_str(),
            e.error,
            e.output.inline,
            e.output.object,
            e.usage.prompt_tokens as i64,
            e.usage.completion_tokens as i64,
            e.usage.calls,
            rfc3339(e.at)
        ];
        let changed = self
            .tx
            .execute(
                "UPDATE subtasks SET worker = ?3, state = ?4, error = ?5, output = ?6, output_object = ?7, prompt_tokens = ?8, completion_tokens = ?9, model_calls = ?10, ended_at = ?11 WHERE id = (SELECT id FROM subtasks WHERE turn = ?1 AND subtask = ?2 AND state IN ('running', 'planned') ORDER BY state = 'running' DESC, id DESC LIMIT 1)",
                values,
            )
            .map_err(self.err())?;
        if changed == 0 {
            self.tx
                .execute(
                    "INSERT INTO subtasks (turn, subtask, worker, state, error, output, output_object, prompt_tokens, completion_tokens, model_calls, ended_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    values,
                )
                .map_err(self.err())?;
        }
        ev.kind = "subtask_ended";
        ev.agent = Some(&e.worker);
        ev.name = Some(&e.subtask);
        ev.text = Some(Cow::Borrowed(
            e.error.as_deref().unwrap_or(&e.output.inline),
        ));
        ev.detail = Some(
            json!({"state": e.state.as_str(), "usage": e.usage, "output_object": e.output.object}),
        );
        Ok(())
    }

    fn subtask_started<'r>(&mut self, s: &'r SubtaskStarted, ev: &mut Event<'r>) -> Result<()> {
        let at = rfc3339(s.at);
        let changed = self
            .tx
            .execute(
                "UPDATE subtasks SET state = 'running', worker = ?3, started_at = ?4 WHERE id = (SELECT id FROM subtasks WHERE turn = ?1 AND subtask = ?2 AND state = 'planned' ORDER BY id DESC LIMIT 1)",
                params![s.turn, s.subtask, s.worker, at],
            )
            .map_err(self.err())?;
        if changed == 0 {
            self.tx
                .execute(
                    "INSERT INTO subtasks (turn, subtask, worker, state, started_at) VALUES (?1, ?2, ?3, 'running', ?4)",
                    params![s.turn, s.subtask, s.worker, at],
                )
                .map_err(self.err())?;
        }
        ev.kind = "subtask_started";
        ev.agent = Some(&s.worker);
        ev.name = Some(&s.subtask);
        Ok(())
    }

    fn plan_made<'r>(&mut self, m: &'r PlanMade, ev: &mut Event<'r>) -> Result<()> {
        for s in &m.subtasks {
            self.tx
                .execute(
                    "INSERT INTO subtasks (turn, subtask, worker, role, task, depends_on, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'planned')",
                    params![m.turn, s.id, s.worker, s.role, s.task, json!(s.depends_on).to_string()],
                )
                .map_err(self.err())?;
        }
        ev.kind = "plan";
        ev.agent = Some(&m.coordinator);
        ev.name = Some(&m.method);
        let lines: Vec<String> = m
            .subtasks
            .iter()
            .map(|s| format!("{} ({}): {}", s.id, s.worker, s.task))
            .collect();
        ev.detail = Some(json!({"subtasks": m.subtasks, "rejected": m.rejected}));
        ev.text = Some(Cow::Owned(lines.join("\n")));
        Ok(())
    }

    fn tool_started<'r>(&mut self, seq: u64, s: &'r ToolStarted, ev: &mut Event<'r>) -> Result<()> {
        let memory_edit = s.name.starts_with(MEMORY_EDIT_PREFIX);
        self.tx
            .execute(
                "INSERT OR IGNORE INTO tool_calls (seq, turn, agent, model_call, call_id, name, memory_edit, arguments, arguments_object, started_at) VALUES (?1, ?2, ?3, (SELECT max(seq) FROM model_calls WHERE turn = ?2 AND agent = ?3), ?4, ?5, ?6, ?7, ?8, ?9)",
                params![seq as i64, s.turn, s.agent, s.call_id, s.name, memory_edit, s.arguments.inline, s.arguments.object, rfc3339(s.at)],
            )
            .map_err(self.err())?;
        ev.kind = if memory_edit {
            "memory_edit"
        } else {
            "tool_call"
        };
        ev.agent = Some(&s.agent);
        ev.name = Some(&s.name);
        ev.text = Some(Cow::Borrowed(&s.arguments.inline));
        ev.detail = Some(json!({"call_id": s.call_id, "arguments_object": s.arguments.object}));
        Ok(())
    }

    fn turn_origin<'r>(&mut self, o: &'r TurnOrigin, ev: &mut Event<'r>) -> Result<()> {
        let origin = (
            o.automation.clone(),
            o.occurrence,
            o.trigger.clone(),
            o.runner.clone(),
        );
        match self.pending.get_mut(&o.turn) {
            Some(row) => row.origin = Some(origin),
            None => {
                self.tx
                    .execute(
                        "UPDATE turns SET origin_automation = ?2, origin_occurrence = ?3, origin_trigger = ?4, origin_runner = ?5 WHERE turn = ?1",
                        params![o.turn, o.automation, rfc3339(o.occurrence), o.trigger, o.runner],
                    )
                    .map_err(self.err())?;
            }
        }
        ev.kind = "origin";
        ev.name = Some(&o.automation);
        ev.detail = Some(
            json!({"occurrence": rfc3339(o.occurrence), "trigger": o.trigger, "runner": o.runner, "pid": o.pid}),
        );
        Ok(())
    }

    fn turn_begun<'r>(&mut self, seq: u64, b: &'r TurnBegun, ev: &mut Event<'r>) -> Result<()> {
        if let Some(acc) = self.sessions.get_mut(&b.session) {
            acc.turns += 1;
        }
        for pin in &b.attachments {
            self.tx
                .execute(
                    "INSERT OR IGNORE INTO turn_attachments (turn, reference, name, media_type, size) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![b.turn, pin.reference, pin.name, pin.media_type, pin.size as i64],
                )
                .map_err(self.err())?;
        }
        self.pending.insert(b.turn.clone(), TurnRow::begun(seq, b));
        self.report.turns_added += 1;
        ev.kind = "request";
        ev.agent = Some(&b.agent);
        ev.name = Some(&b.mode);
        ev.text = Some(Cow::Borrowed(&b.request));
        if !b.inline_context.is_empty() || !b.attachments.is_empty() || b.retry_of.is_some() {
            ev.detail = Some(json!({
                "retry_of": b.retry_of,
                "inline_context": b.inline_context.iter().map(|c| json!({"label": c.label, "len": c.text.len, "object": c.text.object})).collect::<Vec<_>>(),
                "attachments": b.attachments.iter().map(|a| &a.reference).collect::<Vec<_>>(),
            }));
        }
        Ok(())
    }

    fn overrides<'r>(&mut self, o: &'r TurnOverrides, ev: &mut Event<'r>) -> Result<()> {
        ev.kind = "overrides";
        ev.name = o.model.as_deref();
        ev.text = o.system.as_deref().map(Cow::Borrowed);
        ev.detail = Some(json!({
            "model": o.model,
            "system": o.system,
            "options": o.options.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        }));
        Ok(())
    }

    fn rewind_boundary<'r>(&mut self, r: &'r RewindBoundary, ev: &mut Event<'r>) -> Result<()> {
        self.flush_session(&r.session)?;
        self.tx
            .execute(
                "UPDATE turns SET superseded = 1 WHERE session = ?1 AND seq >= (SELECT seq FROM turns WHERE turn = ?2)",
                params![r.session, r.target],
            )
            .map_err(self.err())?;
        ev.kind = "rewind";
        ev.agent = Some(&r.agent);
        ev.name = Some(&r.target);
        Ok(())
    }

    fn stop_requested<'r>(&mut self, s: &'r StopRequested, ev: &mut Event<'r>) -> Result<()> {
        match self.pending.get_mut(&s.turn) {
            Some(row) => row.stop_requested = true,
            None => {
                self.tx
                    .execute(
                        "UPDATE turns SET stop_requested = 1 WHERE turn = ?1",
                        [&s.turn],
                    )
                    .map_err(self.err())?;
            }
        }
        ev.kind = "stop_requested";
        ev.detail = Some(json!({"pid": s.pid}));
        Ok(())
    }

    fn tool_finished<'r>(&mut self, r: &'r ToolFinished, ev: &mut Event<'r>) -> Result<()> {
        self.tool_result(
            &r.turn,
            &r.call_id,
            &r.output,
            r.is_error,
            r.exit_code,
            Some(r.duration_ms),
            r.at,
        )?;
        ev.kind = "tool_result";
        ev.agent = Some(&r.agent);
        ev.name = Some(&r.name);
        ev.text = Some(Cow::Borrowed(&r.output.inline));
        ev.detail = Some(
            json!({"call_id": r.call_id, "is_error": r.is_error, "exit_code": r.exit_code, "duration_ms": r.duration_ms, "output_object": r.output.object, "output_len": r.output.len}),
        );
        Ok(())
    }

    fn tool_result_record<'r>(&mut self, r: &'r ToolResult, ev: &mut Event<'r>) -> Result<()> {
        self.tool_result(&r.turn, &r.call_id, &r.output, r.is_error, None, None, r.at)?;
        ev.kind = "tool_result";
        ev.agent = Some(&r.agent);
        ev.name = Some(&r.name);
        ev.text = Some(Cow::Borrowed(&r.output.inline));
        ev.detail = Some(
            json!({"call_id": r.call_id, "is_error": r.is_error, "output_object": r.output.object, "output_len": r.output.len}),
        );
        Ok(())
    }

    fn answer(&mut self, turn: &str, text: &str, bounded: Option<&Bounded>) -> Result<()> {
        if let Some(row) = self.pending.get_mut(turn) {
            row.add_answer(text);
            if let Some(b) = bounded {
                row.answer_object = b.object.clone();
                row.answer_len = Some(b.len);
            }
            return Ok(());
        }
        self.tx
            .execute(
                "UPDATE turns SET answer = CASE WHEN answer = '' OR ?2 = '' THEN answer || ?2 ELSE answer || char(10) || ?2 END WHERE turn = ?1",
                params![turn, text],
            )
            .map_err(self.err())?;
        if let Some(b) = bounded {
            self.tx
                .execute(
                    "UPDATE turns SET answer_object = ?2, answer_len = ?3 WHERE turn = ?1",
                    params![turn, b.object, b.len as i64],
                )
                .map_err(self.err())?;
        }
        Ok(())
    }

    fn end(&mut self, e: &TurnEnded) -> Result<()> {
        if let Some(mut row) = self.pending.remove(&e.turn) {
            row.end(e);
            return self.write_turn(&e.turn, &row);
        }
        // Exactly one terminal record per turn: a second one changes nothing.
        self.tx
            .execute(
                "UPDATE turns SET state = ?2, error = ?3, ended_at = ?4, duration_ms = ?5 - CAST(round((julianday(started_at) - 2440587.5) * 86400000) AS INTEGER), prompt_tokens = ?6, completion_tokens = ?7, model_calls = ?8, usage_complete = ?9 WHERE turn = ?1 AND ended_at IS NULL",
                params![e.turn, e.state.as_str(), e.error, rfc3339(e.at), e.at, e.usage.prompt_tokens as i64, e.usage.completion_tokens as i64, e.usage.calls, e.usage.complete],
            )
            .map_err(self.err())?;
        Ok(())
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a tool result's fields, from either of its two record kinds"
    )]
    fn tool_result(
        &mut self,
        turn: &str,
        call_id: &str,
        output: &Bounded,
        is_error: bool,
        exit_code: Option<i32>,
        duration_ms: Option<u64>,
        at: Millis,
    ) -> Result<()> {
        self.tx
            .execute(
                "UPDATE tool_calls SET output = ?3, output_object = ?4, is_error = ?5, exit_code = ?6, duration_ms = ?7, ended_at = ?8 WHERE seq = (SELECT max(seq) FROM tool_calls WHERE turn = ?1 AND call_id = ?2)",
                params![turn, call_id, output.inline, output.object, is_error, exit_code, duration_ms.map(|d| d as i64), rfc3339(at)],
            )
            .map_err(self.err())?;
        Ok(())
    }

    fn write_turn(&mut self, turn: &str, t: &TurnRow) -> Result<()> {
        let err = sql_error(&self.path);
        let (automation, occurrence, trigger, runner) = match &t.origin {
            Some((a, o, tr, r)) => (
                Some(a.as_str()),
                Some(rfc3339(*o)),
                Some(tr.as_str()),
                Some(r.as_str()),
            ),
            None => (None, None, None, None),
        };
        self.stmts
            .turn
            .execute(params![
                turn,
                t.seq as i64,
                t.session,
                t.agent,
                t.mode,
                t.state,
                t.request,
                t.answer,
                t.answer_object,
                t.answer_len.map(|n| n as i64),
                t.error,
                rfc3339(t.started_at),
                t.ended_at.map(rfc3339),
                t.ended_at.map(|e| e - t.started_at),
                t.retry_of,
                t.stop_requested,
                automation,
                occurrence,
                trigger,
                runner,
                t.usage.map(|u| u.prompt_tokens as i64),
                t.usage.map(|u| u.completion_tokens as i64),
                t.usage.map(|u| u.calls),
                t.usage.map(|u| u.complete),
                t.detail.map(|d| d.cache_write_tokens as i64),
                t.detail.map(|d| d.cache_read_tokens as i64),
                t.detail.map(|d| cost::usd(d.cost_nanos)),
                t.detail.map(|d| d.priced_calls),
            ])
            .map_err(err)?;
        Ok(())
    }

    /// Writes the turns of `session` still open in memory, so that an update of its rows
    /// (a rewind) sees them.
    fn flush_session(&mut self, session: &str) -> Result<()> {
        let open: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, r)| r.session == session)
            .map(|(t, _)| t.clone())
            .collect();
        for turn in open {
            if let Some(row) = self.pending.remove(&turn) {
                self.write_turn(&turn, &row)?;
            }
        }
        Ok(())
    }

    /// Sets `sessions.name` of every session of the file to the name it goes by now: a
    /// session renamed since an earlier export is renamed in the file too (its rows keep the
    /// ledger's name, which other tables refer to).
    fn name_sessions(&self) -> Result<()> {
        let err = sql_error(&self.path);
        let names = axocoatl_store::names::Names::load(self.repo.root())?;
        let mut rows = self
            .tx
            .prepare("SELECT session FROM sessions")
            .map_err(&err)?;
        let sessions: Vec<String> = rows
            .query_map([], |r| r.get(0))
            .map_err(&err)?
            .collect::<std::result::Result<_, _>>()
            .map_err(&err)?;
        let mut set = self
            .tx
            .prepare("UPDATE sessions SET name = ?2 WHERE session = ?1 AND name IS NOT ?2")
            .map_err(&err)?;
        for session in &sessions {
            let name = names.shown(session).unwrap_or(session);
            set.execute(params![session, name]).map_err(&err)?;
        }
        Ok(())
    }

    /// Writes what is still in memory: turns that have not ended (as `running`) and the
    /// sessions' rows.
    pub fn finish(mut self) -> Result<SqliteReport> {
        let mut open: Vec<(String, TurnRow)> = self.pending.drain().collect();
        open.sort_by_key(|(_, r)| r.seq);
        for (turn, row) in open {
            self.write_turn(&turn, &row)?;
        }
        let err = sql_error(&self.path);
        let mut upsert = self
            .tx
            .prepare(
                "INSERT INTO sessions (session, created_at, last_activity, turns, agents) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(session) DO UPDATE SET
                   created_at = coalesce(min(sessions.created_at, excluded.created_at), sessions.created_at, excluded.created_at),
                   last_activity = coalesce(max(sessions.last_activity, excluded.last_activity), sessions.last_activity, excluded.last_activity),
                   turns = sessions.turns + excluded.turns,
                   agents = coalesce(excluded.agents, sessions.agents)",
            )
            .map_err(&err)?;
        for (session, acc) in &self.sessions {
            upsert
                .execute(params![
                    session,
                    acc.created_at.map(rfc3339),
                    acc.last_activity.map(rfc3339),
                    acc.turns as i64,
                    acc.agents,
                ])
                .map_err(&err)?;
        }
        drop(upsert);
        self.name_sessions()?;
        self.report.turns = self
            .tx
            .query_row("SELECT count(*) FROM turns", [], |r| r.get::<_, i64>(0))
            .map_err(&err)? as u64;
        Ok(self.report)
    }
}

fn bounded_detail(b: &Bounded) -> serde_json::Value {
    json!({"object": b.object, "len": b.len})
}

fn scope_name(s: axocoatl_store::ledger::record::AttachmentScope) -> &'static str {
    match s {
        axocoatl_store::ledger::record::AttachmentScope::Once => "once",
        axocoatl_store::ledger::record::AttachmentScope::Session => "session",
    }
}

/// Brings `automation_runs` up to date: records the table does not hold yet, and those it
/// holds before their end (a run record is replaced as its run goes on), are read again.
/// A run's turn is linked once the export holds that turn.
pub(crate) fn automation_runs(
    repo: &Repo,
    tx: &Transaction<'_>,
    scope: Option<&str>,
    path: &Path,
) -> Result<()> {
    let err = sql_error(path);
    let runs = Runs::new(repo);
    let automations = runs.automations()?;
    if automations.is_empty() {
        return Ok(());
    }
    let mut settled = tx
        .prepare("SELECT name FROM automation_runs WHERE automation = ?1 AND state NOT IN ('claimed', 'queued', 'running') AND (turn IS NOT NULL OR state IN ('skipped', 'interrupted'))")
        .map_err(&err)?;
    let mut has_turn = tx
        .prepare("SELECT 1 FROM turns WHERE turn = ?1")
        .map_err(&err)?;
    let mut has_session = tx
        .prepare("SELECT 1 FROM sessions WHERE session = ?1")
        .map_err(&err)?;
    let mut upsert = tx
        .prepare(
            "INSERT OR REPLACE INTO automation_runs (automation, name, trigger, occurrence, state, session, turn, runner, runner_pid, claimed_at, started_at, ended_at, reason, skipped) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .map_err(&err)?;
    for automation in automations {
        let done: std::collections::HashSet<String> = settled
            .query_map([&automation], |r| r.get::<_, String>(0))
            .map_err(&err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(&err)?;
        for name in runs.names(&automation)? {
            if done.contains(&name) {
                continue;
            }
            // An unreadable record (torn, newer) is `automations runs`' to report.
            let Ok(r) = runs.read(&automation, &name).record else {
                continue;
            };
            if scope.is_some_and(|s| r.session.as_deref() != Some(s)) {
                continue;
            }
            let turn = match &r.turn {
                Some(t) if has_turn.exists([t]).map_err(&err)? => Some(t.clone()),
                _ => None,
            };
            let session = match &r.session {
                Some(s) if has_session.exists([s]).map_err(&err)? => Some(s.clone()),
                _ => None,
            };
            upsert
                .execute(params![
                    automation,
                    name,
                    match r.trigger {
                        Trigger::Schedule => "schedule",
                        Trigger::Manual => "manual",
                    },
                    rfc3339(r.occurrence),
                    r.state.as_str(),
                    session,
                    turn,
                    r.runner.kind,
                    r.runner.pid,
                    rfc3339(r.claimed_at),
                    r.started_at.map(rfc3339),
                    r.ended_at.map(rfc3339),
                    r.reason,
                    r.span.and_then(|s| s.count).map(|c| c as i64),
                ])
                .map_err(&err)?;
        }
    }
    Ok(())
}
