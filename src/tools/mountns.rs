//! Read-only places beneath a writable one, for `run_command`: a private mount namespace in
//! which each such directory or file (the repository, the configuration file) is
//! bind-mounted onto itself read-only; a mount point can be neither written, removed nor
//! renamed over. A symbolic link (a configuration file reached through one) gets a bind of
//! the link itself (`open_tree` + `move_mount`, which do not follow it), so it cannot be
//! replaced. Each directory between the writable directory and such a place is bound onto
//! itself as it is (writable): a parent of a mount point can be renamed, a mount point
//! cannot, so the place keeps its path.
//!
//! Landlock grants access to whole hierarchies and cannot take a subdirectory back out of a
//! writable one, so the repository (`.axocoatl/`, which normally lies inside the workspace)
//! would be writable by a command in `workspace-write`. Here the child, between fork and
//! exec, enters a mount namespace of its own (`unshare(CLONE_NEWNS)`, or together with a
//! user namespace when the process may not create one alone), makes every mount private (so
//! nothing propagates back), and remounts each protected directory read-only. Then Landlock
//! forbids every further change of the mount topology, so the command cannot undo it, and
//! `/proc/<pid>/root` of processes outside the sandbox is out of reach (Landlock's ptrace
//! restriction).
//!
//! As in `sandbox.rs`, everything that allocates happens in the parent: paths become C
//! strings, the mount flags that must be kept are read with `statvfs`, the uid/gid maps are
//! formatted. The child only makes system calls.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

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

