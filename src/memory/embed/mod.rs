//! The local sentence embedder of semantic memory: all-MiniLM-L6-v2 (384 dimensions), run
//! in-process (cargo feature `embeddings`, on by default). Vectors are mean-pooled over the
//! tokens and L2-normalized, as sentence-transformers does, so a dot product is a cosine.
//!
//! The model files are not part of the binary: `axocoatl models fetch` puts them in
//! `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2/` (`model.onnx`,
//! `tokenizer.json`), or `$AXOCOATL_EMBED_DIR` names another directory. When they are absent,
//! or the build has no `embeddings` feature, [`Embedder::shared`] says why and semantic
//! memory uses its lexical fallback.
//!
//! Two engines compute the same vectors:
//! - **fast** (the default): `axocoatl-embed`'s encoder over `model.axoemb`, a ready-to-run
//!   file beside the model files that a process maps, not parses ([`fast`]).
//!   `axocoatl models fetch` makes it from the two files ([`prepare`], [`convert`]), else the
//!   first process that needs it does, and installs it once its vectors agree with the
//!   reference's; it is made again when the model files change or it is damaged.
//! - **reference**: `tract-onnx` over `model.onnx`, tokenized by the `tokenizers` crate
//!   ([`onnx`]): what the fast engine is checked against, and the engine in use when the
//!   ready-to-run file cannot be made (a read-only model directory, a model the converter
//!   does not know), with the reason in [`Embedder::engine`].

#[cfg(feature = "embeddings")]
mod convert;
#[cfg(feature = "embeddings")]
mod fast;
#[cfg(feature = "embeddings")]
mod onnx;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Length of every vector.
pub const DIM: usize = 384;
/// Names the model in vector files: vectors of another model are never mixed in. Both
/// engines compute the same vectors (the fast one within float rounding), so they share it.
pub const MODEL_TAG: &str = "all-MiniLM-L6-v2/int8-folded/v1";
/// Directory under the models cache that holds the files.
pub const MODEL_DIR_NAME: &str = "all-MiniLM-L6-v2";
pub const MODEL_FILE: &str = "model.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The ready-to-run file made from the two above.
pub const READY_FILE: &str = "model.axoemb";
/// Environment variable naming a directory holding `model.onnx` and `tokenizer.json`.
pub const EMBED_DIR_ENV: &str = "AXOCOATL_EMBED_DIR";
/// Environment variable choosing the engine: `reference` runs tract-onnx over the ONNX file
/// (as before the fast engine existed); anything else, or nothing, the fast engine.
pub const ENGINE_ENV: &str = "AXOCOATL_EMBED_ENGINE";

/// Why the neural path cannot be used, or what went wrong while embedding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The build has no `embeddings` feature.
    #[error("this axocoatl was built without the `embeddings` feature")]
    FeatureOff,
    /// A model file is not where it is looked for.
    #[error("the embedding model file {} is missing", path.display())]
    Missing { path: PathBuf },
    /// A model file is there but cannot be loaded.
    #[error("cannot load the embedding model {}: {reason}", path.display())]
    Load { path: PathBuf, reason: String },
    /// Tokenizing or running the model failed.
    #[error("embedding failed: {0}")]
    Run(String),
}

impl EmbedError {
    /// What a user can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            EmbedError::FeatureOff => {
                "rebuild with `--features embeddings` for neural recall; the lexical fallback is in use"
            }
            EmbedError::Missing { .. } | EmbedError::Load { .. } => {
                "run `axocoatl models fetch` (or set AXOCOATL_EMBED_DIR), then `axocoatl memory reindex`"
            }
            EmbedError::Run(_) => "report this with the text that failed",
        }
    }
}

/// Where the model files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    pub model: PathBuf,
    pub tokenizer: PathBuf,
    /// The ready-to-run file made from the two ([`READY_FILE`]).
    pub ready: PathBuf,
}

impl ModelFiles {
    /// The files in `dir`.
    pub fn in_dir(dir: &Path) -> ModelFiles {
        ModelFiles {
            model: dir.join(MODEL_FILE),
            tokenizer: dir.join(TOKENIZER_FILE),
            ready: dir.join(READY_FILE),
        }
    }

