//! A 0.1.x transcript as turns, and the ledger records of each.

use axocoatl_store::ledger::record::{
    AgentOutput, AgentOutputBounded, ModelCall, ToolResult, ToolStarted, TurnBegun, TurnEnded,
    TurnState, Usage,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::legacy::checkpoint::{self as v0, Role as V0Role, V0Checkpoint};
use axocoatl_store::Repo;

use crate::bounded::bound;
use crate::error::Result;
use crate::history::TurnView;
use crate::provider::{Message, Role, ToolCall};

/// Output longer than this goes to an object ([`AgentOutputBounded`]), as the engine does.
const OUTPUT_RECORD_LIMIT: usize = 8 << 20;

/// One turn of a 0.1.x transcript.
#[derive(Clone, Debug, Default)]
pub(super) struct LegacyTurn {
    pub(super) request: String,
    /// Every message of the turn (what the checkpoint keeps), system messages left out.
    pub(super) messages: Vec<Message>,
    pub(super) calls: Vec<(ToolCall, Option<String>)>,
    pub(super) model_calls: usize,
    pub(super) output: String,
    pub(super) completed: bool,
}

fn to_message(m: &v0::Message) -> Message {
    let role = match m.role {
        V0Role::System => Role::System,
        V0Role::User => Role::User,
        V0Role::Assistant => Role::Assistant,
        V0Role::Tool => Role::Tool,
    };
    let mut msg = Message::new(role, m.content.clone());
    msg.tool_calls = m
        .tool_calls
        .iter()
        .map(|c| ToolCall::from_text(c.id.clone(), c.name.clone(), &c.arguments))
        .collect();
    msg.tool_call_id = m.tool_call_id.clone();
    msg.name = m.name.clone();
    msg
}

/// Splits a transcript into turns: each user message starts one (messages before the first
/// user message form a turn with an empty request); system messages belong to no turn. A
/// turn is completed when its last message is an assistant message without tool calls.
pub(super) fn split_turns(messages: &[v0::Message]) -> Vec<LegacyTurn> {
    let mut turns: Vec<LegacyTurn> = Vec::new();
    for m in messages {
        if m.role == V0Role::System {
            continue;
        }
        if m.role == V0Role::User || turns.is_empty() {
            turns.push(LegacyTurn {
                request: if m.role == V0Role::User {
                    m.content.clone()
                } else {
                    String::new()
                },
                ..LegacyTurn::default()
            });
        }
        let Some(t) = turns.last_mut() else { continue };
        let msg = to_message(m);
        match m.role {
            V0Role::Assistant => {
                t.model_calls += 1;
                t.output.push_str(&m.content);
                for c in &msg.tool_calls {
                    t.calls.push((c.clone(), None));
                }
            }
            V0Role::Tool => {
                let id = m.tool_call_id.as_deref();
                if let Some((_, result)) = t
                    .calls
                    .iter_mut()
                    .find(|(c, r)| Some(c.id.as_str()) == id && r.is_none())
                {
                    *result = Some(m.content.clone());
                }
            }
            V0Role::User | V0Role::System => {}
        }
        t.messages.push(msg);
    }
    for t in &mut turns {
        t.completed = t
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty());
    }
    turns
}

/// The id of turn `index` of the import of `digest`: the same in every run.
pub fn turn_id(digest: &str, index: usize) -> String {
    blake3::hash(format!("axocoatl 0.1.x import:{digest}:{index}").as_bytes()).to_hex()
        [..crate::ids::ID_LEN]
        .to_string()
}

const INTERRUPTED: &str =
    "imported from a 0.1.x checkpoint: the turn has no completed assistant response";

