//! The mounts of a command's own mount namespace (entered in `launch.rs`): a fresh `/proc`
//! for its pid namespace, the repository's `run/` directory covered by an empty read-only
//! tmpfs, and read-only places beneath a writable one (the repository, the configuration
//! file) bind-mounted onto themselves read-only.
//!
//! Why each:
//! - `/proc`: the command's pid namespace shows only its own processes there; without a
//!   fresh mount it would still read every process of the machine (their `environ` too,
//!   when run by root).
//! - `run/`: the control sockets of `serve` and of its actors live there. Landlock has no
//!   rule for `connect(2)` on a pathname socket and a read-only mount does not stop it
//!   either; a socket that is not in the command's view of the filesystem cannot be reached.
//! - Read-only binds: Landlock grants access to whole hierarchies and cannot take a
//!   subdirectory back out of a writable one, so the repository (`.axocoatl/`, which normally
//!   lies inside the workspace) would be writable by a command in `workspace-write`. A mount
//!   point can be neither written, removed nor renamed over. A symbolic link (a
//!   configuration file reached through one) gets a bind of the link itself (`open_tree` +
//!   `move_mount`, which do not follow it), so it cannot be replaced. Each directory between
//!   the writable directory and such a place is bound onto itself as it is (writable): a
//!   parent of a mount point can be renamed, a mount point cannot, so the place keeps its
//!   path.
//!
//! Every mount is made private first (slave for `full-access`, which keeps seeing the host's
//! later mounts), so nothing propagates back. Then Landlock forbids every further change of
//! the mount topology (and seccomp refuses the mount calls), so the command cannot undo it.
//!
//! As in `sandbox.rs`, everything that allocates happens in the parent: paths become C
//! strings and the mount flags that must be kept are read with `statvfs`. The child only
//! makes system calls.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One place to bind, with the flags of its mount that must be kept.
#[derive(Debug)]
struct Target {
    path: CString,
    kind: Kind,
    remount_flags: libc::c_ulong,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A directory or file, bound read-only.
    ReadOnly,
    /// A symbolic link, bound itself (not what it points to).
    Link,
    /// A directory on the way to one of the others, bound as it is so it keeps its name.
    Pin,
}

/// Prepared mounts, applied in the child by [`Mounts::apply`] once it is in its own mount
/// (and pid) namespace.
#[derive(Debug)]
pub struct Mounts {
    /// `MS_PRIVATE` or `MS_SLAVE`, applied to every mount first.
    propagation: libc::c_ulong,
    read_only: Vec<Target>,
    covered: Vec<CString>,
    /// Directories and sockets hidden if they are still there when the command starts.
    hidden_dirs: Vec<CString>,
    hidden_files: Vec<CString>,
    proc: bool,
}

impl Mounts {
    /// The mounts of a sandboxed command: private propagation, a fresh `/proc`.
    pub fn sandbox() -> Mounts {
        Mounts {
            propagation: libc::MS_PRIVATE,
            read_only: Vec::new(),
            covered: Vec::new(),
            hidden_dirs: Vec::new(),
            hidden_files: Vec::new(),
            proc: true,
        }
    }

    /// The mounts of a `full-access` command in a pid namespace: the host's mounts keep
    /// propagating in, and only `/proc` is its own.
    pub fn supervised() -> Mounts {
        Mounts {
            propagation: libc::MS_SLAVE,
            read_only: Vec::new(),
            covered: Vec::new(),
            hidden_dirs: Vec::new(),
            hidden_files: Vec::new(),
            proc: true,
        }
    }

    /// Makes `places` (directories, files or symbolic links, which must exist) beneath the
    /// `writable` directories read-only, each keeping its path.
    pub fn read_only(&mut self, writable: &[&Path], places: &[&Path]) -> Result<(), String> {
        let mut plan: Vec<(&Path, Kind)> = Vec::new();
        for place in places {
            let kind = match place.symlink_metadata() {
                Ok(m) if m.file_type().is_symlink() => Kind::Link,
                _ => Kind::ReadOnly,
            };
            plan.push((place, kind));
            let Some(top) = writable
                .iter()
                .filter(|w| place.starts_with(w))
                .max_by_key(|w| w.components().count())
            else {
                continue;
            };
            for parent in place.ancestors().skip(1).take_while(|a| **a != **top) {
                if !places.contains(&parent) && !plan.contains(&(parent, Kind::Pin)) {
                    plan.push((parent, Kind::Pin));
                }
            }
        }
        // Outer places first, so that an inner bind lands on the outer one.
        plan.sort_by_key(|(p, _)| p.components().count());
        for (place, kind) in plan {
            let path = c_path(place)?;
            // A link's own mount is its directory's (statvfs would follow the link).
            let flags_of = match (kind, place.parent()) {
                (Kind::Link, Some(parent)) => c_path(parent)?,
                _ => path.clone(),
            };
            let remount_flags = kept_flags(&flags_of)
                .map_err(|e| format!("{}: cannot read its mount flags: {e}", place.display()))?;
            self.read_only.push(Target {
                path,
                kind,
                remount_flags,
            });
        }
        Ok(())
    }

