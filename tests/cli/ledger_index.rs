//! Ledger indexes are caches: deleting, damaging or crashing them changes no output, and
//! damaged ledger records are reported by every reader, never skipped silently.

use std::path::PathBuf;

use crate::common::env::{Run, TestEnv};

const SCRIPT: &str = r#"replies:
  - match: "alpha"
    text: "Alpha answer about the ledger."
    usage: {prompt_tokens: 10, completion_tokens: 4}
  - match: "beta"
    text: "Beta answer: timeouts and retries."
    usage: {prompt_tokens: 7}
  - match: "gamma"
    text: "Gamma answer."
    usage: {prompt_tokens: 3, completion_tokens: 2}
"#;

/// A repository with small segments (so most are sealed and indexed) and turns in three
/// sessions, a rewind and an attachment. Returns the environment and the turn ids.
fn history() -> (TestEnv, Vec<String>) {
    let mut env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    env.write("replies.yaml", SCRIPT);
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "700");
    env.write("notes.txt", "attached notes\n");
    assert_eq!(env.run(&["attach", "add", "notes.txt", "-s", "s1"]).code, 0);
    let mut turns = Vec::new();
    for i in 0..4 {
        for (session, word) in [("s1", "alpha"), ("s2", "beta"), ("s3", "gamma")] {
            let r = env.run(&[
                "send",
                "--json",
                "--no-stdin",
                "-s",
                session,
                &format!("{word} question {i}"),
            ]);
            assert_eq!(r.code, 0, "{}", r.stderr);
            let first: serde_json::Value =
                serde_json::from_str(r.stdout.lines().next().expect("a line")).expect("json");
            turns.push(first["turn"].as_str().expect("turn").to_owned());
        }
    }
    let r = env.run(&["rewind", &turns[6], "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let segments = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ls")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
        .count();
    assert!(segments > 4, "{segments} segments");
    (env, turns)
}

/// Every read-only command a user runs, with its output.
fn outputs(env: &TestEnv, turns: &[String]) -> Vec<(String, Run)> {
    let mut commands: Vec<Vec<String>> = vec![
        vec!["history", "-s", "s1"],
        vec!["history", "-s", "s2", "--json"],
        vec!["history", "--all"],
        vec!["history", "--all", "--search", "answer"],
        vec!["history", "--all", "--search", "TIMEOUTS and"],
        vec!["history", "--all", "--search", "swer: ti"],
        vec!["sessions"],
        vec!["sessions", "--json"],
        vec!["usage", "-s", "s2"],
        vec!["usage", "--all", "--by", "day", "--json"],
        vec!["usage", "--all", "--by", "session"],
        vec!["export", "-s", "s3"],
        vec!["export", "--all", "--format", "json"],
        vec!["attach", "list", "-s", "s1", "--all"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(str::to_owned).collect())
    .collect();
    for t in [&turns[0], &turns[5], &turns[10]] {
        commands.push(vec!["show".into(), t[..8].to_owned()]);
        commands.push(vec!["show".into(), t.clone(), "--json".into()]);
        commands.push(vec!["stop".into(), t[..6].to_owned()]);
    }
    commands
        .into_iter()
        .map(|c| {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            (c.join(" "), env.run(&args))
        })
        .collect()
}

fn assert_same(before: &[(String, Run)], after: &[(String, Run)], what: &str) {
    for ((cmd, a), (_, b)) in before.iter().zip(after) {
        assert_eq!(
            (a.code, &a.stdout, &a.stderr),
            (b.code, &b.stdout, &b.stderr),
            "`{cmd}` changed {what}"
        );
    }
}

fn index_dir(env: &TestEnv) -> PathBuf {
    env.repo().join("ledger/v1/index")
}

fn index_files(env: &TestEnv) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(index_dir(env))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn deleting_or_damaging_the_indexes_changes_no_output() {
    let (env, turns) = history();
    let with = outputs(&env, &turns);
    assert!(with
        .iter()
        .all(|(c, r)| r.code == 0 || c.starts_with("stop")));
    assert!(index_files(&env).len() > 3, "indexes were built");
    std::fs::remove_dir_all(index_dir(&env)).expect("rm -r index");
    let without = outputs(&env, &turns);
    assert_same(&with, &without, "when the indexes were deleted");
    // Damaged and stale index files: a flipped byte, a cut file, one segment's index in
    // another's place.
    let files = index_files(&env);
    let mut bytes = std::fs::read(&files[0]).expect("read");
    let n = bytes.len();
    bytes[n / 2] ^= 0x20;
    std::fs::write(&files[0], bytes).expect("write");
    let bytes = std::fs::read(&files[1]).expect("read");
    std::fs::write(&files[1], &bytes[..bytes.len() / 3]).expect("write");
    std::fs::copy(&files[3], &files[2]).expect("cp");
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "an index is a cache: {}", fsck.stdout);
    assert!(fsck.stdout.contains("stale-index"), "{}", fsck.stdout);
    let damaged = outputs(&env, &turns);
    assert_same(&with, &damaged, "with damaged indexes");
    let repaired = env.run(&["fsck", "--repair"]);
    assert_eq!(repaired.code, 0, "{}", repaired.stdout);
    let again = env.run(&["fsck"]);
    assert!(!again.stdout.contains("stale-index"), "{}", again.stdout);
}

