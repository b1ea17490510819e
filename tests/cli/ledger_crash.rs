//! The ledger under concurrent appenders, SIGKILL and corruption, through the real binary.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::env::TestEnv;

fn dump(env: &TestEnv) -> Vec<(u64, String)> {
    let r = env.run(&["util", "ledger-dump"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let seq = parts.next()?.parse().ok()?;
            let kind = parts.next()?;
            (kind == "Note").then(|| (seq, parts.next().unwrap_or("").to_owned()))
        })
        .collect()
}

/// `tag:index` of a note payload.
fn tag_index(text: &str) -> (String, u64) {
    let mut p = text.splitn(3, ':');
    let tag = p.next().expect("tag").to_owned();
    let i = p.next().expect("index").parse().expect("index");
    (tag, i)
}

#[test]
fn four_processes_times_500_appends() {
    let mut env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "65536");
    let children: Vec<_> = (0..4)
        .map(|p| {
            env.cmd(&[
                "util",
                "ledger-append",
                "--count",
                "500",
                "--size",
                "100",
                "--tag",
                &format!("p{p}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let records = dump(&env);
    assert_eq!(records.len(), 2000);
    assert!(
        records.windows(2).all(|w| w[0].0 < w[1].0),
        "sequence numbers strictly increase"
    );
    let mut per: HashMap<String, Vec<u64>> = HashMap::new();
    for (_, text) in &records {
        let (tag, i) = tag_index(text);
        per.entry(tag).or_default().push(i);
    }
    assert_eq!(per.len(), 4);
    for (tag, idx) in per {
        assert_eq!(
            idx,
            (0..500).collect::<Vec<_>>(),
            "{tag}: own records in own order"
        );
    }
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}{}", fsck.stdout, fsck.stderr);
    let segments = std::fs::read_dir(env.repo().join("ledger/v1"))
        .expect("ls")
        .count();
    assert!(segments > 2, "segments rolled: {segments}");
}

#[test]
fn sigkill_at_random_moments_loses_no_durable_record() {
    let mut env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "200000");
    let mut reported: Vec<(u64, String)> = Vec::new();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for iter in 0..50 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let wait = Duration::from_micros(2_000 + (seed >> 33) % 30_000);
        let mut child = env
            .cmd(&[
                "util",
                "ledger-append",
                "--count",
                "100000",
                "--size",
                "300",
                "--print",
                "--tag",
                &format!("k{iter}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
            lines
        });
        let start = Instant::now();
        while start.elapsed() < wait {
            std::thread::sleep(Duration::from_micros(500));
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        for line in reader.join().expect("reader") {
            let (seq, tag) = line.split_once(' ').expect("line");
            reported.push((seq.parse().expect("seq"), tag.to_owned()));
        }
        // The repository opens after every crash.
        let r = env.run(&["sessions"]);
        assert_eq!(r.code, 0, "iteration {iter}: {}", r.stderr);
    }
    assert!(!reported.is_empty());
    let repair = env.run(&["fsck", "--repair"]);
    assert_eq!(repair.code, 0, "{}{}", repair.stdout, repair.stderr);
    let clean = env.run(&["fsck"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    let present: HashMap<u64, String> = dump(&env)
        .into_iter()
        .map(|(seq, text)| {
            let (tag, i) = tag_index(&text);
            (seq, format!("{tag}:{i}"))
        })
        .collect();
    for (seq, tag) in &reported {
        assert_eq!(
            present.get(seq),
            Some(tag),
            "durable record {seq} ({tag}) is present"
        );
    }
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_is_reported_with_segment_and_offset() {
    let mut env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    env.set_env("AXOCOATL_SEGMENT_LIMIT", "2000");
    assert_eq!(
        env.run(&["util", "ledger-append", "--count", "60", "--size", "100"])
            .code,
        0
    );
    let seg1 = env.repo().join("ledger/v1/000000000001.seg");
    let mut bytes = std::fs::read(&seg1).expect("read");
    // Inside the third record's payload (header 40 bytes, frames of 26 + 2 + ~104 bytes).
    let offset = 40 + 2 * 132 + 30;
    bytes[offset] ^= 0x20;
    std::fs::write(&seg1, bytes).expect("write");
    let r = env.run(&["fsck"]);
    assert_eq!(r.code, 9, "{}", r.stdout);
    snap!("fsck_flipped_byte", env.snap(&r));
    // Later segments stay readable: the dump reports the damage and lists the rest.
    let d = env.run(&["util", "ledger-dump"]);
    assert_eq!(d.code, 1);
    assert!(d.stderr.contains("000000000001.seg"), "{}", d.stderr);
    assert!(
        d.stdout.lines().any(|l| l.starts_with("60 ")),
        "the newest record is readable"
    );
}

#[test]
fn truncating_the_last_record_at_every_offset_opens_and_repairs() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    assert_eq!(
        env.run(&["util", "ledger-append", "--count", "3", "--size", "40"])
            .code,
        0
    );
    let seg = env.repo().join("ledger/v1/000000000001.seg");
    let full = std::fs::read(&seg).expect("read");
    let last_len = u32::from_le_bytes(full[full.len() - 4..].try_into().expect("4")) as usize;
    let start = full.len() - last_len;
    for cut in (start + 1..full.len()).step_by(3) {
        std::fs::write(&seg, &full[..cut]).expect("write");
        let fsck = env.run(&["fsck", "--json"]);
        assert_eq!(fsck.code, 9, "cut {cut}: torn tail is reported");
        assert!(
            fsck.stdout.contains("torn-tail"),
            "cut {cut}: {}",
            fsck.stdout
        );
        let r = env.run(&["history"]);
        assert_eq!(r.code, 0, "cut {cut}: opens: {}", r.stderr);
        let repair = env.run(&["fsck", "--repair"]);
        assert_eq!(repair.code, 0, "cut {cut}: {}", repair.stdout);
        assert_eq!(std::fs::metadata(&seg).expect("stat").len() as usize, start);
    }
}
