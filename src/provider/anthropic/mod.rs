//! The `anthropic` adapter: Anthropic's Messages API, `POST {base}/v1/messages` with
//! server-sent events.
//!
//! The answer is a series of events, each a `data:` JSON object with a `type`:
//! `message_start` (the message and its input usage), then per content block
//! `content_block_start`, `content_block_delta`s (`text_delta`, `input_json_delta` pieces of
//! a tool call's input, `thinking_delta` and `signature_delta`) and `content_block_stop`,
//! then `message_delta` (the `stop_reason` and the output usage) and `message_stop`. `ping`
//! keeps the connection alive; `error` reports a failure mid-stream (`overloaded_error`).
//! A body that ends before `message_stop` was cut off and is a failed call.
//!
//! Usage: `input_tokens` counts only the input neither written to nor read from the prompt
//! cache; `cache_creation_input_tokens` and `cache_read_input_tokens` count those. The
//! prompt tokens recorded are their sum (every input token, as other providers count them),
//! with the cache counts kept beside it. Stop reasons are recorded as Anthropic words them
//! (`end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `refusal`, `pause_turn`); a
//! refusal is also a warning of the turn.
//!
//! The API key goes in `x-api-key`, the API version in `anthropic-version`; HTTP 429 and 529
//! (overloaded) are retried before any output, after `retry-after` when the server says.
//! Prompt caching: see [`request`].

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::http::{Flow, HttpClient, HttpOptions, MAX_LINE_BYTES};
use super::ollama::excerpt;
use super::{
    CallUsage, Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError, Role,
    ToolCall,
};

pub mod request;

pub use request::{DEFAULT_MAX_TOKENS, MAX_BREAKPOINTS};

/// The `anthropic-version` every request names.
pub const API_VERSION: &str = "2023-06-01";

/// A Claude model behind Anthropic's Messages API (or a server that speaks it).
#[derive(Debug)]
pub struct AnthropicProvider {
    http: HttpClient,
}

impl AnthropicProvider {
    pub fn new(opts: HttpOptions) -> AnthropicProvider {
        AnthropicProvider {
            http: client(opts).retrying(&[429, 529]),
        }
    }
}

/// A client that speaks to the Messages API: the key in `x-api-key`, the API's version.
fn client(opts: HttpOptions) -> HttpClient {
    HttpClient::new(opts)
        .with_key_header("x-api-key")
        .with_header("anthropic-version", API_VERSION)
}

/// The models the server lists (for completions), within the options' deadline.
pub fn listed_models(opts: HttpOptions) -> Option<Vec<String>> {
    client(opts).list_models("v1/models", super::openai::model_ids)
}

/// A content block whose pieces are still arriving.
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    /// A thinking block (or a redacted one), kept whole to go back with the answer.
    Thinking(Value),
    /// A kind this adapter does not use (e.g. a server tool's result): skipped.
    Other,
}

/// What the events said so far.
#[derive(Default)]
struct Answer {
    text: String,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    cache_write: Option<u64>,
    cache_read: Option<u64>,
    output_tokens: Option<u64>,
    started: bool,
    done: bool,
    /// `data:` lines of the event being read (an event ends at a blank line).
    data: Vec<String>,
    data_size: usize,
    /// Output bytes so far (text and tool calls), against the output bound.
    size: usize,
}

