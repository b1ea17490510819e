//! The resource limits of a sandboxed command, enforced by the kernel: rlimits set in the
//! child before exec, and a pids cgroup of its own where one can be made.
//!
//! - `memory_mb` is `RLIMIT_AS` (the address space of each process), `file_size_mb` is
//!   `RLIMIT_FSIZE` (the largest file a process may write), `cpu_secs` is `RLIMIT_CPU` (CPU
//!   time of each process, then SIGKILL). Soft and hard limits are both set, so the command
//!   cannot raise them (it holds no capability).
//! - `processes` is `RLIMIT_NPROC`. Since Linux 5.14 it counts per user per user namespace,
//!   and every command of a non-root axocoatl runs in a user namespace of its own, so the
//!   count is the command's own processes and threads. The kernel never applies
//!   `RLIMIT_NPROC` to root, so where a pids cgroup can be made (cgroup v1's `pids`
//!   hierarchy, or a cgroup v2 whose `cgroup.subtree_control` enables `pids`), each command
//!   also gets one with `pids.max` set: that bounds root's commands as well.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::config::CommandLimits;

/// Prepared rlimits, applied in the child by [`Rlimits::apply`].
#[derive(Clone, Copy, Debug)]
pub struct Rlimits {
    values: [(libc::__rlimit_resource_t, u64); 4],
}

impl Rlimits {
    /// `limits`, each lowered to this process's own hard limit (a higher one could not be
    /// set without privilege).
    pub fn new(limits: &CommandLimits) -> Rlimits {
        let values = [
            (libc::RLIMIT_NPROC, limits.processes()),
            (libc::RLIMIT_AS, limits.memory_bytes()),
            (libc::RLIMIT_FSIZE, limits.file_size_bytes()),
            (libc::RLIMIT_CPU, limits.cpu_secs()),
        ]
        .map(|(resource, value)| (resource, value.min(hard_limit(resource))));
        Rlimits { values }
    }

    /// Sets every limit, soft and hard. For a `pre_exec` hook: only system calls.
    #[expect(
        unsafe_code,
        reason = "setrlimit in a pre_exec hook: libc has no safe wrapper"
    )]
    pub fn apply(&self) -> io::Result<()> {
        for (resource, value) in self.values {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: a plain system call reading a struct on this frame.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[expect(unsafe_code, reason = "getrlimit: libc has no safe wrapper")]
fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a struct on this frame.
    if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
        return libc::RLIM_INFINITY;
    }
    limit.rlim_max
}

/// A pids cgroup of one command: created before the spawn, joined by the child
/// ([`ProcessCgroup::join`]), removed when dropped (after the command's last process ended).
#[derive(Debug)]
pub struct ProcessCgroup {
    dir: PathBuf,
    procs: OwnedFd,
}

/// The prefix of the cgroups this program makes, followed by `<pid>-<start>-<n>`.
const PREFIX: &str = "axocoatl-cmd-";

impl ProcessCgroup {
    /// A new cgroup beside this process's own pids cgroup, with `pids.max` set to `max`, or
    /// `None` where none can be made (no pids controller, no permission).
    pub fn create(max: u64) -> Option<ProcessCgroup> {
        let parent = pids_parent()?;
        sweep(&parent);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = parent.join(format!(
            "{PREFIX}{}-{}",
            crate::scratch::owner_tag(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir).ok()?;
        let made = (|| {
            fs::write(dir.join("pids.max"), max.to_string())?;
            let procs = OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            Ok::<_, io::Error>(OwnedFd::from(procs))
        })();
        match made {
            Ok(procs) => Some(ProcessCgroup { dir, procs }),
            Err(_) => {
                let _ = fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Whether pids cgroups can be made here (tried once).
    pub fn available() -> bool {
        static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AVAILABLE.get_or_init(|| ProcessCgroup::create(1).is_some())
    }

    /// Moves the calling process into the cgroup. For a `pre_exec` hook, before the
    /// process starts others: only a system call.
    #[expect(
        unsafe_code,
        reason = "write in a pre_exec hook: std's File may allocate"
    )]
    pub fn join(&self) -> io::Result<()> {
        // "0" is the writing process itself.
        // SAFETY: a plain system call on a descriptor this value owns and a static buffer.
        let n = unsafe { libc::write(self.procs.as_raw_fd(), b"0".as_ptr().cast(), 1) };
        if n == 1 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for ProcessCgroup {
    fn drop(&mut self) {
        // The last processes may still be on their way out: a short wait, then it is left
        // for the next sweep.
        let until = Instant::now() + Duration::from_millis(500);
        while fs::remove_dir(&self.dir).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Removes the empty cgroups of processes that are gone.
fn sweep(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(tag) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        if !crate::scratch::owner_alive(tag) {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The directory new pids cgroups can be made in: this process's own cgroup in the v1
/// `pids` hierarchy, or in the v2 hierarchy when its `cgroup.subtree_control` has `pids`.
fn pids_parent() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next()?);
        if fstype == "cgroup" && options.split(',').any(|o| o == "pids") {
            let path = own.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                controllers.split(',').any(|c| c == "pids").then_some(path)
            })?;
            let dir = Path::new(mount_point).join(path.trim_start_matches('/'));
            return dir.is_dir().then_some(dir);
        }
        if fstype == "cgroup2" {
            v2 = Some(mount_point.to_owned());
        }
    }
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new(&v2?).join(path.trim_start_matches('/'));
    let control = fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    control
        .split_whitespace()
        .any(|c| c == "pids")
        .then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_never_exceed_the_hard_limits_of_this_process() {
        let huge = CommandLimits {
            processes: Some(u64::MAX),
            memory_mb: Some(crate::config::MAX_COMMAND_MB),
            file_size_mb: Some(1),
            cpu_secs: Some(7),
        };
        let r = Rlimits::new(&huge);
        for (resource, value) in r.values {
            assert!(value <= hard_limit(resource));
        }
        assert!(r.values.contains(&(libc::RLIMIT_FSIZE, 1024 * 1024)));
        assert!(r.values.contains(&(libc::RLIMIT_CPU, 7)));
    }
}
