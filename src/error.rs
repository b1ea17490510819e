//! The runtime's one error type. Every error has a [`ErrorKind`], which the command line
//! maps to its exit code in one place (`cmd/exit.rs`), and hints that say what to do. I/O
//! errors name their path (the store's carry it; [`RuntimeError::Io`] requires it).

use std::path::PathBuf;

use axocoatl_store::ledger::record::TurnState;
use axocoatl_store::Error as StoreError;

use crate::config::Diagnostic;
use crate::provider::ProviderError;

/// What kind of failure an error is: the exit code a script sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Something went wrong (exit 1).
    Failure,
    /// The command line or an argument is wrong (exit 2).
    Usage,
    /// `stop`: the turn is not active (exit 6).
    NotActive,
    /// No such turn, session, agent or reference, or an ambiguous prefix (exit 7).
    NotFound,
    /// The session already has an active turn (exit 8).
    Busy,
    /// No repository, or one this build cannot read (exit 10).
    NoRepository,
    /// Refused by a rule (exit 11).
    Refused,
    /// A bug in axocoatl: an invariant broken, or one of its own types that does not
    /// serialize (exit 70, sysexits' EX_SOFTWARE).
    Internal,
}

/// Why an attachment could not be stored, found or read.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("{name}: {} is over the {} cap for {what}", size_text(*size), size_text(*cap))]
    TooLarge {
        name: String,
        size: u64,
        cap: u64,
        what: &'static str,
    },
    #[error("{name}: unsupported type{}", detected.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Unsupported {
        name: String,
        detected: Option<String>,
    },
    #[error("{name}: cannot extract the text of this PDF: {detail}")]
    Pdf { name: String, detail: String },
    #[error("{path} is not a regular file")]
    NotAFile { path: String },
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no attachment reference matches {prefix:?}")]
    NotFound { prefix: String },
    #[error("{prefix:?} matches several attachment references: {}", candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("attachment {reference} is not selected: it was {state}")]
    NotSelected {
        reference: String,
        state: &'static str,
    },
    #[error("attachment {reference} ({name}) is an image whose text OCR did not read")]
    NoText { reference: String, name: String },
    #[error("{name} ({media_type}) is binary; not writing it to a terminal")]
    Binary {
        reference: String,
        name: String,
        media_type: String,
    },
    #[error("{name}: {width} x {height} pixels{} is over the OCR limit of {max} pixels", page.as_ref().map(|p| format!(" ({p})")).unwrap_or_default())]
    TooManyPixels {
        name: String,
        page: Option<String>,
        width: u32,
        height: u32,
        max: u64,
    },
    #[error("{name}: OCR cannot read it: {detail}")]
    OcrFailed { name: String, detail: String },
    #[error("{name}: OCR took longer than its limit of {secs} s{at}")]
    OcrTimeout { name: String, secs: u64, at: String },
    #[error("{name}: OCR was stopped{at}")]
    OcrStopped { name: String, at: String },
    #[error("{name}: {reason}")]
    OcrUnavailable {
        name: String,
        reason: String,
        hint: String,
    },
    #[error("the text object {object} does not read: {detail}")]
    BadText { object: String, detail: String },
}

/// Why an edit of core memory was refused.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("no core memory block {label:?} (blocks: {})", known.join(", "))]
    UnknownBlock { label: String, known: Vec<String> },
    #[error("block {label:?} would hold {chars} characters, over its limit of {limit} characters; nothing was changed")]
    Limit {
        label: String,
        chars: usize,
        limit: u32,
    },
    #[error("{old:?} is not in block {label:?}; nothing was changed")]
    NotFound { label: String, old: String },
    #[error("{old:?} occurs {count} times in block {label:?}; give more of the text so that it occurs once")]
    Ambiguous {
        label: String,
        old: String,
        count: usize,
    },
    #[error("the text to replace is empty")]
    EmptyOld,
    /// Memory could not record part of a turn (the daily log, the semantic exchange): a
    /// warning of the turn, never its failure.
    #[error("{0}")]
    NotRecorded(String),
    #[error(transparent)]
    Store(#[from] axocoatl_store::Error),
}

