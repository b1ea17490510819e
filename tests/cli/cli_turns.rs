//! Turns through the real binary: send (argument, stdin, both), --json events, sessions,
//! history, show, export, stop, retry, crash recovery and search.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_stream};

const SCRIPT: &str = r#"
replies:
  - chunks: ["Hello", ", world", "!"]
    usage: {prompt_tokens: 10, completion_tokens: 3}
  - tool_calls: [{name: core_memory_append, arguments: {label: human, content: "likes tea"}}]
    usage: {prompt_tokens: 20, completion_tokens: 5}
  - text: "Noted: you like tea."
    usage: {prompt_tokens: 30, completion_tokens: 6}
  - text: "Third answer."
  - match: "BOOM"
    error: "model overloaded"
"#;

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write("replies.yaml", SCRIPT);
    env
}

/// Starts `send` in the background and returns it with the turn id from its stderr.
fn spawn_send(
    env: &TestEnv,
    args: &[&str],
) -> (Child, String, BufReader<std::process::ChildStderr>) {
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
        .expect("turn line")
        .to_owned();
    (child, turn, stderr)
}

#[test]
fn send_from_argument_stdin_and_both() {
    let env = script_env();
    snap!("send_argument", env.snap(&env.run(&["send", "hi"])));
    let r = env.run_stdin(&["send"], "I like tea\n");
    snap!("send_stdin_with_tool", env.snap(&r));
    let r = env.run_stdin(&["send", "review this"], "diff --git a/x b/x\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let show = env.run(&["history", "--json"]);
    let last: serde_json::Value =
        serde_json::from_str(show.stdout.lines().last().expect("turn")).expect("json");
    assert_eq!(last["request"], "review this");
    assert_eq!(last["context"][0]["label"], "stdin");
    let none = env.run(&["send"]);
    snap!("send_no_message", env.snap(&none));
}

#[test]
fn json_event_stream() {
    let env = script_env();
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    let r = env.run(&["send", "--json", "I like tea"]);
    snap!("send_json", env.snap(&r));
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.first().expect("first")["type"], "turn.begun");
    let last = lines.last().expect("last");
    assert_eq!(last["type"], "turn.ended");
    assert_eq!(last["state"], "completed");
    assert_eq!(last["usage"]["total_tokens"], 61);
    assert!(lines
        .iter()
        .any(|l| l["type"] == "tool.started" && l["name"] == "core_memory_append"));
    assert!(lines.iter().any(|l| l["type"] == "tool.result"));
}

#[test]
fn failed_turn_has_its_own_exit_code_and_shows_in_history() {
    let env = script_env();
    let r = env.run(&["send", "BOOM now"]);
    snap!("send_failed", env.snap(&r));
    assert_eq!(r.code, 3);
}

