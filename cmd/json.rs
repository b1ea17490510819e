//! Every `--json` output as a type. Field names are an interface scripts match on: they
//! never change meaning. A stream of lines of different shapes is one enum with a `type`
//! field. The events of a turn are the runtime's own type, [`TurnEvent`], printed as they
//! are; the lines here are the command's. docs/json.md is generated from these types
//! (`axocoatl util generate`, see [`crate::json_ref`]) and a test fails when it drifts, so a
//! field's doc comment is its documentation.

use std::path::Path;

use axocoatl::attach::Text;
use axocoatl::clock;
use axocoatl::history::{CallView, ContextView, ToolEvent, TurnView};
use axocoatl::relations::{scope_str, Reference};
use axocoatl::turn::TurnEvent;
use axocoatl_store::extracted::OcrInfo;

pub use crate::json_cost::{PriceJson, UsageJson};
pub use crate::json_memory::*;
use schemars::JsonSchema;
use serde::Serialize;

/// `send --json`, `retry --json`: the events of one turn, one per line, then how it ended.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SendLine<'a> {
    /// An event of the turn, as the runtime reports it.
    Event(&'a TurnEvent<'a>),
    /// The command's last line.
    End(SendEnd<'a>),
}

/// The last line of `send --json`: the turn's end, or why the command failed before it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type")]
pub enum SendEnd<'a> {
    /// A command that failed before its turn began (a bad option, a busy session, no
    /// configuration): what stderr says, for scripts reading stdout.
    #[serde(rename = "error")]
    Error {
        message: &'a str,
        causes: &'a [String],
        hints: &'a [String],
        exit_code: i32,
    },
    /// The turn waits for a person's approval of tool calls (its `approval.requested`
    /// events came before): exit 12. `axocoatl approve TURN` answers them and continues it.
    #[serde(rename = "turn.waiting")]
    TurnWaiting {
        turn: &'a str,
        session: &'a str,
        /// The calls that wait, as `tool (call id)`.
        calls: &'a [String],
        exit_code: i32,
    },
    /// The turn's terminal record is written: the last event.
    #[serde(rename = "turn.ended")]
    TurnEnded {
        turn: &'a str,
        session: &'a str,
        agent: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_name: Option<&'a str>,
        /// `completed`, `failed`, `stopped` or `interrupted`.
        state: &'a str,
        /// All of the output.
        output: &'a str,
        usage: UsageJson,
        /// Why it failed or was interrupted.
        error: Option<&'a str>,
    },
}

/// An attachment pinned by a turn.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PinJson<'a> {
    pub reference: &'a str,
    pub name: &'a str,
    pub media_type: &'a str,
    pub size: u64,
    pub object: &'a str,
    pub text_object: Option<&'a str>,
}

