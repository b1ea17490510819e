//! What a turn is to the rest of the runtime: the events it reports, how it ended, where it
//! came from, and the traits memory features implement to take part in it (tools take part
//! through the registry in `crate::tools`). The engine (`crate::engine`) runs turns; these types sit
//! below it so that a feature implementing them never depends on the engine.

use axocoatl_store::ledger::record::{AttachmentPin, Millis, PlannedSubtask, TurnState, Usage};

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::provider::Message;

/// `TurnBegun.mode` of a memory consolidation pass: a turn in the ledger (begun, ended,
/// stoppable, its usage counted) that is no part of the agent's conversation.
pub const MODE_CONSOLIDATION: &str = "consolidation";

/// What a running turn reports to its caller, in order: one type from the engine to the
/// printed line. The engine reports events borrowing what it holds (nothing is copied for a
/// delta); [`TurnEvent::into_owned`] makes one that outlives it, for a coordinator's worker
/// threads and serve's control socket (as this JSON). `send --json` and `retry --json` print
/// the same JSON, one event per line: `type` names the event, and each event of a begun
/// turn carries its `turn`. Field names are an interface scripts match on (they never change
/// meaning), and docs/json.md is generated from these doc comments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
pub enum TurnEvent<'a> {
    /// `send --attach` stored a file whose extracted text was cut to the cap. Before the
    /// turn begins; `send` says it on stderr.
    #[serde(rename = "attachment.truncated")]
    #[schemars(skip)]
    AttachmentTruncated { name: Cow<'a, str>, text_len: usize },
    /// The turn did not begin, so a file `send --attach` added was taken out of the
    /// selection again (`error`: that failed and it stays selected). `send` says it on
    /// stderr.
    #[serde(rename = "attachment.withdrawn")]
    #[schemars(skip)]
    AttachmentWithdrawn {
        reference: Cow<'a, str>,
        name: Cow<'a, str>,
        error: Option<Cow<'a, str>>,
    },
    /// `send --wait`: the session is busy and the turn queues behind `turn`. `send` says it
    /// on stderr.
    #[serde(rename = "waiting")]
    #[schemars(skip)]
    Waiting {
        session: Cow<'a, str>,
        turn: Option<Cow<'a, str>>,
    },
    /// The turn is recorded: it has begun.
    #[serde(rename = "turn.begun")]
    Begun {
        /// The turn's id.
        turn: Cow<'a, str>,
        session: Cow<'a, str>,
        /// The agent's id.
        agent: Cow<'a, str>,
        /// The agent's configured name, when it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_name: Option<Cow<'a, str>>,
        /// The attachments the turn pinned, when it pinned any (left out when none).
        /// `send` lists them on stderr; its JSON leaves them out (`show --json` has them).
        #[serde(default, skip_serializing_if = "is_empty")]
        #[schemars(skip)]
        attachments: Cow<'a, [AttachmentPin]>,
    },
    /// The next piece of visible output.
    #[serde(rename = "delta")]
    Delta {
        turn: Cow<'a, str>,
        text: Cow<'a, str>,
    },
    /// The model called a tool.
    #[serde(rename = "tool.started")]
    ToolStarted {
        turn: Cow<'a, str>,
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        /// The arguments as JSON text.
        arguments: Cow<'a, str>,
    },
    /// A tool call's result, as the model sees it.
    #[serde(rename = "tool.result")]
    ToolResult {
        turn: Cow<'a, str>,
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        /// Cut past 64 KiB with a note (the ledger keeps it whole).
        output: Cow<'a, str>,
        is_error: bool,
        /// A command's exit code (null for other tools).
        exit_code: Option<i32>,
        duration_ms: u64,
    },
    /// Something the user should know (also recorded in the ledger).
    #[serde(rename = "warning")]
    Warning {
        /// Empty for a warning before the turn began (about the session's records or a
        /// file `--attach` added).
        turn: Cow<'a, str>,
        message: Cow<'a, str>,
    },
    /// A coordinator's plan: how it was made and its subtasks.
    #[serde(rename = "plan")]
    Planned {
        turn: Cow<'a, str>,
        /// `model`, `model-repaired` or `fallback`.
        method: Cow<'a, str>,
        subtasks: Cow<'a, [PlannedSubtask]>,
    },
    /// A coordinator's subtask started.
    #[serde(rename = "subtask.started")]
    SubtaskStarted {
        turn: Cow<'a, str>,
        subtask: Cow<'a, str>,
        /// A declared worker, or `adhoc`.
        worker: Cow<'a, str>,
        /// Always `running`.
        #[schemars(with = "String")]
        state: Running,
    },
    /// A coordinator's subtask ended.
    #[serde(rename = "subtask.ended")]
    SubtaskEnded {
        turn: Cow<'a, str>,
        subtask: Cow<'a, str>,
        worker: Cow<'a, str>,
        /// `completed`, `failed` or `stopped`.
        #[serde(with = "state_name")]
        #[schemars(with = "String")]
        state: TurnState,
        error: Option<Cow<'a, str>>,
    },
    /// In a multi-agent session: the next agent answering, and why.
    #[serde(rename = "agent.answering")]
    Answering {
        turn: Cow<'a, str>,
        agent: Cow<'a, str>,
        reason: Cow<'a, str>,
    },
}

