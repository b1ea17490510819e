//! What passive recall costs a `send` (issue: memory). Prints figures; asserts nothing.
//!
//! Two agents share one repository and one loopback Ollama server that answers instantly;
//! each has a semantic store of 10,000 records (`AXOCOATL_BENCH_RECORDS` changes the count).
//! One has `recall.passive_inject: true`, the other `false`: the difference between their
//! median whole-process `send` times is what searching 10k records and injecting the hits
//! costs. Run once on the neural path (when the embedding model is fetched) and once on the
//! lexical fallback (`AXOCOATL_EMBED_DIR` pointed at an empty directory).
//!
//! Run: `cargo bench --bench recall_send`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl::memory::embed::{EmbedError, Embedder, ModelFiles};
use axocoatl::memory::semantic::{NewRecord, SemanticStore, Source, SourceKind};
use axocoatl_store::repo::{self, OpenOptions};
use axocoatl_store::Repo;

const SUBJECTS: &[&str] = &[
    "the deploy script",
    "our staging database",
    "the billing service",
    "Ada",
    "the VPN",
    "the release train",
    "the on-call rotation",
    "the design review",
    "the cache layer",
    "the mobile app",
    "the data warehouse",
    "the test suite",
    "the office move",
];
const FACTS: &[&str] = &[
    "runs every night at two",
    "was moved to the new cluster",
    "needs a second reviewer",
    "prefers written summaries",
    "breaks when the token expires",
    "is owned by the platform team",
    "was postponed to next quarter",
    "costs more than planned",
    "lives in the eu-west region",
    "has a flaky integration test",
    "is documented in the wiki",
    "uses Postgres 16",
];

fn sentence(seed: &mut u64) -> String {
    let mut next = || {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as usize
    };
    let (s, f, n) = (next(), next(), next() % 1000);
    format!(
        "User: note that {} {} (item {n}).\nAssistant: Noted.",
        SUBJECTS[s % SUBJECTS.len()],
        FACTS[f % FACTS.len()]
    )
}

fn populate(
    repo: &Repo,
    agent_id: &str,
    records: usize,
    embedder: Result<&'static Embedder, EmbedError>,
) {
    let mut store = SemanticStore::open_with(repo, agent_id, embedder).unwrap();
    let mut seed = 7;
    let batch: usize = 500;
    let mut done = 0;
    while done < records {
        let n = batch.min(records - done);
        let recs: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                text: sentence(&mut seed),
                source: Source {
                    turn: None,
                    kind: SourceKind::Added,
                    at: 1_767_323_045_000 + (done + i) as i64,
                },
            })
            .collect();
        store.add(&recs).unwrap();
        done += n;
    }
}

fn median_send(
    work: &Path,
    bin: &str,
    agent: &str,
    runs: usize,
    embed_dir: Option<&Path>,
) -> (f64, f64, f64) {
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs {
        let mut cmd = Command::new(bin);
        cmd.args(["send", "--no-stdin", "-a", agent, "-s", "main"])
            .arg(format!("what runs every night? ({i})"))
            .current_dir(work)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(dir) = embed_dir {
            cmd.env("AXOCOATL_EMBED_DIR", dir);
        }
        let start = Instant::now();
        let status = cmd.status().unwrap();
        assert!(status.success(), "send failed");
        times.push(start.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(times[runs / 4]),
        ms(times[runs / 2]),
        ms(times[3 * runs / 4]),
    )
}

fn bench(base: &Path, bin: &str, records: usize, lexical: bool) {
    let runs = 20;
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1});
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "ok"}, "done": false});
    let server = fake_http::FakeServer::start();
    for _ in 0..2 * runs + 2 {
        server.push(fake_http::Reply::ndjson(&format!("{line}\n{done}\n")));
    }
    let work = base.join(if lexical { "lexical" } else { "neural" });
    std::fs::create_dir_all(&work).unwrap();
    let root = repo::init(&work).unwrap();
    let repo = Repo::open(&root, &OpenOptions::default()).unwrap();
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!(
            "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: on\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: true, top_k: 5, min_score: 0.0}}}}\n  - id: off\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: false}}}}\n",
            server.url()
        ),
    )
    .unwrap();
    let empty = base.join("no-model");
    std::fs::create_dir_all(&empty).unwrap();
    let embedder: Result<&'static Embedder, EmbedError> = if lexical {
        Err(EmbedError::Missing {
            path: ModelFiles::in_dir(&empty).model,
        })
    } else {
        Embedder::shared()
    };
    if !lexical {
        if let Err(e) = &embedder {
            println!("neural path skipped: {e} ({})", e.hint());
            return;
        }
    }
    let path = if lexical { "lexical" } else { "neural" };
    let start = Instant::now();
    for agent in ["main:on", "main:off"] {
        populate(&repo, agent, records, embedder.clone());
    }
    println!(
        "{path}: stored 2 x {records} records in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let embed_dir = lexical.then_some(empty.as_path());
    // One send each first: a lazily built index is not what the figures measure.
    median_send(&work, bin, "on", 1, embed_dir);
    median_send(&work, bin, "off", 1, embed_dir);
    let (on_q1, on, on_q3) = median_send(&work, bin, "on", runs, embed_dir);
    let (off_q1, off, off_q3) = median_send(&work, bin, "off", runs, embed_dir);
    println!(
        "{path}: send with passive recall over {records} records: median {on:.1} ms (quartiles {on_q1:.1}-{on_q3:.1}); without: {off:.1} ms ({off_q1:.1}-{off_q3:.1}); overhead {:.1} ms",
        on - off
    );
}

fn main() {
    let base = tempfile::Builder::new()
        .prefix("axobench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let records = std::env::var("AXOCOATL_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    bench(base.path(), bin, records, false);
    bench(base.path(), bin, records, true);
}
