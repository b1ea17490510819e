//! Prompt caching, cache usage and cost through the real binary: an agent on `kind:
//! anthropic` against a loopback server that keeps a prompt cache as Anthropic's does, the
//! price table (shipped and `prices:`), `usage --cost`, `show`, cost budgets, and Gemini
//! through its OpenAI-compatible endpoint.

use serde_json::{json, Value};

use crate::common::anthropic::{self, CacheServer, Usage};
use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Reply};

const KEY_ENV: &str = "TEST_ANTHROPIC_KEY";

fn anthropic_env(url: &str, agent_extra: &str, prices: &str) -> TestEnv {
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  claude: {{kind: anthropic, base_url: \"{url}\", api_key_env: {KEY_ENV}, max_retries: 0}}\n{prices}agents:\n  - id: coder\n    provider: claude\n    model: claude-haiku-4-5\n    system_prompt: You are careful and brief.\n    tools: [read_file]\n{agent_extra}"
    ));
    env.set_env(KEY_ENV, "sk-ant-test-0123456789");
    env.write("notes.txt", "hello from the notes\n");
    env
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// `turn <id>` from a send's stderr.
fn turn_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("turn "))
        .expect("a turn line")
        .split_whitespace()
        .next()
        .expect("an id")
        .to_owned()
}

/// Nanodollars of a call at claude-haiku-4-5's shipped price ($1 in, $1.25 cache write,
/// $0.10 cache read, $5 out per million tokens).
fn haiku_nanos(u: &Usage) -> u64 {
    u.input * 1000 + u.cache_write * 1250 + u.cache_read * 100 + u.output * 5000
}