    /// `$AXOCOATL_EMBED_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/
    /// all-MiniLM-L6-v2/` (a relative `XDG_CACHE_HOME` is ignored, as the XDG spec says).
    /// `None` when neither the variable nor a home directory is known.
    pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Option<ModelFiles> {
        if let Some(dir) = env(EMBED_DIR_ENV).filter(|d| !d.is_empty()) {
            return Some(ModelFiles::in_dir(Path::new(&dir)));
        }
        let cache = env("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .or_else(|| env("HOME").map(|home| Path::new(&home).join(".cache")))?;
        Some(ModelFiles::in_dir(
            &cache.join("axocoatl").join("models").join(MODEL_DIR_NAME),
        ))
    }

    /// The located files from the process environment.
    pub fn from_env() -> Option<ModelFiles> {
        ModelFiles::locate(&|k| std::env::var(k).ok())
    }
}

/// What [`prepare`] found or did about the ready-to-run file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    /// It was there, checked and was made from the model files: nothing was done.
    InPlace,
    /// It was made now (it was missing, stale or damaged).
    Made,
    /// It cannot be made: the reference engine will run, for this reason.
    Failed { why: String },
}

/// Whether the ready-to-run file of `files` is there, checks and was made from them (it is
/// mapped and checked, not made): `Err` says why not.
pub fn ready_file_state(files: &ModelFiles) -> Result<(), String> {
    #[cfg(feature = "embeddings")]
    {
        fast::open(files).map(drop)
    }
    #[cfg(not(feature = "embeddings"))]
    {
        let _ = files;
        Err(EmbedError::FeatureOff.to_string())
    }
}

/// Makes the ready-to-run file of `files` unless it is already in place (as the first
/// process needing the embedder would; `axocoatl models fetch` does it right after
/// installing the model, so that no one-shot command has to). Safe to run beside other
/// processes doing the same: one makes the file, the others wait and find it.
pub fn prepare(files: &ModelFiles) -> Result<Ready, EmbedError> {
    if ready_file_state(files).is_ok() {
        return Ok(Ready::InPlace);
    }
    let e = Embedder::load(files)?;
    Ok(match e.engine() {
        Engine::Reference { why } => Ready::Failed { why },
        Engine::Fast if e.made_ready_file() => Ready::Made,
        Engine::Fast => Ready::InPlace,
    })
}

/// Which engine computes an [`Embedder`]'s vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `axocoatl-embed` over the mapped ready-to-run file (the default).
    Fast,
    /// `tract-onnx` over the ONNX file; `why` says why the fast engine is not in use.
    Reference { why: String },
}

impl Engine {
    pub fn as_str(&self) -> &'static str {
        match self {
            Engine::Fast => "fast",
            Engine::Reference { .. } => "reference",
        }
    }
}

/// A loaded model. Loading takes a few milliseconds on the fast engine (the ready-to-run
/// file is mapped and checked), a fraction of a second on the reference engine (and once,
/// to make the ready-to-run file); the runtime shares one per process through
/// [`Embedder::shared`].
pub struct Embedder {
    files: ModelFiles,
    #[cfg(feature = "embeddings")]
    fast: Option<axocoatl_embed::Model>,
    /// The reference engine, loaded at first need.
    #[cfg(feature = "embeddings")]
    reference: OnceLock<Result<onnx::Model, EmbedError>>,
    /// Why the fast engine is not in use (set at load, or when its file turned out damaged).
    fallback: Mutex<Option<String>>,
    /// This load made the ready-to-run file.
    made: bool,
}

/// Texts the reference engine runs together: padding to the longest costs little when texts
/// of similar length are batched (they are sorted by length first).
#[cfg(feature = "embeddings")]
const BATCH: usize = 16;

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("files", &self.files)
            .field("engine", &self.engine())
            .finish_non_exhaustive()
    }
}

impl Embedder {
    fn check_files(files: &ModelFiles) -> Result<(), EmbedError> {
        if !cfg!(feature = "embeddings") {
            return Err(EmbedError::FeatureOff);
        }
        for path in [&files.model, &files.tokenizer] {
            if !path.is_file() {
                return Err(EmbedError::Missing { path: path.clone() });
            }
        }
        Ok(())
    }

