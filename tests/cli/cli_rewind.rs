//! Checkpoints, recovery and rewind through the real binary.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};

fn done_line(n: usize) -> String {
    serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
        "prompt_eval_count": 10, "eval_count": n})
    .to_string()
}

fn text(answer: &str) -> Reply {
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": answer}, "done": false});
    Reply::ndjson(&format!("{line}\n{}\n", done_line(1)))
}

fn tool_call(label: &str, content: &str) -> Reply {
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "core_memory_append", "arguments": {"label": label, "content": content}}}
        ]}, "done": false});
    Reply::ndjson(&format!("{line}\n{}\n", done_line(1)))
}

fn env_for(server: &FakeServer, extra: &str) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n{extra}",
        server.url()
    ))
}

fn checkpoints(env: &TestEnv, session: &str) -> Vec<serde_json::Value> {
    let r = env.run(&["util", "checkpoints", session, "helper"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn ck_dir(env: &TestEnv) -> std::path::PathBuf {
    env.repo().join("checkpoints/v1/main%3ahelper")
}

fn turn_ids(env: &TestEnv) -> Vec<String> {
    env.run(&["history", "--json"])
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["turn"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect()
}

/// The (role, content) pairs of a recorded request, system prompt excluded.
fn conversation(req: &crate::common::fake_http::Recorded) -> Vec<(String, String)> {
    req.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_checkpoint_is_written_after_each_response_owner_only_and_rotated() {
    let server = FakeServer::with([
        tool_call("human", "tea"),
        text("ok"),
        text("two"),
        text("three"),
    ]);
    let env = env_for(&server, "checkpoint: {keep: 2}\n");
    assert_eq!(env.run(&["send", "one"]).code, 0);
    let cks = checkpoints(&env, "main");
    assert_eq!(cks.len(), 2, "keep 2: {cks:?}");
    assert_eq!(cks[0]["in_flight"], false, "the final snapshot of the turn");
    assert_eq!(
        cks[0]["roles"],
        serde_json::json!(["user", "assistant", "tool", "assistant"])
    );
    assert_eq!(
        cks[1]["in_flight"], true,
        "written after the second response, before the end"
    );
    for e in std::fs::read_dir(ck_dir(&env)).expect("ls") {
        let mode = e.expect("e").metadata().expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_eq!(env.run(&["send", "two"]).code, 0);
    assert_eq!(env.run(&["send", "three"]).code, 0);
    assert_eq!(std::fs::read_dir(ck_dir(&env)).expect("ls").count(), 2);
}

#[test]
fn a_corrupt_newest_checkpoint_falls_back_to_the_previous_one() {
    // Turn 1 has a tool round: only a checkpoint holds its tool messages (the ledger rebuild
    // keeps request and answer), so seeing them in turn 3's request proves the fallback.
    let server = FakeServer::with([
        tool_call("human", "tea"),
        text("noted"),
        text("second"),
        text("third"),
    ]);
    let env = env_for(&server, "checkpoint: {keep: 3}\n");
    assert_eq!(env.run(&["send", "first"]).code, 0);
    assert_eq!(env.run(&["send", "second?"]).code, 0);
    let cks = checkpoints(&env, "main");
    let newest = ck_dir(&env).join(cks[0]["file"].as_str().expect("file"));
    let mut bytes = std::fs::read(&newest).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    std::fs::write(&newest, bytes).expect("write");
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 9);
    assert!(fsck.stdout.contains("bad-checkpoint"), "{}", fsck.stdout);
    assert_eq!(env.run(&["send", "third?"]).code, 0);
    let reqs = server.requests();
    let roles: Vec<String> = conversation(&reqs[3]).into_iter().map(|(r, _)| r).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
}

#[test]
fn usage_completeness_is_sticky_once_lost() {
    let script =
        "replies:\n  - text: a\n  - text: b\n    usage: {prompt_tokens: 5, completion_tokens: 1}\n";
    let env = TestEnv::with_config("providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: helper\n    provider: s\n");
    env.write("r.yaml", script);
    assert_eq!(env.run(&["send", "x"]).code, 0);
    assert_eq!(env.run(&["send", "y"]).code, 0);
    let cks = checkpoints(&env, "main");
    assert_eq!(cks[0]["usage"]["complete"], false);
    assert_eq!(cks[0]["usage"]["prompt_tokens"], 5);
}

fn four_turns() -> (FakeServer, TestEnv, Vec<String>) {
    let server = FakeServer::with([
        text("a1"),
        text("a2"),
        text("a3"),
        text("a4"),
        text("a5"),
        text("a6"),
    ]);
    let env = env_for(&server, "");
    for q in ["q1", "q2", "q3", "q4"] {
        assert_eq!(env.run(&["send", q]).code, 0);
    }
    let ids = turn_ids(&env);
    (server, env, ids)
}

#[test]
fn rewind_to_turn_two_of_four() {
    let (server, env, ids) = four_turns();
    let r = env.run(&["rewind", &ids[1][..8], "--yes"]);
    snap!("rewind", env.snap(&r));
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout, "q2\n", "the prefill");
    let h = env.run(&["history"]);
    snap!("history_after_rewind", env.snap(&h));
    assert_eq!(h.stdout.matches("(superseded)").count(), 3);
    let cks = checkpoints(&env, "main");
    assert_eq!(
        cks[0]["head_turn"],
        ids[0].as_str(),
        "checkpoint prepared from the retained transcript"
    );
    assert_eq!(env.run(&["send", "q2 revised"]).code, 0);
    let reqs = server.requests();
    assert_eq!(
        conversation(&reqs[4]),
        [("user", "q1"), ("assistant", "a1"), ("user", "q2 revised")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let export = env.run(&["export"]);
    for q in ["q2", "q3", "q4"] {
        assert!(
            export.stdout.contains(&format!("\n{q}\n")),
            "export keeps {q}"
        );
    }
    assert!(export.stdout.contains("superseded by a rewind"));
    let search = env.run(&["history", "--search", "q3"]);
    assert!(search.stdout.contains("(superseded)"), "{}", search.stdout);
    let json = env.run(&["rewind", &ids[0], "--yes", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(v["prefill"], "q1");
    assert_eq!(
        v["superseded"].as_array().expect("a").len(),
        2,
        "turn 1 and the revised turn"
    );
}

#[test]
fn rewind_needs_confirmation_and_refuses_busy_and_multi_agent_sessions() {
    let (_server, env, ids) = four_turns();
    let r = env.run(&["rewind", &ids[2]]);
    assert_eq!(r.code, 11, "no terminal to confirm on: {}", r.stderr);
    assert!(r.stderr.contains("--yes"));
    // Two agents in one session.
    let env2 = TestEnv::with_config(
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n  - id: b\n    provider: s\n",
    );
    env2.write("r.yaml", "replies:\n  - text: x\n  - text: y\n");
    assert_eq!(env2.run(&["send", "-a", "a", "one"]).code, 0);
    assert_eq!(env2.run(&["send", "-a", "b", "two"]).code, 0);
    let id = turn_ids(&env2)[0].clone();
    let r = env2.run(&["rewind", &id, "--yes"]);
    snap!("rewind_multi_agent", env2.snap(&r));
    assert_eq!(r.code, 11);
}

#[test]
fn rewind_is_refused_while_a_turn_is_active() {
    let server = FakeServer::with([text("a1")]);
    let env = env_for(&server, "");
    assert_eq!(env.run(&["send", "q1"]).code, 0);
    let first = turn_ids(&env)[0].clone();
    let slow_line = |w: &str| {
        serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": w}, "done": false}).to_string()
    };
    let body: String = (0..30)
        .map(|i| slow_line(&format!("w{i} ")) + "\n")
        .collect::<String>()
        + &done_line(30)
        + "\n";
    server.push(Reply::ndjson(&body).paced(Duration::from_millis(100)));
    let mut child = env
        .cmd(&["send", "long"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // `turn <id>` on stderr: the turn has begun and holds the session.
    let mut err = child.stderr.take().expect("stderr");
    crate::common::env::read_until(&mut err, "\n");
    let r = env.run(&["rewind", &first, "--yes"]);
    assert_eq!(r.code, 8, "busy, as for send: {}", r.stderr);
    assert!(r.stderr.contains("is active"), "{}", r.stderr);
    child.kill().expect("kill");
    child.wait().expect("wait");
}

#[test]
fn sigkill_between_the_boundary_and_the_checkpoint_is_repaired_by_the_next_command() {
    let (server, mut env, ids) = four_turns();
    env.set_env(
        "AXOCOATL_FAILPOINTS",
        "rewind.boundary.appended=sleep(20000)",
    );
    let mut child = env
        .cmd(&["rewind", &ids[1], "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    crate::common::env::wait_until("the rewind boundary", || {
        env.run(&["util", "ledger-dump"])
            .stdout
            .contains("RewindBoundary")
    });
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    // The checkpoint still reflects turn 4 until a command opens the repository.
    assert_eq!(checkpoints(&env, "main")[0]["head_turn"], ids[3].as_str());
    let h = env.run(&["history"]);
    assert_eq!(h.code, 0);
    assert_eq!(
        checkpoints(&env, "main")[0]["head_turn"],
        ids[0].as_str(),
        "repaired from the ledger"
    );
    assert_eq!(env.run(&["send", "again"]).code, 0);
    let reqs = server.requests();
    assert_eq!(
        conversation(&reqs[4]),
        [("user", "q1"), ("assistant", "a1"), ("user", "again")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}
