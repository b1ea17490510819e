//! Projections of the ledger: turns, sessions, and what a turn contains. The ledger is the
//! only authority; everything here is recomputed from it.

use std::collections::{BTreeMap, HashMap};

use axocoatl_store::ledger::record::{
    AgentActivation, AttachmentPin, Bounded, InlineContext, Millis, ModelCallCost, PlanMade,
    PlannedSubtask, SubtaskEnded, SubtaskStarted, ToolFinished, ToolResult, ToolStarted, TurnBegun,
    TurnEnded, TurnOrigin, TurnOverrides, TurnState, Usage, UsageDetail,
};
use axocoatl_store::ledger::{Damaged, Entry, Kind, Position, Record, Walked};
use axocoatl_store::Repo;
use serde::Serialize;

use crate::error::{Result, RuntimeError};

/// The state of a turn as the ledger (and the liveness of its owner) says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ViewState {
    Running,
    Completed,
    Failed,
    Stopped,
    Interrupted,
}

impl ViewState {
    pub fn as_str(self) -> &'static str {
        match self {
            ViewState::Running => "running",
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
}

/// The plan of a coordinator's turn.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PlanView {
    /// `model`, `model-repaired` or `fallback`.
    pub method: String,
    pub subtasks: Vec<PlannedSubtask>,
    /// Why each rejected proposal was rejected.
    pub rejected: Vec<String>,
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
    pub usage: Option<Usage>,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
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
    pub usage: Option<Usage>,
    /// The cache tokens and cost of the turn's calls, its workers' included, as far as
    /// they were recorded (see [`UsageDetail::cost_complete`]).
    #[serde(skip)]
    pub detail: UsageDetail,
    pub tools: Vec<ToolEvent>,
    pub calls: Vec<CallView>,
    pub warnings: Vec<String>,
    pub retry_of: Option<String>,
    /// The automation occurrence that started the turn (none: a person sent it).
    pub origin: Option<OriginView>,
    /// The model, system prompt and sampling the sender set for this turn alone.
    pub overrides: Option<crate::overrides::Overrides>,
    /// A coordinator's plan.
    pub plan: Option<PlanView>,
    /// A coordinator's subtasks, in the order they started.
    pub subtasks: Vec<SubtaskView>,
    /// A multi-agent turn: each agent's activation and why it answered or not.
    pub activation: Vec<AgentActivation>,
    pub stop_requested: bool,
    /// A later rewind moved the conversation head before this turn.
    pub superseded: bool,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    #[serde(skip)]
    pub begin: Position,
    #[serde(skip)]
    pub begin_seq: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ContextView {
    pub label: String,
    pub len: u64,
    pub object: Option<String>,
}

impl TurnView {
    fn context_views(ctx: &[InlineContext]) -> Vec<ContextView> {
        ctx.iter()
            .map(|c| ContextView {
                label: c.label.clone(),
                len: c.text.len,
                object: c.text.object.clone(),
            })
            .collect()
    }
}

/// A session's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionView {
    pub session: String,
    pub turns: u64,
    pub created_at: Option<Millis>,
    pub last_activity: Option<Millis>,
    pub active_turn: Option<String>,
}

/// Everything projected from one scan.
#[derive(Debug, Default)]
pub struct Projection {
    /// In ledger order.
    pub turns: Vec<TurnView>,
    pub sessions: BTreeMap<String, SessionView>,
    /// Damage met while reading: records and segments that could not be read (never
    /// skipped silently: callers show these).
    pub problems: Vec<Damaged>,
    /// Records of kinds this build does not know.
    pub unknown_kinds: u64,
    /// Attachment references and their state.
    pub attachments: crate::relations::Attachments,
    /// The agents of each multi-agent session.
    pub session_agents: BTreeMap<String, Vec<String>>,
    /// Every record of each turn, when [`Want::records`] asked for them.
    pub records: TurnRecords,
    index: TurnIndex,
    want: Want,
}

