//! Turn benchmarks. Prints figures; asserts nothing about time.
//!
//! 1. Beside a generated ledger of 1M turns in 1,000 sessions (about 1 GB;
//!    `AXOCOATL_BENCH_TURNS` changes the count): every figure of the goals for years of
//!    history (commands that read one session or one turn, `sessions`, `usage`, open,
//!    `send`, 8 concurrent sends with the machine's ceilings beside them, index build time and size, and
//!    `history --all --search` for a word in 0.01% and one in 50% of turns next to the scan
//!    without the term index, `rg -i -F` over the same text as JSON Lines and SQLite FTS5
//!    `MATCH` on the same rows (`bench/fts5.py`, Python's sqlite3); `bench/setup.sh`
//!    installs ripgrep);
//! 2. whole-process time of `axocoatl send` against a loopback Ollama server that answers
//!    instantly (median of 40), next to two raw fdatasyncs measured on the same disk, and the
//!    peak RSS of the send process.
//!
//! 3. the SQLite export of the 1M-turn ledger (`export --all --format sqlite`) and its
//!    refresh after 1,000 more turns, beside the same ledger read whole (`export --format
//!    json`, the floor of reading and decoding every record) and a refresh with nothing new;
//! 4. turn overhead with OpenTelemetry traces on: a one-shot `send` posting its trace to a
//!    loopback OTLP receiver before it exits, and a `send` through `serve` (whose actor
//!    batches), each beside the same with traces off (goal <= 2 ms beyond the flush bound).
//!
//! Run: `bench/setup.sh && cargo bench --bench turns` (`AXOCOATL_BENCH_ONLY=traces` runs
//! the trace figures alone, `=send` the whole-process send alone, `=sqlite` the export
//! figures on a ledger of `AXOCOATL_BENCH_TURNS` turns).
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

/// A word in 0.01% of turns, one in 50%.
const RARE: &str = "quasarneedle";
const HALF: &str = "halfword";
const SESSIONS: usize = 1000;

/// A word of a vocabulary too large to repeat much (names, numbers, identifiers): with
/// three in each turn a 16 MiB segment has ~40,000 distinct words, as real text does
/// (Heaps' law), where the 16 common words alone would make a dictionary of a few dozen.
fn rare_word(seed: &mut u64) -> String {
    let mut next = || {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    };
    let len = 4 + next() % 8;
    (0..len)
        .map(|_| (b'a' + (next() % 26) as u8) as char)
        .collect()
}

fn turn_id(i: usize) -> String {
    format!("{:016x}", (i as u64).wrapping_mul(0x9e3779b97f4a7c15))
}

fn generate(work: &Path, turns: usize) -> std::path::PathBuf {
    generate_in(work, turns, RepoOptions::default())
}

