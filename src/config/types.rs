//! The typed schema of `axocoatl.yaml`. Validation lives in `validate.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use super::approvals::{
    ApprovalHook, ApprovalPolicy, ApprovalRule, ApprovalTimeout, DEFAULT_HOOK_TIMEOUT_SECS,
    WRITE_TOOLS,
};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub agents: Vec<AgentConfig>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub workflows: Vec<WorkflowConfig>,
    #[serde(default)]
    pub consolidation: ConsolidationConfig,
    #[serde(default)]
    pub automations: Vec<AutomationConfig>,
    #[serde(default)]
    pub checkpoint: CheckpointConfig,
    /// How attachments are read.
    #[serde(default)]
    pub attachments: AttachmentsConfig,
    #[serde(default)]
    pub default_agent: Option<String>,
    #[serde(default)]
    pub default_session: Option<String>,
    /// The directory agents' tools work in, relative to the config file (default: its
    /// directory).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// MCP servers by name, whose tools agents that list them may use.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// OpenTelemetry traces of turns (the `OTEL_EXPORTER_OTLP_*` environment overrides it).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// A program told of each tool call that waits for approval.
    #[serde(default)]
    pub on_approval_request: Option<ApprovalHook>,
    /// Prices of models the shipped table lacks or prices differently (USD per million
    /// tokens); an entry here wins over the shipped one for the same provider and model.
    #[serde(default)]
    pub prices: Vec<PriceEntry>,
}

/// `telemetry:`: where traces of turns go (see `docs/telemetry.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// An OTLP/HTTP endpoint: a collector's base URL (`http://localhost:4318`; `/v1/traces`
    /// is added) or the full URL of its traces path. Unset: no traces.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// How spans are encoded: `http/protobuf` (the default) or `http/json`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Put requests, answers and tool arguments and results in the spans (keys redacted);
    /// off by default.
    #[serde(default)]
    pub capture_content: bool,
}

/// Seconds an MCP server has to start and list its tools when `startup_timeout_secs` is unset.
pub const DEFAULT_MCP_STARTUP_TIMEOUT_SECS: u64 = 10;
/// Seconds one MCP tool call may take when `tool_timeout_secs` is unset.
pub const DEFAULT_MCP_TOOL_TIMEOUT_SECS: u64 = 60;

/// An MCP server started as a child process speaking MCP over its stdin and stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program: a name looked up in `PATH`, or a path (relative to the config file).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The server's whole environment besides `PATH` and `HOME`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub startup_timeout_secs: Option<u64>,
    #[serde(default)]
    pub tool_timeout_secs: Option<u64>,
}

/// How an MCP server's tool is named to models and in `tools:` allowlists.
pub const MCP_TOOL_PREFIX: &str = "mcp__";

/// `mcp__<server>__<tool>`.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("{MCP_TOOL_PREFIX}{server}__{tool}")
}

/// `mcp__<server>__<tool>` → `(server, tool)`; server names never contain `__`. `None` for
/// other names; `Some((server, ""))` or `Some(("", …))` for malformed MCP names.
pub fn split_mcp_tool_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(MCP_TOOL_PREFIX)?;
    Some(rest.split_once("__").unwrap_or((rest, "")))
}

impl McpServerConfig {
    pub fn startup_timeout_secs(&self) -> u64 {
        self.startup_timeout_secs
            .unwrap_or(DEFAULT_MCP_STARTUP_TIMEOUT_SECS)
    }

