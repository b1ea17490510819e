//! OCR of attachments through the real binary and the real Tesseract: the words of images
//! the test draws (several sizes, every format, turned pages, a noisy photo, scanned PDF
//! pages), an image without text, the refusals (a 30,000 x 30,000 PNG bomb and its TIFF
//! and PDF kin, the time limit, a missing library or language), stop during OCR, what the
//! model is told, `history --search`, `show`, `attach list` and `fsck`.
//!
//! The images come from `scripts/ocr-images.py` (Debian's Pillow and DejaVu fonts; the same
//! bytes every run), drawn once per test run. `scripts/setup-ocr.sh` installs Tesseract
//! and those (`scripts/test.sh` runs it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::procs::json_lines;
use serde_json::Value;

const SETUP: &str = "run scripts/setup-ocr.sh (it installs Tesseract, Pillow and the fonts)";

/// The directory of the drawn images, and each image's expected words.
fn images() -> &'static (PathBuf, BTreeMap<String, Vec<String>>) {
    static IMAGES: OnceLock<(PathBuf, BTreeMap<String, Vec<String>>)> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ocr-images.py");
        let body = std::fs::read(&script).expect("read the image script");
        let tag = blake3::hash(&body).to_hex().to_string();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ocr-images-{}", &tag[..16]));
        if !dir.join("expected.json").is_file() {
            // Drawn beside, then renamed into place: test processes running at once each
            // see a whole set or none.
            let tmp = tempfile::Builder::new()
                .prefix("ocr-images")
                .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
                .expect("tempdir");
            let out = std::process::Command::new("/usr/bin/python3")
                .arg(&script)
                .arg(tmp.path())
                .output()
                .unwrap_or_else(|e| panic!("cannot run /usr/bin/python3: {e}; {SETUP}"));
            assert!(
                out.status.success(),
                "scripts/ocr-images.py failed: {}; {SETUP}",
                String::from_utf8_lossy(&out.stderr)
            );
            let _ = std::fs::rename(tmp.keep(), &dir);
        }
        let expected: BTreeMap<String, Vec<String>> = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected.json")).expect("expected.json"),
        )
        .expect("expected words");
        (dir, expected)
    })
}

fn image(name: &str) -> PathBuf {
    images().0.join(name)
}

fn expected(name: &str) -> &'static [String] {
    &images().1[name]
}

/// Copies drawn images into the test's working directory.
fn put(env: &TestEnv, names: &[&str]) {
    for n in names {
        std::fs::copy(image(n), env.work.join(n)).expect("copy image");
    }
}

fn script_env(extra: &str) -> TestEnv {
    let env = TestEnv::with_config(&format!(
        "providers:\n  canned: {{kind: script, script: replies.yaml}}\nagents:\n  - id: bot\n    provider: canned\n{extra}"
    ));
    env.write(
        "replies.yaml",
        "replies:\n  - text: \"answer 1\"\n  - text: \"answer 2\"\n  - text: \"answer 3\"\n",
    );
    env
}

/// `attach add --json FILES`, asserting success: one object per file.
fn add(env: &TestEnv, files: &[&str]) -> Vec<Value> {
    let mut args = vec!["attach", "add", "--json"];
    args.extend_from_slice(files);
    let r = env.run(&args);
    assert_eq!(r.code, 0, "attach add failed: {}", r.stderr);
    json_lines(&r.stdout)
}