/// [`generate`] into segments of `options.segment_limit` bytes.
fn generate_in(work: &Path, turns: usize, options: RepoOptions) -> std::path::PathBuf {
    let root = repo::init(work).unwrap();
    let repo = Repo::open(&root, &options).unwrap();
    let jsonl = work.join("export.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    let mut seed = 7u64;
    let mut batch = Vec::with_capacity(3000);
    for i in 0..turns {
        let turn = turn_id(i);
        let session = format!("s{}", i % SESSIONS);
        let mut request = text(&mut seed, 40);
        let mut output = text(&mut seed, 90);
        for _ in 0..3 {
            output.push_str(&rare_word(&mut seed));
            output.push(' ');
        }
        if i % 10_000 == 4242 {
            request.push_str("Quasar-Needle QuasarNeedle ");
        }
        if i % 2 == 0 {
            request.push_str("HalfWord ");
        }
        writeln!(out, "{}", serde_json::json!({"turn": turn, "session": session, "request": request, "output": output})).unwrap();
        let at = 1_767_225_600_000 + i as i64 * 30_000;
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
            at,
            schema: None,
        }));
        batch.push(Record::AgentOutput(AgentOutput {
            turn: turn.clone(),
            agent: "bench".into(),
            text: output,
            at,
        }));
        batch.push(Record::TurnEnded(TurnEnded {
            turn,
            session,
            state: TurnState::Completed,
            error: None,
            usage: Usage {
                prompt_tokens: 40,
                completion_tokens: 90,
                calls: 1,
                complete: true,
            },
            at,
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

/// One whole-process run of `args` in `dir` with `env`, its stderr dropped: how long it
/// took and what it printed to `out` (empty unless piped).
fn run_once(
    bin: &str,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    out: Stdio,
) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    let done = Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(out)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    (start.elapsed(), done.stdout)
}

/// Median whole-process time of `args` run `n` times in `dir` (after one warm-up run), and
/// the last run's stdout.
fn median_ms(
    bin: &str,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    n: usize,
) -> (f64, String) {
    let run = || {
        let (d, out) = run_once(bin, dir, args, env, Stdio::piped());
        (d, String::from_utf8_lossy(&out).into_owned())
    };
    let _ = run();
    let mut times = Vec::new();
    let mut last = String::new();
    for _ in 0..n {
        let (d, out) = run();
        times.push(d);
        last = out;
    }
    times.sort();
    (times[n / 2].as_secs_f64() * 1e3, last)
}

/// Medians of `args` run as is and with `env`, alternating `n` times in `dir` (each first in
/// every other round, after a warm-up run of each), standard output to /dev/null: two
/// commands timed side by side on a host whose speed drifts; and how many lines the first
/// printed.
fn alternating_ms(
    bin: &str,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    n: usize,
) -> (f64, f64, usize) {
    let run = |env: &[(&str, &str)], out: Stdio| run_once(bin, dir, args, env, out);
    let lines = run(&[], Stdio::piped()).1.split(|&b| b == b'\n').count() - 1;
    let _ = run(env, Stdio::null());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    // Each goes first in every other round: the second of a pair finds the page cache and
    // the host as the first left them.
    for round in 0..n {
        if round % 2 == 0 {
            a.push(run(&[], Stdio::null()).0);
            b.push(run(env, Stdio::null()).0);
        } else {
            b.push(run(env, Stdio::null()).0);
            a.push(run(&[], Stdio::null()).0);
        }
    }
    (median_of(a), median_of(b), lines)
}

fn median_of(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Asserts that a command succeeded, showing its stderr if not: the commands' own output
/// (a send's turn id on stderr) is collected rather than printed between the figures.
fn succeeded(out: std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// 8 processes of `cmd(i)` one after another, then all at once: (sequential, concurrent).
fn eight(cmd: impl Fn(usize) -> Command) -> (Duration, Duration) {
    let start = Instant::now();
    for i in 0..8 {
        succeeded(cmd(i).stdout(Stdio::null()).output().unwrap());
    }
    let sequential = start.elapsed();
    let start = Instant::now();
    let children: Vec<_> = (0..8)
        .map(|i| {
            cmd(i + 8)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        succeeded(c.wait_with_output().unwrap());
    }
    (sequential, start.elapsed())
}

/// 8 threads each doing two `write + fdatasync`s on their own file, one after another and
/// all at once: the disk's own ceiling for 8 concurrent sends.
fn eight_flush_pairs(dir: &Path) -> (Duration, Duration) {
    let pair = |i: usize| {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("flush{i}.bin")))
            .unwrap();
        for _ in 0..2 {
            f.write_all(&[0u8; 600]).unwrap();
            f.sync_data().unwrap();
        }
    };
    let start = Instant::now();
    for i in 0..8 {
        pair(i);
    }
    let sequential = start.elapsed();
    let start = Instant::now();
    std::thread::scope(|s| {
        for i in 0..8 {
            s.spawn(move || pair(i));
        }
    });
    (sequential, start.elapsed())
}

/// Waits for every dirty page to reach the disk (`sync`), so that writeback of what the
/// bench itself wrote does not run under the timed commands.
fn settle() {
    let _ = Command::new("sync").status();
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

fn index_bench(base: &Path, bin: &str) {
    let turns: usize = std::env::var("AXOCOATL_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let work = base.join("search");
    std::fs::create_dir_all(&work).unwrap();
    let start = Instant::now();
    let jsonl = generate(&work, turns);
    let ledger_dir = work.join(".axocoatl/ledger/v1");
    let ledger_bytes = dir_bytes(&ledger_dir);
    let segments = std::fs::read_dir(&ledger_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .count();
    println!(
        "generated {turns} turns in {SESSIONS} sessions: ledger {} MB in {segments} segments, in {:.1} s",
        ledger_bytes / 1_000_000,
        start.elapsed().as_secs_f64()
    );
    std::fs::write(
        work.join("axocoatl.yaml"),
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n",
    )
    .unwrap();
    std::fs::write(
        work.join("r.yaml"),
        "replies:\n  - match: \"hi\"\n    text: ok\n",
    )
    .unwrap();
    // The first reader builds every sealed segment's index (in parallel).
    let (first, _) = time(Command::new(bin).args(["sessions"]).current_dir(&work));
    let index_bytes = dir_bytes(&ledger_dir.join("index"));
    println!(
        "first command after generation (builds every index, {} cores): {:.2} s; index size {} MB = {:.3} of the ledger",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        first.as_secs_f64(),
        index_bytes / 1_000_000,
        index_bytes as f64 / ledger_bytes as f64
    );
    // The first search merges the term indexes of whole spans of sealed segments (once);
    // then one span, missing, is merged again by the next search.
    let terms = |dir: &Path| -> (usize, u64) {
        let files: Vec<u64> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".terms"))
            .map(|e| e.metadata().unwrap().len())
            .collect();
        (files.len(), files.iter().sum())
    };
    let search = ["history", "--all", "--search", RARE];
    let (merge_all, _) = time(
        Command::new(bin)
            .args(search)
            .current_dir(&work)
            .stdout(Stdio::null()),
    );
    let (spans, terms_bytes) = terms(&ledger_dir.join("index"));
    let one = ledger_dir.join("index/000000000001-000000000032.terms");
    let span_bytes = std::fs::metadata(&one).map_or(0, |m| m.len());
    std::fs::remove_file(&one).unwrap();
    let (merge_one, _) = time(
        Command::new(bin)
            .args(search)
            .current_dir(&work)
            .stdout(Stdio::null()),
    );
    let all_bytes = dir_bytes(&ledger_dir.join("index"));
    println!(
        "first search after generation (merges the term indexes of {spans} spans of sealed segments, once): {:.2} s; one span of 32 segments (512 MiB) merged again by a search: {:.2} s, {} MB; merged term indexes {} MB; all indexes {} MB = {:.3} of the ledger",
        merge_all.as_secs_f64(),
        merge_one.as_secs_f64(),
        span_bytes / 1_000_000,
        terms_bytes / 1_000_000,
        all_bytes / 1_000_000,
        all_bytes as f64 / ledger_bytes as f64
    );
    // One segment's index, built again in this process (no other work): one of these 16 MiB
    // segments, and one of 64 MiB (the goal's figure) in a ledger of the same turns written
    // with that segment size.
    let seg64 = work.join("seg64");
    std::fs::create_dir_all(&seg64).unwrap();
    generate_in(
        &seg64,
        60_000,
        RepoOptions {
            segment_limit: 64 << 20,
            ..RepoOptions::default()
        },
    );
    for (root, limit) in [(work.clone(), "16 MiB"), (seg64.clone(), "64 MiB")] {
        let repo = Repo::open(&root.join(".axocoatl"), &RepoOptions::default()).unwrap();
        // Once untimed: the first also builds the indexes the plan finds missing.
        repo.reader().rebuild_index(1).unwrap();
        let mut builds = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let bytes = repo.reader().rebuild_index(1).unwrap();
            builds.push((start.elapsed(), bytes));
        }
        builds.sort();
        let seg_len = std::fs::metadata(root.join(".axocoatl/ledger/v1/000000000001.seg"))
            .unwrap()
            .len();
        println!(
            "index build for one segment of a ledger with {limit} segments ({:.1} MiB): {:.0} ms (median of 5; goal for 64 MiB <= 1000 ms), its index {} KB",
            seg_len as f64 / f64::from(1 << 20),
            builds[2].0.as_secs_f64() * 1e3,
            builds[2].1 / 1000
        );
    }
    std::fs::remove_dir_all(&seg64).unwrap();
    // Empty session lock files, as 1,000 sessions that sent turns leave them.
    let locks = work.join(".axocoatl/run/sessions");
    for i in 0..SESSIONS {
        std::fs::write(locks.join(format!("s{i}.lock")), b"").unwrap();
    }
    let middle = turn_id(turns / 2 + 7);
    // The generated ledger and its indexes (1.3 GB) are written back before anything is
    // timed: the figures are the commands', not the kernel's writeback of this setup.
    settle();
    let n = 9;
    let figures: Vec<(&str, Vec<&str>)> = vec![
        ("history -s S (1,000 turns)", vec!["history", "-s", "s7"]),
        ("show T", vec!["show", &middle[..12]]),
        ("sessions (1,000)", vec!["sessions"]),
        ("usage -s S", vec!["usage", "-s", "s7"]),
        (
            "stop of a finished turn (exit 6)",
            vec!["stop", &middle[..12]],
        ),
        (
            "open + orphan sweep (history of an empty session; 1,000 session lock files)",
            vec!["history", "-s", "nosuchsession"],
        ),
    ];
    for (what, args) in &figures {
        let (ms, _) = median_ms(bin, &work, args, &[], n);
        println!("{what}: {ms:.1} ms whole process (median of {n}; goal <= 20 ms)");
    }
    // send beside 1M turns of other sessions: as installed (the neural embedder loads for
    // semantic memory when its model is there), and with no embedder model (the lexical
    // fallback: what the turn engine and the ledger cost alone).
    let no_model = work.join("no-embedder");
    std::fs::create_dir_all(&no_model).unwrap();
    // The same configuration with an empty ledger: its sends, alternating with those beside
    // 1M turns, are the floor here (process start, configuration, the turn's own files).
    let empty = work.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    repo::init(&empty).unwrap();
    for file in ["axocoatl.yaml", "r.yaml"] {
        std::fs::copy(work.join(file), empty.join(file)).unwrap();
    }
    for (label, embed_dir) in [
        ("as installed", None),
        ("without the embedder model", Some(&no_model)),
    ] {
        let send = |dir: &Path, session: String| {
            let start = Instant::now();
            let mut c = Command::new(bin);
            c.args(["send", "--no-stdin", "-s", &session, "hi"])
                .current_dir(dir)
                .stdout(Stdio::null());
            if let Some(d) = embed_dir {
                c.env("AXOCOATL_EMBED_DIR", d);
            }
            succeeded(c.output().unwrap());
            start.elapsed()
        };
        let mut sends = Vec::new();
        let mut floor = Vec::new();
        for i in 0..n {
            let tag = embed_dir.map_or("", |_| "x");
            sends.push(send(&work, format!("fresh{i}{tag}")));
            if embed_dir.is_some() {
                floor.push(send(&empty, format!("fresh{i}{tag}")));
            }
        }
        let send_ms = median_of(sends);
        let (back_to_back, in_rhythm) = fdatasync_pair_ms(&work);
        // As installed, a send loads the embedder (its recall search and the retained
        // exchange): that load alone, with no ledger and no turn, is printed beside it.
        let embedder = if embed_dir.is_none() {
            let (ms, _) = median_ms(bin, &work, &["memory", "search", "hello"], &[], n);
            format!("; of which loading the embedder, as `memory search` alone: {ms:.1} ms")
        } else {
            let floor = median_of(floor);
            format!(
                "; the same send to a fresh session of an empty ledger, alternating with these: {floor:.1} ms, so the 1M turns add {:.1} ms",
                send_ms - floor
            )
        };
        println!(
            "send to a fresh session beside {turns} turns of others, {label}: {send_ms:.1} ms (median of {n}); two fdatasyncs here {in_rhythm:.1} ms spaced as in a send ({back_to_back:.1} back to back); beyond them {:.1} ms (goal <= 5 ms){embedder}",
            send_ms - in_rhythm
        );
    }
    // 8 sends in 8 sessions, one after another and all at once: as installed (each send
    // loads the embedder: 0.2 s of CPU and memory traffic) and without the embedder model
    // (medians of 5 rounds of ratios), beside the ceilings of this machine.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut round = 0;
    for (label, embed) in [
        ("as installed", None),
        ("without the embedder model", Some(&no_model)),
    ] {
        let rounds = 5;
        let mut ratios = Vec::new();
        let (mut seq_ms, mut conc_ms) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            round += 1;
            let (seq, conc) = eight(|i| {
                let mut c = Command::new(bin);
                c.args(["send", "--no-stdin", "-s", &format!("par{round}-{i}"), "hi"])
                    .current_dir(&work);
                if let Some(d) = embed {
                    c.env("AXOCOATL_EMBED_DIR", d);
                }
                c
            });
            ratios.push(seq.as_secs_f64() / conc.as_secs_f64());
            seq_ms.push(seq);
            conc_ms.push(conc);
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "8 concurrent sends in 8 sessions vs one after another, {label}: {:.0} vs {:.0} ms = {:.2}x (goal >= 0.75 x {cores} cores = {:.2}x; median of {rounds})",
            median_of(conc_ms),
            median_of(seq_ms),
            ratios[ratios.len() / 2],
            0.75 * cores as f64,
        );
    }
    // The ceiling of the embedder load itself: 8 `memory search`es (each loads the model,
    // no turn, no ledger write), one after another and all at once.
    let (eseq, econc) = eight(|_| {
        let mut c = Command::new(bin);
        c.args(["memory", "search", "hello"]).current_dir(&work);
        c
    });
    println!(
        "ceiling of the embedder load here: 8 `axocoatl memory search` (each loads the model) {:.0} vs {:.0} ms = {:.2}x",
        econc.as_secs_f64() * 1e3,
        eseq.as_secs_f64() * 1e3,
        eseq.as_secs_f64() / econc.as_secs_f64()
    );
    let mut ceilings = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (fseq, fconc) = eight_flush_pairs(&work);
        ceilings.0.push(fseq.as_secs_f64() / fconc.as_secs_f64());
        let (vseq, vconc) = eight(|_| {
            let mut c = Command::new(bin);
            c.args(["--version"]);
            c
        });
        ceilings.1.push(vseq.as_secs_f64() / vconc.as_secs_f64());
    }
    ceilings.0.sort_by(f64::total_cmp);
    ceilings.1.sort_by(f64::total_cmp);
    println!(
        "ceilings here (medians of 5): 8 flush pairs (2 x write+fdatasync) {:.2}x, 8 `axocoatl --version` {:.2}x",
        ceilings.0[2], ceilings.1[2]
    );
    // Search: a word in 0.01% of turns, one in 50%, next to ripgrep and SQLite FTS5.
    let have_rg = have("rg", "--version");
    let fts5 = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/fts5.py");
    let db = work.join("fts5.db");
    let have_py = have("python3", "--version");
    if have_py {
        let out = Command::new("python3")
            .arg(&fts5)
            .arg("build")
            .arg(&db)
            .arg(&jsonl)
            .output()
            .unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
    settle();
    for (word, share) in [(RARE, "0.01%"), (HALF, "50%")] {
        let args = ["history", "--all", "--search", word];
        let rounds = if word == RARE { 10 } else { 4 };
        let (ours, scan, found) =
            alternating_ms(bin, &work, &args, &[("AXOCOATL_SEARCH_SCAN", "1")], rounds);
        let mut line = format!(
            "history --all --search {word} (in {share} of turns, {found} found): {ours:.1} ms; the same by a scan without the term index: {scan:.1} ms (medians of {rounds}, alternating, output to /dev/null)"
        );
        if have_rg {
            let mut times = Vec::new();
            for _ in 0..4 {
                times.push(
                    time(
                        Command::new("rg")
                            .args(["-i", "-F", "-c", word])
                            .arg(&jsonl),
                    )
                    .0,
                );
            }
            let rg = median_of(times[1..].to_vec());
            line.push_str(&format!(
                "; rg -i -F over the same text as JSON Lines: {rg:.1} ms; rg / ours = {:.1}x (goal for the 0.01% word >= 20x)",
                rg / ours
            ));
        } else {
            line.push_str("; rg not found (run bench/setup.sh)");
        }
        println!("{line}");
        if have_py {
            let out = Command::new("python3")
                .arg(&fts5)
                .arg("query")
                .arg(&db)
                .arg(word)
                .output()
                .unwrap();
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
        if word != RARE {
            continue;
        }
        // The same search in a process of its own that opens the repository once (as
        // FTS5's queries run in a Python process of their own with the table open), beside
        // FTS5's in-process query; and FTS5 as a whole process, beside ours. The first search
        // of a process opens and checks every segment's index; the next ones find them kept
        // (as FTS5's queries find their pages in SQLite's cache). Not in this process: its
        // heap holds what generating a million turns left (glibc's allocator was ~10% slower
        // in it).
        let own = Command::new(std::env::current_exe().unwrap())
            .env(IN_PROCESS_ENV, format!("{}\n{word}", work.display()))
            .output()
            .unwrap();
        succeeded(own.clone());
        print!("{}", String::from_utf8_lossy(&own.stdout));
        if have_py {
            let mut times = Vec::new();
            for _ in 0..5 {
                times.push(
                    time(
                        Command::new("python3")
                            .arg(&fts5)
                            .arg("once")
                            .arg(&db)
                            .arg(word),
                    )
                    .0,
                );
            }
            println!(
                "sqlite FTS5 MATCH {word:?} as a whole process (python3 bench/fts5.py once, printing the turn ids): {:.1} ms (median of 5); ours whole process {ours:.1} ms",
                median_of(times)
            );
        }
        // The same query through SQLite's own command line program, where it is installed:
        // a native process, without Python's start.
        if have_py && have("sqlite3", "--version") {
            let sql = format!(
                "SELECT turn, session, request, output FROM turns WHERE turns MATCH '\"{word}\"'"
            );
            let mut times = Vec::new();
            for _ in 0..10 {
                let start = Instant::now();
                succeeded(
                    Command::new("sqlite3")
                        .arg(&db)
                        .arg(&sql)
                        .stdout(Stdio::null())
                        .output()
                        .unwrap(),
                );
                times.push(start.elapsed());
            }
            let (version, _) = median_ms("sqlite3", &work, &["--version"], &[], 5);
            println!(
                "sqlite3 (the command line program) MATCH {word:?} returning the rows' text, as a whole process: {:.1} ms (median of 9 after one); `sqlite3 --version` alone {version:.1} ms; ours whole process {ours:.1} ms",
                median_of(times[1..].to_vec())
            );
        }
    }
    sqlite_bench(&work, bin, turns);
}

/// `export --all --format sqlite` of the ledger in `work` (`turns` turns), then its refresh
/// after 1,000 more turns, and a refresh with nothing new.
fn sqlite_bench(work: &Path, bin: &str, turns: usize) {
    let db = work.join("history.db");
    let _ = std::fs::remove_file(&db);
    settle();
    let start = Instant::now();
    let out = Command::new(bin)
        .args(["export", "--all", "--format", "sqlite", "-o"])
        .arg(&db)
        .current_dir(work)
        .output()
        .unwrap();
    let export = start.elapsed();
    succeeded(out);
    let size = std::fs::metadata(&db).map_or(0, |m| m.len());
    settle();
    // The floor: reading and decoding every record of the ledger (the JSON export does that
    // and writes a file of the same text).
    let json = work.join("history.json");
    let start = Instant::now();
    succeeded(
        Command::new(bin)
            .args(["export", "--all", "--format", "json", "-o"])
            .arg(&json)
            .current_dir(work)
            .output()
            .unwrap(),
    );
    let read_all = start.elapsed();
    let _ = std::fs::remove_file(&json);
    // A smaller ledger than the goal's (AXOCOATL_BENCH_TURNS) is also extrapolated to 1M
    // turns: both exports are one pass over the ledger, linear in its records.
    let scale = 1_000_000.0 / turns as f64;
    let extrapolated = if turns == 1_000_000 {
        String::new()
    } else {
        format!(
            " (extrapolated to 1M turns, linearly: {:.0} s and {:.0} MB; JSON {:.0} s)",
            export.as_secs_f64() * scale,
            size as f64 * scale / 1e6,
            read_all.as_secs_f64() * scale
        )
    };
    println!(
        "export --all --format sqlite of {turns} turns: {:.1} s ({:.0} turns/s), {} MB with its full-text index; floor: the same ledger read whole and written as JSON (export --format json): {:.1} s{extrapolated}",
        export.as_secs_f64(),
        turns as f64 / export.as_secs_f64(),
        size / 1_000_000,
        read_all.as_secs_f64()
    );
    let refresh = |label: &str| {
        settle();
        let mut times = Vec::new();
        let mut last = String::new();
        for _ in 0..5 {
            let start = Instant::now();
            let out = Command::new(bin)
                .args(["export", "--all", "--format", "sqlite", "-o"])
                .arg(&db)
                .current_dir(work)
                .output()
                .unwrap();
            times.push(start.elapsed());
            last = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            succeeded(out);
            if label == "1,000 new turns" {
                break;
            }
        }
        let ms = median_of(times);
        (ms, last)
    };
    let (nothing_ms, _) = refresh("nothing new");
    let repo = Repo::open(&work.join(".axocoatl"), &RepoOptions::default()).unwrap();
    let mut seed = 11u64;
    let mut batch = Vec::new();
    for i in turns..turns + 1000 {
        let turn = turn_id(i);
        let session = format!("s{}", i % SESSIONS);
        let at = 1_767_225_600_000 + i as i64 * 30_000;
        batch.push(Record::TurnBegun(TurnBegun {
            turn: turn.clone(),
            session: session.clone(),
            agent: "bench".into(),
            mode: "single".into(),
            request: text(&mut seed, 40),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at,
            schema: None,
        }));
        batch.push(Record::AgentOutput(AgentOutput {
            turn: turn.clone(),
            agent: "bench".into(),
            text: text(&mut seed, 90),
            at,
        }));
        batch.push(Record::TurnEnded(TurnEnded {
            turn,
            session,
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at,
        }));
    }
    repo.ledger().append(&batch).unwrap();
    let (new_ms, said) = refresh("1,000 new turns");
    println!(
        "export --format sqlite refresh (one transaction): 1,000 new turns {new_ms:.0} ms ({said}); nothing new {nothing_ms:.0} ms (median of 5: open, checks, the automation runs, _meta)"
    );
    let _ = std::fs::remove_file(&db);
}

/// A loopback OTLP receiver: 200 and an empty export response to every post.
fn otlp_receiver() -> fake_http::FakeServer {
    fake_http::FakeServer::responding(|_| {
        fake_http::Reply::new(200).header("Content-Type", "application/x-protobuf")
    })
}

/// The floor of a one-shot send's trace: posting the last body `receiver` got, on a new
/// connection each time (as a one-shot process does), from a process already running
/// (ms, median of `runs`).
fn post_floor(receiver: &fake_http::FakeServer, runs: usize) -> f64 {
    let last = receiver.requests().pop().unwrap();
    let url = format!("{}{}", receiver.url(), last.path);
    let media_type = last.header("content-type").unwrap().to_owned();
    let times = (0..runs)
        .map(|_| {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into();
            let start = Instant::now();
            let resp = agent
                .post(&url)
                .header("Content-Type", &media_type)
                .send(&last.body[..])
                .unwrap();
            let took = start.elapsed();
            assert!(resp.status().is_success());
            took
        })
        .collect();
    median_of(times)
}

/// Turn overhead with traces on: one-shot sends and sends through `serve`, each with a
/// loopback OTLP receiver beside the same with traces off (alternating, medians).
fn traces_bench(base: &Path, bin: &str) {
    let runs = 40;
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1});
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "ok"}, "done": false});
    let model = fake_http::FakeServer::responding(move |_| {
        fake_http::Reply::ndjson(&format!("{line}\n{done}\n"))
    });
    let receiver = otlp_receiver();
    let config = format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n",
        model.url()
    );
    let dirs: Vec<std::path::PathBuf> = ["traces-off", "traces-on"]
        .iter()
        .map(|name| {
            let d = base.join(name);
            std::fs::create_dir_all(&d).unwrap();
            repo::init(&d).unwrap();
            std::fs::write(d.join("axocoatl.yaml"), &config).unwrap();
            d
        })
        .collect();
    let no_model = base.join("traces-no-embedder");
    std::fs::create_dir_all(&no_model).unwrap();
    let endpoint = receiver.url();
    let send = |dir: &Path, traced: bool, session: &str| {
        let mut c = Command::new(bin);
        c.args(["send", "--no-stdin", "-s", session, "hi"])
            .current_dir(dir)
            .env("AXOCOATL_EMBED_DIR", &no_model)
            .stdout(Stdio::null());
        if traced {
            c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
        }
        let start = Instant::now();
        let out = c.output().unwrap();
        let took = start.elapsed();
        assert!(
            out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("not exported"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let session = format!("b{}", i % 4);
        if i % 2 == 0 {
            off.push(send(&dirs[0], false, &session));
            on.push(send(&dirs[1], true, &session));
        } else {
            on.push(send(&dirs[1], true, &session));
            off.push(send(&dirs[0], false, &session));
        }
    }
    let posts = receiver.request_count();
    let (off_ms, on_ms) = (median_of(off), median_of(on));
    let floor_ms = post_floor(&receiver, runs);
    println!(
        "one-shot send with its trace posted to a loopback OTLP receiver before exit: {on_ms:.1} ms, without traces {off_ms:.1} ms: {:+.2} ms (goal <= 2 ms beyond the flush bound of {} ms, which only a receiver slower than it costs; floor: one post of the same bytes on a new loopback connection from a running process, {floor_ms:.2} ms; medians of {runs}, alternating; {posts} posts received)",
        on_ms - off_ms,
        axocoatl::telemetry::FLUSH_BOUND.as_millis()
    );
    // Through serve: the actor queues the spans and its exporter posts them in batches.
    let serves: Vec<std::process::Child> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut c = Command::new(bin);
            c.arg("serve")
                .current_dir(d)
                .env("AXOCOATL_EMBED_DIR", &no_model)
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            if i == 1 {
                c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
            }
            let mut child = c.spawn().unwrap();
            let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
            let mut line = String::new();
            while !line.contains("serve started") {
                line.clear();
                assert!(std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0);
            }
            // Keep draining its logs so it never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
            child
        })
        .collect();
    // Warm both actors.
    send(&dirs[0], false, "main");
    send(&dirs[1], true, "main");
    let before = receiver.request_count();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            off.push(send(&dirs[0], false, "main"));
            on.push(send(&dirs[1], true, "main"));
        } else {
            on.push(send(&dirs[1], true, "main"));
            off.push(send(&dirs[0], false, "main"));
        }
    }
    let start = Instant::now();
    while receiver.request_count() == before && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let batches = receiver.request_count() - before;
    for mut s in serves {
        // SAFETY: SIGTERM to the serve this bench started.
        #[expect(
            unsafe_code,
            reason = "kill(2) of our own child: libc has no safe wrapper"
        )]
        let _ = unsafe { libc::kill(s.id() as i32, libc::SIGTERM) };
        let _ = s.wait();
    }
    let (off_ms, on_ms) = (median_of(off), median_of(on));
    println!(
        "send through serve with traces to a loopback OTLP receiver: {on_ms:.1} ms, without traces {off_ms:.1} ms: {:+.2} ms (goal <= 2 ms; the actor posts in batches: {batches} posts for {runs} turns so far; medians of {runs}, alternating)",
        on_ms - off_ms
    );
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
    #[expect(unsafe_code, reason = "wait4 with rusage: libc has no safe wrapper")]
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
    for _ in 0..2 * runs + 1 {
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
    let no_model = work.join("no-embedder");
    std::fs::create_dir_all(&no_model).unwrap();
    for (label, embed_dir) in [
        ("as installed", None),
        ("without the embedder model", Some(&no_model)),
    ] {
        let mut times = Vec::new();
        let mut rss = 0;
        for i in 0..runs {
            let mut c = Command::new(bin);
            c.args(["send", "--no-stdin", "-s", &format!("b{}", i % 4), "hi"])
                .current_dir(&work);
            if let Some(d) = embed_dir {
                c.env("AXOCOATL_EMBED_DIR", d);
            }
            let (d, r) = peak_rss_kb(&mut c);
            times.push(d);
            rss = rss.max(r);
        }
        times.sort();
        let ms = |i: usize| times[i].as_secs_f64() * 1e3;
        let median = ms(runs / 2);
        let (back_to_back, in_rhythm) = fdatasync_pair_ms(&work);
        let spawn = spawn_ms(bin, runs);
        println!(
            "send against an instant loopback server, {label}: median {median:.1} ms (quartiles {:.1}-{:.1}); spawn (`axocoatl --version`) {spawn:.1} ms; two fdatasyncs here: {in_rhythm:.1} ms spaced as in a send ({back_to_back:.1} ms back to back); overhead beyond spawn and them {:.1} ms (goal <= 3 ms; {:.1} ms against back-to-back flushes; {:.1} ms with the spawn); peak RSS {} KB (goal <= 15360 KB)",
            ms(runs / 4),
            ms(3 * runs / 4),
            median - spawn - in_rhythm,
            median - spawn - back_to_back,
            median - in_rhythm,
            rss
        );
    }
}

