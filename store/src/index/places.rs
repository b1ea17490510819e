//! Where each session is: which sealed segments hold its records (`places.cache`, beside
//! the indexes), so that reading one session opens those segments and not every one.
//!
//! A `send` to a session reads that session's history first. Beside a year of other
//! sessions, opening and checking the index of every sealed segment (two files, two maps
//! and a few pages each) was most of what a `send` spent past its two flushes, to learn
//! from each that the session has no records there. The cache names, per session, the
//! segments whose index lists it (an index lists under a session the records of its turns
//! carried in open, even those that do not name it), and is
//! tied to the segment files themselves (number, inode, length and change time, as listed
//! and stat'ed), not to their indexes, so that using it opens nothing else. It is written
//! by the reader that had to open every index anyway, is never synced, and is ignored when
//! it does not describe the sealed segments exactly: a missing, stale or damaged cache
//! only costs the reading of every index.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Index, Part, Plan};
use crate::index::Reader;
use crate::ledger::frame::le_u32;
use crate::ledger::segment::load;
use crate::Result;

/// The file of the cache, beside the indexes.
pub(crate) use crate::layout::PLACES_CACHE_FILE as PLACES_CACHE;
const MAGIC: &[u8] = b"AXOPLAC1";

/// A sealed segment's file as listed and stat'ed. A sealed segment never changes; a file
/// put in its place has another inode, or (an inode number reused) another change time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileStamp {
    number: u64,
    ino: u64,
    len: u64,
    ctime: i64,
    ctime_nsec: i64,
}

/// What the cache describes: the sealed segments, and those every reading reads.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Head {
    /// The sealed segments, oldest first.
    files: Vec<FileStamp>,
    /// The digest of the turns carried into each one, as its index must have been built
    /// with (checked when the index is opened, since the one before it is not).
    carry_in: Vec<u32>,
    /// The segments every reading of a session reads (by position in `files`): those with
    /// records that could not be read or are of unknown kinds, which could be anyone's.
    always: Vec<u32>,
}

/// The cache as read: its head, and session name → (start << 32 | count) of that
/// session's runs of positions in `files` (first, count: two u32s each) in `runs`. Only
/// the head is decoded; a session is looked up in place.
struct Places<'a> {
    head: Head,
    sessions: fst::Map<&'a [u8]>,
    runs: &'a [u8],
}

/// The file (see `seal_cache`): the postcard head and the `fst` map (each after its u32
/// length), then the runs.
fn encode(head: &Head, at: &BTreeMap<String, Vec<(u32, u32)>>) -> Option<Vec<u8>> {
    let mut map = fst::MapBuilder::memory();
    let mut runs: Vec<u8> = Vec::new();
    for (name, list) in at {
        let start = (runs.len() / 8) as u64;
        for &(first, count) in list {
            runs.extend_from_slice(&first.to_le_bytes());
            runs.extend_from_slice(&count.to_le_bytes());
        }
        map.insert(name, start << 32 | list.len() as u64).ok()?;
    }
    let map = map.into_inner().ok()?;
    let head = postcard::to_allocvec(head).ok()?;
    let mut body = Vec::with_capacity(8 + head.len() + map.len() + runs.len());
    for part in [&head, &map] {
        body.extend_from_slice(&u32::try_from(part.len()).ok()?.to_le_bytes());
        body.extend_from_slice(part);
    }
    body.extend_from_slice(&runs);
    Some(super::seal_cache(MAGIC, &body))
}

impl<'a> Places<'a> {
    fn decode(bytes: &'a [u8]) -> Option<Places<'a>> {
        let mut rest = super::open_cache(MAGIC, bytes)?;
        let mut part = || -> Option<&'a [u8]> {
            let (len, tail) = rest.split_at_checked(4)?;
            let (part, tail) = tail.split_at_checked(le_u32(len) as usize)?;
            rest = tail;
            Some(part)
        };
        let head = postcard::from_bytes(part()?).ok()?;
        let sessions = fst::Map::new(part()?).ok()?;
        Some(Places {
            head,
            sessions,
            runs: rest,
        })
    }

    /// The positions of the segments that may hold `session`'s records, ascending, with
    /// the last one always among them (its open turns are where a walk of the newest
    /// segment starts); `None` if the cache is inconsistent.
    fn of(&self, session: &str) -> Option<Vec<usize>> {
        let files = self.head.files.len();
        let mut out: Vec<usize> = self.head.always.iter().map(|&p| p as usize).collect();
        if let Some(v) = self.sessions.get(session) {
            let (start, len) = ((v >> 32) as usize * 8, (v & 0xffff_ffff) as usize * 8);
            let runs = self.runs.get(start..start.checked_add(len)?)?;
            for run in runs.chunks_exact(8) {
                let (first, count) = (le_u32(&run[..4]) as usize, le_u32(&run[4..]) as usize);
                out.extend(first..first.checked_add(count)?);
            }
        }
        out.extend(files.checked_sub(1));
        out.sort_unstable();
        out.dedup();
        (out.last() < Some(&files)).then_some(out)
    }
}