/// The records a projection reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every record. A turn without a terminal record whose owner is gone (one the lock
    /// notes did not name, e.g. after a power loss) is recorded as interrupted, so it is
    /// never shown as running again.
    Repo,
    /// One session's turns, rewinds and attachments, without decoding the other sessions'
    /// records (`send` uses it, so a long ledger of other sessions costs a frame walk, not a
    /// full decode).
    Session(&'a str),
    /// The turns whose id starts with a prefix (and what marks them superseded): enough to
    /// resolve a turn id or prefix and to show that turn whole. Every turn sharing the
    /// prefix is kept, so an ambiguous prefix is still reported as such.
    Prefix(&'a str),
    /// The session that owns the attachment reference a prefix names: enough to resolve the
    /// reference and know its state. When the prefix resolves to no reference, or to
    /// several, every session's attachment records, so resolving it again reports that.
    Reference(&'a str),
    /// Every session's session and attachment records (no turns).
    Attachments,
}

impl<'a> Scope<'a> {
    /// The scope of a command given one session, or (`None`) every session.
    pub fn session_or_repo(session: Option<&'a str>) -> Scope<'a> {
        match session {
            Some(s) => Scope::Session(s),
            None => Scope::Repo,
        }
    }
}

/// What a projection keeps besides its turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// Summaries of the sessions (`sessions`, and each session's active turn).
    pub sessions: bool,
    /// Every record of each turn (`records`), from the same walk.
    pub records: bool,
}

impl Want {
    /// Turns and sessions: what most commands show.
    pub const VIEWS: Want = Want {
        sessions: true,
        records: false,
    };
    /// Turns alone, without the sessions' summaries: for a listing of turns, such as a
    /// search's.
    pub const TURNS: Want = Want {
        sessions: false,
        records: false,
    };
    /// Turns, sessions, and every record of each turn (what an export lists).
    pub const RECORDS: Want = Want {
        sessions: true,
        records: true,
    };
}

impl Default for Want {
    fn default() -> Want {
        Want::VIEWS
    }
}

impl Projection {
    pub fn turn(&self, id: &str) -> Option<&TurnView> {
        self.index.get(&self.turns, id).map(|i| &self.turns[i])
    }

    /// Resolves a turn id or a unique prefix of at least 4 characters.
    pub fn resolve(&self, prefix: &str) -> Result<&TurnView> {
        let id = resolve_prefix(prefix, self.turns.iter().map(|t| t.turn.as_str()))?;
        self.turn(&id)
            .ok_or(RuntimeError::TurnNotFound { prefix: id })
    }

    pub fn session_turns<'a>(
        &'a self,
        session: &'a str,
    ) -> impl Iterator<Item = &'a TurnView> + 'a {
        self.turns.iter().filter(move |t| t.session == session)
    }
}

/// Where each turn of a projection lies in its list, by id: keyed by a hash of the id (a
/// projection holds each id once, in its turn: a search of 100 turns copied and SipHashed
/// each), with the ids whose hash an earlier one took beside it.
#[derive(Debug, Default)]
struct TurnIndex {
    by_hash: HashMap<u64, usize, std::hash::BuildHasherDefault<Passed>>,
    /// Turns whose id's hash another id has, latest last.
    others: Vec<usize>,
}

/// A hasher for keys that are already hashes.
#[derive(Default)]
struct Passed(u64);

impl std::hash::Hasher for Passed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl TurnIndex {
    fn with_capacity(n: usize) -> TurnIndex {
        TurnIndex {
            by_hash: HashMap::with_capacity_and_hasher(n, Default::default()),
            others: Vec::new(),
        }
    }

    /// A fast hash of an id (not for untrusted keys: the ids are the repository's own).
    fn hash(id: &str) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64 ^ id.len() as u64;
        for chunk in id.as_bytes().chunks(8) {
            let mut a = [0u8; 8];
            a[..chunk.len()].copy_from_slice(chunk);
            h = (h ^ u64::from_le_bytes(a)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
        }
        h
    }

    /// Notes that turn `id` lies at `i` of `turns` (a later note of an id replaces it).
    fn insert(&mut self, turns: &[TurnView], id: &str, i: usize) {
        match self.by_hash.entry(TurnIndex::hash(id)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if turns.get(*e.get()).is_some_and(|t| t.turn == id) {
                    e.insert(i);
                } else {
                    self.others.push(i);
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(i);
            }
        }
    }

    fn get(&self, turns: &[TurnView], id: &str) -> Option<usize> {
        let first = self.by_hash.get(&TurnIndex::hash(id))?;
        if turns.get(*first).is_some_and(|t| t.turn == id) {
            return Some(*first);
        }
        self.others
            .iter()
            .rev()
            .copied()
            .find(|&i| turns.get(i).is_some_and(|t| t.turn == id))
    }
}

/// Resolves `prefix` against ids: exact match, else a unique prefix of ≥ 4 characters.
pub fn resolve_prefix<'a>(prefix: &str, ids: impl Iterator<Item = &'a str>) -> Result<String> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.len() < 4 || !crate::ids::is_id_prefix(&prefix) {
        return Err(RuntimeError::Invalid {
            message: format!("{prefix:?} is not a turn id"),
            hint: crate::error::Next::GiveTurnId,
        });
    }
    let mut found: Vec<&str> = Vec::new();
    for id in ids {
        if id == prefix {
            return Ok(id.to_owned());
        }
        if id.starts_with(&prefix) && !found.contains(&id) {
            found.push(id);
        }
    }
    match found.len() {
        0 => Err(RuntimeError::TurnNotFound { prefix }),
        1 => Ok(found[0].to_owned()),
        _ => Err(RuntimeError::AmbiguousTurn {
            prefix,
            candidates: found.iter().map(|s| s.to_string()).collect(),
        }),
    }
}

