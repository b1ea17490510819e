//! The typed records of the canonical Session ledger.
//!
//! On disk a record is a `u16` kind tag followed by the postcard encoding of its body. A
//! body's shape never changes once released: a new shape gets a new kind. A reader that
//! meets a kind it does not know skips it with a warning instead of failing.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, UTC.
pub type Millis = i64;

/// How a turn ended. Exactly one terminal record ends every begun turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurnState {
    Completed,
    Failed,
    Stopped,
    Interrupted,
}

impl TurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Completed => "completed",
            TurnState::Failed => "failed",
            TurnState::Stopped => "stopped",
            TurnState::Interrupted => "interrupted",
        }
    }
}

/// Token usage. `complete` is sticky: once any call reported no usage, a subtotal that
/// includes it stays incomplete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub calls: u32,
    pub complete: bool,
}

impl Usage {
    /// The usage of no calls at all: complete, zero.
    pub const ZERO: Usage = Usage {
        prompt_tokens: 0,
        completion_tokens: 0,
        calls: 0,
        complete: true,
    };

    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.calls += other.calls;
        self.complete &= other.complete;
    }

    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Text that is kept inline up to a bound; past it the whole payload lives in an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounded {
    /// The first bytes (all of them when `object` is `None`), cut at a char boundary.
    pub inline: String,
    /// The object holding the whole payload when it exceeded the bound.
    pub object: Option<String>,
    /// The length of the whole payload in bytes.
    pub len: u64,
}

/// Inline context sent with a request, such as text piped on stdin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineContext {
    pub label: String,
    pub text: Bounded,
}

/// A reference to an attachment, as pinned by the turn that used it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentPin {
    pub reference: String,
    pub name: String,
    pub media_type: String,
    pub size: u64,
    pub object: String,
    pub text_object: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttachmentScope {
    Once,
    Session,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnBegun {
    pub turn: String,
    pub session: String,
    pub agent: String,
    /// `single` for an autonomous Agent; other modes arrive with coordinators.
    pub mode: String,
    pub request: String,
    pub inline_context: Vec<InlineContext>,
    pub attachments: Vec<AttachmentPin>,
    pub retry_of: Option<String>,
    pub pid: u32,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnded {
    pub turn: String,
    pub session: String,
    pub state: TurnState,
    pub error: Option<String>,
    pub usage: Usage,
    pub at: Millis,
}

/// The output of one Agent in a turn (partial for a stopped or failed turn).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOutput {
    pub turn: String,
    pub agent: String,
    pub text: String,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStarted {
    pub turn: String,
    pub agent: String,
    pub call_id: String,
    pub name: String,
    pub arguments: Bounded,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub turn: String,
    pub agent: String,
    pub call_id: String,
    pub name: String,
    pub is_error: bool,
    pub output: Bounded,
    pub at: Millis,
}

/// One provider call of a turn: what was reserved beforehand and what the provider reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    pub turn: String,
    pub agent: String,
    pub provider: String,
    pub model: String,
    pub reserved_tokens: u64,
    /// `None` when the provider did not report usage for this call.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequested {
    pub turn: String,
    pub session: String,
    pub pid: u32,
    pub at: Millis,
}

/// Supersedes `target` and every later turn of the session: the conversation head moves to
/// just before `target`. Nothing is erased.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewindBoundary {
    pub session: String,
    pub agent: String,
    pub target: String,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub turn: Option<String>,
    pub session: String,
    pub code: String,
    pub message: String,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCreated {
    pub session: String,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentAdded {
    pub reference: String,
    pub session: String,
    pub name: String,
    pub media_type: String,
    pub size: u64,
    pub scope: AttachmentScope,
    pub object: String,
    pub text_object: Option<String>,
    pub text_truncated: bool,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentRemoved {
    pub reference: String,
    pub session: String,
    pub at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentConsumed {
    pub reference: String,
    pub session: String,
    pub turn: String,
    pub at: Millis,
}

/// Free-form bytes, for tests and tools that exercise the ledger itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub text: String,
}

macro_rules! records {
    ($($kind:literal => $variant:ident,)*) => {
        /// A ledger record. The number is its kind tag on disk and never changes.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Record {
            $($variant($variant),)*
        }

        impl Record {
            pub fn kind(&self) -> u16 {
                match self {
                    $(Record::$variant(_) => $kind,)*
                }
            }

            pub fn kind_name(&self) -> &'static str {
                match self {
                    $(Record::$variant(_) => stringify!($variant),)*
                }
            }

            /// The record's body as JSON (for exports and tools).
            pub fn body_json(&self) -> serde_json::Value {
                match self {
                    $(Record::$variant(body) => serde_json::to_value(body).unwrap_or_default(),)*
                }
            }

            pub(crate) fn encode_body(&self, out: Vec<u8>) -> postcard::Result<Vec<u8>> {
                match self {
                    $(Record::$variant(body) => postcard::to_extend(body, out),)*
                }
            }

            /// `Ok(None)` for a kind this build does not know.
            pub(crate) fn decode(kind: u16, body: &[u8]) -> postcard::Result<Option<Record>> {
                match kind {
                    $($kind => postcard::from_bytes(body).map(|b| Some(Record::$variant(b))),)*
                    _ => Ok(None),
                }
            }
        }

        $(impl From<$variant> for Record {
            fn from(body: $variant) -> Record {
                Record::$variant(body)
            }
        })*
    };
}

records! {
    1 => SessionCreated,
    2 => TurnBegun,
    3 => TurnEnded,
    4 => AgentOutput,
    5 => ToolStarted,
    6 => ToolResult,
    7 => ModelCall,
    8 => StopRequested,
    9 => RewindBoundary,
    10 => Warning,
    11 => AttachmentAdded,
    12 => AttachmentRemoved,
    13 => AttachmentConsumed,
    14 => Note,
}

impl Record {
    /// The turn this record belongs to, if any.
    pub fn turn(&self) -> Option<&str> {
        match self {
            Record::TurnBegun(r) => Some(&r.turn),
            Record::TurnEnded(r) => Some(&r.turn),
            Record::AgentOutput(r) => Some(&r.turn),
            Record::ToolStarted(r) => Some(&r.turn),
            Record::ToolResult(r) => Some(&r.turn),
            Record::ModelCall(r) => Some(&r.turn),
            Record::StopRequested(r) => Some(&r.turn),
            Record::AttachmentConsumed(r) => Some(&r.turn),
            Record::Warning(r) => r.turn.as_deref(),
            Record::SessionCreated(_)
            | Record::RewindBoundary(_)
            | Record::AttachmentAdded(_)
            | Record::AttachmentRemoved(_)
            | Record::Note(_) => None,
        }
    }

    /// The session this record belongs to, if it names one.
    pub fn session(&self) -> Option<&str> {
        match self {
            Record::SessionCreated(r) => Some(&r.session),
            Record::TurnBegun(r) => Some(&r.session),
            Record::TurnEnded(r) => Some(&r.session),
            Record::StopRequested(r) => Some(&r.session),
            Record::RewindBoundary(r) => Some(&r.session),
            Record::Warning(r) => Some(&r.session),
            Record::AttachmentAdded(r) => Some(&r.session),
            Record::AttachmentRemoved(r) => Some(&r.session),
            Record::AttachmentConsumed(r) => Some(&r.session),
            Record::AgentOutput(_)
            | Record::ToolStarted(_)
            | Record::ToolResult(_)
            | Record::ModelCall(_)
            | Record::Note(_) => None,
        }
    }
}
