//! The `script` provider: scripted replies from a YAML file, for reproducible pipelines,
//! demos and tests. No model, no network: the same conversation always gets the same answers.
//!
//! # Format
//!
//! ```yaml
//! replies:
//!   # One entry per model call, in order.
//!   - text: "Hello! How can I help?"
//!     usage: {prompt_tokens: 12, completion_tokens: 7}   # absent: usage unknown
//!   - chunks: ["Let me ", "look that ", "up."]            # streamed piece by piece
//!     delay_ms: 100                                       # wait before each piece
//!     tool_calls:
//!       - name: read_file
//!         arguments: {path: README.md}                    # any YAML value; id optional
//!   - text: "The README says hello."                      # answers the tool round above
//!   - error: "model overloaded"                           # this call fails with that message
//!
//!   # Entries with `match` answer any turn whose last user message contains the text
//!   # (case-sensitive); they are not part of the sequence above.
//!   - match: "weather"
//!     tool_calls: [{name: get_weather, arguments: {city: Paris}}]
//!   - match: "weather"
//!     text: "Sunny in Paris."
//! ```
//!
//! Fields of an entry (at least one of `text`, `chunks`, `tool_calls`, `error`):
//! - `text`: the reply, as one piece; `chunks`: the reply as a list of pieces (not both);
//! - `delay_ms`: a pause before each piece (a stop interrupts it);
//! - `tool_calls`: `{name, arguments, id}` items (`arguments` defaults to `{}`, `id` to
//!   `call_<n>`);
//! - `error`: the call fails with this message, after streaming any `text`/`chunks`;
//! - `usage`: `{prompt_tokens, completion_tokens, cache_write_tokens, cache_read_tokens}`,
//!   any may be left out (unknown); the cache counts are part of `prompt_tokens`;
//! - `finish_reason`: defaults to `tool_calls` when there are tool calls, else `stop`;
//! - `match`: see below.
//!
//! # Which entry answers a call
//!
//! Every `axocoatl send` is a new process, so the position in the script cannot live in
//! memory (and a counter file would break on reruns and concurrent sessions). It is derived
//! from the request itself, which carries the conversation so far:
//!
//! 1. The conversation is cut into *calls*: each user message starts one, and so does each
//!    assistant message with tool calls (the call that receives the tool results). The last
//!    call is the one being asked for; the others already happened.
//! 2. A call belongs to the *turn* of the latest user message at or before it. If that
//!    message contains the `match` text of an entry (the first such text in file order), the
//!    call is answered by the entries with that `match`, the n-th of them for the turn's n-th
//!    call (0 for the call answering the user, 1 after the first tool round, ...).
//! 3. Otherwise it is answered by the sequence of entries without `match`: the k-th entry,
//!    where k counts the earlier calls that were answered from the sequence too.
//!
//! So the first call of a conversation gets the first entry, a tool round gets the next one,
//! the next user message the one after that, in this process or a later one. A call whose
//! reply was an `error` still used up its entry once the conversation moved on (its user
//! message stays in the history); asking again with the very same messages fails again.
//! The rule counts the messages the runtime sends: trimming or summarising history shifts
//! it, so long scripted conversations are more robust with `match`.
//!
//! When no entry is left, the call fails with an error that says which call it was.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::http::sleep_cancellable;
use crate::config::FileProblem;

/// The largest script read: replies are kept in memory whole.
pub const SCRIPT_SIZE_LIMIT: u64 = 64 * 1024 * 1024;
use super::{
    CallUsage, Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError, Role,
    ToolCall,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    replies: Vec<Reply>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(default, rename = "match")]
    matches: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    chunks: Option<Vec<String>>,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    usage: Option<ScriptedUsage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: Option<u64>,
}

/// Scripted replies loaded from a YAML file (see the module documentation for the format).
#[derive(Debug)]
pub struct ScriptProvider {
    name: String,
    path: PathBuf,
    /// Entries without `match`, in file order.
    sequence: Vec<Reply>,
    /// `match` texts in order of first appearance, each with its entries in file order.
    rules: Vec<(String, Vec<Reply>)>,
}

