//! How `run_command` starts a command: what happens between fork and exec.
//!
//! std's `Command` forks a child (here called the *keeper*) and runs [`Launch::in_child`]
//! in it before exec. In order:
//! 1. The keeper dies with the axocoatl thread that started it (`PR_SET_PDEATHSIG`, checked
//!    against a parent that died first), and joins the command's pids cgroup if there is one.
//! 2. It enters new mount, pid and IPC namespaces (inside a new user namespace unless this
//!    process is privileged enough without one; the user namespace maps only this process's
//!    own uid and gid, so files keep their owner). `unshare(CLONE_NEWPID)` only affects
//!    later children, so the keeper forks the namespace's *init* (pid 1), which dies with
//!    the keeper (`PR_SET_PDEATHSIG` again; a keeper that died before that is noticed
//!    through a pipe only the keeper holds). The init forks once more: that process (pid 2)
//!    becomes the command, `/bin/sh`.
//!    - The keeper and the init close every descriptor but their pipes (std's exec-status
//!      pipe among them, so std learns of the command's exec, or of its failure, from the
//!      command itself).
//!    - The init reaps every process that ends up its child (a shell as pid 1 would leave
//!      orphans as zombies, which count against the process limit) until the command ends,
//!      then tells the keeper how it ended and exits. When the init ends, the kernel kills
//!      every process left in the namespace: nothing a command started outlives it, `setsid`
//!      and double forks included. The init ignores every signal sent from inside (it is
//!      pid 1 and sets no handler); SIGTERM to the command's process group reaches the
//!      command's processes as usual.
//!    - The keeper ignores SIGTERM (a timeout or stop signals the whole process group and
//!      must not kill the keeper before the grace period ends), waits for the init and exits
//!      as the command did (same exit code, or the same signal). So kill -9 of axocoatl (of
//!      `send`, an actor or serve) ends the keeper, then the init, then everything else.
//! 3. The command mounts its view (`mountns.rs`: private propagation, read-only binds, the
//!    repository's `run/` covered, a fresh `/proc`), sets its rlimits (`limits.rs`), marks
//!    every descriptor above 2 close-on-exec (`close_range`), drops every capability and
//!    applies Landlock and seccomp (`sandbox.rs`). Then std execs `/bin/sh`.
//!
//! A `full-access` command gets only the supervision: a pid namespace and its own `/proc`
//! where this process can make them without a user namespace (a user namespace would take
//! setuid programs such as `sudo` away from it), else its process group and
//! `PR_SET_PDEATHSIG` on the shell alone. Its descriptors are closed all the same.
//!
//! The hook only makes system calls: whatever allocates was prepared in the parent. The
//! forks are raw `clone` system calls, not libc's `fork`, whose atfork handlers could wait
//! forever on a lock another thread of axocoatl held when the keeper was forked.

use std::io;
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use super::limits::{ProcessCgroup, Rlimits};
use super::mountns::Mounts;
use super::sandbox::{self, Confinement};

/// The namespaces a sandboxed command runs in: `CLONE_NEW*` flags for `unshare`.
const SANDBOX_NAMESPACES: libc::c_int = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
/// The namespaces a `full-access` command runs in, when possible without a user namespace.
const SUPERVISED_NAMESPACES: libc::c_int = libc::CLONE_NEWNS | libc::CLONE_NEWPID;

/// Everything the child does before exec, prepared in the parent.
#[derive(Debug, Default)]
pub struct Launch {
    /// The process that spawns the command (its death kills the command).
    parent: libc::pid_t,
    /// `CLONE_NEW*` flags to unshare; 0: none.
    namespaces: libc::c_int,
    /// The uid and gid maps, when the namespaces include a user namespace.
    maps: Option<(Vec<u8>, Vec<u8>)>,
    mounts: Option<Mounts>,
    cgroup: Option<Arc<ProcessCgroup>>,
    rlimits: Option<Rlimits>,
    /// Drop every capability up to this number.
    drop_caps: Option<libc::c_int>,
    confinement: Option<Confinement>,
}

