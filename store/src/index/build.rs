//! Building the index of one segment.
//!
//! Records are added in ledger order without knowing what came before the segment; what
//! depends on it (a record of a turn begun in an earlier segment, the end of such a turn)
//! waits until [`Builder::finish`] is given the turns still open when the segment began.
//! So segments can be read and decoded in parallel and finished one after another cheaply.
//!
//! Usage is attributed here, once, for every reader of the summaries. A turn's terminal
//! record carries the usage of every call the turn made, its workers' included; each
//! `SubtaskEnded` carries one worker's share. So:
//!
//! - a `SubtaskEnded` adds its usage to the worker's row (session, worker, the day the
//!   subtask ended), counting the turn for that worker the first time the worker ends a
//!   subtask of it, and notes the usage on the coordinator's open turn ([`OpenTurn::handed`],
//!   carried from segment to segment with the turn);
//! - the turn's end adds its usage less everything the turn handed to the row of the turn
//!   itself (session, its agent, the day it began).
//!
//! The invariant: summed over every segment, a turn's rows add up to exactly the usage its
//! terminal record reports (or, while it runs, to what its ended subtasks report), and no
//! row ever goes below zero, whichever segments or days the records fall in. A terminal
//! record reporting less than the turn handed (counted whole, nothing taken out), or a
//! subtask ending outside an open turn (counted for no agent), breaks it: such a record is
//! kept in [`super::Meta::usage_damaged`] and reported with the usage, never corrected
//! silently. An
//! interrupted turn's record, written by the process that found the turn's owner gone,
//! reports no usage at all (no calls, incomplete): its workers keep what they were handed.
//!
//! A `UsageCost` record (a terminal record's cache tokens and cost) names the row it counts
//! in, the agent and time its terminal record's usage is counted at, so it is added there
//! as it comes, whatever segment the turn began in.

use std::collections::BTreeMap;

/// The maps of a build, with a fast hasher (a build looks a word up for every word of every
/// record).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use super::format::{self, push_u32, Stamp};
use super::rows::{Row, StoredUsage, TurnRow};
use super::suffixes::{suffix_samples, suffix_table};
use super::{Handed, Meta, OpenTurn, Section, SessionRow};
use crate::ledger::frame::crc32c;
use crate::ledger::record::{Millis, Record, Usage, UsageDetail};
use crate::ledger::segment::SegmentData;
use crate::ledger::{Entry, Position};

const DAY_MS: i64 = 86_400_000;

/// The UTC day (days since 1970-01-01) of a time.
pub fn day_of(at: Millis) -> i64 {
    at.div_euclid(DAY_MS)
}

#[derive(Default)]
struct SessionAcc {
    /// Records that name the session but no turn of it.
    own: Vec<u32>,
    /// Its turns with records here, in order of first record.
    turns: Vec<String>,
    begun: u32,
    first_at: Option<Millis>,
    last_at: Option<Millis>,
    /// Per (agent, day): see the module documentation.
    usage: BTreeMap<(u32, i64), UsageAcc>,
}

#[derive(Clone, Copy)]
struct UsageAcc {
    turns: u32,
    usage: Usage,
    detail: UsageDetail,
}

impl Default for UsageAcc {
    fn default() -> Self {
        UsageAcc {
            turns: 0,
            usage: Usage::ZERO,
            detail: UsageDetail::default(),
        }
    }
}

struct TurnAcc {
    session: String,
    postings: Vec<u32>,
    begun_here: bool,
}

/// A record whose turn began before this segment (or never).
struct Pending {
    offset: u32,
    turn: String,
    /// The session the record names itself, if any.
    session: Option<String>,
    usage: Option<TurnUsage>,
}

/// The usage a record of a turn reports.
enum TurnUsage {
    /// A terminal record's: every call of the turn.
    Ended(Usage),
    /// A worker's ended subtask's.
    Handed {
        /// The session the record names.
        session: String,
        worker: String,
        at: Millis,
        usage: Usage,
    },
}

impl TurnUsage {
    fn of(record: &Record) -> Option<TurnUsage> {
        match record {
            Record::TurnEnded(e) => Some(TurnUsage::Ended(e.usage)),
            Record::SubtaskEnded(x) => Some(TurnUsage::Handed {
                session: x.session.clone(),
                worker: x.worker.clone(),
                at: x.at,
                usage: x.usage,
            }),
            _ => None,
        }
    }
}