#[test]
fn a_crash_while_an_index_is_written_leaves_a_usable_repository() {
    let (env, turns) = history();
    let with = outputs(&env, &turns);
    for how in ["torn", "crash"] {
        for nth in [1, 3] {
            std::fs::remove_dir_all(index_dir(&env)).expect("rm -r index");
            assert!(
                !search_succeeds_with(&env, &format!("{how}@{nth}")),
                "{how}@{nth}: the process died writing an index"
            );
            assert_usable(
                &env,
                &turns,
                &with,
                &format!("after a {how} at index write {nth}"),
            );
        }
    }
}

/// Whether a search succeeded with failpoint `ledger.index.write` set to `when`.
fn search_succeeds_with(env: &TestEnv, when: &str) -> bool {
    env.cmd(&["history", "--all", "--search", "answer"])
        .env("AXOCOATL_FAILPOINTS", format!("ledger.index.write={when}"))
        .output()
        .expect("run")
        .status
        .success()
}

/// Every read-only command prints what it printed (`with`), and `fsck` passes.
fn assert_usable(env: &TestEnv, turns: &[String], with: &[(String, Run)], what: &str) {
    let after = outputs(env, turns);
    assert_same(with, &after, what);
    assert_eq!(env.run(&["fsck"]).code, 0, "{what}");
}

/// The merged term indexes a search builds (one per 4 sealed segments here) are caches too:
/// deleted, or torn or cut short by a crash while one is written, they change no output,
/// and the next search builds them again.
#[test]
fn a_crash_while_a_merged_term_index_is_written_changes_no_output() {
    let (env, turns) = history();
    let with = outputs(&env, &turns);
    let merged = || -> Vec<PathBuf> {
        index_files(&env)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "terms"))
            .collect()
    };
    let built = merged();
    assert!(
        !built.is_empty(),
        "a search merged some: {:?}",
        index_files(&env)
    );
    let bytes: Vec<Vec<u8>> = built
        .iter()
        .map(|f| std::fs::read(f).expect("read"))
        .collect();
    for how in ["torn", "crash"] {
        for f in merged() {
            std::fs::remove_file(f).expect("rm");
        }
        // The segments' own indexes are in place: the first index written is a merged one.
        assert!(
            !search_succeeds_with(&env, &format!("{how}@1")),
            "{how}: the process died writing it"
        );
        assert!(
            built
                .iter()
                .zip(&bytes)
                .any(|(f, b)| std::fs::read(f).ok().as_ref() != Some(b)),
            "{how}: a merged index is missing or torn"
        );
        assert_usable(
            &env,
            &turns,
            &with,
            &format!("after a {how} writing a merged index"),
        );
        assert_eq!(merged(), built, "{how}: built again");
        for (f, b) in built.iter().zip(&bytes) {
            assert_eq!(
                &std::fs::read(f).expect("read"),
                b,
                "{how}: {f:?} as before"
            );
        }
    }
}

/// Flips a byte inside the payload of a record in a sealed segment.
fn damage_a_sealed_record(env: &TestEnv) -> PathBuf {
    let path = env.repo().join("ledger/v1/000000000002.seg");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[40 + 30] ^= 0x01;
    std::fs::write(&path, bytes).expect("write");
    path
}

