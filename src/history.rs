//! Projections of the ledger: turns, sessions, and what a turn contains. The ledger is the
//! only authority; everything here is recomputed from it.
//!
//! A [`Projection`] is the session projection: it keeps each session's summary, its
//! attachments, its agents and its rewinds, and collects the turns that [`crate::fold`]
//! folds from their records (this module never reads what a turn's records mean).

use std::collections::{BTreeMap, HashMap};

use axocoatl_store::ledger::record::{Millis, Usage, UsageDetail};
use axocoatl_store::ledger::{Damaged, Entry, Record, Walked};
use axocoatl_store::Repo;
use serde::Serialize;

use crate::error::{Result, RuntimeError};
use crate::fold::Rewind;
pub use crate::fold::{
    ApprovalView, CallView, ContextView, OriginView, PlanView, Share, SubtaskView, ToolEvent,
    TurnView, ViewState,
};

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

/// Every record of each turn, by turn id, in ledger order (what a JSON export lists).
pub type TurnRecords = HashMap<String, Vec<Entry>>;

impl Projection {
    /// Projects the records of `scope`, keeping what `want` asks for. Liveness comes from
    /// the session locks; orphans found on the way are recorded as interrupted.
    pub fn of(repo: &Repo, scope: Scope<'_>, want: Want) -> Result<Projection> {
        let reader = repo.reader();
        let walked = match scope {
            Scope::Repo => repo.ledger().read_all()?,
            Scope::Session(session) => reader.read_session(session)?,
            Scope::Prefix(prefix) => {
                reader.read_turn_prefix(&prefix.trim().to_ascii_lowercase())?
            }
            Scope::Attachments => reader.read_attachments()?,
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
            .filter(|e| crate::fold::begins_turn(e.kind))
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
    let summaries = repo.reader().session_summaries()?;
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
    let summaries = repo.reader().summaries(session)?;
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
        if t.state == ViewState::Running && t.waits() {
            // Held for a person, whether or not a process runs it.
            t.state = ViewState::Waiting;
            if let Some(s) = p.sessions.get_mut(&t.session) {
                s.active_turn = Some(t.turn.clone());
            }
            continue;
        }
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

/// Applies one record to the projection: a session's own records here, a turn's to its
/// turn (folded by [`crate::fold`]).
fn apply(p: &mut Projection, entry: Entry) {
    let Some(record) = entry.record else {
        p.unknown_kinds += 1;
        return;
    };
    p.attachments.apply(&record);
    if p.want.sessions {
        note_session(p, &record);
    }
    if let Some(i) = record.turn().and_then(|id| p.index.get(&p.turns, id)) {
        p.turns[i].fold(entry.seq, record);
        return;
    }
    let record = match TurnView::start(record, entry.pos, entry.seq) {
        Ok(turn) => return begin_turn(p, turn),
        Err(record) => record,
    };
    match record {
        Record::RewindBoundary(r) => supersede(p, &r.session, &r.target),
        Record::SessionAgents(s) => {
            p.session_agents.insert(s.session, s.agents);
        }
        // The rest is attachments (above), or of a turn this projection did not see begin.
        _ => {}
    }
}

fn begin_turn(p: &mut Projection, turn: TurnView) {
    if let Some(s) = p.sessions.get_mut(&turn.session) {
        s.turns += 1;
    }
    let at = p.turns.len();
    p.turns.push(turn);
    p.index.insert(&p.turns, &p.turns[at].turn, at);
}

/// A rewind of `session` to `target` supersedes the turns [`Rewind::supersedes`] names.
fn supersede(p: &mut Projection, session: &str, target: &str) {
    let Some(start) = p.index.get(&p.turns, target) else {
        return;
    };
    let rewind = Rewind {
        session,
        target_seq: p.turns[start].begin_seq,
    };
    for t in p.turns[start..].iter_mut() {
        if rewind.supersedes(&t.session, t.begin_seq) {
            t.superseded = true;
        }
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

fn record_orphans(repo: &Repo, mut p: Projection) -> Result<Projection> {
    let now = crate::clock::now();
    for t in p.turns.iter_mut().filter(|t| {
        (t.state == ViewState::Interrupted && t.ended_at.is_none())
            || (t.state == ViewState::Waiting && t.approval_expired(now))
    }) {
        if let Ok(_held) = crate::session::try_lock(repo, &t.session)? {
            let note = crate::session::ActiveNote {
                turn: t.turn.clone(),
                session: t.session.clone(),
                begin: t.begin,
                pid: 0,
                waiting: None,
            };
            match crate::session::settle(repo, &note)? {
                crate::session::Settled::Interrupted => {
                    t.ended_at = Some(now);
                    t.error =
                        Some("the process running this turn ended before the turn did".into());
                }
                crate::session::Settled::Expired => {
                    t.state = ViewState::Failed;
                    t.ended_at = Some(now);
                    t.error = Some("no decision came within its approval_timeout".into());
                }
                crate::session::Settled::Closed | crate::session::Settled::Waiting { .. } => {}
            }
        }
    }
    Ok(p)
}
