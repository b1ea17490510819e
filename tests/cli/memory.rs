//! `axocoatl memory` and the memory tiers through the real binary: core blocks (limits,
//! shared blocks, two processes editing at once, damaged and future files), the daily log,
//! and fsck of both.

use std::thread;

use crate::common::env::TestEnv;

const CONFIG: &str = "\
providers:
  s: {kind: script, script: r.yaml}
agents:
  - id: a
    provider: s
    memory:
      core:
        blocks:
          - {label: human, limit: 40}
          - {label: notes, limit: 100000}
          - {label: team, limit: 100, shared: true}
  - id: b
    provider: s
    memory:
      core:
        blocks:
          - {label: human}
          - {label: team, limit: 100, shared: true}
  - id: c
    provider: s
";

fn env() -> TestEnv {
    let env = TestEnv::with_config(CONFIG);
    env.write("r.yaml", "replies:\n  - text: ok\n");
    env
}

fn ok(env: &TestEnv, args: &[&str]) -> String {
    let r = env.run(args);
    assert_eq!(r.code, 0, "{args:?}: {}{}", r.stdout, r.stderr);
    r.stdout
}

#[test]
fn help() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help", &["memory", "--help"][..]),
        ("help_core", &["memory", "core", "--help"]),
        ("help_log", &["memory", "log", "--help"]),
        ("help_search", &["memory", "search", "--help"]),
        ("help_add", &["memory", "add", "--help"]),
        ("help_status", &["memory", "status", "--help"]),
        ("help_reindex", &["memory", "reindex", "--help"]),
        ("help_consolidate", &["memory", "consolidate", "--help"]),
    ] {
        snap!(name, env.snap(&env.run(args)));
    }
}

#[test]
fn core_show_set_append_replace() {
    let env = env();
    snap!("core_show_empty", env.snap(&env.run(&["memory", "core"])));
    snap!(
        "core_set",
        env.snap(&env.run(&["memory", "core", "set", "human", "Name: Ada."]))
    );
    ok(&env, &["memory", "core", "append", "human", "Likes tea."]);
    ok(
        &env,
        &["memory", "core", "replace", "human", "Ada.", "Ada L."],
    );
    let piped = env.run_stdin(&["memory", "core", "set", "notes"], "from stdin\n");
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    snap!("core_show", env.snap(&env.run(&["memory", "core", "show"])));
    assert_eq!(
        ok(&env, &["memory", "core", "show", "human"]),
        "Name: Ada L.\nLikes tea.\n"
    );
    snap!(
        "core_show_json",
        env.snap(&env.run(&["memory", "core", "--json", "-a", "a"]))
    );
    // The edits are in the agent's daily log, in the file of the pinned date.
    let file = env
        .repo()
        .join("memory/daily_log/v1/main%3aa/2026-01-02.jsonl");
    let log = std::fs::read_to_string(&file).expect("daily log");
    assert_eq!(log.lines().count(), 4, "{log}");
    snap!("log_edits", env.snap(&env.run(&["memory", "log"])));
}

#[test]
fn an_edit_over_the_limit_is_refused_naming_it_and_changes_nothing() {
    let env = env();
    ok(&env, &["memory", "core", "set", "human", "0123456789"]);
    let r = env.run(&["memory", "core", "append", "human", &"x".repeat(30)]);
    snap!("limit_refused", env.snap(&r));
    assert_eq!(r.code, 11);
    assert_eq!(
        ok(&env, &["memory", "core", "show", "human"]),
        "0123456789\n"
    );
    snap!(
        "unknown_block",
        env.snap(&env.run(&["memory", "core", "set", "persona", "x"]))
    );
    snap!(
        "replace_missing",
        env.snap(&env.run(&["memory", "core", "replace", "human", "zzz", "y"]))
    );
}

