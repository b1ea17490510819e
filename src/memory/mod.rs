//! Agent memory, in four tiers:
//!
//! | tier | here | on disk |
//! |---|---|---|
//! | Session | the engine's conversation, bounded by `max_session_messages` | checkpoints |
//! | Daily log | [`daily`]: activity records, `recall_timeframe` | `memory/daily_log/v1/` |
//! | Core memory | [`core`]: blocks injected on every turn, `core_memory_*` tools | `memory/core/` |
//! | Semantic memory | [`semantic`] (store, search), [`embed`] (the local embedder) | `memory/semantic/v1/` |
//!
//! Every tier belongs to one runtime Agent id, [`agent_id`] (`{session}:{agent}`) or
//! [`worker_id`] for a declared Worker; only core blocks marked `shared: true` cross scopes.
//! A rewind moves the conversation head and deletes no memory already persisted.
//!
//! `semantic` and `embed` are self-contained: the other tiers call their public API only.

pub mod consolidate;
pub mod core;
pub mod daily;
pub mod embed;
pub mod fsck;
pub mod recall;
pub mod semantic;
pub mod turn;

use axocoatl_store::memory::{CoreMemory, DailyLog};
use axocoatl_store::Repo;

use crate::config::{AgentConfig, AgentRole, Config, CoreBlock, MemoryConfig};
use crate::error::{Result, RuntimeError};
use crate::workspace::Workspace;

pub use self::core::{CoreEdit, CoreSection, EditDone, MemoryError};

/// The runtime id of an autonomous Agent in a session: `{session}:{agent}`.
pub fn agent_id(session: &str, agent: &str) -> String {
    format!("{session}:{agent}")
}

/// The runtime id of a Coordinator's declared Worker:
/// `{session}:{coordinator}:worker:{worker}`.
pub fn worker_id(session: &str, coordinator: &str, worker: &str) -> String {
    format!("{session}:{coordinator}:worker:{worker}")
}

/// The configured name of the Agent a runtime id belongs to (the Worker for a Worker id).
pub fn agent_of(runtime_id: &str) -> Option<&str> {
    let mut parts = runtime_id.split(':');
    let _session = parts.next()?;
    let first = parts.next()?;
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => Some(first),
        (Some("worker"), Some(worker), None) => Some(worker),
        _ => None,
    }
}

/// The session a runtime id belongs to.
pub fn session_of(runtime_id: &str) -> &str {
    runtime_id.split(':').next().unwrap_or(runtime_id)
}

/// The runtime id whose memory `agent` owns in `session`: `{session}:{agent}` for an
/// autonomous Agent, `{session}:{coordinator}:worker:{worker}` for a declared Worker (its
/// coordinator is the entry point of the workflow listing it). A Coordinator has no Tier 2-4
/// memory of its own in 1.0.
pub fn runtime_id_for(config: &Config, session: &str, agent: &AgentConfig) -> Result<String> {
    match agent.role {
        AgentRole::Autonomous => Ok(agent_id(session, &agent.id)),
        AgentRole::Worker => config
            .workflows
            .iter()
            .find(|w| w.workers.contains(&agent.id))
            .map(|w| worker_id(session, &w.entry_point, &agent.id))
            .ok_or_else(|| RuntimeError::AgentRole {
                id: agent.id.clone(),
                reason: "a worker has memory only as a member of a coordinator's workflow, and no workflow lists it".into(),
            }),
        AgentRole::Coordinator => Err(RuntimeError::AgentRole {
            id: agent.id.clone(),
            reason: "a coordinator keeps no memory tiers of its own; its declared workers do".into(),
        }),
    }
}

/// The memory tiers of one runtime Agent id, as its configuration declares them.
#[derive(Clone, Debug)]
pub struct AgentMemory {
    pub id: String,
    /// The repository (`.axocoatl`) these tiers live in.
    pub root: std::path::PathBuf,
    pub core: CoreMemory,
    pub log: DailyLog,
    pub blocks: Vec<CoreBlock>,
    pub config: MemoryConfig,
}

impl AgentMemory {
    /// The memory `-a AGENT -s SESSION` point at: the agent (default: the config's default
    /// agent) in the session (default: HEAD). Returns the agent's configuration too.
    pub fn resolve<'c>(
        ws: &'c Workspace,
        session: Option<&str>,
        agent: Option<&str>,
    ) -> Result<(AgentMemory, &'c AgentConfig)> {
        let config = ws.config()?;
        let agent = match agent {
            Some(id) => config.agent(id).ok_or_else(|| RuntimeError::UnknownAgent {
                id: id.to_owned(),
                known: config.agents.iter().map(|a| a.id.clone()).collect(),
            })?,
            None => config.default_agent().ok_or(RuntimeError::NoAgent)?,
        };
        let session = ws.session_or_head(session)?;
        let id = runtime_id_for(config, &session, agent)?;
        Ok((AgentMemory::for_id(ws.repo(), &id, &agent.memory), agent))
    }

    /// The memory of `agent` in `session`.
    pub fn open(repo: &Repo, session: &str, agent: &AgentConfig) -> AgentMemory {
        AgentMemory::for_id(repo, &agent_id(session, &agent.id), &agent.memory)
    }

    /// The memory of runtime id `id` configured by `config`.
    pub fn for_id(repo: &Repo, id: &str, config: &MemoryConfig) -> AgentMemory {
        AgentMemory {
            id: id.to_owned(),
            root: repo.root().to_owned(),
            core: CoreMemory::new(repo, id),
            log: DailyLog::new(repo, id),
            blocks: config.core.effective_blocks(),
            config: config.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_ids() {
        assert_eq!(agent_id("main", "coder"), "main:coder");
        assert_eq!(worker_id("main", "lead", "w1"), "main:lead:worker:w1");
        assert_eq!(agent_of("main:coder"), Some("coder"));
        assert_eq!(agent_of("main:lead:worker:w1"), Some("w1"));
        assert_eq!(agent_of("main"), None);
        assert_eq!(agent_of("main:a:b"), None);
        assert_eq!(session_of("main:lead:worker:w1"), "main");
    }
}