fn bounded_text(b: &Bounded) -> String {
    b.inline.clone()
}

/// Every record of each turn, by turn id, in ledger order (what a JSON export lists).
pub type TurnRecords = HashMap<String, Vec<Entry>>;

impl Projection {
    /// Projects the records of `scope`, keeping what `want` asks for. Liveness comes from
    /// the session locks; orphans found on the way are recorded as interrupted.
    pub fn of(repo: &Repo, scope: Scope<'_>, want: Want) -> Result<Projection> {
        let ledger = repo.ledger();
        let walked = match scope {
            Scope::Repo => ledger.read_all()?,
            Scope::Session(session) => ledger.read_session(session)?,
            Scope::Prefix(prefix) => {
                ledger.read_turn_prefix(&prefix.trim().to_ascii_lowercase())?
            }
            Scope::Attachments => ledger.read_attachments()?,
            Scope::Reference(prefix) => {
                let all = Projection::of(repo, Scope::Attachments, want)?;
                return match all.attachments.resolve(prefix) {
                    Ok(r) => {
                        let session = r.session.clone();
                        Projection::of(repo, Scope::Session(&session), want)
                    }
                    Err(_) => Ok(all),
                };
            }
        };
        Projection::from_walked(repo, walked, want)
    }

    /// Projects records a caller read by one walk of the ledger (in ledger order), such as
    /// a search's matches. Liveness comes from the session locks; orphans found on the way
    /// are recorded as interrupted.
    pub fn from_walked(repo: &Repo, walked: Walked, want: Want) -> Result<Projection> {
        let p = Projection::from_entries(
            walked,
            &mut |session| crate::session::owner_alive(repo, session).unwrap_or(false),
            want,
        );
        record_orphans(repo, p)
    }

    /// Builds a projection from records in ledger order. `alive` says whether a session's
    /// turn owner is alive; a turn without a terminal record whose owner is gone shows as
    /// interrupted.
    pub fn from_entries(
        walked: Walked,
        alive: &mut dyn FnMut(&str) -> bool,
        want: Want,
    ) -> Projection {
        // Sized once: a turn view is large, and growing the vector moved each one several
        // times (a tenth of an indexed search of 100 turns).
        let turns = walked
            .entries
            .iter()
            .filter(|e| e.kind == Kind::TurnBegun as u16)
            .count();
        let mut p = Projection {
            problems: walked.damaged,
            turns: Vec::with_capacity(turns),
            index: TurnIndex::with_capacity(turns),
            want,
            ..Projection::default()
        };
        for e in walked.entries {
            if want.records {
                keep_record(&mut p.records, &e);
            }
            apply(&mut p, e);
        }
        settle(&mut p, alive);
        p
    }
}

/// Adds `e` to the records of its turn, if it has one.
fn keep_record(records: &mut TurnRecords, e: &Entry) {
    if let Some(turn) = e.record.as_ref().and_then(Record::turn) {
        records.entry(turn.to_owned()).or_default().push(e.clone());
    }
}

/// Every session's summary, from the ledger's indexes (no record is decoded but those of
/// the newest segment), and what could not be read.
#[derive(Debug, Default)]
pub struct SessionList {
    pub sessions: BTreeMap<String, SessionView>,
    pub problems: Vec<Damaged>,
}