/// Prepared read-only binds, applied in the child by [`ReadOnlyBinds::apply`].
#[derive(Debug)]
pub struct ReadOnlyBinds {
    targets: Vec<Target>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl ReadOnlyBinds {
    /// Prepares read-only binds of `dirs` (directories, files or symbolic links, which must
    /// exist) beneath the `writable` directories, or says why it cannot.
    pub fn new(writable: &[&Path], dirs: &[&Path]) -> Result<ReadOnlyBinds, String> {
        if !available() {
            return Err("the kernel cannot enforce the sandbox: mount namespaces are not available to this process (neither unshare(CLONE_NEWNS) nor an unprivileged user namespace is permitted), so the repository inside the workspace cannot be kept read-only".into());
        }
        let mut places: Vec<(&Path, Kind)> = Vec::new();
        for dir in dirs {
            let kind = match dir.symlink_metadata() {
                Ok(m) if m.file_type().is_symlink() => Kind::Link,
                _ => Kind::ReadOnly,
            };
            places.push((dir, kind));
            let Some(top) = writable
                .iter()
                .filter(|w| dir.starts_with(w))
                .max_by_key(|w| w.components().count())
            else {
                continue;
            };
            for parent in dir.ancestors().skip(1).take_while(|a| **a != **top) {
                if !dirs.contains(&parent) && !places.contains(&(parent, Kind::Pin)) {
                    places.push((parent, Kind::Pin));
                }
            }
        }
        // Outer places first, so that an inner bind lands on the outer one.
        places.sort_by_key(|(p, _)| p.components().count());
        let mut targets = Vec::with_capacity(places.len());
        for (dir, kind) in places {
            let path = CString::new(dir.as_os_str().as_bytes())
                .map_err(|_| format!("{}: the path contains a NUL byte", dir.display()))?;
            // A link's own mount is its directory's (statvfs would follow the link).
            let flags_of = match (kind, dir.parent()) {
                (Kind::Link, Some(parent)) => CString::new(parent.as_os_str().as_bytes())
                    .map_err(|_| format!("{}: the path contains a NUL byte", dir.display()))?,
                _ => path.clone(),
            };
            let remount_flags = kept_flags(&flags_of)
                .map_err(|e| format!("{}: cannot read its mount flags: {e}", dir.display()))?;
            targets.push(Target {
                path,
                kind,
                remount_flags,
            });
        }
        Ok(ReadOnlyBinds {
            targets,
            uid_map: id_map(current_ids().0),
            gid_map: id_map(current_ids().1),
        })
    }

    /// Enters a private mount namespace and remounts every target read-only. Meant for a
    /// `pre_exec` hook, before Landlock is applied: only system calls.
    #[expect(
        unsafe_code,
        reason = "unshare and mount system calls in a pre_exec hook: libc has no safe wrapper"
    )]
    pub fn apply(&self) -> io::Result<()> {
        enter(&self.uid_map, &self.gid_map)?;
        for t in &self.targets {
            match t.kind {
                Kind::Link => bind_link(&t.path)?,
                Kind::Pin => bind(&t.path)?,
                Kind::ReadOnly => {
                    bind(&t.path)?;
                    // SAFETY: a plain system call on a C string this value owns.
                    let r = unsafe {
                        libc::mount(
                            std::ptr::null(),
                            t.path.as_ptr(),
                            std::ptr::null(),
                            t.remount_flags,
                            std::ptr::null(),
                        )
                    };
                    if r != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
        }
        Ok(())
    }
}

/// Binds `path` (and the mounts beneath it) onto itself.
#[expect(
    unsafe_code,
    reason = "the mount system call: libc has no safe wrapper"
)]
fn bind(path: &CStr) -> io::Result<()> {
    // SAFETY: a plain system call on a C string the caller owns.
    let r = unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

/// Enters a new mount namespace (inside a new user namespace when that is the only way) and
/// makes every mount in it private.
#[expect(
    unsafe_code,
    reason = "unshare and mount system calls in a pre_exec hook: libc has no safe wrapper"
)]
fn enter(uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    // SAFETY: plain system calls on memory the caller owns; no allocation.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Kernels before 3.19 have no setgroups file; mapping works without it there.
            match write_proc(c"/proc/self/setgroups", b"deny") {
                Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
                _ => {}
            }
            write_proc(c"/proc/self/uid_map", uid_map)?;
            write_proc(c"/proc/self/gid_map", gid_map)?;
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[expect(
    unsafe_code,
    reason = "open/write/close in a pre_exec hook: std's File may allocate"
)]
fn write_proc(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: plain system calls on a C string and a buffer the caller owns.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

/// Whether this process can give a child a mount namespace of its own (asked once, by
/// starting `/bin/true` in one).
#[expect(
    unsafe_code,
    reason = "pre_exec runs the namespace system calls in the probing child"
)]
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        use std::os::unix::process::CommandExt;
        let (uid, gid) = current_ids();
        let (uid_map, gid_map) = (id_map(uid), id_map(gid));
        let mut probe = std::process::Command::new("/bin/true");
        probe
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: `enter` only makes system calls.
        unsafe {
            probe.pre_exec(move || enter(&uid_map, &gid_map));
        }
        probe.status().map(|s| s.success()).unwrap_or(false)
    })
}

#[expect(unsafe_code, reason = "getuid/getgid: libc has no safe wrapper")]
fn current_ids() -> (u32, u32) {
    // SAFETY: these calls cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// `ID ID 1`: the same id inside the namespace as outside, so files keep their owner.
fn id_map(id: u32) -> Vec<u8> {
    format!("{id} {id} 1").into_bytes()
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
    fn the_maps_keep_the_ids() {
        assert_eq!(id_map(1000), b"1000 1000 1".to_vec());
    }

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
    #[expect(clippy::print_stderr, reason = "a skipped test says why")]
    fn links_are_bound_themselves_and_the_directories_on_the_way_are_pinned() {
        if !available() {
            eprintln!("skipped: this process can create no mount namespace");
            return;
        }
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
        let binds = ReadOnlyBinds::new(&[&ws, tmp.path()], &[&real, &link, &repo]).expect("binds");
        let plan: Vec<(String, Kind)> = binds
            .targets
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
}
