//! The turn pipeline from the outside: stop by prefix, runaway replies, limits, escapes,
//! busy sessions, budgets without reported usage, session precedence, agent names, and the
//! typed `--json` outputs of every command.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::common::env::{read_until, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::procs::json_lines;

fn line(content: &str, done: bool) -> String {
    let mut v = serde_json::json!({
        "model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": content}, "done": done
    });
    if done {
        v["done_reason"] = "stop".into();
        v["prompt_eval_count"] = 7.into();
        v["eval_count"] = 3.into();
    }
    v.to_string() + "\n"
}

/// An Ollama stream answering `pieces`, then done.
fn stream(pieces: &[&str]) -> String {
    unfinished(pieces) + &line("", true)
}

/// The start of an Ollama stream: `pieces`, not done (a stall follows).
fn unfinished(pieces: &[&str]) -> String {
    pieces.iter().map(|p| line(p, false)).collect()
}

fn ollama_env(server: &FakeServer, agent_extra: &str) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 60}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n{agent_extra}",
        server.url()
    ))
}

fn script_env(replies: &str) -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    name: Helpful Bot\n    provider: canned\n    tools: [core_memory_set]\n",
    );
    env.write("replies.yaml", replies);
    env
}

/// Runs `line` in a pseudo-terminal (util-linux `script`): stdout and stderr are a terminal.
fn in_terminal(env: &TestEnv, line: &str) -> String {
    let out = std::process::Command::new("script")
        .args(["-qec", line, "/dev/null"])
        .current_dir(&env.work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("AXOCOATL_NOW", crate::common::env::PINNED_NOW)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run script(1)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_stop_prefix_shared_by_an_old_and_a_running_turn_is_ambiguous() {
    let server = FakeServer::with([
        Reply::ndjson(&stream(&["old"])),
        Reply::ndjson(&unfinished(&["a ", "b ", "c "])).stall(),
    ]);
    let env = ollama_env(&server, "");
    // Ids are reproducible: find two seeds whose first ids share their first 4 digits.
    let id = |seed: &str| axocoatl::ids::seeded(seed, 0);
    let (old_seed, new_seed) = (0..)
        .flat_map(|a: u32| (0..a).map(move |b| (format!("p{a}"), format!("p{b}"))))
        .find(|(a, b)| id(a)[..4] == id(b)[..4])
        .expect("two seeds");
    let first = env
        .cmd(&["send", "one"])
        .env("AXOCOATL_ID_SEED", &old_seed)
        .output()
        .expect("send");
    assert_eq!(first.status.code(), Some(0));
    let mut child = env
        .cmd(&["send", "two"])
        .env("AXOCOATL_ID_SEED", &new_seed)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = child.stdout.take().expect("stdout");
    read_until(&mut stdout, "c ");
    let prefix = &id(&new_seed)[..4];
    let r = env.run(&["stop", prefix]);
    assert_eq!(r.code, 7, "ambiguous, never the running turn: {}", r.stderr);
    assert!(r.stderr.contains("matches several turns"), "{}", r.stderr);
    // The whole id still stops it.
    let r = env.run(&["stop", &id(&new_seed)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4));
}

/// An Ollama stream of `lines` lines of `width` bytes each (done, or not when `done` is
/// false): the reply is their concatenation.
fn big_stream(lines: usize, width: usize, done: bool) -> (Reply, String) {
    let mut body = String::new();
    let mut text = String::new();
    for i in 0..lines {
        let piece = format!("{i:08} {}\n", "x".repeat(width - 10));
        text.push_str(&piece);
        body.push_str(&line(&piece, false));
    }
    if done {
        body.push_str(&line("", true));
    }
    (Reply::ndjson(&body), text)
}

#[test]
fn a_reply_over_16_mib_is_recorded_whole_in_an_object() {
    let (reply, text) = big_stream(17 * 16, 64 * 1024, true);
    assert!(text.len() > 16 << 20);
    let server = FakeServer::with([reply]);
    let env = ollama_env(&server, "");
    let r = env.run(&["send", "--no-stdin", "write a lot"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.len(), text.len());
    let h = json_lines(&env.run(&["history", "--json"]).stdout);
    assert_eq!(h[0]["state"], "completed");
    assert!(
        h[0]["output_object"].is_string(),
        "{}",
        h[0]["output_object"]
    );
    assert!(h[0]["output"].as_str().expect("o").len() < text.len());
    let shown: serde_json::Value = serde_json::from_str(
        &env.run(&["show", "--json", h[0]["turn"].as_str().expect("t")])
            .stdout,
    )
    .expect("json");
    assert_eq!(shown["output"].as_str().expect("o"), text);
    let export = env.run(&["export", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&export.stdout).expect("json");
    assert_eq!(doc["turns"][0]["output"].as_str().expect("o"), text);
    let kinds: Vec<&str> = doc["turns"][0]["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["kind"].as_str().expect("kind"))
        .collect();
    assert!(kinds.contains(&"AgentOutputBounded"), "{kinds:?}");
    assert_eq!(env.run(&["fsck"]).code, 0);
}

#[test]
fn a_stopped_runaway_is_recorded_and_exits_4() {
    let (reply, text) = big_stream(9 * 16, 64 * 1024, false);
    let server = FakeServer::with([reply.stall()]);
    let env = ollama_env(&server, "");
    let mut child = env
        .cmd(&["send", "--no-stdin", "run away"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("turn line");
    let turn = first.trim().strip_prefix("turn ").expect("turn").to_owned();
    let mut stdout = child.stdout.take().expect("stdout");
    let last = text.lines().last().expect("a line");
    read_until(&mut stdout, last);
    assert_eq!(env.run(&["stop", &turn]).code, 0);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(4));
    let shown: serde_json::Value =
        serde_json::from_str(&env.run(&["show", "--json", &turn]).stdout).expect("json");
    assert_eq!(shown["state"], "stopped");
    assert_eq!(
        shown["output"].as_str().expect("o").trim_end(),
        text.trim_end()
    );
}

#[test]
fn a_message_over_the_record_limit_is_refused_naming_the_limit_in_mib() {
    let env = script_env("replies:\n  - text: hi\n");
    let big = "y".repeat(16 << 20);
    let r = env.run_stdin(&["send"], &big);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("at most 15 MiB"), "{}", r.stderr);
    assert!(
        r.stderr.contains("piped context has no such limit"),
        "{}",
        r.stderr
    );
    // The same text as piped context goes along.
    let r = env.run_stdin(&["send", "summarize this"], &big);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(env.run(&["history"]).stdout.contains("summarize this"));
}

#[test]
fn a_provider_error_is_printed_with_its_control_sequences_escaped() {
    let server = FakeServer::with([Reply::json(
        500,
        "{\"error\": \"bad \\u001b]52;c;AAAA\\u0007 \\u001b[2J\"}",
    )]);
    let env = ollama_env(&server, "");
    let r = env.run(&["send", "--no-stdin", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(!r.stderr.contains('\u{1b}'), "raw escape: {:?}", r.stderr);
    assert!(r.stderr.contains("\\u{1b}]52"), "{}", r.stderr);
}

#[test]
fn export_to_a_terminal_escapes_control_sequences_and_a_file_keeps_them() {
    let env = script_env("replies:\n  - text: \"x\\e]0;title\\a y\"\n");
    assert_eq!(env.run(&["send", "--no-stdin", "hi"]).code, 0);
    let shown = in_terminal(&env, &format!("{} export", crate::common::env::bin()));
    assert!(shown.contains("x\\u{1b}]0;title\\u{7} y"), "{shown:?}");
    assert!(!shown.contains('\u{7}'), "{shown:?}");
    let r = env.run(&["export", "-o", "t.md"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let file = std::fs::read_to_string(env.work.join("t.md")).expect("read");
    assert!(file.contains("x\u{1b}]0;title\u{7} y"), "a copy is exact");
}

#[test]
fn send_wait_says_on_a_terminal_which_turn_it_waits_for() {
    let server = FakeServer::with([
        Reply::ndjson(&unfinished(&["a "])).stall(),
        Reply::ndjson(&stream(&["queued"])),
    ]);
    let env = ollama_env(&server, "");
    let mut child = env
        .cmd(&["send", "first"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("turn line");
    let turn = first.trim().strip_prefix("turn ").expect("turn").to_owned();
    let line = format!(
        "{} send --wait --no-stdin second",
        crate::common::env::bin()
    );
    let mut waiter = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(&env.work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &env.home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script");
    let mut shown = waiter.stdout.take().expect("stdout");
    let mut seen = read_until(&mut shown, "(--wait)");
    assert!(
        seen.contains(&format!(
            "waiting for turn {turn} of session main to end (--wait)"
        )),
        "{seen}"
    );
    assert_eq!(env.run(&["stop", &turn]).code, 0);
    child.wait().expect("wait");
    std::io::Read::read_to_string(&mut shown, &mut seen).expect("rest");
    assert!(waiter.wait().expect("wait").success());
    assert!(seen.contains("queued"), "{seen}");
}

#[test]
fn rewind_of_a_busy_session_exits_8_like_send() {
    let server = FakeServer::with([
        Reply::ndjson(&stream(&["done"])),
        Reply::ndjson(&unfinished(&["a "])).stall(),
    ]);
    let env = ollama_env(&server, "");
    let first = env.run(&["send", "--json", "--no-stdin", "one"]);
    let old = json_lines(&first.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let mut child = env
        .cmd(&["send", "two"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = child.stderr.take().expect("stderr");
    read_until(&mut err, "\n");
    let r = env.run(&["rewind", &old, "--yes"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    snap!("rewind_busy", env.snap(&r));
    child.kill().expect("kill");
    child.wait().expect("wait");
}

#[test]
fn per_execution_counts_the_estimate_of_a_call_without_reported_usage() {
    // No usage reported: before, such a call counted 0 and the loop ran on.
    let call = serde_json::json!({
        "model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "core_memory_append", "arguments": {"label": "human", "content": "x"}}}
        ]},
        "done": true, "done_reason": "stop"
    })
    .to_string()
        + "\n";
    let server = FakeServer::with((0..5).map(|_| Reply::ndjson(&call)));
    let env = ollama_env(
        &server,
        "    tools: [core_memory_append]\n    token_budget: {per_execution: 900, per_call: 800}\n    sampling: {max_tokens: 100}\n",
    );
    let r = env.run(&["send", "--json", "--no-stdin", "remember x"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let ended = json_lines(&r.stdout).pop().expect("turn.ended");
    assert!(
        ended["error"]
            .as_str()
            .expect("error")
            .contains("per_execution 900 exceeded"),
        "{ended}"
    );
    assert_eq!(ended["usage"]["complete"], false);
    assert!(server.request_count() < 5, "the estimate stopped the loop");
}

#[test]
fn the_session_is_the_flag_else_the_environment_else_head_else_default_session() {
    let mut env = TestEnv::new();
    env.write(
        "axocoatl.yaml",
        "default_session: planning\nproviders:\n  canned: {kind: script, script: r.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write(
        "r.yaml",
        "replies:\n  - text: one\n  - text: two\n  - text: three\n",
    );
    assert_eq!(env.run(&["init"]).code, 0);
    // init points HEAD at default_session.
    let head = std::fs::read_to_string(env.repo().join("HEAD")).expect("HEAD");
    assert_eq!(head.trim(), "planning");
    assert_eq!(env.run(&["send", "--no-stdin", "a"]).code, 0);
    env.set_env("AXOCOATL_SESSION", "from-env");
    assert_eq!(env.run(&["send", "--no-stdin", "b"]).code, 0);
    assert_eq!(env.run(&["send", "-s", "flag", "--no-stdin", "c"]).code, 0);
    let h = json_lines(&env.run(&["history", "--all", "--json"]).stdout);
    let sessions: Vec<&str> = h
        .iter()
        .map(|t| t["session"].as_str().expect("s"))
        .collect();
    assert_eq!(sessions, ["planning", "from-env", "flag"]);
    // A missing HEAD falls back to default_session.
    std::fs::remove_file(env.repo().join("HEAD")).expect("rm HEAD");
    let mut plain = TestEnv::new();
    std::mem::swap(&mut plain.work, &mut env.work);
    let r = plain.run(&["history"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(" a → one"), "{}", r.stdout);
}

#[test]
fn an_agent_name_is_shown_beside_its_id() {
    let env = script_env("replies:\n  - text: hi\n");
    let r = env.run(&["send", "--json", "--no-stdin", "hello"]);
    let events = json_lines(&r.stdout);
    assert_eq!(events[0]["agent"], "bot");
    assert_eq!(events[0]["agent_name"], "Helpful Bot");
    let turn = events[0]["turn"].as_str().expect("turn").to_owned();
    let show = env.run(&["show", &turn]);
    assert!(
        show.stdout.contains("agent    bot (Helpful Bot)"),
        "{}",
        show.stdout
    );
    let usage = env.run(&["usage"]);
    assert!(
        usage.stdout.contains("bot (Helpful Bot)"),
        "{}",
        usage.stdout
    );
}

#[test]
fn validate_warns_about_configuration_it_does_not_run_yet() {
    let env = TestEnv::new();
    env.write(
        "axocoatl.yaml",
        "providers:\n  p: {kind: script, script: r.yaml}\nagents:\n  - id: lead\n    provider: p\n    role: coordinator\n  - id: w\n    provider: p\n    role: worker\nworkflows:\n  - id: flow\n    entry_point: lead\n    workers: [w]\nconsolidation:\n  enabled: true\nautomations:\n  - id: nightly\n    schedule: \"0 3 * * *\"\n    workflow: flow\n    request: go\n",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 0, "warnings only: {}", r.stderr);
    snap!("validate_not_run_yet", env.snap(&r));
}

/// Every `--json` output, snapshotted: their field names are an interface.
#[test]
fn json_outputs_of_every_command() {
    let env = script_env(
        "replies:\n  - chunks: [\"Hel\", \"lo\"]\n    usage: {prompt_tokens: 4, completion_tokens: 2}\n  - text: again\n",
    );
    let mut all = String::new();
    let mut run = |label: &str, args: &[&str]| {
        let r = env.run(args);
        all.push_str(&format!(
            "$ {label}\nexit: {}\n----- stdout -----\n{}----- stderr -----\n{}",
            r.code, r.stdout, r.stderr
        ));
        r
    };
    run("init", &["init", "fresh", "--json"]);
    env.write("notes.md", "some notes\n");
    run("attach add", &["attach", "add", "notes.md", "--json"]);
    let sent = run("send", &["send", "--json", "--no-stdin", "hi"]);
    let turn = json_lines(&sent.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    run("attach list", &["attach", "list", "--all", "--json"]);
    run("history", &["history", "--json"]);
    run("show", &["show", &turn, "--json"]);
    run("usage", &["usage", "--json"]);
    run("usage by session", &["usage", "--by", "session", "--json"]);
    run("sessions", &["sessions", "--json"]);
    run("sessions new", &["sessions", "--json", "new", "other"]);
    run("sessions switch", &["sessions", "--json", "switch", "main"]);
    run("export", &["export", "--format", "json"]);
    run("stop (not active)", &["stop", &turn, "--json"]);
    run("rewind", &["rewind", &turn, "--yes", "--json"]);
    run("fsck", &["fsck", "--json"]);
    run("validate", &["validate", "--json"]);
    let pid = regex::Regex::new(r#""pid": \d+"#).expect("re");
    // Normalized as one text, so an id has one name across the commands.
    snap!(
        "json_outputs",
        env.normalize(&pid.replace_all(&all, "\"pid\": [PID]"))
    );
}
