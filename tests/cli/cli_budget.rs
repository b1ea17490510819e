//! Token budgets, sampling and usage through the real binary, against a loopback server
//! that counts requests.

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};

fn line(content: &str, tool: Option<&str>) -> String {
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if let Some(label) = tool {
        message["tool_calls"] = serde_json::json!([{"function": {"name": "core_memory_append", "arguments": {"label": label, "content": "x"}}}]);
    }
    serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": message, "done": false}).to_string()
}

fn reply(content: &str, tool: Option<&str>, prompt: u64, completion: u64) -> Reply {
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
        "prompt_eval_count": prompt, "eval_count": completion});
    Reply::ndjson(&format!("{}\n{done}\n", line(content, tool)))
}

fn env_with(server: &FakeServer, agent_extra: &str) -> TestEnv {
    TestEnv::with_config(&format!(
        // The memory tools only: the figures below count their schemas.
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n    tools: [core_memory_append, core_memory_replace, core_memory_set]\n{agent_extra}",
        server.url()
    ))
}

fn last_turn(env: &TestEnv) -> serde_json::Value {
    let h = env.run(&["history", "--json"]);
    serde_json::from_str(h.stdout.lines().last().expect("a turn")).expect("json")
}

#[test]
fn a_per_call_budget_too_small_for_the_prompt_sends_nothing() {
    let server = FakeServer::with([reply("never", None, 1, 1)]);
    let env = env_with(
        &server,
        "    token_budget: {per_call: 50, per_execution: 1000}\n    sampling: {max_tokens: 10}\n",
    );
    let r = env.run(&["send", &"a long request ".repeat(40)]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(server.request_count(), 0, "no request reached the server");
    let t = last_turn(&env);
    assert_eq!(t["state"], "failed");
    let err = t["error"].as_str().expect("error");
    assert!(err.contains("per_call 50"), "{err}");
    assert!(
        err.contains("completion bound 10"),
        "names the parts: {err}"
    );
    snap!("per_call_refused", env.snap(&r));
}

#[test]
fn per_execution_exhausted_after_two_calls_of_a_tool_loop() {
    let server = FakeServer::with([
        reply("", Some("human"), 100, 20),
        reply("", Some("persona"), 100, 20),
        reply("final", None, 100, 20),
    ]);
    // Each call reserves its input (about 450 estimated tokens, most of them tool schemas)
    // plus max_tokens 60; two calls record 240 tokens, so the third reservation no longer
    // fits in 760.
    let env = env_with(
        &server,
        "    token_budget: {per_call: 700, per_execution: 760}\n    sampling: {max_tokens: 60}\n",
    );
    let r = env.run(&["send", "go"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(server.request_count(), 2, "the third call was not sent");
    let t = last_turn(&env);
    assert!(
        t["error"]
            .as_str()
            .expect("e")
            .contains("per_execution 760"),
        "{}",
        t["error"]
    );
    assert_eq!(t["usage"]["total_tokens"], 240);
}

#[test]
fn warn_sends_anyway_and_records_a_warning() {
    let server = FakeServer::with([reply("sent", None, 5, 1)]);
    let env = env_with(&server, "    token_budget: {per_call: 20, per_execution: 1000, overflow_policy: warn}\n    sampling: {max_tokens: 10}\n");
    let r = env.run(&["send", &"words and more words ".repeat(10)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(server.request_count(), 1);
    assert!(
        r.stderr
            .contains("warning: token budget per_call 20 exceeded"),
        "{}",
        r.stderr
    );
    let t = last_turn(&env);
    assert!(
        t["warnings"][0]
            .as_str()
            .expect("w")
            .contains("per_call 20"),
        "{t}"
    );
    let show = env.run(&["show", t["turn"].as_str().expect("id")]);
    assert!(
        show.stdout.contains("warning: token budget"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_provider_reported_overrun_stops_the_turn_after_that_response() {
    let server = FakeServer::with([
        reply("", Some("human"), 900, 50),
        reply("never", None, 1, 1),
    ]);
    let env = env_with(
        &server,
        "    token_budget: {per_call: 500, per_execution: 800}\n    sampling: {max_tokens: 20}\n",
    );
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(
        server.request_count(),
        1,
        "nothing after the overrunning response"
    );
    let t = last_turn(&env);
    let err = t["error"].as_str().expect("e");
    assert!(
        err.contains("950") && err.contains("500"),
        "both numbers: {err}"
    );
    assert!(
        t["tools"].as_array().expect("tools").is_empty(),
        "the tool call was not run"
    );
}

#[test]
fn sampling_reaches_the_request_body() {
    let server = FakeServer::with([reply("{}", None, 1, 1)]);
    let env = env_with(
        &server,
        "    sampling: {temperature: 0, top_p: 0.5, max_tokens: 77, response_format: json}\n",
    );
    assert_eq!(env.run(&["send", "json please"]).code, 0);
    let body = server.only_request().json();
    assert_eq!(body["options"]["temperature"], 0.0);
    assert_eq!(body["options"]["top_p"], 0.5);
    assert_eq!(body["options"]["num_predict"], 77);
    assert_eq!(body["format"], "json");
}

#[test]
fn usage_per_agent_session_and_day() {
    let script = "replies:\n  - text: a\n    usage: {prompt_tokens: 10, completion_tokens: 2}\n  - text: b\n  - text: c\n    usage: {prompt_tokens: 7, completion_tokens: 3}\n";
    let env = TestEnv::with_config("providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: one\n    provider: s\n  - id: two\n    provider: s\n");
    env.write("r.yaml", script);
    assert_eq!(env.run(&["send", "-a", "one", "x"]).code, 0);
    assert_eq!(env.run(&["send", "-a", "one", "-s", "side", "y"]).code, 0);
    assert_eq!(env.run(&["send", "-a", "two", "z"]).code, 0);
    snap!("usage_agent", env.snap(&env.run(&["usage"])));
    snap!(
        "usage_all_session",
        env.snap(&env.run(&["usage", "--all", "--by", "session"]))
    );
    snap!(
        "usage_day_json",
        env.snap(&env.run(&["usage", "--all", "--by", "day", "--json"]))
    );
}
