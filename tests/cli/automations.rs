//! Automations through the real binary: every occurrence claimed and run exactly once by
//! racing runners, a killed runner's occurrence recorded interrupted and never re-run, the
//! catch-up and overlap policies, disabled automations, time zones with daylight saving,
//! and the run history across processes and `fsck`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::env::{Run, TestEnv};
use crate::common::procs::json_lines;

const REPLIES: &str = r#"replies:
  - match: "slow"
    chunks: ["still ", "thinking"]
    delay_ms: 60000
  - match: "linger"
    chunks: ["one ", "two"]
    delay_ms: 1500
  - match: "Summarize"
    text: "Nothing happened."
"#;

/// A repository whose `assistant` answers from a script, with `automations` (YAML list
/// items, indented by two spaces) configured.
fn env_with(automations: &str) -> TestEnv {
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  replay:\n    kind: script\n    script: replies.yaml\nagents:\n  - id: assistant\n    provider: replay\nautomations:\n{automations}"
    ));
    env.write("replies.yaml", REPLIES);
    env.set_env("TZ", "UTC");
    env
}

fn cmd_at(env: &TestEnv, now: &str, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    c.env("AXOCOATL_NOW", now);
    c
}

fn at(env: &TestEnv, now: &str, args: &[&str]) -> Run {
    let o = cmd_at(env, now, args).output().expect("run axocoatl");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Every run record, oldest first.
fn runs(env: &TestEnv, now: &str) -> Vec<Value> {
    let r = at(
        env,
        now,
        &["automations", "runs", "--limit", "100000", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

fn tick(env: &TestEnv, now: &str) -> Run {
    let r = at(env, now, &["automations", "tick"]);
    assert!(
        r.code == 0 || r.code == 3,
        "tick: {} {}",
        r.stdout,
        r.stderr
    );
    r
}

/// (occurrence, outcome) of each record.
fn outcomes(records: &[Value]) -> Vec<(String, String)> {
    records
        .iter()
        .map(|r| {
            (
                r["occurrence"].as_str().expect("occurrence").to_owned(),
                r["outcome"].as_str().expect("outcome").to_owned(),
            )
        })
        .collect()
}

/// The turns of every session, as `history --all --json` shows them.
fn turns(env: &TestEnv) -> Vec<Value> {
    let r = env.run(&["history", "--all", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    json_lines(&r.stdout)
}

/// Replaces runner pids, which differ between runs, for snapshots.
fn no_pids(s: &str) -> String {
    // The padding after a pid depends on its length: take it along.
    let re = regex::Regex::new(r"\b(tick|serve|manual) \d+ *").expect("re");
    re.replace_all(s, "$1 [PID] ").into_owned()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn help_of_every_subcommand() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help", vec!["automations", "--help"]),
        ("help_list", vec!["automations", "list", "--help"]),
        ("help_tick", vec!["automations", "tick", "--help"]),
        ("help_run", vec!["automations", "run", "--help"]),
        ("help_runs", vec!["automations", "runs", "--help"]),
    ] {
        let r = env.run(&args);
        snap!(name, env.snap(&r));
    }
}

#[test]
fn list_shows_the_next_occurrence_in_local_and_utc_time() {
    let env = env_with(
        "  - id: morning-brief\n    schedule: \"0 9 * * 1-5\"\n    timezone: Europe/Berlin\n    agent: assistant\n    session: briefs\n    request: Summarize yesterday's notes.\n  - id: nightly\n    schedule: \"@daily\"\n    agent: assistant\n    request: Summarize the day.\n    catch_up: all\n    catch_up_window_secs: 3600\n    overlap: queue\n  - id: paused\n    schedule: \"*/5 * * * *\"\n    agent: assistant\n    request: Summarize.\n    enabled: false\n",
    );
    // Friday 2026-01-02 10:00 UTC.
    let now = "2026-01-02T10:00:00.000Z";
    let text = at(&env, now, &["automations", "list"]);
    snap!("list", env.snap(&text));
    let list = json_lines(&at(&env, now, &["automations", "list", "--json"]).stdout);
    let brief = &list[0];
    assert_eq!(brief["next_utc"], "2026-01-05T08:00:00.000Z");
    assert_eq!(
        brief["next_local"],
        "2026-01-05T09:00:00+01:00[Europe/Berlin]"
    );
    assert_eq!(
        (&brief["timezone"], &brief["local_zone"]),
        (&Value::from("Europe/Berlin"), &Value::from(false))
    );
    assert_eq!(list[1]["next_utc"], "2026-01-03T00:00:00.000Z");
    assert_eq!(list[1]["timezone"], "UTC");
    assert_eq!(list[1]["local_zone"], true);
    assert_eq!(
        (
            &list[1]["catch_up"],
            &list[1]["overlap"],
            &list[1]["session"]
        ),
        (
            &Value::from("all"),
            &Value::from("queue"),
            &Value::from("nightly")
        )
    );
    assert_eq!(list[2]["enabled"], false);
    assert_eq!(list[2]["next_utc"], Value::Null);
}

/// Starts a runner of automations as of `now`: `tick`, or `serve`'s scheduler.
type Runner = fn(&TestEnv, &str) -> Child;

/// `serve` until its scheduler's first pass is done, then SIGTERM: a child that exits by
/// itself (0 when serve stopped cleanly), like a tick.
const SERVE_ONCE: &str = r#"log=$(mktemp)
"$1" serve 2>"$log" &
pid=$!
until grep -q "automations pass done" "$log"; do
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; rm -f "$log"; exit 1; fi
  sleep 0.05
done
kill -TERM "$pid"
wait "$pid"
code=$?
rm -f "$log"
exit $code"#;

fn serve_runner(env: &TestEnv, now: &str) -> Child {
    let c = cmd_at(env, now, &["serve"]);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(SERVE_ONCE)
        .arg("sh")
        .arg(crate::common::env::bin())
        .current_dir(&env.work)
        .env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve")
}

fn tick_runner(env: &TestEnv, now: &str) -> Child {
    cmd_at(env, now, &["automations", "tick"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tick")
}

const RUNNERS: &[Runner] = &[
    serve_runner,
    tick_runner,
    tick_runner,
    tick_runner,
    tick_runner,
];

#[test]
fn fifty_occurrences_serve_and_four_ticks_racing_each_run_exactly_once() {
    let env = env_with(
        "  - id: minutely\n    schedule: \"* * * * *\"\n    agent: assistant\n    request: Summarize the minute.\n    catch_up: all\n    overlap: queue\n",
    );
    // The first step meets 03:04 (the minute a runner first sees the automation); seven
    // more, seven minutes apart, meet seven occurrences each: 50.
    let mut expected = BTreeSet::new();
    let start = 3 * 60 + 4;
    for step in 0..8 {
        let minute = start + step * 7;
        let now = format!("2026-01-02T{:02}:{:02}:30Z", minute / 60, minute % 60);
        let first = if step == 0 { minute } else { minute - 6 };
        for m in first..=minute {
            expected.insert(format!("2026-01-02T{:02}:{:02}:00.000Z", m / 60, m % 60));
        }
        let children: Vec<Child> = RUNNERS.iter().map(|r| r(&env, &now)).collect();
        for child in children {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "runner failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert_eq!(expected.len(), 50);
    let records = runs(&env, "2026-01-02T04:00:00.000Z");
    let got: Vec<(String, String)> = outcomes(&records);
    assert_eq!(got.len(), 50, "one record per occurrence: {got:?}");
    assert!(got.iter().all(|(_, o)| o == "completed"), "{got:?}");
    assert_eq!(
        got.iter().map(|(o, _)| o.clone()).collect::<BTreeSet<_>>(),
        expected
    );
    // Exactly one turn per occurrence, each naming its occurrence.
    let turns = turns(&env);
    let mut per_occurrence: BTreeMap<String, usize> = BTreeMap::new();
    for t in &turns {
        assert_eq!(t["origin"]["automation"], "minutely");
        assert_eq!(t["origin"]["trigger"], "schedule");
        assert!(
            t["origin"]["runner"] == "tick" || t["origin"]["runner"] == "serve",
            "{t}"
        );
        let occ = t["origin"]["occurrence"].as_str().expect("occ").to_owned();
        *per_occurrence.entry(occ).or_default() += 1;
    }
    assert_eq!(turns.len(), 50);
    assert!(
        per_occurrence.values().all(|&n| n == 1),
        "{per_occurrence:?}"
    );
    assert_eq!(
        per_occurrence.keys().cloned().collect::<BTreeSet<_>>(),
        expected
    );
    // Each record names its turn.
    let record_turns: BTreeSet<&str> = records.iter().filter_map(|r| r["turn"].as_str()).collect();
    assert_eq!(record_turns.len(), 50);
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(
        fsck.stdout.contains("51 automation run records"),
        "{}",
        fsck.stdout
    );
}

#[test]
fn a_runner_killed_mid_turn_leaves_its_occurrence_interrupted_never_rerun() {
    let env = env_with(
        "  - id: slowpoke\n    schedule: \"*/5 * * * *\"\n    agent: assistant\n    request: A slow one.\n",
    );
    let now = "2026-01-02T03:05:10.000Z";
    let mut child = cmd_at(&env, now, &["automations", "tick"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tick");
    wait_until("the occurrence to run", || {
        runs(&env, now)
            .first()
            .is_some_and(|r| r["outcome"] == "running" && r["runner_alive"] == true)
    });
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");

    let records = runs(&env, now);
    assert_eq!(
        outcomes(&records),
        [(
            "2026-01-02T03:05:00.000Z".to_owned(),
            "interrupted".to_owned()
        )]
    );
    let reason = records[0]["reason"].as_str().expect("reason");
    assert!(reason.contains("ended before the turn did"), "{reason}");
    let turn = records[0]["turn"].as_str().expect("turn").to_owned();

    // The next runner at the same time runs nothing again.
    let again = tick(&env, now);
    assert_eq!(again.stdout, "", "{}", again.stderr);
    assert_eq!(runs(&env, now).len(), 1);
    let history = turns(&env);
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["turn"], turn.as_str());
    assert_eq!(history[0]["state"], "interrupted");
    assert_eq!(history[0]["origin"]["automation"], "slowpoke");
    assert_eq!(
        history[0]["origin"]["occurrence"],
        "2026-01-02T03:05:00.000Z"
    );
    // The fsck of what the kill left is clean.
    assert_eq!(env.run(&["fsck"]).code, 0);
}

fn hourly(policy: &str) -> String {
    format!(
        "  - id: hourly\n    schedule: \"0 * * * *\"\n    agent: assistant\n    request: Summarize the hour.\n{policy}"
    )
}

/// Runs the first tick at 03:04 (the automation is first seen), then one at `later`.
fn first_then(policy: &str, later: &str) -> (TestEnv, Vec<(String, String)>, Vec<Value>) {
    let env = env_with(&hourly(policy));
    assert_eq!(tick(&env, "2026-01-02T03:04:05.000Z").stdout, "");
    tick(&env, later);
    let records = runs(&env, later);
    (env, outcomes(&records), records)
}

fn pair(o: &str, s: &str) -> (String, String) {
    (o.to_owned(), s.to_owned())
}

#[test]
fn catch_up_latest_runs_the_newest_missed_occurrence_once() {
    // 04:00, 05:00, 06:00 and 07:00 were missed; at 07:30 only 07:00 runs.
    let (env, got, records) = first_then("", "2026-01-02T07:30:00.000Z");
    assert_eq!(
        got,
        [
            pair("2026-01-02T06:00:00.000Z", "skipped"),
            pair("2026-01-02T07:00:00.000Z", "completed")
        ]
    );
    assert_eq!(records[0]["span_first"], "2026-01-02T04:00:00.000Z");
    assert_eq!(records[0]["span_count"], 3);
    let text = at(
        &env,
        "2026-01-02T07:30:00.000Z",
        &["automations", "runs", "hourly"],
    );
    snap!("runs_latest", no_pids(&env.snap(&text)));
    // Nothing more at the same time, and the next hour on time.
    assert_eq!(tick(&env, "2026-01-02T07:30:00.000Z").stdout, "");
    tick(&env, "2026-01-02T08:00:20.000Z");
    assert_eq!(
        outcomes(&runs(&env, "2026-01-02T08:00:20.000Z")).last(),
        Some(&pair("2026-01-02T08:00:00.000Z", "completed"))
    );
    assert_eq!(turns(&env).len(), 2);
}

#[test]
fn catch_up_all_runs_every_missed_occurrence_within_the_window() {
    let (env, got, _) = first_then("    catch_up: all\n", "2026-01-02T07:30:00.000Z");
    assert_eq!(
        got,
        ["04", "05", "06", "07"].map(|h| pair(&format!("2026-01-02T{h}:00:00.000Z"), "completed"))
    );
    assert_eq!(turns(&env).len(), 4);

    // A window of 1.5 hours reaches back to 06:00; 04:00 and 05:00 are skipped.
    let (env, got, records) = first_then(
        "    catch_up: all\n    catch_up_window_secs: 5400\n",
        "2026-01-02T07:30:00.000Z",
    );
    assert_eq!(
        got,
        [
            pair("2026-01-02T05:00:00.000Z", "skipped"),
            pair("2026-01-02T06:00:00.000Z", "completed"),
            pair("2026-01-02T07:00:00.000Z", "completed")
        ]
    );
    assert_eq!(records[0]["span_count"], 2);
    let reason = records[0]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("older than catch_up_window_secs (5400 s)"),
        "{reason}"
    );
    assert_eq!(turns(&env).len(), 2);
}

/// A per-second schedule after a day without a runner: `catch_up: all` runs the newest
/// `catch_up_max_runs` occurrences, not 86,400, and records the rest as one skipped span.
#[test]
fn catch_up_all_runs_at_most_its_bound_after_a_long_pause() {
    let env = env_with(
        "  - id: rapid\n    schedule: \"* * * * * *\"\n    agent: assistant\n    request: Summarize the second.\n    catch_up: all\n    catch_up_max_runs: 3\n",
    );
    // The first tick meets the occurrence of its second; the next comes a day later.
    tick(&env, "2026-01-02T03:04:00.500Z");
    tick(&env, "2026-01-03T03:04:00.500Z");
    let records = runs(&env, "2026-01-03T03:04:00.500Z");
    assert_eq!(
        outcomes(&records),
        [
            pair("2026-01-02T03:04:00.000Z", "completed"),
            pair("2026-01-03T03:03:57.000Z", "skipped"),
            pair("2026-01-03T03:03:58.000Z", "completed"),
            pair("2026-01-03T03:03:59.000Z", "completed"),
            pair("2026-01-03T03:04:00.000Z", "completed"),
        ]
    );
    assert_eq!(records[1]["span_first"], "2026-01-02T03:04:01.000Z");
    assert_eq!(records[1]["span_count"], 86_397);
    let reason = records[1]["reason"].as_str().expect("reason");
    assert!(
        reason.contains("beyond the newest 3 (catch_up_max_runs)"),
        "{reason}"
    );
    assert_eq!(turns(&env).len(), 4);
    // `validate` warns about a schedule that fires more than once a minute.
    let v = env.run(&["validate"]);
    assert!(
        v.stderr.contains("fires up to 60 times a minute")
            || v.stdout.contains("fires up to 60 times a minute"),
        "{}{}",
        v.stdout,
        v.stderr
    );
}

#[test]
fn catch_up_none_runs_only_an_occurrence_that_is_on_time() {
    // At 07:30 every due occurrence was missed: none runs.
    let (env, got, records) = first_then("    catch_up: none\n", "2026-01-02T07:30:00.000Z");
    assert_eq!(got, [pair("2026-01-02T07:00:00.000Z", "skipped")]);
    assert_eq!(records[0]["span_count"], 4);
    assert!(turns(&env).is_empty());
    // At 08:00:20 the 08:00 occurrence is on time and runs.
    tick(&env, "2026-01-02T08:00:20.000Z");
    assert_eq!(
        outcomes(&runs(&env, "2026-01-02T08:00:20.000Z")).last(),
        Some(&pair("2026-01-02T08:00:00.000Z", "completed"))
    );
}

#[test]
fn the_window_skips_even_the_latest_when_it_is_too_old() {
    // 07:00 is 30 minutes old at 07:30; a 10-minute window lets nothing run.
    let (env, got, records) = first_then(
        "    catch_up_window_secs: 600\n",
        "2026-01-02T07:30:00.000Z",
    );
    assert_eq!(got, [pair("2026-01-02T07:00:00.000Z", "skipped")]);
    assert_eq!(records[0]["span_first"], "2026-01-02T04:00:00.000Z");
    assert!(turns(&env).is_empty());
}

#[test]
fn a_disabled_automation_never_runs() {
    let env = env_with(
        "  - id: paused\n    schedule: \"* * * * *\"\n    agent: assistant\n    request: Summarize.\n    enabled: false\n    catch_up: all\n",
    );
    for now in [
        "2026-01-02T03:04:05.000Z",
        "2026-01-02T05:00:05.000Z",
        "2026-01-03T05:00:05.000Z",
    ] {
        let r = tick(&env, now);
        assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    }
    assert!(runs(&env, "2026-01-03T05:00:05.000Z").is_empty());
    assert!(turns(&env).is_empty());
    assert!(!env.repo().join("automation/runs-v1/paused").exists());
}

#[test]
fn overlap_skip_records_the_occurrence_and_queue_runs_it_after() {
    for (policy, expected) in [("skip", "skipped"), ("queue", "completed")] {
        let env = env_with(&format!(
            "  - id: lingering\n    schedule: \"* * * * *\"\n    agent: assistant\n    request: Please linger a while.\n    overlap: {policy}\n"
        ));
        let first = cmd_at(&env, "2026-01-02T03:04:05.000Z", &["automations", "tick"])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        wait_until("the first occurrence to run", || {
            runs(&env, "2026-01-02T03:04:05.000Z")
                .first()
                .is_some_and(|r| r["outcome"] == "running")
        });
        let second = tick(&env, "2026-01-02T03:05:05.000Z");
        let first = first.wait_with_output().expect("wait");
        assert!(first.status.success());
        let records = runs(&env, "2026-01-02T03:06:00.000Z");
        assert_eq!(
            outcomes(&records),
            [
                pair("2026-01-02T03:04:00.000Z", "completed"),
                pair("2026-01-02T03:05:00.000Z", expected)
            ],
            "overlap: {policy}; tick printed {}",
            second.stdout
        );
        if policy == "skip" {
            let reason = records[1]["reason"].as_str().expect("reason");
            assert!(
                reason.starts_with("the previous run was still running (occurrence 2026-01-02T03:04:00.000Z runner tick"),
                "{reason}"
            );
        }
    }
}

#[test]
fn a_manual_run_is_recorded_as_manual_and_carries_its_origin() {
    let env = env_with(
        "  - id: brief\n    schedule: \"0 9 * * *\"\n    agent: assistant\n    session: briefs\n    request: Summarize yesterday's notes.\n    enabled: false\n",
    );
    let r = env.run(&["automations", "run", "brief"]);
    snap!("run_manual", env.snap(&r));
    let records = runs(&env, "2026-01-02T03:04:06.000Z");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["trigger"], "manual");
    assert_eq!(records[0]["runner"], "manual");
    assert_eq!(records[0]["outcome"], "completed");
    let history = turns(&env);
    assert_eq!(history[0]["session"], "briefs");
    assert_eq!(history[0]["origin"]["trigger"], "manual");
    assert_eq!(
        history[0]["origin"]["occurrence"],
        "2026-01-02T03:04:05.000Z"
    );
    let show = env.run(&["show", history[0]["turn"].as_str().expect("turn")]);
    assert!(
        show.stdout.contains(
            "origin   automation brief occurrence 2026-01-02T03:04:05.000Z (manual, manual "
        ),
        "{}",
        show.stdout
    );
    // Two manual runs at the same instant are two runs.
    assert_eq!(env.run(&["automations", "run", "brief", "--json"]).code, 0);
    assert_eq!(runs(&env, "2026-01-02T03:04:06.000Z").len(), 2);
    let unknown = env.run(&["automations", "run", "brieff"]);
    snap!("run_unknown", env.snap(&unknown));
}

const TEAM_REPLIES: &str = r#"replies:
  - match: "Your workers finished"
    text: "Weekly research done."
  - match: "Subtask dig"
    text: "dug"
  - match: "Research."
    text: '{"subtasks":[{"id":"dig","worker":"helper","task":"dig","depends_on":[]}]}'
"#;

#[test]
fn a_workflow_target_runs_its_coordinator() {
    let env = TestEnv::with_config(
        "providers:\n  replay:\n    kind: script\n    script: replies.yaml\nagents:\n  - id: lead\n    provider: replay\n    role: coordinator\n  - id: helper\n    provider: replay\n    role: worker\nworkflows:\n  - id: research\n    entry_point: lead\n    workers: [helper]\nautomations:\n  - id: weekly\n    schedule: \"* * * * *\"\n    workflow: research\n    request: Research.\n",
    );
    env.write("replies.yaml", TEAM_REPLIES);
    let validate = env.run(&["validate"]);
    assert_eq!(validate.code, 0, "{}", validate.stderr);
    assert!(
        !validate.stderr.contains("not supported yet"),
        "{}",
        validate.stderr
    );
    let manual = env.run(&["automations", "run", "weekly"]);
    snap!("run_workflow", env.snap(&manual));
    let r = at(&env, "2026-01-02T03:04:05.000Z", &["automations", "tick"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("completed"), "{}", r.stdout);
    let shown = turns(&env);
    assert_eq!(shown.len(), 2);
    assert!(shown
        .iter()
        .all(|t| t["agent"] == "lead" && t["output"] == "Weekly research done."));
}

#[test]
fn a_budget_applies_to_an_automation_turn() {
    let env = TestEnv::with_config(
        "providers:\n  replay:\n    kind: script\n    script: replies.yaml\nagents:\n  - id: assistant\n    provider: replay\n    token_budget:\n      per_call: 5\n      per_execution: 5\nautomations:\n  - id: brief\n    schedule: \"* * * * *\"\n    agent: assistant\n    request: Summarize everything that happened in the repository yesterday, in detail.\n",
    );
    env.write("replies.yaml", REPLIES);
    let r = at(
        &env,
        "2026-01-02T03:04:05.000Z",
        &["automations", "tick", "--json"],
    );
    assert_eq!(r.code, 3, "{} {}", r.stdout, r.stderr);
    let record = &json_lines(&r.stdout)[0];
    assert_eq!(record["outcome"], "failed");
    assert!(
        record["reason"]
            .as_str()
            .is_some_and(|s| s.contains("per_call")),
        "{record}"
    );
}

#[test]
fn across_daylight_saving_a_fixed_time_runs_once() {
    // Europe/Berlin: on 2026-03-29 02:30 does not exist (02:00 CET jumps to 03:00 CEST):
    // the 02:30 job runs once, at 03:00 CEST (01:00 UTC). On 2026-10-25 02:30 happens twice:
    // it runs once, at the first (02:30 CEST, 00:30 UTC).
    let env = env_with(
        "  - id: night\n    schedule: \"30 2 * * *\"\n    timezone: Europe/Berlin\n    agent: assistant\n    request: Summarize the night.\n",
    );
    let list = json_lines(
        &at(
            &env,
            "2026-03-28T12:00:00.000Z",
            &["automations", "list", "--json"],
        )
        .stdout,
    );
    assert_eq!(list[0]["next_utc"], "2026-03-29T01:00:00.000Z");
    assert_eq!(
        list[0]["next_local"],
        "2026-03-29T03:00:00+02:00[Europe/Berlin]"
    );
    tick(&env, "2026-03-28T12:00:00.000Z");
    tick(&env, "2026-03-29T01:00:30.000Z");
    tick(&env, "2026-03-29T01:30:30.000Z");
    let list = json_lines(
        &at(
            &env,
            "2026-10-24T12:00:00.000Z",
            &["automations", "list", "--json"],
        )
        .stdout,
    );
    assert_eq!(list[0]["next_utc"], "2026-10-25T00:30:00.000Z");
    // Every half hour through the doubled hour: only the first 02:30 is an occurrence.
    for now in [
        "2026-10-25T00:00:30.000Z",
        "2026-10-25T00:30:30.000Z",
        "2026-10-25T01:00:30.000Z",
        "2026-10-25T01:30:30.000Z",
    ] {
        // The first of these also catches up: 10-24's occurrence runs, older ones are skipped.
        let r = at(&env, now, &["automations", "tick", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let records = runs(&env, "2026-10-25T02:00:00.000Z");
    let got = outcomes(&records);
    assert_eq!(got[0], pair("2026-03-29T01:00:00.000Z", "completed"));
    let october: Vec<&(String, String)> = got
        .iter()
        .filter(|(o, _)| o.starts_with("2026-10-25"))
        .collect();
    assert_eq!(october, [&pair("2026-10-25T00:30:00.000Z", "completed")]);
}

#[test]
fn the_run_history_survives_restarts_and_fsck_checks_it() {
    let env = env_with(
        "  - id: brief\n    schedule: \"*/10 * * * *\"\n    agent: assistant\n    request: Summarize.\n",
    );
    tick(&env, "2026-01-02T03:04:05.000Z");
    tick(&env, "2026-01-02T03:10:05.000Z");
    tick(&env, "2026-01-02T03:20:05.000Z");
    let before = runs(&env, "2026-01-02T03:20:06.000Z");
    assert_eq!(before.len(), 2);
    // New processes (every command is one) read the same history.
    assert_eq!(runs(&env, "2026-01-02T05:00:00.000Z"), before);
    let fsck = env.run(&["fsck", "--json"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    assert!(fsck.stdout.contains("\"run_records\":3"), "{}", fsck.stdout);

    // A record moved to another occurrence's name, and one that does not parse.
    let dir = env.repo().join("automation/runs-v1/brief");
    std::fs::copy(
        dir.join("20260102T031000.000Z.json"),
        dir.join("20260102T033000.000Z.json"),
    )
    .expect("copy");
    std::fs::write(dir.join("20260102T034000.000Z.json"), "{\"version\":").expect("write");
    let bad = env.run(&["fsck"]);
    snap!("fsck_bad_records", env.snap(&bad));
    assert_eq!(bad.code, 9);
}

#[test]
fn sigterm_stops_the_running_turn_and_records_the_run_stopped() {
    let env = env_with(
        "  - id: slowpoke\n    schedule: \"*/5 * * * *\"\n    agent: assistant\n    request: A slow one.\n",
    );
    let now = "2026-01-02T03:05:10.000Z";
    let child = cmd_at(&env, now, &["automations", "tick"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tick");
    wait_until("the occurrence to run", || {
        runs(&env, now)
            .first()
            .is_some_and(|r| r["outcome"] == "running")
    });
    // SAFETY: sends a signal to our own child process, which is still running.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("slowpoke 2026-01-02T03:05:00Z stopped turn "),
        "{stdout}"
    );
    assert_eq!(
        outcomes(&runs(&env, now)),
        [pair("2026-01-02T03:05:00.000Z", "stopped")]
    );
    assert_eq!(turns(&env)[0]["state"], "stopped");
}

#[test]
fn origins_survive_sealed_segments_and_their_indexes() {
    let mut env = env_with(
        "  - id: brief\n    schedule: \"* * * * *\"\n    agent: assistant\n    request: Summarize the minute.\n    catch_up: all\n",
    );
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "4096");
    tick(&env, "2026-01-02T03:04:05.000Z");
    tick(&env, "2026-01-02T03:20:05.000Z");
    let segments = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ls")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        })
        .count();
    assert!(segments >= 2, "{segments} segments: one sealed at least");
    let history = turns(&env);
    assert_eq!(history.len(), 17);
    for t in &history {
        assert_eq!(t["origin"]["automation"], "brief", "{t}");
    }
    let session = env.run(&["history", "-s", "brief", "--json"]);
    let session = json_lines(&session.stdout);
    assert_eq!(session.len(), 17);
    assert!(session.iter().all(|t| t["origin"]["trigger"] == "schedule"));
}
