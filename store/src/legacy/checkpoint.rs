//! The 0.1.x checkpoint formats, read (never written) from `checkpoints/<component>/`.
//!
//! A 0.1.x checkpoint is one file named `<seq>.json` or `<seq>.ckpt` (`<seq>`: 1 to 20
//! decimal digits, the checkpoint's sequence number) holding one Agent's whole conversation:
//!
//! **JSON** (`<seq>.json`): a UTF-8 JSON object
//!
//! ```text
//! {"version": 0,                      always 0
//!  "agent": "main:assistant",         the runtime Agent id; its component names the directory
//!  "saved_at": 1735725600000,         when it was written, ms since the Unix epoch (UTC)
//!  "messages": [                      the conversation in order
//!    {"role": "system" | "user" | "assistant" | "tool",
//!     "content": "…",
//!     "tool_calls": [{"id": "…", "name": "…", "arguments": <any JSON>}],   optional, default []
//!     "tool_call_id": "…",            optional (a tool result names its call)
//!     "name": "…"}]}                  optional (the tool's name)
//! ```
//!
//! Other fields are ignored.
//!
//! **Postcard** (`<seq>.ckpt`): today's 24-byte envelope (`AXOCKPT1`, envelope version as
//! u32 LE, payload length as u64 LE, CRC-32C of the payload as u32 LE) with envelope
//! version **0**, then the postcard encoding of
//!
//! ```text
//! V0 { agent: String, saved_at: i64, messages: Vec<V0Message> }
//! V0Message { role: V0Role, content: String, tool_calls: Vec<V0ToolCall>,
//!             tool_call_id: Option<String>, name: Option<String> }
//! V0Role = System (0) | User (1) | Assistant (2) | Tool (3)      a varint
//! V0ToolCall { id: String, name: String, arguments: String }     arguments: JSON text
//! ```
//!
//! (postcard: strings and sequences are a LEB128 length then their bytes or items, `i64` a
//! zigzag LEB128 varint, `Option` a 0/1 byte then the value.) A `.ckpt` file with envelope
//! version 1 in a legacy directory is not 0.1.x but today's format at a pre-1.0 path: the
//! runtime reads it as a checkpoint candidate ([`crate::checkpoint::Checkpoints`]).

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::envelope::{split_envelope, ENVELOPE_LEN, MAGIC, MAX_CHECKPOINT};
use crate::ledger::record::Millis;
use crate::Result;

/// The envelope version and JSON `version` of 0.1.x checkpoints.
pub const V0: u32 = 0;
/// At most this many checkpoint files of one legacy directory are considered, newest first.
pub const MAX_FILES: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text.
    pub arguments: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

/// The payload of a postcard 0.1.x checkpoint (and what both forms decode to).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The runtime Agent id.
    pub agent: String,
    pub saved_at: Millis,
    pub messages: Vec<Message>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Json,
    PostcardV0,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::PostcardV0 => "postcard-v0",
        }
    }
}

/// A file of a legacy checkpoint directory that may be a 0.1.x checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyFile {
    pub seq: u64,
    pub path: PathBuf,
    /// `.json`: JSON; `.ckpt`: an envelope (0.1.x when its version is 0).
    pub json: bool,
}

/// A 0.1.x checkpoint that read and verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V0Checkpoint {
    pub file: LegacyFile,
    pub format: Format,
    /// BLAKE3 of the file's bytes (hex): the import's identity.
    pub digest: String,
    pub transcript: Transcript,
}

/// Why a legacy checkpoint file is not a usable 0.1.x checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotV0 {
    /// Today's envelope at a pre-1.0 path (a checkpoint candidate, not a 0.1.x import).
    Current,
    /// Damaged or not a checkpoint at all.
    Bad(String),
}

#[derive(Deserialize)]
struct JsonCheckpoint {
    version: u32,
    agent: String,
    saved_at: Millis,
    messages: Vec<JsonMessage>,
}

