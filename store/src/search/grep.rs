//! The ledger walk of a literal search: the bytes of every segment are searched once.
//!
//! A full projection decodes every record. A search instead streams each segment once, in
//! chunks that stay in the CPU cache: the [`Matcher`] (a case-insensitive literal; over a
//! whole chunk, the regex engine ripgrep uses) finds byte hits in a chunk, then the frames
//! of that chunk are walked (headers only) to map each hit to its record and turn. Only the
//! records of turns with a hit, and rewind boundaries, are checksummed and decoded. Text is
//! stored as UTF-8 inside the postcard bodies, so every textual match is a byte match; a
//! byte hit that is not a real match (in an id, or across two fields) is dropped by the exact
//! check the caller runs on the decoded turn.
//!
//! A turn's earlier records are found in a window of recent frames. Segments are scanned in
//! parallel; a wanted turn whose begin or end record was not collected (it fell out of the
//! window, crossed a segment boundary, or is still running) sends the search through a
//! second, filtered walk, so the result is always complete.

use std::collections::{HashSet, VecDeque};

use super::literal::Matcher;
use crate::index::terms::Need;
use crate::index::{Index, Part, Reader, Stale, TURN_POSTING};
use crate::ledger::record::{Kind, Record, RecordView};
use crate::ledger::{parallel_map, Damaged, RawFrame, SegmentData, Walked, HEADER_LEN};
use crate::Result;

/// Bytes searched at a time: small enough to stay in cache for the frame walk.
const CHUNK: usize = 1 << 20;
/// Recent frames remembered to find a hit turn's earlier records.
const WINDOW: usize = 512;

/// A hasher for turn keys, which are already random: fold and multiply, no SipHash.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut a = [0u8; 8];
            a[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(29) ^ u64::from_le_bytes(a))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = ((v as u64) ^ (v >> 64) as u64 ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type Keyed = std::hash::BuildHasherDefault<KeyHasher>;
type KeySet = HashSet<u128, Keyed>;
/// Turn ids, borrowed.
type TurnIds<'a> = HashSet<&'a [u8], Keyed>;

/// A turn id as a number: the 16 bytes of an id, or a hash of anything else.
fn short(key: &[u8]) -> u128 {
    match <[u8; 16]>::try_from(key) {
        Ok(a) => u128::from_le_bytes(a),
        Err(_) => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut h);
            u128::from(h.finish()) | (1 << 127)
        }
    }
}

/// Records decoded regardless of hits: what marks turns superseded.
fn always(v: &RecordView<'_>) -> bool {
    v.kind() == Some(Kind::RewindBoundary)
}

#[derive(Default)]
struct Collector {
    wanted: KeySet,
    /// The ids of the wanted turns.
    ids: Vec<Vec<u8>>,
    begun: KeySet,
    ended: KeySet,
    out: Walked,
}

impl Collector {
    fn decode(&mut self, seg: &SegmentData, fr: &RawFrame<'_>) {
        let v = RecordView::new(fr.kind, fr.payload);
        if let Some(k) = v.turn() {
            match v.kind() {
                Some(Kind::TurnBegun) => {
                    self.begun.insert(short(k));
                }
                Some(Kind::TurnEnded) => {
                    self.ended.insert(short(k));
                }
                _ => {}
            }
        }
        self.out.decode(seg, fr);
    }

    fn merge(&mut self, part: Collector) {
        self.wanted.extend(part.wanted);
        self.ids.extend(part.ids);
        self.begun.extend(part.begun);
        self.ended.extend(part.ended);
        self.out.merge(part.out);
    }
}

