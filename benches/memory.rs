//! Semantic memory: recall quality and speed, printed in one run.
//!
//!   scripts/fetch-model.sh && cargo bench --bench memory
//!
//! 1. Recall quality on benches/data/recall_set.tsv (61 facts, each with a question in other
//!    words): recall@1 and recall@5 of the neural and the lexical path.
//! 2. Top-5 search over 100k records, warm: the int8 scan alone, the whole search (query
//!    embedded, scan, records read), the lexical path; beside them the machine's ceiling:
//!    one read of the same bytes from memory.
//! 3. Embedding throughput against onnxruntime on the same model file and sentences, one
//!    thread each (and onnxruntime on every core), when scripts/ort-venv.sh can make its venv.
//! 4. What semantic memory adds to one `send` on a 10k-record store: in-process (loading the
//!    embedder, opening the store, one search), and as a whole-process `send` with passive
//!    recall against the same `send` without it, on the neural and the lexical path.
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl::memory::embed::{EmbedError, Embedder, ModelFiles, DIM, MODEL_TAG};
use axocoatl::memory::semantic::{neural, NewRecord, SemanticStore, Source, SourceKind};
use axocoatl_store::fsutil::Durability;
use axocoatl_store::repo::{self, OpenOptions};
use axocoatl_store::semantic::{
    Records, SemanticDir, StoredRecord, Vectors, RECORDS_FILE, VECTORS_FILE,
};
use axocoatl_store::Repo;

const SET: &str = include_str!("data/recall_set.tsv");

fn pairs() -> Vec<(&'static str, &'static str)> {
    SET.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .collect()
}

fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = repo::init(dir.path()).expect("init");
    let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
    (dir, repo)
}

fn source() -> Source {
    Source {
        turn: None,
        kind: SourceKind::Added,
        at: 0,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median and minimum of `runs` timings of `f`.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, f64) {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(f());
            ms(start.elapsed())
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[t.len() / 2], t[0])
}

fn recall_quality(embedder: Result<&'static Embedder, EmbedError>, label: &str) {
    let (_dir, repo) = repo();
    let mut store = SemanticStore::open_with(&repo, "bench:recall", embedder).expect("open");
    let set = pairs();
    let records: Vec<NewRecord> = set
        .iter()
        .map(|(fact, _)| NewRecord {
            text: (*fact).to_owned(),
            source: source(),
        })
        .collect();
    store.add(&records).expect("add");
    let (mut at1, mut at5) = (0, 0);
    for (i, (_, question)) in set.iter().enumerate() {
        let hits = store.search(question, 5).expect("search");
        if hits.first().map(|h| h.id) == Some(i as u64) {
            at1 += 1;
        }
        if hits.iter().any(|h| h.id == i as u64) {
            at5 += 1;
        }
    }
    let n = set.len() as f64;
    println!(
        "  {label:<8} recall@1 {:.3} ({at1}/{})   recall@5 {:.3} ({at5}/{})",
        at1 as f64 / n,
        set.len(),
        at5 as f64 / n,
        set.len()
    );
}

/// A store of `n` records with random unit vectors, written straight through the store
/// layer (embedding 100k texts would take this machine many minutes).
fn synthetic_store(repo: &Repo, agent: &str, n: usize) {
    let dir = SemanticDir::new(repo, agent);
    let _lock = dir.lock().expect("lock");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let words = [
        "river", "server", "deploy", "garden", "invoice", "cat", "backup", "flight",
    ];
    let mut records = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        records.push(StoredRecord {
            text: format!(
                "note {i}: the {} near the {} needs a {} check",
                words[i % 8],
                words[(i / 8) % 8],
                words[(i / 64) % 8]
            ),
            turn: None,
            kind: 2,
            at: 0,
        });
        let v: Vec<f32> = (0..DIM).map(|_| rand()).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        rows.push(neural::quantize(
            &v.iter().map(|x| x / norm).collect::<Vec<_>>(),
        ));
    }
    Records::append(&dir.file(RECORDS_FILE), &records, Durability::Durable).expect("records");
    Vectors::rewrite(&dir.file(VECTORS_FILE), MODEL_TAG, DIM, &rows).expect("vectors");
}

