//! `send -n` run many times at once (`xargs -P`, `parallel`): each gets a session of its
//! own, and each request the model receives holds only its own prompt.

use std::collections::HashSet;
use std::process::Stdio;

use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_env, ollama_text};

/// The user and assistant messages of an Ollama `/api/chat` request (the system prompt and
/// memory sections left out).
fn exchange(body: &serde_json::Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_owned(),
                m["content"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn concurrent_new_sessions_never_share_a_conversation() {
    const AT_ONCE: usize = 8;
    const ROUNDS: usize = 3;
    let server = FakeServer::responding(|request| {
        let asked = exchange(&request.json())
            .last()
            .map(|(_, text)| text.clone())
            .unwrap_or_default();
        ollama_text(&format!("answer to {asked}"))
    });
    let env = ollama_env(&server);
    let mut sessions = HashSet::new();
    for round in 0..ROUNDS {
        // Every send of a round starts before any has ended: the clock is pinned, so all of
        // them want the same time-based name.
        let children: Vec<_> = (0..AT_ONCE)
            .map(|i| {
                let prompt = format!("prompt {round}-{i}");
                let child = env
                    .cmd(&["send", "-n", &prompt])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn");
                (prompt, child)
            })
            .collect();
        for (prompt, child) in children {
            let out = child.wait_with_output().expect("wait");
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(0), "{prompt}: {stderr}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("answer to {prompt}"),
                "{stderr}"
            );
            let session = stderr
                .lines()
                .find_map(|l| l.strip_prefix("session "))
                .and_then(|l| l.strip_suffix(" (new, now current)"))
                .unwrap_or_else(|| panic!("no new session named: {stderr}"))
                .to_owned();
            assert!(
                sessions.insert(session.clone()),
                "session {session} was given twice ({prompt})"
            );
        }
    }
    assert_eq!(sessions.len(), AT_ONCE * ROUNDS);
    let requests = server.requests();
    assert_eq!(requests.len(), AT_ONCE * ROUNDS);
    for request in &requests {
        let messages = exchange(&request.json());
        assert_eq!(
            messages.len(),
            1,
            "a request carried another send's exchange: {messages:?}"
        );
        assert_eq!(messages[0].0, "user");
        assert!(messages[0].1.starts_with("prompt "), "{messages:?}");
    }
    // Every session holds one turn, its own.
    let r = env.run(&["sessions", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    for name in &sessions {
        let s = listed
            .iter()
            .find(|s| s["session"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not listed: {}", r.stdout));
        assert_eq!(s["turns"], 1, "{s}");
    }
}
