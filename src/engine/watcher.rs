//! Looks in the ledger for a stop request naming the running turn.

use std::path::PathBuf;
use std::time::Duration;

use axocoatl_store::ledger::{Position, Record};

use crate::workspace::Workspace;

/// How often the ledger is looked at for a stop request.
pub const POLL: Duration = Duration::from_millis(20);

/// A check for [`crate::provider::Cancel::with_probe`]: true once a stop request for `turn`
/// was appended after `from` (just after the turn's begin record). It runs on the thread
/// that waits for the provider, so a turn costs no watcher thread; the repository handle is
/// opened at the first look, so a turn that ends sooner costs nothing here.
pub fn stop_requested(ws: &Workspace, turn: &str, from: Position) -> impl FnMut() -> bool + Send {
    let root: PathBuf = ws.repo().root().to_owned();
    let turn = turn.to_owned();
    let mut repo: Option<axocoatl_store::Repo> = None;
    let mut pos = from;
    move || {
        if repo.is_none() {
            repo = axocoatl_store::Repo::open(&root, &crate::workspace::open_options()).ok();
        }
        let Some(repo) = &repo else { return false };
        for entry in repo.ledger().scan(pos).flatten() {
            pos = entry.next;
            if let Some(Record::StopRequested(s)) = &entry.record {
                if s.turn == turn {
                    return true;
                }
            }
        }
        false
    }
}
