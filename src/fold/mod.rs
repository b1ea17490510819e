//! One fold of ledger records into turns: what a turn is, as its records say.
//!
//! A turn begins with its `TurnBegun` ([`TurnView::start`]) and takes its other records one
//! at a time, in ledger order ([`TurnView::fold`]); nothing is read twice and nothing is
//! kept but the turn. Every reader of turns goes through it: `history`, `show` and the JSON
//! export collect the turns it folds, the SQLite export writes its `turns`, `subtasks`,
//! `model_calls` and `tool_calls` rows from them, and traces build their spans from them. So
//! a turn's state, answer and usage are decided once, in [`records`], whose one match names
//! every kind of record: a new kind does not compile until the fold decides what it means
//! for a turn.
//!
//! Usage is carried two ways: the whole turn's (`usage`, `detail`: every call, its workers'
//! included, as its terminal record reports it) and the share of each agent (`own` for the
//! turn's own agent, each subtask's for its worker) as the ledger's indexes attribute it for
//! `axocoatl usage` (the same function takes a turn's workers' usage out of its own).

mod records;

use std::collections::HashMap;

use axocoatl_store::ledger::record::{
    AgentActivation, AttachmentPin, InlineContext, Millis, PlannedSubtask, TurnState, Usage,
    UsageDetail,
};
use axocoatl_store::ledger::{Entry, Kind, Position};
use serde::Serialize;

/// The state of a turn as the ledger (and the liveness of its owner) says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ViewState {
    Running,
    /// Begun, not ended, and a tool call of it waits for a person's approval: it holds its
    /// session whether or not a process runs it.
    Waiting,
    Completed,
    Failed,
    Stopped,
    Interrupted,
}

impl ViewState {
    pub fn as_str(self) -> &'static str {
        match self {
            ViewState::Running => "running",
            ViewState::Waiting => "waiting",
            ViewState::Completed => "completed",
            ViewState::Failed => "failed",
            ViewState::Stopped => "stopped",
            ViewState::Interrupted => "interrupted",
        }
    }
}

impl From<TurnState> for ViewState {
    fn from(s: TurnState) -> Self {
        match s {
            TurnState::Completed => ViewState::Completed,
            TurnState::Failed => ViewState::Failed,
            TurnState::Stopped => ViewState::Stopped,
            TurnState::Interrupted => ViewState::Interrupted,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ToolEvent {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub arguments_object: Option<String>,
    pub output: Option<String>,
    pub output_object: Option<String>,
    pub is_error: bool,
    /// A command's exit code (recorded since tool results carry it).
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    /// The model call (1 for the first) whose answer asked for this tool.
    #[serde(skip)]
    pub round: usize,
    /// The agent that called it.
    #[serde(skip)]
    #[schemars(skip)]
    pub agent: String,
    /// The sequence number of its start record.
    #[serde(skip)]
    #[schemars(skip)]
    pub seq: u64,
    /// The subtask (of [`TurnView::subtasks`]) running its agent when it started.
    #[serde(skip)]
    #[schemars(skip)]
    pub subtask: Option<usize>,
    /// The latest model call of its agent before it started (that call's sequence number).
    #[serde(skip)]
    #[schemars(skip)]
    pub call_seq: Option<u64>,
}

/// A tool call the agent's `approvals:` held for a person, and its decision.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ApprovalView {
    pub call_id: String,
    pub tool: String,
    /// The arguments as JSON text (their first bytes when `arguments_object` is set).
    pub arguments: String,
    pub arguments_object: Option<String>,
    /// The rule of `approvals:` that matched, as written.
    pub rule: String,
    pub requested_at: Millis,
    /// When it ends the turn if still undecided (`approval_timeout`).
    pub expires_at: Option<Millis>,
    /// `approved`, `denied`, `always` or `expired`; none while it waits (in an ended
    /// turn: no decision came before the turn ended).
    pub decision: Option<String>,
    pub reason: Option<String>,
    /// Who answered, and how (`alice via approve`).
    pub by: Option<String>,
    pub decided_at: Option<Millis>,
    /// The call started after the request (it ran, or was answered with its denial).
    #[serde(skip)]
    pub started: bool,
    /// The object holding what the turn goes on from.
    #[serde(skip)]
    pub state: String,
    /// The agent whose call it holds.
    #[serde(skip)]
    #[schemars(skip)]
    pub agent: String,
    /// The sequence number of its request record.
    #[serde(skip)]
    #[schemars(skip)]
    pub seq: u64,
}

impl ApprovalView {
    /// The call as messages about a waiting turn name it: `tool (call_id)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.tool, self.call_id)
    }
}

/// The automation occurrence that started a turn.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OriginView {
    pub automation: String,
    pub occurrence: Millis,
    /// `schedule` or `manual`.
    pub trigger: String,
    /// `tick`, `serve` or `manual`.
    pub runner: String,
    pub pid: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CallView {
    pub provider: String,
    pub model: String,
    pub reserved_tokens: u64,
    /// Every input token, those written to or read from a prompt cache included.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (null: not reported or not
    /// recorded).
    pub cache_write_tokens: Option<u64>,
    /// Prompt tokens read from the provider's prompt cache (null: not reported or not
    /// recorded).
    pub cache_read_tokens: Option<u64>,
    /// What the call cost in US dollars, by the price in force when it was made (null: no
    /// price, or no usage reported).
    pub cost_usd: Option<f64>,
    #[serde(skip)]
    #[schemars(skip)]
    pub cost_nanos: Option<u64>,
    pub finish_reason: Option<String>,
    /// The agent that made it.
    #[serde(skip)]
    #[schemars(skip)]
    pub agent: String,
    /// The sequence number of its record.
    #[serde(skip)]
    #[schemars(skip)]
    pub seq: u64,
    /// When it ended (when it was recorded).
    #[serde(skip)]
    #[schemars(skip)]
    pub at: Millis,
    /// When it started: when its agent's previous step ended (the turn's begin, its
    /// subtask's start, its previous call or tool result), which is when the engine sends a
    /// call. The ledger records only its end.
    #[serde(skip)]
    #[schemars(skip)]
    pub started_at: Millis,
    /// The subtask (of [`TurnView::subtasks`]) running its agent when it was made.
    #[serde(skip)]
    #[schemars(skip)]
    pub subtask: Option<usize>,
}

/// The plan of a coordinator's turn.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PlanView {
    /// `model`, `model-repaired` or `fallback`.
    pub method: String,
    pub subtasks: Vec<PlannedSubtask>,
    /// Why each rejected proposal was rejected.
    pub rejected: Vec<String>,
    /// The sequence number of its record.
    #[serde(skip)]
    #[schemars(skip)]
    pub seq: u64,
}

