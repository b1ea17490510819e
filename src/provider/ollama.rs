//! The `ollama` adapter: Ollama's native `POST /api/chat` with NDJSON streaming.
//!
//! Each line of the answer is one JSON object: `message.content` carries a piece of text,
//! `message.tool_calls` complete tool calls (arguments as a JSON object), and the last line
//! has `"done": true` with `done_reason`, `prompt_eval_count` and `eval_count`. A body that
//! ends without that last line is a failed call, never a short success.
//!
//! Sampling maps to `options.temperature`, `options.top_p` and `options.num_predict`;
//! `response_format: json` to `"format": "json"`. Images travel base64-encoded in
//! `messages[].images`; tool results as `role: tool` messages naming the tool (`tool_name`).

use serde_json::{json, Map, Value};

use super::http::{base64, Flow, HttpClient, HttpOptions};
use super::{
    CallUsage, Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError,
    ResponseFormat, Role, ToolCall,
};

/// A model served by Ollama.
#[derive(Debug)]
pub struct OllamaProvider {
    http: HttpClient,
}

impl OllamaProvider {
    pub fn new(opts: HttpOptions) -> OllamaProvider {
        OllamaProvider {
            http: HttpClient::new(opts).with_start_hint("ollama serve"),
        }
    }
}

/// The names of `/api/tags`: `{"models": [{"name": "llama3.2:latest", ...}]}`.
fn tag_names(tags: &Value) -> Vec<String> {
    tags.get("models")
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A 404 naming a model is Ollama's "model not found": the hint lists what the server has.
fn explain_missing_model(http: &HttpClient, model: &str, e: ProviderError) -> ProviderError {
    match e {
        ProviderError::Http {
            provider,
            url,
            status: 404,
            message,
            hint: None,
        } if message.contains("not found") => {
            let available = http.list_models("api/tags", tag_names);
            let mut hint = super::http::missing_model_hint(model, available.as_deref());
            hint.push_str(&format!("; `ollama pull {model}` fetches it"));
            ProviderError::Http {
                provider,
                url,
                status: 404,
                message,
                hint: Some(hint),
            }
        }
        other => other,
    }
}

/// The JSON body of one `/api/chat` call. `default_model` serves when the request names none.
fn request_body(default_model: &str, request: &ChatRequest) -> Value {
    let mut body = super::http::base_body(default_model, request, message_json);
    let sampling = &request.sampling;
    let mut options = Map::new();
    if let Some(t) = sampling.temperature {
        options.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p {
        options.insert("top_p".into(), json!(p));
    }
    if let Some(n) = sampling.max_tokens {
        options.insert("num_predict".into(), json!(n));
    }
    if !options.is_empty() {
        body.insert("options".into(), Value::Object(options));
    }
    if sampling.response_format == Some(ResponseFormat::Json) {
        body.insert("format".into(), json!("json"));
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
    m.insert("content".into(), json!(message.content));
    if !message.images.is_empty() {
        let images = message.images.iter().map(|i| json!(base64(&i.data)));
        m.insert("images".into(), Value::Array(images.collect()));
    }
    if !message.tool_calls.is_empty() {
        let calls = message
            .tool_calls
            .iter()
            .map(|c| json!({"function": {"name": c.name, "arguments": c.arguments}}));
        m.insert("tool_calls".into(), Value::Array(calls.collect()));
    }
    if message.role == Role::Tool {
        if let Some(name) = &message.name {
            m.insert("tool_name".into(), json!(name));
        }
    }
    Value::Object(m)
}

/// What the lines said so far.
#[derive(Default)]
struct Answer {
    text: String,
    tool_calls: Vec<ToolCall>,
    done: bool,
    done_reason: Option<String>,
    usage: CallUsage,
    /// Output bytes so far (text and tool calls), against the output bound.
    size: usize,
}

impl Answer {
    /// Takes one NDJSON line in; `Stop` after the `done` line.
    fn line(
        &mut self,
        http: &HttpClient,
        url: &str,
        line: &str,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Flow, ProviderError> {
        if line.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            http.malformed(url, format!("invalid JSON line ({e}): {}", excerpt(line)))
        })?;
        if let Some(error) = value.get("error") {
            let detail = error
                .as_str()
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(ProviderError::Model {
                provider: http.opts.name.clone(),
                detail: http.redact(&format!("{url} reported an error mid-stream: {detail}")),
            });
        }
        if !value.is_object() {
            return Err(http.malformed(
                url,
                format!("a line that is not an object: {}", excerpt(line)),
            ));
        }
        if let Some(message) = value.get("message") {
            if let Some(content) = message.get("content").and_then(Value::as_str) {
                if !content.is_empty() {
                    self.size += content.len();
                    http.check_output(url, self.size)?;
                    self.text.push_str(content);
                    on_event(Event::Delta(content.to_string()));
                }
            }
            if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    let parsed = self.tool_call(call).ok_or_else(|| {
                        http.malformed(
                            url,
                            format!("a tool call without a name: {}", excerpt(&call.to_string())),
                        )
                    })?;
                    self.size += parsed.id.len() + parsed.name.len() + json_size(&parsed.arguments);
                    http.check_output(url, self.size)?;
                    on_event(Event::ToolCall(parsed.clone()));
                    self.tool_calls.push(parsed);
                }
            }
        }
        match value.get("done") {
            Some(Value::Bool(true)) => {
                self.done = true;
                self.done_reason = value
                    .get("done_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.usage = CallUsage {
                    prompt_tokens: value.get("prompt_eval_count").and_then(Value::as_u64),
                    completion_tokens: value.get("eval_count").and_then(Value::as_u64),
                    ..CallUsage::default()
                };
                Ok(Flow::Stop)
            }
            Some(Value::Bool(false)) => Ok(Flow::Continue),
            _ => Err(http.malformed(url, format!("a line without \"done\": {}", excerpt(line)))),
        }
    }

    fn tool_call(&self, call: &Value) -> Option<ToolCall> {
        let function = call.get("function")?;
        let name = function.get("name")?.as_str()?.to_string();
        let arguments = match function.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(Value::String(text)) => {
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
            }
            Some(other) => other.clone(),
        };
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("call_{}", self.tool_calls.len()), str::to_string);
        Some(ToolCall {
            id,
            name,
            arguments,
        })
    }
}

