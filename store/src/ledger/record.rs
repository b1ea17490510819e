//! The typed records of the canonical Session ledger.
//!
//! On disk a record is a `u16` kind tag followed by the postcard encoding of its body. A
//! body's shape never changes once released: a new shape gets a new kind. A reader that
//! meets a kind it does not know skips it with a warning instead of failing.

use serde::{Deserialize, Serialize};

mod cost;
pub use cost::{ModelCallCost, UsageCost, UsageDetail};

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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

    /// The usage of one call that reported `prompt` and `completion` tokens; one it did not
    /// report counts as 0 and makes the usage incomplete.
    pub fn of_call(prompt: Option<u64>, completion: Option<u64>) -> Usage {
        Usage {
            prompt_tokens: prompt.unwrap_or(0),
            completion_tokens: completion.unwrap_or(0),
            calls: 1,
            complete: prompt.is_some() && completion.is_some(),
        }
    }

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

/// Decoded by hand (`begun.rs`): records written before `schema` existed end after `at`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
    /// The JSON Schema the turn's reply must match (`send --schema`). The one field added
    /// to a released body: written last and only when set, so a turn without a schema has
    /// the very bytes it had before; a build that predates it ignores the bytes past `at`
    /// (postcard reads a body's fields and no further), and this build reads a body that
    /// ends at `at` as a turn without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<SchemaUse>,
}

/// The schema a turn's reply must match: an object of the store holding its JSON Schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaUse {
    /// The object (its hash is the schema's id).
    pub object: String,
    /// How many times a reply that breaks the schema is asked for again (`--schema-retries`).
    pub retries: u32,
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

/// The output of one Agent in a turn when it is too long for one record (a runaway reply):
/// its first bytes inline and the whole text in an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOutputBounded {
    pub turn: String,
    pub agent: String,
    pub text: Bounded,
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

/// The result of a tool call with its timing and, for commands, the exit code. New turns
/// record this instead of [`ToolResult`] (kind 6, whose shape is released); readers take
/// both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFinished {
    pub turn: String,
    pub agent: String,
    pub call_id: String,
    pub name: String,
    pub is_error: bool,
    /// The whole output; past the inline bound it lives in an object (the model saw its
    /// first 64 KiB and a note).
    pub output: Bounded,
    /// A command's exit code; `None` for other tools and for a command ended by a signal.
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
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

/// Where a turn came from when no person sent it: an automation's occurrence. Appended
/// right after the turn's `TurnBegun`, in the same durable append.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOrigin {
    pub turn: String,
    pub session: String,
    pub automation: String,
    /// The occurrence's scheduled time (UTC); for a manual run, when it was requested.
    pub occurrence: Millis,
    /// `schedule` or `manual`.
    pub trigger: String,
    /// What ran it: `tick`, `serve` or `manual`, and its process.
    pub runner: String,
    pub pid: u32,
    pub at: Millis,
}

/// What the person sending a turn changed for that turn alone (`send -m`, `--system`,
/// `-o`): appended right after its `TurnBegun`, in the same durable append; `retry` reuses
/// them. A build that does not know this kind shows the turn without them (and counts the
/// record as of an unknown kind), as the record format allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOverrides {
    pub turn: String,
    pub session: String,
    /// A model of the agent's provider, or `PROVIDER:MODEL`, as given.
    pub model: Option<String>,
    /// The system prompt used instead of the agent's.
    pub system: Option<String>,
    /// Sampling options as given (`temperature`, `0.2`), in order.
    pub options: Vec<(String, String)>,
    pub at: Millis,
}

/// The directory a turn's tools worked in (absolute), when it is not the directory holding
/// the repository: appended right after its `TurnBegun`, in the same durable append. The
/// home repository's turns work in the directory the command ran in (a project's, in a
/// configured `workspace:`), so the record says which.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnWorkdir {
    pub turn: String,
    pub session: String,
    pub dir: String,
    pub at: Millis,
}

