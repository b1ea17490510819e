//! The control socket's protocol: JSON Lines over a Unix stream. A client writes one
//! [`Request`] line; `serve` (or the actor it hands the connection to) answers with
//! [`Reply`] lines: a turn's events as they happen, then exactly one final line (an outcome,
//! an answer or an error). Every type here is owned, so it crosses a process boundary
//! whole; conversions to and from the runtime's types keep the output of a command the
//! same whether it ran in process or through `serve`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The version of these lines. serve names it in its lock's note, and a command reads it
/// before it connects, so a command and a serve of different builds (an upgrade while serve
/// runs) say so at once instead of failing on a line the other does not read. A change to
/// any type here gets a new number.
pub const PROTOCOL: u32 = 3;

use crate::engine::{Attachments, SendOptions, TurnEvent, TurnOutcome};
use crate::error::{ErrorKind, RemoteError, RuntimeError};
use crate::mcp::McpServerStatus;
use crate::rewind::RewindOutcome;

/// What a client asks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[expect(
    clippy::large_enum_variant,
    reason = "one request per connection, decoded once: boxing the turn would save nothing"
)]
pub enum Request {
    /// A turn (`send`, `retry`, `rewind --edit`), run by the actor of its session and agent.
    Send(WireSend),
    /// `stop TURN`.
    Stop { turn: String },
    /// `rewind TURN`.
    Rewind {
        turn: String,
        session: Option<String>,
    },
    /// `agents list|status`.
    Status { agent: Option<String> },
    /// `agents restart ID`.
    Restart { agent: String },
    /// `agents set ID KEY=VALUE`.
    Set {
        agent: String,
        key: String,
        value: String,
    },
    /// Liveness (serve → actor).
    Ping,
}

/// [`SendOptions`] without what cannot cross: attachments are the session's selection or
/// none, files to attach are absolute paths.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WireSend {
    pub session: String,
    pub agent: Option<String>,
    pub message: String,
    pub inline_context: Vec<(String, String)>,
    pub selection: bool,
    pub attach_files: Vec<PathBuf>,
    pub retry_of: Option<String>,
    pub wait: bool,
    /// `send -m/--system/-o` (absent from a client that predates them).
    #[serde(default)]
    pub overrides: crate::overrides::Overrides,
    /// `send --schema`, resolved by the client (its files are the client's).
    #[serde(default)]
    pub schema: Option<Box<crate::schema::Schema>>,
    #[serde(default)]
    pub schema_retries: Option<u32>,
    /// `approve`: continue this waiting turn instead of beginning one.
    #[serde(default)]
    pub resume: Option<String>,
    /// A person is asked at once about calls that wait (no `on_approval_request:`).
    #[serde(default)]
    pub ask_at_once: bool,
    /// Where the turn's tools work, when the client chose it (the home repository's turns
    /// work where the command ran); absent from a client that predates it.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
}

impl WireSend {
    /// `None` when `opts` cannot go over the socket (pinned attachments or an automation
    /// origin: only serve's own runners make those, in process).
    pub fn from_options(opts: &SendOptions) -> Option<WireSend> {
        let selection = match &opts.attachments {
            Attachments::Selection => true,
            Attachments::Pinned(p) if p.is_empty() => false,
            Attachments::Pinned(_) => return None,
        };
        if opts.origin.is_some() {
            return None;
        }
        Some(WireSend {
            session: opts.session.clone(),
            agent: opts.agent.clone(),
            message: opts.message.clone(),
            inline_context: opts.inline_context.clone(),
            selection,
            attach_files: opts
                .attach_files
                .iter()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            retry_of: opts.retry_of.clone(),
            wait: opts.wait,
            overrides: opts.overrides.clone(),
            schema: opts.schema.clone().map(Box::new),
            schema_retries: opts.schema_retries,
            resume: opts.resume.clone(),
            ask_at_once: opts.ask_at_once,
            workdir: opts.workdir.clone(),
        })
    }

    pub fn into_options(self) -> SendOptions {
        SendOptions {
            session: self.session,
            agent: self.agent,
            message: self.message,
            inline_context: self.inline_context,
            attachments: if self.selection {
                Attachments::Selection
            } else {
                Attachments::Pinned(Vec::new())
            },
            attach_files: self.attach_files,
            retry_of: self.retry_of,
            wait: self.wait,
            origin: None,
            overrides: self.overrides,
            schema: self.schema.map(|s| *s),
            schema_retries: self.schema_retries,
            resume: self.resume,
            ask_at_once: self.ask_at_once,
            workdir: self.workdir,
        }
    }
}

