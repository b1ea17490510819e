//! The standing fault suite: every failpoint of the store (`store/src/failpoint.rs`) is
//! walked with "error" (the operation fails), "crash" (the process aborts there, as a
//! `kill -9` would) and, for writes, "torn" (half the bytes, then abort), in the commands
//! that reach it. After each run the invariants must hold: the repository opens, `fsck` is
//! clean after `fsck --repair`, no acknowledged turn is lost, every begun turn has exactly
//! one terminal state, and the next `send` works.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use axocoatl_store::failpoint;
use axocoatl_store::ledger::Record;
use axocoatl_store::repo::OpenOptions;
use axocoatl_store::Repo;

use crate::common::env::{Run, TestEnv};

const CONFIG: &str = "providers:
  canned: {kind: script, script: replies.yaml}
agents:
  - id: helper
    provider: canned
automations:
  - id: nightly
    schedule: \"0 3 * * *\"
    agent: helper
    request: msg nightly
";

const REPLIES: &str = "replies:
  - match: remember
    tool_calls: [{name: core_memory_append, arguments: {label: human, content: likes tea}}]
  - match: remember
    text: Noted.
  - match: msg
    text: ok
";

/// Writes that support the `torn` action.
const TORN_WRITES: &[&str] = &[
    "ledger.append.write",
    "ledger.segment.write",
    "fsutil.atomic.write",
    "memory.daily_log.write",
    "memory.semantic.write",
];

/// Every pid above the kernel's maximum is free: a temporary file named with it is stale.
fn dead_pid() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(4_194_304)
        + 1
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("ls") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn acked_turns(r: &Run) -> Vec<String> {
    r.stderr
        .lines()
        .filter_map(|l| l.strip_prefix("turn "))
        .filter(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .collect()
}

fn newest_segment(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.repo().join("ledger/v1");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".seg"))
        .collect();
    names.sort();
    dir.join(names.last().expect("a segment"))
}

/// A command that reaches failpoints, with what to prepare first. Returns the arguments.
struct Scenario {
    name: &'static str,
    /// Small segments: every append rolls over to a new segment.
    roll: bool,
    /// The scenario damages the ledger itself (not a crash): commands refuse until
    /// `fsck --repair` has run, so the repository must open after it.
    damaged: bool,
    prepare: fn(&TestEnv, &[String]) -> Vec<String>,
}

