//! The home repository, outside any project: each directory has its own current session,
//! agents' tools work in the directory the command runs in, `show` says which, and reading
//! commands make nothing.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Recorded, Reply};
use crate::common::ollama::{ollama_call, ollama_stream, ollama_text};

fn messages(r: &Recorded) -> Vec<Value> {
    r.json()["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect()
}

/// Asked what README.md says, the model reads it with `read_file`, then answers with what
/// the tool returned; asked `slow`, it answers after a while; else it echoes.
fn model() -> FakeServer {
    FakeServer::responding(|r| {
        let m = messages(r);
        let last = m.last().cloned().unwrap_or_default();
        let content = last["content"].as_str().unwrap_or("").to_owned();
        match (last["role"].as_str(), content.as_str()) {
            (Some("user"), "what does README.md say?") => {
                ollama_call("read_file", json!({"path": "README.md"}))
            }
            (Some("tool"), text) => {
                let said = text.lines().find(|l| l.contains("project")).unwrap_or("");
                ollama_text(&format!("it says: {}", said.trim()))
            }
            // The answer begins after a pause: the turn is running meanwhile.
            (_, "slow") => Reply::new(200)
                .header("Content-Type", "application/x-ndjson")
                .delay(Duration::from_secs(3))
                .chunks_of(&ollama_stream(&["done slowly"]), "\n"),
            (_, text) => ollama_text(&format!("answer to {text}")),
        }
    })
}

#[test]
fn each_directory_has_its_own_session_and_its_tools_work_there() {
    let server = model();
    let env = TestEnv::new();
    let home_repo = env.home.join(".local/share/axocoatl/.axocoatl");
    let dir = |name: &str| {
        let d = env.tmp.path().join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("README.md"), format!("# {name}\nproject {name}\n")).expect("write");
        d
    };
    let (a, b, c) = (dir("a"), dir("b"), dir("c"));
    // Reading commands before the home repository exists: nothing to read, nothing made.
    let r = env.run_in(&a, &["history"]);
    snap!("read_before_home", env.snap(&r));
    for args in [&["sessions"][..], &["show", "@"], &["export"], &["usage"]] {
        let r = env.run_in(&a, args);
        assert_eq!(r.code, 10, "{args:?}: {}", r.stderr);
    }
    assert!(
        !home_repo.exists(),
        "a reading command made the home repository"
    );
    // Made by a command that writes; then its agent talks to the loopback model.
    assert_eq!(env.run_in(&c, &["sessions", "new", "setup"]).code, 0);
    std::fs::write(
        env.home.join(".local/share/axocoatl/axocoatl.yaml"),
        format!(
            "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
            server.url()
        ),
    )
    .expect("config");
    // The tools read the README of the directory the command runs in.
    let r = env.run_in(&a, &["send", "what does README.md say?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "it says: project a");
    let in_dir_a = r.stderr.lines().next().expect("turn line")[5..].to_owned();
    let r = env.run_in(&b, &["send", "what does README.md say?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "it says: project b");
    // b's conversation does not carry a's exchange.
    let requests = server.requests();
    let first_of_b = &requests[2];
    assert_eq!(messages(first_of_b).len(), 1, "{:?}", messages(first_of_b));
    // Each directory's current session, named after it; `show` says where a turn worked.
    let current = |d: &std::path::Path| -> String {
        let r = env.run_in(d, &["sessions", "--json"]);
        r.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .find(|s| s["current"] == true)
            .and_then(|s| s["session"].as_str().map(str::to_owned))
            .expect("a current session")
    };
    let (in_a, in_b) = (current(&a), current(&b));
    assert!(
        in_a.starts_with("a-") && in_b.starts_with("b-"),
        "{in_a} {in_b}"
    );
    assert_eq!(current(&c), "setup");
    let r = env.run_in(&a, &["show", "@"]);
    snap!("show_workdir", env.snap(&r).replace(&in_a, "[SESSION]"));
    // A second send in a continues a's conversation.
    assert_eq!(env.run_in(&a, &["send", "more"]).code, 0);
    assert_eq!(messages(&server.requests()[4]).len(), 5);
    // Terminals in two directories never wait on each other: b sends while a's turn runs.
    let mut slow = env
        .cmd(&["send", "slow"])
        .current_dir(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = slow.stderr.take().expect("stderr");
    crate::common::env::read_until(&mut err, "turn ");
    let r = env.run_in(&b, &["send", "quick"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "answer to quick");
    assert!(
        slow.try_wait().expect("wait").is_none(),
        "a's turn still runs"
    );
    assert_eq!(slow.wait().expect("wait").code(), Some(0));
    // `-n` in one directory changes only that directory's session.
    assert_eq!(env.run_in(&b, &["send", "-n", "fresh"]).code, 0);
    assert_eq!(current(&a), in_a);
    assert_ne!(current(&b), in_b);
    // A retry repeats the request where it worked, wherever it is typed; not when that
    // directory is gone.
    let r = env.run_in(&b, &["retry", &in_dir_a]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "it says: project a");
    let gone = dir("gone");
    let r = env.run_in(&gone, &["send", "what does README.md say?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let in_gone = r.stderr.lines().next().expect("turn line")[5..].to_owned();
    std::fs::remove_dir_all(&gone).expect("rm");
    let r = env.run_in(&b, &["retry", &in_gone]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(r.stderr.contains("no longer a directory"), "{}", r.stderr);
}
