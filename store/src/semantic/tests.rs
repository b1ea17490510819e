use std::fs::OpenOptions;
use std::io::Write;

use super::*;
use crate::fsutil::Durability::Durable;

fn rec(i: usize) -> StoredRecord {
    StoredRecord {
        text: format!("record number {i} {}", "x".repeat(i % 7)),
        turn: i.is_multiple_of(2).then(|| format!("{i:016x}")),
        kind: 1,
        at: i as i64,
    }
}

fn dir() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().join("records");
    (d, p)
}

fn texts(r: &Records) -> Vec<String> {
    (0..r.len()).map(|i| r.get(i).expect("get").text).collect()
}

#[test]
fn records_append_and_read_back() {
    let (_d, path) = dir();
    assert_eq!(Records::open(&path).expect("open").len(), 0);
    assert_eq!(
        Records::append(&path, &[rec(0), rec(1)], Durable).expect("append"),
        0
    );
    assert_eq!(
        Records::append(&path, &[rec(2)], Durable).expect("append"),
        2
    );
    let r = Records::open(&path).expect("open");
    assert_eq!(r.len(), 3);
    assert_eq!(r.get(2).expect("get"), rec(2));
    assert!(r.torn_tail().is_none() && r.damaged().is_empty());
}

#[test]
fn a_torn_tail_is_ignored_then_cut_by_the_next_append() {
    let (_d, path) = dir();
    Records::append(&path, &[rec(0), rec(1)], Durable).expect("append");
    let whole = std::fs::metadata(&path).expect("stat").len();
    Records::append(&path, &[rec(2)], Durable).expect("append");
    let full = std::fs::read(&path).expect("read");
    // Every way the last batch can be torn: cut anywhere inside it, or extended by zeros.
    for cut in whole as usize + 1..full.len() {
        std::fs::write(&path, &full[..cut]).expect("write");
        let r = Records::open(&path).expect("open");
        assert_eq!(r.len(), 2, "cut at {cut}");
        assert_eq!(r.torn_tail(), Some(whole), "cut at {cut}");
        assert!(r.damaged().is_empty());
    }
    let mut zeros = full[..whole as usize + 5].to_vec();
    zeros.extend([0u8; 40]);
    std::fs::write(&path, &zeros).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!((r.len(), r.torn_tail()), (2, Some(whole)));
    assert_eq!(
        Records::append(&path, &[rec(9)], Durable).expect("append"),
        2
    );
    let r = Records::open(&path).expect("open");
    assert_eq!(texts(&r), vec![rec(0).text, rec(1).text, rec(9).text]);
    assert!(r.torn_tail().is_none());
}

fn repair_tail_is_noop(path: &std::path::Path) -> bool {
    records::repair_tail(path).expect("repair") == 0
}

/// The ids whose records read, and the text of each.
fn readable(r: &Records) -> Vec<(u64, String)> {
    (0..r.len())
        .filter_map(|i| r.get(i).ok().map(|x| (i, x.text)))
        .collect()
}

