//! `axocoatl.yaml`: schema, loading and validation.

mod types;

pub use types::*;
