//! Session summaries and token usage, merged from the indexes without reading records.

use std::collections::BTreeMap;

use super::{Builder, Index, OpenTurn, Part, SessionRow, Stale, UsageRow};
use crate::ledger::record::Millis;
use crate::ledger::segment::SegmentData;
use crate::ledger::walk::Damaged;
use crate::ledger::Ledger;
use crate::Result;

/// One session as the ledger summarises it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Usage rows by session; several rows may share a session, agent and day (they add up).
    pub usage: Vec<(String, UsageRow)>,
    /// Turns begun and not ended, in ledger order.
    pub open: Vec<OpenTurn>,
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
        self.open = index.meta.open.clone();
        Ok(())
    }
}

impl Ledger {
    /// The summaries of every session (`None`) or of one, from the indexes of the sealed
    /// segments and a reading of the newest.
    pub fn summaries(&self, only: Option<&str>) -> Result<Summaries> {
        self.summarise(only, true)
    }

    /// [`Ledger::summaries`] of every session without their usage rows (`sessions`).
    pub fn session_summaries(&self) -> Result<Summaries> {
        self.summarise(None, false)
    }

    fn summarise(&self, only: Option<&str>, with_usage: bool) -> Result<Summaries> {
        let mut out = Summaries::default();
        for part in self.plan()? {
            let (seg, index) = match part {
                Part::Indexed { seg, index } => (seg, Some(index)),
                Part::Raw { seg } => (seg, None),
                Part::Unreadable(d) => {
                    out.damaged.push(d);
                    continue;
                }
            };
            if let Some(index) = &index {
                if out.add(index, &seg, only, with_usage).is_ok() {
                    continue;
                }
                self.forget_index(seg.number);
            }
            // The newest segment, or a damaged index: summarise the segment itself.
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
}
