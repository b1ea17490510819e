//! `axocoatl serve` and `axocoatl agents` through the real binary: the serve lock, signals,
//! turns routed to actor processes (the same output as in process), supervision (kill -9 of
//! an actor, an agent that cannot start), kill -9 of serve itself, `agents set`, and
//! sleep-time consolidation.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::env::{wait_until, Run, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_stream};
use crate::common::procs::{actor, agents_status as status, alive, kill, Serve};

const SCRIPT: &str = r#"
replies:
  - match: "BOOM"
    error: "model overloaded"
  - match: "a schema"
    text: '{"text": "hi", "n": 2}'

  - text: "Hello, world!"
    usage: {prompt_tokens: 10, completion_tokens: 3}
  - text: "Second answer."
  - text: "Third answer."
  - text: "Fourth answer."
  - text: "Fifth answer."
"#;

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write("replies.yaml", SCRIPT);
    env
}

fn slow_reply(pieces: usize, pause_ms: u64) -> Reply {
    let words: Vec<String> = (0..pieces).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    Reply::ndjson(&ollama_stream(&refs)).paced(Duration::from_millis(pause_ms))
}

/// Starts a command in the background and returns it with the turn id from its stderr.
fn spawn_send(env: &TestEnv, args: &[&str]) -> (Child, String) {
    let mut child = env
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("read turn line");
    let turn = line
        .trim()
        .strip_prefix("turn ")
        .unwrap_or_else(|| panic!("turn line: {line:?}"))
        .to_owned();
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
    });
    (child, turn)
}

/// Waits until `agent`'s actor is idle and returns its pid.
fn wait_up(env: &TestEnv, agent: &str) -> u32 {
    let mut pid = 0;
    wait_until("the actor is up", || {
        let s = status(env);
        let a = actor(&s, agent);
        pid = a["pid"].as_u64().unwrap_or(0) as u32;
        a["state"] == "idle"
    });
    pid
}

fn history(env: &TestEnv) -> Vec<Value> {
    let r = env.run(&["history", "--all", "--json"]);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

#[test]
fn help_of_serve_and_agents() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help_serve", vec!["serve", "--help"]),
        ("help_agents", vec!["agents", "--help"]),
        ("help_agents_list", vec!["agents", "list", "--help"]),
        ("help_agents_status", vec!["agents", "status", "--help"]),
        ("help_agents_restart", vec!["agents", "restart", "--help"]),
        ("help_agents_set", vec!["agents", "set", "--help"]),
    ] {
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        snap!(name, env.snap(&r));
    }
    // `dev` is the same command.
    let dev = env.run(&["dev", "--help"]);
    assert_eq!(dev.stdout, env.run(&["serve", "--help"]).stdout);
}

#[test]
fn agents_without_a_running_serve_exit_10() {
    let env = script_env();
    let r = env.run(&["agents", "list"]);
    assert_eq!(r.code, 10, "{}", r.stderr);
    snap!("agents_no_serve", env.snap(&r));
    for args in [
        vec!["agents", "status"],
        vec!["agents", "restart", "bot"],
        vec!["agents", "set", "bot", "model=x"],
    ] {
        assert_eq!(env.run(&args).code, 10, "{args:?}");
    }
}

