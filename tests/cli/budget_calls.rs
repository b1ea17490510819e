//! Budgets before every model call, through the real binary against a loopback Ollama
//! server: a consolidation pass, a coordinator's plan and aggregate calls and each
//! worker's calls reserve their input plus the same resolved completion bound as a turn
//! (`sampling.max_tokens`, else 1024 when a budget is set) and send that bound
//! (`num_predict`); a call whose reservation does not fit is never sent.

use serde_json::{json, Value};

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Recorded, Reply};

const CREATED: &str = "2026-01-02T03:04:05Z";

/// An Ollama stream answering `t`, reporting `prompt` and `completion` tokens.
fn answer(t: &str, prompt: u64, completion: u64) -> Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": t}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": prompt, "eval_count": completion});
    Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

fn consolidating(budget: &str) -> (FakeServer, TestEnv) {
    let server = FakeServer::responding(|_| {
        answer(
            r#"{"edits": [{"label": "human", "append": "Likes tea."}]}"#,
            10,
            2,
        )
    });
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n{budget}",
        server.url()
    ));
    env.set_env(
        "AXOCOATL_EMBED_DIR",
        &env.tmp.path().join("no-model").to_string_lossy(),
    );
    let r = env.run(&["memory", "add", "-a", "a", "Ada likes tea with lemon."]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    (server, env)
}

fn consolidate(env: &TestEnv) -> (i32, Value) {
    let r = env.run(&["memory", "consolidate", "-a", "a", "--json"]);
    let pass = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| {
        panic!("{e}: {}{}", r.stdout, r.stderr);
    });
    (r.code, pass)
}

fn show(env: &TestEnv, turn: &str) -> Value {
    let r = env.run(&["show", "--json", turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("show json")
}

/// The input a refusal names: `reservation R = input I (...) + completion bound C`.
fn refused_parts(error: &str) -> (u64, u64) {
    let number_after = |key: &str| -> u64 {
        let rest = &error[error
            .find(key)
            .unwrap_or_else(|| panic!("{key} in {error}"))
            + key.len()..];
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or_else(|_| panic!("a number after {key} in {error}"))
    };
    (number_after("= input "), number_after("completion bound "))
}

#[test]
fn a_consolidation_pass_reserves_and_sends_the_completion_bound_of_a_turn() {
    // No max_tokens: a turn of this agent requests and reserves 1024, and so does the pass.
    let (server, env) = consolidating("    token_budget: {per_call: 8000, per_execution: 20000}\n");
    let (code, pass) = consolidate(&env);
    assert_eq!(code, 0, "{pass}");
    assert_eq!(pass["state"], "completed", "{pass}");
    let body = server.only_request().json();
    assert_eq!(body["options"]["num_predict"], 1024, "{body}");
    let calls = show(&env, pass["turn"].as_str().expect("turn"))["calls"].clone();
    let reserved = calls[0]["reserved_tokens"].as_u64().expect("reserved");
    assert!(reserved > 1024, "input plus the bound: {calls}");

    // With max_tokens, that bound.
    let (server, env) = consolidating(
        "    token_budget: {per_call: 8000, per_execution: 20000}\n    sampling: {max_tokens: 64}\n",
    );
    let (code, pass) = consolidate(&env);
    assert_eq!(code, 0, "{pass}");
    assert_eq!(server.only_request().json()["options"]["num_predict"], 64);
    let calls = show(&env, pass["turn"].as_str().expect("turn"))["calls"].clone();
    assert!(calls[0]["reserved_tokens"].as_u64().expect("reserved") > 64);
    assert!(calls[0]["reserved_tokens"].as_u64().expect("reserved") < 1024);
}

#[test]
fn a_consolidation_pass_whose_input_fits_but_not_its_bound_is_not_sent() {
    // per_call 1000: the pass's input alone fits, its input plus 1024 does not.
    let (server, env) = consolidating("    token_budget: {per_call: 1000, per_execution: 20000}\n");
    let (code, pass) = consolidate(&env);
    assert_eq!(code, 3, "{pass}");
    assert_eq!(pass["state"], "failed", "{pass}");
    assert_eq!(server.request_count(), 0, "nothing reached the server");
    let error = pass["error"].as_str().expect("error");
    assert!(
        error.contains("token budget per_call 1000 exceeded"),
        "{error}"
    );
    let (input, bound) = refused_parts(error);
    assert_eq!(bound, 1024, "{error}");
    assert!(input < 1000, "the input alone would have fit: {error}");
    // The core block is unchanged.
    let core = env.run(&["memory", "core", "show", "human", "-a", "a"]);
    assert_eq!(core.stdout, "\n", "{}", core.stderr);
}

#[test]
fn a_consolidation_pass_over_per_execution_by_the_provider_applies_nothing() {
    // The server reports 5000 tokens for the pass: over per_execution 3000, after the call.
    let server = FakeServer::responding(|_| {
        answer(
            r#"{"edits": [{"label": "human", "append": "Likes tea."}]}"#,
            4990,
            10,
        )
    });
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n    token_budget: {{per_call: 3000, per_execution: 3000}}\n",
        server.url()
    ));
    env.set_env(
        "AXOCOATL_EMBED_DIR",
        &env.tmp.path().join("no-model").to_string_lossy(),
    );
    assert_eq!(
        env.run(&["memory", "add", "-a", "a", "Ada likes tea."])
            .code,
        0
    );
    let (code, pass) = consolidate(&env);
    assert_eq!(code, 3, "{pass}");
    assert_eq!(server.request_count(), 1);
    let error = pass["error"].as_str().expect("error");
    assert!(
        error.contains("5000") && error.contains("per_call 3000"),
        "{error}"
    );
    assert_eq!(pass["edits"], json!([]), "{pass}");
    let core = env.run(&["memory", "core", "show", "human", "-a", "a"]);
    assert_eq!(core.stdout, "\n", "no edit applied: {}", core.stderr);
}