/// Collects one segment's records for its index.
#[derive(Default)]
pub(crate) struct Builder {
    sessions: BTreeMap<String, SessionAcc>,
    turns: HashMap<String, TurnAcc>,
    /// Turns begun here and not ended (yet).
    open: HashMap<String, OpenTurn>,
    pending: Vec<Pending>,
    agents: Vec<String>,
    agent_ix: HashMap<String, u32>,
    rewinds: Vec<u32>,
    always: Vec<u32>,
    damaged: Vec<(u64, String)>,
    /// Records whose usage could not be attributed exactly (see the module documentation):
    /// session, offset, reason.
    usage_damaged: Vec<(String, u64, String)>,
    unknown_kinds: u64,
    /// The last intact record: its sequence number, offset, header checksum and end.
    last: Option<(u64, u64, u32, u64)>,
    /// The words of the records from `terms_from` on (those before, when a helper thread
    /// collects them: see [`Builder::collect`]).
    terms: Terms,
    terms_from: u32,
    /// Collect no terms and map no turn ids: an index for session summaries only (the newest
    /// segment, read whole by `sessions` and `usage`), never written, searched or looked up.
    no_terms: bool,
}

impl Builder {
    /// Reads every frame of `seg`, verifying each, and collects them. `None` for a segment
    /// of 2 GiB or more, past the offsets a word's postings hold (it is then always walked).
    pub fn from_segment(seg: &SegmentData) -> Option<Builder> {
        Builder::collect(seg, Builder::default(), PARALLEL_TERMS)
    }

    /// [`Builder::from_segment`] with a helper thread for segments from `parallel_from`
    /// bytes on (tests compare the two ways).
    #[cfg(test)]
    pub fn from_segment_helped_from(seg: &SegmentData, parallel_from: usize) -> Option<Builder> {
        Builder::collect(seg, Builder::default(), parallel_from)
    }

    /// [`Builder::from_segment`] without the search terms and the turn-id map: for summaries
    /// of the newest segment, which are never written, searched or looked up by turn.
    pub fn summary_of(seg: &SegmentData) -> Option<Builder> {
        Builder::collect(
            seg,
            Builder {
                no_terms: true,
                ..Builder::default()
            },
            usize::MAX,
        )
    }

    /// Whether every record read was intact (a torn write at the newest segment's end
    /// aside): only then may the newest segment's records be indexed.
    pub fn intact(&self) -> bool {
        self.damaged.is_empty()
    }

    fn collect(seg: &SegmentData, mut b: Builder, parallel_from: usize) -> Option<Builder> {
        let end = seg.base + seg.bytes().len() as u64;
        if end > u64::from(TURN_POSTING) {
            return None;
        }
        if let Err(reason) = seg.header() {
            b.damaged.push((0, reason));
            return Some(b);
        }
        // The words of the first three fifths of a large segment are collected by a second
        // thread (which does nothing else), from the same frames checked the same way: half
        // of a build is collecting words. Merged ahead of the rest's, they are the one
        // thread's words.
        let helped = !b.no_terms
            && seg.bytes().len() >= parallel_from
            && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        if !helped {
            return Some(b.collect_frames(seg, end));
        }
        let mid = (seg.base + seg.bytes().len() as u64 * 3 / 5) as u32;
        b.terms_from = mid;
        let (mut b, first) = std::thread::scope(|scope| {
            let helper = scope.spawn(|| Terms::of_frames(seg, mid));
            let b = b.collect_frames(seg, end);
            // A panic in the helper is this build's, as it would be in one thread.
            let first = helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (b, first)
        });
        b.terms.put_before(first);
        Some(b)
    }

    /// [`Builder::collect`] of every frame in this thread.
    fn collect_frames(mut self, seg: &SegmentData, end: u64) -> Builder {
        let b = &mut self;
        let mut torn = false;
        let mut damage = Vec::new();
        seg.frames_all_unverified(
            0,
            |fr| {
                if torn {
                    return;
                }
                if !seg.payload_ok(&fr) {
                    if !seg.sealed && fr.offset + fr.len == end {
                        torn = true; // a torn write at the newest segment's end
                    } else {
                        b.damaged
                            .push((fr.offset, "record checksum mismatch".into()));
                    }
                    return;
                }
                b.last = Some((fr.seq, fr.offset, seg.header_crc(&fr), fr.offset + fr.len));
                match seg.entry(&fr) {
                    Ok(entry) => b.add(entry),
                    Err(e) => b.damaged.push((fr.offset, e.to_string())),
                }
            },
            |d| damage.push(d),
        );
        for d in damage {
            match d {
                crate::ledger::Damage::TornTail { .. } => {}
                crate::ledger::Damage::Corrupt { offset, reason }
                | crate::ledger::Damage::DamagedTail { offset, reason, .. } => {
                    b.damaged.push((offset, reason))
                }
            }
        }
        self
    }

