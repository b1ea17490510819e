//! Automations: scheduled turns, each occurrence claimed exactly once, every run on record.
//!
//! An occurrence's logical identity is (automation id, scheduled time in UTC). A runner
//! (`axocoatl automations tick` from cron, `serve`'s scheduler, or several of them at once)
//! claims an occurrence durably and exclusively before running it (the store's
//! [`Runs::claim`]); whoever loses the claim does nothing. The record then gets the turn,
//! the outcome and the times. A claimed occurrence whose runner died is recorded
//! `interrupted` by the next runner and never run again.
//!
//! - [`run_due`]: every due occurrence of every enabled automation, once, with the catch-up
//!   rules ([`plan`]); what `tick` runs and what `serve`'s scheduler calls.
//! - [`run_manual`]: `automations run ID`, recorded as manual.
//! - [`status`]: the schedule, next occurrences and last run of each automation (`list`,
//!   and `agents status` of `serve`).
//! - [`runs`]: the run history.

pub mod plan;
mod runner;

use axocoatl_store::automation::{RunRecord, RunState, Runs};

use crate::clock::Millis;
use crate::config::{AutomationConfig, CatchUp, Overlap};
use crate::error::{Result, RuntimeError};
use crate::workspace::Workspace;

pub use crate::schedule::Schedule;
pub use runner::{run_due, run_due_one, run_manual, settle, Handled, ManualRun};

/// Which kind of runner claimed an occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnerKind {
    /// `axocoatl automations tick`.
    Tick,
    /// `axocoatl serve`'s scheduler.
    Serve,
    /// `axocoatl automations run`.
    Manual,
}

impl RunnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Tick => "tick",
            RunnerKind::Serve => "serve",
            RunnerKind::Manual => "manual",
        }
    }
}

/// What an automation sends its request to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Agent(String),
    Workflow(String),
}

/// The session an automation's turns go to: `session:`, else one named after it.
pub fn session_of(auto: &AutomationConfig) -> String {
    auto.session.clone().unwrap_or_else(|| auto.id.clone())
}

fn target_of(auto: &AutomationConfig) -> Target {
    match (&auto.agent, &auto.workflow) {
        (_, Some(flow)) => Target::Workflow(flow.clone()),
        (Some(agent), None) => Target::Agent(agent.clone()),
        // Validation requires one of them; a config built in code may lack both.
        (None, None) => Target::Agent(String::new()),
    }
}

/// An automation as `list` and `agents status` show it.
#[derive(Clone, Debug)]
pub struct Status {
    pub id: String,
    pub enabled: bool,
    pub schedule: String,
    /// The IANA zone name (or `local` when the machine's zone has none).
    pub timezone: String,
    /// Whether the zone is the machine's local one (no `timezone:` in the YAML).
    pub local_zone: bool,
    pub target: Target,
    pub session: String,
    pub catch_up: CatchUp,
    pub catch_up_window_secs: u64,
    pub overlap: Overlap,
    /// The next occurrences after now (UTC), with their local spelling; none when disabled.
    pub next: Vec<Occurrence>,
    /// The newest record (by occurrence), if any.
    pub last: Option<RunRecord>,
}

/// An occurrence in UTC and in the automation's zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occurrence {
    pub utc: Millis,
    /// RFC 9557: `2026-01-05T09:00:00+01:00[Europe/Berlin]`.
    pub local: String,
    /// For people: `2026-01-05 09:00:00 CET`.
    pub local_short: String,
}

/// The schedule of every configured automation, with its next `upcoming` occurrences after
/// `now` and its last run.
pub fn status(ws: &Workspace, now: Millis, upcoming: usize) -> Result<Vec<Status>> {
    let config = ws.config()?;
    let runs = Runs::new(ws.repo());
    let mut out = Vec::with_capacity(config.automations.len());
    for auto in &config.automations {
        let schedule = schedule_of(auto)?;
        let next = if auto.enabled {
            schedule
                .upcoming(now, upcoming)
                .into_iter()
                .map(|utc| Occurrence {
                    utc,
                    local: schedule.local_rfc9557(utc),
                    local_short: schedule.local_short(utc),
                })
                .collect()
        } else {
            Vec::new()
        };
        let last = runs
            .list(&auto.id, Some(1))?
            .into_iter()
            .next()
            .and_then(|l| l.record.ok());
        out.push(Status {
            id: auto.id.clone(),
            enabled: auto.enabled,
            schedule: auto.schedule.clone(),
            timezone: schedule.zone_name().to_owned(),
            local_zone: schedule.is_local_zone(),
            target: target_of(auto),
            session: session_of(auto),
            catch_up: auto.catch_up,
            catch_up_window_secs: auto.catch_up_window_secs,
            overlap: auto.overlap,
            next,
            last,
        });
    }
    Ok(out)
}

/// The schedule of an automation (validated with the config, so an error here is rare:
/// the zone database changed underneath).
pub fn schedule_of(auto: &AutomationConfig) -> Result<Schedule> {
    Schedule::new(&auto.schedule, auto.timezone.as_deref()).map_err(|message| {
        RuntimeError::Invalid {
            message: format!("automation {:?}: {message}", auto.id),
            hint: crate::error::Next::FixSchedule,
        }
    })
}

