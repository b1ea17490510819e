//! Running occurrences: settle the runs of dead runners, plan, claim, run the turn, record.
//!
//! Per automation, under its schedule lock (held only while deciding): runs whose runner
//! died are recorded (`interrupted`, or the state their turn reached), the occurrences due
//! are planned by the catch-up rules, skipped ones are recorded, and the next one to run is
//! claimed. Its turn then runs under the automation's run lock, outside the schedule lock.
//! A runner that finds the run lock held (the previous occurrence still running) records
//! the occurrence `skipped` (`overlap: skip`) or claims it `queued` and waits for the lock
//! (`overlap: queue`). A manual run takes the run lock first and then claims.

use axocoatl_store::automation::{
    Claim, RunRecord, RunState, Runner, Runs, Span, TakeOver, Trigger, RECORD_VERSION,
};
use axocoatl_store::ledger::record::TurnState;
use axocoatl_store::ledger::{Position, Record};
use axocoatl_store::lock::Lock;

use super::plan::{plan, Plan, Policy};
use super::{schedule_of, session_of, target_of, RunnerKind, Target};
use crate::clock::{self, Millis};
use crate::config::{AutomationConfig, Overlap};
use crate::engine::{self, SendOptions, TurnEvent, TurnOrigin, TurnOutcome};
use crate::error::{Result, RuntimeError};
use crate::ids;
use crate::provider::Cancel;
use crate::workspace::Workspace;

/// What a runner did with one occurrence (or span of skipped ones).
#[derive(Clone, Debug)]
pub struct Handled {
    /// The final record (terminal).
    pub record: RunRecord,
    /// The turn's outcome, when one ran.
    pub outcome: Option<TurnOutcome>,
}

/// Runs every due occurrence of every enabled automation once, with the catch-up and
/// overlap rules, as of `now`. One automation's error does not keep the others from
/// running: each gets its own result, in config order.
pub fn run_due(
    ws: &Workspace,
    now: Millis,
    runner: RunnerKind,
    cancel: &Cancel,
    report: &mut dyn FnMut(&Handled),
) -> Result<Vec<(String, Result<Vec<Handled>>)>> {
    let config = ws.config()?;
    let mut out = Vec::new();
    for auto in config.automations.iter().filter(|a| a.enabled) {
        if cancel.is_cancelled() {
            break;
        }
        let result = run_due_one(ws, auto, now, runner, cancel, report);
        out.push((auto.id.clone(), result));
    }
    Ok(out)
}