    fn agent(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.agent_ix.get(name) {
            return i;
        }
        let i = self.agents.len() as u32;
        self.agents.push(name.to_owned());
        self.agent_ix.insert(name.to_owned(), i);
        i
    }

    fn session(&mut self, name: &str) -> &mut SessionAcc {
        if !self.sessions.contains_key(name) {
            self.sessions.insert(name.to_owned(), SessionAcc::default());
        }
        self.sessions.entry(name.to_owned()).or_default()
    }

    /// Adds one decoded record (in ledger order).
    pub fn add(&mut self, entry: Entry) {
        let offset = entry.pos.offset as u32;
        let Some(record) = entry.record else {
            self.unknown_kinds += 1;
            return;
        };
        if let Some(session) = record.session() {
            let s = self.session(session);
            if let Some(at) = record.at() {
                s.first_at = s.first_at.or(Some(at));
                s.last_at = Some(s.last_at.map_or(at, |l| l.max(at)));
            }
        }
        match &record {
            Record::RewindBoundary(_) => self.rewinds.push(offset),
            // A terminal record's cache tokens and cost go to the row its usage went to,
            // which the record names: they need no open turn.
            Record::UsageCost(c) => {
                let row = self.usage_row(&c.session, &c.agent, day_of(c.counted_at));
                row.detail.add(&c.detail);
            }
            Record::SessionCreated(_)
            | Record::AttachmentAdded(_)
            | Record::AttachmentRemoved(_)
            | Record::AttachmentConsumed(_) => self.always.push(offset),
            _ => {}
        }
        if let Record::TurnBegun(b) = &record {
            self.begin(b, entry.pos, entry.seq);
        }
        if !self.no_terms && offset >= self.terms_from {
            self.terms.add(&record, offset);
        }
        let Some(turn) = record.turn() else {
            if let Some(s) = record.session() {
                self.session(s).own.push(offset);
            }
            return;
        };
        let usage = TurnUsage::of(&record);
        match self.turns.get_mut(turn) {
            Some(t) if t.begun_here => {
                let session = t.session.clone();
                if record.session().is_some_and(|s| s != session) {
                    // Names another session than its turn's: it belongs to the session named.
                    self.session(record.session().unwrap_or_default())
                        .own
                        .push(offset);
                } else {
                    t.postings.push(offset);
                }
                match usage {
                    Some(TurnUsage::Ended(usage)) => {
                        if let Some(open) = self.open.remove(turn) {
                            self.end_usage(&open, usage, offset);
                        }
                    }
                    Some(handed) => {
                        // Out of the map while the rows change, then back: still open.
                        let mut open = self.open.remove(turn);
                        self.hand(open.as_mut(), handed, offset);
                        if let Some(open) = open {
                            self.open.insert(turn.to_owned(), open);
                        }
                    }
                    None => {}
                }
            }
            _ => self.pending.push(Pending {
                offset,
                turn: turn.to_owned(),
                session: record.session().map(str::to_owned),
                usage,
            }),
        }
    }

    fn begin(&mut self, b: &crate::ledger::record::TurnBegun, pos: Position, seq: u64) {
        if self.turns.get(&b.turn).is_some_and(|t| t.begun_here) {
            return; // a second begin of the same turn (never written by axocoatl)
        }
        let agent = self.agent(&b.agent);
        let s = self.session(&b.session);
        s.begun += 1;
        s.turns.push(b.turn.clone());
        s.usage.entry((agent, day_of(b.at))).or_default().turns += 1;
        self.turns.insert(
            b.turn.clone(),
            TurnAcc {
                session: b.session.clone(),
                postings: Vec::new(),
                begun_here: true,
            },
        );
        self.open.insert(
            b.turn.clone(),
            OpenTurn {
                turn: b.turn.clone(),
                session: b.session.clone(),
                agent: b.agent.clone(),
                started_at: b.at,
                begin: pos,
                begin_seq: seq,
                handed: Handed::default(),
            },
        );
    }

