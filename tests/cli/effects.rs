//! Effects that stay or repeat, through the real binary against a loopback Ollama server:
//! a file written by a turn that is then stopped or rewound is still there and the
//! messages say so, naming the calls; a retry of a turn whose tools changed files or ran
//! commands warns before the new turn (stderr, and a `warning` event under `--json`).

use std::io::Read;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::env::{read_until, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_call, ollama_text};
use crate::common::procs::json_lines;

fn env_for(server: &FakeServer) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    sandbox: workspace-write\n",
        server.url()
    ))
}

fn write_notes() -> Reply {
    ollama_call(
        "write_file",
        json!({"path": "notes.md", "content": "Ship on Friday.\n"}),
    )
}

#[test]
fn a_retry_of_a_turn_that_wrote_files_and_ran_commands_names_those_calls_first() {
    let server = FakeServer::with([
        write_notes(),
        ollama_call("run_command", json!({"command": "echo ran > ran.txt"})),
        ollama_call("read_file", json!({"path": "notes.md"})),
        ollama_text("Written."),
        ollama_text("Again."),
        ollama_text("Once more."),
        ollama_text("Plain."),
        ollama_text("Plain again."),
    ]);
    let env = env_for(&server);
    let first = env.run(&["send", "note the plan"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let turn = first
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("turn")
        .to_owned();
    let r = env.run(&["retry", &turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let warning = format!(
        "warning: turn {turn}'s tools changed files or ran commands: write_file notes.md, run_command `echo ran > ran.txt`; the retry sends the same request, so the new turn may do them again (nothing was rolled back)\n"
    );
    assert!(
        r.stderr.starts_with(&warning),
        "the warning comes before the new turn: {}",
        r.stderr
    );
    // Under --json: the same warning as an event, before turn.begun.
    let r = env.run(&["retry", &turn, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    assert_eq!(events[0]["type"], "warning", "{}", r.stdout);
    assert_eq!(events[0]["turn"], "");
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("write_file notes.md, run_command `echo ran > ran.txt`"),
        "{}",
        events[0]
    );
    assert_eq!(events[1]["type"], "turn.begun");
    assert!(r.stderr.contains("warning: turn"), "{}", r.stderr);
    // A turn whose tools only read says nothing.
    let plain = env.run(&["send", "just talk"]);
    let plain_turn = plain
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("turn")
        .to_owned();
    let r = env.run(&["retry", &plain_turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[test]
fn a_file_written_by_a_stopped_turn_stays_and_the_stop_says_so() {
    let words: String = (0..400)
        .map(|i| {
            json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": format!("w{i} ")}, "done": false})
                .to_string()
                + "\n"
        })
        .collect();
    let server = FakeServer::with([
        write_notes(),
        Reply::ndjson(&words).paced(std::time::Duration::from_millis(50)),
    ]);
    let env = env_for(&server);
    let mut send = env
        .cmd(&["send", "note the plan"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = send.stdout.take().expect("stdout");
    read_until(&mut out, "w1 ");
    let history = env.run(&["history", "--json"]);
    let turn = json_lines(&history.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let stop = env.run(&["stop", "--wait", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert_eq!(
        stop.stderr,
        "what its tools did stays done (a stop rolls nothing back): write_file notes.md\n"
    );
    let mut err = String::new();
    send.stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert_eq!(send.wait().expect("wait").code(), Some(4));
    assert!(
        err.contains(&format!(
            "turn {turn} stopped\nwhat its tools did stays done (a stop rolls nothing back): write_file notes.md\n"
        )),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(env.work.join("notes.md")).expect("still there"),
        "Ship on Friday.\n"
    );
    let json = env.run(&["stop", &turn, "--json"]);
    assert_eq!(json.code, 6, "the turn already ended: {}", json.stderr);
}

#[test]
fn a_file_written_by_a_rewound_turn_stays_and_the_rewind_says_so() {
    let server = FakeServer::with([write_notes(), ollama_text("Noted."), ollama_text("Hi.")]);
    let env = env_for(&server);
    let first = env.run(&["send", "note the plan"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(env.run(&["send", "hello"]).code, 0);
    let history = env.run(&["history", "--json"]);
    let turns: Vec<Value> = json_lines(&history.stdout);
    let turn = turns[0]["turn"].as_str().expect("turn").to_owned();
    let r = env.run(&["rewind", &turn, "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("What the superseded turns' tools did stays done: write_file notes.md."),
        "{}",
        r.stderr
    );
    snap!("rewind", env.snap(&r));
    assert_eq!(
        std::fs::read_to_string(env.work.join("notes.md")).expect("still there"),
        "Ship on Friday.\n"
    );
}

#[test]
fn rewind_json_lists_the_effects() {
    let server = FakeServer::with([write_notes(), ollama_text("Noted.")]);
    let env = env_for(&server);
    assert_eq!(env.run(&["send", "note the plan"]).code, 0);
    let history = env.run(&["history", "--json"]);
    let turn = json_lines(&history.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let r = env.run(&["rewind", &turn, "--yes", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(
        v["effects"],
        json!([{"turn": turn, "tool": "write_file", "target": "notes.md"}])
    );
}