/// One subtask of a coordinator's turn as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SubtaskView {
    pub subtask: String,
    pub worker: String,
    /// `running` (no end recorded), `completed`, `failed`, `stopped`; `interrupted` when the
    /// turn ended without the subtask's end.
    pub state: ViewState,
    pub error: Option<String>,
    /// The worker's output (its first 64 KiB when `output_object` is set).
    pub output: String,
    pub output_object: Option<String>,
    /// The worker's usage in it: what `axocoatl usage` counts for the worker.
    pub usage: Option<Usage>,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    /// The agent id its records carry: the worker, or `adhoc:<subtask>` for an ad-hoc one.
    #[serde(skip)]
    #[schemars(skip)]
    pub agent: String,
    /// The sequence number of the record that opened it (its start; its end when no start
    /// was recorded).
    #[serde(skip)]
    #[schemars(skip)]
    pub seq: u64,
    /// The cache tokens and cost of the worker's calls, when its end recorded them.
    #[serde(skip)]
    #[schemars(skip)]
    pub detail: Option<UsageDetail>,
}

/// What one agent of a turn used, as the ledger's indexes attribute it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Share {
    /// `None` until the terminal record.
    pub usage: Option<Usage>,
    /// The cache tokens and cost of its calls (`None`: no record of them, as for a turn
    /// recorded before they were).
    pub detail: Option<UsageDetail>,
}

/// One turn, whole.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnView {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub mode: String,
    pub state: ViewState,
    pub request: String,
    #[serde(skip)]
    pub inline_context: Vec<InlineContext>,
    pub context: Vec<ContextView>,
    pub attachments: Vec<AttachmentPin>,
    /// Output per agent, in the order agents produced it.
    pub outputs: Vec<(String, String)>,
    pub output: String,
    /// When the output was too long for one record: the object holding it whole (`output`
    /// and `outputs` hold its first bytes).
    pub output_object: Option<String>,
    /// The whole output's length in bytes, when it is in `output_object`.
    pub output_len: Option<u64>,
    pub error: Option<String>,
    /// Every call of the turn, its workers' included, as its terminal record reports it.
    pub usage: Option<Usage>,
    /// The cache tokens and cost of the turn's calls, its workers' included, as far as
    /// they were recorded (see [`UsageDetail::cost_complete`]).
    #[serde(skip)]
    pub detail: UsageDetail,
    /// The share of the turn's own agent: `usage` less what its workers' subtasks used.
    #[serde(skip)]
    pub own: Share,
    pub tools: Vec<ToolEvent>,
    pub calls: Vec<CallView>,
    pub warnings: Vec<String>,
    pub retry_of: Option<String>,
    /// The automation occurrence that started the turn (none: a person sent it).
    pub origin: Option<OriginView>,
    /// The model, system prompt and sampling the sender set for this turn alone.
    pub overrides: Option<crate::overrides::Overrides>,
    /// The directory the turn's tools worked in, when it was not the repository's own
    /// (recorded since turns say it).
    pub workdir: Option<String>,
    /// A coordinator's plan.
    pub plan: Option<PlanView>,
    /// A coordinator's subtasks, in the order they started.
    pub subtasks: Vec<SubtaskView>,
    /// A multi-agent turn: each agent's activation and why it answered or not.
    pub activation: Vec<AgentActivation>,
    /// The JSON Schema its reply had to match (`send --schema`): the object holding it
    /// (the schema's id) and the retries allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<axocoatl_store::ledger::record::SchemaUse>,
    /// With a schema, once the turn completed: its reply as a JSON value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// The tool calls held for approval, in the order they were requested.
    pub approvals: Vec<ApprovalView>,
    pub stop_requested: bool,
    /// A later rewind moved the conversation head before this turn.
    pub superseded: bool,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    #[serde(skip)]
    pub begin: Position,
    #[serde(skip)]
    pub begin_seq: u64,
    /// The sequence number of its terminal record (`None`: none folded yet; `ended_at` may
    /// still be set, by the process that just recorded the turn interrupted).
    #[serde(skip)]
    pub end_seq: Option<u64>,
    /// What the fold keeps between records.
    #[serde(skip)]
    steps: Steps,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ContextView {
    pub label: String,
    pub len: u64,
    pub object: Option<String>,
}