/// The transcript of a 0.1.x checkpoint is being imported into a session that had no
/// turns: appended before the first imported turn. The turns follow with ids derived from
/// `digest`, so an import cut short is finished, never repeated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyImportBegun {
    pub session: String,
    pub agent: String,
    /// The checkpoint file, relative to `.axocoatl/`.
    pub source: String,
    /// BLAKE3 of the checkpoint file's bytes (hex).
    pub digest: String,
    /// `json` or `postcard-v0`.
    pub format: String,
    /// How many turns the transcript holds.
    pub turns: u32,
    pub at: Millis,
}

/// Every turn of the import of `digest` is in the ledger (appended after the last one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyImportEnded {
    pub session: String,
    pub agent: String,
    pub digest: String,
    pub turns: u32,
    pub at: Millis,
}

/// One subtask of a coordinator's plan, as recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlannedSubtask {
    pub id: String,
    /// A declared worker's agent id, or `adhoc`.
    pub worker: String,
    /// The role description of an ad-hoc worker.
    pub role: Option<String>,
    pub task: String,
    pub depends_on: Vec<String>,
}

/// The plan a coordinator's turn runs, and which decomposition method produced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanMade {
    pub turn: String,
    pub coordinator: String,
    /// `model` (the model's plan, valid at once), `model-repaired` (valid after the repair
    /// round) or `fallback` (one subtask per declared worker).
    pub method: String,
    pub subtasks: Vec<PlannedSubtask>,
    /// Why each rejected proposal was rejected (one entry per rejected proposal, its
    /// validation errors joined by `; `).
    pub rejected: Vec<String>,
    pub at: Millis,
}

/// A subtask of a coordinator's turn started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskStarted {
    pub turn: String,
    pub subtask: String,
    /// The declared worker, or `adhoc`.
    pub worker: String,
    pub at: Millis,
}

/// A subtask ended: its state, the worker's output (per-Agent output) and its usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskEnded {
    pub turn: String,
    /// The session and coordinator of the turn (so usage can count workers without
    /// decoding the turn's other records).
    pub session: String,
    pub coordinator: String,
    pub subtask: String,
    pub worker: String,
    pub state: TurnState,
    pub error: Option<String>,
    pub output: Bounded,
    pub usage: Usage,
    pub at: Millis,
}

/// One agent's activation in a turn of a multi-agent session (values in thousandths).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentActivation {
    pub agent: String,
    /// Its activation carried from the previous turn, after this turn's decay.
    pub decayed: i64,
    /// The relevance of this turn's request to it.
    pub relevance: i64,
    /// The request mentions it as `@agent`.
    pub mentioned: bool,
    /// Its activation for this turn.
    pub activation: i64,
    pub threshold: i64,
    pub answered: bool,
    /// Why it answered or not, for people.
    pub reason: String,
}

/// How the lattice activation rule chose who answers a turn of a multi-agent session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivationDecided {
    pub turn: String,
    pub session: String,
    pub agents: Vec<AgentActivation>,
    pub at: Millis,
}

/// The agents of a multi-agent session (`sessions new NAME --agents a,b,c`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAgents {
    pub session: String,
    pub agents: Vec<String>,
    pub at: Millis,
}

/// A person's answer to an approval request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// Run the call.
    Approved,
    /// Do not run it: the model reads the denial (and its reason) as the call's result.
    Denied,
    /// Run it, and every later call of the same tool under the same rule in this session.
    ApprovedAlways,
    /// No decision came within the agent's `approval_timeout`: the turn ended failed.
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::ApprovedAlways => "always",
            Decision::Expired => "expired",
        }
    }

    /// The decision [`Decision::as_str`] names.
    pub fn named(name: &str) -> Option<Decision> {
        [
            Decision::Approved,
            Decision::Denied,
            Decision::ApprovedAlways,
            Decision::Expired,
        ]
        .into_iter()
        .find(|d| d.as_str() == name)
    }

    /// Whether the call runs.
    pub fn runs(self) -> bool {
        matches!(self, Decision::Approved | Decision::ApprovedAlways)
    }
}

