//! Approval requests and decisions into the `approvals` table: one row per request (its
//! record's sequence number is the row id), its decision filled in when it comes. The
//! turn's `state` is `waiting` from a request until its turn goes on.

use std::borrow::Cow;

use axocoatl_store::ledger::record::{ApprovalDecided, ApprovalRequested};
use rusqlite::params;
use serde_json::json;

use super::{Applier, Event};
use crate::clock::rfc3339;
use crate::error::Result;

impl Applier<'_> {
    pub(super) fn approval_requested<'r>(
        &mut self,
        seq: u64,
        r: &'r ApprovalRequested,
        ev: &mut Event<'r>,
    ) -> Result<()> {
        self.tx
            .execute(
                "INSERT OR IGNORE INTO approvals (seq, turn, session, agent, call_id, tool, arguments, arguments_object, rule, requested_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![seq as i64, r.turn, r.session, r.agent, r.call_id, r.tool, r.arguments.inline, r.arguments.object, r.rule, rfc3339(r.at), r.expires_at.map(rfc3339)],
            )
            .map_err(self.err())?;
        self.waiting(&r.turn, true)?;
        ev.kind = "approval_requested";
        ev.agent = Some(&r.agent);
        ev.name = Some(&r.tool);
        ev.text = Some(Cow::Borrowed(&r.arguments.inline));
        ev.detail = Some(
            json!({"call_id": r.call_id, "rule": r.rule, "expires_at": r.expires_at.map(rfc3339)}),
        );
        Ok(())
    }

    pub(super) fn approval_decided<'r>(
        &mut self,
        d: &'r ApprovalDecided,
        ev: &mut Event<'r>,
    ) -> Result<()> {
        self.tx
            .execute(
                "UPDATE approvals SET decision = ?3, reason = ?4, decided_by = ?5, decided_at = ?6 WHERE seq = (SELECT max(seq) FROM approvals WHERE turn = ?1 AND call_id = ?2) AND decision IS NULL",
                params![d.turn, d.call_id, d.decision.as_str(), d.reason, d.by, rfc3339(d.at)],
            )
            .map_err(self.err())?;
        ev.kind = "approval_decided";
        ev.name = Some(d.decision.as_str());
        ev.text = d.reason.as_deref().map(Cow::Borrowed);
        ev.detail = Some(json!({"call_id": d.call_id, "by": d.by}));
        Ok(())
    }

    /// The turn waits (a request) or goes on (a call of it starts after one).
    pub(super) fn waiting(&mut self, turn: &str, waits: bool) -> Result<()> {
        let (from, to) = if waits {
            ("running", "waiting")
        } else {
            ("waiting", "running")
        };
        match self.pending.get_mut(turn) {
            Some(row) if row.state == from => row.state = to,
            Some(_) => {}
            None => {
                self.tx
                    .execute(
                        "UPDATE turns SET state = ?3 WHERE turn = ?1 AND state = ?2",
                        params![turn, from, to],
                    )
                    .map_err(self.err())?;
            }
        }
        Ok(())
    }
}
