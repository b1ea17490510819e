//! `axocoatl automations`

use std::io::Write;

use axocoatl::automation::{self, Handled, RunView, RunnerKind, Status, Target};
use axocoatl::clock::{self, Millis};
use axocoatl::engine::TurnEvent;
use axocoatl::provider::Cancel;
use axocoatl_store::automation::{RunRecord, RunState, Trigger};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{first_line, safe};
use crate::ui::Ui;

/// Scheduled requests: list them, run one now, see their runs, or run what is due.
///
/// Automations are defined under `automations:` in axocoatl.yaml; enabling and disabling
/// one is done there too (`enabled: false`), the YAML is the source. Each occurrence (an
/// automation id and a scheduled time) is claimed durably by exactly one runner before it
/// runs, so `tick` from system cron and `serve` can run at the same time; every run,
/// skipped occurrence and interruption is recorded under .axocoatl/automation/runs-v1/.
///
/// Run what is due every minute from cron:
///   * * * * * axocoatl -C ~/proj automations tick
///
/// Examples:
///   axocoatl automations list
///   axocoatl automations tick
///   axocoatl automations run morning-brief
///   axocoatl automations runs morning-brief --limit 5
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AutomationsArgs {
    #[command(subcommand)]
    pub command: AutomationsCommand,
}

#[derive(Debug, Subcommand)]
pub enum AutomationsCommand {
    List(ListArgs),
    Tick(TickArgs),
    Run(RunArgs),
    Runs(RunsArgs),
}

/// List the automations with their next occurrence (local and UTC) and last run.
///
/// The local time is in the automation's `timezone:` (default: the machine's zone, as
/// cron). Disabled automations (`enabled: false` in axocoatl.yaml) are listed without a
/// next occurrence.
///
/// Examples:
///   axocoatl automations list
///   axocoatl automations list --json | jq .next_utc
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListArgs {
    /// Print JSON Lines, one object per automation.
    #[arg(long)]
    pub json: bool,
}

/// Run every due occurrence once, then exit (for system cron).
///
/// For each enabled automation: occurrences whose runner died are recorded interrupted,
/// missed occurrences follow `catch_up` (latest, all or none) within
/// `catch_up_window_secs`, and one still running makes the next one `skip` or `queue`
/// (`overlap`). Each occurrence is claimed before it runs; a tick that loses a claim to
/// another runner leaves that occurrence alone. Prints one line per recorded run.
///
/// SIGINT or SIGTERM stops the running turn (the run is recorded stopped) and ends the tick;
/// a second signal exits at once.
///
/// Exit status: 0, 3 when a run failed, 4 when a signal stopped it, 1 on an error of the
/// runner itself.
///
/// Examples:
///   axocoatl automations tick
///   axocoatl automations tick --json
///
/// From system cron, every minute:
///   * * * * * axocoatl -C ~/proj automations tick
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TickArgs {
    /// Print JSON Lines, one object per recorded run.
    #[arg(long)]
    pub json: bool,
}

/// Run an automation now (recorded as a manual run), streaming its output.
///
/// The turn goes to the automation's agent and session with its request, like a scheduled
/// occurrence; budgets and sampling apply as for any turn. Disabled automations can be run
/// this way. While another run of the same automation is running, it is refused (exit 8)
/// unless --wait.
///
/// Exit status: 0 completed, 3 failed, 4 stopped, 5 interrupted, 7 no such automation,
/// 8 busy, 12 its turn waits for approval.
///
/// Examples:
///   axocoatl automations run morning-brief
///   axocoatl automations run morning-brief --wait --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunArgs {
    /// The automation id.
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::complete::automations))]
    pub id: String,
    /// Wait for a running occurrence of it to end instead of refusing.
    #[arg(long)]
    pub wait: bool,
    /// Print the run record as JSON instead of streaming the output.
    #[arg(long)]
    pub json: bool,
}

/// Show the run history: occurrence, claim time, runner, turn, outcome, duration.
///
/// Oldest first, the newest N with --limit. A record can stand for a span of skipped
/// occurrences (catch-up). Runs whose runner died are recorded interrupted first.
///
/// Examples:
///   axocoatl automations runs
///   axocoatl automations runs morning-brief --limit 5
///   axocoatl automations runs --json | jq 'select(.outcome == "failed")'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RunsArgs {
    /// Only this automation.
    pub id: Option<String>,
    /// Only the newest N runs.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Print JSON Lines, one object per run.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: AutomationsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    match args.command {
        AutomationsCommand::List(a) => list(a, g, ui),
        AutomationsCommand::Tick(a) => tick(a, g, ui),
        AutomationsCommand::Run(a) => run_now(a, g, ui),
        AutomationsCommand::Runs(a) => runs(a, g, ui),
    }
}