/// A size for messages: exact bytes, and KiB/MiB when that is easier to read.
pub fn size_text(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    match n {
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= MIB => format!("{:.1} MiB ({n} bytes)", n as f64 / MIB as f64),
        n if n >= KIB && n % KIB == 0 => format!("{} KiB", n / KIB),
        n if n >= KIB => format!("{:.1} KiB ({n} bytes)", n as f64 / KIB as f64),
        n => format!("{n} bytes"),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the configuration has {} error{}", .0.len(), if .0.len() == 1 { "" } else { "s" })]
    Config(Vec<Diagnostic>),
    #[error("no configuration file at {path}")]
    NoConfig { path: String },
    #[error("unknown agent {id:?}")]
    UnknownAgent { id: String, known: Vec<String> },
    #[error("agent {id:?} cannot be sent to directly: {reason}")]
    AgentRole { id: String, reason: String },
    #[error("the configuration has no autonomous agent to send to")]
    NoAgent,
    /// `command` is what was refused (`send`, `rewind`): its hint depends on it.
    #[error("session {session:?} is busy{}", turn.as_ref().map(|t| format!(": turn {t} is active")).unwrap_or_default())]
    Busy {
        session: String,
        turn: Option<String>,
        command: &'static str,
    },
    #[error("no automation {id:?}")]
    UnknownAutomation { id: String, known: Vec<String> },
    #[error("automation {automation:?} is running{}", if running.is_empty() { String::new() } else { format!(": {running}") })]
    AutomationBusy { automation: String, running: String },
    #[error("no session {name:?}")]
    NoSession { name: String },
    #[error("session {name:?} already exists")]
    SessionExists { name: String },
    #[error("no turn matches {prefix:?}")]
    TurnNotFound { prefix: String },
    #[error("{prefix:?} matches several turns: {}", candidates.join(", "))]
    AmbiguousTurn {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("turn {turn} already {}", state.as_str())]
    NotActive { turn: String, state: TurnState },
    #[error("{message}")]
    Refused { message: String, hint: String },
    #[error("{message}")]
    Invalid { message: String, hint: String },
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error("{0} is not supported yet")]
    NotSupported(String),
    /// `serve`: another `serve` holds the repository's serve lock.
    #[error("axocoatl serve is already running on this repository{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    ServeRunning { pid: Option<u32> },
    /// `agents`: no `serve` holds the repository's serve lock.
    #[error("no axocoatl serve is running for {}", repo.display())]
    ServeNotRunning { repo: PathBuf },
    /// `serve`: the agent's actor failed to start five times in a row.
    #[error("agent {id:?} is down: {error}")]
    AgentDown { id: String, error: String },
    /// The connection to `serve` ended before its answer did.
    #[error("the connection to axocoatl serve ended early: {detail}")]
    ServeLost { detail: String },
    /// An error that happened in `serve` (or one of its actors), as it was reported there.
    #[error("{}", .0.message)]
    Remote(RemoteError),
    /// A bug: an invariant of axocoatl's own broken (what, in words).
    #[error("internal error: {0}")]
    Internal(String),
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An error of another process (`serve`, an actor), carried whole over the control socket
/// so that a command prints it and exits exactly as if it had happened in process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteError {
    pub kind: ErrorKind,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
    pub details: Vec<String>,
}

impl RemoteError {
    /// `e` as it is printed: message, causes, hints and details.
    pub fn of(e: &RuntimeError) -> RemoteError {
        if let RuntimeError::Remote(r) = e {
            return r.clone();
        }
        let mut causes = Vec::new();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            causes.push(s.to_string());
            source = s.source();
        }
        RemoteError {
            kind: e.kind(),
            message: e.to_string(),
            causes,
            hints: e.hints(),
            details: e.details(),
        }
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

impl RuntimeError {
    /// An I/O error on `path` while doing `op` ("read", "write", "create", …).
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RuntimeError::Io { op, path, source }
    }