    /// Loads the model of `files` on the fast engine, making its ready-to-run file first
    /// when it is missing, stale or damaged; on the reference engine when that file cannot
    /// be made (see [`Embedder::engine`]).
    pub fn load(files: &ModelFiles) -> Result<Embedder, EmbedError> {
        Embedder::check_files(files)?;
        #[cfg(feature = "embeddings")]
        {
            let reference = OnceLock::new();
            let load_reference = || {
                reference
                    .get_or_init(|| onnx::Model::load(files))
                    .as_ref()
                    .map_err(|e: &EmbedError| e.to_string())
            };
            let (fast, made, fallback) = match fast::open_or_make(files, &load_reference) {
                Ok((m, made)) => (Some(m), made, None),
                Err(why) => {
                    // A reference that cannot load either is the error to report.
                    if let Some(Err(e)) = reference.get() {
                        return Err(e.clone());
                    }
                    (None, false, Some(why))
                }
            };
            // The reference engine was only needed to make the file: its memory goes.
            let reference = match fast {
                Some(_) => OnceLock::new(),
                None => reference,
            };
            Ok(Embedder {
                files: files.clone(),
                fast,
                reference,
                fallback: Mutex::new(fallback),
                made,
            })
        }
        #[cfg(not(feature = "embeddings"))]
        Err(EmbedError::FeatureOff)
    }

    /// Loads the model of `files` on the reference engine only (tests and benchmarks
    /// compare the engines with it).
    pub fn load_reference(files: &ModelFiles) -> Result<Embedder, EmbedError> {
        Embedder::check_files(files)?;
        #[cfg(feature = "embeddings")]
        {
            let reference = OnceLock::new();
            let _ = reference.set(Ok(onnx::Model::load(files)?));
            Ok(Embedder {
                files: files.clone(),
                fast: None,
                reference,
                fallback: Mutex::new(Some("the reference engine was asked for".to_owned())),
                made: false,
            })
        }
        #[cfg(not(feature = "embeddings"))]
        Err(EmbedError::FeatureOff)
    }

    /// The process-wide embedder, loaded from [`ModelFiles::from_env`] at the first call
    /// (on the engine [`ENGINE_ENV`] names); later calls return the same embedder or the
    /// same reason it is unavailable.
    pub fn shared() -> Result<&'static Embedder, EmbedError> {
        static SHARED: OnceLock<Result<Embedder, EmbedError>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let files = ModelFiles::from_env().ok_or_else(|| EmbedError::Missing {
                    path: PathBuf::from(MODEL_DIR_NAME).join(MODEL_FILE),
                })?;
                if std::env::var(ENGINE_ENV).is_ok_and(|v| v == "reference") {
                    return Embedder::load_reference(&files);
                }
                Embedder::load(&files)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The files this embedder was loaded from.
    pub fn files(&self) -> &ModelFiles {
        &self.files
    }

    /// Whether loading made the ready-to-run file (it was missing, stale or damaged).
    pub fn made_ready_file(&self) -> bool {
        self.made
    }

    /// The engine in use, and why not the fast one.
    pub fn engine(&self) -> Engine {
        match self.fallback.lock().ok().and_then(|f| f.clone()) {
            None => Engine::Fast,
            Some(why) => Engine::Reference { why },
        }
    }

