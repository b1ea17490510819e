//! No input takes the machine: a PDF whose pages share one stream that inflates to 60 MB,
//! a stop while a PDF is read, a 3.2 MB message (the process leaves when its turn ends; its
//! memory is embedded later), and the messages that name what is wrong with an input: a
//! line of `chat` input that is not UTF-8, a `max_tokens` too large, an export that cannot
//! be written.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lopdf::{dictionary, Document, Object, Stream};
use serde_json::Value;

use crate::common::env::{wait_until, TestEnv};

/// The address-space limit of commands that must stay small (the debug binary maps about
/// 200 MB before it does anything).
const LIMIT_KIB: u64 = 1024 * 1024;

/// A PDF of `pages` pages whose contents are `per_page` distinct streams when `distinct`,
/// else all the same one stream; each stream is `content` (Flate-compressed) and every page
/// has the font `/F1`.
fn pdf(pages: usize, content: &[u8], distinct: bool) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font },
    });
    let stream = |doc: &mut Document| {
        let mut s = Stream::new(dictionary! {}, content.to_vec());
        s.compress().expect("compress");
        doc.add_object(s)
    };
    let shared = stream(&mut doc);
    let mut kids = Vec::new();
    for i in 0..pages {
        let contents = if distinct && i > 0 {
            stream(&mut doc)
        } else {
            shared
        };
        let page = doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => contents,
            "Resources" => resources,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        });
        kids.push(Object::Reference(page));
    }
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => pages as i64,
        }),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("save");
    out
}

/// `n` bytes (about) of text-showing operations: `BT /F1 12 Tf (AAA…) Tj ET` lines, each
/// showing 64 KiB of text (what compresses best: the report's file was 108 KB).
fn text_content(n: usize) -> Vec<u8> {
    let mut line = b"BT /F1 12 Tf 72 700 Td (".to_vec();
    line.extend(std::iter::repeat_n(b'A', 65536));
    line.extend_from_slice(b") Tj ET\n");
    line.repeat(n / line.len() + 1)
}

/// `n` bytes (about) of drawing operations, which show no text.
fn drawing_content(n: usize) -> Vec<u8> {
    let line = b"0.5 0 0 RG 10 10 m 200 200 l S\n";
    line.repeat(n / line.len() + 1)
}

fn script_env() -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: a\n    provider: canned\n",
    );
    env.write("replies.yaml", "replies:\n  - text: ok\n");
    env
}