#[test]
fn sessions_history_show_export() {
    let env = script_env();
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    assert_eq!(env.run(&["send", "I like tea"]).code, 0);
    snap!(
        "sessions_new",
        env.snap(&env.run(&["sessions", "new", "side"]))
    );
    assert_eq!(env.run(&["send", "in side"]).code, 0);
    snap!("sessions_list", env.snap(&env.run(&["sessions"])));
    snap!(
        "sessions_switch",
        env.snap(&env.run(&["sessions", "switch", "main"]))
    );
    snap!(
        "sessions_switch_unknown",
        env.snap(&env.run(&["sessions", "switch", "nope"]))
    );
    snap!("history", env.snap(&env.run(&["history"])));
    snap!("history_all", env.snap(&env.run(&["history", "--all"])));
    snap!(
        "history_limit",
        env.snap(&env.run(&["history", "--limit", "1"]))
    );
    let json = env.run(&["history", "--json"]);
    for line in json.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        for key in [
            "turn",
            "session",
            "agent",
            "state",
            "request",
            "output",
            "error",
            "started_at",
            "ended_at",
            "usage",
        ] {
            assert!(v.get(key).is_some(), "{key} in {line}");
        }
    }
    let id = serde_json::from_str::<serde_json::Value>(json.stdout.lines().nth(1).expect("2nd"))
        .expect("json")["turn"]
        .as_str()
        .expect("id")
        .to_owned();
    snap!("show", env.snap(&env.run(&["show", &id[..6]])));
    let show_json = env.run(&["show", &id, "--json"]);
    assert_eq!(show_json.code, 0);
    snap!("export_markdown", env.snap(&env.run(&["export"])));
    let exported = env.run(&["export", "--all", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&exported.stdout).expect("export json");
    assert!(doc["export"]["note"]
        .as_str()
        .expect("note")
        .contains("not a backup"));
    assert_eq!(doc["turns"].as_array().expect("turns").len(), 3);
    assert!(doc["turns"][1]["records"]
        .as_array()
        .expect("records")
        .iter()
        .any(|r| r["kind"] == "ToolStarted"));
    let out = env.run(&["export", "-o", "t.md"]);
    assert_eq!(out.code, 0);
    assert!(std::fs::read_to_string(env.work.join("t.md"))
        .expect("file")
        .contains("It is not a backup"));
}

#[test]
fn send_against_a_loopback_ollama_server() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["Hi", " there"])),
        Reply::ndjson(&ollama_stream(&["Again"])),
    ]);
    let env = ollama_env(&server);
    let r = env.run_stdin(&["send", "explain"], "some piped text");
    snap!("ollama_send", env.snap(&r));
    assert_eq!(env.run(&["send", "more"]).code, 0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/api/chat");
    let body = reqs[1].json();
    let msgs = body["messages"].as_array().expect("messages");
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[0]["content"], "Be brief.");
    assert!(msgs[1]["content"]
        .as_str()
        .expect("c")
        .contains("some piped text"));
    assert_eq!(msgs[2]["content"], "Hi there");
    assert_eq!(msgs[3]["content"], "more");
    snap!("ollama_history", env.snap(&env.run(&["history"])));
}

fn slow_server(pieces: usize, pause_ms: u64) -> FakeServer {
    let words: Vec<String> = (0..pieces).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    FakeServer::with([Reply::ndjson(&ollama_stream(&refs)).paced(Duration::from_millis(pause_ms))])
}

#[test]
fn stop_from_a_second_process_keeps_the_partial_output() {
    let server = slow_server(100, 100);
    let env = ollama_env(&server);
    let (mut child, turn, _stderr) = spawn_send(&env, &["send", "count slowly"]);
    let mut stdout = child.stdout.take().expect("stdout");
    let mut printed = crate::common::env::read_until(&mut stdout, "w1 ");
    let stop = env.run(&["stop", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    std::io::Read::read_to_string(&mut stdout, &mut printed).expect("rest of stdout");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4), "stopped exit code");
    let h = env.run(&["history", "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("turn")).expect("json");
    assert_eq!(v["state"], "stopped");
    let partial = v["output"].as_str().expect("output");
    assert!(partial.starts_with("w0 "), "{partial}");
    assert!(!partial.contains("w99"), "stopped before the end");
    assert_eq!(printed.trim_end(), partial.trim_end());
    // A stop of the same turn now is rejected with its state.
    let again = env.run(&["stop", &turn]);
    assert_eq!(again.code, 6);
    assert!(
        again
            .stderr
            .contains(&format!("turn {turn} already stopped")),
        "{}",
        again.stderr
    );
}

#[test]
fn stop_of_a_completed_or_unknown_turn_is_rejected() {
    let env = script_env();
    let r = env.run(&["send", "--json", "hi"]);
    let v: serde_json::Value =
        serde_json::from_str(r.stdout.lines().next().expect("line")).expect("json");
    let turn = v["turn"].as_str().expect("turn").to_owned();
    let done = env.run(&["stop", &turn[..8]]);
    snap!("stop_completed", env.snap(&done));
    assert_eq!(done.code, 6);
    snap!("stop_unknown", env.snap(&env.run(&["stop", "0123abcd"])));
    snap!("stop_bad_id", env.snap(&env.run(&["stop", "xy"])));
}

#[test]
fn stopping_an_old_turn_leaves_the_newer_running() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["first"])),
        Reply::ndjson(&ollama_stream(&["a ", "b ", "c ", "d ", "e ", "f "]))
            .paced(Duration::from_millis(150)),
    ]);
    let env = ollama_env(&server);
    let first = env.run(&["send", "--json", "one"]);
    let v: serde_json::Value =
        serde_json::from_str(first.stdout.lines().next().expect("l")).expect("json");
    let old = v["turn"].as_str().expect("turn").to_owned();
    let (child, newer, _e) = spawn_send(&env, &["send", "two"]);
    let r = env.run(&["stop", &old]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0), "the newer turn completed");
    let show = env.run(&["show", &newer, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&show.stdout).expect("json");
    assert_eq!(v["state"], "completed");
    assert_eq!(v["output"], "a b c d e f ");
}

