//! Per-session turn locks and orphan recovery.
//!
//! A `send` holds its session's lock (`run/sessions/<session>.lock`) for the whole turn, so
//! one turn runs per session and the kernel releases the lock if the process dies. The lock
//! file's note names the active turn and where its begin record is, so any process can find
//! an orphan (a turn whose owner died) without scanning the whole ledger.

use std::fs;
use std::time::{Duration, Instant};

use axocoatl_store::layout::{self, session_lock_path};
use axocoatl_store::ledger::record::{TurnEnded, TurnState, Usage};
use axocoatl_store::ledger::{Position, Record};
use axocoatl_store::lock::{self, Lock};
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

/// The turn lock of `session` if it is free now, else `Err` with the turn its note names.
pub fn try_lock(repo: &Repo, session: &str) -> Result<std::result::Result<Lock, Option<String>>> {
    let path = session_lock_path(repo.root(), session);
    Ok(Lock::try_acquire(&path)?.ok_or_else(|| noted_turn(&path)))
}

/// Takes the turn lock of `session`. A busy session is [`RuntimeError::Busy`] naming the
/// active turn, with a hint for `command` (what the caller was refused).
pub fn lock(repo: &Repo, session: &str, wait: Wait, command: &'static str) -> Result<Lock> {
    let path = session_lock_path(repo.root(), session);
    if wait == Wait::Queue {
        return Ok(Lock::acquire(&path)?);
    }
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

/// What a session lock's note says about the active turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveNote {
    pub turn: String,
    pub session: String,
    pub begin: Position,
    pub pid: u32,
}

impl ActiveNote {
    pub fn encode(&self) -> String {
        format!(
            "turn {} session {} segment {} offset {} pid {}\n",
            self.turn, self.session, self.begin.segment, self.begin.offset, self.pid
        )
    }

    pub fn decode(note: &str) -> Option<ActiveNote> {
        let mut words = note.split_whitespace();
        let mut field = |name: &str| {
            if words.next()? == name {
                words.next().map(str::to_owned)
            } else {
                None
            }
        };
        let turn = field("turn")?;
        let session = field("session")?;
        let segment = field("segment")?.parse().ok()?;
        let offset = field("offset")?.parse().ok()?;
        let pid = field("pid")?.parse().ok()?;
        Some(ActiveNote {
            turn,
            session,
            begin: Position { segment, offset },
            pid,
        })
    }
}

/// Writes the note of the active turn into the held session lock `lock`, after marking the
/// session active (in [`layout::ACTIVE_SESSIONS_DIR`], where the orphan sweep looks).
pub fn set_note(repo: &Repo, lock: &mut Lock, note: &ActiveNote) -> Result<()> {
    axocoatl_store::fsutil::open_private_in_dir(&active_mark(repo, lock))?;
    Ok(lock.write_note(&note.encode())?)
}

/// Clears the note of the held session lock `lock`, then its active mark.
pub fn clear_note(repo: &Repo, lock: &mut Lock) -> Result<()> {
    lock.write_note("")?;
    let mark = active_mark(repo, lock);
    match fs::remove_file(&mark) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(axocoatl_store::Error::Io {
            op: "remove",
            path: mark,
            source: e,
        }
        .into()),
        _ => Ok(()),
    }
}

/// The active mark of the session whose lock is `lock`.
fn active_mark(repo: &Repo, lock: &Lock) -> std::path::PathBuf {
    let name = lock.path().file_name().unwrap_or_default();
    repo.path(layout::ACTIVE_SESSIONS_DIR).join(name)
}

/// The notes of the session locks marked active (active turns, or orphans if their lock is
/// free). Only marked sessions are looked at: a note is written after its mark and cleared
/// before it, both under the session lock. A mark left without a note (its owner died
/// between the two) is removed here when its lock is free. A repository without marks yet
/// (made or last used by a build before them) has every session lock looked at.
pub fn notes(repo: &Repo) -> Result<Vec<(std::path::PathBuf, ActiveNote)>> {
    let dir = repo.path(layout::ACTIVE_SESSIONS_DIR);
    let locks = repo.path(layout::SESSION_LOCKS_DIR);
    let mut out = Vec::new();
    let Some(entries) = list(&dir)? else {
        return every_note(&locks);
    };
    for entry in entries.flatten() {
        let path = locks.join(entry.file_name());
        if path.extension().and_then(|e| e.to_str()) != Some(layout::LOCK_EXTENSION) {
            continue;
        }
        match lock::peek_note(&path).map(|n| ActiveNote::decode(&n)) {
            Ok(Some(active)) => out.push((path, active)),
            Ok(None) => {
                // A mark without a note: removed under the lock, if its owner is gone.
                if let Ok(Some(mut held)) = Lock::try_acquire(&path) {
                    if held
                        .read_note()
                        .is_ok_and(|n| ActiveNote::decode(&n).is_none())
                    {
                        let _ = fs::remove_file(entry.path());
                    }
                }
            }
            Err(_) => {}
        }
    }
    Ok(out)
}

/// The notes of every session lock file in `locks` (a stat each; a session without a
/// running turn has an empty lock file).
fn every_note(locks: &std::path::Path) -> Result<Vec<(std::path::PathBuf, ActiveNote)>> {
    let mut out = Vec::new();
    let Some(entries) = list(locks)? else {
        return Ok(out);
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some(layout::LOCK_EXTENSION)
            || entry.metadata().is_ok_and(|m| m.len() == 0)
        {
            continue;
        }
        if let Ok(Some(active)) = lock::peek_note(&path).map(|n| ActiveNote::decode(&n)) {
            out.push((path, active));
        }
    }
    Ok(out)
}

/// The entries of directory `dir`, or `None` when it does not exist.
fn list(dir: &std::path::Path) -> Result<Option<fs::ReadDir>> {
    match fs::read_dir(dir) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(axocoatl_store::Error::Io {
            op: "list",
            path: dir.to_owned(),
            source: e,
        }
        .into()),
    }
}

/// Whether a turn's owner still holds its session lock.
pub fn owner_alive(repo: &Repo, session: &str) -> Result<bool> {
    Ok(Lock::try_acquire(&session_lock_path(repo.root(), session))?.is_none())
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

/// The turn a session lock's note names as active, read without taking the lock.
pub fn noted_turn(lock_path: &std::path::Path) -> Option<String> {
    lock::peek_note(lock_path)
        .ok()
        .and_then(|n| ActiveNote::decode(&n))
        .map(|n| n.turn)
}
