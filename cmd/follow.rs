//! `axocoatl follow`

use std::io::Write;

use axocoatl::follow::{self, Followed};
use axocoatl::provider::Cancel;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::send::{json_error, Printer};
use crate::ui::Ui;

/// Follow a turn from another terminal: what it streamed so far, then its live output.
///
/// Prints what the turn has streamed so far (its text on stdout, `turn <id>`, tools and
/// warnings on stderr, as `send` printed them), then its output as it comes, until it ends;
/// exits with the turn's own exit code. A turn that already ended prints its answer and
/// exits at once. Works for the turns of `send`, of `serve`'s agents and of automations.
///
/// A turn that waits for a person's approval of a tool call ends the following as it ends
/// `send`: the calls it waits for and how to answer them, exit 12. `axocoatl approve TURN`
/// goes on with it, and `follow` follows it again.
///
/// Ctrl-C stops the followed turn (exactly that one, as `axocoatl stop ID` does, so a turn
/// that already ended is never a newer one's stop) and keeps following until the stop is
/// recorded; a second Ctrl-C leaves at once (exit 130).
///
/// Exit status: 0 completed, 3 failed, 4 stopped, 5 interrupted, 7 no such turn, 12 waits
/// for approval.
///
/// Examples:
///   axocoatl follow 3f2a9c1e
///   axocoatl follow @                  the latest turn of the current session
///   axocoatl follow @ -s nightly --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct FollowArgs {
    /// The turn id, a unique prefix of at least 4 characters, or `@`: the latest turn of the
    /// session (the running one while it runs).
    #[arg(add = ArgValueCandidates::new(crate::complete::turns))]
    pub turn: String,
    /// The session `@` looks in [default: HEAD].
    #[arg(short, long, add = ArgValueCandidates::new(crate::complete::sessions))]
    pub session: Option<String>,
    /// Write JSON Lines events to stdout instead of text (the events of `send --json`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: FollowArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let json = args.json;
    let result = follow_turn(args, g, ui);
    json_error(ui, json, result)
}

fn follow_turn(args: FollowArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.session_or_head(args.session.as_deref())?;
    let id = follow::resolve(&ws, &args.turn, &session)?;
    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The second signal ends the process at once; the first stops the turn.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let mut printer = Printer::new(ui, &ws, args.json);
    // The first error writing a note (the events keep theirs in the printer).
    let mut note_error: Option<std::io::Error> = None;
    let followed = follow::follow(&ws, &id, &cancel, &mut |f| {
        let noted = match f {
            Followed::Event(ev) => {
                printer.event(ev);
                Ok(())
            }
            Followed::Cut => printer.ui().warn(&format!(
                "the turn's stream holds only its first {} MiB: the rest of its output follows when it ends",
                axocoatl_store::run::stream::STREAM_LIMIT >> 20
            )),
            Followed::StopRequested(accepted) => {
                let err = &mut printer.ui().err;
                writeln!(err, "stop requested for turn {}", accepted.turn).and_then(|()| err.flush())
            }
            // The turn had already ended: its end follows.
            Followed::StopTooLate(_) => Ok(()),
        };
        if let (Err(e), None) = (noted, &note_error) {
            note_error = Some(e);
        }
    });
    for e in [printer.take_io_error(), note_error].into_iter().flatten() {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    match followed {
        Ok(outcome) => printer.finish(&outcome),
        // As `send` ends when its turn waits: the calls, how to answer, exit 12.
        Err(axocoatl::RuntimeError::Waiting {
            turn,
            session,
            calls,
        }) => printer.waiting(&turn, &session, &calls),
        Err(e) => Err(e.into()),
    }
}
