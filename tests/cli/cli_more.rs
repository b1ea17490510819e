//! More end-to-end checks through the real binary: validate's output, send through the
//! OpenAI-compatible and local adapters, Ctrl-C, unknown record kinds.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};

#[test]
fn validate_output_and_exit_codes() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    snap!("validate_ok", env.snap(&env.run(&["validate"])));
    env.write(
        "bad.yaml",
        "agents:\n  - id: a\n    provider: ollama\n    token_budget: {per_call: 100, per_execution: 10}\n    sampling: {temprature: 1}\n",
    );
    let bad = env.run(&["validate", "bad.yaml"]);
    assert_eq!(bad.code, 1);
    snap!("validate_bad", env.snap(&bad));
    let json = env.run(&["validate", "bad.yaml", "--json"]);
    assert_eq!(json.code, 1);
    let lines: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["type"] == "diagnostic" && l["line"].is_number()));
    assert_eq!(lines.last().expect("summary")["valid"], false);
    snap!(
        "validate_missing",
        env.snap(&env.run(&["validate", "nope.yaml"]))
    );
}

fn sse(pieces: &[&str], usage: bool) -> String {
    let mut body = String::new();
    for p in pieces {
        body.push_str(&format!(
            "data: {}\n\n",
            serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]})
        ));
    }
    body.push_str(&format!(
        "data: {}\n\n",
        serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    if usage {
        body.push_str(&format!(
            "data: {}\n\n",
            serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}})
        ));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

#[test]
fn send_through_the_openai_compatible_adapter() {
    let server = FakeServer::with([
        Reply::sse(&sse(&["Hel", "lo"], true)),
        Reply::sse(&sse(&["again"], false)),
    ]);
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  vllm: {{kind: openai, base_url: \"{}/v1\", api_key_env: TEST_KEY}}\nagents:\n  - id: a\n    provider: vllm\n    model: m\n",
        server.url()
    ));
    env.set_env("TEST_KEY", "sk-secret-123");
    let r = env.run(&["send", "--json", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let last: serde_json::Value =
        serde_json::from_str(r.stdout.lines().last().expect("l")).expect("json");
    assert_eq!(last["output"], "Hello");
    assert_eq!(last["usage"]["total_tokens"], 11);
    assert_eq!(env.run(&["send", "more"]).code, 0);
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some("Bearer sk-secret-123")
    );
    let body = reqs[1].json();
    assert_eq!(body["messages"][1]["content"], "Hello");
    let h = env.run(&["history", "--json"]);
    assert!(
        h.stdout.contains("\"complete\":false"),
        "usage unknown on the second call: {}",
        h.stdout
    );
    // The key is never stored.
    let mut leaked = Vec::new();
    walk(&env.repo(), &mut |p| {
        if std::fs::read(p)
            .map(|b| String::from_utf8_lossy(&b).contains("sk-secret-123"))
            .unwrap_or(false)
        {
            leaked.push(p.display().to_string());
        }
    });
    assert!(leaked.is_empty(), "{leaked:?}");
}

fn walk(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path)) {
    for e in std::fs::read_dir(dir).expect("ls").flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}

#[test]
fn send_through_the_local_model_with_the_starter_config() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    let mut cmd = env.cmd(&["send", "--json", "Say hello."]);
    // The test environment has a clean HOME; point at the fetched model.
    let model = axocoatl::config::local_model_path(&|k| std::env::var(k).ok()).expect("HOME");
    assert!(
        model.is_file(),
        "{} missing: run scripts/fetch-model.sh",
        model.display()
    );
    cmd.env("AXOCOATL_MODEL", &model);
    let out = cmd.output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("l")).expect("json");
    assert_eq!(last["state"], "completed");
    assert!(!last["output"].as_str().expect("o").trim().is_empty());
    assert!(last["usage"]["prompt_tokens"].as_u64().expect("p") > 0);
    assert!(last["usage"]["completion_tokens"].as_u64().expect("c") > 0);

    // The model file runs as it is: no ready-to-run copy is made in the user's cache.
    let ready = env.home.join(".cache/axocoatl/models/ready");
    assert!(!ready.exists(), "no ready copy is made");
    let answer = |args: &[&str]| {
        let out = env
            .cmd(args)
            .env("AXOCOATL_MODEL", &model)
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let greedy = [
        "send",
        "-n",
        "-o",
        "temperature=0",
        "-o",
        "max_tokens=8",
        "Name a fruit.",
    ];
    assert_eq!(answer(&greedy), answer(&greedy));
    assert!(!ready.exists(), "no ready copy is made");
}

#[test]
fn ctrl_c_stops_the_turn_of_send() {
    let line = |w: &str| {
        serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": w}, "done": false}).to_string()
    };
    let body: String = (0..100).map(|i| line(&format!("w{i} ")) + "\n").collect();
    let server = FakeServer::with([Reply::ndjson(&body).paced(Duration::from_millis(100))]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n",
        server.url()
    ));
    let mut child = env
        .cmd(&["send", "long"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("turn line");
    // Mid-stream: some output has arrived.
    let mut out = child.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut out, "w0 ");
    // SAFETY: signalling our own child.
    #[expect(
        unsafe_code,
        reason = "sending SIGINT to a child: libc has no safe wrapper"
    )]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4), "stopped");
    let h = env.run(&["history", "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("l")).expect("json");
    assert_eq!(v["state"], "stopped");
    assert!(v["output"].as_str().expect("o").starts_with("w0 "));
}

#[test]
fn fsck_checks_core_memory_files() {
    let env = TestEnv::with_config(
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n",
    );
    env.write(
        "r.yaml",
        "replies:\n  - tool_calls: [{name: core_memory_set, arguments: {label: human, value: likes tea}}]\n  - text: ok\n",
    );
    assert_eq!(env.run(&["send", "remember"]).code, 0);
    let clean = env.run(&["fsck", "--json"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    // The core memory file, the daily log that recorded the edit and the semantic records
    // that retained the turn's exchange.
    assert!(
        clean.stdout.contains("\"memory_files\":3"),
        "{}",
        clean.stdout
    );
    let file = env.repo().join("memory/core/v1/main%3aa.json");
    assert!(std::fs::read_to_string(&file)
        .expect("core memory")
        .contains("likes tea"));
    std::fs::write(&file, "{not json").expect("damage");
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9);
    assert!(
        r.stdout
            .contains("memory/core/v1/main%3aa.json: bad-memory-file"),
        "{}",
        r.stdout
    );
}

#[test]
fn rewind_edit_sends_the_revised_request() {
    let env = TestEnv::with_config(
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n",
    );
    env.write(
        "r.yaml",
        "replies:\n  - text: one\n  - text: two\n  - match: revised\n    text: three\n",
    );
    assert_eq!(env.run(&["send", "first"]).code, 0);
    assert_eq!(env.run(&["send", "second"]).code, 0);
    let h = env.run(&["history", "--json"]);
    let second: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("l")).expect("json");
    let id = second["turn"].as_str().expect("id").to_owned();
    let mut cmd = env.cmd(&["rewind", &id, "--edit", "--yes"]);
    cmd.env("EDITOR", "sed -i s/second/revised-second/");
    let out = cmd.output().expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "three\n");
    let h = env.run(&["history", "--json"]);
    let last: serde_json::Value =
        serde_json::from_str(h.stdout.lines().last().expect("l")).expect("json");
    assert_eq!(last["request"], "revised-second");
    assert_eq!(h.stdout.matches("\"superseded\":true").count(), 1);
}