/// Streams one segment: hits, frames, and the records to decode.
fn scan_segment(seg: &SegmentData, re: &Matcher, c: &mut Collector) {
    if let Err(reason) = seg.header() {
        c.out.damaged.push(Damaged {
            path: seg.path.clone(),
            offset: Some(0),
            reason,
        });
        return;
    }
    let data = seg.bytes();
    let base = seg.base as usize;
    // Recent frames not decoded, for turns found later: (offset in `data`, key).
    let mut window: VecDeque<(usize, u128)> = VecDeque::with_capacity(WINDOW);
    let mut hits: Vec<usize> = Vec::new();
    let mut at = HEADER_LEN.max(base) - base;
    let mut chunk_start = 0;
    let mut damage = None;
    while chunk_start < data.len() && damage.is_none() {
        let chunk_end = (chunk_start + CHUNK).min(data.len());
        // Hits starting in this chunk (a match may run past its end).
        hits.clear();
        let search_end = (chunk_end + 4096).min(data.len());
        hits.extend(
            re.find_iter(&data[chunk_start..search_end])
                .map(|m| chunk_start + m.start)
                .take_while(|&h| h < chunk_end),
        );
        let mut next_hit = 0;
        // Walk the frames that start in this chunk.
        while at < chunk_end {
            let fr = match seg.frame_at((base + at) as u64) {
                Ok(Some(fr)) => fr,
                Ok(None) => break,
                Err(d) => {
                    damage = Some(d);
                    break;
                }
            };
            let start = at;
            let end = at + fr.len as usize;
            at = end;
            let mut hit = false;
            while next_hit < hits.len() && hits[next_hit] < end {
                hit |= hits[next_hit] >= start;
                next_hit += 1;
            }
            let v = RecordView::new(fr.kind, fr.payload);
            let key = v.turn().map(short);
            if hit {
                if let (Some(k), Some(id)) = (key, v.turn()) {
                    if c.wanted.insert(k) {
                        c.ids.push(id.to_vec());
                        // The turn's earlier records, from the window.
                        for &(o, wk) in window.iter() {
                            if wk == k {
                                if let Ok(Some(e)) = seg.frame_at((base + o) as u64) {
                                    c.decode(seg, &e);
                                }
                            }
                        }
                    }
                }
            }
            if always(&v) || key.is_some_and(|k| c.wanted.contains(&k)) {
                c.decode(seg, &fr);
            } else if let Some(k) = key {
                if window.len() == WINDOW {
                    window.pop_front();
                }
                window.push_back((start, k));
            }
        }
        chunk_start = chunk_end;
    }
    if let Some(crate::ledger::Damage::Corrupt { offset, reason }) = damage {
        c.out.damaged.push(Damaged {
            path: seg.path.clone(),
            offset: Some(offset),
            reason,
        });
    }
}

/// The ids of the turns that have a record holding a byte match of `re` in `seg`: what the
/// first pass of an indexed search needs of a segment it has no index of (the newest
/// records), whose records the second pass reads. Its frames are walked only when it has a
/// match (a rare word's search of the newest 53 KB walked 130 frames for none).
fn hit_turns(seg: &SegmentData, re: &Matcher) -> Vec<Vec<u8>> {
    let data = seg.bytes();
    let start = HEADER_LEN.max(seg.base as usize) - seg.base as usize;
    let Some(tail) = data.get(start..) else {
        return Vec::new();
    };
    let mut hits = re.find_iter(tail).map(|m| start + m.start).peekable();
    if hits.peek().is_none() {
        return Vec::new();
    }
    let mut ids: Vec<Vec<u8>> = Vec::new();
    let mut seen = KeySet::default();
    // Damage is reported by the second pass, which walks the same frames.
    seg.frames_kept(
        |fr| {
            let end = (fr.offset + fr.len - seg.base) as usize;
            let mut hit = false;
            while hits.next_if(|&h| h < end).is_some() {
                hit = true;
            }
            if let Some(turn) = hit
                .then(|| RecordView::new(fr.kind, fr.payload).turn())
                .flatten()
            {
                if seen.insert(short(turn)) {
                    ids.push(turn.to_vec());
                }
            }
        },
        |_| {},
    );
    ids
}

/// Set (to anything) to answer every search by scanning, as before the term indexes (for
/// benchmarks that compare the two).
pub const SCAN_ENV: &str = "AXOCOATL_SEARCH_SCAN";

/// Past this many candidate turns, scanning every byte is faster than reading each turn
/// through the indexes.
const INDEXED_LIMIT: usize = 2000;

/// What the first pass of an indexed search found: the plan of the second, as a value.
struct Found {
    /// Per part of the ledger's plan.
    parts: Vec<FoundIn>,
    /// Turns found by scanning a segment (the newest records, a damaged index): looked up
    /// in every part.
    scanned: HashSet<Vec<u8>, Keyed>,
}

/// The turns with a candidate record in one part of the plan.
#[derive(Default)]
struct FoundIn {
    /// The rows of those the index names.
    rows: Vec<u32>,
    /// Their ids where their records may lie in other segments too (the first `named`),
    /// then the ids of those found by a record's offset.
    ids: Vec<Vec<u8>>,
    /// How many of `ids` name turns of `rows`.
    named: usize,
    /// Walked (no index, or one found damaged) rather than read through its index.
    walked: bool,
}