    /// Hides what is in the directory `path` behind an empty read-only tmpfs.
    pub fn cover(&mut self, path: &Path) -> Result<(), String> {
        self.covered.push(c_path(path)?);
        Ok(())
    }

    /// Hides the well-known control sockets of the machine's services ([`well_known_sockets`])
    /// that exist, except where that would hide one of `keep` (the workspace, the
    /// repository, ...). Best effort: one that vanishes before the command starts is skipped.
    pub fn hide_well_known_sockets(&mut self, keep: &[&Path]) {
        for path in well_known_sockets() {
            let Ok(real) = path.canonicalize() else {
                continue;
            };
            if keep.iter().any(|k| k.starts_with(&real)) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&real) else {
                continue;
            };
            let Ok(c) = c_path(&real) else { continue };
            let list = if meta.is_dir() {
                &mut self.hidden_dirs
            } else {
                &mut self.hidden_files
            };
            if !list.contains(&c) {
                list.push(c);
            }
        }
    }

    /// Applies every mount. Meant for a `pre_exec` hook, in the new namespaces and before
    /// Landlock is applied: only system calls.
    #[expect(
        unsafe_code,
        reason = "mount system calls in a pre_exec hook: libc has no safe wrapper"
    )]
    pub fn apply(&self) -> io::Result<()> {
        let null = std::ptr::null::<libc::c_char>();
        // SAFETY: plain system calls on C strings this value owns or that are static.
        unsafe {
            check(libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REC | self.propagation,
                null.cast(),
            ))?;
            for t in &self.read_only {
                if t.kind == Kind::Link {
                    bind_link(&t.path)?;
                    continue;
                }
                check(libc::mount(
                    t.path.as_ptr(),
                    t.path.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    null.cast(),
                ))?;
                if t.kind == Kind::ReadOnly {
                    check(libc::mount(
                        null,
                        t.path.as_ptr(),
                        null,
                        t.remount_flags,
                        null.cast(),
                    ))?;
                }
            }
            for dir in &self.covered {
                check(empty_over(dir))?;
            }
            for dir in &self.hidden_dirs {
                present(empty_over(dir))?;
            }
            for file in &self.hidden_files {
                present(libc::mount(
                    c"/dev/null".as_ptr(),
                    file.as_ptr(),
                    null,
                    libc::MS_BIND,
                    null.cast(),
                ))?;
            }
            if self.proc {
                check(libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    null.cast(),
                ))?;
            }
        }
        Ok(())
    }
}

/// Binds the symbolic link `path` itself onto itself: `open_tree` with
/// `AT_SYMLINK_NOFOLLOW` clones the link's own mount, and `move_mount` without
/// `MOVE_MOUNT_T_SYMLINKS` attaches it on the link, not on what it points to (Linux 5.2).
#[expect(
    unsafe_code,
    reason = "open_tree and move_mount system calls: libc has no wrapper"
)]
fn bind_link(path: &CStr) -> io::Result<()> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    // SAFETY: plain system calls on a C string the caller owns and a descriptor they
    // return, closed here.
    unsafe {
        let tree = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
        );
        if tree < 0 {
            return Err(io::Error::last_os_error());
        }
        let tree = tree as libc::c_int;
        let r = libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        );
        let err = io::Error::last_os_error();
        libc::close(tree);
        if r != 0 {
            return Err(err);
        }
    }
    Ok(())
}