    pub fn tool_timeout_secs(&self) -> u64 {
        self.tool_timeout_secs
            .unwrap_or(DEFAULT_MCP_TOOL_TIMEOUT_SECS)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentRole {
    #[default]
    Autonomous,
    Coordinator,
    Worker,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    pub provider: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Empty inherits the baseline tools; non-empty is the exact allowlist.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub role: AgentRole,
    #[serde(default)]
    pub activation_threshold: Option<f64>,
    #[serde(default)]
    pub activation_decay: Option<f64>,
    #[serde(default)]
    pub sampling: SamplingConfig,
    #[serde(default)]
    pub token_budget: Option<TokenBudget>,
    /// Money limits checked before each call, from the price table (see `prices:`).
    #[serde(default)]
    pub cost_budget: Option<CostBudget>,
    #[serde(default)]
    pub memory: MemoryConfig,
    /// What the agent's tools may change: `read-only` (default), `workspace-write` or
    /// `full-access`.
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Model calls per turn before the turn fails (default [`DEFAULT_MAX_STEPS`]).
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// The entries of `mcp_servers:` whose tools this agent may see.
    #[serde(default)]
    pub mcp_servers: Vec<String>,
    /// What each of its `run_command` calls may use (sandboxed commands only).
    #[serde(default)]
    pub command_limits: CommandLimits,
    /// The JSON Schema each of its replies must match (docs/schema.md): a schema file, the
    /// concise form or a stored schema's id as text, or JSON Schema written out in YAML.
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
    /// How many times a reply that breaks `output_schema` is asked for again (default 0).
    #[serde(default)]
    pub schema_retries: Option<u32>,
    /// Which of its tool calls wait for a person's approval (default `never`).
    #[serde(default)]
    pub approvals: ApprovalPolicy,
    /// How long a call waits for a decision before the turn ends failed (default: no
    /// limit).
    #[serde(default)]
    pub approval_timeout: Option<ApprovalTimeout>,
    /// Its own sleep-time consolidation: `false` opts it out, `true` in, a mapping tunes
    /// it; unset keys take the top-level `consolidation:` values.
    #[serde(default)]
    pub consolidation: Option<AgentConsolidation>,
}

/// Model calls per turn when an agent sets no `max_steps`.
pub const DEFAULT_MAX_STEPS: u32 = 25;

/// The limits of one `run_command` in a `read-only` or `workspace-write` sandbox, enforced
/// by the kernel; an unset key takes its default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandLimits {
    /// Processes and threads of the command at once, the shell included.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Address space of each process, in MiB.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// The largest file a process may write, in MiB.
    #[serde(default)]
    pub file_size_mb: Option<u64>,
    /// CPU time of each process, in seconds.
    #[serde(default)]
    pub cpu_secs: Option<u64>,
}

pub const DEFAULT_COMMAND_PROCESSES: u64 = 1024;
pub const DEFAULT_COMMAND_MEMORY_MB: u64 = 8192;
pub const DEFAULT_COMMAND_FILE_SIZE_MB: u64 = 4096;
pub const DEFAULT_COMMAND_CPU_SECS: u64 = 3600;
/// The largest `memory_mb` and `file_size_mb` (1 PiB): beyond it, bytes no longer fit.
pub const MAX_COMMAND_MB: u64 = 1 << 30;

impl CommandLimits {
    /// `(key, value, default)` of every limit, unset ones at their default.
    pub fn effective(&self) -> [(&'static str, u64, u64); 4] {
        [
            ("processes", self.processes, DEFAULT_COMMAND_PROCESSES),
            ("memory_mb", self.memory_mb, DEFAULT_COMMAND_MEMORY_MB),
            (
                "file_size_mb",
                self.file_size_mb,
                DEFAULT_COMMAND_FILE_SIZE_MB,
            ),
            ("cpu_secs", self.cpu_secs, DEFAULT_COMMAND_CPU_SECS),
        ]
        .map(|(key, value, default)| (key, value.unwrap_or(default), default))
    }

    pub fn processes(&self) -> u64 {
        self.processes.unwrap_or(DEFAULT_COMMAND_PROCESSES)
    }

    pub fn memory_bytes(&self) -> u64 {
        mib(self.memory_mb.unwrap_or(DEFAULT_COMMAND_MEMORY_MB))
    }

    pub fn file_size_bytes(&self) -> u64 {
        mib(self.file_size_mb.unwrap_or(DEFAULT_COMMAND_FILE_SIZE_MB))
    }

    pub fn cpu_secs(&self) -> u64 {
        self.cpu_secs.unwrap_or(DEFAULT_COMMAND_CPU_SECS)
    }
}

fn mib(n: u64) -> u64 {
    n.saturating_mul(1024 * 1024)
}

impl AgentConfig {
    pub fn max_steps(&self) -> u32 {
        self.max_steps.unwrap_or(DEFAULT_MAX_STEPS)
    }
}

pub use crate::catalog::SandboxMode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingConfig {
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OverflowPolicy {
    /// Enforce the local guard: a call that cannot fit is not sent.
    #[default]
    #[serde(rename = "abort")]
    Abort,
    #[serde(rename = "warn")]
    Warn,
    /// The deprecated compatibility spelling; behaves as `warn`.
    #[serde(rename = "summarize")]
    Summarize,
}

impl OverflowPolicy {
    /// `summarize` is only a spelling of `warn`.
    pub fn effective(self) -> OverflowPolicy {
        match self {
            OverflowPolicy::Summarize => OverflowPolicy::Warn,
            other => other,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenBudget {
    #[serde(default)]
    pub per_execution: Option<u64>,
    #[serde(default)]
    pub per_call: Option<u64>,
    #[serde(default)]
    pub overflow_policy: OverflowPolicy,
}

/// One row of the price table: what a provider's model costs, in US dollars per million
/// tokens. The shipped table and `prices:` entries have this shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceEntry {
    /// A provider kind (`anthropic`, `openai`, ...) or the name of a `providers:` entry.
    pub provider: String,
    /// A model name, or a prefix of model names ending in `*` (`claude-sonnet-4-5*` also
    /// prices the dated `claude-sonnet-4-5-20250929`).
    pub model: String,
    /// Input tokens neither written to nor read from a prompt cache.
    pub input: f64,
    pub output: f64,
    /// Input tokens written to a prompt cache (default: `input`).
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Input tokens read from a prompt cache (default: `input`).
    #[serde(default)]
    pub cache_read: Option<f64>,
}

/// `cost_budget:` money limits in US dollars, checked like [`TokenBudget`] before each call
/// (the reservation priced with the model's price) and after it (the cost the provider's
/// usage comes to).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostBudget {
    #[serde(default)]
    pub per_execution_usd: Option<f64>,
    #[serde(default)]
    pub per_call_usd: Option<f64>,
    #[serde(default)]
    pub overflow_policy: OverflowPolicy,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    #[serde(default = "default_max_session_messages")]
    pub max_session_messages: u32,
    #[serde(default)]
    pub recall: RecallConfig,
    #[serde(default)]
    pub core: CoreConfig,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            max_session_messages: default_max_session_messages(),
            recall: RecallConfig::default(),
            core: CoreConfig::default(),
        }
    }
}

fn default_max_session_messages() -> u32 {
    100
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallConfig {
    #[serde(default = "yes")]
    pub passive_inject: bool,
    #[serde(default = "default_top_k")]
    pub top_k: u32,
    #[serde(default = "default_min_score")]
    pub min_score: f64,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            passive_inject: true,
            top_k: default_top_k(),
            min_score: default_min_score(),
        }
    }
}

fn yes() -> bool {
    true
}
fn default_top_k() -> u32 {
    5
}
fn default_min_score() -> f64 {
    0.15
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreConfig {
    /// Omitted or empty: the default persona, human and project blocks.
    #[serde(default)]
    pub blocks: Vec<CoreBlock>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreBlock {
    pub label: String,
    #[serde(default = "default_block_limit")]
    pub limit: u32,
    #[serde(default)]
    pub shared: bool,
}

fn default_block_limit() -> u32 {
    2000
}

impl CoreConfig {
    /// The effective blocks: the configured list, or the defaults when it is empty.
    pub fn effective_blocks(&self) -> Vec<CoreBlock> {
        if !self.blocks.is_empty() {
            return self.blocks.clone();
        }
        ["persona", "human", "project"]
            .into_iter()
            .map(|label| CoreBlock {
                label: label.into(),
                limit: default_block_limit(),
                shared: false,
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Ollama,
    Openai,
    Anthropic,
    Local,
    Script,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Ollama => "ollama",
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Local => "local",
            ProviderKind::Script => "script",
        }
    }

    /// Every kind, as built in under its own name (what `-m KIND:MODEL` and an agent's
    /// `provider: KIND` accept without a `providers:` entry), in the order messages list
    /// them.
    pub const BUILTIN: &'static [ProviderKind] = &[
        ProviderKind::Ollama,
        ProviderKind::Openai,
        ProviderKind::Anthropic,
        ProviderKind::Local,
        ProviderKind::Script,
    ];

    pub fn from_builtin(name: &str) -> Option<ProviderKind> {
        match name {
            "ollama" => Some(ProviderKind::Ollama),
            "openai" => Some(ProviderKind::Openai),
            "anthropic" => Some(ProviderKind::Anthropic),
            "local" => Some(ProviderKind::Local),
            "script" => Some(ProviderKind::Script),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The name of the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Read timeout: the longest silence tolerated from a server.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub connect_timeout_secs: Option<u64>,
    /// Retries on connection errors and HTTP 429 before any output (default 2).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// The longest one model call may take in total, retries included, however steadily
    /// the server sends (default: no limit).
    #[serde(default)]
    pub deadline_secs: Option<u64>,
    /// `local`: the GGUF model file (relative paths are relative to the config file).
    #[serde(default)]
    pub model_path: Option<PathBuf>,
    /// `local`: compute threads for reading prompts and generating.
    #[serde(default)]
    pub threads: Option<usize>,
    /// `local`: context positions (at most what the model was trained for: 8192 for the default).
    #[serde(default)]
    pub context_size: Option<usize>,
    /// `script`: the YAML file of scripted replies (relative to the config file).
    #[serde(default)]
    pub script: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowConfig {
    pub id: String,
    pub entry_point: String,
    #[serde(default, alias = "members")]
    pub workers: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// How many subtasks of one pass run at once (default [`DEFAULT_MAX_PARALLEL`]).
    #[serde(default)]
    pub max_parallel: Option<u32>,
}

/// Subtasks of a coordinator's pass that run at once when a workflow sets no `max_parallel`.
pub const DEFAULT_MAX_PARALLEL: u32 = 4;

impl WorkflowConfig {
    pub fn max_parallel(&self) -> usize {
        self.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL).max(1) as usize
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsolidationConfig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default = "default_idle_threshold")]
    pub idle_threshold_secs: u64,
    #[serde(default = "default_interval")]
    pub interval_secs: u64,
}

impl Default for ConsolidationConfig {
    fn default() -> Self {
        ConsolidationConfig {
            enabled: false,
            idle_threshold_secs: default_idle_threshold(),
            interval_secs: default_interval(),
        }
    }
}

/// An agent's own `consolidation:`: `true`, `false`, or a mapping of the keys of the
/// top-level section, each set key overriding it for this agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AgentConsolidation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_threshold_secs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_secs: Option<u64>,
}

/// The mapping form of an agent's `consolidation:`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentConsolidationKeys {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    idle_threshold_secs: Option<u64>,
    #[serde(default)]
    interval_secs: Option<u64>,
}

impl<'de> Deserialize<'de> for AgentConsolidation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = AgentConsolidation;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "`true`, `false` or a mapping of enabled, idle_threshold_secs, interval_secs",
                )
            }

            fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Self::Value, E> {
                Ok(AgentConsolidation {
                    enabled: Some(on),
                    ..AgentConsolidation::default()
                })
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                let k = AgentConsolidationKeys::deserialize(
                    serde::de::value::MapAccessDeserializer::new(map),
                )?;
                Ok(AgentConsolidation {
                    enabled: k.enabled,
                    idle_threshold_secs: k.idle_threshold_secs,
                    interval_secs: k.interval_secs,
                })
            }
        }
        d.deserialize_any(Either)
    }
}

