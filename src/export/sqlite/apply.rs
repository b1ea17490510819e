//! One ledger record at a time into the tables of `schema.rs`.
//!
//! Every record in scope becomes a row of `events`, record by record (its sequence number is
//! the row id, so events never change once written: [`events`]). The records of a turn are
//! folded into the turn ([`crate::fold`], the one reading of what they mean), which is
//! written whole ([`rows`]: its `turns` row, `subtasks`, `model_calls`, `tool_calls` and
//! `turn_attachments`) once its terminal append is folded, and as it stands (`running`)
//! when the export ends. A record of a turn an earlier export wrote (one that was running;
//! a warning recorded after its end) folds that turn again from its records in the ledger
//! (read through the indexes) and writes it again. A ledger of a million turns is mostly
//! inserts, and memory holds only the turns open at once.

mod approvals;
mod events;
mod rows;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use axocoatl_store::automation::{Runs, Trigger};
use axocoatl_store::ledger::record::{Millis, RewindBoundary};
use axocoatl_store::ledger::{Entry, Position, Record};
use axocoatl_store::Repo;
use rusqlite::{params, OptionalExtension, Statement, Transaction};
use serde_json::json;

use super::sql_error;
use crate::clock::rfc3339;
use crate::error::{Result, RuntimeError};
use crate::export::SqliteReport;
use crate::fold::{Rewind, TurnView};

/// Nanodollars as the dollars a `cost_usd` column holds.
fn usd(nanos: u64) -> f64 {
    nanos as f64 / crate::cost::NANOS_PER_USD
}

/// What a session's records in this export add to its row.
#[derive(Debug, Default)]
struct SessionAcc {
    created_at: Option<Millis>,
    last_activity: Option<Millis>,
    turns: u64,
    agents: Option<String>,
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
    /// Turns being folded, by id.
    pending: HashMap<String, TurnView>,
    /// Pending turns whose terminal record is folded: written at the next record that is not
    /// theirs (the cost records of the terminal append come right after it).
    ended: Vec<String>,
    sessions: HashMap<String, SessionAcc>,
    report: SqliteReport,
}