#[test]
fn sigkill_mid_stream_becomes_interrupted_and_the_session_goes_on() {
    let server = slow_server(100, 100);
    server.push(Reply::ndjson(&ollama_stream(&["after"])));
    let env = ollama_env(&server);
    let (mut child, turn, _e) = spawn_send(&env, &["send", "long"]);
    let mut stdout = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut stdout, "w0 ");
    // The running turn's session is marked active: the orphan sweep looks there only.
    let active = env.repo().join("run/active");
    let marks = || -> Vec<String> {
        std::fs::read_dir(&active).map_or(Vec::new(), |d| {
            d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
    };
    assert_eq!(marks(), vec!["main.lock".to_string()]);
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    // Without marks (a repository last used by a build before them) every lock is looked at:
    // the sweep at open (here of `sessions`, which projects no turn) finds the orphan.
    std::fs::remove_dir_all(&active).expect("rm run/active");
    assert_eq!(env.run(&["sessions"]).code, 0);
    let dump = env.run(&["util", "ledger-dump"]);
    assert_eq!(dump.stdout.matches("TurnEnded").count(), 1, "swept at open");
    let h = env.run(&["history", "--json"]);
    // A mark whose lock has no note (its owner died between the two): removed, no turn.
    std::fs::create_dir_all(&active).expect("mkdir");
    std::fs::write(active.join("other.lock"), "").expect("mark");
    std::fs::write(env.repo().join("run/sessions/other.lock"), "").expect("lock");
    assert_eq!(env.run(&["sessions"]).code, 0);
    assert!(marks().is_empty(), "{:?}", marks());
    let v: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("turn")).expect("json");
    assert_eq!(v["turn"], turn);
    assert_eq!(v["state"], "interrupted");
    let dump = env.run(&["util", "ledger-dump"]);
    assert_eq!(
        dump.stdout.matches("TurnEnded").count(),
        1,
        "exactly one terminal record"
    );
    // Again: no second terminal record from later opens.
    env.run(&["history"]);
    let dump = env.run(&["util", "ledger-dump"]);
    assert_eq!(dump.stdout.matches("TurnEnded").count(), 1);
    let next = env.run(&["send", "again"]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.stdout, "after\n");
    assert!(
        marks().is_empty(),
        "a finished turn leaves no mark: {:?}",
        marks()
    );
}

#[test]
fn a_second_send_to_a_busy_session_fails_with_the_active_turn() {
    let server = slow_server(40, 100);
    let env = ollama_env(&server);
    let (child, turn, _e) = spawn_send(&env, &["send", "long"]);
    let busy = env.run(&["send", "meanwhile"]);
    assert_eq!(busy.code, 8, "{}", busy.stderr);
    assert!(busy.stderr.contains(&turn), "{}", busy.stderr);
    let sessions = env.run(&["sessions", "--json"]);
    assert!(
        sessions.stdout.contains(&turn),
        "active turn listed: {}",
        sessions.stdout
    );
    assert_eq!(env.run(&["stop", &turn]).code, 0);
    child.wait_with_output().expect("wait");
}

