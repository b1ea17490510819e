//! Progress of slow steps (loading a local model, reading a long prompt, importing pre-1.0
//! state), for people waiting at a terminal. The runtime never prints: it reports here, and
//! the command line, when it chose to show progress (a terminal, not `--json`, not
//! `--quiet`), draws it. Nothing is reported when no one listens.

use std::sync::OnceLock;

/// A step that may take seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A model file is being loaded into memory.
    LoadingModel { model: &'a str },
    /// The model reads the prompt: `done` of `total` tokens (reported between chunks).
    ReadingPrompt { done: usize, total: usize },
    /// Pre-1.0 state is being imported: `done` of `total` inputs.
    Importing { done: usize, total: usize },
    /// The step ended: whatever was drawn for it goes away.
    Done,
}

static LISTENER: OnceLock<fn(&Progress<'_>)> = OnceLock::new();

/// Has `listen` hear every report of this process (set once; later calls change nothing).
pub fn report_to(listen: fn(&Progress<'_>)) {
    let _ = LISTENER.set(listen);
}

/// Reports `p` to the listener, if there is one.
pub fn report(p: Progress<'_>) {
    if let Some(listen) = LISTENER.get() {
        listen(&p);
    }
}
