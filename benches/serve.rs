//! `serve` benchmarks. Prints figures; asserts nothing about time.
//!
//! 1. whole-process time of `axocoatl send` against a loopback Ollama server that answers
//!    instantly: in process (no serve), then through a running serve (its actor keeps the
//!    conversation), medians of the same run;
//! 2. actor restart time: from `kill -9` of an actor to `agents list` showing its successor
//!    idle, and the successor's own start (spawn to `ready`, from serve's log);
//! 3. serve's shutdown time after SIGTERM.
//!
//! Run: `CARGO_INCREMENTAL=0 cargo bench --bench serve`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(v[v.len() / 4]),
        ms(v[v.len() / 2]),
        ms(v[3 * v.len() / 4]),
    )
}

fn send(bin: &str, work: &Path, session: &str) -> Duration {
    send_with(bin, work, session, None)
}

/// A send; with `embed_dir`, the neural embedder's model is looked for there (an empty
/// directory: the lexical fallback, no model to load).
fn send_with(bin: &str, work: &Path, session: &str, embed_dir: Option<&Path>) -> Duration {
    let start = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.args(["send", "--no-stdin", "-s", session, "hi"])
        .current_dir(work)
        .stderr(Stdio::null());
    if let Some(d) = embed_dir {
        cmd.env("AXOCOATL_EMBED_DIR", d);
    }
    let out = cmd.output().unwrap();
    let d = start.elapsed();
    assert!(out.status.success(), "send failed");
    d
}

fn actors(bin: &str, work: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(bin)
        .args(["agents", "list", "--json"])
        .current_dir(work)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[expect(
    unsafe_code,
    reason = "kill(2) to a process the bench started (through serve)"
)]
fn kill(pid: u32, sig: i32) {
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    let runs = 40;
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1});
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "ok"}, "done": false});
    let server = fake_http::FakeServer::start();
    for _ in 0..4 * runs + 20 {
        server.push(fake_http::Reply::ndjson(&format!("{line}\n{done}\n")));
    }
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("serve");
    std::fs::create_dir_all(&work).unwrap();
    let init = Command::new(bin).arg("init").arg(&work).output().unwrap();
    assert!(init.status.success(), "init failed");
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!("providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n", server.url()),
    )
    .unwrap();
    let sessions = ["b0", "b1", "b2", "b3"];
    for s in sessions {
        send(bin, &work, s);
    }
    let in_process: Vec<Duration> = (0..runs)
        .map(|i| send(bin, &work, sessions[i % 4]))
        .collect();
    let no_model = base.path().join("no-embedder");
    std::fs::create_dir_all(&no_model).unwrap();
    let in_process_lexical: Vec<Duration> = (0..runs)
        .map(|i| send_with(bin, &work, sessions[i % 4], Some(&no_model)))
        .collect();

    let mut serve = Command::new(bin)
        .arg("serve")
        .current_dir(&work)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let logs = Arc::new(Mutex::new(String::new()));
    {
        let logs = logs.clone();
        let stderr = serve.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines() {
                let Ok(l) = l else { break };
                let mut all = logs.lock().unwrap();
                all.push_str(&l);
                all.push('\n');
            }
        });
    }
    let wait_log = |needle: &str, count: usize| {
        let start = Instant::now();
        while logs.lock().unwrap().matches(needle).count() < count {
            assert!(start.elapsed() < Duration::from_secs(60), "serve: {needle}");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    wait_log("actor ready", 1);
    // One actor per session, started by the first turn to it.
    for s in sessions {
        send(bin, &work, s);
    }
    let through: Vec<Duration> = (0..runs)
        .map(|i| send(bin, &work, sessions[i % 4]))
        .collect();
    let (q1, m, q3) = median(in_process);
    let (s1, sm, s3) = median(through);
    println!(
        "send, whole process, instant loopback server ({runs} runs each, same run): in process median {m:.1} ms (quartiles {q1:.1}-{q3:.1}); through serve median {sm:.1} ms (quartiles {s1:.1}-{s3:.1}); difference {:+.1} ms",
        sm - m
    );
    let (l1, lm, l3) = median(in_process_lexical);
    println!(
        "  in process without the embedder model (lexical fallback, nothing to load): median {lm:.1} ms (quartiles {l1:.1}-{l3:.1}); serve's actor keeps the embedder loaded, so through serve the neural path costs {:+.1} ms against it",
        sm - lm
    );

    let mut restarts = Vec::new();
    let mut ready_ms = Vec::new();
    for round in 0..5 {
        let list = actors(bin, &work);
        let victim = list.iter().find(|a| a["session"] == "b0").unwrap();
        let pid = victim["pid"].as_u64().unwrap() as u32;
        let readies = logs.lock().unwrap().matches("actor ready").count();
        let start = Instant::now();
        kill(pid, libc::SIGKILL);
        loop {
            let list = actors(bin, &work);
            let a = list.iter().find(|a| a["session"] == "b0").unwrap();
            if a["state"] == "idle" && a["pid"].as_u64().is_some_and(|p| p as u32 != pid) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no restart");
            std::thread::sleep(Duration::from_millis(1));
        }
        restarts.push(start.elapsed());
        wait_log("actor ready", readies + 1);
        let all = logs.lock().unwrap().clone();
        if let Some(ms) = all
            .lines()
            .rfind(|l| l.contains("actor ready"))
            .and_then(|l| l.split("ms=").nth(1))
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse::<f64>().ok())
        {
            ready_ms.push(ms);
        }
        // A turn between kills: the conversation is back.
        send(bin, &work, "b0");
        let _ = round;
    }
    let (r1, rm, r3) = median(restarts);
    ready_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "actor restart after kill -9, until `agents list` shows the new actor idle (5 runs): median {rm:.0} ms (quartiles {r1:.0}-{r3:.0}); the new actor's own start (spawn, provider check, checkpoint load, ready): median {:.0} ms",
        ready_ms.get(ready_ms.len() / 2).copied().unwrap_or(f64::NAN)
    );

    let start = Instant::now();
    kill(serve.id(), libc::SIGTERM);
    let status = serve.wait().unwrap();
    println!(
        "serve shutdown after SIGTERM with {} actors: {:.0} ms ({status})",
        sessions.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
}