/// Lists every session: turns begun, first and last activity, the active turn (an open
/// turn whose owner is alive).
pub fn sessions(repo: &Repo) -> Result<SessionList> {
    let summaries = repo.ledger().session_summaries()?;
    let mut sessions: BTreeMap<String, SessionView> = summaries
        .sessions
        .into_iter()
        .map(|(name, s)| {
            let view = SessionView {
                session: s.session,
                turns: s.turns,
                created_at: s.created_at,
                last_activity: s.last_activity,
                active_turn: None,
            };
            (name, view)
        })
        .collect();
    let mut liveness: HashMap<String, bool> = HashMap::new();
    for open in &summaries.open {
        let live = *liveness
            .entry(open.session.clone())
            .or_insert_with(|| crate::session::owner_alive(repo, &open.session).unwrap_or(false));
        if let (true, Some(s)) = (live, sessions.get_mut(&open.session)) {
            s.active_turn = Some(open.turn.clone());
        }
    }
    Ok(SessionList {
        sessions,
        problems: summaries.damaged,
    })
}

/// Token usage of one session, agent and day (UTC): a turn's own agent counts it on the day
/// it began, less what its workers used; a coordinator's worker counts its subtasks on the
/// day each ended (the ledger's indexes attribute it, see `axocoatl_store::index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub session: String,
    pub agent: String,
    /// `YYYY-MM-DD`
    pub day: String,
    pub turns: u64,
    /// Incomplete when a call reported no usage, or a turn has not ended.
    pub usage: Usage,
    /// The cache tokens and cost of the calls `usage` counts, as far as recorded.
    pub detail: UsageDetail,
}

/// Usage rows of one session (or every session), from the ledger's indexes.
#[derive(Debug, Default)]
pub struct UsageList {
    pub rows: Vec<UsageRow>,
    pub problems: Vec<Damaged>,
}

/// Sums the provider-reported usage of every turn in scope, per session, agent and day.
pub fn usage(repo: &Repo, session: Option<&str>) -> Result<UsageList> {
    let summaries = repo.ledger().summaries(session)?;
    type Sums = (u64, Usage, UsageDetail);
    let zero = || (0, Usage::ZERO, UsageDetail::default());
    let mut rows: BTreeMap<(String, String, i64), Sums> = BTreeMap::new();
    for (s, u) in summaries.usage {
        let row = rows.entry((s, u.agent, u.day)).or_insert_with(zero);
        row.0 += u.turns;
        row.1.add(&u.usage);
        row.2.add(&u.detail);
    }
    // A turn without a terminal record has no reported usage.
    for open in summaries.open {
        let key = (
            open.session,
            open.agent,
            axocoatl_store::index::day_of(open.started_at),
        );
        rows.entry(key).or_insert_with(zero).1.complete = false;
    }
    Ok(UsageList {
        rows: rows
            .into_iter()
            .map(|((session, agent, day), (turns, usage, detail))| UsageRow {
                session,
                agent,
                day: crate::clock::date(day * 86_400_000),
                turns,
                usage,
                detail,
            })
            .collect(),
        problems: summaries.damaged,
    })
}

/// Marks running turns whose owner is gone as interrupted, and notes active turns.
fn settle(p: &mut Projection, alive: &mut dyn FnMut(&str) -> bool) {
    let mut liveness: HashMap<String, bool> = HashMap::new();
    for t in p.turns.iter_mut() {
        if t.state == ViewState::Running {
            let live = *liveness
                .entry(t.session.clone())
                .or_insert_with(|| alive(&t.session));
            if live {
                if let Some(s) = p.sessions.get_mut(&t.session) {
                    s.active_turn = Some(t.turn.clone());
                }
            } else {
                t.state = ViewState::Interrupted;
                t.settle_subtasks();
            }
        }
    }
}

/// Applies one record to the projection.
fn apply(p: &mut Projection, entry: Entry) {
    let Some(record) = entry.record else {
        p.unknown_kinds += 1;
        return;
    };
    p.attachments.apply(&record);
    if p.want.sessions {
        note_session(p, &record);
    }
    match record {
        Record::TurnBegun(b) => begin_turn(p, b, entry.pos, entry.seq),
        Record::RewindBoundary(r) => supersede(p, &r.session, &r.target),
        Record::SessionAgents(s) => {
            p.session_agents.insert(s.session, s.agents);
        }
        record => {
            let turn = record.turn().and_then(|id| p.index.get(&p.turns, id));
            if let Some(i) = turn {
                p.turns[i].apply(record);
            }
        }
    }
}

