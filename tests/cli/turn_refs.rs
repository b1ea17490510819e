//! `@` and `@~N`: the current session's latest turn and the ones before it, wherever a
//! command takes a turn; `history -n N`; a search that finds nothing exits 1.

use serde_json::Value;

use crate::common::env::TestEnv;
use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_env, ollama_text};

/// A repository whose model answers `answer to <request>`, with three turns in `main`.
fn three_turns() -> (FakeServer, TestEnv, Vec<String>) {
    let server = FakeServer::responding(|r| {
        let body = r.json();
        let asked = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned();
        ollama_text(&format!("answer to {asked}"))
    });
    let env = ollama_env(&server);
    let turns = ["one", "two", "three"]
        .iter()
        .map(|m| {
            let r = env.run(&["send", m]);
            assert_eq!(r.code, 0, "{}", r.stderr);
            r.stderr.lines().next().expect("turn line")[5..].to_owned()
        })
        .collect();
    (server, env, turns)
}

fn shown(env: &TestEnv, reference: &str) -> Value {
    let r = env.run(&["show", reference, "--json"]);
    assert_eq!(r.code, 0, "show {reference}: {}", r.stderr);
    serde_json::from_str(&r.stdout).expect("json")
}

#[test]
fn references_name_the_latest_turns_of_the_current_session() {
    let (server, env, turns) = three_turns();
    assert_eq!(shown(&env, "@")["turn"], turns[2].as_str());
    assert_eq!(shown(&env, "@~")["turn"], turns[1].as_str());
    assert_eq!(shown(&env, "@~2")["request"], "one");
    // Past the first turn: exit 7, naming the session.
    let r = env.run(&["show", "@~3"]);
    snap!("past_the_first", env.snap(&r));
    // Not a reference at all: a usage error.
    let r = env.run(&["show", "@x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    // retry @ repeats the latest request.
    let r = env.run(&["retry", "@"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "answer to three");
    let retried = shown(&env, "@");
    assert_eq!(retried["retry_of"], turns[2].as_str());
    // stop @ of a turn that ended: exit 6, as for its id.
    let r = env.run(&["stop", "@"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    // rewind @~2 supersedes `two`, `three` and the retry.
    let r = env.run(&["rewind", "@~2", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "two");
    // Another session's references are its own; a new session has none.
    let r = env.run(&["send", "-s", "other", "four"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = env.run(&["rewind", "@", "-s", "other", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "four");
    let r = env.run(&["sessions", "new", "empty"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = env.run(&["show", "@"]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr.contains("session \"empty\" has no turns yet"),
        "{}",
        r.stderr
    );
    assert_eq!(server.request_count(), 5);
}

#[test]
fn history_takes_n_and_a_search_without_matches_exits_1() {
    let (_server, env, turns) = three_turns();
    let r = env.run(&["history", "-n", "2", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let ids: Vec<&str> = listed.iter().filter_map(|t| t["turn"].as_str()).collect();
    assert_eq!(ids, [turns[1].as_str(), turns[2].as_str()]);
    // As grep: found is 0, nothing found is 1.
    assert_eq!(env.run(&["history", "--search", "two"]).code, 0);
    let r = env.run(&["history", "--search", "nowhere"]);
    snap!("search_finds_nothing", env.snap(&r));
    let r = env.run(&["history", "--all", "--search", "nowhere", "--json"]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
}