/// The state of a subtask that has started (its JSON says `running`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Running {
    #[default]
    #[serde(rename = "running")]
    Running,
}

fn is_empty<T>(items: &[T]) -> bool {
    items.is_empty()
}

/// A [`TurnState`] by its name as outputs show it (`completed`, not the record's
/// `Completed`).
mod state_name {
    use axocoatl_store::ledger::record::TurnState;
    use serde::{Deserialize, Deserializer, Serializer};

    const STATES: [TurnState; 4] = [
        TurnState::Completed,
        TurnState::Failed,
        TurnState::Stopped,
        TurnState::Interrupted,
    ];

    pub fn serialize<S: Serializer>(state: &TurnState, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(state.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TurnState, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        STATES
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| {
                serde::de::Error::unknown_variant(
                    &name,
                    &["completed", "failed", "stopped", "interrupted"],
                )
            })
    }
}

impl TurnEvent<'_> {
    /// The event with everything it borrows copied: it can cross a thread or outlive the
    /// turn's state.
    pub fn into_owned(self) -> TurnEvent<'static> {
        // Each variant with all its fields: a field left out here does not compile.
        macro_rules! owned {
            ($($variant:ident { $($field:ident),* }),* $(,)?) => {
                match self {
                    $(TurnEvent::$variant { $($field),* } => TurnEvent::$variant {
                        $($field: IntoStatic::into_static($field)),*
                    },)*
                }
            };
        }
        owned!(
            AttachmentTruncated { name, text_len },
            AttachmentWithdrawn {
                reference,
                name,
                error
            },
            Waiting { session, turn },
            Begun {
                turn,
                session,
                agent,
                agent_name,
                attachments
            },
            Delta { turn, text },
            ToolStarted {
                turn,
                call_id,
                name,
                arguments
            },
            ToolResult {
                turn,
                call_id,
                name,
                output,
                is_error,
                exit_code,
                duration_ms
            },
            Warning { turn, message },
            Planned {
                turn,
                method,
                subtasks
            },
            SubtaskStarted {
                turn,
                subtask,
                worker,
                state
            },
            SubtaskEnded {
                turn,
                subtask,
                worker,
                state,
                error
            },
            Answering {
                turn,
                agent,
                reason
            },
        )
    }
}

/// A field of a [`TurnEvent`] with what it borrows copied.
trait IntoStatic {
    type Static;
    fn into_static(self) -> Self::Static;
}

impl IntoStatic for Cow<'_, str> {
    type Static = Cow<'static, str>;
    fn into_static(self) -> Cow<'static, str> {
        Cow::Owned(self.into_owned())
    }
}

