//! Reading the ledger back: one walk for every reader.
//!
//! A walk goes over the frames of each segment without computing payload checksums (the
//! framing is still checked) and asks a selector about each record, looking only at its
//! kind and the turn, session or reference its body starts with ([`RecordView`]). Only the
//! records the selector keeps are verified and decoded. Damage is never skipped silently: a
//! kept record that fails its checksum or does not decode, and a segment damaged before its
//! end, are returned as [`Damaged`] beside the records that could be read. A torn tail (an
//! incomplete last record of the newest segment, left by a crash mid-append) ends the walk
//! quietly: the next appender truncates it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;

use super::index::{Index, Part, Section, Stale};
use super::record::{Kind, Record, RecordView};
use super::segment::{load, Damage, RawFrame, SegmentData};
use super::{Entry, Ledger, Position, SegmentSet};
use crate::layout::segment_file_name;
use crate::{Error, Result};

/// A record or segment that could not be read, named by file and byte offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    pub path: PathBuf,
    /// `None` when the file could not be read at all.
    pub offset: Option<u64>,
    pub reason: String,
}

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(offset) => write!(
                f,
                "ledger corrupt: {} at byte {offset}: {}",
                self.path.display(),
                self.reason
            ),
            None => write!(f, "cannot read {}: {}", self.path.display(), self.reason),
        }
    }
}

impl Damaged {
    fn at(seg: &SegmentData, offset: u64, reason: impl Into<String>) -> Damaged {
        Damaged {
            path: seg.path.clone(),
            offset: Some(offset),
            reason: reason.into(),
        }
    }

    pub(crate) fn from_error(e: Error) -> Damaged {
        match e {
            Error::Corrupt {
                path,
                offset,
                reason,
            } => Damaged {
                path,
                offset: Some(offset),
                reason,
            },
            Error::Io { path, op, source } => Damaged {
                path,
                offset: None,
                reason: format!("{op}: {source}"),
            },
            other => Damaged {
                path: PathBuf::new(),
                offset: None,
                reason: other.to_string(),
            },
        }
    }
}

/// A scan's error as damage to report beside what could be read.
impl From<Error> for Damaged {
    fn from(e: Error) -> Damaged {
        Damaged::from_error(e)
    }
}

impl From<Damaged> for Error {
    fn from(d: Damaged) -> Error {
        Error::Corrupt {
            path: d.path,
            offset: d.offset.unwrap_or(0),
            reason: d.reason,
        }
    }
}

/// What a walk read: the kept records in ledger order (a record of a kind this build does
/// not know has `record: None`), and what could not be read.
#[derive(Debug, Default)]
pub struct Walked {
    pub entries: Vec<Entry>,
    pub damaged: Vec<Damaged>,
}

impl Walked {
    /// Verifies and decodes one frame of `seg` found by an unverified walk.
    pub(crate) fn decode(&mut self, seg: &SegmentData, fr: &RawFrame<'_>) {
        match seg.checked_entry(fr) {
            Ok(entry) => self.entries.push(entry),
            Err(e) => self.damaged.push(Damaged::from_error(e)),
        }
    }

    pub(crate) fn merge(&mut self, other: Walked) {
        self.entries.extend(other.entries);
        self.damaged.extend(other.damaged);
    }

    /// Sorts the records into ledger order and drops duplicates (a record kept by two
    /// selections of the same walk).
    pub(crate) fn sort(&mut self) {
        self.entries.sort_by_key(|e| e.pos);
        self.entries.dedup_by_key(|e| e.pos);
        let mut seen = HashSet::new();
        self.damaged
            .retain(|d| seen.insert((d.path.clone(), d.offset, d.reason.clone())));
    }

    fn damage(&mut self, seg: &SegmentData, damage: Damage) {
        match damage {
            Damage::TornTail { .. } => {}
            Damage::Corrupt { offset, reason } | Damage::DamagedTail { offset, reason, .. } => {
                self.damaged.push(Damaged::at(seg, offset, reason))
            }
        }
    }
}

