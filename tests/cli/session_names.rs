//! Sessions as people name them after `sessions rename`/`rm`, and `rewind --edit` sending the
//! revised request with the turn's own overrides.

use serde_json::{json, Value};

use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_env, ollama_text};

fn turn_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("a turn line")
        .to_owned()
}

#[test]
fn rewind_edit_keeps_the_overrides_and_names_the_session_as_people_do() {
    let server = FakeServer::responding(|_| ollama_text("ok"));
    let mut env = ollama_env(&server);
    // The first `main` is removed: the next is `main` to people, `main.2` in the ledger.
    assert_eq!(env.run(&["send", "gone"]).code, 0);
    assert_eq!(env.run(&["sessions", "rm", "main"]).code, 0);
    let r = env.run(&[
        "send",
        "-m",
        "qwen2.5:7b",
        "--system",
        "Answer in one word.",
        "-o",
        "temperature=0.3",
        "first",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let first = turn_of(&r.stderr);
    assert_eq!(env.run(&["send", "second"]).code, 0);
    env.set_env("VISUAL", "sed -i s/first/FIRST/");
    let r = env.run(&["rewind", &first, "--edit", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Rewound session main to before turn"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("main.2"), "{}", r.stderr);
    let sent = server.requests().last().expect("a request").json();
    assert_eq!(sent["model"], "qwen2.5:7b");
    assert_eq!(sent["options"]["temperature"], json!(0.3));
    let messages = sent["messages"].as_array().expect("messages");
    assert!(
        messages[0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Answer in one word.")),
        "{sent}"
    );
    assert_eq!(messages.last().expect("request")["content"], "FIRST");
    let shown: Value =
        serde_json::from_str(&env.run(&["show", "@", "--json"]).stdout).expect("json");
    assert_eq!(shown["session"], "main");
    assert_eq!(shown["overrides"]["model"], "qwen2.5:7b");
    let r = env.run(&["rewind", "@", "--yes", "--json"]);
    let rewound: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(rewound["session"], "main");
}

#[test]
fn listings_use_current_names_and_a_removed_session_is_not_retried_into() {
    let server = FakeServer::responding(|_| ollama_text("ok"));
    let env = ollama_env(&server);
    let r = env.run(&["send", "-s", "draft", "old work"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let old = turn_of(&r.stderr);
    assert_eq!(env.run(&["sessions", "rename", "draft", "notes"]).code, 0);
    let r = env.run(&["history", "--all"]);
    assert!(r.stdout.contains("[notes]"), "{}", r.stdout);
    let r = env.run(&["show", &old]);
    assert!(r.stdout.contains("session  notes\n"), "{}", r.stdout);
    // A retry of a turn of a renamed session goes to it, by its new name.
    let r = env.run(&["retry", &old, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let begun: Value = serde_json::from_str(r.stdout.lines().next().expect("begun")).expect("json");
    assert_eq!(begun["session"], "notes");
    // Removed: its turns are still shown, and a retry is refused rather than written into a
    // session no listing shows.
    assert_eq!(env.run(&["sessions", "rm", "notes"]).code, 0);
    let r = env.run(&["history", "--all"]);
    assert!(r.stdout.contains("[notes (removed)]"), "{}", r.stdout);
    let r = env.run(&["retry", &old]);
    snap!("retry_removed", env.snap(&r));
    assert_eq!(server.request_count(), 2);
}
