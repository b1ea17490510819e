//! Provider-reported token usage summed from the ledger, grouped for `usage`.

use std::collections::BTreeMap;

use axocoatl_store::ledger::record::{Usage, UsageDetail};
use axocoatl_store::Repo;

use crate::error::Result;

/// What rows group turns by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum By {
    #[default]
    Agent,
    Session,
    /// The UTC day a turn started.
    Day,
}

impl By {
    /// The name of the key column (and JSON field).
    pub fn as_str(self) -> &'static str {
        match self {
            By::Agent => "agent",
            By::Session => "session",
            By::Day => "day",
        }
    }
}

/// One group's turns and their summed usage.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub turns: u64,
    /// Incomplete when any call of these turns reported no usage, or a turn has no
    /// terminal record yet.
    pub usage: Usage,
    /// Their calls' cache tokens and cost, as far as recorded (each call's cost by the
    /// price in force when it was made).
    pub detail: UsageDetail,
}

impl Row {
    fn new(key: String) -> Row {
        Row {
            key,
            turns: 0,
            usage: Usage::ZERO,
            detail: UsageDetail::default(),
        }
    }

    /// Every call of these turns has its cache counts recorded (and usage reported).
    pub fn cache_complete(&self) -> bool {
        self.detail.cache_complete(&self.usage)
    }

    /// Every call of these turns had a price and reported usage: the cost is their whole
    /// cost (otherwise it is what the others cost, a floor).
    pub fn cost_complete(&self) -> bool {
        self.detail.cost_complete(&self.usage)
    }
}

/// Rows in key order, and the total over them.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub rows: Vec<Row>,
    pub total: Row,
    /// Damage met while reading the ledger (never skipped silently).
    pub problems: Vec<String>,
}

/// Sums the usage of the turns of `session` (every session with `None`) by `by`, from the
/// ledger's indexes.
pub fn report(repo: &Repo, session: Option<&str>, by: By) -> Result<Report> {
    let list = crate::history::usage(repo, session)?;
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut total = Row::new("total".into());
    for r in list.rows {
        let key = match by {
            By::Agent => r.agent,
            By::Session => r.session,
            By::Day => r.day,
        };
        let row = rows.entry(key.clone()).or_insert_with(|| Row::new(key));
        row.turns += r.turns;
        row.usage.add(&r.usage);
        row.detail.add(&r.detail);
        total.turns += r.turns;
        total.usage.add(&r.usage);
        total.detail.add(&r.detail);
    }
    Ok(Report {
        rows: rows.into_values().collect(),
        total,
        problems: list.problems.iter().map(|d| d.to_string()).collect(),
    })
}