#[test]
fn readers_step_over_a_damaged_record_and_appends_go_on() {
    let (_d, path) = dir();
    Records::append(&path, &[rec(0), rec(1), rec(2), rec(3)], Durable).expect("append");
    let clean = std::fs::read(&path).expect("read");
    let r = Records::open(&path).expect("open");
    let second = r.offset(1) as usize;
    let third = r.offset(2) as usize;
    let fourth = r.offset(3) as usize;
    drop(r);
    let others = |r: &Records| readable(r).into_iter().map(|(i, _)| i).collect::<Vec<_>>();
    // A flipped byte in a payload: framing holds, that record alone does not read; opening
    // does not see it (headers only), reading and verifying do.
    let mut bad = clean.clone();
    bad[second + 14] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!((r.len(), r.damaged()), (4, &[][..]));
    let e = r.get(1).expect_err("damaged");
    assert!(e.to_string().starts_with("semantic memory store "), "{e}");
    assert!(e.to_string().contains("record 1 "), "{e}");
    assert_eq!(others(&r), [0, 2, 3]);
    let found = r.verify();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].id, found[0].offset, found[0].len),
        (1, second as u64, (third - second) as u64)
    );
    // A flipped byte in a length: the stretch up to the next intact record is one damaged
    // record, found by opening; the records after it keep their ids.
    let mut bad = clean.clone();
    bad[second + 1] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!(r.len(), 4);
    assert!(r.torn_tail().is_none());
    assert_eq!(
        r.damaged()
            .iter()
            .map(|d| (d.id, d.offset, d.len))
            .collect::<Vec<_>>(),
        [(1, second as u64, (third - second) as u64)]
    );
    assert_eq!(others(&r), [0, 2, 3]);
    assert_eq!(r.verify(), r.damaged());
    drop(r);
    // Appends go on after the last whole record; nothing is cut.
    assert_eq!(
        Records::append(&path, &[rec(9)], Durable).expect("append after damage"),
        4
    );
    assert!(repair_tail_is_noop(&path));
    let r = Records::open(&path).expect("open");
    assert_eq!(others(&r), [0, 2, 3, 4]);
    assert_eq!(r.get(4).expect("new").text, rec(9).text);
    // Two records damaged in a row are two stretches when their bounds hold.
    let mut bad = clean.clone();
    bad[second + 14] ^= 0x40;
    bad[third + 14] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!(r.verify().iter().map(|d| d.id).collect::<Vec<_>>(), [1, 2]);
    // A bad last record is indistinguishable from a torn write: nothing valid follows it.
    let mut bad = clean.clone();
    bad[fourth + 14] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!((r.len(), r.torn_tail()), (3, Some(fourth as u64)));
    assert!(r.verify().is_empty());
}

#[test]
fn repair_moves_damaged_records_aside_and_keeps_the_rest() {
    let (d, path) = dir();
    let all: Vec<StoredRecord> = (0..10).map(rec).collect();
    Records::append(&path, &all, Durable).expect("append");
    let clean = std::fs::read(&path).expect("read");
    let r = Records::open(&path).expect("open");
    let (fourth, fifth, eighth) = (r.offset(3), r.offset(4), r.offset(7));
    drop(r);
    let mut bad = clean.clone();
    bad[fourth as usize + 16] ^= 0xff; // payload of record 3
    bad[eighth as usize + 2] ^= 0x01; // length of record 7
    std::fs::write(&path, &bad).expect("write");
    let aside = d.path().join("damaged");
    let moved = records::repair_damaged(&path, &aside).expect("repair");
    assert_eq!(moved.iter().map(|m| m.slot.id).collect::<Vec<_>>(), [3, 7]);
    assert_eq!(
        std::fs::read(&moved[0].file).expect("aside"),
        &bad[fourth as usize..fifth as usize],
        "the damaged bytes are kept as they were"
    );
    assert!(moved[1].file.ends_with(format!("records.{eighth}")));
    let r = Records::open(&path).expect("open");
    let expect: Vec<String> = (0..10)
        .filter(|i| ![3, 7].contains(i))
        .map(|i| rec(i).text)
        .collect();
    assert_eq!(texts(&r), expect);
    assert!(r.verify().is_empty() && r.torn_tail().is_none());
    assert!(
        records::repair_damaged(&path, &aside)
            .expect("again")
            .is_empty(),
        "idempotent"
    );
}