impl ScriptProvider {
    /// Reads and checks the script. Errors name the file and the entry.
    pub fn from_file(name: &str, path: &Path) -> Result<ScriptProvider, ProviderError> {
        let config_error = |detail: String| ProviderError::Config {
            provider: name.to_string(),
            detail,
        };
        let shown = path.display();
        let text = crate::config::read_text_file(path, SCRIPT_SIZE_LIMIT).map_err(|problem| {
            let at = match &problem {
                FileProblem::NotUtf8 { pos } => {
                    format!(" (line {}, column {})", pos.line, pos.column)
                }
                _ => String::new(),
            };
            config_error(format!("script {shown} {problem}{at}"))
        })?;
        // The configuration's reader: its limits on nesting, values and alias expansion
        // hold here too (an anchored 1 MiB text aliased ten thousand times is 10 GB).
        let file: ScriptFile = crate::config::read_yaml(&text, "a script").map_err(|p| {
            let hint = p.hint.map(|h| format!(" ({h})")).unwrap_or_default();
            config_error(format!(
                "script {shown}:{}:{}: {}{hint}; expected `replies:` with a list of entries",
                p.pos.line, p.pos.column, p.message
            ))
        })?;
        let mut sequence = Vec::new();
        let mut rules: Vec<(String, Vec<Reply>)> = Vec::new();
        for (n, reply) in file.replies.into_iter().enumerate() {
            let problem = if reply.text.is_some() && reply.chunks.is_some() {
                Some("has both `text` and `chunks`: use one")
            } else if reply.text.is_none()
                && reply.chunks.is_none()
                && reply.tool_calls.is_empty()
                && reply.error.is_none()
            {
                Some("needs `text`, `chunks`, `tool_calls` or `error`")
            } else if reply.matches.as_deref() == Some("") {
                Some("has an empty `match`")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(config_error(format!(
                    "script {}: reply #{} {problem}",
                    path.display(),
                    n + 1
                )));
            }
            match reply.matches.clone() {
                None => sequence.push(reply),
                Some(pattern) => match rules.iter_mut().find(|(p, _)| *p == pattern) {
                    Some((_, entries)) => entries.push(reply),
                    None => rules.push((pattern, vec![reply])),
                },
            }
        }
        Ok(ScriptProvider {
            name: name.to_string(),
            path: path.to_path_buf(),
            sequence,
            rules,
        })
    }

    /// The index of the first rule whose text the user message contains.
    fn rule_for(&self, user_text: &str) -> Option<usize> {
        self.rules
            .iter()
            .position(|(pattern, _)| user_text.contains(pattern.as_str()))
    }

    /// The entry that answers the last call of `messages` (the rule in the module docs).
    fn pick(&self, messages: &[Message]) -> Result<&Reply, ProviderError> {
        let calls = calls_of(messages);
        let (current, earlier) = match calls.split_last() {
            Some((current, earlier)) => (*current, earlier),
            None => (
                CallPos {
                    user_text: "",
                    round: 0,
                },
                &[][..],
            ),
        };
        if let Some(rule) = self.rule_for(current.user_text) {
            let (pattern, entries) = &self.rules[rule];
            return entries.get(current.round).ok_or_else(|| {
                self.exhausted(format!(
                    "no reply left for call #{} of a turn matching {pattern:?} (the script has {} such replies)",
                    current.round + 1,
                    entries.len()
                ))
            });
        }
        let position = earlier
            .iter()
            .filter(|call| self.rule_for(call.user_text).is_none())
            .count();
        self.sequence.get(position).ok_or_else(|| {
            self.exhausted(format!(
                "no reply left for call #{} of this conversation (the script has {} replies without `match`)",
                position + 1,
                self.sequence.len()
            ))
        })
    }

    fn exhausted(&self, detail: String) -> ProviderError {
        ProviderError::Model {
            provider: self.name.clone(),
            detail: format!(
                "script {}: {detail}; add replies to the script",
                self.path.display()
            ),
        }
    }
}

/// One call of a conversation: the text of its turn's user message and how many tool rounds
/// of that turn came before it.
#[derive(Clone, Copy, Debug)]
struct CallPos<'a> {
    user_text: &'a str,
    round: usize,
}

fn calls_of(messages: &[Message]) -> Vec<CallPos<'_>> {
    let mut calls = Vec::new();
    let mut user_text = "";
    let mut round = 0;
    for message in messages {
        match message.role {
            Role::User => {
                user_text = &message.content;
                round = 0;
                calls.push(CallPos { user_text, round });
            }
            Role::Assistant if !message.tool_calls.is_empty() => {
                round += 1;
                calls.push(CallPos { user_text, round });
            }
            _ => {}
        }
    }
    calls
}

impl Provider for ScriptProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let reply = self.pick(&request.messages)?.clone();
        let delay = Duration::from_millis(reply.delay_ms);
        let pieces = match (&reply.text, &reply.chunks) {
            (Some(text), _) => vec![text.clone()],
            (None, Some(chunks)) => chunks.clone(),
            (None, None) => Vec::new(),
        };
        let mut text = String::new();
        for piece in pieces {
            sleep_cancellable(delay, cancel)?;
            text.push_str(&piece);
            on_event(Event::Delta(piece));
        }
        if let Some(message) = reply.error {
            return Err(ProviderError::Model {
                provider: self.name.clone(),
                detail: message,
            });
        }
        let tool_calls: Vec<ToolCall> = reply
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(n, call)| ToolCall {
                id: call.id.unwrap_or_else(|| format!("call_{n}")),
                name: call.name,
                arguments: call
                    .arguments
                    .unwrap_or_else(|| Value::Object(Default::default())),
            })
            .collect();
        for call in &tool_calls {
            on_event(Event::ToolCall(call.clone()));
        }
        let finish_reason = reply.finish_reason.unwrap_or_else(|| {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string()
        });
        let usage = reply.usage.map_or(CallUsage::default(), |u| CallUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cache_write_tokens: u.cache_write_tokens,
            cache_read_tokens: u.cache_read_tokens,
        });
        let mut message = Message::new(Role::Assistant, text);
        message.tool_calls = tool_calls;
        Ok(Completion {
            message,
            usage,
            finish_reason: Some(finish_reason),
        })
    }
}
