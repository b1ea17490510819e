//! The confinement of `run_command` on Linux: Landlock, seccomp, no_new_privs and no
//! capabilities. The namespaces a command runs in (mount, pid, IPC, and user where needed)
//! are set up before it, in `launch.rs`.
//!
//! Everything that allocates or can fail in an interesting way happens in the parent: the
//! kernel's support is probed, the Landlock ruleset is built (its rules opened as `O_PATH`
//! descriptors) and the seccomp program is assembled. Between fork and exec the child only
//! makes system calls ([`Confinement::apply`], [`drop_capabilities`]), which is all that is
//! safe there.
//!
//! What is enforced:
//! - Landlock (ABI 1 and later): the whole filesystem is readable and executable; writes of
//!   any kind (create, remove, rename, write, truncate on ABI ≥ 3, device ioctls on ABI ≥ 5)
//!   only beneath the writable directories and to `/dev/null`, and nowhere may a device
//!   node be made (MAKE_CHAR and MAKE_BLOCK are granted on no directory). Every access right
//!   the running kernel knows is handled, as a hard requirement: nothing is silently dropped.
//! - Landlock ABI ≥ 4: no TCP bind or connect at all. ABI ≥ 6: no signals to processes
//!   outside the sandbox and no connecting to abstract Unix sockets created outside it.
//! - seccomp: `socket`/`socketpair` fail unless the family is `AF_UNIX` (so no network
//!   socket of any kind, on every Landlock ABI); `prlimit64` fails for any process but the
//!   caller (pid 0); io_uring is unavailable (it could open sockets without the `socket`
//!   call); the kernel keyrings (`keyctl`, `add_key`, `request_key`) and every mount call
//!   are refused; on x86_64 the x32 syscall numbers are refused; on Landlock ABI < 3,
//!   `truncate(2)` is refused (Landlock cannot control it there); system calls of another
//!   architecture kill the process.
//! - `PR_SET_NO_NEW_PRIVS`: setuid binaries and file capabilities grant nothing.
//! - Capabilities: the bounding set, the ambient set and the effective, permitted and
//!   inheritable sets are emptied and the securebits locked (`SECBIT_NOROOT`), so a command
//!   run by root holds no capability before or after exec (no `mknod`, no raw disk access).
//!
//! A kernel without Landlock or seccomp filters gets no sandbox at all: [`confine`] refuses
//! with the missing feature's name, and the command is not run.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

/// What the running kernel can enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI version; 0 when Landlock is unavailable.
    pub landlock_abi: i32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

impl Support {
    /// Asks the kernel once per process.
    pub fn probe() -> Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        *SUPPORT.get_or_init(|| Support {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_filters(),
        })
    }

    /// A short description, e.g. `Landlock ABI 7 + seccomp`.
    pub fn describe(&self) -> String {
        match (self.landlock_abi, self.seccomp) {
            (0, false) => "no Landlock, no seccomp".into(),
            (0, true) => "seccomp only (no Landlock)".into(),
            (abi, true) => format!("Landlock ABI {abi} + seccomp"),
            (abi, false) => format!("Landlock ABI {abi}, no seccomp"),
        }
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

#[expect(
    unsafe_code,
    reason = "the landlock system call: libc has no safe wrapper"
)]
fn landlock_abi() -> i32 {
    // SAFETY: with a null attribute and size 0 this only asks for the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as i32
}

#[expect(
    unsafe_code,
    reason = "the seccomp system call: libc has no safe wrapper"
)]
fn seccomp_filters() -> bool {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: asks whether an action is available; reads one u32 we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    r == 0 && AUDIT_ARCH.is_some()
}

/// The seccomp architecture token of this build, where we have a filter for it.
const AUDIT_ARCH: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(0xC000_003E) // AUDIT_ARCH_X86_64
} else if cfg!(target_arch = "aarch64") {
    Some(0xC000_00B7) // AUDIT_ARCH_AARCH64
} else {
    None
};

/// A prepared sandbox, applied to a child process by [`Confinement::apply`].
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
    filter: Vec<libc::sock_filter>,
}