    /// The row of `agent` on `day` in `session`.
    fn usage_row(&mut self, session: &str, agent: &str, day: i64) -> &mut UsageAcc {
        let agent = self.agent(agent);
        self.session(session).usage.entry((agent, day)).or_default()
    }

    /// Adds a terminal record's usage, less what the turn handed its workers, to the row of
    /// its turn (agent, day it began).
    fn end_usage(&mut self, open: &OpenTurn, usage: Usage, offset: u32) {
        let own = match own_usage(usage, &open.handed.usage) {
            Some(own) => own,
            None => {
                self.usage_damaged.push((
                    open.session.clone(),
                    u64::from(offset),
                    format!(
                        "turn {} ended with less usage than its workers' subtasks report: \
                         its usage is counted whole, theirs too",
                        open.turn
                    ),
                ));
                usage
            }
        };
        let row = self.usage_row(&open.session, &open.agent, day_of(open.started_at));
        row.usage.add(&own);
    }

    /// Adds a worker's ended subtask's usage to the worker's row (the day it ended), and
    /// notes it on `open`, the coordinator's turn, for the turn's end to take out.
    fn hand(&mut self, open: Option<&mut OpenTurn>, handed: TurnUsage, offset: u32) {
        let TurnUsage::Handed {
            session,
            worker,
            at,
            usage,
        } = handed
        else {
            return;
        };
        let Some(open) = open else {
            self.usage_damaged.push((
                session,
                u64::from(offset),
                format!(
                    "a subtask of worker {worker} ended outside an open turn: its usage is \
                     counted for no agent"
                ),
            ));
            return;
        };
        let first = !open.handed.workers.contains(&worker);
        let row = self.usage_row(&open.session, &worker, day_of(at));
        row.turns += u32::from(first);
        row.usage.add(&usage);
        open.handed.usage.add(&usage);
        if first {
            open.handed.workers.push(worker);
        }
    }

    /// Resolves what waited for the turns open when the segment began, and encodes the
    /// index. Also returns the turns still open at the segment's end.
    pub fn finish(mut self, seg: &SegmentData, carry_in: &[OpenTurn]) -> (Vec<u8>, Vec<OpenTurn>) {
        let mut carried: HashMap<&str, OpenTurn> = carry_in
            .iter()
            .map(|o| (o.turn.as_str(), o.clone()))
            .collect();
        for p in std::mem::take(&mut self.pending) {
            let owner = carried.get(p.turn.as_str()).map(|o| o.session.clone());
            match (owner, &p.session) {
                (Some(session), named) if named.as_ref().is_none_or(|n| *n == session) => {
                    let t = self.turns.entry(p.turn.clone()).or_insert_with(|| TurnAcc {
                        session: session.clone(),
                        postings: Vec::new(),
                        begun_here: false,
                    });
                    let first = t.postings.is_empty();
                    t.postings.push(p.offset);
                    if first {
                        let s = self.sessions.entry(session).or_default();
                        s.turns.push(p.turn.clone());
                    }
                    match p.usage {
                        Some(TurnUsage::Ended(usage)) => {
                            if let Some(open) = carried.remove(p.turn.as_str()) {
                                self.end_usage(&open, usage, p.offset);
                            }
                        }
                        Some(handed) => {
                            self.hand(carried.get_mut(p.turn.as_str()), handed, p.offset)
                        }
                        None => {}
                    }
                }
                (_, named) => {
                    if let Some(named) = named {
                        self.session(named).own.push(p.offset);
                    }
                    // A record of a turn that never began (or began in a damaged record, or
                    // is of another session): no projection shows it, so no session lists
                    // it, and no row counts a worker's usage it reports.
                    if let Some(handed @ TurnUsage::Handed { .. }) = p.usage {
                        self.hand(None, handed, p.offset);
                    }
                }
            }
        }
        let mut carry_out: Vec<OpenTurn> = carried.into_values().collect();
        carry_out.extend(self.open.drain().map(|(_, o)| o));
        carry_out.sort_by_key(|o| o.begin_seq);
        let header = seg.header().ok();
        let (last_seq, last_offset, last_hcrc, last_end) = self.last.unwrap_or((
            header.map_or(0, |h| h.1),
            0,
            0,
            crate::ledger::HEADER_LEN as u64,
        ));
        // A sealed segment is indexed whole; of the newest, the intact records are (a torn
        // write at its end is not part of them).
        let covered = if seg.sealed {
            seg.base + seg.bytes().len() as u64
        } else {
            last_end
        };
        let stamp = Stamp {
            segment: seg.number,
            covered,
            base_seq: header.map_or(0, |h| h.1),
            last_seq,
            last_offset,
            last_hcrc,
            carry_in: digest(carry_in),
        };
        let bytes = self.encode(&stamp, &carry_out);
        (bytes, carry_out)
    }