#[test]
fn damaged_records_are_said_by_every_reader_every_time() {
    let (env, _) = history();
    damage_a_sealed_record(&env);
    // The indexes were built from the intact bytes, so what they summarise is still
    // complete; a reader that decodes the damaged record says so.
    let h = env.run(&["history", "--all"]);
    assert_eq!(h.code, 1);
    assert!(h.stderr.contains("ledger corrupt"), "{}", h.stderr);
    // Built again from the damaged bytes, every index reader reports the damage.
    std::fs::remove_dir_all(index_dir(&env)).expect("rm -r index");
    for _ in 0..2 {
        let h = env.run(&["history", "--all"]);
        assert_eq!(h.code, 1);
        assert!(h.stderr.contains("ledger corrupt"), "{}", h.stderr);
        for args in [
            vec!["sessions"],
            vec!["usage", "--all"],
            vec!["history", "-s", "s1"],
        ] {
            let r = env.run(&args);
            assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("ledger corrupt") && r.stderr.contains("000000000002.seg"),
                "{args:?}: {}",
                r.stderr
            );
        }
        let md = env.run(&["export", "--all"]);
        assert_eq!(md.code, 1);
        assert!(md.stdout.contains("**INCOMPLETE**"), "{}", md.stdout);
        assert!(md.stderr.contains("ledger corrupt"));
        let js = env.run(&["export", "--all", "--format", "json"]);
        assert_eq!(js.code, 1);
        let doc: serde_json::Value = serde_json::from_str(&js.stdout).expect("json");
        assert_eq!(doc["export"]["complete"], false);
        assert_eq!(doc["export"]["damaged"].as_array().map(Vec::len), Some(1));
        let send = env.run(&["send", "--no-stdin", "-s", "s1", "alpha again"]);
        assert_eq!(send.code, 0, "{}", send.stderr);
        assert!(
            send.stderr.contains("ledger corrupt") && send.stderr.contains("lacks it")
                || send.stderr.contains("rebuilt without it"),
            "{}",
            send.stderr
        );
    }
}

#[test]
fn a_clean_export_says_it_is_complete() {
    let (env, _) = history();
    let js = env.run(&["export", "--all", "--format", "json"]);
    assert_eq!(js.code, 0, "{}", js.stderr);
    let doc: serde_json::Value = serde_json::from_str(&js.stdout).expect("json");
    assert_eq!(doc["export"]["complete"], true);
    assert_eq!(doc["export"]["damaged"], serde_json::json!([]));
    let md = env.run(&["export", "--all"]);
    assert!(!md.stdout.contains("INCOMPLETE"));
}

#[test]
fn search_through_the_term_indexes_prints_what_the_scan_prints() {
    let (env, _) = history();
    for q in [
        "answer",
        "TIMEOUTS and",
        "swer: ti",
        "Alpha",
        "ledger.",
        "question 2",
        "a",
        "notes.txt",
        ": ",
        "nothing like it",
    ] {
        let indexed = env.run(&["history", "--all", "--search", q]);
        let scanned = Run::from_output(
            env.cmd(&["history", "--all", "--search", q])
                .env("AXOCOATL_SEARCH_SCAN", "1")
                .output()
                .expect("run"),
        );
        assert_eq!(
            (indexed.code, &indexed.stdout, &indexed.stderr),
            (scanned.code, &scanned.stdout, &scanned.stderr),
            "{q:?}"
        );
    }
}