#[test]
fn a_second_serve_is_refused_with_the_holders_pid_and_sigterm_releases_the_lock() {
    let env = script_env();
    let serve = Serve::start(&env);
    let second = env.run(&["serve"]);
    assert_eq!(second.code, 8, "{}", second.stderr);
    assert!(
        second.stderr.contains(&format!("(pid {})", serve.pid)),
        "{}",
        second.stderr
    );
    let dev = env.run(&["dev"]);
    assert_eq!(dev.code, 8, "{}", dev.stderr);
    let list = env.run(&["agents", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(list.stdout.contains("bot"), "{}", list.stdout);
    // The socket is owner-only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.repo().join("run/serve.sock"))
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    assert_eq!(serve.terminate(), 0);
    assert_eq!(
        env.run(&["agents", "list"]).code,
        10,
        "the lock is released"
    );
    // And the next serve starts.
    let again = Serve::start(&env);
    assert_eq!(again.terminate(), 0);
}

/// A supervisor may send SIGTERM the moment serve says it started: serve handles it (exit 0,
/// its socket removed), never dies by the signal's default action.
#[test]
fn sigterm_as_soon_as_serve_says_it_started_stops_it_cleanly() {
    let env = script_env();
    for round in 0..10 {
        let mut child = env
            .cmd(&["serve"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.expect("stderr line");
            let started = line.contains("serve started");
            seen.push(line);
            if started {
                kill(child.id(), libc::SIGTERM);
                break;
            }
        }
        // Drained so that serve's last logs never block on a full pipe.
        seen.extend(lines.map_while(Result::ok));
        let status = child.wait().expect("wait");
        assert_eq!(
            status.code(),
            Some(0),
            "round {round}: {status:?}\n{}",
            seen.join("\n")
        );
        assert!(
            !env.repo().join("run/serve.sock").exists(),
            "round {round}: the socket is removed"
        );
    }
}

#[test]
fn sigterm_mid_turn_ends_the_turn_stopped_and_releases_the_lock() {
    let server = FakeServer::with([slow_reply(100, 100)]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let (mut child, turn) = spawn_send(&env, &["send", "count slowly"]);
    let mut stdout = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut stdout, "w1 ");
    assert_eq!(serve.terminate(), 0);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4), "the send reports the stop");
    let h = history(&env);
    let t = h.iter().find(|v| v["turn"] == turn.as_str()).expect("turn");
    assert_eq!(t["state"], "stopped");
    assert!(t["output"].as_str().expect("output").starts_with("w0 "));
    assert_eq!(env.run(&["agents", "list"]).code, 10, "lock released");
}

/// One line of a case's output, with ids and the pid of serve out of the way.
fn normalized(env: &TestEnv, r: &Run) -> String {
    env.snap(r)
}

/// The same sequence of commands, in process and through serve.
fn cases(env: &TestEnv) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut run = |name: &str, args: &[&str]| {
        let r = env.run(args);
        out.push((name.to_owned(), normalized(env, &r)));
        r
    };
    run("send", &["send", "hi"]);
    run("send_json", &["send", "--json", "again"]);
    run("send_failed", &["send", "BOOM"]);
    run("send_failed_json", &["send", "--json", "BOOM please"]);
    run("send_unknown_agent", &["send", "-a", "nobody", "hi"]);
    run("send_bad_session", &["send", "-s", "../x", "hi"]);
    let first = history(env)[0]["turn"].as_str().expect("turn").to_owned();
    run("stop_completed", &["stop", &first]);
    run("stop_unknown", &["stop", "0123abcd"]);
    run("retry", &["retry", "--json", &first]);
    run("rewind", &["rewind", "--yes", "--json", &first]);
    run("rewind_unknown", &["rewind", "--yes", "0123abcd"]);
    run("send_after_rewind", &["send", "after the rewind"]);
    run("history", &["history", "--json"]);
    // A schema crosses serve's socket with the turn.
    run(
        "send_schema",
        &["send", "--compact", "--schema", "text, n int", "a schema"],
    );
    run(
        "send_schema_json",
        &["send", "--json", "--schema", "text, n int", "a schema"],
    );
    run(
        "send_schema_broken",
        &["send", "--schema", "text, n str", "a schema"],
    );
    out
}

