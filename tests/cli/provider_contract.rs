//! What every HTTP chat protocol owes the turn engine, run against each one: Ollama's NDJSON
//! (`/api/chat`), OpenAI's server-sent events (`/v1/chat/completions`) and Anthropic's
//! (`/v1/messages`), each against a loopback server that frames replies its way. A `Wire` says how a protocol frames a delta,
//! an end, an error and a broken unit; `contract!` writes the same tests for each, so a
//! behaviour one adapter gains (a bound, a retry rule, a stop) is asked of the other too.
//! What only one protocol has (tool-call deltas by index, Ollama's image fields, SSE comments)
//! stays in `provider_ollama.rs` and `provider_openai.rs`.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::common::fake_http::{closed_port_url, FakeServer, Framing, Reply};
use axocoatl::provider::anthropic::AnthropicProvider;
use axocoatl::provider::ollama::OllamaProvider;
use axocoatl::provider::openai::OpenAiProvider;
use axocoatl::provider::{
    Cancel, ChatRequest, Completion, Event, HttpOptions, Message, Provider, ProviderError, Role,
    Sampling,
};
use serde_json::json;

/// One HTTP chat protocol as its server frames a streamed answer.
trait Wire {
    /// The provider's configured name, which its errors carry.
    const NAME: &'static str;
    /// Where the chat request goes, below the server's address.
    const PATH: &'static str;
    const CONTENT_TYPE: &'static str;
    /// What the message of a stream that ends too soon names as missing.
    const END_MARK: &'static str;

    fn provider(opts: HttpOptions) -> Box<dyn Provider>;
    /// The configured address for a server at `url`.
    fn base_url(url: &str) -> String;
    /// One unit of the stream carrying `text`.
    fn delta(text: &str) -> String;
    /// The units that end a complete answer.
    fn end() -> String;
    /// The JSON body of an HTTP error saying `message`.
    fn error_body(message: &str) -> String;
    /// A unit in the middle of the stream that reports the model failed with `message`.
    fn error_unit(message: &str) -> String;
    /// A unit whose JSON is cut off.
    fn invalid_unit() -> String;
    /// A reply streaming `body` unit by unit.
    fn stream(body: &str) -> Reply;
}

struct Ollama;

impl Wire for Ollama {
    const NAME: &'static str = "local-ollama";
    const PATH: &'static str = "/api/chat";
    const CONTENT_TYPE: &'static str = "application/x-ndjson";
    const END_MARK: &'static str = "done";

    fn provider(opts: HttpOptions) -> Box<dyn Provider> {
        Box::new(OllamaProvider::new(opts))
    }
    fn base_url(url: &str) -> String {
        url.to_owned()
    }
    fn delta(text: &str) -> String {
        let unit = json!({"model": "llama3.2", "message": {"role": "assistant", "content": text}, "done": false});
        format!("{unit}\n")
    }
    fn end() -> String {
        let unit = json!({"model": "llama3.2", "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "prompt_eval_count": 9, "eval_count": 2});
        format!("{unit}\n")
    }
    fn error_body(message: &str) -> String {
        json!({ "error": message }).to_string()
    }
    fn error_unit(message: &str) -> String {
        format!("{}\n", json!({ "error": message }))
    }
    fn invalid_unit() -> String {
        "{\"model\": \"llama3.2\", \"mess\n".into()
    }
    fn stream(body: &str) -> Reply {
        Reply::ndjson(body)
    }
}

struct OpenAi;

impl Wire for OpenAi {
    const NAME: &'static str = "llama-server";
    const PATH: &'static str = "/v1/chat/completions";
    const CONTENT_TYPE: &'static str = "text/event-stream";
    const END_MARK: &'static str = "[DONE]";

    fn provider(opts: HttpOptions) -> Box<dyn Provider> {
        Box::new(OpenAiProvider::new(opts))
    }
    fn base_url(url: &str) -> String {
        format!("{url}/v1")
    }
    fn delta(text: &str) -> String {
        let event = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        format!("data: {event}\n\n")
    }
    fn end() -> String {
        let finish = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}});
        format!("data: {finish}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
    }
    fn error_body(message: &str) -> String {
        json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}})
            .to_string()
    }
    fn error_unit(message: &str) -> String {
        let event = json!({"error": {"message": message, "type": "invalid_request_error"}});
        format!("data: {event}\n\n")
    }
    fn invalid_unit() -> String {
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\n\n".into()
    }
    fn stream(body: &str) -> Reply {
        Reply::sse(body)
    }
}