/// One turn: a line of `history --json`, the base of `show --json` and of each turn of
/// `export --format json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TurnJson<'a> {
    pub turn: &'a str,
    pub session: &'a str,
    pub agent: &'a str,
    /// The agent's configured name, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<&'a str>,
    /// `running`, `waiting` (for approval), `completed`, `failed`, `stopped` or
    /// `interrupted`.
    pub state: &'a str,
    /// A later rewind moved the conversation head before this turn.
    pub superseded: bool,
    /// The message.
    pub request: &'a str,
    /// The output (for `history --json`, only its first 64 KiB when `output_object` is set).
    pub output: &'a str,
    /// The object holding the whole output, when it was too long for one record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_object: Option<&'a str>,
    /// Why it failed or was interrupted.
    pub error: Option<&'a str>,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// Null while running. `show --json` and `export --format json` add the prompt-cache
    /// tokens and cost of the turn's calls, its workers' included.
    pub usage: Option<UsageJson>,
    /// The turn this one retried.
    pub retry_of: Option<&'a str>,
    /// The automation occurrence that started the turn (null: a person sent it).
    pub origin: Option<OriginJson<'a>>,
    /// Inline context (piped text): its label, length in bytes, and the object holding it
    /// when it was stored as one.
    pub context: &'a [ContextView],
    /// The attachments the turn pinned.
    pub attachments: Vec<PinJson<'a>>,
    /// Tool calls (`started_at`, `ended_at`: milliseconds since the epoch).
    pub tools: &'a [ToolEvent],
    pub warnings: &'a [String],
    /// A coordinator's plan: `method`, `subtasks` (`id`, `worker`, `role`, `task`,
    /// `depends_on`), `rejected`. Only for coordinator turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<&'a axocoatl::history::PlanView>,
    /// A coordinator's subtasks as they ran. Only for coordinator turns.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub subtasks: &'a [axocoatl::history::SubtaskView],
    /// A multi-agent turn: each agent's activation and why it answered or not.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub activation: &'a [axocoatl_store::ledger::record::AgentActivation],
    /// The sender's per-call `model`, `system` and `options` (`[key, value]` pairs); only
    /// for a turn that had some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overrides: Option<&'a axocoatl::overrides::Overrides>,
    /// The id of the JSON Schema its reply had to match (`send --schema`); only for a turn
    /// that had one (`axocoatl schemas show ID` prints the schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<&'a str>,
    /// With a schema, once the turn completed: the reply as a JSON value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<&'a serde_json::Value>,
    /// The tool calls its agent's `approvals:` held for a person, with their decisions
    /// (`requested_at`, `expires_at`, `decided_at`: milliseconds since the epoch). Only for
    /// a turn that had some.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub approvals: &'a [axocoatl::history::ApprovalView],
}

impl<'a> TurnJson<'a> {
    /// With the cache tokens and cost of `t`'s calls in its usage.
    pub fn with_cost(mut self, t: &TurnView) -> Self {
        self.usage = t
            .usage
            .as_ref()
            .map(|u| UsageJson::with_detail(u, &t.detail));
        self
    }

    /// The session as people name it (after a rename, not as its records do).
    pub fn shown_as(mut self, session: &'a str) -> Self {
        self.session = session;
        self
    }

    /// `t` with `output` as its output text and `agent_name` from the configuration.
    pub fn new(t: &'a TurnView, output: &'a str, agent_name: Option<&'a str>) -> Self {
        TurnJson {
            turn: &t.turn,
            session: &t.session,
            agent: &t.agent,
            agent_name,
            state: t.state.as_str(),
            superseded: t.superseded,
            request: &t.request,
            output,
            output_object: t.output_object.as_deref(),
            error: t.error.as_deref(),
            started_at: clock::rfc3339(t.started_at),
            ended_at: t.ended_at.map(clock::rfc3339),
            usage: t.usage.as_ref().map(UsageJson::from),
            retry_of: t.retry_of.as_deref(),
            origin: t.origin.as_ref().map(|o| OriginJson {
                automation: &o.automation,
                occurrence: clock::rfc3339(o.occurrence),
                trigger: &o.trigger,
                runner: &o.runner,
                runner_pid: o.pid,
            }),
            context: &t.context,
            attachments: t
                .attachments
                .iter()
                .map(|a| PinJson {
                    reference: &a.reference,
                    name: &a.name,
                    media_type: &a.media_type,
                    size: a.size,
                    object: &a.object,
                    text_object: a.text_object.as_deref(),
                })
                .collect(),
            tools: &t.tools,
            warnings: &t.warnings,
            overrides: t.overrides.as_ref(),
            plan: t.plan.as_ref(),
            subtasks: &t.subtasks,
            activation: &t.activation,
            schema: t.schema.as_ref().map(|s| s.object.as_str()),
            value: t.value.as_ref(),
            approvals: &t.approvals,
        }
    }
}