fn search_speed(embedder: &'static Embedder) {
    let n = 100_000;
    let (_dir, repo) = repo();
    let start = Instant::now();
    synthetic_store(&repo, "bench:big", n);
    println!(
        "  wrote {n} records + vectors in {:.0} ms",
        ms(start.elapsed())
    );
    let start = Instant::now();
    let mut store = SemanticStore::open_with(&repo, "bench:big", Ok(embedder)).expect("open");
    store.search("warm up", 5).expect("search");
    println!(
        "  open + first search (maps and verifies {:.1} MB of vectors): {:.1} ms",
        (n * (DIM + 8)) as f64 / 1e6,
        ms(start.elapsed())
    );
    let vectors = Vectors::open(
        &SemanticDir::new(&repo, "bench:big").file(VECTORS_FILE),
        MODEL_TAG,
        DIM,
    )
    .expect("vectors");
    let q = neural::quantize(
        &embedder
            .embed(&["when is the garden invoice due"])
            .expect("embed")[0],
    );
    let (med, min) = time(30, || neural::search(vectors.data(), DIM, &q, 5));
    println!(
        "  int8 scan, top-5 of {n}:            median {med:.2} ms, best {min:.2} ms (goal <= 5 ms)"
    );
    let (qmed, qmin) = time(30, || embedder.embed(&["when is the garden invoice due"]));
    println!("  embedding the query alone:          median {qmed:.2} ms, best {qmin:.2} ms");
    let (med, min) = time(30, || {
        store
            .search("when is the garden invoice due", 5)
            .expect("search")
    });
    println!("  whole search (embed + scan + read): median {med:.2} ms, best {min:.2} ms");
    let data = vectors.data();
    let (med, min) = time(30, || {
        data.chunks_exact(64).fold(0u64, |acc, c| {
            acc.wrapping_add(u64::from(c[0]) ^ u64::from(c[63]))
        })
    });
    println!(
        "  ceiling: touching the same {:.1} MB once (one byte per cache line): median {med:.2} ms, best {min:.2} ms",
        data.len() as f64 / 1e6
    );
    let mut lexical =
        SemanticStore::open_with(&repo, "bench:big", Err(EmbedError::FeatureOff)).expect("open");
    let start = Instant::now();
    lexical.search("garden invoice", 5).expect("search");
    println!(
        "  lexical: first search builds the BM25 index over {n} records: {:.0} ms",
        ms(start.elapsed())
    );
    let (med, min) = time(30, || lexical.search("garden invoice", 5).expect("search"));
    println!("  lexical top-5, warm:                median {med:.2} ms, best {min:.2} ms");
}

