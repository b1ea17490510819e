//! Tool benchmarks. Prints figures; asserts nothing about time.
//!
//! 1. In process: one `read_file` dispatch through the toolbox (4 KiB file), and one
//!    `run_command` of `true` unconfined vs under the workspace-write sandbox (Landlock +
//!    seccomp set up for each command).
//! 2. Whole process: `axocoatl send` of a turn whose model answers at once, vs the same turn
//!    (same agent, same advertised tools) where the model first calls `read_file` once:
//!    the difference is one tool round (dispatch, the ToolStarted/ToolFinished records and a
//!    second call to the loopback server).
//! 3. Stop latency during `run_command`: from `axocoatl stop` to the stopped `send` exiting
//!    (its command's process group gets SIGTERM, then SIGKILL after 2 s if still alive).
//!
//! Run: `cargo bench --bench tools`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl::config::{MemoryConfig, SandboxMode};
use axocoatl::memory::AgentMemory;
use axocoatl::provider::Cancel;
use axocoatl::tools::{Context, Root, Toolbox};
use axocoatl_store::repo;
use axocoatl_store::Repo;
use serde_json::json;

const CREATED: &str = "2026-01-02T03:04:05Z";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn in_process(base: &Path) {
    let ws = base.join("inproc");
    std::fs::create_dir_all(&ws).unwrap();
    let root_dir = repo::init(&ws).unwrap();
    let repo = Repo::open(&root_dir, &Default::default()).unwrap();
    std::fs::write(ws.join("file.txt"), "x".repeat(4095) + "\n").unwrap();
    let memory = AgentMemory::for_id(&repo, "bench:a", &MemoryConfig::default());
    let root = Root::new(&ws, &root_dir).unwrap();
    let cancel = Cancel::new();
    let cx = |sandbox| Context {
        root: &root,
        sandbox,
        cancel: &cancel,
        memory: &memory,
        turn: None,
    };
    let ro = Toolbox::new(&[], SandboxMode::ReadOnly);
    let args = json!({"path": "file.txt"});
    let c = cx(SandboxMode::ReadOnly);
    let mut times = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        let out = ro.call(&c, "read_file", &args);
        times.push(t.elapsed());
        assert!(!out.output.is_error);
    }
    println!(
        "read_file dispatch in process (4 KiB file, path checks, schema-typed arguments): median {:.1} µs over 2000",
        median(times).as_secs_f64() * 1e6
    );
    let run = json!({"command": "true"});
    for sandbox in [SandboxMode::FullAccess, SandboxMode::WorkspaceWrite] {
        let tb = Toolbox::new(&[], sandbox);
        let c = cx(sandbox);
        let mut times = Vec::new();
        for _ in 0..60 {
            let t = Instant::now();
            let out = tb.call(&c, "run_command", &run);
            times.push(t.elapsed());
            assert_eq!(out.output.exit_code, Some(0), "{}", out.output.text);
        }
        println!(
            "run_command `true`, {}: median {:.2} ms over 60",
            sandbox.as_str(),
            ms(median(times))
        );
    }
}

fn ollama_text(text: &str) -> fake_http::Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": text}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 3, "eval_count": 1});
    fake_http::Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

fn ollama_call(name: &str, args: serde_json::Value) -> fake_http::Reply {
    let first = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": args}}]}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 3, "eval_count": 1});
    fake_http::Reply::ndjson(&format!("{first}\n{last}\n"))
}

fn repo_for(
    base: &Path,
    name: &str,
    server: &fake_http::FakeServer,
    sandbox: &str,
) -> std::path::PathBuf {
    let work = base.join(name);
    std::fs::create_dir_all(&work).unwrap();
    repo::init(&work).unwrap();
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!("providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n    sandbox: {sandbox}\n", server.url()),
    )
    .unwrap();
    std::fs::write(work.join("file.txt"), "x".repeat(4095) + "\n").unwrap();
    work
}

fn whole_turns(base: &Path, bin: &str) {
    let runs = 30;
    let server = fake_http::FakeServer::start();
    let work = repo_for(base, "turns", &server, "read-only");
    let send = |session: &str| {
        let t = Instant::now();
        let st = Command::new(bin)
            .args(["send", "--no-stdin", "-s", session, "hi"])
            .current_dir(&work)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        t.elapsed()
    };
    let (mut plain, mut tool) = (Vec::new(), Vec::new());
    // Interleaved, each in its own sessions, so both see the same machine and ledger size.
    for i in 0..runs + 1 {
        server.push(ollama_text("ok"));
        let p = send(&format!("plain{}", i % 4));
        server.push(ollama_call("read_file", json!({"path": "file.txt"})));
        server.push(ollama_text("ok"));
        let t = send(&format!("tool{}", i % 4));
        if i > 0 {
            plain.push(p);
            tool.push(t);
        }
    }
    let (p, t) = (ms(median(plain)), ms(median(tool)));
    println!(
        "send, model answers at once: median {p:.2} ms; same turn with one read_file round: median {t:.2} ms; one tool round costs {:.2} ms (dispatch, 2 records, and a second loopback model call)",
        t - p
    );
}

fn stop_latency(base: &Path, bin: &str) {
    let server = fake_http::FakeServer::start();
    let work = repo_for(base, "stop", &server, "workspace-write");
    let mut times = Vec::new();
    for i in 0..5 {
        let _ = std::fs::remove_file(work.join("pid"));
        server.push(ollama_call(
            "run_command",
            json!({"command": "sleep 1000 & echo $! > pid; wait"}),
        ));
        let mut child = Command::new(bin)
            .args([
                "send",
                "--json",
                "--no-stdin",
                "-s",
                &format!("s{i}"),
                "wait",
            ])
            .current_dir(&work)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut turn = String::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["type"] == "turn.begun" {
                turn = v["turn"].as_str().unwrap().to_owned();
            }
            if v["type"] == "tool.started" {
                break;
            }
        }
        while !std::fs::read_to_string(work.join("pid")).is_ok_and(|p| p.ends_with('\n')) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        let st = Command::new(bin)
            .args(["stop", &turn])
            .current_dir(&work)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        let code = child.wait().unwrap().code();
        times.push(t.elapsed());
        assert_eq!(code, Some(4));
    }
    let max = *times.iter().max().unwrap();
    println!(
        "stop during run_command (`sleep 1000` under workspace-write): from `axocoatl stop` to `send` exiting 4: median {:.0} ms, max {:.0} ms over 5 (goal: within 3 s)",
        ms(median(times)),
        ms(max)
    );
}

fn main() {
    let base = tempfile::Builder::new()
        .prefix("axobench-tools")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    in_process(base.path());
    whole_turns(base.path(), bin);
    stop_latency(base.path(), bin);
}
