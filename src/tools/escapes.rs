//! Tests: what a hostile command tries, in process, each refused. (The same escapes through
//! the real binary, serve, kill -9 and an unprivileged user are in tests/cli/sandbox.rs.)

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::testing::Fixture;
use super::ToolOutput;
use crate::config::{CommandLimits, SandboxMode};

/// A number no other test uses, to write as `sleep {marker}N` and find in process lists.
pub fn marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "86400.{}{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed) + 100
    )
}

/// The processes (on the whole machine) whose command line contains `marker`.
pub fn running_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// Waits up to 5 s for every process with `marker` to be gone; panics naming survivors.
pub fn wait_gone(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running_with(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        running_with(marker),
        Vec::<u32>::new(),
        "survivors of {marker}"
    );
}

/// A skipped test says why (on stderr, which the test harness shows).
fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

fn sandboxed() -> bool {
    match super::launch::sandbox_unavailable() {
        None => true,
        Some(why) => {
            skipped(&format!(
                "{why} (the refusal is tested in command.rs and launch.rs)"
            ));
            false
        }
    }
}

fn run(f: &Fixture, command: &str) -> ToolOutput {
    f.call("run_command", json!({ "command": command }))
}

#[test]
fn nothing_a_command_started_outlives_it() {
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::FullAccess,
    ] {
        if mode != SandboxMode::FullAccess && !sandboxed() {
            continue;
        }
        let f = Fixture::new(mode);
        let m = marker();
        let cmd = format!(
            "sleep {m}1 & setsid sleep {m}2 & (setsid sh -c 'sleep {m}3 &' &); nohup sleep {m}4 >/dev/null 2>&1 & echo started"
        );
        let out = run(&f, &cmd);
        assert_eq!(out.text, "started\n[exit code 0]", "{mode:?}");
        let full_access_without_pid_namespace = mode == SandboxMode::FullAccess
            && !super::launch::Launch::supervised().has_pid_namespace();
        if full_access_without_pid_namespace {
            // Processes that left the group are not tracked there (README says so).
            skipped("full-access without a pid namespace: setsid processes are not followed");
            for pid in running_with(&m) {
                // SAFETY: test cleanup of processes this test started.
                #[expect(unsafe_code, reason = "kill of leftover test processes")]
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
            continue;
        }
        wait_gone(&m);
    }
}

#[test]
fn a_command_sees_only_its_own_processes() {
    if !sandboxed() {
        return;
    }
    let f = Fixture::new(SandboxMode::WorkspaceWrite);
    let me = std::process::id();
    let out = run(
        &f,
        &format!(
            "echo $$; ls /proc | grep -c '^[0-9]*$'; cat /proc/{me}/environ; cat /proc/1/environ"
        ),
    );
    let lines: Vec<&str> = out.text.lines().collect();
    // The namespace's init is 1 (a copy of axocoatl, unreadable), the shell 2.
    assert_eq!(lines[0], "2", "{}", out.text);
    let seen: u32 = lines[1].parse().expect("count");
    assert!(seen <= 5, "{}", out.text);
    assert!(out.text.contains("No such file"), "{}", out.text);
    assert!(
        out.text.contains("/proc/1/environ: Permission denied"),
        "{}",
        out.text
    );
}