impl Launch {
    /// A sandboxed command: namespaces, `mounts`, limits, no capabilities, `confinement`.
    /// Refused, naming the missing feature, where the namespaces cannot be made.
    pub fn sandboxed(
        mounts: Mounts,
        rlimits: Rlimits,
        cgroup: Option<Arc<ProcessCgroup>>,
        confinement: Confinement,
    ) -> Result<Launch, String> {
        let user = sandbox_namespaces()?;
        Ok(Launch {
            parent: this_pid(),
            namespaces: SANDBOX_NAMESPACES | if user { libc::CLONE_NEWUSER } else { 0 },
            maps: user.then(own_maps),
            mounts: Some(mounts),
            cgroup,
            rlimits: Some(rlimits),
            drop_caps: Some(sandbox::last_capability()),
            confinement: Some(confinement),
        })
    }

    /// A `full-access` command: supervision only (see the module comment).
    pub fn supervised() -> Launch {
        let pid_namespace = supervised_namespaces();
        Launch {
            parent: this_pid(),
            namespaces: if pid_namespace {
                SUPERVISED_NAMESPACES
            } else {
                0
            },
            mounts: pid_namespace.then(Mounts::supervised),
            ..Launch::default()
        }
    }

    /// Whether the command runs as pid 1 of a namespace of its own (everything it starts
    /// ends with it).
    pub fn has_pid_namespace(&self) -> bool {
        self.namespaces & libc::CLONE_NEWPID != 0
    }

    /// The `pre_exec` hook (see the module comment). Only system calls.
    pub fn in_child(&self) -> io::Result<()> {
        die_with_parent(self.parent)?;
        if let Some(cgroup) = &self.cgroup {
            cgroup.join()?;
        }
        if self.namespaces != 0 {
            unshare(self.namespaces)?;
            if let Some((uid_map, gid_map)) = &self.maps {
                // Kernels before 3.19 have no setgroups file; mapping works without it.
                match write_proc(c"/proc/self/setgroups", b"deny") {
                    Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
                    _ => {}
                }
                write_proc(c"/proc/self/uid_map", uid_map)?;
                write_proc(c"/proc/self/gid_map", gid_map)?;
            }
            if self.has_pid_namespace() {
                become_init()?;
            }
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        if let Some(rlimits) = &self.rlimits {
            rlimits.apply()?;
        }
        cloexec_from(3);
        if let Some(last) = self.drop_caps {
            sandbox::drop_capabilities(last)?;
        }
        if let Some(confinement) = &self.confinement {
            confinement.apply()?;
        }
        Ok(())
    }
}

/// Why this process cannot sandbox a command (Landlock, seccomp or the namespaces are
/// missing), or `None` when it can.
pub fn sandbox_unavailable() -> Option<String> {
    sandbox::confine(&[])
        .err()
        .or_else(|| sandbox_namespaces().err())
}

/// Whether a sandboxed command needs a user namespace (`Ok(false)`: this process may make
/// the namespaces without one), or why no sandbox can be made. Found once per process by
/// starting `/bin/true` the same way, with a fresh `/proc`.
pub fn sandbox_namespaces() -> Result<bool, String> {
    static FOUND: OnceLock<Result<bool, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            find_namespaces(is_root(), &|user, proc| {
                let flags = SANDBOX_NAMESPACES | if user { libc::CLONE_NEWUSER } else { 0 };
                probe(flags, user.then(own_maps), proc.then(Mounts::sandbox))
            })
        })
        .clone()
}