/// The columns of a `turns` row, in the order of [`Stmts::turn`]'s values. A turn written
/// again keeps its `superseded` mark.
const TURN_UPSERT: &str = "INSERT INTO turns (turn, seq, session, agent, mode, state, request, answer, answer_object, answer_len, error, started_at, ended_at, duration_ms, retry_of, stop_requested, origin_automation, origin_occurrence, origin_trigger, origin_runner, prompt_tokens, completion_tokens, model_calls, usage_complete, cache_write_tokens, cache_read_tokens, cost_usd, priced_calls, schema, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)
ON CONFLICT(turn) DO UPDATE SET seq = excluded.seq, session = excluded.session, agent = excluded.agent, mode = excluded.mode, state = excluded.state, request = excluded.request, answer = excluded.answer, answer_object = excluded.answer_object, answer_len = excluded.answer_len, error = excluded.error, started_at = excluded.started_at, ended_at = excluded.ended_at, duration_ms = excluded.duration_ms, retry_of = excluded.retry_of, stop_requested = excluded.stop_requested, origin_automation = excluded.origin_automation, origin_occurrence = excluded.origin_occurrence, origin_trigger = excluded.origin_trigger, origin_runner = excluded.origin_runner, prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens, model_calls = excluded.model_calls, usage_complete = excluded.usage_complete, cache_write_tokens = excluded.cache_write_tokens, cache_read_tokens = excluded.cache_read_tokens, cost_usd = excluded.cost_usd, priced_calls = excluded.priced_calls, schema = excluded.schema, value = excluded.value";

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
            turn: tx.prepare(TURN_UPSERT).map_err(&err)?,
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
            ended: Vec::new(),
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

    /// The session of a turn this export holds (being folded or written before); `None`
    /// for a turn out of scope or unknown (its begin record damaged).
    fn turn_session(&mut self, turn: &str) -> Result<Option<String>> {
        if let Some(t) = self.pending.get(turn) {
            return Ok(Some(t.session.clone()));
        }
        self.stored_session(turn)
    }

    /// The session of a turn the file holds.
    fn stored_session(&mut self, turn: &str) -> Result<Option<String>> {
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

    /// The session record `kind` of `record` belongs to in this export (empty: a record of
    /// no session, in an export of every session); `None` when it is out of scope.
    fn session_of(&mut self, kind: u16, record: &Record) -> Result<Option<String>> {
        if crate::fold::begins_turn(kind) {
            let session = record.session().filter(|s| self.in_scope(s));
            return Ok(session.map(str::to_owned));
        }
        if let Some(turn) = record.turn() {
            return self.turn_session(turn);
        }
        Ok(match record.session() {
            Some(s) => Some(s.to_owned()).filter(|s| self.in_scope(s)),
            None => self.scope.is_none().then(String::new),
        })
    }

    /// Applies one record (records out of scope, and of kinds this build does not know,
    /// are left out).
    pub fn apply(&mut self, entry: Entry) -> Result<()> {
        let (seq, pos) = (entry.seq, entry.pos);
        let Some(record) = entry.record else {
            self.report.unknown_kinds += 1;
            return Ok(());
        };
        let Some(session) = self.session_of(entry.kind, &record)? else {
            return Ok(());
        };
        if let Some(s) = record.session() {
            self.note_session(s, record.at());
        }
        self.event(seq, &record, &session)?;
        let turn = record.turn().map(str::to_owned);
        match &turn {
            Some(id) => self.fold(seq, pos, id, record)?,
            None => self.session_record(record)?,
        }
        self.write_ended(turn.as_deref())
    }

    /// Folds record `seq` (at `pos`) into its turn `id`: a turn begun now, one being
    /// folded, or one the file holds (folded again from the ledger first).
    fn fold(&mut self, seq: u64, pos: Position, id: &str, record: Record) -> Result<()> {
        let record = if self.pending.contains_key(id) {
            record
        } else if self.stored_session(id)?.is_some() {
            self.refold(&HashSet::from([id.as_bytes().to_vec()]), seq)?;
            record
        } else {
            match TurnView::start(record, pos, seq) {
                Ok(turn) => {
                    if let Some(acc) = self.sessions.get_mut(&turn.session) {
                        acc.turns += 1;
                    }
                    self.report.turns_added += 1;
                    self.pending.insert(id.to_owned(), turn);
                    return Ok(());
                }
                // Of a turn whose begin this export never read (damaged): its event only.
                Err(_) => return Ok(()),
            }
        };
        if let Some(t) = self.pending.get_mut(id) {
            t.fold(seq, record);
            if t.end_seq.is_some() && !self.ended.iter().any(|e| e == id) {
                self.ended.push(id.to_owned());
            }
        }
        Ok(())
    }

    /// Folds again, from their records in the ledger before record `before`, the turns
    /// `ids` the file holds, to go on folding them.
    fn refold(&mut self, ids: &HashSet<Vec<u8>>, before: u64) -> Result<()> {
        let walked = self.repo.reader().read_turns(ids)?;
        let entries = walked.entries.into_iter().filter(|e| e.seq < before);
        for t in crate::fold::fold_turns(entries, |id| ids.contains(id.as_bytes())) {
            if t.end_seq.is_some() {
                self.ended.push(t.turn.clone());
            }
            self.pending.insert(t.turn.clone(), t);
        }
        Ok(())
    }

    /// Folds again every turn of the file that `sql` selects (by id), from the ledger's
    /// records up to `upto`, and writes it again: a file of an older schema gets what this
    /// build writes.
    pub fn rewrite(&mut self, sql: &str, upto: u64) -> Result<()> {
        let ids: HashSet<Vec<u8>> = {
            let err = sql_error(&self.path);
            self.tx
                .prepare(sql)
                .map_err(&err)?
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(&err)?
                .map(|r| r.map(String::into_bytes))
                .collect::<rusqlite::Result<_>>()
                .map_err(&err)?
        };
        if ids.is_empty() {
            return Ok(());
        }
        self.refold(&ids, upto.saturating_add(1))?;
        let mut all: Vec<TurnView> = self.pending.drain().map(|(_, t)| t).collect();
        self.ended.clear();
        all.sort_by_key(|t| t.begin_seq);
        for t in &all {
            self.write_turn(t)?;
        }
        Ok(())
    }

    /// A record of a session rather than of a turn.
    fn session_record(&mut self, record: Record) -> Result<()> {
        match record {
            Record::RewindBoundary(r) => self.rewind(&r)?,
            Record::SessionAgents(s) => {
                if let Some(acc) = self.sessions.get_mut(&s.session) {
                    acc.agents = Some(json!(s.agents).to_string());
                }
            }
            Record::AttachmentAdded(a) => self.attachment_added(&a)?,
            Record::AttachmentRemoved(a) => self.attachment_removed(&a.reference, a.at)?,
            // Their events say all there is.
            _ => {}
        }
        Ok(())
    }

    /// Writes the ended turns (but `current`'s, whose terminal append may go on).
    fn write_ended(&mut self, current: Option<&str>) -> Result<()> {
        if self.ended.iter().all(|id| Some(id.as_str()) == current) {
            return Ok(());
        }
        let done: Vec<String> = self
            .ended
            .iter()
            .filter(|id| Some(id.as_str()) != current)
            .cloned()
            .collect();
        self.ended.retain(|id| Some(id.as_str()) == current);
        for id in done {
            if let Some(t) = self.pending.remove(&id) {
                self.write_turn(&t)?;
            }
        }
        Ok(())
    }

    /// A rewind marks the turns it supersedes ([`Rewind::supersedes`]), once the session's
    /// turns being folded are written.
    fn rewind(&mut self, r: &RewindBoundary) -> Result<()> {
        self.flush_session(&r.session)?;
        let err = sql_error(&self.path);
        let target: Option<i64> = self
            .tx
            .query_row(
                "SELECT seq FROM turns WHERE turn = ?1",
                [&r.target],
                |row| row.get(0),
            )
            .optional()
            .map_err(&err)?;
        let Some(target) = target else {
            return Ok(());
        };
        let rewind = Rewind {
            session: &r.session,
            target_seq: target as u64,
        };
        let turns: Vec<(String, i64)> = self
            .tx
            .prepare("SELECT turn, seq FROM turns WHERE session = ?1 AND superseded = 0")
            .map_err(&err)?
            .query_map([&r.session], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(&err)?
            .collect::<rusqlite::Result<_>>()
            .map_err(&err)?;
        let mut mark = self
            .tx
            .prepare("UPDATE turns SET superseded = 1 WHERE turn = ?1")
            .map_err(&err)?;
        for (turn, seq) in turns {
            if rewind.supersedes(&r.session, seq as u64) {
                mark.execute([&turn]).map_err(&err)?;
            }
        }
        Ok(())
    }

    /// Writes the turns of `session` being folded, so that a change of its rows (a rewind)
    /// sees them.
    fn flush_session(&mut self, session: &str) -> Result<()> {
        let ids: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, t)| t.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        let mut open: Vec<TurnView> = ids
            .iter()
            .filter_map(|id| self.pending.remove(id))
            .collect();
        open.sort_by_key(|t| t.begin_seq);
        for t in &open {
            self.ended.retain(|id| *id != t.turn);
            self.write_turn(t)?;
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

    /// Writes what is still in memory: turns being folded (ended, or `running`) and the
    /// sessions' rows.
    pub fn finish(mut self) -> Result<SqliteReport> {
        let mut open: Vec<TurnView> = self.pending.drain().map(|(_, t)| t).collect();
        open.sort_by_key(|t| t.begin_seq);
        for t in &open {
            self.write_turn(t)?;
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