/// A run record as the history shows it.
#[derive(Clone, Debug)]
pub struct RunView {
    pub record: RunRecord,
    /// For a record that is not terminal: whether its runner still holds it.
    pub runner_alive: Option<bool>,
    /// A record file that could not be read (the record is then a placeholder).
    pub problem: Option<String>,
    pub path: std::path::PathBuf,
}

impl RunView {
    /// From claim (or start) to end, when it ended.
    pub fn duration_ms(&self) -> Option<i64> {
        let r = &self.record;
        if r.state == RunState::Skipped {
            return None;
        }
        let start = r.started_at.unwrap_or(r.claimed_at);
        r.ended_at.map(|e| (e - start).max(0))
    }
}

/// The run history: of one automation, or of every automation with records (also ones no
/// longer configured), oldest first; the newest `limit` when given. Runs whose runner died
/// are recorded `interrupted` first (as any runner would).
pub fn runs(
    ws: &Workspace,
    automation: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<RunView>> {
    let store = Runs::new(ws.repo());
    let ids = match automation {
        Some(id) => {
            let known = store.automations()?;
            let configured = ws
                .config()
                .map(|c| c.automations.iter().any(|a| a.id == id))
                .unwrap_or(false);
            if !configured && !known.iter().any(|k| k == id) {
                let mut names: Vec<String> = ws
                    .config()
                    .map(|c| c.automations.iter().map(|a| a.id.clone()).collect())
                    .unwrap_or_default();
                names.extend(known);
                names.sort();
                names.dedup();
                return Err(RuntimeError::UnknownAutomation {
                    id: id.to_owned(),
                    known: names,
                });
            }
            vec![id.to_owned()]
        }
        None => {
            // Configured automations too: their pre-1.0 records may not be copied yet.
            let mut ids = store.automations()?;
            if let Ok(c) = ws.config() {
                ids.extend(c.automations.iter().map(|a| a.id.clone()));
            }
            ids.sort();
            ids.dedup();
            ids
        }
    };
    let mut out = Vec::new();
    for id in &ids {
        store.adopt_legacy(id)?;
        runner::settle(ws, id)?;
        for listed in store.list(id, limit)? {
            let (record, problem) = match listed.record {
                Ok(r) => (r, None),
                Err(p) => (placeholder(id, &listed.path), Some(p)),
            };
            let record = waited(ws, record)?;
            let runner_alive =
                (!record.state.is_terminal()).then(|| store.runner_alive(&listed.path));
            out.push(RunView {
                record,
                runner_alive,
                problem,
                path: listed.path,
            });
        }
    }
    out.sort_by(|a, b| {
        (a.record.occurrence, &a.record.automation, &a.path).cmp(&(
            b.record.occurrence,
            &b.record.automation,
            &b.path,
        ))
    });
    if let Some(limit) = limit {
        let skip = out.len().saturating_sub(limit);
        out.drain(..skip);
    }
    Ok(out)
}

/// A run whose turn waited for approval, as its turn stands now: still `waiting`, or how
/// the turn ended once it was answered (the record file keeps `waiting`: it is the
/// runner's, and the ledger says the rest).
fn waited(ws: &Workspace, mut record: RunRecord) -> Result<RunRecord> {
    let Some(turn) = record
        .turn
        .clone()
        .filter(|_| record.state == RunState::Waiting)
    else {
        return Ok(record);
    };
    let projection = crate::history::Projection::of(
        ws.repo(),
        crate::history::Scope::Prefix(&turn),
        crate::history::Want::TURNS,
    )?;
    let Some(t) = projection.turn(&turn) else {
        return Ok(record);
    };
    use crate::history::ViewState;
    let ended = match t.state {
        ViewState::Completed => RunState::Completed,
        ViewState::Failed => RunState::Failed,
        ViewState::Stopped => RunState::Stopped,
        ViewState::Interrupted => RunState::Interrupted,
        ViewState::Waiting | ViewState::Running => return Ok(record),
    };
    record.state = ended;
    record.ended_at = t.ended_at.or(record.ended_at);
    record.reason = match (&t.error, ended) {
        (Some(e), _) => Some(format!("after waiting for approval: {e}")),
        (None, _) => Some("after waiting for approval".into()),
    };
    Ok(record)
}

/// Stands in for a record file that cannot be read, so the listing still shows it.
fn placeholder(automation: &str, path: &std::path::Path) -> RunRecord {
    let occurrence = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.get(..20))
        .and_then(|s| axocoatl_store::automation::parse_scheduled_name(&format!("{s}.json")))
        .unwrap_or(0);
    RunRecord {
        version: axocoatl_store::automation::RECORD_VERSION,
        automation: automation.to_owned(),
        trigger: axocoatl_store::automation::Trigger::Schedule,
        occurrence,
        nonce: None,
        span: None,
        state: RunState::Failed,
        claimed_at: occurrence,
        runner: axocoatl_store::automation::Runner {
            kind: "?".into(),
            pid: 0,
        },
        session: None,
        turn: None,
        started_at: None,
        ended_at: None,
        reason: None,
    }
}
