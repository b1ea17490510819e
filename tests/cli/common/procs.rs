//! Processes the tests start and watch: a running `serve`, signals, liveness, and the JSON
//! Lines every `--json` command prints.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::env::TestEnv;

/// Each line of `s` (blank lines skipped) as JSON; panics naming the line that is not.
pub fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `tool.result` events of a `send --json`, in order.
pub fn tool_results(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool.result")
        .collect()
}

/// The names of the tools a model request advertised (Ollama and OpenAI bodies alike).
pub fn advertised(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A running `serve` whose stderr (its logs) is collected line by line.
pub struct Serve {
    child: Option<Child>,
    pub pid: u32,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    pub fn start(env: &TestEnv) -> Serve {
        Serve::start_with(env, &["serve"])
    }

    pub fn start_with(env: &TestEnv, args: &[&str]) -> Serve {
        Serve::start_command(env.cmd(args))
    }

    /// A `serve` started by `cmd` (a limit set first, another directory), once it logged
    /// that it started.
    pub fn start_command(mut cmd: std::process::Command) -> Serve {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let pid = child.id();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr");
        {
            let logs = logs.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    logs.lock().expect("logs").push(line);
                }
            });
        }
        let serve = Serve {
            child: Some(child),
            pid,
            logs,
        };
        serve.wait_log("serve started");
        serve
    }

    pub fn logs(&self) -> String {
        self.logs.lock().expect("logs").join("\n")
    }

    pub fn wait_log(&self, needle: &str) {
        let start = Instant::now();
        loop {
            if self.logs().contains(needle) {
                return;
            }
            let exited = self.logs().contains("serve stopped") || self.logs().contains("error:");
            assert!(
                !exited && start.elapsed() < Duration::from_secs(60),
                "serve did not log {needle:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        kill(self.pid, sig);
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(mut self) -> i32 {
        self.signal(libc::SIGTERM);
        let status = self.child.take().expect("child").wait().expect("wait");
        status.code().unwrap_or(-1)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[expect(
    unsafe_code,
    reason = "kill(2) to a process the test started (directly or through serve): libc has no safe wrapper"
)]
pub fn kill(pid: u32, sig: i32) -> i32 {
    unsafe { libc::kill(pid as libc::pid_t, sig) }
}

/// Whether `pid` runs (a zombie does not: its parent, serve, is gone and nobody may reap it).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// `agents status --json`, one value per line (asserting it succeeded).
pub fn agents_status(env: &TestEnv) -> Vec<Value> {
    let r = env.run(&["agents", "status", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

/// The `type: actor` line of `agent` in `agents status --json`.
pub fn actor<'a>(lines: &'a [Value], agent: &str) -> &'a Value {
    lines
        .iter()
        .find(|v| v["type"] == "actor" && v["agent"] == agent)
        .unwrap_or_else(|| panic!("no actor {agent}: {lines:?}"))
}

/// Reads the `--json` events of a running `send` up to its first `tool.started`; returns the
/// turn id of its `turn.begun`.
pub fn turn_until_tool_started(
    lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>,
) -> String {
    let mut turn = String::new();
    for line in lines.by_ref() {
        let v: Value = serde_json::from_str(&line.expect("line")).expect("json");
        if v["type"] == "turn.begun" {
            turn = v["turn"].as_str().expect("turn").to_owned();
        }
        if v["type"] == "tool.started" {
            break;
        }
    }
    turn
}

/// Whether the process `pid` is gone (a zombie waiting to be reaped counts as gone).
pub fn gone(pid: &str) -> bool {
    pid.parse().map_or(true, |pid: u32| !alive(pid))
}