/// Where an agent's consolidation setting comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsolidationSource {
    /// The top-level `consolidation:` section (or its default).
    Section,
    /// The agent's own `consolidation:`.
    Agent,
}

/// The consolidation that applies to one agent: the top-level section with the agent's own
/// keys laid over it, each value with where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectiveConsolidation {
    pub enabled: (bool, ConsolidationSource),
    pub idle_threshold_secs: (u64, ConsolidationSource),
    pub interval_secs: (u64, ConsolidationSource),
}

impl ConsolidationConfig {
    /// What applies to `agent`.
    pub fn for_agent(&self, agent: &AgentConfig) -> EffectiveConsolidation {
        let own = agent.consolidation.clone().unwrap_or_default();
        fn pick<T>(own: Option<T>, section: T) -> (T, ConsolidationSource) {
            match own {
                Some(v) => (v, ConsolidationSource::Agent),
                None => (section, ConsolidationSource::Section),
            }
        }
        EffectiveConsolidation {
            enabled: pick(own.enabled, self.enabled),
            idle_threshold_secs: pick(own.idle_threshold_secs, self.idle_threshold_secs),
            interval_secs: pick(own.interval_secs, self.interval_secs),
        }
    }
}

fn default_idle_threshold() -> u64 {
    120
}
fn default_interval() -> u64 {
    1800
}

