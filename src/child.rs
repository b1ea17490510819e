//! Child processes that run in process groups of their own (`run_command`'s commands, MCP
//! servers): a signal to the whole group, and how a child ended, looked at without reaping
//! it (so its id stays reserved and is never signalled after it was reused).

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