struct Anthropic;

impl Wire for Anthropic {
    const NAME: &'static str = "claude";
    const PATH: &'static str = "/v1/messages";
    const CONTENT_TYPE: &'static str = "text/event-stream";
    const END_MARK: &'static str = "message_stop";

    fn provider(opts: HttpOptions) -> Box<dyn Provider> {
        Box::new(AnthropicProvider::new(opts))
    }
    fn base_url(url: &str) -> String {
        url.to_owned()
    }
    fn delta(text: &str) -> String {
        let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}});
        format!("event: content_block_delta\ndata: {delta}\n\n")
    }
    fn end() -> String {
        let stop = json!({"type": "content_block_stop", "index": 0});
        let delta = json!({"type": "message_delta", "delta": {"stop_reason": "stop", "stop_sequence": null}, "usage": {"output_tokens": 2}});
        let end = json!({"type": "message_stop"});
        format!(
            "event: content_block_stop\ndata: {stop}\n\nevent: message_delta\ndata: {delta}\n\nevent: message_stop\ndata: {end}\n\n"
        )
    }
    fn error_body(message: &str) -> String {
        json!({"type": "error", "error": {"type": "api_error", "message": message}}).to_string()
    }
    fn error_unit(message: &str) -> String {
        let event =
            json!({"type": "error", "error": {"type": "overloaded_error", "message": message}});
        format!("event: error\ndata: {event}\n\n")
    }
    fn invalid_unit() -> String {
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\n\n"
            .into()
    }
    fn stream(body: &str) -> Reply {
        // The message and its text block open once, before the units.
        let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "usage": {"input_tokens": 9, "output_tokens": 1}}});
        let block = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
        Reply::sse(&format!(
            "event: message_start\ndata: {start}\n\nevent: content_block_start\ndata: {block}\n\n{body}"
        ))
    }
}

fn options<W: Wire>(url: &str) -> HttpOptions {
    HttpOptions {
        name: W::NAME.into(),
        base_url: W::base_url(url),
        model: "m".into(),
        api_key: None,
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        max_retries: 2,
        deadline: None,
        key_env: None,
        base_url_from: None,
    }
}

fn ask() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages: vec![
            Message::new(Role::System, "Be brief."),
            Message::new(Role::User, "hi"),
        ],
        tools: Vec::new(),
        sampling: Sampling::default(),
    }
}

/// One call with `opts`, the events it streamed, and its result.
fn call<W: Wire>(
    opts: HttpOptions,
    cancel: &Cancel,
    on_event: &mut dyn FnMut(&Event),
) -> (Result<Completion, ProviderError>, Vec<Event>) {
    let mut events = Vec::new();
    let result = W::provider(opts).chat(&ask(), cancel, &mut |e| {
        on_event(&e);
        events.push(e);
    });
    (result, events)
}

fn chat<W: Wire>(server: &FakeServer) -> (Result<Completion, ProviderError>, Vec<Event>) {
    call::<W>(options::<W>(&server.url()), &Cancel::new(), &mut |_| {})
}

/// Cancels `cancel` after `after`, from another thread.
fn stop_after(cancel: &Cancel, after: Duration) -> thread::JoinHandle<()> {
    let cancel = cancel.clone();
    thread::spawn(move || {
        thread::sleep(after);
        cancel.cancel();
    })
}

fn text_streams_its_deltas_and_ends<W: Wire>() {
    let body = format!("{}{}{}", W::delta("Hel"), W::delta("lo!"), W::end());
    let server = FakeServer::with([W::stream(&body)]);
    let (result, events) = chat::<W>(&server);
    let completion = result.expect("chat");
    assert_eq!(completion.message.content, "Hello!");
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    assert_eq!(completion.usage.prompt_tokens, Some(9));
    assert_eq!(completion.usage.completion_tokens, Some(2));
    assert_eq!(
        events,
        vec![Event::Delta("Hel".into()), Event::Delta("lo!".into())]
    );
    let request = server.only_request();
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", W::PATH)
    );
}

fn deltas_reach_the_caller_while_the_stream_is_open<W: Wire>() {
    let server = FakeServer::with([W::stream(&W::delta("first")).stall()]);
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
    let (result, events) = call::<W>(options::<W>(&server.url()), &cancel, &mut |_| {
        let _ = seen_tx.send(());
    });
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(events, vec![Event::Delta("first".into())]);
    assert_eq!(
        server.request_count(),
        1,
        "a cancelled call is never retried"
    );
}