    /// The sessions' sections (`SessionsFst`, `SessionRows`, `Postings`, `UsageRows`), and
    /// the row of each turn, by id.
    fn session_sections(&self, sections: &mut [Vec<u8>]) -> BTreeMap<&str, TurnRow> {
        let mut postings: Vec<u8> = Vec::new();
        let mut session_rows = Vec::new();
        let mut usage_rows = Vec::new();
        let mut turn_rows: BTreeMap<&str, TurnRow> = BTreeMap::new();
        let mut sessions_fst = fst::MapBuilder::memory();
        let count = |v: &Vec<u8>| (v.len() / 4) as u32;
        for (i, (name, s)) in self.sessions.iter().enumerate() {
            let start = count(&postings);
            let mut own = s.own.clone();
            own.sort_unstable();
            for o in own {
                push_u32(&mut postings, o);
            }
            for turn in &s.turns {
                let Some(t) = self.turns.get(turn) else {
                    continue;
                };
                let t_start = count(&postings);
                for &o in &t.postings {
                    push_u32(&mut postings, o);
                }
                turn_rows.insert(
                    turn,
                    TurnRow {
                        session: i as u32,
                        post_start: t_start,
                        post_len: count(&postings) - t_start,
                        begun_here: t.begun_here,
                    },
                );
            }
            let usage_start = (usage_rows.len() / StoredUsage::WIDTH) as u32;
            for (&(agent, day), u) in &s.usage {
                StoredUsage {
                    agent,
                    turns: u.turns,
                    calls: u.usage.calls,
                    complete: u.usage.complete,
                    day,
                    prompt_tokens: u.usage.prompt_tokens,
                    completion_tokens: u.usage.completion_tokens,
                    detail: u.detail,
                }
                .encode(&mut usage_rows);
            }
            SessionRow {
                post_start: start,
                post_len: count(&postings) - start,
                turns: s.begun,
                usage_start,
                usage_len: s.usage.len() as u32,
                first_at: s.first_at,
                last_at: s.last_at,
            }
            .encode(&mut session_rows);
            // Keys are inserted in order (a BTreeMap), so the builder cannot fail.
            let _ = sessions_fst.insert(name, i as u64);
        }
        sections[Section::SessionsFst as usize] = sessions_fst.into_inner().unwrap_or_default();
        sections[Section::SessionRows as usize] = session_rows;
        sections[Section::Postings as usize] = postings;
        sections[Section::UsageRows as usize] = usage_rows;
        turn_rows
    }

    /// The turns' sections (`TurnKeys`, `TurnRows`) from their rows; the ids a key does not
    /// spell, and the row of each record of a turn's postings.
    fn turn_sections(
        &self,
        turn_rows: BTreeMap<&str, TurnRow>,
        sections: &mut [Vec<u8>],
    ) -> (Vec<(u32, String)>, HashMap<u32, u32>) {
        let mut turn_keys = Vec::new();
        let mut long_ids = Vec::new();
        let mut rows = Vec::new();
        // The row of each record of a turn's postings: a word's postings name the turn.
        let mut row_of: HashMap<u32, u32> = HashMap::default();
        for (i, (id, row)) in turn_rows.iter().enumerate() {
            // A summary never looks turns up by id: their keys are left out.
            if !self.no_terms {
                let bytes = id.as_bytes();
                let n = bytes.len().min(TURN_KEY);
                turn_keys.extend_from_slice(&bytes[..n]);
                turn_keys.resize(turn_keys.len() + TURN_KEY - n, 0);
                if bytes.len() > TURN_KEY || bytes.last() == Some(&0) {
                    long_ids.push((i as u32, (*id).to_owned()));
                }
                for &o in self.turns.get(*id).map_or(&[][..], |t| &t.postings) {
                    row_of.insert(o, i as u32);
                }
            }
            row.encode(&mut rows);
        }
        sections[Section::TurnKeys as usize] = turn_keys;
        sections[Section::TurnRows as usize] = rows;
        (long_ids, row_of)
    }