    pub fn kind(&self) -> ErrorKind {
        use ErrorKind::*;
        match self {
            RuntimeError::Store(e) => store_kind(e),
            RuntimeError::UnknownAgent { .. }
            | RuntimeError::UnknownAutomation { .. }
            | RuntimeError::NoSession { .. }
            | RuntimeError::TurnNotFound { .. }
            | RuntimeError::AmbiguousTurn { .. } => NotFound,
            RuntimeError::AgentRole { .. }
            | RuntimeError::Refused { .. }
            | RuntimeError::SessionExists { .. } => Refused,
            RuntimeError::Busy { .. }
            | RuntimeError::AutomationBusy { .. }
            | RuntimeError::ServeRunning { .. } => Busy,
            RuntimeError::ServeNotRunning { .. } => NoRepository,
            RuntimeError::Remote(r) => r.kind,
            RuntimeError::Internal(_) => Internal,
            RuntimeError::NotActive { .. } => NotActive,
            RuntimeError::Invalid { .. } => Usage,
            RuntimeError::Attach(e) => match e {
                AttachError::TooLarge { .. }
                | AttachError::Unsupported { .. }
                | AttachError::Pdf { .. }
                | AttachError::TooManyPixels { .. }
                | AttachError::OcrFailed { .. }
                | AttachError::NotSelected { .. } => Refused,
                AttachError::NotFound { .. } | AttachError::Ambiguous { .. } => NotFound,
                AttachError::NotAFile { .. }
                | AttachError::Read { .. }
                | AttachError::NoText { .. }
                | AttachError::Binary { .. }
                | AttachError::OcrTimeout { .. }
                | AttachError::OcrStopped { .. }
                | AttachError::OcrUnavailable { .. }
                | AttachError::BadText { .. } => Failure,
            },
            RuntimeError::Memory(e) => match e {
                MemoryError::Store(s) => store_kind(s),
                MemoryError::UnknownBlock { .. }
                | MemoryError::NotFound { .. }
                | MemoryError::Ambiguous { .. } => NotFound,
                MemoryError::Limit { .. } => Refused,
                MemoryError::EmptyOld => Usage,
                MemoryError::NotRecorded(_) => Failure,
            },
            RuntimeError::Config(_)
            | RuntimeError::NoConfig { .. }
            | RuntimeError::NoAgent
            | RuntimeError::Provider(_)
            | RuntimeError::NotSupported(_)
            | RuntimeError::AgentDown { .. }
            | RuntimeError::ServeLost { .. }
            | RuntimeError::Io { .. } => Failure,
        }
    }

