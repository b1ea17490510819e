//! Format v1 is frozen: `tests/fixtures/v1/` holds a small repository written once by
//! `make_v1_fixture` below (segments with every record kind of format v1, objects, a
//! checkpoint, core memory). Every build reads it and must print the same `history --json`,
//! `show` and `fsck`. A change that breaks these snapshots is a format change: it needs a
//! new format version, not new snapshots.
//!
//! To write the fixture again (only when the format version changes):
//! `AXOCOATL_WRITE_FIXTURE=1 cargo test --test cli store_fixture::make_v1_fixture -- --ignored`

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::{Note, Warning};
use axocoatl_store::ledger::Record;
use axocoatl_store::repo::OpenOptions;
use axocoatl_store::Repo;

use crate::common::env::TestEnv;

/// The record kinds of format v1 when the fixture was written: all of them are in it.
const V1_KINDS: std::ops::RangeInclusive<u16> = 1..=14;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("ls") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The fixture, copied into a fresh test directory (commands may write: orphan recovery,
/// lock files). Git keeps no empty directories, so the layout's are made again here.
fn fixture_env() -> TestEnv {
    let env = TestEnv::new();
    copy_dir(&fixture_dir(), &env.work);
    for dir in axocoatl_store::layout::INIT_DIRS {
        std::fs::create_dir_all(env.repo().join(dir)).expect("mkdir");
    }
    env
}

fn kinds(repo: &Path) -> BTreeSet<u16> {
    let repo = Repo::open(repo, &OpenOptions::default()).expect("open");
    repo.ledger()
        .scan_all()
        .map(|e| e.expect("an intact fixture").kind)
        .collect()
}

#[test]
fn the_v1_fixture_reads_the_same_with_every_build() {
    let env = fixture_env();
    assert_eq!(
        kinds(&env.repo()),
        V1_KINDS.collect::<BTreeSet<u16>>(),
        "every v1 record kind is in the fixture"
    );
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    snap!("fsck", env.snap(&fsck));
    let history = env.run(&["history", "--all", "--json"]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    snap!("history_json", env.snap(&history));
    let turns: Vec<String> = history
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["turn"]
                .as_str()
                .expect("turn")
                .to_owned()
        })
        .collect();
    for (i, turn) in turns.iter().enumerate() {
        let show = env.run(&["show", turn]);
        assert_eq!(show.code, 0, "{}", show.stderr);
        snap!(format!("show_{i}"), env.snap(&show));
    }
    // The checkpoint and the core memory are read too (fsck counts them).
    assert!(fsck.stdout.contains("1 memory file"), "{}", fsck.stdout);
    // And the repository takes new turns.
    let send = env.run(&["send", "msg after"]);
    assert_eq!(send.code, 0, "{}", send.stderr);
}

const CONFIG: &str = "providers:
  canned: {kind: script, script: replies.yaml}
agents:
  - id: helper
    provider: canned
";

const REPLIES: &str = "replies:
  - match: remember
    tool_calls: [{name: core_memory_append, arguments: {label: human, content: likes tea}}]
  - match: remember
    text: Noted.
  - match: slow
    chunks: [\"one \", \"two \", \"three \", \"four\"]
    delay_ms: 3000
  - match: msg
    text: ok
";

/// Writes `tests/fixtures/v1/` through the real binary (and the store, for the one kind no
/// command writes on its own). Run only by hand, with `AXOCOATL_WRITE_FIXTURE=1`.
#[test]
#[ignore = "writes the committed fixture; run by hand when the format version changes"]
fn make_v1_fixture() {
    if std::env::var_os("AXOCOATL_WRITE_FIXTURE").is_none() {
        return;
    }
    let env = TestEnv::with_config(CONFIG);
    env.write("replies.yaml", REPLIES);
    env.write("notes.md", "# Notes\nThe fixture's attachment.\n");
    let ok = |args: &[&str]| {
        let r = env.run(args);
        assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
        r
    };
    ok(&["send", "msg one"]); // SessionCreated, TurnBegun, ModelCall, AgentOutput, TurnEnded
    ok(&["send", "remember that I like tea"]); // ToolStarted, ToolResult, core memory
    ok(&["attach", "add", "notes.md"]); // AttachmentAdded, objects
    ok(&["send", "msg with the notes"]); // AttachmentConsumed
    ok(&["attach", "add", "--scope", "session", "notes.md"]);
    let list = ok(&["attach", "list", "--json"]);
    let reference = serde_json::from_str::<serde_json::Value>(
        list.stdout.lines().last().expect("an attachment"),
    )
    .expect("json")["reference"]
        .as_str()
        .expect("reference")
        .to_owned();
    ok(&["attach", "rm", &reference]); // AttachmentRemoved
    ok(&["sessions", "new", "side"]);
    ok(&["send", "msg on the side"]);
    ok(&["sessions", "switch", "main"]);
    // A stopped turn: StopRequested.
    let mut slow = env
        .cmd(&["send", "slow reply please"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let turn = loop {
        let h = env.run(&["history", "--json"]);
        let running = h.stdout.lines().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["state"] == "running").then(|| v["turn"].as_str().map(str::to_owned))?
        });
        if let Some(t) = running {
            break t;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the slow turn begins"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    ok(&["stop", &turn]);
    slow.wait().expect("wait");
    // RewindBoundary (and a checkpoint rebuilt for it).
    let h = ok(&["history", "--json"]);
    let first = serde_json::from_str::<serde_json::Value>(h.stdout.lines().next().expect("turn"))
        .expect("json")["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let mut turns: Vec<String> = h
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["turn"]
                .as_str()
                .expect("turn")
                .to_owned()
        })
        .collect();
    turns.retain(|t| *t != first);
    ok(&["rewind", &turns[turns.len() - 1], "--yes"]);
    ok(&["send", "msg after the rewind"]);
    // A Warning and a Note, which no command writes on its own today.
    let repo = Repo::open(&env.repo(), &OpenOptions::default()).expect("open");
    repo.ledger()
        .append(&[
            Record::Warning(Warning {
                turn: None,
                session: "main".into(),
                code: "fixture".into(),
                message: "a warning of format v1".into(),
                at: 1_767_323_045_000,
            }),
            Record::Note(Note {
                text: "a note of format v1".into(),
            }),
        ])
        .expect("append");
    assert_eq!(
        kinds(&env.repo()),
        V1_KINDS.collect::<BTreeSet<u16>>(),
        "every kind"
    );
    assert_eq!(env.run(&["fsck"]).code, 0);
    // Keep the data, not the runtime files (locks, temporary space).
    let out = fixture_dir();
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("mkdir");
    copy_dir(&env.repo(), &out.join(".axocoatl"));
    for runtime in ["run", "tmp"] {
        let _ = std::fs::remove_dir_all(out.join(".axocoatl").join(runtime));
    }
    std::fs::copy(env.work.join("axocoatl.yaml"), out.join("axocoatl.yaml")).expect("copy");
    std::fs::copy(env.work.join("replies.yaml"), out.join("replies.yaml")).expect("copy");
}
