//! MCP both ways. Agents use a real MCP server's tools (`examples/mcp_peer.rs`,
//! built on rmcp's server side) through the loopback model server; `axocoatl mcp serve` is
//! driven by rmcp's client side.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::env::{bin, wait_until, TestEnv};
use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_call, ollama_text};
use crate::common::procs::{
    actor, advertised, agents_status, gone, json_lines, kill, tool_results as results,
    turn_until_tool_started, Serve,
};

/// The peer server binary, built by `cargo test` (or `cargo build --examples`).
fn peer() -> PathBuf {
    let p = PathBuf::from(bin())
        .parent()
        .expect("target dir")
        .join("examples/mcp_peer");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --examples` (cargo test builds it)",
        p.display()
    );
    p
}

/// A repository whose agent `coder` talks to `model` and may use MCP server `peer`
/// (`peer_args`, `server_extra` added to its entry); `agent_extra` is added to the agent.
fn env_with(model: &FakeServer, peer_args: &str, server_extra: &str, agent_extra: &str) -> TestEnv {
    let env = TestEnv::new();
    let r = env.run(&["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let log = env.work.join("peer.log");
    env.write(
        "axocoatl.yaml",
        &format!(
            "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nmcp_servers:\n  peer:\n    command: {}\n    args: [{peer_args}]\n    env: {{PEER_LOG: {}}}\n{server_extra}agents:\n  - id: coder\n    provider: llm\n    model: m\n    mcp_servers: [peer]\n{agent_extra}",
            model.url(),
            peer().display(),
            log.display(),
        ),
    );
    env
}

fn peer_log(env: &TestEnv) -> Vec<String> {
    std::fs::read_to_string(env.work.join("peer.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn warnings(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "warning")
        .map(|e| e["message"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn peer_pid(env: &TestEnv) -> String {
    peer_log(env)
        .iter()
        .find_map(|l| l.strip_prefix("pid ").map(str::to_owned))
        .expect("the peer logged its pid")
}

#[test]
fn an_agent_lists_and_calls_an_mcp_servers_tools_and_the_allowlist_is_exact() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__add", json!({"a": 2, "b": 40})),
        ollama_call("mcp__peer__slow", json!({"millis": 1})),
        ollama_text("The sum is 42."),
    ]);
    let env = env_with(
        &model,
        "",
        "",
        "    tools: [read_file, mcp__peer__echo, mcp__peer__add]\n",
    );
    let r = env.run(&["send", "--json", "add 2 and 40"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res.len(), 2, "{}", r.stdout);
    assert_eq!(res[0]["name"], "mcp__peer__add");
    assert_eq!(res[0]["output"], "42");
    assert_eq!(res[0]["is_error"], false);
    // A tool the allowlist leaves out is refused without reaching the server.
    assert_eq!(res[1]["is_error"], true);
    let refused = res[1]["output"].as_str().unwrap_or("");
    assert!(
        refused.contains("there is no tool \"mcp__peer__slow\"")
            && refused.contains("available: read_file, mcp__peer__echo, mcp__peer__add"),
        "{refused}"
    );
    assert_eq!(events.last().expect("end")["state"], "completed");

    // Every request advertised exactly the allowed tools, with the server's schema.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for req in &requests {
        assert_eq!(
            advertised(&req.json()),
            ["read_file", "mcp__peer__echo", "mcp__peer__add"]
        );
    }
    let add = requests[0].json()["tools"][2].clone();
    assert_eq!(add["function"]["description"], "Add two integers.");
    assert_eq!(add["function"]["parameters"]["required"], json!(["a", "b"]));
    // The model saw the result as a tool message.
    let second = requests[1].json();
    let last = second["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .expect("a message");
    assert_eq!(
        (&last["role"], &last["content"]),
        (&json!("tool"), &json!("42"))
    );

    // The server got only PATH, HOME and its env; it was called once and ended with the
    // process (stdin closed: eof).
    let log = peer_log(&env);
    assert_eq!(log[0], "started HOME,PATH,PEER_LOG", "{log:?}");
    let calls: Vec<&String> = log.iter().filter(|l| l.starts_with("call ")).collect();
    assert_eq!(calls, ["call add"]);
    assert_eq!(log.last().map(String::as_str), Some("eof"), "{log:?}");
    assert!(gone(&peer_pid(&env)));

    // Recorded like any tool, and searchable.
    let h = env.run(&["history", "--json", "--search", "mcp__peer__add"]);
    assert_eq!(h.code, 0, "{}", h.stderr);
    let turns = json_lines(&h.stdout);
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["tools"][0]["name"], "mcp__peer__add");
    assert_eq!(turns[0]["tools"][0]["output"], "42");
}

#[test]
fn without_an_allowlist_the_agent_gets_the_baseline_and_every_tool_of_its_servers() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__echo", json!({"text": "hello over mcp"})),
        ollama_text("done"),
    ]);
    let env = env_with(&model, "--tools, \"echo,noisy\"", "", "");
    let r = env.run(&["send", "--json", "echo"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    assert_eq!(results(&events)[0]["output"], "hello over mcp");
    let names = advertised(&model.requests()[0].json());
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("mcp__"))
            .collect::<Vec<_>>(),
        ["mcp__peer__echo", "mcp__peer__noisy"]
    );
    assert!(names.iter().any(|n| n == "read_file"), "{names:?}");
}

#[test]
fn a_server_that_crashes_mid_call_gives_an_error_result_and_the_turn_completes() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__crash", json!({})),
        ollama_call("mcp__peer__echo", json!({"text": "again"})),
        ollama_text("The server died."),
    ]);
    let env = env_with(&model, "", "", "");
    let r = env.run(&["send", "--json", "crash it"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(res[0]["is_error"], true);
    let out = res[0]["output"].as_str().unwrap_or("");
    assert!(
        out.contains("MCP server `peer` exited during the call of `crash` (exit status 3)")
            && out.contains("its stderr ends: peer: crashing on purpose"),
        "{out}"
    );
    // The next call of the same turn says the server is down, without restarting it.
    let again = res[1]["output"].as_str().unwrap_or("");
    assert!(
        res[1]["is_error"] == true && again.contains("exited during the call of `crash`"),
        "{again}"
    );
    let w = warnings(&events);
    assert!(
        w.iter()
            .any(|w| w.contains("exited during the call of `crash`")),
        "{w:?}"
    );
    assert_eq!(events.last().expect("end")["state"], "completed");
    assert_eq!(model.request_count(), 3);

    // Without --json the user sees the warning on stderr.
    model.push(ollama_call("mcp__peer__crash", json!({})));
    model.push(ollama_text("ok"));
    let r = env.run(&["send", "crash again"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("warning: MCP server `peer` exited during the call of `crash`"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_server_that_does_not_start_in_time_is_left_out_and_the_turn_goes_on() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__echo", json!({"text": "x"})),
        ollama_text("No server."),
    ]);
    let env = env_with(
        &model,
        "--slow-start, \"30\"",
        "    startup_timeout_secs: 1\n",
        "",
    );
    let r = env.run(&["send", "--json", "try"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let w = warnings(&events);
    assert!(
        w.iter().any(|w| w
            == "MCP server `peer` did not start within 1 s (startup_timeout_secs); its tools are left out of this turn"),
        "{w:?}"
    );
    let names = advertised(&model.requests()[0].json());
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    let res = results(&events);
    assert_eq!(res[0]["is_error"], true);
    assert!(
        res[0]["output"].as_str().is_some_and(|o| o.starts_with(
            "tool \"mcp__peer__echo\" is unavailable: MCP server `peer` did not start within 1 s"
        )),
        "{}",
        res[0]["output"]
    );
    assert_eq!(events.last().expect("end")["state"], "completed");
    wait_until("the slow server to be ended", || gone(&peer_pid(&env)));
}

#[test]
fn malformed_answers_timeouts_and_stdout_noise_are_error_results_or_warnings() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__malformed", json!({})),
        ollama_call("mcp__peer__slow", json!({"millis": 60000})),
        ollama_call("mcp__peer__noisy", json!({})),
        ollama_text("done"),
    ]);
    let env = env_with(&model, "", "    tool_timeout_secs: 1\n", "");
    let r = env.run(&["send", "--json", "go"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(
        res[0]["output"],
        "MCP server `peer` sent a malformed answer to the call of `malformed`: `result.content` is a string, not a list"
    );
    assert_eq!(
        res[1]["output"],
        "MCP server `peer`: `slow` did not answer within 1 s (tool_timeout_secs); the call was cancelled"
    );
    assert_eq!(
        (&res[2]["output"], &res[2]["is_error"]),
        (&json!("quiet now"), &json!(false))
    );
    let w = warnings(&events);
    assert!(
        w.iter().any(|w| w.contains("wrote 1 line to stdout that is not an MCP message (ignored), the first: `peer log: this line is not JSON`")),
        "{w:?}"
    );
    assert_eq!(events.last().expect("end")["state"], "completed");
    // The server heard the cancellation of the call that timed out.
    wait_until("the cancellation to reach the server", || {
        peer_log(&env).iter().any(|l| l == "cancelled slow")
    });
}

#[test]
fn a_stop_reaches_a_running_mcp_call_and_ends_the_server() {
    let model = FakeServer::with([ollama_call("mcp__peer__slow", json!({"millis": 600000}))]);
    let env = env_with(&model, "", "", "");
    let mut child = env
        .cmd(&["send", "--json", "wait a long time"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let turn = turn_until_tool_started(&mut lines);
    wait_until("the call to reach the server", || {
        peer_log(&env).iter().any(|l| l == "call slow")
    });
    let pid = peer_pid(&env);
    let stop = env.run(&["stop", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s.code().unwrap_or(-1);
        }
        assert!(Instant::now() < deadline, "send did not end after the stop");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(code, 4, "a stopped turn exits 4");
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
            .is_some_and(|o| o
                .contains("the call was cancelled and the MCP server's processes were terminated")),
        "{result}"
    );
    assert_eq!(rest.last().expect("ended")["state"], "stopped");
    // The cancellation notification came first, then the process group ended.
    wait_until("the cancellation to reach the server", || {
        peer_log(&env).iter().any(|l| l == "cancelled slow")
    });
    assert!(gone(&pid));
    assert_eq!(model.request_count(), 1, "no model call after the stop");
}

/// The pids the peer logged, one per start.
fn peer_pids(env: &TestEnv) -> Vec<String> {
    peer_log(env)
        .iter()
        .filter_map(|l| l.strip_prefix("pid ").map(str::to_owned))
        .collect()
}

fn pid_of(logged: &str) -> u64 {
    logged.parse().expect("a pid")
}

/// The `mcp_servers` entry of `coder`'s actor in `agents status --json`.
fn served_peer(env: &TestEnv) -> Value {
    let status = agents_status(env);
    actor(&status, "coder")["mcp_servers"][0].clone()
}

#[test]
fn under_serve_the_server_lives_with_the_agents_actor_and_is_started_again_when_it_dies() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__add", json!({"a": 1, "b": 2})),
        ollama_text("3."),
        ollama_call("mcp__peer__add", json!({"a": 2, "b": 2})),
        ollama_text("4."),
        ollama_call("mcp__peer__add", json!({"a": 3, "b": 2})),
        ollama_text("5."),
    ]);
    let env = env_with(&model, "", "", "");
    let serve = Serve::start(&env);
    serve.wait_log("actor ready");
    let add = |question: &str, sum: &str| {
        let r = env.run(&["send", "--json", question]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let events = json_lines(&r.stdout);
        assert_eq!(results(&events)[0]["output"], sum, "{}", r.stdout);
        assert_eq!(events.last().expect("end")["state"], "completed");
    };

    // The first turn starts the server; the second uses the same process (in one-shot
    // commands each turn starts its own).
    add("1 + 2?", "3");
    add("2 + 2?", "4");
    let first = peer_pids(&env);
    assert_eq!(first.len(), 1, "{:?}", peer_log(&env));
    assert!(!gone(&first[0]));
    wait_until("agents status to show the server", || {
        let m = served_peer(&env);
        m["state"] == "running" && m["pid"] == pid_of(&first[0]) && m["restarts"] == 0
    });

    // Killed between turns: the actor starts it again by itself, says so, and status shows
    // why and how often.
    let pid: u32 = first[0].parse().expect("pid");
    kill(pid, libc::SIGKILL);
    wait_until("the actor to start the server again", || {
        peer_pids(&env).len() == 2
    });
    serve.wait_log("started again");
    let second = peer_pids(&env)[1].clone();
    assert_ne!(second, first[0]);
    let mut seen = Value::Null;
    wait_until("agents status to show the restart", || {
        seen = served_peer(&env);
        seen["pid"] == pid_of(&second) && seen["restarts"] == 1
    });
    assert_eq!(seen["state"], "running");
    let why = seen["last_error"].as_str().unwrap_or("");
    assert!(why.contains("killed by signal 9"), "{seen}");
    let text = env.run(&["agents", "status"]);
    assert!(
        text.stdout.contains(&format!(
            "mcp server peer: running, pid {second}, 1 restart"
        )),
        "{}",
        text.stdout
    );

    // The next turn uses the new process; nothing else starts.
    add("3 + 2?", "5");
    assert_eq!(peer_pids(&env).len(), 2, "{:?}", peer_log(&env));

    // The server ends with its actor (stdin closed first: the peer logs eof).
    assert_eq!(serve.terminate(), 0);
    wait_until("the server to end with its actor", || gone(&second));
    assert_eq!(peer_log(&env).last().map(String::as_str), Some("eof"));
}

#[test]
fn mcp_list_starts_each_server_and_shows_its_tools() {
    let model = FakeServer::start();
    let env = env_with(&model, "--tools, \"echo,add\"", "", "");
    let r = env.run(&["mcp", "list"]);
    snap!("list", env.snap(&r));
    let j = env.run(&["mcp", "list", "--json"]);
    assert_eq!(j.code, 0, "{}", j.stderr);
    let v = json_lines(&j.stdout);
    assert_eq!(v[0]["state"], "running");
    assert_eq!(v[0]["agents"], json!(["coder"]));
    assert_eq!(v[0]["tools"][1]["name"], "mcp__peer__add");
    assert_eq!(
        v[0]["tools"][1]["input_schema"]["required"],
        json!(["a", "b"])
    );
    assert_eq!(model.request_count(), 0);

    // A server that cannot start: failed, exit 1.
    env.write(
        "axocoatl.yaml",
        "providers:\n  llm: {kind: ollama, base_url: \"http://127.0.0.1:9\"}\nmcp_servers:\n  gone:\n    command: ./no-such-server\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    mcp_servers: [gone]\n",
    );
    let r = env.run(&["mcp", "list"]);
    snap!("list_failed", env.snap(&r));
    let r = env.run(&["mcp", "list", "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(json_lines(&r.stdout)[0]["state"], "failed");
}

#[test]
fn validate_names_unknown_servers_and_entries_without_a_command() {
    let env = TestEnv::with_config(
        "providers:\n  llm: {kind: ollama, base_url: \"http://127.0.0.1:9\"}\nmcp_servers:\n  files:\n    command: python3\n    args: [fs.py]\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    mcp_servers: [filse]\n    tools: [read_file, mcp__github__search]\n",
    );
    let r = env.run(&["validate"]);
    snap!("validate_unknown", env.snap(&r));
    env.write(
        "axocoatl.yaml",
        "providers:\n  llm: {kind: ollama, base_url: \"http://127.0.0.1:9\"}\nmcp_servers:\n  files:\n    args: [fs.py]\n    tool_timeout_secs: 0\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    mcp_servers: [files]\n",
    );
    let r = env.run(&["validate"]);
    snap!("validate_no_command", env.snap(&r));
}

#[test]
fn help_of_the_mcp_commands() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help", &["mcp", "--help"][..]),
        ("list_help", &["mcp", "list", "--help"]),
        ("serve_help", &["mcp", "serve", "--help"]),
    ] {
        let r = env.run(args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        snap!(name, env.snap(&r));
    }
}

// ---- `axocoatl mcp serve`, driven by rmcp's client side ----

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};

struct Client {
    rt: tokio::runtime::Runtime,
    service: Option<RunningService<RoleClient, ClientConfig>>,
    child: tokio::process::Child,
}

impl Client {
    fn start(env: &TestEnv, extra: &[&str]) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut args = vec!["mcp", "serve"];
        args.extend_from_slice(extra);
        let std_cmd = env.cmd(&args);
        let (child, service) = rt.block_on(async {
            let mut cmd = tokio::process::Command::from(std_cmd);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true);
            let mut child = cmd.spawn().expect("spawn mcp serve");
            let stdout = child.stdout.take().expect("stdout");
            let stdin = child.stdin.take().expect("stdin");
            let info = ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("axocoatl-test", "0"),
            );
            let service = info.serve((stdout, stdin)).await.expect("handshake");
            (child, service)
        });
        Client {
            rt,
            service: Some(service),
            child,
        }
    }

    fn tools(&self) -> Vec<String> {
        let service = self.service.as_ref().expect("service");
        self.rt
            .block_on(service.peer().list_all_tools())
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    fn call(&self, name: &str, args: Value) -> CallToolResult {
        let service = self.service.as_ref().expect("service");
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = args.as_object().cloned();
        self.rt
            .block_on(service.peer().call_tool(params))
            .expect("tools/call")
    }

    /// Closes stdin and waits for the server to exit; its exit code.
    fn close(mut self) -> i32 {
        let service = self.service.take().expect("service");
        self.rt.block_on(async {
            let _ = service.cancel().await;
            let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
                .await
                .expect("mcp serve exits when stdin closes")
                .expect("wait");
            status.code().unwrap_or(-1)
        })
    }
}

fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mcp_serve_sends_a_turn_and_finds_it_in_history() {
    let model = FakeServer::with([ollama_text("Paris is the capital of France.")]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        model.url()
    ));
    let client = Client::start(&env, &[]);
    assert_eq!(
        client.tools(),
        [
            "send",
            "stop",
            "approve",
            "history_search",
            "show_turn",
            "memory_search",
            "approvals"
        ]
    );
    let sent = client.call("send", json!({"message": "What is the capital of France?"}));
    assert_ne!(sent.is_error, Some(true), "{}", text_of(&sent));
    let s = sent.structured_content.clone().expect("structured");
    assert_eq!(s["state"], "completed");
    assert_eq!(s["agent"], "helper");
    assert_eq!(s["answer"], "Paris is the capital of France.");
    let turn = s["turn"].as_str().expect("turn id").to_owned();
    // The text content carries the same (for clients that read only text).
    let text: Value = serde_json::from_str(&text_of(&sent)).expect("json text");
    assert_eq!(text["turn"], turn.as_str());

    let found = client.call("history_search", json!({"text": "capital of FRANCE"}));
    let f = found.structured_content.clone().expect("structured");
    assert_eq!(f["turns"].as_array().map(Vec::len), Some(1), "{f}");
    assert_eq!(f["turns"][0]["turn"], turn.as_str());
    assert_eq!(f["turns"][0]["answer"], "Paris is the capital of France.");
    let none = client.call("history_search", json!({"text": "Berlin"}));
    assert_eq!(
        none.structured_content.expect("structured")["turns"],
        json!([])
    );

    let shown = client.call("show_turn", json!({"turn": &turn[..8]}));
    let v = shown.structured_content.expect("structured");
    assert_eq!(v["request"], "What is the capital of France?");
    assert_eq!(v["state"], "completed");

    // The turn is in the repository like any other.
    let h = env.run(&["history", "--json"]);
    assert_eq!(json_lines(&h.stdout)[0]["turn"], turn.as_str());

    // Errors are error results with what to do.
    let bad = client.call("send", json!({"message": "hi", "agent": "nobody"}));
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(
        text_of(&bad),
        "unknown agent \"nobody\"; the agents are: helper"
    );
    // What to do next is said in the server's terms (its tools), never as a command line.
    let stop = client.call("stop", json!({"turn": &turn}));
    assert_eq!(stop.is_error, Some(true));
    assert_eq!(
        text_of(&stop),
        format!("turn {turn} already completed (hint: only an active turn can be stopped; `show_turn` shows its state)")
    );
    let unknown = client.call("show_turn", json!({"turn": "0123abcd"}));
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(
        text_of(&unknown),
        "no turn matches \"0123abcd\" (hint: `history_search` finds turns and their ids)"
    );
    assert_eq!(client.close(), 0);
    assert_eq!(model.request_count(), 1);
}

#[test]
fn mcp_serve_read_only_refuses_send() {
    let model = FakeServer::start();
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        model.url()
    ));
    let client = Client::start(&env, &["--read-only"]);
    assert_eq!(
        client.tools(),
        ["history_search", "show_turn", "memory_search", "approvals"]
    );
    let refused = client.call("send", json!({"message": "hi"}));
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(
        text_of(&refused),
        "`send` is refused: this server runs with --read-only (it offers history_search, show_turn, memory_search and approvals)"
    );
    let refused = client.call("approve", json!({"turn": "0123abcd"}));
    assert_eq!(refused.is_error, Some(true));
    let found = client.call("history_search", json!({"text": "hi"}));
    assert_ne!(found.is_error, Some(true), "{}", text_of(&found));
    assert_eq!(client.close(), 0);
    assert_eq!(model.request_count(), 0, "no turn ran");
    let h = env.run(&["history"]);
    assert_eq!(h.stdout, "");
}

#[test]
fn mcp_serve_memory_search_finds_what_an_agent_remembers_in_its_own_scope_only() {
    let model = FakeServer::start();
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n  - id: other\n    provider: llm\n    model: m\n",
        model.url()
    ));
    for fact in [
        "The staging database listens on port 5433.",
        "Deployments happen on Tuesdays after the standup.",
    ] {
        let r = env.run(&["memory", "add", "-a", "helper", fact]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let r = env.run(&[
        "memory",
        "add",
        "-a",
        "other",
        "The staging database is called owl.",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Read-only servers offer it too.
    let client = Client::start(&env, &["--read-only"]);
    let found = client.call(
        "memory_search",
        json!({"query": "staging database port", "top_k": 1}),
    );
    assert_ne!(found.is_error, Some(true), "{}", text_of(&found));
    let v = found.structured_content.clone().expect("structured");
    assert_eq!(v["agent"], "main:helper", "{v}");
    let records = v["records"].as_array().expect("records");
    assert_eq!(records.len(), 1, "{v}");
    assert_eq!(
        records[0]["text"],
        "The staging database listens on port 5433."
    );
    assert_eq!(records[0]["kind"], "added");
    // Another agent's scope has its own records only.
    let theirs = client.call(
        "memory_search",
        json!({"query": "staging database", "agent": "other"}),
    );
    let t = theirs.structured_content.clone().expect("structured");
    let texts: Vec<&str> = t["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| r["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(texts, ["The staging database is called owl."], "{t}");
    // Bad input is an error result saying what is wrong.
    let missing = client.call("memory_search", json!({}));
    assert_eq!(missing.is_error, Some(true));
    assert!(text_of(&missing).contains("query"), "{}", text_of(&missing));
    let nobody = client.call("memory_search", json!({"query": "x", "agent": "nobody"}));
    assert_eq!(nobody.is_error, Some(true));
    assert!(
        text_of(&nobody).contains("unknown agent \"nobody\""),
        "{}",
        text_of(&nobody)
    );
    assert_eq!(client.close(), 0);
    assert_eq!(model.request_count(), 0, "searching memory calls no model");
}

#[test]
fn mcp_serve_outside_a_repository_fails_at_once() {
    let env = TestEnv::new();
    // `-C .`: no home repository to fall back to.
    let r = env.run(&["-C", ".", "mcp", "serve"]);
    assert_eq!(r.code, 10, "{}", r.stderr);
    assert!(r.stderr.contains("no axocoatl repository"), "{}", r.stderr);
}

/// An answer longer than one MCP message may be (16 MiB) fails its call at once, naming
/// the limit, instead of waiting for `tool_timeout_secs`; the server stays usable.
#[test]
fn an_mcp_answer_past_16_mib_fails_its_call_at_once() {
    let model = FakeServer::with([
        ollama_call("mcp__peer__huge", json!({"bytes": 20 << 20})),
        ollama_call("mcp__peer__echo", json!({"text": "still here"})),
        ollama_text("done"),
    ]);
    let env = env_with(&model, "", "    tool_timeout_secs: 600\n", "");
    let r = env.run(&["send", "--json", "go"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = results(&events);
    assert_eq!(
        (&res[0]["output"], &res[0]["is_error"]),
        (
            &json!("MCP server `peer` answered the call of `huge` with a message longer than 16 MiB, the most one MCP message may be; the answer was dropped"),
            &json!(true)
        )
    );
    assert_eq!(res[1]["output"], "still here");
}

/// `mcp serve` answers a request longer than one MCP message may be with an error under
/// the request's id, and goes on serving.
#[test]
fn mcp_serve_answers_a_request_past_16_mib_with_an_error() {
    let env = TestEnv::with_config(
        "providers:\n  llm: {kind: ollama, base_url: \"http://127.0.0.1:9\"}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
    );
    let client = Client::start(&env, &[]);
    let service = client.service.as_ref().expect("service");
    let mut params = CallToolRequestParams::new("history_search".to_owned());
    params.arguments = json!({"text": "x".repeat(20 << 20)}).as_object().cloned();
    let answer = client.rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), service.peer().call_tool(params))
            .await
            .expect("an answer, not silence")
    });
    let e = answer.expect_err("refused");
    assert!(
        e.to_string()
            .contains("the request is longer than 16 MiB, the most one MCP message may be"),
        "{e}"
    );
    let found = client.call("history_search", json!({"text": "anything"}));
    assert_ne!(found.is_error, Some(true), "{}", text_of(&found));
    assert_eq!(client.close(), 0);
}

#[test]
fn mcp_serve_lists_and_answers_approvals_and_its_send_says_a_turn_waits() {
    let model = FakeServer::with([
        ollama_call("run_command", json!({"command": "echo ran >> marker.txt"})),
        ollama_text("Done."),
    ]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: ops\n    provider: llm\n    model: m\n    sandbox: full-access\n    approvals: [run_command]\n",
        model.url()
    ));
    let client = Client::start(&env, &[]);
    let sent = client.call("send", json!({"message": "deploy"}));
    assert_ne!(sent.is_error, Some(true), "{}", text_of(&sent));
    let s = sent.structured_content.clone().expect("structured");
    assert_eq!(s["state"], "waiting", "{s}");
    let turn = s["turn"].as_str().expect("turn").to_owned();
    let listed = client.call("approvals", json!({}));
    let waiting = listed.structured_content.clone().expect("structured")["waiting"].clone();
    assert_eq!(waiting[0]["turn"], turn.as_str(), "{waiting}");
    assert_eq!(waiting[0]["tool"], "run_command");
    let approved = client.call("approve", json!({"turn": turn}));
    assert_ne!(approved.is_error, Some(true), "{}", text_of(&approved));
    let a = approved.structured_content.clone().expect("structured");
    assert_eq!(
        (a["state"].as_str(), a["answer"].as_str()),
        (Some("completed"), Some("Done."))
    );
    let again = client.call("approve", json!({"turn": turn}));
    assert_eq!(again.is_error, Some(true));
    assert!(
        text_of(&again).contains("does not wait for approval"),
        "{}",
        text_of(&again)
    );
    assert_eq!(client.close(), 0);
    let ran = std::fs::read_to_string(env.work.join("marker.txt")).expect("marker");
    assert_eq!(ran, "ran\n");
    let show = env.run(&["show", &turn, "--json"]);
    let v: Value = serde_json::from_str(&show.stdout).expect("show");
    assert_eq!(
        v["approvals"][0]["by"],
        "a user without $USER via mcp serve"
    );
}
