use serde_json::{json, Value};

use super::request::{breakpoints, layout, request_body, Spot, MAX_BREAKPOINTS};
use crate::provider::{
    ChatRequest, Image, Message, ResponseFormat, Role, Sampling, TextPart, ToolCall, ToolSchema,
};

/// A system message of the agent's prompt, core memory and recall, as the engine builds it.
fn system(prompt: &str, core: &str, recall: &str) -> Message {
    let mut text = String::new();
    let mut parts = Vec::new();
    for (piece, volatile) in [(prompt, false), (core, false), (recall, true)] {
        if piece.is_empty() {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let start = text.len();
        text.push_str(piece);
        parts.push(TextPart {
            start,
            end: text.len(),
            volatile,
        });
    }
    let mut m = Message::new(Role::System, text);
    m.parts = parts;
    m
}

fn tool(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: format!("{name} things"),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

fn call(id: &str) -> Message {
    let mut m = Message::new(Role::Assistant, "");
    m.tool_calls.push(ToolCall {
        id: id.into(),
        name: "read_file".into(),
        arguments: json!({"path": "a.txt"}),
    });
    m
}

fn result(id: &str, text: &str) -> Message {
    let mut m = Message::new(Role::Tool, text);
    m.tool_call_id = Some(id.into());
    m.name = Some("read_file".into());
    m
}

fn request(messages: Vec<Message>, tools: Vec<ToolSchema>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        messages,
        tools,
        sampling: Sampling::default(),
    }
}

/// The blocks that carry a breakpoint, as `(where, text or name)`.
fn marked(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        if t.get("cache_control").is_some() {
            out.push(format!("tool {}", t["name"].as_str().unwrap_or_default()));
        }
    }
    for b in body["system"].as_array().into_iter().flatten() {
        if b.get("cache_control").is_some() {
            out.push(format!("system {}", b["text"].as_str().unwrap_or_default()));
        }
    }
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for b in m["content"].as_array().into_iter().flatten() {
            if b.get("cache_control").is_some() {
                let what = b["text"]
                    .as_str()
                    .or(b["tool_use_id"].as_str())
                    .or(b["id"].as_str())
                    .unwrap_or_default();
                out.push(format!(
                    "message {i} {} {what}",
                    b["type"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    out
}

#[test]
fn breakpoints_end_the_conversation_the_system_prompt_and_the_tools() {
    let req = request(
        vec![
            system(
                "You are careful.",
                "core: likes tea",
                "recalled: Paris trip",
            ),
            Message::new(Role::User, "first question"),
            Message::new(Role::Assistant, "first answer"),
            Message::new(Role::User, "second question"),
        ],
        vec![tool("read_file"), tool("grep")],
    );
    let (body, warnings) = request_body("claude-haiku-4-5", &req);
    assert!(warnings.is_empty());
    assert_eq!(
        marked(&body),
        [
            "tool grep",
            "system You are careful.",
            "system core: likes tea",
            "message 2 text second question",
        ]
    );
    // Recall is sent after every breakpoint: the last block of the last user message.
    let last = &body["messages"][2]["content"];
    assert_eq!(last.as_array().map(Vec::len), Some(2));
    assert_eq!(last[1]["text"], "recalled: Paris trip");
    assert!(last[1].get("cache_control").is_none());
    assert_eq!(body["system"].as_array().map(Vec::len), Some(2));
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["stream"], true);
}

#[test]
fn there_are_never_more_breakpoints_than_the_api_allows() {
    // Five stable system parts, tools and two turns: more places than breakpoints.
    let mut text = String::new();
    let mut parts = Vec::new();
    for i in 0..5 {
        if i > 0 {
            text.push_str("\n\n");
        }
        let start = text.len();
        text.push_str(&format!("section {i}"));
        parts.push(TextPart {
            start,
            end: text.len(),
            volatile: false,
        });
    }
    let mut sys = Message::new(Role::System, text);
    sys.parts = parts;
    let req = request(
        vec![
            sys,
            Message::new(Role::User, "q1"),
            Message::new(Role::Assistant, "a1"),
            Message::new(Role::User, "q2"),
        ],
        vec![tool("t")],
    );
    let (body, _) = request_body("m", &req);
    let marks = marked(&body);
    assert_eq!(marks.len(), MAX_BREAKPOINTS, "{marks:?}");
    // The conversation's end, the whole system prompt and the tools come first.
    assert!(
        marks.contains(&"message 2 text q2".to_string()),
        "{marks:?}"
    );
    assert!(marks.contains(&"system section 4".to_string()), "{marks:?}");
    assert!(marks.contains(&"tool t".to_string()), "{marks:?}");
    assert!(marks.contains(&"system section 3".to_string()), "{marks:?}");
}

#[test]
fn without_tools_the_previous_turn_gets_the_spare_breakpoint() {
    let req = request(
        vec![
            system("prompt", "", ""),
            Message::new(Role::User, "q1"),
            call("t1"),
            result("t1", "contents"),
            Message::new(Role::Assistant, "a1"),
            Message::new(Role::User, "q2"),
            call("t2"),
            result("t2", "more"),
        ],
        Vec::new(),
    );
    let l = layout(&req);
    assert_eq!(
        l.previous_turn_end,
        Some(Spot::Block(3, 0)),
        "{:?}",
        l.messages
    );
    let (body, _) = request_body("m", &req);
    assert_eq!(
        marked(&body),
        [
            "system prompt",
            "message 3 text a1",
            "message 6 tool_result t2",
        ]
    );
}

#[test]
fn each_call_starts_with_the_last_calls_cached_prefix() {
    // A tool loop and a second turn: every request starts with the bytes of the previous
    // request up to its conversation breakpoint, and that breakpoint's block is unchanged.
    let sys = || system("You are careful.", "core: likes tea", "");
    let tools = || vec![tool("read_file")];
    let turns: Vec<Vec<Message>> = vec![
        vec![sys(), Message::new(Role::User, "q1")],
        vec![
            sys(),
            Message::new(Role::User, "q1"),
            call("c1"),
            result("c1", "x"),
        ],
        vec![
            sys(),
            Message::new(Role::User, "q1"),
            call("c1"),
            result("c1", "x"),
            Message::new(Role::Assistant, "a1"),
            Message::new(Role::User, "q2"),
        ],
    ];
    let mut previous: Option<Value> = None;
    for messages in turns {
        let (body, _) = request_body("m", &request(messages, tools()));
        if let Some(prev) = &previous {
            assert_eq!(prev["tools"], body["tools"]);
            assert_eq!(prev["system"], body["system"]);
            // The previous request's messages, up to its marked block, begin this one.
            let prev_messages = prev["messages"].as_array().expect("messages");
            let now = body["messages"].as_array().expect("messages");
            let last = prev_messages.len() - 1;
            assert_eq!(prev_messages[..last], now[..last]);
            let marked_block = prev_messages[last]["content"]
                .as_array()
                .expect("content")
                .iter()
                .position(|b| b.get("cache_control").is_some())
                .expect("a marked block");
            for i in 0..=marked_block {
                let mut was = prev_messages[last]["content"][i].clone();
                if let Value::Object(o) = &mut was {
                    o.remove("cache_control");
                }
                let mut is = now[last]["content"][i].clone();
                if let Value::Object(o) = &mut is {
                    o.remove("cache_control");
                }
                assert_eq!(was, is, "block {i} of message {last}");
            }
        }
        assert!(marked(&body).len() <= MAX_BREAKPOINTS);
        previous = Some(body);
    }
}

#[test]
fn messages_map_to_blocks_and_tool_results_merge_into_one_user_turn() {
    let mut user = Message::new(Role::User, "what is this?");
    user.images.push(Image {
        media_type: "image/png".into(),
        data: b"png".to_vec(),
    });
    let mut two = call("c1");
    two.tool_calls.push(ToolCall {
        id: "c2".into(),
        name: "grep".into(),
        arguments: Value::String("not json".into()),
    });
    two.replay
        .push(json!({"type": "thinking", "thinking": "hm", "signature": "sig"}));
    let in_turn = request(
        vec![
            user.clone(),
            two.clone(),
            result("c1", "a cat"),
            result("c2", "no match"),
        ],
        Vec::new(),
    );
    let (body, _) = request_body("m", &in_turn);
    assert_eq!(
        body["messages"][1]["content"][0]["type"], "thinking",
        "thinking goes back first, within its turn"
    );
    let mut req = request(
        vec![
            user,
            two,
            result("c1", "a cat"),
            result("c2", "no match"),
            Message::new(Role::User, "thanks"),
        ],
        Vec::new(),
    );
    req.sampling = Sampling {
        temperature: Some(0.2),
        top_p: Some(0.9),
        max_tokens: Some(77),
        response_format: Some(ResponseFormat::Json),
    };
    let (body, warnings) = request_body("m", &req);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no JSON mode"), "{warnings:?}");
    let m = &body["messages"];
    assert_eq!(m.as_array().map(Vec::len), Some(3));
    assert_eq!(m[0]["content"][0]["type"], "image");
    assert_eq!(m[0]["content"][0]["source"]["data"], "cG5n");
    assert_eq!(m[0]["content"][1]["text"], "what is this?");
    assert_eq!(m[1]["role"], "assistant");
    // An earlier turn's thinking is not sent (the API would drop it).
    assert_eq!(m[1]["content"][0]["input"], json!({"path": "a.txt"}));
    assert_eq!(
        m[1]["content"][1]["input"],
        json!({"arguments": "not json"})
    );
    assert_eq!(m[2]["role"], "user");
    assert_eq!(m[2]["content"][0]["tool_use_id"], "c1");
    assert_eq!(m[2]["content"][1]["tool_use_id"], "c2");
    assert_eq!(m[2]["content"][2]["text"], "thanks");
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["max_tokens"], 77);
    assert!(body.get("system").is_none());
}

#[test]
fn breakpoints_skip_thinking_blocks() {
    let mut answer = Message::new(Role::Assistant, "");
    answer
        .replay
        .push(json!({"type": "thinking", "thinking": "hm", "signature": "s"}));
    answer.tool_calls.push(ToolCall {
        id: "c1".into(),
        name: "read_file".into(),
        arguments: json!({}),
    });
    let l = layout(&request(
        vec![Message::new(Role::User, "q"), answer],
        Vec::new(),
    ));
    // The last message's last block is the tool call, not the thinking before it.
    assert_eq!(l.conversation_end, Some(Spot::Block(1, 1)));
    let only_thinking = {
        let mut m = Message::new(Role::Assistant, "");
        m.replay
            .push(json!({"type": "redacted_thinking", "data": "x"}));
        m
    };
    let l = layout(&request(
        vec![Message::new(Role::User, "q"), only_thinking],
        Vec::new(),
    ));
    assert_eq!(l.conversation_end, None);
    assert_eq!(breakpoints(&l), Vec::<Spot>::new());
}