/// [`sandbox_namespaces`] with `probe(user namespace?, fresh /proc?)` starting the probe.
fn find_namespaces(
    root: bool,
    probe: &dyn Fn(bool, bool) -> io::Result<()>,
) -> Result<bool, String> {
    // Root needs no user namespace (and is spared the rules a user namespace puts on
    // mounting /proc); anyone else needs one.
    if root && probe(false, true).is_ok() {
        return Ok(false);
    }
    if let Err(e) = probe(true, false) {
        return Err(format!("the kernel cannot enforce the sandbox: this process cannot create a user namespace with its own mount, pid and IPC namespaces ({e}); unprivileged user namespaces may be disabled (sysctl `kernel.unprivileged_userns_clone`, `user.max_user_namespaces`, an AppArmor or SELinux policy) or refused by a container's seccomp profile"));
    }
    if let Err(e) = probe(true, true) {
        return Err(format!("the kernel cannot enforce the sandbox: a private /proc cannot be mounted in the command's pid namespace ({e}), as in containers whose /proc is partly masked"));
    }
    Ok(true)
}

/// Whether the kernel bounds a sandboxed command's processes: by `RLIMIT_NPROC` in its own
/// user namespace (never applied to root), or by a pids cgroup.
pub fn process_limit_enforced() -> bool {
    matches!(sandbox_namespaces(), Ok(true)) && !is_root()
        || super::limits::ProcessCgroup::available()
}

/// Whether a `full-access` command can run in a pid namespace with its own `/proc` without
/// a user namespace (found once), so that everything it starts ends with it.
pub fn supervised_namespaces() -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    *FOUND.get_or_init(|| probe(SUPERVISED_NAMESPACES, None, Some(Mounts::supervised())).is_ok())
}

/// Starts `/bin/true` with `namespaces`, `maps` and `mounts`.
#[expect(
    unsafe_code,
    reason = "pre_exec runs the namespace system calls in the probing child"
)]
fn probe(
    namespaces: libc::c_int,
    maps: Option<(Vec<u8>, Vec<u8>)>,
    mounts: Option<Mounts>,
) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let launch = Launch {
        parent: this_pid(),
        namespaces,
        maps,
        mounts,
        ..Launch::default()
    };
    let mut cmd = Command::new("/bin/true");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: `in_child` only makes system calls.
    unsafe {
        cmd.pre_exec(move || launch.in_child());
    }
    let status = cmd.status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("the probe ended with {status}")))
    }
}

#[expect(unsafe_code, reason = "geteuid/getegid: libc has no safe wrapper")]
fn own_maps() -> (Vec<u8>, Vec<u8>) {
    // SAFETY: these calls cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // `ID ID 1`: the same id inside the namespace as outside, so files keep their owner.
    (
        format!("{uid} {uid} 1").into_bytes(),
        format!("{gid} {gid} 1").into_bytes(),
    )
}

#[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn this_pid() -> libc::pid_t {
    std::process::id() as libc::pid_t
}

/// Dies (SIGKILL) when the thread that forked it ends; a parent already gone is an error.
#[expect(
    unsafe_code,
    reason = "prctl/getppid in a pre_exec hook: libc has no safe wrapper"
)]
fn die_with_parent(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: plain system calls with integer arguments.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    Ok(())
}

#[expect(
    unsafe_code,
    reason = "unshare in a pre_exec hook: libc has no safe wrapper"
)]
fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a plain system call with an integer argument.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[expect(
    unsafe_code,
    reason = "open/write/close in a pre_exec hook: std's File may allocate"
)]
fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
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

/// Forks the first process of the new pid namespace (its init), which forks the command's
/// process and reaps; the calling process becomes the keeper. Only the command's process
/// returns.
#[expect(
    unsafe_code,
    reason = "pipe2, raw clones, prctl and poll in a pre_exec hook: libc has no safe wrapper"
)]
fn become_init() -> io::Result<()> {
    // `alive`: only the keeper holds its write end, so its end shows as a hang-up.
    // `status`: the init tells the keeper how the command ended.
    let (mut alive, mut status) = ([0 as libc::c_int; 2], [0 as libc::c_int; 2]);
    // SAFETY: plain system calls on memory of this frame. The clones have no CLONE_VM: each
    // child gets a copy of this (single-threaded) process, like fork without atfork handlers.
    unsafe {
        if libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) != 0
        {
            return Err(io::Error::last_os_error());
        }
        let init = raw_fork()?;
        if init > 0 {
            libc::close(alive[0]);
            libc::close(status[1]);
            keep_until_ended(init, alive[1], status[0]);
        }
        libc::close(alive[1]);
        libc::close(status[0]);
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        // A keeper that died before the line above left the pipe without a writer.
        let mut p = libc::pollfd {
            fd: alive[0],
            events: libc::POLLIN,
            revents: 0,
        };
        libc::poll(&mut p, 1, 0);
        libc::close(alive[0]);
        if p.revents != 0 {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        let command = raw_fork()?;
        if command > 0 {
            reap_until_ended(command, status[1]);
        }
        libc::close(status[1]);
    }
    Ok(())
}

