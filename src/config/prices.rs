//! The price table: what models cost per million tokens, by provider and model. The
//! shipped table (`prices.json`, list prices with the date they were taken) under the
//! configuration's `prices:` entries; what calls cost is `crate::cost`'s.
//!
//! The shipped table is JSON, not YAML like the configuration: every call of a `send` is
//! priced, and the YAML reader took ~40% of a one-shot send's instructions to parse its 29
//! rows (callgrind of a debug build against a loopback server), where `serde_json` reads them
//! in a small fraction of that.

use std::sync::OnceLock;

use serde::Deserialize;

use super::types::{Config, PriceEntry};
use super::ResolvedProvider;

/// The shipped table, as `prices.json` holds it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Shipped {
    /// Where the prices come from and what they leave out (the file's own notes).
    #[serde(rename = "about")]
    _about: Vec<String>,
    as_of: String,
    prices: Vec<PriceEntry>,
}

fn shipped() -> &'static Shipped {
    static SHIPPED: OnceLock<Shipped> = OnceLock::new();
    SHIPPED.get_or_init(|| {
        // A test parses it; a build whose file does not parse ships no prices.
        serde_json::from_str(include_str!("prices.json")).unwrap_or(Shipped {
            _about: Vec::new(),
            as_of: String::new(),
            prices: Vec::new(),
        })
    })
}

/// The date the shipped list prices were taken (`YYYY-MM-DD`).
pub fn shipped_as_of() -> &'static str {
    &shipped().as_of
}

/// The shipped rows.
pub fn shipped_prices() -> &'static [PriceEntry] {
    &shipped().prices
}

/// Where a price came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriceSource {
    /// The configuration's `prices:`.
    Config,
    /// The table shipped with axocoatl.
    Shipped,
}

/// What one model costs, in US dollars per million tokens of each kind, and the row it
/// came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
    /// The row's provider and model pattern, for messages.
    pub provider: String,
    pub model: String,
    pub source: PriceSource,
}

impl Price {
    pub fn of(entry: &PriceEntry, source: PriceSource) -> Price {
        Price {
            input: entry.input,
            output: entry.output,
            cache_write: entry.cache_write.unwrap_or(entry.input),
            cache_read: entry.cache_read.unwrap_or(entry.input),
            provider: entry.provider.clone(),
            model: entry.model.clone(),
            source,
        }
    }
}

/// The price of `model` on provider `name` (an entry of `providers:` or a built-in kind) of
/// `kind`: a `prices:` entry before a shipped row, one naming the provider entry before one
/// naming its kind, an exact model before the longest prefix.
pub fn lookup(config_prices: &[PriceEntry], name: &str, kind: &str, model: &str) -> Option<Price> {
    let rows = config_prices
        .iter()
        .map(|e| (e, PriceSource::Config))
        .chain(shipped_prices().iter().map(|e| (e, PriceSource::Shipped)));
    rows.filter_map(|(entry, source)| {
        let by_name = entry.provider == name;
        if !by_name && entry.provider != kind {
            return None;
        }
        let fit = model_fit(&entry.model, model)?;
        Some(((source == PriceSource::Config, by_name, fit), entry, source))
    })
    .max_by_key(|(rank, ..)| *rank)
    .map(|(_, entry, source)| Price::of(entry, source))
}

/// How well a model pattern fits a model: an exact name beats every prefix as long, a
/// longer prefix (ending in `*`) a shorter one; `None` when it does not fit.
fn model_fit(pattern: &str, model: &str) -> Option<usize> {
    match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix).then_some(prefix.len() * 2),
        None => (pattern == model).then_some(pattern.len() * 2 + 1),
    }
}

impl Config {
    /// The price of the model a resolved provider runs, by this configuration's table.
    pub fn price_of(&self, provider: &ResolvedProvider) -> Option<Price> {
        lookup(
            &self.prices,
            &provider.name,
            provider.kind.as_str(),
            &provider.model,
        )
    }
}

/// What is wrong with a price entry, if anything.
pub fn entry_problem(entry: &PriceEntry) -> Option<String> {
    if entry.provider.trim().is_empty() {
        return Some("`provider` is empty".into());
    }
    let model = entry.model.as_str();
    if model.is_empty() {
        return Some("`model` is empty".into());
    }
    if model.trim_end_matches('*').contains('*') || model.ends_with("**") {
        return Some(format!(
            "model `{model}`: `*` may only end a prefix (`claude-sonnet-4*`)"
        ));
    }
    let prices = [
        ("input", Some(entry.input)),
        ("output", Some(entry.output)),
        ("cache_write", entry.cache_write),
        ("cache_read", entry.cache_read),
    ];
    for (key, value) in prices {
        if let Some(v) = value.filter(|v| !v.is_finite() || *v < 0.0) {
            return Some(format!(
                "`{key}` is {v}: a price is 0 or more US dollars per million tokens"
            ));
        }
    }
    None
}
