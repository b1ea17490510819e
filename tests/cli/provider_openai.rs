//! The `openai` adapter against a loopback server speaking OpenAI's chat completions SSE: what
//! only this protocol has (its fixtures, the bearer key, SSE comments, tool-call deltas by
//! index, the event bound); what every protocol owes is in `provider_contract.rs`.

use std::time::Duration;

use crate::common::fake_http::{FakeServer, Reply};
use axocoatl::provider::openai::OpenAiProvider;
use axocoatl::provider::{
    Cancel, ChatRequest, Completion, Event, HttpOptions, Message, Provider, ProviderError,
    ResponseFormat, Role, Sampling, ToolCall, ToolSchema,
};
use serde_json::json;

const TEXT: &str = include_str!("../fixtures/providers/openai_text.sse");
const NO_USAGE: &str = include_str!("../fixtures/providers/openai_text_no_usage.sse");
const TOOLS: &str = include_str!("../fixtures/providers/openai_tools.sse");

const KEY: &str = "sk-test-4f9c2a7b1e";

fn options(server_url: &str) -> HttpOptions {
    HttpOptions {
        name: "llama-server".into(),
        base_url: format!("{server_url}/v1"),
        model: "gpt-4o-mini".into(),
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
    let mut provider = OpenAiProvider::new(opts);
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
    let server = FakeServer::with([Reply::sse(TEXT)]);
    let (result, events) = chat(&server, &ask("hi"));
    let completion = result.expect("chat");
    assert_eq!(
        events,
        vec![
            Event::Delta("Hello".into()),
            Event::Delta("! How can I help".into()),
            Event::Delta(" today?".into()),
        ]
    );
    assert_eq!(completion.message.content, "Hello! How can I help today?");
    assert_eq!(completion.usage.prompt_tokens, Some(9));
    assert_eq!(completion.usage.completion_tokens, Some(7));
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));

    let request = server.only_request();
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), None, "no key, no header");
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(
        request.json(),
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[test]
fn the_key_goes_in_the_bearer_header_and_nowhere_else() {
    // The server echoes the key in its error: the message must not repeat it.
    let echo = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
    );
    let server = FakeServer::with([Reply::sse(TEXT), Reply::json(401, &echo)]);
    let mut opts = options(&server.url());
    opts.api_key = Some(KEY.into());
    let (result, _) = chat_with(opts.clone(), &ask("hi"), &Cancel::new());
    result.expect("chat");
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!server.requests()[0].body_text().contains(KEY));

    let mut provider = OpenAiProvider::new(opts.clone());
    let err = provider
        .chat(&ask("hi"), &Cancel::new(), &mut |_| {})
        .expect_err("401");
    assert!(
        matches!(err, ProviderError::Http { status: 401, .. }),
        "{err:?}"
    );
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        format!("{provider:?}"),
        format!("{opts:?}"),
    ] {
        assert!(!shown.contains(KEY), "the key leaked: {shown}");
    }
    assert!(err.to_string().contains("Incorrect API key provided"));
}

#[test]
fn events_split_across_network_chunks_and_keepalive_comments_are_handled() {
    // Cut mid-event and mid-line, CRLF line endings, and a keep-alive comment.
    let body = format!(": keep-alive\r\n\r\n{}", TEXT.replace("\n", "\r\n"));
    let bytes = body.as_bytes();
    let reply = Reply::new(200)
        .header("Content-Type", "text/event-stream")
        .chunk(&bytes[..40])
        .chunk(&bytes[40..333])
        .chunk(&bytes[333..334])
        .chunk(&bytes[334..])
        .paced(Duration::from_millis(20));
    let server = FakeServer::with([reply]);
    let (result, events) = chat(&server, &ask("hi"));
    let completion = result.expect("chat");
    assert_eq!(completion.message.content, "Hello! How can I help today?");
    assert_eq!(events.len(), 3);
    assert_eq!(completion.usage.completion_tokens, Some(7));
}

#[test]
fn split_tool_call_deltas_are_assembled_by_index() {
    let server = FakeServer::with([Reply::sse(TOOLS)]);
    let mut request = ask("Weather and time in Paris?");
    request.tools.push(ToolSchema {
        name: "get_weather".into(),
        description: "Current weather".into(),
        parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
    });
    let (result, events) = chat(&server, &request);
    let completion = result.expect("chat");
    let expected = vec![
        ToolCall {
            id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Paris, France"}),
        },
        ToolCall {
            id: "call_1bm7ZxFzIXXhAFzPBbkqZjCN".into(),
            name: "get_time".into(),
            arguments: json!({"zone": "CET"}),
        },
    ];
    assert_eq!(
        events,
        expected
            .iter()
            .cloned()
            .map(Event::ToolCall)
            .collect::<Vec<_>>()
    );
    assert_eq!(completion.message.tool_calls, expected);
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(completion.usage.prompt_tokens, Some(81));
    let body = server.only_request().json();
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": request.tools[0].parameters
        }}])
    );
}