#[test]
fn send_stop_retry_rewind_through_serve_match_in_process() {
    let in_process = script_env();
    let through = script_env();
    let serve = Serve::start(&through);
    let a = cases(&in_process);
    let b = cases(&through);
    // Every turn went through an actor, none in process.
    assert!(serve.logs().contains("actor ready"), "{}", serve.logs());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(
            x, y,
            "case {name} differs:\nin process:\n{x}\nthrough serve:\n{y}"
        );
    }
    let status = status(&through);
    let bot = actor(&status, "bot");
    assert_eq!(bot["state"], "idle");
    assert!(bot["last_turn"].is_string(), "{bot}");
    assert_eq!(serve.terminate(), 0);
    snap!(
        "same_both_ways",
        a.iter()
            .map(|(n, t)| format!("## {n}\n{t}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_stop_from_another_terminal_and_a_busy_session_work_through_serve() {
    let server = FakeServer::with([slow_reply(100, 100)]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let (mut child, turn) = spawn_send(&env, &["send", "count slowly"]);
    let mut stdout = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut stdout, "w0 ");
    // A second send to the busy session: exit 8 naming the active turn, as in process.
    let busy = env.run(&["send", "meanwhile"]);
    assert_eq!(busy.code, 8, "{}", busy.stderr);
    assert!(busy.stderr.contains(&turn), "{}", busy.stderr);
    let stop = env.run(&["stop", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert_eq!(stop.stdout, format!("stop requested for turn {turn}\n"));
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4));
    let again = env.run(&["stop", &turn]);
    assert_eq!(again.code, 6, "{}", again.stderr);
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn kill_9_of_an_actor_restarts_it_and_the_conversation_survives() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["first answer"])),
        slow_reply(100, 100),
        Reply::ndjson(&ollama_stream(&["third answer"])),
    ]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let one = env.run(&["send", "remember the word marmalade"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let before = status(&env);
    let pid = actor(&before, "helper")["pid"].as_u64().expect("pid") as u32;
    // Kill it in the middle of a turn.
    let (mut child, turn) = spawn_send(&env, &["send", "count slowly"]);
    let mut stdout = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut stdout, "w0 ");
    assert_eq!(kill(pid, libc::SIGKILL), 0);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(5),
        "the in-flight turn is interrupted"
    );
    let mut restarted = None;
    wait_until("the actor restarted", || {
        let s = status(&env);
        let a = actor(&s, "helper").clone();
        let up = a["state"] == "idle" && a["pid"].as_u64().is_some_and(|p| p as u32 != pid);
        if up {
            restarted = Some(a);
        }
        up
    });
    let a = restarted.expect("status");
    assert_eq!(a["restarts"], 1, "{a}");
    assert!(
        a["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped unexpectedly")),
        "{a}"
    );
    let h = history(&env);
    let t = h.iter().find(|v| v["turn"] == turn.as_str()).expect("turn");
    assert_eq!(t["state"], "interrupted", "never resumed");
    // The next turn's request carries the earlier conversation, from the checkpoint.
    let three = env.run(&["send", "which word?"]);
    assert_eq!(three.code, 0, "{}", three.stderr);
    assert_eq!(three.stdout, "third answer\n");
    let requests = server.requests();
    let last = requests.last().expect("request").json();
    let text = last["messages"].to_string();
    assert!(text.contains("marmalade"), "{text}");
    assert!(text.contains("first answer"), "{text}");
    assert!(text.contains("which word?"), "{text}");
    assert!(serve.logs().contains("restarting"), "{}", serve.logs());
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn an_agent_that_cannot_start_goes_down_after_five_failures_until_restarted() {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: missing.yaml}\nagents:\n  - id: bot\n    provider: canned\n  - id: lead\n    role: coordinator\n    provider: canned\n  - id: helper\n    role: worker\n    provider: canned\nworkflows:\n  - id: flow\n    entry_point: lead\n    workers: [helper]\n",
    );
    let serve = Serve::start(&env);
    wait_until("the agent is down", || {
        actor(&status(&env), "bot")["state"] == "down"
    });
    let s = status(&env);
    let bot = actor(&s, "bot");
    assert_eq!(
        bot["restarts"], 4,
        "five starts: the first and four restarts: {bot}"
    );
    assert_eq!(bot["pid"], Value::Null);
    let reason = bot["last_error"].as_str().expect("reason");
    assert!(reason.contains("missing.yaml"), "{reason}");
    assert!(
        !s.iter().any(|v| v["agent"] == "helper"),
        "workers are never actors: {s:?}"
    );
    let send = env.run(&["send", "hi"]);
    assert_eq!(send.code, 1, "{}", send.stderr);
    assert!(
        send.stderr.contains("agent \"bot\" is down"),
        "{}",
        send.stderr
    );
    snap!("send_to_a_down_agent", env.snap(&send));
    // A worker cannot be restarted directly.
    let worker = env.run(&["agents", "restart", "helper"]);
    assert_eq!(worker.code, 11, "{}", worker.stderr);
    snap!("restart_worker", env.snap(&worker));
    // Fix what was missing, then restart deliberately.
    env.write("missing.yaml", "replies:\n  - text: \"Up again.\"\n");
    let yaml = std::fs::read(env.work.join("axocoatl.yaml")).expect("yaml");
    let restart = env.run(&["agents", "restart", "bot", "--config", "axocoatl.yaml"]);
    assert_eq!(restart.code, 0, "{}", restart.stderr);
    snap!("restart", env.snap(&restart));
    wait_until("the agent is up", || {
        actor(&status(&env), "bot")["state"] == "idle"
    });
    // The restart asked for forgot why it was down.
    let bot = actor(&status(&env), "bot").clone();
    assert_eq!(bot["last_error"], Value::Null, "{bot}");
    let send = env.run(&["send", "hi"]);
    assert_eq!(send.code, 0, "{}", send.stderr);
    assert_eq!(send.stdout, "Up again.\n");
    assert_eq!(
        std::fs::read(env.work.join("axocoatl.yaml")).expect("yaml"),
        yaml
    );
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn kill_9_of_serve_leaves_the_turn_to_the_next_command() {
    let server = FakeServer::with([
        slow_reply(100, 100),
        Reply::ndjson(&ollama_stream(&["in process again"])),
    ]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let actor_pid = wait_up(&env, "helper");
    let (mut child, turn) = spawn_send(&env, &["send", "count slowly"]);
    let mut stdout = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut stdout, "w0 ");
    serve.signal(libc::SIGKILL);
    // The actor dies with serve (PR_SET_PDEATHSIG).
    wait_until("the actor died with serve", || !alive(actor_pid));
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h = history(&env);
    let t = h.iter().find(|v| v["turn"] == turn.as_str()).expect("turn");
    assert_eq!(t["state"], "interrupted");
    // Serve is gone: commands run in process.
    assert_eq!(env.run(&["agents", "list"]).code, 10);
    let next = env.run(&["send", "and now?"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.stdout, "in process again\n");
    drop(serve);
}

#[test]
fn agents_set_changes_the_next_turn_and_never_the_yaml() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["one"])),
        Reply::ndjson(&ollama_stream(&["two"])),
    ]);
    let env = ollama_env(&server);
    let yaml = std::fs::read(env.work.join("axocoatl.yaml")).expect("yaml");
    let serve = Serve::start(&env);
    assert_eq!(env.run(&["send", "first"]).code, 0);
    let set = env.run(&["agents", "set", "helper", "system_prompt=Answer in French."]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    snap!("set", env.snap(&set));
    let bad = env.run(&["agents", "set", "helper", "colour=blue"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let fixed = env.run(&["agents", "set", "helper", "id=other"]);
    assert_eq!(fixed.code, 11, "{}", fixed.stderr);
    wait_until("the patched actor is up", || {
        actor(&status(&env), "helper")["state"] == "idle"
    });
    let second = env.run(&["send", "second"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let requests = server.requests();
    let system =
        |r: &crate::common::fake_http::Recorded| r.json()["messages"][0]["content"].clone();
    assert_eq!(system(&requests[0]), "Be brief.");
    assert!(
        system(&requests[1])
            .as_str()
            .is_some_and(|s| s.starts_with("Answer in French.")),
        "{}",
        system(&requests[1])
    );
    assert_eq!(
        std::fs::read(env.work.join("axocoatl.yaml")).expect("yaml"),
        yaml,
        "the YAML is byte-identical"
    );
    let text = env.run(&["agents", "status"]);
    assert!(
        text.stdout
            .contains("patched in memory: helper system_prompt=Answer in French."),
        "{}",
        text.stdout
    );
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn consolidation_runs_only_after_the_idle_threshold_and_only_promotes() {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\nconsolidation:\n  enabled: true\n  idle_threshold_secs: 2\n  interval_secs: 1\n",
    );
    env.write(
        "replies.yaml",
        "replies:\n  - match: \"Core memory blocks\"\n    text: '{\"edits\": [{\"label\": \"human\", \"append\": \"Prefers tea over coffee.\"}]}'\n  - text: \"Noted.\"\n",
    );
    let add = env.run(&["memory", "add", "The user prefers tea over coffee."]);
    // Semantic memory comes with the recall work; until it is on this base, the pass can
    // only fail with "not supported yet", and the promotion half of this test waits for it.
    let semantic = add.code == 0;
    if !semantic {
        assert!(add.stderr.contains("not supported yet"), "{}", add.stderr);
    }
    let serve = Serve::start(&env);
    assert_eq!(env.run(&["send", "hello"]).code, 0);
    serve.wait_log("consolidation pass starting");
    // The pass waited for the threshold: the actor's idle time it saw is logged with it.
    let logs = serve.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("consolidation pass starting"))
        .expect("line");
    let idle: u64 = line
        .split("idle_ms=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("idle_ms in {line}"));
    assert!(idle >= 2000, "consolidated after {idle} ms idle: {line}");
    if !semantic {
        serve.wait_log("consolidation failed");
        assert!(
            serve.logs().contains("not supported yet"),
            "{}",
            serve.logs()
        );
        assert_eq!(serve.terminate(), 0);
        return;
    }
    serve.wait_log("consolidation pass agent");
    let core = env.run(&["memory", "core", "show", "human"]);
    assert!(
        core.stdout.contains("Prefers tea over coffee."),
        "{}",
        core.stdout
    );
    let search = env.run(&["memory", "search", "prefers tea"]);
    assert!(
        search.stdout.contains("The user prefers tea over coffee."),
        "no semantic record was deleted: {}",
        search.stdout
    );
    let h = history(&env);
    assert!(
        h.iter()
            .any(|v| v["state"] == "completed" && v["request"] != "hello"),
        "the pass is a turn in the ledger: {h:?}"
    );
    assert_eq!(serve.terminate(), 0);
}

/// A serve of another build (running since before an upgrade) names in its lock's note the
/// socket protocol it speaks, or none (a build from before notes named it): a command says
/// so before it connects, with what to do, instead of failing on a line it cannot read.
#[test]
fn a_serve_of_another_build_is_named_before_anything_is_sent() {
    let env = script_env();
    let run = env.repo().join("run");
    std::fs::create_dir_all(&run).expect("run/");
    // The socket exists and the lock is held, as by a running serve.
    let _socket = std::os::unix::net::UnixListener::bind(run.join("serve.sock")).expect("bind");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(run.join("serve.lock"))
        .expect("lock file");
    lock.lock().expect("hold the serve lock");
    for (note, speaks) in [
        ("pid 4242\n", "an earlier protocol"),
        ("pid 4242 protocol 999\n", "protocol 999"),
    ] {
        std::fs::write(run.join("serve.lock"), note).expect("note");
        for args in [&["send", "hi"][..], &["agents", "list"][..]] {
            let r = env.run(args);
            assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.starts_with(&format!(
                    "error: axocoatl serve (pid 4242) is another build of axocoatl: its control socket speaks {speaks}"
                )),
                "{args:?}: {}",
                r.stderr
            );
            assert!(
                r.stderr
                    .contains("hint: stop it (kill -TERM 4242) and start `axocoatl serve` again"),
                "{}",
                r.stderr
            );
        }
    }
    // Nothing was sent: no turn began.
    drop(lock);
    let h = env.run(&["history", "--json"]);
    assert_eq!(h.stdout, "", "{}", h.stderr);
}

#[test]
fn serve_logs_one_line_per_turn() {
    let env = script_env();
    let serve = Serve::start(&env);
    wait_up(&env, "bot");
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let turn = r.stderr.lines().next().expect("turn line")[5..].to_owned();
    serve.wait_log(&format!("turn={turn}"));
    let lines: Vec<String> = serve
        .logs()
        .lines()
        .filter(|l| l.contains("turn ended"))
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 1, "{}", serve.logs());
    for part in [
        "state=completed",
        "session=main",
        "agent=bot",
        "prompt_tokens=10",
        "completion_tokens=3",
    ] {
        assert!(lines[0].contains(part), "{part}: {}", lines[0]);
    }
    assert_eq!(serve.terminate(), 0);
}
