//! Token budgets: local preflight reservations before each model call.
//!
//! A reservation is the estimated input (everything sent: system prompt, injected memory,
//! tool schemas, conversation, context and the request) plus the bounded completion.
//! `per_call` caps one reservation; `per_execution` caps the turn's recorded usage so far plus
//! the next reservation. This is a local guard, not a billing cap: providers tokenize
//! differently and may ignore a requested output limit.

use crate::config::{OverflowPolicy, TokenBudget};
use crate::provider::ChatRequest;

/// The completion bound requested when a budget is set and `max_tokens` is not.
pub const DEFAULT_COMPLETION_BOUND: u32 = 1024;
/// Per-message framing tokens assumed by the fallback estimate (role markers etc.).
pub const MESSAGE_OVERHEAD: u64 = 8;

/// A conservative token estimate for text when the model's tokenizer is not at hand.
///
/// Byte-level BPE vocabularies spend at most one token per byte and, for English and code,
/// about one per 3–4 bytes. The estimate counts, per run of ASCII letters or digits, one
/// token per 3 letters (digits: one each, as many tokenizers split them), one per other ASCII
/// byte (punctuation and spaces often merge, so this over-counts), and for non-ASCII text one
/// token per UTF-8 byte beyond the first of each character plus one. Checked against the
/// local model's tokenizer: never below, within 2× (see `tests/budget_estimate.rs`).
pub fn estimate_text(text: &str) -> u64 {
    let mut tokens = 0u64;
    let mut letters = 0u64;
    for ch in text.chars() {
        if ch.is_ascii_alphabetic() {
            letters += 1;
            continue;
        }
        tokens += letters.div_ceil(3);
        letters = 0;
        if ch.is_ascii_digit() {
            tokens += 1;
        } else if ch == ' ' {
            // A space usually merges into the next word's token.
        } else if ch.is_ascii() {
            tokens += 1;
        } else {
            tokens += ch.len_utf8() as u64;
        }
    }
    tokens + letters.div_ceil(3)
}

/// The estimated input tokens of a request, by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputEstimate {
    pub system: u64,
    pub conversation: u64,
    pub tools: u64,
}

impl InputEstimate {
    pub fn total(&self) -> u64 {
        self.system + self.conversation + self.tools
    }
}

/// Estimates a request's input, with `count` the model's tokenizer when available.
pub fn estimate_request(req: &ChatRequest, count: &dyn Fn(&str) -> Option<usize>) -> InputEstimate {
    let text = |s: &str| {
        count(s)
            .map(|n| n as u64)
            .unwrap_or_else(|| estimate_text(s))
    };
    let mut e = InputEstimate::default();
    for m in &req.messages {
        let n = MESSAGE_OVERHEAD
            + text(&m.content)
            + m.tool_calls
                .iter()
                .map(|c| text(&c.name) + text(&c.arguments.to_string()))
                .sum::<u64>();
        if m.role == crate::provider::Role::System {
            e.system += n;
        } else {
            e.conversation += n;
        }
    }
    for t in &req.tools {
        e.tools += text(&t.name) + text(&t.description) + text(&t.parameters.to_string());
    }
    e
}

/// Why a call may not be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetViolation {
    pub message: String,
}

/// Checks a reservation against the budget. `used` is the turn's recorded usage so far.
pub fn check(
    budget: &TokenBudget,
    input: &InputEstimate,
    completion: u64,
    used: u64,
) -> Option<BudgetViolation> {
    let reservation = input.total() + completion;
    let parts = format!(
        "reservation {reservation} = input {} (system {}, conversation {}, tools {}) + completion bound {completion}",
        input.total(),
        input.system,
        input.conversation,
        input.tools
    );
    if let Some(limit) = budget.per_call {
        if reservation > limit {
            return Some(BudgetViolation {
                message: format!("token budget per_call {limit} exceeded: {parts}"),
            });
        }
    }
    if let Some(limit) = budget.per_execution {
        if used + reservation > limit {
            return Some(BudgetViolation {
                message: format!(
                    "token budget per_execution {limit} exceeded: used {used} + {parts}"
                ),
            });
        }
    }
    None
}

/// Checks what a provider reported after a call.
pub fn check_reported(
    budget: &TokenBudget,
    call_total: u64,
    used_total: u64,
) -> Option<BudgetViolation> {
    if let Some(limit) = budget.per_call {
        if call_total > limit {
            return Some(BudgetViolation {
                message: format!(
                    "provider reported {call_total} tokens for one call, over per_call {limit}"
                ),
            });
        }
    }
    if let Some(limit) = budget.per_execution {
        if used_total > limit {
            return Some(BudgetViolation {
                message: format!(
                    "provider reported {used_total} tokens for this turn, over per_execution {limit}"
                ),
            });
        }
    }
    None
}

pub fn enforce(budget: &TokenBudget) -> bool {
    budget.overflow_policy.effective() == OverflowPolicy::Abort
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_counts_each_class() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abc"), 1);
        assert_eq!(estimate_text("abcd"), 2);
        assert_eq!(estimate_text("123"), 3);
        assert_eq!(estimate_text("日本"), 6);
    }

    #[test]
    fn per_call_and_per_execution() {
        let b = TokenBudget {
            per_execution: Some(100),
            per_call: Some(50),
            overflow_policy: OverflowPolicy::Abort,
        };
        let input = InputEstimate {
            system: 10,
            conversation: 10,
            tools: 0,
        };
        assert!(check(&b, &input, 20, 0).is_none());
        assert!(check(&b, &input, 40, 0).is_some());
        assert!(check(&b, &input, 20, 70).is_some());
    }
}
