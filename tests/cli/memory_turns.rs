//! Memory inside turns, through the real binary against a loopback Ollama server: passive
//! recall (what the model sees, per agent scope, across processes, on the neural path and
//! on the lexical fallback), the daily log of a turn, `max_session_messages`, rewind, and
//! consolidation. No network: the server is loopback and the embedder runs in-process.

use serde_json::{json, Value};

use crate::common::env::TestEnv;
use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_call, ollama_text};

/// The directory of the embedding model, where `scripts/fetch-model.sh` puts it (the tests
/// run the binary with a clean environment, so it is passed explicitly).
fn model_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("AXOCOATL_EMBED_DIR") {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache")
        });
    let dir = cache.join("axocoatl/models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.onnx").is_file(),
        "{}: run scripts/fetch-model.sh first",
        dir.display()
    );
    dir
}

/// Two agents with their own memory on one server; `extra` is added to each agent.
fn env_for(server: &FakeServer, extra: &str, neural: bool) -> TestEnv {
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n{extra}  - id: b\n    provider: llm\n    model: m\n{extra}",
        server.url()
    ));
    let dir = if neural {
        model_dir()
    } else {
        env.tmp.path().join("no-model")
    };
    env.set_env("AXOCOATL_EMBED_DIR", &dir.to_string_lossy());
    env
}