/// A tool call that the agent's `approvals:` policy holds for a person: the turn waits
/// (neither running nor ended) until every such call of it is decided, it is stopped, or
/// its request expires. Appended durably before anything waits on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub call_id: String,
    /// The tool's name as the model called it.
    pub tool: String,
    pub arguments: Bounded,
    /// The rule of `approvals:` that matched, as written.
    pub rule: String,
    /// The object holding what the turn continues from (its messages so far, its output
    /// and usage, the calls not yet run); the requests of one pause share it.
    pub state: String,
    /// When an undecided request ends the turn (`approval_timeout`); `None`: never.
    pub expires_at: Option<Millis>,
    pub pid: u32,
    pub at: Millis,
}

/// The decision on one approval request (the newest request of `call_id` in the turn).
/// Exactly one is appended per request: the check and the append happen under the
/// ledger's append lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecided {
    pub turn: String,
    pub session: String,
    pub call_id: String,
    pub decision: Decision,
    /// Why (a denial's reason reaches the model).
    pub reason: Option<String>,
    /// Who answered, and through what (`alice via approve`, `alice via terminal`, an MCP
    /// client, `approval_timeout`).
    pub by: String,
    pub pid: u32,
    pub at: Millis,
}

/// Free-form bytes, for tests and tools that exercise the ledger itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub text: String,
}

macro_rules! records {
    ($($kind:literal => $variant:ident [$($lead:ident),*],)*) => {
        /// A ledger record. The number is its kind tag on disk and never changes.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Record {
            $($variant($variant),)*
        }

        /// The kind tag of each record, as written on disk.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Kind {
            $($variant = $kind,)*
        }

        impl Kind {
            /// Every kind this build knows.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// The kind of a tag read from disk; `None` for a kind this build does not know.
            pub fn of(tag: u16) -> Option<Kind> {
                match tag {
                    $($kind => Some(Kind::$variant),)*
                    _ => None,
                }
            }

            pub fn tag(self) -> u16 {
                self as u16
            }

            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$variant => stringify!($variant),)*
                }
            }

            /// The string fields a body starts with, in order: what [`RecordView`] reads
            /// without decoding the body.
            fn leading(self) -> &'static [Lead] {
                match self {
                    $(Kind::$variant => &[$(Lead::$lead),*],)*
                }
            }
        }

        impl Record {
            pub fn kind(&self) -> u16 {
                self.kind_of().tag()
            }

            pub fn kind_of(&self) -> Kind {
                match self {
                    $(Record::$variant(_) => Kind::$variant,)*
                }
            }

            pub fn kind_name(&self) -> &'static str {
                self.kind_of().name()
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

/// A leading field of a record body that [`RecordView`] can read in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lead {
    /// `turn: String`
    Turn,
    /// `turn: Option<String>`
    OptTurn,
    /// `session: String`
    Session,
    /// `reference: String` (an attachment reference)
    Reference,
}

