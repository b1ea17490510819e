//! run_command: `/bin/sh -c` in the workspace, in its own process group, confined by the
//! agent's sandbox (`launch.rs` says how the child is set up), with a timeout and a stop
//! that reach every process of the command.
//!
//! Ending a command (timeout, stop, Ctrl-C): SIGTERM to the whole group, then SIGKILL to the
//! group once the shell has exited or after [`GRACE`]. A sandboxed command is pid 1 of a pid
//! namespace of its own, so whatever it started ends with it (in its group or not); a
//! `full-access` one gets the same where this process can make a pid namespace without a
//! user namespace, else whatever it left running in its group is killed. Effects are never
//! rolled back. The keeper is not reaped until the group has been signalled, so its id
//! cannot be reused by an unrelated process in the meantime.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;

use super::handler::Handler;
use super::launch::Launch;
use super::limits::{ProcessCgroup, Rlimits};
use super::mountns::Mounts;
use super::{sandbox, Context, ToolOutput};
use crate::child::{exited, signal_group, ExitWatch};
use crate::config::SandboxMode;
use crate::scratch::Scratch;

/// The default and the largest `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
pub const MAX_TIMEOUT_SECS: u64 = 24 * 3600;
/// How long a group has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);
/// Output kept from one command (stdout and stderr interleaved); the rest is counted.
pub const CAPTURE_LIMIT: usize = 16 * 1024 * 1024;
const POLL: Duration = Duration::from_millis(20);
/// What the model is told when a command's output is not UTF-8.
pub const NOT_UTF8_NOTE: &str = "[the output is not valid UTF-8: shown here with each invalid byte sequence replaced by U+FFFD; the ledger keeps the exact bytes]";

/// Arguments of `run_command`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommand {
    /// The command line, run by `/bin/sh -c` in the workspace root.
    command: String,
    /// Seconds before the command and everything it started are killed (default 120).
    #[serde(default)]
    timeout_secs: Option<u64>,
}

impl Handler for RunCommand {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        if self.command.trim().is_empty() {
            return ToolOutput::err("`command` is empty");
        }
        let timeout = self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if timeout == 0 || timeout > MAX_TIMEOUT_SECS {
            return ToolOutput::err(format!(
                "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}"
            ));
        }
        run(cx, &self.command, Duration::from_secs(timeout), &|| {
            cx.cancel.is_cancelled()
        })
    }
}

/// Environment variables that look like credentials are not passed to commands: a command
/// could copy one into the workspace, where the model would read it.
fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|w| upper.contains(w))
}

/// Whether the variable `name` is kept from commands: it looks like a credential, or a
/// provider reads its key from it (`secret_env`), whatever it is called.
fn withheld(name: &str, secret_env: &[String]) -> bool {
    is_secret(name) || secret_env.iter().any(|s| s == name)
}

/// Why a command ended early.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    Exited,
    TimedOut,
    Stopped,
}

/// Runs `command`; `stop` is asked every [`POLL`] whether to end it. The steps: prepare
/// the child, spawn, wait (exit, stop or timeout), end the group, collect the output,
/// summarize.
pub fn run(
    cx: &Context<'_>,
    command: &str,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> ToolOutput {
    let tmp = match Scratch::new(cx.root.repo(), &super::mountns::well_known_sockets()) {
        Ok(t) => t,
        Err(e) => {
            return ToolOutput::err(format!(
                "cannot create the command's temporary directory: {e}"
            ))
        }
    };
    let (launch, cgroup) = match prepare(cx, tmp.path()) {
        Ok(prepared) => prepared,
        Err(refused) => return refused,
    };
    let supervised = launch.has_pid_namespace();
    let started = Instant::now();
    let Spawned {
        mut child,
        captured,
        reading,
    } = match spawn(cx, command, tmp.path(), launch) {
        Ok(s) => s,
        Err(failed) => return failed,
    };
    let pid = child.id() as libc::pid_t;
    let ending = wait_for(pid, started + timeout, stop);
    end_group(pid, ending);
    let status = child.wait();
    drop(cgroup);
    let (exit_code, signal) = match &status {
        Ok(s) => (s.code(), s.signal()),
        Err(_) => (None, None),
    };
    let mut bytes = collect_output(&reading, &captured, supervised);
    bytes.extend_from_slice(summary(ending, exit_code, signal, timeout).as_bytes());
    let (text, raw) = match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(e) => {
            let raw = e.into_bytes();
            (String::from_utf8_lossy(&raw).into_owned(), Some(raw))
        }
    };
    ToolOutput {
        text,
        raw,
        is_error: ending != Ending::Exited || exit_code != Some(0),
        exit_code,
        stopped: ending == Ending::Stopped,
    }
}

