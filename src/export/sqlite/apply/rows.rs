//! A folded turn's rows: `turns`, `subtasks`, `model_calls`, `tool_calls` and
//! `turn_attachments`, written whole each time the turn is written (a turn written again,
//! refolded, replaces its rows; the `superseded` mark a rewind set stays).
//!
//! A turn's row counts what its own agent used, as `axocoatl usage` does; each subtask's
//! row what its worker used. So summing `turns` by `agent` with `subtasks` by `worker` gives
//! `usage --by agent`, and nothing is counted twice.

use axocoatl_store::ledger::record::{PlannedSubtask, UsageDetail};
use rusqlite::params;
use serde_json::json;

use super::events::MEMORY_EDIT_PREFIX;
use super::{usd, Applier};
use crate::clock::rfc3339;
use crate::error::Result;
use crate::export::sqlite::sql_error;
use crate::fold::{SubtaskView, TurnView, ViewState};

/// Rows a subtask id leaves free after the id of the record that opened them: a plan's
/// subtasks take consecutive ids after it, so row ids follow the ledger and an export
/// refreshed into holds the ids a new one holds.
const ROWS_PER_RECORD: u64 = 1 << 20;

/// One row of `subtasks`: a planned subtask, what ran of it, or both.
struct SubtaskRow<'t> {
    id: i64,
    subtask: &'t str,
    worker: &'t str,
    planned: Option<&'t PlannedSubtask>,
    ran: Option<&'t SubtaskView>,
}

/// The rows of a turn's subtasks: each planned one (`planned` until it starts), each run
/// matched to the latest planned row of its id not yet run, and runs no plan named.
fn subtask_rows(t: &TurnView) -> Vec<SubtaskRow<'_>> {
    let mut rows: Vec<SubtaskRow<'_>> = Vec::new();
    if let Some(plan) = &t.plan {
        for (i, p) in plan.subtasks.iter().enumerate() {
            rows.push(SubtaskRow {
                id: row_id(plan.seq, i as u64),
                subtask: &p.id,
                worker: &p.worker,
                planned: Some(p),
                ran: None,
            });
        }
    }
    for s in &t.subtasks {
        let row = rows
            .iter_mut()
            .rev()
            .find(|r| r.subtask == s.subtask && r.ran.is_none());
        match row {
            Some(r) => {
                r.worker = &s.worker;
                r.ran = Some(s);
            }
            None => rows.push(SubtaskRow {
                id: row_id(s.seq, 0),
                subtask: &s.subtask,
                worker: &s.worker,
                planned: None,
                ran: Some(s),
            }),
        }
    }
    rows
}

fn row_id(seq: u64, i: u64) -> i64 {
    (seq * ROWS_PER_RECORD + i % ROWS_PER_RECORD) as i64
}

/// `cache_write_tokens`, `cache_read_tokens`, `cost_usd` and `priced_calls` of `d`.
fn detail_columns(d: Option<UsageDetail>) -> (Option<i64>, Option<i64>, Option<f64>, Option<u32>) {
    (
        d.map(|d| d.cache_write_tokens as i64),
        d.map(|d| d.cache_read_tokens as i64),
        d.map(|d| usd(d.cost_nanos)),
        d.map(|d| d.priced_calls),
    )
}