/// The 108 KB PDF of 300 pages that share one content stream inflating to 60 MB: attached
/// under a 1 GiB address-space limit, it is read once, cut at 256 KiB of text, and the
/// pages not needed are said to be unread. Before, every page's text was collected first
/// (23.6 GB before the kernel killed the process).
#[test]
fn a_pdf_whose_pages_share_a_huge_stream_is_read_under_one_budget() {
    let env = script_env();
    let bomb = pdf(300, &text_content(60 << 20), false);
    assert!(bomb.len() < 512 * 1024, "{} bytes", bomb.len());
    std::fs::write(env.work.join("bomb.pdf"), &bomb).expect("write");
    let r = env.run_limited(LIMIT_KIB, &["attach", "add", "--json", "bomb.pdf"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let added: Value =
        serde_json::from_str(r.stdout.lines().next().expect("a line")).expect("json");
    assert_eq!(added["text_truncated"], true, "{added}");
    let notes = added["notes"].to_string();
    assert!(
        notes.contains("the text passed 256 KiB by page 1 of 300"),
        "{notes}"
    );
    // The same document through `send --attach`.
    let r = env.run_limited(LIMIT_KIB, &["send", "--attach", "bomb.pdf", "summarize"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Pages that each inflate their own stream: the document's budget ends the reading.
    let heavy = pdf(20, &drawing_content(16 << 20), true);
    std::fs::write(env.work.join("heavy.pdf"), &heavy).expect("write");
    let r = env.run_limited(LIMIT_KIB, &["attach", "add", "--json", "heavy.pdf"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("the document's content passed the 128 MiB read for one PDF on page"),
        "{}",
        r.stdout
    );
}

/// Whether process `pid` has a handler for SIGTERM (bit 15 of `SigCgt`).
fn catches_sigterm(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
}

fn sigterm(child: &Child) {
    // SAFETY: kill with a pid this test started.
    #[expect(unsafe_code, reason = "kill: libc has no safe wrapper")]
    let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0);
}

/// Waits for `child` to end, at most `limit`; kills it (and fails) past that.
fn ended_within(child: &mut Child, limit: Duration, what: &str) -> std::process::Output {
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut out = std::process::Output {
        status: child.wait().expect("wait"),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    if let Some(mut s) = child.stderr.take() {
        let _ = std::io::Read::read_to_end(&mut s, &mut out.stderr);
    }
    out
}

/// SIGTERM while a PDF's pages are read ends `attach add` between two pages (or two
/// batches of operations), with nothing stored.
#[test]
fn sigterm_ends_the_reading_of_a_pdf() {
    let env = script_env();
    let heavy = pdf(20, &drawing_content(16 << 20), true);
    std::fs::write(env.work.join("heavy.pdf"), &heavy).expect("write");
    let mut child = env
        .cmd(&["attach", "add", "heavy.pdf"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    wait_until("attach add handles SIGTERM", || catches_sigterm(pid));
    sigterm(&child);
    let out = ended_within(
        &mut child,
        Duration::from_secs(10),
        "attach add after SIGTERM",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("heavy.pdf: reading its text was stopped on page"),
        "{stderr}"
    );
    let r = env.run(&["attach", "list", "--json"]);
    assert_eq!(r.stdout.trim(), "", "nothing was attached");
}

/// The directory of the embedding model, where `scripts/fetch-model.sh` puts it.
fn model_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("AXOCOATL_EMBED_DIR") {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache")
        });
    cache.join("axocoatl/models/all-MiniLM-L6-v2")
}

fn memory_status(env: &TestEnv) -> Value {
    let r = env.run(&["memory", "status", "-a", "a", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(r.stdout.trim()).expect("json")
}

/// A 3.2 MB message: the answer streams, then the process ends at once (it used to embed
/// some 12,000 chunks of the exchange for minutes, before its `turn.ended`). The exchange kept in semantic memory
/// is its first words (the ledger has the whole request), written at once; its vectors come
/// with the next search.
#[test]
fn a_huge_message_leaves_no_work_after_its_answer() {
    let dir = model_dir();
    if !dir.join("model.onnx").is_file() {
        panic!("{}: run scripts/fetch-model.sh first", dir.display());
    }
    let mut env = script_env();
    env.set_env("AXOCOATL_EMBED_DIR", &dir.to_string_lossy());
    let sentence = "The quarterly numbers moved again and nobody could say why. ";
    let message = sentence.repeat(3_200_000 / sentence.len());
    let mut child = env
        .cmd(&["send", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(message.as_bytes());
    });
    // The answer, then the end of the output (the process's exit closes it), on a thread: a
    // process that stays busy after its answer must not hang the test.
    let stdout = child.stdout.take().expect("stdout");
    let (tx, events) = std::sync::mpsc::channel::<(String, Instant)>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send((line, Instant::now()));
        }
    });
    let mut answered = None;
    let mut ended = false;
    // Generous: the work that was left after the answer took minutes.
    let limit = Duration::from_secs(20);
    loop {
        let wait = answered.map_or(Duration::from_secs(120), |at: Instant| {
            limit.saturating_sub(at.elapsed())
        });
        match events.recv_timeout(wait) {
            Ok((line, at)) => {
                if answered.is_none() && line.contains("\"type\":\"delta\"") {
                    answered = Some(at);
                }
                if line.contains("\"turn.ended\"") {
                    assert!(line.contains("\"completed\""), "{line}");
                    ended = true;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("send was still busy {limit:?} after its answer (answered: {answered:?})");
            }
        }
    }
    assert!(
        answered.is_some() && ended,
        "the turn did not answer and end"
    );
    let out = ended_within(&mut child, limit, "send after its answer");
    writer.join().expect("writer");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = memory_status(&env);
    let records = status["records"].as_u64().expect("records");
    assert!((2..=64).contains(&records), "{status}");
    assert_eq!(status["recall_path"], "neural", "{status}");
    // The next search embeds what the turn left.
    let r = env.run(&["memory", "search", "-a", "a", "quarterly numbers"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("quarterly numbers"), "{}", r.stdout);
    let status = memory_status(&env);
    assert_eq!(status["indexed"], status["records"], "{status}");
}

/// One line of `chat`'s input that is not UTF-8 is named and skipped; the lines after it
/// are sent.
#[test]
fn a_chat_line_that_is_not_utf8_is_named_and_the_chat_goes_on() {
    let env = script_env();
    let mut child = env
        .cmd(&["chat", "-s", "talk"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chat");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"hello\ncaf\xe9 au lait\nbye\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2 of the input was not sent: byte 4 of the line (0xe9) is not UTF-8"),
        "{stderr}"
    );
    let r = env.run(&["history", "-s", "talk", "--json"]);
    let requests: Vec<String> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json")["request"].to_string())
        .collect();
    assert_eq!(requests, ["\"hello\"", "\"bye\""], "{}", r.stdout);
}

/// A `max_tokens` past what it can hold is said to be too large, not "not a whole number",
/// on the command line and in the configuration.
#[test]
fn a_max_tokens_too_large_is_said_to_be_too_large() {
    let env = script_env();
    let r = env.run(&["send", "-o", "max_tokens=99999999999", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "-o max_tokens=99999999999: 99999999999 tokens is more than max_tokens can be (at most 4294967295)"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("whole number"), "{}", r.stderr);
    env.write(
        "axocoatl.yaml",
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: a\n    provider: canned\n    sampling: {max_tokens: 99999999999}\n",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the number 99999999999 is too large: this key takes at most 4294967295"),
        "{}",
        r.stderr
    );
}

/// An export whose file and directory cannot be written is said to be read-only, not "not an
/// axocoatl export". Root writes anything, so as root the repository is given to another
/// user, who exports and refreshes.
#[cfg(feature = "sqlite")]
#[test]
fn a_read_only_export_is_said_to_be_read_only() {
    use crate::common::env::Run;
    use crate::common::users::{as_nobody, chmod, chown_nobody, is_root};
    let env = script_env();
    assert_eq!(env.run(&["send", "hi"]).code, 0);
    let out_dir = env.work.join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let db = out_dir.join("history.db");
    let db_s = db.display().to_string();
    let nobody = is_root();
    if nobody {
        chmod(env.tmp.path(), 0o755);
        chown_nobody(&env.work);
    }
    let export = || {
        let args = ["export", "--format", "sqlite", "-o", db_s.as_str()];
        let mut c = if nobody {
            as_nobody(&env, None, &args)
        } else {
            env.cmd(&args)
        };
        Run::from_output(c.output().expect("run"))
    };
    let r = export();
    assert_eq!(r.code, 0, "{}", r.stderr);
    chmod(&db, 0o444);
    chmod(&out_dir, 0o555);
    let r = export();
    chmod(&out_dir, 0o755);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("{db_s} cannot be refreshed")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("not an axocoatl export"), "{}", r.stderr);
}
