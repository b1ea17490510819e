//! Durable approvals through the real binary: a turn whose tool call waits for a person
//! survives kill -9 of every process and is continued by `approve` from another process,
//! the command running exactly once (also with eight `approve` at once); a denial and its
//! reason reach the model; `stop`, `approval_timeout`, the terminal question (through a
//! pty), `approve` through `serve`, the `on_approval_request:` program, automations' run
//! history, `validate`, and what `show`, `history`, `approvals` and `export` say.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::env::{wait_until, Run, TestEnv, PINNED_NOW};
use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_call, ollama_calls, ollama_text};
use crate::common::procs::{actor, agents_status, json_lines, kill, tool_results, Serve};
use crate::common::pty::Pty;

/// The agent `ops` runs commands unconfined, each held for approval; its scripted model asks
/// to run one command (which appends a line to `marker.txt`), then answers "Deployed.".
const OPS: &str = "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: ops\n    provider: canned\n    sandbox: full-access\n    approvals: [run_command]\n";

const REPLIES: &str = r#"
replies:
  - tool_calls:
      - name: run_command
        arguments: {command: "echo ran >> marker.txt"}
    usage: {prompt_tokens: 12, completion_tokens: 7}
  - text: "Deployed."
  - match: "status"
    text: "All quiet."
"#;

fn ops_env(extra: &str) -> TestEnv {
    let mut env = TestEnv::with_config(&format!("{OPS}{extra}"));
    env.write("replies.yaml", REPLIES);
    env.set_env("USER", "alice");
    env
}

/// The turn id of a `turn <id>` line.
fn turn_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("turn ")
                .map(|r| r.split(' ').next().unwrap_or(r))
        })
        .unwrap_or_else(|| panic!("no turn line in {stderr:?}"))
        .to_owned()
}

