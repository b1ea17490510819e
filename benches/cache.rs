//! Prompt caching over a tool-using session. Prints figures; asserts nothing.
//!
//! Ten turns of `axocoatl send` to an agent on `kind: anthropic` (a 6 KB system prompt, the
//! baseline tools of a read-only agent), each turn a `read_file` call and an answer, against
//! a loopback server that keeps a prompt cache the way Anthropic's does (breakpoints, the
//! 20-block lookback, a 1,024-token minimum; `tests/cli/common/anthropic.rs`). Printed: the
//! share of input tokens read from the cache, beside the share a perfect cache could have
//! served (every token a request shares with the one before it), what was written, and
//! what the session's input cost at Claude Sonnet 4.5's list prices with the cache and
//! without it.
//!
//! Run: `cargo bench --bench cache`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

#[path = "../tests/cli/common/fake_http.rs"]
#[allow(dead_code)]
mod fake_http;

#[path = "../tests/cli/common/anthropic.rs"]
#[allow(dead_code)]
mod anthropic;

use std::process::Command;

/// The 10-turn session's requests.
const TURNS: usize = 10;
/// Claude Sonnet 4.5, USD per million tokens.
const INPUT: f64 = 3.0;
const CACHE_WRITE: f64 = 3.75;
const CACHE_READ: f64 = 0.3;

fn system_prompt() -> String {
    let rule = "Read the files the user names before answering; quote what you rely on; say \
                what you did not check; keep answers short and plain. ";
    rule.repeat(6_000 / rule.len())
}

fn main() {
    let server =
        anthropic::CacheServer::start(1024, "read_file", serde_json::json!({"path": "notes.txt"}));
    let dir = tempfile::Builder::new()
        .prefix("axobench-cache")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let work = dir.path();
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    let run = |args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .current_dir(work)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", work)
            .env("BENCH_ANTHROPIC_KEY", "sk-ant-bench-0123456789")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["init"]);
    std::fs::write(
        work.join("axocoatl.yaml"),
        format!(
            "providers:\n  claude: {{kind: anthropic, base_url: \"{}\", api_key_env: BENCH_ANTHROPIC_KEY}}\nagents:\n  - id: reader\n    provider: claude\n    model: claude-sonnet-4-5\n    system_prompt: \"{}\"\n",
            server.url(),
            system_prompt()
        ),
    )
    .unwrap();
    std::fs::write(work.join("notes.txt"), "The launch moved to Friday.\n").unwrap();
    for turn in 0..TURNS {
        run(&["send", &format!("Turn {turn}: what do the notes say now?")]);
    }
    let seen = server.seen();
    let total: u64 = seen.iter().map(|s| s.total).sum();
    let read: u64 = seen.iter().map(|s| s.usage.cache_read).sum();
    let written: u64 = seen.iter().map(|s| s.usage.cache_write).sum();
    let shared: u64 = seen.iter().map(|s| s.shared).sum();
    let plain = total - read - written;
    let share = |n: u64| 100.0 * n as f64 / total as f64;
    let usd = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
    let with_cache = usd(plain, INPUT) + usd(written, CACHE_WRITE) + usd(read, CACHE_READ);
    let without = usd(total, INPUT);
    println!(
        "prompt cache over a {TURNS}-turn tool-using session ({} calls, {total} input tokens)",
        seen.len()
    );
    println!(
        "  read from the cache: {read} tokens, {:.1}% of input (a perfect cache: {:.1}%)",
        share(read),
        share(shared)
    );
    println!(
        "  written to it: {written} tokens ({:.1}%); neither: {plain} ({:.1}%)",
        share(written),
        share(plain)
    );
    println!(
        "  breakpoints per request: {}",
        seen.iter()
            .map(|s| s.breakpoints.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  input cost at Claude Sonnet 4.5 list prices: ${with_cache:.4} with the cache, ${without:.4} without ({:.0}% less)",
        100.0 * (1.0 - with_cache / without)
    );
    // The same requests with fewer breakpoints, through a fresh cache.
    let bodies = server.bodies();
    for (what, keep) in [
        (
            "the system prompt and tools only",
            &(|w: &str| w != "message") as &dyn Fn(&str) -> bool,
        ),
        ("no breakpoint", &|_: &str| false),
    ] {
        let (read, written, total) = anthropic::replay(&bodies, keep, 1024);
        let cost =
            usd(total - read - written, INPUT) + usd(written, CACHE_WRITE) + usd(read, CACHE_READ);
        println!(
            "  beside: {what}: {:.1}% read, {:.1}% written, ${cost:.4}",
            100.0 * read as f64 / total as f64,
            100.0 * written as f64 / total as f64
        );
    }
}