/// Where a turn came from when an automation started it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OriginJson<'a> {
    pub automation: &'a str,
    /// The scheduled time of the occurrence (for a manual run, when it was requested).
    pub occurrence: String,
    /// `schedule` or `manual`.
    pub trigger: &'a str,
    /// What ran it: `tick`, `serve` or `manual`.
    pub runner: &'a str,
    pub runner_pid: u32,
}

/// `approvals --json`: one line per tool call that waits for a person.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApprovalLine<'a> {
    pub turn: &'a str,
    pub session: &'a str,
    pub agent: &'a str,
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The arguments as JSON text (their first 64 KiB).
    pub arguments: &'a str,
    /// The rule of `approvals:` that held it.
    pub rule: &'a str,
    pub requested_at: String,
    /// When it ends the turn if still undecided (`approval_timeout`); null: never.
    pub expires_at: Option<String>,
    /// Null while undecided; `approved`, `denied` or `always` when it is decided and its
    /// turn waits to be continued (`axocoatl approve TURN`).
    pub decision: Option<&'a str>,
}

/// `approve --json` when it does not continue the turn (`--no-run`, or calls still wait).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApproveJson<'a> {
    pub turn: &'a str,
    pub session: &'a str,
    /// `approved`, `denied` or `always`.
    pub decision: &'a str,
    /// The calls decided now.
    pub decided: Vec<&'a str>,
    /// The held calls still undecided: the turn waits for them.
    pub undecided: Vec<&'a str>,
    /// Always false here: a continued turn prints its events instead.
    pub continued: bool,
}

/// `show --json`: one turn with its model calls.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShowJson<'a> {
    #[serde(flatten)]
    pub turn: TurnJson<'a>,
    /// The turn's model calls.
    pub calls: &'a [CallView],
    /// A stop was recorded for this turn.
    pub stop_requested: bool,
    /// Where each pinned attachment's text comes from, in the order of `attachments`.
    pub attachment_texts: Vec<PinTextJson<'a>>,
    /// The directory the turn's tools worked in, when it was not the directory holding the
    /// repository (the home repository's turns work where the command ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<&'a str>,
}

/// `show --json`: where a pinned attachment's text comes from.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PinTextJson<'a> {
    pub reference: &'a str,
    /// `none`, `extracted` or `ocr`.
    pub text: &'static str,
    pub ocr: Option<OcrJson>,
}

/// `export --format json`: the whole document.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportJson<'a> {
    pub export: ExportHeader<'a>,
    pub turns: Vec<ExportTurn<'a>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportHeader<'a> {
    /// Always `axocoatl-history-export`.
    pub format: &'static str,
    /// Always 1.
    pub version: u32,
    pub scope: ExportScope,
    /// That an export is a copy for review, not a backup.
    pub note: &'static str,
    /// False when some ledger records could not be read (listed in `damaged`).
    pub complete: bool,
    pub damaged: Vec<DamagedJson<'a>>,
}

/// A ledger record or segment that could not be read.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DamagedJson<'a> {
    pub file: String,
    /// Null when the file could not be read at all.
    pub offset: Option<u64>,
    pub reason: &'a str,
}

/// `{"session": NAME}` for one session, `"all"` for every session.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ExportScope {
    Session { session: String },
    All(&'static str),
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportTurn<'a> {
    #[serde(flatten)]
    pub turn: TurnJson<'a>,
    /// Every ledger record of the turn, in order.
    pub records: Vec<RecordJson>,
}

/// One ledger record: its body's fields, its kind name and sequence number.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordJson {
    #[serde(flatten)]
    pub body: serde_json::Value,
    pub kind: &'static str,
    pub seq: u64,
}

/// `usage --json`: one line per group, then the total.
#[derive(Debug, Serialize, JsonSchema)]
pub struct UsageRowJson<'a> {
    #[serde(flatten)]
    pub usage: UsageJson,
    #[serde(flatten)]
    pub group: UsageGroup<'a>,
    pub turns: u64,
}

