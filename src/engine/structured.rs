//! Structured output: a turn whose reply must match a JSON Schema (`send --schema`, an
//! agent's `output_schema:`).
//!
//! The schema travels with the request ([`Sampling::schema`](crate::provider::Sampling)):
//! the local model decodes under it, servers are sent it. Whatever came back, the reply is
//! parsed and validated against the whole schema here. A valid reply is the turn's output,
//! as the JSON value pretty-printed (what `send` prints, `show` and exports carry, search
//! finds), reported as [`TurnEvent::Value`]. An invalid one is a warning of the turn listing
//! its violations by JSON pointer; with retries left the model is asked again with them,
//! else the turn fails with them. A reply cut by `max_tokens` fails the turn, saying so.

use std::borrow::Cow;
use std::sync::Arc;

use axocoatl_store::ledger::record::SchemaUse;
use serde_json::Value;

use super::converse::{self, Conversant, Tally, TurnCx, TurnError};
use super::SendOptions;
use crate::config::{AgentConfig, AgentRole};
use crate::error::{Result, RuntimeError};
use crate::provider::{Message, Provider, Role};
use crate::schema::{self, Schema, Validator, Violation};
use crate::turn::{ContextSection, ContextSource, RequestInfo, TurnEvent};
use crate::workspace::Workspace;

/// The schema of a turn, and how often a reply that breaks it is asked for again.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnSchema {
    pub schema: Schema,
    pub retries: u32,
}

/// The schema `opts` gives, else the agent's `output_schema:` (files relative to the
/// configuration); refused for turns that are not one autonomous agent's.
pub(super) fn for_turn(
    ws: &Workspace,
    agent: &AgentConfig,
    opts: &SendOptions,
    multi: bool,
) -> Result<Option<TurnSchema>> {
    let schema = match (&opts.schema, &agent.output_schema) {
        (Some(given), _) => given.clone(),
        (None, Some(value)) => schema::resolve_value(value, &ws.config_dir(), ws.repo().objects())
            .map_err(|e| match e {
                schema::ResolveError::Invalid(e) => schema::ResolveError::Invalid(
                    e.within(&format!("agent {:?}: output_schema", agent.id)),
                ),
                other => other,
            })?,
        (None, None) => return Ok(None),
    };
    if multi || agent.role != AgentRole::Autonomous {
        return Err(RuntimeError::NotSupported(
            "a schema for a coordinator's or a multi-agent session's turn".into(),
        ));
    }
    let retries = opts.schema_retries.or(agent.schema_retries).unwrap_or(0);
    Ok(Some(TurnSchema { schema, retries }))
}

/// The schema a turn recorded, read back from its object (for `retry` and `rewind
/// --edit`), with its retries.
pub(super) fn stored(ws: &Workspace, used: &SchemaUse) -> Result<(Schema, u32)> {
    let bytes = ws.repo().objects().get(&used.object)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        RuntimeError::Internal(format!("schema object {} is not JSON: {e}", used.object))
    })?;
    let schema = Schema::new(value).map_err(|e| RuntimeError::Schema(e.into()))?;
    Ok((schema, used.retries))
}

/// The schema turn `prefix` had to match and its retries (none: it had none), for its
/// request sent again (`rewind --edit`).
pub fn schema_of(ws: &Workspace, prefix: &str) -> Result<(Option<Schema>, Option<u32>)> {
    use crate::history::{Projection, Scope, Want};
    let projection = Projection::of(ws.repo(), Scope::Prefix(prefix), Want::VIEWS)?;
    let turn = projection.resolve(prefix)?;
    match &turn.schema {
        Some(used) => {
            let (schema, retries) = stored(ws, used)?;
            Ok((Some(schema), Some(retries)))
        }
        None => Ok((None, None)),
    }
}

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// Converses until a reply matches the schema, asking again with its violations while
/// retries are left.
pub(super) fn converse(
    conv: &mut Conversant<'_>,
    provider: &mut dyn Provider,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
    ts: &TurnSchema,
) -> std::result::Result<(), TurnError> {
    let validator = Validator::new(&ts.schema.value)
        .map_err(|e| TurnError::Runtime(RuntimeError::Schema(e.into())))?;
    conv.sampling.schema = Some(Arc::new(ts.schema.value.clone()));
    conv.context
        .push(Box::new(Instruction(instruction(&ts.schema.value))));
    let first = transcript.len();
    let attempts = ts.retries.saturating_add(1);
    for attempt in 1..=attempts {
        let start = transcript.len();
        tally.output.clear();
        converse::converse(conv, provider, transcript, tally, cx, sink)?;
        if tally.last_finish.as_deref() == Some("length") {
            return Err(cut(conv, tally));
        }
        let reply = transcript
            .last()
            .filter(|m| m.role == Role::Assistant)
            .map_or("", |m| m.content.as_str());
        let violations = match schema::parse_reply(reply) {
            Ok(value) => {
                let found = validator.violations(&value);
                if found.is_empty() {
                    // The conversation keeps the request and this answer, not the attempts
                    // before it (as a rebuild from the ledger would).
                    transcript.drain(first..start);
                    accept(transcript, tally, cx, sink, value);
                    return Ok(());
                }
                found
            }
            Err(not_json) => vec![not_json],
        };
        let listed = list(&violations);
        cx.recorder().warn(
            sink,
            "schema",
            format!(
                "reply {attempt} of {attempts} does not match schema {}: {}",
                Schema::short_id(&ts.schema.id),
                listed.join("; ")
            ),
        )?;
        if attempt == attempts {
            return Err(failed(&ts.schema, &violations, ts.retries));
        }
        transcript.push(Message::new(Role::User, correction(&listed)));
    }
    Err(failed(&ts.schema, &[], ts.retries))
}

