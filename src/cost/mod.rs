//! What model calls cost: the cost of one call by its price, and cost budgets.
//!
//! The price table is `crate::config`'s: the shipped one (list prices with the date they
//! were taken) under the configuration's `prices:` entries. A call's cost is worked out when
//! it is made, with the price then in force, and recorded with the call: a later change of
//! the table changes later calls only. Money is counted in billionths of a US dollar (nanodollars):
//! exact enough for a cache read of one token of the cheapest model (a hundredth of a
//! millionth of a dollar), and a u64 of them holds eighteen billion dollars.

pub use crate::config::{Price, PriceSource};
use crate::provider::CallUsage;

pub mod budget;

/// Nanodollars in one US dollar.
pub const NANOS_PER_USD: f64 = 1e9;

/// The cost of a call's reported usage at `price`, in nanodollars; `None` when the prompt or
/// completion tokens were not reported (unless the model is free: nothing costs nothing).
/// Input tokens not counted as written to or read from the cache are priced as plain input.
pub fn call_nanos(price: &Price, usage: &CallUsage) -> Option<u64> {
    let free = [
        price.input,
        price.output,
        price.cache_write,
        price.cache_read,
    ]
    .iter()
    .all(|p| *p == 0.0);
    if free {
        return Some(0);
    }
    let prompt = usage.prompt_tokens?;
    let completion = usage.completion_tokens?;
    let write = usage.cache_write_tokens.unwrap_or(0).min(prompt);
    let read = usage.cache_read_tokens.unwrap_or(0).min(prompt - write);
    let plain = prompt - write - read;
    Some(nanos(
        plain as f64 * price.input
            + write as f64 * price.cache_write
            + read as f64 * price.cache_read
            + completion as f64 * price.output,
    ))
}

/// The most `input` tokens and `output` tokens can cost at `price` (each input token at
/// the dearer of the input and cache-write prices): what a budget reserves before a call.
pub fn bound_nanos(price: &Price, input: u64, output: u64) -> u64 {
    nanos(input as f64 * price.input.max(price.cache_write) + output as f64 * price.output)
}

/// USD-per-million-tokens times tokens, as nanodollars (a million tokens at $1 are 10⁹).
fn nanos(usd_per_mtok_times_tokens: f64) -> u64 {
    // Per million tokens → per token is 10⁻⁶; dollars → nanodollars 10⁹.
    let n = (usd_per_mtok_times_tokens * 1e3).round();
    if n.is_finite() && n > 0.0 {
        n.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// Nanodollars as dollars for people: `$0.0123` (four decimals; more for amounts below a
/// hundredth of a cent, so that a cheap call does not read as free).
pub fn usd(nanos: u64) -> String {
    let dollars = nanos as f64 / NANOS_PER_USD;
    if nanos > 0 && dollars < 0.0001 {
        format!("${dollars:.7}")
    } else {
        format!("${dollars:.4}")
    }
}

/// Dollars as nanodollars (budgets are configured in dollars).
pub fn nanos_of_usd(usd: f64) -> u64 {
    nanos(usd * 1e6)
}

#[cfg(test)]
mod tests;
