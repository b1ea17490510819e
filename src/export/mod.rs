//! The ledger as data for other tools: a SQLite database for SQL clients and Datasette,
//! refreshed incrementally from where the last export stopped (see `docs/export.md`).
//! Traces of the same turns for OpenTelemetry tools are `crate::telemetry`'s.

use std::path::Path;

use axocoatl_store::ledger::{Damaged, Entry};
use axocoatl_store::Repo;

use crate::error::Result;

#[cfg(feature = "sqlite")]
mod sqlite;

/// What one `export --format sqlite` did.
#[derive(Debug, Default)]
pub struct SqliteReport {
    /// The file was made by this export (else: refreshed).
    pub created: bool,
    /// Ledger records read past the file's previous position (in scope or not).
    pub records: u64,
    /// Turns added to the file.
    pub turns_added: u64,
    /// Turns in the file now.
    pub turns: u64,
    /// The ledger position the file now records: the sequence number of the last record
    /// read.
    pub seq: u64,
    /// Records that could not be read (never skipped silently: the caller shows them).
    pub damaged: Vec<Damaged>,
    /// Records of kinds this build does not know (left out).
    pub unknown_kinds: u64,
}

/// Exports the turns of `session` (every session with `None`) into the SQLite database at
/// `path`: a new file is written whole under a temporary name and renamed into place; an
/// existing export of this repository and scope gets what the ledger holds past its
/// recorded position, in one transaction.
pub fn sqlite(repo: &Repo, session: Option<&str>, path: &Path) -> Result<SqliteReport> {
    #[cfg(feature = "sqlite")]
    {
        sqlite::export(repo, session, path)
    }
    #[cfg(not(feature = "sqlite"))]
    {
        let _ = (repo, session, path);
        Err(crate::error::RuntimeError::NotSupported(
            "`export --format sqlite` in a build without the `sqlite` feature".into(),
        ))
    }
}

/// A short fingerprint of one ledger record (its sequence number, kind and body): the
/// identity of a repository's history is the fingerprint of its first record, and an
/// export checks that the record it stopped after is still the same one.
pub fn fingerprint(entry: &Entry) -> String {
    let body = entry
        .record
        .as_ref()
        .map(|r| r.body_json().to_string())
        .unwrap_or_default();
    let mut h = blake3::Hasher::new();
    h.update(&entry.seq.to_le_bytes());
    h.update(&entry.kind.to_le_bytes());
    h.update(body.as_bytes());
    h.finalize().to_hex()[..32].to_string()
}
