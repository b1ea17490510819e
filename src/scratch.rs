//! The private temporary directory of each `run_command` (its `$TMPDIR`, writable in every
//! sandbox): mode 0700, under a directory of this user's (`axocoatl-commands-<uid>` in the
//! system's temporary directory, also 0700), named after the process that made it
//! (`<pid>-<start time>-<n>`). It is removed when the command ends; one left behind by a
//! process that was killed is removed by [`sweep`], which every open of a repository runs.
//!
//! A pid alone could be reused; with the process's start time (from `/proc/<pid>/stat`) the
//! owner is known to be gone exactly when no process has both.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A command's temporary directory, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new() -> io::Result<Scratch> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base()?;
        let dir = base.join(format!(
            "{}-{}",
            owner_tag(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::DirBuilder::new().mode(0o700).create(&dir)?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        remove_tree(&self.dir);
    }
}

/// Removes the temporary directories whose process is gone. Errors are ignored: what cannot
/// be removed now is tried again at the next open.
pub fn sweep() {
    let Ok(entries) = fs::read_dir(base_path()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if let Some(tag) = name.to_str() {
            if !owner_alive(tag) {
                remove_tree(&entry.path());
            }
        }
    }
}

/// `<pid>-<start time>` of this process.
pub(crate) fn owner_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}-{}", start_time(pid).unwrap_or(0))
    })
}

/// Whether the process named by a tag's `<pid>-<start time>` prefix still runs. Names that
/// are not tags count as alive (left alone).
pub(crate) fn owner_alive(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let (Some(pid), Some(start)) = (
        parts.next().and_then(|p| p.parse::<u32>().ok()),
        parts.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return true;
    };
    match start_time(pid) {
        Some(now) => now == start,
        // No such process, or /proc unreadable: only the first means gone.
        None => {
            let gone = Path::new("/proc/self/stat").exists()
                && !Path::new(&format!("/proc/{pid}")).exists();
            !gone
        }
    }
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit_once(") ")?.1;
    after_name.split(' ').nth(19)?.parse().ok()
}

#[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
fn base_path() -> PathBuf {
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("axocoatl-commands-{uid}"))
}

/// The directory of this user's command directories, made 0700 if missing; one that is not a
/// private directory of this user (another user made it, or a symlink) is refused.
#[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
fn base() -> io::Result<PathBuf> {
    let base = base_path();
    match fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(&base)?;
    // SAFETY: geteuid cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private directory of this user (mode 0700); remove it",
            base.display()
        )));
    }
    Ok(base)
}

/// Removes `dir` and everything in it, first giving back the owner's permissions on any
/// directory a command made unreadable.
fn remove_tree(dir: &Path) {
    if fs::remove_dir_all(dir).is_ok() {
        return;
    }
    open_up(dir);
    let _ = fs::remove_dir_all(dir);
}

fn open_up(dir: &Path) {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            open_up(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_is_private_and_removed() {
        let s = Scratch::new().expect("scratch");
        let dir = s.path().to_path_buf();
        let meta = fs::metadata(&dir).expect("meta");
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(
            fs::metadata(dir.parent().expect("base"))
                .expect("base")
                .mode()
                & 0o777,
            0o700
        );
        fs::create_dir(dir.join("locked")).expect("mkdir");
        fs::write(dir.join("locked/f"), "x").expect("write");
        fs::set_permissions(dir.join("locked"), fs::Permissions::from_mode(0o000)).expect("chmod");
        drop(s);
        assert!(!dir.exists());
    }

    #[test]
    fn only_directories_of_gone_processes_are_swept() {
        let base = base().expect("base");
        assert!(owner_alive(owner_tag()));
        // pid 1 runs, but did not start at that tick.
        let stale = base.join(format!("1-999999999999-{}", std::process::id()));
        fs::create_dir_all(stale.join("sub")).expect("mkdir");
        let live = Scratch::new().expect("scratch");
        sweep();
        assert!(!stale.exists());
        assert!(live.path().exists());
        assert!(owner_alive("not-a-tag"));
    }
}