    /// One unit vector of [`DIM`] floats per text, in order. Texts longer than the model's
    /// window (256 tokens) are cut there: semantic memory chunks long texts before this.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        #[cfg(feature = "embeddings")]
        {
            if let Some(fast) = self.fast.as_ref().filter(|_| self.engine() == Engine::Fast) {
                match fast.embed(texts) {
                    Ok(v) => return Ok(v),
                    Err(e @ axocoatl_embed::Error::Damaged { .. }) => {
                        // A word row that does not check: the file goes (the next process
                        // makes it again) and this one answers with the reference engine.
                        let _ = std::fs::remove_file(fast.path());
                        if let Ok(mut f) = self.fallback.lock() {
                            *f = Some(e.to_string());
                        }
                    }
                    Err(e) => return Err(EmbedError::Run(e.to_string())),
                }
            }
            let reference = self
                .reference
                .get_or_init(|| onnx::Model::load(&self.files))
                .as_ref()
                .map_err(Clone::clone)?;
            // Sorted by length so that each batch pads little; answered in the given order.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let mut out = vec![Vec::new(); texts.len()];
            for chunk in order.chunks(BATCH) {
                let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
                for (&i, v) in chunk.iter().zip(reference.embed(&batch)?) {
                    out[i] = v;
                }
            }
            Ok(out)
        }
        #[cfg(not(feature = "embeddings"))]
        {
            let _ = texts;
            Err(EmbedError::FeatureOff)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn locate(vars: &[(&str, &str)]) -> Option<ModelFiles> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ModelFiles::locate(&|k| vars.get(k).cloned())
    }

    #[test]
    fn model_files_are_located_like_the_gguf_model() {
        assert_eq!(
            locate(&[("HOME", "/home/u")]),
            Some(ModelFiles::in_dir(Path::new(
                "/home/u/.cache/axocoatl/models/all-MiniLM-L6-v2"
            )))
        );
        assert_eq!(
            locate(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c")]),
            Some(ModelFiles::in_dir(Path::new(
                "/c/axocoatl/models/all-MiniLM-L6-v2"
            )))
        );
        assert_eq!(
            locate(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "rel")]),
            Some(ModelFiles::in_dir(Path::new(
                "/home/u/.cache/axocoatl/models/all-MiniLM-L6-v2"
            )))
        );
        assert_eq!(
            locate(&[("HOME", "/home/u"), (EMBED_DIR_ENV, "/m")]).map(|f| f.model),
            Some(PathBuf::from("/m/model.onnx"))
        );
        assert_eq!(locate(&[]), None);
    }

    #[cfg(feature = "embeddings")]
    #[test]
    fn missing_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Embedder::load(&ModelFiles::in_dir(dir.path())).expect_err("no files");
        assert_eq!(
            err,
            EmbedError::Missing {
                path: dir.path().join(MODEL_FILE)
            }
        );
    }
}

/// Tests of the real model (fetched by scripts/fetch-model.sh, as scripts/test.sh does).
#[cfg(all(test, feature = "embeddings"))]
mod model_tests {
    use std::io::Write;
    use std::path::Path;
    use std::process::{Command, Stdio};

    use super::*;

    fn embedder() -> &'static Embedder {
        match Embedder::shared() {
            Ok(e) => e,
            Err(e) => panic!("{e}: run scripts/fetch-model.sh first (or set {EMBED_DIR_ENV})"),
        }
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    const SENTENCES: &[&str] = &[
        "The cat sat on the mat.",
        "A kitten was resting on the rug.",
        "Quarterly revenue grew by twelve percent.",
        "Ünïcode façade — naïve café, 東京 and emoji 🙂 survive tokenization.",
        "short",
        "The build server in the basement runs Debian and has two cores; its disk does a few \
         hundred fsyncs per second, and the nightly job that rebuilds the search index starts at \
         three in the morning, after the backups.",
    ];

    #[test]
    fn vectors_are_unit_length_and_similar_texts_are_closer() {
        let e = embedder();
        let v = e.embed(SENTENCES).expect("embed");
        assert_eq!(v.len(), SENTENCES.len());
        for x in &v {
            assert_eq!(x.len(), DIM);
            assert!((dot(x, x) - 1.0).abs() < 1e-4);
        }
        assert!(
            dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2,
            "cat/kitten vs revenue"
        );
        // Batching and padding do not change a vector.
        let alone = e.embed(&[SENTENCES[0]]).expect("embed");
        assert!(dot(&alone[0], &v[0]) > 0.9999);
        assert!(e.embed(&[]).expect("empty").is_empty());
    }

