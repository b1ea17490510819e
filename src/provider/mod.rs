//! Model providers: one small trait and its adapters.
//!
//! A provider takes a [`ChatRequest`] and streams [`Event`]s to a callback as chunks arrive,
//! then returns the final [`Completion`] with usage (or "usage unknown"). Cancellation is a
//! shared flag that every adapter checks at least every ~50 ms, even while a server is silent.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub mod anthropic;
mod factory;
pub mod http;
pub mod kept;
#[cfg(feature = "local")]
pub mod local;
pub mod ollama;
pub mod openai;
pub mod redact;
pub mod script;

pub use factory::{listed_models, open};
pub use http::HttpOptions;
pub use kept::{Held, Kept};

pub use crate::config::ResponseFormat;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// An image passed to a model that accepts images.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub media_type: String,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; adapters invent one (`call_<n>`) when the protocol has none.
    pub id: String,
    pub name: String,
    /// Parsed JSON arguments. Unparseable argument text is kept as a JSON string.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// A call whose arguments were kept as text (a checkpoint, a ledger record): parsed as
    /// JSON, or kept as a JSON string when the text is not JSON.
    pub fn from_text(id: String, name: String, arguments: &str) -> ToolCall {
        ToolCall {
            id,
            name,
            arguments: serde_json::from_str(arguments)
                .unwrap_or_else(|_| serde_json::Value::String(arguments.to_owned())),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For `Role::Tool`: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// A system message assembled from parts (the agent's prompt, then each context
    /// section): where each part lies in `content`. Adapters with a prompt cache end cached
    /// prefixes at the ends of the parts that stay the same from one request to the next;
    /// the others send `content` as it is. Empty: one part, `content` whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<TextPart>,
    /// For an assistant message: blocks of the provider's own that must go back with it in
    /// the later requests of the same turn (Anthropic's thinking blocks, whose signatures it
    /// checks), before its text and tool calls. Kept in memory only: never recorded or
    /// checkpointed, and a later turn's request no longer needs them.
    #[serde(skip)]
    pub replay: Vec<serde_json::Value>,
}

/// One part of a message's text: the bytes `start..end` of its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPart {
    pub start: usize,
    pub end: usize,
    /// Changes from one request to the next (what memory recalls for this request), so no
    /// cached prefix may end after it.
    pub volatile: bool,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            images: Vec::new(),
            parts: Vec::new(),
            replay: Vec::new(),
        }
    }

    /// The parts of the text (the whole text as one stable part when none were marked),
    /// each with its text; parts out of bounds or not on character boundaries are dropped.
    pub fn text_parts(&self) -> Vec<(&str, bool)> {
        if self.parts.is_empty() {
            return vec![(self.content.as_str(), false)];
        }
        self.parts
            .iter()
            .filter_map(|p| Some((self.content.get(p.start..p.end)?, p.volatile)))
            .collect()
    }
}

/// A tool advertised to the model: a JSON-Schema description of its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// Request-generation controls. `None` leaves the provider's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub response_format: Option<ResponseFormat>,
    /// The JSON Schema the reply must match (`send --schema`, checked by
    /// [`crate::schema::check`]): the local model decodes under it, Ollama and
    /// OpenAI-compatible servers are sent it. It outranks `response_format`.
    pub schema: Option<std::sync::Arc<serde_json::Value>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSchema>,
    pub sampling: Sampling,
}

/// What a provider reports while it streams.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A piece of visible text.
    Delta(String),
    /// A complete tool call (adapters assemble split argument deltas before emitting it).
    ToolCall(ToolCall),
    /// Something the user should know, e.g. a sampling field this adapter cannot honour.
    Warning(String),
}

/// Token counts of one call. `None` where the provider did not report them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallUsage {
    /// Every input token, those written to or read from a prompt cache included (Anthropic
    /// reports these apart: the adapter adds them up).
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (billed above the input price
    /// by Anthropic).
    pub cache_write_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache (billed below the input price).
    pub cache_read_tokens: Option<u64>,
}

impl CallUsage {
    pub fn reported(&self) -> bool {
        self.prompt_tokens.is_some() && self.completion_tokens.is_some()
    }

    /// The call's usage as the ledger counts it.
    pub fn usage(&self) -> axocoatl_store::ledger::record::Usage {
        axocoatl_store::ledger::record::Usage::of_call(self.prompt_tokens, self.completion_tokens)
    }
}

/// The end of a successful call: the assistant message (text and tool calls) and usage.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    pub message: Message,
    pub usage: CallUsage,
    pub finish_reason: Option<String>,
}

/// A cancellation handle shared between the caller (stop, Ctrl-C) and the adapter.
///
/// Besides the flag, a handle may carry a probe: a check run by whoever asks
/// [`Cancel::is_cancelled`], at most once per interval, that sets the flag when it finds a
/// reason to stop (the turn engine's probe looks for a stop request in the ledger). Adapters
/// already ask every [`CANCEL_POLL`] while they wait, so no thread is needed to watch.
#[derive(Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    probe: Option<Arc<Probe>>,
}

