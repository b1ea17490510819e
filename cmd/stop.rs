//! `axocoatl stop`

use std::io::Write;

use axocoatl::control;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::StopJson;
use crate::ui::Ui;

/// Stop one exact active turn, by its durable id.
///
/// The stop is cooperative: the stream is cut, a tool already running finishes to a safe
/// boundary, and the turn is recorded as stopped. Effects already made are not rolled back.
/// A stop is accepted only while that exact turn is active, so a delayed stop never cancels
/// a newer turn: otherwise it is rejected with the turn's state (exit 6), or exit 7 when no
/// turn matches. A prefix is resolved among all turns, so one shared by an old turn and a
/// running one is ambiguous (exit 7), never a stop of the running one.
///
/// Examples:
///   axocoatl stop 3f2a9c1e
///   axocoatl stop 3f2a --wait
///   axocoatl stop @             the current session's turn, while it runs
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct StopArgs {
    /// The turn: its id, a unique prefix of at least 4 characters, or `@` (the current
    /// session's latest turn), `@~N` (the N-th before it).
    #[arg(add = ArgValueCandidates::new(crate::complete::active_turns))]
    pub turn: String,
    /// Wait until the turn's terminal state is recorded, and print it.
    #[arg(long)]
    pub wait: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: StopArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open_read()?;
    let turn = axocoatl::turnref::resolve(&ws, &args.turn, None)?;
    let accepted = axocoatl::serve::client::stop(&ws, &turn)?;
    let final_state = if args.wait {
        control::wait_for_end(&ws, &accepted.turn, None)?
    } else {
        None
    };
    // Once it ended: what its tools did, which the stop did not undo.
    let effects = match final_state {
        Some(_) => axocoatl::effects::of_turn_named(&ws, &accepted.turn)?,
        None => Vec::new(),
    };
    if args.json {
        ui.json_line(&StopJson {
            turn: &accepted.turn,
            session: &accepted.session,
            stop_requested: true,
            state: final_state.map(|s| s.as_str()),
            effects: &effects,
        })?;
        return Ok(exit::OK);
    }
    writeln!(ui.out, "stop requested for turn {}", accepted.turn)?;
    match final_state {
        Some(state) => {
            writeln!(ui.out, "turn {} {}", accepted.turn, state.as_str())?;
            if !effects.is_empty() {
                writeln!(
                    ui.err,
                    "what its tools did stays done (a stop rolls nothing back): {}",
                    crate::fmt::safe(&axocoatl::effects::list(&effects, 5))
                )?;
            }
        }
        None => writeln!(
            ui.err,
            "a tool already running finishes first; what its tools did stays done (a stop rolls nothing back)"
        )?,
    }
    Ok(exit::OK)
}