impl FoundIn {
    /// The turns of the candidate `values` (turn rows and record offsets) of a segment's
    /// index. With `alone`, no turn of the segment has records in another, and the ids of
    /// its rows are not needed.
    fn of(
        seg: &SegmentData,
        index: &Index,
        values: Vec<u32>,
        alone: bool,
    ) -> Result<FoundIn, Stale> {
        let (turn_rows, offsets): (Vec<u32>, Vec<u32>) =
            values.into_iter().partition(|v| v & TURN_POSTING != 0);
        let mut ids: Vec<Vec<u8>> = if alone {
            Vec::new()
        } else {
            turn_rows
                .iter()
                .map(|v| index.turn_id(v & !TURN_POSTING))
                .collect::<Result<_, _>>()?
        };
        let named = ids.len();
        let mut sparse = seg.sparse(offsets.len());
        for offset in offsets.into_iter().map(u64::from) {
            let fr = sparse.as_mut().and_then(|s| s.frame_at(offset));
            let fr = fr.or_else(|| seg.frame_at(offset).ok().flatten());
            if let Some(turn) = fr.and_then(|fr| RecordView::new(fr.kind, fr.payload).turn()) {
                if !ids.iter().any(|id| id == turn) {
                    ids.push(turn.to_vec());
                }
            }
        }
        Ok(FoundIn {
            rows: turn_rows.iter().map(|v| v & !TURN_POSTING).collect(),
            ids,
            named,
            walked: false,
        })
    }
}

/// Whether part `k` of a plan is an index with turns open at its end.
fn ends_open(parts: &[Part], k: usize) -> bool {
    match &parts[k] {
        Part::Indexed { index, .. } => !index.meta.open.is_empty(),
        _ => false,
    }
}

/// Whether turn `id` is open at the end of part `k` of a plan.
fn open_at_end(parts: &[Part], k: usize, id: &[u8]) -> bool {
    match &parts[k] {
        Part::Indexed { index, .. } => index.meta.open.iter().any(|o| o.turn.as_bytes() == id),
        _ => false,
    }
}

impl Found {
    /// Whether no turn of part `i` can have records in another part: none is open at its
    /// end, and the part before is unreadable or read through an index at whose end none
    /// is open (a walked one may have begun any).
    fn alone(&self, parts: &[Part], i: usize) -> bool {
        !ends_open(parts, i)
            && (i == 0
                || (!self.parts[i - 1].walked && !ends_open(parts, i - 1))
                || matches!(parts[i - 1], Part::Unreadable(_)))
    }

    /// Where each turn found has records, per part (a turn open at the end of a segment
    /// has records in the next; few are), and the turns whose segments cannot be told (a
    /// walked segment lies next to them, or they were `scanned`), which are looked up
    /// everywhere.
    fn where_turns_lie(
        &self,
        parts: &[Part],
        scanned: HashSet<Vec<u8>, Keyed>,
    ) -> (Vec<TurnIds<'_>>, HashSet<Vec<u8>, Keyed>) {
        let indexed = |i: usize| !self.parts[i].walked && matches!(parts[i], Part::Indexed { .. });
        let mut want: Vec<TurnIds<'_>> = vec![HashSet::default(); parts.len()];
        let mut everywhere = scanned;
        for (j, found) in self.parts.iter().enumerate() {
            for (n, id) in found.ids.iter().enumerate() {
                // The ids of turns found by a record's offset follow those of the rows.
                if n >= found.named {
                    want[j].insert(id);
                }
                let mut broken = false;
                // Back to the segment it began in...
                let mut k = j;
                while k > 0 {
                    if !indexed(k - 1) {
                        broken = !matches!(parts[k - 1], Part::Unreadable(_));
                        break;
                    }
                    if !open_at_end(parts, k - 1, id) {
                        break;
                    }
                    k -= 1;
                    want[k].insert(id);
                }
                // ... and on to the one it ended in.
                let mut k = j;
                while k + 1 < parts.len() && open_at_end(parts, k, id) {
                    k += 1;
                    want[k].insert(id);
                    if !indexed(k) {
                        broken = k + 1 < parts.len();
                        break;
                    }
                }
                if broken {
                    everywhere.insert(id.clone());
                }
            }
        }
        (want, everywhere)
    }
}