fn reference_python() -> Result<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/ort-venv.sh"))
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run scripts/ort-venv.sh: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn ort_seconds(python: &str, files: &ModelFiles, texts: &[&str], threads: usize) -> f64 {
    let request = serde_json::json!({
        "model": files.model, "tokenizer": files.tokenizer, "texts": texts,
        "batch": 16, "threads": threads, "repeat": 3,
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(python)
        .arg(root.join("scripts/ort_embed.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("ort_embed.py");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(request.to_string().as_bytes())
        .expect("request");
    let out = child.wait_with_output().expect("ort_embed.py");
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    reply["seconds"].as_f64().expect("seconds")
}

fn throughput(embedder: &'static Embedder) {
    let set = pairs();
    let texts: Vec<&str> = set.iter().flat_map(|(f, q)| [*f, *q]).collect();
    let best = (0..3)
        .map(|_| {
            let start = Instant::now();
            embedder.embed(&texts).expect("embed");
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    let ours = texts.len() as f64 / best;
    println!(
        "  axocoatl (tract, 1 thread):     {ours:7.1} sentences/s ({} sentences, batches of 16)",
        texts.len()
    );
    match reference_python() {
        Err(reason) => println!("  onnxruntime: skipped ({reason})"),
        Ok(python) => {
            let one = texts.len() as f64 / ort_seconds(&python, embedder.files(), &texts, 1);
            let all = texts.len() as f64 / ort_seconds(&python, embedder.files(), &texts, 0);
            println!("  onnxruntime (1 thread):         {one:7.1} sentences/s");
            println!("  onnxruntime (all cores):        {all:7.1} sentences/s");
            println!(
                "  ratio axocoatl / onnxruntime, 1 thread each: {:.2} (goal >= 0.5)",
                ours / one
            );
        }
    }
}

/// What semantic memory costs one `send` in-process: loading the embedder (once per
/// process), opening a 10k-record store and one top-5 search (query embedded).
fn send_cost(files: &ModelFiles) {
    let start = Instant::now();
    let embedder = Embedder::load(files).expect("load");
    let load = ms(start.elapsed());
    let embedder: &'static Embedder = Box::leak(Box::new(embedder));
    let (_dir, repo) = repo();
    synthetic_store(&repo, "bench:send", 10_000);
    let (med, _) = time(10, || {
        let mut s = SemanticStore::open_with(&repo, "bench:send", Ok(embedder)).expect("open");
        s.search("what did we decide about the backup server", 5)
            .expect("search")
    });
    println!("  loading the embedder (once per process): {load:.0} ms");
    println!("  open a 10k-record store + one top-5 search: median {med:.2} ms");
}

/// Median and quartiles (ms) of `runs` whole-process `send`s of `agent`.
fn send_times(work: &Path, agent: &str, runs: usize, embed_dir: &Path) -> (f64, f64, f64) {
    let mut t: Vec<f64> = (0..runs)
        .map(|i| {
            let start = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_axocoatl"))
                .args(["send", "--no-stdin", "-a", agent, "-s", "main"])
                .arg(format!(
                    "which backup check does the garden server need? ({i})"
                ))
                .current_dir(work)
                .env("AXOCOATL_EMBED_DIR", embed_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run axocoatl");
            assert!(status.success(), "send failed");
            ms(start.elapsed())
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[runs / 4], t[runs / 2], t[3 * runs / 4])
}

/// What passive recall adds to a whole-process `send` (against a loopback Ollama server that
/// answers at once): agent `on` injects the top 5 of its 10k-record store before the model
/// call, agent `off` has the same store and `passive_inject: false`. The neural path runs
/// with the fetched model, the lexical one with `AXOCOATL_EMBED_DIR` naming an empty
/// directory. The stores' vectors are random unit vectors (embedding 20k texts would take
/// minutes): the search costs the same, the hits are not meaningful.
fn send_overhead(files: &ModelFiles) {
    let runs = 15;
    let n = 10_000;
    let model_dir = files.model.parent().expect("model directory").to_owned();
    for (path, lexical) in [("neural", false), ("lexical", true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path();
        let root = repo::init(work).expect("init");
        let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
        synthetic_store(&repo, "main:on", n);
        synthetic_store(&repo, "main:off", n);
        let done = r#"{"model":"m","created_at":"2026-01-02T03:04:05Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":3,"eval_count":1}"#;
        let line = r#"{"model":"m","created_at":"2026-01-02T03:04:05Z","message":{"role":"assistant","content":"ok"},"done":false}"#;
        let server = fake_http::FakeServer::start();
        for _ in 0..2 * runs + 2 {
            server.push(fake_http::Reply::ndjson(&format!("{line}\n{done}\n")));
        }
        std::fs::write(
            work.join("axocoatl.yaml"),
            format!(
                "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: on\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: true, top_k: 5, min_score: 0.0}}}}\n  - id: off\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: false}}}}\n",
                server.url()
            ),
        )
        .expect("config");
        let empty = work.join("no-model");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let embed_dir = if lexical {
            empty.as_path()
        } else {
            model_dir.as_path()
        };
        // One send each first: the lexical path builds its index on first use.
        send_times(work, "on", 1, embed_dir);
        send_times(work, "off", 1, embed_dir);
        let (on1, on, on3) = send_times(work, "on", runs, embed_dir);
        let (off1, off, off3) = send_times(work, "off", runs, embed_dir);
        let injected = server
            .requests()
            .iter()
            .filter(|r| r.body_text().contains("<recalled_memory>"))
            .count();
        if injected == 0 {
            println!(
                "  {path:<7} no request carried a recall section: passive recall is not wired into `send` in this build (the in-process figures above are its cost)"
            );
            continue;
        }
        println!(
            "  {path:<7} send with passive recall over {n} records: median {on:.1} ms ({on1:.1}-{on3:.1}); without: {off:.1} ms ({off1:.1}-{off3:.1}); overhead {:.1} ms; {injected} of {} requests carried the recall section",
            on - off,
            server.request_count()
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let files = ModelFiles::from_env().expect("HOME is set");
    let embedder: &'static Embedder = match Embedder::load(&files) {
        Ok(e) => Box::leak(Box::new(e)),
        Err(e) => panic!("{e}: run scripts/fetch-model.sh first"),
    };
    println!("semantic memory benchmark ({} facts)", pairs().len());
    println!("recall quality:");
    recall_quality(Ok(embedder), "neural");
    recall_quality(Err(EmbedError::FeatureOff), "lexical");
    println!("search speed:");
    search_speed(embedder);
    println!("embedding throughput:");
    throughput(embedder);
    println!("per-send cost of semantic memory, in-process:");
    send_cost(&files);
    println!("send overhead of passive recall (whole process, loopback provider):");
    send_overhead(&files);
}