/// How the command's child is set up for the agent's sandbox, or the refusal to run
/// without one; with the pids cgroup to remove after the command.
fn prepare(
    cx: &Context<'_>,
    tmp: &Path,
) -> Result<(Launch, Option<Arc<ProcessCgroup>>), ToolOutput> {
    let refuse = |why: String| {
        ToolOutput::err(format!(
            "run_command refused: {why}. Commands never run unconfined in a {} sandbox; an agent with `sandbox: full-access` runs them without confinement.",
            cx.sandbox.as_str()
        ))
    };
    let workspace = cx.root.dir();
    let repo = cx.root.repo();
    let mut mounts = Mounts::sandbox();
    let writable: Vec<&Path> = match cx.sandbox {
        SandboxMode::FullAccess => return Ok((Launch::supervised(), None)),
        SandboxMode::ReadOnly => vec![tmp],
        SandboxMode::WorkspaceWrite => {
            // The repository and the protected files inside the workspace (the
            // configuration, the programs it makes axocoatl run, every symbolic link that
            // leads to them) stay read-only: Landlock alone cannot take them out of a
            // writable directory.
            cx.root.make_protected_dirs();
            let mut protected: Vec<&Path> = Vec::new();
            if repo.starts_with(workspace) && repo.is_dir() {
                protected.push(repo);
            }
            protected.extend(cx.root.read_only_for_commands());
            mounts
                .read_only(&[workspace, tmp], &protected)
                .map_err(refuse)?;
            vec![workspace, tmp]
        }
    };
    // The control sockets of serve and its actors, wherever the repository lies. The
    // directory is made if missing: one made after the command started would be in view.
    if repo.is_dir() {
        let run_dir = repo.join(axocoatl_store::layout::RUN_DIR);
        let _ = std::fs::create_dir(&run_dir);
        if std::fs::symlink_metadata(&run_dir).is_ok_and(|m| m.is_dir()) {
            mounts.cover(&run_dir).map_err(refuse)?;
        } else {
            return Err(refuse(format!(
                "{} is not a directory, so serve's control socket could not be hidden from the command",
                run_dir.display()
            )));
        }
    }
    // The machine's other control sockets (D-Bus, systemd, container engines, ...).
    let mut keep = writable.clone();
    keep.push(repo);
    keep.extend(cx.root.read_only_for_commands());
    mounts.hide_well_known_sockets(&keep);
    let confinement = sandbox::confine(&writable).map_err(refuse)?;
    let cgroup = ProcessCgroup::create(cx.limits.processes()).map(Arc::new);
    let launch = Launch::sandboxed(
        mounts,
        Rlimits::new(&cx.limits),
        cgroup.clone(),
        confinement,
    )
    .map_err(refuse)?;
    Ok((launch, cgroup))
}

/// A started command and the thread reading its output.
struct Spawned {
    child: std::process::Child,
    captured: Arc<Mutex<Capture>>,
    /// Closed (disconnected) when the reading thread is done.
    reading: std::sync::mpsc::Receiver<()>,
}

/// Starts `/bin/sh -c command` in the workspace, in its own process group, without
/// credentials in its environment, set up by `launch`.
#[expect(
    unsafe_code,
    reason = "pre_exec runs the child's setup (namespaces, limits, sandbox) before exec"
)]
fn spawn(
    cx: &Context<'_>,
    command: &str,
    tmp: &Path,
    launch: Launch,
) -> Result<Spawned, ToolOutput> {
    let (reader, writer) =
        std::io::pipe().map_err(|e| ToolOutput::err(format!("cannot create a pipe: {e}")))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| ToolOutput::err(format!("cannot create a pipe: {e}")))?;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cx.root.dir())
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| !withheld(&k.to_string_lossy(), cx.secret_env)))
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    // SAFETY: `in_child` only makes system calls (see launch.rs).
    unsafe {
        cmd.pre_exec(move || launch.in_child());
    }
    let child = cmd.spawn().map_err(|e| {
        ToolOutput::err(format!(
            "run_command could not start the command{}: {e}",
            if cx.sandbox == SandboxMode::FullAccess {
                ""
            } else {
                " in its sandbox"
            }
        ))
    })?;
    drop(cmd); // closes our copies of the pipe's write end
    let captured = Arc::new(Mutex::new(Capture::default()));
    let (done, reading) = std::sync::mpsc::channel::<()>();
    {
        let captured = captured.clone();
        std::thread::spawn(move || {
            read_all(reader, &captured);
            drop(done);
        });
    }
    Ok(Spawned {
        child,
        captured,
        reading,
    })
}

