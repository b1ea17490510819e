use std::fs;

use crate::index::Reader;
use crate::ledger::record::{
    AgentOutput, RewindBoundary, SessionCreated, TurnBegun, TurnEnded, TurnState, Usage,
};
use crate::ledger::{Record, HEADER_LEN};

pub(crate) fn setup(limit: u64) -> (tempfile::TempDir, Reader) {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("l")).expect("mkdir");
    let ledger = Reader::open(&dir.path().join("l"), &dir.path().join("lock"), limit);
    (dir, ledger)
}

/// The three records of a completed turn.
pub(crate) fn turn(id: &str, session: &str, request: &str, output: &str) -> Vec<Record> {
    vec![
        Record::TurnBegun(TurnBegun {
            turn: id.into(),
            session: session.into(),
            agent: "a".into(),
            mode: "single".into(),
            request: request.into(),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at: 1,
            schema: None,
        }),
        Record::AgentOutput(AgentOutput {
            turn: id.into(),
            agent: "a".into(),
            text: output.into(),
            at: 2,
        }),
        Record::TurnEnded(TurnEnded {
            turn: id.into(),
            session: session.into(),
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at: 3,
        }),
    ]
}

fn turns_of(entries: &[crate::ledger::Entry]) -> Vec<String> {
    let mut out: Vec<String> = entries
        .iter()
        .filter_map(|e| e.record.as_ref()?.turn().map(str::to_owned))
        .collect();
    out.dedup();
    out
}

#[test]
fn a_session_read_keeps_its_records_only_across_segments() {
    let (_d, ledger) = setup(400);
    ledger
        .ledger()
        .append(&[Record::SessionCreated(SessionCreated {
            session: "b".into(),
            at: 0,
        })])
        .expect("append");
    for i in 0..6 {
        let session = if i % 2 == 0 { "a" } else { "b" };
        // Begin and end in separate appends, so turns cross segment boundaries.
        let records = turn(&format!("t{i}"), session, "req", "out");
        ledger.ledger().append(&records[..1]).expect("append");
        ledger.ledger().append(&records[1..]).expect("append");
    }
    assert!(ledger.ledger().segment_numbers().expect("segments").len() >= 3);
    let b = ledger.read_session("b").expect("read");
    assert!(b.damaged.is_empty());
    assert_eq!(turns_of(&b.entries), vec!["t1", "t3", "t5"]);
    assert_eq!(b.entries.len(), 1 + 3 * 3);
    assert!(b.entries.windows(2).all(|w| w[0].pos < w[1].pos));
}

#[test]
fn a_damaged_record_is_reported_and_the_walk_goes_on() {
    let (_d, ledger) = setup(1 << 20);
    ledger
        .ledger()
        .append(&turn("t0", "a", "first", "x"))
        .expect("append");
    let second = ledger
        .ledger()
        .append(&turn("t1", "a", "second", "y"))
        .expect("append");
    ledger
        .ledger()
        .append(&turn("t2", "a", "third", "z"))
        .expect("append");
    // A byte inside the payload of t1's begin: its framing stays intact.
    let path = ledger.ledger().segment_path(1);
    let mut bytes = fs::read(&path).expect("read");
    bytes[second[0].pos.offset as usize + 30] ^= 0x20;
    fs::write(&path, bytes).expect("write");
    let all = ledger.ledger().read_all().expect("read");
    assert_eq!(all.damaged.len(), 1, "{:?}", all.damaged);
    assert_eq!(all.damaged[0].offset, Some(second[0].pos.offset));
    assert!(all.damaged[0].to_string().contains("ledger corrupt"));
    assert_eq!(all.entries.len(), 8, "every other record is read");
    let session = ledger.read_session("a").expect("read");
    assert_eq!(session.damaged.len(), 1, "a session read reports it too");
}

#[test]
fn a_damaged_segment_header_is_reported_and_later_segments_read() {
    let (_d, ledger) = setup(300);
    for i in 0..4 {
        ledger
            .ledger()
            .append(&turn(&format!("t{i}"), "a", "r", "o"))
            .expect("append");
    }
    let path = ledger.ledger().segment_path(1);
    let mut bytes = fs::read(&path).expect("read");
    bytes[3] ^= 1;
    fs::write(&path, bytes).expect("write");
    let all = ledger.ledger().read_all().expect("read");
    assert_eq!(all.damaged.len(), 1);
    assert_eq!(all.damaged[0].offset, Some(0));
    assert!(!all.entries.is_empty());
    assert!(all.entries.iter().all(|e| e.pos.segment > 1));
    let _ = HEADER_LEN;
}

#[test]
fn a_prefix_read_brings_the_rewind_target_that_decides_superseded() {
    let (_d, ledger) = setup(1 << 20);
    ledger
        .ledger()
        .append(&turn("aaaa01", "s", "r", "o"))
        .expect("append");
    ledger
        .ledger()
        .append(&turn("bbbb02", "s", "r", "o"))
        .expect("append");
    ledger
        .ledger()
        .append(&[Record::RewindBoundary(RewindBoundary {
            session: "s".into(),
            agent: "a".into(),
            target: "aaaa01".into(),
            at: 9,
        })])
        .expect("append");
    ledger
        .ledger()
        .append(&turn("cccc03", "t", "r", "o"))
        .expect("append");
    let read = ledger.read_turn_prefix("bbbb").expect("read");
    assert_eq!(turns_of(&read.entries), vec!["aaaa01", "bbbb02"]);
    assert!(read
        .entries
        .iter()
        .any(|e| matches!(e.record, Some(Record::RewindBoundary(_)))));
    let other = ledger.read_turn_prefix("cccc").expect("read");
    assert_eq!(turns_of(&other.entries), vec!["cccc03"], "no target needed");
}