/// What a usage row groups by: `{"agent": ID}`, `{"session": NAME}`, `{"day": DATE}`, or
/// `{"total": true}` for the last line.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum UsageGroup<'a> {
    Agent {
        agent: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_name: Option<&'a str>,
    },
    Session {
        session: &'a str,
    },
    Day {
        day: &'a str,
    },
    Total {
        total: bool,
    },
}

/// `sessions --json`: one line per session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionJson<'a> {
    pub session: &'a str,
    /// `HEAD` names it.
    pub current: bool,
    pub turns: u64,
    pub last_activity: Option<String>,
    /// The turn running in it now.
    pub active_turn: Option<&'a str>,
    /// Only for a removed session (`sessions --all`): when it was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<String>,
}

/// `schemas --json`: one line per stored schema.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SchemaListJson<'a> {
    /// The schema's id (`send --schema ID` takes it, or its first 8 or more characters).
    pub id: &'a str,
    /// How many turns used it.
    pub turns: u64,
    pub first_used: String,
    pub last_used: String,
    /// The newest turn that used it.
    pub last_turn: &'a str,
    /// Its concise form ('name, age int'), when it has one.
    pub concise: Option<&'a str>,
    /// The JSON Schema.
    pub schema: &'a serde_json::Value,
}

/// `schemas show --json`: a schema, however it was given.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SchemaShowJson<'a> {
    /// The id it is (or would be) stored under.
    pub id: &'a str,
    pub concise: Option<&'a str>,
    pub schema: &'a serde_json::Value,
}

/// `sessions new|switch|rm|rename --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionActionJson<'a> {
    pub session: &'a str,
    /// Whether it is the current session (HEAD) now.
    pub current: bool,
    /// `created`, `switched`, `removed` or `renamed`.
    pub action: &'a str,
}

/// `stop --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StopJson<'a> {
    pub turn: &'a str,
    pub session: &'a str,
    pub stop_requested: bool,
    /// With `--wait`: the state the turn ended in.
    pub state: Option<&'a str>,
    /// With `--wait`: the turn's tool calls that changed files, ran commands or called MCP
    /// tools: stopping undid none of them (empty without `--wait`).
    pub effects: &'a [axocoatl::effects::Effect],
}

/// `attach add|list|rm --json`: one reference per line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReferenceJson<'a> {
    pub reference: &'a str,
    pub session: &'a str,
    /// The file's name.
    pub name: &'a str,
    pub media_type: &'a str,
    /// Bytes.
    pub size: u64,
    /// `once` (the next turn consumes it) or `session` (every turn until removed).
    pub scope: &'a str,
    /// `selected`, `consumed` or `removed`.
    pub state: &'a str,
    /// The object holding the file's bytes.
    pub object: &'a str,
    /// The object holding its extracted text, when it has one.
    pub text_object: Option<&'a str>,
    /// The extracted text was cut at its limit.
    pub text_truncated: bool,
    pub added_at: String,
    /// The turn that consumed a `once` attachment.
    pub consumed_by: Option<&'a str>,
    pub removed_at: Option<String>,
    /// The turns that pinned it.
    pub used_by: &'a [String],
    /// Where the text comes from: `none` (an image OCR did not read), `extracted` (text
    /// and PDF text layers), `ocr`.
    pub text: &'static str,
    /// What OCR read with (null when OCR did not read it).
    pub ocr: Option<OcrJson>,
    /// `attach add` only: the file was already selected, nothing new was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// `attach add` only: its text was read before (same content and OCR languages) and
    /// not read again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_reused: Option<bool>,
    /// `attach add` only: what was not read of the file, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<&'a [String]>,
}

/// What OCR read a text with (`attach add|list|rm --json`, `show --json`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OcrJson {
    pub engine: String,
    pub languages: String,
    /// The mean of the words' confidences, 0 to 100; null when no word was found.
    pub confidence: Option<u8>,
    pub words: u64,
    /// Pages read by OCR, of `of_pages` (a PDF's pages without a text layer).
    pub pages: u32,
    pub of_pages: u32,
}

