//! The `ollama` adapter against a loopback server speaking Ollama's `/api/chat` NDJSON: what only
//! this protocol has (its fixtures, tool arguments as objects, image and tool fields, options);
//! what every protocol owes is in `provider_contract.rs`.

use std::time::Duration;

use crate::common::fake_http::{FakeServer, Framing, Reply};
use axocoatl::provider::ollama::OllamaProvider;
use axocoatl::provider::{
    Cancel, ChatRequest, Completion, Event, HttpOptions, Image, Message, Provider, ProviderError,
    ResponseFormat, Role, Sampling, ToolCall, ToolSchema,
};
use serde_json::json;

const TEXT: &str = include_str!("../fixtures/providers/ollama_text.ndjson");
const TOOLS: &str = include_str!("../fixtures/providers/ollama_tools.ndjson");
const NO_USAGE: &str = include_str!("../fixtures/providers/ollama_no_usage.ndjson");

fn options(base_url: &str) -> HttpOptions {
    HttpOptions {
        name: "local-ollama".into(),
        base_url: base_url.into(),
        model: "llama3.2".into(),
        api_key: None,
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        max_retries: 2,
        deadline: None,
        key_env: None,
        base_url_from: None,
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![
            Message::new(Role::System, "Be brief."),
            Message::new(Role::User, text),
        ],
        tools: Vec::new(),
        sampling: Sampling::default(),
    }
}

fn chat_with(
    opts: HttpOptions,
    request: &ChatRequest,
    cancel: &Cancel,
) -> (Result<Completion, ProviderError>, Vec<Event>) {
    let mut provider = OllamaProvider::new(opts);
    let mut events = Vec::new();
    let result = provider.chat(request, cancel, &mut |e| events.push(e));
    (result, events)
}

fn chat(
    server: &FakeServer,
    request: &ChatRequest,
) -> (Result<Completion, ProviderError>, Vec<Event>) {
    chat_with(options(&server.url()), request, &Cancel::new())
}

#[test]
fn plain_text_streams_deltas_and_reports_usage() {
    let server = FakeServer::with([Reply::ndjson(TEXT)]);
    let (result, events) = chat(&server, &ask("why is the sky blue?"));
    let completion = result.expect("chat");
    assert_eq!(
        events,
        vec![
            Event::Delta("The".into()),
            Event::Delta(" sky is".into()),
            Event::Delta(" blue.".into()),
        ]
    );
    assert_eq!(completion.message.role, Role::Assistant);
    assert_eq!(completion.message.content, "The sky is blue.");
    assert!(completion.message.tool_calls.is_empty());
    assert_eq!(completion.usage.prompt_tokens, Some(26));
    assert_eq!(completion.usage.completion_tokens, Some(282));
    assert!(completion.usage.reported());
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));

    let request = server.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/api/chat");
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.json(),
        json!({
            "model": "llama3.2",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "why is the sky blue?"}
            ],
            "stream": true
        })
    );
}

#[test]
fn lines_split_across_and_packed_into_network_chunks_are_reassembled() {
    // The same stream, cut at arbitrary byte positions: mid-line, mid-UTF-8 and several
    // lines per chunk, over `Connection: close` framing without a final newline.
    let body = TEXT.replace("blue.", "blau — ü.");
    let body = body.trim_end();
    let bytes = body.as_bytes();
    let cut = body.find('—').expect("dash") + 1; // inside the 3-byte dash
    let reply = Reply::new(200)
        .header("Content-Type", "application/x-ndjson")
        .framing(Framing::Close)
        .chunk(&bytes[..7])
        .chunk(&bytes[7..cut])
        .chunk(&bytes[cut..]);
    let server = FakeServer::with([reply.paced(Duration::from_millis(20))]);
    let (result, events) = chat(&server, &ask("sky?"));
    let completion = result.expect("chat");
    assert_eq!(completion.message.content, "The sky is blau — ü.");
    assert_eq!(events.len(), 3);
}