    #[test]
    fn the_looked_up_word_embeddings_give_the_folded_tables_vectors_bit_for_bit() {
        let files = embedder().files();
        let looked_up = onnx::Model::load(files).expect("load");
        assert_eq!(looked_up.lookups(), 1, "the word embeddings are looked up");
        let folded = onnx::Model::load_with(files, false).expect("load");
        assert_eq!(folded.lookups(), 0);
        let ours = looked_up.embed(SENTENCES).expect("embed");
        let theirs: Vec<Vec<f32>> = SENTENCES
            .iter()
            .map(|s| folded.embed(&[s]).expect("embed").remove(0))
            .collect();
        // Each text alone through the folded graph, together through the looked-up one:
        // padding aside, the products are the same.
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(dot(a, b) > 0.99999, "sentence {i}: cosine {}", dot(a, b));
        }
        let batch = folded.embed(SENTENCES).expect("embed");
        assert_eq!(ours, batch, "the same batch gives the same bits");
    }

    /// Texts for comparing the engines: the sentences above, the benchmark's recall set
    /// (facts and questions), and text made to stress the tokenizer.
    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = SENTENCES.iter().map(|s| s.to_string()).collect();
        for line in include_str!("../../../benches/data/recall_set.tsv").lines() {
            if line.starts_with('#') {
                continue;
            }
            texts.extend(line.split('\t').map(str::to_owned));
        }
        texts.extend(
            [
                "",
                "   ",
                "[CLS] [SEP] [MASK] [PAD] [UNK]",
                "a[MASK]b [mask] [ MASK ]",
                "[SEP]\u{301}a [CLS]\u{308}",
                "İstanbul ǅemal ﬁnance Straße ΣΊΣΥΦΟΣ",
                "e\u{301}te\u{301} cafe\u{301} \u{0}\u{7}ctrl\u{fffd}\u{200b}zero-width",
                "tabs\tand\nnewlines\r\nand\u{3000}ideographic\u{a0}spaces",
                "日本語の文章と한국어 텍스트 and العربية",
                "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
                "emoji 👩‍👩‍👧‍👦 🇫🇷 ✔️ ☃",
                "C++ / Rust's `Result<T, E>`: x86_64-unknown-linux-gnu @ 3.7GHz (~12%) #1 ...!?",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        texts.push("word ".repeat(400));
        texts.push("x".repeat(150));
        // Random strings over a mixed alphabet (a fixed seed: the same texts every run).
        let alphabet: Vec<char> =
            "aeiou xyzTHE ,.;!?'\"-()[]{}#@éüñçÅ東京語한😀\t\n0123456789CLSEP"
                .chars()
                .collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..400 {
            let mut text = String::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 60) as usize;
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            texts.push(text);
        }
        texts
    }

    #[test]
    fn the_installed_model_runs_on_the_fast_engine() {
        let e = embedder();
        assert_eq!(e.engine(), Engine::Fast);
        assert!(e.files().ready.is_file());
    }

    #[test]
    fn the_fast_engine_tokenizes_as_the_tokenizers_crate() {
        let e = embedder();
        let fast = e.fast.as_ref().expect("fast engine");
        let mut reference =
            tokenizers::Tokenizer::from_file(&e.files().tokenizer).expect("tokenizer.json");
        reference.with_padding(None);
        reference
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: onnx::MAX_TOKENS,
                ..Default::default()
            }))
            .expect("truncation");
        for text in corpus() {
            let theirs = reference.encode(text.as_str(), true).expect("encode");
            assert_eq!(
                fast.tokenizer().encode(&text),
                theirs.get_ids(),
                "text {text:?}"
            );
        }
    }

    #[test]
    fn the_fast_engine_agrees_with_the_reference_engine() {
        let e = embedder();
        assert_eq!(e.engine(), Engine::Fast);
        let reference = Embedder::load_reference(e.files()).expect("reference");
        let texts = corpus();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let ours = e.embed(&refs).expect("fast");
        let theirs = reference.embed(&refs).expect("reference");
        let mut worst = (f32::INFINITY, "");
        for ((a, b), text) in ours.iter().zip(&theirs).zip(&refs) {
            assert_eq!(a.len(), DIM);
            let cos = dot(a, b);
            if cos < worst.0 {
                worst = (cos, text);
            }
        }
        assert!(
            worst.0 >= 0.999,
            "cosine {} with the reference on {:?}",
            worst.0,
            worst.1
        );
        // In fact the two differ by float rounding only.
        assert!(worst.0 >= 0.99999, "cosine {} on {:?}", worst.0, worst.1);
    }

    /// recall@1 of semantic memory searches (int8 vectors, as stored) over the benchmark's
    /// set: each of its facts retained, each question asked.
    fn recall_at_1(embedder: &'static Embedder) -> f64 {
        use crate::memory::semantic::{NewRecord, SemanticStore, Source, SourceKind};
        let dir = tempfile::tempdir().expect("tempdir");
        let root = axocoatl_store::repo::init(dir.path()).expect("init");
        let repo = axocoatl_store::Repo::open(&root, &axocoatl_store::repo::OpenOptions::default())
            .expect("open");
        let mut store = SemanticStore::open_with(&repo, "main:recall", Ok(embedder)).expect("open");
        let pairs: Vec<(&str, &str)> = include_str!("../../../benches/data/recall_set.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('\t'))
            .collect();
        assert!(pairs.len() >= 60, "the set is there");
        let records: Vec<NewRecord> = pairs
            .iter()
            .map(|(fact, _)| NewRecord {
                text: (*fact).to_owned(),
                source: Source {
                    turn: None,
                    kind: SourceKind::Added,
                    at: 0,
                },
            })
            .collect();
        store.add(&records).expect("add");
        let hits = pairs
            .iter()
            .enumerate()
            .filter(|(i, (_, question))| {
                store
                    .search(question, 1)
                    .expect("search")
                    .first()
                    .map(|h| h.id)
                    == Some(*i as u64)
            })
            .count();
        hits as f64 / pairs.len() as f64
    }

    #[test]
    fn the_fast_engine_recalls_the_benchmark_set_as_well_as_the_reference() {
        let fast = embedder();
        assert_eq!(fast.engine(), Engine::Fast);
        let reference: &'static Embedder = Box::leak(Box::new(
            Embedder::load_reference(fast.files()).expect("reference"),
        ));
        let (ours, theirs) = (recall_at_1(fast), recall_at_1(reference));
        assert!(
            ours >= 0.95,
            "recall@1 {ours:.3} (the reference's {theirs:.3})"
        );
        assert!(
            ours >= theirs,
            "recall@1 {ours:.3} below the reference's {theirs:.3}"
        );
    }

    /// A directory holding copies of the installed model files.
    fn copied_model() -> (tempfile::TempDir, ModelFiles) {
        let from = embedder().files();
        let dir = tempfile::tempdir().expect("tempdir");
        let files = ModelFiles::in_dir(dir.path());
        std::fs::copy(&from.model, &files.model).expect("copy model");
        std::fs::copy(&from.tokenizer, &files.tokenizer).expect("copy tokenizer");
        (dir, files)
    }

    #[test]
    fn the_ready_file_is_made_once_and_again_when_damaged_or_stale() {
        let (_dir, files) = copied_model();
        assert!(!files.ready.exists());
        let first = Embedder::load(&files).expect("load");
        assert_eq!(first.engine(), Engine::Fast);
        let made = std::fs::read(&files.ready).expect("made");
        let v = first.embed(&["The cat sat on the mat."]).expect("embed");
        drop(first);
        // Opened, not made again: the file is the same.
        let again = Embedder::load(&files).expect("load");
        assert_eq!(again.embed(&["The cat sat on the mat."]).expect("embed"), v);
        drop(again);
        // A flipped byte in a checked section: made again on load.
        let mut bad = made.clone();
        bad[300] ^= 1;
        std::fs::write(&files.ready, &bad).expect("damage");
        let repaired = Embedder::load(&files).expect("load");
        assert_eq!(repaired.engine(), Engine::Fast);
        assert_eq!(std::fs::read(&files.ready).expect("read"), made);
        drop(repaired);
        // A model file replaced (here: touched): the file is made from it again.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&files.tokenizer)
            .and_then(|f| f.set_modified(later))
            .expect("touch");
        let stale = axocoatl_embed::Model::open(&files.ready).expect("open");
        assert_ne!(
            stale.source(),
            &fast::fingerprint(&files).expect("fingerprint")
        );
        drop(stale);
        let remade = Embedder::load(&files).expect("load");
        assert_eq!(remade.engine(), Engine::Fast);
        let fresh = axocoatl_embed::Model::open(&files.ready).expect("open");
        assert_eq!(
            fresh.source(),
            &fast::fingerprint(&files).expect("fingerprint")
        );
    }

    #[test]
    fn a_damaged_word_row_falls_back_to_the_reference_and_the_file_goes() {
        let (_dir, files) = copied_model();
        let e = Embedder::load(&files).expect("load");
        let fast = e.fast.as_ref().expect("fast");
        let text = "The cat sat on the mat.";
        let cat = fast.tokenizer().encode(text)[2];
        let want = e.embed(&[text]).expect("embed");
        // Flip a byte of the word row of "cat" (the last section: a row of DIM bytes, a
        // scale and a CRC per token id).
        let mut bytes = std::fs::read(&files.ready).expect("read");
        let words_at = bytes.len() - fast.config().vocab * (DIM + 8);
        let at = words_at + cat as usize * (DIM + 8) + 5;
        bytes[at] ^= 0x40;
        // Written in place on purpose (the store never does): the mapping sees it.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&files.ready)
            .and_then(|mut f| f.write_all(&bytes))
            .expect("damage");
        let got = e.embed(&[text]).expect("answered by the reference");
        match e.engine() {
            Engine::Reference { why } => {
                assert!(
                    why.contains(&format!("row {cat} of the word table")),
                    "{why}"
                )
            }
            Engine::Fast => panic!("still on the damaged file"),
        }
        assert!(dot(&got[0], &want[0]) > 0.9999);
        assert!(!files.ready.exists(), "the damaged file is removed");
        drop(e);
        assert_eq!(Embedder::load(&files).expect("load").engine(), Engine::Fast);
    }

    #[test]
    fn a_ready_file_that_cannot_be_installed_leaves_the_reference_engine_with_the_reason() {
        let (_dir, files) = copied_model();
        // A directory where the file should go: nothing can be renamed over it.
        std::fs::create_dir_all(files.ready.join("occupied")).expect("mkdir");
        let e = Embedder::load(&files).expect("load");
        match e.engine() {
            Engine::Reference { why } => {
                assert!(why.contains("model.axoemb"), "{why}");
                assert!(why.contains("making it failed"), "{why}");
            }
            Engine::Fast => panic!("fast engine without its file"),
        }
        let v = e.embed(&["still answers"]).expect("embed");
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-4);
        // Nothing is left behind but the directory that was there.
        let left: Vec<_> = std::fs::read_dir(files.ready.parent().expect("dir"))
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".new"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// The python of scripts/ort-venv.sh, or why there is none.
    fn reference_python() -> Result<String, String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("scripts/ort-venv.sh"))
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run scripts/ort-venv.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/ort-venv.sh failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    #[test]
    #[expect(clippy::print_stderr, reason = "a skipped comparison says why")]
    fn vectors_match_onnxruntime() {
        let e = embedder();
        let python = match reference_python() {
            Ok(p) => p,
            Err(reason) => {
                eprintln!("skipped: no onnxruntime to compare with ({reason})");
                return;
            }
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let request = serde_json::json!({
            "model": e.files().model,
            "tokenizer": e.files().tokenizer,
            "texts": SENTENCES,
            "batch": 4,
        });
        let mut child = Command::new(python)
            .arg(root.join("scripts/ort_embed.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run ort_embed.py");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(request.to_string().as_bytes())
            .expect("write request");
        let out = child.wait_with_output().expect("ort_embed.py");
        assert!(out.status.success(), "ort_embed.py failed");
        let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let theirs: Vec<Vec<f32>> =
            serde_json::from_value(reply["vectors"].clone()).expect("vectors");
        let ours = e.embed(SENTENCES).expect("embed");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            let cos = dot(a, b);
            assert!(cos >= 0.999, "sentence {i}: cosine {cos} with onnxruntime");
        }
    }
}