/// Walks one segment's frames from file offset `from`, decoding the records `keep` accepts.
pub(crate) fn select(
    seg: &SegmentData,
    from: u64,
    keep: &mut dyn FnMut(RecordView<'_>) -> bool,
    out: &mut Walked,
) {
    if let Err(reason) = seg.header() {
        out.damaged.push(Damaged::at(seg, 0, reason));
        return;
    }
    let end = seg.base + seg.bytes().len() as u64;
    let mut torn = false;
    let mut damaged = Vec::new();
    // Both walks below hand out the frames from `from` on only.
    let mut each = |fr: RawFrame<'_>| {
        if torn || !keep(RecordView::new(fr.kind, fr.payload)) {
            return;
        }
        if !seg.sealed && fr.offset + fr.len == end && !seg.payload_ok(&fr) {
            // The newest segment's last frame, unverifiable: a torn write, not damage.
            torn = true;
            return;
        }
        out.decode(seg, &fr);
    };
    if from <= seg.base {
        seg.frames_kept(&mut each, |d| damaged.push(d));
    } else {
        seg.frames_all_unverified(from, &mut each, |d| damaged.push(d));
    }
    for d in damaged {
        out.damage(seg, d);
    }
}

/// Decodes the records at `offsets` of `seg` (offsets an index gave).
fn decode_at(seg: &SegmentData, mut offsets: Vec<u32>, out: &mut Walked) {
    offsets.sort_unstable();
    offsets.dedup();
    out.entries.reserve(offsets.len());
    let mut sparse = seg.sparse(offsets.len());
    for offset in offsets {
        if let Some(fr) = sparse.as_mut().and_then(|s| s.frame_at(u64::from(offset))) {
            match seg.entry(&fr) {
                Ok(entry) => out.entries.push(entry),
                Err(e) => out.damaged.push(Damaged::from_error(e)),
            }
            continue;
        }
        match seg.frame_at(u64::from(offset)) {
            Ok(Some(fr)) => out.decode(seg, &fr),
            Ok(None) => out
                .damaged
                .push(Damaged::at(seg, offset.into(), "no record here")),
            Err(Damage::Corrupt { offset, reason }) => {
                out.damaged.push(Damaged::at(seg, offset, reason))
            }
            Err(Damage::DamagedTail { offset, reason, .. }) => {
                out.damaged.push(Damaged::at(seg, offset, reason))
            }
            Err(Damage::TornTail { offset, .. }) => {
                out.damaged
                    .push(Damaged::at(seg, offset, "the record ends early"))
            }
        }
    }
}

/// The offsets the index of the part at a position of the plan lists for a read.
pub(crate) type Lookup<'a> = &'a dyn Fn(usize, &Index) -> Result<Vec<u32>, Stale>;

/// How a read finds its records in one segment: through the index when the segment has one,
/// else by walking the segment with `keep`.
pub(crate) struct Read<'a> {
    pub lookup: Lookup<'a>,
    pub keep: &'a mut dyn FnMut(RecordView<'_>) -> bool,
    /// Called after each indexed segment (to take over what it carries).
    pub carried: &'a mut dyn FnMut(&Index),
}

