//! Rules about money: `prices:` entries and each agent's `cost_budget:`.

use std::path::Path;

use super::prices::{entry_problem, lookup};
use super::types::{Config, OverflowPolicy};
use super::validate::{at, Checker};

pub(crate) fn check(c: &mut Checker<'_>, config: &Config) {
    for (i, entry) in config.prices.iter().enumerate() {
        if let Some(problem) = entry_problem(entry) {
            c.error(
                c.value(at!["prices", i]),
                format!("prices: entry {}: {problem}", i + 1),
                "an entry is `{provider, model, input, output}` with optional `cache_write` and `cache_read`, in US dollars per million tokens",
            );
        }
    }
    for (i, agent) in config.agents.iter().enumerate() {
        let Some(budget) = &agent.cost_budget else {
            continue;
        };
        let id = agent.id.as_str();
        for (key, value) in [
            ("per_execution_usd", budget.per_execution_usd),
            ("per_call_usd", budget.per_call_usd),
        ] {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                c.error(
                    c.value(at!["agents", i, "cost_budget", key]),
                    format!("agent `{id}`: cost_budget.{key} must be a positive number of US dollars (got {v})"),
                    format!("set a positive amount like 0.50, or remove `{key}` for no limit"),
                );
            }
        }
        if let (Some(call), Some(execution)) = (budget.per_call_usd, budget.per_execution_usd) {
            if call > execution {
                c.error(
                    c.value(at!["agents", i, "cost_budget", "per_call_usd"]),
                    format!("agent `{id}`: cost_budget.per_call_usd ({call}) exceeds per_execution_usd ({execution})"),
                    format!("lower per_call_usd to at most {execution}, or raise per_execution_usd"),
                );
            }
        }
        if budget.overflow_policy == OverflowPolicy::Summarize {
            c.warning(
                c.value(at!["agents", i, "cost_budget", "overflow_policy"]),
                format!(
                    "agent `{id}`: overflow_policy `summarize` is a deprecated spelling of `warn`"
                ),
                "write `overflow_policy: warn`; it behaves the same",
            );
        }
        // The model the agent runs unless a turn names another: a budget on a model without
        // a price cannot be checked, so every call would be refused (or warned about).
        let Ok(provider) = config.resolve_provider(agent, &|_| None, Path::new(".")) else {
            continue; // the provider's own check says why
        };
        let kind = provider.kind.as_str();
        if lookup(&config.prices, &provider.name, kind, &provider.model).is_none() {
            c.warning(
                c.value(at!["agents", i, "cost_budget"]),
                format!(
                    "agent `{id}`: no price for model `{}` of provider `{}`, so its cost_budget cannot be checked and {}",
                    provider.model,
                    provider.name,
                    if budget.overflow_policy.effective() == OverflowPolicy::Abort {
                        "every call will be refused"
                    } else {
                        "every call will be sent with a warning"
                    }
                ),
                format!(
                    "add `{{provider: {}, model: {}, input: …, output: …}}` under `prices:` (US dollars per million tokens)",
                    provider.name, provider.model
                ),
            );
        }
    }
}
