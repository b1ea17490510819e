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
/// active turn, with a hint for `command` (what the caller was refused).
pub fn lock(repo: &Repo, session: &str, wait: Wait, command: &'static str) -> Result<Lock> {
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

/// Finds turns whose owner died and records each as interrupted (exactly once: the check
/// and the append happen under the ledger lock while we hold the session lock).
pub fn recover_orphans(repo: &Repo) -> Result<Vec<String>> {
    let mut recovered = Vec::new();
    for (path, note) in notes(repo)? {
        let Some(mut held) = Lock::try_acquire(&path)? else {
            continue; // the owner is alive
        };
        // Re-read under the lock: the owner may have finished and cleared it meanwhile.
        let Some(note) = ActiveNote::decode(&held.read_note()?).filter(|n| n.turn == note.turn)
        else {
            continue;
        };
        if interrupt_if_open(repo, &note)? {
            recovered.push(note.turn.clone());
        }
        clear_note(repo, &mut held)?;
    }
    Ok(recovered)
}

/// Appends `interrupted` for the turn of `note` unless it already has a terminal record.
/// The caller holds the session lock. Returns whether a record was appended.
pub fn interrupt_if_open(repo: &Repo, note: &ActiveNote) -> Result<bool> {
    let record = Record::TurnEnded(TurnEnded {
        turn: note.turn.clone(),
        session: note.session.clone(),
        state: TurnState::Interrupted,
        error: Some("the process running this turn ended before the turn did".into()),
        usage: Usage {
            complete: false,
            ..Usage::ZERO
        },
        at: clock::now(),
    });
    let appended = append_if_open(repo, note, &[record])?.is_ok();
    // Its stream file, if the owner left one: the ledger now says how the turn ended.
    axocoatl_store::run::stream::remove(repo, &note.turn)?;
    if appended {
        // The terminal state clears a coordinator's private orchestration state.
        crate::orchestration::clear_session(repo, &note.session)?;
    }
    Ok(appended)
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
