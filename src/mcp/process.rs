//! The server process: spawned in its own process group with a clean environment, its
//! stderr kept (the end of it) for error messages, and ended by closing its stdin, then
//! SIGTERM to its group, then SIGKILL.
//!
//! The leader is not reaped until its group has been signalled, so its id cannot be reused
//! by an unrelated process in the meantime (as `run_command` does).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::child::{exit_status, signal_group};
use crate::config::McpServerConfig;

/// How long a server has to exit after its stdin closes, and after SIGTERM.
pub const GRACE: Duration = Duration::from_secs(2);
/// How much of a server's stderr is kept.
const STDERR_KEPT: usize = 4096;
const POLL: Duration = Duration::from_millis(10);

/// The end of a server's stderr.
#[derive(Clone, Default)]
pub struct StderrTail {
    bytes: Arc<Mutex<Vec<u8>>>,
    /// The pipe reached its end (every process holding it has exited).
    closed: Arc<AtomicBool>,
}

impl StderrTail {
    /// Waits up to `limit` for the whole of the stderr of a server that has ended, so what
    /// it said last is in messages about its end.
    pub async fn settled(&self, limit: Duration) {
        until(|| self.closed.load(Ordering::Acquire), limit).await;
    }

    /// Its last few lines on one line, or `None` when it wrote nothing.
    pub fn summary(&self) -> Option<String> {
        let bytes = self.bytes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let last = &lines[lines.len().saturating_sub(3)..];
        let joined = last.join(" | ");
        if joined.is_empty() {
            return None;
        }
        Some(cut(&joined, 300))
    }
}

/// `s` cut to about `max` bytes with `…`.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

pub struct Spawned {
    pub proc: Proc,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: StderrTail,
}

/// The program of `command`: a name is looked up in `PATH`; a relative path is taken from
/// the config file's directory.
pub fn program(command: &str, dir: &Path) -> PathBuf {
    crate::config::mcp_program(command, dir)
}

/// Starts `cfg`'s command in `dir`, in a new process group, with only `PATH`, `HOME` and
/// the entry's `env`.
pub fn spawn(cfg: &McpServerConfig, dir: &Path) -> std::io::Result<Spawned> {
    let mut cmd = Command::new(program(&cfg.command, dir));
    cmd.args(&cfg.args).current_dir(dir).env_clear();
    for key in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.envs(&cfg.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let mut proc = Proc::new(child);
    let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
        proc.terminate_now();
        return Err(std::io::Error::other("the server's pipes were not opened"));
    };
    let tail = StderrTail::default();
    let kept = tail.clone();
    // A thread, not a task: the pipe is drained even while no call runs the runtime.
    std::thread::spawn(move || keep_tail(stderr, &kept));
    Ok(Spawned {
        proc,
        stdin,
        stdout,
        stderr: tail,
    })
}

fn keep_tail(mut stderr: std::process::ChildStderr, tail: &StderrTail) {
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let mut kept = tail.bytes.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(&buf[..n]);
                let excess = kept.len().saturating_sub(STDERR_KEPT);
                kept.drain(..excess);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    tail.closed.store(true, Ordering::Release);
}

/// A server process, reaped at most once (its id is never signalled after that).
pub struct Proc {
    child: Child,
    /// How it ended, once reaped.
    reaped: Option<String>,
}

impl Proc {
    pub fn new(child: Child) -> Proc {
        Proc {
            child,
            reaped: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How it ended, if it has.
    pub fn ended(&self) -> Option<String> {
        match &self.reaped {
            Some(how) => Some(how.clone()),
            None => exit_status(self.child.id() as libc::pid_t),
        }
    }

    /// SIGTERM to the group, SIGKILL after [`GRACE`] (or as soon as the leader is gone),
    /// then reaps the leader. Blocking; async callers use [`Proc::terminate`].
    pub fn terminate_now(&mut self) {
        if self.reaped.is_some() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        if self.ended().is_none() {
            signal_group(pid, libc::SIGTERM);
            let end = Instant::now() + GRACE;
            while self.ended().is_none() && Instant::now() < end {
                std::thread::sleep(POLL);
            }
        }
        self.reap(pid);
    }

    /// Waits up to `wait` for the leader to exit by itself; then SIGTERM to the group,
    /// SIGKILL after [`GRACE`]; whatever is left in the group is killed, and the leader
    /// reaped. Returns how the leader ended.
    pub async fn terminate(&mut self, wait: Duration) -> String {
        if let Some(how) = &self.reaped {
            return how.clone();
        }
        let pid = self.child.id() as libc::pid_t;
        if !until(|| self.ended().is_some(), wait).await {
            signal_group(pid, libc::SIGTERM);
            until(|| self.ended().is_some(), GRACE).await;
        }
        self.reap(pid)
    }

    fn reap(&mut self, pid: libc::pid_t) -> String {
        let how = self.ended();
        signal_group(pid, libc::SIGKILL);
        let status = self.child.wait();
        let how = how
            .or_else(|| {
                status.ok().map(|s| match (s.code(), s.signal()) {
                    (Some(c), _) => format!("exit status {c}"),
                    (None, Some(sig)) => format!("killed by signal {sig}"),
                    (None, None) => "ended".to_owned(),
                })
            })
            .unwrap_or_else(|| "ended".to_owned());
        self.reaped = Some(how.clone());
        how
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Nothing outlives its owner, even on paths that did not shut it down.
        self.terminate_now();
    }
}

/// Polls `done` until it holds or `limit` passes; whether it held.
pub async fn until(mut done: impl FnMut() -> bool, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_commands_are_taken_from_the_config_directory() {
        let dir = Path::new("/cfg");
        assert_eq!(program("python3", dir), PathBuf::from("python3"));
        assert_eq!(program("./srv.sh", dir), PathBuf::from("/cfg/./srv.sh"));
        assert_eq!(program("/usr/bin/x", dir), PathBuf::from("/usr/bin/x"));
    }

    #[test]
    fn the_environment_is_only_path_home_and_env() {
        let cfg = McpServerConfig {
            command: "/bin/sh".into(),
            args: vec!["-c".into(), "env | sort 1>&2".into()],
            env: [("LOG_LEVEL".to_string(), "warn".to_string())].into(),
            startup_timeout_secs: None,
            tool_timeout_secs: None,
        };
        let s = spawn(&cfg, Path::new("/")).expect("spawn");
        drop(s.stdin);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut vars = Vec::new();
        while Instant::now() < deadline {
            let text = String::from_utf8_lossy(&s.stderr.bytes.lock().expect("lock")).into_owned();
            vars = text
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
                .filter(|k| k != "PWD" && k != "SHLVL" && k != "_")
                .collect();
            if vars.iter().any(|k| k == "LOG_LEVEL") {
                break;
            }
            std::thread::sleep(POLL);
        }
        let mut expected: Vec<String> = ["LOG_LEVEL", "PATH", "HOME"]
            .into_iter()
            .filter(|k| *k == "LOG_LEVEL" || std::env::var_os(k).is_some())
            .map(String::from)
            .collect();
        expected.sort();
        assert_eq!(vars, expected);
    }

    #[test]
    fn the_stderr_tail_is_its_last_lines() {
        let t = StderrTail::default();
        t.bytes
            .lock()
            .expect("lock")
            .extend_from_slice(b"one\ntwo\n\nthree\nfour\n");
        assert_eq!(t.summary().as_deref(), Some("two | three | four"));
        assert_eq!(StderrTail::default().summary(), None);
    }
}
