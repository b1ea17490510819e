//! The `--json` types of memory and consolidation (part of [`crate::json`]).

use axocoatl::clock;
use axocoatl::memory::consolidate::Applied;
use axocoatl::memory::semantic::Hit;
use axocoatl_store::memory::LogRecord;
use schemars::JsonSchema;

use crate::json_cost::UsageJson;
use serde::Serialize;

/// `memory core --json`: one line per core block of the agent.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CoreBlockJson<'a> {
    /// The runtime id whose memory it is (`{session}:{agent}`).
    pub agent_id: &'a str,
    pub label: &'a str,
    /// Every agent declaring the label shares it.
    pub shared: bool,
    /// The most characters it may hold.
    pub limit: u32,
    /// The characters it holds.
    pub chars: usize,
    pub value: &'a str,
    /// The file that holds it, from the repository's directory (`.axocoatl/…`).
    pub file: String,
}

/// `memory core show LABEL --json`: one block.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CoreValueJson<'a> {
    pub label: &'a str,
    pub shared: bool,
    pub limit: u32,
    pub chars: usize,
    pub value: &'a str,
}

/// `memory core set|append|replace --json`: the block after the edit.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CoreEditJson<'a> {
    pub label: &'a str,
    pub shared: bool,
    pub chars: usize,
    pub limit: u32,
}

/// `memory log --json`: one line per record of the daily log, oldest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct LogRecordJson<'a> {
    /// RFC 3339 UTC.
    pub time: &'a str,
    /// Milliseconds since the Unix epoch.
    pub ms: i64,
    /// `request`, `answer`, `tool_call`, `memory_edit`, `consolidation`, `note`, or
    /// `other` (a kind written by a newer axocoatl).
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<&'a str>,
    /// The tool of a tool call, the block of a memory edit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub text: &'a str,
    /// A tool call's result as the model saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a str>,
    /// An answer's turn state (`completed`, `failed`, `stopped`, `interrupted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'a str>,
    /// A tool call that failed (left out when false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Set when `text` or `result` was cut: the longer one's length in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_from: Option<u64>,
}

impl<'a> From<&'a LogRecord> for LogRecordJson<'a> {
    fn from(r: &'a LogRecord) -> Self {
        LogRecordJson {
            time: &r.time,
            ms: r.ms,
            kind: r.kind.as_str(),
            turn: r.turn.as_deref(),
            name: r.name.as_deref(),
            text: &r.text,
            result: r.result.as_deref(),
            state: r.state.as_deref(),
            is_error: r.is_error,
            cut_from: r.cut_from,
        }
    }
}

/// `memory search --json`: one line per record found, closest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HitJson<'a> {
    /// The record's number in the agent's semantic store.
    pub id: u64,
    /// Cosine similarity (neural path) or normalized BM25 in `[0, 1]` (lexical path);
    /// higher is closer.
    pub score: f64,
    pub text: &'a str,
    pub source: HitSourceJson<'a>,
    /// The record is of a turn a rewind superseded (found with `--include-superseded`).
    pub superseded: bool,
}

/// Where a record `memory search` found came from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HitSourceJson<'a> {
    /// `exchange` (a turn's request and answer) or `added` (`memory add`, or a tool that
    /// adds a fact).
    pub kind: &'static str,
    /// The turn of an exchange.
    pub turn: Option<&'a str>,
    /// When the text was retained.
    pub at: String,
}

impl<'a> HitJson<'a> {
    pub fn new(h: &'a Hit, superseded: bool) -> Self {
        HitJson {
            id: h.id,
            // Widened as serde_json's `Value` widens an f32, which this output has always
            // printed.
            score: f64::from(h.score),
            text: &h.text,
            source: HitSourceJson {
                kind: h.source.kind.as_str(),
                turn: h.source.turn.as_deref(),
                at: clock::rfc3339(h.source.at),
            },
            superseded,
        }
    }
}

/// `memory add --json`: the records made of the text.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryAddJson<'a> {
    pub agent_id: &'a str,
    /// The new records' numbers (long text is split into several).
    pub records: &'a [u64],
}

