//! The conversation an Agent sees: from its checkpoint when one is valid, else rebuilt from
//! the session's ledger (which is the authority), within the 8 MiB projection limit.

use axocoatl_store::ledger::record::{TurnState, Usage};
use axocoatl_store::Repo;

use crate::checkpoint::{self, CkMessage, Snapshot, PAYLOAD_VERSION, PROJECTION_LIMIT};
use crate::error::Result;
use crate::history::{ToolEvent, TurnView, ViewState};
use crate::provider::{Message, Role, ToolCall};

/// Whether a turn belongs in the model's conversation: not superseded by a rewind, and
/// completed, or stopped with some output (the partial answer is what the user saw). Failed
/// and interrupted turns are left out.
pub fn retained(t: &TurnView) -> bool {
    // A consolidation pass is recorded as a turn, but it is no part of the conversation.
    !t.superseded
        && t.mode != crate::turn::MODE_CONSOLIDATION
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
        .map(|c| {
            Ok((
                c.label.clone(),
                stored_text(repo, &c.text.inline, c.text.object.as_deref())?,
            ))
        })
        .collect()
}

/// A turn's whole output (from its object when it was too long for one record).
pub fn output_text(repo: &Repo, t: &TurnView) -> Result<String> {
    stored_text(repo, &t.output, t.output_object.as_deref())
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
        messages.extend(tool_round(repo, round)?);
    }
    messages.push(Message::new(Role::Assistant, output_text(repo, t)?));
    Ok(messages)
}

/// One tool round: the assistant message with its calls, then one tool message per result.
fn tool_round(repo: &Repo, round: &[ToolEvent]) -> Result<Vec<Message>> {
    let mut ask = Message::new(Role::Assistant, "");
    for e in round {
        let text = stored_text(repo, &e.arguments, e.arguments_object.as_deref())?;
        ask.tool_calls.push(ToolCall::from_text(
            e.call_id.clone(),
            e.name.clone(),
            &text,
        ));
    }
    let mut messages = vec![ask];
    for e in round {
        let text = match &e.output {
            Some(out) => {
                crate::catalog::for_model(&stored_text(repo, out, e.output_object.as_deref())?)
            }
            None => "no result was recorded for this call".to_owned(),
        };
        let mut answer = Message::new(Role::Tool, text);
        answer.tool_call_id = Some(e.call_id.clone());
        answer.name = Some(e.name.clone());
        messages.push(answer);
    }
    Ok(messages)
}

/// Recorded text, whole: from its object when it was too long to keep inline.
fn stored_text(repo: &Repo, inline: &str, object: Option<&str>) -> Result<String> {
    match object {
        Some(hash) => Ok(String::from_utf8_lossy(&repo.objects().get(hash)?).into_owned()),
        None => Ok(inline.to_owned()),
    }
}

/// An Agent's conversation at a turn boundary: what its next turn starts from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    pub messages: Vec<Message>,
    /// The newest turn whose messages are included.
    pub head_turn: Option<String>,
    /// The Agent's cumulative provider usage; `complete` is sticky.
    pub usage: Usage,
    /// The checkpoint was missing, corrupt or stale and this was rebuilt from the ledger.
    pub rebuilt: bool,
}

/// The conversation of `agent` in `session`: `held` (an actor's in-memory conversation)
/// while it is still current, i.e. it ends with the newest retained turn of `agent` in
/// `turns`; else [`load`].
pub fn current(
    repo: &Repo,
    session: &str,
    agent: &str,
    turns: &[&TurnView],
    held: Option<Conversation>,
) -> Result<Conversation> {
    let newest = turns
        .iter()
        .rev()
        .find(|t| t.agent == agent && retained(t))
        .map(|t| t.turn.as_str());
    match held {
        Some(c) if c.head_turn.as_deref() == newest => Ok(Conversation {
            rebuilt: false,
            ..c
        }),
        _ => load(repo, session, agent, turns),
    }
}

/// Loads the conversation for `agent` in `session` from `turns` (the session's turns in
/// ledger order), preferring the newest valid checkpoint.
pub fn load(repo: &Repo, session: &str, agent: &str, turns: &[&TurnView]) -> Result<Conversation> {
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
        let mut conversation = Conversation {
            messages: s.messages.iter().map(Message::from).collect(),
            head_turn: s.head_turn.clone(),
            usage: s.usage,
            rebuilt: false,
        };
        conversation.extend(repo, &kept[start..])?;
        return Ok(conversation);
    }
    rebuild(repo, &kept)
}