fn scenarios() -> Vec<Scenario> {
    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }
    vec![
        Scenario {
            name: "send",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["send", "msg two"]),
        },
        Scenario {
            name: "send-roll",
            roll: true,
            damaged: false,
            prepare: |_, _| args(&["send", "msg rolled"]),
        },
        Scenario {
            name: "send-tool",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["send", "remember this"]),
        },
        Scenario {
            name: "attach",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                env.write("notes.txt", "some notes for the agent\n");
                let stray = env
                    .repo()
                    .join(format!("objects/.tmp-{}-stale", dead_pid()));
                std::fs::write(stray, b"left by a killed attach").expect("stray");
                args(&["attach", "add", "notes.txt"])
            },
        },
        Scenario {
            name: "rewind",
            roll: false,
            damaged: false,
            prepare: |_, acked| vec!["rewind".into(), acked[1].clone(), "--yes".into()],
        },
        Scenario {
            name: "sessions-new",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["sessions", "new", "work"]),
        },
        Scenario {
            name: "torn-tail",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                let seg = newest_segment(env);
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(seg)
                    .expect("open");
                std::io::Write::write_all(&mut f, &[9, 0, 0, 0, 1, 2, 3]).expect("write");
                args(&["send", "msg after a torn tail"])
            },
        },
        Scenario {
            name: "memory-core-set",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["memory", "core", "set", "human", "likes tea"]),
        },
        Scenario {
            name: "torn-daily-log",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                let r = env.run(&["memory", "core", "set", "human", "likes tea"]);
                assert_eq!(r.code, 0, "{}", r.stderr);
                let dir = env.repo().join("memory/daily_log/v1");
                let mut logs = Vec::new();
                let mut stack = vec![dir];
                while let Some(d) = stack.pop() {
                    for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                        if e.path().is_dir() {
                            stack.push(e.path());
                        } else {
                            logs.push(e.path());
                        }
                    }
                }
                let log = logs.first().expect("a daily log after a memory edit");
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(log)
                    .expect("open");
                std::io::Write::write_all(&mut f, b"{\"torn").expect("write");
                args(&["memory", "core", "set", "human", "likes coffee"])
            },
        },
        Scenario {
            name: "torn-segment",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                let seg = newest_segment(env);
                let name = seg
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                let n: u64 = name[..12].parse().expect("number");
                let next = seg.with_file_name(format!("{:012}.seg", n + 1));
                std::fs::write(next, b"").expect("write");
                args(&["send", "msg after a torn roll-over"])
            },
        },
        Scenario {
            name: "index-build",
            roll: true,
            damaged: false,
            prepare: |env, _| {
                // Sealed segments without indexes: the next reader builds and writes them.
                let out = env
                    .cmd(&["send", "msg to roll"])
                    .env("AXOCOATL_SEGMENT_LIMIT", "200")
                    .output()
                    .expect("send");
                assert!(out.status.success());
                args(&["history", "-s", "main"])
            },
        },
        Scenario {
            name: "memory-add",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["memory", "add", "the kettle is blue"]),
        },
        Scenario {
            name: "torn-semantic-records",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                let records = env.repo().join("memory/semantic/v1/main%3ahelper/records");
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&records)
                    .expect("the template's turns retained their exchanges");
                std::io::Write::write_all(&mut f, &[9, 0, 0]).expect("write");
                args(&["fsck", "--repair"])
            },
        },
        Scenario {
            name: "repair-damaged-semantic-record",
            roll: false,
            damaged: false,
            prepare: |env, _| {
                // Bytes flipped in the text of the second of the template's three retained
                // exchanges: `fsck --repair` moves that record aside.
                let records = env.repo().join("memory/semantic/v1/main%3ahelper/records");
                let mut bytes = std::fs::read(&records).expect("read");
                let first = u32::from_le_bytes(bytes[16..20].try_into().expect("4")) as usize;
                let second = 16 + 12 + first;
                bytes[second + 14] ^= 0x20;
                std::fs::write(&records, bytes).expect("write");
                args(&["fsck", "--repair"])
            },
        },
        Scenario {
            name: "automation-run",
            roll: false,
            damaged: false,
            prepare: |_, _| args(&["automations", "run", "nightly"]),
        },
        Scenario {
            name: "repair-damaged-tail",
            roll: false,
            damaged: true,
            prepare: |env, _| {
                let seg = newest_segment(env);
                let mut bytes = std::fs::read(&seg).expect("read");
                let last = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4"));
                let start = bytes.len() - last as usize;
                bytes[start + 5] ^= 0x01;
                std::fs::write(&seg, bytes).expect("write");
                args(&["fsck", "--repair"])
            },
        },
    ]
}

/// A repository with a config and three completed turns, shared by every run.
struct Template {
    env: TestEnv,
    acked: Vec<String>,
}

fn template() -> Template {
    let env = TestEnv::with_config(CONFIG);
    env.write("replies.yaml", REPLIES);
    let mut acked = Vec::new();
    for i in 0..3 {
        let r = env.run(&["send", &format!("msg {i}")]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        acked.extend(acked_turns(&r));
    }
    assert_eq!(acked.len(), 3);
    Template { env, acked }
}

fn fresh(t: &Template) -> TestEnv {
    let env = TestEnv::new();
    std::fs::remove_dir_all(&env.work).expect("rm");
    copy_dir(&t.env.work, &env.work);
    env
}

/// Runs a scenario with `failpoints` (and a hit log); returns the run and the log's counts.
fn run_scenario(
    env: &TestEnv,
    s: &Scenario,
    acked: &[String],
    failpoints: &str,
) -> (Run, BTreeMap<String, u64>) {
    let args = (s.prepare)(env, acked);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let log = env.tmp.path().join("failpoints.log");
    let mut cmd = env.cmd(&args);
    cmd.env("AXOCOATL_FAILPOINTS", failpoints)
        .env("AXOCOATL_FAILPOINTS_LOG", &log);
    if s.roll {
        cmd.env("AXOCOATL_SEGMENT_LIMIT", "200");
    }
    let out = cmd.output().expect("run");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let mut hits = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
        *hits.entry(line.to_owned()).or_insert(0) += 1;
    }
    (run, hits)
}

