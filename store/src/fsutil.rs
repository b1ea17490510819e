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
    match crate::failpoint::hit("fsutil.mkdir").and_then(|()| fs::create_dir(path)) {
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

/// [`open_private`] (not appending), creating the file's directory first when it is missing.
pub fn open_private_in_dir(path: &Path) -> Result<File> {
    match open_private(path, false) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                create_dir_private(dir)?;
            }
            open_private(path, false)
        }
        other => other,
    }
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
        .and_then(|d| crate::failpoint::hit("fsutil.atomic.dir_sync").map(|()| d))
        .and_then(|d| d.sync_all())
        .map_err(Error::io("sync directory", dir))
}

/// The prefix of every temporary file the store creates: `.tmp-<pid>-`, so that a stray one
/// left by a crash is known to be stale once that process is gone.
pub const TMP_PREFIX: &str = ".tmp-";

/// A stray temporary file is collected once its process is gone, or past this age whatever
/// its name says (a reused pid, another pid namespace, a file of an older build).
const STRAY_AGE: std::time::Duration = std::time::Duration::from_secs(3600);
/// Temporary files of an older build carry no pid: collected past this age.
const LEGACY_STRAY_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Creates an owner-only temporary file in `dir` whose name carries this process's pid.
pub fn temp_file_in(dir: &Path) -> Result<tempfile::NamedTempFile> {
    let tmp = crate::failpoint::hit("fsutil.atomic.create")
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix(&format!("{TMP_PREFIX}{}-", std::process::id()))
                .permissions(fs::Permissions::from_mode(FILE_MODE))
                .tempfile_in(dir)
        })
        .map_err(Error::io("create a temporary file in", dir))?;
    // The permissions given to the builder are filtered by the umask on some platforms.
    ensure_private(tmp.as_file(), tmp.path())?;
    Ok(tmp)
}

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory is
/// written (and for `Durable`, fsynced), renamed over `path`, and the directory fsynced.
/// A reader sees the old content or the new one, never a mix; a crash leaves at most a
/// stray temporary file, which the next atomic write into that directory (or
/// `fsck --repair`) removes.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    write_atomic_via(dir, path, bytes, durability)
}

/// [`write_atomic`] with the temporary file in `tmp_dir` (on the same file system as
/// `path`): objects keep theirs in `objects/`, so that the strays of killed writes are
/// found in one directory instead of 256.
pub fn write_atomic_via(
    tmp_dir: &Path,
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<()> {
    write_atomic_parts(tmp_dir, path, &[bytes], durability)
}

/// [`write_atomic_via`] of the bytes of `parts`, one after another: a large file assembled
/// from parts (a merged term index: a head and its sections) is written without first
/// being copied into one buffer.
pub fn write_atomic_parts(
    tmp_dir: &Path,
    path: &Path,
    parts: &[&[u8]],
    durability: Durability,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    collect_strays(tmp_dir)?;
    let mut tmp = temp_file_in(tmp_dir)?;
    let first = parts.first().copied().unwrap_or_default();
    // Errors name the file being written, not the temporary name it is written under.
    crate::failpoint::hit_write("fsutil.atomic.write", first, |b| tmp.write_all(b))
        .and_then(|()| {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
            for part in parts {
                out.write_all(part)?;
            }
            out.flush()
        })
        .map_err(Error::io("write", path))?;
    if durability == Durability::Durable {
        crate::failpoint::hit("fsutil.atomic.sync")
            .and_then(|()| tmp.as_file().sync_data())
            .map_err(Error::io("sync", path))?;
    }
    crate::failpoint::hit("fsutil.atomic.rename").map_err(Error::io("rename into place", path))?;
    tmp.persist(path)
        .map_err(|e| Error::io("rename into place", path)(e.error))?;
    if durability == Durability::Durable {
        sync_dir(dir)?;
        if tmp_dir != dir {
            sync_dir(tmp_dir)?;
        }
    }
    Ok(())
}

/// A temporary file left behind by a process that died mid-write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stray {
    pub path: std::path::PathBuf,
    pub len: u64,
}

/// The stale temporary files directly in `dir`: their process is gone (or they are old).
/// A missing directory has none.
pub fn strays_in(dir: &Path) -> Result<Vec<Stray>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TMP_PREFIX)) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .unwrap_or_default();
        let pid = rest
            .split_once('-')
            .and_then(|(p, _)| p.parse::<u32>().ok());
        let stale = match pid {
            Some(pid) => age > STRAY_AGE || !process_alive(pid),
            None => age > LEGACY_STRAY_AGE,
        };
        if stale {
            out.push(Stray {
                path: entry.path(),
                len: meta.len(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Removes the stale temporary files directly in `dir`; returns what was removed.
pub fn collect_strays(dir: &Path) -> Result<Vec<Stray>> {
    let strays = strays_in(dir)?;
    for s in &strays {
        match crate::failpoint::hit("fsutil.stray.remove").and_then(|()| fs::remove_file(&s.path)) {
            Ok(()) => {}
            // Collected by another process meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove the stray temporary file", &s.path)(e)),
        }
    }
    Ok(strays)
}

/// Whether a process with this pid exists (on Linux, by `/proc`; elsewhere assumed alive,
/// so that only age collects strays there).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// Writes `bytes` durably to a temporary file beside `path` and lets `before` act on it
/// (e.g. lock it) while no one else can see it yet.
fn durable_temp<'p>(
    path: &'p Path,
    bytes: &[u8],
    before: impl FnOnce(&File) -> Result<()>,
) -> Result<(tempfile::NamedTempFile, &'p Path)> {
    let dir = path.parent().unwrap_or(Path::new("."));
    collect_strays(dir)?;
    let mut tmp = temp_file_in(dir)?;
    tmp.write_all(bytes)
        .map_err(Error::io("write", tmp.path().to_path_buf()))?;
    crate::failpoint::hit("fsutil.claim.sync")
        .and_then(|()| tmp.as_file().sync_data())
        .map_err(Error::io("sync", tmp.path().to_path_buf()))?;
    before(tmp.as_file())?;
    Ok((tmp, dir))
}

/// Publishes `bytes` at `path` only if no file is there yet: a claim. The content is
/// complete and on disk before the name appears (a temporary file renamed without
/// replacing, `RENAME_NOREPLACE` or `link(2)`), so a crash never leaves a partial claim, and
/// of several processes publishing the same name exactly one wins. `before` acts on the
/// file while it is still invisible (to lock it). Returns the published file, or `None`
/// when the name was taken.
pub fn publish_new(
    path: &Path,
    bytes: &[u8],
    before: impl FnOnce(&File) -> Result<()>,
) -> Result<Option<File>> {
    let (tmp, dir) = durable_temp(path, bytes, before)?;
    match tmp.persist_noclobber(path) {
        Ok(file) => {
            sync_dir(dir)?;
            Ok(Some(file))
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(Error::io("publish", path)(e.error)),
    }
}

/// [`write_atomic`] (durable) that lets `before` act on the new file while it is still
/// invisible (to lock it) and returns it.
pub fn replace_with(
    path: &Path,
    bytes: &[u8],
    before: impl FnOnce(&File) -> Result<()>,
) -> Result<File> {
    let (tmp, dir) = durable_temp(path, bytes, before)?;
    let file = tmp
        .persist(path)
        .map_err(|e| Error::io("rename into place", path)(e.error))?;
    sync_dir(dir)?;
    Ok(file)
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
