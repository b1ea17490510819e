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
//! 4. What semantic memory adds to one `send` on a 10k-record store: loading the embedder
//!    (once per process), opening the store, one search.
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl::memory::embed::{EmbedError, Embedder, ModelFiles, DIM, MODEL_TAG};
use axocoatl::memory::semantic::{neural, NewRecord, SemanticStore, Source, SourceKind};
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
    Records::append(&dir.file(RECORDS_FILE), &records).expect("records");
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
    println!("per-send cost of semantic memory:");
    send_cost(&files);
}
