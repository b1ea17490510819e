//! The one lock module. Locks are advisory `flock(2)` locks (std's `File::lock`), released
//! by the kernel when the holder dies, so a crashed process never leaves a stale lock.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::fsutil::open_private_in_dir;
use crate::{Error, Result};

// Lock files are opened with `open_private_in_dir`, which recreates their directory
// (`run/`, `run/sessions/`) if it is missing: lock files hold no data, so a deleted `run/`
// must not stop every write.

/// An exclusive lock held until dropped.
#[derive(Debug)]
pub struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    /// Blocks until the lock is free.
    pub fn acquire(path: &Path) -> Result<Lock> {
        let file = open_private_in_dir(path)?;
        file.lock().map_err(Error::io("lock", path))?;
        Ok(Lock {
            file,
            path: path.to_owned(),
        })
    }

    /// Takes the lock if it is free, `None` if another process (or handle) holds it.
    pub fn try_acquire(path: &Path) -> Result<Option<Lock>> {
        let file = open_private_in_dir(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock {
                file,
                path: path.to_owned(),
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io("lock", path)(e)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the small note kept inside the lock file (the active turn of a session lock).
    /// The note is a hint for finding orphans quickly, not an authority: it is not fsynced.
    pub fn write_note(&mut self, note: &str) -> Result<()> {
        crate::failpoint::hit("lock.note.write")
            .and_then(|()| self.file.set_len(0))
            .and_then(|()| self.file.seek(SeekFrom::Start(0)))
            .and_then(|_| self.file.write_all(note.as_bytes()))
            .map_err(Error::io("write", self.path.clone()))
    }

    pub fn read_note(&mut self) -> Result<String> {
        read_note_of(&mut self.file, &self.path)
    }
}

/// A lock file kept open for repeated short locks (the ledger's append lock): no open and
/// close per lock.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    path: PathBuf,
}

/// The lock of a [`LockFile`], released when dropped.
#[derive(Debug)]
pub struct LockGuard<'a> {
    owner: &'a LockFile,
}

impl LockFile {
    pub fn open(path: &Path) -> Result<LockFile> {
        Ok(LockFile {
            file: open_private_in_dir(path)?,
            path: path.to_owned(),
        })
    }

    /// Blocks until the lock is free.
    pub fn lock(&self) -> Result<LockGuard<'_>> {
        self.file
            .lock()
            .map_err(Error::io("lock", self.path.clone()))?;
        Ok(LockGuard { owner: self })
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        // Closing the file would release it too; unlocking keeps the handle for next time.
        let _ = self.owner.file.unlock();
    }
}

/// Takes an exclusive lock on an open file (not a lock file: a record whose holder must be
/// known to be alive) and holds it as long as `file` stays open; `false` if another open
/// file holds it.
pub fn try_lock_open(file: &File, path: &Path) -> Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(Error::io("lock", path)(e)),
    }
}

/// Reads the note of a lock file without taking the lock.
pub fn peek_note(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(Error::io("open", path))?;
    read_note_of(&mut file, path)
}

fn read_note_of(file: &mut File, path: &Path) -> Result<String> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut s))
        .map_err(Error::io("read", path))?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_handle_cannot_take_a_held_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let mut held = Lock::acquire(&path).expect("lock");
        assert!(Lock::try_acquire(&path).expect("try").is_none());
        held.write_note("turn abc").expect("note");
        assert_eq!(peek_note(&path).expect("peek"), "turn abc");
        drop(held);
        assert!(Lock::try_acquire(&path).expect("try").is_some());
    }
}
