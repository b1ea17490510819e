//! Everyday use from the real binary: the home repository, per-call overrides, fresh,
//! renamed and removed sessions, `chat`, provider hints, `.gitignore`, completions that
//! know the repository, help.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{closed_port_url, FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_text};
use crate::common::pty::Pty;

/// A server answering every chat with "ok", listing `models` at /api/tags.
fn answering() -> FakeServer {
    FakeServer::responding(|r| {
        if r.path.ends_with("/api/tags") {
            Reply::json(200, r#"{"models":[{"name":"m"}]}"#)
        } else {
            ollama_text("ok")
        }
    })
}

fn home_repo(env: &TestEnv) -> std::path::PathBuf {
    env.home.join(".local/share/axocoatl/.axocoatl")
}

#[test]
fn the_home_repository_serves_commands_outside_any_project() {
    let env = TestEnv::new();
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    // `repo` says which repository, and creates nothing.
    let r = env.run_in(&elsewhere, &["repo"]);
    snap!("home_repo_before", env.snap(&r));
    assert!(!home_repo(&env).exists());
    // A command that only reads makes nothing: there is nothing to read yet (exit 10).
    let r = env.run_in(&elsewhere, &["sessions"]);
    assert_eq!(r.code, 10, "{}", r.stderr);
    assert!(!home_repo(&env).exists());
    // The first command that writes creates it, with the starter configuration, and says so
    // once.
    let r = env.run_in(&elsewhere, &["sessions", "new", "scratch"]);
    snap!("home_created", env.snap(&r));
    assert!(home_repo(&env).join("format").is_file());
    let config = env.home.join(".local/share/axocoatl/axocoatl.yaml");
    assert_eq!(
        std::fs::read_to_string(&config).expect("starter"),
        axocoatl::config::starter_config()
    );
    let r = env.run_in(&elsewhere, &["sessions"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "said once");
    let r = env.run_in(&elsewhere, &["--print-repo", "repo", "--json"]);
    snap!("home_repo_json", env.snap(&r));
    // XDG_DATA_HOME moves it.
    let mut cmd = env.cmd(&["repo", "--json"]);
    cmd.current_dir(&elsewhere)
        .env("XDG_DATA_HOME", env.tmp.path().join("data"));
    let r = crate::common::env::Run::from_output(cmd.output().expect("run"));
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(
        v["repository"],
        json!(env.tmp.path().join("data/axocoatl/.axocoatl"))
    );
    // A project repository is found as before.
    assert_eq!(env.run(&["init"]).code, 0);
    let r = env.run(&["repo"]);
    snap!("project_repo", env.snap(&r));
    // No home fallback with -C, and a named repository must exist: exit 10.
    let r = env.run_in(&elsewhere, &["-C", ".", "history"]);
    snap!("dash_c_no_repo", env.snap(&r));
    let r = env.run_in(&elsewhere, &["--repo", "missing", "history"]);
    assert_eq!(r.code, 10, "{}", r.stderr);
}

#[test]
fn init_makes_git_ignore_the_repository_and_every_open_restores_it() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    let ignore = env.repo().join(".gitignore");
    assert_eq!(std::fs::read_to_string(&ignore).expect("read"), "*\n");
    std::fs::remove_file(&ignore).expect("rm");
    assert_eq!(env.run(&["history"]).code, 0);
    assert_eq!(std::fs::read_to_string(&ignore).expect("read"), "*\n");
    // git sees the configuration and not the repository.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&env.work)
            .env("HOME", &env.home)
            .output()
    };
    if let Ok(out) = git(&["init", "-q"]) {
        assert!(out.status.success());
        let status = git(&["status", "--porcelain", "--untracked-files=all"]).expect("git");
        let listed = String::from_utf8_lossy(&status.stdout).into_owned();
        assert_eq!(listed, "?? axocoatl.yaml\n");
    }
}

