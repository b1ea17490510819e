//! `axocoatl approve`, and the question `send` and `chat` ask on a terminal when a call waits.

use std::io::Write;

use axocoatl::approval::answered_by;
use axocoatl::approvals;
use axocoatl::workspace::Workspace;
use axocoatl::ErrorKind;
use axocoatl_store::ledger::record::Decision;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::ApproveJson;
use crate::ui::Ui;

/// Approve (or deny) tool calls that wait for a person, and continue their turn.
///
/// A turn whose agent's `approvals:` held a tool call waits (its session stays held) until
/// every held call is decided: then approve continues it here, or in the running serve's
/// actor, and prints the rest of the turn as `send` does (its exit status too). Without
/// CALL every undecided call of the turn is decided; with --deny the model reads the denial
/// and its reason as the call's result. Of decisions that arrive at once exactly one is
/// recorded: the others exit 6 and say who answered and when. --no-run records the decision
/// and leaves the turn waiting; `approve TURN` later continues it.
///
/// Exit status: as send (0 completed, 3 failed, 4 stopped, 12 it waits again) when the turn
/// continues; 0 when only the decision is recorded; 6 when the call was decided already or
/// the turn no longer waits.
///
/// Examples:
///   axocoatl approvals
///   axocoatl approve 3f2a9c1e
///   axocoatl approve 3f2a9c1e call_1 --no-run
///   axocoatl approve 3f2a --deny --reason "not on the release branch"
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ApproveArgs {
    /// The waiting turn's id, or a unique prefix of at least 4 characters.
    #[arg(add = ArgValueCandidates::new(crate::complete::turns))]
    pub turn: String,
    /// One held call (its id, or a unique prefix) [default: every undecided call].
    pub call: Option<String>,
    /// Deny instead: the call does not run, and the model reads why.
    #[arg(long)]
    pub deny: bool,
    /// Why it is denied (the model reads it).
    #[arg(long, value_name = "TEXT", requires = "deny")]
    pub reason: Option<String>,
    /// Record the decision only; leave the turn waiting.
    #[arg(long)]
    pub no_run: bool,
    /// Print JSON: the continued turn's events as `send --json` does, else one object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ApproveArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let json = args.json;
    let result = approve(args, g, ui);
    crate::send::json_error(ui, json, result)
}

fn approve(args: ApproveArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let decision = if args.deny {
        Decision::Denied
    } else {
        Decision::Approved
    };
    let d = approvals::decide(
        &ws,
        &args.turn,
        args.call.as_deref(),
        decision,
        args.reason.clone(),
        answered_by("approve"),
    )?;
    let waits = !d.undecided.is_empty();
    if args.no_run || waits {
        decided(ui, &ws, &d, args.json)?;
        if !args.json {
            let left: Vec<String> = d
                .undecided
                .iter()
                .map(|(c, t)| format!("{c} ({t})"))
                .collect();
            if waits {
                writeln!(
                    ui.err,
                    "turn {} still waits for {}: `axocoatl approve {} CALL` decides one",
                    d.turn,
                    left.join(", "),
                    d.turn
                )?;
            } else {
                writeln!(
                    ui.err,
                    "turn {} waits to be continued: `axocoatl approve {}` continues it",
                    d.turn, d.turn
                )?;
            }
        }
        return Ok(exit::OK);
    }
    let opts = crate::question::continue_options(&d.turn, &d.session, &d.agent);
    match crate::send::run_turn(&ws, opts, args.json, ui) {
        // Decided here, continued by a process that took the turn first (an `approve`
        // that found every call decided): the decision stands and the turn goes on there.
        Err(e) if e.kind == ErrorKind::NotActive && !d.decided.is_empty() => {
            decided(ui, &ws, &d, args.json)?;
            writeln!(ui.err, "turn {}: {}", d.turn, e.message)?;
            Ok(exit::OK)
        }
        other => other,
    }
}

/// What was decided, when this process does not continue the turn.
fn decided(ui: &mut Ui, ws: &Workspace, d: &approvals::Decided, json: bool) -> CliResult<()> {
    if json {
        ui.json_line(&ApproveJson {
            turn: &d.turn,
            session: ws.shown_session(&d.session),
            decision: d.decision.as_str(),
            decided: d.decided.iter().map(|(c, _)| c.as_str()).collect(),
            undecided: d.undecided.iter().map(|(c, _)| c.as_str()).collect(),
            continued: false,
        })?;
    } else {
        for (call, tool) in &d.decided {
            writeln!(ui.out, "{call} ({tool}) {}", d.decision.as_str())?;
        }
    }
    Ok(())
}
