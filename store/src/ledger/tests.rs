use std::fs;

use super::record::Note;
use super::*;

fn note(text: &str) -> Record {
    Record::Note(Note { text: text.into() })
}

fn texts(ledger: &Ledger) -> Vec<String> {
    ledger
        .scan_all()
        .map(|e| match e.expect("entry").record {
            Some(Record::Note(n)) => n.text,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn setup(limit: u64) -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("l")).expect("mkdir");
    let ledger = Ledger::open(&dir.path().join("l"), &dir.path().join("lock"), limit);
    (dir, ledger)
}

#[test]
fn appends_scan_back_in_order_with_increasing_sequence_numbers() {
    let (_d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    let a = ledger.append(&[note("a"), note("b")]).expect("append");
    let b = ledger.append(&[note("c")]).expect("append");
    assert_eq!(a.iter().map(|x| x.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(b[0].seq, 3);
    assert_eq!(a[1].next, b[0].pos);
    assert_eq!(texts(&ledger), vec!["a", "b", "c"]);
    let from_b: Vec<_> = ledger.scan(a[1].pos).map(|e| e.expect("e").seq).collect();
    assert_eq!(from_b, vec![2, 3]);
}

#[test]
fn a_second_handle_continues_the_sequence() {
    let (d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    ledger.append(&[note("a")]).expect("append");
    let other = Ledger::open(
        &d.path().join("l"),
        &d.path().join("lock"),
        DEFAULT_SEGMENT_LIMIT,
    );
    assert_eq!(other.append(&[note("b")]).expect("append")[0].seq, 2);
    assert_eq!(ledger.append(&[note("c")]).expect("append")[0].seq, 3);
}

#[test]
fn segments_roll_at_the_limit_and_all_records_stay_readable() {
    let (d, ledger) = setup(300);
    for i in 0..20 {
        ledger
            .append(&[note(&format!("record {i:02}"))])
            .expect("append");
    }
    let n = ledger.segment_numbers().expect("segments");
    assert!(n.len() >= 3, "{n:?}");
    assert_eq!(texts(&ledger).len(), 20);
    let reopened = Ledger::open(&d.path().join("l"), &d.path().join("lock"), 300);
    assert_eq!(reopened.append(&[note("x")]).expect("append")[0].seq, 21);
}

#[test]
fn every_truncation_of_the_last_record_opens_and_appends_continue() {
    let (d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    ledger.append(&[note("first")]).expect("append");
    let last = ledger
        .append(&[note("second, to be torn")])
        .expect("append")[0];
    let path = ledger.segment_path(1);
    let full = fs::read(&path).expect("read");
    for cut in last.pos.offset..full.len() as u64 {
        fs::write(&path, &full[..cut as usize]).expect("write");
        let l = Ledger::open(
            &d.path().join("l"),
            &d.path().join("lock"),
            DEFAULT_SEGMENT_LIMIT,
        );
        assert_eq!(texts(&l), vec!["first"], "cut at {cut}");
        let seq = l.append(&[note("after")]).expect("append")[0].seq;
        assert_eq!(seq, 2, "cut at {cut}");
        assert_eq!(texts(&l), vec!["first", "after"], "cut at {cut}");
    }
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_is_reported_and_later_segments_stay_readable() {
    let (_d, ledger) = setup(200);
    for i in 0..12 {
        ledger.append(&[note(&format!("r{i:02}"))]).expect("append");
    }
    let path = ledger.segment_path(1);
    let mut bytes = fs::read(&path).expect("read");
    bytes[HEADER_LEN + 20] ^= 0x55;
    fs::write(&path, bytes).expect("write");
    let mut errors = 0;
    let mut ok = Vec::new();
    for e in ledger.scan_all() {
        match e {
            Ok(e) => ok.push(e.seq),
            Err(Error::Corrupt {
                path: p, offset, ..
            }) => {
                errors += 1;
                assert_eq!(p, path);
                assert_eq!(offset, HEADER_LEN as u64);
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(errors, 1);
    // Everything after segment 1 is intact.
    let first_of_2 = ok.iter().position(|&s| s > 1).expect("later records");
    assert_eq!(
        ok[first_of_2..],
        (ok[first_of_2]..=12).collect::<Vec<_>>()[..]
    );
    assert!(ok.len() >= 6, "{ok:?}");
}

#[test]
fn append_checked_sees_records_since_a_position_and_can_refuse() {
    let (_d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    let a = ledger.append(&[note("begin")]).expect("append")[0];
    ledger.append(&[note("end")]).expect("append");
    let refused = ledger
        .append_checked(a.pos, &[note("stop")], |entries| {
            let seen: Vec<_> = entries.map(|e| e.expect("e").seq).collect();
            if seen == vec![1, 2] {
                Err("already ended")
            } else {
                Ok(())
            }
        })
        .expect("io");
    assert_eq!(refused, Err("already ended"));
    assert_eq!(texts(&ledger), vec!["begin", "end"]);
}

#[test]
fn concurrent_handles_never_share_a_sequence_number() {
    let (d, _ledger) = setup(4096);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let dir = d.path().to_owned();
            std::thread::spawn(move || {
                let l = Ledger::open(&dir.join("l"), &dir.join("lock"), 4096);
                (0..50)
                    .map(|i| l.append(&[note(&format!("{t}:{i}"))]).expect("append")[0].seq)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("join"))
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 200);
    let l = Ledger::open(&d.path().join("l"), &d.path().join("lock"), 4096);
    let seqs: Vec<u64> = l.scan_all().map(|e| e.expect("e").seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seqs.len(), 200);
}

#[test]
fn an_unknown_record_kind_is_skipped_not_fatal() {
    let (d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    ledger.append(&[note("before")]).expect("append");
    // A record of a kind a newer build might write.
    let mut frame_bytes = Vec::new();
    frame::encode_frame(&mut frame_bytes, 2, 999, b"\x03abc").expect("encode");
    let path = ledger.segment_path(1);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut f, &frame_bytes).expect("write");
    drop(f);
    let other = Ledger::open(
        &d.path().join("l"),
        &d.path().join("lock"),
        DEFAULT_SEGMENT_LIMIT,
    );
    assert_eq!(other.append(&[note("after")]).expect("append")[0].seq, 3);
    let entries: Vec<Entry> = other.scan_all().map(|e| e.expect("entry")).collect();
    assert_eq!(entries.len(), 3);
    assert_eq!((entries[1].kind, entries[1].record.is_none()), (999, true));
}

fn segment_count(ledger: &Ledger) -> usize {
    ledger.segment_numbers().expect("segments").len()
}

/// a roll-over killed (or out of space) between creating the new segment and
/// writing its header left a short newest segment that bricked the repository. Readers
/// ignore it; the next appender removes it and goes on.
#[test]
fn a_short_newest_segment_is_ignored_by_readers_and_removed_by_the_next_append() {
    for short in [0usize, 1, 17, HEADER_LEN - 1] {
        let (d, ledger) = setup(300);
        for i in 0..8 {
            ledger.append(&[note(&format!("r{i}"))]).expect("append");
        }
        let n = segment_count(&ledger) as u64;
        let header = frame::SegmentHeader {
            number: n + 1,
            base_seq: 8,
        }
        .encode();
        let torn = ledger.segment_path(n + 1);
        fs::write(&torn, &header[..short]).expect("write");
        let fresh = Ledger::open(&d.path().join("l"), &d.path().join("lock"), 300);
        let read: Vec<String> = texts(&fresh);
        assert_eq!(read.len(), 8, "short {short}: readers ignore it");
        let seq = fresh.append(&[note("after")]).expect("append")[0].seq;
        assert_eq!(seq, 9, "short {short}");
        assert_eq!(texts(&fresh).len(), 9, "short {short}");
        let len = fs::metadata(&torn).map(|m| m.len()).unwrap_or(0);
        assert!(
            len == 0 || len >= HEADER_LEN as u64,
            "short {short}: the torn segment is gone or whole ({len} bytes)"
        );
    }
}

/// one damaged payload no longer hides the records after it in its segment.
#[test]
fn a_damaged_payload_is_reported_and_the_records_after_it_are_read() {
    let (_d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    let a = ledger
        .append(&[note("one"), note("two"), note("three")])
        .expect("append");
    let path = ledger.segment_path(1);
    let mut bytes = fs::read(&path).expect("read");
    bytes[a[1].pos.offset as usize + 20] ^= 0x10; // inside the payload of "two"
    fs::write(&path, bytes).expect("write");
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for e in ledger.scan_all() {
        match e {
            Ok(e) => ok.push(e.seq),
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert_eq!(ok, vec![1, 3], "{errors:?}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("checksum"), "{errors:?}");
    // And appends go on.
    assert_eq!(ledger.append(&[note("four")]).expect("append")[0].seq, 4);
}

/// Damage that breaks frame bounds (a length field) is stepped over to the next intact
/// record: every record after it is still read.
#[test]
fn damage_to_frame_bounds_resumes_at_the_next_intact_record() {
    let (_d, ledger) = setup(DEFAULT_SEGMENT_LIMIT);
    let a = ledger
        .append(&[note("one"), note("two"), note("three"), note("four")])
        .expect("append");
    let path = ledger.segment_path(1);
    let mut bytes = fs::read(&path).expect("read");
    bytes[a[1].pos.offset as usize] ^= 0x7f; // the length of "two"
    fs::write(&path, bytes).expect("write");
    let (ok, errors): (Vec<_>, Vec<_>) = ledger.scan_all().partition(|e| e.is_ok());
    let ok: Vec<u64> = ok.into_iter().map(|e| e.expect("ok").seq).collect();
    assert_eq!(ok, vec![1, 3, 4]);
    assert_eq!(errors.len(), 1);
}

/// a copy of a segment under another segment's name is not read twice.
#[test]
fn a_stray_copy_of_a_segment_is_reported_not_read_twice() {
    let (_d, ledger) = setup(300);
    for i in 0..8 {
        ledger
            .append(&[note(&format!("record {i:03}"))])
            .expect("append");
    }
    let n = segment_count(&ledger) as u64;
    assert!(n >= 2);
    fs::copy(ledger.segment_path(1), ledger.segment_path(n + 1)).expect("copy");
    let mut seqs = Vec::new();
    let mut errors = Vec::new();
    for e in ledger.scan_all() {
        match e {
            Ok(e) => seqs.push(e.seq),
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>(), "no duplicates");
    assert!(
        errors.iter().any(|e| e.contains(&segment_file_name(n + 1))),
        "{errors:?}"
    );
    // Nothing is appended into the copy.
    assert!(ledger.append(&[note("x")]).is_err());
}

/// a deleted sealed segment is reported by every scan.
#[test]
fn a_deleted_sealed_segment_is_reported() {
    let (_d, ledger) = setup(300);
    for i in 0..30 {
        ledger.append(&[note(&format!("r{i}"))]).expect("append");
    }
    assert!(segment_count(&ledger) >= 3);
    fs::remove_file(ledger.segment_path(2)).expect("rm");
    let errors: Vec<String> = ledger
        .scan_all()
        .filter_map(|e| e.err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains(&segment_file_name(2)), "{errors:?}");
    assert!(errors[0].contains("missing"), "{errors:?}");
}

/// The same for the filtered walk that history, show, search and export use.
#[test]
fn the_walk_reports_a_missing_segment_and_skips_a_stray_copy() {
    let (_d, ledger) = setup(300);
    for i in 0..30 {
        ledger.append(&[note(&format!("r{i}"))]).expect("append");
    }
    let n = segment_count(&ledger) as u64;
    assert!(n >= 3);
    let all = ledger.read_all().expect("walk");
    assert!(all.damaged.is_empty(), "{:?}", all.damaged);
    let count = all.entries.len();
    fs::copy(ledger.segment_path(1), ledger.segment_path(n + 1)).expect("copy");
    let walked = ledger.read_all().expect("walk");
    assert_eq!(walked.entries.len(), count, "no record read twice");
    assert!(walked
        .damaged
        .iter()
        .any(|d| d.path.ends_with(segment_file_name(n + 1))));
    fs::remove_file(ledger.segment_path(n + 1)).expect("rm");
    fs::remove_file(ledger.segment_path(2)).expect("rm");
    let walked = ledger.read_all().expect("walk");
    assert!(
        walked
            .damaged
            .iter()
            .any(|d| d.path.ends_with(segment_file_name(2)) && d.reason.contains("missing")),
        "{:?}",
        walked.damaged
    );
}

/// Sets the modification time of the ledger directory an hour back: its listing is then
/// kept (a change in the last seconds is not trusted, see `segments::RACY`).
fn age_dir(ledger: &Ledger) {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::open(ledger.dir())
        .and_then(|d| d.set_modified(hour_ago))
        .expect("set the directory's time");
}

/// A process keeps its listing of the ledger directory while the directory is unchanged,
/// and sees what another process adds, removes or puts in place of a segment.
#[test]
fn a_kept_listing_of_the_segments_follows_every_change_of_the_directory() {
    let (d, ledger) = setup(300);
    let other = Ledger::open(&d.path().join("l"), &d.path().join("lock"), 300);
    for i in 0..12 {
        ledger.append(&[note(&format!("r{i}"))]).expect("append");
    }
    let before = ledger.segment_set().expect("set");
    assert!(before.numbers.len() >= 2, "{before:?}");
    age_dir(&ledger);
    assert_eq!(ledger.segment_set().expect("set"), before);
    assert!(
        ledger.listing.is_kept(),
        "an old directory's listing is kept"
    );
    // Another process rolls over to a new segment.
    let n = before.numbers.len();
    while other.segment_set().expect("set").numbers.len() == n {
        other.append(&[note("more")]).expect("append");
    }
    let grown = ledger.segment_set().expect("set");
    assert_eq!(grown.numbers.len(), n + 1);
    assert_eq!(grown, other.segment_set().expect("set"));
    // A sealed segment put in place of itself (a restore: another inode), then deleted.
    age_dir(&ledger);
    ledger.segment_set().expect("set");
    let path = ledger.segment_path(1);
    let copy = d.path().join("l").join("restored.tmp");
    fs::copy(&path, &copy).expect("copy");
    fs::rename(&copy, &path).expect("rename");
    let set = ledger.segment_set().expect("set");
    assert_eq!(set.numbers, grown.numbers);
    assert_ne!(set.inodes[0], grown.inodes[0]);
    assert_eq!(texts(&ledger), texts(&other));
    age_dir(&ledger);
    ledger.segment_set().expect("set");
    fs::remove_file(&path).expect("rm");
    let set = ledger.segment_set().expect("set");
    assert_eq!(set.missing, vec![(1, 1)]);
}

/// A listing is used only while the directory's stamp is the one it was read under, and
/// no segment after its newest exists (a segment created in the clock tick of the change
/// before could leave the stamp as it was); one read in the seconds after a change is not
/// kept at all.
#[test]
fn a_kept_listing_is_used_only_for_the_same_stamp_and_no_newer_segment() {
    let (_d, ledger) = setup(300);
    for i in 0..12 {
        ledger.append(&[note(&format!("r{i}"))]).expect("append");
    }
    let set = ledger.segment_set().expect("set");
    assert!(
        !ledger.listing.is_kept(),
        "a fresh directory's listing is read again"
    );
    age_dir(&ledger);
    ledger.segment_set().expect("set");
    assert!(ledger.listing.is_kept());
    let stamp = ledger.listing.kept_stamp().expect("stamp");
    let listed: Vec<(u64, u64)> = set.numbers.iter().copied().zip(set.inodes).collect();
    let kept = |no_next: bool| ledger.listing.unchanged(&stamp, |_| no_next);
    assert_eq!(kept(true), Some(listed));
    assert_eq!(kept(false), None);
    let mut other = stamp;
    other.mtime.1 += 1;
    assert_eq!(ledger.listing.unchanged(&other, |_| true), None);
}
