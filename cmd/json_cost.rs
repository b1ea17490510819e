//! The `--json` types of token usage, prompt-cache tokens and cost (part of
//! [`crate::json`]).

use axocoatl_store::ledger::record::{Usage, UsageDetail};
use schemars::JsonSchema;
use serde::Serialize;

/// `usage --prices --json`: one row of the price table in force, in the order rows are
/// tried (the configuration's `prices:` first).
#[derive(Debug, Serialize, JsonSchema)]
pub struct PriceJson<'a> {
    /// A provider kind or the name of a `providers:` entry.
    pub provider: &'a str,
    /// A model name, or a prefix ending in `*`.
    pub model: &'a str,
    /// US dollars per million input tokens neither written to nor read from a cache.
    pub input: f64,
    /// US dollars per million output tokens.
    pub output: f64,
    /// US dollars per million input tokens written to a prompt cache.
    pub cache_write: f64,
    /// US dollars per million input tokens read from a prompt cache.
    pub cache_read: f64,
    /// `config` (the configuration's `prices:`) or `shipped`.
    pub source: &'static str,
    /// For a shipped row: the date its list price was taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<&'a str>,
}

impl<'a> PriceJson<'a> {
    pub fn of(p: &'a axocoatl::config::Price, as_of: &'a str) -> PriceJson<'a> {
        let shipped = p.source == axocoatl::config::PriceSource::Shipped;
        PriceJson {
            provider: &p.provider,
            model: &p.model,
            input: p.input,
            output: p.output,
            cache_write: p.cache_write,
            cache_read: p.cache_read,
            source: if shipped { "shipped" } else { "config" },
            as_of: shipped.then_some(as_of),
        }
    }
}

/// Prompt-cache tokens and cost of a group of calls, beside its token usage.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema)]
pub struct CacheCostJson {
    /// Prompt tokens a provider's prompt cache wrote (part of `prompt_tokens`).
    pub cache_write_tokens: u64,
    /// Prompt tokens a provider's prompt cache served (part of `prompt_tokens`).
    pub cache_read_tokens: u64,
    /// False when some call's cache counts were not recorded (a turn from before they
    /// were, or a call without reported usage).
    pub cache_complete: bool,
    /// US dollars, by the price table when each call was made.
    pub cost_usd: f64,
    /// False when some call had no price or no reported usage: `cost_usd` is then what the
    /// others cost, a floor.
    pub cost_complete: bool,
}

impl CacheCostJson {
    pub fn from_detail(usage: &Usage, d: &UsageDetail) -> CacheCostJson {
        CacheCostJson {
            cache_write_tokens: d.cache_write_tokens,
            cache_read_tokens: d.cache_read_tokens,
            cache_complete: d.cache_complete(usage),
            cost_usd: d.cost_nanos as f64 / axocoatl::cost::NANOS_PER_USD,
            cost_complete: d.cost_complete(usage),
        }
    }
}

/// Token usage, as every output shows it.
#[derive(Clone, Copy, Debug, Serialize, JsonSchema)]
pub struct UsageJson {
    /// As the providers reported them.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Model calls counted.
    pub calls: u32,
    /// False once any call reported no usage.
    pub complete: bool,
    /// Prompt-cache tokens and cost (`usage --json`, `show --json`, `export --format json`).
    #[serde(flatten)]
    pub cache_cost: Option<CacheCostJson>,
}

impl From<&Usage> for UsageJson {
    fn from(u: &Usage) -> Self {
        UsageJson {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total(),
            calls: u.calls,
            complete: u.complete,
            cache_cost: None,
        }
    }
}

impl UsageJson {
    /// Usage with its prompt-cache tokens and cost.
    pub fn with_detail(u: &Usage, d: &UsageDetail) -> Self {
        UsageJson {
            cache_cost: Some(CacheCostJson::from_detail(u, d)),
            ..UsageJson::from(u)
        }
    }
}