impl<T: Clone + 'static> IntoStatic for Cow<'_, [T]> {
    type Static = Cow<'static, [T]>;
    fn into_static(self) -> Cow<'static, [T]> {
        Cow::Owned(self.into_owned())
    }
}

impl<T: IntoStatic> IntoStatic for Option<T> {
    type Static = Option<T::Static>;
    fn into_static(self) -> Self::Static {
        self.map(T::into_static)
    }
}

/// Fields that borrow nothing stay as they are.
macro_rules! owns_itself {
    ($($t:ty),*) => {
        $(impl IntoStatic for $t {
            type Static = $t;
            fn into_static(self) -> $t {
                self
            }
        })*
    };
}

owns_itself!(bool, i32, u64, usize, Running, TurnState);

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

    /// Whether its section changes from one request to the next (what memory recalls for
    /// the request), rather than staying the same until something edits it: a provider's
    /// prompt cache ends no cached prefix after such a section.
    fn volatile(&self) -> bool {
        false
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `type` of each event as `send --json` prints it and serve's socket carries it.
    /// Scripts match on these names: a renamed event fails here.
    const TYPES: &[&str] = &[
        "attachment.truncated",
        "attachment.withdrawn",
        "waiting",
        "turn.begun",
        "delta",
        "tool.started",
        "tool.result",
        "warning",
        "plan",
        "subtask.started",
        "subtask.ended",
        "agent.answering",
    ];

    /// The `type` an event must have (a new event must be named here and in [`TYPES`]).
    fn expected_type(ev: &TurnEvent<'_>) -> &'static str {
        match ev {
            TurnEvent::AttachmentTruncated { .. } => "attachment.truncated",
            TurnEvent::AttachmentWithdrawn { .. } => "attachment.withdrawn",
            TurnEvent::Waiting { .. } => "waiting",
            TurnEvent::Begun { .. } => "turn.begun",
            TurnEvent::Delta { .. } => "delta",
            TurnEvent::ToolStarted { .. } => "tool.started",
            TurnEvent::ToolResult { .. } => "tool.result",
            TurnEvent::Warning { .. } => "warning",
            TurnEvent::Planned { .. } => "plan",
            TurnEvent::SubtaskStarted { .. } => "subtask.started",
            TurnEvent::SubtaskEnded { .. } => "subtask.ended",
            TurnEvent::Answering { .. } => "agent.answering",
        }
    }

    /// One event of every kind, borrowing as the engine reports them; optional fields set
    /// in some and absent in others.
    fn every_event<'a>(
        pins: &'a [AttachmentPin],
        subtasks: &'a [PlannedSubtask],
    ) -> Vec<TurnEvent<'a>> {
        let turn = || Cow::Borrowed("0193c0de");
        vec![
            TurnEvent::AttachmentTruncated {
                name: "big.pdf".into(),
                text_len: 3_000_000,
            },
            TurnEvent::AttachmentWithdrawn {
                reference: "ref1".into(),
                name: "a.txt".into(),
                error: Some("permission denied".into()),
            },
            TurnEvent::Waiting {
                session: "main".into(),
                turn: None,
            },
            TurnEvent::Begun {
                turn: turn(),
                session: "main".into(),
                agent: "bot".into(),
                agent_name: Some("Helpful Bot".into()),
                attachments: pins.into(),
            },
            TurnEvent::Delta {
                turn: turn(),
                text: "Hello, \"world\"\n".into(),
            },
            TurnEvent::ToolStarted {
                turn: turn(),
                call_id: "call_0".into(),
                name: "shell".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            },
            TurnEvent::ToolResult {
                turn: turn(),
                call_id: "call_0".into(),
                name: "shell".into(),
                output: "a\nb".into(),
                is_error: true,
                exit_code: Some(2),
                duration_ms: 12,
            },
            TurnEvent::Warning {
                turn: "".into(),
                message: "a file was cut".into(),
            },
            TurnEvent::Planned {
                turn: turn(),
                method: "model-repaired".into(),
                subtasks: subtasks.into(),
            },
            TurnEvent::SubtaskStarted {
                turn: turn(),
                subtask: "s1".into(),
                worker: "adhoc".into(),
                state: Running::Running,
            },
            TurnEvent::SubtaskEnded {
                turn: turn(),
                subtask: "s1".into(),
                worker: "researcher".into(),
                state: TurnState::Failed,
                error: Some("model overloaded".into()),
            },
            TurnEvent::Answering {
                turn: turn(),
                agent: "critic".into(),
                reason: "mentioned".into(),
            },
        ]
    }

    fn pins() -> Vec<AttachmentPin> {
        vec![AttachmentPin {
            reference: "ref1".into(),
            name: "a.txt".into(),
            media_type: "text/plain".into(),
            size: 3,
            object: "blake3:00".into(),
            text_object: None,
        }]
    }

    fn subtasks() -> Vec<PlannedSubtask> {
        vec![PlannedSubtask {
            id: "s1".into(),
            worker: "adhoc".into(),
            role: Some("checks facts".into()),
            task: "check".into(),
            depends_on: vec!["s0".into()],
        }]
    }

    #[test]
    fn every_event_round_trips_owned() {
        let (pins, subtasks) = (pins(), subtasks());
        for ev in every_event(&pins, &subtasks) {
            let json = serde_json::to_string(&ev).expect("serialize");
            let back: TurnEvent<'static> = serde_json::from_str(&json).expect(&json);
            assert_eq!(back, ev.clone().into_owned(), "{json}");
            assert_eq!(back, ev, "{json}");
        }
    }

    #[test]
    fn optional_fields_left_out_round_trip() {
        let ev = TurnEvent::Begun {
            turn: "t".into(),
            session: "main".into(),
            agent: "bot".into(),
            agent_name: None,
            attachments: Cow::Borrowed(&[]),
        };
        let json = serde_json::to_string(&ev).expect("serialize");
        assert_eq!(
            json,
            r#"{"type":"turn.begun","turn":"t","session":"main","agent":"bot"}"#
        );
        let back: TurnEvent<'static> = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, ev);
    }

    #[test]
    fn every_event_has_its_cli_type() {
        let (pins, subtasks) = (pins(), subtasks());
        let events = every_event(&pins, &subtasks);
        let mut seen = Vec::new();
        for ev in &events {
            let json = serde_json::to_value(ev).expect("serialize");
            assert_eq!(json["type"], expected_type(ev), "{json}");
            seen.push(expected_type(ev));
        }
        assert_eq!(seen, TYPES, "one event of each kind, in the order of TYPES");
    }

    #[test]
    fn turn_events_carry_their_turn_and_fields_as_printed() {
        let (pins, subtasks) = (pins(), subtasks());
        let lines: Vec<serde_json::Value> = every_event(&pins, &subtasks)
            .iter()
            .map(|ev| serde_json::to_value(ev).expect("serialize"))
            .collect();
        let of = |t: &str| {
            lines
                .iter()
                .find(|l| l["type"] == t)
                .unwrap_or_else(|| panic!("no {t}"))
                .clone()
        };
        for t in &TYPES[3..] {
            assert!(of(t)["turn"].is_string(), "{t} has no turn");
        }
        // `type` first, then `turn`, as every line has always been written.
        let delta = serde_json::to_string(&every_event(&pins, &subtasks)[4]).expect("json");
        assert_eq!(
            delta,
            r#"{"type":"delta","turn":"0193c0de","text":"Hello, \"world\"\n"}"#
        );
        assert_eq!(of("warning")["message"], "a file was cut");
        assert_eq!(of("subtask.started")["state"], "running");
        assert_eq!(of("subtask.ended")["state"], "failed");
        assert_eq!(of("tool.result")["exit_code"], 2);
        assert_eq!(of("plan")["method"], "model-repaired");
        assert_eq!(of("agent.answering")["reason"], "mentioned");
        let begun = of("turn.begun");
        assert_eq!(begun["agent_name"], "Helpful Bot");
        assert_eq!(begun["attachments"][0]["media_type"], "text/plain");
    }
}