/// [`run_due`] for one automation (`serve` may run automations on threads of their own).
pub fn run_due_one(
    ws: &Workspace,
    auto: &AutomationConfig,
    now: Millis,
    runner: RunnerKind,
    cancel: &Cancel,
    report: &mut dyn FnMut(&Handled),
) -> Result<Vec<Handled>> {
    let runs = Runs::new(ws.repo());
    let schedule = schedule_of(auto)?;
    let me = Runner {
        kind: runner.as_str().to_owned(),
        pid: std::process::id(),
    };
    let mut handled = Vec::new();
    let mut push = |h: Handled, handled: &mut Vec<Handled>| {
        report(&h);
        handled.push(h);
    };
    // A guard against planning the same occurrence twice (only a record written by hand
    // could make the plan stand still).
    let mut last_planned = None;
    while auto.enabled && !cancel.is_cancelled() {
        let mut guard = Some(runs.schedule_lock(&auto.id)?);
        // Pre-1.0 records of this automation count as its history (copied once).
        runs.adopt_legacy(&auto.id)?;
        for h in settle_locked(ws, &runs, &auto.id)? {
            push(h, &mut handled);
        }
        let after = planned_after(&runs, &auto.id, now)?;
        let policy = Policy {
            catch_up: auto.catch_up,
            window_secs: auto.catch_up_window_secs,
            max_runs: auto.catch_up_max_runs,
        };
        let Plan { skip, run } = plan(&schedule, policy, after, now);
        if let Some(span) = skip {
            let mut record = new_record(auto, Trigger::Schedule, span.last, &me);
            record.span = (span.first != span.last || span.count != Some(1)).then_some(Span {
                first: span.first,
                count: span.count,
            });
            let record = end_skipped(record, span.reason);
            if runs.record(&record)? {
                push(Handled::skipped(record), &mut handled);
            }
        }
        let Some(occurrence) = run.filter(|&o| last_planned != Some(o)) else {
            break;
        };
        last_planned = Some(occurrence);
        let record = new_record(auto, Trigger::Schedule, occurrence, &me);
        let (claim, run_lock) = match runs.run_lock(&auto.id, false)? {
            Some(run_lock) => match runs.claim(&record)? {
                Some(claim) => (claim, run_lock),
                // Decided under the schedule lock, so only a record written by hand
                // could be in the way; it counts as on record.
                None => continue,
            },
            None => match auto.overlap {
                Overlap::Skip => {
                    let record = end_skipped(record, still_running(&runs, &auto.id));
                    if runs.record(&record)? {
                        push(Handled::skipped(record), &mut handled);
                    }
                    continue;
                }
                Overlap::Queue => {
                    let mut queued = record;
                    queued.state = RunState::Queued;
                    let Some(mut claim) = runs.claim(&queued)? else {
                        continue;
                    };
                    guard.take();
                    let Some(run_lock) = runs.run_lock(&auto.id, true)? else {
                        continue;
                    };
                    let mut claimed = claim.record().clone();
                    claimed.state = RunState::Claimed;
                    claim.update(claimed)?;
                    (claim, run_lock)
                }
            },
        };
        drop(guard);
        let h = execute(ws, auto, claim, run_lock, cancel, &mut |_| {})?;
        push(h, &mut handled);
    }
    Ok(handled)
}

impl Handled {
    fn skipped(record: RunRecord) -> Handled {
        Handled {
            record,
            outcome: None,
        }
    }
}

/// The time after which the automation `id`'s occurrences are planned: its last scheduled
/// occurrence, or the minute a runner first saw it.
fn planned_after(runs: &Runs, id: &str, now: Millis) -> Result<Millis> {
    let since = match runs.since(id)? {
        Some(s) => s,
        None => runs.mark_since(id, now)?,
    };
    // Occurrences count from the minute a runner first saw the automation, so the first
    // cron tick of a minute still meets that minute's occurrence.
    let origin = since.div_euclid(60_000) * 60_000 - 1;
    Ok(runs.last_scheduled(id)?.map_or(origin, |l| l.max(origin)))
}

/// Why an occurrence is skipped while the previous run holds the run lock (its note says
/// which run it is).
fn still_running(runs: &Runs, id: &str) -> String {
    let running = runs.run_lock_note(id);
    let running = running.trim();
    if running.is_empty() {
        "the previous run was still running".to_owned()
    } else {
        format!("the previous run was still running ({running})")
    }
}

/// A manual run's result.
#[derive(Debug)]
pub struct ManualRun {
    pub handled: Handled,
}