fn text_of(env: &TestEnv, reference: &Value) -> String {
    let r = env.run(&[
        "attach",
        "cat",
        "--text",
        reference["reference"].as_str().expect("reference"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
}

/// Asserts that OCR read `name` (attached as `added`) and found its expected words.
fn assert_read(env: &TestEnv, name: &str, added: &Value) {
    assert_eq!(added["text"], "ocr", "{name}: {added}");
    assert_eq!(added["ocr"]["languages"], "eng", "{name}");
    let text = text_of(env, added);
    for word in expected(name) {
        assert!(
            text.contains(word.as_str()),
            "{name}: no {word:?} in {text:?}"
        );
    }
    let confidence = added["ocr"]["confidence"].as_u64().expect("a confidence");
    assert!(confidence >= 60, "{name}: mean confidence {confidence}");
}

/// Every object file under .axocoatl/objects.
fn objects(env: &TestEnv) -> usize {
    let dir = env.repo().join("objects");
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|f| f.path().is_dir())
        .map(|f| std::fs::read_dir(f.path()).expect("fan").count())
        .sum()
}

/// The engine's version and the confidences vary with the installed Tesseract: snapshots
/// show them as placeholders (tests assert them in code).
fn steady(s: &str) -> String {
    let version = regex::Regex::new(r"tesseract \d+\.\d+\.\d+").expect("re");
    let conf = regex::Regex::new(r"(mean confidence )\d+%").expect("re");
    let words = regex::Regex::new(r"\d+ words?,").expect("re");
    let s = version.replace_all(s, "tesseract [VERSION]");
    let s = conf.replace_all(&s, "${1}[CONF]%");
    words.replace_all(&s, "[N] words,").into_owned()
}

#[test]
fn words_are_read_at_every_size_and_in_every_format() {
    let env = script_env("");
    let names = [
        "size14.png",
        "size20.png",
        "size32.png",
        "size64.png",
        "page.jpg",
        "page.tiff",
        "page.webp",
        "page.bmp",
        "page-g4.tiff",
        "two-pages.tiff",
    ];
    put(&env, &names);
    // One call: one engine for all of them.
    let added = add(&env, &names);
    for (name, a) in names.iter().zip(&added) {
        assert_read(&env, name, a);
        let pages = if *name == "two-pages.tiff" { 2 } else { 1 };
        assert_eq!(a["ocr"]["pages"], pages, "{name}");
        assert_eq!(a["ocr"]["of_pages"], pages, "{name}");
    }
    let two = text_of(&env, &added[9]);
    assert!(two.starts_with("[page 1 of 2]\n"), "{two}");
    assert!(
        two.contains("[page 2 of 2]\nSecond page says Rhinoceros"),
        "{two}"
    );
    // TIFF and BMP are attached for their text: their media types say what they are.
    assert_eq!(added[5]["media_type"], "image/tiff");
    assert_eq!(added[7]["media_type"], "image/bmp");
}

#[test]
fn turned_pages_and_a_noisy_photo_are_read() {
    let env = script_env("");
    let names = ["rotated90.png", "rotated180.png", "photo.jpg"];
    put(&env, &names);
    for (name, a) in names.iter().zip(add(&env, &names)) {
        assert_read(&env, name, &a);
    }
}

#[test]
fn an_image_without_text_says_so() {
    let env = script_env("");
    put(&env, &["no-text.png"]);
    let r = env.run(&["attach", "add", "no-text.png"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("no_text_add", steady(&env.snap(&r)));
    let refs = json_lines(&env.run(&["attach", "list", "--json"]).stdout);
    assert_eq!(refs[0]["text"], "ocr");
    assert_eq!(refs[0]["ocr"]["words"], 0);
    assert_eq!(refs[0]["ocr"]["confidence"], Value::Null);
    assert_eq!(text_of(&env, &refs[0]), "");
    snap!(
        "no_text_list",
        steady(&env.snap(&env.run(&["attach", "list"])))
    );
    // A provider that cannot read images has nothing of it to read: the turn is refused.
    let r = env.run(&["send", "what does it say?"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains("without text that OCR read"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_png_bomb_is_refused_before_it_is_decoded() {
    let env = script_env("");
    put(&env, &["bomb.png", "bomb.tiff", "bomb.pdf", "size20.png"]);
    // Decoding 30,000 x 30,000 pixels takes gigabytes; the refusal fits in 1 GiB of
    // address space because nothing is decoded.
    let r = env.run_limited(1024 * 1024, &["attach", "add", "size20.png", "bomb.png"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    snap!("bomb_png", env.snap(&r));
    let r = env.run_limited(1024 * 1024, &["attach", "add", "bomb.tiff"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("40000 x 40000 pixels (page 2 of 2) is over the OCR limit"),
        "{}",
        r.stderr
    );
    let r = env.run_limited(1024 * 1024, &["attach", "add", "bomb.pdf"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("30000 x 30000 pixels (page 1 of 1) is over the OCR limit"),
        "{}",
        r.stderr
    );
    // One refused file attaches none.
    assert_eq!(objects(&env), 0);
    assert!(json_lines(&env.run(&["attach", "list", "--all", "--json"]).stdout).is_empty());
    // The limit is the configuration's.
    let env = script_env("attachments:\n  ocr:\n    max_pixels: 10000\n");
    put(&env, &["size20.png"]);
    let r = env.run(&["attach", "add", "size20.png"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("489 x 125 pixels is over the OCR limit of 10000 pixels"),
        "{}",
        r.stderr
    );
}

#[test]
fn damaged_images_are_refused_with_the_reason_alone() {
    let env = script_env("");
    let png = std::fs::read(image("size64.png")).expect("png");
    let jpeg = std::fs::read(image("page.jpg")).expect("jpeg");
    let bmp = std::fs::read(image("page.bmp")).expect("bmp");
    let mut scrambled = png.clone();
    for b in &mut scrambled[200..png.len() - 20] {
        *b ^= 0x5a;
    }
    for (name, bytes) in [
        ("cut.png", &png[..3000]),
        ("cut.jpg", &jpeg[..5000]),
        ("scrambled.png", &scrambled[..]),
        ("cut.bmp", &bmp[..5000]),
    ] {
        std::fs::write(env.work.join(name), bytes).expect("write");
        let r = env.run(&["attach", "add", name]);
        assert_eq!(r.code, 11, "{name}: {}", r.stderr);
        // The image libraries' own complaints ("libpng error: …", "Premature end of JPEG
        // file") stay off the terminal: the error says what happened.
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: {name}: OCR cannot read it: ")),
            "{name}: {}",
            r.stderr
        );
    }
    assert_eq!(objects(&env), 0);
}

/// Whether process `pid` has Tesseract loaded (OCR has begun).
fn tesseract_loaded(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("libtesseract"))
}

#[test]
fn stop_ends_ocr_and_nothing_is_attached() {
    let env = script_env("");
    put(&env, &["a4x4.tiff"]);
    for args in [
        &["attach", "add", "a4x4.tiff"][..],
        &["send", "--attach", "a4x4.tiff", "read this"],
    ] {
        let child = env
            .cmd(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let pid = child.id();
        // Four dense pages take seconds; the stop comes as soon as OCR has begun.
        wait_until("OCR to begin", || tesseract_loaded(pid));
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("a4x4.tiff: OCR was stopped on page 1 of 4"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("nothing was stored"), "{stderr}");
    }
    assert_eq!(objects(&env), 0);
    assert!(json_lines(&env.run(&["history", "--json"]).stdout).is_empty());
}

#[test]
fn ocr_has_a_time_limit() {
    let env = script_env("attachments:\n  ocr:\n    timeout_secs: 1\n");
    put(&env, &["a4x4.tiff"]);
    let r = env.run(&["attach", "add", "a4x4.tiff"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("a4x4.tiff: OCR took longer than its limit of 1 s on page"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("attachments.ocr.timeout_secs"),
        "{}",
        r.stderr
    );
    assert_eq!(objects(&env), 0);
}

#[test]
fn the_same_content_is_read_once_and_a_missing_library_says_so() {
    let mut env = script_env("");
    put(&env, &["size32.png", "size20.png", "page.tiff"]);
    let first = add(&env, &["size32.png"]);
    assert_eq!(first[0]["text_reused"], false);
    std::fs::copy(env.work.join("size32.png"), env.work.join("again.png")).expect("copy");
    // Without Tesseract, content read before still has its text: it is not read again.
    env.set_env("AXOCOATL_TESSERACT", "/nonexistent/libtesseract.so.5");
    let again = add(&env, &["-s", "other", "again.png"]);
    assert_eq!(again[0]["text_reused"], true);
    assert_eq!(again[0]["text_object"], first[0]["text_object"]);
    assert_eq!(again[0]["ocr"], first[0]["ocr"]);
    // New content is attached without text, and the machine's lack is said.
    let r = env.run(&["attach", "add", "size20.png"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("no_library_png", env.snap(&r));
    // A TIFF reaches models only as OCR text: without OCR it is refused.
    let r = env.run(&["attach", "add", "page.tiff"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("no_library_tiff", env.snap(&r));
}

#[test]
fn languages_come_from_the_configuration_and_missing_ones_name_their_package() {
    let env = script_env("attachments:\n  ocr:\n    languages: [eng, zzz]\n");
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("validate_missing_language", env.snap(&r));
    put(&env, &["size20.png"]);
    let r = env.run(&["attach", "add", "size20.png"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the OCR language data zzz is not installed")
            && r.stderr.contains("apt-get install tesseract-ocr-zzz"),
        "{}",
        r.stderr
    );
    let env = script_env("attachments:\n  ocr:\n    languages: [\"e g\"]\n    timeout_secs: 0\n");
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("validate_bad_ocr", env.snap(&r));
    // OCR off: images are attached without their text, and that is said.
    let env = script_env("attachments:\n  ocr:\n    enabled: false\n");
    put(&env, &["size20.png"]);
    let r = env.run(&["attach", "add", "--json", "size20.png"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let added = &json_lines(&r.stdout)[0];
    assert_eq!(added["text"], "none");
    let note = added["notes"][0].as_str().expect("a note");
    assert!(
        note.starts_with("OCR is off (attachments.ocr.enabled: false)"),
        "{note}"
    );
    let r = env.run(&[
        "attach",
        "cat",
        "--text",
        added["reference"].as_str().expect("ref"),
    ]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("is an image whose text OCR did not read"),
        "{}",
        r.stderr
    );
}

#[test]
fn scanned_pdf_pages_are_read_and_what_is_not_is_said() {
    let env = script_env("");
    put(&env, &["mixed.pdf", "jbig2.pdf"]);
    let added = add(&env, &["mixed.pdf"]);
    assert_eq!(added[0]["text"], "ocr");
    assert_eq!(added[0]["ocr"]["pages"], 3);
    assert_eq!(added[0]["ocr"]["of_pages"], 4);
    let text = text_of(&env, &added[0]);
    for word in expected("mixed.pdf") {
        assert!(text.contains(word.as_str()), "no {word:?} in {text:?}");
    }
    assert!(text.starts_with("The text layer says Kangaroo"), "{text}");
    assert!(
        text.contains("[page 2: no text layer; OCR text, mean confidence"),
        "{text}"
    );
    let r = env.run(&["attach", "add", "jbig2.pdf"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("jbig2_pdf", env.snap(&r));
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

#[test]
fn the_model_is_told_it_reads_ocr_text_and_search_and_show_find_it() {
    // A model that reads images gets the image and its OCR text.
    let server = FakeServer::with([Reply::ndjson(&ollama_stream("It refuses connections."))]);
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\n",
        server.url()
    ));
    put(&env, &["size32.png"]);
    let r = env.run(&["send", "--attach", "size32.png", "what is wrong?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = server.requests()[0].json();
    let user = body["messages"]
        .as_array()
        .expect("messages")
        .last()
        .expect("user")
        .clone();
    let content = user["content"].as_str().expect("content");
    let tag = regex::Regex::new(
        r#"<attachment name="size32.png" type="image/png" size="\d+" image="true" text="OCR, eng, mean confidence (\d+)%">\nInvoice 4471 was paid on Thursday\nconnect ECONNREFUSED 127.0.0.1:5432\n"#,
    )
    .expect("re");
    assert!(tag.is_match(content), "{content}");
    assert_eq!(user["images"].as_array().map(Vec::len), Some(1));

    // A model that cannot read images gets the OCR text alone.
    let env = script_env("");
    put(&env, &["size32.png"]);
    let r = env.run(&["send", "--attach", "size32.png", "what is wrong?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let turn = json_lines(&env.run(&["history", "--json"]).stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    // Words only OCR read find the turn, in any case; others do not.
    for word in ["econnrefused", "Thursday", "4471"] {
        let found = json_lines(&env.run(&["history", "--search", word, "--json"]).stdout);
        assert_eq!(found.len(), 1, "{word}");
        assert_eq!(found[0]["turn"], turn.as_str());
        assert_eq!(found[0]["match"]["field"], "attachment_text", "{word}");
    }
    assert!(json_lines(
        &env.run(&["history", "--search", "Rhinoceros", "--json"])
            .stdout
    )
    .is_empty());
    snap!("show", steady(&env.snap(&env.run(&["show", &turn]))));
    let show = json_lines(&env.run(&["show", &turn, "--json"]).stdout);
    assert_eq!(show[0]["attachment_texts"][0]["text"], "ocr");
    assert_eq!(show[0]["attachment_texts"][0]["ocr"]["languages"], "eng");
}

#[test]
fn fsck_checks_the_stored_text() {
    use axocoatl_store::ledger::record::{AttachmentAdded, AttachmentScope};
    use axocoatl_store::ledger::Record;
    let env = script_env("");
    put(&env, &["size20.png"]);
    add(&env, &["size20.png"]);
    assert_eq!(env.run(&["fsck"]).code, 0);
    let repo = axocoatl_store::Repo::open(&env.repo(), &Default::default()).expect("open");
    let image = repo.objects().put(b"not really a png").expect("put");
    let record = |reference: &str, text: &[u8]| {
        let text_object = repo.objects().put(text).expect("put");
        Record::AttachmentAdded(AttachmentAdded {
            reference: reference.to_owned(),
            session: "main".into(),
            name: format!("{reference}.png"),
            media_type: "image/png".into(),
            size: 16,
            scope: AttachmentScope::Once,
            object: image.clone(),
            text_object: Some(text_object),
            text_truncated: false,
            at: 0,
        })
    };
    let records = [
        record(
            "00000000000000a1",
            b"\0axocoatl-ocr 1\n{\"engine\": 3}\nwords",
        ),
        record("00000000000000a2", b"plain text for an image"),
    ];
    repo.ledger().append(&records).expect("append");
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9, "{}", r.stdout);
    snap!("fsck", env.snap(&r));
}

/// A little-endian TIFF of `n` pages of 8 x 8 pixels: directories only, no image data.
fn tiff_of_pages(n: usize) -> Vec<u8> {
    let mut b = b"II*\0".to_vec();
    b.extend_from_slice(&8u32.to_le_bytes());
    for i in 0..n {
        let at = b.len();
        b.extend_from_slice(&2u16.to_le_bytes());
        for tag in [256u16, 257] {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&3u16.to_le_bytes());
            b.extend_from_slice(&1u32.to_le_bytes());
            b.extend_from_slice(&8u32.to_le_bytes());
        }
        let next = if i + 1 == n { 0 } else { (at + 30) as u32 };
        b.extend_from_slice(&next.to_le_bytes());
    }
    b
}

/// A TIFF of more pages than OCR reads is said to have too many pages, not directories
/// that do not read; nothing is stored.
#[test]
fn a_tiff_past_the_page_cap_says_it_has_too_many_pages() {
    let env = script_env("");
    std::fs::write(env.work.join("many.tiff"), tiff_of_pages(10_001)).expect("write");
    let r = env.run(&["attach", "add", "many.tiff"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("many.tiff: OCR cannot read it: its TIFF has more than 10000 pages"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("do not read"), "{}", r.stderr);
}