fn a_stop_ends_a_call_whose_server_stalls_for_30_seconds<W: Wire>() {
    let stalled = W::stream(&W::delta("a"))
        .delay(Duration::from_secs(30))
        .chunk(W::end());
    let server = FakeServer::with([stalled]);
    let cancel = Cancel::new();
    let stopper = stop_after(&cancel, Duration::from_millis(300));
    let (result, events) = call::<W>(options::<W>(&server.url()), &cancel, &mut |_| {});
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(events, vec![Event::Delta("a".into())]);
}

fn a_stop_before_any_answer_ends_the_call<W: Wire>() {
    let server = FakeServer::with([Reply::silent()]);
    let cancel = Cancel::new();
    let stopper = stop_after(&cancel, Duration::from_millis(200));
    let (result, events) = call::<W>(options::<W>(&server.url()), &cancel, &mut |_| {});
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert!(events.is_empty());
}

fn http_500_is_a_typed_error_with_the_server_message_and_is_not_retried<W: Wire>() {
    let body = W::error_body("the runner has terminated: exit status 2");
    let server = FakeServer::with([Reply::json(500, &body)]);
    let (result, events) = chat::<W>(&server);
    match result {
        Err(ProviderError::Http {
            provider,
            url,
            status,
            message,
            ..
        }) => {
            assert_eq!(provider, W::NAME);
            assert_eq!(url, format!("{}{}", server.url(), W::PATH));
            assert_eq!(status, 500);
            assert_eq!(message, "the runner has terminated: exit status 2");
        }
        other => panic!("expected an HTTP error, got {other:?}"),
    }
    assert!(events.is_empty());
    assert_eq!(server.request_count(), 1);
}

fn http_429_is_retried_with_the_same_request_then_succeeds<W: Wire>() {
    let text = format!("{}{}", W::delta("ok"), W::end());
    let server = FakeServer::with([
        Reply::json(429, &W::error_body("server busy, please try again")),
        W::stream(&text),
    ]);
    let (result, _) = chat::<W>(&server);
    assert_eq!(result.expect("chat").message.content, "ok");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body, requests[1].body);
}

