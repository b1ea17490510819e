//! Text piped to `send` is found by `history --search`, printed by `show` (bounded, `--full`
//! for all of it) and carried by `export`.

use serde_json::Value;

use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_env, ollama_text};

#[test]
fn piped_text_is_searchable_shown_and_exported() {
    let server = FakeServer::responding(|_| ollama_text("a reset connection"));
    let mut env = ollama_env(&server);
    // Small segments: the piped turn ends up in a sealed segment, searched through its
    // index, and the latest in the open one, searched by a scan.
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "2048");
    let r = env.run_stdin(&["send", "why"], "panic: ECONNRESET at conn.rs:42\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let turn = r.stderr.lines().next().expect("turn line")[5..].to_owned();
    for i in 0..6 {
        assert_eq!(env.run(&["send", &format!("filler {i}")]).code, 0);
    }
    let segments = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ledger")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg"))
        })
        .count();
    assert!(segments > 1, "the piped turn's segment is sealed");
    let r = env.run(&["history", "--search", "econnreset", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let found: Value = serde_json::from_str(r.stdout.trim()).expect("one turn");
    assert_eq!(found["turn"], turn.as_str());
    assert_eq!(found["match"]["field"], "context");
    assert_eq!(
        found["match"]["snippet"],
        "panic: ECONNRESET at conn.rs:42 "
    );
    // The latest turn, in the open segment, is found by the scan.
    let r = env.run_stdin(&["send", "and this?"], "EADDRINUSE on port 8080\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = env.run(&["history", "--search", "eaddrinuse"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("[context: EADDRINUSE on port 8080 ]"),
        "{}",
        r.stdout
    );
    // show prints it.
    let r = env.run(&["show", &turn]);
    snap!("show_piped", env.snap(&r));
    // A long one: its first 20 lines, and how to see the rest.
    let long: String = (1..=100).map(|i| format!("log line {i}\n")).collect();
    let r = env.run_stdin(&["send", "summarize"], &long);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = env.run(&["show", "@"]);
    assert!(r.stdout.contains("  log line 20\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("log line 21\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("… 962 more bytes (`axocoatl show "),
        "{}",
        r.stdout
    );
    let r = env.run(&["show", "@", "--full"]);
    assert!(r.stdout.contains("  log line 100\n"), "{}", r.stdout);
    assert!(!r.stdout.contains("more bytes"), "{}", r.stdout);
    // A markdown export carries it whole.
    let r = env.run(&["export"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("**Context** `stdin`\n\n```\npanic: ECONNRESET at conn.rs:42\n```\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("log line 100\n```"), "{}", r.stdout);
}
