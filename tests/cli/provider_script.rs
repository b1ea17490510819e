//! The `script` provider: scripted replies, chosen from the conversation itself so that the
//! order holds across processes.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use axocoatl::provider::script::ScriptProvider;
use axocoatl::provider::{
    CallUsage, Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError, Role,
    Sampling, ToolCall,
};
use serde_json::json;

const SAMPLE: &str = "tests/fixtures/providers/script_sample.yaml";

fn script(yaml: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("replies.yaml");
    std::fs::write(&path, yaml).expect("write script");
    (dir, path)
}

fn load(path: &Path) -> ScriptProvider {
    ScriptProvider::from_file("scripted", path).expect("load script")
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages,
        tools: Vec::new(),
        sampling: Sampling::default(),
    }
}

fn user(text: &str) -> Message {
    Message::new(Role::User, text)
}

fn tool_result(call: &ToolCall, content: &str) -> Message {
    let mut m = Message::new(Role::Tool, content);
    m.tool_call_id = Some(call.id.clone());
    m.name = Some(call.name.clone());
    m
}

/// One call in a fresh provider, as a new `axocoatl send` process would make it.
fn call(path: &Path, messages: &[Message]) -> (Result<Completion, ProviderError>, Vec<Event>) {
    let mut provider = load(path);
    let mut events = Vec::new();
    let result = provider.chat(&request(messages.to_vec()), &Cancel::new(), &mut |e| {
        events.push(e)
    });
    (result, events)
}

#[test]
fn text_reply_with_usage() {
    let (_dir, path) = script(
        "replies:\n  - text: Hello there\n    usage: {prompt_tokens: 5, completion_tokens: 2}\n",
    );
    let (result, events) = call(&path, &[user("hi")]);
    let completion = result.expect("chat");
    assert_eq!(events, vec![Event::Delta("Hello there".into())]);
    assert_eq!(completion.message.role, Role::Assistant);
    assert_eq!(completion.message.content, "Hello there");
    assert_eq!(
        completion.usage,
        CallUsage {
            prompt_tokens: Some(5),
            completion_tokens: Some(2),
            ..CallUsage::default()
        }
    );
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn usage_left_out_is_unknown() {
    let (_dir, path) =
        script("replies:\n  - text: a\n  - text: b\n    usage: {completion_tokens: 1}\n");
    let (first, _) = call(&path, &[user("1")]);
    assert!(!first.expect("chat").usage.reported());
    let (second, _) = call(
        &path,
        &[user("1"), Message::new(Role::Assistant, "a"), user("2")],
    );
    let usage = second.expect("chat").usage;
    assert_eq!(usage.prompt_tokens, None);
    assert_eq!(usage.completion_tokens, Some(1));
}

#[test]
fn chunks_are_streamed_in_order() {
    let (_dir, path) =
        script("replies:\n  - chunks: [\"One, \", \"two, \", \"three.\"]\n    delay_ms: 5\n");
    let (result, events) = call(&path, &[user("count")]);
    assert_eq!(
        events,
        vec![
            Event::Delta("One, ".into()),
            Event::Delta("two, ".into()),
            Event::Delta("three.".into()),
        ]
    );
    assert_eq!(result.expect("chat").message.content, "One, two, three.");
}

#[test]
fn tool_calls_then_the_answer_to_the_tool_round() {
    let yaml = r#"
replies:
  - text: "Let me look."
    tool_calls:
      - name: read_file
        arguments: {path: README.md, lines: [1, 2]}
      - name: list_dir
  - text: "Done reading."
"#;
    let (_dir, path) = script(yaml);
    let mut history = vec![user("read the readme")];
    let (result, events) = call(&path, &history);
    let completion = result.expect("chat");
    let calls = completion.message.tool_calls.clone();
    assert_eq!(
        calls,
        vec![
            ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: json!({"path": "README.md", "lines": [1, 2]}),
            },
            ToolCall {
                id: "call_1".into(),
                name: "list_dir".into(),
                arguments: json!({}),
            },
        ]
    );
    assert_eq!(events[0], Event::Delta("Let me look.".into()));
    assert_eq!(events[1], Event::ToolCall(calls[0].clone()));
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));

    history.push(completion.message);
    history.push(tool_result(&calls[0], "# Hello"));
    history.push(tool_result(&calls[1], "README.md"));
    let (result, _) = call(&path, &history);
    assert_eq!(result.expect("chat").message.content, "Done reading.");
}

#[test]
fn an_error_reply_fails_the_call_after_its_text() {
    let (_dir, path) =
        script("replies:\n  - chunks: [\"partial \"]\n    error: connection reset by model\n");
    let (result, events) = call(&path, &[user("hi")]);
    assert_eq!(events, vec![Event::Delta("partial ".into())]);
    match result {
        Err(ProviderError::Model { provider, detail }) => {
            assert_eq!(provider, "scripted");
            assert_eq!(detail, "connection reset by model");
        }
        other => panic!("expected the scripted error, got {other:?}"),
    }
}