// The kind numbers, and for each kind the string fields its body starts with (the order of
// its struct's first fields: a test decodes every kind both ways and compares).
records! {
    1 => SessionCreated [Session],
    2 => TurnBegun [Turn, Session],
    3 => TurnEnded [Turn, Session],
    4 => AgentOutput [Turn],
    5 => ToolStarted [Turn],
    6 => ToolResult [Turn],
    7 => ModelCall [Turn],
    8 => StopRequested [Turn, Session],
    9 => RewindBoundary [Session],
    10 => Warning [OptTurn, Session],
    11 => AttachmentAdded [Reference, Session],
    12 => AttachmentRemoved [Reference, Session],
    13 => AttachmentConsumed [Reference, Session, Turn],
    14 => Note [],
    20 => AgentOutputBounded [Turn],
    30 => ToolFinished [Turn],
    40 => TurnOrigin [Turn, Session],
    41 => TurnOverrides [Turn, Session],
    45 => PlanMade [Turn],
    46 => SubtaskStarted [Turn],
    47 => SubtaskEnded [Turn, Session],
    48 => ActivationDecided [Turn, Session],
    49 => SessionAgents [Session],
    55 => LegacyImportBegun [Session],
    64 => TurnWorkdir [Turn, Session],
    56 => LegacyImportEnded [Session],
    70 => ModelCallCost [Turn],
    71 => UsageCost [Turn, Session],
    80 => ApprovalRequested [Turn, Session],
    81 => ApprovalDecided [Turn, Session],
}

/// A record as it lies in a segment: its kind tag and undecoded body. The turn, session and
/// reference a body starts with are read in place, so a walk can decide what to decode
/// without decoding it.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub tag: u16,
    pub body: &'a [u8],
}

impl<'a> RecordView<'a> {
    pub fn new(tag: u16, body: &'a [u8]) -> RecordView<'a> {
        RecordView { tag, body }
    }

    pub fn kind(&self) -> Option<Kind> {
        Kind::of(self.tag)
    }

    /// The turn the record belongs to, if its body names one.
    pub fn turn(&self) -> Option<&'a [u8]> {
        self.lead(Lead::Turn)
    }

    /// The session the record names, if its body names one.
    pub fn session(&self) -> Option<&'a [u8]> {
        self.lead(Lead::Session)
    }

    /// The attachment reference the record names, if any.
    pub fn reference(&self) -> Option<&'a [u8]> {
        self.lead(Lead::Reference)
    }

    /// Decodes the body. `Ok(None)` for a kind this build does not know.
    pub fn decode(&self) -> std::result::Result<Option<Record>, String> {
        Record::decode(self.tag, self.body).map_err(|e| e.to_string())
    }

    fn lead(&self, want: Lead) -> Option<&'a [u8]> {
        let mut rest = self.body;
        for &lead in self.kind()?.leading() {
            let value = match lead {
                Lead::OptTurn => match rest.split_first()? {
                    (0, tail) => {
                        rest = tail;
                        None
                    }
                    (1, tail) => {
                        let (s, tail) = postcard_str(tail)?;
                        rest = tail;
                        Some(s)
                    }
                    _ => return None,
                },
                _ => {
                    let (s, tail) = postcard_str(rest)?;
                    rest = tail;
                    Some(s)
                }
            };
            let field = if lead == Lead::OptTurn {
                Lead::Turn
            } else {
                lead
            };
            if field == want {
                return value;
            }
        }
        None
    }
}

/// Reads one postcard string (LEB128 length, then bytes) at the start of `b`: the string and
/// what follows it.
fn postcard_str(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut len = 0usize;
    for (i, &byte) in b.iter().enumerate().take(5) {
        len |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let rest = &b[i + 1..];
            return (rest.len() >= len).then(|| rest.split_at(len));
        }
    }
    None
}