impl From<&OcrInfo> for OcrJson {
    fn from(i: &OcrInfo) -> OcrJson {
        OcrJson {
            engine: i.engine.clone(),
            languages: i.languages.clone(),
            confidence: i.confidence,
            words: i.words,
            pages: i.pages,
            of_pages: i.of_pages,
        }
    }
}

/// Where a reference's text comes from.
#[derive(Debug)]
pub struct TextJson {
    pub text: &'static str,
    pub ocr: Option<OcrJson>,
}

impl TextJson {
    pub fn of(text: &Text, r: &Reference) -> TextJson {
        TextJson::of_ocr(text.ocr(), r)
    }

    pub fn of_ocr(ocr: Option<&OcrInfo>, r: &Reference) -> TextJson {
        TextJson {
            text: match (ocr, &r.text_object) {
                (Some(_), _) => "ocr",
                (None, Some(_)) => "extracted",
                (None, None) => "none",
            },
            ocr: ocr.map(OcrJson::from),
        }
    }
}

impl<'a> ReferenceJson<'a> {
    pub fn new(r: &'a Reference, text: &TextJson) -> Self {
        ReferenceJson {
            reference: &r.reference,
            session: &r.session,
            name: &r.name,
            media_type: &r.media_type,
            size: r.size,
            scope: scope_str(r.scope),
            state: r.state.as_str(),
            object: &r.object,
            text_object: r.text_object.as_deref(),
            text_truncated: r.text_truncated,
            added_at: clock::rfc3339(r.added_at),
            consumed_by: r.consumed_by.as_deref(),
            removed_at: r.removed_at.map(clock::rfc3339),
            used_by: &r.used_by,
            text: text.text,
            ocr: text.ocr.clone(),
            reused: None,
            text_reused: None,
            notes: None,
        }
    }
}

/// `rewind --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RewindJson<'a> {
    pub session: &'a str,
    pub agent: &'a str,
    /// The turn rewound to (it and every later turn are superseded).
    pub target: &'a str,
    /// The turns superseded.
    pub superseded: &'a [String],
    /// The target's request, to revise and send again.
    pub prefill: &'a str,
    /// Whether the agent's checkpoint was written from the retained transcript.
    pub checkpoint: bool,
    /// The superseded turns' tool calls that changed files, ran commands or called MCP
    /// tools: rewind undid none of them.
    pub effects: &'a [axocoatl::effects::Effect],
}

/// `fsck --json`: one line per finding, then a summary.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FsckLine<'a> {
    /// One problem.
    Finding {
        kind: &'a str,
        /// An error (else a warning).
        error: bool,
        file: String,
        offset: Option<u64>,
        message: &'a str,
    },
    /// What was checked; the last line.
    Summary {
        clean: bool,
        segments: u64,
        records: u64,
        objects: u64,
        checkpoints: u64,
        memory_files: u64,
        /// Automation run records checked.
        run_records: u64,
        findings: usize,
        repaired_bytes: u64,
        /// What `--repair` did, one sentence each.
        repairs: &'a [String],
        /// Pre-1.0 inputs seen (listed before the summary).
        legacy_inputs: usize,
    },
    /// A pre-1.0 input: read as docs/legacy.md says, never changed (not a finding).
    Legacy {
        kind: &'a str,
        id: &'a str,
        file: String,
        files: u64,
        read: &'a str,
    },
}

/// `import --json`: one line per legacy checkpoint directory and per other pre-1.0 input,
/// then a summary.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ImportLine<'a> {
    /// One 0.1.x checkpoint directory and what the import does with it.
    Checkpoint(&'a axocoatl::legacy::Candidate),
    /// Another pre-1.0 input (read, never imported).
    Input {
        kind: &'a str,
        id: &'a str,
        path: String,
        files: u64,
        /// How this build reads it.
        read: &'a str,
    },
    Summary {
        dry_run: bool,
        imported: usize,
        pending: usize,
        already_imported: usize,
        skipped: usize,
        other_inputs: usize,
        /// Automation run records copied (`<automation>/<record>`).
        runs_copied: &'a [String],
    },
}

