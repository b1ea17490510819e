//! Fast literal search over the ledger, for `history --search`.
//!
//! A full projection decodes every record. Search instead runs one case-insensitive literal
//! regex (the same engine as ripgrep) over the raw bytes of each segment, memory-mapped, and
//! maps each hit to the frame it falls in; only the turns with a hit are then decoded. Text
//! in a record is stored as UTF-8 inside its postcard payload, so every textual match is a
//! byte match; a byte hit that is not a real match (in an id, or across two fields) is
//! dropped by the exact check the caller runs on the decoded turn.

use std::collections::HashSet;

use axocoatl_store::Repo;
use regex::bytes::{Regex, RegexBuilder};

use crate::error::{Result, RuntimeError};
use crate::history::{self, Projection};

/// Kinds whose first field is the turn id (a postcard string: length byte, then 16 bytes).
const TURN_FIRST: &[u16] = &[2, 3, 4, 5, 6, 7, 8];
/// `Warning`: an optional turn id first.
const WARNING: u16 = 10;
const REWIND: u16 = 9;
/// Kinds always decoded: sessions, rewinds, attachments.
const ALWAYS: &[u16] = &[1, 9, 11, 12, 13];

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

/// The ids of turns with at least one byte-level hit.
fn candidates(repo: &Repo, re: &Regex) -> Result<HashSet<Vec<u8>>> {
    let ledger = repo.ledger();
    let mut out = HashSet::new();
    for number in ledger.segment_numbers()? {
        let Ok(seg) = ledger.load_segment(number) else {
            continue;
        };
        let bytes = seg.bytes();
        let base = seg.base;
        let mut hits = re
            .find_iter(bytes)
            .map(|m| base + m.start() as u64)
            .peekable();
        // Frames come in file order, like the hits: walk both together. A hit in a record
        // without a leading turn id (an attachment's name) needs no entry here: the turns
        // that pinned it carry the name in their own begin record.
        seg.frames(0, |fr| {
            // A rewind's target must be decoded too, or the turns after it could not be
            // marked superseded.
            if fr.kind == REWIND {
                if let Ok(Some(axocoatl_store::ledger::Record::RewindBoundary(r))) =
                    axocoatl_store::ledger::decode(fr.kind, fr.payload)
                {
                    out.insert(r.target.into_bytes());
                }
            }
            let end = fr.offset + fr.len;
            let mut hit = false;
            while let Some(&h) = hits.peek() {
                if h >= end {
                    break;
                }
                if h >= fr.offset {
                    hit = true;
                }
                hits.next();
            }
            if hit {
                if let Some(key) = turn_key(fr.kind, fr.payload) {
                    out.insert(key.to_vec());
                }
            }
        });
    }
    Ok(out)
}

/// Projects only the turns that can match `text`; the caller filters them exactly.
pub fn search(repo: &Repo, text: &str) -> Result<Projection> {
    let re = byte_matcher(text)?;
    let wanted = candidates(repo, &re)?;
    history::project_repo_filtered(repo, &|kind, payload| {
        ALWAYS.contains(&kind) || turn_key(kind, payload).is_some_and(|k| wanted.contains(k))
    })
}
