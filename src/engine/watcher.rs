//! Watches the ledger for a stop request naming the running turn.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use axocoatl_store::ledger::{Position, Record};

use crate::provider::Cancel;
use crate::workspace::Workspace;

/// How often the ledger is polled for a stop request.
pub const POLL: Duration = Duration::from_millis(40);

pub struct StopWatcher {
    done: Option<Sender<()>>,
    handle: Option<JoinHandle<bool>>,
}

impl StopWatcher {
    /// Starts polling from `from` (just after the turn's begin record).
    pub fn start(ws: &Workspace, turn: &str, from: Position, cancel: Cancel) -> StopWatcher {
        let (tx, rx) = mpsc::channel::<()>();
        let root = ws.repo().root().to_owned();
        let turn = turn.to_owned();
        let handle = std::thread::Builder::new()
            .name("stop-watcher".into())
            .spawn(move || {
                let mut repo = None;
                let mut pos = from;
                loop {
                    // Wakes at once when the turn ends (the sender is dropped or signals).
                    match rx.recv_timeout(POLL) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return false,
                    }
                    // Opened at the first poll: a turn that ends sooner costs nothing here.
                    if repo.is_none() {
                        repo = axocoatl_store::Repo::open(&root, &crate::workspace::open_options())
                            .ok();
                    }
                    let Some(repo) = &repo else { return false };
                    for entry in repo.ledger().scan(pos).flatten() {
                        pos = entry.next;
                        if let Some(Record::StopRequested(s)) = &entry.record {
                            if s.turn == turn {
                                cancel.cancel();
                                return true;
                            }
                        }
                    }
                }
            })
            .ok();
        StopWatcher {
            done: Some(tx),
            handle,
        }
    }

    /// Stops watching; whether a stop request was seen.
    pub fn finish(mut self) -> bool {
        drop(self.done.take());
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or(false)
    }
}
