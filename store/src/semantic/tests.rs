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
    assert!(r.torn_tail().is_none() && r.damage().is_none());
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
        assert!(r.damage().is_none());
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

#[test]
fn damage_in_the_middle_is_reported_and_refuses_appends() {
    let (_d, path) = dir();
    Records::append(&path, &[rec(0), rec(1), rec(2), rec(3)], Durable).expect("append");
    let clean = std::fs::read(&path).expect("read");
    let r = Records::open(&path).expect("open");
    let second = r.offset(1) as usize;
    let fourth = r.offset(3) as usize;
    drop(r);
    // A flipped byte in a payload: framing holds, that record alone does not read (and
    // fsck names it); appends go on.
    let mut bad = clean.clone();
    bad[second + 14] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!((r.len(), r.damage()), (4, None));
    assert!(r.get(1).is_err() && r.get(2).is_ok());
    // A flipped byte in a length: what follows cannot be framed. Reported, never cut.
    let mut bad = clean.clone();
    bad[second + 1] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    let (offset, _) = r.damage().expect("damage found");
    assert_eq!(offset, second as u64);
    assert_eq!(r.len(), 1, "the prefix stays readable");
    assert!(r.torn_tail().is_none());
    assert!(
        Records::append(&path, &[rec(9)], Durable).is_err(),
        "no append after damage"
    );
    assert!(repair_tail_is_noop(&path));
    assert_eq!(std::fs::read(&path).expect("read"), bad, "nothing was cut");
    // A bad last record is indistinguishable from a torn write: nothing valid follows it.
    let mut bad = clean.clone();
    bad[fourth + 14] ^= 0x40;
    std::fs::write(&path, &bad).expect("write");
    let r = Records::open(&path).expect("open");
    assert_eq!(
        (r.len(), r.torn_tail(), r.damage()),
        (3, Some(fourth as u64), None)
    );
}

fn repair_tail_is_noop(path: &std::path::Path) -> bool {
    records::repair_tail(path).expect("repair") == 0
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
    let d = tempfile::tempdir().expect("tempdir");
    let root = crate::repo::init(d.path()).expect("init");
    let repo = Repo::open(&root, &crate::repo::OpenOptions::default()).expect("open");
    assert_eq!(check(&repo, false).expect("check"), (0, Vec::new()));
    let sd = SemanticDir::new(&repo, "main:coder");
    let path = sd.file(RECORDS_FILE);
    Records::append(&path, &[rec(0), rec(1)], Durable).expect("append");
    assert_eq!(check(&repo, false).expect("check"), (1, Vec::new()));
    let mut f = OpenOptions::new().append(true).open(&path).expect("open");
    f.write_all(&[3, 0, 0]).expect("tear");
    drop(f);
    let (_, problems) = check(&repo, false).expect("check");
    assert_eq!(problems.len(), 1);
    assert!(problems[0].message.contains("torn tail"), "{problems:?}");
    let (_, problems) = check(&repo, true).expect("repair");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(Records::open(&path).expect("open").len(), 2);
    // A damaged cache is a warning, not an error.
    std::fs::write(sd.file(VECTORS_FILE), b"garbage").expect("write");
    let (_, problems) = check(&repo, false).expect("check");
    assert_eq!(problems.len(), 1);
    assert!(!problems[0].is_error);
}
