//! The body of one `POST /v1/messages`, and where its prompt-cache breakpoints go.
//!
//! Anthropic reads a request as one prefix in this order: tool definitions, system blocks,
//! then the messages' content blocks. A `cache_control` breakpoint on a block asks it to
//! keep the prefix up to that block; a later request that starts with the same bytes reads
//! them back at a tenth of the input price (and a first write costs a quarter more). At
//! most [`MAX_BREAKPOINTS`] blocks may carry one. So breakpoints go where the prefix stops
//! changing, most valuable first:
//!
//! 1. the end of the conversation so far: the next call of the turn (after its tools ran)
//!    and the next turn both start with all of it;
//! 2. the end of the system prompt's stable parts (the agent's prompt, then its core
//!    memory), which outlives any one conversation;
//! 3. the last tool definition, still read back when `--system` or an edited core memory
//!    changed the system prompt;
//! 4. the end of each earlier stable part of the system prompt (the agent's own prompt,
//!    kept when only core memory changed);
//! 5. the end of the previous turn, for the rare round that adds more blocks than the
//!    API looks back over (20) to find the previous breakpoint.
//!
//! What changes with every request (what memory recalls for it) would spoil every prefix
//! that holds it, so it is sent after the last breakpoint: as a text block at the end of
//! the last user message, where it is read in the same place of the conversation and never
//! becomes part of a cached prefix.

use serde_json::{json, Map, Value};

use super::super::http::base64;
use super::super::{ChatRequest, Message, ResponseFormat, Role, ToolCall};

/// The most `cache_control` breakpoints one request may carry (the API refuses more).
pub const MAX_BREAKPOINTS: usize = 4;
/// `max_tokens` when the agent sets none: the API requires one, and every Claude model
/// accepts this many.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A block a breakpoint can go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spot {
    Tool(usize),
    System(usize),
    /// `(message, block)` of the messages sent.
    Block(usize, usize),
}

/// The request as Anthropic reads it, before breakpoints are placed.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    pub system: Vec<Value>,
    pub messages: Vec<Value>,
    pub tools: Vec<Value>,
    /// The last block of the conversation, before the text that changes per request.
    pub conversation_end: Option<Spot>,
    /// The last block before the current turn's request.
    pub previous_turn_end: Option<Spot>,
}

/// The JSON body of one call, and warnings about what the API cannot be asked.
pub(crate) fn request_body(default_model: &str, request: &ChatRequest) -> (Value, Vec<String>) {
    let mut warnings = Vec::new();
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut layout = layout(request);
    let spots = breakpoints(&layout);
    for spot in &spots {
        mark(&mut layout, *spot);
    }
    let sampling = &request.sampling;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(sampling.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    body.insert("stream".into(), json!(true));
    if !layout.system.is_empty() {
        body.insert("system".into(), Value::Array(layout.system));
    }
    body.insert("messages".into(), Value::Array(layout.messages));
    if !layout.tools.is_empty() {
        body.insert("tools".into(), Value::Array(layout.tools));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if sampling.response_format == Some(ResponseFormat::Json) {
        warnings.push(
            "the Anthropic Messages API has no JSON mode: `response_format: json` was not sent (ask for JSON in the prompt)"
                .to_string(),
        );
    }
    (Value::Object(body), warnings)
}

/// The request's system blocks, messages and tools, and where the conversation ends.
pub(crate) fn layout(request: &ChatRequest) -> Layout {
    let mut layout = Layout::default();
    // Text that changes per request: sent after every breakpoint.
    let mut volatile = Vec::new();
    for message in request.messages.iter().filter(|m| m.role == Role::System) {
        let mut stable = true;
        for (text, changes) in message.text_parts() {
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            stable &= !changes;
            if stable {
                layout.system.push(json!({"type": "text", "text": text}));
            } else {
                volatile.push(text.to_string());
            }
        }
    }
    let mut request_start = None;
    // Thinking blocks go back for the current turn only (the API needs them with the tool
    // calls they led to, and drops earlier turns' itself): a turn's request is the same
    // whether its earlier turns come from memory or from a checkpoint.
    let this_turn = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    for (i, message) in request.messages.iter().enumerate() {
        if message.role == Role::System {
            continue;
        }
        let role = if message.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks = blocks_of(message, i > this_turn);
        if blocks.is_empty() {
            continue; // the API refuses empty content
        }
        let same_role = layout
            .messages
            .last()
            .is_some_and(|last| last["role"] == role);
        if !same_role {
            layout
                .messages
                .push(json!({"role": role, "content": Vec::<Value>::new()}));
        }
        let at = layout.messages.len() - 1;
        let content = content_mut(&mut layout.messages[at]);
        if message.role == Role::User {
            request_start = Some((at, content.len()));
        }
        content.extend(blocks);
    }
    layout.conversation_end = last_spot(&layout.messages);
    layout.previous_turn_end = request_start.and_then(|(m, b)| match b {
        0 => m
            .checked_sub(1)
            .and_then(|prev| last_block(&layout.messages[prev]).map(|b| Spot::Block(prev, b))),
        b => cacheable_before(&layout.messages[m], b).map(|b| Spot::Block(m, b)),
    });
    if !volatile.is_empty() {
        let text = json!({"type": "text", "text": volatile.join("\n\n")});
        match layout.messages.last_mut() {
            Some(last) if last["role"] == "user" => content_mut(last).push(text),
            _ => layout
                .messages
                .push(json!({"role": "user", "content": [text]})),
        }
    }
    layout.tools = request
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "input_schema": t.parameters,
            })
        })
        .collect();
    layout
}

