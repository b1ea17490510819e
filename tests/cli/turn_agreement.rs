//! One meaning of "a turn": every reader of the ledger (`show`, `usage`, the JSON export,
//! the SQLite export and the traces) says the same of each kind of turn (plain, with tools,
//! a coordinator's with its workers, a multi-agent one, stopped, interrupted, rewound): its
//! state, its answer, its tokens, and who used them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{FakeServer, Recorded, Reply};
use crate::common::procs::json_lines;

const CREATED: &str = "2026-01-02T03:04:05Z";

/// An Ollama stream answering `text`, reporting `prompt` and `completion` tokens.
fn text(t: &str, prompt: u64, completion: u64) -> Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": t}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": prompt, "eval_count": completion});
    Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

/// An Ollama stream asking to read `fact.txt` (7 prompt, 1 completion tokens).
fn read_fact() -> Reply {
    let first = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "fact.txt"}}}]}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 7, "eval_count": 1});
    Reply::ndjson(&format!("{first}\n{last}\n"))
}

const PLAN: &str = r#"{"subtasks":[{"id":"research","worker":"researcher","task":"find facts","depends_on":[]},{"id":"draft","worker":"writer","task":"write it","depends_on":["research"]}]}"#;

/// Each model answers with tokens of its own, so a count given to the wrong agent shows.
fn respond(r: &Recorded) -> Reply {
    let body = r.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let has_tool_result = messages.iter().any(|m| m["role"] == "tool");
    let last_user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    match body["model"].as_str().unwrap_or("") {
        "solo-m" if last_user.contains("hang") => Reply::silent(),
        "solo-m" if last_user.contains("tool") && !has_tool_result => read_fact(),
        "solo-m" if last_user.contains("tool") => text("TOOL-ANSWER", 11, 3),
        "solo-m" => text(&format!("SOLO-ANSWER to {last_user}"), 13, 5),
        "lead-m" if body["format"] == "json" => text(PLAN, 17, 7),
        "lead-m" => text("FINAL", 19, 2),
        "r-m" if !has_tool_result => read_fact(),
        "r-m" => text("R-RESULT", 23, 4),
        "w-m" => text("W-RESULT", 29, 6),
        "a-m" => text("A-ANSWER", 31, 8),
        "b-m" => text("B-ANSWER", 37, 9),
        _ => Reply::json(500, r#"{"error":"unknown model"}"#),
    }
}

fn env(server: &FakeServer) -> TestEnv {
    let env = TestEnv::with_config(&format!(
        "providers:
  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 60}}
agents:
  - id: solo
    provider: llm
    model: solo-m
    tools: [read_file]
  - id: lead
    provider: llm
    model: lead-m
    role: coordinator
  - id: researcher
    provider: llm
    model: r-m
    role: worker
    tools: [read_file]
  - id: writer
    provider: llm
    model: w-m
    role: worker
  - id: a
    provider: llm
    model: a-m
  - id: b
    provider: llm
    model: b-m
workflows:
  - id: crew
    entry_point: lead
    workers: [researcher, writer]
telemetry:
  capture_content: true
",
        server.url()
    ));
    env.write("fact.txt", "quasars are far\n");
    env
}

fn send(env: &TestEnv, args: &[&str]) {
    let mut all = vec!["send", "--no-stdin"];
    all.extend_from_slice(args);
    let r = env.run(&all);
    assert_eq!(r.code, 0, "{all:?}: {}", r.stderr);
}

/// Starts `send --json` of `text` in `session` and returns it with its turn, once the model
/// was asked (its reply hangs).
fn hanging(env: &TestEnv, server: &FakeServer, session: &str) -> (std::process::Child, String) {
    let asked = server.request_count();
    let mut child = env
        .cmd(&[
            "send",
            "--json",
            "--no-stdin",
            "-s",
            session,
            "-a",
            "solo",
            "hang please",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let turn = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "send ended early"
        );
        let ev: Value = serde_json::from_str(&line).expect("event");
        if ev["type"] == "turn.begun" {
            break ev["turn"].as_str().expect("turn").to_owned();
        }
    };
    wait_until("the model to be asked", || server.request_count() > asked);
    (child, turn)
}