/// `attachments:`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentsConfig {
    #[serde(default)]
    pub ocr: OcrConfig,
}

/// `attachments.ocr:` the text of images (and of PDF pages without a text layer), read by
/// Tesseract once, when the attachment is added.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcrConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tesseract language codes (`eng`, `deu`, `chi_sim`, ...), read together.
    #[serde(default = "default_ocr_languages")]
    pub languages: Vec<String>,
    /// Images (and PDF page images) with more pixels than this are refused.
    #[serde(default = "default_ocr_max_pixels")]
    pub max_pixels: u64,
    /// How long OCR of one attachment may take.
    #[serde(default = "default_ocr_timeout")]
    pub timeout_secs: u64,
}

impl Default for OcrConfig {
    fn default() -> Self {
        OcrConfig {
            enabled: true,
            languages: default_ocr_languages(),
            max_pixels: default_ocr_max_pixels(),
            timeout_secs: default_ocr_timeout(),
        }
    }
}

/// The default of `attachments.ocr.max_pixels`: 50 megapixels (an A4 page scanned at
/// 600 dpi is 35).
pub const DEFAULT_OCR_MAX_PIXELS: u64 = 50_000_000;
/// The default of `attachments.ocr.timeout_secs`.
pub const DEFAULT_OCR_TIMEOUT_SECS: u64 = 120;