/// The conversation of `kept` (retained turns, oldest first) rebuilt from the ledger alone,
/// cut to what a model is sent.
fn rebuild(repo: &Repo, kept: &[&TurnView]) -> Result<Conversation> {
    let mut conversation = Conversation {
        usage: Usage::ZERO,
        rebuilt: true,
        ..Conversation::default()
    };
    conversation.extend(repo, kept)?;
    conversation.messages = checkpoint::project_within(conversation.messages, PROJECTION_LIMIT);
    Ok(conversation)
}

/// The shared conversation of a multi-agent session, rebuilt from the ledger: every retained
/// turn of `turns` (each turn's answer is the answers of all the agents that gave one).
pub fn group(repo: &Repo, turns: &[&TurnView]) -> Result<Conversation> {
    let kept: Vec<&TurnView> = turns.iter().copied().filter(|t| retained(t)).collect();
    rebuild(repo, &kept)
}

impl Conversation {
    /// Appends retained turns rebuilt from the ledger.
    fn extend(&mut self, repo: &Repo, turns: &[&TurnView]) -> Result<()> {
        for t in turns {
            self.messages.extend(turn_messages(repo, t)?);
            if let Some(u) = &t.usage {
                self.usage.add(u);
            }
            self.head_turn = Some(t.turn.clone());
        }
        Ok(())
    }

    /// The conversation after `turn` ended in `state`: `transcript` holds every message so
    /// far (this turn's included), `output` what the user saw, `usage` the turn's calls. It
    /// matches what a rebuild from the ledger would retain: a completed turn, or a stopped
    /// one with some output; a failed or interrupted turn adds only its usage.
    pub fn after_turn(
        &self,
        turn: &str,
        state: TurnState,
        transcript: Vec<Message>,
        output: &str,
        usage: &Usage,
    ) -> Conversation {
        let mut total = self.usage;
        total.add(usage);
        let keep = match state {
            TurnState::Completed => true,
            TurnState::Stopped => !output.is_empty(),
            TurnState::Failed | TurnState::Interrupted => false,
        };
        if !keep {
            return Conversation {
                usage: total,
                rebuilt: false,
                ..self.clone()
            };
        }
        let mut messages = transcript;
        if state == TurnState::Stopped {
            messages.push(Message::new(Role::Assistant, output.to_owned()));
        }
        Conversation {
            messages,
            head_turn: Some(turn.to_owned()),
            usage: total,
            rebuilt: false,
        }
    }

    /// The checkpoint of this conversation as of ledger sequence `seq`.
    pub fn snapshot(&self, seq: u64) -> Snapshot {
        snapshot(
            &self.messages,
            self.head_turn.clone(),
            false,
            self.usage,
            seq,
        )
    }
}

/// The newest whole turns within `max` messages (what is sent; the checkpoint keeps more),
/// and always the whole current turn (`max_session_messages` never cuts the request being
/// answered or its tool rounds).
pub fn trim_to(messages: &[Message], max: usize) -> Vec<Message> {
    if messages.len() <= max {
        return messages.to_vec();
    }
    // The current turn (its user message and the tool rounds after it) is always sent
    // whole: `max` bounds the earlier conversation, never the request being answered.
    let current = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    let mut start = (messages.len() - max).min(current);
    while start < current && messages[start].role != Role::User {
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

/// Writes `conversation` as the checkpoint of `agent` in `session` (e.g. a repair after a
/// rebuild from the ledger). A checkpoint is a cache: failing to write one only means the
/// next turn rebuilds again.
pub fn write(
    repo: &Repo,
    session: &str,
    agent: &str,
    conversation: &Conversation,
    seq: u64,
    keep: usize,
) -> bool {
    checkpoint::write(repo, session, agent, &conversation.snapshot(seq), keep).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(roles: &str) -> Vec<Message> {
        roles
            .chars()
            .enumerate()
            .map(|(i, r)| {
                let role = match r {
                    'u' => Role::User,
                    'a' => Role::Assistant,
                    _ => Role::Tool,
                };
                Message::new(role, i.to_string())
            })
            .collect()
    }

    fn kept(roles: &str, max: usize) -> String {
        trim_to(&msgs(roles), max)
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    #[test]
    fn trim_keeps_the_newest_whole_turns_and_the_whole_current_turn() {
        assert_eq!(kept("uaua", 10), "0,1,2,3");
        // Whole turns only: a cut inside a turn moves to the next user message.
        assert_eq!(kept("uauau", 3), "2,3,4");
        assert_eq!(kept("uauau", 2), "4");
        // The current turn's tool rounds are sent even past the bound.
        assert_eq!(kept("uauatat", 3), "2,3,4,5,6");
        assert_eq!(kept("uatat", 1), "0,1,2,3,4");
    }
}
