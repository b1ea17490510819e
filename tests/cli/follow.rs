//! `axocoatl follow`: a turn followed from another process, through the real binary against
//! a loopback Ollama server that streams slowly: what the turn streamed before the follower
//! came, then the rest as it comes, the turn's own exit code, `--json` events, a stop from
//! the follower, an ended turn at once, a dead turn, and turns run by `serve` and by an
//! automation.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::env::{read_until, wait_until, Run, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_stream};
use crate::common::procs::{json_lines, kill, Serve};

/// `n` words `w0 `…, streamed one every `pace`.
fn slow(n: usize, pace: Duration) -> (Reply, String) {
    let words: Vec<String> = (0..n).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = words.iter().map(String::as_str).collect();
    (
        Reply::ndjson(&ollama_stream(&pieces)).paced(pace),
        words.concat(),
    )
}

/// A `send` running in the background, once it has begun: its turn id and the child.
fn start_send(env: &TestEnv, args: &[&str]) -> (String, Child) {
    let mut child = env
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let mut err = child.stderr.take().expect("stderr");
    let seen = read_until(&mut err, "\n");
    let turn = seen
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .unwrap_or_else(|| panic!("no turn line: {seen}"))
        .to_owned();
    // Keep draining stderr so the send never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (turn, child)
}

fn finish(mut child: Child) -> Run {
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read");
    let status = child.wait().expect("wait");
    Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr: String::new(),
    }
}

#[test]
fn help() {
    let env = TestEnv::new();
    snap!("help", env.snap(&env.run(&["follow", "--help"])));
}

#[test]
fn a_running_turn_is_followed_from_its_start_to_its_end_with_its_exit_code() {
    let (reply, text) = slow(24, Duration::from_millis(100));
    let server = FakeServer::with([reply]);
    let env = ollama_env(&server);
    let (turn, mut send) = start_send(&env, &["send", "count"]);
    // The follower comes once the turn has streamed a few words: it prints them first.
    let mut out = send.stdout.take().expect("stdout");
    let before = read_until(&mut out, "w3 ");
    let follow = env.run(&["follow", &turn]);
    let json = env.run(&["follow", &turn[..8], "--json"]);
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("read");
    assert_eq!(send.wait().expect("wait").code(), Some(0));
    assert_eq!(format!("{before}{rest}"), format!("{text}\n"));
    assert!(!before.contains("w23"), "the follower came mid-turn");

    assert_eq!(follow.code, 0, "{}", follow.stderr);
    assert_eq!(follow.stdout, format!("{text}\n"), "{}", follow.stderr);
    assert_eq!(follow.stderr, format!("turn {turn}\n"));

    assert_eq!(json.code, 0, "{}", json.stderr);
    let events = json_lines(&json.stdout);
    assert_eq!(events[0]["type"], "turn.begun", "{}", json.stdout);
    assert_eq!(events[0]["turn"], turn.as_str());
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "delta")
        .map(|e| e["text"].as_str().expect("text"))
        .collect();
    assert_eq!(deltas, text);
    let end = events.last().expect("end");
    assert_eq!(end["type"], "turn.ended");
    assert_eq!(end["state"], "completed");
    assert_eq!(end["output"], text.as_str());
    // Nothing of the turn is left under run/: its stream went with it.
    let streams = env.repo().join("run/streams");
    assert_eq!(
        std::fs::read_dir(&streams).map(|d| d.count()).unwrap_or(0),
        0,
        "{}",
        streams.display()
    );
}

