//! A session on the local model keeps the model's attention cache beside its checkpoint:
//! written after a turn, read by the next process, verified, dropped by a rewind, and never
//! changing an answer.
#![cfg(feature = "local")]

use std::path::{Path, PathBuf};

use crate::common::env::TestEnv;

fn model() -> PathBuf {
    let model = axocoatl::config::local_model_path(&|k| std::env::var(k).ok()).expect("HOME");
    assert!(
        model.is_file(),
        "{} missing: run scripts/fetch-model.sh",
        model.display()
    );
    model
}

/// The attention caches under the repository's checkpoints.
fn caches(repo: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dir = repo.join("checkpoints/v1");
    for component in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let file = component.path().join("attention.cache");
        if file.is_file() {
            out.push(file);
        }
    }
    out
}

/// Sends `message` greedily; the answer and the turn's id.
fn send(env: &TestEnv, model: &Path, message: &str) -> (String, String) {
    let out = env
        .cmd(&[
            "send",
            "-o",
            "temperature=0",
            "-o",
            "max_tokens=12",
            message,
        ])
        .env("AXOCOATL_MODEL", model)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let turn = stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("the turn's id")
        .trim()
        .to_string();
    (String::from_utf8_lossy(&out.stdout).into_owned(), turn)
}

#[test]
fn a_session_keeps_its_attention_cache_and_a_rewind_drops_it() {
    let model = model();
    let env = TestEnv::with_config("agents:\n  - id: a\n    provider: local\n");
    let repo = env.repo();
    send(&env, &model, "Name three colors.");
    let cache = caches(&repo);
    assert_eq!(cache.len(), 1, "one cache, beside the agent's checkpoint");
    let cache = cache.into_iter().next().unwrap_or_default();
    let first = std::fs::read(&cache).expect("cache");
    assert!(!first.is_empty() && first.len() <= 64 << 20);

    let (second, turn) = send(&env, &model, "Which of them is the darkest?");
    let grown = std::fs::read(&cache).expect("cache");
    assert!(
        grown.len() > first.len(),
        "the cache grows with the conversation"
    );

    // A rewind drops it; the same turn sent again reads the whole conversation and
    // answers the same.
    let out = env
        .cmd(&["rewind", &turn, "--yes"])
        .env("AXOCOATL_MODEL", &model)
        .output()
        .expect("rewind");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!cache.exists(), "the rewind dropped the cache");
    let (again, _) = send(&env, &model, "Which of them is the darkest?");
    assert_eq!(
        again, second,
        "the same greedy answer with and without the cache"
    );
    assert!(cache.exists(), "made again");

    // A damaged cache is not read (its hash fails) and is replaced; the answer is the one the
    // conversation gives without it.
    let mut damaged = std::fs::read(&cache).expect("cache");
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x01;
    std::fs::write(&cache, &damaged).expect("damage");
    let (third, turn) = send(&env, &model, "And the lightest?");
    let rewritten = std::fs::read(&cache).expect("cache");
    assert_ne!(rewritten, damaged, "replaced by a good one");
    let out = env
        .cmd(&["rewind", &turn, "--yes"])
        .env("AXOCOATL_MODEL", &model)
        .output()
        .expect("rewind");
    assert_eq!(out.status.code(), Some(0));
    let (without, _) = send(&env, &model, "And the lightest?");
    assert_eq!(third, without);
}

/// A ready-to-run copy an earlier build kept is shown by `models list` with its size, as
/// stale, and the next load of the model removes it.
#[test]
fn models_list_shows_a_stale_ready_copy_and_a_load_removes_it() {
    let model = model();
    let env = TestEnv::with_config("agents:\n  - id: a\n    provider: local\n");
    let ready = env.home.join(".cache/axocoatl/models/ready");
    std::fs::create_dir_all(&ready).expect("ready dir");
    let copy = ready.join("SmolLM2-135M-Instruct.Q4_1-0123456789abcdef.q8_0.gguf");
    std::fs::write(&copy, vec![0u8; 3 << 20]).expect("copy");
    let r = env.run(&["models", "list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "stale     {} (3.0 MiB, an earlier build's ready-to-run copy; the next load removes it)",
            copy.display()
        )),
        "{}",
        r.stdout
    );
    send(&env, &model, "Hi.");
    assert!(!copy.exists(), "the load removed the stale copy");
    let r = env.run(&["models", "list"]);
    assert!(!r.stdout.contains("stale"), "{}", r.stdout);
}
