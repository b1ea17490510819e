//! The one place that replaces files and creates owner-only files and directories.
//!
//! Everything under `.axocoatl/` is 0700 (directories) or 0600 (files), whatever the umask:
//! modes are set explicitly after creation because `open(2)` and `mkdir(2)` apply the umask.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::{Error, Result};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// Whether a write must be on disk before the call returns. The ledger and the objects it
/// references are `Durable`; caches (checkpoints, indexes) are `Cache`: they are verified on
/// read and rebuilt from the ledger, so they never add an fsync to a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    Durable,
    Cache,
}

/// Creates `path` (and missing parents) as owner-only directories.
pub fn create_dir_private(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            create_dir_private(parent)?;
        }
    }
    match fs::create_dir(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(Error::io("create directory", path)(e)),
    }
    fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
        .map_err(Error::io("set permissions of", path))
}

/// Opens (creating if needed) an owner-only file for reading and writing.
pub fn open_private(path: &Path, append: bool) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).create(true).mode(FILE_MODE);
    if append {
        options.append(true);
    } else {
        options.write(true);
    }
    let file = options.open(path).map_err(Error::io("open", path))?;
    ensure_private(&file, path)?;
    Ok(file)
}

/// Creates a new owner-only file; fails if it exists.
pub fn create_new_private(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(Error::io("create", path))?;
    ensure_private(&file, path)?;
    Ok(file)
}

fn ensure_private(file: &File, path: &Path) -> Result<()> {
    let meta = file.metadata().map_err(Error::io("stat", path))?;
    if meta.permissions().mode() & 0o777 != FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
            .map_err(Error::io("set permissions of", path))?;
    }
    Ok(())
}

/// Flushes a directory entry (after a create or a rename) to disk.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("sync directory", dir))
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory is
/// written (and for `Durable`, fsynced), renamed over `path`, and the directory fsynced.
/// A reader sees the old content or the new one, never a mix; a crash leaves at most a
/// stray temporary file, which `fsck --repair` and the next write ignore.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(fs::Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)
        .map_err(Error::io("create a temporary file in", dir))?;
    tmp.write_all(bytes)
        .map_err(Error::io("write", tmp.path().to_path_buf()))?;
    if durability == Durability::Durable {
        tmp.as_file()
            .sync_data()
            .map_err(Error::io("sync", tmp.path().to_path_buf()))?;
    }
    // The permissions given to the builder are filtered by the umask on some platforms.
    ensure_private(tmp.as_file(), tmp.path())?;
    tmp.persist(path)
        .map_err(|e| Error::io("rename into place", path)(e.error))?;
    if durability == Durability::Durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Reads a whole file, naming the path in the error.
pub fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(Error::io("read", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_and_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        write_atomic(&path, b"one", Durability::Durable).expect("write");
        write_atomic(&path, b"two", Durability::Cache).expect("write");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, FILE_MODE);
        let names: Vec<_> = fs::read_dir(dir.path()).expect("ls").collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
    }
}
