//! Session summaries and token usage, merged from the indexes without reading records.

use std::collections::BTreeMap;

use super::{Builder, Index, OpenTurn, Part, SessionRow, Stale, UsageRow};
use crate::index::Reader;
use crate::ledger::record::Millis;
use crate::ledger::segment::SegmentData;
use crate::ledger::Damaged;
use crate::Result;

/// One session as the ledger summarises it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionSummary {
    pub session: String,
    /// Turns begun.
    pub turns: u64,
    /// When the first record naming the session was written.
    pub created_at: Option<Millis>,
    /// The latest time of a record naming the session.
    pub last_activity: Option<Millis>,
}

/// Sessions, usage and open turns of the whole ledger (or one session).
#[derive(Debug, Default)]
pub struct Summaries {
    pub sessions: BTreeMap<String, SessionSummary>,
    /// Usage rows by session; several rows may share a session, agent and day (they add up
    /// exactly: each turn's and each worker's usage is in the rows once, see [`UsageRow`]).
    pub usage: Vec<(String, UsageRow)>,
    /// Turns begun and not ended, in ledger order.
    pub open: Vec<OpenTurn>,
    /// Damage met, and (with the usage) the records whose usage could not be attributed
    /// exactly.
    pub damaged: Vec<Damaged>,
}

impl Summaries {
    fn add(
        &mut self,
        index: &Index,
        seg: &SegmentData,
        only: Option<&str>,
        with_usage: bool,
    ) -> Result<(), Stale> {
        let rows: Vec<(String, SessionRow)> = match only {
            Some(name) => index
                .session(name)?
                .map(|row| (name.to_owned(), row))
                .into_iter()
                .collect(),
            None => index.sessions()?,
        };
        let mut usage = Vec::new();
        if with_usage {
            for (name, row) in &rows {
                for u in index.usage(row)? {
                    usage.push((name.clone(), u));
                }
            }
        }
        for (name, row) in rows {
            // Looked up before inserting: most sessions are in many segments.
            let s = match self.sessions.get_mut(&name) {
                Some(s) => s,
                None => self.sessions.entry(name.clone()).or_insert(SessionSummary {
                    session: name,
                    ..SessionSummary::default()
                }),
            };
            s.turns += u64::from(row.turns);
            s.created_at = s.created_at.or(row.first_at);
            s.last_activity = match (s.last_activity, row.last_at) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        self.usage.extend(usage);
        self.damaged.extend(index.damaged(seg));
        if with_usage {
            self.damaged.extend(index.usage_damaged(seg, only));
        }
        self.open = index.meta.open.clone();
        Ok(())
    }
}

impl Reader {
    /// The summaries of every session (`None`) or of one, from the indexes of the sealed
    /// segments and a reading of the newest.
    pub fn summaries(&self, only: Option<&str>) -> Result<Summaries> {
        self.summarise(only, true)
    }

    /// [`Reader::summaries`] of every session without their usage rows (`sessions`).
    pub fn session_summaries(&self) -> Result<Summaries> {
        self.summarise(None, false)
    }