/// One line of an answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// An event of the running turn, as `send --json` prints it.
    Event {
        event: TurnEvent<'static>,
    },
    Outcome(TurnOutcome),
    Error(WireError),
    Stopped {
        turn: String,
        session: String,
    },
    Rewound(WireRewind),
    Status(StatusReport),
    /// A sentence for the user (`agents restart`, `agents set`).
    Done {
        message: String,
    },
    Pong(ActorInfo),
}

/// What an actor says about itself when pinged.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ActorInfo {
    pub pid: u32,
    /// Turns running now.
    pub active: usize,
    /// The newest turn it ran.
    pub last_turn: Option<String>,
    /// Milliseconds since its last turn ended (or it started).
    pub idle_ms: u64,
    /// The agent's MCP servers it keeps.
    #[serde(default)]
    pub mcp: Vec<McpServerStatus>,
}

/// `agents status`: the actors and the automation schedule.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StatusReport {
    pub pid: u32,
    pub actors: Vec<ActorStatus>,
    pub automations: Vec<ScheduleEntry>,
    /// Agents patched with `agents set` (in memory only): id, key, value.
    pub patches: Vec<(String, String, String)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ActorStatus {
    pub agent: String,
    pub session: String,
    /// `running` (a turn is active), `idle`, `restarting`, `down`.
    pub state: String,
    pub pid: Option<u32>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub last_turn: Option<String>,
    /// The agent's MCP servers the actor keeps (started at its first turn that needs them).
    #[serde(default)]
    pub mcp_servers: Vec<McpServerStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ScheduleEntry {
    pub automation: String,
    pub enabled: bool,
    pub schedule: String,
    /// RFC 3339 UTC.
    pub next: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WireRewind {
    pub session: String,
    pub agent: String,
    pub target: String,
    pub superseded: Vec<String>,
    pub prefill: String,
    pub checkpoint_written: bool,
}

impl From<RewindOutcome> for WireRewind {
    fn from(o: RewindOutcome) -> WireRewind {
        WireRewind {
            session: o.session,
            agent: o.agent,
            target: o.target,
            superseded: o.superseded,
            prefill: o.prefill,
            checkpoint_written: o.checkpoint_written,
        }
    }
}

impl From<WireRewind> for RewindOutcome {
    fn from(o: WireRewind) -> RewindOutcome {
        RewindOutcome {
            session: o.session,
            agent: o.agent,
            target: o.target,
            superseded: o.superseded,
            prefill: o.prefill,
            checkpoint_written: o.checkpoint_written,
        }
    }
}

/// A [`RuntimeError`] as it is reported, with its kind (so the exit code is the same) and
/// what the caller can do next as data (the command words it as it would in process).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WireError {
    pub kind: String,
    pub message: String,
    pub causes: Vec<String>,
    pub next: Vec<crate::error::Next>,
    pub details: Vec<String>,
}

const KINDS: &[(ErrorKind, &str)] = &[
    (ErrorKind::Failure, "failure"),
    (ErrorKind::Usage, "usage"),
    (ErrorKind::NotActive, "not_active"),
    (ErrorKind::NotFound, "not_found"),
    (ErrorKind::Busy, "busy"),
    (ErrorKind::NoRepository, "no_repository"),
    (ErrorKind::Refused, "refused"),
    (ErrorKind::Internal, "internal"),
    (ErrorKind::AwaitingApproval, "awaiting_approval"),
];

impl From<&RuntimeError> for WireError {
    fn from(e: &RuntimeError) -> WireError {
        let r = RemoteError::of(e);
        WireError {
            kind: KINDS
                .iter()
                .find(|(k, _)| *k == r.kind)
                .map(|(_, name)| (*name).to_owned())
                .unwrap_or_else(|| "failure".into()),
            message: r.message,
            causes: r.causes,
            next: r.next,
            details: r.details,
        }
    }
}

impl From<WireError> for RuntimeError {
    fn from(w: WireError) -> RuntimeError {
        RuntimeError::Remote(RemoteError {
            kind: KINDS
                .iter()
                .find(|(_, name)| *name == w.kind)
                .map(|(k, _)| *k)
                .unwrap_or(ErrorKind::Failure),
            message: w.message,
            causes: w.causes,
            next: w.next,
            details: w.details,
        })
    }
}

/// One line of JSON, newline included.
pub fn line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_else(|e| {
        // Every type here serializes; say so rather than panic if one ever does not.
        format!(
            "{{\"type\":\"error\",\"kind\":\"internal\",\"message\":\"internal error: cannot encode a reply: {e}\",\"causes\":[],\"next\":[],\"details\":[]}}"
        )
        .into_bytes()
    });
    bytes.push(b'\n');
    bytes
}