#[test]
fn vectors_keep_a_valid_prefix_of_one_model() {
    let d = tempfile::tempdir().expect("tempdir");
    let path = d.path().join("vectors");
    let row = |i: i8| VectorRow {
        q: vec![i; 4],
        scale: 0.5,
    };
    Vectors::append(&path, "m1", 4, 0, &[row(1), row(2)]).expect("append");
    Vectors::append(&path, "m1", 4, 2, &[row(3)]).expect("append");
    let v = Vectors::open(&path, "m1", 4).expect("open");
    assert_eq!(v.rows(), 3);
    assert_eq!(&v.data()[12..16], &[2u8; 4]);
    assert!(
        Vectors::append(&path, "m1", 4, 5, &[row(4)]).is_err(),
        "gap refused"
    );
    // Another model's rows are not used.
    let other = Vectors::open(&path, "m2", 4).expect("open");
    assert_eq!(other.rows(), 0);
    assert!(other.stale().expect("why").contains("m1"));
    // A damaged row ends the usable prefix; a partial row is ignored; rewriting at a row
    // replaces from there.
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[vectors::HEADER_LEN + 12 + 1] ^= 1;
    bytes.extend([7u8; 5]);
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(Vectors::open(&path, "m1", 4).expect("open").rows(), 1);
    assert!(vectors::check_file(&path).is_err());
    Vectors::append(&path, "m1", 4, 1, &[row(5)]).expect("append");
    assert_eq!(Vectors::open(&path, "m1", 4).expect("open").rows(), 2);
    assert_eq!(vectors::check_file(&path), Ok(2));
}

#[test]
fn check_reports_and_repairs() {
    let (_d, repo) = crate::repo::scratch();
    let counts = |c: Checked| (c.stores, c.problems);
    assert_eq!(counts(check(&repo, false).expect("check")), (0, Vec::new()));
    let sd = SemanticDir::new(&repo, "main:coder");
    let path = sd.file(RECORDS_FILE);
    Records::append(&path, &[rec(0), rec(1)], Durable).expect("append");
    assert_eq!(counts(check(&repo, false).expect("check")), (1, Vec::new()));
    let mut f = OpenOptions::new().append(true).open(&path).expect("open");
    f.write_all(&[3, 0, 0]).expect("tear");
    drop(f);
    let problems = check(&repo, false).expect("check").problems;
    assert_eq!(problems.len(), 1);
    assert!(problems[0].message.contains("torn tail"), "{problems:?}");
    let repaired = check(&repo, true).expect("repair");
    assert!(repaired.problems.is_empty(), "{repaired:?}");
    assert_eq!(repaired.repairs.len(), 1, "{repaired:?}");
    assert_eq!(Records::open(&path).expect("open").len(), 2);
    // A damaged cache is a warning, not an error.
    std::fs::write(sd.file(VECTORS_FILE), b"garbage").expect("write");
    let problems = check(&repo, false).expect("check").problems;
    assert_eq!(problems.len(), 1);
    assert!(!problems[0].is_error);
    // A damaged record: reported, then moved aside, and the caches lose the rows from it
    // on (the records after it are renumbered).
    Records::append(&path, &[rec(2), rec(3)], Durable).expect("append");
    std::fs::remove_file(sd.file(VECTORS_FILE)).expect("rm");
    let row = VectorRow {
        q: vec![1; 4],
        scale: 1.0,
    };
    Vectors::append(&sd.file(VECTORS_FILE), "m", 4, 0, &vec![row; 4]).expect("rows");
    let at = Records::open(&path).expect("open").offset(1) as usize;
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[at + 13] ^= 0x10;
    std::fs::write(&path, &bytes).expect("write");
    let problems = check(&repo, false).expect("check").problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].is_error);
    assert!(
        problems[0].message.contains("record 1 ") && problems[0].message.contains("moves it aside"),
        "{problems:?}"
    );
    let repaired = check(&repo, true).expect("repair");
    assert!(repaired.problems.is_empty(), "{repaired:?}");
    assert_eq!(repaired.repairs.len(), 1, "{repaired:?}");
    assert!(
        repaired.repairs[0].contains("moved damaged record 1 "),
        "{repaired:?}"
    );
    assert_eq!(
        std::fs::read_dir(sd.file(DAMAGED_DIR)).expect("ls").count(),
        1
    );
    assert_eq!(
        Vectors::open(&sd.file(VECTORS_FILE), "m", 4)
            .expect("open")
            .rows(),
        1
    );
    assert_eq!(texts(&Records::open(&path).expect("open")).len(), 3);
}