/// Waits until the command exits, the turn is stopped or the deadline passes.
fn wait_for(pid: libc::pid_t, deadline: Instant, stop: &dyn Fn() -> bool) -> Ending {
    let watch = ExitWatch::new(pid);
    // Without a pidfd, short commands are the common case: look again after 0.25 ms, then
    // back off to POLL.
    let mut pause = Duration::from_micros(250);
    loop {
        if exited(pid) {
            return Ending::Exited;
        }
        if stop() {
            return Ending::Stopped;
        }
        let now = Instant::now();
        if now >= deadline {
            return Ending::TimedOut;
        }
        watch.wait((deadline - now).min(POLL), pause);
        pause = (pause * 2).min(POLL);
    }
}

/// SIGTERM to a group that did not exit by itself, [`GRACE`] to end, then SIGKILL to
/// whatever is left in the group (stragglers, background jobs) in every case.
fn end_group(pid: libc::pid_t, ending: Ending) {
    if ending != Ending::Exited {
        signal_group(pid, libc::SIGTERM);
        let grace_end = Instant::now() + GRACE;
        let watch = ExitWatch::new(pid);
        while !exited(pid) && Instant::now() < grace_end {
            watch.wait(
                grace_end
                    .saturating_duration_since(Instant::now())
                    .min(POLL),
                POLL,
            );
        }
    }
    signal_group(pid, libc::SIGKILL);
}

/// The output kept, byte for byte, with notes on what was not kept or is not shown as is.
fn collect_output(
    reading: &std::sync::mpsc::Receiver<()>,
    captured: &Mutex<Capture>,
    supervised: bool,
) -> Vec<u8> {
    // The output ends when every process holding the pipe is gone. In a pid namespace they
    // all are once the command has ended; without one, a process that left the group
    // (setsid) could hold it open, so the wait is bounded.
    let incomplete = matches!(
        reading.recv_timeout(GRACE),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
    );
    let capture = std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner()));
    let mut out = capture.bytes;
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    if std::str::from_utf8(&out).is_err() {
        out.extend_from_slice(NOT_UTF8_NOTE.as_bytes());
        out.push(b'\n');
    }
    if capture.dropped > 0 {
        out.extend_from_slice(
            format!("[{} more bytes of output were not kept]\n", capture.dropped).as_bytes(),
        );
    }
    if incomplete {
        let note = if supervised {
            "[the command's output did not end with it; output after the command ended is not included]\n"
        } else {
            "[a process that left the command's process group kept its output open; output after the command ended is not included]\n"
        };
        out.extend_from_slice(note.as_bytes());
    }
    out
}

/// The last line the model reads: how the command ended.
fn summary(
    ending: Ending,
    exit_code: Option<i32>,
    signal: Option<i32>,
    timeout: Duration,
) -> String {
    let why = match ending {
        Ending::TimedOut => format!(
            "timed out after {} s: the command and everything it started were killed",
            timeout.as_secs()
        ),
        Ending::Stopped => {
            "stopped: the turn was stopped, so the command and everything it started were terminated (effects so far are not rolled back)".into()
        }
        Ending::Exited => match (exit_code, signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "the exit status is unknown".into(),
        },
    };
    format!("[{why}]")
}

#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    dropped: u64,
}