impl TurnView {
    /// Applies a record of this turn (one that names it).
    fn apply(&mut self, record: Record) {
        match record {
            Record::AgentOutput(o) => self.add_output(o.agent, o.text),
            Record::AgentOutputBounded(o) => self.add_bounded_output(o.agent, o.text),
            Record::TurnOrigin(o) => self.origin = Some(origin_of(o)),
            Record::TurnOverrides(o) => self.overrides = Some(overrides_of(o)),
            Record::TurnEnded(e) => self.end(e),
            Record::ToolStarted(s) => self.tool_started(s),
            Record::ToolFinished(r) => self.tool_finished(r),
            Record::ToolResult(r) => self.tool_result(r),
            Record::ModelCall(c) => self.calls.push(CallView::from(ModelCallCost::from(c))),
            Record::ModelCallCost(c) => self.calls.push(CallView::from(c)),
            Record::UsageCost(c) => self.detail.add(&c.detail),
            Record::StopRequested(_) => self.stop_requested = true,
            Record::Warning(w) => self.warnings.push(w.message),
            Record::PlanMade(m) => self.plan = Some(plan_of(m)),
            Record::SubtaskStarted(s) => self.subtasks.push(subtask_started(s)),
            Record::SubtaskEnded(e) => end_subtask(self, e),
            Record::ActivationDecided(a) => self.activation = a.agents,
            // Begun, rewinds and session agents are the projection's (see `apply`); the
            // rest change no turn view.
            Record::TurnBegun(_)
            | Record::RewindBoundary(_)
            | Record::SessionAgents(_)
            | Record::SessionCreated(_)
            | Record::AttachmentAdded(_)
            | Record::AttachmentRemoved(_)
            | Record::AttachmentConsumed(_)
            | Record::LegacyImportBegun(_)
            | Record::LegacyImportEnded(_)
            | Record::Note(_) => {}
        }
    }
}

fn plan_of(m: PlanMade) -> PlanView {
    PlanView {
        method: m.method,
        subtasks: m.subtasks,
        rejected: m.rejected,
    }
}

fn origin_of(o: TurnOrigin) -> OriginView {
    OriginView {
        automation: o.automation,
        occurrence: o.occurrence,
        trigger: o.trigger,
        runner: o.runner,
        pid: o.pid,
    }
}

fn overrides_of(o: TurnOverrides) -> crate::overrides::Overrides {
    crate::overrides::Overrides {
        model: o.model,
        system: o.system,
        options: o.options,
    }
}

fn subtask_started(s: SubtaskStarted) -> SubtaskView {
    SubtaskView {
        subtask: s.subtask,
        worker: s.worker,
        state: ViewState::Running,
        error: None,
        output: String::new(),
        output_object: None,
        usage: None,
        started_at: s.at,
        ended_at: None,
    }
}

/// Ends the latest subtask of turn `t` that `e` names.
fn end_subtask(t: &mut TurnView, e: SubtaskEnded) {
    if let Some(s) = t.subtasks.iter_mut().rev().find(|s| s.subtask == e.subtask) {
        s.state = e.state.into();
        s.error = e.error;
        s.output = bounded_text(&e.output);
        s.output_object = e.output.object;
        s.usage = Some(e.usage);
        s.ended_at = Some(e.at);
    }
}

/// Creates or updates the summary of the session a record names.
fn note_session(p: &mut Projection, record: &Record) {
    let Some(session) = record.session() else {
        return;
    };
    // Looked up before it is inserted: a record of a session already seen (most) costs no
    // copy of its name.
    if !p.sessions.contains_key(session) {
        p.sessions.insert(
            session.to_owned(),
            SessionView {
                session: session.to_owned(),
                ..SessionView::default()
            },
        );
    }
    let Some(s) = p.sessions.get_mut(session) else {
        return;
    };
    let at = record.at().unwrap_or(0);
    s.created_at = s.created_at.or(Some(at));
    s.last_activity = Some(s.last_activity.map_or(at, |l| l.max(at)));
}

fn begin_turn(p: &mut Projection, b: TurnBegun, begin: Position, begin_seq: u64) {
    if let Some(s) = p.sessions.get_mut(&b.session) {
        s.turns += 1;
    }
    let at = p.turns.len();
    p.turns.push(TurnView {
        context: TurnView::context_views(&b.inline_context),
        turn: b.turn,
        session: b.session,
        agent: b.agent,
        mode: b.mode,
        state: ViewState::Running,
        request: b.request,
        inline_context: b.inline_context,
        attachments: b.attachments,
        outputs: Vec::new(),
        output: String::new(),
        output_object: None,
        output_len: None,
        error: None,
        usage: None,
        detail: UsageDetail::default(),
        tools: Vec::new(),
        calls: Vec::new(),
        warnings: Vec::new(),
        retry_of: b.retry_of,
        origin: None,
        overrides: None,
        plan: None,
        subtasks: Vec::new(),
        activation: Vec::new(),
        stop_requested: false,
        superseded: false,
        started_at: b.at,
        ended_at: None,
        begin,
        begin_seq,
    });
    p.index.insert(&p.turns, &p.turns[at].turn, at);
}

