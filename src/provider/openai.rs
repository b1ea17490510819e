//! The `openai` adapter: `POST {base}/chat/completions` with server-sent events, as served
//! by OpenAI, llama.cpp's `llama-server`, vLLM and LM Studio.
//!
//! The answer is a series of `data: {chunk}` events ended by `data: [DONE]`. Text arrives in
//! `choices[0].delta.content`; tool calls in `choices[0].delta.tool_calls`, where the first
//! delta of a call (by `index`) carries its id and name and later deltas append pieces of the
//! argument text, so calls are assembled here and emitted whole. With
//! `stream_options.include_usage` the last chunk before `[DONE]` carries `usage`; servers
//! that ignore the option leave usage unknown. A body that ends with neither `[DONE]` nor a
//! `finish_reason` was cut off and is a failed call.
//!
//! The API key, when configured, goes in `Authorization: Bearer`; nowhere else.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::http::MAX_LINE_BYTES;
use super::http::{base64, Flow, HttpClient, HttpOptions};
use super::ollama::excerpt;
use super::{
    CallUsage, Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError,
    ResponseFormat, Role, ToolCall,
};

/// A model behind an OpenAI-compatible chat completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    http: HttpClient,
}

impl OpenAiProvider {
    pub fn new(opts: HttpOptions) -> OpenAiProvider {
        OpenAiProvider {
            http: HttpClient::new(opts),
        }
    }
}

