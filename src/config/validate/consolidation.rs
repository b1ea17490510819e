//! `consolidation:`, the top-level section and an agent's own: intervals are positive, and
//! an agent's own setting is on an agent that sleep-time consolidation runs for.

use super::super::types::{AgentConfig, AgentRole, Config};
use super::Checker;

/// The top-level section.
pub(super) fn section(c: &mut Checker<'_>, config: &Config) {
    let cons = &config.consolidation;
    for (key, zero) in [
        ("idle_threshold_secs", cons.idle_threshold_secs == 0),
        ("interval_secs", cons.interval_secs == 0),
    ] {
        if zero {
            c.error(
                c.value(at!["consolidation", key]),
                format!("consolidation.{key} must be positive"),
                "use a number of seconds (defaults: idle_threshold_secs 120, interval_secs 1800)",
            );
        }
    }
}

/// Agent `i`'s own `consolidation:`.
pub(super) fn agent(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let Some(own) = &agent.consolidation else {
        return;
    };
    let id = agent.id.as_str();
    for (key, value) in [
        ("idle_threshold_secs", own.idle_threshold_secs),
        ("interval_secs", own.interval_secs),
    ] {
        if value == Some(0) {
            c.error(
                c.value(at!["agents", i, "consolidation", key]),
                format!("agent `{id}`: consolidation.{key} must be positive"),
                "use a number of seconds, or remove the key to take the top-level `consolidation:` value",
            );
        }
    }
    let (role, hint) = match agent.role {
        AgentRole::Autonomous => return,
        AgentRole::Worker => (
            "a worker",
            "remove it: a declared worker is consolidated on request, with `axocoatl memory consolidate -a WORKER` or `-a COORDINATOR`",
        ),
        AgentRole::Coordinator => (
            "a coordinator",
            "remove it: a coordinator keeps no memory tiers; its workers are consolidated with `axocoatl memory consolidate -a COORDINATOR`",
        ),
    };
    c.warning(
        c.key(at!["agents", i, "consolidation"]),
        format!("agent `{id}`: `consolidation:` on {role} changes nothing: sleep-time consolidation runs for autonomous agents only"),
        hint,
    );
}
