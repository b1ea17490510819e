//! Agents that act: the workspace tools, the sandbox of `run_command` and the tool
//! records, through the real binary against loopback servers that send real Ollama and
//! OpenAI tool-call messages.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_call, ollama_calls, ollama_text};
use crate::common::procs::{
    advertised, json_lines, marker, running_with, tool_results as results, turn_until_tool_started,
};

fn sse(events: &[Value]) -> Reply {
    let mut body = String::new();
    for e in events {
        body.push_str(&format!("data: {e}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    Reply::sse(&body)
}

fn openai_chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// An OpenAI stream answering with one tool call whose argument text arrives in two pieces.
fn openai_call(id: &str, name: &str, args: Value) -> Reply {
    let text = args.to_string();
    let (a, b) = text.split_at(text.len() / 2);
    sse(&[
        openai_chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ),
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}),
            Value::Null,
        ),
        openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
            Value::Null,
        ),
        openai_chunk(json!({}), json!("tool_calls")),
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}),
    ])
}

fn openai_text(text: &str) -> Reply {
    sse(&[
        openai_chunk(json!({"role": "assistant", "content": text}), Value::Null),
        openai_chunk(json!({}), json!("stop")),
    ])
}

/// A repository whose agent `coder` talks to `server`; `agent` is appended to its entry.
fn env_with(kind: &str, server: &FakeServer, agent: &str) -> TestEnv {
    let base = match kind {
        "openai" => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: {kind}, base_url: \"{base}\"}}\nagents:\n  - id: coder\n    provider: llm\n    model: m\n{agent}"
    ))
}

fn turn_of(events: &[Value]) -> String {
    events[0]["turn"].as_str().expect("turn id").to_owned()
}

fn landlock() -> bool {
    axocoatl::tools::sandbox::Support::probe().landlock_abi >= 1
}

