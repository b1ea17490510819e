//! `axocoatl.yaml`: schema, loading, validation and provider resolution.
//!
//! [`load()`] reads a file and returns either a validated [`Config`] (with warnings) or every
//! problem at once, each a [`Diagnostic`] with the line and column to fix.

mod approvals;
mod costs;
mod de;
mod diag;
mod load;
mod output_schema;
mod partial;
mod prices;
#[cfg(test)]
mod proptests;
mod relations;
mod resolve;
mod starter;
mod tree;
mod trusted;
mod types;
mod validate;
mod yaml;

pub(crate) use diag::{closest, suggestion};
pub use diag::{Diagnostic, Severity};
pub(crate) use load::{human_size, read_text_file, FileProblem};
pub use load::{load, load_checked, load_str, Loaded, CONFIG_SIZE_LIMIT};
pub use prices::{entry_problem, lookup, shipped_as_of, shipped_prices, Price, PriceSource};
pub(crate) use resolve::lookup_provider;
pub use resolve::{
    local_model_path, local_ready_dir, ResolvedProvider, DEFAULT_ANTHROPIC_KEY_ENV,
    DEFAULT_ANTHROPIC_URL, DEFAULT_CONNECT_TIMEOUT_SECS, DEFAULT_LOCAL_MODEL,
    DEFAULT_LOCAL_MODEL_FILE, DEFAULT_MAX_RETRIES, DEFAULT_OLLAMA_URL, DEFAULT_OPENAI_KEY_ENV,
    DEFAULT_OPENAI_URL, DEFAULT_TIMEOUT_SECS,
};
pub use resolve::{provider_names, takes_any_model};
pub use starter::starter_config;
pub use trusted::{mcp_program, model_places, trusted_files, TrustedFile};
pub use types::*;
pub(crate) use validate::sampling_problems;
pub use validate::{check_name, parse_schedule};
pub(crate) use yaml::read_yaml;
pub use yaml::yaml_value;