/// `init --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct InitJson<'a> {
    /// The `.axocoatl` directory.
    pub repository: &'a Path,
    /// The configuration file.
    pub config: &'a Path,
    /// False when a configuration was already there (it is kept).
    pub config_written: bool,
    /// The session `HEAD` names.
    pub session: &'a str,
}

/// `repo --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RepoJson<'a> {
    pub repository: &'a Path,
    pub config: &'a Path,
    /// `explicit`, `discovered` or `home`.
    pub source: &'a str,
    pub exists: bool,
}

/// `validate --json`: one line per diagnostic, then a summary.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ValidateLine<'a> {
    /// One problem, at the line and column to change.
    Diagnostic {
        #[serde(flatten)]
        diagnostic: &'a axocoatl::config::Diagnostic,
        /// Always `diagnostic`.
        #[serde(rename = "type")]
        kind: &'static str,
    },
    /// The last line; the counts of what is configured only when it is valid.
    Summary {
        /// Always `summary`.
        #[serde(rename = "type")]
        kind: &'static str,
        file: &'a Path,
        valid: bool,
        errors: usize,
        warnings: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        agents: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        workflows: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        automations: Option<usize>,
    },
}

/// `util checkpoints` (a maintenance command): one line per checkpoint file.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum CheckpointJson<'a> {
    Valid {
        file: Option<String>,
        valid: bool,
        ledger_seq: u64,
        head_turn: Option<&'a str>,
        in_flight: bool,
        messages: usize,
        roles: Vec<String>,
        usage: UsageJson,
    },
    Invalid {
        file: Option<String>,
        valid: bool,
        reason: &'a str,
    },
}

/// `agents list --json`, `agents status --json`: one line per actor, then (status) one
/// per automation of serve's schedule.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type")]
pub enum AgentsLine<'a> {
    /// One actor: an agent serve runs for a session.
    #[serde(rename = "actor")]
    Actor {
        agent: &'a str,
        session: &'a str,
        /// `running`, `idle`, `starting`, `restarting` or `down`.
        state: &'a str,
        pid: Option<u32>,
        restarts: u32,
        last_error: Option<&'a str>,
        last_turn: Option<&'a str>,
        /// The agent's MCP servers the actor keeps: `server`, `state`, `pid`, `restarts`,
        /// `last_error`.
        mcp_servers: &'a [axocoatl::mcp::McpServerStatus],
    },
    /// One automation of serve's schedule (`status` only, after the actors).
    #[serde(rename = "automation")]
    Automation {
        automation: &'a str,
        enabled: bool,
        schedule: &'a str,
        /// The next occurrence (RFC 3339 UTC).
        next: Option<&'a str>,
    },
}

/// `mcp list --json`: one line per server.
#[derive(Debug, Serialize, JsonSchema)]
pub struct McpServerLine<'a> {
    pub server: &'a str,
    /// `running` or `failed`.
    pub state: &'static str,
    pub error: Option<&'a str>,
    /// The agents whose `mcp_servers` name it.
    pub agents: &'a [&'a str],
    pub tools: Vec<McpToolLine<'a>>,
}

/// One tool of [`McpServerLine`].
#[derive(Debug, Serialize, JsonSchema)]
pub struct McpToolLine<'a> {
    /// As the model sees it: `mcp__<server>__<tool>`.
    pub name: &'a str,
    /// Its name on its server.
    pub server_name: &'a str,
    pub description: &'a str,
    pub input_schema: &'a serde_json::Value,
}

