//! The local model stays loaded in the processes that run many turns: a `chat` loads it for
//! its first line only, a `serve` actor once for all the turns sent through it.

#![cfg(feature = "local")]

use std::process::Stdio;

use crate::common::env::{wait_until, TestEnv};
use crate::common::procs::Serve;
use crate::common::pty::Pty;

fn model_path() -> std::path::PathBuf {
    let path = axocoatl::config::local_model_path(&|k| std::env::var(k).ok()).expect("HOME");
    assert!(
        path.is_file(),
        "{} missing: run scripts/fetch-model.sh",
        path.display()
    );
    path
}

const CONFIG: &str =
    "agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: 3, temperature: 0}\n";

/// The states of the turns of `session`, oldest first.
fn states(env: &TestEnv, session: &str) -> Vec<String> {
    let r = env.run(&["history", "--json", "-s", session]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json");
            v["state"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn chat_loads_the_local_model_for_its_first_line_only() {
    let mut env = TestEnv::with_config(CONFIG);
    env.set_env("AXOCOATL_MODEL", &model_path().to_string_lossy());
    let mut cmd = env.cmd(&["chat", "-s", "warm"]);
    cmd.stdout(Stdio::piped());
    // On a terminal, every load of the model is drawn as a progress line.
    let mut pty = Pty::attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn chat");
    let prompts = |pty: &Pty| pty.seen().matches("\rwarm> \x1b[K").count();
    for (line, text) in ["Name a color.\r", "Name a fruit.\r", "!retry\r"]
        .iter()
        .enumerate()
    {
        wait_until("the prompt", || prompts(&pty) > line);
        pty.type_keys(text);
    }
    wait_until("the last prompt", || prompts(&pty) > 3);
    pty.type_keys("\x04");
    let mut status = None;
    wait_until("chat to leave", || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let seen = pty.seen();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{seen}");
    assert_eq!(states(&env, "warm"), ["completed"; 3], "{seen}");
    assert_eq!(
        seen.matches("loading model SmolLM2-135M-Instruct.Q4_1.gguf")
            .count(),
        1,
        "three turns, one load: {seen:?}"
    );
}

#[test]
fn a_serve_actor_loads_the_local_model_once_for_all_its_turns() {
    let mut env = TestEnv::with_config(CONFIG);
    env.set_env("AXOCOATL_MODEL", &model_path().to_string_lossy());
    // The current session's actor starts with serve: the only one of this test.
    let serve = Serve::start(&env);
    for text in ["Name a color.", "Name a fruit.", "Name a tree."] {
        let r = env.run(&["send", text]);
        assert_eq!(r.code, 0, "{}\n{}", r.stderr, serve.logs());
    }
    assert_eq!(states(&env, "main"), ["completed"; 3]);
    let logs = serve.logs();
    assert_eq!(logs.matches("actor ready").count(), 1, "one actor: {logs}");
    assert_eq!(
        logs.matches("loaded the local model").count(),
        1,
        "three turns through serve, one load: {logs}"
    );
    assert_eq!(serve.terminate(), 0);
}