    fn encode(self, stamp: &Stamp, carry_out: &[OpenTurn]) -> Vec<u8> {
        let mut sections: Vec<Vec<u8>> = vec![Vec::new(); Section::COUNT];
        let turn_rows = self.session_sections(&mut sections);
        let (long_ids, row_of) = self.turn_sections(turn_rows, &mut sections);
        let meta = Meta {
            damaged: self.damaged,
            unknown_kinds: self.unknown_kinds,
            open: carry_out.to_vec(),
            agents: self.agents,
            usage_damaged: self.usage_damaged,
            long_ids,
        };
        sections[Section::Meta as usize] = postcard::to_allocvec(&meta).unwrap_or_default();
        let offsets = |v: &[u32]| {
            let mut out = Vec::with_capacity(v.len() * 4);
            for &o in v {
                push_u32(&mut out, o);
            }
            out
        };
        sections[Section::Rewinds as usize] = offsets(&self.rewinds);
        sections[Section::Always as usize] = offsets(&self.always);
        let mut terms: Vec<(Box<str>, Vec<u32>)> = self.terms.0.into_iter().collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        term_sections(terms, &row_of, &mut sections);
        for &(blocked, table, block) in Section::BLOCKED {
            sections[table] = format::block_crcs(&sections[blocked], block);
        }
        format::encode(stamp, &sections)
    }
}

/// Segments from this size on have their words collected by two threads.
const PARALLEL_TERMS: usize = 4 << 20;

/// Folded word → offsets of the records holding it (ascending, once each).
#[derive(Default)]
struct Terms(HashMap<Box<str>, Vec<u32>>);

impl Terms {
    /// Adds the words of `record`, at `offset` (past every offset added before).
    fn add(&mut self, record: &Record, offset: u32) {
        if record.turn().is_none() {
            return;
        }
        let terms = &mut self.0;
        super::terms::searchable(record, |text| {
            super::terms::words(text, |w| match terms.get_mut(w) {
                Some(list) => {
                    if list.last() != Some(&offset) {
                        list.push(offset);
                    }
                }
                None => {
                    terms.insert(w.into(), vec![offset]);
                }
            })
        });
    }

    /// The words of the intact records of `seg` that begin before offset `to`, each frame
    /// checked as [`Builder::collect`] checks it (a damaged one adds nothing).
    fn of_frames(seg: &SegmentData, to: u32) -> Terms {
        let mut terms = Terms::default();
        seg.frames_all_unverified(
            0,
            |fr| {
                if fr.offset >= u64::from(to) || !seg.payload_ok(&fr) {
                    return;
                }
                if let Ok(entry) = seg.entry(&fr) {
                    if let Some(record) = &entry.record {
                        terms.add(record, fr.offset as u32);
                    }
                }
            },
            |_| {},
        );
        terms
    }

    /// Puts the words of `earlier` (records before any of these) ahead of these.
    fn put_before(&mut self, earlier: Terms) {
        for (word, mut list) in earlier.0 {
            match self.0.get_mut(&word) {
                Some(later) => {
                    list.append(later);
                    *later = list;
                }
                None => {
                    self.0.insert(word, list);
                }
            }
        }
    }
}

