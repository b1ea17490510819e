//! What a busy session means to a command (wait, queue or refuse), and orphan recovery.
//!
//! A `send` holds its session's lock for the whole turn, so one turn runs per session and
//! the kernel releases the lock if the process dies; the lock's note names the active turn,
//! so any process finds an orphan (a turn whose owner died) without scanning the ledger. The
//! files themselves are the store's (`axocoatl_store::session_lock`).

use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::{TurnEnded, TurnState, Usage};
use axocoatl_store::ledger::Record;
use axocoatl_store::lock::Lock;
use axocoatl_store::run::session as session_lock;
use axocoatl_store::Repo;

use crate::clock;
use crate::error::{Result, RuntimeError};

/// How long `send` waits for a busy session before giving up (without `--wait`): a turn that
/// is just ending releases its lock within this.
pub const BUSY_WAIT: Duration = Duration::from_secs(2);

/// How a command takes a session's turn lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Fail at once when the session is busy.
    No,
    /// Wait up to [`BUSY_WAIT`], then fail.
    Briefly,
    /// Queue behind the active turn for as long as it takes.
    Queue,
}

pub use axocoatl_store::run::session::{
    clear_note, noted_turn, notes, owner_alive, set_note, try_take as try_lock, ActiveNote,
};

/// Takes the turn lock of `session`. A busy session is [`RuntimeError::Busy`] naming the
/// active turn, with a hint for `command` (what the caller was refused). A turn the lock's
/// note names whose owner is gone is settled first: recorded interrupted, or, when it
/// waits for approval, left holding the session ([`RuntimeError::HeldForApproval`]; with
/// [`Wait::Queue`] this waits until it no longer waits).
pub fn lock(repo: &Repo, session: &str, wait: Wait, command: &'static str) -> Result<Lock> {
    loop {
        let mut lock = take(repo, session, wait, command)?;
        match settle_noted(repo, &mut lock)? {
            None => return Ok(lock),
            Some(_) if wait == Wait::Queue => {
                drop(lock);
                std::thread::sleep(Duration::from_millis(200));
            }
            Some(turn) => {
                return Err(RuntimeError::HeldForApproval {
                    session: session.to_owned(),
                    turn,
                    command,
                })
            }
        }
    }
}

