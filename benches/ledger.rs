//! Ledger benchmarks. Prints figures; asserts nothing about time.
//!
//! 1. durable appends of 1 KiB records vs a raw `write + fdatasync` loop on the same disk;
//! 2. 8 concurrent appending processes vs one (group commit);
//! 3. a sequential scan of a large ledger (default 1 GiB; `AXOCOATL_BENCH_SCAN_MB`) vs a raw
//!    read of the same files.
//!
//! Run: `cargo bench --bench ledger`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use axocoatl_store::ledger::record::Note;
use axocoatl_store::ledger::{Ledger, Record};

fn note(i: usize, size: usize) -> Record {
    let mut text = format!("bench:{i}:");
    text.extend(std::iter::repeat_n('x', size.saturating_sub(text.len())));
    Record::Note(Note { text })
}

fn ledger_in(dir: &Path, limit: u64) -> Ledger {
    std::fs::create_dir_all(dir.join("l")).unwrap();
    Ledger::open(&dir.join("l"), &dir.join("lock"), limit)
}

fn durable_appends(base: &Path, n: usize) -> (f64, f64) {
    let dir = base.join("durable");
    let ledger = ledger_in(&dir, 64 << 20);
    let start = Instant::now();
    for i in 0..n {
        ledger.append(&[note(i, 1024)]).unwrap();
    }
    let ours = n as f64 / start.elapsed().as_secs_f64();

    let raw = raw_flushers(&dir, 1, n);
    (ours, raw)
}

/// The same disk's ceiling for concurrent flushers: `threads` threads each doing a raw
/// `write + fdatasync` loop on one shared file (no locking, no framing), in records/s.
fn raw_flushers(base: &Path, threads: usize, per: usize) -> f64 {
    let path = base.join(format!("raw{threads}.bin"));
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .unwrap();
                let rec = vec![b'x'; 1024 + 26];
                for _ in 0..per {
                    f.write_all(&rec).unwrap();
                    f.sync_data().unwrap();
                }
            });
        }
    });
    (threads * per) as f64 / start.elapsed().as_secs_f64()
}

fn processes(base: &Path, procs: usize, per: usize) -> f64 {
    let work = base.join(format!("procs{procs}"));
    std::fs::create_dir_all(&work).unwrap();
    let bin = env!("CARGO_BIN_EXE_axocoatl");
    let st = Command::new(bin)
        .arg("init")
        .current_dir(&work)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let start = Instant::now();
    let children: Vec<_> = (0..procs)
        .map(|p| {
            Command::new(bin)
                .args([
                    "util",
                    "ledger-append",
                    "--count",
                    &per.to_string(),
                    "--size",
                    "1024",
                    "--tag",
                    &format!("p{p}"),
                ])
                .current_dir(&work)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    (procs * per) as f64 / start.elapsed().as_secs_f64()
}

fn scan(base: &Path, mb: usize) -> (f64, f64, f64, usize) {
    let dir = base.join("scan");
    let ledger = ledger_in(&dir, 64 << 20);
    let per_batch = 1000;
    let total = mb * 1024;
    let mut i = 0;
    while i < total {
        let batch: Vec<Record> = (i..(i + per_batch).min(total))
            .map(|k| note(k, 1000))
            .collect();
        ledger.append_lazy(&batch).unwrap();
        i += per_batch;
    }
    ledger.append(&[note(i, 10)]).unwrap();
    let bytes: u64 = std::fs::read_dir(dir.join("l"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // A ledger at rest: the kernel's writeback of the gigabyte just written would otherwise
    // compete for the cores with whichever side runs while it is still going.
    for e in std::fs::read_dir(dir.join("l")).unwrap() {
        std::fs::File::open(e.unwrap().path())
            .unwrap()
            .sync_all()
            .unwrap();
    }
    // Warm the page cache the same way for both sides.
    let raw_read = || {
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        for e in std::fs::read_dir(dir.join("l")).unwrap() {
            let mut f = std::fs::File::open(e.unwrap().path()).unwrap();
            loop {
                let k = f.read(&mut buf).unwrap();
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
        }
        n
    };
    raw_read();
    // The scan fsck does: every frame's checksums verified, segments on one thread per core.
    let numbers = ledger.segment_numbers().unwrap();
    let verified_scan = || -> usize {
        axocoatl_store::ledger::parallel_map(&numbers, |n| {
            let seg = ledger.load_segment(n).unwrap();
            let mut count = 0usize;
            assert!(seg.frames(0, |_| count += 1).is_none());
            count
        })
        .into_iter()
        .sum()
    };
    // Best of three for each side, taken in turns, so that a passing disturbance does not
    // decide the ratio.
    let (mut raw, mut verified, mut frames) = (0f64, 0f64, 0usize);
    for _ in 0..3 {
        let start = Instant::now();
        let n = raw_read();
        raw = raw.max(n as f64 / 1e6 / start.elapsed().as_secs_f64());
        let start = Instant::now();
        frames = verified_scan();
        verified = verified.max(bytes as f64 / 1e6 / start.elapsed().as_secs_f64());
    }
    // The scan projections do: every record decoded into its typed form.
    let start = Instant::now();
    let mut records = 0usize;
    for e in ledger.scan_all() {
        e.unwrap();
        records += 1;
    }
    assert_eq!(records, frames);
    let decoded = bytes as f64 / 1e6 / start.elapsed().as_secs_f64();
    (verified, decoded, raw, records)
}

fn main() {
    let base = tempfile::Builder::new()
        .prefix("axobench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let n: usize = std::env::var("AXOCOATL_BENCH_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let (ours, raw) = durable_appends(base.path(), n);
    println!("durable 1 KiB appends: {ours:.0} records/s; raw write+fdatasync: {raw:.0}/s; ratio {:.2} (goal >= 0.9)", ours / raw);
    let one = processes(base.path(), 1, n);
    let eight = processes(base.path(), 8, n);
    println!("1 appending process: {one:.0} records/s; 8 processes: {eight:.0} records/s; ratio {:.2} (goal >= 4)", eight / one);
    let raw8 = raw_flushers(base.path(), 8, n);
    println!("  this disk's ceiling: raw write+fdatasync from 8 threads {raw8:.0}/s against {raw:.0}/s from one; ratio {:.2}", raw8 / raw);
    let mb: usize = std::env::var("AXOCOATL_BENCH_SCAN_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let (verified, decoded, raw, records) = scan(base.path(), mb);
    println!(
        "scan of a {mb} MiB ledger ({records} records): checksums verified {verified:.0} MB/s, ratio {:.2} to a raw read of {raw:.0} MB/s (goal >= 0.8); decoded into records {decoded:.0} MB/s, ratio {:.2}",
        verified / raw,
        decoded / raw
    );
}