impl Confinement {
    /// Confines the calling process. Meant for a `pre_exec` hook: it only makes system
    /// calls, allocates nothing and takes no locks.
    #[expect(
        unsafe_code,
        reason = "prctl, landlock and seccomp system calls in a pre_exec hook: libc has no safe wrapper"
    )]
    pub fn apply(&self) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.filter.len() as u16,
            filter: self.filter.as_ptr().cast_mut(),
        };
        // SAFETY: plain system calls on memory and descriptors this value owns.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Prepares a sandbox whose only writable places are `writable` (and `/dev/null`), or says
/// which kernel feature is missing. Places beneath them that must stay read-only are made
/// so by the command's mount namespace (`mountns.rs`).
pub fn confine(writable: &[&Path]) -> Result<Confinement, String> {
    confine_with(Support::probe(), writable)
}

fn confine_with(support: Support, writable: &[&Path]) -> Result<Confinement, String> {
    if support.landlock_abi < 1 {
        return Err("the kernel cannot enforce the sandbox: Landlock is not available (it needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y and `landlock` in the `lsm=` boot parameter)".into());
    }
    if !support.seccomp {
        return Err(if AUDIT_ARCH.is_none() {
            "the sandbox has no seccomp filter for this CPU architecture".into()
        } else {
            "the kernel cannot enforce the sandbox: seccomp filters are not available (CONFIG_SECCOMP_FILTER)".into()
        });
    }
    let ruleset = landlock_ruleset(support.landlock_abi, writable)
        .map_err(|e| format!("the Landlock ruleset could not be built: {e}"))?;
    Ok(Confinement {
        ruleset,
        filter: seccomp_program(support.landlock_abi),
    })
}

fn landlock_ruleset(abi_version: i32, writable: &[&Path]) -> Result<OwnedFd, String> {
    let abi = ABI::from(abi_version);
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    if abi_version >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
    }
    if abi_version >= 6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| e.to_string())?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(landlock::path_beneath_rules(
            ["/"],
            AccessFs::from_read(abi),
        ))
        .map_err(|e| e.to_string())?;
    // Writable, except that no device node may be made anywhere.
    let writes = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    for dir in writable {
        let fd = PathFd::new(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        created = created
            .add_rule(PathBeneath::new(fd, writes))
            .map_err(|e| e.to_string())?;
    }
    let null = PathFd::new("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    created = created
        .add_rule(PathBeneath::new(null, AccessFs::from_file(abi)))
        .map_err(|e| e.to_string())?;
    Option::<OwnedFd>::from(created).ok_or_else(|| "Landlock did not create a ruleset".into())
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of the first argument (little-endian targets only: x86_64, aarch64).
const ARG0: u32 = 16;

/// The seccomp program (see the module comment for what it refuses).
fn seccomp_program(landlock_abi: i32) -> Vec<libc::sock_filter> {
    let load = |offset| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset);
    let ret = |action| stmt(libc::BPF_RET | libc::BPF_K, action);
    let allow = libc::SECCOMP_RET_ALLOW;
    let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let mut p = vec![
        load(ARCH),
        jump(AUDIT_ARCH.unwrap_or(0), 1, 0),
        ret(libc::SECCOMP_RET_KILL_PROCESS),
        load(NR),
    ];
    if cfg!(target_arch = "x86_64") {
        // x32 system calls are the x86_64 numbers with bit 30 set.
        p.push(libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: 0x4000_0000,
        });
        p.push(ret(eperm));
    }
    let mut refused = vec![
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // Landlock already forbids changing the mount topology; refused here as well, so
        // the read-only binds of `mountns.rs` stay even if that rule were ever relaxed.
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_mount_setattr,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_pivot_root,
        // The kernel keyrings may hold the user's credentials.
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ];
    if landlock_abi < 3 {
        refused.push(libc::SYS_truncate);
    }
    for nr in refused {
        p.push(jump(nr as u32, 0, 1));
        p.push(ret(eperm));
    }
    // Each: not this call, skip the four instructions below with the number still loaded;
    // else allow only when the first argument is the value given.
    for (nr, only) in [
        (libc::SYS_socket, libc::AF_UNIX as u32),
        (libc::SYS_socketpair, libc::AF_UNIX as u32),
        // The caller's own limits (pid 0) only: no process outside can be limited.
        (libc::SYS_prlimit64, 0),
    ] {
        p.push(jump(nr as u32, 0, 4));
        p.push(load(ARG0));
        p.push(jump(only, 0, 1));
        p.push(ret(allow));
        p.push(ret(eperm));
    }
    p.push(ret(allow));
    p
}