struct Probe {
    every: Duration,
    state: Mutex<ProbeState>,
}

struct ProbeState {
    next: Instant,
    check: Box<dyn FnMut() -> bool + Send>,
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.flag.load(Ordering::SeqCst))
            .field("probe", &self.probe.as_ref().map(|p| p.every))
            .finish()
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// A handle sharing this one's flag that also runs `check` when asked, first after
    /// `every` and then at most once per `every`; `check` returning true cancels.
    pub fn with_probe(
        &self,
        every: Duration,
        check: impl FnMut() -> bool + Send + 'static,
    ) -> Cancel {
        Cancel {
            flag: self.flag.clone(),
            probe: Some(Arc::new(Probe {
                every,
                state: Mutex::new(ProbeState {
                    next: Instant::now() + every,
                    check: Box::new(check),
                }),
            })),
        }
    }

    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        if self.flag.load(Ordering::SeqCst) {
            return true;
        }
        if let Some(probe) = &self.probe {
            // A probe already running elsewhere answers for both.
            if let Ok(mut state) = probe.state.try_lock() {
                let now = Instant::now();
                if now >= state.next {
                    state.next = now + probe.every;
                    if (state.check)() {
                        self.cancel();
                        return true;
                    }
                }
            }
        }
        false
    }

    /// The flag itself, for signal handlers.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
}

/// How often adapters look at the cancellation flag while waiting.
pub const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Why a call failed. Messages name the provider and URL, never an API key.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("cancelled")]
    Cancelled,
    #[error("{provider}: cannot connect to {url}: {detail}{}", hint_line(hint))]
    Connect {
        provider: String,
        url: String,
        detail: String,
        /// What to check, on a line of its own (`hint: ...`) after the message.
        hint: Option<String>,
    },
    #[error(
        "{provider}: {url} answered HTTP {status}: {message}{}",
        hint_line(hint)
    )]
    Http {
        provider: String,
        url: String,
        status: u16,
        message: String,
        hint: Option<String>,
    },
    #[error("{provider}: {url} sent nothing for {secs} s (timeout)")]
    Timeout {
        provider: String,
        url: String,
        secs: u64,
    },
    #[error("{provider}: {url} did not finish the answer within {secs} s (deadline_secs)")]
    Deadline {
        provider: String,
        url: String,
        secs: u64,
    },
    #[error("{provider}: {url} sent {what}: the call was cut off there")]
    TooLarge {
        provider: String,
        url: String,
        what: String,
    },
    #[error("{provider}: malformed response from {url}: {detail}")]
    Malformed {
        provider: String,
        url: String,
        detail: String,
    },
    #[error("{provider}: {detail}")]
    Unsupported { provider: String, detail: String },
    #[error("{provider}: {detail}")]
    Model { provider: String, detail: String },
    #[error("{provider}: {detail}")]
    Config { provider: String, detail: String },
}

/// `\nhint: ...` for an error that carries a hint: a turn's recorded error keeps it, and
/// the command line prints it as a hint line.
fn hint_line(hint: &Option<String>) -> String {
    hint.as_deref()
        .map(|h| format!("\nhint: {h}"))
        .unwrap_or_default()
}

/// A model behind some protocol. [`redact::Redacting`] wraps adapters and forwards every
/// method: a method added here must be forwarded there too.
pub trait Provider: Send {
    /// The provider's name as configured (for messages and the ledger).
    fn name(&self) -> &str;

    /// Runs one chat call, calling `on_event` as output arrives. Must return
    /// `Err(ProviderError::Cancelled)` within ~100 ms of `cancel` being set.
    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError>;

    /// Counts tokens with the model's own tokenizer, when the provider has one locally.
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }

    /// Whether tools can be advertised to this provider's models.
    fn supports_tools(&self) -> bool {
        true
    }

    /// Where the provider may keep, across processes, what it computed for the conversation
    /// the next calls continue (the local model's attention cache); `None` keeps nothing
    /// beyond the process. Providers without such a cache ignore it.
    fn keep_conversation(&mut self, _cache: Option<Box<dyn ConversationCache>>) {}
}

/// A place for a provider's cache of one conversation: bytes saved after a call and loaded
/// before the next, maybe by another process. Never an authority: a provider verifies what
/// it loads and works without it, and the bytes may be gone (a rewind drops them).
pub trait ConversationCache: Send {
    /// The bytes saved last, if any.
    fn load(&self) -> Option<Vec<u8>>;
    /// Replaces the saved bytes; a failure only loses the cache.
    fn save(&self, bytes: &[u8]);
    /// The most bytes worth saving.
    fn limit(&self) -> usize;
}