/// The invariants after a fault. `acked` are the turns whose begin was reported.
fn check_invariants(env: &TestEnv, acked: &[String], label: &str, damaged: bool) {
    let repair = || {
        let repair = env.run(&["fsck", "--repair"]);
        assert_eq!(
            repair.code, 0,
            "{label}: fsck --repair: {}{}",
            repair.stdout, repair.stderr
        );
    };
    if damaged {
        repair();
    }
    let h = env.run(&["history", "--all", "--json"]);
    assert_eq!(h.code, 0, "{label}: the repository opens: {}", h.stderr);
    repair();
    let clean = env.run(&["fsck"]);
    assert_eq!(
        clean.code, 0,
        "{label}: fsck after --repair: {}",
        clean.stdout
    );
    // Straight from the ledger: every begun turn has exactly one terminal record, and
    // every acknowledged turn has begun.
    let repo = Repo::open(&env.repo(), &OpenOptions::default()).expect("open");
    let mut begun = BTreeSet::new();
    let mut ended: HashMap<String, u32> = HashMap::new();
    for entry in repo.ledger().scan_all() {
        let entry = entry.unwrap_or_else(|e| panic!("{label}: ledger damage: {e}"));
        match entry.record {
            Some(Record::TurnBegun(b)) => {
                begun.insert(b.turn);
            }
            Some(Record::TurnEnded(e)) => *ended.entry(e.turn).or_insert(0) += 1,
            _ => {}
        }
    }
    for turn in &begun {
        assert_eq!(
            ended.get(turn).copied().unwrap_or(0),
            1,
            "{label}: turn {turn} has exactly one terminal state"
        );
    }
    for turn in acked {
        assert!(
            begun.contains(turn),
            "{label}: acknowledged turn {turn} lost"
        );
    }
    let next = env.run(&["send", "msg next"]);
    assert_eq!(
        next.code, 0,
        "{label}: the next send works: {}",
        next.stderr
    );
}

#[test]
#[expect(clippy::print_stderr, reason = "the walk's figures, for the record")]
fn every_failpoint_with_error_crash_and_torn_keeps_the_invariants() {
    let t = template();
    let scenarios = scenarios();
    // Which failpoints each scenario reaches, and how often.
    let mut reach: Vec<BTreeMap<String, u64>> = Vec::new();
    for s in &scenarios {
        let env = fresh(&t);
        let (run, hits) = run_scenario(&env, s, &t.acked, "");
        assert!(
            run.code == 0,
            "{}: runs cleanly without faults: {}",
            s.name,
            run.stderr
        );
        reach.push(hits);
    }
    let unreached: Vec<&str> = failpoint::NAMES
        .iter()
        .copied()
        .filter(|n| !reach.iter().any(|r| r.contains_key(*n)))
        .collect();
    assert!(
        unreached.is_empty(),
        "failpoints no scenario reaches (a binary built without the store's `failpoints` feature reaches none): {unreached:?}"
    );
    let mut runs = 0;
    for name in failpoint::NAMES {
        let chosen: Vec<usize> = (0..scenarios.len())
            .filter(|&i| reach[i].contains_key(*name))
            .take(2)
            .collect();
        for i in chosen {
            let s = &scenarios[i];
            let count = reach[i][*name];
            let mut nths = vec![1];
            if count > 1 {
                nths.push(count);
            }
            let mut actions = vec!["error", "crash"];
            if TORN_WRITES.contains(name) {
                actions.push("torn");
            }
            for action in &actions {
                for nth in &nths {
                    let spec = format!("{name}={action}@{nth}");
                    let label = format!("{} with {spec}", s.name);
                    let env = fresh(&t);
                    let (run, _) = run_scenario(&env, s, &t.acked, &spec);
                    if *action != "error" {
                        assert_ne!(run.code, 0, "{label}: the failpoint fired");
                    }
                    let mut acked = t.acked.clone();
                    acked.extend(acked_turns(&run));
                    check_invariants(&env, &acked, &label, s.damaged);
                    runs += 1;
                }
            }
        }
    }
    eprintln!(
        "fault walk: {} failpoints, {} scenarios, {runs} faulty runs",
        failpoint::NAMES.len(),
        scenarios.len()
    );
}

/// A failpoint set to `error` in the append makes the command fail with a message that
/// names the segment, and nothing is half-written.
#[test]
fn an_append_error_names_the_segment_and_leaves_nothing_half_written() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    let r = env
        .cmd(&["util", "ledger-append", "--count", "1"])
        .env("AXOCOATL_FAILPOINTS", "ledger.append.write=error")
        .output()
        .expect("run");
    assert_eq!(r.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(stderr.contains("000000000001.seg"), "{stderr}");
    assert!(stderr.contains("failpoint ledger.append.write"), "{stderr}");
    assert_eq!(env.run(&["fsck"]).code, 0);
}