/// `fork()` as a raw system call: no atfork handlers run.
#[expect(unsafe_code, reason = "a raw clone system call in a pre_exec hook")]
fn raw_fork() -> io::Result<libc::pid_t> {
    // SAFETY: clone without CLONE_VM or a new stack behaves as fork; the arguments after
    // the flags are unused.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// The namespace's init: reaps every process that ends up its child (orphans of the
/// command included) until the command ends, tells the keeper how, and exits; the kernel
/// then kills whatever is left in the namespace. Never returns.
#[expect(
    unsafe_code,
    reason = "close_range, waitpid, write and _exit in a pre_exec hook: libc has no safe wrapper"
)]
fn reap_until_ended(command: libc::pid_t, status_out: libc::c_int) -> ! {
    // SAFETY: plain system calls on integers and on memory of this frame; `_exit` ends this
    // process without running anything of the parent's.
    unsafe {
        // std's exec-status pipe among them: std must hear from the command, not from here.
        close_from(3, status_out);
        // A copy of axocoatl, environment and memory included: not readable through /proc
        // (Landlock keeps the sandboxed command from tracing it as well).
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let mut status: libc::c_int = 0;
        loop {
            let r = libc::waitpid(-1, &mut status, 0);
            if r == command {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        let bytes = status.to_ne_bytes();
        libc::write(status_out, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(0);
    }
}

/// The keeper: waits for the namespace's init, then exits as the command did (as the init
/// did, if it could not say). Never returns.
#[expect(
    unsafe_code,
    reason = "close_range, sigaction, waitpid, read, kill and _exit in a pre_exec hook: libc has no safe wrapper"
)]
fn keep_until_ended(init: libc::pid_t, alive: libc::c_int, status_in: libc::c_int) -> ! {
    // SAFETY: plain system calls on integers and on memory of this frame; `_exit` ends this
    // process without running anything of the parent's.
    unsafe {
        // std's exec-status pipe among them: std must hear from the command, not from here.
        close_from_keeping(3, [alive, status_in]);
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaction(sig, &ignore, std::ptr::null_mut());
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let mut status: libc::c_int = 0;
        loop {
            let r = libc::waitpid(init, &mut status, 0);
            if r == init {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        let mut told = [0u8; 4];
        if libc::read(status_in, told.as_mut_ptr().cast(), told.len()) == told.len() as isize {
            status = libc::c_int::from_ne_bytes(told);
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        // Killed by a signal: die of the same one, without a core dump.
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &default, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
}

const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Marks every descriptor from `first` on close-on-exec: the command inherits none of
/// axocoatl's (nor of whoever started axocoatl), while std's exec-status pipe, already
/// close-on-exec, keeps working.
#[expect(
    unsafe_code,
    reason = "close_range/fcntl in a pre_exec hook: libc has no safe wrapper"
)]
fn cloexec_from(first: libc::c_uint) {
    // SAFETY: plain system calls with integer arguments.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        // Kernels before 5.11: one at a time, up to the descriptor limit.
        for fd in first..open_files_limit() {
            libc::fcntl(fd as libc::c_int, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

/// Closes every descriptor from `first` on but `keep`.
fn close_from(first: libc::c_int, keep: libc::c_int) {
    close_from_keeping(first, [keep, keep]);
}

/// Closes every descriptor from `first` on but the two in `keep`.
#[expect(
    unsafe_code,
    reason = "close_range/close in a pre_exec hook: libc has no safe wrapper"
)]
fn close_from_keeping(first: libc::c_int, keep: [libc::c_int; 2]) {
    let (a, b) = (
        keep[0].min(keep[1]) as libc::c_uint,
        keep[0].max(keep[1]) as libc::c_uint,
    );
    let first = first as libc::c_uint;
    // The ranges around the kept descriptors (a range whose end is before its start is empty).
    let ranges = [
        (first, a.saturating_sub(1)),
        (a + 1, b.saturating_sub(1)),
        (b + 1, libc::c_uint::MAX),
    ];
    for (from, to) in ranges {
        if from > to || to < first {
            continue;
        }
        let from = from.max(first);
        // SAFETY: plain system calls with integer arguments.
        unsafe {
            if libc::syscall(libc::SYS_close_range, from, to, 0 as libc::c_uint) != 0 {
                for fd in from..=to.min(open_files_limit()) {
                    libc::close(fd as libc::c_int);
                }
            }
        }
    }
}

#[expect(unsafe_code, reason = "getrlimit: libc has no safe wrapper")]
fn open_files_limit() -> libc::c_uint {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a struct on this frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur.min(1 << 20) as libc::c_uint
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    #[test]
    fn missing_namespaces_are_named() {
        let refused = |_: bool, _: bool| Err(io::Error::from_raw_os_error(libc::EPERM));
        let err = find_namespaces(false, &refused).expect_err("refused");
        assert!(err.contains("cannot create a user namespace"), "{err}");
        assert!(err.contains("Operation not permitted"), "{err}");
        let no_proc = |_: bool, proc: bool| {
            if proc {
                Err(io::Error::from_raw_os_error(libc::EPERM))
            } else {
                Ok(())
            }
        };
        let err = find_namespaces(true, &no_proc).expect_err("refused");
        assert!(err.contains("a private /proc cannot be mounted"), "{err}");
        assert_eq!(
            find_namespaces(true, &|user, _| if user {
                Err(io::Error::other("x"))
            } else {
                Ok(())
            }),
            Ok(false)
        );
        assert_eq!(find_namespaces(false, &|_, _| Ok(())), Ok(true));
    }

    fn launch() -> Option<Launch> {
        if sandbox_namespaces().is_err() {
            return None;
        }
        let confinement = sandbox::confine(&[]).ok()?;
        let rlimits = Rlimits::new(&Default::default());
        Launch::sandboxed(Mounts::sandbox(), rlimits, None, confinement).ok()
    }

    /// std learns of the exec from the command itself: neither the keeper nor the init
    /// (which never exec) may hold its pipe, or every spawn would wait for the command's end,
    /// and a failed exec is still reported.
    #[test]
    #[expect(unsafe_code, reason = "pre_exec runs the launch in the child")]
    fn spawns_return_at_once_and_report_a_failed_exec() {
        for launch in [launch(), Some(Launch::supervised())].into_iter().flatten() {
            let launch = std::sync::Arc::new(launch);
            let l = launch.clone();
            let mut sleeper = Command::new("/bin/sleep");
            sleeper.arg("5").stdin(Stdio::null());
            // SAFETY: `in_child` only makes system calls.
            unsafe {
                sleeper.pre_exec(move || l.in_child());
            }
            let started = Instant::now();
            let mut child = sleeper.spawn().expect("spawn");
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "spawn waited for the command"
            );
            child.kill().expect("kill");
            child.wait().expect("wait");

            let l = launch.clone();
            let mut missing = Command::new("/nonexistent/program");
            missing.stdin(Stdio::null());
            // SAFETY: as above.
            unsafe {
                missing.pre_exec(move || l.in_child());
            }
            let err = missing.spawn().expect_err("no such program");
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        }
    }
}