#[test]
fn tool_calls_are_parsed_with_object_arguments() {
    let server = FakeServer::with([Reply::ndjson(TOOLS)]);
    let mut request = ask("What is the weather today in Toronto?");
    request.tools.push(ToolSchema {
        name: "get_current_weather".into(),
        description: "Get the current weather for a location".into(),
        parameters: json!({
            "type": "object",
            "properties": {"location": {"type": "string"}, "format": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location", "format"]
        }),
    });
    let (result, events) = chat(&server, &request);
    let completion = result.expect("chat");
    let expected = ToolCall {
        id: "call_0".into(),
        name: "get_current_weather".into(),
        arguments: json!({"format": "celsius", "location": "Toronto"}),
    };
    assert_eq!(events, vec![Event::ToolCall(expected.clone())]);
    assert_eq!(completion.message.tool_calls, vec![expected]);
    assert_eq!(completion.message.content, "");
    assert_eq!(completion.usage.prompt_tokens, Some(217));
    assert_eq!(completion.usage.completion_tokens, Some(22));

    let body = server.only_request().json();
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather for a location",
                "parameters": request.tools[0].parameters
            }
        }])
    );
}

#[test]
fn tool_results_images_and_history_use_ollama_fields() {
    let server = FakeServer::with([Reply::ndjson(TEXT)]);
    let mut request = ask("what is in this picture?");
    request.messages[1].images.push(Image {
        media_type: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G'],
    });
    let mut assistant = Message::new(Role::Assistant, "");
    assistant.tool_calls.push(ToolCall {
        id: "call_0".into(),
        name: "zoom".into(),
        arguments: json!({"factor": 2}),
    });
    let mut result = Message::new(Role::Tool, "a cat, zoomed");
    result.tool_call_id = Some("call_0".into());
    result.name = Some("zoom".into());
    request.messages.push(assistant);
    request.messages.push(result);
    request.model = "llava".into();
    let (outcome, _) = chat(&server, &request);
    outcome.expect("chat");
    let body = server.only_request().json();
    assert_eq!(body["model"], "llava");
    assert_eq!(body["messages"][1]["images"], json!(["iVBORw=="]));
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "zoom", "arguments": {"factor": 2}}}]})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "content": "a cat, zoomed", "tool_name": "zoom"})
    );
}

#[test]
fn usage_absent_is_reported_as_unknown() {
    let server = FakeServer::with([Reply::ndjson(NO_USAGE)]);
    let (result, _) = chat(&server, &ask("hello"));
    let completion = result.expect("chat");
    assert_eq!(completion.message.content, "Hello! How are you today?");
    assert_eq!(completion.usage.prompt_tokens, None);
    assert_eq!(completion.usage.completion_tokens, None);
    assert!(!completion.usage.reported());
}

#[test]
fn every_sampling_field_and_json_mode_reach_the_request() {
    let server = FakeServer::with([Reply::ndjson(TEXT)]);
    let mut request = ask("colours as JSON");
    request.sampling = Sampling {
        temperature: Some(0.25),
        top_p: Some(0.9),
        max_tokens: Some(128),
        response_format: Some(ResponseFormat::Json),
        schema: None,
    };
    let (result, _) = chat(&server, &request);
    result.expect("chat");
    let body = server.only_request().json();
    assert_eq!(
        body["options"],
        json!({"temperature": 0.25, "top_p": 0.9, "num_predict": 128})
    );
    assert_eq!(body["format"], "json");
}

#[test]
fn text_format_and_unset_sampling_leave_the_server_defaults() {
    let server = FakeServer::with([Reply::ndjson(TEXT)]);
    let mut request = ask("hi");
    request.sampling.response_format = Some(ResponseFormat::Text);
    request.sampling.temperature = Some(0.0);
    let (result, _) = chat(&server, &request);
    result.expect("chat");
    let body = server.only_request().json();
    assert_eq!(body["options"], json!({"temperature": 0.0}));
    assert!(body.get("format").is_none(), "{body}");
}

#[test]
fn a_missing_model_names_the_model_in_the_error() {
    let server = FakeServer::with([Reply::json(
        404,
        r#"{"error":"model \"llama9\" not found, try pulling it first"}"#,
    )]);
    let (result, _) = chat(&server, &ask("hi"));
    let err = result.expect_err("404");
    let text = err.to_string();
    assert!(text.contains("HTTP 404"), "{text}");
    assert!(text.contains("model \"llama9\" not found"), "{text}");
    assert!(text.contains("local-ollama"), "{text}");
}
