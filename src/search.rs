//! Fast literal search over the ledger, for `history --search`.
//!
//! A full projection decodes every record. Search instead streams each memory-mapped
//! segment once, in chunks that stay in the CPU cache: one case-insensitive literal regex
//! (the engine ripgrep uses) finds byte hits in a chunk, then the frames of that chunk are
//! walked (headers only) to map each hit to its record and turn. Only the records of turns
//! with a hit, and the few kinds every projection needs (sessions, rewinds, attachments),
//! are checksummed and decoded. Text is stored as UTF-8 inside the postcard payloads, so
//! every textual match is a byte match; a byte hit that is not a real match (in an id, or
//! across two fields) is dropped by the exact check the caller runs on the decoded turn.
//!
//! A turn's earlier records are found in a window of recent frames. Segments are scanned in
//! parallel; a wanted turn whose begin or end record was not collected (it fell out of the
//! window, crossed a segment boundary, or is still running) sends the search through a
//! second, full pass, so the result is always complete.

use std::collections::{HashSet, VecDeque};

use axocoatl_store::ledger::{Entry, RawFrame, SegmentData};
use axocoatl_store::Repo;
use regex::bytes::{Regex, RegexBuilder};

use crate::error::{Result, RuntimeError};
use crate::history::{self, Projection};

/// Kinds whose first field is the turn id (a postcard string: length byte, then the id).
const TURN_FIRST: &[u16] = &[2, 3, 4, 5, 6, 7, 8];
const TURN_BEGUN: u16 = 2;
const TURN_ENDED: u16 = 3;
/// `Warning`: an optional turn id first.
const WARNING: u16 = 10;
/// Kinds always decoded: sessions, rewinds, attachments.
const ALWAYS: &[u16] = &[1, 9, 11, 12, 13];
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

type KeySet = HashSet<u128, std::hash::BuildHasherDefault<KeyHasher>>;

