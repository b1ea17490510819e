//! Teams benchmark: the orchestration overhead per subtask of a coordinator's
//! turn, beyond model time, against an instant loopback Ollama server. Prints figures;
//! asserts nothing about time.
//!
//! A coordinator turn with N independent subtasks (its plan call, N worker calls, the
//! aggregate call) is timed whole (`axocoatl send`, a new process each time) for N = 1, 2,
//! 4 and 8 with `max_parallel: 1`; the slope over N is what one more subtask costs. One
//! subtask's model time is one loopback request to the same server (timed from this
//! process); the rest of the slope is orchestration: a thread and a provider for the
//! worker, its `SubtaskStarted`/`ModelCall`/`SubtaskEnded` records, two orchestration-state
//! writes, and its share of the plan and aggregate requests. N = 8 with `max_parallel: 4`
//! is printed beside it.
//!
//! Run: `CARGO_INCREMENTAL=0 cargo bench --bench teams`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

const CREATED: &str = "2026-01-02T03:04:05Z";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn text(t: &str) -> fake_http::Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": t}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 10, "eval_count": 2});
    fake_http::Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

/// A plan of `n` independent subtasks for worker `w`, read from `n=K` in the request.
fn plan_for(body: &serde_json::Value) -> String {
    let all = body["messages"].to_string();
    let n: usize = all
        .split("n=")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse().ok())
        .unwrap_or(1);
    let subtasks: Vec<serde_json::Value> = (0..n)
        .map(|i| json!({"id": format!("s{i}"), "worker": "w", "task": "do it", "depends_on": []}))
        .collect();
    json!({ "subtasks": subtasks }).to_string()
}

fn repo_for(base: &Path, name: &str, url: &str, max_parallel: u32) -> PathBuf {
    let work = base.join(name);
    std::fs::create_dir_all(&work).unwrap();
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    let st = Command::new(bin)
        .args(["init"])
        .current_dir(&work)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!(
            "providers:\n  llm: {{kind: ollama, base_url: \"{url}\"}}\nagents:\n  - id: lead\n    provider: llm\n    model: lead-m\n    role: coordinator\n  - id: w\n    provider: llm\n    model: w-m\n    role: worker\nworkflows:\n  - id: crew\n    entry_point: lead\n    workers: [w]\n    max_parallel: {max_parallel}\n"
        ),
    )
    .unwrap();
    work
}

fn send(work: &Path, session: &str, message: &str) -> Duration {
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    let t = Instant::now();
    let st = Command::new(bin)
        .args(["send", "--no-stdin", "-a", "lead", "-s", session, message])
        .current_dir(work)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    t.elapsed()
}

/// One model call's time on the instant server: a whole loopback request and its streamed
/// reply, from this process.
fn raw_call(addr: &str) -> Duration {
    let body =
        json!({"model": "w-m", "messages": [{"role": "user", "content": "do it"}], "stream": true})
            .to_string();
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The server keeps the connection alive: the reply ends with the last (empty) chunk.
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !reply.ends_with(b"0\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed before the reply's last chunk");
        reply.extend_from_slice(&buf[..n]);
    }
    assert!(reply.starts_with(b"HTTP/1.1 200"));
    t.elapsed()
}

fn main() {
    let server = fake_http::FakeServer::responding(|r: &fake_http::Recorded| {
        let body = r.json();
        match body["model"].as_str().unwrap_or("") {
            "lead-m" if body["format"] == "json" => text(&plan_for(&body)),
            "lead-m" => text("done"),
            _ => text("ok"),
        }
    });
    let base = std::env::temp_dir().join(format!("axocoatl-bench-teams-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let seq = repo_for(&base, "seq", &server.url(), 1);
    let par = repo_for(&base, "par", &server.url(), 4);
    let runs = 15;
    let sizes = [1usize, 2, 4, 8];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sizes.len()];
    let mut parallel8 = Vec::new();
    // Interleaved, each size in its own few sessions, so all see the same machine.
    for i in 0..runs + 1 {
        for (k, n) in sizes.iter().enumerate() {
            let t = send(&seq, &format!("n{n}-{}", i % 3), &format!("go n={n}"));
            if i > 0 {
                times[k].push(t);
            }
        }
        let t = send(&par, &format!("p-{}", i % 3), "go n=8");
        if i > 0 {
            parallel8.push(t);
        }
    }
    let addr = server.url().trim_start_matches("http://").to_owned();
    let raw: Vec<Duration> = (0..200).map(|_| raw_call(&addr)).collect();
    let raw = ms(median(raw));
    println!("coordinator turn, whole `axocoatl send` (median of {runs}), max_parallel 1:");
    let med: Vec<f64> = times.into_iter().map(|v| ms(median(v))).collect();
    for (n, t) in sizes.iter().zip(&med) {
        println!(
            "  {n} subtask{}: {t:.1} ms ({} model calls)",
            if *n == 1 { " " } else { "s" },
            n + 2
        );
    }
    let slope = (med[3] - med[0]) / 7.0;
    println!(
        "  8 subtasks, max_parallel 4: {:.1} ms",
        ms(median(parallel8))
    );
    println!(
        "one model call on the instant server (loopback request + streamed reply): {raw:.2} ms"
    );
    println!(
        "per subtask: {slope:.2} ms in all; orchestration overhead beyond model time: {:.2} ms",
        slope - raw
    );
    let _ = std::fs::remove_dir_all(&base);
}
