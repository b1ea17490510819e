//! Projections of the ledger: turns, sessions, and what a turn contains. The ledger is the
//! only authority; everything here is recomputed from it.

use std::collections::{BTreeMap, HashMap};

use axocoatl_store::ledger::record::{
    AttachmentPin, Bounded, InlineContext, Millis, TurnState, Usage,
};
use axocoatl_store::ledger::{Entry, Position, Record};
use axocoatl_store::Repo;
use serde::Serialize;

use crate::error::{Result, RuntimeError};

/// The state of a turn as the ledger (and the liveness of its owner) says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolEvent {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    pub arguments_object: Option<String>,
    pub output: Option<String>,
    pub output_object: Option<String>,
    pub is_error: bool,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallView {
    pub provider: String,
    pub model: String,
    pub reserved_tokens: u64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<String>,
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
    pub error: Option<String>,
    pub usage: Option<Usage>,
    pub tools: Vec<ToolEvent>,
    pub calls: Vec<CallView>,
    pub warnings: Vec<String>,
    pub retry_of: Option<String>,
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

#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Damage met while reading (never skipped silently: callers show these).
    pub problems: Vec<String>,
    /// Records of kinds this build does not know.
    pub unknown_kinds: u64,
    /// Attachment references and their state.
    pub attachments: crate::attach::Attachments,
    index: HashMap<String, usize>,
}

impl Projection {
    pub fn turn(&self, id: &str) -> Option<&TurnView> {
        self.index.get(id).map(|&i| &self.turns[i])
    }

    /// Resolves a turn id or a unique prefix of at least 4 characters.
    pub fn resolve(&self, prefix: &str) -> Result<&TurnView> {
        resolve_prefix(prefix, self.turns.iter().map(|t| t.turn.as_str()))
            .map(|id| &self.turns[self.index[id.as_str()]])
    }

    pub fn session_turns<'a>(
        &'a self,
        session: &'a str,
    ) -> impl Iterator<Item = &'a TurnView> + 'a {
        self.turns.iter().filter(move |t| t.session == session)
    }
}

/// Resolves `prefix` against ids: exact match, else a unique prefix of ≥ 4 characters.
pub fn resolve_prefix<'a>(prefix: &str, ids: impl Iterator<Item = &'a str>) -> Result<String> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.len() < 4 || !crate::ids::is_id_prefix(&prefix) {
        return Err(RuntimeError::Invalid {
            message: format!("{prefix:?} is not a turn id"),
            hint: "give a turn id or a unique prefix of at least 4 hex characters (see `axocoatl history`)".into(),
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

/// Builds the projection from every record. `alive` says whether a session's turn owner is
/// alive; a turn without a terminal record whose owner is gone shows as interrupted.
pub fn project(repo: &Repo, alive: &mut dyn FnMut(&str) -> bool) -> Result<Projection> {
    project_filtered(repo, alive, &|_, _| true)
}

/// Like [`project`], but decodes only the records `keep(kind, payload)` accepts: the raw
/// frames are walked without decoding the rest (see `search.rs`).
pub fn project_filtered(
    repo: &Repo,
    alive: &mut dyn FnMut(&str) -> bool,
    keep: &dyn Fn(u16, &[u8]) -> bool,
) -> Result<Projection> {
    let mut p = Projection::default();
    let ledger = repo.ledger();
    let numbers = ledger.segment_numbers()?;
    for &number in &numbers {
        let seg = match ledger.load_segment(number) {
            Ok(s) => s,
            Err(e) => {
                p.problems.push(e.to_string());
                continue;
            }
        };
        if let Err(reason) = seg.header() {
            p.problems.push(format!(
                "ledger corrupt: {} at byte 0: {reason}",
                seg.path.display()
            ));
            continue;
        }
        let mut entries = Vec::new();
        let damage = seg.frames_unverified(0, |fr| {
            if !keep(fr.kind, fr.payload) {
                return;
            }
            match seg.checked_entry(&fr) {
                Ok(entry) => entries.push(entry),
                Err(e) => p.problems.push(e.to_string()),
            }
        });
        for e in entries {
            apply(&mut p, e);
        }
        if let Some(axocoatl_store::ledger::Damage::Corrupt { offset, reason }) = damage {
            p.problems.push(format!(
                "ledger corrupt: {} at byte {offset}: {reason}",
                seg.path.display()
            ));
        }
    }
    settle(&mut p, alive);
    Ok(p)
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
            }
        }
    }
}

