//! Memory's part in a turn, through the engine's seams: passive recall as a context section
//! of every request ([`PassiveRecall`]), and the daily log and semantic writes after each
//! exchange and turn ([`MemoryRecorder`]). Core memory's section is the engine's
//! `CoreMemory` source over [`AgentMemory::core_section`]. A failure here is a warning of the
//! turn, never its failure.

use std::collections::HashSet;

use axocoatl_store::ledger::record::TurnState;

use crate::error::{MemoryError, Result, RuntimeError};
use crate::provider::Role;
use crate::turn::{
    ContextSection, ContextSource, Exchange, RequestInfo, TurnObserver, TurnSummary,
};

use super::daily::TurnLog;
use super::recall::{self, RecallSection};
use super::semantic::SemanticStore;
use super::AgentMemory;

/// The label of the passive recall section.
pub const RECALL_SECTION: &str = "recalled_memory";

/// The passive recall of one conversing agent: the records closest to the turn's request,
/// searched once per turn and injected before each of its model calls (so the budget
/// estimate of every request counts them). The exchanges of the turns in the request's
/// conversation window and of the turns a rewind superseded are left out.
#[derive(Debug)]
pub struct PassiveRecall {
    memory: AgentMemory,
    store: Option<SemanticStore>,
    /// The section computed for a turn: `(turn, section)`.
    cached: Option<(String, RecallSection)>,
    /// The one-time notice about the lexical path was given (or was not needed).
    announced: bool,
}

impl PassiveRecall {
    pub fn new(memory: AgentMemory) -> PassiveRecall {
        PassiveRecall {
            memory,
            store: None,
            cached: None,
            announced: false,
        }
    }
}

impl ContextSource for PassiveRecall {
    fn section(&mut self, request: &RequestInfo<'_>) -> Result<Option<ContextSection>> {
        let recall = &self.memory.config.recall;
        if !recall.passive_inject || request.request.trim().is_empty() {
            return Ok(None);
        }
        if let Some((turn, s)) = &self.cached {
            if turn == request.turn {
                return Ok(Some(section(s.text.clone(), Vec::new())));
            }
        }
        if self.store.is_none() {
            self.store = Some(self.memory.open_semantic()?);
        }
        let Some(store) = self.store.as_mut() else {
            return Ok(None);
        };
        // An empty store costs nothing: no model is loaded, no search is made.
        if store.is_empty() {
            return Ok(None);
        }
        let mut warnings = Vec::new();
        if !self.announced {
            self.announced = true;
            warnings.extend(store.path_warning()?);
        }
        // What the model sees anyway, or what a rewind took back, is not recalled.
        let exclude: HashSet<String> = request
            .window
            .iter()
            .chain(request.superseded)
            .cloned()
            .collect();
        let found = recall::passive_section(store, request.request, recall, &exclude)?;
        warnings.extend(store.damage());
        let text = found.text.clone();
        self.cached = Some((request.turn.to_owned(), found));
        Ok(Some(section(text, warnings)))
    }

    /// Each turn's request recalls other memories.
    fn volatile(&self) -> bool {
        true
    }
}

fn section(text: String, warnings: Vec<String>) -> ContextSection {
    ContextSection {
        label: RECALL_SECTION.into(),
        text,
        warnings,
    }
}

/// Records a conversing agent's turn in its daily log (the request, each tool call with its
/// result, the answer) and, when the turn completes, its exchange in semantic memory.
#[derive(Debug)]
pub struct MemoryRecorder {
    memory: AgentMemory,
    /// The turn whose request is already in the daily log.
    logged_request: Option<String>,
}

impl MemoryRecorder {
    pub fn new(memory: AgentMemory) -> MemoryRecorder {
        MemoryRecorder {
            memory,
            logged_request: None,
        }
    }

    /// Writes the request of `turn` once, before anything else of it.
    fn request(&mut self, log: &TurnLog, turn: &str, request: &str) -> Option<String> {
        if self.logged_request.as_deref() == Some(turn) {
            return None;
        }
        self.logged_request = Some(turn.to_owned());
        log.request(request)
    }
}

/// Several warnings as one error of the observer (the engine records it as a warning).
fn warnings(list: Vec<String>) -> Result<()> {
    if list.is_empty() {
        Ok(())
    } else {
        Err(RuntimeError::Memory(MemoryError::NotRecorded(
            list.join("; "),
        )))
    }
}

impl TurnObserver for MemoryRecorder {
    fn before_turn(&mut self, request: &RequestInfo<'_>) -> Result<()> {
        let log = TurnLog::new(&self.memory, request.turn);
        warnings(
            self.request(&log, request.turn, request.request)
                .into_iter()
                .collect(),
        )
    }

    fn after_exchange(&mut self, exchange: &Exchange<'_>) -> Result<()> {
        let log = TurnLog::new(&self.memory, exchange.turn);
        let mut problems: Vec<String> = self
            .request(&log, exchange.turn, exchange.request)
            .into_iter()
            .collect();
        if let Some(reply) = exchange
            .messages
            .first()
            .filter(|m| m.role == Role::Assistant)
        {
            for call in &reply.tool_calls {
                let result = exchange
                    .messages
                    .iter()
                    .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
                    .map(|m| m.content.as_str())
                    .unwrap_or("");
                problems.extend(log.tool_call(
                    &call.name,
                    &call.arguments.to_string(),
                    result,
                    false,
                ));
            }
        }
        warnings(problems)
    }

    fn after_turn(&mut self, turn: &TurnSummary<'_>) -> Result<()> {
        let log = TurnLog::new(&self.memory, turn.turn);
        let outcome = turn.outcome;
        let mut problems: Vec<String> = self
            .request(&log, turn.turn, turn.request)
            .into_iter()
            .collect();
        problems.extend(log.answer(
            &outcome.output,
            outcome.state.as_str(),
            outcome.error.as_deref(),
        ));
        if outcome.state == TurnState::Completed {
            let retained = self.memory.open_semantic().and_then(|mut store| {
                recall::retain_exchange(&mut store, turn.turn, turn.request, &outcome.output)
            });
            if let Err(e) = retained {
                problems.push(format!(
                    "semantic memory did not retain this turn's exchange: {e}"
                ));
            }
        }
        warnings(problems)
    }
}
