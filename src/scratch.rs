//! The private temporary directory of each `run_command` (its `$TMPDIR`, writable in every
//! sandbox): mode 0700, named after the process that made it (`<pid>-<start time>-<n>`),
//! under a base directory that no other user can have made first:
//!
//! - `$XDG_RUNTIME_DIR/axocoatl-commands` when the runtime directory is usable: absolute, a
//!   directory of this user's that no one else may enter (as the XDG specification requires
//!   of it), and not one that the sandbox hides from commands (`/run/user/<uid>` holds the
//!   user's D-Bus and systemd sockets, so it is hidden, and not used);
//! - else a private directory with a random name in the system's temporary directory
//!   (`axocoatl-commands-<uid>-<random>`), which the repository's `run/scratch/<uid>` note
//!   names so that later processes find it again.
//!
//! A base that is not a private directory of this user (another user made or replaced it,
//! it became a symlink, its mode changed) is never used and never stops a command: a new
//! random one is made. A command's directory is removed when the command ends; one left
//! behind by a process that was killed is removed by [`sweep`], which every open of a
//! repository runs.
//!
//! A pid alone could be reused; with the process's start time (from `/proc/<pid>/stat`) the
//! owner is known to be gone exactly when no process has both.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use axocoatl_store::run::scratch as note;

/// The runtime directory's subdirectory for commands.
const RUNTIME_BASE: &str = "axocoatl-commands";

/// A command's temporary directory, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new directory for a command of the repository `repo` (its `.axocoatl` directory);
    /// `hidden` are the directories the command's sandbox hides (not a place for its own).
    pub fn new(repo: &Path, hidden: &[PathBuf]) -> io::Result<Scratch> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base(repo, hidden)?;
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

/// Removes the temporary directories whose process is gone, in the bases the commands of
/// the repository `repo` use. Errors are ignored: what cannot be removed now is tried
/// again at the next open.
pub fn sweep(repo: &Path) {
    let uid = euid();
    let bases = [runtime_base(&runtime_dir()), note::read(repo, uid)];
    for base in bases.into_iter().flatten() {
        if !private(&base, uid) {
            continue;
        }
        let Ok(entries) = fs::read_dir(&base) else {
            continue;
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
fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// `$XDG_RUNTIME_DIR`, when it is set.
fn runtime_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
}

/// The base in the runtime directory `dir`, when that is usable: an absolute path to a
/// directory of this user's that no one else may enter (the XDG specification's rule).
fn runtime_base(dir: &Option<PathBuf>) -> Option<PathBuf> {
    let dir = dir.as_ref().filter(|d| d.is_absolute())?;
    private(dir, euid()).then(|| dir.join(RUNTIME_BASE))
}

/// Whether `base` lies in one of the `hidden` directories (by their real paths).
fn in_hidden(base: &Path, hidden: &[PathBuf]) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let base = real(base.parent().unwrap_or(base));
    hidden.iter().any(|h| base.starts_with(real(h)))
}

/// Whether `dir` is a directory (not a symlink) of user `uid` that no one else may enter.
fn private(dir: &Path, uid: u32) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0)
}

