//! Errors of the store. I/O errors always carry the path they happened on.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no axocoatl repository found in {} or any parent directory", start.display())]
    NotFound { start: PathBuf },
    #[error("{} is already an axocoatl repository", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("{} has repository format {found}, but this axocoatl supports format {supported}", path.display())]
    UnsupportedFormat {
        path: PathBuf,
        found: String,
        supported: u32,
    },
    #[error("{} is not a valid format marker: {reason}", path.display())]
    BadFormatMarker { path: PathBuf, reason: String },
    #[error("ledger corrupt: {} at byte {offset}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A semantic memory `records` file that does not check where it is read.
    #[error("semantic memory store {}: damaged at byte {offset}: {reason}", path.display())]
    SemanticDamaged {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("object {hash} is missing")]
    ObjectMissing { hash: String },
    #[error("object {hash} is damaged: its content hashes to {actual}")]
    ObjectDamaged { hash: String, actual: String },
    #[error("record too large: {size} bytes (the limit is {limit})")]
    RecordTooLarge { size: usize, limit: usize },
    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("{}: {reason}", path.display())]
    BadRecord { path: PathBuf, reason: String },
    #[error("checkpoint {}: {reason}", path.display())]
    BadCheckpoint { path: PathBuf, reason: String },
    /// A memory file (core memory, daily log) that does not parse: never read as empty, so
    /// an edit cannot overwrite what it could not read.
    #[error("memory file {}: {reason}", path.display())]
    BadMemoryFile { path: PathBuf, reason: String },
    /// A memory file written by a newer axocoatl: refused, never rewritten in an older shape.
    #[error("memory file {} has version {found}, but this axocoatl reads version {supported}", path.display())]
    MemoryVersion {
        path: PathBuf,
        found: u64,
        supported: u32,
    },
    /// An fdatasync of the ledger failed earlier in this process: the kernel may have dropped
    /// the pages it could not write and marked them clean, so a later sync through the same
    /// descriptor could report success for records that are not on disk (as fjall and
    /// PostgreSQL, the handle is poisoned: every later append fails until the repository is
    /// opened again).
    #[error("appends to the ledger {} are refused: an earlier sync of it failed ({cause}), so records written since may not be on disk; reopen the repository (run the command again, or restart the process that holds it)", path.display())]
    Poisoned { path: PathBuf, cause: String },
    /// `HEAD` names the current session; the message says how to rewrite it.
    #[error("{}: {reason}; it names the current session: `axocoatl fsck --repair` sets it to `main`, then `axocoatl sessions switch NAME` picks another", path.display())]
    BadHead { path: PathBuf, reason: String },
    /// The session name map (renamed and removed sessions) does not parse: never read as
    /// empty, which would bring removed sessions back and lose renames.
    #[error("{}:{line}: {reason}; it lists renamed and removed sessions: fix or restore that line", path.display())]
    BadNames {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }
}
