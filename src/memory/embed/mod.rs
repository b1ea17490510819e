//! The local sentence embedder of semantic memory: all-MiniLM-L6-v2 (384 dimensions) in ONNX,
//! run in-process by `tract-onnx` (cargo feature `embeddings`, on by default), tokenized by
//! the `tokenizers` crate from the model's `tokenizer.json`. Vectors are mean-pooled over the
//! tokens and L2-normalized, as sentence-transformers does, so a dot product is a cosine.
//!
//! The model files are not part of the binary: `axocoatl models fetch` puts them in
//! `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/all-MiniLM-L6-v2/` (`model.onnx`,
//! `tokenizer.json`), or `$AXOCOATL_EMBED_DIR` names another directory. When they are absent,
//! or the build has no `embeddings` feature, [`Embedder::shared`] says why and semantic
//! memory uses its lexical fallback.

#[cfg(feature = "embeddings")]
mod onnx;

use std::path::{Path, PathBuf};

/// Length of every vector.
pub const DIM: usize = 384;
/// Names the model in vector files: vectors of another model are never mixed in.
pub const MODEL_TAG: &str = "all-MiniLM-L6-v2/int8-folded/v1";
/// Directory under the models cache that holds the two files.
pub const MODEL_DIR_NAME: &str = "all-MiniLM-L6-v2";
pub const MODEL_FILE: &str = "model.onnx";
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// Environment variable naming a directory holding `model.onnx` and `tokenizer.json`.
pub const EMBED_DIR_ENV: &str = "AXOCOATL_EMBED_DIR";

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

/// Where the two model files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    pub model: PathBuf,
    pub tokenizer: PathBuf,
}

impl ModelFiles {
    /// The files in `dir`.
    pub fn in_dir(dir: &Path) -> ModelFiles {
        ModelFiles {
            model: dir.join(MODEL_FILE),
            tokenizer: dir.join(TOKENIZER_FILE),
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

/// A loaded model: tokenizer plus optimized graph. Loading takes a fraction of a second, so
/// the runtime shares one per process through [`Embedder::shared`].
pub struct Embedder {
    files: ModelFiles,
    #[cfg(feature = "embeddings")]
    model: onnx::Model,
}

/// Texts run through the model together: padding to the longest costs little when texts of
/// similar length are batched (they are sorted by length first).
#[cfg(feature = "embeddings")]
const BATCH: usize = 16;

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model and tokenizer from `files`.
    pub fn load(files: &ModelFiles) -> Result<Embedder, EmbedError> {
        if !cfg!(feature = "embeddings") {
            return Err(EmbedError::FeatureOff);
        }
        for path in [&files.model, &files.tokenizer] {
            if !path.is_file() {
                return Err(EmbedError::Missing { path: path.clone() });
            }
        }
        #[cfg(feature = "embeddings")]
        {
            Ok(Embedder {
                files: files.clone(),
                model: onnx::Model::load(files)?,
            })
        }
        #[cfg(not(feature = "embeddings"))]
        Err(EmbedError::FeatureOff)
    }

    /// The process-wide embedder, loaded from [`ModelFiles::from_env`] at the first call;
    /// later calls return the same embedder or the same reason it is unavailable.
    pub fn shared() -> Result<&'static Embedder, EmbedError> {
        static SHARED: std::sync::OnceLock<Result<Embedder, EmbedError>> =
            std::sync::OnceLock::new();
        SHARED
            .get_or_init(|| {
                let files = ModelFiles::from_env().ok_or_else(|| EmbedError::Missing {
                    path: PathBuf::from(MODEL_DIR_NAME).join(MODEL_FILE),
                })?;
                Embedder::load(&files)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The files this embedder was loaded from.
    pub fn files(&self) -> &ModelFiles {
        &self.files
    }

    /// One unit vector of [`DIM`] floats per text, in order. Texts longer than the model's
    /// window (256 tokens) are cut there: semantic memory chunks long texts before this.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        #[cfg(feature = "embeddings")]
        {
            // Sorted by length so that each batch pads little; answered in the given order.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let mut out = vec![Vec::new(); texts.len()];
            for chunk in order.chunks(BATCH) {
                let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
                for (&i, v) in chunk.iter().zip(self.model.embed(&batch)?) {
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
        let looked_up = embedder();
        assert_eq!(
            looked_up.model.lookups(),
            1,
            "the word embeddings are looked up"
        );
        let folded = onnx::Model::load_with(looked_up.files(), false).expect("load");
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
        let ours_batch = looked_up.model.embed(SENTENCES).expect("embed");
        assert_eq!(ours_batch, batch, "the same batch gives the same bits");
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