#[test]
fn shared_blocks_are_seen_by_every_agent_declaring_the_label_and_no_other() {
    let env = env();
    ok(
        &env,
        &["memory", "core", "set", "team", "Ships on Fridays."],
    );
    ok(&env, &["memory", "core", "set", "human", "private to a"]);
    // b declares `team` (shared) in another session too: it sees the value; not a's `human`.
    let b = ok(&env, &["memory", "core", "-a", "b", "-s", "other"]);
    assert!(b.contains("Ships on Fridays."), "{b}");
    assert!(!b.contains("private to a"), "{b}");
    // c does not declare `team`: neither shown nor editable.
    let c = ok(&env, &["memory", "core", "-a", "c"]);
    assert!(!c.contains("Ships"), "{c}");
    assert_eq!(
        env.run(&["memory", "core", "set", "team", "x", "-a", "c"])
            .code,
        7
    );
    assert!(env.repo().join("memory/core/shared/v1/team.json").is_file());
}

#[test]
fn two_processes_appending_at_once_lose_no_update() {
    let env = env();
    let n = 15;
    let workers: Vec<_> = ["p", "q"]
        .into_iter()
        .map(|who| {
            let cmds: Vec<_> = (0..n)
                .map(|i| {
                    let mut c =
                        env.cmd(&["memory", "core", "append", "notes", &format!("{who}{i}")]);
                    c.stdout(std::process::Stdio::null());
                    c
                })
                .collect();
            thread::spawn(move || {
                for mut c in cmds {
                    let out = c.output().expect("run");
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let value = ok(&env, &["memory", "core", "show", "notes"]);
    let mut lines: Vec<&str> = value.lines().collect();
    lines.sort();
    let mut want: Vec<String> = ["p", "q"]
        .iter()
        .flat_map(|w| (0..n).map(move |i| format!("{w}{i}")))
        .collect();
    want.sort();
    assert_eq!(lines, want);
}

#[test]
fn a_future_version_is_refused_and_left_unchanged() {
    let env = env();
    let file = env.repo().join("memory/core/v1/main%3aa.json");
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    let future = r#"{"version": 2, "blocks": {"human": "from the future"}, "more": []}"#;
    std::fs::write(&file, future).expect("write");
    snap!(
        "future_version",
        env.snap(&env.run(&["memory", "core", "set", "human", "x"]))
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), future);
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9);
    assert!(
        r.stdout.contains("memory/core/v1/main%3aa.json: bad-memory-file: written by a newer axocoatl (version 2)"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_corrupt_memory_file_is_reported_naming_it() {
    let env = env();
    let file = env.repo().join("memory/core/v1/main%3aa.json");
    std::fs::create_dir_all(file.parent().expect("dir")).expect("mkdir");
    std::fs::write(&file, "{\"version\": 1, \"blocks\": {").expect("write");
    let r = env.run(&["memory", "core", "show"]);
    snap!("corrupt_file", env.snap(&r));
    assert!(!r.stderr.contains("ledger"), "{}", r.stderr);
}

#[test]
fn fsck_reports_an_oversize_block_and_a_damaged_daily_log() {
    let env = env();
    ok(&env, &["memory", "core", "set", "human", "short"]);
    let file = env.repo().join("memory/core/v1/main%3aa.json");
    let text = std::fs::read_to_string(&file).expect("read");
    std::fs::write(&file, text.replace("short", &"y".repeat(50))).expect("write");
    let log = env
        .repo()
        .join("memory/daily_log/v1/main%3aa/2026-01-02.jsonl");
    let mut bytes = std::fs::read(&log).expect("log");
    bytes.extend_from_slice(b"not json\n{\"torn");
    std::fs::write(&log, bytes).expect("damage");
    let r = env.run(&["fsck"]);
    snap!("fsck_memory", env.snap(&r));
    assert_eq!(r.code, 9);
    let shown = ok(&env, &["memory", "core", "show"]);
    assert!(
        shown.contains("50/40 characters (over its limit"),
        "{shown}"
    );
    let repaired = env.run(&["fsck", "--repair"]);
    assert!(repaired.stdout.contains("repaired"), "{}", repaired.stdout);
    assert!(
        !repaired.stdout.contains("incomplete"),
        "{}",
        repaired.stdout
    );
}

#[test]
fn log_ranges_and_queries() {
    let env = env();
    ok(&env, &["memory", "core", "set", "human", "Tea drinker."]);
    let out = env
        .cmd(&["memory", "core", "set", "human", "Coffee now."])
        .env("AXOCOATL_NOW", "2026-01-05T10:00:00Z")
        .output()
        .expect("run");
    assert!(out.status.success());
    let lines = |args: &[&str]| ok(&env, args).lines().count();
    // Without --from: from today on (UTC). Dates are whole UTC days; times are exact.
    assert_eq!(lines(&["memory", "log"]), 2);
    let on_the_5th = env
        .cmd(&["memory", "log"])
        .env("AXOCOATL_NOW", "2026-01-05T23:00:00Z")
        .output()
        .expect("run");
    assert_eq!(
        String::from_utf8_lossy(&on_the_5th.stdout).lines().count(),
        1
    );
    assert_eq!(lines(&["memory", "log", "--from", "2026-01-01"]), 2);
    assert_eq!(
        lines(&[
            "memory",
            "log",
            "--from",
            "2026-01-01",
            "--to",
            "2026-01-04"
        ]),
        1
    );
    assert_eq!(lines(&["memory", "log", "--from", "2026-01-05"]), 1);
    assert_eq!(
        lines(&[
            "memory",
            "log",
            "--from",
            "2026-01-02T03:04:06Z",
            "--to",
            "2026-01-04"
        ]),
        0
    );
    assert_eq!(
        lines(&["memory", "log", "--from", "2026-01-01", "--query", "TEA"]),
        1
    );
    assert_eq!(
        lines(&["memory", "log", "--from", "2026-01-01", "--limit", "1"]),
        1
    );
    assert!(env
        .repo()
        .join("memory/daily_log/v1/main%3aa/2026-01-05.jsonl")
        .is_file());
    snap!(
        "log_json",
        env.snap(&env.run(&["memory", "log", "--json", "--from", "2026-01-02"]))
    );
    snap!(
        "log_bad_time",
        env.snap(&env.run(&["memory", "log", "--from", "last tuesday"]))
    );
}

#[test]
fn validate_accepts_the_recall_tools_in_an_allowlist() {
    let env = TestEnv::with_config(
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n    tools: [recall_search, recall_timeframe, core_memory_append]\n",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

/// The output of every tool call of the last turn, from `show --json`.
fn tool_outputs(env: &TestEnv) -> Vec<(String, String)> {
    let h = ok(env, &["history", "--json"]);
    let last: serde_json::Value =
        serde_json::from_str(h.lines().last().expect("a turn")).expect("json");
    last["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_owned(),
                t["output"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[test]
fn recall_timeframe_reads_the_daily_log_of_the_agent() {
    let env = TestEnv::with_config(CONFIG);
    env.write(
        "r.yaml",
        "replies:
  - match: remember
    tool_calls: [{name: core_memory_append, arguments: {label: human, content: likes green tea}}]
  - match: remember
    text: noted
  - match: yesterday
    tool_calls: [{name: recall_timeframe, arguments: {from: '2026-01-02', to: '2026-01-02T23:00:00Z', query: tea}}]
  - match: yesterday
    text: you told me about tea
  - match: nothing
    tool_calls: [{name: recall_timeframe, arguments: {from: '2026-01-03', to: '2026-01-01'}}]
  - match: nothing
    text: hm
",
    );
    ok(&env, &["send", "remember that I like green tea"]);
    ok(&env, &["send", "what did I say yesterday"]);
    let outputs = tool_outputs(&env);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert_eq!(outputs[0].0, "recall_timeframe");
    assert!(
        outputs[0].1.contains("memory_edit human [turn ")
            && outputs[0].1.contains("]: append: likes green tea"),
        "{}",
        outputs[0].1
    );
    // Another agent's log is not read.
    ok(&env, &["send", "-a", "b", "what did I say yesterday"]);
    let other = tool_outputs(&env);
    assert!(!other[0].1.contains("green tea"), "{}", other[0].1);
    ok(&env, &["send", "nothing"]);
    let empty = tool_outputs(&env);
    assert!(empty[0].1.contains("the range is empty"), "{}", empty[0].1);
}

/// The failpoints a command passed, in order (a build with failpoints logs each one).
fn failpoints_passed(env: &TestEnv, args: &[&str], failpoints: &str) -> (i32, Vec<String>) {
    let log = env
        .tmp
        .path()
        .join(format!("fp-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let out = env
        .cmd(args)
        .env("AXOCOATL_FAILPOINTS", failpoints)
        .env("AXOCOATL_FAILPOINTS_LOG", &log)
        .output()
        .expect("run");
    let passed = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    (out.status.code().unwrap_or(-1), passed)
}

fn syncs(passed: &[String]) -> Vec<&str> {
    passed
        .iter()
        .map(String::as_str)
        .filter(|p| p.ends_with("sync"))
        .collect()
}

#[test]
fn a_send_syncs_only_the_ledger_twice_and_added_text_is_synced() {
    let env = env();
    env.write("r.yaml", "replies:\n  - match: is\n    text: ok\n");
    ok(&env, &["send", "this is the first turn"]);
    // A fresh session (its checkpoint, daily log and semantic directories are created) and
    // a session with turns: the exchange is retained, and the ledger's begin and end are the
    // only syncs.
    for (i, text) in ["the otter is named Pim", "the heron is Ode"]
        .into_iter()
        .enumerate()
    {
        let (code, passed) =
            failpoints_passed(&env, &["send", "--no-stdin", "-s", "fresh", text], "");
        assert_eq!(code, 0);
        assert!(
            passed.iter().any(|p| p == "memory.semantic.write"),
            "{passed:?}"
        );
        assert_eq!(
            syncs(&passed),
            ["ledger.append.sync", "ledger.append.sync"],
            "{passed:?}"
        );
        // A new session's first turn replaces one file: the checkpoint written at its end (no
        // empty one before it). The second also notes the recall path it announced.
        let renames = passed
            .iter()
            .filter(|p| *p == "fsutil.atomic.rename")
            .count();
        assert_eq!(renames, i + 1, "{passed:?}");
    }
    let found = ok(&env, &["memory", "-s", "fresh", "search", "otter heron"]);
    assert!(found.contains("Pim") && found.contains("Ode"), "{found}");
    // Text given from the shell has no other copy: it is synced, with its directory.
    let (code, passed) = failpoints_passed(
        &env,
        &["memory", "-s", "fresh", "add", "the kingfisher is Blue"],
        "",
    );
    assert_eq!(code, 0);
    assert_eq!(
        syncs(&passed),
        ["memory.semantic.sync", "fsutil.atomic.dir_sync"],
        "{passed:?}"
    );
}

#[test]
fn a_crash_while_an_exchange_is_written_leaves_the_turn_and_a_working_memory() {
    let env = env();
    env.write("r.yaml", "replies:\n  - match: is\n    text: ok\n");
    ok(&env, &["send", "the otter is named Pim"]);
    let (code, _) = failpoints_passed(
        &env,
        &["send", "--no-stdin", "the heron is named Ode"],
        "memory.semantic.write=torn",
    );
    assert_ne!(code, 0, "the process died writing the exchange");
    // The turn is in the ledger, whole; the torn exchange is cut by the next append.
    let h = ok(&env, &["history", "--json"]);
    assert_eq!(h.matches("\"state\":\"completed\"").count(), 2, "{h}");
    ok(&env, &["send", "the kingfisher is named Blue"]);
    let found = ok(&env, &["memory", "search", "otter kingfisher heron"]);
    assert!(found.contains("Pim") && found.contains("Blue"), "{found}");
    assert!(!found.contains("Ode"), "the torn record is gone: {found}");
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
}

/// The frames of a semantic `records` file: `(offset, payload length)` of each record.
fn record_frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 16;
    while at + 12 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4")) as usize;
        out.push((at, len));
        at += 12 + len;
    }
    out
}

#[test]
fn a_damaged_semantic_record_hides_no_other_and_fsck_repair_moves_it_aside() {
    let env = env();
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    ];
    for w in words {
        ok(
            &env,
            &[
                "memory",
                "add",
                "-a",
                "a",
                &format!("The {w} server is in rack {w}."),
            ],
        );
    }
    let store = env.repo().join("memory/semantic/v1/main%3aa");
    let path = store.join("records");
    let mut bytes = std::fs::read(&path).expect("records");
    let frames = record_frames(&bytes);
    assert_eq!(frames.len(), 10);
    // Bytes flipped in the middle of the 4th record's text.
    let (at, len) = frames[3];
    for i in [len / 3, len / 2, len / 2 + 1] {
        bytes[at + 12 + i] ^= 0x5a;
    }
    std::fs::write(&path, &bytes).expect("write");
    let named = |stderr: &str| {
        assert!(
            stderr.contains("semantic memory of main:a: record 3 of ")
                && stderr.contains("main%3aa/records is damaged"),
            "the warning names the store, its file and the record: {stderr}"
        );
    };
    // Every later record is still found, and the damage is said.
    for w in ["echo", "juliet"] {
        let r = env.run(&["memory", "search", "-a", "a", &format!("{w} server rack")]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.lines().nth(1).is_some_and(|l| l.contains(w)),
            "{w}: {}",
            r.stdout
        );
    }
    let r = env.run(&[
        "memory",
        "search",
        "-a",
        "a",
        "delta server rack",
        "--top-k",
        "10",
    ]);
    assert_eq!(r.code, 0);
    assert!(!r.stdout.contains("delta"), "{}", r.stdout);
    assert_eq!(r.stdout.matches("  The ").count(), 9, "{}", r.stdout);
    named(&r.stderr);
    let r = env.run(&["memory", "status", "-a", "a"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout
            .contains("semantic:        10 records (1 damaged: run `axocoatl fsck --repair`)"),
        "{}",
        r.stdout
    );
    named(&r.stderr);
    let r = env.run(&["memory", "reindex", "-a", "a"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.starts_with("reindexed 9 records of main:a"),
        "{}",
        r.stdout
    );
    named(&r.stderr);
    // Appends go on after it.
    ok(
        &env,
        &[
            "memory",
            "add",
            "-a",
            "a",
            "The kilo server is in rack kilo.",
        ],
    );
    // fsck names it; --repair moves it aside; then everything checks and reads.
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9, "{}", r.stdout);
    assert!(r.stdout.contains("bad-semantic-records"), "{}", r.stdout);
    assert!(
        r.stdout.contains("semantic memory record 3 "),
        "{}",
        r.stdout
    );
    let r = env.run(&["fsck", "--repair"]);
    snap!("fsck_repair_semantic", env.snap(&r));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let aside = store.join("damaged").join(format!("records.{at}"));
    assert_eq!(
        std::fs::read(&aside).expect("moved aside"),
        &bytes[at..at + 12 + len]
    );
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let r = env.run(&["memory", "status", "-a", "a", "--json"]);
    let status: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(
        (status["records"].as_u64(), status["damaged"].as_u64()),
        (Some(10), Some(0))
    );
    assert_eq!(r.stderr, "");
    let r = env.run(&[
        "memory",
        "search",
        "-a",
        "a",
        "kilo server rack",
        "--top-k",
        "10",
    ]);
    assert_eq!(r.stdout.matches("  The ").count(), 10, "{}", r.stdout);
    assert!(r.stdout.lines().nth(1).is_some_and(|l| l.contains("kilo")));
    assert_eq!(r.stderr, "");
}
