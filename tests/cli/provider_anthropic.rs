//! The `anthropic` adapter against a loopback server speaking Anthropic's Messages API: what
//! only this protocol has (its headers, content blocks, parallel tool calls streamed as
//! `input_json_delta` pieces, thinking blocks, cache usage, 529, refusals); what every
//! protocol owes is in `provider_contract.rs`.

use std::time::Duration;

use crate::common::anthropic::{self, Usage};
use crate::common::fake_http::{FakeServer, Reply};
use axocoatl::provider::anthropic::AnthropicProvider;
use axocoatl::provider::{
    CallUsage, Cancel, ChatRequest, Completion, Event, HttpOptions, Message, Provider,
    ProviderError, Role, Sampling, ToolCall, ToolSchema,
};
use serde_json::json;

const KEY: &str = "sk-ant-test-4f9c2a7b1e";

fn options(server_url: &str) -> HttpOptions {
    HttpOptions {
        name: "claude".into(),
        base_url: server_url.to_owned(),
        model: "claude-haiku-4-5".into(),
        api_key: Some(KEY.into()),
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        max_retries: 2,
        deadline: None,
        key_env: Some("ANTHROPIC_API_KEY".into()),
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
) -> (Result<Completion, ProviderError>, Vec<Event>) {
    let mut provider = AnthropicProvider::new(opts);
    let mut events = Vec::new();
    let result = provider.chat(request, &Cancel::new(), &mut |e| events.push(e));
    (result, events)
}

const USAGE: Usage = Usage {
    input: 12,
    cache_write: 30,
    cache_read: 400,
    output: 7,
};

#[test]
fn text_streams_with_the_key_and_version_headers_and_cache_usage() {
    let server = FakeServer::with([Reply::sse(&anthropic::text(&["Hel", "lo!"], USAGE))]);
    let (result, events) = chat_with(options(&server.url()), &ask("hi"));
    let c = result.expect("chat");
    assert_eq!(c.message.content, "Hello!");
    assert_eq!(
        events,
        vec![Event::Delta("Hel".into()), Event::Delta("lo!".into())]
    );
    assert_eq!(c.finish_reason.as_deref(), Some("end_turn"));
    // Every input token is a prompt token; the cache's share is kept beside it.
    assert_eq!(
        c.usage,
        CallUsage {
            prompt_tokens: Some(442),
            completion_tokens: Some(7),
            cache_write_tokens: Some(30),
            cache_read_tokens: Some(400),
        }
    );
    let r = server.only_request();
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        r.header("authorization"),
        None,
        "the key goes in x-api-key only"
    );
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    let body = r.json();
    assert!(!r.body_text().contains(KEY));
    assert_eq!(
        body,
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 4096,
            "stream": true,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
            ]}]
        })
    );
}

#[test]
fn parallel_tool_calls_are_assembled_from_their_pieces() {
    let calls = [
        ("toolu_a", "read_file", json!({"path": "a.txt"})),
        (
            "toolu_b",
            "grep",
            json!({"pattern": "fn main", "path": "src"}),
        ),
    ];
    let server = FakeServer::with([Reply::sse(&anthropic::tool_calls(&calls, USAGE))]);
    let mut req = ask("look");
    req.tools.push(ToolSchema {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    });
    let (result, events) = chat_with(options(&server.url()), &req);
    let c = result.expect("chat");
    assert_eq!(c.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(c.message.content, "Let me look.");
    let want = vec![
        ToolCall {
            id: "toolu_a".into(),
            name: "read_file".into(),
            arguments: json!({"path": "a.txt"}),
        },
        ToolCall {
            id: "toolu_b".into(),
            name: "grep".into(),
            arguments: json!({"pattern": "fn main", "path": "src"}),
        },
    ];
    assert_eq!(c.message.tool_calls, want);
    assert_eq!(
        &events[1..],
        &[
            Event::ToolCall(want[0].clone()),
            Event::ToolCall(want[1].clone())
        ]
    );
    let body = server.only_request().json();
    assert_eq!(
        body["tools"],
        json!([{"name": "read_file", "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"}}])
    );
}

