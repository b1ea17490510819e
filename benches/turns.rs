//! Turn benchmarks (issue: turns). Prints figures; asserts nothing about time.
//!
//! 1. `history --all --search` over a generated ledger of 1M turns (about 1 GB;
//!    `AXOCOATL_BENCH_TURNS` changes the count), next to `rg -i -F` over the same text
//!    exported as JSON Lines, in the same run (`bench/setup.sh` installs ripgrep);
//! 2. whole-process time of `axocoatl send` against a loopback Ollama server that answers
//!    instantly (median of 40), next to two raw fdatasyncs measured on the same disk, and the
//!    peak RSS of the send process.
//!
//! Run: `bench/setup.sh && cargo bench --bench turns`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::{AgentOutput, TurnBegun, TurnEnded, TurnState, Usage};
use axocoatl_store::ledger::Record;
use axocoatl_store::repo::{self, OpenOptions as RepoOptions};
use axocoatl_store::Repo;

const WORDS: &[&str] = &[
    "ledger",
    "agent",
    "budget",
    "segment",
    "stream",
    "checkpoint",
    "memory",
    "session",
    "provider",
    "rewind",
    "history",
    "export",
    "search",
    "token",
    "model",
    "durable",
];

fn text(seed: &mut u64, words: usize) -> String {
    let mut s = String::with_capacity(words * 8);
    for _ in 0..words {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(WORDS[(*seed >> 33) as usize % WORDS.len()]);
        s.push(' ');
    }
    s
}

fn generate(work: &Path, turns: usize) -> std::path::PathBuf {
    let root = repo::init(work).unwrap();
    let repo = Repo::open(&root, &RepoOptions::default()).unwrap();
    let jsonl = work.join("export.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    let mut seed = 7u64;
    let mut batch = Vec::with_capacity(3000);
    for i in 0..turns {
        let turn = format!("{:016x}", (i as u64).wrapping_mul(0x9e3779b97f4a7c15));
        let session = format!("s{}", i % 50);
        let mut request = text(&mut seed, 40);
        let output = text(&mut seed, 90);
        if i % 100_000 == 4242 {
            request.push_str("Quasar-Needle ");
        }
        writeln!(out, "{}", serde_json::json!({"turn": turn, "session": session, "request": request, "output": output})).unwrap();
        batch.push(Record::TurnBegun(TurnBegun {
            turn: turn.clone(),
            session: session.clone(),
            agent: "bench".into(),
            mode: "single".into(),
            request,
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at: i as i64,
        }));
        batch.push(Record::AgentOutput(AgentOutput {
            turn: turn.clone(),
            agent: "bench".into(),
            text: output,
            at: i as i64,
        }));
        batch.push(Record::TurnEnded(TurnEnded {
            turn,
            session,
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at: i as i64,
        }));
        if batch.len() >= 3000 {
            repo.ledger().append_lazy(&batch).unwrap();
            batch.clear();
        }
    }
    repo.ledger().append(&batch).unwrap();
    out.flush().unwrap();
    jsonl
}

fn time(cmd: &mut Command) -> (Duration, String) {
    let start = Instant::now();
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    (
        start.elapsed(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn search_bench(base: &Path, bin: &str) {
    let turns: usize = std::env::var("AXOCOATL_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let work = base.join("search");
    std::fs::create_dir_all(&work).unwrap();
    let start = Instant::now();
    let jsonl = generate(&work, turns);
    let bytes: u64 = std::fs::read_dir(work.join(".axocoatl/ledger/v1"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    println!(
        "generated {turns} turns: ledger {} MB in {:.1} s",
        bytes / 1_000_000,
        start.elapsed().as_secs_f64()
    );
    let needle = "quasar-needle";
    // Warm the page cache for both sides alike.
    let _ = time(
        Command::new(bin)
            .args(["history", "--all", "--search", needle])
            .current_dir(&work),
    );
    let have_rg = Command::new("rg")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if have_rg {
        let _ = time(Command::new("rg").args(["-i", "-F", needle]).arg(&jsonl));
    }
    let mut ours = Vec::new();
    let mut rg = Vec::new();
    let mut found = 0;
    for _ in 0..3 {
        let (d, out) = time(
            Command::new(bin)
                .args(["history", "--all", "--search", needle])
                .current_dir(&work),
        );
        found = out.lines().count();
        ours.push(d);
        if have_rg {
            rg.push(time(Command::new("rg").args(["-i", "-F", needle]).arg(&jsonl)).0);
        }
    }
    ours.sort();
    rg.sort();
    // A send to a fresh session beside all those turns: other sessions are walked, not decoded.
    std::fs::write(
        work.join("axocoatl.yaml"),
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n",
    )
    .unwrap();
    std::fs::write(work.join("r.yaml"), "replies:\n  - text: ok\n").unwrap();
    let mut sends: Vec<Duration> = (0..3)
        .map(|i| {
            time(
                Command::new(bin)
                    .args(["send", "--no-stdin", "-s", &format!("fresh{i}"), "hi"])
                    .current_dir(&work),
            )
            .0
        })
        .collect();
    sends.sort();
    println!(
        "send to a fresh session beside {turns} turns of others: {:.0} ms (median of 3)",
        sends[1].as_secs_f64() * 1e3
    );
    print!(
        "history --all --search over {turns} turns: {:.0} ms ({found} turns found)",
        ours[1].as_secs_f64() * 1e3
    );
    if have_rg {
        println!(
            "; rg -i -F over the same text as JSON Lines: {:.0} ms; ratio {:.2} (goal <= 1)",
            rg[1].as_secs_f64() * 1e3,
            ours[1].as_secs_f64() / rg[1].as_secs_f64()
        );
    } else {
        println!("; rg not found (run bench/setup.sh): comparison skipped");
    }
}

/// Two raw `write + fdatasync`s (ms, median of 40), measured back to back and in a send's
/// rhythm: one after the disk sat idle for a few milliseconds (a process starting), the next
/// ~1 ms later (the model call). An idle virtual disk answers a flush ~3x slower than one
/// that is kept busy, and a `send`'s two flushes are never back to back.
fn fdatasync_pair_ms(dir: &Path) -> (f64, f64) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("sync.bin"))
        .unwrap();
    let flush = |f: &mut std::fs::File| {
        let start = Instant::now();
        f.write_all(&[0u8; 100]).unwrap();
        f.sync_data().unwrap();
        start.elapsed()
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    let back_to_back: Vec<Duration> = (0..40).map(|_| flush(&mut f) + flush(&mut f)).collect();
    let in_rhythm: Vec<Duration> = (0..40)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(3));
            let first = flush(&mut f);
            std::thread::sleep(Duration::from_millis(1));
            first + flush(&mut f)
        })
        .collect();
    (median(back_to_back), median(in_rhythm))
}

fn peak_rss_kb(cmd: &mut Command) -> (Duration, i64) {
    let start = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: plain wait4 on our own child; rusage is a plain C struct.
    #[allow(unsafe_code)]
    let rss = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::wait4(pid, &mut status, 0, &mut usage);
        usage.ru_maxrss
    };
    std::mem::forget(child);
    (start.elapsed(), rss)
}

fn send_bench(base: &Path, bin: &str) {
    let runs = 40;
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1});
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "ok"}, "done": false});
    let server = fake_http::FakeServer::start();
    for _ in 0..runs + 1 {
        server.push(fake_http::Reply::ndjson(&format!("{line}\n{done}\n")));
    }
    let work = base.join("send");
    std::fs::create_dir_all(&work).unwrap();
    repo::init(&work).unwrap();
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!("providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n    tools: [core_memory_set]\n", server.url()),
    )
    .unwrap();
    let mut times = Vec::new();
    let mut rss = 0;
    for i in 0..runs {
        let (d, r) = peak_rss_kb(
            Command::new(bin)
                .args(["send", "--no-stdin", "-s", &format!("b{}", i % 4), "hi"])
                .current_dir(&work),
        );
        times.push(d);
        rss = rss.max(r);
    }
    times.sort();
    let ms = |i: usize| times[i].as_secs_f64() * 1e3;
    let median = ms(runs / 2);
    let (back_to_back, in_rhythm) = fdatasync_pair_ms(&work);
    println!(
        "send against an instant loopback server: median {median:.1} ms (quartiles {:.1}-{:.1}); two fdatasyncs here: {in_rhythm:.1} ms spaced as in a send ({back_to_back:.1} ms back to back); overhead beyond them {:.1} ms (goal <= 3 ms; {:.1} ms against back-to-back flushes); peak RSS {} KB (goal <= 15360 KB)",
        ms(runs / 4),
        ms(3 * runs / 4),
        median - in_rhythm,
        median - back_to_back,
        rss
    );
}