/// Mounts an empty read-only tmpfs over `dir`, hiding what it holds; mount(2)'s result.
/// Fit for a `pre_exec` hook: one system call, no allocation.
#[expect(
    unsafe_code,
    reason = "the mount system call: libc has no safe wrapper"
)]
fn empty_over(dir: &CStr) -> libc::c_int {
    // SAFETY: a C string the caller owns and static ones.
    unsafe {
        libc::mount(
            c"axocoatl-hidden".as_ptr(),
            dir.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,mode=0555".as_ptr().cast(),
        )
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// [`check`] that lets a path that is gone (or changed kind) pass.
fn present(r: libc::c_int) -> io::Result<()> {
    match check(r) {
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::ENOTDIR | libc::EISDIR)
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Where the machine's services keep the sockets that control them: the system and user
/// D-Bus and systemd (`systemd-run` starts anything outside the sandbox), container
/// engines, snapd, databases, libvirt, CUPS, the user's runtime directory (its bus,
/// podman, gpg-agent), X11 and ICE, tmux, and the ssh-agent of `SSH_AUTH_SOCK`. The
/// sandbox's Landlock ruleset has no rule for `connect(2)` to a pathname socket, so a
/// command must not see them. (`/var/run` is normally a link to `/run`.)
pub fn well_known_sockets() -> Vec<std::path::PathBuf> {
    // SAFETY: geteuid cannot fail and touches no memory.
    #[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
    let uid = unsafe { libc::geteuid() };
    let mut paths: Vec<std::path::PathBuf> = [
        "/run/dbus",
        "/var/run/dbus",
        "/run/systemd",
        "/run/docker.sock",
        "/var/run/docker.sock",
        "/run/docker",
        "/run/containerd",
        "/run/podman",
        "/run/crio",
        "/run/snapd.socket",
        "/run/snapd-snap.socket",
        "/run/postgresql",
        "/run/mysqld",
        "/run/libvirt",
        "/run/cups",
        "/tmp/.X11-unix",
        "/tmp/.ICE-unix",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .collect();
    paths.push(format!("/run/user/{uid}").into());
    paths.push(format!("/tmp/tmux-{uid}").into());
    if let Some(agent) = std::env::var_os("SSH_AUTH_SOCK") {
        if let Some(dir) = Path::new(&agent).parent().filter(|d| *d != Path::new("/")) {
            paths.push(dir.to_path_buf());
        }
    }
    paths
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: the path contains a NUL byte", path.display()))
}

/// The remount flags for a read-only bind of `path`: read-only, plus the flags of the mount
/// it lies on that a user namespace may not drop (nosuid, nodev, noexec, atime flags).
#[expect(unsafe_code, reason = "statvfs: libc has no safe wrapper")]
fn kept_flags(path: &CStr) -> io::Result<libc::c_ulong> {
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs writes into the buffer we pass and reads a C string we own.
    let st = unsafe {
        if libc::statvfs(path.as_ptr(), st.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        st.assume_init()
    };
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_flags_always_ask_for_a_read_only_bind() {
        let f = kept_flags(c"/").expect("statvfs /");
        assert_eq!(
            f & (libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY
        );
    }

    /// The plan for a configuration reached through a symlink, kept in a subdirectory: the
    /// link is bound itself, the directory on the way is pinned, outer places come first.
    #[test]
    fn links_are_bound_themselves_and_the_directories_on_the_way_are_pinned() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("conf/deep")).expect("mkdir");
        std::fs::create_dir_all(ws.join(".axocoatl")).expect("mkdir");
        std::fs::write(ws.join("conf/deep/real.yaml"), "x").expect("write");
        std::os::unix::fs::symlink("conf/deep/real.yaml", ws.join("axocoatl.yaml"))
            .expect("symlink");
        let (link, real, repo) = (
            ws.join("axocoatl.yaml"),
            ws.join("conf/deep/real.yaml"),
            ws.join(".axocoatl"),
        );
        let mut mounts = Mounts::sandbox();
        mounts
            .read_only(&[&ws, tmp.path()], &[&real, &link, &repo])
            .expect("binds");
        let plan: Vec<(String, Kind)> = mounts
            .read_only
            .iter()
            .map(|t| {
                let p = Path::new(std::ffi::OsStr::from_bytes(t.path.as_bytes()));
                (
                    p.strip_prefix(&ws).expect("in ws").display().to_string(),
                    t.kind,
                )
            })
            .collect();
        let expected = [
            ("conf", Kind::Pin),
            ("axocoatl.yaml", Kind::Link),
            (".axocoatl", Kind::ReadOnly),
            ("conf/deep", Kind::Pin),
            ("conf/deep/real.yaml", Kind::ReadOnly),
        ];
        let expected: Vec<(String, Kind)> = expected
            .iter()
            .map(|(p, k)| ((*p).to_owned(), *k))
            .collect();
        assert_eq!(plan, expected);
    }

    #[test]
    fn paths_with_nul_are_refused() {
        let mut m = Mounts::sandbox();
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"a\0b"));
        assert!(m.cover(bad).expect_err("refused").contains("NUL"));
    }
}
