//! Attachments through the real binary: add/list/rm/cat, once and session scope, caps,
//! content sniffing, the text cap, shared objects, names as data, retry and rewind,
//! fsck, and the text and images reaching a loopback Ollama server.
//!
//! Fixtures in tests/fixtures/attach/ are tiny (a 1x1 PNG, a one-page PDF saying "Hello
//! from a PDF", a Markdown file); big files are made at test time.

use std::path::{Path, PathBuf};

use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::procs::json_lines;
use serde_json::Value;

const MIB: usize = 1024 * 1024;
const TEXT_CAP: usize = 256 * 1024;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/attach")
        .join(name)
}

/// Copies a fixture into the test's working directory.
fn put_fixture(env: &TestEnv, name: &str) {
    std::fs::copy(fixture(name), env.work.join(name)).expect("copy fixture");
}

fn put_bytes(env: &TestEnv, name: &str, bytes: &[u8]) {
    std::fs::write(env.work.join(name), bytes).expect("write file");
}

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: bot\n    provider: canned\n",
    );
    let replies: String = (1..=8)
        .map(|n| format!("  - text: \"answer {n}\"\n"))
        .collect();
    env.write("replies.yaml", &format!("replies:\n{replies}"));
    put_fixture(&env, "notes.md");
    put_fixture(&env, "pixel.png");
    put_fixture(&env, "hello.pdf");
    env
}

/// `attach add ARGS`, asserting success; the reference ids it printed.
fn add(env: &TestEnv, args: &[&str]) -> Vec<String> {
    let mut all = vec!["attach", "add"];
    all.extend_from_slice(args);
    let r = env.run(&all);
    assert_eq!(r.code, 0, "attach add failed: {}", r.stderr);
    r.stdout.lines().map(str::to_owned).collect()
}