/// `models list --json`: one known model and what is installed of it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelJson<'a> {
    pub name: &'a str,
    /// `chat` (the `local` provider's default model) or `embedder` (semantic memory's).
    pub role: String,
    pub description: &'a str,
    /// Every file is in place and its sha256 checks out.
    pub verified: bool,
    /// The directory (or the file, for one-file models) the runtime reads it from.
    pub location: Option<&'a Path>,
    /// The environment variable that chose the location (null: the default cache).
    pub chosen_by: Option<&'a str>,
    pub files: Vec<ModelFileJson<'a>>,
    /// The embedder's ready-to-run file (only for the embedder, in a build with the
    /// `embeddings` feature).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_file: Option<ReadyStateJson<'a>>,
}

/// One file of a known model.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelFileJson<'a> {
    pub name: &'a str,
    pub path: &'a Path,
    /// `verified`, `missing`, `different` or `not-a-file`.
    pub state: &'a str,
    /// The sha256 the file must have.
    pub sha256: &'a str,
    /// The sha256 found, when it is another file.
    pub found_sha256: Option<&'a str>,
    /// The PyPI project and version whose wheel holds it.
    pub package: &'a str,
    pub version: &'a str,
    /// Bytes of an unfinished download, kept for the next fetch to resume.
    pub partial_download_bytes: Option<u64>,
}

/// `models list --json`: whether the embedder's ready-to-run file is ready.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadyStateJson<'a> {
    pub path: &'a Path,
    pub ready: bool,
    /// Why it is not.
    pub why: Option<&'a str>,
}

/// `models fetch --json`: what the fetch did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FetchJson<'a> {
    pub name: &'a str,
    pub location: &'a Path,
    pub files: Vec<FetchedJson<'a>>,
    /// The embedder's ready-to-run file (null for the chat model, or in a build without the
    /// `embeddings` feature).
    pub ready_file: Option<ReadyFileJson<'a>>,
}

/// One file of a fetch.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FetchedJson<'a> {
    pub path: &'a Path,
    /// It was downloaded now (else it was already in place and verified).
    pub downloaded: bool,
}

/// `models fetch --json`: the embedder's ready-to-run file.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadyFileJson<'a> {
    pub path: &'a Path,
    /// `in-place`, `made` or `failed` (the reference engine runs).
    pub state: &'static str,
    /// Why it failed.
    pub why: Option<&'a str>,
}

/// `export -o FILE --json`: what the export wrote, one line.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExportSummaryJson<'a> {
    /// `markdown`, `json`, `sqlite` or `otlp`.
    pub format: &'static str,
    pub path: &'a Path,
    /// The session exported (as it is named now), or `all`.
    pub scope: ExportScope,
    /// Turns in the file (`otlp`: traces written, one per ended turn).
    pub turns: u64,
    /// `sqlite`: the file was made now (false: an existing export was refreshed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// `sqlite`: turns this export added to the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns_added: Option<u64>,
    /// `sqlite`: the sequence number of the last ledger record the file holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// `otlp`: spans written, and running turns left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spans: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<u64>,
    /// False when ledger records could not be read (listed in `damaged`; exit 1).
    pub complete: bool,
    pub damaged: Vec<DamagedJson<'a>>,
}

impl<'a> ExportSummaryJson<'a> {
    /// A summary of `turns` turns of `format` written to `path`, with what could not be
    /// read; the format's own counts are set by the caller.
    pub fn new(
        format: &'static str,
        path: &'a Path,
        scope: ExportScope,
        turns: u64,
        damaged: &'a [axocoatl_store::ledger::Damaged],
    ) -> Self {
        ExportSummaryJson {
            format,
            path,
            scope,
            turns,
            created: None,
            turns_added: None,
            seq: None,
            spans: None,
            running: None,
            complete: damaged.is_empty(),
            damaged: damaged.iter().map(DamagedJson::of).collect(),
        }
    }
}

impl<'a> DamagedJson<'a> {
    pub fn of(d: &'a axocoatl_store::ledger::Damaged) -> Self {
        DamagedJson {
            file: d.path.display().to_string(),
            offset: d.offset,
            reason: &d.reason,
        }
    }
}