    /// What to do about it, one line each.
    pub fn hints(&self) -> Vec<String> {
        let one = |s: &str| vec![s.to_owned()];
        match self {
            RuntimeError::Store(e) => store_hint(e).map(one).unwrap_or_default(),
            RuntimeError::Config(_) => one("fix them and check with `axocoatl validate`"),
            RuntimeError::NoConfig { .. } => one("`axocoatl init` writes a starter axocoatl.yaml; --config FILE points at another one"),
            RuntimeError::UnknownAgent { known, .. } if known.is_empty() => {
                one("the configuration defines no agents")
            }
            RuntimeError::UnknownAgent { known, .. } => {
                vec![format!("known agents: {}", known.join(", "))]
            }
            RuntimeError::NoAgent => {
                one("add an agent with `role: autonomous` (the default) to axocoatl.yaml")
            }
            RuntimeError::Busy { turn, command, .. } => vec![match (turn, *command) {
                (Some(t), "send") => format!(
                    "wait for it, stop it with `axocoatl stop {t}`, or pass --wait to queue"
                ),
                (None, "send") => "pass --wait to queue behind the active turn".to_string(),
                (t, command) => format!(
                    "stop it (`axocoatl stop {}`) or wait for it, then {command}",
                    t.as_deref().unwrap_or("<turn>")
                ),
            }],
            RuntimeError::UnknownAutomation { known, .. } if known.is_empty() => {
                one("the configuration defines no automations")
            }
            RuntimeError::UnknownAutomation { known, .. } => {
                vec![format!("known automations: {}", known.join(", "))]
            }
            RuntimeError::AutomationBusy { .. } => one("pass --wait to run after it ends"),
            RuntimeError::NoSession { name } => vec![format!(
                "create it with `axocoatl sessions new {name}` (or `switch --create`)"
            )],
            RuntimeError::SessionExists { name } => {
                vec![format!("switch to it with `axocoatl sessions switch {name}`")]
            }
            RuntimeError::TurnNotFound { .. } => one("`axocoatl history --all` lists turns"),
            RuntimeError::AmbiguousTurn { .. } => one("give more characters of the id"),
            RuntimeError::NotActive { .. } => one("only an active turn can be stopped; refresh with `axocoatl history` before acting again"),
            RuntimeError::Refused { hint, .. } | RuntimeError::Invalid { hint, .. } => {
                vec![hint.clone()]
            }
            RuntimeError::Attach(e) => attach_hints(e),
            RuntimeError::Memory(e) => match e {
                MemoryError::Store(s) => store_hint(s).map(one).unwrap_or_default(),
                MemoryError::UnknownBlock { .. } => one("blocks are declared under memory.core.blocks of the agent in axocoatl.yaml"),
                MemoryError::NotFound { .. } => one("`axocoatl memory core show LABEL` prints the block"),
                MemoryError::Limit { .. } => one("shorten the text, or raise the block's limit under memory.core.blocks in axocoatl.yaml"),
                MemoryError::Ambiguous { .. }
                | MemoryError::EmptyOld
                | MemoryError::NotRecorded(_) => Vec::new(),
            },
            RuntimeError::ServeRunning { pid } => vec![format!(
                "stop it first ({}), or leave it running: commands reach its agents through run/serve.sock",
                pid.map(|p| format!("kill -TERM {p}"))
                    .unwrap_or_else(|| "Ctrl-C in its terminal".into())
            )],
            RuntimeError::ServeNotRunning { .. } => {
                one("start it with `axocoatl serve` (alias `dev`); it runs in the foreground")
            }
            RuntimeError::AgentDown { id, .. } => vec![format!(
                "fix its configuration (`axocoatl validate`), then `axocoatl agents restart {id}`"
            )],
            RuntimeError::ServeLost { .. } => one(
                "`axocoatl history` shows how the turn ended; the next command records it interrupted if serve died",
            ),
            RuntimeError::Remote(r) => r.hints.clone(),
            RuntimeError::Internal(_) => one(INTERNAL_HINT),
            RuntimeError::AgentRole { .. }
            | RuntimeError::Provider(_)
            | RuntimeError::NotSupported(_)
            | RuntimeError::Io { .. } => Vec::new(),
        }
    }

    /// Lines shown as they are before the message (the configuration's diagnostics).
    pub fn details(&self) -> Vec<String> {
        match self {
            RuntimeError::Config(diags) => diags.iter().map(|d| d.to_string()).collect(),
            RuntimeError::Remote(r) => r.details.clone(),
            _ => Vec::new(),
        }
    }
}

/// The hint of every error of kind [`ErrorKind::Internal`].
pub const INTERNAL_HINT: &str =
    "this is a bug in axocoatl: please report it with the command that failed and this message";

fn store_kind(e: &StoreError) -> ErrorKind {
    match e {
        StoreError::NotFound { .. }
        | StoreError::UnsupportedFormat { .. }
        | StoreError::BadFormatMarker { .. }
        | StoreError::MemoryVersion { .. } => ErrorKind::NoRepository,
        StoreError::InvalidName { .. } => ErrorKind::Usage,
        StoreError::ObjectMissing { .. } => ErrorKind::NotFound,
        _ => ErrorKind::Failure,
    }
}