/// `attach list --all --json` of the HEAD session.
fn all_refs(env: &TestEnv) -> Vec<Value> {
    let r = env.run(&["attach", "list", "--all", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

fn selected(env: &TestEnv) -> Vec<Value> {
    let r = env.run(&["attach", "list", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

fn turns(env: &TestEnv) -> Vec<Value> {
    json_lines(&env.run(&["history", "--json"]).stdout)
}

/// Every object file under .axocoatl/objects, as `ab/cdef…`, sorted.
fn objects(env: &TestEnv) -> Vec<String> {
    let mut out = Vec::new();
    let dir = env.repo().join("objects");
    for fan in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(fan.path()).expect("fan").flatten() {
            out.push(format!(
                "{}/{}",
                fan.file_name().to_string_lossy(),
                f.file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

fn object_path(env: &TestEnv, hash: &str) -> PathBuf {
    env.repo().join("objects").join(&hash[..2]).join(&hash[2..])
}

/// stdout as bytes (for `attach cat`).
fn raw_stdout(env: &TestEnv, args: &[&str]) -> (i32, Vec<u8>) {
    let out = env.cmd(args).output().expect("run");
    (out.status.code().unwrap_or(-1), out.stdout)
}

#[test]
fn help() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help_attach", &["attach", "--help"][..]),
        ("help_attach_add", &["attach", "add", "--help"]),
        ("help_attach_list", &["attach", "list", "--help"]),
        ("help_attach_rm", &["attach", "rm", "--help"]),
        ("help_attach_cat", &["attach", "cat", "--help"]),
    ] {
        snap!(name, env.snap(&env.run(args)));
    }
}

#[test]
fn once_is_consumed_after_one_turn() {
    let env = script_env();
    snap!(
        "add_once",
        env.snap(&env.run(&["attach", "add", "notes.md"]))
    );
    snap!("list_selected", env.snap(&env.run(&["attach", "list"])));
    let [reference] = &selected(&env)[..] else {
        panic!("one selected reference")
    };
    assert_eq!(
        (&reference["scope"], &reference["state"]),
        (&"once".into(), &"selected".into())
    );
    snap!("send_with_once", env.snap(&env.run(&["send", "summarize"])));
    let first = &turns(&env)[0];
    assert_eq!(first["attachments"][0]["reference"], reference["reference"]);
    assert_eq!(first["attachments"][0]["name"], "notes.md");
    assert!(selected(&env).is_empty());
    snap!("list_after_turn", env.snap(&env.run(&["attach", "list"])));
    snap!(
        "list_all_after_turn",
        env.snap(&env.run(&["attach", "list", "--all"]))
    );
    let all = all_refs(&env);
    assert_eq!(all[0]["state"], "consumed");
    assert_eq!(all[0]["consumed_by"], first["turn"]);
    // The next turn goes without it.
    assert_eq!(env.run(&["send", "and now?"]).code, 0);
    assert_eq!(turns(&env)[1]["attachments"], serde_json::json!([]));
    // The consumption is a ledger record after the begin record; exports list the pin.
    let export = env.run(&["export", "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let doc: Value = serde_json::from_str(&export.stdout).expect("export json");
    let records = doc["turns"][0]["records"].as_array().expect("records");
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds[..2], ["TurnBegun", "AttachmentConsumed"], "{kinds:?}");
    assert_eq!(records[1]["reference"], reference["reference"]);
    assert_eq!(doc["turns"][0]["attachments"][0]["name"], "notes.md");
    let md = env.run(&["export"]);
    assert!(md.stdout.contains("- attachment: "), "{}", md.stdout);
}

#[test]
fn send_attach_is_a_once_shortcut() {
    let env = script_env();
    let r = env.run(&[
        "send",
        "--attach",
        "notes.md",
        "--attach",
        "hello.pdf",
        "read",
    ]);
    snap!("send_attach_flag", env.snap(&r));
    let t = &turns(&env)[0];
    let names: Vec<&str> = t["attachments"]
        .as_array()
        .expect("attachments")
        .iter()
        .map(|a| a["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["notes.md", "hello.pdf"]);
    assert!(selected(&env).is_empty());
    // PDF text went through the extractor.
    let pdf = &all_refs(&env)[1];
    assert_eq!(pdf["media_type"], "application/pdf");
    let (code, text) = raw_stdout(
        &env,
        &[
            "attach",
            "cat",
            "--text",
            pdf["reference"].as_str().expect("ref"),
        ],
    );
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&text).contains("Hello from a PDF"));
}

#[test]
fn session_scope_is_kept_across_turns() {
    let env = script_env();
    let ids = add(&env, &["--scope", "session", "notes.md"]);
    for request in ["one", "two", "three"] {
        assert_eq!(env.run(&["send", request]).code, 0);
    }
    for t in turns(&env) {
        assert_eq!(t["attachments"][0]["reference"], ids[0].as_str());
    }
    let [r] = &selected(&env)[..] else {
        panic!("still selected")
    };
    assert_eq!(r["state"], "selected");
    assert_eq!(r["used_by"].as_array().expect("used_by").len(), 3);
}

#[test]
fn removal_keeps_history() {
    let env = script_env();
    let ids = add(&env, &["--scope", "session", "notes.md"]);
    assert_eq!(env.run(&["send", "first"]).code, 0);
    let first = turns(&env)[0]["turn"].as_str().expect("turn").to_owned();
    snap!("rm", env.snap(&env.run(&["attach", "rm", &ids[0][..6]])));
    assert_eq!(env.run(&["send", "second"]).code, 0);
    let t = turns(&env);
    assert_eq!(t[0]["attachments"][0]["reference"], ids[0].as_str());
    assert_eq!(t[1]["attachments"], serde_json::json!([]));
    snap!("show_after_rm", env.snap(&env.run(&["show", &first])));
    assert_eq!(all_refs(&env)[0]["state"], "removed");
    // The bytes stay available for review.
    let (code, bytes) = raw_stdout(&env, &["attach", "cat", &ids[0]]);
    assert_eq!(code, 0);
    assert_eq!(bytes, std::fs::read(fixture("notes.md")).expect("fixture"));
    // Removing twice is refused; an unknown reference is not found.
    snap!("rm_again", env.snap(&env.run(&["attach", "rm", &ids[0]])));
    assert_eq!(env.run(&["attach", "rm", "abcdef12"]).code, 7);
}

#[test]
fn identical_files_share_one_object() {
    let env = script_env();
    let bytes = std::fs::read(fixture("pixel.png")).expect("fixture");
    put_bytes(&env, "copy.png", &bytes);
    let before = objects(&env);
    let ids = add(&env, &["pixel.png", "copy.png", "--scope", "session"]);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    let refs = all_refs(&env);
    assert_eq!(refs[0]["object"], refs[1]["object"]);
    // The image and the text OCR read in it, once each.
    assert_eq!(refs[0]["text_object"], refs[1]["text_object"]);
    assert_eq!(objects(&env).len(), before.len() + 2);
    // The same file again (same name, content and scope) is not selected twice.
    let again = env.run(&["attach", "add", "--scope", "session", "pixel.png"]);
    assert_eq!(again.stdout.trim(), ids[0]);
    assert!(
        again.stderr.contains("already selected"),
        "{}",
        again.stderr
    );
    assert_eq!(all_refs(&env).len(), 2);
}

/// CRC-32 (ISO-HDLC), as PNG chunks carry it.
fn crc32(bytes: &[u8]) -> u32 {
    let table: Vec<u32> = (0..256u32)
        .map(|n| {
            (0..8).fold(n, |c, _| {
                if c & 1 == 1 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                }
            })
        })
        .collect();
    !bytes.iter().fold(!0u32, |c, &b| {
        table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8)
    })
}

/// The 1x1 PNG fixture with a comment chunk that makes it exactly `len` bytes.
fn padded_png(len: usize) -> Vec<u8> {
    let png = std::fs::read(fixture("pixel.png")).expect("fixture");
    let (head, end) = png.split_at(png.len() - 12);
    let mut chunk = b"tEXt".to_vec();
    chunk.extend_from_slice(b"Comment\0");
    chunk.resize(len - png.len() - 8, b' ');
    let mut out = head.to_vec();
    out.extend_from_slice(&((chunk.len() - 4) as u32).to_be_bytes());
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&crc32(&chunk).to_be_bytes());
    out.extend_from_slice(end);
    assert_eq!(out.len(), len);
    out
}

#[test]
fn caps_refuse_before_anything_is_stored() {
    let env = script_env();
    let mut png = vec![0u8; 11 * MIB];
    png[..8].copy_from_slice(b"\x89PNG\r\n\x1a\n");
    put_bytes(&env, "huge.png", &png);
    let mut pdf = vec![b' '; 26 * MIB];
    pdf[..9].copy_from_slice(b"%PDF-1.4\n");
    put_bytes(&env, "huge.pdf", &pdf);
    let before = objects(&env);
    snap!(
        "cap_image",
        env.snap(&env.run(&["attach", "add", "huge.png"]))
    );
    snap!(
        "cap_pdf",
        env.snap(&env.run(&["attach", "add", "huge.pdf"]))
    );
    // One refused file attaches none of the others either.
    let r = env.run(&["attach", "add", "notes.md", "huge.png"]);
    assert_eq!(r.code, 11);
    let r = env.run(&["send", "--attach", "huge.pdf", "hi"]);
    assert_eq!(r.code, 11);
    assert_eq!(objects(&env), before);
    assert!(all_refs(&env).is_empty());
    assert!(turns(&env).is_empty());
    // Exactly at the cap is accepted: a whole PNG, padded with a comment.
    put_bytes(&env, "max.png", &padded_png(10 * MIB));
    assert_eq!(add(&env, &["max.png"]).len(), 1);
}

#[test]
fn types_come_from_content() {
    let env = script_env();
    // A PNG named .txt is an image; text named .png is text.
    std::fs::copy(fixture("pixel.png"), env.work.join("looks.txt")).expect("copy");
    put_bytes(
        &env,
        "really-text.png",
        b"BMW notes: plain text after all\n",
    );
    add(&env, &["looks.txt", "really-text.png"]);
    let refs = all_refs(&env);
    assert_eq!(refs[0]["media_type"], "image/png");
    assert_eq!(refs[0]["text"], "ocr");
    assert_eq!(refs[1]["media_type"], "text/plain");
    assert_eq!(refs[1]["text"], "extracted");
    let mut elf = vec![0u8; 256];
    elf[..4].copy_from_slice(b"\x7fELF");
    put_bytes(&env, "tool", &elf);
    snap!(
        "unsupported",
        env.snap(&env.run(&["attach", "add", "tool"]))
    );
    put_bytes(&env, "latin1.txt", b"caf\xe9 cr\xe8me\n");
    assert_eq!(env.run(&["attach", "add", "latin1.txt"]).code, 11);
}

#[test]
fn extracted_text_is_capped_at_256_kib() {
    let env = script_env();
    let line = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n";
    let big = line.repeat(300 * 1024 / line.len());
    env.write("big.txt", &big);
    env.write("exact.txt", &big[..TEXT_CAP]);
    let r = env.run(&["attach", "add", "big.txt", "exact.txt"]);
    snap!("text_cap", env.snap(&r));
    let refs = all_refs(&env);
    assert_eq!(refs[0]["text_truncated"], true);
    assert_eq!(refs[1]["text_truncated"], false);
    let text = std::fs::metadata(object_path(
        &env,
        refs[0]["text_object"].as_str().expect("text object"),
    ))
    .expect("text object")
    .len();
    assert_eq!(text, TEXT_CAP as u64);
    let (_, cat) = raw_stdout(
        &env,
        &[
            "attach",
            "cat",
            "--text",
            refs[0]["reference"].as_str().expect("ref"),
        ],
    );
    assert_eq!(cat, big.as_bytes()[..TEXT_CAP]);
    assert_eq!(refs[0]["size"], big.len());
}

#[test]
fn cat_returns_the_exact_bytes() {
    let env = script_env();
    let mut weird: Vec<u8> = b"\xef\xbb\xbfline one\r\nline two\r\n".to_vec();
    weird.extend("naïve ☃\n".as_bytes());
    put_bytes(&env, "crlf.txt", &weird);
    let ids = add(&env, &["pixel.png", "crlf.txt", "hello.pdf"]);
    for (id, file) in ids.iter().zip(["pixel.png", "crlf.txt", "hello.pdf"]) {
        let (code, bytes) = raw_stdout(&env, &["attach", "cat", &id[..8]]);
        assert_eq!(code, 0);
        assert_eq!(
            bytes,
            std::fs::read(env.work.join(file)).expect("file"),
            "{file}"
        );
    }
    // The text drops the byte-order mark and nothing else.
    let (_, text) = raw_stdout(&env, &["attach", "cat", "--text", &ids[1]]);
    assert_eq!(text, weird[3..]);
    snap!(
        "cat_image_text",
        env.snap(&env.run(&["attach", "cat", "--text", &ids[0]]))
    );
}

#[test]
fn retry_is_refused_for_a_turn_with_attachments() {
    let env = script_env();
    assert_eq!(env.run(&["send", "--attach", "notes.md", "hi"]).code, 0);
    let turn = turns(&env)[0]["turn"].as_str().expect("turn").to_owned();
    let r = env.run(&["retry", &turn]);
    assert_eq!(r.code, 11);
    snap!("retry_refused", env.snap(&r));
}

#[test]
fn rewind_does_not_reselect() {
    let env = script_env();
    add(&env, &["notes.md"]);
    assert_eq!(env.run(&["send", "first"]).code, 0);
    assert_eq!(env.run(&["send", "second"]).code, 0);
    let first = turns(&env)[0]["turn"].as_str().expect("turn").to_owned();
    let r = env.run(&["rewind", "--yes", &first]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(selected(&env).is_empty());
    assert_eq!(all_refs(&env)[0]["state"], "consumed");
    assert_eq!(env.run(&["send", "again"]).code, 0);
    assert_eq!(turns(&env)[2]["attachments"], serde_json::json!([]));
}

#[test]
fn fsck_verifies_attachment_objects() {
    let env = script_env();
    let ids = add(&env, &["--scope", "session", "pixel.png"]);
    assert_eq!(env.run(&["fsck"]).code, 0);
    let hash = all_refs(&env)[0]["object"]
        .as_str()
        .expect("object")
        .to_owned();
    let path = object_path(&env, &hash);
    let mut perms = std::fs::metadata(&path).expect("object").permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).expect("chmod");
    std::fs::write(&path, b"not the picture").expect("damage");
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9);
    assert!(
        r.stdout.contains(&format!(
            "objects/{}/{}: damaged-object",
            &hash[..2],
            &hash[2..]
        )),
        "{}",
        r.stdout
    );
    // Reading it refuses, and a turn that would send it does not begin.
    assert_ne!(env.run(&["attach", "cat", &ids[0]]).code, 0);
    assert_ne!(env.run(&["send", "hi"]).code, 0);
    assert!(turns(&env).is_empty());
}

#[test]
fn history_search_finds_attachment_names() {
    let env = script_env();
    assert_eq!(env.run(&["send", "--attach", "notes.md", "first"]).code, 0);
    assert_eq!(env.run(&["send", "second"]).code, 0);
    let r = env.run(&["history", "--search", "NOTES.MD", "--json"]);
    let found = json_lines(&r.stdout);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["request"], "first");
}

#[cfg(unix)]
#[test]
fn names_are_data_not_paths() {
    use std::os::unix::ffi::OsStrExt;
    let env = script_env();
    std::fs::create_dir_all(env.work.join("sub")).expect("mkdir");
    let name = std::ffi::OsStr::from_bytes(b"we\nird\x1b[31m\xff.txt");
    std::fs::write(env.work.join("sub").join(name), "text\n").expect("write");
    let out = env
        .cmd(&["attach", "add"])
        .arg(Path::new("sub/../sub").join(name))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let stored = &all_refs(&env)[0]["name"];
    assert_eq!(stored, "we\\nird\\u{1b}[31m\u{fffd}.txt");
    snap!("list_weird_name", env.snap(&env.run(&["attach", "list"])));
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    let show = env.run(&["show", turns(&env)[0]["turn"].as_str().expect("turn")]);
    assert!(!show.stdout.contains('\x1b') && !show.stdout.contains("we\nird"));
}

#[test]
fn images_are_refused_by_providers_that_cannot_read_them() {
    let env = script_env();
    add(&env, &["pixel.png"]);
    let r = env.run(&["send", "what is this?"]);
    snap!("image_refused_by_script", env.snap(&r));
    assert_eq!(r.code, 11);
    assert!(turns(&env).is_empty());
    assert_eq!(selected(&env).len(), 1, "nothing was consumed");
}

#[test]
fn send_attach_withdraws_its_files_when_the_turn_does_not_begin() {
    let env = script_env();
    // Selected beforehand by `attach add`: not this send's to take back.
    add(&env, &["notes.md"]);
    let r = env.run(&["send", "--attach", "pixel.png", "what is this?"]);
    snap!("send_attach_withdrawn", env.snap(&r));
    assert_eq!(r.code, 11);
    assert!(turns(&env).is_empty());
    let names: Vec<String> = selected(&env)
        .iter()
        .map(|a| a["name"].as_str().expect("name").to_owned())
        .collect();
    assert_eq!(
        names,
        ["notes.md"],
        "the image meant for the refused turn stays out"
    );
    // The next plain send carries only the earlier selection.
    let r = env.run(&["send", "and now?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let t = &turns(&env)[0];
    assert_eq!(t["attachments"].as_array().expect("attachments").len(), 1);
}

/// One Ollama /api/chat NDJSON stream answering `text`.
fn ollama_stream(text: &str) -> String {
    let piece = serde_json::json!({
        "model": "m", "created_at": "2026-01-02T03:04:05.000Z",
        "message": {"role": "assistant", "content": text}, "done": false
    });
    let done = serde_json::json!({
        "model": "m", "created_at": "2026-01-02T03:04:05.000Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
        "prompt_eval_count": 11, "eval_count": 1
    });
    format!("{piece}\n{done}\n")
}

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn text_and_images_reach_the_model() {
    let server = FakeServer::with([
        Reply::ndjson(&ollama_stream("A pixel and notes.")),
        Reply::ndjson(&ollama_stream("Still the notes.")),
    ]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        server.url()
    ));
    put_fixture(&env, "notes.md");
    put_fixture(&env, "pixel.png");
    add(&env, &["--scope", "session", "notes.md"]);
    let r = env.run(&["send", "--attach", "pixel.png", "describe"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(env.run(&["send", "and the notes?"]).code, 0);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let notes = "The quokka build fixes the flux capacitor.";
    let png = std::fs::read(fixture("pixel.png")).expect("fixture");

    let first = reqs[0].json();
    let user = first["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("user")
        .clone();
    let content = user["content"].as_str().expect("content");
    assert!(content.starts_with("describe"), "{content}");
    assert!(content.contains(notes), "{content}");
    assert!(content.contains("<attachment name=\"notes.md\" type=\"text/markdown\""));
    assert!(content.contains("<attachment name=\"pixel.png\" type=\"image/png\" size=\"67\""));
    assert_eq!(user["images"], serde_json::json!([base64(&png)]));
    assert!(reqs[0].body_text().contains(&base64(&png)));

    // The next turn: the session-scoped text again, the consumed image not; the earlier
    // turn is rebuilt with its text, without resending the image.
    let second = reqs[1].json();
    let msgs = second["messages"].as_array().expect("messages");
    let users: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 2);
    assert!(users[0]["content"].as_str().expect("c").contains(notes));
    assert!(users[1]["content"].as_str().expect("c").contains(notes));
    assert!(!users[1]["content"]
        .as_str()
        .expect("c")
        .contains("pixel.png"));
    assert!(msgs.iter().all(|m| m.get("images").is_none()));
}

#[test]
fn sessions_keep_their_own_selection() {
    let env = script_env();
    add(&env, &["-s", "other", "--scope", "session", "notes.md"]);
    assert!(selected(&env).is_empty());
    let r = env.run(&["attach", "list", "-s", "other", "--json"]);
    assert_eq!(json_lines(&r.stdout).len(), 1);
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    assert_eq!(turns(&env)[0]["attachments"], serde_json::json!([]));
    let r = env.run(&["send", "-s", "other", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("notes.md"), "{}", r.stderr);
}

#[test]
fn images_reach_an_openai_compatible_server_as_data_uris() {
    let sse = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers/openai_text.sse"),
    )
    .expect("fixture");
    let server = FakeServer::with([Reply::sse(&sse)]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: openai, base_url: \"{}/v1\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        server.url()
    ));
    put_fixture(&env, "notes.md");
    put_fixture(&env, "pixel.png");
    let r = env.run(&[
        "send",
        "--attach",
        "pixel.png",
        "--attach",
        "notes.md",
        "look",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = server.only_request().json();
    let user = body["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("user")
        .clone();
    let parts = user["content"].as_array().expect("content parts");
    assert_eq!(parts[0]["type"], "text");
    let text = parts[0]["text"].as_str().expect("text");
    assert!(
        text.contains("The quokka build fixes the flux capacitor."),
        "{text}"
    );
    let png = std::fs::read(fixture("pixel.png")).expect("fixture");
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{}", base64(&png))
    );
}
