//! Sleep-time consolidation per agent and around stops, through the real `serve`: an
//! agent's own `consolidation:` opts it out or tunes it (and `memory status` says which
//! applies); stopping an agent (`agents restart`, serve's shutdown) starts no provider call
//! and no memory pass.

use serde_json::Value;

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{FakeServer, Recorded};
use crate::common::ollama::ollama_text;
use crate::common::procs::{actor, agents_status, json_lines, Serve};

/// The consolidation turns in the ledger, by agent.
fn passes(env: &TestEnv) -> Vec<String> {
    let r = env.run(&["history", "--all", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
        .iter()
        .filter(|t| {
            t["request"]
                .as_str()
                .is_some_and(|r| r.starts_with("Consolidate memory:"))
        })
        .map(|t| t["agent"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn status(env: &TestEnv, agent: &str) -> Value {
    let r = env.run(&["memory", "status", "-a", agent, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(r.stdout.trim()).expect("json")
}

fn script_env(config: &str) -> TestEnv {
    let env = TestEnv::with_config(config);
    env.write(
        "replies.yaml",
        "replies:\n  - match: \"Core memory blocks\"\n    text: '{\"edits\": []}'\n  - text: \"Hello.\"\n",
    );
    env
}

#[test]
fn an_agents_own_consolidation_opts_it_out_or_tunes_it_and_status_says_which() {
    let env = script_env(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: plain\n    provider: canned\n  - id: never\n    provider: canned\n    consolidation: false\n  - id: tuned\n    provider: canned\n    consolidation: {interval_secs: 7200}\n  - id: solo\n    provider: canned\n    consolidation: {enabled: true, idle_threshold_secs: 1}\nconsolidation:\n  enabled: true\n  idle_threshold_secs: 1\n",
    );
    let (plain, never, tuned) = (
        status(&env, "plain"),
        status(&env, "never"),
        status(&env, "tuned"),
    );
    assert_eq!(plain["consolidation"]["by_serve"], true, "{plain}");
    assert_eq!(plain["consolidation"]["from_agent"], serde_json::json!([]));
    assert_eq!(never["consolidation"]["by_serve"], false, "{never}");
    assert_eq!(
        never["consolidation"]["from_agent"],
        serde_json::json!(["enabled"])
    );
    assert_eq!(tuned["consolidation"]["interval_secs"], 7200, "{tuned}");
    assert_eq!(tuned["consolidation"]["idle_threshold_secs"], 1);
    for agent in ["plain", "never", "tuned", "solo"] {
        snap!(
            format!("status_{agent}"),
            env.snap(&env.run(&["memory", "status", "-a", agent]))
        );
    }
    for agent in ["plain", "never", "tuned", "solo"] {
        let r = env.run(&["memory", "add", "-a", agent, "The user prefers tea."]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let serve = Serve::start(&env);
    // Every actor is idle from the start, so every agent that serve consolidates is
    // consolidated in the same round: wait for those passes to end.
    wait_until("three passes", || passes(&env).len() >= 3);
    wait_until("their ends", || {
        serve.logs().matches("consolidation pass ").count() >= 6
    });
    let mut ran = passes(&env);
    ran.sort();
    assert_eq!(ran, ["plain", "solo", "tuned"], "{}", serve.logs());
    assert!(
        !serve
            .logs()
            .lines()
            .any(|l| l.contains("consolidation pass") && l.contains("agent=never")),
        "never consolidated: {}",
        serve.logs()
    );
    assert_eq!(serve.terminate(), 0);
    // A pass on request runs whatever the agent's setting.
    let r = env.run(&["memory", "consolidate", "-a", "never"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("never: completed"), "{}", r.stdout);
}

#[test]
fn validate_checks_an_agents_consolidation() {
    let env = TestEnv::with_config(
        "agents:\n  - id: a\n    provider: local\n    consolidation: {interval_secs: 0}\n  - id: b\n    provider: local\n    consolidation: {idle_threshold_secs: 60}\n",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    snap!("validate_zero", env.snap(&r));
    assert!(
        r.stderr
            .contains("agent `a`: consolidation.interval_secs must be positive"),
        "{}",
        r.stderr
    );
    for (value, what) in [
        ("sometimes", "found the text `sometimes`"),
        ("{every: 5}", "every"),
    ] {
        env.write(
            "axocoatl.yaml",
            &format!("agents:\n  - id: a\n    provider: local\n    consolidation: {value}\n"),
        );
        let r = env.run(&["validate"]);
        assert_eq!(r.code, 1, "{value}: {}", r.stderr);
        assert!(
            r.stderr.contains("agents[0].consolidation") && r.stderr.contains(what),
            "{value}: {}",
            r.stderr
        );
    }
}

#[test]
fn validate_warns_of_consolidation_on_a_coordinator() {
    let env = TestEnv::with_config(
        "agents:\n  - id: lead\n    provider: local\n    role: coordinator\n    consolidation: false\n  - id: w\n    provider: local\n    role: worker\nworkflows:\n  - id: crew\n    entry_point: lead\n    workers: [w]\n",
    );
    let r = env.run(&["validate"]);
    assert_eq!(r.code, 0, "a warning: {}", r.stderr);
    assert!(
        r.stderr
            .contains("`consolidation:` on a coordinator changes nothing"),
        "{}",
        r.stderr
    );
}

/// What an agent has durably remembered: its semantic records and daily log lines.
fn memory_of(env: &TestEnv, agent: &str) -> (Value, String) {
    let records = status(env, agent)["records"].clone();
    let log = env.run(&[
        "memory",
        "log",
        "-a",
        agent,
        "--from",
        "2000-01-01",
        "--json",
    ]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    (records, log.stdout)
}

#[test]
fn restarting_an_agent_and_stopping_serve_start_no_provider_call_and_no_memory_pass() {
    // Answers every call; counts them.
    let server = FakeServer::responding(|_: &Recorded| ollama_text("Hello."));
    let env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 30}}\nagents:\n  - id: a\n    provider: llm\n    model: m\n  - id: b\n    provider: llm\n    model: m\nconsolidation:\n  enabled: true\n  idle_threshold_secs: 3600\n",
        server.url()
    ));
    for agent in ["a", "b"] {
        let r = env.run(&["memory", "add", "-a", agent, "The user prefers tea."]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let serve = Serve::start(&env);
    for agent in ["a", "b"] {
        let r = env.run(&["send", "-a", agent, "hello"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let calls = server.request_count();
    assert_eq!(calls, 2);
    let before = (memory_of(&env, "a"), memory_of(&env, "b"), passes(&env));

    let r = env.run(&["agents", "restart", "a"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    wait_until("a's new actor is idle", || {
        actor(&agents_status(&env), "a")["state"] == "idle"
    });
    assert_eq!(server.request_count(), calls, "a restart called no model");
    assert_eq!(
        (memory_of(&env, "a"), memory_of(&env, "b"), passes(&env)),
        before,
        "a restart ran no memory pass and wrote no memory"
    );

    assert_eq!(serve.terminate(), 0);
    assert_eq!(server.request_count(), calls, "a shutdown called no model");
    assert_eq!(
        (memory_of(&env, "a"), memory_of(&env, "b"), passes(&env)),
        before,
        "a shutdown ran no memory pass and wrote no memory"
    );
    assert!(before.2.is_empty(), "{:?}", before.2);
}
