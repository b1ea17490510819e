//! Teams: coordinator-led workflows and multi-agent sessions, through the real
//! binary against a loopback Ollama server whose replies depend on the request (the model
//! asked for, the JSON format of a plan call, what the messages say), so parallel workers
//! may reach it in any order.

use std::collections::{HashSet, VecDeque};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::env::wait_until;
use crate::common::env::TestEnv;
use crate::common::fake_http::{FakeServer, Recorded, Reply};
use crate::common::procs::{actor, agents_status, json_lines, Serve};

const CREATED: &str = "2026-01-02T03:04:05Z";

/// An Ollama stream answering with text (usage: 10 prompt, 2 completion tokens).
fn text(t: &str) -> Reply {
    let chunk = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": t}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 10, "eval_count": 2});
    Reply::ndjson(&format!("{chunk}\n{last}\n"))
}

fn tool_call(name: &str, args: Value) -> Reply {
    let first = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name, "arguments": args}}]}, "done": false});
    let last = json!({"model": "m", "created_at": CREATED, "message": {"role": "assistant", "content": ""}, "done_reason": "stop", "done": true, "prompt_eval_count": 10, "eval_count": 2});
    Reply::ndjson(&format!("{first}\n{last}\n"))
}

const PLAN_BOTH: &str = r#"{"subtasks":[{"id":"research","worker":"researcher","task":"find facts","depends_on":[]},{"id":"draft","worker":"writer","task":"write it","depends_on":[]}]}"#;

/// What the fake models do; tests change it between turns.
#[derive(Default)]
struct Script {
    /// Replies to plan calls (JSON format), in order; the default is [`PLAN_BOTH`].
    plans: VecDeque<String>,
    /// Models that never answer (their requests hang until the server is dropped).
    stall: HashSet<String>,
    /// `r-m` and `w-m` each wait (up to 10 s) until the other's request arrived.
    barrier: bool,
    /// `r-m` first edits its core memory.
    remember: bool,
}

struct Team {
    server: FakeServer,
    script: Arc<(Mutex<Script>, Condvar)>,
}

fn contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or("").to_owned(),
                        m["content"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Team {
    fn start() -> Team {
        let script: Arc<(Mutex<Script>, Condvar)> = Arc::default();
        let seen: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::default();
        let (s, v) = (script.clone(), seen.clone());
        let server = FakeServer::responding(move |r: &Recorded| respond(r, &s, &v));
        Team { server, script }
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.0.lock().expect("script")
    }

    fn env(&self) -> TestEnv {
        TestEnv::with_config(&format!(
            "providers:
  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 60}}
agents:
  - id: lead
    provider: llm
    model: lead-m
    role: coordinator
    system_prompt: You lead.
    sampling: {{temperature: 0.3}}
  - id: researcher
    provider: llm
    model: r-m
    role: worker
    system_prompt: You research facts.
    sampling: {{temperature: 0.1, max_tokens: 111}}
  - id: writer
    provider: llm
    model: w-m
    role: worker
    system_prompt: You write prose.
    sampling: {{temperature: 0.7}}
workflows:
  - id: crew
    entry_point: lead
    workers: [researcher, writer]
",
            self.server.url()
        ))
    }

    /// The recorded requests to `model`.
    fn requests(&self, model: &str) -> Vec<Value> {
        self.server
            .requests()
            .iter()
            .map(Recorded::json)
            .filter(|b| b["model"] == model)
            .collect()
    }
}

fn respond(
    r: &Recorded,
    script: &(Mutex<Script>, Condvar),
    seen: &(Mutex<Vec<String>>, Condvar),
) -> Reply {
    let body = r.json();
    let model = body["model"].as_str().unwrap_or("").to_owned();
    {
        let mut s = seen.0.lock().expect("seen");
        s.push(model.clone());
        seen.1.notify_all();
    }
    let msgs = contents(&body);
    let all: String = msgs
        .iter()
        .map(|(_, c)| c.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let last_user = msgs
        .iter()
        .rev()
        .find(|(r, _)| r == "user")
        .map(|(_, c)| c.clone())
        .unwrap_or_default();
    let has_tool_result = msgs.iter().any(|(r, _)| r == "tool");
    let (stall, barrier, remember, plan) = {
        let mut s = script.0.lock().expect("script");
        let plan = if model == "lead-m" && body["format"] == "json" {
            Some(s.plans.pop_front().unwrap_or_else(|| PLAN_BOTH.to_owned()))
        } else {
            None
        };
        (s.stall.contains(&model), s.barrier, s.remember, plan)
    };
    if stall {
        return Reply::silent();
    }
    if let Some(plan) = plan {
        return text(&plan);
    }
    // A worker's consolidation pass (the only JSON call of a worker model).
    if body["format"] == "json" && model != "lead-m" {
        return text(&format!(
            r#"{{"edits": [{{"label": "project", "append": "{model} consolidated."}}]}}"#
        ));
    }
    let wait_for = |other: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut s = seen.0.lock().expect("seen");
        while !s.iter().any(|m| m == other) && Instant::now() < deadline {
            s = seen
                .1
                .wait_timeout(s, Duration::from_millis(50))
                .expect("wait")
                .0;
        }
    };
    match model.as_str() {
        "r-m" => {
            if remember && !has_tool_result {
                return tool_call(
                    "core_memory_append",
                    json!({"label": "project", "content": "researcher-note"}),
                );
            }
            if barrier {
                wait_for("w-m");
            }
            text("R-RESULT")
        }
        "w-m" => {
            if barrier {
                wait_for("r-m");
            }
            if all.contains("R-RESULT") {
                text("W-RESULT after R-RESULT")
            } else {
                text("W-RESULT")
            }
        }
        "lead-m" if last_user.starts_with("Subtask ") => text("ADHOC-RESULT"),
        "lead-m" => {
            let got: Vec<&str> = ["R-RESULT", "W-RESULT", "ADHOC-RESULT"]
                .into_iter()
                .filter(|n| last_user.contains(n))
                .collect();
            text(&format!("FINAL[{}]", got.join("+")))
        }
        _ => Reply::json(500, r#"{"error":"unknown model"}"#),
    }
}

fn show(env: &TestEnv, turn: &str) -> Value {
    let r = env.run(&["show", "--json", turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("show json")
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("under").display().to_string());
            }
        }
    }
    out.sort();
    out
}