#[test]
fn per_call_overrides_reach_the_model_are_recorded_and_retry_reuses_them() {
    let server = answering();
    let env = ollama_env(&server);
    let r = env.run(&[
        "send",
        "-m",
        "qwen2.5:7b",
        "--system",
        "Answer in one word.",
        "-o",
        "temperature=0.25",
        "-o",
        "max_tokens=64",
        "-o",
        "response_format=json",
        "hi",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = server.requests()[0].json();
    assert_eq!(body["model"], "qwen2.5:7b");
    assert_eq!(body["messages"][0]["role"], "system");
    let system = body["messages"][0]["content"].as_str().expect("system");
    assert!(system.starts_with("Answer in one word."), "{system}");
    assert!(!system.contains("Be brief."), "{system}");
    assert_eq!(body["options"]["temperature"], json!(0.25));
    assert_eq!(body["options"]["num_predict"], json!(64));
    assert_eq!(body["format"], "json");
    let turn = r.stderr.lines().next().expect("turn line")[5..].to_owned();
    snap!("show_overrides", env.snap(&env.run(&["show", &turn])));
    let shown: Value =
        serde_json::from_str(&env.run(&["show", &turn, "--json"]).stdout).expect("json");
    assert_eq!(
        shown["overrides"],
        json!({"model": "qwen2.5:7b", "system": "Answer in one word.", "options": [["temperature", "0.25"], ["max_tokens", "64"], ["response_format", "json"]]})
    );
    // retry reuses them; its own -o is laid over them.
    let r = env.run(&["retry", &turn, "-o", "temperature=0.9"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = server.requests()[1].json();
    assert_eq!(body["model"], "qwen2.5:7b");
    assert_eq!(body["options"]["temperature"], json!(0.9));
    assert_eq!(body["options"]["num_predict"], json!(64));
    // PROVIDER:MODEL names another provider (here the built-in kind, at OLLAMA_HOST).
    let mut cmd = env.cmd(&["send", "-m", "ollama:llama3.2:3b", "hi"]);
    cmd.env("OLLAMA_HOST", server.url());
    let out = cmd.output().expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(server.requests()[2].json()["model"], "llama3.2:3b");
    // A plain send afterwards uses the agent as configured.
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    let body = server.requests()[3].json();
    assert_eq!(body["model"], "m");
    assert!(body.get("options").is_none(), "{body}");
}

#[test]
fn bad_overrides_are_refused_in_the_configuration_words_before_the_turn() {
    let server = answering();
    let env = ollama_env(&server);
    let r = env.run(&["send", "-o", "temprature=1", "hi"]);
    snap!("override_unknown_key", env.snap(&r));
    let r = env.run(&["send", "-o", "temperature=-1", "hi"]);
    snap!("override_bad_value", env.snap(&r));
    let r = env.run(&["send", "-o", "top_p=high", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = env.run(&["send", "-o", "nonsense", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // Under --json the error is an event on stdout too.
    let r = env.run(&["send", "--json", "-o", "temperature=-1", "hi"]);
    snap!("override_bad_value_json", env.snap(&r));
    assert_eq!(server.request_count(), 0, "no call was made");
    let r = env.run(&["history", "--all"]);
    assert_eq!(r.stdout, "", "no turn began");
}

#[test]
fn send_new_starts_a_fresh_session_and_a_new_name_is_announced() {
    let server = answering();
    let env = ollama_env(&server);
    assert_eq!(env.run(&["send", "first"]).code, 0);
    let r = env.run(&["send", "-n", "second"]);
    snap!("send_new", env.snap(&r));
    assert_eq!(
        std::fs::read_to_string(env.repo().join("HEAD")).expect("HEAD"),
        "2026-01-02-030405\n"
    );
    // The new session's conversation starts empty.
    let body = server.requests()[1].json();
    assert_eq!(body["messages"].as_array().expect("messages").len(), 2);
    let r = env.run(&["send", "-n", "third"]);
    assert!(
        r.stderr
            .starts_with("session 2026-01-02-030405-2 (new, now current)\n"),
        "{}",
        r.stderr
    );
    let r = env.run(&["send", "-s", "scratch", "hi"]);
    assert!(
        r.stderr.starts_with("created session scratch\nturn "),
        "{}",
        r.stderr
    );
    let r = env.run(&["send", "-s", "scratch", "again"]);
    assert!(r.stderr.starts_with("turn "), "{}", r.stderr);
    snap!("sessions_after_new", env.snap(&env.run(&["sessions"])));
}

#[test]
fn sessions_rename_and_rm_keep_the_ledger_and_free_the_name() {
    let server = answering();
    let env = ollama_env(&server);
    assert_eq!(env.run(&["send", "-s", "work", "one"]).code, 0);
    assert_eq!(env.run(&["send", "-s", "work", "two"]).code, 0);
    assert_eq!(env.run(&["sessions", "switch", "work"]).code, 0);
    let r = env.run(&["sessions", "rename", "work", "done"]);
    snap!("rename", env.snap(&r));
    let r = env.run(&["sessions"]);
    snap!("after_rename", env.snap(&r));
    let r = env.run(&["history", "-s", "done", "--json"]);
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["session"], "done");
    // An export names it as it is shown now.
    let r = env.run(&["export", "-s", "done"]);
    assert!(
        r.stdout.starts_with("# axocoatl History: session done\n"),
        "{}",
        r.stdout
    );
    let r = env.run(&["export", "--all"]);
    assert!(r.stdout.contains("\n## Session done\n"), "{}", r.stdout);
    let r = env.run(&["export", "-s", "done", "--format", "json"]);
    let v: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v["export"]["scope"]["session"], "done", "{v}");
    assert_eq!(v["turns"][0]["session"], "done", "{v}");
    // The renamed session goes on: its conversation is the one it had.
    assert_eq!(env.run(&["send", "three"]).code, 0);
    let body = server.requests()[2].json();
    assert_eq!(body["messages"].as_array().expect("m").len(), 6, "{body}");
    // The old name is free: a new, empty session.
    let r = env.run(&["send", "-s", "work", "fresh"]);
    assert!(
        r.stderr.starts_with("created session work\n"),
        "{}",
        r.stderr
    );
    let body = server.requests()[3].json();
    assert_eq!(body["messages"].as_array().expect("m").len(), 2, "{body}");
    // Remove: out of listings, still in the ledger.
    let r = env.run(&["sessions", "rm", "done"]);
    snap!("rm", env.snap(&r));
    snap!("after_rm", env.snap(&env.run(&["sessions"])));
    snap!("after_rm_all", env.snap(&env.run(&["sessions", "--all"])));
    let r = env.run(&["history", "--all"]);
    assert_eq!(r.stdout.lines().count(), 4, "{}", r.stdout);
    // `done` (HEAD) is free again: the next send starts it anew.
    assert_eq!(env.run(&["send", "after"]).code, 0);
    let body = server.requests()[4].json();
    assert_eq!(body["messages"].as_array().expect("m").len(), 2, "{body}");
    // Refusals.
    let r = env.run(&["sessions", "rm", "nosuch"]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    let r = env.run(&["sessions", "rename", "work", "done"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
}

#[test]
fn sessions_rm_is_refused_while_a_turn_is_active() {
    let server = FakeServer::with([Reply::ndjson("").stall()]);
    let env = ollama_env(&server);
    let mut child = env
        .cmd(&["send", "-s", "busy", "wait"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_until("the turn is active", || {
        env.run(&["sessions", "--json"])
            .stdout
            .contains("\"active_turn\":\"")
    });
    let r = env.run(&["sessions", "rm", "busy"]);
    assert_eq!(r.code, 8, "{}", r.stderr);
    assert!(r.stderr.contains("is busy: turn "), "{}", r.stderr);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn chat_sends_a_turn_per_line_with_commands() {
    let server = answering();
    let env = ollama_env(&server);
    let r = env.run_stdin(
        &["chat", "-s", "talk"],
        "hello\n\n!retry\n!rewind\n!bogus\n!help\nbye\n",
    );
    // Semantic memory says once that it has no embedder here: not what this test is about.
    let snapped: String = env
        .snap(&r)
        .lines()
        .filter(|l| !l.starts_with("warning: semantic memory"))
        .map(|l| format!("{l}\n"))
        .collect();
    snap!("chat_piped", snapped);
    assert_eq!(server.request_count(), 3);
    let r = env.run(&["history", "-s", "talk", "--json"]);
    let turns: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let requests: Vec<(&str, bool)> = turns
        .iter()
        .map(|t| (t["request"].as_str().expect("r"), t["superseded"] == true))
        .collect();
    assert_eq!(
        requests,
        [("hello", false), ("hello", true), ("bye", false)],
        "{r:?}",
        r = r.stdout
    );
}

#[test]
fn a_refused_connection_says_which_address_and_where_it_came_from() {
    let url = closed_port_url();
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{url}\", max_retries: 0}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n"
    ));
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(!r.stderr.contains("io: io:"), "{}", r.stderr);
    let port = url.rsplit(':').next().expect("port");
    snap!("connection_refused", env.snap(&r).replace(port, "[PORT]"));
    // show prints the hint the turn recorded.
    let turn = r.stderr.lines().next().expect("turn")[5..].to_owned();
    let shown = env.run(&["show", &turn]).stdout;
    assert!(shown.contains("\nhint: is the server at"), "{shown}");
}

#[test]
fn an_unset_api_key_is_named_when_the_server_refuses() {
    let server = FakeServer::with([Reply::json(
        401,
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
    )]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  hosted: {{kind: openai, base_url: \"{}/v1\", api_key_env: MY_KEY}}\nagents:\n  - id: a\n    provider: hosted\n    model: gpt-4o-mini\n",
        server.url()
    ));
    let r = env.run(&["send", "hi"]);
    let text = env.snap(&r).replace(&server.url(), "[URL]");
    snap!("unset_key", text);
}

#[test]
fn a_model_the_server_lacks_lists_what_it_has() {
    let ollama = FakeServer::responding(|r| {
        if r.path.ends_with("/api/tags") {
            Reply::json(
                200,
                r#"{"models":[{"name":"llama3.2:latest"},{"name":"qwen2.5:7b"}]}"#,
            )
        } else {
            Reply::json(
                404,
                r#"{"error":"model \"llama3.3\" not found, try pulling it first"}"#,
            )
        }
    });
    let env = ollama_env(&ollama);
    let r = env.run(&["send", "-m", "llama3.3", "hi"]);
    snap!(
        "ollama_missing_model",
        env.snap(&r).replace(&ollama.url(), "[URL]")
    );
    let openai = FakeServer::responding(|r| {
        if r.path.ends_with("/v1/models") {
            Reply::json(
                200,
                r#"{"object":"list","data":[{"id":"gpt-4o-mini"},{"id":"gpt-4o"}]}"#,
            )
        } else {
            Reply::json(
                404,
                r#"{"error":{"message":"The model `gpt-4o-mni` does not exist or you do not have access to it.","code":"model_not_found"}}"#,
            )
        }
    });
    let env = TestEnv::with_config(&format!(
        "providers:\n  hosted: {{kind: openai, base_url: \"{}/v1\"}}\nagents:\n  - id: a\n    provider: hosted\n    model: gpt-4o-mni\n",
        openai.url()
    ));
    let r = env.run(&["send", "hi"]);
    snap!(
        "openai_missing_model",
        env.snap(&r).replace(&openai.url(), "[URL]")
    );
}

#[test]
fn errors_before_a_turn_are_json_events_under_json() {
    let env = TestEnv::with_config("agents:\n  - id: a\n    provider: local\n");
    let r = env.run(&["send", "--json", "-a", "nobody", "hi"]);
    snap!("unknown_agent_json", env.snap(&r));
    let line: Value = serde_json::from_str(r.stdout.trim()).expect("one JSON line");
    assert_eq!(line["type"], "error");
    assert_eq!(line["exit_code"], r.code);
}

/// What the completion scripts get back for the words of a command line (fish's protocol:
/// one candidate per line, then a tab and its help).
fn complete(env: &TestEnv, words: &[&str]) -> String {
    let mut cmd = env.cmd(&[]);
    cmd.env("COMPLETE", "fish").arg("--").args(words);
    let out = crate::common::env::Run::from_output(cmd.output().expect("run")).stdout;
    // Options are offered too; the values are what these tests look at.
    out.lines()
        .filter(|l| !l.starts_with('-'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn completions_know_agents_sessions_and_turns() {
    let server = answering();
    let env = ollama_env(&server);
    assert_eq!(env.run(&["send", "-s", "review", "what is this"]).code, 0);
    let agents = complete(&env, &["axocoatl", "send", "-a", ""]);
    assert_eq!(agents, "helper\n");
    let sessions = complete(&env, &["axocoatl", "history", "-s", ""]);
    assert_eq!(sessions, "review\t1 turn\n");
    assert_eq!(env.run(&["sessions", "switch", "review"]).code, 0);
    let turns = env.normalize(&complete(&env, &["axocoatl", "show", ""]));
    assert_eq!(
        turns,
        "[ID1]\twhat is this\n@\tthe latest turn of the session\n@~1\tthe turn before it\n"
    );
    // The scripts in completions/ call back with COMPLETE set.
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/axocoatl.bash"),
    )
    .expect("script");
    assert!(script.contains("COMPLETE=\"bash\""), "{script}");
}

#[test]
fn help_of_the_new_commands() {
    let env = TestEnv::new();
    for c in [
        &["chat", "--help"][..],
        &["repo", "--help"],
        &["sessions", "rm", "--help"],
    ] {
        snap!(
            format!("help_{}", c[..c.len() - 1].join("_")),
            env.snap(&env.run(c))
        );
    }
}

#[test]
fn chat_on_a_terminal_edits_lines_recalls_them_and_leaves_on_ctrl_d() {
    let server = answering();
    let env = ollama_env(&server);
    let mut cmd = env.cmd(&["chat", "-s", "tty"]);
    cmd.stdout(Stdio::piped());
    let mut pty = Pty::attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn chat");
    // A prompt is drawn empty once each time the editor starts a line (typing redraws it
    // with the line after it): keys are typed only at a prompt.
    let prompts = |pty: &Pty| pty.seen().matches("\rtty> \x1b[K").count();
    wait_until("the prompt", || prompts(&pty) >= 1);
    // "wrld", Home (Ctrl-A), "hello ", End (Ctrl-E), three lefts, "o", three rights, a
    // typo "?" taken back with Backspace, "!", Enter: the line sent is what the editor shows.
    pty.type_keys("wrld\x01hello \x05\x1b[D\x1b[D\x1b[Do\x1b[C\x1b[C\x1b[C?\x7f!\r");
    wait_until("the first turn", || server.request_count() == 1);
    // Up recalls the line; Enter sends it again.
    wait_until("the second prompt", || prompts(&pty) >= 2);
    pty.type_keys("\x1b[A\r");
    wait_until("the second turn", || server.request_count() == 2);
    // Ctrl-C drops a half-typed line; Ctrl-D on an empty line leaves.
    wait_until("the third prompt", || prompts(&pty) >= 3);
    pty.type_keys("never sent\x03");
    wait_until("the fourth prompt", || prompts(&pty) >= 4);
    pty.type_keys("\x04");
    let mut status = None;
    wait_until("chat to leave on Ctrl-D", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", pty.seen());
    let sent: Vec<String> = server
        .requests()
        .iter()
        .map(|r| {
            let body = r.json();
            let messages = body["messages"].as_array().expect("messages").clone();
            messages
                .last()
                .and_then(|m| m["content"].as_str())
                .expect("user message")
                .to_owned()
        })
        .collect();
    assert_eq!(sent, ["hello world!", "hello world!"], "{}", pty.seen());
    let mut out = String::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert_eq!(out, "ok\nok\n");
}

#[test]
fn progress_is_drawn_on_a_terminal_only_and_quiet_silences_it() {
    let model = axocoatl::config::local_model_path(&|k| std::env::var(k).ok()).expect("HOME");
    assert!(
        model.is_file(),
        "{} missing: run scripts/fetch-model.sh",
        model.display()
    );
    let env = TestEnv::with_config(
        "agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: 4}\n",
    );
    // Past 256 tokens, the reading of a prompt is drawn.
    let long = "tell me about this. ".repeat(60);
    let run = |extra: &[&str], message: &str| {
        let mut args = extra.to_vec();
        args.extend(["send", message]);
        let mut cmd = env.cmd(&args);
        cmd.env("AXOCOATL_MODEL", &model).stdout(Stdio::piped());
        let pty = Pty::attach(&mut cmd);
        let out = cmd.output().expect("run");
        assert_eq!(out.status.code(), Some(0), "{}", pty.seen());
        // The reader thread may still be draining the terminal.
        wait_until("the turn's line", || pty.seen().contains("turn "));
        pty.seen()
    };
    let seen = run(&[], &long);
    assert!(
        seen.contains("loading model SmolLM2-135M-Instruct.Q4_1.gguf"),
        "{seen:?}"
    );
    assert!(seen.contains("reading the prompt: 0/"), "{seen:?}");
    assert!(seen.contains("\r\x1b[K"), "the line is cleared: {seen:?}");
    let quiet = run(&["--quiet"], "hi");
    assert!(!quiet.contains("loading model"), "{quiet:?}");
    // Piped stderr: never.
    let mut cmd = env.cmd(&["send", "hi"]);
    cmd.env("AXOCOATL_MODEL", &model);
    let out = cmd.output().expect("run");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("loading model"));
}

#[test]
fn overrides_travel_to_a_serve_actor_for_that_turn_only() {
    let server = answering();
    let env = ollama_env(&server);
    let serve = crate::common::procs::Serve::start(&env);
    let r = env.run(&[
        "send",
        "-o",
        "temperature=0.3",
        "--system",
        "Be terse.",
        "hi",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = env.run(&["send", "again"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let second = r.stderr.lines().next().expect("turn")[5..].to_owned();
    let requests = server.requests();
    let first = requests[0].json();
    assert_eq!(first["options"]["temperature"], json!(0.3));
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Be terse.")),
        "{first}"
    );
    let next = requests[1].json();
    assert!(next.get("options").is_none(), "{next}");
    assert!(
        next["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Be brief.")),
        "{next}"
    );
    // The actor ran them.
    let list = env.run(&["agents", "list", "--json"]);
    let actor: Value =
        serde_json::from_str(list.stdout.lines().next().expect("actor")).expect("json");
    assert_eq!(actor["last_turn"], json!(second), "{}", list.stdout);
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn chat_ends_on_sigterm_at_the_prompt_even_after_a_turn() {
    let server = answering();
    let env = ollama_env(&server);
    let mut cmd = env.cmd(&["chat", "-s", "term"]);
    cmd.stdout(Stdio::null());
    let mut pty = Pty::attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn chat");
    let prompts = |pty: &Pty| pty.seen().matches("\rterm> \x1b[K").count();
    wait_until("the prompt", || prompts(&pty) >= 1);
    pty.type_keys("hi\r");
    wait_until("the next prompt", || prompts(&pty) >= 2);
    // SAFETY: sends a signal to our own child process, which is still running.
    #[expect(unsafe_code, reason = "kill: libc has no safe wrapper")]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let mut status = None;
    wait_until("chat to end", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{}", pty.seen());
    // The prompt had the terminal raw; the shell gets it back as it was.
    assert!(pty.cooked(), "the terminal is left raw");
}

#[test]
fn a_closed_terminal_or_sigint_at_the_prompt_ends_the_chat_and_gives_the_terminal_back() {
    let server = answering();
    let env = ollama_env(&server);
    for (sig, code) in [(libc::SIGHUP, 129), (libc::SIGINT, 130)] {
        let mut cmd = env.cmd(&["chat", "-s", "hup"]);
        cmd.stdout(Stdio::null());
        let pty = Pty::attach(&mut cmd);
        let mut child = cmd.spawn().expect("spawn chat");
        wait_until("the prompt", || pty.seen().contains("\rhup> \x1b[K"));
        assert!(!pty.cooked(), "the prompt reads raw keys");
        // SAFETY: sends a signal to our own child process, which is still running.
        #[expect(unsafe_code, reason = "kill: libc has no safe wrapper")]
        let rc = unsafe { libc::kill(child.id() as i32, sig) };
        assert_eq!(rc, 0);
        let mut status = None;
        wait_until("chat to end", || {
            status = child.try_wait().expect("try_wait");
            status.is_some()
        });
        assert_eq!(status.and_then(|s| s.code()), Some(code), "{}", pty.seen());
        assert!(pty.cooked(), "signal {sig}: the terminal is left raw");
    }
}

#[test]
fn tool_lines_on_a_terminal_start_a_line_with_readable_arguments() {
    // The model says something, then calls a tool in the same answer.
    let first = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "Let me look."}, "done": false});
    let call = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "grep", "arguments": {"pattern": "fn main", "path": "src"}}}]}, "done": false});
    let last = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 20, "eval_count": 5});
    let server = FakeServer::with([
        Reply::ndjson(&format!("{first}\n{call}\n{last}\n")),
        ollama_text("Found it."),
    ]);
    let env = ollama_env(&server);
    env.write("src/main.rs", "fn main() {}\n");
    let mut cmd = env.cmd(&["send", "where is main?"]);
    let pty = Pty::attach(&mut cmd);
    pty.stdout_too(&mut cmd);
    let mut child = cmd.spawn().expect("spawn send");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{}", pty.seen());
    wait_until("the answer", || pty.seen().contains("Found it."));
    let seen = pty.seen().replace("\r\n", "\n");
    assert!(
        seen.contains("Let me look.\ntool grep pattern=\"fn main\" path=src\n"),
        "{seen:?}"
    );
}