/// Runs automation `id` now, recorded as a manual run. Refused (before anything is
/// recorded) when its target cannot run yet or, unless `wait`, while another of its runs
/// is running.
pub fn run_manual(
    ws: &Workspace,
    id: &str,
    wait: bool,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<ManualRun> {
    let config = ws.config()?;
    let auto = config
        .automations
        .iter()
        .find(|a| a.id == id)
        .ok_or_else(|| RuntimeError::UnknownAutomation {
            id: id.to_owned(),
            known: config.automations.iter().map(|a| a.id.clone()).collect(),
        })?;
    agent_of(config, auto)?;
    let runs = Runs::new(ws.repo());
    let Some(run_lock) = runs.run_lock(&auto.id, wait)? else {
        return Err(RuntimeError::AutomationBusy {
            automation: auto.id.clone(),
            running: runs.run_lock_note(&auto.id).trim().to_owned(),
        });
    };
    let me = Runner {
        kind: RunnerKind::Manual.as_str().to_owned(),
        pid: std::process::id(),
    };
    let guard = runs.schedule_lock(&auto.id)?;
    settle_locked(ws, &runs, &auto.id)?;
    let mut record = new_record(auto, Trigger::Manual, clock::now(), &me);
    record.nonce = Some(ids::new_id());
    let claim = runs.claim(&record)?.ok_or_else(|| RuntimeError::Invalid {
        message: format!("manual run {} is already on record", record.file_name()),
        hint: "try again".into(),
    })?;
    drop(guard);
    let handled = execute(ws, auto, claim, run_lock, cancel, sink)?;
    Ok(ManualRun { handled })
}

/// Records the runs of automation `id` whose runner died (for commands that show runs).
pub fn settle(ws: &Workspace, id: &str) -> Result<Vec<Handled>> {
    let runs = Runs::new(ws.repo());
    if runs.open_names(id)?.is_empty() {
        return Ok(Vec::new());
    }
    let _guard = runs.schedule_lock(id)?;
    settle_locked(ws, &runs, id)
}

/// Under the schedule lock: every open record whose runner is gone gets its end.
fn settle_locked(ws: &Workspace, runs: &Runs, id: &str) -> Result<Vec<Handled>> {
    let mut out = Vec::new();
    for name in runs.open_names(id)? {
        let TakeOver::Dead(claim) = runs.take_over(id, &name)? else {
            continue;
        };
        let mut record = claim.record().clone();
        let who = format!("{} {}", record.runner.kind, record.runner.pid);
        // The turn may have begun before its runner could record it, and may even have
        // ended: the ledger knows (its begin carries the occurrence).
        let (turn, ended) = turn_of(ws, &record)?;
        record.turn = turn;
        record.ended_at = Some(clock::now());
        record.state = RunState::Interrupted;
        record.reason = Some(match (&record.turn, ended) {
            (None, _) => format!("its runner ({who}) ended before the turn began"),
            (Some(_), Some((state, at))) if state != TurnState::Interrupted => {
                record.state = run_state(state);
                record.ended_at = Some(at);
                format!("its runner ({who}) ended after the turn, before recording it")
            }
            (Some(_), _) => format!("its runner ({who}) ended before the turn did"),
        });
        claim.finish(record.clone())?;
        out.push(Handled {
            record,
            outcome: None,
        });
    }
    Ok(out)
}

/// How a turn ended, from its terminal record.
type TurnEnd = (TurnState, Millis);

/// The turn of an open record whose runner died, and its terminal state if it has one. A
/// rare path (a runner died), so a scan of the ledger is fine.
fn turn_of(ws: &Workspace, record: &RunRecord) -> Result<(Option<String>, Option<TurnEnd>)> {
    // A turn whose process died is recorded interrupted here (as on any open).
    crate::session::recover_orphans(ws.repo())?;
    let trigger = trigger_word(record.trigger);
    let mut turn = record.turn.clone();
    let mut ended = None;
    for entry in ws.repo().ledger().scan(Position::START).flatten() {
        match &entry.record {
            Some(Record::TurnOrigin(o))
                if turn.is_none()
                    && o.automation == record.automation
                    && o.occurrence == record.occurrence
                    && o.trigger == trigger
                    && o.pid == record.runner.pid =>
            {
                turn = Some(o.turn.clone());
            }
            Some(Record::TurnEnded(e)) if turn.as_deref() == Some(e.turn.as_str()) => {
                ended = Some((e.state, e.at));
            }
            _ => {}
        }
    }
    Ok((turn, ended))
}

fn trigger_word(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::Schedule => "schedule",
        Trigger::Manual => "manual",
    }
}

fn new_record(
    auto: &AutomationConfig,
    trigger: Trigger,
    occurrence: Millis,
    me: &Runner,
) -> RunRecord {
    RunRecord {
        version: RECORD_VERSION,
        automation: auto.id.clone(),
        trigger,
        occurrence,
        nonce: None,
        span: None,
        state: RunState::Claimed,
        claimed_at: clock::now(),
        runner: me.clone(),
        session: Some(session_of(auto)),
        turn: None,
        started_at: None,
        ended_at: None,
        reason: None,
    }
}

