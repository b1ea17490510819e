//! Anthropic `/v1/messages` streams as the loopback server sends them, and a server that
//! keeps a prompt cache the way Anthropic's does, for the tests and the cache benchmark.
//!
//! The cache: a request is one sequence of blocks (tool definitions, system blocks, the
//! messages' content blocks); a block with `cache_control` is a breakpoint. For each
//! breakpoint the server looks for the longest cached prefix ending at it or at one of the
//! 20 blocks before it; the longest found is read; everything from there to the last
//! breakpoint is written; the prefix ending at each breakpoint is cached from then on (if it
//! holds at least `min_tokens`). A block counts one token per 4 bytes of its JSON.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::fake_http::{FakeServer, Recorded, Reply};

/// How far before a breakpoint the cache looks for an earlier cached prefix.
pub const LOOKBACK: usize = 20;

/// Usage as `message_start` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    pub output: u64,
}

fn event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

fn start(usage: Usage) -> String {
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant",
            "content": [], "model": "claude-haiku-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "cache_creation_input_tokens": usage.cache_write,
                "cache_read_input_tokens": usage.cache_read, "output_tokens": 1}}}),
    )
}

fn end(stop_reason: &str, usage: Usage) -> String {
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": usage.output}}),
    ) + &event("message_stop", json!({"type": "message_stop"}))
}

/// A streamed text answer, in `pieces`.
pub fn text(pieces: &[&str], usage: Usage) -> String {
    let mut body = start(usage);
    body += &event("ping", json!({"type": "ping"}));
    body += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    for p in pieces {
        body += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        );
    }
    body += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    body + &end("end_turn", usage)
}

/// An answer asking for `calls` (`(id, name, input)`) at once, each input streamed in two
/// pieces, after a sentence of text.
pub fn tool_calls(calls: &[(&str, &str, Value)], usage: Usage) -> String {
    let mut body = start(usage);
    body += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me look."}}),
    );
    body += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    for (n, (id, name, input)) in calls.iter().enumerate() {
        let index = n + 1;
        body += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        );
        let text = input.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        for piece in [a, b] {
            body += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            );
        }
        body += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    body + &end("tool_use", usage)
}

/// One request as the cache saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Every input token of the request.
    pub total: u64,
    pub usage: Usage,
    pub breakpoints: usize,
    /// The tokens of the blocks it starts with that the request before it started with too:
    /// what a perfect cache could have served.
    pub shared: u64,
}

#[derive(Default)]
struct State {
    cached: HashSet<u64>,
    seen: Vec<Seen>,
    /// The prefix hashes of the last request.
    last: Vec<u64>,
    /// Every request's body, in order.
    bodies: Vec<Value>,
}

/// A server speaking Anthropic's wire with a prompt cache. Each request is answered by the
/// conversation's state: a new request (its last block a user's text) gets a call of
/// `tool` with `input`; a tool result gets the answer `done`.
pub struct CacheServer {
    pub server: FakeServer,
    state: Arc<Mutex<State>>,
}

impl CacheServer {
    pub fn start(min_tokens: u64, tool: &'static str, input: Value) -> CacheServer {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let server = FakeServer::responding(move |request: &Recorded| {
            let body = request.json();
            let blocks = blocks(&body);
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.bodies.push(body.clone());
            let (mut seen, created) = cache(&s.cached, &blocks, min_tokens);
            s.cached.extend(created);
            let hashes = prefix_hashes(&blocks);
            let common = hashes
                .iter()
                .zip(&s.last)
                .take_while(|(a, b)| a == b)
                .count();
            seen.shared = blocks[..common].iter().map(|b| b.1).sum();
            s.last = hashes;
            seen.usage.output = 20;
            let usage = seen.usage;
            s.seen.push(seen);
            let calls = s.seen.len();
            drop(s);
            let answers_a_tool = last_type(&body) == Some("tool_result");
            let reply = if answers_a_tool {
                text(&["Done: ", "the file says hello."], usage)
            } else {
                tool_calls(
                    &[(&format!("toolu_{calls:02}"), tool, input.clone())],
                    usage,
                )
            };
            Reply::sse(&reply)
        });
        CacheServer { server, state }
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Every request's body so far, in order.
    pub fn bodies(&self) -> Vec<Value> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .bodies
            .clone()
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .seen
            .clone()
    }
}

