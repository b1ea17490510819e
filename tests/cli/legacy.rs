//! Pre-1.0 compatibility inputs and the 0.1.x checkpoint import, through the real binary.
//!
//! `tests/fixtures/legacy/` holds one file (or directory) of every pre-1.0 layout, as they
//! lie under `.axocoatl/`, written by `make_legacy_fixture` below:
//!
//! `AXOCOATL_WRITE_FIXTURE=1 cargo test --test cli legacy::make_legacy_fixture -- --ignored`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use axocoatl_store::automation::{RunRecord, RunState, Runner, Trigger};
use axocoatl_store::legacy::checkpoint::{self as v0, Message, Role, ToolCall, Transcript};
use axocoatl_store::memory::{LogKind, LogRecord};

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::procs::json_lines as lines;

/// 2025-01-01T10:00:00Z: when the 0.1.x checkpoints were saved.
const SAVED_AT: i64 = 1_735_725_600_000;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy")
}

fn msg(role: Role, content: &str) -> Message {
    Message {
        role,
        content: content.into(),
        tool_calls: vec![],
        tool_call_id: None,
        name: None,
    }
}

fn call(id: &str, name: &str, arguments: &str) -> Message {
    let mut m = msg(Role::Assistant, "");
    m.tool_calls.push(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    });
    m
}

fn result(id: &str, name: &str, content: &str) -> Message {
    let mut m = msg(Role::Tool, content);
    m.tool_call_id = Some(id.into());
    m.name = Some(name.into());
    m
}

