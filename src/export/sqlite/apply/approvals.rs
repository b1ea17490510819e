//! A folded turn's `approvals` rows: one per tool call held for a person (its request
//! record's sequence number is the row id), with its decision once it came. The turn's
//! `state` is `waiting` while a held call has not started ([`crate::fold::TurnView::waits`]).

use rusqlite::params;

use super::Applier;
use crate::clock::rfc3339;
use crate::error::Result;
use crate::fold::TurnView;

impl Applier<'_> {
    pub(super) fn approval_rows(&self, t: &TurnView) -> Result<()> {
        let err = self.err();
        for a in &t.approvals {
            self.tx
                .execute(
                    "INSERT OR REPLACE INTO approvals (seq, turn, session, agent, call_id, tool, arguments, arguments_object, rule, requested_at, expires_at, decision, reason, decided_by, decided_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                    params![a.seq as i64, t.turn, t.session, a.agent, a.call_id, a.tool, a.arguments, a.arguments_object, a.rule, rfc3339(a.requested_at), a.expires_at.map(rfc3339), a.decision, a.reason, a.by, a.decided_at.map(rfc3339)],
                )
                .map_err(&err)?;
        }
        Ok(())
    }
}
