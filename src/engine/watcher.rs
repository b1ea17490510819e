//! Watches the ledger for a stop request naming the running turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axocoatl_store::ledger::{Position, Record};

use crate::provider::Cancel;
use crate::workspace::Workspace;

/// How often the ledger is polled for a stop request.
pub const POLL: Duration = Duration::from_millis(40);

pub struct StopWatcher {
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<bool>>,
}

impl StopWatcher {
    /// Starts polling from `from` (just after the turn's begin record).
    pub fn start(ws: &Workspace, turn: &str, from: Position, cancel: Cancel) -> StopWatcher {
        let done = Arc::new(AtomicBool::new(false));
        let root = ws.repo().root().to_owned();
        let turn = turn.to_owned();
        let flag = done.clone();
        let handle = std::thread::Builder::new()
            .name("stop-watcher".into())
            .spawn(move || {
                let Ok(repo) = axocoatl_store::Repo::open(&root, &crate::workspace::open_options())
                else {
                    return false;
                };
                let mut pos = from;
                while !flag.load(Ordering::SeqCst) {
                    for entry in repo.ledger().scan(pos).flatten() {
                        pos = entry.next;
                        if let Some(Record::StopRequested(s)) = &entry.record {
                            if s.turn == turn {
                                cancel.cancel();
                                return true;
                            }
                        }
                    }
                    std::thread::sleep(POLL);
                }
                false
            })
            .ok();
        StopWatcher { done, handle }
    }

    /// Stops watching; whether a stop request was seen.
    pub fn finish(mut self) -> bool {
        self.done.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or(false)
    }
}
