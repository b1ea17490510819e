//! `axocoatl approve`, and the question `send` and `chat` ask on a terminal when a call waits.

use std::io::{IsTerminal, Write};

use axocoatl::approval::answered_by;
use axocoatl::approvals::{self, WaitingTurn};
use axocoatl::engine::SendOptions;
use axocoatl::workspace::Workspace;
use axocoatl::{ErrorKind, RuntimeError};
use axocoatl_store::ledger::record::Decision;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::{first_line, safe};
use crate::json::ApproveJson;
use crate::line::{Input, LineEditor};
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
    let opts = continue_options(&d.turn, &d.session, &d.agent);
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

/// The options that continue waiting turn `turn` (routed to serve by its session and agent).
pub fn continue_options(turn: &str, session: &str, agent: &str) -> SendOptions {
    SendOptions {
        session: session.to_owned(),
        agent: Some(agent.to_owned()),
        resume: Some(turn.to_owned()),
        ..SendOptions::default()
    }
}

/// Whether a person can be asked at once: stdin and stderr are a terminal.
pub fn can_ask(ui: &Ui) -> bool {
    ui.err_is_terminal && std::io::stdin().is_terminal()
}

/// Asks on the terminal about each undecided call of `waiting` (`y`es, `n`o with a reason,
/// `a`lways in this session) and records the answers. The options that continue the turn
/// when every call is decided; `None` when the person left the question (Ctrl-C, Ctrl-D) or
/// another answer came first: the turn waits.
pub fn ask(ws: &Workspace, waiting: &WaitingTurn, ui: &mut Ui) -> CliResult<Option<SendOptions>> {
    let mut editor = LineEditor::new();
    let mut always: Vec<(String, String)> = Vec::new();
    for call in waiting.calls.iter().filter(|c| c.decision.is_none()) {
        let granted = always.contains(&(call.tool.clone(), call.rule.clone()));
        let (decision, reason) = if granted {
            (Decision::ApprovedAlways, None)
        } else {
            writeln!(
                ui.err,
                "{} wants to run {} {}",
                waiting.agent,
                ui.paint_err("1", &call.tool),
                safe(&first_line(&call.arguments, 200))
            )?;
            writeln!(ui.err, "  (held by the rule `{}`)", safe(&call.rule))?;
            match question(&mut editor, ui)? {
                Some(answer) => answer,
                None => return Ok(None),
            }
        };
        if decision == Decision::ApprovedAlways {
            always.push((call.tool.clone(), call.rule.clone()));
        }
        let by = answered_by("terminal");
        match approvals::decide(ws, &waiting.turn, Some(&call.call_id), decision, reason, by) {
            Ok(_) => {}
            Err(e @ (RuntimeError::AlreadyDecided { .. } | RuntimeError::NotWaiting { .. })) => {
                ui.warn(&e.to_string())?;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(continue_options(
        &waiting.turn,
        &waiting.session,
        &waiting.agent,
    )))
}

/// One answer: `None` when the person leaves the question.
fn question(editor: &mut LineEditor, ui: &mut Ui) -> CliResult<Option<(Decision, Option<String>)>> {
    loop {
        let answer = match editor.read("approve? [y]es, [n]o, [a]lways in this session: ")? {
            Input::Line(line) => line.trim().to_ascii_lowercase(),
            Input::NotUtf8(_) => String::new(),
            Input::Dropped | Input::End => return Ok(None),
        };
        match answer.as_str() {
            "y" | "yes" => return Ok(Some((Decision::Approved, None))),
            "a" | "always" => return Ok(Some((Decision::ApprovedAlways, None))),
            "n" | "no" => {
                let reason = match editor.read("why (the model reads it; Enter: no reason): ")? {
                    Input::Line(line) if !line.trim().is_empty() => Some(line.trim().to_owned()),
                    Input::Line(_) | Input::NotUtf8(_) => None,
                    Input::Dropped | Input::End => return Ok(None),
                };
                return Ok(Some((Decision::Denied, reason)));
            }
            _ => writeln!(ui.err, "answer y, n or a (Ctrl-C leaves the call waiting)")?,
        }
    }
}