#[test]
fn a_tool_using_session_reads_its_prefix_from_the_cache_and_records_it() {
    let server = CacheServer::start(0, "read_file", json!({"path": "notes.txt"}));
    let env = anthropic_env(&server.url(), "", "");
    let mut turns = Vec::new();
    for request in ["read the notes", "read them again", "and once more"] {
        let r = env.run(&["send", request]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        turns.push(turn_of(&r.stderr));
    }
    let seen = server.seen();
    assert_eq!(seen.len(), 6, "a tool call and an answer per turn");
    for (i, s) in seen.iter().enumerate() {
        assert!((1..=4).contains(&s.breakpoints), "request {i}: {s:?}");
    }
    // Every request after the first starts with the one before it, up to its breakpoint
    // at the end of the conversation: the cache serves all of it but what is new.
    for (i, pair) in seen.windows(2).enumerate() {
        assert!(
            pair[1].usage.cache_read >= pair[0].total - pair[0].usage.input,
            "request {} read {} of the {} the one before cached: {seen:?}",
            i + 1,
            pair[1].usage.cache_read,
            pair[0].total - pair[0].usage.input
        );
    }
    let read: u64 = seen.iter().map(|s| s.usage.cache_read).sum();
    let written: u64 = seen.iter().map(|s| s.usage.cache_write).sum();
    let total: u64 = seen.iter().map(|s| s.total).sum();
    assert!(
        read * 2 > total,
        "most input came from the cache: {read} of {total}"
    );

    // The ledger records what the provider said: each call, each turn, the totals.
    let usage = json_lines(&env.run(&["usage", "--json"]).stdout);
    let t = usage.last().expect("a total");
    assert_eq!(t["prompt_tokens"], total);
    assert_eq!(t["cache_read_tokens"], read);
    assert_eq!(t["cache_write_tokens"], written);
    assert_eq!(t["cache_complete"], true);
    let nanos: u64 = seen.iter().map(|s| haiku_nanos(&s.usage)).sum();
    assert_eq!(t["cost_usd"].as_f64(), Some(nanos as f64 / 1e9));
    assert_eq!(t["cost_complete"], true);

    let show: Value =
        serde_json::from_str(&env.run(&["show", &turns[1], "--json"]).stdout).expect("show --json");
    let calls = show["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 2);
    for (call, s) in calls.iter().zip(&seen[2..4]) {
        assert_eq!(call["cache_read_tokens"], s.usage.cache_read);
        assert_eq!(call["cache_write_tokens"], s.usage.cache_write);
        assert_eq!(call["prompt_tokens"], s.total);
        assert_eq!(
            call["cost_usd"].as_f64(),
            Some(haiku_nanos(&s.usage) as f64 / 1e9)
        );
    }
    assert_eq!(
        show["usage"]["cache_read_tokens"],
        seen[2].usage.cache_read + seen[3].usage.cache_read
    );
    let text = env.run(&["show", &turns[1]]).stdout;
    assert!(text.contains("cache: "), "{text}");
    assert!(text.contains("cost: $0.0"), "{text}");
}

/// Three agents: one on a scripted model with a `prices:` entry (complete), one on a Claude
/// model no table prices (unknown), one that ran both (a floor).
#[test]
fn usage_cost_with_complete_partial_and_unknown_prices() {
    let usage = |input, write, read, output| Usage {
        input,
        cache_write: write,
        cache_read: read,
        output,
    };
    let server = FakeServer::with([
        Reply::sse(&anthropic::text(&["a"], usage(100, 0, 0, 10))),
        Reply::sse(&anthropic::text(&["b"], usage(10, 200, 0, 10))),
        Reply::sse(&anthropic::text(&["c"], usage(10, 0, 200, 10))),
    ]);
    let mut env = TestEnv::with_config(&format!(
        "providers:
  priced: {{kind: script, script: replies.yaml}}
  claude: {{kind: anthropic, base_url: \"{}\", api_key_env: {KEY_ENV}}}
prices:
  - {{provider: priced, model: m1, input: 2, output: 10, cache_write: 2.5, cache_read: 0.2}}
agents:
  - {{id: paid, provider: priced, model: m1}}
  - {{id: mystery, provider: claude, model: claude-test-9}}
  - {{id: mixed, provider: claude, model: claude-test-9}}
",
        server.url()
    ));
    env.set_env(KEY_ENV, "sk-ant-test-0123456789");
    env.write(
        "replies.yaml",
        "replies:\n  - text: paid\n    usage: {prompt_tokens: 1000, completion_tokens: 100, cache_read_tokens: 800}\n",
    );
    let ok = |args: &[&str]| {
        let r = env.run(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    };
    ok(&["send", "-a", "paid", "x"]);
    ok(&["send", "-a", "mystery", "y"]);
    ok(&["send", "-a", "mixed", "-m", "claude-haiku-4-5", "z"]);
    ok(&["send", "-a", "mixed", "w"]);
    snap!("usage_cost", env.snap(&env.run(&["usage", "--cost"])));
    let rows = json_lines(&env.run(&["usage", "--json"]).stdout);
    let row = |agent: &str| {
        rows.iter()
            .find(|r| r["agent"] == agent)
            .unwrap_or_else(|| panic!("{agent} in {rows:?}"))
            .clone()
    };
    // 200 × $2 + 800 × $0.2 + 100 × $10 per million.
    assert_eq!(row("paid")["cost_usd"].as_f64(), Some(0.00156));
    assert_eq!(row("paid")["cost_complete"], true);
    assert_eq!(row("mystery")["cost_usd"].as_f64(), Some(0.0));
    assert_eq!(row("mystery")["cost_complete"], false);
    // The haiku call alone: 10 × $1 + 200 × $1.25 + 10 × $5 per million.
    assert_eq!(row("mixed")["cost_usd"].as_f64(), Some(0.00031));
    assert_eq!(row("mixed")["cost_complete"], false);
    assert_eq!(row("mixed")["cache_write_tokens"], 200);
    assert_eq!(row("mixed")["cache_read_tokens"], 200);
    let total = rows.last().expect("total");
    assert_eq!(total["cost_complete"], false);
    assert_eq!(total["prompt_tokens"], 1000 + 100 + 210 + 210);
}

#[test]
fn a_cost_budget_refuses_a_call_it_cannot_afford() {
    let server = FakeServer::with([]);
    let env = anthropic_env(
        &server.url(),
        "    cost_budget: {per_call_usd: 0.0001}\n    sampling: {max_tokens: 100}\n",
        "",
    );
    let r = env.run(&["send", "read the notes"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(server.request_count(), 0, "nothing reached the server");
    assert!(
        r.stderr
            .contains("cost budget per_call_usd $0.0001 exceeded: reservation $0.0"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("at $1 in / $5 out (cache write $1.25, read $0.1) per million tokens"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_cost_budget_counts_what_the_execution_spent() {
    // The first call costs (1,000 + 20,000 written) at haiku's prices: $0.026; the second
    // call's reservation no longer fits in $0.03.
    let spent = Usage {
        input: 1000,
        cache_write: 20_000,
        cache_read: 0,
        output: 100,
    };
    let server = FakeServer::with([Reply::sse(&anthropic::tool_calls(
        &[("toolu_1", "read_file", json!({"path": "notes.txt"}))],
        spent,
    ))]);
    let env = anthropic_env(
        &server.url(),
        "    cost_budget: {per_call_usd: 0.029, per_execution_usd: 0.03}\n    sampling: {max_tokens: 1000}\n",
        "",
    );
    let r = env.run(&["send", "read the notes"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(server.request_count(), 1, "the second call was not sent");
    assert!(
        r.stderr
            .contains("cost budget per_execution_usd $0.0300 exceeded: spent $0.0265"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_reported_cost_over_the_budget_stops_the_turn_after_that_response() {
    let dear = Usage {
        input: 50_000,
        cache_write: 0,
        cache_read: 0,
        output: 20,
    };
    let server = FakeServer::with([Reply::sse(&anthropic::tool_calls(
        &[("toolu_1", "read_file", json!({"path": "notes.txt"}))],
        dear,
    ))]);
    let env = anthropic_env(
        &server.url(),
        "    cost_budget: {per_call_usd: 0.01}\n    sampling: {max_tokens: 100}\n",
        "",
    );
    let r = env.run(&["send", "read the notes"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "the provider's usage came to $0.0501 for one call, over per_call_usd $0.0100"
        ),
        "{}",
        r.stderr
    );
    let h = json_lines(&env.run(&["history", "--json"]).stdout);
    assert!(
        h[0]["tools"].as_array().expect("tools").is_empty(),
        "its tool call was not run"
    );
}

#[test]
fn a_cost_budget_without_a_price_refuses_or_warns() {
    let server = FakeServer::with([Reply::sse(&anthropic::text(
        &["sent"],
        Usage {
            input: 5,
            output: 1,
            ..Usage::default()
        },
    ))]);
    let env = anthropic_env(&server.url(), "    cost_budget: {per_call_usd: 1}\n", "");
    env.write(
        "axocoatl.yaml",
        &std::fs::read_to_string(env.work.join("axocoatl.yaml"))
            .expect("config")
            .replace("model: claude-haiku-4-5", "model: claude-test-9"),
    );
    let v = env.run(&["validate"]);
    assert!(
        v.stderr.contains("no price for model `claude-test-9` of provider `claude`, so its cost_budget cannot be checked and every call will be refused"),
        "{}",
        v.stderr
    );
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("no price for model `claude-test-9`"),
        "{}",
        r.stderr
    );
    assert_eq!(server.request_count(), 0);
    // Under `warn` the call goes out, with the warning recorded.
    env.write(
        "axocoatl.yaml",
        &std::fs::read_to_string(env.work.join("axocoatl.yaml"))
            .expect("config")
            .replace(
                "per_call_usd: 1}",
                "per_call_usd: 1, overflow_policy: warn}",
            ),
    );
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: cost budget cannot be checked"),
        "{}",
        r.stderr
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn cost_budgets_and_prices_are_validated() {
    let env = TestEnv::with_config(
        "prices:
  - {provider: anthropic, model: \"claude-*-x*\", input: 1, output: 1}
  - {provider: openai, model: gpt-x, input: -1, output: 1}
agents:
  - id: a
    provider: local
    cost_budget: {per_call_usd: 2, per_execution_usd: 1}
  - id: b
    provider: local
    cost_budget: {per_call_usd: 0}
",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("validate_cost", env.snap(&r));
}

/// The built-in kind needs no entry: `-m anthropic:MODEL` reaches ANTHROPIC_BASE_URL with
/// the key of ANTHROPIC_API_KEY, and the call is priced from the shipped table.
#[test]
fn send_dash_m_reaches_claude_with_the_default_key_and_address() {
    let server = FakeServer::with([Reply::sse(&anthropic::text(
        &["Hello", " from Claude."],
        Usage {
            input: 100,
            cache_write: 0,
            cache_read: 0,
            output: 10,
        },
    ))]);
    let mut env = TestEnv::with_config("agents:\n  - {id: a, provider: local}\n");
    env.set_env("ANTHROPIC_BASE_URL", &server.url());
    env.set_env("ANTHROPIC_API_KEY", "sk-ant-test-0123456789");
    let r = env.run(&["send", "-m", "anthropic:claude-haiku-4-5", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("Hello from Claude."), "{}", r.stdout);
    let req = server.only_request();
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-ant-test-0123456789"));
    assert_eq!(req.json()["model"], "claude-haiku-4-5");
    let t = json_lines(&env.run(&["usage", "--json"]).stdout)
        .pop()
        .expect("total");
    // 100 × $1 + 10 × $5 per million.
    assert_eq!(t["cost_usd"].as_f64(), Some(0.00015));
}

/// `usage --prices`: the configuration's rows first, then the shipped ones with their date.
#[test]
fn usage_prices_lists_the_table_in_force() {
    let env = TestEnv::with_config(
        "prices:
  - {provider: vllm, model: qwen2.5-72b, input: 0.4, output: 1.2}
agents:
  - {id: a, provider: local}
",
    );
    let r = env.run(&["usage", "--prices"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("usage_prices", env.snap(&r));
    let rows = json_lines(&env.run(&["usage", "--prices", "--json"]).stdout);
    assert_eq!(
        rows[0],
        json!({"provider": "vllm", "model": "qwen2.5-72b", "input": 0.4, "output": 1.2,
            "cache_write": 0.4, "cache_read": 0.4, "source": "config"})
    );
    let haiku = rows
        .iter()
        .find(|r| r["model"] == "claude-haiku-4-5*")
        .expect("a shipped haiku row");
    assert_eq!(haiku["source"], "shipped");
    assert_eq!(haiku["cache_read"], 0.1);
    assert!(haiku["as_of"].as_str().is_some_and(|d| d.len() == 10));
}

/// Gemini through its OpenAI-compatible endpoint: the configuration docs/providers.md shows,
/// against a loopback server at that endpoint's path, with a price of its own and the
/// cached prompt tokens it reports read like OpenAI's.
#[test]
fn gemini_through_its_openai_compatible_endpoint() {
    let chunk = |v: Value| format!("data: {v}\n\n");
    let body = chunk(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi from Gemini."}}]}),
    ) + &chunk(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2000, "completion_tokens": 10, "total_tokens": 2010,
                "prompt_tokens_details": {"cached_tokens": 1500}}}),
    ) + "data: [DONE]\n\n";
    let server = FakeServer::with([Reply::sse(&body)]);
    let mut env = TestEnv::with_config(&format!(
        "providers:
  gemini:
    kind: openai
    base_url: {}/v1beta/openai
    api_key_env: GEMINI_API_KEY
prices:
  - {{provider: gemini, model: \"gemini-2.5-flash*\", input: 0.3, output: 2.5, cache_read: 0.03}}
agents:
  - id: assistant
    provider: gemini
    model: gemini-2.5-flash
",
        server.url()
    ));
    env.set_env("GEMINI_API_KEY", "AIza-test-0123456789");
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("Hi from Gemini."), "{}", r.stdout);
    let req = server.only_request();
    assert_eq!(req.path, "/v1beta/openai/chat/completions");
    assert_eq!(
        req.header("authorization"),
        Some("Bearer AIza-test-0123456789")
    );
    assert_eq!(req.json()["model"], "gemini-2.5-flash");
    let t = json_lines(&env.run(&["usage", "--json"]).stdout)
        .pop()
        .expect("total");
    assert_eq!(t["cache_read_tokens"], 1500);
    assert_eq!(t["cache_write_tokens"], 0);
    // 500 × $0.3 + 1500 × $0.03 + 10 × $2.5 per million.
    assert_eq!(t["cost_usd"].as_f64(), Some(0.00022));
    assert_eq!(t["cost_complete"], true);
}
