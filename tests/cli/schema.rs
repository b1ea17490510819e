//! Structured output through the real binary: `send --schema` with scripted replies and
//! loopback Ollama and OpenAI servers (stdout is the value alone, violations fail the turn
//! with their pointers, retries ask again with them, a cut reply is an error), refused
//! keywords, `schemas`, an agent's `output_schema`, and retry and `rewind --edit` keeping
//! the schema.

use serde_json::{json, Value};

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_text};

const PERSON: &str = "name, age int, tags [str]";

const SCRIPT: &str = r#"
replies:
  - match: "person"
    text: '{"name": "Ada", "age": 36, "tags": ["math", "engines"]}'
  - match: "fenced"
    text: "```json\n{\"name\": \"Bo\", \"age\": 4, \"tags\": []}\n```"
  - match: "wrong"
    text: '{"name": 7, "age": "forty", "tags": ["x", 2]}'
  - match: "prose"
    text: "Sure! Here is a person."
  - match: "cut"
    text: '{"name": "Cu'
    finish_reason: length
  - match: "city"
    text: '{"city": "Paris", "population": 2100000}'
"#;

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write("replies.yaml", SCRIPT);
    env
}

/// The turn id a run printed on stderr.
fn turn_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("a turn line")
        .to_owned()
}

#[test]
fn stdout_is_the_value_alone_and_every_view_carries_it() {
    let env = script_env();
    let r = env.run(&["send", "--schema", PERSON, "a person"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let value: Value = serde_json::from_str(&r.stdout).expect("stdout is JSON");
    assert_eq!(
        value,
        json!({"name": "Ada", "age": 36, "tags": ["math", "engines"]})
    );
    snap!("send_pretty", env.snap(&r));
    let compact = env.run(&["send", "--compact", "--schema", PERSON, "a person"]);
    assert_eq!(
        compact.stdout,
        "{\"name\":\"Ada\",\"age\":36,\"tags\":[\"math\",\"engines\"]}\n"
    );
    // A fenced reply counts; the value is what is printed and recorded.
    let fenced = env.run(&["send", "--compact", "--schema", PERSON, "fenced"]);
    assert_eq!(
        fenced.stdout, "{\"name\":\"Bo\",\"age\":4,\"tags\":[]}\n",
        "{}",
        fenced.stderr
    );

    let json = env.run(&["send", "--json", "--schema", PERSON, "a person"]);
    let lines: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let begun = lines
        .iter()
        .find(|l| l["type"] == "turn.begun")
        .expect("begun");
    let id = begun["schema"]
        .as_str()
        .expect("the schema's id")
        .to_owned();
    assert_eq!(id.len(), 64);
    let value = lines
        .iter()
        .find(|l| l["type"] == "answer.value")
        .expect("an answer.value event");
    assert_eq!(value["value"]["tags"][1], "engines");
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    let at = |t: &str| types.iter().position(|x| *x == t).expect(t);
    assert!(at("answer.value") < at("turn.ended"), "{types:?}");

    let turn = turn_of(&r.stderr);
    let show = env.run(&["show", &turn]);
    assert!(
        show.stdout.contains(&format!("schema   {id}")),
        "{}",
        show.stdout
    );
    snap!("show", env.snap(&show));
    let shown: Value =
        serde_json::from_str(&env.run(&["show", "--json", &turn]).stdout).expect("json");
    assert_eq!(shown["schema"], id.as_str());
    assert_eq!(shown["value"]["age"], 36);
    let found = env.run(&["history", "--all", "--search", "engines"]);
    assert!(found.stdout.contains(&turn), "{}", found.stdout);
    let export = env.run(&["export", "--format", "json"]);
    let doc: Value = serde_json::from_str(&export.stdout).expect("export json");
    let first = &doc["turns"][0];
    assert_eq!(first["value"]["name"], "Ada", "{first}");
    assert_eq!(first["schema"], id.as_str());
    let md = env.run(&["export"]);
    assert!(
        md.stdout.contains("**Response** (JSON)\n\n```json\n{"),
        "{}",
        md.stdout
    );
}

#[test]
fn a_reply_that_breaks_the_schema_fails_listing_each_violation() {
    let env = script_env();
    let r = env.run(&["send", "--schema", PERSON, "wrong"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.stdout, "", "nothing reaches stdout");
    for pointer in [
        "  /age: \"forty\" is not of type \"integer\"",
        "  /name: 7 is not of type \"string\"",
        "  /tags/1: 2 is not of type \"string\"",
    ] {
        assert!(r.stderr.contains(pointer), "{pointer} in {}", r.stderr);
    }
    snap!("violations", env.snap(&r));
    let prose = env.run(&["send", "--schema", PERSON, "prose"]);
    assert_eq!(prose.code, 3);
    assert!(
        prose.stderr.contains("(the value): the reply is not JSON"),
        "{}",
        prose.stderr
    );
    // The failed turn keeps the reply and the violations for review.
    let show = env.run(&["show", &turn_of(&r.stderr)]);
    assert!(
        show.stdout
            .contains("warning: reply 1 of 1 does not match schema"),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("\"forty\""), "{}", show.stdout);
}

#[test]
fn retries_ask_again_with_the_violations() {
    let env = script_env();
    // The retry is a call of its own (its message is the violations): the next entry.
    env.write(
        "replies.yaml",
        "replies:\n  - text: '{\"name\": \"first try\"}'\n  - text: '{\"name\": \"Di\", \"age\": 9, \"tags\": [\"fixed\"]}'\n",
    );
    let r = env.run(&[
        "send",
        "--compact",
        "--schema-retries",
        "1",
        "--schema",
        PERSON,
        "again",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "{\"name\":\"Di\",\"age\":9,\"tags\":[\"fixed\"]}\n"
    );
    assert!(
        r.stderr.contains("reply 1 of 2 does not match schema")
            && r.stderr.contains("\"age\" is a required property"),
        "{}",
        r.stderr
    );
    // The conversation keeps the request and the answer, not the attempt before it.
    let show: Value =
        serde_json::from_str(&env.run(&["show", "--json", &turn_of(&r.stderr)]).stdout)
            .expect("json");
    assert_eq!(show["calls"].as_array().map(Vec::len), Some(2));
    assert_eq!(show["value"]["tags"][0], "fixed");
}

#[test]
fn retries_send_the_violations_to_the_model() {
    let server = FakeServer::with([
        ollama_text(r#"{"name": "x", "age": "old", "tags": []}"#),
        ollama_text(r#"{"name": "x", "age": 80, "tags": []}"#),
    ]);
    let env = ollama_env(&server);
    let r = env.run(&["send", "--schema-retries", "2", "--schema", PERSON, "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "user");
    let text = last["content"].as_str().expect("text");
    assert!(
        text.contains("- /age: \"old\" is not of type \"integer\""),
        "{text}"
    );
    assert_eq!(messages[messages.len() - 2]["role"], "assistant");
}

#[test]
fn a_reply_cut_by_max_tokens_is_an_error_that_says_so() {
    let env = script_env();
    let r = env.run(&["send", "-o", "max_tokens=5", "--schema", PERSON, "cut"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr
            .contains("the reply was cut by max_tokens (5) before its JSON value was complete"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("hint: raise max_tokens"), "{}", r.stderr);
}

#[test]
fn keywords_outside_the_subset_are_refused_by_name_before_a_turn() {
    let env = script_env();
    let r = env.run(&[
        "send",
        "--schema",
        r#"{"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}"#,
        "a person",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    snap!("refused_keyword", env.snap(&r));
    assert!(
        env.run(&["history", "--all", "--json"]).stdout.is_empty(),
        "no turn began"
    );
    let bad = env.run(&["send", "--schema", "name, age integr", "a person"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("column 11: unknown type `integr`"),
        "{}",
        bad.stderr
    );
    let missing = env.run(&["send", "--schema", "schemas/person.json", "a person"]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("schemas/person.json"),
        "{}",
        missing.stderr
    );
    let unknown = env.run(&["send", "--schema", "0123456789abcdef", "a person"]);
    assert_eq!(unknown.code, 7, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("`axocoatl schemas` lists"),
        "{}",
        unknown.stderr
    );
    // validate refuses an agent's schema the same way, at its line.
    env.write(
        "axocoatl.yaml",
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n    output_schema:\n      type: object\n      patternProperties: {x: {}}\n",
    );
    let v = env.run(&["validate"]);
    assert_eq!(v.code, 1, "{}", v.stdout);
    snap!("validate_refused_keyword", env.snap(&v));
}

#[test]
fn schemas_are_stored_once_listed_and_used_again_by_id() {
    let env = script_env();
    for _ in 0..2 {
        assert_eq!(env.run(&["send", "--schema", PERSON, "a person"]).code, 0);
    }
    env.write(
        "city.json",
        r#"{"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}}, "required": ["city"]}"#,
    );
    assert_eq!(env.run(&["send", "--schema", "city.json", "city"]).code, 0);
    let list = env.run(&["schemas"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    snap!("list", env.snap(&list));
    let lines: Vec<Value> = env
        .run(&["schemas", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let person = lines
        .iter()
        .find(|l| l["turns"] == 2)
        .expect("person, twice");
    assert_eq!(person["concise"], PERSON);
    let id = person["id"].as_str().expect("id");
    // One object per schema, whatever the number of turns.
    let stored = walkdir(&env.repo().join("objects"))
        .into_iter()
        .filter(|h| h.as_str() == id)
        .count();
    assert_eq!(stored, 1);
    let again = env.run(&["send", "--compact", "--schema", &id[..10], "a person"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(again.stdout.starts_with("{\"name\":\"Ada\""));
    let shown = env.run(&["schemas", "show", &id[..8]]);
    let schema: Value = serde_json::from_str(&shown.stdout).expect("a JSON Schema");
    assert_eq!(schema["required"], json!(["name", "age", "tags"]));
    // The concise form round-trips through its JSON Schema.
    env.write("person.json", &shown.stdout);
    let back = env.run(&["schemas", "show", "person.json", "--concise"]);
    assert_eq!(back.stdout, format!("{PERSON}\n"));
    let none = env.run(&["schemas", "show", "city.json", "--concise"]);
    assert_eq!(none.code, 2);
    assert!(
        none.stderr.contains("has no concise form"),
        "{}",
        none.stderr
    );
}

/// Every object hash under `objects/`.
fn walkdir(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for fan in std::fs::read_dir(dir).expect("objects").flatten() {
        let prefix = fan.file_name().to_string_lossy().into_owned();
        if let Ok(entries) = std::fs::read_dir(fan.path()) {
            for e in entries.flatten() {
                out.push(format!("{prefix}{}", e.file_name().to_string_lossy()));
            }
        }
    }
    out
}

#[test]
fn retry_and_rewind_edit_keep_the_schema_and_its_retries() {
    let mut env = script_env();
    let r = env.run(&[
        "send",
        "--schema-retries",
        "3",
        "--schema",
        PERSON,
        "a person",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let turn = turn_of(&r.stderr);
    let retried = env.run(&["retry", "--compact", &turn]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(
        retried.stdout,
        "{\"name\":\"Ada\",\"age\":36,\"tags\":[\"math\",\"engines\"]}\n"
    );
    let show = env.run(&["show", &turn_of(&retried.stderr)]);
    assert!(show.stdout.contains("(3 retries)"), "{}", show.stdout);
    // rewind --edit: the editor appends to the request; the new turn has the schema.
    env.write("edit.sh", "#!/bin/sh\nprintf ' again' >> \"$1\"\n");
    let editor = env.work.join("edit.sh");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    env.set_env("VISUAL", &editor.to_string_lossy());
    let rewound = env.run(&["rewind", &turn, "--edit", "--yes"]);
    assert_eq!(rewound.code, 0, "{}", rewound.stderr);
    let value: Value = serde_json::from_str(&rewound.stdout).expect("the value alone");
    assert_eq!(value["name"], "Ada");
    let last = env.run(&["history", "--json"]);
    let newest: Value =
        serde_json::from_str(last.stdout.lines().last().expect("a turn")).expect("json");
    assert_eq!(newest["request"], "a person again");
    assert!(newest["schema"].is_string(), "{newest}");
}

#[test]
fn an_agents_output_schema_applies_to_its_turns() {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n    output_schema:\n      type: object\n      properties:\n        city: {type: string}\n        population: {type: integer, maximum: 1000}\n      required: [city]\n  - id: places\n    provider: canned\n    output_schema: 'city, population int'\n",
    );
    env.write("replies.yaml", SCRIPT);
    let r = env.run(&["send", "city"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("/population: 2100000 is greater than the maximum of 1000"),
        "{}",
        r.stderr
    );
    let ok = env.run(&["send", "--compact", "-a", "places", "city"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(ok.stdout, "{\"city\":\"Paris\",\"population\":2100000}\n");
    // --schema replaces the agent's for one turn.
    let over = env.run(&["send", "--schema", "city", "city"]);
    assert_eq!(over.code, 3, "population is not in 'city'");
    assert!(
        over.stderr
            .contains("Additional properties are not allowed"),
        "{}",
        over.stderr
    );
}

const SSE_DONE: &str = "data: [DONE]\n\n";

fn sse_text(text: &str) -> Reply {
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3}});
    Reply::sse(&format!("data: {chunk}\n\ndata: {last}\n\n{SSE_DONE}"))
}

fn openai_env(server: &FakeServer) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: openai, base_url: \"{}/v1\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        server.url()
    ))
}

#[test]
fn openai_servers_get_strict_structured_output() {
    let server = FakeServer::with([
        sse_text(r#"{"name": "Ada", "age": 36, "tags": []}"#),
        sse_text(r#"{"value": ["a", "b"]}"#),
        sse_text(r#"{"name": "Ada"}"#),
    ]);
    let env = openai_env(&server);
    let r = env.run(&["send", "--schema", "name, age int?, tags [str]", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = server.requests()[0].json();
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(format["json_schema"]["name"], "reply");
    let sent = &format["json_schema"]["schema"];
    assert_eq!(sent["additionalProperties"], false);
    assert_eq!(sent["required"], json!(["name", "age", "tags"]));
    assert_eq!(
        sent["properties"]["age"]["type"],
        json!(["integer", "null"])
    );
    // The schema is told to the model too.
    let system = body["messages"][0]["content"].as_str().expect("system");
    assert!(system.contains("matches this JSON Schema"), "{system}");

    // A top level that is not an object goes wrapped, and comes back unwrapped.
    let list = env.run(&[
        "send",
        "--compact",
        "--schema",
        r#"{"type": "array", "items": {"type": "string", "minLength": 1}}"#,
        "hi",
    ]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert_eq!(list.stdout, "[\"a\",\"b\"]\n");
    let sent = server.requests()[1].json()["response_format"]["json_schema"]["schema"].clone();
    assert_eq!(
        sent,
        json!({"type": "object", "properties": {"value": {"type": "array", "items": {"type": "string"}}}, "required": ["value"], "additionalProperties": false})
    );
    // What strict mode cannot say is still checked against the schema as given.
    let short = env.run(&["send", "--schema", PERSON, "hi"]);
    assert_eq!(short.code, 3);
    assert!(
        short.stderr.contains("\"age\" is a required property"),
        "{}",
        short.stderr
    );
}

#[test]
fn a_server_refusing_the_schema_names_its_reason() {
    let server = FakeServer::with([Reply::json(
        400,
        r#"{"error": {"message": "Invalid schema for response_format 'reply': 'minLength' is not permitted.", "type": "invalid_request_error"}}"#,
    )]);
    let env = openai_env(&server);
    let r = env.run(&["send", "--schema", PERSON, "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("'minLength' is not permitted"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("hint: the request asked for strict structured output"),
        "{}",
        r.stderr
    );
    // A model's refusal is its words.
    let refusal = json!({"choices": [{"index": 0, "delta": {"refusal": "I can't help with that."}, "finish_reason": "stop"}]});
    let server = FakeServer::with([Reply::sse(&format!("data: {refusal}\n\n{SSE_DONE}"))]);
    let env = openai_env(&server);
    let r = env.run(&["send", "--schema", PERSON, "hi"]);
    assert_eq!(r.code, 3);
    assert!(
        r.stderr
            .contains("the model refused to answer in the schema: I can't help with that."),
        "{}",
        r.stderr
    );

    let server = FakeServer::with([Reply::json(
        400,
        r#"{"error": "invalid JSON schema in format"}"#,
    )]);
    let env = ollama_env(&server);
    let r = env.run(&["send", "--schema", PERSON, "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("invalid JSON schema in format"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("hint: the request sent a JSON Schema as `format`"),
        "{}",
        r.stderr
    );
}

#[test]
fn ollama_gets_the_schema_as_format_and_its_violations_fail_the_turn() {
    let server = FakeServer::with([ollama_text(r#"{"name": "Ada", "age": -1, "tags": []}"#)]);
    let env = ollama_env(&server);
    let schema = r#"{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"], "additionalProperties": false}"#;
    let r = env.run(&["send", "--schema", schema, "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("/age: -1 is less than the minimum of 0"),
        "{}",
        r.stderr
    );
    let body = server.only_request().json();
    assert_eq!(
        body["format"],
        serde_json::from_str::<Value>(schema).expect("json")
    );
}

#[test]
fn help() {
    let env = TestEnv::new();
    for c in [&["schemas", "--help"][..], &["schemas", "show", "--help"]] {
        snap!(
            format!("help_{}", c[..c.len() - 1].join("_")),
            env.snap(&env.run(c))
        );
    }
}

#[cfg(feature = "sqlite")]
#[test]
fn the_sqlite_export_carries_the_schema_and_the_value() {
    let env = script_env();
    assert_eq!(env.run(&["send", "--schema", PERSON, "a person"]).code, 0);
    assert_eq!(env.run(&["send", "--schema", PERSON, "wrong"]).code, 3);
    assert_eq!(
        env.run(&["send", "plain"]).code,
        3,
        "no scripted reply: failed"
    );
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "turns.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = rusqlite::Connection::open(env.work.join("turns.db")).expect("open");
    let rows: Vec<(String, Option<String>, Option<String>)> = db
        .prepare("SELECT state, schema, value FROM turns ORDER BY seq")
        .expect("sql")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].0, "completed");
    assert_eq!(rows[0].1.as_ref().map(String::len), Some(64));
    assert_eq!(
        rows[0].2.as_deref(),
        Some(r#"{"name":"Ada","age":36,"tags":["math","engines"]}"#)
    );
    assert_eq!(rows[1].0, "failed");
    assert!(rows[1].1.is_some() && rows[1].2.is_none(), "{rows:?}");
    assert_eq!((rows[2].1.as_deref(), rows[2].2.as_deref()), (None, None));
    // A refresh picks up a later turn's value.
    assert_eq!(env.run(&["send", "--schema", PERSON, "a person"]).code, 0);
    let r = env.run(&["export", "--all", "--format", "sqlite", "-o", "turns.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let n: i64 = db
        .query_row(
            "SELECT count(*) FROM turns WHERE json_extract(value, '$.age') = 36",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(n, 2);
}
