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

/// The recalled memory section of a request's system prompt ("" when there is none).
fn recalled(request: &Value) -> String {
    let system = system_prompt(request);
    system
        .split("<recalled_memory>")
        .nth(1)
        .and_then(|s| s.split("</recalled_memory>").next())
        .unwrap_or("")
        .to_owned()
}

/// The estimate reserved for the first model call of turn `turn`, as `show` has it.
fn reserved(env: &TestEnv, turn: &str) -> u64 {
    let r = env.run(&["show", "--json", turn]);
    let show: Value = serde_json::from_str(&r.stdout).expect("show json");
    show["calls"][0]["reserved_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no call in {show}"))
}

/// The id of the turn a `send --json` began.
fn turn_of(run: &crate::common::env::Run) -> String {
    let begun: Value =
        serde_json::from_str(run.stdout.lines().next().expect("begun")).expect("json");
    begun["turn"].as_str().expect("turn").to_owned()
}

#[test]
fn passive_recall_injects_no_exchange_the_conversation_window_already_holds() {
    let server = FakeServer::start();
    for _ in 0..7 {
        server.push(ollama_text("Noted."));
    }
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - {{id: a, provider: llm, model: m}}\n  - id: b\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: false}}}}\n  - id: c\n    provider: llm\n    model: m\n    memory: {{max_session_messages: 2}}\n",
        server.url()
    ));
    env.set_env(
        "AXOCOATL_EMBED_DIR",
        &env.tmp.path().join("no-model").to_string_lossy(),
    );
    let mut second = Vec::new();
    for agent in ["a", "b"] {
        send(&env, &["-a", agent, "My cat is called Tomasz."]);
        second.push(turn_of(&send(
            &env,
            &["-a", agent, "--json", "What is my cat called?"],
        )));
    }
    let requests: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    // The earlier turn is in the window: the model sees it once, not again as memory.
    assert_eq!(
        conversation(&requests[1]).len(),
        3,
        "{:?}",
        conversation(&requests[1])
    );
    assert_eq!(
        recalled(&requests[1]),
        "",
        "{}",
        system_prompt(&requests[1])
    );
    // So the estimate (what `show` reports) is that of a request without recall.
    assert_eq!(
        reserved(&env, &second[0]),
        reserved(&env, &second[1]),
        "a (recall on) and b (recall off)"
    );
    // What is not in the window is still recalled: text added outside a turn…
    ok_run(
        &env,
        &["memory", "add", "-a", "a", "Tomasz likes tuna best."],
    );
    send(&env, &["-a", "a", "What does my cat Tomasz like?"]);
    let third = recalled(&server.requests()[4].json());
    assert!(third.contains("Tomasz likes tuna best."), "{third}");
    assert!(!third.contains("User: My cat is called Tomasz."), "{third}");
    // …and a turn the window no longer holds (c keeps one earlier message).
    send(&env, &["-a", "c", "My cat is called Tomasz."]);
    send(&env, &["-a", "c", "What is my cat called, Tomasz or not?"]);
    let later = &server.requests()[6].json();
    assert_eq!(conversation(later).len(), 1, "{:?}", conversation(later));
    assert!(
        recalled(later).contains("User: My cat is called Tomasz."),
        "{}",
        system_prompt(later)
    );
}

fn ok_run(env: &TestEnv, args: &[&str]) -> String {
    let r = env.run(args);
    assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
    r.stdout
}

#[test]
fn after_a_rewind_recall_leaves_the_superseded_turns_out_and_search_finds_them_on_request() {
    let server = FakeServer::start();
    server.push(ollama_text("Noted."));
    server.push(ollama_text("Noted."));
    // The third turn's model searches memory twice: without and with the rewound turns.
    server.push(ollama_call(
        "recall_search",
        json!({"query": "what is the cat called Felix", "top_k": 5}),
    ));
    server.push(ollama_call(
        "recall_search",
        json!({"query": "what is the cat called Felix", "top_k": 5, "include_superseded": true}),
    ));
    server.push(ollama_text("Tomasz."));
    let env = env_for(&server, ONE_TURN, false);
    send(&env, &["-a", "a", "My cat is called Tomasz."]);
    let rewound = turn_of(&send(
        &env,
        &["-a", "a", "--json", "No: my cat is called Felix."],
    ));
    let r = env.run(&["rewind", &rewound, "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    send(
        &env,
        &["-a", "a", "What is my cat called, Felix or Tomasz?"],
    );
    let requests = server.requests();
    // The surviving turn is recalled; the superseded one is not.
    let section = recalled(&requests[2].json());
    assert!(section.contains("Tomasz"), "{section}");
    assert!(!section.contains("Felix"), "{section}");
    // `recall_search` leaves it out, unless asked.
    let felix = "User: No: my cat is called Felix.";
    let answers = tool_results(&requests[3].json());
    assert!(
        answers[0].contains("User: My cat is called Tomasz.") && !answers[0].contains(felix),
        "{answers:?}"
    );
    let answers = tool_results(&requests[4].json());
    assert!(answers[1].contains(felix), "{answers:?}");
    // The record stays: `memory search` finds it with --include-superseded, marked.
    let plain = ok_run(&env, &["memory", "search", "-a", "a", "cat called Felix"]);
    assert!(!plain.contains(felix), "{plain}");
    let all = ok_run(
        &env,
        &[
            "memory",
            "search",
            "-a",
            "a",
            "cat called Felix",
            "--include-superseded",
        ],
    );
    assert!(
        all.lines().any(|l| l.ends_with("(superseded by a rewind)")),
        "{all}"
    );
    assert!(all.contains("No: my cat is called Felix."), "{all}");
    let json = ok_run(
        &env,
        &[
            "memory",
            "search",
            "-a",
            "a",
            "Felix",
            "--include-superseded",
            "--json",
        ],
    );
    let hits: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert!(
        hits.iter()
            .any(|h| h["superseded"] == true && h["source"]["turn"] == rewound.as_str()),
        "{json}"
    );
}

/// Pins every `memory … --json` output (a block, an edit, added records, a search hit,
/// the status, a reindex, a consolidation pass that ran and one that was skipped): the
/// field names and shapes scripts read.
#[test]
fn every_memory_json_output_keeps_its_shape() {
    let server = FakeServer::start();
    let edits = json!({"edits": [
        {"label": "human", "append": "Prefers answers in French."},
        {"label": "nope", "append": "x"},
    ]});
    server.push(ollama_text(&edits.to_string()));
    let env = env_for(&server, "", false);
    let mut out = String::new();
    for args in [
        &["memory", "core", "show", "human", "-a", "a", "--json"][..],
        &[
            "memory",
            "core",
            "set",
            "project",
            "Rust CLI.",
            "-a",
            "a",
            "--json",
        ],
        &[
            "memory",
            "add",
            "-a",
            "a",
            "Ada prefers answers in French.",
            "--json",
        ],
        &["memory", "search", "-a", "a", "French answers", "--json"],
        &["memory", "status", "-a", "a", "--json"],
        &["memory", "reindex", "-a", "a", "--json"],
        &["memory", "consolidate", "--json"],
    ] {
        out.push_str(&format!(
            "$ {}\n{}",
            args.join(" "),
            env.snap(&env.run(args))
        ));
    }
    snap!("json_outputs", out);
}