/// Whether the peer of the connected Unix socket `socket` is a sandboxed command, of this
/// or of any other axocoatl on the machine: a process in a pid namespace nested in this
/// process's, with no_new_privs set (both read from its `/proc/<pid>/status`, which any
/// user may read). The control sockets of serve and the actors refuse such peers: the
/// command's own repository's `run/` is out of its view, but another repository's is not.
/// A peer whose status cannot be read counts as sandboxed; a peer whose pid this process
/// cannot see (an ancestor or sibling pid namespace) does not.
pub fn peer_is_sandboxed(socket: std::os::fd::BorrowedFd<'_>) -> bool {
    let Some(pid) = peer_pid(socket) else {
        return true;
    };
    if pid == 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    // NSpid: its pid in each pid namespace from this /proc's down to its own.
    let nested = match field("NSpid:") {
        Some(pids) => pids.split_whitespace().count() > 1,
        // Before Linux 4.1: compare the namespaces themselves.
        None => {
            let ns = |path: &str| std::fs::read_link(path).ok();
            let theirs = ns(&format!("/proc/{pid}/ns/pid"));
            theirs.is_none() || theirs != ns("/proc/self/ns/pid")
        }
    };
    nested && field("NoNewPrivs:") != Some("0")
}

#[expect(
    unsafe_code,
    reason = "getsockopt(SO_PEERCRED): libc has no safe wrapper"
)]
fn peer_pid(socket: std::os::fd::BorrowedFd<'_>) -> Option<libc::pid_t> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into a struct of this frame.
    let r = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.pid)
}

/// The highest capability number the running kernel knows (asked once).
pub fn last_capability() -> libc::c_int {
    static LAST: OnceLock<libc::c_int> = OnceLock::new();
    *LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63)
    })
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_NO_CAP_AMBIENT_RAISE, each with its
/// lock, and SECBIT_KEEP_CAPS locked off: exec never grants root's capabilities again.
const SECUREBITS: libc::c_ulong = 0b1110_1111;

/// Empties every capability set of the calling process (bounding, ambient, effective,
/// permitted, inheritable) and locks the securebits, so that no exec gives any back. For a
/// `pre_exec` hook (only system calls); the process must still hold CAP_SETPCAP (root, or
/// root of its own user namespace).
#[expect(
    unsafe_code,
    reason = "prctl and capset in a pre_exec hook: libc has no safe wrapper"
)]
pub fn drop_capabilities(last_cap: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system calls on integers and on memory owned by this frame.
    unsafe {
        for cap in 0..=last_cap {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINVAL) {
                    break; // past the kernel's last capability
                }
                return Err(e);
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e); // EINVAL: a kernel before ambient capabilities (4.3)
            }
        }
        if libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header as *const CapHeader, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_kernel_features_are_named() {
        let none = Support {
            landlock_abi: 0,
            seccomp: true,
        };
        let err = confine_with(none, &[]).expect_err("refused");
        assert!(err.contains("Landlock is not available"), "{err}");
        let no_seccomp = Support {
            landlock_abi: 7,
            seccomp: false,
        };
        let err = confine_with(no_seccomp, &[]).expect_err("refused");
        assert!(err.contains("seccomp"), "{err}");
    }

    #[test]
    fn the_filter_jumps_stay_inside_the_program() {
        for abi in [1, 3, 7] {
            let p = seccomp_program(abi);
            for (i, ins) in p.iter().enumerate() {
                if ins.code & 0x07 == libc::BPF_JMP as u16 {
                    assert!(
                        i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(),
                        "jump at {i}"
                    );
                }
            }
            let last = p.last().expect("instructions");
            assert_eq!(
                (last.code as u32, last.k),
                (libc::BPF_RET, libc::SECCOMP_RET_ALLOW)
            );
        }
    }
}