/// `memory status --json`: the agent's memory tiers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryStatusJson<'a> {
    pub agent_id: &'a str,
    /// `neural` or `lexical`: which path answers searches.
    pub recall_path: &'static str,
    /// Why the lexical path is in use (null on the neural path).
    pub reason: Option<&'a str>,
    /// What to do about `reason`.
    pub hint: Option<&'a str>,
    /// Records in the semantic store.
    pub records: u64,
    /// Records that do not read (`axocoatl fsck` names them).
    pub damaged: u64,
    /// Records with a vector of the current model (neural path), or covered by the lexical
    /// index (lexical path).
    pub indexed: u64,
    /// The agent's recall settings.
    pub passive_inject: bool,
    pub top_k: u32,
    pub min_score: f64,
    /// Core blocks declared, and those holding text.
    pub core_blocks: usize,
    pub core_blocks_with_value: usize,
    /// Days in the daily log, and the first and last of them (`YYYY-MM-DD`).
    pub daily_log_days: usize,
    pub daily_log_first: Option<&'a str>,
    pub daily_log_last: Option<&'a str>,
    /// The sleep-time consolidation that applies to this agent.
    pub consolidation: ConsolidationStatusJson,
}

/// `memory status --json`: the agent's sleep-time consolidation, the top-level
/// `consolidation:` with the agent's own keys laid over it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConsolidationStatusJson {
    /// Whether `serve` runs passes for this agent (never for a worker or a coordinator).
    pub by_serve: bool,
    /// `enabled` as it applies to this agent.
    pub enabled: bool,
    pub idle_threshold_secs: u64,
    pub interval_secs: u64,
    /// The keys the agent's own `consolidation:` sets (the rest come from the top level).
    pub from_agent: Vec<&'static str>,
}

/// `memory reindex --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReindexJson<'a> {
    pub agent_id: &'a str,
    /// `neural` or `lexical`: the path indexed for.
    pub recall_path: &'static str,
    /// Records indexed.
    pub records: u64,
    /// Records left out because they do not read.
    pub damaged: usize,
}

/// `memory consolidate --json`: one line per agent consolidated.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConsolidateJson<'a> {
    /// The agent as configured.
    pub agent: &'a str,
    /// The runtime id whose memory was read and edited.
    pub agent_id: &'a str,
    #[serde(flatten)]
    pub pass: ConsolidatePass<'a>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ConsolidatePass<'a> {
    /// No model call and nothing recorded.
    Skipped {
        /// Why (e.g. no semantic records since the last consolidation).
        skipped: &'a str,
    },
    /// A consolidation turn ran.
    Ran {
        /// The pass's turn (recorded in the ledger, mode `consolidation`).
        turn: &'a str,
        /// `completed`, `failed`, `stopped` or `interrupted`.
        state: &'static str,
        /// Semantic records read.
        records: usize,
        /// The edits the model proposed, in order.
        edits: Vec<ConsolidateEditJson<'a>>,
        /// Why the pass failed (null when it did not).
        error: Option<&'a str>,
        usage: UsageJson,
    },
}

/// One edit a consolidation proposed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConsolidateEditJson<'a> {
    pub label: &'a str,
    /// Whether the block was edited.
    pub applied: bool,
    #[serde(flatten)]
    pub outcome: EditOutcome<'a>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum EditOutcome<'a> {
    /// Applied: the block's size after it.
    Applied { chars: usize, limit: u32 },
    /// Refused (limits, an unknown block, text not found, a deletion): why.
    Refused { reason: &'a str },
}

impl<'a> From<&'a Applied> for ConsolidateEditJson<'a> {
    fn from(a: &'a Applied) -> Self {
        match a {
            Applied::Done(d) => ConsolidateEditJson {
                label: &d.label,
                applied: true,
                outcome: EditOutcome::Applied {
                    chars: d.chars,
                    limit: d.limit,
                },
            },
            Applied::Refused { label, reason } => ConsolidateEditJson {
                label,
                applied: false,
                outcome: EditOutcome::Refused { reason },
            },
        }
    }
}
