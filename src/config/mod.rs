//! `axocoatl.yaml`: schema, loading, validation and provider resolution.
//!
//! [`load`] reads a file and returns either a validated [`Config`] (with warnings) or every
//! problem at once, each a [`Diagnostic`] with the line and column to fix.

mod de;
mod diag;
mod load;
mod relations;
mod resolve;
mod starter;
mod tree;
mod types;
mod validate;

pub use diag::{Diagnostic, Severity};
pub use load::{load, load_str, Loaded};
pub use resolve::{
    local_model_path, ResolvedProvider, DEFAULT_CONNECT_TIMEOUT_SECS, DEFAULT_LOCAL_MODEL,
    DEFAULT_LOCAL_MODEL_FILE, DEFAULT_MAX_RETRIES, DEFAULT_OLLAMA_URL, DEFAULT_OPENAI_KEY_ENV,
    DEFAULT_OPENAI_URL, DEFAULT_TIMEOUT_SECS,
};
pub use starter::starter_config;
pub use types::*;
pub use validate::{check_name, parse_schedule};
