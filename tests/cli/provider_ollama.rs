//! The `ollama` adapter against a loopback server speaking Ollama's `/api/chat` NDJSON.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::common::fake_http::{closed_port_url, FakeServer, Framing, Reply};
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
fn deltas_reach_the_caller_while_the_stream_is_still_open() {
    // The server sends one line and then holds the connection silent: the first delta must
    // arrive before the end of the stream, and a stop then ends the call at once.
    let first_line = TEXT.lines().next().expect("line");
    let server = FakeServer::with([Reply::ndjson(&format!("{first_line}\n")).stall()]);
    let cancel = Cancel::new();
    let (seen_tx, seen_rx) = mpsc::channel();
    let stopper = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            if seen_rx.recv_timeout(Duration::from_secs(20)).is_ok() {
                cancel.cancel();
            }
        })
    };
    let mut provider = OllamaProvider::new(options(&server.url()));
    let mut events = Vec::new();
    let result = provider.chat(&ask("sky?"), &cancel, &mut |e| {
        events.push(e);
        let _ = seen_tx.send(());
    });
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(events, vec![Event::Delta("The".into())]);
    assert_eq!(
        server.request_count(),
        1,
        "a cancelled call is never retried"
    );
}

#[test]
fn a_stop_ends_a_call_whose_server_stalls_for_30_seconds() {
    let first_line = TEXT.lines().next().expect("line");
    let stalled = Reply::ndjson(&format!("{first_line}\n"))
        .delay(Duration::from_secs(30))
        .chunk(TEXT);
    let server = FakeServer::with([stalled]);
    let cancel = Cancel::new();
    let stopper = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            cancel.cancel();
        })
    };
    let (result, _) = chat_with(options(&server.url()), &ask("sky?"), &cancel);
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
}

