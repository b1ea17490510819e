//! What a turn is to the rest of the runtime: the events it reports, how it ended, where it
//! came from, and the traits memory features implement to take part in it (tools take part
//! through the registry in `crate::tools`). The engine (`crate::engine`) runs turns; these types sit
//! below it so that a feature implementing them never depends on the engine.

use axocoatl_store::ledger::record::{AttachmentPin, Millis, PlannedSubtask, TurnState, Usage};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::provider::Message;

/// `TurnBegun.mode` of a memory consolidation pass: a turn in the ledger (begun, ended,
/// stoppable, its usage counted) that is no part of the agent's conversation.
pub const MODE_CONSOLIDATION: &str = "consolidation";

/// What a running turn reports to its caller, in order.
#[derive(Clone, Copy, Debug)]
pub enum TurnEvent<'a> {
    /// `send --attach` stored a file whose extracted text was cut to the cap. Before the
    /// turn begins.
    AttachmentTruncated { name: &'a str, text_len: usize },
    /// The turn did not begin, so a file `send --attach` added was taken out of the
    /// selection again (`error`: that failed and it stays selected).
    AttachmentWithdrawn {
        reference: &'a str,
        name: &'a str,
        error: Option<&'a str>,
    },
    /// `send --wait`: the session is busy and the turn queues behind `turn`.
    Waiting {
        session: &'a str,
        turn: Option<&'a str>,
    },
    /// The begin record is durable.
    Begun {
        turn: &'a str,
        session: &'a str,
        agent: &'a str,
        /// The agent's configured `name`, for people.
        agent_name: Option<&'a str>,
        /// The attachments pinned to the turn.
        attachments: &'a [AttachmentPin],
    },
    /// Visible model output.
    Delta(&'a str),
    ToolStarted {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    /// `output` is cut to [`crate::catalog::MODEL_OUTPUT_CAP`] with a note, as the model
    /// sees it (the ledger keeps it whole).
    ToolResult {
        call_id: &'a str,
        name: &'a str,
        output: &'a str,
        is_error: bool,
        /// A command's exit code.
        exit_code: Option<i32>,
        duration_ms: u64,
    },
    /// Something the user should know; also recorded in the ledger.
    Warning(&'a str),
    /// A coordinator's plan is recorded: the method that made it and its subtasks.
    Planned {
        method: &'a str,
        subtasks: &'a [PlannedSubtask],
    },
    /// A subtask of a coordinator's pass started on its worker.
    SubtaskStarted { subtask: &'a str, worker: &'a str },
    /// A subtask ended (`completed`, `failed` or `stopped`).
    SubtaskEnded {
        subtask: &'a str,
        worker: &'a str,
        state: TurnState,
        error: Option<&'a str>,
    },
    /// In a multi-agent session, an agent starts its answer (why: the activation rule).
    Answering { agent: &'a str, reason: &'a str },
}

/// How a turn ended; serve's control socket carries it as it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnOutcome {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub agent_name: Option<String>,
    pub state: TurnState,
    pub output: String,
    pub error: Option<String>,
    /// Provider-reported usage of the turn's calls (`complete: false` when a call reported
    /// none).
    pub usage: Usage,
}

/// Where a turn came from when no person sent it: an automation's occurrence. Recorded
/// (`TurnOrigin`) in the same durable append as the turn's begin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOrigin {
    pub automation: String,
    /// The scheduled time of the occurrence (not when it ran); for a manual run, when it
    /// was requested.
    pub occurrence: Millis,
    /// `schedule` or `manual`.
    pub trigger: String,
    /// What runs it: `tick`, `serve` or `manual`.
    pub runner: String,
}

/// A piece of the system prompt that is not the agent's own `system_prompt`: core memory
/// today, passive semantic recall next. Its text is part of every request's estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextSection {
    /// What the section is, e.g. `core_memory` (for tests and debugging).
    pub label: String,
    /// The text as the model reads it (empty: nothing is added).
    pub text: String,
    /// What the user should know about it (a block cut to its limit, a file that could not
    /// be read): warnings of the turn, reported once per turn.
    pub warnings: Vec<String>,
}

