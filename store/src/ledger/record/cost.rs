//! The records of what a prompt cache served and what calls cost, added beside the
//! released kinds (a released body's shape never changes).

use serde::{Deserialize, Serialize};

use super::{Millis, ModelCall, Usage};

/// What [`Usage`] leaves out: the input tokens a provider's prompt cache wrote and read, and
/// what the calls cost by the price table. Sums like [`Usage`]; its counts cover `calls`
/// calls (those recorded since cache and cost were), its cost `priced_calls` of them (those
/// with a price and reported usage), so a total over calls without either says so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UsageDetail {
    /// Calls these counts cover.
    pub calls: u32,
    /// Prompt tokens written to a prompt cache (counted in the prompt tokens too).
    pub cache_write_tokens: u64,
    /// Prompt tokens read from a prompt cache (counted in the prompt tokens too).
    pub cache_read_tokens: u64,
    /// Calls whose cost is in `cost_nanos`.
    pub priced_calls: u32,
    /// Their cost in billionths of a US dollar.
    pub cost_nanos: u64,
}

impl UsageDetail {
    pub fn add(&mut self, other: &UsageDetail) {
        self.calls += other.calls;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.priced_calls += other.priced_calls;
        self.cost_nanos += other.cost_nanos;
    }

    /// Whether the cache counts cover every call `usage` counts, each with reported usage.
    pub fn cache_complete(&self, usage: &Usage) -> bool {
        usage.complete && self.calls >= usage.calls
    }

    /// Whether the cost covers every call `usage` counts: each had a price and usage.
    pub fn cost_complete(&self, usage: &Usage) -> bool {
        usage.complete && self.priced_calls >= usage.calls
    }
}

/// One provider call of a turn as [`ModelCall`] records it, with what a prompt cache served
/// and what the call cost. New calls record this instead of `ModelCall` (kind 7, whose
/// shape is released); readers take both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCallCost {
    pub turn: String,
    pub agent: String,
    pub provider: String,
    pub model: String,
    pub reserved_tokens: u64,
    /// Every input token, those written to or read from a cache included; `None` when the
    /// provider did not report usage for this call.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (`None`: not reported).
    pub cache_write_tokens: Option<u64>,
    /// Prompt tokens read from the provider's prompt cache (`None`: not reported).
    pub cache_read_tokens: Option<u64>,
    /// The call's cost in billionths of a US dollar, by the price in force when it was made;
    /// `None` without a price or without reported usage.
    pub cost_nanos: Option<u64>,
    pub finish_reason: Option<String>,
    pub at: Millis,
}

impl From<ModelCall> for ModelCallCost {
    fn from(c: ModelCall) -> ModelCallCost {
        ModelCallCost {
            turn: c.turn,
            agent: c.agent,
            provider: c.provider,
            model: c.model,
            reserved_tokens: c.reserved_tokens,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            cache_write_tokens: None,
            cache_read_tokens: None,
            cost_nanos: None,
            finish_reason: c.finish_reason,
            at: c.at,
        }
    }
}

/// The cache tokens and cost of the calls a terminal record's [`Usage`] counts, appended
/// right after it in the same append: after a `TurnEnded` for the turn's own calls (its
/// workers' subtasks have theirs), after a `SubtaskEnded` for that worker's. A build that
/// does not know this kind reads the turn as before, without them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCost {
    pub turn: String,
    pub session: String,
    /// Whose calls: the turn's agent, or the worker of `subtask`.
    pub agent: String,
    /// The subtask whose end this follows; `None` for the turn's own calls.
    pub subtask: Option<String>,
    /// When usage by day counts these calls, as it counts the record this follows: the
    /// turn's begin for its own calls, the subtask's end for a worker's.
    pub counted_at: Millis,
    pub detail: UsageDetail,
    pub at: Millis,
}