fn orchestration_files(env: &TestEnv) -> Vec<String> {
    files_under(&env.repo().join("checkpoints/v1"))
        .into_iter()
        .filter(|f| f.contains("orchestration"))
        .collect()
}

#[test]
fn a_coordinator_plans_runs_both_workers_in_parallel_and_aggregates() {
    let team = Team::start();
    team.script().barrier = true;
    let mut env = team.env();
    // Real times, so the records show the overlap.
    env.set_env("AXOCOATL_NOW", "");
    let r = env.run(&["send", "--json", "-a", "lead", "Write a report"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let events = json_lines(&r.stdout);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds.first(), Some(&"turn.begun"));
    assert!(kinds.contains(&"plan"), "{kinds:?}");
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "subtask.started")
        .collect();
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "subtask.ended")
        .collect();
    assert_eq!(started.len(), 2, "{kinds:?}");
    assert!(started.iter().all(|e| e["state"] == "running"));
    assert!(ended.iter().all(|e| e["state"] == "completed"), "{ended:?}");
    let workers: HashSet<&str> = ended
        .iter()
        .map(|e| e["worker"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(workers, HashSet::from(["researcher", "writer"]));
    // Both started before either ended: they ran at once (each waited for the other).
    let first_end = kinds
        .iter()
        .position(|k| *k == "subtask.ended")
        .expect("end");
    let last_start = kinds
        .iter()
        .rposition(|k| *k == "subtask.started")
        .expect("start");
    assert!(last_start < first_end, "{kinds:?}");
    let end = events.last().expect("turn.ended");
    assert_eq!(end["type"], "turn.ended");
    assert_eq!(end["output"], "FINAL[R-RESULT+W-RESULT]");
    assert_eq!(end["usage"]["calls"], 4, "plan, two workers, aggregate");

    // The recorded start and end times overlap too.
    let turn = end["turn"].as_str().expect("turn");
    let shown = show(&env, turn);
    assert_eq!(shown["plan"]["method"], "model");
    let subtasks = shown["subtasks"].as_array().expect("subtasks");
    assert_eq!(subtasks.len(), 2);
    let latest_start = subtasks
        .iter()
        .map(|s| s["started_at"].as_i64().expect("t"))
        .max();
    let earliest_end = subtasks
        .iter()
        .map(|s| s["ended_at"].as_i64().expect("t"))
        .min();
    assert!(latest_start <= earliest_end, "{subtasks:?}");
    let outputs: Vec<&str> = subtasks
        .iter()
        .map(|s| s["output"].as_str().unwrap_or(""))
        .collect();
    assert!(
        outputs.contains(&"R-RESULT") && outputs.contains(&"W-RESULT"),
        "{outputs:?}"
    );

    // Each worker's request has its own model and sampling; the plan call asks for JSON.
    let r_req = &team.requests("r-m")[0];
    assert_eq!(r_req["options"]["temperature"], 0.1);
    assert_eq!(r_req["options"]["num_predict"], 111);
    let w_req = &team.requests("w-m")[0];
    assert_eq!(w_req["options"]["temperature"], 0.7);
    let lead = team.requests("lead-m");
    assert_eq!(lead.len(), 2);
    assert_eq!(lead[0]["format"], "json");
    assert!(
        contents(&lead[0])[0].1.contains("\"subtasks\""),
        "the schema is in the plan prompt"
    );
    assert_eq!(lead[0]["options"]["temperature"], 0.3);
    assert!(lead[1].get("format").is_none());

    // usage --by agent counts each worker: of the current session, every session and this
    // one by name, from the newest segment, then (once a small segment limit sealed it, and
    // a new session became the current one) through its index.
    let usage_of = |env: &TestEnv, args: &[&str]| {
        let u = env.run(args);
        let rows = json_lines(&u.stdout);
        let row = |agent: &str| {
            rows.iter()
                .find(|r| r["agent"] == agent)
                .cloned()
                .unwrap_or_else(|| panic!("{args:?} {agent}: {}\n{}", u.stdout, u.stderr))
        };
        assert_eq!(row("researcher")["calls"], 1, "{args:?}");
        assert_eq!(row("writer")["calls"], 1, "{args:?}");
        assert_eq!(row("lead")["calls"], 2, "{args:?}");
        assert_eq!(row("lead")["prompt_tokens"], 20, "{args:?}");
        let total = rows.last().expect("total");
        assert_eq!(total["calls"], 4, "{args:?}");
        assert_eq!(total["prompt_tokens"], 40, "{args:?}");
    };
    let every = ["usage", "--all", "--json", "--by", "agent"];
    usage_of(&env, &["usage", "--json", "--by", "agent"]);
    let session = events[0]["session"].as_str().expect("session").to_owned();
    let main = ["usage", "-s", &session, "--json", "--by", "agent"];
    usage_of(&env, &every);
    usage_of(&env, &main);
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "600");
    assert_eq!(env.run(&["sessions", "new", "other"]).code, 0);
    assert!(env.repo().join("ledger/v1/000000000002.seg").exists());
    usage_of(&env, &every);
    usage_of(&env, &main);
    assert!(
        orchestration_files(&env).is_empty(),
        "cleared by the terminal state"
    );
}