/// Session `main`: three turns, the last one without an answer.
fn main_transcript() -> Transcript {
    Transcript {
        agent: "main:assistant".into(),
        saved_at: SAVED_AT,
        messages: vec![
            msg(Role::System, "You are a helpful assistant."),
            msg(Role::User, "What is in notes.txt?"),
            call("c1", "read_file", r#"{"path":"notes.txt"}"#),
            result("c1", "read_file", "buy milk"),
            msg(Role::Assistant, "It says: buy milk."),
            msg(Role::User, "Thanks. Remind me tomorrow."),
            msg(Role::Assistant, "I will remind you tomorrow."),
            msg(Role::User, "And what about eggs?"),
        ],
    }
}

/// Session `notes` (postcard): a completed turn, then one cut off during a tool call.
fn notes_transcript() -> Transcript {
    Transcript {
        agent: "notes:assistant".into(),
        saved_at: SAVED_AT,
        messages: vec![
            msg(Role::User, "Summarize the plan."),
            msg(Role::Assistant, "The plan: ship on Friday."),
            msg(Role::User, "Check the calendar."),
            call("k1", "list_dir", r#"{"path":"."}"#),
        ],
    }
}

fn team_transcript(agent: &str) -> Transcript {
    Transcript {
        agent: format!("team:{agent}"),
        saved_at: SAVED_AT,
        messages: vec![
            msg(Role::User, "Plan the release."),
            msg(Role::Assistant, "Done."),
        ],
    }
}

fn run_record(occurrence: i64) -> RunRecord {
    RunRecord {
        version: 1,
        automation: "brief".into(),
        trigger: Trigger::Schedule,
        occurrence,
        nonce: None,
        span: None,
        state: RunState::Completed,
        claimed_at: occurrence + 5,
        runner: Runner {
            kind: "tick".into(),
            pid: 4242,
        },
        session: Some("brief".into()),
        turn: None,
        started_at: Some(occurrence + 10),
        ended_at: Some(occurrence + 2_000),
        reason: None,
    }
}

/// Every file of the fixture, relative to `.axocoatl/`, and its bytes.
fn fixture_files() -> BTreeMap<String, Vec<u8>> {
    let mut f = BTreeMap::new();
    let mut old = main_transcript();
    old.messages.truncate(2);
    f.insert(
        "checkpoints/main%3aassistant/00000000000000000003.json".into(),
        v0::encode_json(&old),
    );
    f.insert(
        "checkpoints/main%3aassistant/00000000000000000007.json".into(),
        v0::encode_json(&main_transcript()),
    );
    f.insert(
        "checkpoints/notes%3aassistant/00000000000000000002.ckpt".into(),
        v0::encode_postcard(&notes_transcript()),
    );
    for agent in ["lead", "writer"] {
        f.insert(
            format!("checkpoints/team%3a{agent}/00000000000000000001.json"),
            v0::encode_json(&team_transcript(agent)),
        );
    }
    f.insert(
        "memory/core/main%3aassistant.json".into(),
        br#"{"version": 1, "blocks": {"human": "Prefers short answers.", "project": "The 0.1.x notes app."}}"#
            .to_vec(),
    );
    f.insert(
        "memory/core/shared/team.json".into(),
        br#"{"version": 1, "blocks": {"team": "Release on Fridays."}}"#.to_vec(),
    );
    let mut log = Vec::new();
    for (ms, kind, text) in [
        (SAVED_AT - 60_000, LogKind::Request, "What is in notes.txt?"),
        (SAVED_AT - 30_000, LogKind::Answer, "It says: buy milk."),
    ] {
        serde_json::to_writer(&mut log, &LogRecord::new(ms, kind, None, text)).expect("json");
        log.push(b'\n');
    }
    f.insert(
        "memory/daily_log/main%3aassistant/2025-01-01.jsonl".into(),
        log,
    );
    let done = run_record(1_735_722_000_000); // 2025-01-01T09:00:00Z
    let mut bytes = serde_json::to_vec_pretty(&done).expect("json");
    bytes.push(b'\n');
    f.insert(format!("automation/runs/brief/{}", done.file_name()), bytes);
    // A record whose content says another occurrence than its file name: never copied.
    let moved = run_record(1_735_808_400_000);
    let mut bytes = serde_json::to_vec_pretty(&moved).expect("json");
    bytes.push(b'\n');
    f.insert(
        "automation/runs/brief/20250103T090000.000Z.json".into(),
        bytes,
    );
    f
}

#[test]
#[ignore = "writes the committed fixture; run by hand when it changes"]
fn make_legacy_fixture() {
    if std::env::var_os("AXOCOATL_WRITE_FIXTURE").is_none() {
        return;
    }
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    for (rel, bytes) in fixture_files() {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
}

#[test]
fn the_committed_fixture_is_what_the_helper_writes() {
    for (rel, bytes) in fixture_files() {
        let on_disk = std::fs::read(fixture_dir().join(&rel)).expect(&rel);
        assert!(on_disk == bytes, "{rel} differs: run make_legacy_fixture");
    }
}

fn config(server: &FakeServer) -> String {
    format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: assistant\n    provider: llm\n    model: m\n    memory:\n      core:\n        blocks:\n          - {{label: human, limit: 2000}}\n          - {{label: project, limit: 2000}}\n          - {{label: team, limit: 1000, shared: true}}\nautomations:\n  - id: brief\n    schedule: \"0 9 * * *\"\n    timezone: UTC\n    agent: assistant\n    request: Brief me.\n    enabled: false\n",
        server.url()
    )
}

/// A repository with the fixture laid over it (`only`: just the files under these
/// prefixes).
fn legacy_env(server: &FakeServer, only: &[&str]) -> TestEnv {
    let env = TestEnv::with_config(&config(server));
    for (rel, _) in fixture_files() {
        if !only.is_empty() && !only.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let to = env.repo().join(&rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        std::fs::copy(fixture_dir().join(&rel), to).expect("copy");
    }
    env
}

/// The bytes of every fixture file as it lies in `env`: must never change.
fn legacy_bytes(env: &TestEnv) -> BTreeMap<String, Vec<u8>> {
    fixture_files()
        .into_keys()
        .filter_map(|rel| Some((rel.clone(), std::fs::read(env.repo().join(&rel)).ok()?)))
        .collect()
}

fn history(env: &TestEnv, session: &str) -> Vec<serde_json::Value> {
    let r = env.run(&["history", "--json", "-s", session]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    lines(&r.stdout)
}

fn kinds(env: &TestEnv, kind: &str) -> usize {
    env.run(&["util", "ledger-dump"])
        .stdout
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(kind))
        .count()
}

#[test]
fn fsck_and_import_dry_run_list_every_legacy_input_and_change_nothing() {
    let server = FakeServer::start();
    let env = legacy_env(&server, &[]);
    let before = legacy_bytes(&env);
    assert_eq!(before.len(), fixture_files().len());
    let fsck = env.run(&["fsck"]);
    snap!("fsck", env.snap(&fsck));
    let dry = env.run(&["import", "--dry-run"]);
    snap!("import_dry_run", env.snap(&dry));
    let json = env.run(&["import", "--dry-run", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let out = lines(&json.stdout);
    let main = out
        .iter()
        .find(|l| l["type"] == "checkpoint" && l["session"] == "main")
        .expect("main");
    assert_eq!(main["state"], "pending");
    assert_eq!(
        main["source"], "checkpoints/main%3aassistant/00000000000000000007.json",
        "the newest 0.1.x checkpoint"
    );
    assert_eq!(
        (main["turns"].as_u64(), main["interrupted"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(kinds(&env, "TurnBegun"), 0, "a dry run writes nothing");
    assert_eq!(legacy_bytes(&env), before);
}

#[test]
fn import_commits_the_transcript_then_a_checkpoint_once() {
    let server = FakeServer::start();
    let env = legacy_env(&server, &[]);
    let before = legacy_bytes(&env);
    let r = env.run(&["import"]);
    snap!("import", env.snap(&r));
    let h = history(&env, "main");
    let states: Vec<(&str, &str)> = h
        .iter()
        .map(|t| {
            (
                t["request"].as_str().unwrap_or(""),
                t["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("What is in notes.txt?", "completed"),
            ("Thanks. Remind me tomorrow.", "completed"),
            ("And what about eggs?", "interrupted"),
        ]
    );
    assert_eq!(h[0]["output"], "It says: buy milk.");
    assert_eq!(h[0]["tools"][0]["name"], "read_file");
    assert_eq!(h[0]["tools"][0]["output"], "buy milk");
    let show = env.run(&["show", h[2]["turn"].as_str().expect("id")]);
    snap!("show_interrupted", env.snap(&show));
    // The postcard one: its second turn stopped at a tool call without a result.
    let notes = history(&env, "notes");
    assert_eq!(notes.len(), 2);
    assert_eq!(notes[0]["state"], "completed");
    assert_eq!(notes[1]["state"], "interrupted");
    assert!(
        history(&env, "team").is_empty(),
        "a multi-agent session is not imported"
    );
    // Then a current checkpoint of the completed turns.
    let ck = env.run(&["util", "checkpoints", "main", "assistant"]);
    let ck = lines(&ck.stdout);
    assert_eq!(ck.len(), 1, "{ck:?}");
    assert_eq!(ck[0]["head_turn"], h[1]["turn"]);
    // Again, and on every open: nothing more.
    let begun = kinds(&env, "TurnBegun");
    assert_eq!(begun, 5);
    let again = env.run(&["import"]);
    snap!("import_again", env.snap(&again));
    assert_eq!(history(&env, "main"), h);
    assert_eq!(kinds(&env, "TurnBegun"), begun);
    assert_eq!(kinds(&env, "LegacyImportEnded"), 2);
    // The configured automation's records that match their path were copied.
    let runs = env.repo().join("automation/runs-v1/brief");
    assert!(runs.join("20250101T090000.000Z.json").is_file());
    assert!(!runs.join("20250103T090000.000Z.json").exists());
    assert_eq!(
        legacy_bytes(&env),
        before,
        "pre-1.0 sources are never changed"
    );
}

#[test]
fn the_next_turn_continues_the_imported_conversation() {
    let server = FakeServer::start();
    let env = legacy_env(&server, &["checkpoints/main"]);
    let done = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
        "prompt_eval_count": 10, "eval_count": 1});
    let line = serde_json::json!({"model": "m", "created_at": "2026-01-02T03:04:05Z",
        "message": {"role": "assistant", "content": "Eggs too."}, "done": false});
    server.push(Reply::ndjson(&format!("{line}\n{done}\n")));
    // No explicit import: opening the repository imports before the turn begins.
    let r = env.run(&["send", "-s", "main", "Anything else?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let req = server.requests()[0].json();
    let sent: Vec<(String, String)> = req["messages"]
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
        .collect();
    let want = [
        ("user", "What is in notes.txt?"),
        ("assistant", ""),
        ("tool", "buy milk"),
        ("assistant", "It says: buy milk."),
        ("user", "Thanks. Remind me tomorrow."),
        ("assistant", "I will remind you tomorrow."),
        ("user", "Anything else?"),
    ];
    assert_eq!(
        sent,
        want.map(|(a, b)| (a.to_owned(), b.to_owned())),
        "the completed imported turns, then the new request"
    );
    assert_eq!(history(&env, "main").len(), 4);
}

#[test]
fn core_memory_and_daily_log_read_the_legacy_files_and_write_only_v1() {
    let server = FakeServer::start();
    let env = legacy_env(&server, &["memory/"]);
    let before = legacy_bytes(&env);
    let core = env.run(&["memory", "core", "-s", "main", "-a", "assistant"]);
    snap!("core_from_legacy", env.snap(&core));
    let log = env.run(&[
        "memory",
        "log",
        "-s",
        "main",
        "-a",
        "assistant",
        "--from",
        "2025-01-01",
    ]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("It says: buy milk."), "{}", log.stdout);
    let set = env.run(&[
        "memory",
        "core",
        "-s",
        "main",
        "-a",
        "assistant",
        "set",
        "project",
        "The 1.0 app.",
    ]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    let shown = env.run(&[
        "memory",
        "core",
        "-s",
        "main",
        "-a",
        "assistant",
        "show",
        "human",
    ]);
    assert_eq!(
        shown.stdout.trim(),
        "Prefers short answers.",
        "kept from the legacy file"
    );
    assert!(env
        .repo()
        .join("memory/core/v1/main%3aassistant.json")
        .is_file());
    assert_eq!(legacy_bytes(&env), before);
}

/// Kills `axocoatl import` (SIGKILL) after each of its steps; the next command finishes the
/// import, and the result is the same as an import never interrupted.
#[test]
fn kill_9_at_each_import_step_ends_in_the_same_history() {
    let server = FakeServer::start();
    let reference = {
        let env = legacy_env(&server, &["checkpoints/main"]);
        assert_eq!(env.run(&["import"]).code, 0);
        history(&env, "main")
    };
    assert_eq!(reference.len(), 3);
    let ck_dir = |env: &TestEnv| env.repo().join("checkpoints/v1/main%3aassistant");
    for step in ["begun", "turn-1", "turn-2", "turn-3", "ended", "checkpoint"] {
        let failpoint = match step.split_once('-') {
            Some((_, n)) => format!("legacy.import.turn=sleep(60000)@{n}"),
            None => format!("legacy.import.{step}=sleep(60000)"),
        };
        let mut env = legacy_env(&server, &["checkpoints/main"]);
        let before = legacy_bytes(&env);
        env.set_env("AXOCOATL_FAILPOINTS", &failpoint);
        let mut child = env
            .cmd(&["import"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        wait_until(&format!("import step {step}"), || match step {
            "begun" => kinds(&env, "LegacyImportBegun") == 1,
            "ended" => kinds(&env, "LegacyImportEnded") == 1,
            "checkpoint" => std::fs::read_dir(ck_dir(&env)).is_ok_and(|mut d| d.next().is_some()),
            turn => {
                let n: usize = turn["turn-".len()..].parse().expect("n");
                kinds(&env, "TurnEnded") == n
            }
        });
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        let mut env2 = env;
        env2.set_env("AXOCOATL_FAILPOINTS", "");
        let h = history(&env2, "main");
        assert_eq!(h, reference, "after a kill at {step}");
        assert_eq!(kinds(&env2, "LegacyImportBegun"), 1, "{step}");
        assert_eq!(kinds(&env2, "LegacyImportEnded"), 1, "{step}");
        assert_eq!(kinds(&env2, "TurnBegun"), 3, "{step}");
        assert_eq!(kinds(&env2, "TurnEnded"), 3, "{step}");
        let ck = lines(
            &env2
                .run(&["util", "checkpoints", "main", "assistant"])
                .stdout,
        );
        assert_eq!(ck.len(), 1, "{step}: {ck:?}");
        assert_eq!(ck[0]["head_turn"], reference[1]["turn"], "{step}");
        assert_eq!(legacy_bytes(&env2), before, "{step}");
    }
}

#[test]
fn help_import() {
    let env = TestEnv::new();
    snap!("help_import", env.snap(&env.run(&["import", "--help"])));
}

#[test]
fn automation_runs_copies_only_records_whose_identity_matches_their_path() {
    let server = FakeServer::start();
    let env = legacy_env(&server, &["automation/"]);
    let before = legacy_bytes(&env);
    let r = env.run(&["automations", "runs", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let runs = lines(&r.stdout);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["automation"], "brief");
    assert_eq!(runs[0]["outcome"], "completed", "{runs:?}");
    let current = env.repo().join("automation/runs-v1/brief");
    assert!(current.join("20250101T090000.000Z.json").is_file());
    assert!(!current.join("20250103T090000.000Z.json").exists());
    assert_eq!(env.run(&["automations", "runs", "--json"]).stdout, r.stdout);
    assert_eq!(legacy_bytes(&env), before);
}

/// A kill inside a turn's append (its first records written, the rest not): the next
/// command appends only what is missing.
#[test]
fn a_turn_cut_mid_append_is_completed_not_duplicated() {
    use axocoatl_store::ledger::record::{LegacyImportBegun, ModelCall, TurnBegun};
    use axocoatl_store::ledger::Record;
    let server = FakeServer::start();
    let reference = {
        let env = legacy_env(&server, &["checkpoints/main"]);
        assert_eq!(env.run(&["import"]).code, 0);
        history(&env, "main")
    };
    let env = legacy_env(&server, &["checkpoints/main"]);
    let source = "checkpoints/main%3aassistant/00000000000000000007.json";
    let digest = blake3::hash(&std::fs::read(env.repo().join(source)).expect("read"))
        .to_hex()
        .to_string();
    let turn = axocoatl::legacy::turn_id(&digest, 0);
    let repo = axocoatl_store::Repo::open(&env.repo(), &Default::default()).expect("open");
    repo.ledger()
        .append(&[
            Record::LegacyImportBegun(LegacyImportBegun {
                session: "main".into(),
                agent: "assistant".into(),
                source: source.into(),
                digest: digest.clone(),
                format: "json".into(),
                turns: 3,
                at: SAVED_AT,
            }),
            Record::TurnBegun(TurnBegun {
                turn: turn.clone(),
                session: "main".into(),
                agent: "assistant".into(),
                mode: "single".into(),
                request: "What is in notes.txt?".into(),
                inline_context: vec![],
                attachments: vec![],
                retry_of: None,
                pid: 1,
                at: SAVED_AT,
                schema: None,
            }),
            Record::ModelCall(ModelCall {
                turn,
                agent: "assistant".into(),
                provider: "0.1.x".into(),
                model: String::new(),
                reserved_tokens: 0,
                prompt_tokens: None,
                completion_tokens: None,
                finish_reason: None,
                at: SAVED_AT,
            }),
        ])
        .expect("append");
    drop(repo);
    assert_eq!(history(&env, "main"), reference);
    assert_eq!(kinds(&env, "TurnBegun"), 3);
    assert_eq!(kinds(&env, "ModelCall"), 3, "2 + 1 + 0: none twice");
    assert_eq!(kinds(&env, "LegacyImportBegun"), 1);
}