#[test]
fn a_stop_before_any_answer_ends_the_call() {
    let server = FakeServer::with([Reply::silent()]);
    let cancel = Cancel::new();
    let stopper = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        })
    };
    let (result, events) = chat_with(options(&server.url()), &ask("hi"), &cancel);
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert!(events.is_empty());
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
fn http_500_is_a_typed_error_with_the_server_message_and_is_not_retried() {
    let server = FakeServer::with([Reply::json(
        500,
        r#"{"error":"llama runner process has terminated: exit status 2"}"#,
    )]);
    let (result, events) = chat(&server, &ask("hi"));
    match result {
        Err(ProviderError::Http {
            provider,
            url,
            status,
            message,
            ..
        }) => {
            assert_eq!(provider, "local-ollama");
            assert_eq!(url, format!("{}/api/chat", server.url()));
            assert_eq!(status, 500);
            assert_eq!(
                message,
                "llama runner process has terminated: exit status 2"
            );
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert!(events.is_empty());
    assert_eq!(server.request_count(), 1);
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

#[test]
fn http_429_is_retried_then_succeeds() {
    let server = FakeServer::with([
        Reply::json(429, r#"{"error":"server busy, please try again"}"#),
        Reply::ndjson(TEXT),
    ]);
    let (result, _) = chat(&server, &ask("hi"));
    assert_eq!(result.expect("chat").message.content, "The sky is blue.");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn retries_are_bounded() {
    let busy = Reply::json(429, r#"{"error":"server busy"}"#).header("Retry-After", "0");
    let server = FakeServer::with([busy.clone(), busy.clone(), busy]);
    let mut opts = options(&server.url());
    opts.max_retries = 1;
    let (result, _) = chat_with(opts, &ask("hi"), &Cancel::new());
    assert!(
        matches!(result, Err(ProviderError::Http { status: 429, .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[test]
fn connection_refused_is_a_connect_error_naming_the_url() {
    let url = closed_port_url();
    let mut opts = options(&url);
    opts.max_retries = 1;
    let (result, _) = chat_with(opts, &ask("hi"), &Cancel::new());
    match result {
        Err(ProviderError::Connect {
            provider, url: u, ..
        }) => {
            assert_eq!(provider, "local-ollama");
            assert_eq!(u, format!("{url}/api/chat"));
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[test]
fn an_invalid_json_line_is_malformed() {
    let first = TEXT.lines().next().expect("line");
    let server = FakeServer::with([Reply::ndjson(&format!(
        "{first}\n{{\"model\": \"llama3.2\", \"mess\n"
    ))]);
    let (result, events) = chat(&server, &ask("hi"));
    match result {
        Err(ProviderError::Malformed { detail, url, .. }) => {
            assert!(detail.contains("invalid JSON line"), "{detail}");
            assert!(url.ends_with("/api/chat"));
        }
        other => panic!("expected malformed, got {other:?}"),
    }
    assert_eq!(events.len(), 1, "output before the bad line was streamed");
    assert_eq!(
        server.request_count(),
        1,
        "never retried after output began"
    );
}

#[test]
fn a_stream_without_done_is_malformed_not_a_short_success() {
    let lines: Vec<&str> = TEXT.lines().take(2).collect();
    let server = FakeServer::with([Reply::ndjson(&format!("{}\n", lines.join("\n")))]);
    let (result, _) = chat(&server, &ask("hi"));
    match result {
        Err(ProviderError::Malformed { detail, .. }) => {
            assert!(detail.contains("done"), "{detail}")
        }
        other => panic!("expected malformed, got {other:?}"),
    }
}

#[test]
fn a_connection_cut_mid_stream_is_malformed() {
    let first = TEXT.lines().next().expect("line");
    let server = FakeServer::with([Reply::ndjson(&format!("{first}\n")).close()]);
    let (result, _) = chat(&server, &ask("hi"));
    assert!(
        matches!(result, Err(ProviderError::Malformed { .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn an_error_line_mid_stream_fails_the_call() {
    let first = TEXT.lines().next().expect("line");
    let body = format!("{first}\n{{\"error\":\"an error was encountered while running the model: unexpected EOF\"}}\n");
    let server = FakeServer::with([Reply::ndjson(&body)]);
    let (result, _) = chat(&server, &ask("hi"));
    match result {
        Err(ProviderError::Model { detail, .. }) => {
            assert!(detail.contains("unexpected EOF"), "{detail}")
        }
        other => panic!("expected a model error, got {other:?}"),
    }
}

#[test]
fn silence_longer_than_the_read_timeout_is_a_timeout() {
    let first = TEXT.lines().next().expect("line");
    let server = FakeServer::with([
        Reply::silent(),
        Reply::ndjson(&format!("{first}\n")).stall(),
    ]);
    for _ in 0..2 {
        let mut opts = options(&server.url());
        opts.timeout = Duration::from_millis(300);
        opts.max_retries = 0;
        let (result, _) = chat_with(opts, &ask("hi"), &Cancel::new());
        match result {
            Err(ProviderError::Timeout { provider, url, .. }) => {
                assert_eq!(provider, "local-ollama");
                assert!(url.ends_with("/api/chat"));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }
    assert_eq!(server.request_count(), 2);
}

#[test]
fn output_past_the_bound_fails_the_call() {
    // 33 lines of 1 MiB of text each: every line valid, the sum past 32 MiB.
    let line = format!(
        "{}\n",
        json!({"model": "llama3.2", "message": {"role": "assistant", "content": "x".repeat(1 << 20)}, "done": false})
    );
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "application/x-ndjson")
        .repeated(line, 33)
        .chunk("{\"done\":true}\n")]);
    let (result, events) = chat(&server, &ask("talk"));
    match result {
        Err(ProviderError::TooLarge { what, .. }) => {
            assert_eq!(what, "more than 32 MiB of output in one answer")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        events.len(),
        32,
        "the deltas within the bound were streamed"
    );
}

#[test]
fn a_deadline_ends_a_call_that_keeps_sending() {
    let line = format!(
        "{}\n",
        json!({"model": "llama3.2", "message": {"role": "assistant", "content": "."}, "done": false})
    );
    let mut reply = Reply::new(200).header("Content-Type", "application/x-ndjson");
    for _ in 0..600 {
        reply = reply.chunk(&line).delay(Duration::from_millis(50));
    }
    let server = FakeServer::with([reply]);
    let mut opts = options(&server.url());
    opts.deadline = Some(Duration::from_secs(1));
    let (result, events) = chat_with(opts, &ask("drip"), &Cancel::new());
    match result {
        Err(ProviderError::Deadline { secs, .. }) => assert_eq!(secs, 1),
        other => panic!("{other:?}"),
    }
    assert!(!events.is_empty(), "output arrived before the deadline");
}