/// The breakpoints of a request, at most [`MAX_BREAKPOINTS`], in the order of the module
/// documentation's list.
pub(crate) fn breakpoints(layout: &Layout) -> Vec<Spot> {
    let mut wanted = Vec::new();
    wanted.extend(layout.conversation_end);
    let systems = layout.system.len();
    if systems > 0 {
        wanted.push(Spot::System(systems - 1));
    }
    if !layout.tools.is_empty() {
        wanted.push(Spot::Tool(layout.tools.len() - 1));
    }
    wanted.extend((0..systems.saturating_sub(1)).rev().map(Spot::System));
    wanted.extend(layout.previous_turn_end);
    let mut spots: Vec<Spot> = Vec::new();
    for spot in wanted {
        if !spots.contains(&spot) && spots.len() < MAX_BREAKPOINTS {
            spots.push(spot);
        }
    }
    spots
}

/// Puts a `cache_control` breakpoint on the block at `spot`.
fn mark(layout: &mut Layout, spot: Spot) {
    let block = match spot {
        Spot::Tool(i) => layout.tools.get_mut(i),
        Spot::System(i) => layout.system.get_mut(i),
        Spot::Block(m, b) => layout
            .messages
            .get_mut(m)
            .and_then(|m| m["content"].get_mut(b)),
    };
    if let Some(Value::Object(block)) = block {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

fn content_mut(message: &mut Value) -> &mut Vec<Value> {
    if !message["content"].is_array() {
        message["content"] = Value::Array(Vec::new());
    }
    match &mut message["content"] {
        Value::Array(blocks) => blocks,
        _ => unreachable!("content was just made an array"),
    }
}

/// Thinking blocks cannot carry a breakpoint (they are cached with the blocks around them).
fn cacheable(block: &Value) -> bool {
    !matches!(
        block["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    )
}

/// The last block of a message that can carry a breakpoint.
fn last_block(message: &Value) -> Option<usize> {
    let blocks = message["content"].as_array()?;
    cacheable_before(message, blocks.len())
}

/// The last block before `end` that can carry a breakpoint.
fn cacheable_before(message: &Value, end: usize) -> Option<usize> {
    let blocks = message["content"].as_array()?;
    (0..end.min(blocks.len()))
        .rev()
        .find(|&i| cacheable(&blocks[i]))
}

fn last_spot(messages: &[Value]) -> Option<Spot> {
    let m = messages.len().checked_sub(1)?;
    last_block(&messages[m]).map(|b| Spot::Block(m, b))
}

/// A message's content blocks as the API takes them: text, images, tool calls and (with
/// `replay`) the provider's own blocks for an assistant message, a tool result for a tool
/// message.
fn blocks_of(message: &Message, replay: bool) -> Vec<Value> {
    let mut blocks = Vec::new();
    match message.role {
        Role::Tool => {
            blocks.push(json!({
                "type": "tool_result",
                "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
                "content": message.content,
            }));
            return blocks;
        }
        Role::Assistant if replay => blocks.extend(message.replay.iter().cloned()),
        Role::Assistant => {}
        Role::User | Role::System => {}
    }
    for image in &message.images {
        blocks.push(json!({
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": image.media_type,
                "data": base64(&image.data),
            },
        }));
    }
    if !message.content.trim().is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    blocks.extend(message.tool_calls.iter().map(tool_use));
    blocks
}

fn tool_use(call: &ToolCall) -> Value {
    // Arguments that were not a JSON object (kept as text) go back as an object holding
    // them: the API takes only objects as tool input.
    let input = match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => object,
            _ => json!({"arguments": text}),
        },
        other => json!({"arguments": other}),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}