fn end_skipped(mut record: RunRecord, reason: String) -> RunRecord {
    record.state = RunState::Skipped;
    record.ended_at = Some(record.claimed_at);
    record.reason = Some(reason);
    record
}

fn run_state(state: TurnState) -> RunState {
    match state {
        TurnState::Completed => RunState::Completed,
        TurnState::Failed => RunState::Failed,
        TurnState::Stopped => RunState::Stopped,
        TurnState::Interrupted => RunState::Interrupted,
    }
}

/// The agent an automation's turns go to: its `agent:`, or the coordinator leading its
/// `workflow:` (a turn to a coordinator runs its workflow).
fn agent_of(config: &crate::config::Config, auto: &AutomationConfig) -> Result<String> {
    match target_of(auto) {
        Target::Agent(agent) => Ok(agent),
        Target::Workflow(flow) => config
            .workflows
            .iter()
            .find(|w| w.id == flow)
            .map(|w| w.entry_point.clone())
            .ok_or_else(|| RuntimeError::Invalid {
                message: format!("automation {:?}: workflow {flow:?} is not defined", auto.id),
                hint: crate::error::Next::Validate,
            }),
    }
}

/// Runs a claimed occurrence's turn under the run lock and records how it ended.
fn execute(
    ws: &Workspace,
    auto: &AutomationConfig,
    mut claim: Claim,
    mut run_lock: Lock,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<Handled> {
    let record = claim.record().clone();
    run_lock.write_note(&format!(
        "occurrence {} runner {} {}",
        clock::rfc3339(record.occurrence),
        record.runner.kind,
        record.runner.pid
    ))?;
    let mut update_error = None;
    // The session as people name it now (a renamed or removed one is followed).
    let session = ws
        .session_for_turn(Some(&session_of(auto)))
        .map(|(ledger, _)| ledger);
    let result = match (agent_of(ws.config()?, auto), session) {
        (Err(e), _) | (_, Err(e)) => Err(e),
        (Ok(agent), Ok(session)) => {
            let opts = SendOptions {
                session,
                agent: Some(agent),
                message: auto.request.clone(),
                // Behind a turn someone else runs in the session: the occurrence waits.
                wait: true,
                origin: Some(TurnOrigin {
                    automation: auto.id.clone(),
                    occurrence: record.occurrence,
                    trigger: trigger_word(record.trigger).to_owned(),
                    runner: record.runner.kind.clone(),
                }),
                ..SendOptions::default()
            };
            let mut on_event = |ev: TurnEvent<'_>| {
                if let TurnEvent::Begun { turn, .. } = &ev {
                    let mut running = claim.record().clone();
                    running.state = RunState::Running;
                    running.turn = Some(turn.to_string());
                    running.started_at = Some(clock::now());
                    if let Err(e) = claim.update(running) {
                        update_error = Some(e);
                    }
                }
                sink(ev);
            };
            engine::send(ws, opts, cancel, &mut on_event)
        }
    };
    if let Some(e) = update_error {
        // The turn ran, but its record could not say so: leave the claim to be settled
        // from the ledger by the next runner, and report the error.
        drop(claim);
        return Err(e.into());
    }
    let mut end = claim.record().clone();
    end.ended_at = Some(clock::now());
    let outcome = match result {
        Ok(outcome) => {
            end.state = run_state(outcome.state);
            end.turn = Some(outcome.turn.clone());
            end.reason = outcome.error.clone();
            Some(outcome)
        }
        Err(crate::error::RuntimeError::Waiting { turn, calls, .. }) => {
            // The turn holds its session until a person answers: the occurrence waits.
            end.state = RunState::Waiting;
            end.turn = Some(turn);
            end.reason = Some(format!("waits for approval of {}", calls.join(", ")));
            None
        }
        Err(e) => {
            end.state = RunState::Failed;
            end.reason = Some(e.to_string());
            None
        }
    };
    claim.finish(end.clone())?;
    run_lock.write_note("")?;
    drop(run_lock);
    Ok(Handled {
        record: end,
        outcome,
    })
}
