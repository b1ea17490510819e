//! Agent conversation checkpoints: a cache of what the model sees, never the authority.
//!
//! A checkpoint holds the ordered messages of one runtime Agent (`{session}:{agent}`), the
//! turn they end with (`head_turn`), and the cumulative provider-usage subtotal with its
//! sticky completeness flag. It is valid only while `head_turn` is still a retained turn of
//! the session (not superseded by a rewind, not failed or interrupted); otherwise it is
//! discarded and rebuilt from the ledger. Files are postcard payloads inside the store's
//! checksummed envelope, written atomically, owner-only, without fsync.

use axocoatl_store::checkpoint::{CheckpointFile, Checkpoints, MAX_CHECKPOINT};
use axocoatl_store::layout::{component, CHECKPOINTS_DIR, LEGACY_CHECKPOINTS_DIR};
use axocoatl_store::ledger::record::Usage;
use axocoatl_store::Repo;
use serde::{Deserialize, Serialize};

use crate::provider::{ConversationCache, Message, Role, ToolCall};

/// The payload version inside the envelope.
pub const PAYLOAD_VERSION: u32 = 1;
/// A conversation rebuilt from the ledger keeps its newest complete turns within this many
/// bytes of message text.
pub const PROJECTION_LIMIT: usize = 8 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CkToolCall {
    pub id: String,
    pub name: String,
    /// JSON text (postcard cannot carry arbitrary JSON values).
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CkMessage {
    pub role: Role,
    pub content: String,
    pub tool_calls: Vec<CkToolCall>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u32,
    /// The ledger sequence number this snapshot reflects.
    pub ledger_seq: u64,
    /// The newest turn whose messages are included (None: none yet).
    pub head_turn: Option<String>,
    /// Written mid-turn, after a model response: `head_turn` is still running.
    pub in_flight: bool,
    pub messages: Vec<CkMessage>,
    /// Cumulative provider usage of this Agent; `complete` is sticky.
    pub usage: Usage,
}

impl From<&Message> for CkMessage {
    fn from(m: &Message) -> Self {
        CkMessage {
            role: m.role,
            content: m.content.clone(),
            tool_calls: m
                .tool_calls
                .iter()
                .map(|c| CkToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.to_string(),
                })
                .collect(),
            tool_call_id: m.tool_call_id.clone(),
            name: m.name.clone(),
        }
    }
}

impl From<&CkMessage> for Message {
    fn from(m: &CkMessage) -> Self {
        let mut msg = Message::new(m.role, m.content.clone());
        msg.tool_calls = m
            .tool_calls
            .iter()
            .map(|c| ToolCall::from_text(c.id.clone(), c.name.clone(), &c.arguments))
            .collect();
        msg.tool_call_id = m.tool_call_id.clone();
        msg.name = m.name.clone();
        msg
    }
}

/// The checkpoints of a repository: written under `checkpoints/v1/`, read from there and
/// from the exact pre-1.0 directories `checkpoints/<component>/` (current wins).
pub fn store(repo: &Repo) -> Checkpoints {
    Checkpoints::with_legacy(
        &repo.path(CHECKPOINTS_DIR),
        &repo.path(LEGACY_CHECKPOINTS_DIR),
    )
}

pub fn agent_component(session: &str, agent: &str) -> String {
    component(&format!("{session}:{agent}"))
}

/// The most bytes one conversation's attention cache may take on disk: 64 MiB holds about
/// 2,900 positions of SmolLM2-135M; a longer conversation keeps the cache of its start.
pub const ATTENTION_CACHE_LIMIT: usize = 64 << 20;

/// The place a provider keeps its cache of the conversation of the runtime agent `id`
/// (`{session}:{agent}`), beside that agent's checkpoints. Like a checkpoint it is a cache:
/// never the authority over the ledger, and the provider verifies what it reads.
pub fn conversation_cache(repo: &Repo, id: &str) -> Box<dyn ConversationCache> {
    Box::new(AttentionFile {
        checkpoints: Checkpoints::new(&repo.path(CHECKPOINTS_DIR)),
        component: component(id),
    })
}

/// Drops the conversation cache of `agent` in `session` (a rewind: the conversation it
/// holds no longer continues). A cache: failing to remove it is not an error, and a cache
/// left behind is only reused for a prompt that starts with exactly its tokens.
pub fn drop_conversation_cache(repo: &Repo, session: &str, agent: &str) {
    let checkpoints = Checkpoints::new(&repo.path(CHECKPOINTS_DIR));
    let _ = checkpoints.remove_attention_cache(&agent_component(session, agent));
}

struct AttentionFile {
    checkpoints: Checkpoints,
    component: String,
}

impl ConversationCache for AttentionFile {
    fn load(&self) -> Option<Vec<u8>> {
        self.checkpoints
            .read_attention_cache(&self.component, ATTENTION_CACHE_LIMIT)
    }

    fn save(&self, bytes: &[u8]) {
        if bytes.len() <= ATTENTION_CACHE_LIMIT {
            let _ = self
                .checkpoints
                .write_attention_cache(&self.component, bytes);
        }
    }

    fn limit(&self) -> usize {
        ATTENTION_CACHE_LIMIT
    }
}

