//! Model calls with their cache tokens and cost, and each turn's sum of them.

use axocoatl_store::ledger::record::{ModelCallCost, UsageCost};
use rusqlite::params;
use serde_json::json;

use super::{Applier, Event};
use crate::clock::rfc3339;
use crate::error::Result;

/// Nanodollars as the dollars a `cost_usd` column holds.
pub(super) fn usd(nanos: u64) -> f64 {
    nanos as f64 / crate::cost::NANOS_PER_USD
}

impl Applier<'_> {
    /// A model call (of either record kind) into `model_calls`; its event's agent and name
    /// are the caller's to set (from the record itself).
    pub(super) fn model_call(
        &mut self,
        seq: u64,
        c: &ModelCallCost,
        ev: &mut Event<'_>,
    ) -> Result<()> {
        let cost = c.cost_nanos.map(usd);
        self.tx
            .execute(
                "INSERT OR IGNORE INTO model_calls (seq, turn, agent, provider, model, reserved_tokens, prompt_tokens, completion_tokens, finish_reason, at, cache_write_tokens, cache_read_tokens, cost_usd) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![seq as i64, c.turn, c.agent, c.provider, c.model, c.reserved_tokens as i64, c.prompt_tokens.map(|n| n as i64), c.completion_tokens.map(|n| n as i64), c.finish_reason, rfc3339(c.at), c.cache_write_tokens.map(|n| n as i64), c.cache_read_tokens.map(|n| n as i64), cost],
            )
            .map_err(self.err())?;
        ev.kind = "model_call";
        ev.detail = Some(json!({
            "provider": c.provider,
            "reserved_tokens": c.reserved_tokens,
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "cache_write_tokens": c.cache_write_tokens,
            "cache_read_tokens": c.cache_read_tokens,
            "cost_usd": cost,
            "finish_reason": c.finish_reason,
        }));
        Ok(())
    }

    /// A terminal record's cache tokens and cost, added to its turn's row (in memory while
    /// the turn is being written, else in the file).
    pub(super) fn usage_cost<'r>(&mut self, c: &'r UsageCost, ev: &mut Event<'r>) -> Result<()> {
        let d = &c.detail;
        ev.kind = "usage_cost";
        ev.agent = Some(&c.agent);
        ev.name = c.subtask.as_deref();
        ev.detail = Some(json!({
            "calls": d.calls,
            "cache_write_tokens": d.cache_write_tokens,
            "cache_read_tokens": d.cache_read_tokens,
            "priced_calls": d.priced_calls,
            "cost_usd": usd(d.cost_nanos),
        }));
        if let Some(row) = self.pending.get_mut(&c.turn) {
            row.detail.get_or_insert_with(Default::default).add(d);
            return Ok(());
        }
        self.tx
            .execute(
                "UPDATE turns SET cache_write_tokens = coalesce(cache_write_tokens, 0) + ?2, cache_read_tokens = coalesce(cache_read_tokens, 0) + ?3, cost_usd = coalesce(cost_usd, 0) + ?4, priced_calls = coalesce(priced_calls, 0) + ?5 WHERE turn = ?1",
                params![c.turn, d.cache_write_tokens as i64, d.cache_read_tokens as i64, usd(d.cost_nanos), d.priced_calls],
            )
            .map_err(self.err())?;
        Ok(())
    }
}