#[test]
fn a_command_holds_no_capability_and_makes_no_device() {
    if !sandboxed() {
        return;
    }
    let f = Fixture::new(SandboxMode::WorkspaceWrite);
    let out = run(&f, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status");
    for line in out.text.lines().filter(|l| l.starts_with("Cap")) {
        assert!(line.ends_with("0000000000000000"), "{}", out.text);
    }
    assert_eq!(out.text.lines().count(), 6, "{}", out.text);
    for cmd in [
        "mknod disk b 7 0",
        "mknod tty c 5 0",
        "mknod fifo p && echo fifo ok",
    ] {
        let out = run(&f, cmd);
        if cmd.contains("fifo") {
            assert!(out.text.starts_with("fifo ok"), "{cmd}: {}", out.text);
        } else {
            assert!(out.is_error, "{cmd}: {}", out.text);
        }
    }
    assert!(!f.root.dir().join("disk").exists() && !f.root.dir().join("tty").exists());
}

#[test]
fn limits_of_other_processes_cannot_be_changed() {
    if !sandboxed() {
        return;
    }
    let f = Fixture::new(SandboxMode::WorkspaceWrite);
    let m = marker();
    let out = run(
        &f,
        &format!(
            "sleep {m} & prlimit --pid $! --fsize=0; echo other=$?; ulimit -f 100 && echo own=ok"
        ),
    );
    assert!(
        out.text.contains("other=1") && out.text.contains("own=ok"),
        "{}",
        out.text
    );
    assert!(out.text.contains("Operation not permitted"), "{}", out.text);
    wait_gone(&m);
}

#[test]
fn control_sockets_in_the_repository_are_out_of_reach() {
    if !sandboxed() {
        return;
    }
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let f = Fixture::new(mode);
        let sock = f.root.repo().join("run/probe.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let out = run(
            &f,
            &format!(
                "ls -A .axocoatl/run {}; {} -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"connected\")' {}",
                f.root.repo().join("run").display(),
                python(),
                sock.display()
            ),
        );
        assert!(
            !out.text.contains("connected") && !out.text.contains("probe.sock"),
            "{mode:?}: {}",
            out.text
        );
        assert!(
            out.text.contains("FileNotFoundError"),
            "{mode:?}: {}",
            out.text
        );
        assert!(
            listener.accept().is_err(),
            "{mode:?}: a connection got through"
        );
    }
}

#[test]
fn the_temporary_directory_is_private_and_removed() {
    if !sandboxed() {
        return;
    }
    let f = Fixture::new(SandboxMode::ReadOnly);
    let out = run(&f, "stat -c %a \"$TMPDIR\"; echo \"$TMPDIR\"");
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines[0], "700", "{}", out.text);
    assert!(!std::path::Path::new(lines[1]).exists());
}

#[test]
fn binary_output_keeps_its_bytes() {
    let f = Fixture::new(SandboxMode::FullAccess);
    let out = run(&f, "printf 'a\\377b'");
    let mut raw = b"a\xffb\n".to_vec();
    raw.extend_from_slice(super::NOT_UTF8_NOTE.as_bytes());
    raw.extend_from_slice(b"\n[exit code 0]");
    assert_eq!(out.raw.as_deref(), Some(raw.as_slice()));
    assert_eq!(out.text, String::from_utf8_lossy(&raw));
    assert!(
        out.text
            .starts_with("a\u{FFFD}b\n[the output is not valid UTF-8"),
        "{}",
        out.text
    );
    let text = run(&f, "echo é");
    assert_eq!((text.raw, text.text.as_str()), (None, "é\n[exit code 0]"));
}