/// The matcher `--search TEXT` uses on raw bytes.
pub fn byte_matcher(text: &str) -> Result<Regex> {
    RegexBuilder::new(&regex::escape(text))
        .case_insensitive(true)
        .unicode(true)
        .build()
        .map_err(|e| RuntimeError::Invalid {
            message: format!("cannot search for {text:?}: {e}"),
            hint: "search for a shorter text".into(),
        })
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

/// Projects one session's turns (plus every session, rewind and attachment record) without
/// decoding the other sessions' records: a `TurnBegun`'s session is read from its payload
/// prefix (turn id, then session), and later records of a turn are recognised by their
/// leading turn id. `send` uses it so that a long ledger of other sessions costs a frame
/// walk, not a full decode.
pub fn project_session(repo: &Repo, session: &str) -> Result<Projection> {
    let turns = std::cell::RefCell::new(KeySet::default());
    history::project_repo_filtered(repo, &|kind, payload| {
        if kind == TURN_BEGUN {
            let of_session = postcard_str(payload)
                .and_then(|(_, rest)| postcard_str(rest))
                .is_some_and(|(s, _)| s == session.as_bytes());
            if of_session {
                if let Some(k) = turn_key(kind, payload) {
                    turns.borrow_mut().insert(short(k));
                }
            }
            return of_session;
        }
        ALWAYS.contains(&kind)
            || turn_key(kind, payload).is_some_and(|k| turns.borrow().contains(&short(k)))
    })
}

/// The projection a command scoped to `session` (or to every session, with `None`) needs:
/// with one session, the other sessions' records are walked over, not decoded.
pub fn project_scope(repo: &Repo, session: Option<&str>) -> Result<Projection> {
    match session {
        Some(s) => project_session(repo, s),
        None => history::project_repo(repo),
    }
}

/// Projects only the turns whose id starts with `prefix` (plus every session, rewind and
/// attachment record): enough to resolve a turn id or prefix and to show that turn whole,
/// without decoding the rest of the ledger. Every turn sharing the prefix is kept, so an
/// ambiguous prefix is still reported as such.
pub fn project_prefix(repo: &Repo, prefix: &str) -> Result<Projection> {
    let prefix = prefix.trim().to_ascii_lowercase();
    history::project_repo_filtered(repo, &|kind, payload| {
        ALWAYS.contains(&kind)
            || turn_key(kind, payload).is_some_and(|k| k.starts_with(prefix.as_bytes()))
    })
}

/// The turn id a record's payload starts with, without decoding it.
pub fn turn_key(kind: u16, payload: &[u8]) -> Option<&[u8]> {
    let rest = if TURN_FIRST.contains(&kind) {
        payload
    } else if kind == WARNING && payload.first() == Some(&1) {
        &payload[1..]
    } else {
        return None;
    };
    let len = *rest.first()? as usize;
    if len >= 0x80 {
        return None; // ids are short; a multi-byte length is not one
    }
    rest.get(1..1 + len)
}

#[derive(Default)]
struct Collector {
    wanted: KeySet,
    begun: KeySet,
    ended: KeySet,
    entries: Vec<Entry>,
    problems: Vec<String>,
}

impl Collector {
    fn decode(&mut self, seg: &SegmentData, fr: &RawFrame<'_>) {
        match seg.checked_entry(fr) {
            Ok(entry) => {
                if let Some(k) = turn_key(fr.kind, fr.payload) {
                    match fr.kind {
                        TURN_BEGUN => {
                            self.begun.insert(short(k));
                        }
                        TURN_ENDED => {
                            self.ended.insert(short(k));
                        }
                        _ => {}
                    }
                }
                self.entries.push(entry);
            }
            Err(e) => self.problems.push(e.to_string()),
        }
    }
}

/// A turn key as a number: the 16 bytes of an id, or a hash of anything else.
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

/// Streams one segment: hits, frames, and the records to decode.
fn scan_segment(seg: &SegmentData, re: &Regex, c: &mut Collector) {
    if let Err(reason) = seg.header() {
        c.problems.push(format!(
            "ledger corrupt: {} at byte 0: {reason}",
            seg.path.display()
        ));
        return;
    }
    let data = seg.bytes();
    let base = seg.base as usize;
    // Recent frames not decoded, for turns found later: (offset in `data`, key).
    let mut window: VecDeque<(usize, u128)> = VecDeque::with_capacity(WINDOW);
    let mut hits: Vec<usize> = Vec::new();
    let mut at = axocoatl_store::ledger::HEADER_LEN.max(base) - base;
    let mut chunk_start = 0;
    let mut damage = None;
    while chunk_start < data.len() && damage.is_none() {
        let chunk_end = (chunk_start + CHUNK).min(data.len());
        // Hits starting in this chunk (a match may run past its end).
        hits.clear();
        let search_end = (chunk_end + 4096).min(data.len());
        hits.extend(
            re.find_iter(&data[chunk_start..search_end])
                .map(|m| chunk_start + m.start())
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
            let key = turn_key(fr.kind, fr.payload).map(short);
            if hit {
                if let Some(k) = key {
                    if c.wanted.insert(k) {
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
            if ALWAYS.contains(&fr.kind) || key.is_some_and(|k| c.wanted.contains(&k)) {
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
    if let Some(axocoatl_store::ledger::Damage::Corrupt { offset, reason }) = damage {
        c.problems.push(format!(
            "ledger corrupt: {} at byte {offset}: {reason}",
            seg.path.display()
        ));
    }
}

/// Projects only the turns that can match `text`; the caller filters them exactly.
pub fn search(repo: &Repo, text: &str) -> Result<Projection> {
    let re = byte_matcher(text)?;
    let ledger = repo.ledger();
    // Segments are scanned in parallel, one per core at a time. A turn whose records span a
    // segment boundary is then incomplete in the merged result (its begin or end was in a
    // segment whose scan did not know it was wanted), which the check below catches.
    let numbers = ledger.segment_numbers()?;
    let parts = axocoatl_store::ledger::parallel_map(&numbers, |number| {
        let mut part = Collector::default();
        match ledger.load_segment(number) {
            Ok(seg) => scan_segment(&seg, &re, &mut part),
            Err(e) => part.problems.push(e.to_string()),
        }
        part
    });
    let mut c = Collector::default();
    for part in parts {
        c.wanted.extend(part.wanted);
        c.begun.extend(part.begun);
        c.ended.extend(part.ended);
        c.entries.extend(part.entries);
        c.problems.extend(part.problems);
    }
    // Rewind targets must be projected, or later turns could not be marked superseded.
    let targets: Vec<u128> = c
        .entries
        .iter()
        .filter_map(|e| match &e.record {
            Some(axocoatl_store::ledger::Record::RewindBoundary(r)) => {
                Some(short(r.target.as_bytes()))
            }
            _ => None,
        })
        .collect();
    let complete = targets.iter().all(|t| c.begun.contains(t))
        && c.wanted
            .iter()
            .all(|t| c.begun.contains(t) && c.ended.contains(t));
    if !complete {
        let mut wanted = c.wanted;
        wanted.extend(targets);
        return history::project_repo_filtered(repo, &|kind, payload| {
            ALWAYS.contains(&kind)
                || turn_key(kind, payload).is_some_and(|k| wanted.contains(&short(k)))
        });
    }
    c.entries.sort_by_key(|e| e.pos);
    history::project_entries(repo, c.entries, c.problems)
}