/// `2026-01-05T08:00:00Z` (milliseconds only when there are some).
fn utc(ms: Millis) -> String {
    let full = clock::rfc3339(ms);
    match full.strip_suffix(".000Z") {
        Some(s) => format!("{s}Z"),
        None => full,
    }
}

/// `automations list --json`: one line per automation.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct StatusJson<'a> {
    id: &'a str,
    enabled: bool,
    schedule: &'a str,
    timezone: &'a str,
    /// No `timezone:` in the YAML: the machine's zone.
    local_zone: bool,
    /// Exactly one of `agent` and `workflow`.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow: Option<&'a str>,
    session: &'a str,
    catch_up: &'static str,
    catch_up_window_secs: u64,
    overlap: &'static str,
    /// The next occurrence (none when disabled), in UTC and in the automation's zone.
    next_utc: Option<String>,
    next_local: Option<&'a str>,
    last: Option<RunJson<'a>>,
}

impl<'a> StatusJson<'a> {
    fn of(s: &'a Status) -> StatusJson<'a> {
        let next = s.next.first();
        let (agent, workflow) = match &s.target {
            Target::Agent(a) => (Some(a.as_str()), None),
            Target::Workflow(w) => (None, Some(w.as_str())),
        };
        StatusJson {
            id: &s.id,
            enabled: s.enabled,
            schedule: &s.schedule,
            timezone: &s.timezone,
            local_zone: s.local_zone,
            agent,
            workflow,
            session: &s.session,
            catch_up: s.catch_up.as_str(),
            catch_up_window_secs: s.catch_up_window_secs,
            overlap: s.overlap.as_str(),
            next_utc: next.map(|n| clock::rfc3339(n.utc)),
            next_local: next.map(|n| n.local.as_str()),
            last: s.last.as_ref().map(RunJson::of),
        }
    }
}

fn list(args: ListArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let statuses = automation::status(&ws, clock::now(), 1)?;
    if statuses.is_empty() && !args.json {
        writeln!(
            ui.err,
            "no automations: define them under `automations:` in axocoatl.yaml"
        )?;
    }
    for s in &statuses {
        if args.json {
            ui.json_line(&StatusJson::of(s))?;
            continue;
        }
        let state = if s.enabled {
            ui.paint("32", "enabled")
        } else {
            ui.paint("2", "disabled")
        };
        writeln!(ui.out, "{} ({state})", ui.paint("1", &s.id))?;
        let zone = if s.local_zone {
            format!("{} (local)", s.timezone)
        } else {
            s.timezone.clone()
        };
        writeln!(ui.out, "  schedule  {} in {zone}", s.schedule)?;
        let target = match &s.target {
            Target::Agent(a) => format!("agent {a}"),
            Target::Workflow(w) => format!("workflow {w}"),
        };
        writeln!(ui.out, "  target    {target}, session {}", s.session)?;
        writeln!(
            ui.out,
            "  policy    catch_up {} within {} s, overlap {}",
            s.catch_up.as_str(),
            s.catch_up_window_secs,
            s.overlap.as_str()
        )?;
        match s.next.first() {
            Some(n) => writeln!(ui.out, "  next      {} = {}", n.local_short, utc(n.utc))?,
            None if !s.enabled => writeln!(
                ui.out,
                "  next      none: disabled (set `enabled: true` in axocoatl.yaml)"
            )?,
            None => writeln!(ui.out, "  next      none: the schedule has no future time")?,
        }
        if let Some(r) = &s.last {
            writeln!(
                ui.out,
                "  last      {} {}{}",
                utc(r.occurrence),
                r.state.as_str(),
                r.turn
                    .as_deref()
                    .map(|t| format!(" (turn {t})"))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(exit::OK)
}

/// A run record: `automations runs --json`, `tick --json`, `run --json`, and `last` of
/// `list --json`. Times are RFC 3339 UTC.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct RunJson<'a> {
    automation: &'a str,
    /// The scheduled time; for a manual run, when it was requested; for a span of skipped
    /// occurrences, the last of them.
    occurrence: String,
    /// `schedule` or `manual`.
    trigger: &'static str,
    /// A span of skipped occurrences: the first, and how many (null past the count cap).
    span_first: Option<String>,
    span_count: Option<u64>,
    claimed_at: String,
    /// `tick`, `serve` or `manual`.
    runner: &'a str,
    runner_pid: u32,
    session: Option<&'a str>,
    turn: Option<&'a str>,
    /// claimed, queued, running, completed, failed, stopped, interrupted or skipped.
    outcome: &'static str,
    started_at: Option<String>,
    ended_at: Option<String>,
    duration_ms: Option<i64>,
    reason: Option<&'a str>,
    /// `runs` only: for a run not ended, whether its runner still holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    runner_alive: Option<Option<bool>>,
    /// `runs` only: why the record file could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<&'a str>,
}

impl<'a> RunJson<'a> {
    fn of(r: &'a RunRecord) -> RunJson<'a> {
        RunJson {
            automation: &r.automation,
            occurrence: clock::rfc3339(r.occurrence),
            trigger: match r.trigger {
                Trigger::Schedule => "schedule",
                Trigger::Manual => "manual",
            },
            span_first: r.span.map(|s| clock::rfc3339(s.first)),
            span_count: r.span.and_then(|s| s.count),
            claimed_at: clock::rfc3339(r.claimed_at),
            runner: &r.runner.kind,
            runner_pid: r.runner.pid,
            session: r.session.as_deref(),
            turn: r.turn.as_deref(),
            outcome: r.state.as_str(),
            started_at: r.started_at.map(clock::rfc3339),
            ended_at: r.ended_at.map(clock::rfc3339),
            duration_ms: r
                .ended_at
                .filter(|_| r.state != RunState::Skipped)
                .map(|e| (e - r.started_at.unwrap_or(r.claimed_at)).max(0)),
            reason: r.reason.as_deref(),
            runner_alive: None,
            problem: None,
        }
    }

    fn of_view(v: &'a RunView) -> RunJson<'a> {
        RunJson {
            runner_alive: Some(v.runner_alive),
            problem: v.problem.as_deref(),
            ..RunJson::of(&v.record)
        }
    }
}

fn handled_line(ui: &mut Ui, h: &Handled) -> std::io::Result<()> {
    let r = &h.record;
    let mut line = format!(
        "{} {} {}",
        r.automation,
        utc(r.occurrence),
        state_word(ui, r.state)
    );
    if let Some(span) = r.span {
        let n = span
            .count
            .map(|c| c.to_string())
            .unwrap_or_else(|| "many".into());
        line.push_str(&format!(" ({n} occurrences from {})", utc(span.first)));
    }
    if let Some(turn) = &r.turn {
        line.push_str(&format!(" turn {turn}"));
    }
    if let Some(reason) = &r.reason {
        line.push_str(&format!(": {}", first_line(reason, 120)));
    }
    writeln!(ui.out, "{line}")
}

fn state_word(ui: &Ui, s: RunState) -> String {
    let code = match s {
        RunState::Completed => "32",
        RunState::Failed | RunState::Interrupted => "31",
        RunState::Stopped | RunState::Skipped => "33",
        _ => "36",
    };
    ui.paint(code, s.as_str())
}

/// SIGINT/SIGTERM stop the running turn (recorded stopped); a second one exits at once.
fn cancel_on_signals() -> Cancel {
    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    cancel
}

fn tick(args: TickArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let cancel = cancel_on_signals();
    let mut io_error = None;
    let mut failed = false;
    let results = {
        let mut report = |h: &Handled| {
            failed |= h.record.state == RunState::Failed;
            let written = if args.json {
                ui.json_line(&RunJson::of(&h.record))
            } else {
                handled_line(ui, h)
            };
            if let Err(e) = written.and_then(|()| ui.out.flush()) {
                io_error.get_or_insert(e);
            }
        };
        automation::run_due(&ws, clock::now(), RunnerKind::Tick, &cancel, &mut report)?
    };
    if let Some(e) = io_error {
        return Err(e.into());
    }
    let mut errors = Vec::new();
    for (id, result) in results {
        if let Err(e) = result {
            errors.push((id, CliError::from(e)));
        }
    }
    if let Some((id, first)) = errors.into_iter().next() {
        let mut err = CliError::new(first.kind, format!("automation {id:?}: {}", first.message));
        err.causes = first.causes;
        err.hints = first.hints;
        return Err(err);
    }
    Ok(if failed {
        exit::TURN_FAILED
    } else if cancel.is_cancelled() {
        exit::TURN_STOPPED
    } else {
        exit::OK
    })
}

fn run_now(args: RunArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let cancel = cancel_on_signals();
    let mut io_error = None;
    let mut ended_with_newline = true;
    let json_mode = args.json;
    let manual = {
        let mut sink = |ev: TurnEvent<'_>| {
            if json_mode {
                return;
            }
            let written = match ev {
                TurnEvent::Begun { turn, session, .. } => writeln!(
                    ui.err,
                    "automation {} (manual): turn {turn} in session {session}",
                    args.id
                ),
                TurnEvent::Delta { text, .. } => {
                    if !text.is_empty() {
                        ended_with_newline = text.ends_with('\n');
                    }
                    write!(ui.out, "{}", safe(&text)).and_then(|()| ui.out.flush())
                }
                TurnEvent::Warning { message, .. } => ui.warn(&message),
                _ => Ok(()),
            };
            if let Err(e) = written {
                io_error.get_or_insert(e);
            }
        };
        automation::run_manual(&ws, &args.id, args.wait, &cancel, &mut sink)?
    };
    if let Some(e) = io_error {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    let r = &manual.handled.record;
    if json_mode {
        ui.json_line(&RunJson::of(r))?;
    } else {
        if !ended_with_newline {
            writeln!(ui.out)?;
        }
        if r.state == RunState::Waiting {
            let turn = r.turn.as_deref().unwrap_or("?");
            writeln!(
                ui.err,
                "run {} waits: {}; `axocoatl approve {turn}` answers it",
                utc(r.occurrence),
                r.reason.as_deref().unwrap_or("its turn waits for approval")
            )?;
        } else if r.state != RunState::Completed {
            let label = ui.paint_err("31;1", "error");
            writeln!(
                ui.err,
                "{label}: run {} {}: {}",
                utc(r.occurrence),
                r.state.as_str(),
                r.reason.as_deref().unwrap_or("no detail")
            )?;
        }
    }
    Ok(match r.state {
        RunState::Completed => exit::OK,
        RunState::Stopped => exit::TURN_STOPPED,
        RunState::Interrupted => exit::TURN_INTERRUPTED,
        RunState::Waiting => exit::AWAITING_APPROVAL,
        _ => exit::TURN_FAILED,
    })
}

fn runs(args: RunsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let views = automation::runs(&ws, args.id.as_deref(), Some(args.limit))?;
    if views.is_empty() && !args.json {
        writeln!(ui.err, "no runs on record")?;
    }
    if !args.json && !views.is_empty() {
        writeln!(
            ui.out,
            "{:<16} {:<24} {:<8} {:<24} {:<13} {:<16} {:<11} {:>9}",
            "AUTOMATION",
            "OCCURRENCE",
            "TRIGGER",
            "CLAIMED",
            "RUNNER",
            "TURN",
            "OUTCOME",
            "DURATION"
        )?;
    }
    let mut problems = false;
    for v in &views {
        if args.json {
            ui.json_line(&RunJson::of_view(v))?;
            continue;
        }
        let r = &v.record;
        if let Some(p) = &v.problem {
            problems = true;
            ui.warn(&format!("{}: {p}", v.path.display()))?;
            continue;
        }
        let trigger = match r.trigger {
            Trigger::Schedule => "schedule",
            Trigger::Manual => "manual",
        };
        let duration = v
            .duration_ms()
            .map(|d| format!("{:.1} s", d as f64 / 1000.0))
            .unwrap_or_else(|| "-".into());
        let outcome = match v.runner_alive {
            Some(true) => format!("{}…", r.state.as_str()),
            _ => r.state.as_str().to_owned(),
        };
        let mut line = format!(
            "{:<16} {:<24} {:<8} {:<24} {:<13} {:<16} {:<11} {:>9}",
            first_line(&r.automation, 16),
            utc(r.occurrence),
            trigger,
            utc(r.claimed_at),
            format!("{} {}", r.runner.kind, r.runner.pid),
            r.turn.as_deref().unwrap_or("-"),
            outcome,
            duration
        );
        if let Some(span) = r.span {
            let n = span
                .count
                .map(|c| c.to_string())
                .unwrap_or_else(|| "many".into());
            line.push_str(&format!("  {n} occurrences from {}", utc(span.first)));
        }
        if let Some(reason) = &r.reason {
            line.push_str(&format!("  {}", first_line(reason, 100)));
        }
        writeln!(ui.out, "{}", line.trim_end())?;
    }
    Ok(if problems { exit::ERROR } else { exit::OK })
}