impl Answer {
    /// Takes one SSE line in; `Stop` after `message_stop`.
    fn line(
        &mut self,
        http: &HttpClient,
        url: &str,
        line: &str,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Flow, ProviderError> {
        if line.is_empty() {
            return self.dispatch(http, url, on_event);
        }
        if line.starts_with(':') {
            return Ok(Flow::Continue);
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            self.data_size += value.len() + 1;
            if self.data_size > MAX_LINE_BYTES {
                return Err(http.too_large(
                    url,
                    format!(
                        "an event longer than {} without a blank line",
                        crate::config::human_size(MAX_LINE_BYTES as u64)
                    ),
                ));
            }
            self.data.push(value.to_string());
        }
        // `event:` repeats the data's `type`; `id:` and `retry:` are not used.
        Ok(Flow::Continue)
    }

    /// Handles the event whose `data:` lines were collected.
    fn dispatch(
        &mut self,
        http: &HttpClient,
        url: &str,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Flow, ProviderError> {
        if self.data.is_empty() {
            return Ok(Flow::Continue);
        }
        let data = self.data.join("\n");
        self.data.clear();
        self.data_size = 0;
        let event: Value = serde_json::from_str(&data).map_err(|e| {
            http.malformed(
                url,
                format!("invalid JSON in an event ({e}): {}", excerpt(&data)),
            )
        })?;
        let kind = event.get("type").and_then(Value::as_str).ok_or_else(|| {
            http.malformed(url, format!("an event without a type: {}", excerpt(&data)))
        })?;
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(usage) = event.pointer("/message/usage") {
                    self.usage(usage);
                }
            }
            "content_block_start" => {
                // A block costs a little even when empty, so a stream of empty blocks is
                // bounded like output.
                self.size += 64;
                http.check_output(url, self.size)?;
                self.start_block(&event);
            }
            "content_block_delta" => self.delta(http, url, &event, on_event)?,
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(usage) = event.get("usage") {
                    self.usage(usage);
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(Flow::Stop);
            }
            "error" => {
                let error = event.get("error").unwrap_or(&Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| error.to_string(), str::to_string);
                let detail = match error.get("type").and_then(Value::as_str) {
                    Some(t) => format!("{message} ({t})"),
                    None => message,
                };
                return Err(ProviderError::Model {
                    provider: http.opts.name.clone(),
                    detail: http.redact(&format!("{url} reported an error mid-stream: {detail}")),
                });
            }
            // `ping`, `content_block_stop` and kinds added later change nothing here.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    /// Usage as `message_start` and `message_delta` report it: each count given replaces the
    /// one before (the delta's are cumulative).
    fn usage(&mut self, usage: &Value) {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        self.input_tokens = count("input_tokens").or(self.input_tokens);
        self.cache_write = count("cache_creation_input_tokens").or(self.cache_write);
        self.cache_read = count("cache_read_input_tokens").or(self.cache_read);
        self.output_tokens = count("output_tokens").or(self.output_tokens);
    }

    fn start_block(&mut self, event: &Value) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let started = match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text,
            Some("tool_use") => Block::ToolUse {
                id: text("id"),
                name: text("name"),
                // The input arrives in `input_json_delta` pieces; a start with a whole
                // input (never streamed so) keeps it.
                input: match block.get("input") {
                    Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                    _ => String::new(),
                },
            },
            Some("thinking" | "redacted_thinking") => Block::Thinking(block.clone()),
            _ => Block::Other,
        };
        self.blocks.insert(index, started);
    }

    fn delta(
        &mut self,
        http: &HttpClient,
        url: &str,
        event: &Value,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), ProviderError> {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let block = self.blocks.entry(index).or_insert(Block::Text);
        match (delta.get("type").and_then(Value::as_str), block) {
            (Some("text_delta"), _) => {
                let text = piece("text");
                if !text.is_empty() {
                    self.size += text.len();
                    http.check_output(url, self.size)?;
                    self.text.push_str(text);
                    on_event(Event::Delta(text.to_string()));
                }
            }
            (Some("input_json_delta"), Block::ToolUse { input, .. }) => {
                let json = piece("partial_json");
                self.size += json.len();
                http.check_output(url, self.size)?;
                input.push_str(json);
            }
            (Some(kind @ ("thinking_delta" | "signature_delta")), Block::Thinking(value)) => {
                // Kept to go back with the answer: bounded as output is.
                let key = kind.trim_end_matches("_delta");
                let text = piece(key);
                self.size += text.len();
                http.check_output(url, self.size)?;
                append(value, key, text);
            }
            // Citations and deltas of blocks not kept add nothing to the answer.
            _ => {}
        }
        Ok(())
    }

