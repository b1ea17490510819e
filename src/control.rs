//! Stop requests: cooperative, aimed at one exact turn by its durable id.

use std::time::Duration;

use axocoatl_store::ledger::record::{StopRequested, TurnState};
use axocoatl_store::ledger::Record;

use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::history::{self, resolve_prefix, ViewState};
use crate::session;
use crate::workspace::Workspace;

/// A stop request that was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopAccepted {
    pub turn: String,
    pub session: String,
}

/// Requests a stop of the turn `prefix` names. Accepted only while that exact turn is
/// active; the check and the append happen under the ledger lock, so a stop can never land
/// after the turn ended (and never on a newer turn).
pub fn stop(ws: &Workspace, prefix: &str) -> Result<StopAccepted> {
    let repo = ws.repo();
    let notes = session::notes(repo)?;
    // Fast path: active turns are named by their session lock notes.
    if let Ok(id) = resolve_prefix(prefix, notes.iter().map(|(_, n)| n.turn.as_str())) {
        if let Some((_, note)) = notes.iter().find(|(_, n)| n.turn == id) {
            if session::owner_alive(repo, &note.session)? {
                let record = Record::StopRequested(StopRequested {
                    turn: note.turn.clone(),
                    session: note.session.clone(),
                    pid: std::process::id(),
                    at: clock::now(),
                });
                let outcome = session::append_if_open(repo, note, &[record])?;
                match outcome {
                    Ok(_) => {
                        return Ok(StopAccepted {
                            turn: note.turn.clone(),
                            session: note.session.clone(),
                        })
                    }
                    Err(Some(state)) => {
                        return Err(RuntimeError::NotActive {
                            turn: note.turn.clone(),
                            state,
                        })
                    }
                    Err(None) => {}
                }
            }
        }
    }
    // Not active: say what the turn is (the projection also settles orphans).
    let projection = history::project_prefix(repo, prefix)?;
    let turn = projection.resolve(prefix)?;
    let state = match turn.state {
        ViewState::Completed => TurnState::Completed,
        ViewState::Failed => TurnState::Failed,
        ViewState::Stopped => TurnState::Stopped,
        ViewState::Interrupted | ViewState::Running => TurnState::Interrupted,
    };
    Err(RuntimeError::NotActive {
        turn: turn.turn.clone(),
        state,
    })
}

/// Waits until `turn` has a terminal record and returns its state.
pub fn wait_for_end(
    ws: &Workspace,
    turn: &str,
    timeout: Option<Duration>,
) -> Result<Option<TurnState>> {
    let start = std::time::Instant::now();
    let mut pos = axocoatl_store::ledger::Position::START;
    loop {
        for entry in ws.repo().ledger().scan(pos).flatten() {
            pos = entry.next;
            if let Some(Record::TurnEnded(e)) = &entry.record {
                if e.turn == turn {
                    return Ok(Some(e.state));
                }
            }
        }
        if timeout.is_some_and(|t| start.elapsed() >= t) {
            return Ok(None);
        }
        // An owner that died while we waited: settle it so we do not wait forever.
        session::recover_orphans(ws.repo())?;
        std::thread::sleep(Duration::from_millis(40));
    }
}
