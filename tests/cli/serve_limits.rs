//! `serve` against what can knock it over: idle connections past the descriptor limit,
//! request lines that never end, actors that crash again and again or hang, repository
//! paths too long for a socket's path, a failed sync of the ledger, and what `agents
//! status` says after all that.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::env::{wait_until, wrapped, Run, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_stream};
use crate::common::procs::{actor, agents_status as status, alive, json_lines, kill, Serve};

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write(
        "replies.yaml",
        "replies:\n  - text: \"Hello.\"\n  - text: \"Again.\"\n  - text: \"Once more.\"\n  - text: \"And again.\"\n",
    );
    env
}

/// `args` run with `ulimit LIMIT` set first (in the clean environment of `env.cmd`).
fn limited(env: &TestEnv, limit: &str, args: &[&str]) -> Command {
    let script = format!("ulimit {limit} && exec \"$0\" \"$@\"");
    wrapped(&env.cmd(args), "sh", &["-c", &script])
}

/// Runs `cmd` and kills it if it has not ended within `secs` (a command that hangs fails
/// its test instead of hanging it).
fn run_within(mut cmd: Command, secs: u64) -> Run {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "{cmd:?} did not end within {secs} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Run::from_output(child.wait_with_output().expect("output"))
}

/// `agents status --json` that must answer within 20 s.
fn status_within(env: &TestEnv) -> Vec<Value> {
    let r = run_within(env.cmd(&["agents", "status", "--json"]), 20);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

/// Waits until `agent`'s actor is idle with a pid other than `not`; returns it.
fn wait_idle(env: &TestEnv, agent: &str, not: u32) -> u32 {
    let mut pid = 0;
    wait_until("the actor is idle", || {
        let s = status(env);
        let a = actor(&s, agent);
        pid = a["pid"].as_u64().unwrap_or(0) as u32;
        a["state"] == "idle" && pid != not
    });
    pid
}

/// A line of `/proc/PID/status` (`VmHWM`, …) in KiB.
fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in {status}"))
}

/// Lets this test process hold `n` more descriptors (its soft limit up to its hard one).
fn allow_descriptors(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[expect(
        unsafe_code,
        reason = "getrlimit and setrlimit on a struct of this frame"
    )]
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    assert!(
        lim.rlim_cur >= n + 64,
        "this test needs {n} descriptors; the hard limit is {}",
        lim.rlim_cur
    );
}

#[test]
fn idle_connections_past_the_descriptor_limit_take_no_agent_down() {
    let env = script_env();
    let serve = Serve::start_command(limited(&env, "-n 1024", &["serve"]));
    let pid = wait_idle(&env, "bot", 0);
    allow_descriptors(1200);
    let socket = env.repo().join("run/serve.sock");
    // 1,100 connections that never send a request, from a process of the same user.
    let idle: Vec<UnixStream> = (0..1100)
        .map(|_| UnixStream::connect(&socket).expect("connect"))
        .collect();
    // While they are open: status answers, turns go through, the agent is up.
    let s = status_within(&env);
    assert_eq!(actor(&s, "bot")["state"], "idle", "{s:?}");
    let send = run_within(env.cmd(&["send", "hi"]), 30);
    assert_eq!(send.code, 0, "{}", send.stderr);
    assert_eq!(send.stdout, "Hello.\n");
    // An actor killed now is restarted: serve kept descriptors for it.
    assert_eq!(kill(pid, libc::SIGKILL), 0);
    let again = wait_idle(&env, "bot", pid);
    assert_ne!(again, pid);
    let s = status_within(&env);
    assert_eq!(actor(&s, "bot")["restarts"], 1, "{s:?}");
    drop(idle);
    let send = run_within(env.cmd(&["send", "and now?"]), 30);
    assert_eq!(send.code, 0, "{}", send.stderr);
    // What serve said about it is a few lines, not one per failed accept.
    let logs = serve.logs();
    assert!(
        logs.lines().count() < 60,
        "{} lines:\n{logs}",
        logs.lines().count()
    );
    assert!(
        logs.contains("serve holds as many clients as it may"),
        "{logs}"
    );
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn serve_raises_its_open_file_limit_to_the_hard_limit() {
    let env = script_env();
    let serve = Serve::start_command(limited(&env, "-S -n 100", &["serve"]));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.pid)).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("open files");
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3], fields[4], "soft and hard: {line}");
    assert_ne!(fields[3], "100", "{line}");
    assert!(
        serve.logs().contains("raised the open file limit"),
        "{}",
        serve.logs()
    );
    assert_eq!(serve.terminate(), 0);
}