/// The stamp of segment `number` (inode `ino`, as listed) now, if it can be stat'ed.
fn file_stamp(ledger: &crate::ledger::Ledger, number: u64, ino: u64) -> Option<FileStamp> {
    let m = std::fs::metadata(ledger.segment_path(number)).ok()?;
    (m.ino() == ino).then_some(FileStamp {
        number,
        ino,
        len: m.len(),
        ctime: m.ctime(),
        ctime_nsec: m.ctime_nsec(),
    })
}

impl Reader {
    fn places_path(&self) -> std::path::PathBuf {
        self.index_dir().join(PLACES_CACHE)
    }

    /// The plan of a reading of one session: the sealed segments that may hold its records
    /// and the newest, when the cache describes the sealed segments; else every segment
    /// (and the cache is written for the next reader).
    pub(crate) fn plan_session(&self, session: &str) -> Result<Plan> {
        if let Some(parts) = self.plan_places(session) {
            return Ok(Plan::of(parts));
        }
        let plan = self.plan()?;
        self.write_places(plan.parts());
        Ok(plan)
    }

    /// [`Reader::plan_session`] through the cache; `None` when it does not describe the
    /// sealed segments exactly, or an index it leads to cannot be used as it is.
    fn plan_places(&self, session: &str) -> Option<Vec<Part>> {
        let set = self.ledger.segment_set().ok()?;
        let (&newest, sealed) = set.numbers.split_last()?;
        if sealed.is_empty() || !set.missing.is_empty() {
            return None;
        }
        let bytes = std::fs::read(self.places_path()).ok()?;
        let places = Places::decode(&bytes)?;
        let head = &places.head;
        if head.files.len() != sealed.len() || head.carry_in.len() != sealed.len() {
            return None;
        }
        for ((stamp, &n), &ino) in head.files.iter().zip(sealed).zip(&set.inodes) {
            if file_stamp(&self.ledger, n, ino) != Some(*stamp) {
                return None;
            }
        }
        let wanted = places.of(session)?;
        let numbers: Vec<u64> = wanted.iter().map(|&p| sealed[p]).collect();
        let inodes: Vec<u64> = wanted.iter().map(|&p| set.inodes[p]).collect();
        let kept = self.sealed_memo.kept(&numbers, &inodes);
        let mut parts = Vec::with_capacity(wanted.len() + 2);
        let mut keep = Vec::new();
        for ((&p, kept), (&n, &ino)) in wanted.iter().zip(kept).zip(numbers.iter().zip(&inodes)) {
            let (seg, index) = match kept {
                Some(both) => both,
                None => {
                    let seg = load(&self.ledger.segment_path(n), n, true, 0).ok()?;
                    let index = Index::open(&self.index_path(n), &seg)?;
                    (Arc::new(seg), Arc::new(index))
                }
            };
            if index.carry_in() != head.carry_in[p] {
                return None;
            }
            keep.push((n, (ino, seg.clone(), index.clone())));
            parts.push(Part::Indexed { seg, index });
        }
        let (carry, last_seq) = match parts.last() {
            Some(Part::Indexed { index, .. }) => (index.meta.open.clone(), index.stamp.last_seq),
            _ => return None,
        };
        self.sealed_memo.add(keep);
        let inode = *set.inodes.last()?;
        self.plan_newest(newest, inode, &carry, Some(last_seq), &mut parts);
        Some(parts)
    }

    /// Writes the cache from a plan of every segment, when its sealed segments were all
    /// read through their indexes (best effort: a cache).
    fn write_places(&self, parts: &[Part]) {
        let Ok(set) = self.ledger.segment_set() else {
            return;
        };
        let Some((_, sealed)) = set.numbers.split_last() else {
            return;
        };
        if sealed.is_empty() || !set.missing.is_empty() || parts.len() < sealed.len() {
            return;
        }
        let mut head = Head::default();
        let mut at: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
        for (p, ((part, &n), &ino)) in parts.iter().zip(sealed).zip(&set.inodes).enumerate() {
            let Part::Indexed { seg, index } = part else {
                return;
            };
            let Some(stamp) = file_stamp(&self.ledger, n, ino) else {
                return;
            };
            if seg.number != n {
                return;
            }
            let p = p as u32;
            let listed = index.each_session_name(|name| match at.get_mut(name) {
                Some(runs) => match runs.last_mut() {
                    Some((first, count)) if *first + *count == p => *count += 1,
                    _ => runs.push((p, 1)),
                },
                None => {
                    at.insert(name.to_owned(), vec![(p, 1)]);
                }
            });
            if listed.is_err() {
                return;
            }
            if !index.meta.damaged.is_empty() || index.meta.unknown_kinds > 0 {
                head.always.push(p);
            }
            head.files.push(stamp);
            head.carry_in.push(index.carry_in());
        }
        if let Some(bytes) = encode(&head, &at) {
            self.write_cache(&self.places_path(), &bytes);
        }
    }
}
