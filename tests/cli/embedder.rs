//! The embedder's ready-to-run file through the real binary: made once by the first command
//! that needs it (or `util embedder`), by one of several processes starting together, again
//! when it is damaged or a process was killed while making it; and both engines recalling
//! from the same store. Each test works on its own copy of the model files.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::common::env::{Run, TestEnv};
use crate::common::fake_http::FakeServer;
use crate::common::ollama::ollama_text;

/// The installed model's directory (`scripts/fetch-model.sh` puts it there).
fn installed() -> PathBuf {
    if let Some(dir) = std::env::var_os("AXOCOATL_EMBED_DIR") {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let dir = cache.join("axocoatl/models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.onnx").is_file(),
        "{}: run scripts/fetch-model.sh first",
        dir.display()
    );
    dir
}

/// Copies of the two model files in a directory of `env`'s, which commands use.
fn copied_model(env: &mut TestEnv) -> PathBuf {
    let dir = env.tmp.path().join("model");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(installed().join(name), dir.join(name)).expect("copy");
    }
    env.set_env("AXOCOATL_EMBED_DIR", &dir.to_string_lossy());
    dir
}

fn prepare(env: &TestEnv) -> Run {
    env.run(&["util", "embedder"])
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ![
                "model.onnx",
                "tokenizer.json",
                "model.axoemb",
                "model.axoemb.lock",
            ]
            .contains(&n.as_str())
        })
        .collect()
}

#[test]
fn the_ready_file_is_made_once_then_mapped_and_made_again_when_damaged() {
    let mut env = TestEnv::new();
    let dir = copied_model(&mut env);
    let ready = dir.join("model.axoemb");
    let first = prepare(&env);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert!(
        first
            .stdout
            .starts_with(&format!("fast engine: {} (made in ", ready.display())),
        "{}",
        first.stdout
    );
    let made = std::fs::read(&ready).expect("made");
    let second = prepare(&env);
    assert!(second.stdout.contains("(mapped in "), "{}", second.stdout);
    assert_eq!(
        std::fs::read(&ready).expect("read"),
        made,
        "not written again"
    );
    // Cut short (a disk that lost its tail): made again, whole.
    std::fs::write(&ready, &made[..made.len() / 3]).expect("cut");
    let third = prepare(&env);
    assert!(third.stdout.contains("(made in "), "{}", third.stdout);
    assert_eq!(std::fs::read(&ready).expect("read"), made);
    // Not a model file at all: the same.
    std::fs::write(&ready, "garbage").expect("garbage");
    assert!(prepare(&env).stdout.contains("(made in "));
    assert_eq!(std::fs::read(&ready).expect("read"), made);
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn processes_starting_together_make_the_file_once() {
    let mut env = TestEnv::new();
    let dir = copied_model(&mut env);
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.cmd(&["util", "embedder"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let outs: Vec<Run> = children
        .into_iter()
        .map(|c| Run::from_output(c.wait_with_output().expect("wait")))
        .collect();
    for r in &outs {
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    }
    let made = outs
        .iter()
        .filter(|r| r.stdout.contains("(made in "))
        .count();
    assert_eq!(
        made,
        1,
        "{:?}",
        outs.iter().map(|r| &r.stdout).collect::<Vec<_>>()
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
}

#[test]
fn a_process_killed_while_making_the_file_leaves_nothing_the_next_one_trips_on() {
    let mut env = TestEnv::new();
    let dir = copied_model(&mut env);
    // Killed at several moments of making the file (loading the reference, converting,
    // writing, checking): whatever it left, the next command makes a good file.
    for after_ms in [50, 300, 700] {
        let _ = std::fs::remove_file(dir.join("model.axoemb"));
        let mut child = env
            .cmd(&["util", "embedder"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        let r = prepare(&env);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.starts_with("fast engine: "), "{}", r.stdout);
        assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    }
}

#[test]
fn a_file_that_cannot_be_made_leaves_the_reference_engine_and_says_why() {
    let mut env = TestEnv::new();
    let dir = copied_model(&mut env);
    // A directory where the file goes: nothing can be renamed over it.
    std::fs::create_dir_all(dir.join("model.axoemb").join("occupied")).expect("mkdir");
    let r = prepare(&env);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("reference engine: "), "{}", r.stdout);
    assert!(r.stderr.contains("making it failed"), "{}", r.stderr);
}

fn system_prompt(request: &Value) -> String {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned()
}

#[test]
fn both_engines_recall_from_the_same_store() {
    let server = FakeServer::start();
    for _ in 0..2 {
        server.push(ollama_text("Noted."));
    }
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n    memory: {{recall: {{passive_inject: true, top_k: 2, min_score: 0.3}}}}\n",
        server.url()
    ));
    copied_model(&mut env);
    let run = |engine: &str, args: &[&str]| {
        let out = env
            .cmd(args)
            .env("AXOCOATL_EMBED_ENGINE", engine)
            .output()
            .expect("axocoatl");
        let r = Run::from_output(out);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    };
    // Each fact retained by one engine is recalled by the other (the facts are added, not
    // exchanges: a session's own exchanges are in its window and never recalled).
    run(
        "fast",
        &[
            "memory",
            "add",
            "-a",
            "a",
            "My cat is called Pixel and she hates the vacuum cleaner.",
        ],
    );
    run(
        "reference",
        &[
            "memory",
            "add",
            "-a",
            "a",
            "My sister lives in Lisbon and works as a nurse.",
        ],
    );
    run(
        "reference",
        &[
            "send",
            "--no-stdin",
            "-a",
            "a",
            "What is the name of my pet?",
        ],
    );
    run(
        "fast",
        &[
            "send",
            "--no-stdin",
            "-a",
            "a",
            "Which city is my sister in?",
        ],
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for (r, fact) in requests.iter().zip(["Pixel", "Lisbon"]) {
        let prompt = system_prompt(&r.json());
        assert!(
            prompt.contains("<recalled_memory>") && prompt.contains(fact),
            "{prompt}"
        );
    }
}