#[test]
fn an_ended_turn_prints_its_answer_and_exits_at_once_with_its_code() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["all ", "done"])),
        Reply::json(500, r#"{"error":"model overloaded"}"#),
    ]);
    let env = ollama_env(&server);
    assert_eq!(env.run(&["send", "one"]).code, 0);
    let r = env.run(&["follow", "@"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "all done\n");
    assert!(r.stderr.starts_with("turn "), "{}", r.stderr);
    let failed = env.run(&["send", "two"]);
    assert_eq!(failed.code, 3);
    let r = env.run(&["follow", "@", "--json"]);
    assert_eq!(r.code, 3, "the turn's own exit code: {}", r.stderr);
    let events = json_lines(&r.stdout);
    let end = events.last().expect("end");
    assert_eq!(end["state"], "failed");
    assert!(
        end["error"].as_str().unwrap_or("").contains("overloaded"),
        "{end}"
    );
    let text = env.run(&["follow", "@"]);
    assert_eq!(text.code, 3);
    assert_eq!(text.stdout, "");
    let failed_turn = text.stderr.lines().next().unwrap_or("").to_owned();
    assert!(
        failed_turn.starts_with("turn ")
            && text.stderr.contains(&format!(
                "error: {failed_turn} failed: llm: {}/api/chat answered HTTP 500: model overloaded",
                server.url()
            )),
        "{}",
        text.stderr
    );
    // No turn, no such session.
    let none = env.run(&["follow", "@", "-s", "empty"]);
    assert_eq!(none.code, 7, "{}", none.stderr);
    let unknown = env.run(&["follow", "0123abcd"]);
    assert_eq!(unknown.code, 7, "{}", unknown.stderr);
}

#[test]
fn ctrl_c_on_the_follower_stops_exactly_the_followed_turn() {
    let (reply, _) = slow(400, Duration::from_millis(50));
    let server = FakeServer::with([reply, Reply::ndjson(&ollama_stream(&["next"]))]);
    let env = ollama_env(&server);
    let (turn, send) = start_send(&env, &["send", "count"]);
    let mut follower = env
        .cmd(&["follow", &turn])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follow");
    let mut out = follower.stdout.take().expect("stdout");
    read_until(&mut out, "w2 ");
    kill(follower.id(), libc::SIGINT);
    let mut err = String::new();
    follower
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    let code = follower.wait().expect("wait").code();
    assert_eq!(code, Some(4), "the turn's exit code, stopped: {err}");
    assert!(
        err.contains(&format!("stop requested for turn {turn}"))
            && err.contains(&format!("turn {turn} stopped")),
        "{err}"
    );
    assert_eq!(finish(send).code, 4, "the send was stopped");
    let show: Value =
        serde_json::from_str(&env.run(&["show", "--json", &turn]).stdout).expect("json");
    assert_eq!(show["state"], "stopped");
    assert_eq!(show["stop_requested"], true);
    // The session goes on: the next turn is not stopped.
    assert_eq!(env.run(&["send", "again"]).code, 0);
}

#[test]
fn a_turn_whose_process_died_ends_interrupted_for_its_follower() {
    let (reply, _) = slow(400, Duration::from_millis(50));
    let server = FakeServer::with([reply]);
    let env = ollama_env(&server);
    let (turn, mut send) = start_send(&env, &["send", "count"]);
    let mut follower = env
        .cmd(&["follow", &turn])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follow");
    let mut out = follower.stdout.take().expect("stdout");
    read_until(&mut out, "w1 ");
    kill(send.id(), libc::SIGKILL);
    send.wait().expect("wait");
    let status = follower.wait().expect("wait");
    assert_eq!(status.code(), Some(5), "interrupted");
    let stream = env.repo().join("run/streams").join(&turn);
    assert!(!stream.exists(), "the orphan's stream file was removed");
}