fn retries_are_bounded<W: Wire>() {
    let busy = Reply::json(429, &W::error_body("server busy")).header("Retry-After", "0");
    let server = FakeServer::with([busy.clone(), busy.clone(), busy]);
    let mut opts = options::<W>(&server.url());
    opts.max_retries = 1;
    let (result, _) = call::<W>(opts, &Cancel::new(), &mut |_| {});
    assert!(
        matches!(result, Err(ProviderError::Http { status: 429, .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 2);
}

fn connection_refused_is_a_connect_error_naming_the_url<W: Wire>() {
    let url = closed_port_url();
    let mut opts = options::<W>(&url);
    opts.max_retries = 0;
    let (result, _) = call::<W>(opts, &Cancel::new(), &mut |_| {});
    match result {
        Err(ProviderError::Connect {
            provider, url: u, ..
        }) => {
            assert_eq!(provider, W::NAME);
            assert_eq!(u, format!("{url}{}", W::PATH));
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

fn an_invalid_unit_is_malformed_and_never_retried_after_output<W: Wire>() {
    let body = format!("{}{}", W::delta("a"), W::invalid_unit());
    let server = FakeServer::with([W::stream(&body)]);
    let (result, events) = chat::<W>(&server);
    match result {
        Err(ProviderError::Malformed { detail, url, .. }) => {
            assert!(detail.contains("invalid JSON"), "{detail}");
            assert!(url.ends_with(W::PATH), "{url}");
        }
        other => panic!("expected malformed, got {other:?}"),
    }
    assert_eq!(events.len(), 1, "output before the bad unit was streamed");
    assert_eq!(server.request_count(), 1);
}

fn a_stream_that_ends_too_soon_is_malformed_not_a_short_success<W: Wire>() {
    for framing in [Framing::Close, Framing::Chunked] {
        let server = FakeServer::with([W::stream(&W::delta("a")).framing(framing)]);
        let (result, _) = chat::<W>(&server);
        match result {
            Err(ProviderError::Malformed { detail, .. }) => {
                assert!(detail.contains(W::END_MARK), "{framing:?}: {detail}")
            }
            other => panic!("expected malformed with {framing:?}, got {other:?}"),
        }
    }
}

fn a_connection_cut_mid_unit_is_malformed<W: Wire>() {
    let next = W::delta("b");
    let server = FakeServer::with([W::stream(&W::delta("a")).chunk(&next[..12]).close()]);
    let (result, _) = chat::<W>(&server);
    assert!(
        matches!(result, Err(ProviderError::Malformed { .. })),
        "{result:?}"
    );
    assert_eq!(server.request_count(), 1);
}

fn an_error_mid_stream_fails_the_call<W: Wire>() {
    let body = format!(
        "{}{}",
        W::delta("a"),
        W::error_unit("context length exceeded")
    );
    let server = FakeServer::with([W::stream(&body)]);
    let (result, _) = chat::<W>(&server);
    match result {
        Err(ProviderError::Model { detail, .. }) => {
            assert!(detail.contains("context length exceeded"), "{detail}")
        }
        other => panic!("expected a model error, got {other:?}"),
    }
}

fn silence_longer_than_the_read_timeout_is_a_timeout<W: Wire>() {
    // Before the status line, and after output began.
    for (reply, streamed) in [(Reply::silent(), 0), (W::stream(&W::delta("a")).stall(), 1)] {
        let server = FakeServer::with([reply]);
        let mut opts = options::<W>(&server.url());
        opts.timeout = Duration::from_millis(300);
        // Once output began a call is never retried, whatever the retries allowed.
        opts.max_retries = if streamed == 0 { 0 } else { 2 };
        let (result, events) = call::<W>(opts, &Cancel::new(), &mut |_| {});
        match result {
            Err(ProviderError::Timeout { provider, url, .. }) => {
                assert_eq!(provider, W::NAME);
                assert!(url.ends_with(W::PATH), "{url}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(events.len(), streamed);
        assert_eq!(server.request_count(), 1);
    }
}

fn output_past_the_bound_fails_the_call<W: Wire>() {
    // 33 deltas of 1 MiB of text each: every unit valid, the sum past 32 MiB.
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", W::CONTENT_TYPE)
        .repeated(W::delta(&"x".repeat(1 << 20)), 33)
        .chunk(W::end())]);
    let (result, events) = chat::<W>(&server);
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

fn a_deadline_ends_a_call_that_keeps_sending<W: Wire>() {
    let mut reply = Reply::new(200).header("Content-Type", W::CONTENT_TYPE);
    for _ in 0..600 {
        reply = reply.chunk(W::delta(".")).delay(Duration::from_millis(50));
    }
    let server = FakeServer::with([reply]);
    let mut opts = options::<W>(&server.url());
    opts.deadline = Some(Duration::from_secs(1));
    let (result, events) = call::<W>(opts, &Cancel::new(), &mut |_| {});
    match result {
        Err(ProviderError::Deadline { secs, .. }) => assert_eq!(secs, 1),
        other => panic!("{other:?}"),
    }
    assert!(!events.is_empty(), "output arrived before the deadline");
}

/// The contract's tests for one protocol, in a module of its own.
macro_rules! contract {
    ($module:ident, $wire:ty, [$($test:ident),* $(,)?]) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test::<$wire>();
                }
            )*
        }
    };
}

macro_rules! contract_for_every_wire {
    ($($test:ident),* $(,)?) => {
        contract!(ollama, super::Ollama, [$($test),*]);
        contract!(openai, super::OpenAi, [$($test),*]);
        contract!(anthropic, super::Anthropic, [$($test),*]);
    };
}

contract_for_every_wire!(
    text_streams_its_deltas_and_ends,
    deltas_reach_the_caller_while_the_stream_is_open,
    a_stop_ends_a_call_whose_server_stalls_for_30_seconds,
    a_stop_before_any_answer_ends_the_call,
    http_500_is_a_typed_error_with_the_server_message_and_is_not_retried,
    http_429_is_retried_with_the_same_request_then_succeeds,
    retries_are_bounded,
    connection_refused_is_a_connect_error_naming_the_url,
    an_invalid_unit_is_malformed_and_never_retried_after_output,
    a_stream_that_ends_too_soon_is_malformed_not_a_short_success,
    a_connection_cut_mid_unit_is_malformed,
    an_error_mid_stream_fails_the_call,
    silence_longer_than_the_read_timeout_is_a_timeout,
    output_past_the_bound_fails_the_call,
    a_deadline_ends_a_call_that_keeps_sending,
);