#[derive(Deserialize)]
struct JsonMessage {
    role: Role,
    content: String,
    #[serde(default)]
    tool_calls: Vec<JsonToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct JsonToolCall {
    id: String,
    name: String,
    arguments: serde_json::Value,
}

/// The checkpoint files of a legacy directory (`<seq>.json`, `<seq>.ckpt`; regular files
/// only), newest first, at most [`MAX_FILES`]. At the same `seq` the `.ckpt` comes first.
pub fn files(dir: &Path) -> Result<Vec<LegacyFile>> {
    let (entries, _) = super::entries(dir)?;
    let mut out: Vec<LegacyFile> = entries
        .into_iter()
        .filter(|(_, is_dir)| !is_dir)
        .filter_map(|(name, _)| {
            let (stem, json) = match name.strip_suffix(".json") {
                Some(stem) => (stem, true),
                None => (name.strip_suffix(".ckpt")?, false),
            };
            if stem.is_empty() || stem.len() > 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(LegacyFile {
                seq: stem.parse().ok()?,
                path: dir.join(&name),
                json,
            })
        })
        .collect();
    out.sort_by_key(|f| (std::cmp::Reverse(f.seq), f.json));
    out.truncate(MAX_FILES);
    Ok(out)
}

/// Reads a legacy checkpoint file as 0.1.x. `Ok(Err(_))` says why it is not one.
pub fn read(file: &LegacyFile) -> Result<std::result::Result<V0Checkpoint, NotV0>> {
    // An unreadable legacy file is a reason not to import it, never an error of the
    // command that looked (every open looks).
    let meta = match fs::symlink_metadata(&file.path) {
        Ok(meta) => meta,
        Err(e) => return Ok(Err(NotV0::Bad(format!("cannot be read: {e}")))),
    };
    if !meta.file_type().is_file() {
        return Ok(Err(NotV0::Bad("not a regular file".into())));
    }
    if meta.len() > MAX_CHECKPOINT as u64 {
        return Ok(Err(NotV0::Bad(format!(
            "it is {} bytes, over the {MAX_CHECKPOINT}-byte checkpoint limit",
            meta.len()
        ))));
    }
    let bytes = match fs::read(&file.path) {
        Ok(bytes) => bytes,
        Err(e) => return Ok(Err(NotV0::Bad(format!("cannot be read: {e}")))),
    };
    let digest = blake3::hash(&bytes).to_hex().to_string();
    let decoded = if file.json {
        decode_json(&bytes).map(|t| (Format::Json, t))
    } else {
        decode_postcard(&bytes).map(|t| (Format::PostcardV0, t))
    };
    Ok(decoded.map(|(format, transcript)| V0Checkpoint {
        file: file.clone(),
        format,
        digest,
        transcript,
    }))
}

/// Decodes the JSON form.
pub fn decode_json(bytes: &[u8]) -> std::result::Result<Transcript, NotV0> {
    let c: JsonCheckpoint = serde_json::from_slice(bytes)
        .map_err(|e| NotV0::Bad(format!("not a 0.1.x JSON checkpoint: {e}")))?;
    if c.version != V0 {
        return Err(NotV0::Bad(format!(
            "JSON checkpoint version {}, a 0.1.x one has version {V0}",
            c.version
        )));
    }
    Ok(Transcript {
        agent: c.agent,
        saved_at: c.saved_at,
        messages: c
            .messages
            .into_iter()
            .map(|m| Message {
                role: m.role,
                content: m.content,
                tool_calls: m
                    .tool_calls
                    .into_iter()
                    .map(|c| ToolCall {
                        id: c.id,
                        name: c.name,
                        arguments: c.arguments.to_string(),
                    })
                    .collect(),
                tool_call_id: m.tool_call_id,
                name: m.name,
            })
            .collect(),
    })
}

/// Decodes the postcard form (envelope version 0).
pub fn decode_postcard(bytes: &[u8]) -> std::result::Result<Transcript, NotV0> {
    let (version, payload) = split_envelope(bytes).map_err(NotV0::Bad)?;
    if version == crate::envelope::ENVELOPE_VERSION {
        return Err(NotV0::Current);
    }
    if version != V0 {
        return Err(NotV0::Bad(format!(
            "envelope version {version}: neither 0.1.x ({V0}) nor current"
        )));
    }
    postcard::from_bytes(payload)
        .map_err(|e| NotV0::Bad(format!("0.1.x payload does not decode: {e}")))
}

/// The bytes of the JSON form (for fixtures and tests: nothing writes legacy paths).
pub fn encode_json(t: &Transcript) -> Vec<u8> {
    let messages: Vec<serde_json::Value> = t
        .messages
        .iter()
        .map(|m| {
            let mut v = serde_json::json!({ "role": m.role, "content": m.content });
            if !m.tool_calls.is_empty() {
                v["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "id": c.id,
                            "name": c.name,
                            "arguments": serde_json::from_str::<serde_json::Value>(&c.arguments)
                                .unwrap_or(serde_json::Value::String(c.arguments.clone())),
                        })
                    })
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                v["tool_call_id"] = id.clone().into();
            }
            if let Some(name) = &m.name {
                v["name"] = name.clone().into();
            }
            v
        })
        .collect();
    let doc = serde_json::json!({
        "version": V0,
        "agent": t.agent,
        "saved_at": t.saved_at,
        "messages": messages,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

/// The bytes of the postcard form (for fixtures and tests: nothing writes legacy paths).
pub fn encode_postcard(t: &Transcript) -> Vec<u8> {
    let payload = postcard::to_allocvec(t).unwrap_or_default();
    let mut out = Vec::with_capacity(ENVELOPE_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&V0.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crate::ledger::frame_le::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Transcript {
        Transcript {
            agent: "main:assistant".into(),
            saved_at: 1_735_725_600_000,
            messages: vec![
                Message {
                    role: Role::User,
                    content: "hi".into(),
                    tool_calls: vec![],
                    tool_call_id: None,
                    name: None,
                },
                Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"a.txt"}"#.into(),
                    }],
                    tool_call_id: None,
                    name: None,
                },
                Message {
                    role: Role::Tool,
                    content: "A".into(),
                    tool_calls: vec![],
                    tool_call_id: Some("c1".into()),
                    name: Some("read_file".into()),
                },
            ],
        }
    }

    #[test]
    fn both_forms_round_trip() {
        let t = sample();
        assert_eq!(decode_json(&encode_json(&t)), Ok(t.clone()));
        assert_eq!(decode_postcard(&encode_postcard(&t)), Ok(t.clone()));
    }

    #[test]
    fn the_postcard_bytes_are_exactly_as_documented() {
        let t = Transcript {
            agent: "s:a".into(),
            saved_at: -1,
            messages: vec![Message {
                role: Role::Tool,
                content: "x".into(),
                tool_calls: vec![],
                tool_call_id: Some("c".into()),
                name: None,
            }],
        };
        let bytes = encode_postcard(&t);
        let payload: &[u8] = &[3, b's', b':', b'a', 1, 1, 3, 1, b'x', 0, 1, 1, b'c', 0];
        assert_eq!(&bytes[..8], b"AXOCKPT1");
        assert_eq!(&bytes[8..12], &[0, 0, 0, 0]);
        assert_eq!(&bytes[12..20], &(payload.len() as u64).to_le_bytes());
        assert_eq!(&bytes[24..], payload);
    }

    #[test]
    fn damage_and_current_envelopes_are_told_apart() {
        let t = sample();
        let mut bytes = encode_postcard(&t);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(decode_postcard(&bytes), Err(NotV0::Bad(_))));
        let current = crate::checkpoint::encode_envelope(b"anything");
        assert_eq!(decode_postcard(&current), Err(NotV0::Current));
        assert!(matches!(
            decode_json(br#"{"version":1,"agent":"a:b","saved_at":0,"messages":[]}"#),
            Err(NotV0::Bad(_))
        ));
    }

    #[test]
    fn files_are_newest_first_and_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "2.json", "10.ckpt", "10.json", "x.json", "3.txt", "007.ckpt",
        ] {
            fs::write(dir.path().join(name), b"").expect("write");
        }
        let got: Vec<(u64, bool)> = files(dir.path())
            .expect("files")
            .iter()
            .map(|f| (f.seq, f.json))
            .collect();
        assert_eq!(got, vec![(10, false), (10, true), (7, false), (2, true)]);
    }
}