/// The lock itself, as `wait` says.
fn take(repo: &Repo, session: &str, wait: Wait, command: &'static str) -> Result<Lock> {
    if wait == Wait::Queue {
        return Ok(session_lock::take(repo, session)?);
    }
    let path = session_lock::path(repo, session);
    let deadline = Instant::now()
        + if wait == Wait::Briefly {
            BUSY_WAIT
        } else {
            Duration::ZERO
        };
    loop {
        if let Some(lock) = Lock::try_acquire(&path)? {
            return Ok(lock);
        }
        if Instant::now() >= deadline {
            return Err(RuntimeError::Busy {
                session: session.to_owned(),
                turn: noted_turn(&path),
                command,
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The turn lock of `session` for the process that continues its waiting turn (`approve`):
/// taken at once, or [`RuntimeError::Busy`] when another process holds it (one that
/// continues the turn already). The caller checks in the ledger that the turn still waits.
pub fn lock_to_continue(repo: &Repo, session: &str) -> Result<Lock> {
    take(repo, session, Wait::No, "continue the turn")
}

/// Settles the turn the note of the held `lock` names (its owner is gone: we hold the
/// lock). `Some(turn)`: it waits for approval and keeps the session (its note stays);
/// `None`: the session is free (any such turn ended, now or before, and the note is
/// cleared).
pub fn settle_noted(repo: &Repo, lock: &mut Lock) -> Result<Option<String>> {
    Ok(match settle_note_of(repo, lock)? {
        Some((note, Settled::Waiting { .. })) => Some(note.turn),
        _ => None,
    })
}

/// [`settle_noted`], saying what became of the noted turn (`None`: no note).
fn settle_note_of(repo: &Repo, lock: &mut Lock) -> Result<Option<(ActiveNote, Settled)>> {
    let Some(note) = ActiveNote::decode(&lock.read_note()?) else {
        return Ok(None);
    };
    // The note says the turn waits and its request has not expired: nothing else ends a
    // waiting turn without clearing its note under this lock (a stop, an expiry, the
    // process that continues it), so the ledger need not be read.
    if let Some(until) = note.waiting {
        if until.is_none_or(|u| u > clock::now()) {
            return Ok(Some((note, Settled::Waiting { until })));
        }
    }
    let settled = settle(repo, &note)?;
    match settled {
        Settled::Waiting { until } => {
            if note.waiting != Some(until) {
                set_note(
                    repo,
                    lock,
                    &ActiveNote {
                        waiting: Some(until),
                        ..note.clone()
                    },
                )?;
            }
        }
        _ => clear_note(repo, lock)?,
    }
    Ok(Some((note, settled)))
}

/// Finds turns whose owner died and records each as interrupted (exactly once: the check
/// and the append happen under the ledger lock while we hold the session lock). A turn that
/// waits for approval keeps its session until its request expires; its note says so, so it
/// costs no read of the ledger.
pub fn recover_orphans(repo: &Repo) -> Result<Vec<String>> {
    let mut recovered = Vec::new();
    let now = clock::now();
    for (path, note) in notes(repo)? {
        if let Some(until) = note.waiting {
            if until.is_none_or(|u| u > now) {
                continue;
            }
        }
        let Some(mut held) = Lock::try_acquire(&path)? else {
            continue; // the owner is alive
        };
        // Re-read under the lock: the owner may have finished and cleared it meanwhile.
        let Some(note) = ActiveNote::decode(&held.read_note()?).filter(|n| n.turn == note.turn)
        else {
            continue;
        };
        if let Some((_, Settled::Interrupted | Settled::Expired)) = settle_note_of(repo, &mut held)?
        {
            recovered.push(note.turn.clone());
        }
    }
    Ok(recovered)
}

/// What became of a turn whose owner is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// It had ended already, or never began.
    Closed,
    /// It is recorded interrupted now.
    Interrupted,
    /// It waits for approval (until the time given, UTC milliseconds, or without end):
    /// nothing is appended and it keeps its session.
    Waiting { until: Option<i64> },
    /// A request of it expired: recorded `failed` now.
    Expired,
}

/// Settles the turn of `note`, whose owner is gone (the caller holds the session lock):
/// interrupted, unless it already ended or it waits for approval (then, if a request has
/// expired, failed). The check and the append happen under the ledger's append lock.
pub fn settle(repo: &Repo, note: &ActiveNote) -> Result<Settled> {
    let now = clock::now();
    let mut expired = false;
    let outcome = repo.ledger().append_decided(note.begin, |entries| {
        let turn = crate::approval::TurnWait::of(&note.turn, entries.flatten());
        if !turn.begun() || turn.ended().is_some() {
            return Err(Settled::Closed);
        }
        if turn.waiting() {
            return match turn.expiry(now) {
                Some(records) => {
                    expired = true;
                    Ok(records)
                }
                None => Err(Settled::Waiting {
                    until: turn.expires_at(),
                }),
            };
        }
        Ok(vec![interrupted(note)])
    })?;
    if !matches!(outcome, Err(Settled::Waiting { .. })) {
        // Its stream file, if the owner left one: the ledger now says how the turn ended.
        axocoatl_store::run::stream::remove(repo, &note.turn)?;
    }
    match outcome {
        Ok(_) => {
            // The terminal state clears a coordinator's private orchestration state.
            crate::orchestration::clear_session(repo, &note.session)?;
            Ok(if expired {
                Settled::Expired
            } else {
                Settled::Interrupted
            })
        }
        Err(settled) => Ok(settled),
    }
}

fn interrupted(note: &ActiveNote) -> Record {
    Record::TurnEnded(TurnEnded {
        turn: note.turn.clone(),
        session: note.session.clone(),
        state: TurnState::Interrupted,
        error: Some("the process running this turn ended before the turn did".into()),
        usage: Usage {
            complete: false,
            ..Usage::ZERO
        },
        at: clock::now(),
    })
}

/// Appends `interrupted` for the turn of `note` unless it already has a terminal record or
/// waits for approval (a waiting turn whose request expired ends `failed`). The caller
/// holds the session lock. Returns whether a terminal record was appended.
pub fn interrupt_if_open(repo: &Repo, note: &ActiveNote) -> Result<bool> {
    Ok(matches!(
        settle(repo, note)?,
        Settled::Interrupted | Settled::Expired
    ))
}

/// Appends `records` only while the turn of `note` is open: begun (at or after the note's
/// position) and not ended. The check and the append happen under the ledger's append lock.
/// `Ok(Err(Some(state)))`: the turn already ended so; `Ok(Err(None))`: it never began.
pub fn append_if_open(
    repo: &Repo,
    note: &ActiveNote,
    records: &[Record],
) -> Result<std::result::Result<(), Option<TurnState>>> {
    let outcome = repo
        .ledger()
        .append_checked(note.begin, records, |entries| {
            let mut begun = false;
            for entry in entries.flatten() {
                match entry.record {
                    Some(Record::TurnBegun(b)) if b.turn == note.turn => begun = true,
                    Some(Record::TurnEnded(e)) if e.turn == note.turn => return Err(Some(e.state)),
                    _ => {}
                }
            }
            if begun {
                Ok(())
            } else {
                Err(None)
            }
        })?;
    Ok(outcome.map(|_| ()))
}