/// What the fold of one turn keeps between records: when each agent's latest step ended
/// (when its next call started), each agent's latest call, and what the turn handed its
/// workers while it was open.
#[derive(Clone, Debug, Default, PartialEq)]
struct Steps {
    last_at: HashMap<String, Millis>,
    /// The latest time of any record folded.
    latest: Millis,
    last_call: HashMap<String, u64>,
    handed: Option<Usage>,
}

impl TurnView {
    /// Begun, not ended, and a held call has not started: the turn waits for approval.
    pub fn waits(&self) -> bool {
        self.ended_at.is_none() && self.approvals.iter().any(|a| !a.started)
    }

    /// An undecided held call's `approval_timeout` has passed.
    pub fn approval_expired(&self, now: Millis) -> bool {
        self.pending_approvals()
            .any(|a| a.decision.is_none() && a.expires_at.is_some_and(|e| e <= now))
    }

    /// The held calls that have not started, in order.
    pub fn pending_approvals(&self) -> impl Iterator<Item = &ApprovalView> {
        self.approvals.iter().filter(|a| !a.started)
    }

    /// The pending calls no one has decided yet, as a waiting turn's messages name them
    /// ([`ApprovalView::label`]).
    pub fn undecided_calls(&self) -> Vec<String> {
        self.pending_approvals()
            .filter(|a| a.decision.is_none())
            .map(ApprovalView::label)
            .collect()
    }

    /// How the turn ended, once its terminal record is folded.
    pub fn terminal(&self) -> Option<TurnState> {
        self.end_seq?;
        match self.state {
            ViewState::Completed => Some(TurnState::Completed),
            ViewState::Failed => Some(TurnState::Failed),
            ViewState::Stopped => Some(TurnState::Stopped),
            ViewState::Interrupted => Some(TurnState::Interrupted),
            ViewState::Running | ViewState::Waiting => None,
        }
    }

    /// What its model calls reported, each counted once: what a terminal record written
    /// now reports (a call without its token counts makes the usage incomplete).
    pub fn calls_usage(&self) -> Usage {
        let mut usage = Usage::ZERO;
        for c in &self.calls {
            usage.add(&Usage::of_call(c.prompt_tokens, c.completion_tokens));
        }
        usage
    }
}

/// Whether a record of kind `tag` begins a turn (without decoding it).
pub fn begins_turn(tag: u16) -> bool {
    tag == Kind::TurnBegun.tag()
}

/// The turns begun in `entries` (in ledger order) that `keep` keeps, each folded from its
/// records among them, in the order they began.
pub fn fold_turns(
    entries: impl IntoIterator<Item = Entry>,
    keep: impl Fn(&str) -> bool,
) -> Vec<TurnView> {
    let mut turns: Vec<TurnView> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for e in entries {
        let Some(record) = e.record else { continue };
        let Some(id) = record.turn() else { continue };
        if !keep(id) {
            continue;
        }
        if let Some(&i) = at.get(id) {
            turns[i].fold(e.seq, record);
            continue;
        }
        if let Ok(t) = TurnView::start(record, e.pos, e.seq) {
            at.insert(t.turn.clone(), turns.len());
            turns.push(t);
        }
    }
    turns
}

/// A rewind of a session to one of its turns: it supersedes that turn and every later turn
/// of the session (the conversation's head moved before them; their records stay).
#[derive(Clone, Copy, Debug)]
pub struct Rewind<'a> {
    pub session: &'a str,
    /// The sequence number of the target turn's begin record.
    pub target_seq: u64,
}

impl Rewind<'_> {
    /// Whether the rewind supersedes the turn of `session` begun at `begin_seq`.
    pub fn supersedes(&self, session: &str, begin_seq: u64) -> bool {
        session == self.session && begin_seq >= self.target_seq
    }
}
