//! `export --format sqlite`: the ledger as SQLite tables, refreshed incrementally, read
//! back with SQLite itself (rusqlite) and served by Datasette from PyPI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rusqlite::{Connection, OpenFlags};

use crate::common::env::{wait_until, TestEnv};

const CONFIG: &str = "providers:
  s: {kind: script, script: replies.yaml}
agents:
  - id: coder
    provider: s
    tools: [read_file, core_memory_append]
";

const REPLIES: &str = r#"replies:
  - match: "needle"
    tool_calls: [{name: read_file, arguments: {path: fact.txt}, id: call_fact}]
    usage: {prompt_tokens: 30, completion_tokens: 4}
  - match: "needle"
    text: "The fact file says quasar."
    usage: {prompt_tokens: 40, completion_tokens: 6}
  - match: "remember"
    tool_calls: [{name: core_memory_append, arguments: {label: human, content: likes tea}}]
  - match: "remember"
    text: "Noted."
  - match: "hello"
    text: "Hello there."
    usage: {prompt_tokens: 5, completion_tokens: 2}
  - match: "fail"
    error: "model overloaded"
  - match: "slow"
    chunks: ["slow ", "answer"]
    delay_ms: 400
"#;

fn env() -> TestEnv {
    let env = TestEnv::with_config(CONFIG);
    env.write("replies.yaml", REPLIES);
    env.write("fact.txt", "quasar lives here\n");
    env
}

fn send(env: &TestEnv, session: &str, text: &str) {
    let r = env.run(&["send", "--no-stdin", "-s", session, text]);
    assert!(r.code == 0 || text.contains("fail"), "{}", r.stderr);
}

/// Three turns in `main` (a tool call, a memory edit, a failure), one in `other`.
fn history(env: &TestEnv) {
    send(env, "main", "find the needle");
    send(env, "main", "remember I like tea");
    send(env, "main", "fail now");
    send(env, "other", "hello");
}

fn open(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open export")
}

fn one<T: rusqlite::types::FromSql>(db: &Connection, sql: &str) -> T {
    db.query_row(sql, [], |r| r.get(0)).expect(sql)
}