/// Why a checkpoint was not written.
#[derive(Debug)]
pub enum WriteError {
    TooLarge { size: usize },
    Store(axocoatl_store::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::TooLarge { size } => write!(
                f,
                "checkpoint skipped: its encoding is {size} bytes, over the {MAX_CHECKPOINT}-byte limit"
            ),
            WriteError::Store(e) => write!(f, "checkpoint skipped: {e}"),
        }
    }
}

pub fn encode(s: &Snapshot) -> Vec<u8> {
    postcard::to_allocvec(s).unwrap_or_default()
}

/// Writes a snapshot and keeps the newest `keep`. Over 64 MiB it is refused.
pub fn write(
    repo: &Repo,
    session: &str,
    agent: &str,
    snapshot: &Snapshot,
    keep: usize,
) -> Result<(), WriteError> {
    let payload = encode(snapshot);
    if payload.len() + axocoatl_store::checkpoint::ENVELOPE_LEN > MAX_CHECKPOINT {
        return Err(WriteError::TooLarge {
            size: payload.len(),
        });
    }
    store(repo)
        .write(
            &agent_component(session, agent),
            snapshot.ledger_seq,
            &payload,
            keep,
        )
        .map(|_| ())
        .map_err(WriteError::Store)
}

/// The checkpoint files of an Agent, newest first (not yet read), pre-1.0 candidates
/// included.
pub fn files(repo: &Repo, session: &str, agent: &str) -> Vec<CheckpointFile> {
    store(repo)
        .candidates(&agent_component(session, agent))
        .unwrap_or_default()
}

/// Reads, verifies and decodes one checkpoint; the error says why it cannot be used.
pub fn load_one(repo: &Repo, file: &CheckpointFile) -> Result<Snapshot, String> {
    match store(repo).read_with(file, |b| postcard::from_bytes::<Snapshot>(b)) {
        Ok(Ok(s)) if s.version == PAYLOAD_VERSION => Ok(s),
        Ok(Ok(s)) => Err(format!(
            "payload version {} is not {PAYLOAD_VERSION}",
            s.version
        )),
        Ok(Err(e)) => Err(format!("payload does not decode: {e}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A checkpoint that decoded and verified.
#[derive(Debug)]
pub struct Loaded {
    pub file: CheckpointFile,
    pub snapshot: Snapshot,
}

/// The checkpoints of an Agent that decode and verify, newest first; each bad one is
/// returned with its reason (they are never used).
pub fn load_all(
    repo: &Repo,
    session: &str,
    agent: &str,
) -> (Vec<Loaded>, Vec<(CheckpointFile, String)>) {
    let store = store(repo);
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let Ok(files) = store.list(&agent_component(session, agent)) else {
        return (good, bad);
    };
    for file in files {
        match load_one(repo, &file) {
            Ok(snapshot) => good.push(Loaded { file, snapshot }),
            Err(reason) => bad.push((file, reason)),
        }
    }
    (good, bad)
}

/// Keeps the newest whole turns (each a run of messages starting at a user message) whose
/// text fits in `limit` bytes, then checks that the result encodes.
pub fn project_within(messages: Vec<Message>, limit: usize) -> Vec<Message> {
    let size = |m: &Message| {
        m.content.len()
            + m.tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.to_string().len())
                .sum::<usize>()
    };
    let mut turns: Vec<Vec<Message>> = Vec::new();
    for m in messages {
        if m.role == Role::User || turns.is_empty() {
            turns.push(Vec::new());
        }
        if let Some(t) = turns.last_mut() {
            t.push(m);
        }
    }
    let mut kept: Vec<Vec<Message>> = Vec::new();
    let mut total = 0;
    for t in turns.into_iter().rev() {
        let s: usize = t.iter().map(size).sum();
        if total + s > limit {
            break;
        }
        total += s;
        kept.push(t);
    }
    kept.reverse();
    kept.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_keeps_the_newest_complete_turns() {
        let mut msgs = Vec::new();
        for i in 0..10 {
            msgs.push(Message::new(
                Role::User,
                format!("q{i} {}", "x".repeat(100)),
            ));
            msgs.push(Message::new(
                Role::Assistant,
                format!("a{i} {}", "y".repeat(100)),
            ));
        }
        let kept = project_within(msgs, 3 * 210);
        assert_eq!(kept.len(), 6);
        assert!(kept[0].content.starts_with("q7"));
        assert!(kept[5].content.starts_with("a9"));
    }

    #[test]
    fn snapshot_round_trips_through_postcard() {
        let mut m = Message::new(Role::Assistant, "hi");
        m.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "core_memory_set".into(),
            arguments: serde_json::json!({"label": "human", "value": "x"}),
        });
        let s = Snapshot {
            version: PAYLOAD_VERSION,
            ledger_seq: 7,
            head_turn: Some("abcd".into()),
            in_flight: false,
            messages: vec![CkMessage::from(&m)],
            usage: Usage::ZERO,
        };
        let back: Snapshot = postcard::from_bytes(&encode(&s)).expect("decode");
        assert_eq!(back, s);
        assert_eq!(Message::from(&back.messages[0]), m);
    }
}