#[test]
fn limits_bound_memory_file_size_and_cpu_time() {
    if !sandboxed() {
        return;
    }
    let mut f = Fixture::new(SandboxMode::WorkspaceWrite);
    f.limits = CommandLimits {
        processes: None,
        memory_mb: Some(256),
        file_size_mb: Some(1),
        cpu_secs: Some(1),
    };
    let out = run(&f, &format!("{} -c 'bytearray(512 << 20)'", python()));
    assert!(out.text.contains("MemoryError"), "{}", out.text);
    let out = run(&f, "head -c 3000000 /dev/zero > big");
    assert!(out.is_error, "{}", out.text);
    let size = std::fs::metadata(f.root.dir().join("big"))
        .expect("big")
        .len();
    assert_eq!(size, 1 << 20);
    let started = Instant::now();
    let out = f.call(
        "run_command",
        json!({"command": "while :; do :; done", "timeout_secs": 60}),
    );
    assert!(out.text.contains("killed by signal"), "{}", out.text);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_fork_bomb_is_bounded_and_its_turn_ends() {
    if !sandboxed() {
        return;
    }
    if !super::launch::process_limit_enforced() {
        skipped("run by root where no pids cgroup can be made, the kernel does not bound a command's processes");
        return;
    }
    let mut f = Fixture::new(SandboxMode::WorkspaceWrite);
    f.limits = CommandLimits {
        processes: Some(16),
        ..CommandLimits::default()
    };
    let out = run(
        &f,
        &(python().to_owned()
            + " -c '
import os, time
n = 0
for i in range(100):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    except OSError as e:
        print(\"fork refused:\", e.strerror)
        break
print(\"children\", n)'"),
    );
    assert!(out.text.contains("fork refused"), "{}", out.text);
    let children: u32 = out
        .text
        .lines()
        .find_map(|l| l.strip_prefix("children "))
        .and_then(|n| n.parse().ok())
        .expect("children line");
    assert!(children < 16, "{}", out.text);
    let started = Instant::now();
    // A bomb of bounded depth (at most 254 processes even if nothing stopped it: a test
    // must not take the machine down when what it tests breaks) goes off in a subshell; the
    // shell spins (a builtin loop, it forks nothing more) while the bomb runs into the limit.
    let out = f.call("run_command", json!({"command": BOMB, "timeout_secs": 3}));
    assert!(out.text.contains("Cannot fork"), "{}", out.text);
    assert!(
        out.text
            .ends_with("[timed out after 3 s: the command and everything it started were killed]"),
        "{}",
        out.text
    );
    assert!(started.elapsed() < Duration::from_secs(20), "{}", out.text);
}

/// A fork bomb that stops by itself at depth 6 (at most 254 processes), spawned in a
/// subshell, while the shell spins without forking until the timeout.
pub const BOMB: &str = "(b() { [ $1 -gt 0 ] && { b $(($1 - 1)) | b $(($1 - 1)) & }; sleep 5; }; b 6); while :; do :; done";

/// serve and the actors refuse a peer that is a sandboxed command (of any repository); not
/// a `full-access` command, nor any other process.
#[test]
fn control_sockets_know_a_sandboxed_peer() {
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixListener, UnixStream};
    let f = Fixture::new(SandboxMode::FullAccess);
    let path = f.root.dir().join("probe.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let _own = UnixStream::connect(&path).expect("connect");
    let (accepted, _) = listener.accept().expect("accept");
    assert!(!super::sandbox::peer_is_sandboxed(accepted.as_fd()));
    if !sandboxed() {
        return;
    }
    let connect = format!(
        "{} -c 'import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(5)' {}",
        python(),
        path.display()
    );
    for (mode, sandboxed) in [
        (SandboxMode::WorkspaceWrite, true),
        (SandboxMode::ReadOnly, true),
        (SandboxMode::FullAccess, false),
    ] {
        let g = Fixture::new(mode);
        let connect = connect.clone();
        // The command stays connected while its peer is looked at; a stop ends it.
        std::thread::scope(|scope| {
            let command = scope.spawn(|| run(&g, &connect));
            let (peer, _) = listener.accept().expect("accept");
            assert_eq!(
                super::sandbox::peer_is_sandboxed(peer.as_fd()),
                sandboxed,
                "{mode:?}"
            );
            g.cancel.cancel();
            command.join().expect("command");
        });
    }
}

/// The python of the system (readable by every user).
fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The machine's well-known control sockets (D-Bus, systemd, container engines, ...) are
/// hidden like axocoatl's own: the Landlock ruleset has no rule for pathname sockets.
#[test]
fn the_machines_control_sockets_are_hidden() {
    if !sandboxed() {
        return;
    }
    let present: Vec<_> = ["/run/dbus", "/run/systemd"]
        .into_iter()
        .filter(|p| std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some()))
        .collect();
    if present.is_empty() {
        skipped("no /run/dbus or /run/systemd with anything in it on this machine");
        return;
    }
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let f = Fixture::new(mode);
        let out = run(
            &f,
            &format!("find {} -mindepth 1 | wc -l", present.join(" ")),
        );
        assert_eq!(out.text, "0\n[exit code 0]", "{mode:?}");
    }
    // full-access sees them.
    let f = Fixture::new(SandboxMode::FullAccess);
    let out = run(
        &f,
        &format!("find {} -mindepth 1 | wc -l", present.join(" ")),
    );
    assert_ne!(out.text, "0\n[exit code 0]");
}