/// The type of the first block of the last message that is not the trailing text a request
/// adds after its breakpoints.
fn last_type(body: &Value) -> Option<&str> {
    let last = body["messages"].as_array()?.last()?;
    last["content"].as_array()?.first()?["type"].as_str()
}

/// The request's blocks in cache order: `(identity, tokens, breakpoint)`.
pub fn blocks(body: &Value) -> Vec<(String, u64, bool)> {
    let mut out = Vec::new();
    let mut push = |prefix: &str, block: &Value| {
        let mut plain = block.clone();
        let marked = plain
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        let key = format!("{prefix}:{plain}");
        let tokens = (key.len() as u64).div_ceil(4);
        out.push((key, tokens, marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool", t);
    }
    for s in body["system"].as_array().into_iter().flatten() {
        push("system", s);
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default();
        for b in m["content"].as_array().into_iter().flatten() {
            push(role, b);
        }
    }
    out
}

/// The hash of each prefix of `blocks` (the first block alone, the first two, ...).
pub fn prefix_hashes(blocks: &[(String, u64, bool)]) -> Vec<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    blocks
        .iter()
        .map(|(key, ..)| {
            key.hash(&mut hasher);
            hasher.finish()
        })
        .collect()
}

/// What the cache reads and writes for `blocks`, and the prefixes it caches.
pub fn cache(
    cached: &HashSet<u64>,
    blocks: &[(String, u64, bool)],
    min_tokens: u64,
) -> (Seen, Vec<u64>) {
    let hashes = prefix_hashes(blocks);
    let mut sums = Vec::with_capacity(blocks.len());
    let mut sum = 0;
    for (_, tokens, _) in blocks {
        sum += tokens;
        sums.push(sum);
    }
    let breakpoints: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].2).collect();
    let mut read_to = None::<usize>;
    for &b in &breakpoints {
        let hit = (b.saturating_sub(LOOKBACK)..=b)
            .rev()
            .find(|&j| cached.contains(&hashes[j]));
        read_to = read_to.max(hit);
    }
    let read = read_to.map_or(0, |j| sums[j]);
    let write = breakpoints
        .last()
        .map_or(0, |&b| sums[b].saturating_sub(read));
    let created = breakpoints
        .iter()
        .filter(|&&b| sums[b] >= min_tokens)
        .map(|&b| hashes[b])
        .collect();
    let write = if breakpoints.last().is_some_and(|&b| sums[b] >= min_tokens) {
        write
    } else {
        0
    };
    let total = sum;
    (
        Seen {
            total,
            usage: Usage {
                input: total - read - write,
                cache_write: write,
                cache_read: read,
                output: 0,
            },
            breakpoints: breakpoints.len(),
            shared: 0,
        },
        created,
    )
}

/// What a fresh cache would have served `bodies`, sent in order, with only the breakpoints
/// `keep` allows (`"tool"`, `"system"`, `"message"`): `(read, written, total)` tokens.
pub fn replay(bodies: &[Value], keep: &dyn Fn(&str) -> bool, min_tokens: u64) -> (u64, u64, u64) {
    let mut cached = HashSet::new();
    let (mut read, mut written, mut total) = (0, 0, 0);
    for body in bodies {
        let mut body = body.clone();
        for (section, what) in [("tools", "tool"), ("system", "system")] {
            if !keep(what) {
                for b in body[section].as_array_mut().into_iter().flatten() {
                    b.as_object_mut().map(|o| o.remove("cache_control"));
                }
            }
        }
        if !keep("message") {
            for m in body["messages"].as_array_mut().into_iter().flatten() {
                for b in m["content"].as_array_mut().into_iter().flatten() {
                    b.as_object_mut().map(|o| o.remove("cache_control"));
                }
            }
        }
        let (seen, created) = cache(&cached, &blocks(&body), min_tokens);
        cached.extend(created);
        read += seen.usage.cache_read;
        written += seen.usage.cache_write;
        total += seen.total;
    }
    (read, written, total)
}
