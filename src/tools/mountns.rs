//! Read-only places beneath a writable one, for `run_command`: a private mount namespace in
//! which each such directory or file (the repository, the configuration file) is
//! bind-mounted onto itself read-only; a mount point can be neither written, removed nor
//! renamed over.
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

/// One directory or file to be made read-only, with the flags of its mount that must be kept.
#[derive(Debug)]
struct Target {
    path: CString,
    remount_flags: libc::c_ulong,
}

/// Prepared read-only binds, applied in the child by [`ReadOnlyBinds::apply`].
#[derive(Debug)]
pub struct ReadOnlyBinds {
    targets: Vec<Target>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl ReadOnlyBinds {
    /// Prepares read-only binds of `dirs` (directories or files, which must exist), or says
    /// why it cannot.
    pub fn new(dirs: &[&Path]) -> Result<ReadOnlyBinds, String> {
        if !available() {
            return Err("the kernel cannot enforce the sandbox: mount namespaces are not available to this process (neither unshare(CLONE_NEWNS) nor an unprivileged user namespace is permitted), so the repository inside the workspace cannot be kept read-only".into());
        }
        let mut targets = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let path = CString::new(dir.as_os_str().as_bytes())
                .map_err(|_| format!("{}: the path contains a NUL byte", dir.display()))?;
            let remount_flags = kept_flags(&path)
                .map_err(|e| format!("{}: cannot read its mount flags: {e}", dir.display()))?;
            targets.push(Target {
                path,
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
            // SAFETY: plain system calls on C strings this value owns.
            unsafe {
                if libc::mount(
                    t.path.as_ptr(),
                    t.path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                if libc::mount(
                    std::ptr::null(),
                    t.path.as_ptr(),
                    std::ptr::null(),
                    t.remount_flags,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
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
}