#[test]
fn a_turn_of_a_serve_actor_is_followed_from_another_process() {
    let (reply, text) = slow(16, Duration::from_millis(100));
    let server = FakeServer::with([reply]);
    let env = ollama_env(&server);
    let serve = Serve::start(&env);
    let (turn, mut send) = start_send(&env, &["send", "count"]);
    let mut out = send.stdout.take().expect("stdout");
    read_until(&mut out, "w2 ");
    let follow = env.run(&["follow", "@"]);
    assert_eq!(follow.code, 0, "{}", follow.stderr);
    assert_eq!(follow.stdout, format!("{text}\n"));
    assert_eq!(follow.stderr, format!("turn {turn}\n"));
    assert_eq!(send.wait().expect("wait").code(), Some(0));
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn an_automations_turn_is_followed_from_another_process() {
    let (reply, text) = slow(16, Duration::from_millis(100));
    let server = FakeServer::with([reply]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\nautomations:\n  - id: nightly\n    agent: helper\n    session: night\n    schedule: \"0 3 * * *\"\n    request: count\n",
        server.url()
    ));
    let mut run = env
        .cmd(&["automations", "run", "nightly"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Once the automation's turn has begun in its session, follow it there.
    wait_until("the automation's turn to begin", || {
        env.run(&["history", "-s", "night", "--json"])
            .stdout
            .contains("\"running\"")
    });
    let follow = env.run(&["follow", "@", "-s", "night", "--json"]);
    assert_eq!(follow.code, 0, "{}", follow.stderr);
    let events = json_lines(&follow.stdout);
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "delta")
        .map(|e| e["text"].as_str().expect("text"))
        .collect();
    assert_eq!(deltas, text);
    assert_eq!(events.last().expect("end")["state"], "completed");
    let mut lines = Vec::new();
    for line in BufReader::new(run.stderr.take().expect("stderr")).lines() {
        lines.push(line.expect("line"));
    }
    assert!(run.wait().expect("wait").success(), "{lines:?}");
}

/// An agent whose every command waits for approval; its scripted model says two words, slowly,
/// then asks to run one command, and answers "Deployed." once it ran.
const HELD: &str = "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: ops\n    provider: canned\n    sandbox: full-access\n    approvals: [run_command]\n";
const HELD_REPLIES: &str = "replies:\n  - chunks: [\"Checking \", \"first.\"]\n    delay_ms: 700\n    tool_calls:\n      - name: run_command\n        arguments: {command: \"echo ran >> marker.txt\"}\n  - text: \"Deployed.\"\n";

#[test]
fn a_turn_that_waits_for_approval_ends_its_following_as_it_ends_send() {
    let mut env = TestEnv::with_config(HELD);
    env.write("replies.yaml", HELD_REPLIES);
    env.set_env("USER", "alice");
    // The follower comes while the turn streams, before its call asks for approval.
    let (turn, mut send) = start_send(&env, &["send", "deploy the release"]);
    let follow = env.run(&["follow", &turn]);
    assert_eq!(send.wait().expect("wait").code(), Some(12));
    assert_eq!(follow.code, 12, "{}", follow.stderr);
    assert_eq!(follow.stdout, "Checking first.\n", "{}", follow.stderr);
    assert!(
        follow.stderr.contains(&format!(
            "turn {turn} waits for approval of run_command (call_0)"
        )) && follow.stderr.contains(&format!("axocoatl approve {turn}")),
        "{}",
        follow.stderr
    );
    // A follower that comes while it waits: the same, at once; with --json, the end `send
    // --json` gives a waiting turn.
    let again = env.run(&["follow", "@", "--json"]);
    assert_eq!(again.code, 12, "{}", again.stderr);
    let events = json_lines(&again.stdout);
    let end = events.last().expect("end");
    assert_eq!(end["type"], "turn.waiting", "{}", again.stdout);
    assert_eq!(end["turn"], turn.as_str());
    assert_eq!(end["exit_code"], 12);
    assert_eq!(end["calls"][0], "run_command (call_0)");
    assert!(!env.work.join("marker.txt").exists(), "nothing ran");
    // Answered, the turn goes on to its end, which a follower then gives at once.
    let approved = env.run(&["approve", &turn]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let done = env.run(&["follow", &turn]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert!(done.stdout.ends_with("Deployed.\n"), "{}", done.stdout);
}
