//! The question a terminal is asked at once when a turn's tool call waits for approval
//! (`send`, `chat`), and the options that continue the turn once it is answered (`approve`
//! too).

use std::io::{IsTerminal, Write};

use axocoatl::approval::answered_by;
use axocoatl::approvals::{self, WaitingTurn};
use axocoatl::engine::SendOptions;
use axocoatl::workspace::Workspace;
use axocoatl::RuntimeError;
use axocoatl_store::ledger::record::Decision;

use crate::error::CliResult;
use crate::fmt::{first_line, safe};
use crate::line::{Input, LineEditor};
use crate::ui::Ui;

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