/// How long after `axocoatl stop` the stopped `send` exits (median of 10).
fn stop_bench(base: &Path, bin: &str) {
    let work = base.join("stop");
    std::fs::create_dir_all(&work).unwrap();
    repo::init(&work).unwrap();
    let server = fake_http::FakeServer::start();
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!("providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n", server.url()),
    )
    .unwrap();
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "w "}, "done": false});
    let mut times = Vec::new();
    for _ in 0..10 {
        let body: String = (0..200).map(|_| format!("{line}\n")).collect();
        server.push(fake_http::Reply::ndjson(&body).paced(Duration::from_millis(50)));
        let mut child = Command::new(bin)
            .args(["send", "--no-stdin", "go"])
            .current_dir(&work)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stderr.as_mut().unwrap()),
            &mut first,
        )
        .unwrap();
        let turn = first.trim().trim_start_matches("turn ").to_owned();
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        let st = Command::new(bin)
            .args(["stop", &turn])
            .current_dir(&work)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        child.wait().unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "stop: the stopped send exits {:.0} ms (median of 10, max {:.0} ms) after `axocoatl stop` starts (goal <= 500 ms)",
        times[5].as_secs_f64() * 1e3,
        times[9].as_secs_f64() * 1e3
    );
}

fn main() {
    let base = tempfile::Builder::new()
        .prefix("axobench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    // AXOCOATL_BENCH_KEEP=1 keeps the generated repositories for profiling.
    let path = if std::env::var("AXOCOATL_BENCH_KEEP").is_ok() {
        let p = base.keep();
        println!("bench directory (kept): {}", p.display());
        p
    } else {
        base.path().to_owned()
    };
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    send_bench(&path, bin);
    stop_bench(&path, bin);
    if std::env::var("AXOCOATL_BENCH_SKIP_SEARCH").is_err() {
        search_bench(&path, bin);
    }
}
