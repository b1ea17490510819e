//! Literal search over the ledger, for `history --search`.
//!
//! The store finds the turns that can match (see `axocoatl_store::ledger::grep`); the caller
//! keeps those whose text really matches.

use axocoatl_store::Repo;
use regex::bytes::{Regex, RegexBuilder};

use crate::error::{Result, RuntimeError};
use crate::history::{self, Projection};

/// The matcher `--search TEXT` uses on raw bytes.
pub fn byte_matcher(text: &str) -> Result<Regex> {
    RegexBuilder::new(&regex::escape(text))
        .case_insensitive(true)
        .unicode(true)
        .build()
        .map_err(|e| RuntimeError::Invalid {
            message: format!("cannot search for {text:?}: {e}"),
            hint: "search for a shorter text".into(),
        })
}

/// Projects only the turns that can match `text`; the caller filters them exactly.
pub fn search(repo: &Repo, text: &str) -> Result<Projection> {
    let re = byte_matcher(text)?;
    history::project_walked(repo, repo.ledger().read_matching(&re, text)?)
}