/// A repository with a turn of every kind; the ids of the rewound ones.
fn every_kind_of_turn(env: &TestEnv, server: &FakeServer) -> Vec<String> {
    send(env, &["-s", "main", "-a", "solo", "a plain question"]);
    send(env, &["-s", "main", "-a", "solo", "use the tool please"]);
    send(env, &["-s", "crew", "-a", "lead", "brief me"]);
    let r = env.run(&["sessions", "new", "panel", "--agents", "a,b"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    send(env, &["-s", "panel", "@a @b what do you think"]);

    let (child, turn) = hanging(env, server, "stopped");
    let r = env.run(&["stop", &turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let done = child.wait_with_output().expect("wait");
    assert_eq!(done.status.code(), Some(4));

    let (mut child, _) = hanging(env, server, "killed");
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");

    send(env, &["-s", "rewound", "-a", "solo", "first of two"]);
    send(env, &["-s", "rewound", "-a", "solo", "second of two"]);
    let h = env.run(&["history", "-s", "rewound", "--json"]);
    let ids: Vec<String> = json_lines(&h.stdout)
        .iter()
        .map(|t| t["turn"].as_str().expect("turn").to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "{}", h.stdout);
    let r = env.run(&["rewind", "-s", "rewound", "--yes", &ids[0]]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    send(env, &["-s", "rewound", "-a", "solo", "after the rewind"]);
    ids
}

/// Prompt tokens, completion tokens, calls.
type Tokens = (i64, i64, i64);

fn add(a: Tokens, b: Tokens) -> Tokens {
    (a.0 + b.0, a.1 + b.1, a.2 + b.2)
}

fn tokens_of(usage: &Value) -> Tokens {
    (
        usage["prompt_tokens"].as_i64().unwrap_or(0),
        usage["completion_tokens"].as_i64().unwrap_or(0),
        usage["calls"].as_i64().unwrap_or(0),
    )
}

/// What one reader says of a turn: its state, its answer, whether a rewind superseded it
/// (`None`: the reader does not say), its whole tokens, and each agent's.
#[derive(Debug, PartialEq)]
struct Said {
    state: String,
    answer: String,
    superseded: Option<bool>,
    tokens: Tokens,
    by_agent: BTreeMap<String, Tokens>,
}

/// `show --json`: the turn's tokens, and its subtasks' for its workers (the rest its own).
fn shown(env: &TestEnv, turn: &str) -> Said {
    let r = env.run(&["show", "--json", turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t: Value = serde_json::from_str(&r.stdout).expect("show json");
    said_of_json(&t)
}

fn said_of_json(t: &Value) -> Said {
    let tokens = tokens_of(&t["usage"]);
    let mut by_agent = BTreeMap::new();
    let mut workers = (0, 0, 0);
    for s in t["subtasks"].as_array().into_iter().flatten() {
        let used = tokens_of(&s["usage"]);
        workers = add(workers, used);
        let w = by_agent
            .entry(s["worker"].as_str().expect("worker").to_owned())
            .or_insert((0, 0, 0));
        *w = add(*w, used);
    }
    let own = (
        tokens.0 - workers.0,
        tokens.1 - workers.1,
        tokens.2 - workers.2,
    );
    by_agent.insert(t["agent"].as_str().expect("agent").to_owned(), own);
    Said {
        state: t["state"].as_str().expect("state").to_owned(),
        answer: t["output"].as_str().expect("output").to_owned(),
        superseded: t["superseded"].as_bool(),
        tokens,
        by_agent,
    }
}

/// The SQLite export: the turn's row (its own agent's tokens) and its subtasks' rows.
fn from_sqlite(db: &Connection, turn: &str) -> Said {
    let (agent, state, answer, superseded, own): (String, String, String, bool, Tokens) = db
        .query_row(
            "SELECT agent, state, answer, superseded, coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0), coalesce(model_calls, 0) FROM turns WHERE turn = ?1",
            [turn],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, (r.get(4)?, r.get(5)?, r.get(6)?))),
        )
        .expect("turn row");
    let mut by_agent = BTreeMap::from([(agent, own)]);
    let mut tokens = own;
    let mut stmt = db
        .prepare("SELECT worker, coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0), coalesce(model_calls, 0) FROM subtasks WHERE turn = ?1")
        .expect("subtasks");
    let rows = stmt
        .query_map([turn], |r| {
            Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
        })
        .expect("subtasks");
    for row in rows {
        let (worker, used) = row.expect("row");
        tokens = add(tokens, used);
        let w = by_agent.entry(worker).or_insert((0, 0, 0));
        *w = add(*w, used);
    }
    Said {
        state,
        answer,
        superseded: Some(superseded),
        tokens,
        by_agent,
    }
}

/// An OTLP JSON attribute's value as text (integers are strings in OTLP's JSON).
fn attr(span: &Value, key: &str) -> Option<String> {
    let v = &span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"];
    for k in ["stringValue", "intValue"] {
        match &v[k] {
            Value::String(s) => return Some(s.clone()),
            Value::Number(n) => return Some(n.to_string()),
            _ => {}
        }
    }
    None
}

fn int_attr(span: &Value, key: &str) -> i64 {
    attr(span, key).map_or(0, |s| s.parse().expect("an integer"))
}

/// The traces: the turn's span (its tokens and calls) and its subtasks' (their workers').
/// A call cut short by a stop has no `chat` span: the calls are the spans' own count.
fn from_spans(spans: &[Value]) -> Said {
    let root = spans
        .iter()
        .find(|s| s["parentSpanId"].as_str().is_none_or(str::is_empty))
        .expect("the turn's span");
    let used = |s: &Value| {
        (
            int_attr(s, "gen_ai.usage.input_tokens"),
            int_attr(s, "gen_ai.usage.output_tokens"),
            int_attr(s, "axocoatl.usage.model_calls"),
        )
    };
    let agent = attr(root, "gen_ai.agent.name").expect("agent");
    let tokens = used(root);
    let chat_spans = spans
        .iter()
        .filter(|s| attr(s, "gen_ai.operation.name").as_deref() == Some("chat"))
        .count() as i64;
    assert!(chat_spans <= tokens.2, "a chat span of each recorded call");
    let mut by_agent = BTreeMap::new();
    let mut workers = (0, 0, 0);
    for s in spans
        .iter()
        .filter(|s| attr(s, "axocoatl.subtask.id").is_some())
    {
        let worker = attr(s, "gen_ai.agent.name").expect("worker");
        let used = used(s);
        workers = add(workers, used);
        let w = by_agent.entry(worker).or_insert((0, 0, 0));
        *w = add(*w, used);
    }
    let own = (
        tokens.0 - workers.0,
        tokens.1 - workers.1,
        tokens.2 - workers.2,
    );
    by_agent.insert(agent, own);
    let answer = attr(root, "gen_ai.output.messages").map_or(String::new(), |m| {
        let m: Value = serde_json::from_str(&m).expect("messages");
        m[0]["parts"][0]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    });
    Said {
        state: attr(root, "axocoatl.turn.state").expect("state"),
        answer,
        superseded: None,
        tokens,
        by_agent,
    }
}

/// The spans of each turn of an OTLP JSON export, by turn id.
fn traces(text: &str) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for line in json_lines(text) {
        for rs in line["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for span in ss["spans"].as_array().into_iter().flatten() {
                    let turn = attr(span, "axocoatl.turn.id").expect("turn id");
                    out.entry(turn).or_default().push(span.clone());
                }
            }
        }
    }
    out
}

#[test]
fn every_reader_of_a_turn_says_the_same_state_answer_and_tokens() {
    let server = FakeServer::responding(respond);
    let env = env(&server);
    let rewound = every_kind_of_turn(&env, &server);

    let h = env.run(&["history", "--all", "--json"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let turns: Vec<String> = json_lines(&h.stdout)
        .iter()
        .map(|t| t["turn"].as_str().expect("turn").to_owned())
        .collect();
    assert_eq!(turns.len(), 9, "{}", h.stdout);

    let r = env.run(&["export", "--all", "--format", "json", "-o", "h.json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let exported: Value =
        serde_json::from_str(&std::fs::read_to_string(env.work.join("h.json")).expect("read"))
            .expect("json export");
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "h.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = Connection::open_with_flags(env.work.join("h.db"), OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open");
    let r = env.run(&["export", "--all", "--format", "otlp", "-o", "t.jsonl"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let traces = traces(&std::fs::read_to_string(env.work.join("t.jsonl")).expect("read"));

    let mut states = Vec::new();
    let mut per_agent: BTreeMap<String, Tokens> = BTreeMap::new();
    for turn in &turns {
        let show = shown(&env, turn);
        let json = exported["turns"]
            .as_array()
            .expect("turns")
            .iter()
            .find(|t| t["turn"] == turn.as_str())
            .map(said_of_json)
            .expect("in the JSON export");
        let sqlite = from_sqlite(&db, turn);
        let spans = from_spans(traces.get(turn).expect("a trace of every ended turn"));
        assert_eq!(json, show, "the JSON export of {turn}");
        assert_eq!(sqlite, show, "the SQLite export of {turn}");
        assert_eq!(
            spans,
            Said {
                superseded: None,
                ..show
            },
            "the spans of {turn}"
        );
        for (agent, used) in &sqlite.by_agent {
            let a = per_agent.entry(agent.clone()).or_insert((0, 0, 0));
            *a = add(*a, *used);
        }
        states.push((sqlite.state, sqlite.superseded == Some(true)));
    }
    // Every kind is there: plain, tools, coordinator, multi-agent, stopped, interrupted,
    // rewound.
    for kind in ["completed", "stopped", "interrupted"] {
        assert!(states.iter().any(|(s, _)| s == kind), "{states:?}");
    }
    assert_eq!(
        states.iter().filter(|(_, superseded)| *superseded).count(),
        rewound.len()
    );
    assert!(per_agent.contains_key("researcher") && per_agent.contains_key("a"));

    // `usage` gives each agent what the turns' rows and their subtasks' rows give it.
    let u = env.run(&["usage", "--all", "--json", "--by", "agent"]);
    assert_eq!(u.code, 0, "{}", u.stderr);
    let rows = json_lines(&u.stdout);
    let usage: BTreeMap<String, Tokens> = rows
        .iter()
        .filter_map(|r| Some((r["agent"].as_str()?.to_owned(), tokens_of(r))))
        .collect();
    assert_eq!(usage, per_agent, "{}", u.stdout);
    let sql_by_agent: BTreeMap<String, Tokens> = db
        .prepare(
            "SELECT agent, sum(p), sum(c), sum(n) FROM (
                SELECT agent, coalesce(prompt_tokens, 0) AS p, coalesce(completion_tokens, 0) AS c, coalesce(model_calls, 0) AS n FROM turns
                UNION ALL
                SELECT worker, coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0), coalesce(model_calls, 0) FROM subtasks)
             GROUP BY agent",
        )
        .expect("query")
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(sql_by_agent, usage, "the query docs/export.md gives");
}

/// An export an older axocoatl wrote (schema 3) counted a coordinator's workers' tokens in
/// its turn's row too; the refresh that upgrades it writes that turn again, and the file
/// then holds what a new export holds.
#[test]
fn a_refresh_upgrades_an_older_export_that_counted_workers_twice() {
    let server = FakeServer::responding(respond);
    let env = env(&server);
    send(&env, &["-s", "crew", "-a", "lead", "brief me"]);
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "old.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let h = env.run(&["history", "--all", "--json"]);
    let turn = json_lines(&h.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let whole = shown(&env, &turn).tokens;
    // As schema 5 wrote it: the turn's row with every call of the turn, subtasks numbered
    // from 1 without cache or cost.
    let path = env.work.join("old.db");
    Connection::open(&path)
        .expect("open")
        .execute_batch(&format!(
            "UPDATE turns SET prompt_tokens = {}, completion_tokens = {}, model_calls = {};
             UPDATE subtasks SET id = (SELECT count(*) FROM subtasks AS s WHERE s.id <= subtasks.id);
             {}
             UPDATE _meta SET value = '5' WHERE key = 'schema_version';
             PRAGMA user_version = 5;",
            whole.0,
            whole.1,
            whole.2,
            crate::export_sqlite::DROP_SUBTASK_COST,
        ))
        .expect("downgrade");
    let db = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let twice = from_sqlite(&db, &turn).tokens;
    assert!(
        twice.0 > whole.0 && twice.2 > whole.2,
        "its workers counted twice: {twice:?}"
    );
    drop(db);

    send(&env, &["-s", "crew", "-a", "lead", "again"]);
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "old.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let version: i64 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, 6);
    assert_eq!(from_sqlite(&db, &turn), shown(&env, &turn));
    drop(db);
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "new.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        crate::export_sqlite::dump(&env, &path),
        crate::export_sqlite::dump(&env, &env.work.join("new.db"))
    );
}