/// Every table of an export, row by row in key order (`_meta`'s times and the
/// repository's own values left out), normalized: two exports of the same ledger dump
/// the same.
fn dump(env: &TestEnv, path: &Path) -> String {
    let db = open(path);
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'events_fts%' ORDER BY name")
        .expect("tables")
        .query_map([], |r| r.get(0))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("tables");
    let quoted = regex::Regex::new(r#"( (?:output|text)=)"(?:[^"\\]|\\.)*""#).expect("re");
    let mut out = String::new();
    for table in tables {
        out.push_str(&format!("## {table}\n"));
        let mut stmt = db
            .prepare(&format!("SELECT * FROM [{table}] ORDER BY 1, 2"))
            .expect("select");
        let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
        let rows = stmt
            .query_map([], |r| {
                let mut cells = Vec::new();
                for (i, name) in names.iter().enumerate() {
                    let v: rusqlite::types::Value = r.get(i)?;
                    let text = match v {
                        rusqlite::types::Value::Null => continue,
                        rusqlite::types::Value::Integer(n) => n.to_string(),
                        rusqlite::types::Value::Real(f) => f.to_string(),
                        rusqlite::types::Value::Text(t) => format!("{t:?}"),
                        rusqlite::types::Value::Blob(b) => format!("<{} bytes>", b.len()),
                    };
                    cells.push(format!("{name}={text}"));
                }
                Ok(cells.join(" "))
            })
            .expect("rows");
        for row in rows {
            let row = row.expect("row");
            if table == "_meta"
                && [
                    "key=\"ledger_offset\"",
                    "key=\"ledger_record_offset\"",
                    "key=\"exported_at\"",
                    "key=\"repository\"",
                    "key=\"ledger_record\"",
                ]
                .iter()
                .any(|k| row.starts_with(k))
            {
                continue;
            }
            // Warnings are other features' words (the memory tiers'): their kind and code
            // are what the export is about.
            let row = match (row.find(" kind=\"warning\""), row.find(" text=")) {
                (Some(_), Some(at)) => format!("{} text=[warning]", &row[..at]),
                _ => row,
            };
            // So are the memory tools' results.
            let row =
                if row.contains("name=\"core_memory_") && !row.contains("kind=\"memory_edit\"") {
                    quoted
                        .replace_all(&row, "${1}[memory tool output]")
                        .into_owned()
                } else {
                    row
                };
            out.push_str(&row);
            out.push('\n');
        }
    }
    // Tool durations are the machine's.
    let ms = regex::Regex::new(r#"duration_ms(\\?"?[:=])\d+"#).expect("re");
    // Reservations follow the prompt, which memory and tool features shape.
    let reserved = regex::Regex::new(r#"(reserved_tokens|output_len)(\\?"?[:=])\d+"#).expect("re");
    let out = reserved.replace_all(&out, "${1}${2}[N]");
    env.normalize(&ms.replace_all(&out, "duration_ms${1}[MS]"))
}

fn export(env: &TestEnv, args: &[&str]) -> crate::common::env::Run {
    let mut all = vec!["export", "--format", "sqlite"];
    all.extend_from_slice(args);
    env.run(&all)
}

#[test]
fn an_export_holds_every_table_with_keys_indexes_and_a_search_index() {
    let env = env();
    history(&env);
    let r = export(&env, &["--all", "-o", "history.db"]);
    snap!("export", env.snap(&r));
    let path = env.work.join("history.db");
    let db = open(&path);
    assert_eq!(one::<String>(&db, "PRAGMA integrity_check"), "ok");
    // Every declared foreign key holds.
    let broken: i64 = one(&db, "SELECT count(*) FROM pragma_foreign_key_check");
    assert_eq!(broken, 0);
    assert_eq!(one::<String>(&db, "PRAGMA journal_mode"), "wal");
    // The search index as Datasette finds it: an FTS table whose content is `events`.
    let fts: String = one(
        &db,
        "SELECT name FROM sqlite_master WHERE rootpage = 0 AND sql LIKE '%VIRTUAL TABLE%USING FTS%content=[events]%'",
    );
    assert_eq!(fts, "events_fts");
    let found: String = one(
        &db,
        "SELECT e.turn FROM events_fts JOIN events e ON e.seq = events_fts.rowid WHERE events_fts MATCH 'quasar' AND e.kind = 'tool_result'",
    );
    let needle: String = one(&db, "SELECT turn FROM turns WHERE request LIKE '%needle%'");
    assert_eq!(found, needle);
    let (name, exit, model_call): (String, Option<i64>, Option<i64>) = db
        .query_row(
            "SELECT name, exit_code, model_call FROM tool_calls WHERE turn = ?1",
            [&needle],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("tool call");
    assert_eq!((name.as_str(), exit), ("read_file", None));
    assert!(
        model_call.is_some(),
        "the call is linked to the model call that asked for it"
    );
    let edits: i64 = one(
        &db,
        "SELECT count(*) FROM events WHERE kind = 'memory_edit'",
    );
    assert_eq!(edits, 1);
    let indexes: i64 = one(
        &db,
        "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'",
    );
    assert!(indexes >= 10, "{indexes} indexes");
    snap!("tables", dump(&env, &path));
}

#[test]
fn a_session_export_holds_that_session_only() {
    let env = env();
    history(&env);
    let r = export(&env, &["-s", "other", "-o", "other.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = open(&env.work.join("other.db"));
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM turns"), 1);
    assert_eq!(
        one::<i64>(
            &db,
            "SELECT count(*) FROM events WHERE session <> 'other' OR session IS NULL"
        ),
        0
    );
    assert_eq!(one::<i64>(&db, "SELECT count(*) FROM sessions"), 1);
}

/// The incremental export: a refresh adds what the ledger gained (new turns, the end of a
/// turn that was running, a rewind that supersedes turns) and ends equal to a new export of
/// the same ledger.
#[test]
fn a_refresh_adds_what_is_new_and_equals_a_new_export() {
    let env = env();
    history(&env);
    let path = env.work.join("live.db");
    assert_eq!(export(&env, &["--all", "-o", "live.db"]).code, 0);
    let before: i64 = one(&open(&path), "SELECT count(*) FROM events");
    // A turn running while the file is refreshed: in it as `running`, then ended.
    let mut slow = env
        .cmd(&["send", "--no-stdin", "-s", "main", "slow please"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("send");
    let mut err = slow.stderr.take().expect("stderr");
    crate::common::env::read_until(&mut err, "turn ");
    let r = export(&env, &["--all", "-o", "live.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let state: String = one(
        &open(&path),
        "SELECT state FROM turns WHERE request = 'slow please'",
    );
    assert_eq!(state, "running");
    assert!(slow.wait().expect("wait").success());
    send(&env, "other", "hello again");
    let r = env.run(&["rewind", "-s", "main", "--yes", &first_turn(&path, "main")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = export(&env, &["--all", "-o", "live.db"]);
    snap!("refresh", env.snap(&r));
    let db = open(&path);
    let state: String = one(&db, "SELECT state FROM turns WHERE request = 'slow please'");
    assert_eq!(state, "completed");
    let superseded: i64 = one(
        &db,
        "SELECT count(*) FROM turns WHERE session = 'main' AND superseded = 1",
    );
    assert_eq!(
        superseded, 4,
        "the rewind to the first turn supersedes every turn of main"
    );
    assert!(one::<i64>(&db, "SELECT count(*) FROM events") > before);
    assert_eq!(
        one::<i64>(&db, "SELECT count(*) FROM pragma_foreign_key_check"),
        0
    );
    // The search index follows the refresh (its triggers).
    let hits: i64 = one(
        &db,
        "SELECT count(*) FROM events_fts WHERE events_fts MATCH 'again'",
    );
    assert_eq!(hits, 1);
    // FTS5's own check of the index against its content table (rank 1: the content too).
    Connection::open(&path)
        .expect("open")
        .execute(
            "INSERT INTO events_fts(events_fts, rank) VALUES('integrity-check', 1)",
            [],
        )
        .expect("the index matches the events");
    // Nothing new: a refresh changes nothing but the time it ran.
    let again = export(&env, &["--all", "-o", "live.db"]);
    assert!(again.stderr.contains("(0 new)"), "{}", again.stderr);
    assert_eq!(export(&env, &["--all", "-o", "fresh.db"]).code, 0);
    assert_eq!(dump(&env, &path), dump(&env, &env.work.join("fresh.db")));
}

fn first_turn(path: &Path, session: &str) -> String {
    open(path)
        .query_row(
            "SELECT turn FROM turns WHERE session = ?1 ORDER BY seq LIMIT 1",
            [session],
            |r| r.get(0),
        )
        .expect("first turn")
}

#[test]
fn refreshes_at_once_run_one_after_the_other() {
    let env = env();
    history(&env);
    assert_eq!(export(&env, &["--all", "-o", "cron.db"]).code, 0);
    send(&env, "main", "hello one");
    send(&env, "other", "hello two");
    let children: Vec<Child> = (0..4)
        .map(|_| {
            env.cmd(&["export", "--all", "--format", "sqlite", "-o", "cron.db"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut added = Vec::new();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        added.push(err);
    }
    // Exactly one of them added the two turns.
    assert_eq!(
        added.iter().filter(|e| e.contains("(2 new)")).count(),
        1,
        "{added:?}"
    );
    assert_eq!(export(&env, &["--all", "-o", "fresh.db"]).code, 0);
    assert_eq!(
        dump(&env, &env.work.join("cron.db")),
        dump(&env, &env.work.join("fresh.db"))
    );
}

#[test]
fn files_it_did_not_write_for_this_repository_and_scope_are_refused() {
    let env = env();
    history(&env);
    assert_eq!(export(&env, &["--all", "-o", "mine.db"]).code, 0);
    let mine = std::fs::read(env.work.join("mine.db")).expect("read");
    // Another repository's export.
    let other = self::env();
    send(&other, "main", "hello from elsewhere");
    std::fs::copy(env.work.join("mine.db"), other.work.join("theirs.db")).expect("copy");
    let r = export(&other, &["--all", "-o", "theirs.db"]);
    snap!("another_repository", other.snap(&r));
    // Another scope.
    snap!(
        "another_scope",
        env.snap(&export(&env, &["-s", "main", "-o", "mine.db"]))
    );
    // A newer exporter's schema.
    let newer = env.work.join("newer.db");
    std::fs::write(&newer, &mine).expect("copy");
    Connection::open(&newer)
        .expect("open")
        .execute(
            "UPDATE _meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .expect("update");
    snap!(
        "newer_schema",
        env.snap(&export(&env, &["--all", "-o", "newer.db"]))
    );
    // Some other SQLite database, and a file that is no database at all.
    let foreign = Connection::open(env.work.join("notes.db")).expect("create");
    foreign
        .execute_batch("CREATE TABLE notes (text TEXT);")
        .expect("table");
    drop(foreign);
    snap!(
        "foreign_database",
        env.snap(&export(&env, &["--all", "-o", "notes.db"]))
    );
    env.write("notes.txt", "just text\n");
    snap!(
        "not_a_database",
        env.snap(&export(&env, &["--all", "-o", "notes.txt"]))
    );
    assert_eq!(
        std::fs::read_to_string(env.work.join("notes.txt")).expect("read"),
        "just text\n"
    );
    std::fs::create_dir(env.work.join("dir.db")).expect("mkdir");
    snap!(
        "a_directory",
        env.snap(&export(&env, &["--all", "-o", "dir.db"]))
    );
    snap!("no_output", env.snap(&export(&env, &["--all"])));
    // None of that touched the export.
    assert_eq!(std::fs::read(env.work.join("mine.db")).expect("read"), mine);
}

#[test]
fn a_failed_export_leaves_no_file_behind() {
    let env = env();
    history(&env);
    // A directory that cannot be written: the temporary file cannot be made.
    let ro = env.work.join("ro");
    std::fs::create_dir(&ro).expect("mkdir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).expect("chmod");
    let r = export(&env, &["--all", "-o", "ro/history.db"]);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    if r.code == 0 {
        // Root writes anyway: nothing to check here.
        return;
    }
    assert!(r.stderr.contains("history.db"), "{}", r.stderr);
    assert_eq!(std::fs::read_dir(&ro).expect("list").count(), 0);
}

/// The `datasette` of scripts/datasette-venv.sh. In CI it must be there; elsewhere (no
/// PyPI) the test says why it did not run.
fn datasette() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/datasette-venv.sh"))
        .stderr(Stdio::piped())
        .output()
        .expect("run scripts/datasette-venv.sh");
    if out.status.success() {
        return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    let why = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs Datasette: {why}"
    );
    #[expect(clippy::print_stderr, reason = "a skipped check says why")]
    {
        eprintln!("skipped: no Datasette ({why})");
    }
    None
}

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(url: &str) -> Option<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into();
    let mut resp = agent.get(url).call().ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.body_mut().read_to_string().ok()?))
}

#[test]
fn datasette_serves_an_export_and_searches_it() {
    let Some(datasette) = datasette() else {
        return;
    };
    let env = env();
    history(&env);
    assert_eq!(export(&env, &["--all", "-o", "history.db"]).code, 0);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let _served = Served(
        Command::new(&datasette)
            .arg("serve")
            .arg(env.work.join("history.db"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start datasette"),
    );
    let base = format!("http://127.0.0.1:{port}/history");
    wait_until("datasette to answer", || {
        get(&format!("{base}.json")).is_some()
    });
    // A full-text search through the JSON API: the tool result that holds the word.
    let (status, body) =
        get(&format!("{base}/events.json?_search=quasar&_shape=array")).expect("search");
    assert_eq!(status, 200, "{body}");
    let rows: serde_json::Value = serde_json::from_str(&body).expect("json");
    let kinds: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["tool_result", "answer"], "{body}");
    let needle = rows[0]["turn"].as_str().expect("turn").to_owned();
    // Datasette follows the declared keys: the turn's page lists the rows that point at it.
    let (status, body) = get(&format!(
        "{base}/turns/{needle}.json?_extras=foreign_key_tables"
    ))
    .expect("row");
    assert_eq!(status, 200, "{body}");
    let row: serde_json::Value = serde_json::from_str(&body).expect("json");
    let tables: Vec<&str> = row["foreign_key_tables"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["other_table"].as_str()).collect())
        .unwrap_or_default();
    for t in ["events", "model_calls", "tool_calls"] {
        assert!(tables.contains(&t), "{t} not among {tables:?}: {body}");
    }
    // It found the index by itself: the page of `events` has a search box, that of
    // `turns` (no index) has none.
    let (_, events) = get(&format!("{base}/events")).expect("events page");
    let (_, turns) = get(&format!("{base}/turns")).expect("turns page");
    assert!(events.contains("name=\"_search\""), "{events}");
    assert!(!turns.contains("name=\"_search\""), "{turns}");
}

#[test]
fn per_call_overrides_and_ocr_text_are_exported() {
    use axocoatl_store::extracted::{encode_ocr, OcrInfo};
    use axocoatl_store::ledger::record::{AttachmentAdded, AttachmentScope};
    use axocoatl_store::ledger::Record;
    let env = env();
    let r = env.run(&[
        "send",
        "--no-stdin",
        "--system",
        "Answer like a pirate.",
        "-o",
        "temperature=0.2",
        "hello",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // An image whose text OCR read, as `attach add` stores it (Tesseract is not needed to
    // write the records).
    let repo =
        axocoatl_store::Repo::open(&env.repo(), &axocoatl_store::repo::OpenOptions::default())
            .expect("open");
    let image = repo.objects().put(b"not really a png").expect("put");
    let info = OcrInfo {
        engine: "tesseract 5.3.0".into(),
        languages: "eng".into(),
        confidence: Some(91),
        words: 2,
        pages: 1,
        of_pages: 1,
        text_len: 13,
    };
    let text = repo
        .objects()
        .put(&encode_ocr(&info, "Invoice 4711\n"))
        .expect("put");
    repo.ledger()
        .append(&[Record::AttachmentAdded(AttachmentAdded {
            reference: "@scan.png".into(),
            session: "main".into(),
            name: "scan.png".into(),
            media_type: "image/png".into(),
            size: 16,
            scope: AttachmentScope::Session,
            object: image,
            text_object: Some(text),
            text_truncated: false,
            at: 1_767_225_600_000,
        })])
        .expect("append");
    drop(repo);
    assert_eq!(export(&env, &["--all", "-o", "history.db"]).code, 0);
    let db = open(&env.work.join("history.db"));
    let (model, system, detail): (Option<String>, String, String) = db
        .query_row(
            "SELECT name, text, detail FROM events WHERE kind = 'overrides'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("the overrides event");
    assert_eq!(model, None);
    assert_eq!(system, "Answer like a pirate.");
    assert!(
        detail.contains("temperature") && detail.contains("0.2"),
        "{detail}"
    );
    let (text, ocr): (String, String) = db
        .query_row(
            "SELECT text, ocr FROM attachments WHERE name = 'scan.png'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the attachment");
    assert_eq!(text, "Invoice 4711\n", "the text without OCR's header");
    let ocr: serde_json::Value = serde_json::from_str(&ocr).expect("json");
    assert_eq!(ocr["confidence"], 91);
    assert_eq!(ocr["engine"], "tesseract 5.3.0");
}

/// `--json` with `-o FILE`: one line on stdout saying what was written, for each format;
/// without a file it is a usage error (the export itself is on stdout then).
#[test]
fn json_summaries_say_what_each_export_wrote() {
    let env = env();
    history(&env);
    let first = env.run(&[
        "export", "--all", "--format", "sqlite", "-o", "h2.db", "--json",
    ]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.stderr, "", "--json says it on stdout only");
    crate::snap!("json_summary", env.snap(&first));
    let line = &crate::common::procs::json_lines(&first.stdout)[0];
    assert_eq!(line["format"], "sqlite");
    assert_eq!(line["scope"], "all");
    assert_eq!(line["turns"], 4);
    assert_eq!(line["created"], true);
    assert_eq!(line["turns_added"], 4);
    assert_eq!(line["complete"], true);
    assert_eq!(line["damaged"], serde_json::json!([]));
    assert!(line["seq"].as_u64().is_some_and(|s| s > 0), "{line}");
    let again = env.run(&[
        "export", "--all", "--format", "sqlite", "-o", "h2.db", "--json",
    ]);
    let line = &crate::common::procs::json_lines(&again.stdout)[0];
    assert_eq!(
        (&line["created"], &line["turns_added"]),
        (&false.into(), &0.into())
    );

    let md = env.run(&["export", "-s", "main", "-o", "main.md", "--json"]);
    assert_eq!(md.code, 0, "{}", md.stderr);
    let line = &crate::common::procs::json_lines(&md.stdout)[0];
    assert_eq!(line["format"], "markdown");
    assert_eq!(line["scope"], serde_json::json!({"session": "main"}));
    assert_eq!(line["turns"], 3);
    assert!(
        line["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/main.md")),
        "{line}"
    );
    assert!(line.get("created").is_none(), "{line}");

    let traces = env.run(&[
        "export", "--all", "--format", "otlp", "-o", "t.jsonl", "--json",
    ]);
    assert_eq!(traces.code, 0, "{}", traces.stderr);
    let line = &crate::common::procs::json_lines(&traces.stdout)[0];
    assert_eq!(
        (&line["format"], &line["turns"]),
        (&"otlp".into(), &4.into())
    );
    assert!(line["spans"].as_u64().is_some_and(|s| s >= 4), "{line}");
    assert_eq!(line["running"], 0);

    let bare = env.run(&["export", "--json"]);
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(
        bare.stderr.contains("give it with -o FILE"),
        "{}",
        bare.stderr
    );
}

/// `sessions.name` is the name a session goes by now: a rename since the last export
/// renames it in the file at the next refresh (rows keep the ledger's name, which the other
/// tables refer to), and a file of the first schema, which had no such column, is brought up
/// to the current one by that refresh and then holds what a new export holds.
#[test]
fn a_refresh_renames_sessions_and_upgrades_a_first_schema_file() {
    let env = env();
    history(&env);
    assert_eq!(export(&env, &["--all", "-o", "live.db"]).code, 0);
    let path = env.work.join("live.db");
    let name = |db: &Connection| -> String {
        one(db, "SELECT name FROM sessions WHERE session = 'other'")
    };
    assert_eq!(name(&open(&path)), "other");
    let r = env.run(&["sessions", "rename", "other", "elsewhere"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(export(&env, &["--all", "-o", "live.db"]).code, 0);
    let db = open(&path);
    assert_eq!(name(&db), "elsewhere");
    assert_eq!(
        one::<i64>(&db, "SELECT count(*) FROM turns WHERE session = 'other'"),
        1,
        "rows keep the ledger's name"
    );
    drop(db);

    // The same file as the first schema wrote it: no `name` column (nor the cache and cost
    // columns of version 3), version 1.
    let first = env.work.join("first.db");
    std::fs::copy(&path, &first).expect("copy");
    Connection::open(&first)
        .expect("open")
        .execute_batch(&format!(
            "{DROP_CACHE_AND_COST}
             ALTER TABLE sessions DROP COLUMN name;
             UPDATE _meta SET value = '1' WHERE key = 'schema_version';
             PRAGMA user_version = 1;"
        ))
        .expect("downgrade");
    send(&env, "main", "hello once more");
    let r = export(&env, &["--all", "-o", "first.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = open(&first);
    assert_eq!(name(&db), "elsewhere");
    assert_eq!(
        one::<String>(&db, "SELECT value FROM _meta WHERE key = 'schema_version'"),
        "3"
    );
    assert_eq!(one::<i64>(&db, "PRAGMA user_version"), 3);
    drop(db);
    assert_eq!(export(&env, &["--all", "-o", "fresh.db"]).code, 0);
    assert_eq!(dump(&env, &first), dump(&env, &env.work.join("fresh.db")));
}

/// What version 3 added: a file of version 2 has none of it.
const DROP_CACHE_AND_COST: &str = "
    ALTER TABLE turns DROP COLUMN cache_write_tokens;
    ALTER TABLE turns DROP COLUMN cache_read_tokens;
    ALTER TABLE turns DROP COLUMN cost_usd;
    ALTER TABLE turns DROP COLUMN priced_calls;
    ALTER TABLE model_calls DROP COLUMN cache_write_tokens;
    ALTER TABLE model_calls DROP COLUMN cache_read_tokens;
    ALTER TABLE model_calls DROP COLUMN cost_usd;";

/// A file of the second schema (no cache or cost columns) is brought up to the current one
/// by a refresh: the columns are added and filled from the events it holds, so it then
/// holds what a new export holds; model calls and turns carry their cache tokens and cost.
#[test]
fn a_refresh_upgrades_a_second_schema_file_with_cache_and_cost() {
    let env = env();
    env.write(
        "replies.yaml",
        &REPLIES.replace(
            "usage: {prompt_tokens: 30, completion_tokens: 4}",
            "usage: {prompt_tokens: 30, completion_tokens: 4, cache_read_tokens: 20}",
        ),
    );
    env.write(
        "axocoatl.yaml",
        &format!("{CONFIG}prices:\n  - {{provider: s, model: script, input: 2, output: 10, cache_read: 0.5}}\n"),
    );
    history(&env);
    assert_eq!(export(&env, &["--all", "-o", "live.db"]).code, 0);
    let path = env.work.join("live.db");
    let db = open(&path);
    // The needle turn: 10 × $2 + 20 × $0.5 + 4 × $10, then 40 × $2 + 6 × $10 per million.
    let (read, cost): (i64, f64) = db
        .query_row(
            "SELECT cache_read_tokens, cost_usd FROM turns WHERE request = 'find the needle'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("turn");
    assert_eq!(read, 20);
    assert!((cost - 0.00021).abs() < 1e-12, "{cost}");
    assert_eq!(
        one::<i64>(
            &db,
            "SELECT count(*) FROM model_calls WHERE cache_read_tokens = 20"
        ),
        1
    );
    drop(db);
    Connection::open(&path)
        .expect("open")
        .execute_batch(&format!(
            "{DROP_CACHE_AND_COST}
             UPDATE _meta SET value = '2' WHERE key = 'schema_version';
             PRAGMA user_version = 2;"
        ))
        .expect("downgrade");
    send(&env, "main", "hello once more");
    let r = export(&env, &["--all", "-o", "live.db"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let db = open(&path);
    assert_eq!(one::<i64>(&db, "PRAGMA user_version"), 3);
    drop(db);
    assert_eq!(export(&env, &["--all", "-o", "fresh.db"]).code, 0);
    assert_eq!(dump(&env, &path), dump(&env, &env.work.join("fresh.db")));
}