    /// The tool calls and the thinking blocks, in block order.
    fn finish_blocks(&mut self) -> (Vec<ToolCall>, Vec<Value>) {
        let mut calls = Vec::new();
        let mut replay = Vec::new();
        for (n, block) in std::mem::take(&mut self.blocks).into_values().enumerate() {
            match block {
                Block::ToolUse { id, name, input } => {
                    let text = input.trim();
                    let arguments = if text.is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(text).unwrap_or_else(|_| Value::String(input.clone()))
                    };
                    calls.push(ToolCall {
                        id: if id.is_empty() {
                            format!("call_{n}")
                        } else {
                            id
                        },
                        name,
                        arguments,
                    });
                }
                Block::Thinking(value) => replay.push(value),
                Block::Text | Block::Other => {}
            }
        }
        (calls, replay)
    }

    fn call_usage(&self) -> CallUsage {
        let prompt = self
            .input_tokens
            .map(|n| n + self.cache_write.unwrap_or(0) + self.cache_read.unwrap_or(0));
        CallUsage {
            prompt_tokens: prompt,
            completion_tokens: self.output_tokens,
            cache_write_tokens: self.cache_write.or(prompt.map(|_| 0)),
            cache_read_tokens: self.cache_read.or(prompt.map(|_| 0)),
        }
    }
}

/// Appends `piece` to the string field `key` of a kept block.
fn append(block: &mut Value, key: &str, piece: &str) {
    match block.get_mut(key) {
        Some(Value::String(text)) => text.push_str(piece),
        _ => block[key] = Value::String(piece.to_owned()),
    }
}

/// A 404 about the model (`not_found_error`, "model: claude-x"): the hint lists the models
/// the key may use.
fn explain_missing_model(http: &HttpClient, model: &str, e: ProviderError) -> ProviderError {
    match e {
        ProviderError::Http {
            provider,
            url,
            status: 404,
            message,
            hint: None,
        } if message.to_lowercase().contains("model") => {
            let available = http.list_models("v1/models", super::openai::model_ids);
            ProviderError::Http {
                provider,
                url,
                status: 404,
                message,
                hint: Some(super::http::missing_model_hint(model, available.as_deref())),
            }
        }
        other => other,
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.http.opts.name
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        let url = self.http.url("v1/messages");
        let (body, warnings) = request::request_body(&self.http.opts.model, request);
        for warning in warnings {
            on_event(Event::Warning(warning));
        }
        let mut answer = Answer::default();
        let http = &self.http;
        http.stream_lines(&url, &body, "text/event-stream", cancel, &mut |line| {
            answer.line(http, &url, line, on_event)
        })
        .map_err(|e| {
            let model = body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default();
            explain_missing_model(http, model, e)
        })?;
        if !answer.done {
            // An event not yet closed by a blank line when the body ended.
            answer.dispatch(http, &url, on_event)?;
        }
        if !answer.done {
            let what = if answer.started {
                "the stream ended without `message_stop` (truncated)"
            } else {
                "the stream ended without `message_start` or `message_stop` (truncated)"
            };
            return Err(http.malformed(&url, what));
        }
        let (tool_calls, replay) = answer.finish_blocks();
        if let Some(unnamed) = tool_calls.iter().find(|c| c.name.is_empty()) {
            return Err(http.malformed(&url, format!("tool call {} has no name", unnamed.id)));
        }
        for call in &tool_calls {
            on_event(Event::ToolCall(call.clone()));
        }
        if answer.stop_reason.as_deref() == Some("refusal") {
            on_event(Event::Warning(
                "the model declined to go on (stop_reason `refusal`): its answer may be cut short"
                    .to_string(),
            ));
        }
        let usage = answer.call_usage();
        let mut message = Message::new(Role::Assistant, std::mem::take(&mut answer.text));
        message.tool_calls = tool_calls;
        message.replay = replay;
        Ok(Completion {
            message,
            usage,
            finish_reason: answer.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests;
