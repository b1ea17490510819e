//! What a tool call whose arguments are not JSON is answered: the model (and the user) read
//! that they are not JSON and how they start, not a deserializer's complaint about a string.

use serde_json::json;

use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_call, ollama_env, ollama_text};
use crate::common::procs::{json_lines, tool_results};

#[test]
fn arguments_that_are_not_json_are_named_with_their_start() {
    let model = FakeServer::with([
        ollama_call("read_file", json!("{\"path\": ")),
        ollama_text("I will try again."),
    ]);
    let env = ollama_env(&model);
    let r = env.run(&["send", "--json", "read the notes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let res = tool_results(&events);
    assert_eq!(res[0]["is_error"], true);
    let out = res[0]["output"].as_str().expect("output");
    assert!(
        out.starts_with("arguments are not valid JSON (EOF while parsing"),
        "{out}"
    );
    assert!(out.contains(r#"they start "{\"path\": ""#), "{out}");
    assert!(!out.contains("invalid type"), "{out}");
    // The model read the same.
    let second = model.requests()[1].json().to_string();
    assert!(second.contains("arguments are not valid JSON"), "{second}");
}