/// The schema, said to the model in its system prompt (whether or not the provider also
/// constrains it): a model told what the fields are fills them better.
struct Instruction(String);

impl ContextSource for Instruction {
    fn section(&mut self, _request: &RequestInfo<'_>) -> Result<Option<ContextSection>> {
        Ok(Some(ContextSection {
            label: "schema".into(),
            text: self.0.clone(),
            warnings: Vec::new(),
        }))
    }
}

fn instruction(schema: &Value) -> String {
    format!("Reply with only a JSON value that matches this JSON Schema, nothing else:\n{schema}")
}

/// The valid reply becomes the turn's output, pretty-printed, and is reported.
fn accept(
    transcript: &mut [Message],
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
    value: Value,
) {
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    if let Some(last) = transcript.last_mut() {
        last.content = text.clone();
    }
    tally.output = text;
    sink(TurnEvent::Value {
        turn: cx.turn.into(),
        value: Cow::Owned(value),
    });
}

fn list(violations: &[Violation]) -> Vec<String> {
    violations.iter().map(Violation::to_string).collect()
}

/// What the model is told when its reply broke the schema.
fn correction(listed: &[String]) -> String {
    let mut text = String::from("Your reply does not match the required JSON Schema:\n");
    for v in listed {
        text.push_str("- ");
        text.push_str(v);
        text.push('\n');
    }
    text.push_str("Reply again with only the corrected JSON value.");
    text
}

fn failed(schema: &Schema, violations: &[Violation], retries: u32) -> TurnError {
    let n = violations.len();
    let mut message = format!(
        "the reply does not match schema {} ({n} violation{}{}):",
        Schema::short_id(&schema.id),
        if n == 1 { "" } else { "s" },
        if n >= schema::MAX_VIOLATIONS {
            ", the first ones"
        } else {
            ""
        }
    );
    for v in violations {
        message.push_str("\n  ");
        message.push_str(&v.to_string());
    }
    message.push_str(if retries == 0 {
        "\nhint: a retry asks the model again with these violations (--schema-retries N, or schema_retries: on the agent)"
    } else {
        "\nhint: every retry broke the schema too: make the request clearer, or use a larger model"
    });
    TurnError::Runtime(RuntimeError::Refused {
        message,
        hint: crate::error::Next::say(""),
    })
}

fn cut(conv: &Conversant<'_>, tally: &Tally) -> TurnError {
    let limit = match (conv.sampling.max_tokens, tally.last_completion_tokens) {
        (Some(max), _) => format!("max_tokens ({max})"),
        (None, Some(n)) => format!("the provider's limit (after {n} tokens)"),
        (None, None) => "the provider's limit".into(),
    };
    TurnError::Runtime(RuntimeError::Refused {
        message: format!(
            "the reply was cut by {limit} before its JSON value was complete: it is not passed on\nhint: raise max_tokens (-o max_tokens=N, or sampling.max_tokens on the agent)"
        ),
        hint: crate::error::Next::say(""),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failure_lists_each_violation_by_pointer_with_a_hint() {
        let schema = Schema::new(serde_json::json!({"type": "object"})).expect("schema");
        let TurnError::Runtime(e) = failed(
            &schema,
            &[Violation {
                pointer: "/age".into(),
                message: "\"x\" is not of type \"integer\"".into(),
            }],
            0,
        ) else {
            panic!("a runtime error")
        };
        let text = e.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("the reply does not match schema "),
            "{text}"
        );
        assert!(lines[0].ends_with("(1 violation):"), "{text}");
        assert_eq!(lines[1], "  /age: \"x\" is not of type \"integer\"");
        assert!(lines[2].starts_with("hint: a retry asks"), "{text}");
        let c = correction(&["/a: wrong".into()]);
        assert!(c.contains("- /a: wrong\n") && c.ends_with("corrected JSON value."));
    }
}