fn system_prompt(request: &Value) -> String {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// (role, content) of a request's messages, the system prompt left out.
fn conversation(request: &Value) -> Vec<(String, String)> {
    request["messages"]
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

fn send(env: &TestEnv, args: &[&str]) -> crate::common::env::Run {
    let mut all = vec!["send", "--no-stdin"];
    all.extend_from_slice(args);
    let r = env.run(&all);
    assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
    r
}

/// One memory only: the live conversation holds just the current turn, so whatever the
/// model sees of an earlier turn came from recall.
const ONE_TURN: &str = "    memory: {max_session_messages: 1}\n";

fn fact_is_recalled_later_in_its_scope_only(neural: bool) -> Vec<String> {
    let server = FakeServer::start();
    for _ in 0..4 {
        server.push(ollama_text("Noted."));
    }
    let env = env_for(&server, ONE_TURN, neural);
    let first = send(
        &env,
        &["-a", "a", "My cat is called Tomasz and he loves tuna."],
    );
    // The first turn had nothing to recall: no section at all.
    assert!(!system_prompt(&server.requests()[0].json()).contains("<recalled_memory>"));
    // A later process, same agent: the fact is injected in the delimited section.
    let second = send(&env, &["-a", "a", "What is my cat called?"]);
    let seen = system_prompt(&server.requests()[1].json());
    assert_eq!(
        conversation(&server.requests()[1].json()),
        [("user".to_owned(), "What is my cat called?".to_owned())],
        "only recall can bring the earlier turn"
    );
    let section = seen
        .split("<recalled_memory>")
        .nth(1)
        .and_then(|s| s.split("</recalled_memory>").next())
        .unwrap_or_else(|| panic!("no recalled memory section in {seen:?}"));
    assert!(section.contains("My cat is called Tomasz"), "{section}");
    // Another agent's scope has no such memory.
    send(&env, &["-a", "b", "What is my cat called?"]);
    assert!(!system_prompt(&server.requests()[2].json()).contains("Tomasz"));
    // Another session is another scope too.
    send(&env, &["-a", "a", "-s", "other", "What is my cat called?"]);
    assert!(!system_prompt(&server.requests()[3].json()).contains("Tomasz"));
    let status = env.run(&["memory", "status", "-a", "a", "--json"]);
    let status: Value = serde_json::from_str(status.stdout.trim()).expect("status json");
    assert_eq!(
        status["recall_path"],
        if neural { "neural" } else { "lexical" }
    );
    vec![first.stderr, second.stderr]
}

#[test]
fn a_fact_told_once_is_recalled_in_a_later_turn_of_that_agent_only() {
    let stderr = fact_is_recalled_later_in_its_scope_only(true);
    assert!(
        !stderr.concat().contains("lexical"),
        "the neural path needs no notice: {stderr:?}"
    );
}

#[test]
fn without_the_model_file_the_lexical_fallback_recalls_and_says_so() {
    let stderr = fact_is_recalled_later_in_its_scope_only(false);
    // Said once, when the store is first searched on the lexical path.
    assert!(stderr[1].contains("lexical"), "{stderr:?}");
}

#[test]
fn a_turn_writes_request_tool_call_memory_edit_and_answer_to_the_daily_log() {
    let server = FakeServer::start();
    server.push(ollama_call(
        "core_memory_append",
        json!({"label": "human", "content": "Drinks green tea."}),
    ));
    server.push(ollama_text("I will remember."));
    let env = env_for(&server, "", false);
    send(&env, &["-a", "a", "Remember: I drink green tea."]);
    let log = env.run(&["memory", "log", "-a", "a", "--json"]);
    let kinds: Vec<(String, String)> = log
        .stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json");
            (
                v["kind"].as_str().unwrap_or("").to_owned(),
                v["text"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("request".into(), "Remember: I drink green tea.".into()),
            ("memory_edit".into(), "append: Drinks green tea.".into()),
            (
                "tool_call".into(),
                r#"{"label":"human","content":"Drinks green tea."}"#.into()
            ),
            ("answer".into(), "I will remember.".into()),
        ]
    );
    snap!("daily_log_of_a_turn", env.snap(&log));
    // The next turn sees the edited block.
    server.push(ollama_text("Tea."));
    send(&env, &["-a", "a", "What do I drink?"]);
    assert!(system_prompt(&server.requests()[2].json())
        .contains("<human>\nDrinks green tea.\n</human>"));
}

#[test]
fn max_session_messages_bounds_what_the_model_sees_never_the_ledger() {
    let server = FakeServer::start();
    for i in 0..3 {
        server.push(ollama_text(&format!("answer {i}")));
    }
    // The fourth turn makes two tool rounds: its own messages outnumber the bound.
    server.push(ollama_call(
        "core_memory_set",
        json!({"label": "human", "value": "x"}),
    ));
    server.push(ollama_call(
        "core_memory_append",
        json!({"label": "human", "content": "y"}),
    ));
    server.push(ollama_text("done"));
    let env = env_for(
        &server,
        "    memory: {max_session_messages: 3, recall: {passive_inject: false}}\n",
        false,
    );
    for i in 0..3 {
        send(&env, &["-a", "a", &format!("question {i}")]);
    }
    let third = conversation(&server.requests()[2].json());
    assert_eq!(
        third,
        [
            ("user".to_owned(), "question 1".to_owned()),
            ("assistant".to_owned(), "answer 1".to_owned()),
            ("user".to_owned(), "question 2".to_owned()),
        ]
    );
    // The current turn is sent whole, even past the bound: its request and both rounds.
    send(&env, &["-a", "a", "question 3"]);
    let last = conversation(&server.requests()[5].json());
    let roles: Vec<&str> = last.iter().map(|m| m.0.as_str()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "tool"],
        "{last:?}"
    );
    assert_eq!(last[0].1, "question 3");
    // The ledger keeps every turn.
    let history = env.run(&["history", "--json"]);
    assert_eq!(history.stdout.lines().count(), 4);
}

#[test]
fn rewind_deletes_no_memory() {
    let server = FakeServer::start();
    server.push(ollama_call(
        "core_memory_set",
        json!({"label": "human", "value": "Name: Ada."}),
    ));
    server.push(ollama_text("Hello Ada."));
    server.push(ollama_text("Second."));
    let env = env_for(&server, "", false);
    let first = send(&env, &["-a", "a", "--json", "I am Ada."]);
    let turn: Value =
        serde_json::from_str(first.stdout.lines().next().expect("begun")).expect("json");
    let turn = turn["turn"].as_str().expect("turn").to_owned();
    send(&env, &["-a", "a", "Second question."]);
    let before = (
        env.run(&["memory", "core", "show", "human", "-a", "a"])
            .stdout,
        env.run(&["memory", "log", "-a", "a", "--json"]).stdout,
        env.run(&["memory", "status", "-a", "a", "--json"]).stdout,
    );
    let r = env.run(&["rewind", &turn, "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let after = (
        env.run(&["memory", "core", "show", "human", "-a", "a"])
            .stdout,
        env.run(&["memory", "log", "-a", "a", "--json"]).stdout,
        env.run(&["memory", "status", "-a", "a", "--json"]).stdout,
    );
    assert_eq!(before, after);
    assert_eq!(after.0, "Name: Ada.\n");
}

#[test]
fn consolidation_promotes_facts_into_core_blocks_as_a_recorded_turn() {
    let server = FakeServer::start();
    let edits = json!({"edits": [
        {"label": "human", "append": "Prefers answers in French."},
        {"label": "human", "old": "French", "new": ""},
        {"label": "nope", "append": "x"},
    ]});
    server.push(ollama_text(&edits.to_string()));
    server.push(ollama_text("Bonjour."));
    let env = env_for(&server, "", false);
    let none = env.run(&["memory", "consolidate", "-a", "a"]);
    assert_eq!(
        none.stdout, "a: skipped: no semantic records\n",
        "{}",
        none.stderr
    );
    let added = env.run(&["memory", "add", "-a", "a", "Ada prefers answers in French."]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    let r = env.run(&["memory", "consolidate"]);
    snap!("consolidate", env.snap(&r));
    assert_eq!(r.code, 0);
    // One model call, for the agent that has records: blocks and records in, JSON asked.
    assert_eq!(server.request_count(), 1);
    let call = server.requests()[0].json();
    assert_eq!(call["format"], "json");
    let prompt = conversation(&call);
    assert!(
        prompt[0].1.contains("Ada prefers answers in French."),
        "{prompt:?}"
    );
    assert_eq!(
        env.run(&["memory", "core", "show", "human", "-a", "a"])
            .stdout,
        "Prefers answers in French.\n"
    );
    // Recorded as a turn of the session, with its edits as tool events.
    let history = env.run(&["history", "--json"]);
    let turns: Vec<Value> = history
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(turns.len(), 1, "{}", history.stdout);
    assert_eq!(turns[0]["state"], "completed");
    assert_eq!(turns[0]["tools"].as_array().map(Vec::len), Some(3));
    // Nothing new since: no model call, nothing recorded.
    let again = env.run(&["memory", "consolidate", "-a", "a", "--json"]);
    snap!("consolidate_again", env.snap(&again));
    assert_eq!(server.request_count(), 1);
    // The pass is no part of the agent's conversation.
    send(&env, &["-a", "a", "hello"]);
    assert_eq!(
        conversation(&server.requests()[1].json()),
        [("user".to_owned(), "hello".to_owned())]
    );
}

/// The content of the tool result messages of a request.
fn tool_results(request: &Value) -> Vec<String> {
    conversation(request)
        .into_iter()
        .filter(|m| m.0 == "tool")
        .map(|m| m.1)
        .collect()
}

#[test]
fn the_model_searches_memory_and_an_edit_over_the_limit_is_an_error_naming_it() {
    let server = FakeServer::start();
    server.push(ollama_text("Noted."));
    server.push(ollama_call(
        "recall_search",
        json!({"query": "which port does the staging database listen on", "top_k": 2}),
    ));
    server.push(ollama_call(
        "core_memory_append",
        json!({"label": "human", "content": "x".repeat(60)}),
    ));
    server.push(ollama_text("Port 6543."));
    let env = env_for(
        &server,
        "    memory:\n      recall: {passive_inject: false}\n      core: {blocks: [{label: human, limit: 50}]}\n",
        false,
    );
    send(
        &env,
        &["-a", "a", "The staging database listens on port 6543."],
    );
    send(&env, &["-a", "a", "Which port is the staging database on?"]);
    let requests = server.requests();
    // passive_inject: false leaves the prompt without a recall section.
    assert!(!system_prompt(&requests[1].json()).contains("recalled_memory"));
    let found = tool_results(&requests[2].json());
    assert!(
        found[0].contains("port 6543") && found[0].contains("score="),
        "{found:?}"
    );
    // The refused edit is a result the model reads, naming the block and its limit; the
    // block is unchanged and the turn completed.
    let refused = tool_results(&requests[3].json());
    assert!(
        refused[1].contains(
            "block \"human\" would hold 60 characters, over its limit of 50 characters; nothing was changed"
        ),
        "{refused:?}"
    );
    assert_eq!(
        env.run(&["memory", "core", "show", "human", "-a", "a"])
            .stdout,
        "\n"
    );
    let history = env.run(&["history", "--json"]);
    let last: Value =
        serde_json::from_str(history.stdout.lines().last().expect("turn")).expect("json");
    assert_eq!(last["state"], "completed");
    assert_eq!(last["tools"][1]["is_error"], true, "{last}");
}
