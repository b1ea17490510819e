//! The reads the indexes answer: a session, turns by id or prefix, rewinds, subtasks and
//! attachments. Each finds its records in a sealed segment through the segment's index and
//! walks the segments without one.

use std::cell::RefCell;
use std::collections::HashSet;

use super::{Index, Part, Reader, Section, Stale};
use crate::ledger::record::{Kind, Record, RecordView};
use crate::ledger::{decode_at, select, Walked};
use crate::Result;

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

impl Reader {
    /// Reads through the indexes of sealed segments, walking the rest.
    fn read(&self, r: Read<'_>) -> Result<Walked> {
        Ok(self.read_parts(self.plan()?.parts(), r))
    }

    /// [`Reader::read`] of the parts of a plan already made.
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

    /// The records of one session: those that name it, and every record of its turns.
    pub fn read_session(&self, session: &str) -> Result<Walked> {
        // Its turns begun in earlier segments and still open (carried), and those begun here.
        let turns: RefCell<HashSet<Vec<u8>>> = RefCell::default();
        let plan = self.plan_session(session)?;
        Ok(self.read_parts(
            plan.parts(),
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

#[cfg(test)]
#[path = "read_tests.rs"]
pub(crate) mod tests;
