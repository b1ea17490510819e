//! Child processes that run in process groups of their own (`run_command`'s commands, MCP
//! servers): a signal to the whole group, how a child ended, looked at without reaping it
//! (so its id stays reserved and is never signalled after it was reused), and a wait for
//! that end which wakes as soon as it comes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Sends `sig` to the process group `pgid` (a group this process created). Errors (ESRCH:
/// nothing is left in it) are fine: there is nothing to signal.
#[expect(
    unsafe_code,
    reason = "kill of a process group: libc has no safe wrapper"
)]
pub fn signal_group(pgid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: a plain system call with integer arguments.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// "exit status 3", "killed by signal 9": how the child `pid` ended, if it has, leaving it
/// unreaped.
#[expect(unsafe_code, reason = "waitid with WNOWAIT: libc has no safe wrapper")]
pub fn exit_status(pid: libc::pid_t) -> Option<String> {
    // SAFETY: waitid writes into a zeroed siginfo we own; WNOWAIT leaves the child unreaped.
    let (r, info) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        (r, info)
    };
    // SAFETY: si_pid and si_status are set by waitid for a child that changed state.
    let (who, status) = unsafe { (info.si_pid(), info.si_status()) };
    if r != 0 || who == 0 {
        return None;
    }
    Some(match info.si_code {
        libc::CLD_EXITED => format!("exit status {status}"),
        _ => format!("killed by signal {status}"),
    })
}

/// Whether the child `pid` has ended, leaving it unreaped.
pub fn exited(pid: libc::pid_t) -> bool {
    exit_status(pid).is_some()
}

/// Waits for a child's end without reaping it: a pidfd polled with a timeout (Linux 5.3 and
/// later), so a short command is seen ending at once; a plain sleep where there is none.
#[derive(Debug)]
pub struct ExitWatch {
    pidfd: Option<OwnedFd>,
}

impl ExitWatch {
    #[expect(unsafe_code, reason = "pidfd_open: libc has no safe wrapper")]
    pub fn new(pid: libc::pid_t) -> ExitWatch {
        // SAFETY: a plain system call with integer arguments; a descriptor it returns is
        // owned here from then on.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        ExitWatch {
            pidfd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }),
        }
    }

    /// Returns when the child has ended or after `timeout` (`fallback` when there is no
    /// pidfd), whichever is first.
    #[expect(unsafe_code, reason = "poll: libc has no safe wrapper")]
    pub fn wait(&self, timeout: Duration, fallback: Duration) {
        match &self.pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = timeout.as_millis().clamp(0, i32::MAX as u128) as libc::c_int;
                // SAFETY: poll on one pollfd of this frame.
                unsafe {
                    libc::poll(&mut p, 1, ms.max(1));
                }
            }
            None => std::thread::sleep(fallback.min(timeout)),
        }
    }
}