impl Record {
    /// The turn this record belongs to, if any.
    pub fn turn(&self) -> Option<&str> {
        match self {
            Record::TurnBegun(r) => Some(&r.turn),
            Record::TurnEnded(r) => Some(&r.turn),
            Record::AgentOutput(r) => Some(&r.turn),
            Record::AgentOutputBounded(r) => Some(&r.turn),
            Record::ToolStarted(r) => Some(&r.turn),
            Record::ToolResult(r) => Some(&r.turn),
            Record::ToolFinished(r) => Some(&r.turn),
            Record::ModelCall(r) => Some(&r.turn),
            Record::ModelCallCost(r) => Some(&r.turn),
            Record::UsageCost(r) => Some(&r.turn),
            Record::StopRequested(r) => Some(&r.turn),
            Record::AttachmentConsumed(r) => Some(&r.turn),
            Record::TurnOrigin(r) => Some(&r.turn),
            Record::TurnOverrides(r) => Some(&r.turn),
            Record::TurnWorkdir(r) => Some(&r.turn),
            Record::PlanMade(r) => Some(&r.turn),
            Record::SubtaskStarted(r) => Some(&r.turn),
            Record::SubtaskEnded(r) => Some(&r.turn),
            Record::ActivationDecided(r) => Some(&r.turn),
            Record::ApprovalRequested(r) => Some(&r.turn),
            Record::ApprovalDecided(r) => Some(&r.turn),
            Record::Warning(r) => r.turn.as_deref(),
            Record::SessionAgents(_)
            | Record::SessionCreated(_)
            | Record::RewindBoundary(_)
            | Record::AttachmentAdded(_)
            | Record::AttachmentRemoved(_)
            | Record::LegacyImportBegun(_)
            | Record::LegacyImportEnded(_)
            | Record::Note(_) => None,
        }
    }

    /// When the record was written (`None` for a note, which has no time).
    pub fn at(&self) -> Option<Millis> {
        match self {
            Record::SessionCreated(x) => Some(x.at),
            Record::TurnBegun(x) => Some(x.at),
            Record::TurnEnded(x) => Some(x.at),
            Record::AgentOutput(x) => Some(x.at),
            Record::AgentOutputBounded(x) => Some(x.at),
            Record::ToolStarted(x) => Some(x.at),
            Record::ToolResult(x) => Some(x.at),
            Record::ToolFinished(x) => Some(x.at),
            Record::ModelCall(x) => Some(x.at),
            Record::ModelCallCost(x) => Some(x.at),
            Record::UsageCost(x) => Some(x.at),
            Record::StopRequested(x) => Some(x.at),
            Record::RewindBoundary(x) => Some(x.at),
            Record::Warning(x) => Some(x.at),
            Record::AttachmentAdded(x) => Some(x.at),
            Record::AttachmentRemoved(x) => Some(x.at),
            Record::AttachmentConsumed(x) => Some(x.at),
            Record::TurnOrigin(x) => Some(x.at),
            Record::LegacyImportBegun(x) => Some(x.at),
            Record::LegacyImportEnded(x) => Some(x.at),
            Record::TurnOverrides(x) => Some(x.at),
            Record::TurnWorkdir(x) => Some(x.at),
            Record::PlanMade(x) => Some(x.at),
            Record::SubtaskStarted(x) => Some(x.at),
            Record::SubtaskEnded(x) => Some(x.at),
            Record::ActivationDecided(x) => Some(x.at),
            Record::SessionAgents(x) => Some(x.at),
            Record::ApprovalRequested(x) => Some(x.at),
            Record::ApprovalDecided(x) => Some(x.at),
            Record::Note(_) => None,
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
            Record::TurnOrigin(r) => Some(&r.session),
            Record::LegacyImportBegun(r) => Some(&r.session),
            Record::LegacyImportEnded(r) => Some(&r.session),
            Record::TurnOverrides(r) => Some(&r.session),
            Record::TurnWorkdir(r) => Some(&r.session),
            Record::ActivationDecided(r) => Some(&r.session),
            Record::SessionAgents(r) => Some(&r.session),
            Record::SubtaskEnded(r) => Some(&r.session),
            Record::UsageCost(r) => Some(&r.session),
            Record::ApprovalRequested(r) => Some(&r.session),
            Record::ApprovalDecided(r) => Some(&r.session),
            Record::AgentOutput(_)
            | Record::PlanMade(_)
            | Record::SubtaskStarted(_)
            | Record::AgentOutputBounded(_)
            | Record::ToolStarted(_)
            | Record::ToolResult(_)
            | Record::ToolFinished(_)
            | Record::ModelCall(_)
            | Record::ModelCallCost(_)
            | Record::Note(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
