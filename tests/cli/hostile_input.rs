//! Hostile and broken input from the outside, through the real binary: configuration and
//! script files (alias bombs, devices, huge files, deep nesting, NUL, byte-order marks),
//! special files given as attachments, and servers that stream without end, drip, or echo
//! the API key back.
//!
//! Commands that used to allocate without bound run under an address-space limit, so a
//! regression fails its test instead of exhausting the machine.

use std::io::Read;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::env::{Run, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};

/// The address-space limit for commands that must stay small (the debug binary maps about
/// 200 MB before it does anything).
const LIMIT_KIB: u64 = 1024 * 1024;

/// The classic "billion laughs": each level repeats the one before nine times. Ten levels
/// would expand to 9^10 strings.
fn alias_bomb(levels: usize) -> String {
    let mut yaml = String::from(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..levels {
        let refs = vec![format!("*a{}", level - 1); 9].join(",");
        yaml.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    yaml
}

#[test]
fn a_config_alias_bomb_is_refused_with_its_line() {
    let env = TestEnv::with_config(&alias_bomb(10));
    let r = env.run_limited(LIMIT_KIB, &["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("alias_bomb_validate", env.snap(&r));
    // Every command reads the configuration the same way.
    let r = env.run_limited(LIMIT_KIB, &["send", "hi"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("axocoatl.yaml:6:"), "{}", r.stderr);
    assert!(r.stderr.contains("alias bomb"), "{}", r.stderr);
}

#[test]
fn a_config_that_is_a_device_a_directory_or_huge_is_refused_before_reading() {
    let env = TestEnv::with_config("agents:\n  - {id: a, provider: local}\n");
    let zero = env.run_limited(LIMIT_KIB, &["validate", "/dev/zero"]);
    assert_eq!(zero.code, 1, "{}", zero.stderr);
    let send = env.run_limited(LIMIT_KIB, &["--config", "/dev/zero", "send", "hi"]);
    assert_eq!(send.code, 1, "{}", send.stderr);
    assert!(
        send.stderr.contains("/dev/zero") && send.stderr.contains("character device"),
        "{}",
        send.stderr
    );
    std::fs::create_dir(env.work.join("conf.d")).expect("mkdir");
    let dir = env.run(&["validate", "conf.d"]);
    let big = env.write("big.yaml", &format!("# {}\n", "x".repeat(5 << 20)));
    assert!(big.exists());
    let huge = env.run_limited(LIMIT_KIB, &["validate", "big.yaml"]);
    assert_eq!(huge.code, 1, "{}", huge.stderr);
    snap!(
        "config_special_files",
        format!(
            "{}\n{}\n{}",
            env.snap(&zero),
            env.snap(&dir),
            env.snap(&huge)
        )
    );
}

#[test]
fn a_config_read_from_a_pipe_is_accepted() {
    let env = TestEnv::with_config("agents:\n  - {id: a, provider: local}\n");
    let mut child = env
        .cmd(&["validate", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"agents:\n  - {id: p, provider: local}\n")
            .expect("write");
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let env = TestEnv::with_config(&format!("{}a\n", "- ".repeat(200_000)));
    let r = env.run_limited(LIMIT_KIB, &["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("lists and mappings nest more than 64 levels deep here"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_byte_order_mark_is_accepted_and_a_nul_is_named() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    env.write(
        "bom.yaml",
        "\u{feff}agents:\n  - {id: a, provider: local}\n",
    );
    let bom = env.run(&["validate", "bom.yaml"]);
    assert_eq!(bom.code, 0, "{}", bom.stderr);
    env.write(
        "nul.yaml",
        "agents:\n  - id: a\n    pro\0vider: local\n    model: m\n",
    );
    let nul = env.run(&["validate", "nul.yaml"]);
    assert_eq!(nul.code, 1);
    snap!(
        "bom_and_nul",
        format!("{}\n{}", env.snap(&bom), env.snap(&nul))
    );
}

/// A repository whose agent answers from `script` (written as replies.yaml unless it is
/// an absolute path).
fn scripted(script_path: &str) -> TestEnv {
    TestEnv::with_config(&format!(
        "providers:\n  s: {{kind: script, script: {script_path}}}\nagents:\n  - {{id: a, provider: s}}\n"
    ))
}

#[test]
fn a_script_that_is_a_device_or_an_alias_bomb_fails_the_turn_clearly() {
    let env = scripted("/dev/zero");
    let r = env.run_limited(LIMIT_KIB, &["send", "hi"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("script /dev/zero is a character device, not a regular file"),
        "{}",
        r.stderr
    );
    // Aliases are bounded by what they copy, not by how many there are: one anchored
    // 1 MiB text repeated ten thousand times is 10 GB.
    let env = scripted("replies.yaml");
    let aliases = vec!["*big"; 10_000].join(", ");
    env.write(
        "replies.yaml",
        &format!(
            "big: &big \"{}\"\nreplies:\n  - chunks: [{aliases}]\n",
            "x".repeat(1 << 20)
        ),
    );
    let r = env.run_limited(LIMIT_KIB, &["send", "hi"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("replies.yaml:3:") && r.stderr.contains("alias bomb"),
        "{}",
        r.stderr
    );
}

/// Waits for `child` up to `limit`; kills it and fails when it is still running then.
fn finish_within(mut child: Child, limit: Duration) -> Run {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}: it blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_as_an_attachment_without_blocking() {
    let env = TestEnv::with_config("agents:\n  - {id: a, provider: local}\n");
    let fifo = env.work.join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let spawn = |args: &[&str]| {
        env.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let add = finish_within(spawn(&["attach", "add", "pipe"]), Duration::from_secs(60));
    let send = finish_within(
        spawn(&["send", "--attach", "pipe", "hi"]),
        Duration::from_secs(60),
    );
    for r in [&add, &send] {
        assert_ne!(r.code, 0);
        assert!(
            r.stderr.contains("pipe is not a regular file"),
            "{}",
            r.stderr
        );
    }
    snap!("attach_fifo", env.snap(&add));
}

/// A repository whose agent talks to `server` with this provider kind and extra keys.
fn served(server: &FakeServer, kind: &str, extra: &str) -> TestEnv {
    let base = match kind {
        "openai" => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    TestEnv::with_config(&format!(
        "providers:\n  p: {{kind: {kind}, base_url: \"{base}\"{extra}}}\nagents:\n  - {{id: a, provider: p, model: m}}\n"
    ))
}

#[test]
fn an_endless_line_fails_the_turn_at_the_bound() {
    // 40 MiB of one JSON string and no line break, then silence with the connection open.
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "application/x-ndjson")
        .chunk(r#"{"message":{"role":"assistant","content":""#)
        .repeated(vec![b'x'; 1 << 20], 40)
        .stall()]);
    let env = served(&server, "ollama", ", timeout_secs: 60");
    let r = env.run_limited(LIMIT_KIB, &["send", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "sent a line longer than 32 MiB without a line break: the call was cut off there"
        ),
        "{}",
        r.stderr
    );
}

/// The peak resident memory of a running process so far, in KiB (`VmHWM`; exec resets
/// it, so it is the binary's own, not the test process's it was forked from).
#[cfg(target_os = "linux")]
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(target_os = "linux")]
#[test]
fn a_stream_faster_than_its_reader_is_not_buffered() {
    // 64 MiB of small valid events, sent as fast as the client takes them.
    let event = format!(
        "data: {}\n\n",
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": null}]})
    );
    let per_chunk = 64 * 1024 / event.len();
    let chunk = event.repeat(per_chunk);
    let times = (64 << 20) / chunk.len();
    let server = FakeServer::with([Reply::new(200)
        .header("Content-Type", "text/event-stream")
        .repeated(chunk.as_bytes(), times)
        .chunk("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")]);
    let env = served(&server, "openai", "");
    let mut child = env
        .cmd(&["send", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Nobody reads stdout yet (a paused terminal, a busy pipe). A client that buffers gets
    // the whole stream into memory; one that does not holds the server back. Wait until
    // the server has sent 48 MiB, or has made no progress for a second.
    let pid = child.id();
    let mut peak = 0;
    let mut last = (0, Instant::now());
    while server.bytes_sent() < 48 << 20 {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        let sent = server.bytes_sent();
        if sent != last.0 {
            last = (sent, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).expect("read");
        out
    });
    let status = loop {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = reader.join().expect("reader");
    assert!(status.success(), "{status:?}");
    let printed = out.iter().filter(|&&b| b == b'x').count();
    assert_eq!(printed, per_chunk * times, "every delta printed");
    assert!(
        peak > 0 && peak < 40 * 1024,
        "peak RSS {peak} KiB for a 64 MiB stream read late"
    );
}

#[test]
fn a_deadline_ends_a_drip_that_never_times_out() {
    // One byte every 50 ms: never silent for long, never done.
    let mut drip = Reply::new(200).header("Content-Type", "application/x-ndjson");
    for _ in 0..1200 {
        drip = drip.chunk(" ").delay(Duration::from_millis(50));
    }
    let server = FakeServer::with([drip]);
    let env = served(&server, "ollama", ", timeout_secs: 30, deadline_secs: 1");
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let stderr = r.stderr.replace(&server.url(), "[SERVER]");
    assert!(
        stderr
            .contains("p: [SERVER]/api/chat did not finish the answer within 1 s (deadline_secs)"),
        "{stderr}"
    );
    env.write(
        "typo.yaml",
        "providers:\n  q: {kind: openai, deadline: 60}\nagents:\n  - {id: a, provider: q, model: m}\n",
    );
    env.write(
        "bad.yaml",
        "providers:\n  p: {kind: ollama, deadline_secs: 0}\n  l: {kind: local, deadline_secs: 60}\nagents:\n  - {id: a, provider: p, model: m}\n",
    );
    let typo = env.run(&["validate", "typo.yaml"]);
    let bad = env.run(&["validate", "bad.yaml"]);
    assert_eq!((typo.code, bad.code), (1, 1));
    snap!(
        "deadline_validation",
        format!("{}\n{}", env.snap(&typo), env.snap(&bad))
    );
}

const KEY: &str = "sk-reflected-0123456789abcdef";

fn sse_event(delta: serde_json::Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

#[test]
fn an_api_key_the_server_echoes_is_never_recorded() {
    let (head, tail) = KEY.split_at(9);
    // Turn 1: the key split across two deltas, and inside a tool call's arguments; then,
    // after the tool round, whole in the answer.
    let first = [
        sse_event(
            serde_json::json!({"content": format!("your key is {head}")}),
            None,
        ),
        sse_event(
            serde_json::json!({"content": format!("{tail}, right?")}),
            None,
        ),
        sse_event(
            serde_json::json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": format!("{{\"key\": \"{KEY}\"}}")}}]}),
            Some("tool_calls"),
        ),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let second = [
        sse_event(
            serde_json::json!({"content": format!("Done: {KEY}")}),
            Some("stop"),
        ),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    // Turn 2: the key in a delta, then in an error event mid-stream.
    let third = [
        sse_event(
            serde_json::json!({"content": format!("again {KEY} and")}),
            None,
        ),
        format!(
            "data: {}\n\n",
            serde_json::json!({"error": {"message": format!("bad key {KEY}")}})
        ),
    ]
    .concat();
    let server = FakeServer::with([Reply::sse(&first), Reply::sse(&second), Reply::sse(&third)]);
    let mut env = served(&server, "openai", ", api_key_env: TEST_KEY");
    env.set_env("TEST_KEY", KEY);
    let one = env.run(&["send", "--json", "hi"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert!(
        one.stdout.contains("your key is <redacted>, right?"),
        "{}",
        one.stdout
    );
    let two = env.run(&["send", "more"]);
    assert_eq!(two.code, 3, "{}", two.stderr);
    assert!(two.stderr.contains("bad key <redacted>"), "{}", two.stderr);
    // The requests carried the key, as they must.
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let mut seen = vec![one.stdout, one.stderr, two.stdout, two.stderr];
    let history = env.run(&["history", "--json"]);
    let turns: Vec<String> = history
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["turn"].as_str().map(str::to_string))
        .collect();
    assert_eq!(turns.len(), 2, "{}", history.stdout);
    seen.push(history.stdout);
    let mut runs = vec![env.run(&["export", "--format", "json"])];
    for turn in &turns {
        runs.push(env.run(&["show", "--json", turn]));
        runs.push(env.run(&["show", turn]));
    }
    for r in runs {
        assert_eq!(r.code, 0, "{}", r.stderr);
        seen.push(r.stdout);
        seen.push(r.stderr);
    }
    for text in &seen {
        assert!(!text.contains(KEY), "the key was shown: {text}");
    }
    let mut leaked = Vec::new();
    walk(&env.repo(), &mut |p| {
        let bytes = std::fs::read(p).unwrap_or_default();
        if bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()) {
            leaked.push(p.display().to_string());
        }
    });
    assert!(leaked.is_empty(), "the key was stored in {leaked:?}");
}

fn walk(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path)) {
    for e in std::fs::read_dir(dir).expect("ls").flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}
