//! The language model of axocoatl's `local` provider: a GGUF file of the llama architecture
//! (SmolLM2, Llama 3), run on the CPU from the mapped file as it is.
//!
//! - [`gguf`] reads the file's header, metadata and tensor directory, checking every count
//!   and offset (a model file is input from anywhere).
//! - [`Model`] maps the file and runs the forward pass over its Q4_0, Q4_1 and Q8_0
//!   matrices directly (the weights are read from the page cache, never copied or widened;
//!   Q4_K matrices are repacked as Q4_1, and F16, BF16, F32, Q5_0, Q5_1 and the other
//!   k-quants widened to Q8_0, once, at load). The token embedding is looked up one row at a
//!   time from its quantized table.
//! - [`kquant`] reads GGML's k-quant blocks (and writes them, for test and benchmark files).
//! - [`kernel`] holds the int8 dot products (a plain version and an AVX2 one, which only a
//!   CPU where every feature it is compiled with was detected can run).
//! - [`Cache`] is the attention (key/value) cache of one conversation: the tokens it has read
//!   and their keys and values, reused for a prompt that starts with the same tokens, and
//!   saved to bytes ([`Cache::to_bytes`]) that [`Cache::from_bytes`] verifies before use.

pub mod cache;
mod config;
pub mod gguf;
pub mod kernel;
pub mod kquant;
mod model;
mod pool;
pub mod quant;
pub mod rewrite;
mod widen;

pub use cache::Cache;
pub use config::{Config, MAX_CONTEXT};
pub use model::Model;

/// What can go wrong opening a model or running it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file is not a GGUF file this crate reads (with what is wrong).
    #[error("{0}")]
    Format(String),
    /// A GGUF file of a model or a format this crate does not run yet.
    #[error("{0}")]
    Unsupported(String),
    /// A request the model cannot serve (a token id beyond the vocabulary, a prompt beyond
    /// the context).
    #[error("{0}")]
    Input(String),
}