fn apply(p: &mut Projection, entry: Entry) {
    let Some(record) = entry.record else {
        p.unknown_kinds += 1;
        return;
    };
    p.attachments.apply(&record);
    if let Some(session) = record.session() {
        let s = p
            .sessions
            .entry(session.to_owned())
            .or_insert_with(|| SessionView {
                session: session.to_owned(),
                ..SessionView::default()
            });
        let at = record_time(&record);
        s.created_at = s.created_at.or(Some(at));
        s.last_activity = Some(s.last_activity.map_or(at, |l| l.max(at)));
    }
    match record {
        Record::TurnBegun(b) => {
            if let Some(s) = p.sessions.get_mut(&b.session) {
                s.turns += 1;
            }
            p.index.insert(b.turn.clone(), p.turns.len());
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
                error: None,
                usage: None,
                tools: Vec::new(),
                calls: Vec::new(),
                warnings: Vec::new(),
                retry_of: b.retry_of,
                stop_requested: false,
                superseded: false,
                started_at: b.at,
                ended_at: None,
                begin: entry.pos,
                begin_seq: entry.seq,
            });
        }
        Record::AgentOutput(o) => {
            if let Some(t) = turn_mut(p, &o.turn) {
                if !t.output.is_empty() && !o.text.is_empty() {
                    t.output.push('\n');
                }
                t.output.push_str(&o.text);
                t.outputs.push((o.agent, o.text));
            }
        }
        Record::TurnEnded(e) => {
            if let Some(t) = turn_mut(p, &e.turn) {
                // Exactly one terminal record per turn; a second one (never written by
                // axocoatl) would not change the first.
                if t.ended_at.is_none() {
                    t.state = e.state.into();
                    t.error = e.error;
                    t.usage = Some(e.usage);
                    t.ended_at = Some(e.at);
                }
            }
        }
        Record::ToolStarted(s) => {
            if let Some(t) = turn_mut(p, &s.turn) {
                t.tools.push(ToolEvent {
                    call_id: s.call_id,
                    name: s.name,
                    arguments: bounded_text(&s.arguments),
                    arguments_object: s.arguments.object,
                    output: None,
                    output_object: None,
                    is_error: false,
                    started_at: s.at,
                    ended_at: None,
                });
            }
        }
        Record::ToolResult(r) => {
            if let Some(t) = turn_mut(p, &r.turn) {
                if let Some(ev) = t.tools.iter_mut().rev().find(|e| e.call_id == r.call_id) {
                    ev.output = Some(bounded_text(&r.output));
                    ev.output_object = r.output.object;
                    ev.is_error = r.is_error;
                    ev.ended_at = Some(r.at);
                }
            }
        }
        Record::ModelCall(c) => {
            if let Some(t) = turn_mut(p, &c.turn) {
                t.calls.push(CallView {
                    provider: c.provider,
                    model: c.model,
                    reserved_tokens: c.reserved_tokens,
                    prompt_tokens: c.prompt_tokens,
                    completion_tokens: c.completion_tokens,
                    finish_reason: c.finish_reason,
                });
            }
        }
        Record::StopRequested(s) => {
            if let Some(t) = turn_mut(p, &s.turn) {
                t.stop_requested = true;
            }
        }
        Record::Warning(w) => {
            if let Some(t) = w.turn.as_deref().and_then(|id| p.index.get(id).copied()) {
                p.turns[t].warnings.push(w.message);
            }
        }
        Record::RewindBoundary(r) => {
            if let Some(&start) = p.index.get(&r.target) {
                for t in p.turns[start..].iter_mut() {
                    if t.session == r.session {
                        t.superseded = true;
                    }
                }
            }
        }
        Record::SessionCreated(_)
        | Record::AttachmentAdded(_)
        | Record::AttachmentRemoved(_)
        | Record::AttachmentConsumed(_)
        | Record::Note(_) => {}
    }
}

fn turn_mut<'a>(p: &'a mut Projection, id: &str) -> Option<&'a mut TurnView> {
    let i = *p.index.get(id)?;
    p.turns.get_mut(i)
}

fn record_time(r: &Record) -> Millis {
    match r {
        Record::SessionCreated(x) => x.at,
        Record::TurnBegun(x) => x.at,
        Record::TurnEnded(x) => x.at,
        Record::AgentOutput(x) => x.at,
        Record::ToolStarted(x) => x.at,
        Record::ToolResult(x) => x.at,
        Record::ModelCall(x) => x.at,
        Record::StopRequested(x) => x.at,
        Record::RewindBoundary(x) => x.at,
        Record::Warning(x) => x.at,
        Record::AttachmentAdded(x) => x.at,
        Record::AttachmentRemoved(x) => x.at,
        Record::AttachmentConsumed(x) => x.at,
        Record::Note(_) => 0,
    }
}

/// Projects the ledger with liveness taken from the session locks. A turn without a
/// terminal record whose owner is gone (one the lock notes did not name, e.g. after a power
/// loss) is recorded as interrupted here, so it is never shown as running again.
pub fn project_repo(repo: &Repo) -> Result<Projection> {
    let p = project(repo, &mut |session| {
        crate::session::owner_alive(repo, session).unwrap_or(false)
    })?;
    record_orphans(repo, p)
}

/// [`project_repo`] decoding only the records `keep` accepts.
pub fn project_repo_filtered(repo: &Repo, keep: &dyn Fn(u16, &[u8]) -> bool) -> Result<Projection> {
    let p = project_filtered(
        repo,
        &mut |session| crate::session::owner_alive(repo, session).unwrap_or(false),
        keep,
    )?;
    record_orphans(repo, p)
}

/// Projects already decoded entries (in ledger order), with `problems` met reading them;
/// liveness and orphans are settled as in [`project_repo`].
pub fn project_entries(
    repo: &Repo,
    entries: Vec<Entry>,
    problems: Vec<String>,
) -> Result<Projection> {
    let mut p = Projection {
        problems,
        ..Projection::default()
    };
    for e in entries {
        apply(&mut p, e);
    }
    settle(&mut p, &mut |session| {
        crate::session::owner_alive(repo, session).unwrap_or(false)
    });
    record_orphans(repo, p)
}

fn record_orphans(repo: &Repo, mut p: Projection) -> Result<Projection> {
    for t in p
        .turns
        .iter_mut()
        .filter(|t| t.state == ViewState::Interrupted && t.ended_at.is_none())
    {
        let path = axocoatl_store::layout::session_lock_path(repo.root(), &t.session);
        if let Some(_held) = axocoatl_store::lock::Lock::try_acquire(&path)? {
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
