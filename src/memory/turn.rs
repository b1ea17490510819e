//! Memory's part in a turn: the context sections it adds to every request (core memory,
//! passive recall) and what it records after each exchange and turn (the daily log, the
//! semantic store). The engine calls these through its context-source and observer seams;
//! a failure here is a warning of the turn, never its failure.

use axocoatl_store::ledger::record::TurnState;
use axocoatl_store::Repo;

use crate::error::Result;
use crate::provider::{Message, Role};

use super::daily::TurnLog;
use super::recall::{self, RecallSection};
use super::semantic::SemanticStore;
use super::AgentMemory;

/// The passive recall of one conversing agent: the closest records to the turn's request,
/// searched once per turn and injected before each of its model calls.
#[derive(Debug)]
pub struct PassiveRecall {
    memory: AgentMemory,
    store: Option<SemanticStore>,
    /// The section computed for a turn: `(turn, section)`.
    cached: Option<(String, RecallSection)>,
}

impl PassiveRecall {
    pub fn new(memory: AgentMemory) -> PassiveRecall {
        PassiveRecall {
            memory,
            store: None,
            cached: None,
        }
    }

    /// The section for a request of `turn`, or `None` when passive recall is off or
    /// nothing scores `min_score`.
    pub fn section(&mut self, repo: &Repo, turn: &str, request: &str) -> Result<Option<String>> {
        let recall = &self.memory.config.recall;
        if !recall.passive_inject || request.trim().is_empty() {
            return Ok(None);
        }
        if let Some((t, s)) = &self.cached {
            if t == turn {
                return Ok((!s.text.is_empty()).then(|| s.text.clone()));
            }
        }
        if self.store.is_none() {
            self.store = Some(self.memory.semantic(repo)?);
        }
        let Some(store) = self.store.as_mut() else {
            return Ok(None);
        };
        let section = recall::passive_section(store, request, recall)?;
        let text = (!section.text.is_empty()).then(|| section.text.clone());
        self.cached = Some((turn.to_owned(), section));
        Ok(text)
    }
}

/// Records a conversing agent's turn in its daily log and, when it completes, its exchange
/// in semantic memory.
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

    /// After a model response and the results of its tool calls: one daily log record per
    /// tool call, with its result. Returns the warnings of records that could not be
    /// written.
    pub fn after_exchange(
        &mut self,
        turn: &str,
        request: &str,
        messages: &[Message],
    ) -> Vec<String> {
        let log = TurnLog::new(&self.memory, turn);
        let mut warnings: Vec<String> = self.request(&log, turn, request).into_iter().collect();
        let Some(reply) = messages.first().filter(|m| m.role == Role::Assistant) else {
            return warnings;
        };
        for call in &reply.tool_calls {
            let result = messages
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id))
                .map(|m| m.content.as_str())
                .unwrap_or("");
            warnings.extend(log.tool_call(&call.name, &call.arguments.to_string(), result, false));
        }
        warnings
    }

    /// After the turn's terminal record: the answer in the daily log, and a completed
    /// turn's exchange in semantic memory.
    pub fn after_turn(
        &mut self,
        repo: &Repo,
        turn: &str,
        request: &str,
        output: &str,
        state: TurnState,
        error: Option<&str>,
    ) -> Vec<String> {
        let log = TurnLog::new(&self.memory, turn);
        let mut warnings: Vec<String> = self.request(&log, turn, request).into_iter().collect();
        warnings.extend(log.answer(output, state.as_str(), error));
        if state == TurnState::Completed {
            let retained = self
                .memory
                .semantic(repo)
                .and_then(|mut store| recall::retain_exchange(&mut store, turn, request, output));
            if let Err(e) = retained {
                warnings.push(format!(
                    "semantic memory did not retain this turn's exchange: {e}"
                ));
            }
        }
        warnings
    }
}