#[test]
fn retry_links_the_new_turn_to_the_old() {
    let env = script_env();
    let r = env.run(&["send", "--json", "hi"]);
    let v: serde_json::Value =
        serde_json::from_str(r.stdout.lines().next().expect("l")).expect("json");
    let old = v["turn"].as_str().expect("turn").to_owned();
    let retry = env.run(&["retry", &old]);
    assert_eq!(retry.code, 0, "{}", retry.stderr);
    snap!("retry", env.snap(&retry));
    snap!("fsck_clean", env.snap(&env.run(&["fsck"])));
    snap!("fsck_clean_json", env.snap(&env.run(&["fsck", "--json"])));
    let h = env.run(&["history", "--json"]);
    let last: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("l")).expect("json");
    assert_eq!(last["retry_of"], old.as_str());
    assert_eq!(last["request"], "hi");
}

#[test]
fn search_is_literal_case_insensitive_and_scoped() {
    let env = script_env();
    assert_eq!(env.run(&["send", "Größe of the ÉTÉ"]).code, 0); // answer: Hello, world!
    assert_eq!(env.run(&["send", "BOOM (x+1)"]).code, 3); // error: model overloaded
    assert_eq!(env.run(&["sessions", "new", "other"]).code, 0);
    assert_eq!(env.run(&["send", "-s", "other", "needle in other"]).code, 0);
    assert_eq!(env.run(&["sessions", "switch", "main"]).code, 0);
    let count = |args: &[&str]| env.run(args).stdout.lines().count();
    assert_eq!(
        count(&["history", "--search", "größe"]),
        1,
        "request, unicode case-insensitive"
    );
    assert_eq!(count(&["history", "--search", "été"]), 1);
    assert_eq!(
        count(&["history", "--search", "HELLO, WORLD"]),
        1,
        "response"
    );
    assert_eq!(count(&["history", "--search", "overloaded"]), 1, "error");
    assert_eq!(
        count(&["history", "--search", "(x+1)"]),
        1,
        "literal, not a regex"
    );
    assert_eq!(count(&["history", "--search", "x+1)."]), 0);
    assert_eq!(
        count(&["history", "--search", "needle"]),
        0,
        "other session not searched"
    );
    assert_eq!(
        count(&["history", "--all", "--search", "NEEDLE"]),
        1,
        "--all searches every session"
    );
    snap!(
        "history_search",
        env.snap(&env.run(&["history", "--all", "--search", "o"]))
    );
    // In colour every match is highlighted, in the text's own case.
    let coloured = |q: &str| {
        env.run(&["--color", "always", "history", "--search", q])
            .stdout
    };
    let out = coloured("été");
    assert!(out.contains("Größe of the \x1b[1;31mÉTÉ\x1b[0m"), "{out:?}");
    let out = coloured("L");
    assert!(
        out.contains("He\x1b[1;31ml\x1b[0m\x1b[1;31ml\x1b[0mo, wor\x1b[1;31ml\x1b[0md!"),
        "{out:?}"
    );
}

