//! Output the model cut at its length limit says so; a stopped turn's usage is unknown, not
//! zero.

use std::process::Stdio;

use serde_json::{json, Value};

use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::ollama_env;

/// An Ollama stream that ends because it reached `num_predict`.
fn cut_reply(text: &str) -> Reply {
    let chunk = json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": text}, "done": false});
    let last = json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": ""}, "done_reason": "length", "done": true, "prompt_eval_count": 12, "eval_count": 5});
    Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

#[test]
fn an_answer_cut_by_max_tokens_says_so() {
    let server = FakeServer::with([
        cut_reply("The three reasons are: first,"),
        cut_reply("Once"),
    ]);
    let env = ollama_env(&server);
    let r = env.run(&["send", "-o", "max_tokens=5", "Why?"]);
    snap!("cut_text", env.snap(&r));
    let r = env.run(&["send", "--json", "-o", "max_tokens=5", "Again?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let cut = |e: &&Value| {
        e["type"] == "warning"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("the output was cut at max_tokens (5 tokens)"))
    };
    assert!(events.iter().any(|e| cut(&e)), "{}", r.stdout);
    let r = env.run(&["show", "@~1"]);
    snap!("cut_show", env.snap(&r));
    let shown: Value =
        serde_json::from_str(&env.run(&["show", "@", "--json"]).stdout).expect("json");
    assert_eq!(shown["calls"][0]["finish_reason"], "length");
}

#[test]
fn a_stopped_turn_has_unknown_usage() {
    let first = json!({"model": "m", "created_at": "2026-01-02T03:04:05Z", "message": {"role": "assistant", "content": "Let me think"}, "done": false});
    let server = FakeServer::with([Reply::ndjson(&format!("{first}\n")).stall()]);
    let env = ollama_env(&server);
    let mut send = env
        .cmd(&["send", "--json", "Think hard."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = send.stdout.take().expect("stdout");
    crate::common::env::read_until(&mut out, "Let me think");
    let r = env.run(&["stop", "@"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    assert_eq!(send.wait().expect("wait").code(), Some(4));
    let ended: Value =
        serde_json::from_str(rest.lines().last().expect("turn.ended")).expect("json");
    assert_eq!(ended["state"], "stopped");
    assert_eq!(ended["usage"]["complete"], false, "{ended}");
    let r = env.run(&["show", "@"]);
    assert!(
        r.stdout
            .contains("usage: unknown: no provider reported usage (1 call)"),
        "{}",
        r.stdout
    );
    drop(server);
}