#[test]
fn read_edit_run_loop_changes_a_file_and_records_every_step_in_order() {
    let server = FakeServer::with([
        ollama_call("read_file", json!({"path": "notes.txt"})),
        ollama_call(
            "edit_file",
            json!({"path": "notes.txt", "old": "zebra", "new": "okapi"}),
        ),
        ollama_call(
            "run_command",
            json!({"command": "cat notes.txt && echo checked > check.txt"}),
        ),
        ollama_text("Renamed the animal and checked it."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    env.write("notes.txt", "the zebra sleeps\n");
    let r = env.run(&["send", "--json", "rename the animal"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(env.work.join("notes.txt")).expect("read"),
        "the okapi sleeps\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.work.join("check.txt")).expect("read"),
        "checked\n"
    );

    let events = json_lines(&r.stdout);
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] != "delta")
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "turn.begun",
            "tool.started",
            "tool.result",
            "tool.started",
            "tool.result",
            "tool.started",
            "tool.result",
            "turn.ended"
        ]
    );
    let res = results(&events);
    assert_eq!(res[0]["name"], "read_file");
    assert_eq!(res[0]["output"], "the zebra sleeps\n");
    assert_eq!(res[0]["exit_code"], Value::Null);
    assert_eq!(
        res[1]["output"],
        "replaced 1 occurrence in notes.txt\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,1 +1,1 @@\n-the zebra sleeps\n+the okapi sleeps\n"
    );
    assert_eq!(res[2]["name"], "run_command");
    assert_eq!(res[2]["output"], "the okapi sleeps\n[exit code 0]");
    assert_eq!(
        (&res[2]["exit_code"], &res[2]["is_error"]),
        (&json!(0), &json!(false))
    );
    for e in &res {
        assert!(e["duration_ms"].is_u64(), "{e}");
        assert!(e["call_id"].is_string(), "{e}");
    }
    let started = events
        .iter()
        .find(|e| e["type"] == "tool.started")
        .expect("started");
    assert_eq!(started["arguments"], r#"{"path":"notes.txt"}"#);

    // The model saw each result in the next request, in Ollama's fields.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let second = requests[1].json();
    let messages = second["messages"].as_array().expect("messages");
    let tool = messages.last().expect("tool message");
    assert_eq!(
        (&tool["role"], &tool["content"], &tool["tool_name"]),
        (
            &json!("tool"),
            &json!("the zebra sleeps\n"),
            &json!("read_file")
        )
    );
    assert_eq!(
        advertised(&requests[0].json()),
        [
            "read_file",
            "list_dir",
            "find_files",
            "grep",
            "write_file",
            "edit_file",
            "run_command",
            "core_memory_append",
            "core_memory_replace",
            "core_memory_set",
            "recall_search",
            "recall_timeframe"
        ]
    );

    // The ledger has every step in order.
    let turn = turn_of(&events);
    let export = env.run(&["export", "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let doc: Value = serde_json::from_str(&export.stdout).expect("json");
    let records: Vec<&str> = doc["turns"][0]["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["kind"].as_str().unwrap_or(""))
        .collect();
    let mut expected = vec!["TurnBegun"];
    for _ in 0..3 {
        expected.extend(["ModelCallCost", "ToolStarted", "ToolFinished"]);
    }
    expected.extend(["ModelCallCost", "AgentOutput", "TurnEnded", "UsageCost"]);
    assert_eq!(records, expected);
    let finished = &doc["turns"][0]["records"][9];
    assert_eq!(
        (&finished["name"], &finished["exit_code"]),
        (&json!("run_command"), &json!(0))
    );

    let show = env.run(&["show", &turn]);
    snap!("read_edit_run_show", env.snap(&show));
    // Search matches a tool's result text: "zebra" is only in read_file's output now.
    let found = env.run(&["history", "--search", "ZEBRA", "--json"]);
    assert_eq!(json_lines(&found.stdout)[0]["turn"], json!(turn));
    let md = env.run(&["export"]);
    assert!(
        md.stdout.contains("**Tool** `run_command`"),
        "{}",
        md.stdout
    );
    assert!(md.stdout.contains("(exit 0)"), "{}", md.stdout);
}

#[test]
fn openai_tool_calls_run_and_the_api_key_stays_out_of_commands() {
    let server = FakeServer::with([
        openai_call("call_A1", "list_dir", json!({"path": "."})),
        openai_call(
            "call_B2",
            "run_command",
            // The pattern matches the key without spelling it: a key in a tool call's
            // arguments would be redacted before the command ran.
            json!({"command": "env | grep -c 'sk-test-secre[t]'; exit 0"}),
        ),
        openai_text("Two files."),
    ]);
    let mut env = env_with("openai", &server, "    sandbox: workspace-write\n");
    env.set_env("OPENAI_API_KEY", "sk-test-secret");
    env.write("src/main.rs", "fn main() {}\n");
    let r = env.run(&["send", "--json", "what is here?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res[0]["output"], "axocoatl.yaml\nsrc/");
    assert_eq!(res[0]["call_id"], "call_A1");
    assert_eq!(res[1]["output"], "0\n[exit code 0]");
    let second = server.requests()[1].json();
    let messages = second["messages"].as_array().expect("messages");
    assert_eq!(
        messages[messages.len() - 2]["tool_calls"][0]["function"]["name"],
        "list_dir"
    );
    assert_eq!(
        messages.last().expect("tool"),
        &json!({"role": "tool", "content": "axocoatl.yaml\nsrc/", "tool_call_id": "call_A1"})
    );
    assert_eq!(events.last().expect("ended")["output"], "Two files.");
}

#[test]
fn an_unlisted_tool_is_not_advertised_and_a_call_to_it_is_refused_and_recorded() {
    let server = FakeServer::with([
        ollama_call("run_command", json!({"command": "touch made-by-command"})),
        ollama_text("I could not."),
    ]);
    let env = env_with(
        "ollama",
        &server,
        "    sandbox: workspace-write\n    tools: [read_file, grep]\n",
    );
    let r = env.run(&["send", "--json", "make a file"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        advertised(&server.requests()[0].json()),
        ["read_file", "grep"]
    );
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res[0]["is_error"], true);
    assert_eq!(
        res[0]["output"],
        "tool \"run_command\" is not in this agent's tools; available: read_file, grep"
    );
    assert!(!env.work.join("made-by-command").exists());
    let show = env.run(&["show", "--json", &turn_of(&events)]);
    let turn: Value = serde_json::from_str(&show.stdout).expect("json");
    assert_eq!(turn["tools"][0]["name"], "run_command");
    assert_eq!(turn["tools"][0]["is_error"], true);
}

#[test]
fn every_escape_is_refused_as_a_recorded_error_result() {
    let escapes = [
        ("read_file", json!({"path": "../x"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("read_file", json!({"path": "slash/etc/passwd"})),
        ("read_file", json!({"path": ".axocoatl/HEAD"})),
        ("read_file", json!({"path": "/proc/self/root/etc/passwd"})),
        ("list_dir", json!({"path": "slash"})),
        ("grep", json!({"pattern": "main", "path": ".axocoatl"})),
        (
            "write_file",
            json!({"path": "../escaped.txt", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "slash/tmp/escaped.txt", "content": "x"}),
        ),
    ];
    let server = FakeServer::with([
        ollama_calls(&escapes),
        ollama_text("Nothing was reachable."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    std::os::unix::fs::symlink("/", env.work.join("slash")).expect("symlink");
    let r = env.run(&["send", "--json", "look around"]);
    assert_eq!(r.code, 0, "the turn completes: {}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res.len(), escapes.len());
    for e in &res {
        assert_eq!(e["is_error"], true, "{e}");
        assert!(
            e["output"].as_str().is_some_and(|o| o.contains("refused")),
            "{e}"
        );
    }
    assert!(!env.tmp.path().join("escaped.txt").exists());
    let show = env.run(&["show", &turn_of(&events)]);
    snap!("escapes_show", env.snap(&show));
}

#[test]
fn under_landlock_commands_write_only_the_workspace_and_reach_no_network() {
    let outside = std::env::temp_dir().join(format!("outside-{}", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let server = FakeServer::with([
        ollama_calls(&[
            (
                "run_command",
                json!({"command": format!("echo x > {}", outside.display())}),
            ),
            (
                "run_command",
                json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")}),
            ),
            (
                "run_command",
                json!({"command": "echo inside > inside.txt"}),
            ),
        ]),
        ollama_text("Done."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let r = env.run(&["send", "--json", "try things"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    if !landlock() {
        for e in &res {
            assert!(
                e["output"]
                    .as_str()
                    .is_some_and(|o| o.contains("Landlock is not available")),
                "{e}"
            );
        }
        return;
    }
    assert_eq!(res[0]["is_error"], true, "{}", res[0]);
    assert!(res[0]["output"]
        .as_str()
        .is_some_and(|o| o.contains("Permission denied")));
    assert!(!outside.exists(), "a command wrote outside the workspace");
    assert_eq!(res[1]["is_error"], true, "{}", res[1]);
    assert_ne!(res[1]["exit_code"], json!(0));
    assert!(listener.accept().is_err(), "a sandboxed command connected");
    assert_eq!(res[2]["exit_code"], json!(0), "{}", res[2]);
    assert_eq!(
        std::fs::read_to_string(env.work.join("inside.txt")).expect("read"),
        "inside\n"
    );
}

/// An agent that could edit axocoatl.yaml could widen its own sandbox and tools: neither the
/// file tools nor a command in workspace-write can change it, and reading it still works.
#[test]
fn an_agent_cannot_change_the_configuration_file() {
    let server = FakeServer::with([
        ollama_calls(&[
            (
                "write_file",
                json!({"path": "axocoatl.yaml", "content": "agents: []"}),
            ),
            (
                "edit_file",
                json!({"path": "./axocoatl.yaml", "old": "workspace-write", "new": "full-access"}),
            ),
            ("read_file", json!({"path": "axocoatl.yaml"})),
            (
                "run_command",
                json!({"command": "sed -i s/workspace-write/full-access/ axocoatl.yaml"}),
            ),
            ("run_command", json!({"command": "echo x >> axocoatl.yaml"})),
            ("run_command", json!({"command": "rm -f axocoatl.yaml"})),
            (
                "run_command",
                json!({"command": "mv axocoatl.yaml old.yaml; echo 'agents: []' > axocoatl.yaml"}),
            ),
            ("run_command", json!({"command": "echo ok > kept.txt"})),
        ]),
        ollama_text("Done."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let config = std::fs::read(env.work.join("axocoatl.yaml")).expect("config");
    let r = env.run(&["send", "--json", "loosen your own sandbox"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res.len(), 8, "{}", r.stdout);
    for e in &res[..2] {
        assert_eq!(e["is_error"], true, "{e}");
        assert!(
            e["output"]
                .as_str()
                .is_some_and(|o| o.contains("configuration file; tools never change it")),
            "{e}"
        );
    }
    assert_eq!(res[2]["is_error"], false, "{}", res[2]);
    assert!(res[2]["output"]
        .as_str()
        .is_some_and(|o| o.contains("workspace-write")));
    if landlock() {
        for e in &res[3..7] {
            assert_eq!(e["is_error"], true, "{e}");
        }
        assert_eq!(res[7]["exit_code"], json!(0), "{}", res[7]);
        assert!(!env.work.join("old.yaml").exists());
    }
    assert_eq!(
        std::fs::read(env.work.join("axocoatl.yaml")).expect("config"),
        config
    );
}

/// Landlock cannot take `.axocoatl/` back out of the writable workspace; a private mount
/// namespace keeps it read-only for the command, and the ledger stays whole.
#[test]
fn a_command_in_workspace_write_cannot_touch_the_repository() {
    let server = FakeServer::with([
        ollama_calls(&[
            (
                "run_command",
                json!({"command": "echo x >> .axocoatl/HEAD"}),
            ),
            ("run_command", json!({"command": "rm -rf .axocoatl/ledger"})),
            ("run_command", json!({"command": "umount -l .axocoatl"})),
            ("run_command", json!({"command": "echo ok > kept.txt"})),
        ]),
        ollama_text("Done."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let head = std::fs::read(env.work.join(".axocoatl/HEAD")).expect("HEAD");
    let r = env.run(&["send", "--json", "try the repository"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    if !landlock() {
        return;
    }
    for e in &res[..3] {
        assert_eq!(e["is_error"], true, "{e}");
    }
    assert!(res[0]["output"]
        .as_str()
        .is_some_and(|o| o.contains("Read-only file system")));
    assert_eq!(res[3]["exit_code"], json!(0), "{}", res[3]);
    assert_eq!(
        std::fs::read(env.work.join(".axocoatl/HEAD")).expect("HEAD"),
        head
    );
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = env.run(&["history", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("try the repository"));
}

#[test]
fn a_timeout_kills_the_command_and_its_children() {
    let m = marker();
    let server = FakeServer::with([
        ollama_call(
            "run_command",
            json!({"command": format!("sleep {m}1 & echo $! > pids; echo $$ >> pids; sleep {m}2"), "timeout_secs": 1}),
        ),
        ollama_text("It hung."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let r = env.run(&["send", "--json", "run it"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res[0]["is_error"], true);
    assert!(
        res[0]["output"].as_str().is_some_and(|o| o
            .ends_with("[timed out after 1 s: the command and everything it started were killed]")),
        "{}",
        res[0]
    );
    let pids = std::fs::read_to_string(env.work.join("pids")).expect("pids");
    assert_eq!(pids.lines().count(), 2);
    // The shell (its command line holds the marker too) and the sleeps.
    wait_until("the command's processes to end", || {
        running_with(&m).is_empty()
    });
    // The model was told, and the turn went on.
    let second = server.requests()[1].json();
    let last = second["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned();
    assert!(last.is_some_and(|m| m["content"]
        .as_str()
        .is_some_and(|c| c.contains("timed out"))));
}

/// Starts `send --json` with a model that runs [`sleeper`], waits until the command runs,
/// and returns the child, its turn id, the remaining event lines and the sleep's pid (in
/// the command's pid namespace).
fn send_with_running_command(
    env: &TestEnv,
) -> (
    std::process::Child,
    String,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let mut child = env
        .cmd(&["send", "--json", "wait for it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let turn = turn_until_tool_started(&mut lines);
    let pid_file = env.work.join("pid");
    wait_until("the command to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    });
    let pid = std::fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .to_owned();
    (child, turn, lines, pid)
}

fn wait_exit(child: &mut std::process::Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "send did not end after the stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A model that runs a sleep marked with `m`.
fn sleeper(server: &FakeServer, m: &str) {
    server.push(ollama_call(
        "run_command",
        json!({"command": format!("sleep {m} & echo $! > pid; wait")}),
    ));
}

#[test]
fn a_stop_during_a_command_ends_the_turn_stopped_and_kills_the_command() {
    let server = FakeServer::start();
    let m = marker();
    sleeper(&server, &m);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let (mut child, turn, lines, _pid) = send_with_running_command(&env);
    let stop = env.run(&["stop", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    // `cargo bench --bench tools` prints how long this takes; here only the outcome counts.
    assert_eq!(wait_exit(&mut child), 4, "a stopped turn exits 4");
    wait_until("the sleep to end", || running_with(&m).is_empty());
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.expect("line")).expect("json"))
        .collect();
    let result = rest
        .iter()
        .find(|e| e["type"] == "tool.result")
        .expect("result");
    assert!(
        result["output"]
            .as_str()
            .is_some_and(|o| o.contains("effects so far are not rolled back")),
        "{result}"
    );
    assert_eq!(rest.last().expect("ended")["state"], "stopped");
    assert_eq!(server.request_count(), 1, "no model call after the stop");
}

#[test]
#[expect(
    unsafe_code,
    reason = "sending SIGINT to a child: libc has no safe wrapper"
)]
fn ctrl_c_during_a_command_stops_the_turn() {
    let server = FakeServer::start();
    let m = marker();
    sleeper(&server, &m);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let (mut child, _turn, _lines, _pid) = send_with_running_command(&env);
    // SAFETY: signals the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    assert_eq!(wait_exit(&mut child), 4);
    wait_until("the sleep to end", || running_with(&m).is_empty());
}

#[test]
fn a_read_only_agent_cannot_write() {
    let server = FakeServer::with([
        ollama_calls(&[
            ("write_file", json!({"path": "new.txt", "content": "x"})),
            (
                "edit_file",
                json!({"path": "keep.txt", "old": "a", "new": "b"}),
            ),
            ("run_command", json!({"command": "echo x > new.txt"})),
        ]),
        ollama_text("I may not."),
    ]);
    let env = env_with("ollama", &server, "");
    env.write("keep.txt", "a\n");
    let r = env.run(&["send", "--json", "write something"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        advertised(&server.requests()[0].json()),
        [
            "read_file",
            "list_dir",
            "find_files",
            "grep",
            "core_memory_append",
            "core_memory_replace",
            "core_memory_set",
            "recall_search",
            "recall_timeframe"
        ]
    );
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert!(res[0]["output"].as_str().is_some_and(
        |o| o.starts_with("tool \"write_file\" is refused: this agent's sandbox is read-only")
    ));
    assert!(res[1]["output"]
        .as_str()
        .is_some_and(|o| o.starts_with("tool \"edit_file\" is refused")));
    assert!(res[2]["output"]
        .as_str()
        .is_some_and(|o| o.starts_with("tool \"run_command\" is not in this agent's tools")));
    assert!(!env.work.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.work.join("keep.txt")).expect("read"),
        "a\n"
    );
}

#[test]
fn a_read_only_agent_allowlisting_run_command_writes_only_its_temp_dir() {
    let server = FakeServer::with([
        ollama_calls(&[
            ("run_command", json!({"command": "echo x > new.txt"})),
            (
                "run_command",
                json!({"command": "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""}),
            ),
        ]),
        ollama_text("Done."),
    ]);
    let env = env_with("ollama", &server, "    tools: [read_file, run_command]\n");
    let r = env.run(&["send", "--json", "try"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    if !landlock() {
        return;
    }
    assert_eq!(res[0]["is_error"], true, "{}", res[0]);
    assert!(!env.work.join("new.txt").exists());
    assert_eq!(res[1]["output"], "t\n[exit code 0]");
}

#[test]
fn max_steps_fails_a_turn_that_never_answers() {
    let server = FakeServer::with([
        ollama_call("list_dir", json!({"path": "."})),
        ollama_call("list_dir", json!({"path": "."})),
    ]);
    let env = env_with("ollama", &server, "    max_steps: 2\n");
    let r = env.run(&["send", "loop"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the model made 2 calls (max_steps) without a final answer"),
        "{}",
        r.stderr
    );
    assert_eq!(server.request_count(), 2);
}

#[test]
fn long_output_reaches_the_model_cut_and_the_ledger_whole() {
    let server = FakeServer::with([
        ollama_call(
            "run_command",
            json!({"command": "head -c 100000 /dev/zero | tr '\\0' a"}),
        ),
        ollama_text("Many a."),
    ]);
    let env = env_with("ollama", &server, "    sandbox: workspace-write\n");
    let r = env.run(&["send", "--json", "print a lot"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let shown = results(&events)[0]["output"]
        .as_str()
        .expect("output")
        .to_owned();
    let note = "[output cut: 65536 of 100014 bytes shown; the whole output is kept in the ledger]";
    assert!(shown.ends_with(note), "{}", &shown[shown.len() - 200..]);
    let second = server.requests()[1].json();
    let to_model = second["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned();
    assert_eq!(to_model.expect("tool message")["content"], json!(shown));
    let show = env.run(&["show", "--json", &turn_of(&events)]);
    let turn: Value = serde_json::from_str(&show.stdout).expect("json");
    let object = turn["tools"][0]["output_object"].as_str().expect("object");
    let path = env
        .repo()
        .join("objects")
        .join(&object[..2])
        .join(&object[2..]);
    let whole = std::fs::read(path).expect("object");
    assert_eq!(whole.len(), 100_014);
    assert!(whole.ends_with(b"a\n[exit code 0]"));
}

#[test]
fn a_conversation_rebuilt_from_the_ledger_includes_tool_rounds() {
    let server = FakeServer::with([
        ollama_call("read_file", json!({"path": "fact.txt"})),
        ollama_text("The fact is 42."),
        ollama_text("Still 42."),
    ]);
    let env = env_with("ollama", &server, "");
    env.write("fact.txt", "42\n");
    assert_eq!(env.run(&["send", "what is the fact?"]).code, 0);
    // Lose the checkpoint: the next turn rebuilds the conversation from the ledger.
    let checkpoints = env.repo().join("checkpoints/v1");
    std::fs::remove_dir_all(&checkpoints).expect("remove checkpoints");
    let r = env.run(&["send", "and now?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let third = server.requests()[2].json();
    let messages: Vec<Value> = third["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect();
    assert_eq!(
        messages,
        [
            json!({"role": "user", "content": "what is the fact?"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "fact.txt"}}}]}),
            json!({"role": "tool", "content": "42\n", "tool_name": "read_file"}),
            json!({"role": "assistant", "content": "The fact is 42."}),
            json!({"role": "user", "content": "and now?"}),
        ]
    );
}