/// What a word's postings list for the records holding it: the row of each record's turn
/// ([`TURN_POSTING`] and the row), so a search reads no record to learn its turn and finds
/// the turn's records without looking its id up; the offset of a record that is not in a
/// turn's postings (one naming another session than its turn's, or of a turn not begun
/// here or carried in). Ascending, once each.
fn postings_of_word(offsets: Vec<u32>, row_of: &HashMap<u32, u32>) -> Vec<u32> {
    let mut out: Vec<u32> = offsets
        .into_iter()
        .map(|o| row_of.get(&o).map_or(o, |&row| TURN_POSTING | row))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The sections of the term index of `terms` (sorted): the dictionary, one `fst` map per
/// first byte of the words, each with its own checksum (`TermsFstParts`), the records
/// holding each word, and the words' sorted suffixes.
fn term_sections(
    terms: Vec<(Box<str>, Vec<u32>)>,
    row_of: &HashMap<u32, u32>,
    sections: &mut [Vec<u8>],
) {
    let (words, lists): (Vec<Box<str>>, Vec<Vec<u32>>) = terms.into_iter().unzip();
    let suffix_table = || suffix_table(words.iter().map(|w| &**w));
    // The sorted suffixes need only the words: for a large dictionary a second thread sorts
    // them meanwhile (a small one, as a summary's empty one, is not worth a thread).
    let ((terms_fst, parts, term_postings), (term_bytes, suffixes)) =
        if words.len() < PARALLEL_SUFFIXES {
            (dictionary(&words, lists, row_of), suffix_table())
        } else {
            std::thread::scope(|scope| {
                let helper = scope.spawn(suffix_table);
                let dictionary = dictionary(&words, lists, row_of);
                let suffixes = helper
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (dictionary, suffixes)
            })
        };
    sections[Section::TermSuffixSamples as usize] = suffix_samples(&term_bytes, &suffixes);
    sections[Section::TermsFst as usize] = terms_fst;
    sections[Section::TermsFstParts as usize] = parts;
    sections[Section::TermPostings as usize] = term_postings;
    sections[Section::TermBytes as usize] = term_bytes;
    sections[Section::TermSuffixes as usize] = suffixes;
}

/// Dictionaries from this many words on have their suffixes sorted on a second thread.
const PARALLEL_SUFFIXES: usize = 4096;

/// The `fst` maps of `words` (sorted) with their parts table, and the postings of each word
/// (`lists`, in the words' order) as they are written: `TermsFst`, `TermsFstParts`,
/// `TermPostings`.
fn dictionary(
    words: &[Box<str>],
    lists: Vec<Vec<u32>>,
    row_of: &HashMap<u32, u32>,
) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut terms_fst = Vec::new();
    let mut parts = vec![0u8; 256 * super::TERMS_PART];
    let mut term_postings = Vec::new();
    let mut lists = lists.into_iter();
    for group in words.chunk_by(|a, b| a.as_bytes().first() == b.as_bytes().first()) {
        let mut map = fst::MapBuilder::memory();
        for (term, list) in group.iter().zip(lists.by_ref()) {
            let list = postings_of_word(list, row_of);
            let start = (term_postings.len() / 4) as u64;
            for &o in &list {
                push_u32(&mut term_postings, o);
            }
            // Keys are inserted in order, so the builder cannot fail.
            let _ = map.insert(term.as_bytes(), (start << 32) | list.len() as u64);
        }
        // Words are never empty.
        let Some(&first) = group[0].as_bytes().first() else {
            continue;
        };
        let bytes = map.into_inner().unwrap_or_default();
        let entry = usize::from(first) * super::TERMS_PART;
        let mut row = Vec::with_capacity(super::TERMS_PART);
        push_u32(&mut row, terms_fst.len() as u32);
        push_u32(&mut row, bytes.len() as u32);
        push_u32(&mut row, crc32c(&bytes));
        parts[entry..entry + super::TERMS_PART].copy_from_slice(&row);
        terms_fst.extend_from_slice(&bytes);
    }
    (terms_fst, parts, term_postings)
}

/// Width in bytes of a turn key: a turn id's first bytes (ids are 16 hex digits), zero-padded.
pub const TURN_KEY: usize = 16;

/// The bit that marks a word's posting as a turn row rather than a record offset: segments
/// are indexed only below 2 GiB, so no offset has it.
pub const TURN_POSTING: u32 = 1 << 31;

/// A turn's own usage: `total` (every call of the turn) less what it `handed` its workers;
/// `total` itself when it reports no usage at all (an interrupted turn's record, which
/// knows nothing of its workers); `None` when it reports less than it handed.
fn own_usage(total: Usage, handed: &Usage) -> Option<Usage> {
    let none = Usage {
        complete: false,
        ..Usage::ZERO
    };
    if total == none {
        return Some(total);
    }
    Some(Usage {
        prompt_tokens: total.prompt_tokens.checked_sub(handed.prompt_tokens)?,
        completion_tokens: total
            .completion_tokens
            .checked_sub(handed.completion_tokens)?,
        calls: total.calls.checked_sub(handed.calls)?,
        complete: total.complete,
    })
}

/// A digest of a list of open turns, tying an index to the one before it.
pub fn digest(open: &[OpenTurn]) -> u32 {
    crc32c(&postcard::to_allocvec(open).unwrap_or_default())
}