#[test]
fn a_match_read_finds_turns_with_a_byte_hit_whole() {
    let (_d, ledger) = setup(500);
    for i in 0..10 {
        let request = if i == 7 { "the Needle here" } else { "hay" };
        ledger
            .ledger()
            .append(&turn(&format!("t{i}"), "s", request, "out"))
            .expect("append");
    }
    let re = crate::search::Matcher::new("needle").expect("matcher");
    let read = crate::search::Searcher::new(&ledger)
        .read_matching(&re, "needle")
        .expect("read");
    assert_eq!(turns_of(&read.entries), vec!["t7"]);
    assert_eq!(read.entries.len(), 3);
}

#[test]
fn sparse_reads_give_the_frames_the_map_gives_and_decline_damaged_ones() {
    use crate::ledger::segment::load;
    let (_d, ledger) = setup(1 << 20);
    let mut n = 0;
    while ledger.ledger().segment_set().expect("set").numbers.len() < 2 {
        // A long output now and then: a frame longer than one read's window.
        let long = if n % 97 == 0 {
            "y".repeat(9000)
        } else {
            "short".into()
        };
        ledger
            .ledger()
            .append(&turn(&format!("t{n:06}"), "s", &"x".repeat(300), &long))
            .expect("append");
        n += 1;
    }
    let path = ledger.ledger().segment_path(1);
    let seg = load(&path, 1, true, 0).expect("load");
    let mut all = Vec::new();
    seg.frames(0, |fr| {
        all.push((fr.offset, fr.seq, fr.len, fr.kind, fr.payload.to_vec()))
    });
    assert!(all.len() > 2000, "{} frames", all.len());
    // Sparse is for few frames of a large segment, not for reading every one.
    assert!(seg.sparse(all.len()).is_none());
    let same = |s: &mut crate::ledger::segment::Sparse<'_>, i: usize| {
        let fr = s.frame_at(all[i].0).expect("an intact frame");
        let got = (fr.offset, fr.seq, fr.len, fr.kind, fr.payload.to_vec());
        assert_eq!(got, all[i], "frame {i}");
    };
    // One reader for many frames in order (windows reused and refilled), and a fresh one
    // per frame; the first, the last and every long frame among them.
    // A segment gives one positioned reader per process; each of these is a first.
    fn fresh(
        seg: &crate::ledger::segment::SegmentData,
    ) -> Option<crate::ledger::segment::Sparse<'_>> {
        seg.forget_positioned_reads();
        seg.sparse(1)
    }
    let mut s = fresh(&seg).expect("sparse for one frame");
    let picks: Vec<usize> = (0..all.len())
        .filter(|&i| i % 7 == 0 || all[i].2 > 4096 || i + 1 == all.len())
        .collect();
    for &i in &picks {
        same(&mut s, i);
        same(&mut fresh(&seg).expect("sparse"), i);
    }
    // Offsets no frame starts at, or past the end: declined, for the map to explain.
    let end = all.last().map(|f| f.0 + f.2).expect("frames");
    assert!(fresh(&seg).expect("sparse").frame_at(end).is_none());
    assert!(fresh(&seg)
        .expect("sparse")
        .frame_at(all[5].0 + 3)
        .is_none());
    // A damaged payload on disk: declined (its checksum fails), not returned.
    let (at, _, len, _, _) = all[10];
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    use std::os::unix::fs::FileExt;
    file.write_all_at(b"Z", at + len / 2).expect("write");
    assert!(fresh(&seg).expect("sparse").frame_at(at).is_none());
    same(&mut fresh(&seg).expect("sparse"), 11);
    // Without forgetting: the process's second positioned read of the segment is declined.
    assert!(seg.sparse(1).is_none(), "read through the map");
}

/// A segment is read with positioned reads the first time the process reads its records,
/// then through its map, whose pages the second read faults in (a search after a search in
/// `serve`); a kept segment whose records were not read yet is still read positioned.
#[test]
fn a_segment_the_process_reads_again_is_read_through_its_map() {
    use crate::index::Part;
    let (d, ledger) = setup(1 << 20);
    let mut n = 0;
    while ledger.ledger().segment_set().expect("set").numbers.len() < 3 {
        ledger
            .ledger()
            .append(&turn(&format!("t{n:06}"), "s", &"x".repeat(300), "out"))
            .expect("append");
        n += 1;
    }
    let sealed = |parts: &[Part]| -> Vec<bool> {
        parts
            .iter()
            .filter_map(|p| match p {
                Part::Indexed { seg, .. } if seg.bytes().len() > 1 << 19 => {
                    Some(seg.sparse(1).is_some())
                }
                _ => None,
            })
            .collect()
    };
    // The first plan builds the indexes (and keeps neither them nor their segments).
    assert_eq!(
        sealed(ledger.plan().expect("plan").parts()),
        vec![true, true]
    );
    // The second keeps them; nothing is read.
    ledger.plan().expect("plan");
    let first = sealed(ledger.plan().expect("plan").parts());
    assert_eq!(
        first,
        vec![true, true],
        "first reads of kept segments are positioned"
    );
    let again = sealed(ledger.plan().expect("plan").parts());
    assert_eq!(
        again,
        vec![false, false],
        "segments read before are read through the map"
    );
    // Another process (a fresh ledger) starts over.
    let other = Reader::open(ledger.ledger().dir(), &d.path().join("lock"), 1 << 20);
    assert_eq!(
        sealed(other.plan().expect("plan").parts()),
        vec![true, true]
    );
}