#[test]
fn a_warn_budget_sends_a_consolidation_pass_and_records_the_warning() {
    let (server, env) = consolidating(
        "    token_budget: {per_call: 1000, per_execution: 20000, overflow_policy: warn}\n",
    );
    let (code, pass) = consolidate(&env);
    assert_eq!(code, 0, "{pass}");
    assert_eq!(server.request_count(), 1);
    let shown = env.run(&["show", pass["turn"].as_str().expect("turn")]);
    assert!(
        shown
            .stdout
            .contains("warning: token budget per_call 1000 exceeded"),
        "{}",
        shown.stdout
    );
}

const PLAN: &str = r#"{"subtasks":[{"id":"research","worker":"researcher","task":"find facts","depends_on":[]},{"id":"draft","worker":"writer","task":"write it","depends_on":[]}]}"#;

/// A coordinator `lead` (model `lead-m`) with workers `researcher` (`r-m`) and `writer`
/// (`w-m`); `lead`, `researcher` and `writer` are each given the YAML lines passed. The
/// server answers a plan call with [`PLAN`], a worker with its result (reporting
/// `worker_prompt` prompt tokens) and the aggregate call with a final answer.
fn team(lead: &str, researcher: &str, writer: &str, worker_prompt: u64) -> (FakeServer, TestEnv) {
    let server = FakeServer::responding(move |r: &Recorded| {
        let body = r.json();
        match body["model"].as_str().unwrap_or("") {
            "lead-m" if body["format"] == "json" => answer(PLAN, 10, 2),
            "lead-m" => answer("FINAL", 10, 2),
            "r-m" => answer("R-RESULT", worker_prompt, 2),
            "w-m" => answer("W-RESULT", worker_prompt, 2),
            _ => Reply::json(500, r#"{"error":"unknown model"}"#),
        }
    });
    let env = TestEnv::with_config(&format!(
        "providers:
  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 60}}
agents:
  - id: lead
    provider: llm
    model: lead-m
    role: coordinator
{lead}  - id: researcher
    provider: llm
    model: r-m
    role: worker
{researcher}  - id: writer
    provider: llm
    model: w-m
    role: worker
{writer}workflows:
  - id: crew
    entry_point: lead
    workers: [researcher, writer]
",
        server.url()
    ));
    (server, env)
}

