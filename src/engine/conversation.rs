//! The conversation an Agent sees: from its checkpoint when one is valid, else rebuilt from
//! the session's ledger (which is the authority), within the 8 MiB projection limit.

use axocoatl_store::ledger::record::{Bounded, Usage};
use axocoatl_store::Repo;

use crate::checkpoint::{self, CkMessage, Snapshot, PAYLOAD_VERSION, PROJECTION_LIMIT};
use crate::error::Result;
use crate::history::{ToolEvent, TurnView, ViewState};
use crate::provider::{Message, Role, ToolCall};

/// The user message for a request and its inline context.
pub fn render_user_message(request: &str, context: &[(String, String)]) -> String {
    let mut out = request.to_owned();
    for (label, text) in context {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("<context source=\"{label}\">\n{text}\n</context>"));
    }
    out
}

fn full_text(repo: &Repo, b: &Bounded) -> Result<String> {
    match &b.object {
        Some(hash) => Ok(String::from_utf8_lossy(&repo.objects().get(hash)?).into_owned()),
        None => Ok(b.inline.clone()),
    }
}

/// Whether a turn belongs in the model's conversation: not superseded by a rewind, and
/// completed, or stopped with some output (the partial answer is what the user saw). Failed
/// and interrupted turns are left out.
pub fn retained(t: &TurnView) -> bool {
    !t.superseded
        && match t.state {
            ViewState::Completed => true,
            ViewState::Stopped => !t.output.is_empty(),
            _ => false,
        }
}

/// A turn's inline context as `(label, text)`, the whole text (from its object when it was
/// too long to keep inline).
pub fn inline_context(repo: &Repo, t: &TurnView) -> Result<Vec<(String, String)>> {
    t.inline_context
        .iter()
        .map(|c| Ok((c.label.clone(), full_text(repo, &c.text)?)))
        .collect()
}

/// The messages of one retained turn, as rebuilt from the ledger: the request; each tool
/// round as an assistant message with its calls followed by one tool message per result,
/// as the model saw them (cut past 64 KiB); and the answer. Text the model wrote before a
/// tool round is part of the turn's one recorded output, so it all lands in the answer.
pub fn turn_messages(repo: &Repo, t: &TurnView) -> Result<Vec<Message>> {
    let context = inline_context(repo, t)?;
    let mut messages = vec![crate::attach::user_message(
        repo,
        &t.request,
        &context,
        &t.attachments,
        false,
    )?];
    let mut rest: &[ToolEvent] = &t.tools;
    while let Some(first) = rest.first() {
        let n = rest.iter().take_while(|e| e.round == first.round).count();
        let (round, later) = rest.split_at(n);
        rest = later;
        let mut ask = Message::new(Role::Assistant, "");
        for e in round {
            let text = stored_text(repo, &e.arguments, e.arguments_object.as_deref())?;
            let arguments = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
            ask.tool_calls.push(ToolCall {
                id: e.call_id.clone(),
                name: e.name.clone(),
                arguments,
            });
        }
        messages.push(ask);
        for e in round {
            let text = match &e.output {
                Some(out) => {
                    crate::tools::for_model(&stored_text(repo, out, e.output_object.as_deref())?)
                }
                None => "no result was recorded for this call".to_owned(),
            };
            let mut answer = Message::new(Role::Tool, text);
            answer.tool_call_id = Some(e.call_id.clone());
            answer.name = Some(e.name.clone());
            messages.push(answer);
        }
    }
    messages.push(Message::new(Role::Assistant, t.output.clone()));
    Ok(messages)
}

/// Recorded text, whole: from its object when it was too long to keep inline.
fn stored_text(repo: &Repo, inline: &str, object: Option<&str>) -> Result<String> {
    match object {
        Some(hash) => Ok(String::from_utf8_lossy(&repo.objects().get(hash)?).into_owned()),
        None => Ok(inline.to_owned()),
    }
}

/// What the Agent starts a turn with.
#[derive(Debug, Default)]
pub struct Prior {
    pub messages: Vec<Message>,
    pub head_turn: Option<String>,
    pub usage: Usage,
    /// The checkpoint was missing, corrupt or stale and was rebuilt from the ledger.
    pub rebuilt: bool,
}

/// Loads the conversation for `agent` in `session` from `turns` (the session's turns in
/// ledger order), preferring the newest valid checkpoint.
pub fn load(repo: &Repo, session: &str, agent: &str, turns: &[&TurnView]) -> Result<Prior> {
    let kept: Vec<&TurnView> = turns
        .iter()
        .copied()
        .filter(|t| t.agent == agent && retained(t))
        .collect();
    // Newest first, decoded one at a time: usually the first one is valid.
    for file in checkpoint::files(repo, session, agent) {
        let Ok(s) = checkpoint::load_one(repo, &file) else {
            continue; // corrupt or incompatible: never used (fsck reports it)
        };
        if s.in_flight {
            continue;
        }
        let start = match &s.head_turn {
            None if kept.is_empty() || s.messages.is_empty() => 0,
            None => continue,
            Some(head) => match kept.iter().position(|t| &t.turn == head) {
                Some(i) => i + 1,
                None => continue, // superseded, failed or unknown: stale
            },
        };
        let mut messages: Vec<Message> = s.messages.iter().map(Message::from).collect();
        let mut usage = s.usage;
        let mut head = s.head_turn.clone();
        for t in &kept[start..] {
            messages.extend(turn_messages(repo, t)?);
            if let Some(u) = &t.usage {
                usage.add(u);
            }
            head = Some(t.turn.clone());
        }
        return Ok(Prior {
            messages,
            head_turn: head,
            usage,
            rebuilt: false,
        });
    }
    let mut messages = Vec::new();
    let mut usage = Usage::ZERO;
    for t in &kept {
        messages.extend(turn_messages(repo, t)?);
        if let Some(u) = &t.usage {
            usage.add(u);
        }
    }
    Ok(Prior {
        messages: checkpoint::project_within(messages, PROJECTION_LIMIT),
        head_turn: kept.last().map(|t| t.turn.clone()),
        usage,
        rebuilt: true,
    })
}

/// The newest whole turns within `max` messages (what is sent; the checkpoint keeps more).
pub fn trim_to(messages: &[Message], max: usize) -> Vec<Message> {
    if messages.len() <= max {
        return messages.to_vec();
    }
    let mut start = messages.len() - max;
    while start < messages.len() && messages[start].role != Role::User {
        start += 1;
    }
    messages[start..].to_vec()
}

pub fn snapshot(
    messages: &[Message],
    head_turn: Option<String>,
    in_flight: bool,
    usage: Usage,
    ledger_seq: u64,
) -> Snapshot {
    let projected = checkpoint::project_within(messages.to_vec(), PROJECTION_LIMIT);
    Snapshot {
        version: PAYLOAD_VERSION,
        ledger_seq,
        head_turn,
        in_flight,
        messages: projected.iter().map(CkMessage::from).collect(),
        usage,
    }
}

/// Writes the checkpoint `prior` describes (a repair after a rebuild from the ledger).
/// A checkpoint is a cache: failing to write one only means the next turn rebuilds again.
pub fn write_prior(
    repo: &Repo,
    session: &str,
    agent: &str,
    prior: &Prior,
    seq: u64,
    keep: usize,
) -> bool {
    let snap = snapshot(
        &prior.messages,
        prior.head_turn.clone(),
        false,
        prior.usage,
        seq,
    );
    checkpoint::write(repo, session, agent, &snap, keep).is_ok()
}
