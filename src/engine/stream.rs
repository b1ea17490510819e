//! The running turn's stream file: every event it reports from its begin, one JSON line
//! each (the `send --json` event), so `axocoatl follow` in another process shows what the
//! turn has streamed so far and keeps up with it. The store owns the file (bounded,
//! unsynced, removed once the terminal record is durable); the ledger stays the authority
//! on how the turn ended.

use axocoatl_store::run::stream::StreamWriter;
use axocoatl_store::Repo;

use crate::turn::TurnEvent;

/// The stream of one turn; writing it never fails the turn (a failure is noted once).
#[derive(Debug, Default)]
pub(crate) struct Stream {
    writer: Option<StreamWriter>,
    /// Why the stream stopped being written, for the turn's warning.
    failed: Option<String>,
}

impl Stream {
    /// Creates the stream file of `turn`.
    pub fn start(repo: &Repo, turn: &str) -> Stream {
        match StreamWriter::create(repo, turn) {
            Ok(w) => Stream {
                writer: Some(w),
                failed: None,
            },
            Err(e) => Stream {
                writer: None,
                failed: Some(format!(
                    "the turn's stream for `axocoatl follow` was not written: {e}"
                )),
            },
        }
    }

    /// Appends `ev`.
    pub fn event(&mut self, ev: &TurnEvent<'_>) {
        let Some(w) = &mut self.writer else {
            return;
        };
        let written = serde_json::to_string(ev)
            .map_err(|e| e.to_string())
            .and_then(|line| w.line(&line).map_err(|e| e.to_string()));
        if let Err(e) = written {
            self.writer = None;
            self.failed = Some(format!(
                "the turn's stream for `axocoatl follow` stopped: {e}"
            ));
        }
    }

    /// Why the stream is incomplete, once: a warning for the turn's records.
    pub fn take_failure(&mut self) -> Option<String> {
        self.failed.take()
    }

    /// Removes the file (the terminal record is durable); why that failed, if it did.
    pub fn end(self) -> Option<String> {
        let w = self.writer?;
        w.remove()
            .err()
            .map(|e| format!("the turn's stream file was not removed: {e}"))
    }
}
