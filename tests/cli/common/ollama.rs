//! Ollama `/api/chat` replies as the loopback server sends them (NDJSON, byte for byte as
//! Ollama's docs show), and a repository whose agent talks to such a server.

use serde_json::{json, Value};

use super::env::TestEnv;
use super::fake_http::{FakeServer, Reply};

/// The `created_at` of the tool-call and text replies.
pub const CREATED: &str = "2026-01-02T03:04:05Z";

/// One Ollama /api/chat NDJSON stream answering `pieces` (11 prompt tokens, one completion
/// token per piece).
pub fn ollama_stream(pieces: &[&str]) -> String {
    let mut body = String::new();
    for p in pieces {
        body.push_str(
            &json!({
                "model": "m", "created_at": "2026-01-02T03:04:05.000Z",
                "message": {"role": "assistant", "content": p}, "done": false
            })
            .to_string(),
        );
        body.push('\n');
    }
    body.push_str(
        &json!({
            "model": "m", "created_at": "2026-01-02T03:04:05.000Z",
            "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
            "total_duration": 1000, "prompt_eval_count": 11, "eval_count": pieces.len()
        })
        .to_string(),
    );
    body.push('\n');
    body
}

/// A reply asking for `calls` (tool name, arguments) at once (20 prompt, 5 completion tokens).
pub fn ollama_calls(calls: &[(&str, Value)]) -> Reply {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(name, args)| json!({"function": {"name": name, "arguments": args}}))
        .collect();
    let first = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 20, "eval_count": 5});
    Reply::ndjson(&format!("{first}\n{last}\n"))
}

/// A reply asking for one tool call.
pub fn ollama_call(name: &str, args: Value) -> Reply {
    ollama_calls(&[(name, args)])
}

/// A reply answering with text (30 prompt, 4 completion tokens).
pub fn ollama_text(text: &str) -> Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": text}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 30, "eval_count": 4});
    Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

/// A repository whose agent `helper` (system prompt "Be brief.") talks to `server`.
pub fn ollama_env(server: &FakeServer) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n    system_prompt: Be brief.\n",
        server.url()
    ))
}