/// The listings are written in blocks of 64 KiB: one that cannot be written (a full disk)
/// is the command's error, naming standard output, and a reader that closes the pipe early
/// is not an error.
#[test]
fn a_listing_that_cannot_be_written_is_an_error_and_a_closed_pipe_is_not() {
    let (env, turns) = history();
    let listings: [&[&str]; 5] = [
        &["history", "--all"],
        &["history", "--all", "--json"],
        &["sessions"],
        &["usage"],
        &["show", &turns[0]],
    ];
    for args in listings {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let r = Run::from_output(
            env.cmd(args)
                .stdout(full)
                .stderr(std::process::Stdio::piped())
                .output()
                .expect("run"),
        );
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("cannot write to standard output"),
            "{args:?}: {}",
            r.stderr
        );
    }
    let mut child = env
        .cmd(&["export", "--all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let r = Run::from_output(child.wait_with_output().expect("wait"));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// A repository of `turns` turns with one record of every kind each (tool calls recorded as
/// `ToolFinished`, bounded outputs, plans, warnings…), every free-text field a text of
/// `words`, written through the store in segments of 3000 bytes (most sealed and indexed).
fn every_kind_history(turns: usize, words: &dyn Fn(usize) -> String) -> TestEnv {
    use axocoatl_store::repo::OpenOptions;
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: agent\n    provider: canned\n",
    );
    let repo = axocoatl_store::Repo::open(
        &env.repo(),
        &OpenOptions {
            segment_limit: 3000,
            ..Default::default()
        },
    )
    .expect("open");
    let mut n = 0;
    for t in 0..turns {
        let records = axocoatl_store::ledger::samples::turn_of_every_kind(
            &format!("{t:016x}"),
            ["main", "other"][t % 2],
            1_767_323_045_000 + t as i64 * 1000,
            &mut || {
                n += 1;
                words(n)
            },
        );
        for r in records {
            repo.ledger().append_lazy(&[r]).expect("append");
        }
    }
    env
}

/// `history --search` through the term indexes and by the scan, compared.
fn assert_search_equals_scan(env: &TestEnv, q: &str) -> usize {
    let args = ["history", "--all", "--json", "--search", q];
    let indexed = env.run(&args);
    let scanned = Run::from_output(
        env.cmd(&args)
            .env("AXOCOATL_SEARCH_SCAN", "1")
            .output()
            .expect("run"),
    );
    assert_eq!(
        (indexed.code, &indexed.stdout, &indexed.stderr),
        (scanned.code, &scanned.stdout, &scanned.stderr),
        "{q:?}"
    );
    indexed.stdout.lines().count()
}

/// Whatever field of whatever record kind a word is in, a search through the indexes finds
/// the turns the scan finds (a word only a tool's output holds included), over random
/// queries.
#[test]
fn search_through_the_indexes_equals_the_scan_for_every_record_kind() {
    const WORDS: &[&str] = &[
        "ledger",
        "Timeout",
        "straße",
        "x86_64",
        "naïve",
        "日本語",
        "e-mail",
        "foo.bar",
        "kelvin",
        "OUTPUT",
        "42",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let texts: Vec<String> = (0..2000)
        .map(|_| {
            let k = 3 + next() % 5;
            (0..k)
                .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join([" ", ", ", "-", "\n"][(next() % 4) as usize])
        })
        .collect();
    let env = every_kind_history(24, &|n| format!("{} w{n}.", texts[n % texts.len()]));
    let segments = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ls")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
        .count();
    assert!(segments > 5, "{segments} segments");
    // A word in one field of one record each, for the fields of every kind: found exactly
    // when a search looks in that field (the 2nd to 5th, 9th, 11th to 14th and 16th texts
    // of each turn; see `turn_of_every_kind`).
    let searched = [2, 3, 4, 5, 9, 11, 12, 13, 14, 16];
    for n in (1..=24 * 17).step_by(2) {
        let found = assert_search_equals_scan(&env, &format!(" w{n}."));
        let expected = usize::from(searched.contains(&((n - 1) % 17 + 1)));
        assert_eq!(found, expected, "w{n}");
    }
    for i in 0..60 {
        let t: Vec<char> = texts[(next() % 200) as usize].chars().collect();
        let a = (next() as usize) % t.len();
        let b = (a + 1 + (next() as usize) % 12).min(t.len());
        let mut q: String = t[a..b].iter().collect();
        if i % 3 == 0 {
            q = q.to_uppercase();
        }
        if q.trim().is_empty() {
            continue;
        }
        assert_search_equals_scan(&env, &q);
    }
}

/// A hit says where it matched: the field's name and a short piece of it, in the text and
/// the JSON output.
#[test]
fn a_search_hit_names_its_field_and_shows_a_snippet() {
    let env = every_kind_history(2, &|n| {
        format!("the frozen field number {n} of a turn, whose text runs on for longer than a snippet shows of it")
    });
    // Text 11 of the first turn is the output of its `read_file` call (a `ToolFinished`).
    let text = env.run(&["history", "--all", "--search", "number 11 of"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    snap!("search_hit_tool_output", env.snap(&text));
    let json = env.run(&["history", "--all", "--json", "--search", "number 2 of"]);
    let v: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().expect("a turn")).expect("json");
    assert_eq!(v["match"]["field"], "request", "{v}");
    let snippet = v["match"]["snippet"].as_str().expect("snippet");
    assert!(
        snippet.starts_with("the frozen field number 2 of a turn") && snippet.ends_with('…'),
        "{snippet}"
    );
    for (n, field, tool) in [
        (3, "context_label", None),
        (5, "attachment", None),
        (9, "tool_arguments", Some("read_file")),
        (11, "tool_output", Some("read_file")),
        (12, "output", None),
        (13, "output", None),
        (14, "warning", None),
        (16, "error", None),
    ] {
        let q = format!("number {n} of");
        let r = env.run(&["history", "--all", "--json", "--search", &q]);
        let v: serde_json::Value =
            serde_json::from_str(r.stdout.lines().next().unwrap_or("{}")).expect("json");
        assert_eq!(v["match"]["field"], field, "{q}: {v}");
        assert_eq!(v["match"]["tool"].as_str(), tool, "{q}: {v}");
    }
}