/// How many times the held command ran.
fn runs(env: &TestEnv) -> usize {
    std::fs::read_to_string(env.work.join("marker.txt"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn show(env: &TestEnv, turn: &str) -> Value {
    let r = env.run(&["show", turn, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("show json")
}

/// The ledger's records of `kind`, as `export --format json` lists them.
fn records_of(env: &TestEnv, kind: &str) -> Vec<Value> {
    let r = env.run(&["export", "--all", "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).expect("export json");
    v["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .flat_map(|t| t["records"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["kind"] == kind)
        .collect()
}

fn waiting_send(env: &TestEnv) -> (Run, String) {
    let r = env.run(&["send", "deploy the release"]);
    assert_eq!(r.code, 12, "{}", r.stderr);
    let turn = turn_of(&r.stderr);
    (r, turn)
}

#[test]
fn a_waiting_turn_survives_kill_9_and_approve_from_another_process_runs_it_once() {
    let env = ops_env("on_approval_request: {command: ./hook.sh}\n");
    // The program hears of the request, then stays: its send is killed meanwhile.
    env.write(
        "hook.sh",
        "#!/bin/sh\necho $$ > hook.pid\ncat > hook-input.json\nexec sleep 30\n",
    );
    std::fs::set_permissions(
        env.work.join("hook.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let mut send = env
        .cmd(&["send", "deploy the release"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn send");
    wait_until("the program to read the request", || {
        std::fs::read_to_string(env.work.join("hook-input.json")).is_ok_and(|s| s.ends_with('}'))
    });
    // kill -9 of everything: the send and the program it runs.
    let hook: u32 = std::fs::read_to_string(env.work.join("hook.pid"))
        .expect("pid")
        .trim()
        .parse()
        .expect("pid number");
    kill(send.id(), libc::SIGKILL);
    kill(hook, libc::SIGKILL);
    let _ = send.wait();
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(env.work.join("hook-input.json")).expect("hook input"),
    )
    .expect("hook json");
    let turn = request["turn"].as_str().expect("turn").to_owned();
    assert_eq!(request["agent"], "ops");
    assert_eq!(request["calls"][0]["tool"], "run_command");
    assert!(request["calls"][0]["arguments"]
        .as_str()
        .is_some_and(|a| a.contains("echo ran")));
    assert_eq!(request["approve"], json!(["axocoatl", "approve", turn]));
    // Nothing ran; the turn waits (commands that sweep orphans leave it), holding its
    // session.
    for _ in 0..2 {
        let h = env.run(&["history", "--json"]);
        let v: Value = serde_json::from_str(h.stdout.trim()).expect("history json");
        assert_eq!(v["state"], "waiting", "{}", h.stdout);
    }
    assert_eq!(runs(&env), 0);
    let listed = json_lines(&env.run(&["approvals", "--json"]).stdout);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["turn"], turn.as_str());
    assert_eq!(listed[0]["tool"], "run_command");
    assert_eq!(listed[0]["rule"], "run_command");
    assert_eq!(listed[0]["decision"], Value::Null);
    let busy = env.run(&["send", "status?"]);
    assert_eq!(busy.code, 8, "{}", busy.stderr);
    assert!(
        busy.stderr.contains("waits for approval"),
        "{}",
        busy.stderr
    );
    assert!(
        busy.stderr.contains(&format!("axocoatl approve {turn}")),
        "{}",
        busy.stderr
    );
    // Another process answers: the turn goes on from where it waited, to its end.
    let approved = env.run(&["approve", &turn]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert_eq!(approved.stdout, "Deployed.\n");
    assert!(
        approved.stderr.contains(&format!("turn {turn} continues")),
        "{}",
        approved.stderr
    );
    assert_eq!(runs(&env), 1, "the command ran once");
    let t = show(&env, &turn);
    assert_eq!(t["state"], "completed");
    assert_eq!(t["approvals"][0]["decision"], "approved");
    assert_eq!(t["approvals"][0]["by"], "alice via approve");
    assert_eq!(t["tools"][0]["name"], "run_command");
    assert_eq!(t["tools"][0]["exit_code"], 0);
    let again = env.run(&["approve", &turn]);
    assert_eq!(again.code, 6, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("does not wait for approval: it ended completed"),
        "{}",
        again.stderr
    );
    assert_eq!(runs(&env), 1);
    assert_eq!(env.run(&["fsck"]).code, 0);
    // The session is free again.
    assert_eq!(env.run(&["send", "status?"]).code, 0);
}

#[test]
fn a_send_killed_before_its_lock_says_it_waits_leaves_the_turn_waiting_by_the_ledger() {
    let env = ops_env("");
    // Aborted (as kill -9 would) right after the requests are durable, before the session
    // lock's note says the turn waits: only the ledger says so.
    let r = Run::from_output(
        env.cmd(&["send", "deploy the release"])
            .env("AXOCOATL_FAILPOINTS", "approval.requested=crash")
            .output()
            .expect("run"),
    );
    assert_ne!(r.code, 12, "{}", r.stderr);
    let turn = turn_of(&r.stderr);
    for _ in 0..2 {
        let h = env.run(&["history", "--json"]);
        let v: Value = serde_json::from_str(h.stdout.trim()).expect("history json");
        assert_eq!(v["state"], "waiting", "{}", h.stdout);
    }
    assert_eq!(env.run(&["send", "status?"]).code, 8);
    let approved = env.run(&["approve", &turn]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert_eq!(runs(&env), 1);
}

#[test]
fn a_continuation_killed_while_its_command_runs_never_runs_it_again() {
    let env = ops_env("");
    env.write(
        "replies.yaml",
        "replies:\n  - tool_calls:\n      - name: run_command\n        arguments: {command: \"echo ran >> marker.txt; sleep 5\"}\n  - text: \"Deployed.\"\n",
    );
    let (_, turn) = waiting_send(&env);
    let mut approve = env
        .cmd(&["approve", &turn])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn approve");
    wait_until("the command to run", || runs(&env) == 1);
    kill(approve.id(), libc::SIGKILL);
    let _ = approve.wait();
    // The next command finds the turn's process gone: the call had started, so the turn
    // is interrupted, and nothing runs it again.
    let h = env.run(&["history", "--json"]);
    let v: Value = serde_json::from_str(h.stdout.trim()).expect("history json");
    assert_eq!(v["state"], "interrupted", "{}", h.stdout);
    let again = env.run(&["approve", &turn]);
    assert_eq!(again.code, 6, "{}", again.stderr);
    assert_eq!(runs(&env), 1);
}

/// The `on_approval_request:` program and the files in its `args:` run outside the sandbox:
/// the write tools refuse them and commands find them read-only, as for MCP server programs.
#[test]
fn the_approval_program_and_its_files_are_out_of_the_agents_reach() {
    let server = FakeServer::with([
        ollama_calls(&[
            ("write_file", json!({"path": "hook.sh", "content": "evil"})),
            (
                "edit_file",
                json!({"path": "hook.cfg", "old": "ops", "new": "evil"}),
            ),
            ("run_command", json!({"command": "echo evil >> hook.sh"})),
            ("run_command", json!({"command": "echo ok > kept.txt"})),
        ]),
        ollama_text("Done."),
    ]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\non_approval_request: {{command: ./hook.sh, args: [hook.cfg]}}\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    sandbox: workspace-write\n",
        server.url()
    ));
    let files = [
        ("hook.sh", "#!/bin/sh\ncat >/dev/null\n"),
        ("hook.cfg", "to: ops\n"),
    ];
    for (path, text) in files {
        env.write(path, text);
    }
    let r = env.run(&["send", "--json", "change the notifier"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = tool_results(&events);
    assert_eq!(res.len(), 4, "{}", r.stdout);
    for (e, what) in res[..2].iter().zip([
        "the program of `on_approval_request`",
        "a file in the `args:` of `on_approval_request`",
    ]) {
        assert_eq!(e["is_error"], true, "{e}");
        let out = e["output"].as_str().expect("output");
        assert!(
            out.contains(what) && out.contains("tools never change it"),
            "{out}"
        );
    }
    if axocoatl::tools::sandbox::Support::probe().landlock_abi >= 1 {
        assert_eq!(res[2]["is_error"], true, "{}", res[2]);
        assert_eq!(res[3]["exit_code"], json!(0), "{}", res[3]);
    }
    for (path, text) in files {
        assert_eq!(
            std::fs::read_to_string(env.work.join(path)).expect("read"),
            text,
            "{path}"
        );
    }
}

#[test]
fn a_send_that_waits_exits_12_and_says_how_to_answer_as_text_and_as_json() {
    let env = ops_env("");
    let (r, turn) = waiting_send(&env);
    snap!("waiting_send", env.snap(&r));
    let json = env.run(&["send", "-n", "--json", "deploy the release"]);
    assert_eq!(json.code, 12, "{}", json.stderr);
    let events = json_lines(&json.stdout);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds, ["turn.begun", "approval.requested", "turn.waiting"]);
    assert_eq!(events[1]["name"], "run_command");
    assert_eq!(events[1]["rule"], "run_command");
    assert_eq!(events[2]["exit_code"], 12);
    assert_eq!(
        events[2]["calls"][0],
        format!(
            "run_command ({})",
            events[1]["call_id"].as_str().expect("call")
        )
    );
    snap!(
        "approvals_listing",
        env.snap(&env.run(&["approvals", "--all"]))
    );
    snap!("history_waiting", env.snap(&env.run(&["history"])));
    let _ = turn;
}

#[test]
fn a_denial_and_its_reason_reach_the_model_and_the_command_never_runs() {
    let model = FakeServer::with([
        ollama_call("run_command", json!({"command": "echo ran >> marker.txt"})),
        ollama_text("Understood: not deploying today."),
    ]);
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: ops\n    provider: llm\n    model: m\n    sandbox: full-access\n    approvals: [{{command: 'echo *'}}]\n",
        model.url()
    ));
    env.set_env("USER", "alice");
    let (_, turn) = waiting_send(&env);
    let denied = env.run(&["approve", &turn, "--deny", "--reason", "not on Fridays"]);
    assert_eq!(denied.code, 0, "{}", denied.stderr);
    assert_eq!(denied.stdout, "Understood: not deploying today.\n");
    assert!(
        denied
            .stderr
            .contains("run_command denied by alice via approve: not on Fridays"),
        "{}",
        denied.stderr
    );
    assert_eq!(runs(&env), 0, "a denied command never runs");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].json()["messages"]
        .as_array()
        .expect("messages")
        .clone();
    let answer = messages.last().expect("tool message");
    assert_eq!(answer["role"], "tool");
    let said = answer["content"].as_str().expect("content");
    assert!(
        said.contains("denied") && said.contains("not on Fridays"),
        "{said}"
    );
    let t = show(&env, &turn);
    assert_eq!(t["state"], "completed");
    assert_eq!(t["approvals"][0]["decision"], "denied");
    assert_eq!(t["approvals"][0]["reason"], "not on Fridays");
    assert_eq!(t["approvals"][0]["rule"], "command: echo *");
    assert_eq!(t["tools"][0]["is_error"], true);
    snap!("show_denied", env.snap(&env.run(&["show", &turn])));
}

#[test]
fn eight_approvals_at_once_record_one_decision_and_run_the_command_once() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    // Each reads the call undecided, then pauses: their decisions meet under the lock.
    let children: Vec<_> = (0..8)
        .map(|_| {
            env.cmd(&["approve", &turn])
                .env("AXOCOATL_FAILPOINTS", "approve.decide=sleep(3000)")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn approve")
        })
        .collect();
    let runs_of: Vec<Run> = children
        .into_iter()
        .map(|c| Run::from_output(c.wait_with_output().expect("wait")))
        .collect();
    let codes: Vec<i32> = runs_of.iter().map(|r| r.code).collect();
    let said: Vec<&str> = runs_of.iter().map(|r| r.stderr.as_str()).collect();
    assert!(
        codes.iter().all(|c| *c == 0 || *c == 6),
        "{codes:?} {said:#?}"
    );
    assert!(codes.contains(&0), "{codes:?}");
    // Those that lost the race say who answered and when: those whose decision met the
    // winner's under the lock, those that came when the turn had gone on with it, and those
    // that found it no longer waiting.
    let lost = runs_of
        .iter()
        .filter(|r| r.code == 6)
        .filter(|r| {
            r.stderr
                .contains("was already approved by alice via approve at")
        })
        .count();
    assert!(lost >= 1, "{codes:?} {said:#?}");
    for r in runs_of.iter().filter(|r| r.code == 6) {
        assert!(
            r.stderr.contains("approved by alice via approve at 20"),
            "{}",
            r.stderr
        );
    }
    assert_eq!(records_of(&env, "ApprovalDecided").len(), 1);
    assert_eq!(runs(&env), 1, "the command ran once");
    assert_eq!(show(&env, &turn)["state"], "completed");
    let started = records_of(&env, "ToolStarted");
    assert_eq!(started.len(), 1, "{started:?}");
}

#[test]
fn an_approve_that_finds_the_turn_gone_on_says_who_answered_and_when() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    let log = env.work.join("failpoints.log");
    // It reads the call undecided, then pauses; meanwhile another approves and the turn
    // runs to its end.
    let late = env
        .cmd(&["approve", &turn])
        .env("AXOCOATL_FAILPOINTS", "approve.decide=sleep(4000)")
        .env("AXOCOATL_FAILPOINTS_LOG", &log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn approve");
    wait_until("the late approve to read the call", || {
        std::fs::read_to_string(&log).is_ok_and(|s| s.contains("approve.decide"))
    });
    let first = env.run(&["approve", &turn]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let late = Run::from_output(late.wait_with_output().expect("wait"));
    assert_eq!(late.code, 6, "{}", late.stderr);
    assert!(
        late.stderr
            .contains("its call call_0 was approved by alice via approve at 20")
            || late.stderr.contains(&format!(
                "call call_0 of turn {turn} was already approved by alice via approve at 20"
            )),
        "{}",
        late.stderr
    );
    // And one that comes after the end says so too.
    let after = env.run(&["approve", &turn]);
    assert!(
        after.stderr.contains(
            "does not wait for approval: it ended completed; its call call_0 was approved by alice via approve at 20"
        ),
        "{}",
        after.stderr
    );
    assert_eq!(records_of(&env, "ApprovalDecided").len(), 1);
    assert_eq!(runs(&env), 1);
}

#[test]
fn a_call_decided_with_no_run_waits_until_approve_continues_it() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    let call = json_lines(&env.run(&["approvals", "--json"]).stdout)[0]["call_id"]
        .as_str()
        .expect("call")
        .to_owned();
    let decided = env.run(&["approve", &turn, &call, "--no-run"]);
    assert_eq!(decided.code, 0, "{}", decided.stderr);
    assert_eq!(decided.stdout, format!("{call} (run_command) approved\n"));
    assert_eq!(runs(&env), 0);
    let listed = json_lines(&env.run(&["approvals", "--json"]).stdout);
    assert_eq!(listed[0]["decision"], "approved");
    // A second decision on the call is refused, naming the first.
    let late = env.run(&["approve", &turn, &call, "--deny"]);
    assert_eq!(late.code, 6, "{}", late.stderr);
    assert!(
        late.stderr
            .contains("was already approved by alice via approve"),
        "{}",
        late.stderr
    );
    let go = env.run(&["approve", &turn]);
    assert_eq!(go.code, 0, "{}", go.stderr);
    assert_eq!(runs(&env), 1);
}

#[test]
fn send_wait_queues_behind_a_waiting_turn_until_it_is_answered() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    let mut queued = env
        .cmd(&["send", "--wait", "status?"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send --wait");
    // It stays queued while the turn waits (a plain send is refused meanwhile).
    assert_eq!(env.run(&["send", "status?"]).code, 8);
    assert!(queued.try_wait().expect("try_wait").is_none());
    assert_eq!(env.run(&["approve", &turn]).code, 0);
    let out = queued.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "All quiet.\n");
}

/// The terminal record of a turn ended while it waited counts the model call it made
/// before it waited (recorded with its cost), once.
fn uses_its_call(t: &Value) {
    assert_eq!(t["calls"][0]["prompt_tokens"], 12, "{t}");
    let usage = &t["usage"];
    assert_eq!(
        (&usage["prompt_tokens"], &usage["completion_tokens"]),
        (&Value::from(12), &Value::from(7)),
        "{t}"
    );
    assert_eq!(
        (&usage["calls"], &usage["complete"]),
        (&Value::from(1), &Value::from(true)),
        "{t}"
    );
}

#[test]
fn stop_ends_a_waiting_turn_and_frees_its_session() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    // A waiting turn holds its session as a running one does.
    let rewound = env.run(&["rewind", &turn, "--yes"]);
    assert_eq!(rewound.code, 8, "{}", rewound.stderr);
    assert!(
        rewound.stderr.contains("waits for approval"),
        "{}",
        rewound.stderr
    );
    let stopped = env.run(&["stop", &turn, "--wait"]);
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    assert_eq!(
        stopped.stdout,
        format!("stop requested for turn {turn}\nturn {turn} stopped\n")
    );
    let t = show(&env, &turn);
    assert_eq!(t["state"], "stopped");
    assert_eq!(t["error"], "stopped while it waited for approval");
    assert_eq!(t["approvals"][0]["decision"], Value::Null);
    uses_its_call(&t);
    let late = env.run(&["approve", &turn]);
    assert_eq!(late.code, 6, "{}", late.stderr);
    assert!(late.stderr.contains("it ended stopped"), "{}", late.stderr);
    assert_eq!(env.run(&["stop", &turn]).code, 6);
    assert_eq!(runs(&env), 0);
    let next = env.run(&["send", "status?"]);
    assert_eq!(
        (next.code, next.stdout.as_str()),
        (0, "All quiet.\n"),
        "{}",
        next.stderr
    );
}

#[test]
fn a_request_left_past_approval_timeout_ends_the_turn_failed() {
    let env = ops_env("");
    env.write(
        "axocoatl.yaml",
        &OPS.replace(
            "approvals: [run_command]",
            "approvals: [run_command]\n    approval_timeout: 30m",
        ),
    );
    let (_, turn) = waiting_send(&env);
    let listed = json_lines(&env.run(&["approvals", "--json"]).stdout);
    assert_eq!(listed[0]["expires_at"], "2026-01-02T03:34:05.000Z");
    // Before it expires nothing changes; after, any command finds it and records it.
    let at = |now: &str, args: &[&str]| {
        Run::from_output(
            env.cmd(args)
                .env("AXOCOATL_NOW", now)
                .output()
                .expect("run"),
        )
    };
    assert!(at("2026-01-02T03:30:00Z", &["history", "--json"])
        .stdout
        .contains("\"waiting\""));
    let h = at("2026-01-02T03:40:00Z", &["history", "--json"]);
    let v: Value = serde_json::from_str(h.stdout.trim()).expect("json");
    assert_eq!(v["state"], "failed", "{}", h.stdout);
    assert_eq!(
        v["error"],
        "no decision on call call_0 (run_command) within 30m (approval_timeout)"
    );
    let t = show(&env, &turn);
    assert_eq!(t["approvals"][0]["decision"], "expired");
    uses_its_call(&t);
    assert_eq!(t["approvals"][0]["by"], "approval_timeout");
    let late = env.run(&["approve", &turn]);
    assert_eq!(late.code, 6, "{}", late.stderr);
    assert_eq!(runs(&env), 0);
    assert_eq!(env.run(&["send", "status?"]).code, 0);
    let _ = PINNED_NOW;
}

#[test]
fn on_a_terminal_the_question_is_asked_at_once_yes_no_and_always() {
    let env = ops_env("");
    env.write(
        "replies.yaml",
        r#"
replies:
  - match: "first"
    tool_calls: [{name: run_command, arguments: {command: "echo ran >> marker.txt"}}]
  - match: "first"
    text: "Done once."
  - match: "second"
    tool_calls: [{name: run_command, arguments: {command: "echo ran >> marker.txt"}}]
  - match: "second"
    text: "Done twice."
  - match: "third"
    tool_calls: [{name: run_command, arguments: {command: "echo ran >> marker.txt"}}]
  - match: "third"
    text: "Done again."
"#,
    );
    let on_terminal = |message: &str, keys: &[&str]| -> (i32, String, String) {
        let mut cmd = env.cmd(&["send", message]);
        cmd.stdout(Stdio::piped());
        let mut pty = Pty::attach(&mut cmd);
        let child = cmd.spawn().expect("spawn send");
        for (i, key) in keys.iter().enumerate() {
            let prompts = |pty: &Pty| {
                pty.seen().matches("approve? [y]es").count() + pty.seen().matches("why (").count()
            };
            wait_until("the question", || prompts(&pty) > i);
            pty.type_keys(key);
        }
        let out = child.wait_with_output().expect("wait");
        wait_until("the turn's end on the terminal", || {
            pty.seen().contains("turn ") && out.status.code().is_some()
        });
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            pty.seen(),
        )
    };
    // No: with a reason, which the model reads.
    let (code, out, seen) = on_terminal("the first try", &["n\r", "too risky\r"]);
    assert_eq!(code, 0, "{seen}");
    assert_eq!(out, "Done once.\n");
    assert!(seen.contains("ops wants to run run_command"), "{seen}");
    assert_eq!(runs(&env), 0);
    // Always: this call runs, and the same rule's later calls in the session run unasked.
    let (code, out, seen) = on_terminal("the second try", &["a\r"]);
    assert_eq!((code, out.as_str()), (0, "Done twice.\n"), "{seen}");
    assert_eq!(runs(&env), 1);
    let (code, out, seen) = on_terminal("the third try", &[]);
    assert_eq!((code, out.as_str()), (0, "Done again.\n"), "{seen}");
    assert!(!seen.contains("approve?"), "{seen}");
    assert_eq!(runs(&env), 2);
    let h = json_lines(&env.run(&["history", "--json"]).stdout);
    let decisions: Vec<(Value, Value)> = h
        .iter()
        .map(|t| {
            (
                t["approvals"][0]["decision"].clone(),
                t["approvals"][0]["by"].clone(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            (json!("denied"), json!("alice via terminal")),
            (json!("always"), json!("alice via terminal")),
            (json!("approved"), json!("the session's `always`")),
        ]
    );
    assert_eq!(h[0]["approvals"][0]["reason"], "too risky");
}

#[test]
fn chat_asks_at_once_and_the_next_line_is_read_after_the_answer() {
    let env = ops_env("");
    let mut cmd = env.cmd(&["chat", "-s", "ops"]);
    cmd.stdout(Stdio::piped());
    let mut pty = Pty::attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn chat");
    let prompts = |pty: &Pty| pty.seen().matches("\rops> \x1b[K").count();
    wait_until("the prompt", || prompts(&pty) >= 1);
    pty.type_keys("deploy the release\r");
    wait_until("the question", || pty.seen().contains("approve? [y]es"));
    assert_eq!(runs(&env), 0);
    pty.type_keys("y\r");
    wait_until("the next prompt", || prompts(&pty) >= 2);
    assert_eq!(runs(&env), 1);
    pty.type_keys("status?\r");
    wait_until("the third prompt", || prompts(&pty) >= 3);
    pty.type_keys("\x04");
    let mut status = None;
    wait_until("chat to leave on Ctrl-D", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", pty.seen());
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut out)
        .expect("read");
    assert_eq!(out, "Deployed.\nAll quiet.\n", "{}", pty.seen());
    let h = json_lines(&env.run(&["history", "-s", "ops", "--json"]).stdout);
    assert_eq!(h[0]["approvals"][0]["by"], "alice via terminal", "{h:?}");
    assert_eq!(h[0]["state"], "completed");
}

#[test]
fn on_a_terminal_ctrl_c_at_the_question_leaves_the_turn_waiting() {
    let env = ops_env("");
    let mut cmd = env.cmd(&["send", "deploy the release"]);
    cmd.stdout(Stdio::piped());
    let mut pty = Pty::attach(&mut cmd);
    let child = cmd.spawn().expect("spawn send");
    wait_until("the question", || pty.seen().contains("approve? [y]es"));
    pty.type_keys("\x03");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(12), "{}", pty.seen());
    wait_until("how to answer", || {
        pty.seen().contains("hint: approve with")
    });
    assert_eq!(
        json_lines(&env.run(&["approvals", "--json"]).stdout).len(),
        1
    );
}

#[test]
fn approve_through_serve_continues_the_turn_in_its_actor() {
    let env = ops_env("");
    let serve = Serve::start(&env);
    let (_, turn) = waiting_send(&env);
    assert_eq!(runs(&env), 0);
    let approved = env.run(&["approve", &turn]);
    assert_eq!(approved.code, 0, "{}\n{}", approved.stderr, serve.logs());
    assert_eq!(approved.stdout, "Deployed.\n");
    assert_eq!(runs(&env), 1);
    // The actor ran it: it is the actor's last turn.
    let status = agents_status(&env);
    assert_eq!(
        actor(&status, "ops")["last_turn"],
        turn.as_str(),
        "{status:?}"
    );
    assert_eq!(show(&env, &turn)["state"], "completed");
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn a_turn_waiting_in_serve_survives_its_kill_9_and_the_next_serve_continues_it() {
    let env = ops_env("");
    let serve = Serve::start(&env);
    let (_, turn) = waiting_send(&env);
    drop(serve); // kill -9 of the process whose actor ran the turn
    let serve = Serve::start(&env);
    assert_eq!(show(&env, &turn)["state"], "waiting", "{}", serve.logs());
    assert_eq!(runs(&env), 0);
    let approved = env.run(&["approve", &turn]);
    assert_eq!(approved.code, 0, "{}\n{}", approved.stderr, serve.logs());
    assert_eq!(approved.stdout, "Deployed.\n");
    assert_eq!(runs(&env), 1);
    let status = agents_status(&env);
    assert_eq!(
        actor(&status, "ops")["last_turn"],
        turn.as_str(),
        "{status:?}"
    );
    assert_eq!(show(&env, &turn)["state"], "completed");
    assert_eq!(serve.terminate(), 0);
    assert_eq!(runs(&env), 1);
}

#[test]
fn an_automation_whose_turn_waits_shows_waiting_then_how_it_ended() {
    let env = ops_env(
        "automations:\n  - id: nightly\n    schedule: \"0 3 * * *\"\n    agent: ops\n    request: deploy the release\n",
    );
    let run = env.run(&["automations", "run", "nightly"]);
    assert_eq!(run.code, 12, "{}\n{}", run.stdout, run.stderr);
    let runs_json = |env: &TestEnv| {
        json_lines(
            &env.run(&["automations", "runs", "nightly", "--json"])
                .stdout,
        )
    };
    let listed = runs_json(&env);
    assert_eq!(
        listed.last().expect("a run")["outcome"],
        "waiting",
        "{listed:?}"
    );
    let turn = listed.last().expect("a run")["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    assert_eq!(env.run(&["approve", &turn]).code, 0);
    let listed = runs_json(&env);
    assert_eq!(
        listed.last().expect("a run")["outcome"],
        "completed",
        "{listed:?}"
    );
    assert_eq!(runs(&env), 1);
}

#[test]
fn validate_reports_approval_rules_it_cannot_apply() {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nmcp_servers:\n  notes: {command: notes-server}\nagents:\n  - id: a\n    provider: canned\n    mcp_servers: [notes]\n    approvals: [run_comand, notes.delete, web.fetch, {tool: write_file, command: 'rm *'}, {path: '[oops'}]\n  - id: b\n    provider: canned\n    approval_timeout: 0\n  - id: w\n    provider: canned\n    role: worker\n    approvals: always\non_approval_request: {command: ''}\n",
    );
    env.write("replies.yaml", "replies: []\n");
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("validate", env.snap(&r));
}

#[test]
fn help_of_approvals_and_approve() {
    let env = TestEnv::new();
    for (name, args) in [
        ("approvals_help", &["approvals", "--help"][..]),
        ("approve_help", &["approve", "--help"]),
    ] {
        snap!(name, env.snap(&env.run(args)));
    }
}

#[cfg(feature = "sqlite")]
/// The string attribute `key` of an OTLP JSON span.
fn span_attr(span: &Value, key: &str) -> Option<Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| a["value"]["stringValue"].clone())
}

#[test]
fn a_turn_s_trace_has_a_span_for_each_wait_from_request_to_decision() {
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    // A waiting turn has no trace yet: its spans are exported once it ends.
    let r = env.run(&["export", "--all", "--format", "otlp", "-o", "waiting.jsonl"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let waiting = std::fs::read_to_string(env.work.join("waiting.jsonl")).expect("read");
    assert!(!waiting.contains("await_approval"), "{waiting}");
    assert_eq!(env.run(&["approve", &turn]).code, 0);
    let r = env.run(&["export", "--all", "--format", "otlp", "-o", "traces.jsonl"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(env.work.join("traces.jsonl")).expect("read");
    let spans: Vec<Value> = text
        .lines()
        .flat_map(|l| {
            let v: Value = serde_json::from_str(l).expect("an OTLP JSON line");
            let mut out = Vec::new();
            for r in v["resourceSpans"].as_array().into_iter().flatten() {
                for s in r["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(s["spans"].as_array().into_iter().flatten().cloned());
                }
            }
            out
        })
        .collect();
    let root = spans
        .iter()
        .find(|s| {
            span_attr(s, "axocoatl.turn.id") == Some(json!(turn))
                && s["parentSpanId"].as_str().is_none_or(str::is_empty)
        })
        .unwrap_or_else(|| panic!("no span of the turn in {text}"));
    let waits: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"] == "await_approval run_command")
        .collect();
    assert_eq!(waits.len(), 1, "{text}");
    let wait = waits[0];
    assert_eq!(wait["parentSpanId"], root["spanId"], "{text}");
    assert_eq!(
        span_attr(wait, "axocoatl.approval.decision"),
        Some(json!("approved"))
    );
    assert_eq!(
        span_attr(wait, "axocoatl.approval.by"),
        Some(json!("alice via approve"))
    );
    assert_eq!(
        span_attr(wait, "axocoatl.approval.rule"),
        Some(json!("run_command"))
    );
    assert_eq!(
        span_attr(wait, "gen_ai.tool.name"),
        Some(json!("run_command"))
    );
}

#[test]
fn an_export_has_the_held_calls_and_their_decisions_and_the_waiting_turn_state() {
    use rusqlite::{Connection, OpenFlags};
    let env = ops_env("");
    let (_, turn) = waiting_send(&env);
    let db = env.work.join("history.db");
    let db_arg = db.to_string_lossy().into_owned();
    let export = || {
        let r = env.run(&["export", "--all", "--format", "sqlite", "-o", &db_arg]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    };
    let row = |sql: &str| -> (String, Option<String>) {
        let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open export");
        conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("row")
    };
    export();
    assert_eq!(
        row("SELECT state, NULL FROM turns"),
        ("waiting".to_owned(), None)
    );
    assert_eq!(
        row("SELECT tool, decision FROM approvals"),
        ("run_command".to_owned(), None)
    );
    // A refresh after the decision fills it in, and the turn's end.
    assert_eq!(
        env.run(&["approve", &turn, "--deny", "--reason", "no"])
            .code,
        0
    );
    export();
    assert_eq!(
        row("SELECT decision, reason FROM approvals"),
        ("denied".to_owned(), Some("no".to_owned()))
    );
    assert_eq!(
        row("SELECT state, decided_by FROM turns JOIN approvals USING (turn)"),
        ("completed".to_owned(), Some("alice via approve".to_owned()))
    );
}