    fn summarise(&self, only: Option<&str>, with_usage: bool) -> Result<Summaries> {
        let mut out = Summaries::default();
        let parts = match only {
            Some(session) => self.plan_session(session)?,
            None => self.plan()?,
        }
        .into_parts();
        let newest = parts.iter().filter_map(Part::segment).max();
        // `sessions` starts from the cache of the sealed segments' summary when it still
        // describes their indexes, and extends it.
        let cached = only.is_none() && !with_usage;
        let mut stamps: Vec<CacheStamp> = Vec::new();
        let mut skip = 0;
        if let Some(cache) = cached.then(|| self.read_sessions_cache()).flatten() {
            let fits = cache.stamps.len() <= parts.len()
                && cache
                    .stamps
                    .iter()
                    .zip(&parts)
                    .all(|(stamp, part)| sealed_stamp(part, newest) == Some(*stamp));
            if fits {
                out.sessions = cache
                    .sessions
                    .into_iter()
                    .map(|s| (s.session.clone(), s))
                    .collect();
                out.open = cache.open;
                skip = cache.stamps.len();
                stamps = cache.stamps;
            }
        }
        let mut cacheable = cached;
        for part in parts.into_iter().skip(skip) {
            let stamp = sealed_stamp(&part, newest);
            if part.segment() == newest && cacheable && stamps.len() > skip {
                cacheable = false;
                self.write_sessions_cache(&stamps, &out);
            }
            let (seg, index) = match part {
                Part::Indexed { seg, index } => (seg, Some(index)),
                Part::Raw { seg } => (seg, None),
                Part::Unreadable(d) => {
                    out.damaged.push(d);
                    cacheable = false;
                    continue;
                }
            };
            if let Some(index) = &index {
                if out.add(index, &seg, only, with_usage).is_ok() {
                    match stamp {
                        Some(stamp) if out.damaged.is_empty() => stamps.push(stamp),
                        Some(_) => cacheable = false,
                        None => {}
                    }
                    continue;
                }
                self.forget_index(seg.number);
            }
            if Some(seg.number) != newest {
                cacheable = false;
            }
            // The newest records, or a damaged index: summarise the segment itself.
            let built = Builder::summary_of(&seg)
                .and_then(|b| Index::from_built(b.finish(&seg, &out.open).0));
            match built {
                Some(index) => {
                    let _ = out.add(&index, &seg, only, with_usage);
                }
                None => out.damaged.push(Damaged {
                    path: seg.path.clone(),
                    offset: None,
                    reason: "the segment is too large to summarise".into(),
                }),
            }
        }
        if let Some(name) = only {
            out.open.retain(|o| o.session == name);
        }
        Ok(out)
    }

    fn sessions_cache_path(&self) -> std::path::PathBuf {
        self.index_dir().join(SESSIONS_CACHE)
    }

    /// The cache of the sealed segments' session summaries, if it is intact.
    fn read_sessions_cache(&self) -> Option<SessionsCache> {
        let bytes = std::fs::read(self.sessions_cache_path()).ok()?;
        postcard::from_bytes(super::open_cache(CACHE_MAGIC, &bytes)?).ok()
    }

    /// Writes the cache (best effort, unsynced: a cache).
    fn write_sessions_cache(&self, stamps: &[CacheStamp], out: &Summaries) {
        let cache = SessionsCache {
            stamps: stamps.to_vec(),
            sessions: out.sessions.values().cloned().collect(),
            open: out.open.clone(),
        };
        let Ok(body) = postcard::to_allocvec(&cache) else {
            return;
        };
        let bytes = super::seal_cache(CACHE_MAGIC, &body);
        self.write_cache(&self.sessions_cache_path(), &bytes);
    }
}

/// The file of the sessions cache, beside the indexes.
pub(crate) use crate::layout::SESSIONS_CACHE_FILE as SESSIONS_CACHE;
const CACHE_MAGIC: &[u8] = b"AXOSESS2";

/// What ties the sessions cache to one sealed segment's index: segment number, bytes
/// covered, last sequence number, and the index's head checksum (which covers the checksum
/// of every section: the index, whole).
type CacheStamp = (u64, u64, u64, u32);

/// The sessions of the sealed segments (every session with its turns begun and first and
/// last activity), and the turns open at the end of the last one, as merged from their
/// indexes: what `sessions` would merge again from every index.
#[derive(serde::Serialize, serde::Deserialize)]
struct SessionsCache {
    stamps: Vec<CacheStamp>,
    sessions: Vec<SessionSummary>,
    open: Vec<OpenTurn>,
}

/// The stamp of a sealed segment's index, or `None` for any other part.
fn sealed_stamp(part: &Part, newest: Option<u64>) -> Option<CacheStamp> {
    match part {
        Part::Indexed { seg, index } if Some(seg.number) != newest => {
            let s = index.stamp;
            Some((s.segment, s.covered, s.last_seq, index.head_crc))
        }
        _ => None,
    }
}