/// The records of one imported turn, in order.
pub(super) fn turn_records(
    repo: &Repo,
    c: &V0Checkpoint,
    session: &str,
    agent: &str,
    index: usize,
    t: &LegacyTurn,
) -> Result<Vec<Record>> {
    let turn = turn_id(&c.digest, index);
    let at = c.transcript.saved_at;
    let objects = repo.objects();
    let mut out = vec![Record::TurnBegun(TurnBegun {
        turn: turn.clone(),
        session: session.to_owned(),
        agent: agent.to_owned(),
        mode: "single".into(),
        request: t.request.clone(),
        inline_context: Vec::new(),
        attachments: Vec::new(),
        retry_of: None,
        pid: std::process::id(),
        at,
        schema: None,
    })];
    for _ in 0..t.model_calls {
        out.push(Record::ModelCall(ModelCall {
            turn: turn.clone(),
            agent: agent.to_owned(),
            provider: "0.1.x".into(),
            model: String::new(),
            reserved_tokens: 0,
            prompt_tokens: None,
            completion_tokens: None,
            finish_reason: None,
            at,
        }));
    }
    for (call, result) in &t.calls {
        out.push(Record::ToolStarted(ToolStarted {
            turn: turn.clone(),
            agent: agent.to_owned(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: bound(objects, &call.arguments.to_string())?,
            at,
        }));
        if let Some(result) = result {
            out.push(Record::ToolResult(ToolResult {
                turn: turn.clone(),
                agent: agent.to_owned(),
                call_id: call.id.clone(),
                name: call.name.clone(),
                is_error: false,
                output: bound(objects, result)?,
                at,
            }));
        }
    }
    if !t.output.is_empty() {
        out.push(if t.output.len() <= OUTPUT_RECORD_LIMIT {
            Record::AgentOutput(AgentOutput {
                turn: turn.clone(),
                agent: agent.to_owned(),
                text: t.output.clone(),
                at,
            })
        } else {
            Record::AgentOutputBounded(AgentOutputBounded {
                turn: turn.clone(),
                agent: agent.to_owned(),
                text: bound(objects, &t.output)?,
                at,
            })
        });
    }
    out.push(Record::TurnEnded(TurnEnded {
        turn,
        session: session.to_owned(),
        state: if t.completed {
            TurnState::Completed
        } else {
            TurnState::Interrupted
        },
        error: (!t.completed).then(|| INTERRUPTED.to_owned()),
        usage: turn_usage(t),
        at,
    }));
    Ok(out)
}

/// 0.1.x recorded no usage: the calls are counted, the tokens unknown.
pub(super) fn turn_usage(t: &LegacyTurn) -> Usage {
    Usage {
        prompt_tokens: 0,
        completion_tokens: 0,
        calls: t.model_calls as u32,
        complete: t.model_calls == 0,
    }
}

/// Of a turn's records, those a cut-short import did not write yet (`seen`: what the ledger
/// has of the turn).
pub(super) fn missing(records: Vec<Record>, seen: &TurnView) -> Vec<Record> {
    let mut calls = seen.calls.len();
    records
        .into_iter()
        .filter(|r| match r {
            Record::TurnBegun(_) => false,
            Record::ModelCall(_) if calls > 0 => {
                calls -= 1;
                false
            }
            Record::ToolStarted(s) => !seen.tools.iter().any(|e| e.call_id == s.call_id),
            Record::ToolResult(s) => !seen
                .tools
                .iter()
                .any(|e| e.call_id == s.call_id && e.output.is_some()),
            Record::AgentOutput(_) | Record::AgentOutputBounded(_) => seen.outputs.is_empty(),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: V0Role, content: &str) -> v0::Message {
        v0::Message {
            role,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
        }
    }

    #[test]
    fn turns_split_at_user_messages_and_end_completed_only_with_an_answer() {
        let mut ask = m(V0Role::Assistant, "let me look. ");
        ask.tool_calls.push(v0::ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        });
        let mut result = m(V0Role::Tool, "A");
        result.tool_call_id = Some("c1".into());
        let turns = split_turns(&[
            m(V0Role::System, "be brief"),
            m(V0Role::User, "q1"),
            ask,
            result,
            m(V0Role::Assistant, "it says A"),
            m(V0Role::User, "q2"),
        ]);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].request, "q1");
        assert!(turns[0].completed);
        assert_eq!(turns[0].model_calls, 2);
        assert_eq!(turns[0].output, "let me look. it says A");
        assert_eq!(turns[0].calls[0].1.as_deref(), Some("A"));
        assert_eq!(turns[0].messages.len(), 4);
        assert_eq!(turns[1].request, "q2");
        assert!(!turns[1].completed);
        assert_ne!(turn_id("d", 0), turn_id("d", 1));
        assert_eq!(turn_id("d", 0), turn_id("d", 0));
    }
}
