//! Rewinds whose boundary is in the ledger and whose checkpoint may not be written yet: one
//! file per agent in [`REWIND_PENDING_DIR`], written (durably) before the boundary
//! is appended and removed once the checkpoint is, so the next command finishes what a
//! crash left.

use std::fs;
use std::path::PathBuf;

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::{rewind_pending_path, REWIND_PENDING_DIR};
use crate::{Repo, Result};

/// A rewind of `agent` in `session` left unfinished, and its marker file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub session: String,
    pub agent: String,
    marker: PathBuf,
}

impl Pending {
    /// Removes the marker: the checkpoint is written.
    pub fn done(self) {
        let _ = fs::remove_file(&self.marker);
    }
}

/// Marks the rewind of `agent` in `session` pending (durably).
pub fn mark(repo: &Repo, session: &str, agent: &str) -> Result<Pending> {
    let marker = rewind_pending_path(repo.root(), session, agent);
    create_dir_private(marker.parent().unwrap_or(repo.root()))?;
    write_atomic(
        &marker,
        format!("{session}\n{agent}\n").as_bytes(),
        Durability::Durable,
    )?;
    Ok(Pending {
        session: session.to_owned(),
        agent: agent.to_owned(),
        marker,
    })
}

/// Every pending rewind. A marker that does not read as one is removed (its rewind
/// cannot be named, and its boundary is in the ledger either way).
pub fn all(repo: &Repo) -> Vec<Pending> {
    let Ok(entries) = fs::read_dir(repo.path(REWIND_PENDING_DIR)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let marker = entry.path();
        let Ok(text) = fs::read_to_string(&marker) else {
            continue;
        };
        let mut lines = text.lines();
        match (lines.next(), lines.next()) {
            (Some(session), Some(agent)) => out.push(Pending {
                session: session.to_owned(),
                agent: agent.to_owned(),
                marker,
            }),
            _ => {
                let _ = fs::remove_file(&marker);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_rewind_is_listed_until_done() {
        let (_dir, repo) = crate::repo::scratch();
        let p = mark(&repo, "main", "coder").expect("mark");
        assert_eq!(all(&repo), std::slice::from_ref(&p));
        assert_eq!((p.session.as_str(), p.agent.as_str()), ("main", "coder"));
        p.done();
        assert!(all(&repo).is_empty());
    }
}