/// The base directory of the commands of repository `repo`: the runtime directory's (unless
/// the sandbox hides it: `hidden`), else the one the repository's note names, else a new
/// one (noted). Each is used only when it is a private directory of this user.
fn base(repo: &Path, hidden: &[PathBuf]) -> io::Result<PathBuf> {
    let uid = euid();
    if let Some(base) = runtime_base(&runtime_dir()).filter(|b| !in_hidden(b, hidden)) {
        // One that cannot be made is passed over like one that is not private.
        let _ = fs::DirBuilder::new().mode(0o700).create(&base);
        if private(&base, uid) {
            return Ok(base);
        }
    }
    // This process's base for the repository, when its note could not be written (a
    // read-only repository): one new directory per process, not one per command.
    static MADE: OnceLock<Mutex<Vec<(PathBuf, PathBuf)>>> = OnceLock::new();
    let made = MADE.get_or_init(Mutex::default);
    let mut made = made.lock().unwrap_or_else(|p| p.into_inner());
    let noted = note::read(repo, uid)
        .or_else(|| made.iter().find(|(r, _)| r == repo).map(|(_, b)| b.clone()));
    if let Some(base) = noted.filter(|b| private(b, uid)) {
        return Ok(base);
    }
    let base = tempfile::Builder::new()
        .prefix(&format!("{RUNTIME_BASE}-{uid}-"))
        .rand_bytes(12)
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(std::env::temp_dir())?
        .keep();
    if note::write(repo, uid, &base).is_err() {
        made.retain(|(r, _)| r != repo);
        made.push((repo.to_path_buf(), base.clone()));
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

    /// A repository directory for the notes (only `run/` of it is used).
    fn repo() -> tempfile::TempDir {
        tempfile::tempdir().expect("tempdir")
    }

    #[test]
    fn a_scratch_directory_is_private_and_removed() {
        let r = repo();
        let s = Scratch::new(r.path(), &[]).expect("scratch");
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
        let r = repo();
        let base = base(r.path(), &[]).expect("base");
        assert!(owner_alive(owner_tag()));
        // pid 1 runs, but did not start at that tick.
        let stale = base.join(format!("1-999999999999-{}", std::process::id()));
        fs::create_dir_all(stale.join("sub")).expect("mkdir");
        let live = Scratch::new(r.path(), &[]).expect("scratch");
        sweep(r.path());
        assert!(!stale.exists());
        assert!(live.path().exists());
        assert!(owner_alive("not-a-tag"));
    }

    /// The base is named at random and found again through the repository's note; a noted
    /// base that is not a private directory of this user is replaced, never used.
    #[test]
    fn the_base_is_random_noted_and_replaced_when_it_is_not_private() {
        if runtime_base(&runtime_dir()).is_some() {
            // The runtime directory's base is used instead; its rule is tested below.
            return;
        }
        let r = repo();
        let first = base(r.path(), &[]).expect("base");
        let uid = euid();
        let name = first
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with(&format!("axocoatl-commands-{uid}-")),
            "{name}"
        );
        assert!(
            name.len() >= format!("axocoatl-commands-{uid}-").len() + 12,
            "{name}"
        );
        assert_eq!(note::read(r.path(), uid).as_deref(), Some(first.as_path()));
        assert_eq!(base(r.path(), &[]).expect("again"), first);
        // Opened up to others: not private any more.
        fs::set_permissions(&first, fs::Permissions::from_mode(0o777)).expect("chmod");
        let second = base(r.path(), &[]).expect("replaced");
        assert_ne!(second, first);
        assert_eq!(note::read(r.path(), uid).as_deref(), Some(second.as_path()));
        let s = Scratch::new(r.path(), &[]).expect("a command still gets its directory");
        assert!(s.path().starts_with(&second));
        drop(s);
        // A symlink in its place is not followed.
        fs::remove_dir(&second).expect("rm");
        std::os::unix::fs::symlink(&first, &second).expect("symlink");
        let third = base(r.path(), &[]).expect("replaced");
        assert!(third != second && third != first);
        for d in [&first, &third] {
            let _ = fs::remove_dir_all(d);
        }
        let _ = fs::remove_file(&second);
    }

    #[test]
    fn the_runtime_directory_is_used_only_when_it_is_private() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("runtime");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(
            runtime_base(&Some(dir.clone())),
            Some(dir.join(RUNTIME_BASE))
        );
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(runtime_base(&Some(dir.clone())), None);
        assert_eq!(runtime_base(&Some(PathBuf::from("relative"))), None);
        // A runtime directory the sandbox hides is no place for a command's own.
        let inside = dir.join(RUNTIME_BASE);
        assert!(in_hidden(&inside, std::slice::from_ref(&dir)));
        assert!(!in_hidden(&inside, &[tmp.path().join("elsewhere")]));
        assert_eq!(runtime_base(&None), None);
    }
}
