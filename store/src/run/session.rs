//! Per-session turn locks, their notes and the marks of active sessions.
//!
//! A turn holds its session's lock (`run/sessions/<session>.lock`) for the whole turn, so one
//! turn runs per session and the kernel releases the lock if the process dies. The lock
//! file's note names the active turn and where its begin record is, so any process can find
//! an orphan (a turn whose owner died) without scanning the whole ledger; a mark in
//! `run/active/` says which sessions to look at. The runtime decides what a busy session
//! means (wait, queue, refuse); this module only reads and writes the files.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::open_private_in_dir;
use crate::layout::{self, session_lock_path};
use crate::ledger::Position;
use crate::lock::{self, Lock};
use crate::{Error, Repo, Result};

/// What a session lock's note says about the active turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveNote {
    pub turn: String,
    pub session: String,
    pub begin: Position,
    pub pid: u32,
    /// The turn waits for a person's approval (its process may be gone: the session stays
    /// held), until the time given (UTC milliseconds), or without end (`Some(None)`).
    /// Written after the request is durable; a hint, the ledger says for sure.
    pub waiting: Option<Option<i64>>,
}

impl ActiveNote {
    pub fn encode(&self) -> String {
        // The waiting mark comes after the fields every build reads, so an older build
        // still reads the note.
        let waiting = match self.waiting {
            None => String::new(),
            Some(None) => " waiting -".to_owned(),
            Some(Some(until)) => format!(" waiting {until}"),
        };
        format!(
            "turn {} session {} segment {} offset {} pid {}{waiting}\n",
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
        let waiting = match field("waiting").as_deref() {
            None => None,
            Some("-") => Some(None),
            Some(until) => Some(Some(until.parse().ok()?)),
        };
        Some(ActiveNote {
            turn,
            session,
            begin: Position { segment, offset },
            pid,
            waiting,
        })
    }
}

/// The lock file of `session`.
pub fn path(repo: &Repo, session: &str) -> PathBuf {
    session_lock_path(repo.root(), session)
}

/// The turn lock of `session` if it is free now, else `Err` with the turn its note names.
pub fn try_take(repo: &Repo, session: &str) -> Result<std::result::Result<Lock, Option<String>>> {
    let path = path(repo, session);
    Ok(Lock::try_acquire(&path)?.ok_or_else(|| noted_turn(&path)))
}

/// The turn lock of `session`, once it is free (queued behind the active turn).
pub fn take(repo: &Repo, session: &str) -> Result<Lock> {
    Lock::acquire(&path(repo, session))
}

/// Whether a turn's owner still holds its session lock.
pub fn owner_alive(repo: &Repo, session: &str) -> Result<bool> {
    Ok(Lock::try_acquire(&path(repo, session))?.is_none())
}

/// The turn the note of the lock at `lock_path` names, if it names one.
pub fn noted_turn(lock_path: &Path) -> Option<String> {
    lock::peek_note(lock_path)
        .ok()
        .and_then(|n| ActiveNote::decode(&n))
        .map(|n| n.turn)
}

/// Writes the note of the active turn into the held session lock `lock`, after marking the
/// session active (in [`layout::ACTIVE_SESSIONS_DIR`], where the orphan sweep looks).
pub fn set_note(repo: &Repo, lock: &mut Lock, note: &ActiveNote) -> Result<()> {
    open_private_in_dir(&active_mark(repo, lock))?;
    lock.write_note(&note.encode())
}

/// Clears the note of the held session lock `lock`, then its active mark.
pub fn clear_note(repo: &Repo, lock: &mut Lock) -> Result<()> {
    lock.write_note("")?;
    let mark = active_mark(repo, lock);
    match fs::remove_file(&mark) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
            op: "remove",
            path: mark,
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The active mark of the session whose lock is `lock`.
fn active_mark(repo: &Repo, lock: &Lock) -> PathBuf {
    let name = lock.path().file_name().unwrap_or_default();
    repo.path(layout::ACTIVE_SESSIONS_DIR).join(name)
}

/// The notes of the session locks marked active (active turns, or orphans if their lock is
/// free). Only marked sessions are looked at: a note is written after its mark and cleared
/// before it, both under the session lock. A mark left without a note (its owner died
/// between the two) is removed here when its lock is free. A repository without marks yet
/// (made or last used by a build before them) has every session lock looked at.
pub fn notes(repo: &Repo) -> Result<Vec<(PathBuf, ActiveNote)>> {
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
fn every_note(locks: &Path) -> Result<Vec<(PathBuf, ActiveNote)>> {
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
fn list(dir: &Path) -> Result<Option<fs::ReadDir>> {
    match fs::read_dir(dir) {
        Ok(e) => Ok(Some(e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Io {
            op: "list",
            path: dir.to_owned(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_and_a_garbled_one_is_none() {
        let note = ActiveNote {
            turn: "0123abcd".into(),
            session: "main".into(),
            begin: Position {
                segment: 3,
                offset: 4096,
            },
            pid: 42,
            waiting: None,
        };
        assert_eq!(ActiveNote::decode(&note.encode()), Some(note.clone()));
        for waiting in [Some(None), Some(Some(1_700_000_000_000))] {
            let held = ActiveNote {
                waiting,
                ..note.clone()
            };
            assert_eq!(ActiveNote::decode(&held.encode()), Some(held));
        }
        assert_eq!(
            ActiveNote::decode("turn t session s segment 1 offset 2 pid 3 waiting soon"),
            None
        );
        assert_eq!(ActiveNote::decode("turn x session"), None);
        assert_eq!(ActiveNote::decode(""), None);
    }
}
