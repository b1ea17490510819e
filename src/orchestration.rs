//! A coordinator's private orchestration state: the plan of its live pass and how far each
//! subtask got, written while the pass runs and cleared by any terminal state of the turn
//! (completed, failed, stopped by the coordinator's own finish; interrupted by whichever
//! process recovers the orphan). It is a cache beside the ledger, never read back to resume
//! a pass: the next user turn decomposes fresh, so no finished subtask is ever presented as
//! having survived an interruption.
//!
//! Stored as checkpoint files (the store's checksummed envelope around a JSON payload) of
//! the component `{session}:{coordinator}:orchestration`, keeping only the newest. A leaf
//! module: the orphan recovery in `crate::session` clears it.

use axocoatl_store::checkpoint::Checkpoints;
use axocoatl_store::layout::{component, runtime_id, CHECKPOINTS_DIR};
use axocoatl_store::Repo;
use serde::{Deserialize, Serialize};

use crate::error::Result;

const SUFFIX: &str = ":orchestration";

/// The state of one live pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub turn: String,
    pub coordinator: String,
    /// `model`, `model-repaired` or `fallback`.
    pub method: String,
    pub subtasks: Vec<SubtaskState>,
}

/// One subtask as the pass last saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskState {
    pub id: String,
    pub worker: String,
    /// `pending`, `running`, `completed`, `failed` or `stopped`.
    pub state: String,
}

fn store(repo: &Repo) -> Checkpoints {
    Checkpoints::new(&repo.path(CHECKPOINTS_DIR))
}

/// The checkpoint component of a coordinator's orchestration state in a session.
pub fn component_of(session: &str, coordinator: &str) -> String {
    component(&format!("{session}:{coordinator}{SUFFIX}"))
}

/// Writes the state (`step` orders the writes of one pass), replacing the previous one.
pub fn write(repo: &Repo, session: &str, state: &State, step: u64) -> Result<()> {
    let payload = serde_json::to_vec(state).map_err(|e| {
        crate::error::RuntimeError::Internal(format!("cannot encode the orchestration state: {e}"))
    })?;
    let seq = (crate::clock::now().max(0) as u64) * 1000 + step % 1000;
    store(repo).write(&component_of(session, &state.coordinator), seq, &payload, 1)?;
    Ok(())
}

/// The state a coordinator's pass left, if any (for tests and `fsck`-like inspection).
pub fn read(repo: &Repo, session: &str, coordinator: &str) -> Option<State> {
    let store = store(repo);
    let file = store
        .list(&component_of(session, coordinator))
        .ok()?
        .into_iter()
        .next()?;
    let bytes = store.read(&file).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Removes a coordinator's orchestration state in a session.
pub fn clear(repo: &Repo, session: &str, coordinator: &str) -> Result<()> {
    clear_component(repo, &component_of(session, coordinator))
}

fn clear_component(repo: &Repo, component: &str) -> Result<()> {
    let store = store(repo);
    for file in store.list(component)? {
        store.remove(&file)?;
    }
    Ok(())
}

/// Removes the orchestration state of every coordinator of `session` (a turn of the session
/// ended without its own process finishing it).
pub fn clear_session(repo: &Repo, session: &str) -> Result<()> {
    let prefix = format!("{session}:");
    for c in store(repo).components()? {
        let Some(id) = runtime_id(&c) else { continue };
        if id.starts_with(&prefix) && id.ends_with(SUFFIX) {
            clear_component(repo, &c)?;
        }
    }
    Ok(())
}