#[test]
fn dependencies_pass_results_and_the_text_output_shows_the_pass() {
    let team = Team::start();
    team.script().plans.push_back(r#"{"subtasks":[{"id":"draft","worker":"writer","task":"write","depends_on":["facts"]},{"id":"facts","worker":"researcher","task":"research","depends_on":[]},{"id":"check","worker":"adhoc","role":"You check facts.","task":"check the draft","depends_on":["draft"]}]}"#.to_owned());
    let env = team.env();
    let r = env.run(&["send", "-a", "lead", "Write a report"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim_end(), "FINAL[R-RESULT+W-RESULT+ADHOC-RESULT]");
    for line in [
        "plan (model): facts [researcher], draft [writer], check [adhoc]",
        "subtask facts [researcher] started",
        "subtask facts [researcher] completed",
        "subtask draft [writer] completed",
        "subtask check [adhoc] completed",
    ] {
        assert!(r.stderr.contains(line), "{line} in {}", r.stderr);
    }
    // The writer saw the researcher's result; the ad-hoc worker ran on the coordinator's
    // model with its role as system prompt.
    let w = &team.requests("w-m")[0];
    assert!(contents(w)
        .iter()
        .any(|(_, c)| c.contains("Result of subtask facts (researcher):\nR-RESULT")));
    let lead = team.requests("lead-m");
    let adhoc = lead
        .iter()
        .find(|b| {
            contents(b)
                .iter()
                .any(|(_, c)| c.starts_with("Subtask check"))
        })
        .expect("adhoc call");
    assert_eq!(
        contents(adhoc)[0],
        ("system".to_owned(), "You check facts.".to_owned())
    );
    let hist = env.run(&["history", "--json"]);
    let turn = json_lines(&hist.stdout)[0]["turn"]
        .as_str()
        .expect("turn")
        .to_owned();
    let shown = env.run(&["show", &turn]);
    for needle in [
        "plan (model):",
        "facts",
        "researcher",
        "R-RESULT",
        "adhoc",
        "ADHOC-RESULT",
    ] {
        assert!(
            shown.stdout.contains(needle),
            "{needle} in {}",
            shown.stdout
        );
    }
    let md = env.run(&["export", "--format", "markdown"]);
    for needle in ["Plan (model)", "R-RESULT", "W-RESULT after R-RESULT"] {
        assert!(md.stdout.contains(needle), "{needle} in {}", md.stdout);
    }
    let js: Value = serde_json::from_str(&env.run(&["export", "--format", "json"]).stdout)
        .expect("export json");
    assert_eq!(
        js["turns"][0]["plan"]["subtasks"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(js["turns"][0]["subtasks"][0]["output"], "R-RESULT");
}

/// The numbers of a row of `usage --json`: calls, prompt and completion tokens.
fn usage_numbers(row: &Value) -> (i64, i64, i64) {
    let n = |k: &str| row[k].as_i64().unwrap_or_else(|| panic!("{k} in {row}"));
    (n("calls"), n("prompt_tokens"), n("completion_tokens"))
}

/// The segment files of the ledger, in order, with their bytes.
fn segments(env: &TestEnv) -> Vec<Vec<u8>> {
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ls")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("segment"))
        .collect()
}

/// The index files of the ledger's segments.
fn index_files(env: &TestEnv) -> Vec<std::path::PathBuf> {
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(env.repo().join("ledger/v1/index"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|x| x == "idx"));
    paths.sort();
    paths
}

#[test]
fn a_coordinator_turn_across_segments_sums_exactly_and_an_older_index_is_rebuilt() {
    let team = Team::start();
    team.script().plans.push_back(r#"{"subtasks":[{"id":"draft","worker":"writer","task":"write","depends_on":["facts"]},{"id":"facts","worker":"researcher","task":"research","depends_on":[]},{"id":"check","worker":"adhoc","role":"You check facts.","task":"check the draft","depends_on":["draft"]}]}"#.to_owned());
    let mut env = team.env();
    // Small segments: the turn's records fall in several, its subtasks' ends in others
    // than its own end.
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "600");
    let r = env.run(&["send", "--json", "-a", "lead", "Write a report"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let end = events.last().expect("turn.ended");
    assert_eq!(end["type"], "turn.ended");
    let turn_usage = usage_numbers(&end["usage"]);
    assert_eq!(turn_usage, (5, 50, 10), "plan, three workers, aggregate");
    let segs = segments(&env);
    let holding = |needle: &[u8]| {
        segs.iter()
            .position(|s| s.windows(needle.len()).any(|w| w == needle))
            .expect("a segment holds it")
    };
    assert!(
        holding(b"R-RESULT") < holding(b"FINAL["),
        "a subtask ended in an earlier segment than its turn"
    );

    // The coordinator's row and its workers' add up to the turn's usage; each worker's row
    // is what its subtask reports.
    let by_agent = ["usage", "--all", "--json", "--by", "agent"];
    let u = env.run(&by_agent);
    assert_eq!(u.code, 0, "{}", u.stderr);
    let rows = json_lines(&u.stdout);
    let row = |agent: &str| {
        rows.iter()
            .find(|r| r["agent"] == agent)
            .unwrap_or_else(|| panic!("{agent} in {}", u.stdout))
    };
    let turn = end["turn"].as_str().expect("turn");
    let shown = show(&env, turn);
    let mut sum = usage_numbers(row("lead"));
    assert_eq!(sum, (2, 20, 4), "the plan and the aggregate");
    for s in shown["subtasks"].as_array().expect("subtasks") {
        let worker = s["worker"].as_str().expect("worker");
        let got = usage_numbers(row(worker));
        assert_eq!(got, usage_numbers(&s["usage"]), "{worker}");
        assert_eq!(row(worker)["turns"], 1, "{worker}");
        sum = (sum.0 + got.0, sum.1 + got.1, sum.2 + got.2);
    }
    assert_eq!(sum, turn_usage);
    assert_eq!(usage_numbers(rows.last().expect("total")), turn_usage);

    // Indexes of the format before are rebuilt: `fsck` names them, and the usage read
    // through the rebuilt ones is the same.
    let commands: [&[&str]; 3] = [
        &by_agent,
        &["usage", "--all", "--by", "day"],
        &["usage", "--all", "--by", "session", "--json"],
    ];
    let outputs = |env: &TestEnv| -> Vec<(i32, String, String)> {
        commands
            .iter()
            .map(|c| {
                let r = env.run(c);
                (r.code, r.stdout, r.stderr)
            })
            .collect()
    };
    let before = outputs(&env);
    let files = index_files(&env);
    assert!(files.len() > 2, "{files:?}");
    let version = |p: &std::path::Path| {
        let bytes = std::fs::read(p).expect("index");
        u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"))
    };
    let current = version(&files[0]);
    for f in &files {
        let mut bytes = std::fs::read(f).expect("index");
        bytes[8..12].copy_from_slice(&(current - 1).to_le_bytes());
        std::fs::write(f, bytes).expect("write");
    }
    let fsck = env.run(&["fsck"]);
    assert!(
        fsck.stdout
            .contains(&format!("in format {}, not {current}", current - 1)),
        "{}",
        fsck.stdout
    );
    assert_eq!(outputs(&env), before);
    for f in index_files(&env) {
        assert_eq!(version(&f), current, "{f:?} rebuilt");
    }
}

#[test]
fn an_invalid_plan_is_repaired_once_then_the_fallback_runs_and_each_is_recorded() {
    let team = Team::start();
    {
        let mut s = team.script();
        s.plans.push_back(
            r#"{"subtasks":[{"id":"a","worker":"ghost","task":"t","depends_on":[]}]}"#.to_owned(),
        );
        s.plans.push_back(PLAN_BOTH.to_owned());
        s.plans.push_back("not json at all".to_owned());
        s.plans.push_back(
            r#"{"subtasks":[{"id":"a","worker":"writer","task":"t","depends_on":["a"]}]}"#
                .to_owned(),
        );
    }
    let env = team.env();
    // Turn 1: invalid, then repaired.
    let r = env.run(&["send", "--json", "-a", "lead", "first"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let plan = events
        .iter()
        .find(|e| e["type"] == "plan")
        .expect("plan event");
    assert_eq!(plan["method"], "model-repaired");
    let turn1 = events[0]["turn"].as_str().expect("turn").to_owned();
    let lead = team.requests("lead-m");
    let repair = contents(&lead[1]);
    let (role, said) = repair.last().expect("repair message");
    assert_eq!(role, "user");
    assert!(
        said.contains("That plan is invalid") && said.contains("`ghost` is not a worker"),
        "{said}"
    );
    assert!(
        repair
            .iter()
            .any(|(r, c)| r == "assistant" && c.contains("ghost")),
        "the model sees its own plan"
    );

    // Turn 2: invalid twice: the fallback method, one subtask per declared worker.
    let r = env.run(&["send", "--json", "-a", "lead", "second"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let turn2 = events[0]["turn"].as_str().expect("turn").to_owned();
    let s1 = show(&env, &turn1);
    assert_eq!(s1["plan"]["rejected"].as_array().map(Vec::len), Some(1));
    let s2 = show(&env, &turn2);
    assert_eq!(s2["plan"]["method"], "fallback");
    let rejected = s2["plan"]["rejected"].as_array().expect("rejected");
    assert_eq!(rejected.len(), 2);
    assert!(rejected[0]
        .as_str()
        .unwrap_or("")
        .contains("not a JSON object"));
    assert!(rejected[1]
        .as_str()
        .unwrap_or("")
        .contains("depends on itself"));
    let ids: Vec<&str> = s2["plan"]["subtasks"]
        .as_array()
        .expect("s")
        .iter()
        .map(|s| s["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, ["researcher", "writer"]);
    assert!(s2["plan"]["subtasks"]
        .as_array()
        .expect("s")
        .iter()
        .all(|s| s["task"] == "second"));
    assert_eq!(s2["output"], "FINAL[R-RESULT+W-RESULT]");
}

/// Spawns `send --json` to the coordinator and reads its events until both subtasks started.
fn spawn_pass(
    env: &TestEnv,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStdout>,
    String,
) {
    let mut child = env
        .cmd(&["send", "--json", "-a", "lead", "long job"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut turn = String::new();
    let mut started = 0;
    let mut line = String::new();
    while started < 2 {
        line.clear();
        assert!(
            out.read_line(&mut line).expect("read") > 0,
            "send ended early"
        );
        let ev: Value = serde_json::from_str(&line).expect("event");
        if ev["type"] == "turn.begun" {
            turn = ev["turn"].as_str().expect("turn").to_owned();
        }
        if ev["type"] == "subtask.started" {
            started += 1;
        }
    }
    (child, out, turn)
}

#[test]
fn kill_9_mid_pass_interrupts_the_turn_clears_the_orchestration_state_and_the_next_turn_plans_fresh(
) {
    let team = Team::start();
    team.script().stall.insert("w-m".into());
    let env = team.env();
    let (mut child, _out, turn) = spawn_pass(&env);
    // The researcher finishes; the writer hangs.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let files = orchestration_files(&env);
        let done = files.iter().any(|f| {
            std::fs::read(env.repo().join("checkpoints/v1").join(f))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .contains(r#""id":"research","worker":"researcher","state":"completed""#)
                })
                .unwrap_or(false)
        });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the orchestration state never showed research done: {files:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(
        !orchestration_files(&env).is_empty(),
        "written during the pass"
    );

    // The next command recovers the orphan: interrupted, and the private state is gone.
    let shown = show(&env, &turn);
    assert_eq!(shown["state"], "interrupted");
    assert!(
        orchestration_files(&env).is_empty(),
        "{:?}",
        orchestration_files(&env)
    );
    let states: Vec<(&str, &str)> = shown["subtasks"]
        .as_array()
        .expect("subtasks")
        .iter()
        .map(|s| {
            (
                s["subtask"].as_str().unwrap_or(""),
                s["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(states.contains(&("research", "completed")), "{states:?}");
    assert!(states.contains(&("draft", "interrupted")), "{states:?}");

    // The next turn decomposes fresh and runs every subtask again.
    team.script().stall.clear();
    let before = team.requests("r-m").len();
    let r = env.run(&["send", "--json", "-a", "lead", "again"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    assert_eq!(events.iter().filter(|e| e["type"] == "plan").count(), 1);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "subtask.ended" && e["state"] == "completed")
            .count(),
        2
    );
    assert_eq!(
        team.requests("r-m").len(),
        before + 1,
        "the finished subtask ran again"
    );
    assert_eq!(
        team.requests("lead-m")
            .iter()
            .filter(|b| b["format"] == "json")
            .count(),
        2
    );
}

#[test]
fn stop_mid_pass_stops_every_running_worker_and_the_turn() {
    let team = Team::start();
    {
        let mut s = team.script();
        s.stall.insert("w-m".into());
        s.stall.insert("r-m".into());
    }
    let env = team.env();
    let (child, out, turn) = spawn_pass(&env);
    let r = env.run(&["stop", &turn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    drop(out);
    let done = child.wait_with_output().expect("wait");
    assert_eq!(
        done.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let shown = show(&env, &turn);
    assert_eq!(shown["state"], "stopped");
    let subtasks = shown["subtasks"].as_array().expect("subtasks");
    assert_eq!(subtasks.len(), 2);
    assert!(
        subtasks.iter().all(|s| s["state"] == "stopped"),
        "{subtasks:?}"
    );
    assert!(orchestration_files(&env).is_empty());
}

#[test]
fn memory_scopes_a_worker_edits_its_own_scope_the_coordinator_sees_no_memory_tools_adhoc_leaves_nothing(
) {
    let team = Team::start();
    {
        let mut s = team.script();
        s.remember = true;
        s.plans.push_back(r#"{"subtasks":[{"id":"facts","worker":"researcher","task":"research","depends_on":[]},{"id":"tmp","worker":"adhoc","role":"You summarize.","task":"summarize","depends_on":[]}]}"#.to_owned());
    }
    let env = team.env();
    let r = env.run(&["send", "-a", "lead", "go"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let memory = files_under(&env.repo().join("memory"));
    let core: Vec<&String> = memory.iter().filter(|f| f.starts_with("core/")).collect();
    assert_eq!(core.len(), 1, "{memory:?}");
    assert!(
        core[0].contains("main%3alead%3aworker%3aresearcher"),
        "{memory:?}"
    );
    let text = std::fs::read_to_string(env.repo().join("memory").join(core[0])).expect("core file");
    assert!(text.contains("researcher-note"));
    assert!(!memory.iter().any(|f| f.contains("adhoc")), "{memory:?}");
    // `memory` of the worker shows the block in its scope.
    let m = env.run(&["memory", "core", "show", "-a", "researcher"]);
    assert!(
        m.stdout.contains("researcher-note"),
        "{}\n{}",
        m.stdout,
        m.stderr
    );
    // The worker was offered its memory tools; the coordinator's calls and the ad-hoc
    // worker's were offered none.
    assert!(tool_names(&team.requests("r-m")[0]).contains(&"core_memory_append".to_owned()));
    for b in team.requests("lead-m") {
        let names = tool_names(&b);
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("core_memory") || n.starts_with("recall")),
            "{names:?}"
        );
        let system = &contents(&b)[0].1;
        assert!(
            !system.contains("<core_memory") && !system.contains("persona"),
            "{system}"
        );
    }
}

/// A repository with three autonomous agents on their own models; `a` depends on `b`.
fn panel() -> (FakeServer, TestEnv) {
    let server = FakeServer::responding(|r: &Recorded| {
        let body = r.json();
        let all: String = contents(&body)
            .into_iter()
            .map(|(_, c)| c)
            .collect::<Vec<_>>()
            .join("\n");
        match body["model"].as_str().unwrap_or("") {
            "a-m" if all.contains("B-ANSWER") => text("A-ANSWER after B"),
            "a-m" => text("A-ANSWER"),
            "b-m" => text("B-ANSWER"),
            "c-m" => text("C-ANSWER"),
            _ => Reply::json(500, r#"{"error":"unknown model"}"#),
        }
    });
    let env = TestEnv::with_config(&format!(
        "providers:
  llm: {{kind: ollama, base_url: \"{}\"}}
agents:
  - id: a
    provider: llm
    model: a-m
    system_prompt: You review Rust code.
    depends_on: [b]
  - id: b
    provider: llm
    model: b-m
    system_prompt: You write poetry.
  - id: c
    provider: llm
    model: c-m
    system_prompt: You plan trips.
    activation_threshold: 0.9
  - id: lead
    provider: llm
    model: lead-m
    role: coordinator
  - id: w
    provider: llm
    model: w-m
    role: worker
workflows:
  - id: crew
    entry_point: lead
    workers: [w]
",
        server.url()
    ));
    (server, env)
}

/// [`panel`] with the multi-agent session `panel` of `a`, `b` and `c` created (and current).
fn panel_session() -> (FakeServer, TestEnv) {
    let (server, env) = panel();
    assert_eq!(
        env.run(&["sessions", "new", "panel", "--agents", "a,b,c"])
            .code,
        0
    );
    (server, env)
}

fn models(server: &FakeServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn last_turn(env: &TestEnv) -> Value {
    let h = env.run(&["history", "--json"]);
    let turns = json_lines(&h.stdout);
    let id = turns.last().expect("a turn")["turn"]
        .as_str()
        .expect("id")
        .to_owned();
    show(env, &id)
}

/// `(agent, activation in thousandths, answered)` of a turn.
fn activations(t: &Value) -> Vec<(String, i64, bool)> {
    t["activation"]
        .as_array()
        .expect("activation")
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap_or("").to_owned(),
                a["activation"].as_i64().expect("activation"),
                a["answered"].as_bool().expect("answered"),
            )
        })
        .collect()
}

#[test]
fn sessions_new_with_agents_checks_its_members() {
    let (_server, env) = panel();
    let one = env.run(&["sessions", "new", "solo", "--agents", "a"]);
    assert_eq!(one.code, 2, "{}", one.stderr);
    assert!(one.stderr.contains("at least two agents"), "{}", one.stderr);
    let ghost = env.run(&["sessions", "new", "p", "--agents", "a,ghost"]);
    assert_eq!(ghost.code, 7, "{}", ghost.stderr);
    let worker = env.run(&["sessions", "new", "p", "--agents", "a,w"]);
    assert!(
        worker.stderr.contains("\"w\" is a worker"),
        "{}",
        worker.stderr
    );
    let twice = env.run(&["sessions", "new", "p", "--agents", "a,b,a"]);
    assert!(twice.stderr.contains("listed twice"), "{}", twice.stderr);
    let ok = env.run(&["sessions", "new", "panel", "--agents", "a,b,c"]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(ok.stdout, "Created session panel (now current)\n");
}

/// A turn of the panel that mentions `@b`: `b` answers and says why.
fn send_mentioning_b(env: &TestEnv) {
    let r = env.run(&["send", "@b what rhymes with moon?"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "B-ANSWER\n");
    assert!(
        r.stderr.contains("b answers (answered: mentioned as @b"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_mention_routes_to_that_agent_and_show_says_why() {
    let (server, env) = panel_session();
    send_mentioning_b(&env);
    assert_eq!(models(&server), ["b-m"]);
    let t = last_turn(&env);
    assert_eq!(t["agent"], "b");
    let shown = env.run(&["show", t["turn"].as_str().expect("id")]);
    for line in [
        "activation:",
        "  - a: did not answer: below its threshold",
        "  - b: answered: mentioned as @b",
    ] {
        assert!(shown.stdout.contains(line), "{line} in {}", shown.stdout);
    }
    // Rewind stays refused, with its documented reason.
    let rw = env.run(&["rewind", t["turn"].as_str().expect("id"), "--yes"]);
    assert_eq!(rw.code, 11, "{}", rw.stderr);
    assert!(
        rw.stderr
            .contains("cannot currently be rewound because child checkpoints"),
        "{}",
        rw.stderr
    );
    // -a picks one member; a non-member is refused.
    let picked = env.run(&["send", "-a", "c", "anything"]);
    assert_eq!(picked.stdout, "C-ANSWER\n", "{}", picked.stderr);
    let outsider = env.run(&["send", "-a", "lead", "anything"]);
    assert!(
        outsider
            .stderr
            .contains("not an agent of multi-agent session"),
        "{}",
        outsider.stderr
    );
}

#[test]
fn those_above_threshold_answer_in_depends_on_order_seeing_earlier_answers() {
    let (server, env) = panel_session();
    let r = env.run(&["send", "--json", "@a and @b, compare notes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let events = json_lines(&r.stdout);
    let order: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "agent.answering")
        .map(|e| e["agent"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(order, ["b", "a"], "a depends on b");
    assert_eq!(models(&server), ["b-m", "a-m"]);
    let end = events.last().expect("end");
    assert_eq!(end["output"], "B-ANSWER\nA-ANSWER after B");
    let t = last_turn(&env);
    let outputs: Vec<(String, String)> =
        env.run(&["export", "--format", "json"]).stdout.pipe_json()["turns"][0]["records"]
            .as_array()
            .expect("records")
            .iter()
            .filter(|r| r["kind"] == "AgentOutput")
            .map(|r| {
                (
                    r["agent"].as_str().unwrap_or("").to_owned(),
                    r["text"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
    assert_eq!(
        outputs,
        [
            ("b".to_owned(), "B-ANSWER".to_owned()),
            ("a".to_owned(), "A-ANSWER after B".to_owned())
        ],
        "one output record per agent"
    );
    assert_eq!(t["state"], "completed");
    // Relevance: in a fresh session, a request about Rust code raises `a` over its
    // threshold alone.
    assert_eq!(
        env.run(&["sessions", "new", "fresh", "--agents", "a,b,c"])
            .code,
        0
    );
    let r = env.run(&["send", "Review this Rust code"]);
    assert_eq!(r.stdout, "A-ANSWER\n", "{}", r.stderr);
}

trait PipeJson {
    fn pipe_json(&self) -> Value;
}

impl PipeJson for String {
    fn pipe_json(&self) -> Value {
        serde_json::from_str(self).expect("json")
    }
}

#[test]
fn activation_decays_per_user_turn_as_documented() {
    let (_server, env) = panel();
    assert_eq!(
        env.run(&["sessions", "new", "panel", "--agents", "a,b,c"])
            .code,
        0
    );
    // Turn 1: the mention lifts `a` to max(0, 0.5) + 1 = 1.5.
    assert_eq!(env.run(&["send", "@a zzz"]).stdout, "A-ANSWER\n");
    let t1 = activations(&last_turn(&env));
    assert_eq!(t1[0], ("a".to_owned(), 1500, true));
    // Turn 2 (nothing relevant): 1.5 decays by half to 0.75, still over 0.5: `a` answers.
    assert_eq!(env.run(&["send", "zzz"]).stdout, "A-ANSWER\n");
    let t2 = activations(&last_turn(&env));
    assert_eq!(t2[0], ("a".to_owned(), 750, true));
    // Turn 3: 0.375, below; no one reaches a threshold: the most activated answers.
    assert_eq!(env.run(&["send", "zzz"]).stdout, "A-ANSWER\n");
    let t3 = last_turn(&env);
    assert_eq!(activations(&t3)[0], ("a".to_owned(), 375, true));
    assert!(t3["activation"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .contains("most activated"));
    // Turn 4: a mention of `b` wins; `a` keeps decaying (0.1875).
    assert_eq!(env.run(&["send", "@b zzz"]).stdout, "B-ANSWER\n");
    let t4 = activations(&last_turn(&env));
    assert_eq!(t4[0], ("a".to_owned(), 188, false));
    assert_eq!(t4[1], ("b".to_owned(), 1500, true));
    assert_eq!(t4[2], ("c".to_owned(), 0, false));
}

/// The types of a `send --json` run's events, sorted (parallel workers interleave freely).
fn event_kinds(stdout: &str) -> Vec<String> {
    let mut kinds: Vec<String> = json_lines(stdout)
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_owned())
        .collect();
    kinds.sort();
    kinds
}

#[test]
fn a_coordinator_runs_through_serve_as_in_process_and_can_be_restarted_but_not_its_workers() {
    let team = Team::start();
    let env = team.env();
    let in_process = env.run(&["send", "--json", "-a", "lead", "Write a report"]);
    assert_eq!(in_process.code, 0, "{}", in_process.stderr);

    let serve = Serve::start(&env);
    // The coordinator gets an actor; its workers never do.
    wait_until("the coordinator's actor", || {
        actor(&agents_status(&env), "lead")["state"] == "idle"
    });
    let status = agents_status(&env);
    assert!(
        !status
            .iter()
            .any(|a| a["agent"] == "researcher" || a["agent"] == "writer"),
        "{status:?}"
    );
    let through = env.run(&["send", "--json", "-a", "lead", "Write a report"]);
    assert_eq!(through.code, 0, "{}", through.stderr);
    // The same events, but for the one-time notice of each worker's memory, which now
    // holds the first turn's subtask and is searched on the lexical path.
    let notices: Vec<String> = json_lines(&through.stdout)
        .iter()
        .filter(|e| e["type"] == "warning")
        .map(|e| e["message"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(
        notices
            .iter()
            .all(|n| n.contains(":lead:worker:") && n.contains("lexical fallback")),
        "{notices:?}"
    );
    let without_notices = |out: &str| {
        let mut k = event_kinds(out);
        k.retain(|k| k != "warning");
        k
    };
    assert_eq!(
        without_notices(&through.stdout),
        event_kinds(&in_process.stdout)
    );
    let events = json_lines(&through.stdout);
    let end = events.last().expect("turn.ended");
    assert_eq!(end["state"], "completed");
    assert_eq!(end["output"], "FINAL[R-RESULT+W-RESULT]");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "subtask.ended" && e["state"] == "completed")
            .count(),
        2
    );

    let restarted = env.run(&["agents", "restart", "lead"]);
    assert_eq!(restarted.code, 0, "{}", restarted.stderr);
    assert!(
        restarted.stdout.contains("restarted agent lead"),
        "{}",
        restarted.stdout
    );
    let worker = env.run(&["agents", "restart", "researcher"]);
    assert_eq!(worker.code, 11, "{}", worker.stderr);
    assert!(
        worker
            .stderr
            .contains("edit its YAML and restart its coordinator"),
        "{}",
        worker.stderr
    );
    // After the restart the coordinator's next turn plans and runs again.
    let again = env.run(&["send", "-a", "lead", "Write a report"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stdout.trim_end(), "FINAL[R-RESULT+W-RESULT]");
    assert_eq!(serve.terminate(), 0);
    assert!(orchestration_files(&env).is_empty());
}

#[test]
fn a_multi_agent_session_routes_mentions_through_serve_as_in_process() {
    let (server, env) = panel_session();
    let serve = Serve::start(&env);
    serve.wait_log("actor ready");
    send_mentioning_b(&env);
    assert_eq!(last_turn(&env)["agent"], "b");
    let picked = env.run(&["send", "-a", "c", "anything"]);
    assert_eq!(picked.stdout, "C-ANSWER\n", "{}", picked.stderr);
    assert_eq!(models(&server), ["b-m", "c-m"]);
    assert_eq!(serve.terminate(), 0);
}

#[test]
fn declared_workers_keep_each_subtask_in_their_tiers_recall_earlier_ones_and_consolidate() {
    let team = Team::start();
    let env = team.env();
    for request in ["tea facts", "more tea facts"] {
        let r = env.run(&["send", "-a", "lead", request]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    // The daily log holds each subtask's request and answer.
    let log = env.run(&["memory", "log", "-a", "researcher", "--json"]);
    let lines: Vec<Value> = log
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let kinds: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["kind"].as_str().unwrap_or(""),
                l["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("request", "find facts"),
            ("answer", "R-RESULT"),
            ("request", "find facts"),
            ("answer", "R-RESULT")
        ],
        "{}",
        log.stdout
    );
    // Semantic memory holds each subtask's exchange, in the worker's scope.
    let status = env.run(&["memory", "status", "-a", "researcher", "--json"]);
    let status: Value = serde_json::from_str(status.stdout.trim()).expect("status");
    assert_eq!(status["agent_id"], "main:lead:worker:researcher");
    assert_eq!(status["records"], 2, "{status}");
    // The second subtask recalled the first.
    let second = &team.requests("r-m")[1];
    let system = &contents(second)[0].1;
    assert!(
        system.contains("<recalled_memory>")
            && system.contains("User: find facts\nAssistant: R-RESULT"),
        "{system}"
    );
    assert!(!contents(&team.requests("r-m")[0])[0]
        .1
        .contains("<recalled_memory>"));
    // A worker is consolidated in its own scope…
    let r = env.run(&["memory", "consolidate", "-a", "researcher"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.starts_with("researcher: completed"),
        "{}",
        r.stdout
    );
    let core = env.run(&["memory", "core", "show", "project", "-a", "researcher"]);
    assert_eq!(core.stdout, "r-m consolidated.\n", "{}", core.stderr);
    // …and through its coordinator's workflow, every worker of it.
    let r = env.run(&["memory", "consolidate", "-a", "lead"]);
    snap!("consolidate_workflow", env.snap(&r));
    assert_eq!(r.code, 0);
    let core = env.run(&["memory", "core", "show", "project", "-a", "writer"]);
    assert_eq!(core.stdout, "w-m consolidated.\n", "{}", core.stderr);
}