fn store_hint(e: &StoreError) -> Option<&'static str> {
    Some(match e {
        StoreError::NotFound { .. } => "run `axocoatl init` to create one here, or pass -C DIR, --repo DIR or AXOCOATL_DIR",
        StoreError::UnsupportedFormat { .. } => "this repository was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)",
        StoreError::BadFormatMarker { .. } => "if `axocoatl init` was interrupted, remove the directory and run it again",
        StoreError::AlreadyExists { .. } => "nothing was changed",
        StoreError::Poisoned { .. } => "a failed sync is an I/O error of the disk (see `dmesg`): check it, then run `axocoatl fsck`",
        StoreError::Corrupt { .. } => "run `axocoatl fsck` to see every problem; `axocoatl fsck --repair` fixes a torn tail",
        StoreError::SemanticDamaged { .. } => "run `axocoatl fsck` to see every problem; `axocoatl fsck --repair` moves damaged records aside (to `damaged/` beside the file)",
        StoreError::BadMemoryFile { .. } => "run `axocoatl fsck` to see every problem; fix the file or remove it (its blocks start empty)",
        StoreError::MemoryVersion { .. } => "this memory file was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)",
        StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => "the disk is full: free space and run the command again; what was acknowledged before is kept (`axocoatl fsck` checks, `axocoatl fsck --repair` removes leftovers)",
        StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::FileTooLarge => "a file size limit was reached (`ulimit -f`): raise it and run the command again; what was acknowledged before is kept (`axocoatl fsck` checks)",
        _ => return None,
    })
}

fn attach_hints(e: &AttachError) -> Vec<String> {
    let stored = "nothing was stored".to_string();
    match e {
        AttachError::TooLarge { .. } => vec![stored],
        AttachError::Unsupported { .. } => {
            vec![
                stored,
                format!("supported: {}", crate::catalog::SUPPORTED_ATTACHMENTS),
            ]
        }
        AttachError::Pdf { .. } => {
            vec!["nothing was stored; convert the PDF to text and attach that".into()]
        }
        AttachError::NotAFile { .. } | AttachError::Read { .. } => vec![stored],
        AttachError::NotFound { .. } => {
            vec!["`axocoatl attach list --all` lists the references of a session".into()]
        }
        AttachError::Ambiguous { .. } => vec!["give more characters of the id".into()],
        AttachError::NotSelected { .. } => {
            vec!["only a selected reference can be removed; history keeps the others".into()]
        }
        AttachError::NoText { reference, .. } => vec![format!(
            "`axocoatl attach cat {reference}` writes the image itself"
        )],
        AttachError::Binary { reference, .. } => vec![format!(
            "redirect it: axocoatl attach cat {reference} > FILE"
        )],
        AttachError::TooManyPixels { .. } => vec![
            stored,
            "nothing was decoded: the size comes from the image's header; scale the image down, or raise attachments.ocr.max_pixels in axocoatl.yaml".into(),
        ],
        AttachError::OcrFailed { .. } => vec![
            stored,
            "attach a PNG or JPEG of it, or set attachments.ocr.enabled: false in axocoatl.yaml to attach images without reading their text".into(),
        ],
        AttachError::OcrTimeout { .. } => vec![
            stored,
            "raise attachments.ocr.timeout_secs in axocoatl.yaml, or set attachments.ocr.enabled: false to attach images without reading their text".into(),
        ],
        AttachError::OcrStopped { .. } => vec![stored],
        AttachError::OcrUnavailable { hint, .. } => vec![stored, hint.clone()],
        AttachError::BadText { .. } => {
            vec!["run `axocoatl fsck` to see every problem".into()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error(kind: std::io::ErrorKind) -> RuntimeError {
        RuntimeError::Store(StoreError::Io {
            op: "write",
            path: "x".into(),
            source: std::io::Error::from(kind),
        })
    }

    #[test]
    fn a_full_disk_and_a_file_size_limit_say_what_to_do() {
        let full = io_error(std::io::ErrorKind::StorageFull).hints();
        assert!(full[0].starts_with("the disk is full"), "{full:?}");
        let big = io_error(std::io::ErrorKind::FileTooLarge).hints();
        assert!(big[0].contains("ulimit -f"), "{big:?}");
        assert!(io_error(std::io::ErrorKind::PermissionDenied)
            .hints()
            .is_empty());
    }
}