fn requests(server: &FakeServer, model: &str) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(Recorded::json)
        .filter(|b| b["model"] == model)
        .collect()
}

fn last_turn(env: &TestEnv) -> Value {
    let h = env.run(&["history", "--json"]);
    let t: Value = serde_json::from_str(h.stdout.lines().last().expect("a turn")).expect("json");
    show(env, t["turn"].as_str().expect("turn"))
}

#[test]
fn each_worker_reserves_and_sends_its_own_bound_and_one_over_its_budget_is_not_sent() {
    let (server, env) = team(
        "    token_budget: {per_call: 8000, per_execution: 40000}\n",
        "    token_budget: {per_call: 8000, per_execution: 20000}\n    sampling: {max_tokens: 111}\n",
        // The writer's subtask alone (one tool's schema) fits in 600 tokens; with its
        // bound of 1024 it does not.
        "    tools: [read_file]\n    token_budget: {per_call: 600, per_execution: 20000}\n",
        10,
    );
    let r = env.run(&["send", "-a", "lead", "write about tea"]);
    assert_eq!(r.code, 3, "a failed subtask fails the turn: {}", r.stderr);
    let research = requests(&server, "r-m");
    assert_eq!(research.len(), 1);
    assert_eq!(research[0]["options"]["num_predict"], 111);
    assert!(
        requests(&server, "w-m").is_empty(),
        "the writer's call was not sent"
    );
    let plan = requests(&server, "lead-m");
    assert_eq!(plan.len(), 1, "the plan call, and no aggregate");
    assert_eq!(
        plan[0]["options"]["num_predict"], 1024,
        "the coordinator's own bound"
    );
    let t = last_turn(&env);
    let error = t["error"].as_str().expect("error");
    assert!(
        error.contains("subtask draft (writer) failed")
            && error.contains("token budget per_call 600 exceeded"),
        "{error}"
    );
    let (input, bound) = refused_parts(error);
    assert_eq!(bound, 1024, "{error}");
    assert!(input < 600, "{error}");
    // Each call recorded its own reservation: the coordinator's plan and the researcher.
    let reserved: Vec<(String, u64)> = t["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["model"].as_str().unwrap_or("").to_owned(),
                c["reserved_tokens"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert!(
        reserved.iter().any(|(m, r)| m == "lead-m" && *r > 1024)
            && reserved.iter().any(|(m, r)| m == "r-m" && *r > 111),
        "{reserved:?}"
    );
}

#[test]
fn a_coordinators_plan_call_over_its_per_call_is_not_sent() {
    let (server, env) = team(
        "    token_budget: {per_call: 1000, per_execution: 40000}\n",
        "",
        "",
        10,
    );
    let r = env.run(&["send", "-a", "lead", "write about tea"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(
        server.request_count(),
        0,
        "no plan, no worker, no aggregate"
    );
    let error = last_turn(&env)["error"].as_str().expect("error").to_owned();
    assert!(
        error.contains("token budget per_call 1000 exceeded"),
        "{error}"
    );
    let (input, bound) = refused_parts(&error);
    assert_eq!(bound, 1024, "{error}");
    assert!(input < 1000, "{error}");
}

#[test]
fn a_coordinators_per_execution_counts_its_own_calls_not_its_workers() {
    // Each worker reports 5000 prompt tokens; the coordinator's own plan and aggregate
    // calls fit in its per_execution of 4000, which its workers' usage alone would pass.
    let (server, env) = team(
        "    token_budget: {per_call: 3000, per_execution: 4000}\n",
        "",
        "",
        5000,
    );
    let r = env.run(&["send", "-a", "lead", "write about tea"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout, "FINAL\n");
    let lead = requests(&server, "lead-m");
    assert_eq!(lead.len(), 2, "plan and aggregate");
    assert!(lead.iter().all(|b| b["options"]["num_predict"] == 1024));
    // The turn's usage is everyone's.
    let t = last_turn(&env);
    assert_eq!(
        t["usage"]["prompt_tokens"],
        10 + 5000 + 5000 + 10,
        "{}",
        t["usage"]
    );
}