/// Writes `total` bytes without a newline to `socket` (until the other side closes) and
/// returns what it answered.
fn endless_line(socket: &Path, total: usize) -> String {
    let mut stream = UnixStream::connect(socket).expect("connect");
    let mut reader = stream.try_clone().expect("clone");
    let answer = std::thread::spawn(move || {
        // What came before the connection ended (a reset after the answer included).
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let chunk = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < total {
        if stream.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    answer.join().expect("answer")
}

#[test]
fn a_request_line_past_64_mib_is_answered_with_an_error_and_closed() {
    let env = script_env();
    let serve = Serve::start(&env);
    let pid = wait_idle(&env, "bot", 0);
    let before = proc_kib(serve.pid, "VmRSS");
    let answer = endless_line(&env.repo().join("run/serve.sock"), 256 << 20);
    assert!(answer.contains("longer than 64 MiB"), "{answer}");
    // Serve held at most the limit of it (not the 256 MiB sent).
    let grown = proc_kib(serve.pid, "VmHWM").saturating_sub(before);
    assert!(grown < 160 << 10, "serve grew by {grown} KiB");
    // The actors' sockets have the same limit.
    let answer = endless_line(&env.repo().join("run/actors/0.sock"), 256 << 20);
    assert!(answer.contains("longer than 64 MiB"), "{answer}");
    assert!(
        proc_kib(pid, "VmHWM") < 200 << 10,
        "the actor held it whole"
    );
    assert!(alive(pid));
    let send = env.run(&["send", "hi"]);
    assert_eq!(send.code, 0, "{}", send.stderr);
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn an_actor_that_crashes_six_times_within_the_window_leaves_its_agent_down() {
    let env = script_env();
    let serve = Serve::start(&env);
    let mut pid = wait_idle(&env, "bot", 0);
    for n in 1..=5 {
        assert_eq!(kill(pid, libc::SIGKILL), 0);
        pid = wait_idle(&env, "bot", pid);
        assert_eq!(actor(&status(&env), "bot")["restarts"], n);
    }
    assert_eq!(kill(pid, libc::SIGKILL), 0);
    wait_until("the agent is down", || {
        actor(&status(&env), "bot")["state"] == "down"
    });
    let s = status(&env);
    let bot = actor(&s, "bot");
    let error = bot["last_error"].as_str().expect("last_error");
    assert!(error.contains("crashed 6 times within 10 minutes"), "{bot}");
    assert_eq!(bot["pid"], Value::Null);
    let send = env.run(&["send", "hi"]);
    assert_eq!(send.code, 1, "{}", send.stderr);
    assert!(send.stderr.contains("is down"), "{}", send.stderr);
    // A restart asked for brings it back, and forgets why it was down.
    let restart = env.run(&["agents", "restart", "bot"]);
    assert_eq!(restart.code, 0, "{}", restart.stderr);
    wait_idle(&env, "bot", 0);
    let bot = actor(&status(&env), "bot").clone();
    assert_eq!(bot["last_error"], Value::Null, "{bot}");
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    assert_eq!(serve.terminate(), 0);
}

/// Sets the soft `RLIMIT_NOFILE` of process `pid` (the hard one stays), returning the old.
fn set_soft_nofile(pid: u32, soft: u64) -> u64 {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[expect(
        unsafe_code,
        reason = "prlimit reads and writes rlimit structs of this frame"
    )]
    unsafe {
        assert_eq!(
            libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old),
            0
        );
        let new = libc::rlimit {
            rlim_cur: soft,
            rlim_max: old.rlim_max,
        };
        assert_eq!(
            libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()),
            0
        );
    }
    old.rlim_cur
}

/// A start that fails for lack of descriptors is serve's condition, not the agent's: with
/// serve's open-file limit lowered to what it holds, the actor killed fails to start again
/// and again (EMFILE, more than the five failed starts that make an agent `down`), and the
/// agent is never `down`; with the limit back, it comes up.
#[test]
fn starts_that_fail_for_lack_of_descriptors_never_take_the_agent_down() {
    let env = script_env();
    let serve = Serve::start(&env);
    let pid = wait_idle(&env, "bot", 0);
    let held = std::fs::read_dir(format!("/proc/{}/fd", serve.pid))
        .expect("fds")
        .count() as u64;
    let before = set_soft_nofile(serve.pid, held);
    assert_eq!(kill(pid, libc::SIGKILL), 0);
    // Each failed start is retried after a pause that doubles (1 s, 2 s, … up to 30 s), and
    // said once per 30 s: the second warning counts the failures kept quiet between the two.
    let said = "actor could not start for lack of file descriptors (not counted toward down)";
    let deadline = Instant::now() + Duration::from_secs(180);
    let kept = loop {
        let logs = serve.logs();
        let kept: Vec<u64> = logs
            .lines()
            .filter(|l| l.contains(said))
            .filter_map(|l| {
                let at = l.find("kept=")? + "kept=".len();
                let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        if kept.len() >= 2 {
            assert!(logs.contains("os error 24"), "{logs}");
            break kept[1];
        }
        assert!(Instant::now() < deadline, "{logs}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The first failure, the ones kept quiet, and the one said again: more than five.
    assert!(kept + 2 > 5, "{kept} kept quiet:\n{}", serve.logs());
    set_soft_nofile(serve.pid, before);
    let s = status(&env);
    let bot = actor(&s, "bot");
    assert_ne!(bot["state"], "down", "{bot}");
    assert!(
        bot["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("os error 24")),
        "{bot}"
    );
    // A restart asked for retries at once (the next retry would come within 30 s anyway).
    let restart = env.run(&["agents", "restart", "bot"]);
    assert_eq!(restart.code, 0, "{}", restart.stderr);
    wait_idle(&env, "bot", pid);
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn an_actor_that_hangs_is_killed_by_the_liveness_check_and_restarted_from_its_checkpoint() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["first answer"])),
        Reply::ndjson(&ollama_stream(&["second answer"])),
    ]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let one = env.run(&["send", "remember the word marmalade"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let pid = wait_idle(&env, "helper", 0);
    assert_eq!(kill(pid, libc::SIGSTOP), 0);
    let started = Instant::now();
    let again = wait_idle(&env, "helper", pid);
    assert!(!alive(pid), "the hung actor was killed");
    let s = status(&env);
    let a = actor(&s, "helper");
    assert_eq!(a["restarts"], 1, "{a}");
    assert!(
        a["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("failed its liveness check")),
        "{a}"
    );
    assert!(serve.logs().contains("actor failed its liveness check"));
    assert!(started.elapsed() < Duration::from_secs(20));
    // The successor holds the conversation, from the checkpoint.
    let two = env.run(&["send", "which word?"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let requests = server.requests();
    let text = requests.last().expect("request").json()["messages"].to_string();
    assert!(
        text.contains("marmalade") && text.contains("first answer"),
        "{text}"
    );
    assert!(alive(again));
    assert_eq!(serve.terminate(), 0);
}

/// A directory under `env` whose path is at least `len` bytes.
fn deep_dir(env: &TestEnv, len: usize) -> PathBuf {
    let mut dir = env.tmp.path().join("deep");
    while dir.as_os_str().len() < len {
        dir.push("a-directory-with-a-long-name");
    }
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

#[test]
fn a_repository_path_of_200_bytes_serves_through_its_sockets() {
    let env = TestEnv::new();
    let dir = deep_dir(&env, 200);
    let repo = dir.join(".axocoatl");
    assert!(repo.join("run/actors/0.sock").as_os_str().len() > 220);
    assert_eq!(env.run_in(&dir, &["init"]).code, 0);
    std::fs::write(
        dir.join("axocoatl.yaml"),
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    )
    .expect("config");
    std::fs::write(dir.join("replies.yaml"), "replies:\n  - text: \"Deep.\"\n").expect("replies");
    let mut cmd = env.cmd(&["serve"]);
    cmd.current_dir(&dir);
    let serve = Serve::start_command(cmd);
    let run =
        |args: &[&str]| Run::from_output(env.cmd(args).current_dir(&dir).output().expect("run"));
    wait_until("the actor is idle", || {
        let r = run(&["agents", "status", "--json"]);
        r.code == 0 && actor(&json_lines(&r.stdout), "bot")["state"] == "idle"
    });
    let send = run(&["send", "hi"]);
    assert_eq!(send.code, 0, "{}", send.stderr);
    assert_eq!(send.stdout, "Deep.\n");
    assert!(serve.logs().contains("actor ready"), "{}", serve.logs());
    assert!(repo.join("run/serve.sock").exists());
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn after_a_failed_sync_an_actor_appends_nothing_more_and_is_replaced() {
    let mut env = script_env();
    // Each process fails its fifth durable append (a turn makes two: begin and end): the
    // first actor in the begin of its third turn. Its successor makes at most three (marking
    // that turn interrupted, when it opens the repository before the failed send does, and
    // one turn), so whichever process marks it, only the first actor fails.
    env.set_env("AXOCOATL_FAILPOINTS", "ledger.append.sync=error@5");
    let serve = Serve::start(&env);
    let pid = wait_idle(&env, "bot", 0);
    for request in ["one", "one more"] {
        let r = env.run(&["send", request]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let two = env.run(&["send", "two"]);
    assert_ne!(two.code, 0, "{}", two.stdout);
    assert!(
        two.stderr.contains("failpoint ledger.append.sync"),
        "{}",
        two.stderr
    );
    // The actor whose sync failed does not go on through the same descriptor: it ends,
    // and its successor opens the repository again.
    let next = wait_idle(&env, "bot", pid);
    assert!(!alive(pid));
    assert!(
        serve.logs().contains("a sync of the ledger failed"),
        "{}",
        serve.logs()
    );
    let three = env.run(&["send", "three"]);
    assert_eq!(three.code, 0, "{}", three.stderr);
    assert!(alive(next));
    let h = json_lines(&env.run(&["history", "--json"]).stdout);
    let states: Vec<&str> = h
        .iter()
        .map(|t| t["state"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        states,
        ["completed", "completed", "interrupted", "completed"],
        "{h:?}"
    );
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn agents_status_names_the_last_turn_whoever_ran_it() {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\nautomations:\n  - id: nightly\n    schedule: \"0 3 * * *\"\n    agent: bot\n    session: main\n    request: \"the nightly report\"\n",
    );
    env.write(
        "replies.yaml",
        "replies:\n  - match: nightly\n    text: \"Report.\"\n  - text: \"Done.\"\n",
    );
    let serve = Serve::start(&env);
    wait_idle(&env, "bot", 0);
    let send = env.run(&["send", "--json", "hi"]);
    assert_eq!(send.code, 0, "{}", send.stderr);
    let run = env.run(&["automations", "run", "nightly", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let h = json_lines(&env.run(&["history", "--json"]).stdout);
    let newest = h.last().expect("turn")["turn"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(h.len(), 2, "{h:?}");
    let s = status(&env);
    assert_eq!(actor(&s, "bot")["last_turn"], newest.as_str(), "{s:?}");
    assert_eq!(serve.terminate(), 0);
}