/// What a context source sees when a request is built.
#[derive(Clone, Copy, Debug)]
pub struct RequestInfo<'a> {
    pub turn: &'a str,
    /// The memory scope of the conversing agent: `{session}:{agent}`, or
    /// `{session}:{coordinator}:worker:{worker}` for a declared worker.
    pub scope: &'a str,
    /// The user's request of this turn (the query for passive recall).
    pub request: &'a str,
    /// The earlier turns whose messages this request carries (the conversation window),
    /// oldest first: passive recall does not inject their exchanges again.
    pub window: &'a [String],
    /// The session's turns a rewind superseded: passive recall leaves their exchanges out.
    pub superseded: &'a [String],
}

/// Supplies a [`ContextSection`] for each request of a conversing agent.
pub trait ContextSource: Send {
    /// The section for this request; `None` leaves nothing in the prompt. An error fails
    /// nothing: the engine records it as a warning and builds the request without it.
    fn section(&mut self, request: &RequestInfo<'_>) -> Result<Option<ContextSection>>;
}

/// One model response and what followed it within a turn.
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    pub turn: &'a str,
    pub scope: &'a str,
    /// The user's request of this turn.
    pub request: &'a str,
    /// The assistant message, then the tool results that answered its calls, if any.
    pub messages: &'a [Message],
}

/// A turn as it ended, for observers.
#[derive(Clone, Copy, Debug)]
pub struct TurnSummary<'a> {
    pub turn: &'a str,
    pub scope: &'a str,
    pub request: &'a str,
    pub outcome: &'a TurnOutcome,
}

/// Watches a conversing agent's turns: the daily log and semantic writes plug in here.
/// An error fails nothing: the engine records it as a warning of the turn.
pub trait TurnObserver: Send {
    /// Before the turn's first model call (the daily log records the request here).
    fn before_turn(&mut self, _request: &RequestInfo<'_>) -> Result<()> {
        Ok(())
    }

    /// After each model response (and its tool results), before the next call.
    fn after_exchange(&mut self, _exchange: &Exchange<'_>) -> Result<()> {
        Ok(())
    }

    /// After the turn's terminal record is durable.
    fn after_turn(&mut self, _turn: &TurnSummary<'_>) -> Result<()> {
        Ok(())
    }
}

/// A [`TurnEvent`], owned: sent between threads (a coordinator's workers) and over
/// serve's control socket (as JSON: the `event` tag names the variant).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum OwnedTurnEvent {
    AttachmentTruncated {
        name: String,
        text_len: usize,
    },
    AttachmentWithdrawn {
        reference: String,
        name: String,
        error: Option<String>,
    },
    Waiting {
        session: String,
        turn: Option<String>,
    },
    Begun {
        turn: String,
        session: String,
        agent: String,
        agent_name: Option<String>,
        attachments: Vec<axocoatl_store::ledger::record::AttachmentPin>,
    },
    Delta {
        text: String,
    },
    ToolStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    ToolResult {
        call_id: String,
        name: String,
        output: String,
        is_error: bool,
        exit_code: Option<i32>,
        duration_ms: u64,
    },
    Warning {
        message: String,
    },
    Planned {
        method: String,
        subtasks: Vec<axocoatl_store::ledger::record::PlannedSubtask>,
    },
    SubtaskStarted {
        subtask: String,
        worker: String,
    },
    SubtaskEnded {
        subtask: String,
        worker: String,
        state: TurnState,
        error: Option<String>,
    },
    Answering {
        agent: String,
        reason: String,
    },
}