/// The searches of a ledger: search/ reads the ledger's bytes and its term indexes through
/// the indexed ledger, and searching is this type's, not the index's.
#[derive(Clone, Copy, Debug)]
pub struct Searcher<'l> {
    ix: &'l Reader,
}

impl<'l> Searcher<'l> {
    /// The searches of `ix`.
    pub fn new(ix: &'l Reader) -> Searcher<'l> {
        Searcher { ix }
    }

    /// The turns that can match the literal, case-insensitive `text` (`re` is its byte
    /// matcher), whole, and what decides whether they are superseded (rewind boundaries, the
    /// turns they target). A superset of the real matches: the caller checks each turn's
    /// text. The term indexes of sealed segments answer when they can; otherwise, and for
    /// the newest segment, the bytes are scanned.
    pub fn read_matching(&self, re: &Matcher, text: &str) -> Result<Walked> {
        if std::env::var_os(SCAN_ENV).is_none() {
            if let Some(needs) = crate::index::terms::needs(text) {
                if let Some(found) = self.read_matching_indexed(re, &needs)? {
                    return Ok(found);
                }
            }
        }
        self.read_matching_scan(re)
    }

    /// [`Searcher::read_matching`] through the term indexes; `None` when they cannot
    /// narrow the search enough. One plan of the ledger serves both passes: the turns with a
    /// candidate record ([`Searcher::find_turns`]), then their records and every rewind
    /// boundary ([`Searcher::read_found`]). A turn's records lie in the segment it began
    /// in and in those it was carried into (open at the end of the one before), so a turn is
    /// looked up in those segments only ([`Found::where_turns_lie`]).
    fn read_matching_indexed(&self, re: &Matcher, needs: &[Need]) -> Result<Option<Walked>> {
        let plan = self.ix.plan()?;
        let parts = plan.parts();
        let Some(found) = self.find_turns(parts, re, needs) else {
            return Ok(None);
        };
        let mut out = self.read_found(parts, found);
        drop(plan);
        self.ix.complete_rewinds(&mut out)?;
        Ok(Some(out))
    }

    /// Pass 1: the turns with a candidate, by the part they were found in; `None` when there
    /// are too many (or a dictionary cannot narrow a need). Turns found by a scan (the newest
    /// records, a damaged index) are looked up everywhere.
    fn find_turns(&self, parts: &[Part], re: &Matcher, needs: &[Need]) -> Option<Found> {
        let mut found = Found {
            parts: (0..parts.len()).map(|_| FoundIn::default()).collect(),
            scanned: HashSet::default(),
        };
        let mut count = 0;
        // The sealed segments a merged term index covers are looked up in it, once for all.
        let chosen = crate::index::chosen(needs);
        let mut merged = self.merged_values(parts, &chosen);
        for (i, part) in parts.iter().enumerate() {
            let seg = match part {
                Part::Indexed { seg, index } => {
                    let values = match merged[i].take() {
                        Some(mut values) => {
                            index.candidates_of(chosen.iter().copied(), INDEXED_LIMIT, |k, _| {
                                Ok(Some(std::mem::take(&mut values[k])))
                            })
                        }
                        None => index.candidates(needs, INDEXED_LIMIT),
                    };
                    let alone = found.alone(parts, i);
                    match values.map(|v| v.map(|v| FoundIn::of(seg, index, v, alone))) {
                        Ok(Some(Ok(part))) => {
                            count += part.rows.len() + part.ids.len() - part.named;
                            if count > INDEXED_LIMIT {
                                return None;
                            }
                            found.parts[i] = part;
                            continue;
                        }
                        Ok(None) => return None,
                        Ok(Some(Err(Stale))) | Err(Stale) => {
                            self.ix.forget_index(seg.number);
                            seg
                        }
                    }
                }
                Part::Raw { seg } => seg,
                Part::Unreadable(_) => continue,
            };
            found.parts[i].walked = true;
            found.scanned.extend(hit_turns(seg, re));
        }
        Some(found)
    }

    /// Pass 2: rewind boundaries, and the records of the turns found; an index found damaged
    /// in the first pass is not asked again (its segment is walked).
    fn read_found(&self, parts: &[Part], mut found: Found) -> Walked {
        let scanned = std::mem::take(&mut found.scanned);
        let (want, everywhere) = found.where_turns_lie(parts, scanned);
        // The turns that may have records in a walked segment.
        let all: TurnIds<'_> = found
            .parts
            .iter()
            .flat_map(|p| &p.ids)
            .chain(&everywhere)
            .map(Vec::as_slice)
            .collect();
        self.ix.read_parts(
            parts,
            crate::index::Read {
                lookup: &|i, index| {
                    if found.parts[i].walked {
                        return Err(Stale);
                    }
                    let mut offsets = index.offsets(crate::index::Section::Rewinds)?;
                    for &row in &found.parts[i].rows {
                        index.add_turn_offsets_at(u64::from(row), &mut offsets)?;
                    }
                    for id in want[i]
                        .iter()
                        .copied()
                        .chain(everywhere.iter().map(Vec::as_slice))
                    {
                        offsets.extend(index.turn_offsets(id)?);
                    }
                    Ok(offsets)
                },
                keep: &mut |v| {
                    v.kind() == Some(Kind::RewindBoundary)
                        || (!all.is_empty() && v.turn().is_some_and(|t| all.contains(t)))
                },
                carried: &mut |_| {},
            },
        )
    }

    /// For each part of `parts` that a merged term index covers, the values that index gives
    /// for each of the `chosen` needs (what the segment's own dictionary would give); `None`
    /// for the others, which their own dictionaries answer (those of a merged index that
    /// found a need in too many words of its span, too).
    fn merged_values(&self, parts: &[Part], chosen: &[&Need]) -> Vec<Option<Vec<Vec<u64>>>> {
        let mut merged: Vec<Option<Vec<Vec<u64>>>> = (0..parts.len()).map(|_| None).collect();
        for c in self.ix.tiers_for(parts) {
            let mut per_need = Vec::with_capacity(chosen.len());
            for need in chosen {
                match c.tier.values(need, INDEXED_LIMIT * 4) {
                    Ok(Some(v)) => per_need.push(v),
                    Ok(None) => break,
                    Err(Stale) => {
                        // Damaged where it was read: its segments answer alone, and the next
                        // search builds it again.
                        self.ix.forget_tier(c.tier.first, c.tier.last);
                        break;
                    }
                }
            }
            if per_need.len() == chosen.len() {
                for k in 0..c.tier.len() {
                    merged[c.start + k] = Some(
                        per_need
                            .iter_mut()
                            .map(|v| std::mem::take(&mut v[k]))
                            .collect(),
                    );
                }
            }
        }
        merged
    }

    /// Every turn with a byte match of `re`, by scanning every segment.
    pub(crate) fn read_matching_scan(&self, re: &Matcher) -> Result<Walked> {
        // Segments are scanned in parallel, one per core at a time. A turn whose records
        // span a segment boundary is then incomplete in the merged result (its begin or end
        // was in a segment whose scan did not know it was wanted), which the check below
        // catches.
        let set = self.ix.ledger().segment_set()?;
        let numbers = set.numbers.clone();
        let newest = numbers.last().copied().unwrap_or(0);
        let parts = parallel_map(&numbers, |number| {
            let mut part = Collector::default();
            match crate::ledger::segment::load(
                &self.ix.ledger().segment_path(number),
                number,
                number < newest,
                0,
            ) {
                Ok(seg) => scan_segment(&seg, re, &mut part),
                Err(e) => part.out.damaged.push(Damaged::from_error(e)),
            }
            part
        });
        let mut c = Collector::default();
        // A missing segment is damage: its records are lost, and a reader must say so.
        c.out.damaged.extend(
            set.problems(self.ix.ledger().dir())
                .into_iter()
                .map(Damaged::from_error),
        );
        for part in parts {
            c.merge(part);
        }
        // Rewind targets must be projected, or later turns could not be marked superseded.
        let targets: Vec<Vec<u8>> = c
            .out
            .entries
            .iter()
            .filter_map(|e| match &e.record {
                Some(Record::RewindBoundary(r)) => Some(r.target.as_bytes().to_vec()),
                _ => None,
            })
            .collect();
        // Turns whose begin or end was not collected (they cross a segment boundary, fell
        // out of the window, or are still running) are read whole through the indexes.
        let missing: HashSet<Vec<u8>> = c
            .ids
            .iter()
            .filter(|id| {
                let k = short(id);
                !c.begun.contains(&k) || !c.ended.contains(&k)
            })
            .chain(targets.iter().filter(|id| !c.begun.contains(&short(id))))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let more = self.ix.read_turns(&missing)?;
            c.out.merge(more);
        }
        c.out.sort();
        Ok(c.out)
    }
}