#[test]
fn order_holds_across_processes_through_the_conversation() {
    // Each step loads the script afresh (a new process) and sends the history so far.
    let path = Path::new(SAMPLE);
    let mut history = vec![Message::new(Role::System, "You are a demo.")];

    history.push(user("hello"));
    let (first, _) = call(path, &history);
    let first = first.expect("call 1");
    assert_eq!(first.message.content, "Hello! I can read files for you.");
    assert_eq!(first.usage.prompt_tokens, Some(12));
    history.push(first.message);

    // Asking the same thing again in another process gives the same answer.
    let (again, _) = call(path, &history[..2]);
    assert_eq!(
        again.expect("replay").message.content,
        "Hello! I can read files for you."
    );

    history.push(user("read the README"));
    let (second, events) = call(path, &history);
    let second = second.expect("call 2");
    assert_eq!(second.message.content, "Let me read it.");
    assert_eq!(events.len(), 4, "three chunks and a tool call: {events:?}");
    let read = second.message.tool_calls[0].clone();
    assert_eq!(read.arguments, json!({"path": "README.md"}));
    history.push(second.message);
    history.push(tool_result(&read, "hello"));

    let (third, _) = call(path, &history);
    let third = third.expect("call 3");
    assert_eq!(third.message.content, "The README says hello.");
    assert!(!third.usage.reported());
    history.push(third.message);

    history.push(user("and now?"));
    let (fourth, _) = call(path, &history);
    let err = fourth.expect_err("call 4 is a scripted failure");
    assert!(err.to_string().contains("model overloaded"), "{err}");

    // The failed call used up its entry once the conversation moved on.
    history.push(user("please try again"));
    let (fifth, _) = call(path, &history);
    let err = fifth.expect_err("the script is exhausted");
    let text = err.to_string();
    assert!(text.contains("no reply left for call #5"), "{text}");
    assert!(text.contains("script_sample.yaml"), "{text}");
}

#[test]
fn match_entries_answer_their_turns_without_moving_the_sequence() {
    let path = Path::new(SAMPLE);
    // A weather question first: answered by the `match` entries, tool round included.
    let mut history = vec![user("what's the weather like?")];
    let (asked, _) = call(path, &history);
    let asked = asked.expect("weather call");
    let weather = asked.message.tool_calls[0].clone();
    assert_eq!(weather.id, "call_w1");
    assert_eq!(weather.name, "get_weather");
    history.push(asked.message);
    history.push(tool_result(&weather, "sunny, 24 C"));
    let (answered, _) = call(path, &history);
    let answered = answered.expect("weather answer");
    assert_eq!(answered.message.content, "Sunny in Paris.");
    assert_eq!(answered.finish_reason.as_deref(), Some("stop"));
    history.push(answered.message);

    // The next plain message still gets the first entry of the sequence.
    history.push(user("hello"));
    let (plain, _) = call(path, &history);
    assert_eq!(
        plain.expect("plain").message.content,
        "Hello! I can read files for you."
    );
}

#[test]
fn a_match_turn_that_outlasts_its_entries_says_so() {
    let (_dir, path) = script("replies:\n  - match: ping\n    tool_calls: [{name: pong}]\n");
    let mut history = vec![user("ping")];
    let (first, _) = call(&path, &history);
    let first = first.expect("first");
    let pong = first.message.tool_calls[0].clone();
    history.push(first.message);
    history.push(tool_result(&pong, "ok"));
    let (second, _) = call(&path, &history);
    let text = second.expect_err("no second entry").to_string();
    assert!(text.contains("matching \"ping\""), "{text}");
}

#[test]
fn a_stop_interrupts_a_long_delay() {
    let (_dir, path) = script("replies:\n  - chunks: [a, b]\n    delay_ms: 30000\n");
    let mut provider = load(&path);
    let cancel = Cancel::new();
    let stopper = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            cancel.cancel();
        })
    };
    let mut events = Vec::new();
    let result = provider.chat(&request(vec![user("hi")]), &cancel, &mut |e| events.push(e));
    stopper.join().expect("stopper");
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert!(events.is_empty());
}

#[test]
fn invalid_scripts_are_config_errors_naming_the_file_and_entry() {
    let cases = [
        (
            "replies:\n  - text: a\n    chunks: [b]\n",
            "reply #1 has both `text` and `chunks`",
        ),
        (
            "replies:\n  - text: a\n  - usage: {prompt_tokens: 1}\n",
            "reply #2 needs",
        ),
        (
            "replies:\n  - txt: a\n",
            "replies.yaml:2:5: replies[0]: unknown key `txt`",
        ),
        ("- text: a\n", "expected `replies:`"),
    ];
    for (yaml, expected) in cases {
        let (_dir, path) = script(yaml);
        match ScriptProvider::from_file("scripted", &path) {
            Err(ProviderError::Config { provider, detail }) => {
                assert_eq!(provider, "scripted");
                assert!(detail.contains(expected), "{yaml:?}: {detail}");
                assert!(detail.contains("replies.yaml"), "{detail}");
            }
            other => panic!("{yaml:?}: expected a config error, got {other:?}"),
        }
    }
    let missing = ScriptProvider::from_file("scripted", Path::new("/nonexistent/replies.yaml"));
    assert!(
        matches!(&missing, Err(ProviderError::Config { detail, .. }) if detail.contains("script /nonexistent/replies.yaml not found")),
        "{missing:?}"
    );
}

#[test]
fn the_documented_sample_loads() {
    let provider = load(Path::new(SAMPLE));
    assert_eq!(provider.name(), "scripted");
    assert!(provider.supports_tools());
}