impl OwnedTurnEvent {
    pub fn of(ev: &TurnEvent<'_>) -> OwnedTurnEvent {
        let s = |x: &str| x.to_owned();
        match *ev {
            TurnEvent::AttachmentTruncated { name, text_len } => {
                OwnedTurnEvent::AttachmentTruncated {
                    name: s(name),
                    text_len,
                }
            }
            TurnEvent::AttachmentWithdrawn {
                reference,
                name,
                error,
            } => OwnedTurnEvent::AttachmentWithdrawn {
                reference: s(reference),
                name: s(name),
                error: error.map(s),
            },
            TurnEvent::Waiting { session, turn } => OwnedTurnEvent::Waiting {
                session: s(session),
                turn: turn.map(s),
            },
            TurnEvent::Begun {
                turn,
                session,
                agent,
                agent_name,
                attachments,
            } => OwnedTurnEvent::Begun {
                turn: s(turn),
                session: s(session),
                agent: s(agent),
                agent_name: agent_name.map(s),
                attachments: attachments.to_vec(),
            },
            TurnEvent::Delta(text) => OwnedTurnEvent::Delta { text: s(text) },
            TurnEvent::ToolStarted {
                call_id,
                name,
                arguments,
            } => OwnedTurnEvent::ToolStarted {
                call_id: s(call_id),
                name: s(name),
                arguments: s(arguments),
            },
            TurnEvent::ToolResult {
                call_id,
                name,
                output,
                is_error,
                exit_code,
                duration_ms,
            } => OwnedTurnEvent::ToolResult {
                call_id: s(call_id),
                name: s(name),
                output: s(output),
                is_error,
                exit_code,
                duration_ms,
            },
            TurnEvent::Warning(m) => OwnedTurnEvent::Warning { message: s(m) },
            TurnEvent::Planned { method, subtasks } => OwnedTurnEvent::Planned {
                method: s(method),
                subtasks: subtasks.to_vec(),
            },
            TurnEvent::SubtaskStarted { subtask, worker } => OwnedTurnEvent::SubtaskStarted {
                subtask: s(subtask),
                worker: s(worker),
            },
            TurnEvent::SubtaskEnded {
                subtask,
                worker,
                state,
                error,
            } => OwnedTurnEvent::SubtaskEnded {
                subtask: s(subtask),
                worker: s(worker),
                state,
                error: error.map(s),
            },
            TurnEvent::Answering { agent, reason } => OwnedTurnEvent::Answering {
                agent: s(agent),
                reason: s(reason),
            },
        }
    }

    /// The event as the runtime reports it, borrowing from `self`.
    pub fn as_event(&self) -> TurnEvent<'_> {
        match self {
            OwnedTurnEvent::AttachmentTruncated { name, text_len } => {
                TurnEvent::AttachmentTruncated {
                    name,
                    text_len: *text_len,
                }
            }
            OwnedTurnEvent::AttachmentWithdrawn {
                reference,
                name,
                error,
            } => TurnEvent::AttachmentWithdrawn {
                reference,
                name,
                error: error.as_deref(),
            },
            OwnedTurnEvent::Waiting { session, turn } => TurnEvent::Waiting {
                session,
                turn: turn.as_deref(),
            },
            OwnedTurnEvent::Begun {
                turn,
                session,
                agent,
                agent_name,
                attachments,
            } => TurnEvent::Begun {
                turn,
                session,
                agent,
                agent_name: agent_name.as_deref(),
                attachments,
            },
            OwnedTurnEvent::Delta { text } => TurnEvent::Delta(text),
            OwnedTurnEvent::ToolStarted {
                call_id,
                name,
                arguments,
            } => TurnEvent::ToolStarted {
                call_id,
                name,
                arguments,
            },
            OwnedTurnEvent::ToolResult {
                call_id,
                name,
                output,
                is_error,
                exit_code,
                duration_ms,
            } => TurnEvent::ToolResult {
                call_id,
                name,
                output,
                is_error: *is_error,
                exit_code: *exit_code,
                duration_ms: *duration_ms,
            },
            OwnedTurnEvent::Warning { message } => TurnEvent::Warning(message),
            OwnedTurnEvent::Planned { method, subtasks } => TurnEvent::Planned { method, subtasks },
            OwnedTurnEvent::SubtaskStarted { subtask, worker } => {
                TurnEvent::SubtaskStarted { subtask, worker }
            }
            OwnedTurnEvent::SubtaskEnded {
                subtask,
                worker,
                state,
                error,
            } => TurnEvent::SubtaskEnded {
                subtask,
                worker,
                state: *state,
                error: error.as_deref(),
            },
            OwnedTurnEvent::Answering { agent, reason } => TurnEvent::Answering { agent, reason },
        }
    }
}