fn read_all(mut reader: std::io::PipeReader, captured: &Mutex<Capture>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                let mut c = captured.lock().unwrap_or_else(|p| p.into_inner());
                let room = CAPTURE_LIMIT.saturating_sub(c.bytes.len()).min(n);
                c.bytes.extend_from_slice(&buf[..room]);
                c.dropped += (n - room) as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::escapes::{marker, wait_gone};
    use crate::tools::testing::Fixture;
    use serde_json::json;

    #[test]
    fn output_and_exit_codes() {
        let f = Fixture::new(SandboxMode::FullAccess);
        let out = f.call(
            "run_command",
            json!({"command": "echo out; echo err >&2; exit 3"}),
        );
        assert_eq!(out.text, "out\nerr\n[exit code 3]");
        assert_eq!((out.exit_code, out.is_error), (Some(3), true));
        let ok = f.call("run_command", json!({"command": "pwd"}));
        assert_eq!(
            ok.text,
            format!("{}\n[exit code 0]", f.root.dir().display())
        );
        assert!(!ok.is_error);
    }

    #[test]
    fn secrets_stay_out_of_the_environment() {
        assert!(is_secret("OPENAI_API_KEY") && is_secret("github_token"));
        assert!(!is_secret("PATH") && !is_secret("HOME"));
        assert!(withheld("LLM_AUTH", &["LLM_AUTH".into()]) && !withheld("LLM_AUTH", &[]));
        // Whatever a provider entry names is withheld, in every mode.
        for mode in [SandboxMode::FullAccess, SandboxMode::WorkspaceWrite] {
            let mut f = Fixture::new(mode);
            f.secret_env = vec!["HOME".into()];
            let out = f.call("run_command", json!({"command": "echo \"home=$HOME\""}));
            assert_eq!(out.text, "home=\n[exit code 0]", "{mode:?}");
        }
    }

    #[test]
    fn a_timeout_kills_the_whole_group() {
        let f = Fixture::new(SandboxMode::FullAccess);
        let m = marker();
        let out = f.call(
            "run_command",
            json!({"command": format!("sleep {m}1 & sleep {m}2"), "timeout_secs": 1}),
        );
        assert!(
            out.is_error && out.text.contains("timed out after 1 s"),
            "{}",
            out.text
        );
        wait_gone(&m);
    }

    #[test]
    fn a_stop_terminates_the_command() {
        let f = Fixture::new(SandboxMode::FullAccess);
        f.cancel.cancel();
        let out = f.call("run_command", json!({"command": "sleep 1000"}));
        assert!(out.stopped && out.is_error, "{}", out.text);
        assert!(
            out.text.ends_with("effects so far are not rolled back)]"),
            "{}",
            out.text
        );
    }

    /// Under Landlock (or, on a kernel without it, refused with the missing feature named).
    #[test]
    fn the_sandbox_confines_writes_and_network() {
        let f = Fixture::new(SandboxMode::WorkspaceWrite);
        let outside = std::env::temp_dir().join(format!("outside-{}", crate::ids::new_id()));
        let cmd = format!("echo x > {}", outside.display());
        let out = f.call("run_command", json!({ "command": cmd }));
        if sandbox::Support::probe().landlock_abi < 1 {
            assert!(
                out.text.contains("Landlock is not available"),
                "{}",
                out.text
            );
            return;
        }
        assert!(out.text.contains("Permission denied"), "{}", out.text);
        assert!(out.is_error && out.exit_code != Some(0), "{}", out.text);
        assert!(!outside.exists());
        let inside = f.call(
            "run_command",
            json!({"command": "echo hi > made.txt && echo tmp > $TMPDIR/t && cat $TMPDIR/t"}),
        );
        assert_eq!(inside.text, "tmp\n[exit code 0]");
        assert_eq!(f.read("made.txt"), "hi\n");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        for proto in ["tcp", "udp"] {
            let cmd = format!("exec bash -c 'echo hi > /dev/{proto}/127.0.0.1/{port}'");
            let out = f.call("run_command", json!({ "command": cmd }));
            assert!(out.text.contains("not permitted"), "{proto}: {}", out.text);
        }
        assert!(listener.accept().is_err(), "a connection got through");

        let ro = Fixture::new(SandboxMode::ReadOnly);
        let out = ro.call("run_command", json!({"command": "echo x > in-ws.txt"}));
        assert!(
            out.is_error && !ro.root.dir().join("in-ws.txt").exists(),
            "{}",
            out.text
        );
        let out = ro.call(
            "run_command",
            json!({"command": "echo t > $TMPDIR/t && cat $TMPDIR/t && cat /etc/passwd >/dev/null"}),
        );
        assert_eq!(out.text, "t\n[exit code 0]");
    }

    /// The repository inside the workspace stays read-only for a command that may write the
    /// workspace: no new file, no change, no removal, no rename, no way to unmount it.
    #[test]
    fn the_repository_stays_read_only_in_workspace_write() {
        if sandbox::Support::probe().landlock_abi < 1 {
            return; // refused with the feature named: the test above covers it
        }
        let f = Fixture::new(SandboxMode::WorkspaceWrite);
        let repo = f.root.repo().to_path_buf();
        let head = std::fs::read(repo.join("HEAD")).expect("HEAD");
        for cmd in [
            "echo x > .axocoatl/HEAD",
            "echo x >> .axocoatl/HEAD",
            "touch .axocoatl/new",
            "mkdir .axocoatl/dir",
            "rm -f .axocoatl/HEAD",
            "mv .axocoatl/HEAD .axocoatl/HEAD2",
            "rm -rf .axocoatl",
            "mv .axocoatl moved",
            "umount .axocoatl",
            "umount -l .axocoatl",
            "cd .axocoatl && ln -s x link",
        ] {
            let out = f.call("run_command", json!({ "command": cmd }));
            assert!(
                out.is_error && out.exit_code != Some(0),
                "{cmd}: {}",
                out.text
            );
        }
        assert_eq!(std::fs::read(repo.join("HEAD")).expect("HEAD"), head);
        let names: Vec<_> = std::fs::read_dir(&repo)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert!(!names
            .iter()
            .any(|n| n == "new" || n == "dir" || n == "HEAD2"));
        assert!(!f.root.dir().join("moved").exists());
        let out = f.call(
            "run_command",
            json!({"command": "echo hi > made.txt && mkdir -p sub && echo deep > sub/f && cat .axocoatl/HEAD >/dev/null && echo ok"}),
        );
        assert_eq!(out.text, "ok\n[exit code 0]", "{}", out.text);
        assert_eq!(f.read("sub/f"), "deep\n");
    }
}