impl Applier<'_> {
    /// Writes turn `t` whole, replacing what an earlier write of it left.
    pub(super) fn write_turn(&mut self, t: &TurnView) -> Result<()> {
        self.turn_row(t)?;
        for pin in &t.attachments {
            self.tx
                .execute(
                    "INSERT OR IGNORE INTO turn_attachments (turn, reference, name, media_type, size) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![t.turn, pin.reference, pin.name, pin.media_type, pin.size as i64],
                )
                .map_err(self.err())?;
        }
        self.call_rows(t)?;
        self.tool_rows(t)?;
        self.approval_rows(t)?;
        self.subtask_rows(t)
    }

    fn turn_row(&mut self, t: &TurnView) -> Result<()> {
        let err = sql_error(&self.path);
        let o = t.origin.as_ref();
        let usage = t.own.usage;
        let (write, read, cost, priced) = detail_columns(t.own.detail);
        let state = if t.state == ViewState::Running && t.waits() {
            ViewState::Waiting
        } else {
            t.state
        };
        self.stmts
            .turn
            .execute(params![
                t.turn,
                t.begin_seq as i64,
                t.session,
                t.agent,
                t.mode,
                state.as_str(),
                t.request,
                t.output,
                t.output_object,
                t.output_len.map(|n| n as i64),
                t.error,
                rfc3339(t.started_at),
                t.ended_at.map(rfc3339),
                t.ended_at.map(|e| e - t.started_at),
                t.retry_of,
                t.stop_requested,
                o.map(|o| &o.automation),
                o.map(|o| rfc3339(o.occurrence)),
                o.map(|o| &o.trigger),
                o.map(|o| &o.runner),
                usage.map(|u| u.prompt_tokens as i64),
                usage.map(|u| u.completion_tokens as i64),
                usage.map(|u| u.calls),
                usage.map(|u| u.complete),
                write,
                read,
                cost,
                priced,
                t.schema.as_ref().map(|s| &s.object),
                t.value.as_ref().map(|v| v.to_string()),
            ])
            .map_err(err)?;
        Ok(())
    }

    fn call_rows(&self, t: &TurnView) -> Result<()> {
        let err = self.err();
        for c in &t.calls {
            self.tx
                .execute(
                    "INSERT OR REPLACE INTO model_calls (seq, turn, agent, provider, model, reserved_tokens, prompt_tokens, completion_tokens, finish_reason, at, cache_write_tokens, cache_read_tokens, cost_usd) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    params![c.seq as i64, t.turn, c.agent, c.provider, c.model, c.reserved_tokens as i64, c.prompt_tokens.map(|n| n as i64), c.completion_tokens.map(|n| n as i64), c.finish_reason, rfc3339(c.at), c.cache_write_tokens.map(|n| n as i64), c.cache_read_tokens.map(|n| n as i64), c.cost_nanos.map(usd)],
                )
                .map_err(&err)?;
        }
        Ok(())
    }

    fn tool_rows(&self, t: &TurnView) -> Result<()> {
        let err = self.err();
        for x in &t.tools {
            let ended = x.ended_at.is_some();
            self.tx
                .execute(
                    "INSERT OR REPLACE INTO tool_calls (seq, turn, agent, model_call, call_id, name, memory_edit, arguments, arguments_object, output, output_object, is_error, exit_code, duration_ms, started_at, ended_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                    params![x.seq as i64, t.turn, x.agent, x.call_seq.map(|s| s as i64), x.call_id, x.name, x.name.starts_with(MEMORY_EDIT_PREFIX), x.arguments, x.arguments_object, x.output, x.output_object, ended.then_some(x.is_error), x.exit_code, x.duration_ms.map(|d| d as i64), rfc3339(x.started_at), x.ended_at.map(rfc3339)],
                )
                .map_err(&err)?;
        }
        Ok(())
    }

    fn subtask_rows(&self, t: &TurnView) -> Result<()> {
        let err = self.err();
        self.tx
            .execute("DELETE FROM subtasks WHERE turn = ?1", [&t.turn])
            .map_err(&err)?;
        for row in subtask_rows(t) {
            let p = row.planned;
            let s = row.ran;
            let state = s.map_or("planned", |s| s.state.as_str());
            let usage = s.and_then(|s| s.usage);
            let (write, read, cost, priced) = detail_columns(s.and_then(|s| s.detail));
            self.tx
                .execute(
                    "INSERT INTO subtasks (id, turn, subtask, worker, role, task, depends_on, state, error, output, output_object, prompt_tokens, completion_tokens, model_calls, started_at, ended_at, cache_write_tokens, cache_read_tokens, cost_usd, priced_calls) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
                    params![
                        row.id,
                        t.turn,
                        row.subtask,
                        row.worker,
                        p.and_then(|p| p.role.as_deref()),
                        p.map(|p| &p.task),
                        p.map(|p| json!(p.depends_on).to_string()),
                        state,
                        s.and_then(|s| s.error.as_deref()),
                        s.filter(|s| s.ended_at.is_some()).map(|s| &s.output),
                        s.and_then(|s| s.output_object.as_deref()),
                        usage.map(|u| u.prompt_tokens as i64),
                        usage.map(|u| u.completion_tokens as i64),
                        usage.map(|u| u.calls),
                        s.map(|s| rfc3339(s.started_at)),
                        s.and_then(|s| s.ended_at).map(rfc3339),
                        write,
                        read,
                        cost,
                        priced,
                    ],
                )
                .map_err(&err)?;
        }
        Ok(())
    }
}
