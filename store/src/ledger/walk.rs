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

use std::collections::HashSet;
use std::path::PathBuf;

use super::record::RecordView;
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
pub(crate) fn decode_at(seg: &SegmentData, mut offsets: Vec<u32>, out: &mut Walked) {
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

    /// Every record.
    pub fn read_all(&self) -> Result<Walked> {
        self.walk(&mut |_| true)
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