#[test]
fn thinking_blocks_are_kept_to_go_back_with_the_answer() {
    let mut body = String::new();
    let ev = |kind: &str, data: serde_json::Value| format!("event: {kind}\ndata: {data}\n\n");
    body += &ev(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    body += &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
    );
    body += &ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Which file?"}}),
    );
    body += &ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
    );
    body += &ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    body += &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {}}}),
    );
    body += &ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 1}),
    );
    body += &ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
    );
    body += &ev("message_stop", json!({"type": "message_stop"}));
    let server = FakeServer::with([Reply::sse(&body)]);
    let (result, events) = chat_with(options(&server.url()), &ask("list"));
    let c = result.expect("chat");
    // Thinking is never output; it goes back, whole, with the tool call.
    assert!(
        events.iter().all(|e| !matches!(e, Event::Delta(_))),
        "{events:?}"
    );
    assert_eq!(c.message.content, "");
    assert_eq!(c.message.tool_calls[0].arguments, json!({}));
    assert_eq!(
        c.message.replay,
        vec![json!({"type": "thinking", "thinking": "Which file?", "signature": "EqQB"})]
    );
    // Usage without cache counts: none written or read.
    assert_eq!(c.usage.prompt_tokens, Some(5));
    assert_eq!(c.usage.cache_read_tokens, Some(0));
}

#[test]
fn http_529_overloaded_is_retried_after_retry_after() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = FakeServer::with([
        Reply::json(529, overloaded).header("retry-after", "0"),
        Reply::sse(&anthropic::text(&["ok"], USAGE)),
    ]);
    let (result, _) = chat_with(options(&server.url()), &ask("hi"));
    assert_eq!(result.expect("chat").message.content, "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);

    let server = FakeServer::with([Reply::json(529, overloaded).header("retry-after", "0")]);
    let mut opts = options(&server.url());
    opts.max_retries = 0;
    let (result, _) = chat_with(opts, &ask("hi"));
    match result {
        Err(ProviderError::Http {
            status, message, ..
        }) => assert_eq!((status, message.as_str()), (529, "Overloaded")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_refused_key_is_named_and_never_echoed() {
    let echo = format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {KEY}"}}}}"#
    );
    let server = FakeServer::with([Reply::json(401, &echo)]);
    let (result, _) = chat_with(options(&server.url()), &ask("hi"));
    let err = result.expect_err("refused");
    let text = err.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(
        text.contains("the server refused the API key in ANTHROPIC_API_KEY"),
        "{text}"
    );
    assert_eq!(server.request_count(), 1, "401 is not retried");
}

#[test]
fn an_unknown_model_lists_the_models_the_key_may_use() {
    let missing = r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-haiku-4-6"}}"#;
    let models = json!({"data": [{"id": "claude-haiku-4-5", "type": "model"}, {"id": "claude-sonnet-4-5", "type": "model"}]});
    let server = FakeServer::with([
        Reply::json(404, missing),
        Reply::json(200, &models.to_string()),
    ]);
    let mut opts = options(&server.url());
    opts.model = "claude-haiku-4-6".into();
    let (result, _) = chat_with(opts, &ask("hi"));
    let text = result.expect_err("404").to_string();
    assert!(text.contains("did you mean `claude-haiku-4-5`?"), "{text}");
    let list = &server.requests()[1];
    assert_eq!(
        (list.method.as_str(), list.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(list.header("x-api-key"), Some(KEY));
}

#[test]
fn a_refusal_is_a_warning_of_the_answer() {
    let mut body = anthropic::text(&["I can't"], USAGE);
    body = body.replace("\"end_turn\"", "\"refusal\"");
    let server = FakeServer::with([Reply::sse(&body)]);
    let (result, events) = chat_with(options(&server.url()), &ask("hi"));
    let c = result.expect("a refusal still answers");
    assert_eq!(c.finish_reason.as_deref(), Some("refusal"));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Warning(w) if w.contains("refusal"))),
        "{events:?}"
    );
}

#[test]
fn a_body_that_is_not_the_messages_stream_is_malformed() {
    // An OpenAI-style stream sent to the Anthropic adapter: events without a `type`.
    let server = FakeServer::with([Reply::sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
    )]);
    let (result, _) = chat_with(options(&server.url()), &ask("hi"));
    match result {
        Err(ProviderError::Malformed { detail, .. }) => {
            assert!(detail.contains("an event without a type"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    // An empty body: no message at all.
    let server = FakeServer::with([Reply::sse("")]);
    let (result, _) = chat_with(options(&server.url()), &ask("hi"));
    match result {
        Err(ProviderError::Malformed { detail, .. }) => {
            assert!(detail.contains("without `message_start`"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn thinking_that_never_ends_is_bounded_like_output() {
    let ev = |kind: &str, data: serde_json::Value| format!("event: {kind}\ndata: {data}\n\n");
    let head = ev(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
    ) + &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
    );
    let piece = ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "x".repeat(1 << 20)}}),
    );
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "text/event-stream")
        .chunk(head)
        .repeated(piece, 40)]);
    let (result, events) = chat_with(options(&server.url()), &ask("think"));
    match result {
        Err(ProviderError::TooLarge { what, .. }) => {
            assert_eq!(what, "more than 32 MiB of output in one answer")
        }
        other => panic!("{other:?}"),
    }
    assert!(events.is_empty(), "thinking is never shown");
}
