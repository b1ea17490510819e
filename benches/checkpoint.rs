//! Checkpoint benchmark. Prints figures; asserts nothing about time.
//!
//! Write and load of a ~64 MiB checkpoint (encode, envelope, atomic replace / read, verify,
//! decode) against a raw `write + fsync` and a raw read of the same number of bytes.
//!
//! Run: `cargo bench --bench checkpoint`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::time::Instant;

use axocoatl::checkpoint::{self, CkMessage, Snapshot, PAYLOAD_VERSION};
use axocoatl::provider::Role;
use axocoatl_store::ledger::record::Usage;
use axocoatl_store::repo::{self, OpenOptions};
use axocoatl_store::Repo;

fn main() {
    let base = tempfile::Builder::new()
        .prefix("axobench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = repo::init(base.path()).unwrap();
    let repo = Repo::open(&root, &OpenOptions::default()).unwrap();
    // Messages of 64 KiB each, just under the 64 MiB limit once encoded.
    let text: String = "checkpoint text ".repeat(4096);
    let messages: Vec<CkMessage> = (0..1000)
        .map(|i| CkMessage {
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            content: text.clone(),
            tool_calls: vec![],
            tool_call_id: None,
            name: None,
        })
        .collect();
    let snap = Snapshot {
        version: PAYLOAD_VERSION,
        ledger_seq: 1,
        head_turn: Some("0123456789abcdef".into()),
        in_flight: false,
        messages,
        usage: Usage::ZERO,
    };
    let size = checkpoint::encode(&snap).len();
    let runs = 5;
    let mut w = Vec::new();
    let mut l = Vec::new();
    let mut rw = Vec::new();
    let mut rr = Vec::new();
    for i in 0..runs {
        let mut s = snap.clone();
        s.ledger_seq = i + 1;
        let t = Instant::now();
        checkpoint::write(&repo, "main", "bench", &s, 3).unwrap();
        w.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let (good, bad) = checkpoint::load_all(&repo, "main", "bench");
        assert!(bad.is_empty());
        assert_eq!(good[0].snapshot.messages.len(), 1000);
        // load_all reads every kept checkpoint; count one.
        l.push(t.elapsed().as_secs_f64() / good.len() as f64);
        let bytes = vec![b'x'; size];
        let path = base.path().join(format!("raw{i}"));
        let t = Instant::now();
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&bytes).unwrap();
        f.sync_all().unwrap();
        rw.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut back = Vec::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        rr.push(t.elapsed().as_secs_f64());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2] * 1e3
    };
    let (w, l, rw, rr) = (med(&mut w), med(&mut l), med(&mut rw), med(&mut rr));
    println!("checkpoint of {} MiB: write {w:.0} ms vs raw write+fsync {rw:.0} ms (ratio {:.2}, goal <= 1.5); load {l:.0} ms vs raw read {rr:.0} ms (ratio {:.2}, goal <= 1.5)", size >> 20, w / rw, l / rr);
}
