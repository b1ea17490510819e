//! What users of git, ripgrep and `llm` reach for: hints for their habits, `--version` with
//! the commit and build date, completions of models, options and names, man pages with
//! the sections they look for, `chat`'s exit status.

use std::path::Path;

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::ollama::{ollama_env, ollama_text};

#[test]
fn habits_of_other_tools_get_hints() {
    let env = TestEnv::with_config("agents:\n  - {id: assistant, provider: local}\n");
    let r = env.run(&["send", "-s", "be terse", "What is 2+2?"]);
    snap!("dash_s_is_a_session", env.snap(&r));
    let r = env.run(&["log"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("tip: a similar subcommand exists: 'history'"),
        "{}",
        r.stderr
    );
    let r = env.run(&["logs", "-n", "3"]);
    assert!(r.stderr.contains("'history'"), "{}", r.stderr);
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let env = TestEnv::new();
    let r = env.run(&["--version"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r.stdout.trim();
    let re = regex::Regex::new(
        r"^axocoatl \d+\.\d+\.\d+ \((commit [0-9a-f]{12}, )?built \d{4}-\d\d-\d\d\)$",
    )
    .expect("re");
    assert!(re.is_match(line), "{line}");
    // This test runs from a git checkout: the commit is named.
    if Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists() {
        assert!(line.contains("(commit "), "{line}");
    }
    // Subcommands say the same, after their own name.
    let sub = env.run(&["send", "--version"]).stdout;
    assert_eq!(
        sub.trim().strip_prefix("axocoatl-send"),
        line.strip_prefix("axocoatl")
    );
}

/// The values the completion of `line` (the words after `axocoatl`) offers, from `dir`
/// (fish's protocol: one candidate per line, then a tab and its help; options left out).
fn complete(env: &TestEnv, dir: &Path, line: &[&str]) -> Vec<String> {
    let mut cmd = env.cmd(&[]);
    cmd.current_dir(dir)
        .env("COMPLETE", "fish")
        .arg("--")
        .arg("axocoatl")
        .args(line);
    let out = cmd.output().expect("complete");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('-'))
        .map(|l| l.split('\t').next().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn completions_offer_models_options_and_names() {
    let server = FakeServer::responding(|r| {
        if r.path.ends_with("/api/tags") {
            Reply::json(
                200,
                r#"{"models":[{"name":"llama3.2:latest"},{"name":"qwen2.5:7b"}]}"#,
            )
        } else {
            ollama_text("ok")
        }
    });
    let env = ollama_env(&server);
    std::fs::write(
        env.work.join("axocoatl.yaml"),
        format!(
            "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\nautomations:\n  - {{id: brief, schedule: \"0 8 * * *\", agent: helper, request: hi}}\n",
            server.url()
        ),
    )
    .expect("config");
    let work = env.work.clone();
    let models = complete(&env, &work, &["send", "-m", ""]);
    for want in [
        "llm:",
        "ollama:",
        "local:",
        "qwen2.5:7b",
        "llm:llama3.2:latest",
    ] {
        assert!(models.iter().any(|m| m == want), "{want}: {models:?}");
    }
    let options = complete(&env, &work, &["send", "-o", "te"]);
    assert_eq!(options, ["temperature="]);
    let fetch = complete(&env, &work, &["models", "fetch", ""]);
    assert!(
        fetch.iter().any(|m| m == "smollm2-135m-instruct"),
        "{fetch:?}"
    );
    let runs = complete(&env, &work, &["automations", "run", ""]);
    assert_eq!(runs, ["brief"]);
    env.write("notes.md", "Ship on Friday.\n");
    let r = env.run(&["attach", "add", "notes.md", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reference: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    let reference = reference["reference"]
        .as_str()
        .expect("reference")
        .to_owned();
    for sub in ["cat", "rm"] {
        let refs = complete(&env, &work, &["attach", sub, ""]);
        assert_eq!(refs, [reference.as_str()], "attach {sub}");
    }
    // stop offers only turns that run: none now, though the session has one.
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    assert!(complete(&env, &work, &["stop", ""]).is_empty());
    let shown = complete(&env, &work, &["show", ""]);
    assert!(
        shown.len() >= 2 && shown.iter().any(|s| s == "@"),
        "{shown:?}"
    );
}

#[test]
fn man_pages_name_values_and_have_the_sections_readers_look_for() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let top = std::fs::read_to_string(root.join("man/axocoatl.1")).expect("man page");
    for section in [".SH ENVIRONMENT", ".SH FILES", ".SH \"EXIT STATUS\""] {
        assert!(top.contains(section), "{section}");
    }
    assert!(top.contains("\\fBAXOCOATL_DIR\\fR"), "{top}");
    let send = std::fs::read_to_string(root.join("man/axocoatl-send.1")).expect("man page");
    assert!(
        send.contains("[\\fB\\-s\\fR|\\fB\\-\\-session\\fR \\fISESSION\\fR]"),
        "{send}"
    );
    assert!(
        send.contains("\\fB\\-m\\fR|\\fB\\-\\-model\\fR \\fIMODEL\\fR"),
        "{send}"
    );
    assert!(send.contains(".SH \"EXIT STATUS\""), "{send}");
    // The version alone: a build's commit and date would change them at every build.
    assert!(!top.contains("commit "), "{top}");
}

#[test]
fn chat_leaves_with_0_whatever_its_last_turn_did() {
    // No reply is queued: the server answers 500, and the turn fails.
    let server = FakeServer::start();
    let env = ollama_env(&server);
    let r = env.run_stdin(&["chat"], "hi\n");
    assert!(r.stderr.contains("failed"), "{}", r.stderr);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let help = env.run(&["chat", "--help"]);
    assert!(
        help.stdout.contains("Exit status: 0 when it leaves"),
        "{}",
        help.stdout
    );
}
