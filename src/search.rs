//! Literal search over the ledger, for `history --search`.
//!
//! The store finds the turns that can match (see
//! `axocoatl_store::search::Searcher::read_matching`); the caller keeps those whose text
//! really matches, with the same [`Matcher`].

pub use axocoatl_store::search::Matcher;
use axocoatl_store::Repo;

use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Want};

/// The case-insensitive literal matcher of `--search TEXT`, for raw bytes and text alike.
pub fn matcher(text: &str) -> Result<Matcher> {
    if text.is_empty() {
        return Err(RuntimeError::Invalid {
            message: "--search needs some text".into(),
            hint: "axocoatl history --search TEXT".into(),
        });
    }
    Matcher::new(text).map_err(|e| RuntimeError::Invalid {
        message: format!("cannot search for {text:?}: {e}"),
        hint: "search for a shorter text".into(),
    })
}

/// Projects only the turns that can match `text` (`re` is its [`matcher`]), without session
/// summaries; the caller filters them exactly.
pub fn search_with(repo: &Repo, re: &Matcher, text: &str) -> Result<Projection> {
    let walked = repo.searcher().read_matching(re, text)?;
    Projection::from_walked(repo, walked, Want::TURNS)
}

/// [`search_with`] the matcher of `text`.
pub fn search(repo: &Repo, text: &str) -> Result<Projection> {
    search_with(repo, &matcher(text)?, text)
}
