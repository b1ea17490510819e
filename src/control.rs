//! Stop requests: cooperative, aimed at one exact turn by its durable id.

use std::time::Duration;

use axocoatl_store::ledger::record::{StopRequested, TurnEnded, TurnState};
use axocoatl_store::ledger::Record;

use axocoatl_store::Repo;

use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, ViewState, Want};
use crate::ids;
use crate::session;
use crate::workspace::Workspace;

/// A stop request that was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopAccepted {
    pub turn: String,
    pub session: String,
}

/// Requests a stop of the turn `prefix` names. A prefix is resolved among all turns, as
/// `show` and `retry` do, so a prefix shared by an old finished turn and a newer running one
/// is ambiguous, never a stop of the running one. The stop is accepted only while that exact
/// turn is active; the check and the append happen under the ledger lock, so a stop can
/// never land after the turn ended.
pub fn stop(ws: &Workspace, prefix: &str) -> Result<StopAccepted> {
    let repo = ws.repo();
    let whole = prefix.trim().to_ascii_lowercase();
    // A whole id needs no resolving: the running turn's lock note names it (fast path).
    let mut projection = None;
    let id = if whole.len() == ids::ID_LEN && ids::is_id_prefix(&whole) {
        whole
    } else {
        let p = projection.insert(Projection::of(repo, Scope::Prefix(prefix), Want::VIEWS)?);
        p.resolve(prefix)?.turn.clone()
    };
    if let Some(accepted) = request_stop(repo, &id)? {
        return Ok(accepted);
    }
    // Not active: say what the turn is (the projection also settles orphans).
    let projection = match projection {
        Some(p) => p,
        None => Projection::of(repo, Scope::Prefix(&id), Want::VIEWS)?,
    };
    let turn = projection.resolve(&id)?;
    if turn.state == ViewState::Waiting {
        // A waiting turn whose lock's note was lost (a power cut) is found by the ledger.
        let note = session::ActiveNote {
            turn: turn.turn.clone(),
            session: turn.session.clone(),
            begin: turn.begin,
            pid: 0,
            waiting: None,
        };
        if let Some(accepted) = stop_waiting(repo, &note)? {
            return Ok(accepted);
        }
    }
    let state = match turn.state {
        ViewState::Completed => TurnState::Completed,
        ViewState::Failed => TurnState::Failed,
        ViewState::Stopped => TurnState::Stopped,
        ViewState::Interrupted | ViewState::Running | ViewState::Waiting => TurnState::Interrupted,
    };
    Err(RuntimeError::NotActive {
        turn: turn.turn.clone(),
        state,
    })
}

/// Appends a stop request for turn `id` if it is active: named by a session lock note
/// whose owner is alive, begun and not ended. `None` when it is not active.
fn request_stop(repo: &Repo, id: &str) -> Result<Option<StopAccepted>> {
    let notes = session::notes(repo)?;
    let Some((_, note)) = notes.iter().find(|(_, n)| n.turn == id) else {
        return Ok(None);
    };
    if !session::owner_alive(repo, &note.session)? {
        // No process runs it: it may wait for approval.
        return stop_waiting(repo, note);
    }
    let record = Record::StopRequested(StopRequested {
        turn: note.turn.clone(),
        session: note.session.clone(),
        pid: std::process::id(),
        at: clock::now(),
    });
    match session::append_if_open(repo, note, &[record])? {
        Ok(()) => Ok(Some(StopAccepted {
            turn: note.turn.clone(),
            session: note.session.clone(),
        })),
        Err(Some(state)) => Err(RuntimeError::NotActive {
            turn: note.turn.clone(),
            state,
        }),
        Err(None) => Ok(None),
    }
}

/// Stops the turn of `note` if it waits for approval and no process holds its session:
/// under its session's lock, a stop request and the terminal `stopped` are appended while
/// the ledger says it waits, and the lock's note is cleared. `None`: it does not wait (or a
/// process holds the session: that process sees a stop request).
fn stop_waiting(repo: &Repo, note: &session::ActiveNote) -> Result<Option<StopAccepted>> {
    let Ok(mut lock) = session::try_lock(repo, &note.session)? else {
        return Ok(None);
    };
    let now = clock::now();
    let outcome = repo.ledger().append_decided(note.begin, |entries| {
        let wait = crate::approval::TurnWait::of(&note.turn, entries.flatten());
        if let Some(state) = wait.ended() {
            return Err(Some(state));
        }
        if !wait.waiting() {
            return Err(None);
        }
        Ok(vec![
            Record::StopRequested(StopRequested {
                turn: note.turn.clone(),
                session: note.session.clone(),
                pid: std::process::id(),
                at: now,
            }),
            Record::TurnEnded(TurnEnded {
                turn: note.turn.clone(),
                session: note.session.clone(),
                state: TurnState::Stopped,
                error: Some("stopped while it waited for approval".into()),
                usage: wait.usage(),
                at: now,
            }),
        ])
    })?;
    match outcome {
        Ok(_) => {
            if session::noted_turn(lock.path()).as_deref() == Some(note.turn.as_str()) {
                session::clear_note(repo, &mut lock)?;
            }
            Ok(Some(StopAccepted {
                turn: note.turn.clone(),
                session: note.session.clone(),
            }))
        }
        Err(Some(state)) => Err(RuntimeError::NotActive {
            turn: note.turn.clone(),
            state,
        }),
        Err(None) => Ok(None),
    }
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