/// The ids of `/v1/models`: `{"data": [{"id": "gpt-4o-mini", ...}]}`.
fn model_ids(list: &Value) -> Vec<String> {
    list.get("data")
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.get("id").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A 404 about the model (OpenAI's `model_not_found`, vLLM's "The model `x` does not
/// exist"): the hint lists what the server has.
fn explain_missing_model(http: &HttpClient, model: &str, e: ProviderError) -> ProviderError {
    match e {
        ProviderError::Http {
            provider,
            url,
            status: 404,
            message,
            hint: None,
        } if message.to_lowercase().contains("model") => {
            let available = http.list_models("models", model_ids);
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

/// The JSON body of one call. `default_model` serves when the request names none.
fn request_body(default_model: &str, request: &ChatRequest) -> Value {
    let mut body = super::http::base_body(default_model, request, message_json);
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let sampling = &request.sampling;
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(n) = sampling.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if sampling.response_format == Some(ResponseFormat::Json) {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    Value::Object(body)
}

fn message_json(message: &Message) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut m = Map::new();
    m.insert("role".into(), json!(role));
    if !message.images.is_empty() {
        let mut parts = Vec::new();
        if !message.content.is_empty() {
            parts.push(json!({"type": "text", "text": message.content}));
        }
        for image in &message.images {
            let url = format!("data:{};base64,{}", image.media_type, base64(&image.data));
            parts.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        m.insert("content".into(), Value::Array(parts));
    } else if message.role == Role::Assistant
        && message.content.is_empty()
        && !message.tool_calls.is_empty()
    {
        m.insert("content".into(), Value::Null);
    } else {
        m.insert("content".into(), json!(message.content));
    }
    if !message.tool_calls.is_empty() {
        let calls = message.tool_calls.iter().map(|c| {
            // Unparseable arguments were kept as a string: send back the text as it was.
            let arguments = match &c.arguments {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": arguments},
            })
        });
        m.insert("tool_calls".into(), Value::Array(calls.collect()));
    }
    if message.role == Role::Tool {
        if let Some(id) = &message.tool_call_id {
            m.insert("tool_call_id".into(), json!(id));
        }
    }
    Value::Object(m)
}

/// A tool call whose argument text is still arriving.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// What the events said so far.
#[derive(Default)]
struct Answer {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: CallUsage,
    done: bool,
    /// `data:` lines of the event being read (an event ends at a blank line).
    data: Vec<String>,
    /// Their total length, against the line bound.
    data_size: usize,
    /// Output bytes so far (text and tool calls), against the output bound.
    size: usize,
}

impl Answer {
    /// Takes one SSE line in; `Stop` after `data: [DONE]`.
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
            return Ok(Flow::Continue); // a comment, e.g. a keep-alive
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            // An event is bounded like a line: a server that never ends one would
            // otherwise be buffered whole.
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
        // `event:`, `id:` and `retry:` carry nothing this protocol uses.
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
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Flow::Stop);
        }
        let chunk: Value = serde_json::from_str(&data).map_err(|e| {
            http.malformed(
                url,
                format!("invalid JSON in an event ({e}): {}", excerpt(&data)),
            )
        })?;
        if let Some(error) = chunk.get("error") {
            let detail = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(ProviderError::Model {
                provider: http.opts.name.clone(),
                detail: http.redact(&format!("{url} reported an error mid-stream: {detail}")),
            });
        }
        if !chunk.is_object() {
            return Err(http.malformed(
                url,
                format!("an event that is not an object: {}", excerpt(&data)),
            ));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            // `prompt_tokens` counts every input token; OpenAI reports those its prompt
            // cache served in `prompt_tokens_details.cached_tokens` (writing to its cache
            // costs nothing extra, so there is no count of writes).
            let cached = usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64);
            self.usage = CallUsage {
                prompt_tokens: usage.get("prompt_tokens").and_then(Value::as_u64),
                completion_tokens: usage.get("completion_tokens").and_then(Value::as_u64),
                cache_write_tokens: None,
                cache_read_tokens: cached,
            };
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(Flow::Continue); // e.g. the usage-only chunk
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(content) = delta.get("content").and_then(Value::as_str) {
                if !content.is_empty() {
                    self.size += content.len();
                    http.check_output(url, self.size)?;
                    self.text.push_str(content);
                    on_event(Event::Delta(content.to_string()));
                }
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    self.size += self.add_call_delta(call);
                    http.check_output(url, self.size)?;
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        Ok(Flow::Continue)
    }

    /// Adds one delta to its call; returns the bytes it added (a new call costs a little
    /// even when empty, so a stream of empty calls is bounded too).
    fn add_call_delta(&mut self, delta: &Value) -> usize {
        const NEW_CALL: usize = 64;
        let mut added = 0;
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = match delta.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // Servers that omit `index`: a new id starts a new call, else it continues the last.
            None => {
                let last = self.calls.keys().next_back().copied();
                match (last, id) {
                    (Some(last), Some(id))
                        if self.calls.get(&last).and_then(|c| c.id.as_deref()) != Some(id) =>
                    {
                        last + 1
                    }
                    (Some(last), _) => last,
                    (None, _) => 0,
                }
            }
        };
        if !self.calls.contains_key(&index) {
            added += NEW_CALL;
        }
        let call = self.calls.entry(index).or_default();
        if call.id.is_none() {
            call.id = id.map(str::to_string);
            added += id.map_or(0, str::len);
        }
        if let Some(function) = delta.get("function") {
            if let Some(name) = function.get("name").and_then(Value::as_str) {
                if call.name.is_empty() {
                    call.name = name.to_string();
                    added += name.len();
                }
            }
            if let Some(piece) = function.get("arguments").and_then(Value::as_str) {
                call.arguments.push_str(piece);
                added += piece.len();
            }
        }
        added
    }

    /// The assembled tool calls, in index order.
    fn tool_calls(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls)
            .into_values()
            .enumerate()
            .map(|(n, call)| {
                let text = call.arguments.trim();
                let arguments = if text.is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(text)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone()))
                };
                ToolCall {
                    id: call.id.unwrap_or_else(|| format!("call_{n}")),
                    name: call.name,
                    arguments,
                }
            })
            .collect()
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.http.opts.name
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        let url = self.http.url("chat/completions");
        let body = request_body(&self.http.opts.model, request);
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
        if !answer.done && answer.finish_reason.is_none() {
            return Err(http.malformed(
                &url,
                "the stream ended without `data: [DONE]` or a finish_reason (truncated)",
            ));
        }
        let tool_calls = answer.tool_calls();
        if let Some(unnamed) = tool_calls.iter().find(|c| c.name.is_empty()) {
            return Err(http.malformed(&url, format!("tool call {} has no name", unnamed.id)));
        }
        for call in &tool_calls {
            on_event(Event::ToolCall(call.clone()));
        }
        let mut message = Message::new(Role::Assistant, answer.text);
        message.tool_calls = tool_calls;
        Ok(Completion {
            message,
            usage: answer.usage,
            finish_reason: answer.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Image, Sampling};

    #[test]
    fn history_maps_to_openai_messages() {
        let mut user = Message::new(Role::User, "what is this?");
        user.images.push(Image {
            media_type: "image/png".into(),
            data: b"png".to_vec(),
        });
        let mut assistant = Message::new(Role::Assistant, "");
        assistant.tool_calls.push(ToolCall {
            id: "call_9".into(),
            name: "look".into(),
            arguments: json!({"x": 1}),
        });
        let mut tool = Message::new(Role::Tool, "a cat");
        tool.tool_call_id = Some("call_9".into());
        tool.name = Some("look".into());
        let req = ChatRequest {
            model: String::new(),
            messages: vec![user, assistant, tool],
            tools: Vec::new(),
            sampling: Sampling::default(),
        };
        let body = request_body("gpt", &req);
        assert_eq!(body["model"], "gpt");
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}}
            ])
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}
            ]})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "content": "a cat", "tool_call_id": "call_9"})
        );
        assert!(body.get("tools").is_none());
        assert!(body.get("temperature").is_none());
    }
}