#[test]
fn interleaved_tool_call_deltas_and_unparseable_arguments() {
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let body = [
        chunk(json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "one", "arguments": "{\"x\""}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "two", "arguments": "not json"}}]}), json!(null)),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}), json!(null)),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let server = FakeServer::with([Reply::sse(&body)]);
    let (result, _) = chat(&server, &ask("go"));
    let calls = result.expect("chat").message.tool_calls;
    assert_eq!(calls[0].arguments, json!({"x": 1}));
    assert_eq!(calls[1].name, "two");
    assert_eq!(calls[1].arguments, json!("not json"), "kept as text");
}

#[test]
fn tool_history_and_images_use_openai_fields() {
    let server = FakeServer::with([Reply::sse(TEXT)]);
    let mut request = ask("what is this?");
    request.messages[1].images.push(axocoatl::provider::Image {
        media_type: "image/jpeg".into(),
        data: vec![0xff, 0xd8, 0xff],
    });
    let mut assistant = Message::new(Role::Assistant, "");
    assistant.tool_calls.push(ToolCall {
        id: "call_7".into(),
        name: "zoom".into(),
        arguments: json!({"factor": 2}),
    });
    let mut result = Message::new(Role::Tool, "a cat");
    result.tool_call_id = Some("call_7".into());
    result.name = Some("zoom".into());
    request.messages.push(assistant);
    request.messages.push(result);
    let (outcome, _) = chat(&server, &request);
    outcome.expect("chat");
    let body = server.only_request().json();
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}}
        ])
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "zoom", "arguments": "{\"factor\":2}"}}
        ]})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "content": "a cat", "tool_call_id": "call_7"})
    );
}

#[test]
fn usage_absent_is_reported_as_unknown() {
    let server = FakeServer::with([Reply::sse(NO_USAGE)]);
    let (result, _) = chat(&server, &ask("hi"));
    let completion = result.expect("chat");
    assert_eq!(completion.message.content, "Hello!");
    assert_eq!(completion.usage.prompt_tokens, None);
    assert_eq!(completion.usage.completion_tokens, None);
    assert!(!completion.usage.reported());
}

#[test]
fn every_sampling_field_and_json_mode_reach_the_request() {
    let server = FakeServer::with([Reply::sse(TEXT)]);
    let mut request = ask("colours as JSON");
    request.model = "qwen2.5-7b".into();
    request.sampling = Sampling {
        temperature: Some(0.7),
        top_p: Some(0.95),
        max_tokens: Some(256),
        response_format: Some(ResponseFormat::Json),
        schema: None,
    };
    let (result, _) = chat(&server, &request);
    result.expect("chat");
    let body = server.only_request().json();
    assert_eq!(body["model"], "qwen2.5-7b");
    assert_eq!(body["temperature"], json!(0.7));
    assert_eq!(body["top_p"], json!(0.95));
    assert_eq!(body["max_tokens"], json!(256));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
}

#[test]
fn text_format_leaves_response_format_out() {
    let server = FakeServer::with([Reply::sse(TEXT)]);
    let mut request = ask("hi");
    request.sampling.response_format = Some(ResponseFormat::Text);
    let (result, _) = chat(&server, &request);
    result.expect("chat");
    let body = server.only_request().json();
    for field in [
        "response_format",
        "temperature",
        "top_p",
        "max_tokens",
        "tools",
    ] {
        assert!(body.get(field).is_none(), "{field} in {body}");
    }
}

#[test]
fn a_finished_stream_without_done_is_accepted() {
    // Some compatible servers close after the finish chunk without `[DONE]`.
    let body = TEXT.replace("data: [DONE]\n\n", "");
    let server = FakeServer::with([Reply::sse(&body)]);
    let (result, _) = chat(&server, &ask("hi"));
    let completion = result.expect("chat");
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    assert_eq!(completion.usage.prompt_tokens, Some(9));
}

#[test]
fn an_event_that_never_ends_fails_at_the_line_bound() {
    // `data:` lines of 1 MiB each and never the blank line that ends an event.
    let line = format!("data: {}\n", "x".repeat(1 << 20));
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "text/event-stream")
        .repeated(line, 40)
        .stall()]);
    let (result, _) = chat(&server, &ask("hi"));
    match result {
        Err(ProviderError::TooLarge { what, .. }) => {
            assert_eq!(what, "an event longer than 32 MiB without a blank line")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_call_arguments_count_against_the_output_bound() {
    let piece = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "x".repeat(1 << 20)}}]}, "finish_reason": null}]})
    );
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "text/event-stream")
        .repeated(piece, 40)
        .chunk("data: [DONE]\n\n")]);
    let (result, _) = chat(&server, &ask("hi"));
    assert!(
        matches!(result, Err(ProviderError::TooLarge { ref what, .. }) if what.contains("of output")),
        "{result:?}"
    );
}