fn default_ocr_languages() -> Vec<String> {
    vec!["eng".to_owned()]
}
fn default_ocr_max_pixels() -> u64 {
    DEFAULT_OCR_MAX_PIXELS
}
fn default_ocr_timeout() -> u64 {
    DEFAULT_OCR_TIMEOUT_SECS
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutomationConfig {
    pub id: String,
    pub schedule: String,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub workflow: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
    pub request: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// An IANA time zone name for the schedule; absent: the machine's local zone, as cron.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Which occurrences missed while no runner ran still run.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Missed occurrences older than this are skipped (and recorded as skipped).
    #[serde(default = "default_catch_up_window")]
    pub catch_up_window_secs: u64,
    /// With `catch_up: all`, at most this many missed occurrences run (the newest); the
    /// older ones are skipped.
    #[serde(default = "default_catch_up_max_runs")]
    pub catch_up_max_runs: u32,
    /// What an occurrence does when it comes due while the previous run still runs.
    #[serde(default)]
    pub overlap: Overlap,
}

fn default_catch_up_window() -> u64 {
    86_400
}

/// How many missed occurrences `catch_up: all` runs at most, by default.
pub const DEFAULT_CATCH_UP_MAX_RUNS: u32 = 100;

fn default_catch_up_max_runs() -> u32 {
    DEFAULT_CATCH_UP_MAX_RUNS
}

/// Occurrences missed while no runner ran (within `catch_up_window_secs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Run the newest missed occurrence once; skip the others.
    #[default]
    Latest,
    /// Run every missed occurrence, oldest first.
    All,
    /// Run none; skip them all.
    None,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Latest => "latest",
            CatchUp::All => "all",
            CatchUp::None => "none",
        }
    }
}

/// An occurrence due while the previous run of the same automation still runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overlap {
    /// Record it as skipped.
    #[default]
    Skip,
    /// Run it after the previous run ends.
    Queue,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointPolicy {
    /// After each model response (the default).
    #[default]
    AfterEachResponse,
    /// Once, when a turn ends.
    AfterEachTurn,
    Never,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    #[serde(default)]
    pub policy: CheckpointPolicy,
    #[serde(default = "default_keep")]
    pub keep: usize,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            policy: CheckpointPolicy::default(),
            keep: default_keep(),
        }
    }
}

fn default_keep() -> usize {
    3
}
