//! Cost budgets: `cost_budget:` checked before each model call as `token_budget:` is, in
//! money.
//!
//! The reservation is the token budget's (the estimated input plus the completion bound),
//! priced with the model's price, every input token at the dearer of the input and the
//! cache-write price: the most the call can cost if the provider counts as estimated.
//! `per_call_usd` caps one reservation; `per_execution_usd` caps what the execution's calls
//! cost so far (as reported and priced, or as reserved when a provider reported no usage)
//! plus the next reservation. After a call its reported cost is checked again. A model
//! without a price cannot be checked, so a cost budget refuses its calls (under `abort`) or
//! warns (under `warn`) rather than let them pass unchecked.

use super::{usd, Price};
use crate::budget::{BudgetViolation, InputEstimate};
use crate::config::{CostBudget, OverflowPolicy};

/// A budget's limits in nanodollars.
fn limits(budget: &CostBudget) -> (Option<u64>, Option<u64>) {
    (
        budget.per_call_usd.map(super::nanos_of_usd),
        budget.per_execution_usd.map(super::nanos_of_usd),
    )
}

/// Checks a call's reservation: `input` estimated tokens and `completion` tokens of bound,
/// priced with `price`, against the budget, after `spent` nanodollars of this execution.
pub fn check(
    budget: &CostBudget,
    price: Option<&Price>,
    model: &str,
    input: &InputEstimate,
    completion: u64,
    spent: u64,
) -> Option<BudgetViolation> {
    let Some(price) = price else {
        return Some(BudgetViolation {
            message: format!(
                "cost budget cannot be checked: no price for model `{model}` (add it under `prices:` in the configuration)"
            ),
        });
    };
    let reserved = reservation(price, input, completion);
    let parts = format!(
        "reservation {} = {} input tokens (estimated) and {completion} completion tokens at {}",
        usd(reserved),
        input.total(),
        rate(price)
    );
    let (per_call, per_execution) = limits(budget);
    if let Some(limit) = per_call.filter(|&l| reserved > l) {
        return Some(BudgetViolation {
            message: format!("cost budget per_call_usd {} exceeded: {parts}", usd(limit)),
        });
    }
    if let Some(limit) = per_execution.filter(|&l| spent.saturating_add(reserved) > l) {
        return Some(BudgetViolation {
            message: format!(
                "cost budget per_execution_usd {} exceeded: spent {} + {parts}",
                usd(limit),
                usd(spent)
            ),
        });
    }
    None
}

/// What a call reserves: its input and completion bound at the price's dearest rates.
pub fn reservation(price: &Price, input: &InputEstimate, completion: u64) -> u64 {
    super::bound_nanos(price, input.total(), completion)
}

/// Checks what a call cost, and the execution so far, once the provider reported usage.
pub fn check_reported(budget: &CostBudget, call: u64, spent: u64) -> Option<BudgetViolation> {
    let (per_call, per_execution) = limits(budget);
    if let Some(limit) = per_call.filter(|&l| call > l) {
        return Some(BudgetViolation {
            message: format!(
                "the provider's usage came to {} for one call, over per_call_usd {}",
                usd(call),
                usd(limit)
            ),
        });
    }
    if let Some(limit) = per_execution.filter(|&l| spent > l) {
        return Some(BudgetViolation {
            message: format!(
                "the provider's usage came to {} for this turn, over per_execution_usd {}",
                usd(spent),
                usd(limit)
            ),
        });
    }
    None
}

/// Whether a violation refuses the call (`abort`) rather than warns.
pub fn enforce(budget: &CostBudget) -> bool {
    budget.overflow_policy.effective() == OverflowPolicy::Abort
}

/// `$3 in / $15 out per million tokens`, with the cache rates when they differ.
fn rate(price: &Price) -> String {
    let mut s = format!("${} in / ${} out", trim(price.input), trim(price.output));
    if price.cache_write != price.input || price.cache_read != price.input {
        s.push_str(&format!(
            " (cache write ${}, read ${})",
            trim(price.cache_write),
            trim(price.cache_read)
        ));
    }
    s.push_str(" per million tokens");
    s
}

fn trim(v: f64) -> String {
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::PriceSource;

    fn price() -> Price {
        Price {
            input: 3.0,
            output: 15.0,
            cache_write: 3.75,
            cache_read: 0.3,
            provider: "anthropic".into(),
            model: "claude-sonnet-4*".into(),
            source: PriceSource::Shipped,
        }
    }

    fn budget(per_call: Option<f64>, per_execution: Option<f64>) -> CostBudget {
        CostBudget {
            per_call_usd: per_call,
            per_execution_usd: per_execution,
            overflow_policy: OverflowPolicy::Abort,
        }
    }

    #[test]
    fn a_reservation_prices_input_at_the_cache_write_rate() {
        let input = InputEstimate {
            system: 2000,
            conversation: 0,
            tools: 0,
        };
        // 2000 × $3.75 + 1000 × $15 per million = $0.0225.
        assert_eq!(reservation(&price(), &input, 1000), 22_500_000);
        assert!(check(
            &budget(Some(0.03), None),
            Some(&price()),
            "m",
            &input,
            1000,
            0
        )
        .is_none());
        let v = check(
            &budget(Some(0.02), None),
            Some(&price()),
            "m",
            &input,
            1000,
            0,
        )
        .expect("over per_call");
        assert!(
            v.message.contains("per_call_usd $0.0200 exceeded"),
            "{}",
            v.message
        );
        assert!(v.message.contains("reservation $0.0225"), "{}", v.message);
        assert!(
            v.message.contains("cache write $3.75, read $0.3"),
            "{}",
            v.message
        );
        let v = check(
            &budget(None, Some(0.03)),
            Some(&price()),
            "m",
            &input,
            1000,
            12_000_000,
        )
        .expect("over per_execution");
        assert!(v.message.contains("spent $0.0120"), "{}", v.message);
    }

    #[test]
    fn no_price_cannot_be_checked() {
        let v = check(
            &budget(Some(1.0), None),
            None,
            "mystery-1",
            &InputEstimate::default(),
            10,
            0,
        )
        .expect("refused");
        assert!(
            v.message.contains("no price for model `mystery-1`"),
            "{}",
            v.message
        );
    }

    #[test]
    fn reported_cost_is_checked_per_call_and_per_execution() {
        let b = budget(Some(0.01), Some(0.05));
        assert!(check_reported(&b, 9_000_000, 40_000_000).is_none());
        assert!(check_reported(&b, 11_000_000, 40_000_000).is_some());
        assert!(check_reported(&b, 9_000_000, 51_000_000).is_some());
    }
}