impl Ledger {
    /// Walks the whole ledger once, decoding the records `keep` accepts (in ledger order).
    pub fn walk(&self, keep: &mut dyn FnMut(RecordView<'_>) -> bool) -> Result<Walked> {
        let mut out = Walked::default();
        let set = self.segment_set()?;
        // A missing segment is damage: its records are lost, and a reader must say so.
        out.damaged
            .extend(set.problems(&self.dir).into_iter().map(Damaged::from_error));
        let numbers = set.numbers;
        let newest = numbers.last().copied().unwrap_or(0);
        for number in numbers {
            match load(&self.segment_path(number), number, number < newest, 0) {
                Ok(seg) => select(&seg, 0, keep, &mut out),
                Err(e) => out.damaged.push(Damaged::from_error(e)),
            }
        }
        Ok(out)
    }

    /// Reads through the indexes of sealed segments, walking the rest.
    fn read(&self, r: Read<'_>) -> Result<Walked> {
        Ok(self.read_parts(&self.plan()?, r))
    }

    /// [`Ledger::read`] of the parts of a plan already made.
    pub(crate) fn read_parts(&self, parts: &[Part], r: Read<'_>) -> Walked {
        let mut out = Walked::default();
        // Every indexed part's offsets first, so the records are put in place once (an entry
        // is 288 bytes: growing the list moved each several times).
        let looked: Vec<Result<Vec<u32>, Stale>> = parts
            .iter()
            .enumerate()
            .map(|(i, part)| match part {
                Part::Indexed { index, .. } => (r.lookup)(i, index),
                _ => Ok(Vec::new()),
            })
            .collect();
        let wanted: usize = looked.iter().flatten().map(Vec::len).sum();
        out.entries.reserve(wanted);
        for (part, looked) in parts.iter().zip(looked) {
            match (part, looked) {
                (Part::Indexed { seg, index }, Ok(offsets)) => {
                    out.damaged.extend(index.damaged(seg));
                    decode_at(seg, offsets, &mut out);
                    (r.carried)(index);
                }
                (Part::Indexed { seg, .. }, Err(Stale)) => {
                    // Damaged where it was read: read the segment itself, and let the next
                    // reader rebuild the index.
                    self.forget_index(seg.number);
                    select(seg, 0, r.keep, &mut out);
                }
                (Part::Raw { seg }, _) => select(seg, 0, r.keep, &mut out),
                (Part::Unreadable(d), _) => out.damaged.push(d.clone()),
            }
        }
        out.sort();
        out
    }

    /// Every record.
    pub fn read_all(&self) -> Result<Walked> {
        self.walk(&mut |_| true)
    }

    /// The records of one session: those that name it, and every record of its turns.
    pub fn read_session(&self, session: &str) -> Result<Walked> {
        // Its turns begun in earlier segments and still open (carried), and those begun here.
        let turns: RefCell<HashSet<Vec<u8>>> = RefCell::default();
        let parts = self.plan_session(session)?;
        Ok(self.read_parts(
            &parts,
            Read {
                lookup: &|_, index| match index.session(session)? {
                    Some(row) => index.session_offsets(&row),
                    None => Ok(Vec::new()),
                },
                keep: &mut |v| {
                    let of_session = v.session() == Some(session.as_bytes());
                    match (v.kind(), v.turn()) {
                        (Some(Kind::TurnBegun), Some(turn)) if of_session => {
                            turns.borrow_mut().insert(turn.to_vec());
                            true
                        }
                        (_, Some(turn)) if turns.borrow().contains(turn) => true,
                        _ => of_session,
                    }
                },
                carried: &mut |index| {
                    *turns.borrow_mut() = index
                        .meta
                        .open
                        .iter()
                        .filter(|o| o.session == session)
                        .map(|o| o.turn.as_bytes().to_vec())
                        .collect();
                },
            },
        ))
    }

    /// The turns whose id starts with `prefix`, whole, and what decides whether they are
    /// superseded: every rewind boundary and the turns rewinds target.
    pub fn read_turn_prefix(&self, prefix: &str) -> Result<Walked> {
        let prefix = prefix.as_bytes();
        let mut out = self.read(Read {
            lookup: &|_, index| {
                let mut offsets = index.turn_prefix_offsets(prefix)?;
                offsets.extend(index.offsets(Section::Rewinds)?);
                Ok(offsets)
            },
            keep: &mut |v| {
                v.kind() == Some(Kind::RewindBoundary)
                    || v.turn().is_some_and(|t| t.starts_with(prefix))
            },
            carried: &mut |_| {},
        })?;
        self.complete_rewinds(&mut out)?;
        Ok(out)
    }

    /// Every record of the turns `ids` names.
    pub fn read_turns(&self, ids: &HashSet<Vec<u8>>) -> Result<Walked> {
        self.read(Read {
            lookup: &|_, index| {
                let mut offsets = Vec::new();
                for id in ids {
                    offsets.extend(index.turn_offsets(id)?);
                }
                Ok(offsets)
            },
            keep: &mut |v| v.turn().is_some_and(|t| ids.contains(t)),
            carried: &mut |_| {},
        })
    }

    /// Every rewind boundary.
    pub fn read_rewinds(&self) -> Result<Walked> {
        self.read(Read {
            lookup: &|_, index| index.offsets(Section::Rewinds),
            keep: &mut |v| v.kind() == Some(Kind::RewindBoundary),
            carried: &mut |_| {},
        })
    }

    /// The records of the sessions (`session`, or every one) whose index rows say a subtask
    /// of a coordinator ended in the segment, and of the segments without an index the
    /// `SubtaskEnded` records: a superset of the `SubtaskEnded` records in scope, which the
    /// caller picks out.
    pub fn read_subtasks(&self, session: Option<&str>) -> Result<Walked> {
        self.read(Read {
            lookup: &|_, index| {
                let rows: Vec<super::index::SessionRow> = match session {
                    Some(s) => index.session(s)?.into_iter().collect(),
                    None => index.sessions()?.into_iter().map(|(_, row)| row).collect(),
                };
                let mut offsets = Vec::new();
                for row in rows.iter().filter(|row| row.subtasks) {
                    offsets.extend(index.session_offsets(row)?);
                }
                Ok(offsets)
            },
            keep: &mut |v| {
                v.kind() == Some(Kind::SubtaskEnded)
                    && session.is_none_or(|s| v.session() == Some(s.as_bytes()))
            },
            carried: &mut |_| {},
        })
    }

    /// Session and attachment records of every session (no turns).
    pub fn read_attachments(&self) -> Result<Walked> {
        self.read(Read {
            lookup: &|_, index| index.offsets(Section::Always),
            keep: &mut |v| {
                matches!(
                    v.kind(),
                    Some(
                        Kind::SessionCreated
                            | Kind::AttachmentAdded
                            | Kind::AttachmentRemoved
                            | Kind::AttachmentConsumed
                    )
                )
            },
            carried: &mut |_| {},
        })
    }

    /// Removes the index of segment `number` (best effort), so that it is rebuilt.
    pub(crate) fn forget_index(&self, number: u64) {
        self.sealed_memo.forget(number);
        let _ = std::fs::remove_file(
            self.index_dir()
                .join(crate::layout::index_file_name(number)),
        );
    }

    /// Adds the records of the turns that the rewind boundaries in `out` target, when `out`
    /// has a turn of that session but not the target (a rewind supersedes the turns from
    /// its target on, so the target's place in the ledger is needed).
    pub(crate) fn complete_rewinds(&self, out: &mut Walked) -> Result<()> {
        // Most reads meet no rewind at all: nothing to look up.
        if !out
            .entries
            .iter()
            .any(|e| e.kind == Kind::RewindBoundary as u16)
        {
            return Ok(());
        }
        let mut sessions: HashSet<&str> = HashSet::new();
        let mut have: HashSet<&str> = HashSet::new();
        for e in &out.entries {
            if let Some(Record::TurnBegun(b)) = &e.record {
                sessions.insert(&b.session);
                have.insert(&b.turn);
            }
        }
        let missing: HashSet<Vec<u8>> = out
            .entries
            .iter()
            .filter_map(|e| match &e.record {
                Some(Record::RewindBoundary(r))
                    if sessions.contains(r.session.as_str())
                        && !have.contains(r.target.as_str()) =>
                {
                    Some(r.target.as_bytes().to_vec())
                }
                _ => None,
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let more = self.read_turns(&missing)?;
        out.merge(more);
        out.sort();
        Ok(())
    }
}

/// An iterator over decoded records. A damaged segment yields one `Err` naming the file and
/// offset, then the walk goes on with the next segment. A torn tail ends the walk quietly.
pub struct Scan {
    numbers: std::vec::IntoIter<u64>,
    newest: u64,
    ledger_dir: PathBuf,
    pending: std::collections::VecDeque<Result<Entry>>,
    first_offset: Option<Position>,
    /// Missing segments, reported before the segment after the gap.
    missing: Vec<(u64, Error)>,
    /// The sequence number of the last record seen, to catch duplicates and gaps.
    last_seq: Option<u64>,
    failed: Option<Error>,
}

impl Scan {
    pub(crate) fn new(ledger: &Ledger, from: Position) -> Scan {
        let (set, failed) = match ledger.segment_set() {
            Ok(s) => (s, None),
            Err(e) => (SegmentSet::default(), Some(e)),
        };
        let newest = set.numbers.last().copied().unwrap_or(0);
        let missing = set
            .missing
            .iter()
            .zip(set.problems(&ledger.dir))
            .filter(|((_, last), _)| *last >= from.segment)
            .map(|(&(_, last), e)| (last + 1, e))
            .collect();
        let numbers: Vec<u64> = set
            .numbers
            .into_iter()
            .filter(|&n| n >= from.segment)
            .collect();
        Scan {
            numbers: numbers.into_iter(),
            newest,
            ledger_dir: ledger.dir.clone(),
            pending: Default::default(),
            first_offset: Some(from),
            missing,
            last_seq: None,
            failed,
        }
    }

    fn load_next(&mut self) -> bool {
        let Some(number) = self.numbers.next() else {
            return false;
        };
        let start = match self.first_offset.take() {
            Some(p) if p.segment == number => p.offset,
            _ => 0,
        };
        let mut gap = false;
        while let Some(i) = self
            .missing
            .iter()
            .position(|(before, _)| *before == number)
        {
            let (_, e) = self.missing.remove(i);
            self.pending.push_back(Err(e));
            gap = true;
        }
        let path = self.ledger_dir.join(segment_file_name(number));
        let sealed =
            number < self.newest || self.ledger_dir.join(segment_file_name(number + 1)).exists();
        let seg = match load(&path, number, sealed, start) {
            Ok(s) => s,
            Err(e) => {
                self.pending.push_back(Err(e));
                return true;
            }
        };
        let base_seq = match seg.header() {
            Ok((_, base_seq)) => base_seq,
            Err(reason) => {
                self.pending.push_back(Err(Error::Corrupt {
                    path,
                    offset: 0,
                    reason,
                }));
                return true;
            }
        };
        match self.last_seq {
            Some(last) if start == 0 && base_seq != last && !gap => {
                self.pending.push_back(Err(Error::Corrupt {
                    path: path.clone(),
                    offset: 0,
                    reason: format!(
                        "the segment starts after sequence number {base_seq}, but the one before it ends at {last}: records are missing or repeated"
                    ),
                }));
            }
            None if start == 0 => self.last_seq = Some(base_seq),
            _ => {}
        }
        let out = std::cell::RefCell::new(std::mem::take(&mut self.pending));
        let mut last_seq = self.last_seq;
        seg.frames_all(
            start,
            |fr| {
                if let Some(last) = last_seq.filter(|&l| fr.seq <= l) {
                    out.borrow_mut().push_back(Err(Error::Corrupt {
                        path: seg.path.clone(),
                        offset: fr.offset,
                        reason: format!(
                            "sequence number {} after {last}: a repeated record (a stray copy of a segment?); skipped",
                            fr.seq
                        ),
                    }));
                    return;
                }
                last_seq = Some(fr.seq);
                out.borrow_mut().push_back(seg.entry(&fr));
            },
            |d| match d {
                Damage::TornTail { .. } => {}
                Damage::Corrupt { offset, reason } | Damage::DamagedTail { offset, reason, .. } => {
                    out.borrow_mut().push_back(Err(Error::Corrupt {
                        path: seg.path.clone(),
                        offset,
                        reason,
                    }))
                }
            },
        );
        self.last_seq = last_seq.or(Some(base_seq));
        self.pending = out.into_inner();
        true
    }
}

impl Iterator for Scan {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if !self.load_next() {
                return None;
            }
        }
    }
}

#[cfg(test)]
#[path = "walk_tests.rs"]
pub(crate) mod tests;