#[test]
fn search_results_match_the_full_projection_even_across_small_segments() {
    let mut env = script_env();
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "300");
    for q in [
        "alpha one",
        "beta two",
        "I like tea",
        "delta four",
        "epsilon five",
    ] {
        env.run(&["send", q]);
    }
    assert!(
        std::fs::read_dir(env.repo().join("ledger/v1"))
            .expect("ls")
            .count()
            > 3,
        "turns span segments"
    );
    let all: Vec<serde_json::Value> = env
        .run(&["history", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    for needle in ["TEA", "delta", "Hello", "noted", "core_memory"] {
        let found: Vec<serde_json::Value> = env
            .run(&["history", "--json", "--search", needle])
            .stdout
            .lines()
            .map(|l| {
                // Each hit says where it matched; the rest is the turn as listed.
                let mut v: serde_json::Value = serde_json::from_str(l).expect("json");
                assert!(v["match"]["field"].is_string(), "{v}");
                v.as_object_mut().map(|o| o.remove("match"));
                v
            })
            .collect();
        let lower = needle.to_lowercase();
        let expected: Vec<&serde_json::Value> = all
            .iter()
            .filter(|t| t.to_string().to_lowercase().contains(&lower))
            .collect();
        assert!(!found.is_empty(), "{needle}");
        assert_eq!(found.iter().collect::<Vec<_>>(), expected, "{needle}");
    }
}

#[test]
fn each_session_has_its_own_conversation() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream(&["A1"])),
        Reply::ndjson(&ollama_stream(&["B1"])),
        Reply::ndjson(&ollama_stream(&["A2"])),
        Reply::ndjson(&ollama_stream(&["B2"])),
    ]);
    let env = ollama_env(&server);
    assert_eq!(env.run(&["send", "a one"]).code, 0);
    assert_eq!(env.run(&["send", "-s", "side", "b one"]).code, 0);
    assert_eq!(env.run(&["send", "a two"]).code, 0);
    assert_eq!(env.run(&["send", "-s", "side", "b two"]).code, 0);
    let convo = |i: usize| -> Vec<String> {
        server.requests()[i].json()["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| m["content"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(convo(2), ["a one", "A1", "a two"]);
    assert_eq!(convo(3), ["b one", "B1", "b two"]);
}

/// `show` and `retry` decode only the turns whose id starts with the given prefix; a prefix
/// that several turns share must still be reported as ambiguous, and a longer one resolve.
#[test]
fn show_and_retry_resolve_prefixes_among_many_turns() {
    use axocoatl_store::ledger::record::{
        AgentOutput, SessionCreated, TurnBegun, TurnEnded, TurnState, Usage,
    };
    use axocoatl_store::ledger::Record;
    let env = script_env();
    let repo =
        axocoatl_store::Repo::open(&env.repo(), &axocoatl_store::repo::OpenOptions::default())
            .expect("open");
    let mut records = vec![Record::SessionCreated(SessionCreated {
        session: "main".into(),
        at: 1,
    })];
    for (i, turn) in ["abcd000000000001", "abcd000000000002", "ffff000000000003"]
        .iter()
        .enumerate()
    {
        records.push(Record::TurnBegun(TurnBegun {
            turn: (*turn).into(),
            session: "main".into(),
            agent: "bot".into(),
            mode: "single".into(),
            request: format!("request {i}"),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at: 10 + i as i64,
            schema: None,
        }));
        records.push(Record::AgentOutput(AgentOutput {
            turn: (*turn).into(),
            agent: "bot".into(),
            text: format!("answer {i}"),
            at: 11 + i as i64,
        }));
        records.push(Record::TurnEnded(TurnEnded {
            turn: (*turn).into(),
            session: "main".into(),
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at: 12 + i as i64,
        }));
    }
    repo.ledger().append(&records).expect("append");

    let r = env.run(&["show", "abcd"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("abcd000000000001") && r.stderr.contains("abcd000000000002"),
        "{}",
        r.stderr
    );
    let r = env.run(&["retry", "ABCD"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("abcd000000000002"), "{}", r.stderr);

    let r = env.run(&["show", "abcd000000000002"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("request 1") && r.stdout.contains("answer 1"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("request 0"), "{}", r.stdout);
    let r = env.run(&["show", "ffff", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("\"request\":\"request 2\""),
        "{}",
        r.stdout
    );
    let r = env.run(&["show", "0000"]);
    assert_eq!(r.code, 7, "unknown turn: {}", r.stderr);
}
