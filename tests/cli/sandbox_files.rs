//! The file tools and the files a configuration makes axocoatl run, against an agent that
//! tries to use them to leave its sandbox, through the real binary: a FIFO named to a file
//! tool, MCP server programs and scripts inside the workspace, a configuration reached
//! through a symlink or kept in a subdirectory.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_call, ollama_calls, ollama_text};
use crate::common::procs::{json_lines, tool_results};

/// A repository whose agent `coder` (workspace-write) talks to `server`; `extra` is added to
/// the top level of the configuration.
fn env_with(server: &FakeServer, extra: &str) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\n{extra}agents:\n  - id: coder\n    provider: llm\n    model: m\n    sandbox: workspace-write\n",
        server.url()
    ))
}

fn landlock() -> bool {
    axocoatl::tools::sandbox::Support::probe().landlock_abi >= 1
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo reads a C string we own.
    #[expect(unsafe_code, reason = "mkfifo: libc has no safe wrapper")]
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {}", path.display());
}

/// Waits up to 20 s for `child` to end; kills it (and fails) otherwise.
fn exit_within(child: &mut std::process::Child, what: &str) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `mkfifo pipe`, then `read_file pipe`: the tool is refused at once (it never opens a FIFO
/// to read: that would wait for a writer, for ever, in axocoatl's own process), and a `stop`
/// of the turn then ends it. Had the tool blocked, its result would never come, and the
/// stop sent after 20 s would not end `send` either.
#[test]
fn a_stop_ends_a_turn_whose_tool_named_a_fifo() {
    let server = FakeServer::with([
        ollama_call("read_file", json!({"path": "pipe"})),
        Reply::ndjson("").stall(),
    ]);
    let env = env_with(&server, "");
    mkfifo(&env.work.join("pipe"));
    let mut child = env
        .cmd(&["send", "--json", "read the pipe"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    // The events, read by a thread: a blocked tool sends none, and the test must go on.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, events) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.iter().any(|e: &Value| e["type"] == "tool.result") {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(e) => seen.push(e),
            Err(_) => break,
        }
    }
    let turn = seen
        .iter()
        .find(|e| e["type"] == "turn.begun")
        .and_then(|e| e["turn"].as_str())
        .expect("the turn began")
        .to_owned();
    let stop = env.run(&["stop", &turn]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    assert_eq!(
        exit_within(
            &mut child,
            "send did not end after the stop: read_file is blocked"
        ),
        4,
        "a stopped turn exits 4"
    );
    seen.extend(events.iter());
    let result = seen
        .iter()
        .find(|e| e["type"] == "tool.result")
        .expect("result");
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(
        result["output"],
        "pipe is a FIFO, not a regular file; read_file reads regular files only"
    );
    assert_eq!(seen.last().expect("ended")["state"], "stopped");
}

/// An MCP server's program and its script inside the workspace: the write tools refuse
/// them, commands find them read-only and cannot move their directory away; the rest of
/// the workspace stays writable.
#[test]
fn mcp_server_programs_and_scripts_in_the_workspace_stay_as_they_are() {
    let server = FakeServer::with([
        ollama_calls(&[
            (
                "write_file",
                json!({"path": "server.py", "content": "evil"}),
            ),
            (
                "edit_file",
                json!({"path": "tools/srv.sh", "old": "exit", "new": "evil"}),
            ),
            (
                "write_file",
                json!({"path": "replies.yaml", "content": "evil"}),
            ),
            ("run_command", json!({"command": "echo evil >> server.py"})),
            ("run_command", json!({"command": "rm -f server.py"})),
            (
                "run_command",
                json!({"command": "mv tools tools.old && mkdir tools && echo evil > tools/srv.sh"}),
            ),
            (
                "run_command",
                json!({"command": "echo evil > replies.yaml"}),
            ),
            (
                "run_command",
                json!({"command": "echo ok > kept.txt && echo ok > tools/kept.txt"}),
            ),
        ]),
        ollama_text("Done."),
    ]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\n  s: {{kind: script, script: replies.yaml}}\nmcp_servers:\n  py: {{command: python3, args: [server.py]}}\n  sh: {{command: ./tools/srv.sh}}\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    sandbox: workspace-write\n",
        server.url()
    ));
    let files = [
        ("server.py", "print('server')\n"),
        ("tools/srv.sh", "exit 0\n"),
        ("replies.yaml", "replies: []\n"),
    ];
    for (path, text) in files {
        env.write(path, text);
    }
    let r = env.run(&["send", "--json", "change the servers"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = tool_results(&events);
    assert_eq!(res.len(), 8, "{}", r.stdout);
    for (e, what) in res[..3].iter().zip([
        "a file in the `args:` of MCP server `py`",
        "the program of MCP server `sh`",
        "the script of provider `s`",
    ]) {
        assert_eq!(e["is_error"], true, "{e}");
        let out = e["output"].as_str().expect("output");
        assert!(
            out.contains(what) && out.contains("tools never change it"),
            "{out}"
        );
    }
    if landlock() {
        for e in &res[3..7] {
            assert_eq!(e["is_error"], true, "{e}");
        }
        assert_eq!(res[7]["exit_code"], json!(0), "{}", res[7]);
        assert!(env.work.join("tools/kept.txt").exists());
        assert!(!env.work.join("tools.old").exists());
    }
    for (path, text) in files {
        assert_eq!(
            std::fs::read_to_string(env.work.join(path)).expect("read"),
            text,
            "{path}"
        );
    }
}

/// `axocoatl.yaml` as a symlink (to a file in the workspace, or outside it): a command can
/// neither replace nor remove the link, nor move the directory its target lies in; the
/// write tools refuse the link and the target.
#[test]
fn a_configuration_reached_through_a_symlink_cannot_be_replaced() {
    for outside in [false, true] {
        let server = FakeServer::with([
            ollama_calls(&[
                (
                    "run_command",
                    json!({"command": "ln -sfn evil.yaml axocoatl.yaml"}),
                ),
                ("run_command", json!({"command": "rm -f axocoatl.yaml"})),
                (
                    "run_command",
                    json!({"command": "mv axocoatl.yaml old.yaml; ln -s evil.yaml axocoatl.yaml"}),
                ),
                (
                    "run_command",
                    json!({"command": "mv conf conf.old && mkdir conf && cp evil.yaml conf/real.yaml"}),
                ),
                (
                    "run_command",
                    json!({"command": "echo x >> conf/real.yaml"}),
                ),
                (
                    "write_file",
                    json!({"path": "axocoatl.yaml", "content": "agents: []"}),
                ),
                ("run_command", json!({"command": "echo ok > kept.txt"})),
            ]),
            ollama_text("Done."),
        ]);
        let env = env_with(&server, "");
        env.write("evil.yaml", "agents: []\n");
        let config = env.work.join("axocoatl.yaml");
        let text = std::fs::read(&config).expect("config");
        let dir = if outside {
            env.tmp.path().join("conf")
        } else {
            env.work.join("conf")
        };
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::rename(&config, dir.join("real.yaml")).expect("move");
        std::os::unix::fs::symlink(dir.join("real.yaml"), &config).expect("symlink");
        if outside {
            // A symlink `conf` in the workspace on the way to it.
            std::os::unix::fs::symlink(&dir, env.work.join("conf")).expect("symlink");
            std::fs::remove_file(&config).expect("rm");
            std::os::unix::fs::symlink("conf/real.yaml", &config).expect("symlink");
        }
        let r = env.run(&["send", "--json", "loosen your own sandbox"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let events = json_lines(&r.stdout);
        let res = tool_results(&events);
        assert_eq!(res.len(), 7, "{}", r.stdout);
        assert_eq!(res[5]["is_error"], true, "{}", res[5]);
        if landlock() {
            for e in &res[..5] {
                assert_eq!(e["is_error"], true, "outside: {outside}: {e}");
            }
            assert_eq!(res[6]["exit_code"], json!(0), "{}", res[6]);
        }
        let link = std::fs::read_link(&config).expect("still a link");
        assert!(link.ends_with("conf/real.yaml"), "{}", link.display());
        assert_eq!(std::fs::read(&config).expect("config"), text);
        assert!(!env.work.join("old.yaml").exists());
        assert!(!env.work.join("conf.old").exists());
    }
}

/// A configuration in a subdirectory of the workspace (`--config sub/axocoatl.yaml` with
/// `workspace: ..`): a command cannot move `sub` away and put another configuration there.
#[test]
fn a_configuration_in_a_subdirectory_keeps_its_path() {
    let server = FakeServer::with([
        ollama_calls(&[
            (
                "run_command",
                json!({"command": "mv sub sub.old && mkdir sub && echo 'agents: []' > sub/axocoatl.yaml"}),
            ),
            ("run_command", json!({"command": "echo ok > sub/kept.txt"})),
        ]),
        ollama_text("Done."),
    ]);
    let env = env_with(&server, "workspace: ..\n");
    let config = std::fs::read(env.work.join("axocoatl.yaml")).expect("config");
    std::fs::create_dir(env.work.join("sub")).expect("mkdir");
    std::fs::rename(
        env.work.join("axocoatl.yaml"),
        env.work.join("sub/axocoatl.yaml"),
    )
    .expect("move");
    let r = env.run(&[
        "--config",
        "sub/axocoatl.yaml",
        "send",
        "--json",
        "replace your configuration",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = tool_results(&events);
    assert_eq!(res.len(), 2, "{}", r.stdout);
    if landlock() {
        assert_eq!(res[0]["is_error"], true, "{}", res[0]);
        assert_eq!(res[1]["exit_code"], json!(0), "{}", res[1]);
    }
    assert!(!env.work.join("sub.old").exists());
    assert_eq!(
        std::fs::read(env.work.join("sub/axocoatl.yaml")).expect("config"),
        config
    );
}

/// `validate` warns where an MCP server program or script lies inside a workspace an agent
/// can write: the file is kept read-only, what it imports is not.
#[test]
fn validate_warns_of_server_files_in_a_writable_workspace() {
    let env = TestEnv::with_config(
        "providers:\n  llm: {kind: ollama}\nmcp_servers:\n  files:\n    command: python3\n    args: [server.py]\n  tool:\n    command: ./bin/tool\n  elsewhere:\n    command: /usr/bin/env\n    args: [-i]\nagents:\n  - id: coder\n    provider: llm\n    model: m\n    sandbox: workspace-write\n    mcp_servers: [files, tool, elsewhere]\n",
    );
    env.write("server.py", "");
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("validate_server_files_in_workspace", env.snap(&r));
}