/// The length of a value written as JSON, without writing it anywhere.
pub(crate) fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The start of a line, for error messages.
pub(crate) fn excerpt(line: &str) -> String {
    const MAX: usize = 200;
    match line.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

impl Provider for OllamaProvider {
    fn name(&self) -> &str {
        &self.http.opts.name
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        let url = self.http.url("api/chat");
        let body = request_body(&self.http.opts.model, request);
        let mut answer = Answer::default();
        let http = &self.http;
        http.stream_lines(&url, &body, "application/x-ndjson", cancel, &mut |line| {
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
            return Err(http.malformed(&url, "the stream ended before a line with \"done\": true"));
        }
        let mut message = Message::new(Role::Assistant, answer.text);
        message.tool_calls = answer.tool_calls;
        Ok(Completion {
            message,
            usage: answer.usage,
            finish_reason: answer.done_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Image, Sampling, ToolSchema};

    fn request() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages: vec![Message::new(Role::User, "hi")],
            tools: Vec::new(),
            sampling: Sampling::default(),
        }
    }

    #[test]
    fn a_plain_request_sets_only_what_it_needs() {
        let body = request_body("llama3.2", &request());
        assert_eq!(
            body,
            json!({"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}], "stream": true})
        );
    }

    #[test]
    fn history_with_tools_and_images_maps_to_ollama_fields() {
        let mut req = request();
        req.model = "llava".into();
        req.messages[0].images.push(Image {
            media_type: "image/png".into(),
            data: b"png".to_vec(),
        });
        let mut assistant = Message::new(Role::Assistant, "");
        assistant.tool_calls.push(ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Paris"}),
        });
        let mut tool = Message::new(Role::Tool, "sunny");
        tool.name = Some("get_weather".into());
        tool.tool_call_id = Some("call_0".into());
        req.messages.push(assistant);
        req.messages.push(tool);
        req.tools.push(ToolSchema {
            name: "get_weather".into(),
            description: "Weather of a city".into(),
            parameters: json!({"type": "object"}),
        });
        let body = request_body("unused", &req);
        assert_eq!(body["model"], "llava");
        assert_eq!(body["messages"][0]["images"], json!(["cG5n"]));
        assert_eq!(
            body["messages"][1]["tool_calls"],
            json!([{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "content": "sunny", "tool_name": "get_weather"})
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    }
}
