//! The sentence embedder of axocoatl's semantic memory, ready to run in a one-shot process.
//!
//! all-MiniLM-L6-v2 is a 6-layer BERT encoder (hidden 384, 12 heads, feed-forward 1536) with
//! a WordPiece tokenizer. Its published int8 ONNX file keeps every matrix as int8 values with
//! one f32 scale per output column; a graph runtime folds those into f32 weights and optimizes
//! the graph in every process (about 110 ms and 130 MB for one query). This crate instead
//! reads one file written once by a converter ([`format::write`]): the int8 matrices as they
//! are, the small f32 vectors, the vocabulary sorted for binary search and the word-embedding
//! table row by row, each part checksummed. A process maps it ([`Model::open`]: no parsing,
//! no copy of the weights) and runs the encoder with hand-written kernels: `x · q` in f32
//! over int8 weights converted in registers, then times the column's scale, which is the
//! folded graph's product up to the order of the additions.
//!
//! Of the 30,522 × 384 word-embedding table only the rows of the tokens met are read, so a
//! process touches about 11 MB of the file's 23 MB.
//!
//! The crate knows nothing of ONNX: the caller (axocoatl's `memory::embed`) reads the ONNX
//! file with its reference runtime, fills a [`format::Parts`] and checks the result against
//! the reference before installing it.

// Every unsafe operation sits in its own `unsafe` block with a `SAFETY:` comment, also
// inside `unsafe fn`s: the kernels' contracts are what this crate's soundness rests on.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod config;
pub mod format;
mod forward;
mod kernel;
mod math;
mod team;
pub mod tokenize;

use std::path::{Path, PathBuf};

pub use format::{Config, Model};
pub use tokenize::Tokenizer;

/// Why a model file cannot be used, or what went wrong while embedding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Reading, mapping or writing the file failed.
    #[error("{path}: {reason}")]
    Io { path: PathBuf, reason: String },
    /// The file is not a model file of this format and version, or its checksums do not
    /// match: it should be written again.
    #[error("{path} is damaged or of another format: {reason}")]
    Damaged { path: PathBuf, reason: String },
    /// The parts given to the writer do not describe a model this crate can run.
    #[error("cannot convert the model: {0}")]
    Unsupported(String),
}

impl Error {
    pub(crate) fn damaged(path: &Path, reason: impl Into<String>) -> Error {
        Error::Damaged {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
        move |e| Error::Io {
            path: path.to_owned(),
            reason: e.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Most tokens run through the encoder at once: texts are batched up to this many tokens in
/// all (no padding: the linear layers see the texts' tokens as one matrix, attention stays
/// within each text), so a batch's activations stay a few megabytes.
pub const BATCH_TOKENS: usize = 1024;

impl Model {
    /// One unit vector of the model's hidden size per text, in order: the mean of the last
    /// layer's token vectors, L2-normalized (as sentence-transformers does). Texts longer
    /// than the model's window are cut there.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let tokenizer = self.tokenizer();
        let mut out = Vec::with_capacity(texts.len());
        let mut batch: Vec<Vec<u32>> = Vec::new();
        let mut tokens = 0;
        for text in texts {
            let ids = tokenizer.encode(text);
            if tokens + ids.len() > BATCH_TOKENS && !batch.is_empty() {
                out.extend(forward::run(self, &batch)?);
                batch.clear();
                tokens = 0;
            }
            tokens += ids.len();
            batch.push(ids);
        }
        if !batch.is_empty() {
            out.extend(forward::run(self, &batch)?);
        }
        Ok(out)
    }

    /// The hidden states of the last layer for one text's token ids (tests compare them
    /// with the reference runtime's, token by token).
    pub fn hidden_states(&self, ids: &[u32]) -> Result<Vec<f32>> {
        forward::hidden(self, &[ids.to_vec()])
    }

    /// Which kernels this CPU runs (`avx512`, `avx2` or `generic`).
    pub fn kernel_name() -> &'static str {
        kernel::Isa::detect().name()
    }
}