/// What starting the binary costs before it does anything (ms, median of `runs` runs of
/// `axocoatl --version`, started and waited for as the sends are).
fn spawn_ms(bin: &str, runs: usize) -> f64 {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| peak_rss_kb(Command::new(bin).arg("--version")).0)
        .collect();
    times.sort();
    times[runs / 2].as_secs_f64() * 1e3
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

/// Set to `DIR\nWORD`, the bench runs only the in-process search of WORD in the repository
/// in DIR, in this process of its own, and prints its figure.
const IN_PROCESS_ENV: &str = "AXOCOATL_BENCH_SEARCH_IN_PROCESS";

/// `history --all --search word` in this process, the repository at `work` opened once:
/// the first search, then the median of 100 more.
fn search_in_process(work: &Path, word: &str) {
    let repo = Repo::open(&work.join(".axocoatl"), &RepoOptions::default()).unwrap();
    let mut times = Vec::new();
    let mut turns = 0;
    for _ in 0..101 {
        let start = Instant::now();
        // What the command runs: the matcher built, the candidate turns read and confirmed
        // against their text, the listing's turns dropped.
        let re = axocoatl::search::matcher(word).unwrap();
        turns = axocoatl::query::history(&repo, None, Some((word, &re)), None)
            .unwrap()
            .turns
            .len();
        times.push(start.elapsed());
    }
    let first = times.remove(0).as_secs_f64() * 1e3;
    println!(
        "history --all --search {word} in process (a process of its own, the repository opened once; matcher, candidates, exact check, turns projected): first {first:.1} ms, then {:.3} ms ({turns} turns found; median of the next 100)",
        median_of(times)
    );
}

fn main() {
    if let Ok(v) = std::env::var(IN_PROCESS_ENV) {
        let (dir, word) = v.split_once('\n').unwrap();
        return search_in_process(Path::new(dir), word);
    }
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
    match std::env::var("AXOCOATL_BENCH_ONLY").as_deref() {
        Ok("traces") => return traces_bench(&path, bin),
        Ok("send") => return send_bench(&path, bin),
        Ok("sqlite") => {
            let turns = std::env::var("AXOCOATL_BENCH_TURNS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_000_000);
            let work = path.join("sqlite");
            std::fs::create_dir_all(&work).unwrap();
            generate(&work, turns);
            return sqlite_bench(&work, bin, turns);
        }
        _ => {}
    }
    send_bench(&path, bin);
    traces_bench(&path, bin);
    stop_bench(&path, bin);
    if std::env::var("AXOCOATL_BENCH_SKIP_SEARCH").is_err() {
        index_bench(&path, bin);
    }
}
