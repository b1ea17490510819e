//! Format v1 is frozen: `tests/fixtures/v1/` holds a small repository written once by
//! `make_v1_fixture` below (segments with the record kinds of format v1's first release,
//! objects, a checkpoint, core memory), and, appended after those, a turn with one record of
//! every kind this build knows (`freeze_every_record_kind`, which appends such a turn only
//! when a kind has no frozen bytes yet: bytes once committed never change). Every build
//! reads it and must print the same `history --json`, `show` and `fsck`, and decode each
//! frozen record to the same fields. A change that breaks these snapshots is a format
//! change: it needs a new kind or a new format version, not new snapshots.
//!
//! To write the fixture again (only when the format version changes):
//! `AXOCOATL_WRITE_FIXTURE=1 cargo test --test cli store_fixture::make_v1_fixture -- --ignored`
//!
//! To freeze a record kind added since (then commit the segment):
//! `AXOCOATL_WRITE_FIXTURE=1 cargo test --test cli store_fixture::freeze_every_record_kind -- --ignored`

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::{Note, Warning};
use axocoatl_store::ledger::{Kind, Record};
use axocoatl_store::repo::OpenOptions;
use axocoatl_store::Repo;

use crate::common::env::TestEnv;

/// The record kinds of format v1 when the fixture was first written.
const V1_KINDS: std::ops::RangeInclusive<u16> = 1..=14;

/// The session of the turn with one record of every kind.
const FROZEN_SESSION: &str = "frozen";

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

/// The kinds this build knows that the fixture holds no record of.
fn unfrozen(repo: &Path) -> Vec<&'static str> {
    let have = kinds(repo);
    Kind::ALL
        .iter()
        .filter(|k| !have.contains(&k.tag()))
        .map(|k| k.name())
        .collect()
}

#[test]
fn every_record_kind_has_frozen_bytes_that_decode_the_same() {
    let env = fixture_env();
    let missing = unfrozen(&env.repo());
    assert!(
        missing.is_empty(),
        "record kinds with no frozen bytes in tests/fixtures/v1: {missing:?}; freeze them with `AXOCOATL_WRITE_FIXTURE=1 cargo test --test cli store_fixture::freeze_every_record_kind -- --ignored` and commit the segment"
    );
    // The first record of each kind, as this build decodes it.
    let repo = Repo::open(&env.repo(), &OpenOptions::default()).expect("open");
    let mut seen = BTreeSet::new();
    let mut decoded = Vec::new();
    for e in repo.ledger().scan_all() {
        let e = e.expect("an intact fixture");
        let record = e.record.expect("a kind this build knows");
        if seen.insert(e.kind) {
            decoded.push(format!(
                "{} {}: {}",
                e.kind,
                record.kind_name(),
                record.body_json()
            ));
        }
    }
    decoded.sort_by_key(|l| l.split(' ').next().and_then(|n| n.parse::<u16>().ok()));
    snap!("frozen_records", decoded.join("\n"));
}

#[test]
fn the_v1_fixture_reads_the_same_with_every_build() {
    let env = fixture_env();
    let have = kinds(&env.repo());
    assert!(
        V1_KINDS.clone().all(|k| have.contains(&k)),
        "every kind of the first v1 release is in the fixture"
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

/// Appends to the fixture's ledger a turn (session `frozen`) with one record of every kind,
/// when some kind has no frozen bytes yet; the bytes already there are left as they are.
/// Run only by hand, with `AXOCOATL_WRITE_FIXTURE=1`.
#[test]
#[ignore = "appends to the committed fixture; run by hand when a record kind was added"]
fn freeze_every_record_kind() {
    if std::env::var_os("AXOCOATL_WRITE_FIXTURE").is_none() {
        return;
    }
    let env = fixture_env();
    if unfrozen(&env.repo()).is_empty() {
        return;
    }
    let segment = |root: &Path| {
        let dir = root.join("ledger/v1");
        let mut segs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("ls")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "seg"))
            .collect();
        segs.sort();
        segs
    };
    let before: Vec<Vec<u8>> = segment(&env.repo())
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    // The one object of the fixture: what the attachment records name.
    let object = "3fc64477b256c14f3f0499e362644b4592976938acd70a90b8f3cff50e4880b5";
    assert!(env.repo().join("objects/3f").join(&object[2..]).exists());
    let repo = Repo::open(&env.repo(), &OpenOptions::default()).expect("open");
    // Each freeze appends a turn of its own (its own id, session and minute), so that a
    // turn frozen before reads exactly as it did.
    let frozen_before = repo
        .ledger()
        .scan_all()
        .filter_map(|e| match e.expect("an intact fixture").record {
            Some(Record::SessionCreated(c)) if c.session.starts_with(FROZEN_SESSION) => Some(()),
            _ => None,
        })
        .count();
    let session = match frozen_before {
        0 => FROZEN_SESSION.to_owned(),
        n => format!("{FROZEN_SESSION}-{}", n + 1),
    };
    let mut n = 0;
    let mut records = axocoatl_store::ledger::samples::turn_of_every_kind(
        &format!("f0f0f0f0f0f0f0{frozen_before:02x}"),
        &session,
        1_767_323_100_000 + 60_000 * frozen_before as i64,
        &mut || {
            n += 1;
            format!("frozen text {n}")
        },
    );
    for r in &mut records {
        match r {
            Record::TurnBegun(b) => {
                for a in &mut b.attachments {
                    a.object = object.to_owned();
                }
            }
            Record::AttachmentAdded(a) => a.object = object.to_owned(),
            _ => {}
        }
    }
    repo.ledger().append(&records).expect("append");
    drop(repo);
    assert!(unfrozen(&env.repo()).is_empty());
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    // Only appended: every byte committed before is where it was.
    let after = segment(&env.repo());
    for (old, new) in before.iter().zip(&after) {
        let new_bytes = std::fs::read(new).expect("read");
        assert!(
            new_bytes.starts_with(old),
            "{} was rewritten",
            new.display()
        );
    }
    let out = fixture_dir().join(".axocoatl/ledger/v1");
    for seg in after {
        std::fs::copy(&seg, out.join(seg.file_name().expect("name"))).expect("copy");
    }
}