/// A rewind to `target` supersedes it and every later turn of its session.
fn supersede(p: &mut Projection, session: &str, target: &str) {
    if let Some(start) = p.index.get(&p.turns, target) {
        for t in p.turns[start..].iter_mut() {
            if t.session == session {
                t.superseded = true;
            }
        }
    }
}

impl TurnView {
    fn add_output(&mut self, agent: String, text: String) {
        if !self.output.is_empty() && !text.is_empty() {
            self.output.push('\n');
        }
        self.output.push_str(&text);
        self.outputs.push((agent, text));
    }

    fn end(&mut self, e: TurnEnded) {
        // Exactly one terminal record per turn; a second one (never written by axocoatl)
        // would not change the first.
        if self.ended_at.is_none() {
            self.state = e.state.into();
            self.error = e.error;
            self.usage = Some(e.usage);
            self.ended_at = Some(e.at);
            self.settle_subtasks();
        }
    }

    /// A subtask without its end when the turn ended did not survive it.
    fn settle_subtasks(&mut self) {
        for s in self.subtasks.iter_mut() {
            if s.state == ViewState::Running {
                s.state = ViewState::Interrupted;
            }
        }
    }

    /// Output whose first bytes only are in the record; `output_object` names the whole
    /// text.
    fn add_bounded_output(&mut self, agent: String, text: Bounded) {
        self.add_output(agent, text.inline);
        self.output_object = text.object;
        self.output_len = Some(text.len);
    }

    fn tool_started(&mut self, s: ToolStarted) {
        let round = self.calls.len();
        self.tools.push(ToolEvent::started(s, round));
    }

    fn tool_finished(&mut self, r: ToolFinished) {
        if let Some(ev) = self.tools.iter_mut().rev().find(|e| e.call_id == r.call_id) {
            ev.output = Some(bounded_text(&r.output));
            ev.output_object = r.output.object;
            ev.is_error = r.is_error;
            ev.exit_code = r.exit_code;
            ev.duration_ms = Some(r.duration_ms);
            ev.ended_at = Some(r.at);
        }
    }

    fn tool_result(&mut self, r: ToolResult) {
        if let Some(ev) = self.tools.iter_mut().rev().find(|e| e.call_id == r.call_id) {
            ev.output = Some(bounded_text(&r.output));
            ev.output_object = r.output.object;
            ev.is_error = r.is_error;
            ev.ended_at = Some(r.at);
        }
    }
}

impl ToolEvent {
    fn started(s: ToolStarted, round: usize) -> ToolEvent {
        ToolEvent {
            call_id: s.call_id,
            name: s.name,
            arguments: bounded_text(&s.arguments),
            arguments_object: s.arguments.object,
            output: None,
            output_object: None,
            is_error: false,
            exit_code: None,
            duration_ms: None,
            started_at: s.at,
            ended_at: None,
            round,
        }
    }
}

impl From<ModelCallCost> for CallView {
    fn from(c: ModelCallCost) -> CallView {
        CallView {
            provider: c.provider,
            model: c.model,
            reserved_tokens: c.reserved_tokens,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            cache_write_tokens: c.cache_write_tokens,
            cache_read_tokens: c.cache_read_tokens,
            cost_usd: c.cost_nanos.map(|n| n as f64 / crate::cost::NANOS_PER_USD),
            cost_nanos: c.cost_nanos,
            finish_reason: c.finish_reason,
        }
    }
}

fn record_orphans(repo: &Repo, mut p: Projection) -> Result<Projection> {
    for t in p
        .turns
        .iter_mut()
        .filter(|t| t.state == ViewState::Interrupted && t.ended_at.is_none())
    {
        if let Ok(_held) = crate::session::try_lock(repo, &t.session)? {
            let note = crate::session::ActiveNote {
                turn: t.turn.clone(),
                session: t.session.clone(),
                begin: t.begin,
                pid: 0,
            };
            if crate::session::interrupt_if_open(repo, &note)? {
                t.ended_at = Some(crate::clock::now());
                t.error = Some("the process running this turn ended before the turn did".into());
            }
        }
    }
    Ok(p)
}
