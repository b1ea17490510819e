//! Reads through the indexes give exactly what a walk of the whole ledger gives.

use std::collections::{BTreeMap, HashSet};
use std::fs;

use super::read::tests::setup;
use super::Section;
use super::{day_of, Reader};
use crate::ledger::record::*;
use crate::ledger::{Entry, Ledger, Record, RecordView, Walked};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random history: turns of several sessions begun, given output and ended one record per
/// append (so they cross segment boundaries), rewinds, attachments, notes.
struct History {
    rng: Rng,
    open: Vec<(String, String)>,
    all: Vec<(String, String)>,
    step: usize,
    /// Coordinators' turns: open turns' workers end subtasks (with usage their turn's end
    /// reports too), and some turns are interrupted (their end reports no usage).
    subtasks: bool,
    /// What each open turn handed its workers so far.
    handed: BTreeMap<String, Usage>,
}

impl History {
    fn new(seed: u64) -> History {
        History {
            rng: Rng(seed),
            open: Vec::new(),
            all: Vec::new(),
            step: 0,
            subtasks: false,
            handed: BTreeMap::new(),
        }
    }

    fn append(&mut self, ledger: &Reader, steps: usize) {
        for _ in 0..steps {
            let record = self.record();
            ledger.ledger().append_lazy(&[record]).expect("append");
        }
    }

    /// Every turn id begun so far.
    fn ids(&self) -> Vec<String> {
        self.all.iter().map(|(id, _)| id.clone()).collect()
    }

    fn record(&mut self) -> Record {
        let sessions = ["main", "b", "c.d"];
        let step = self.step;
        let at = 1_700_000_000_000 + (step as i64) * 3_600_000 * 5;
        if self.subtasks && !self.open.is_empty() && self.rng.below(3) == 0 {
            self.step += 1;
            return self.subtask_or_end(at);
        }
        let (rng, open, all) = (&mut self.rng, &mut self.open, &mut self.all);
        let handed = &mut self.handed;
        self.step += 1;
        match rng.below(10) {
            0..=2 => {
                // Mostly ids as the runtime makes them (16 hex digits); some shorter, some
                // longer and sharing their first 16 bytes with another, some whose 16th byte
                // falls inside a character, some ending in a 0 byte (hidden by a key's
                // padding): turns are keyed by their first 16 bytes.
                let id = match rng.below(8) {
                    0 => format!("t{step}"),
                    1 if !all.is_empty() => format!("{}-{step}", all[rng.below(all.len())].0),
                    2 => format!("ééééééé{step:03}é"),
                    3 => format!("z{step}\0"),
                    _ => format!("{:016x}", rng.next()),
                };
                let session = sessions[rng.below(3)].to_string();
                open.push((id.clone(), session.clone()));
                all.push((id.clone(), session.clone()));
                Record::TurnBegun(TurnBegun {
                    turn: id,
                    session,
                    agent: ["a", "b"][rng.below(2)].into(),
                    mode: "single".into(),
                    request: format!("request {step}"),
                    inline_context: vec![],
                    attachments: vec![],
                    retry_of: None,
                    pid: 1,
                    at,
                    schema: None,
                })
            }
            3..=4 if !open.is_empty() => {
                let (turn, _) = open[rng.below(open.len())].clone();
                Record::AgentOutput(AgentOutput {
                    turn,
                    agent: "a".into(),
                    text: format!("output {step}"),
                    at,
                })
            }
            5..=6 if !open.is_empty() => {
                let (turn, session) = open.remove(rng.below(open.len()));
                let mut usage = Usage {
                    prompt_tokens: rng.below(100) as u64,
                    completion_tokens: rng.below(100) as u64,
                    calls: 1,
                    complete: rng.below(5) != 0,
                };
                if let Some(h) = handed.remove(&turn) {
                    usage.add(&h);
                }
                Record::TurnEnded(TurnEnded {
                    turn,
                    session,
                    state: TurnState::Completed,
                    error: None,
                    usage,
                    at,
                })
            }
            7 if !all.is_empty() => {
                let (target, session) = all[rng.below(all.len())].clone();
                Record::RewindBoundary(RewindBoundary {
                    session,
                    agent: "a".into(),
                    target,
                    at,
                })
            }
            8 => Record::AttachmentAdded(AttachmentAdded {
                reference: format!("{:016x}", rng.next()),
                session: sessions[rng.below(3)].into(),
                name: "f".into(),
                media_type: "text/plain".into(),
                size: 1,
                scope: AttachmentScope::Session,
                object: "o".into(),
                text_object: None,
                text_truncated: false,
                at,
            }),
            _ => Record::SessionCreated(SessionCreated {
                session: sessions[rng.below(3)].into(),
                at,
            }),
        }
    }
}

fn random_ledger(seed: u64, steps: usize, limit: u64) -> (tempfile::TempDir, Reader, Vec<String>) {
    let (dir, ledger) = setup(limit);
    let mut history = History::new(seed);
    history.append(&ledger, steps);
    let ids = history.ids();
    (dir, ledger, ids)
}

fn positions(w: &Walked) -> Vec<(u64, u64)> {
    w.entries
        .iter()
        .map(|e| (e.pos.segment, e.pos.offset))
        .collect()
}

impl History {
    /// A worker's ended subtask of an open turn, or the end of an open turn: what its
    /// workers were handed and more (of its coordinator's own calls), or no usage at all
    /// (interrupted).
    fn subtask_or_end(&mut self, at: i64) -> Record {
        let rng = &mut self.rng;
        let (turn, session) = self.open[rng.below(self.open.len())].clone();
        let mut usage = Usage {
            prompt_tokens: rng.below(100) as u64,
            completion_tokens: rng.below(100) as u64,
            calls: 1 + rng.below(2) as u32,
            complete: rng.below(5) != 0,
        };
        let handed = self.handed.entry(turn.clone()).or_insert(Usage::ZERO);
        if rng.below(3) != 0 {
            handed.add(&usage);
            return Record::SubtaskEnded(SubtaskEnded {
                turn,
                session,
                coordinator: "a".into(),
                subtask: format!("s{}", rng.below(3)),
                worker: ["w1", "w2", "adhoc"][rng.below(3)].into(),
                state: TurnState::Completed,
                error: None,
                output: Bounded::default(),
                usage,
                at,
            });
        }
        usage.add(handed);
        let interrupted = rng.below(4) == 0;
        self.handed.remove(&turn);
        self.open.retain(|(t, _)| *t != turn);
        Record::TurnEnded(TurnEnded {
            turn,
            session,
            state: TurnState::Completed,
            error: None,
            usage: if interrupted {
                Usage {
                    complete: false,
                    ..Usage::ZERO
                }
            } else {
                usage
            },
            at,
        })
    }
}

/// What a session read must return, by the definition: records that name the session, and
/// records of its turns (begun earlier in the ledger).
fn session_by_walk(ledger: &Reader, session: &str) -> Walked {
    let mut turns: HashSet<Vec<u8>> = HashSet::new();
    ledger
        .ledger()
        .walk(&mut |v: RecordView<'_>| {
            let of = v.session() == Some(session.as_bytes());
            if v.kind() == Some(Kind::TurnBegun) && of {
                turns.insert(v.turn().unwrap_or_default().to_vec());
                return true;
            }
            of || v.turn().is_some_and(|t| turns.contains(t))
        })
        .expect("walk")
}

fn index_files(ledger: &Reader) -> usize {
    fs::read_dir(ledger.index_dir()).map_or(0, |d| d.count())
}

/// Session, turn and attachment reads give what a walk of the whole ledger gives.
fn assert_reads_equal_walk(ledger: &Reader, ids: &[String], what: &str) {
    for session in ["main", "b", "c.d", "none"] {
        let got = ledger.read_session(session).expect("read");
        let want = session_by_walk(ledger, session);
        assert_eq!(positions(&got), positions(&want), "{what} {session}");
        assert_eq!(got.damaged.len(), want.damaged.len(), "{what} {session}");
    }
    // Two ids of each shape the history makes (see `History::record`).
    let shape = |id: &str| match id {
        _ if id.starts_with('t') => 0,
        _ if id.contains('é') => 1,
        _ if id.contains('-') => 2,
        _ if id.ends_with('\0') => 3,
        _ => 4,
    };
    let mut seen = [0; 5];
    let picked = ids.iter().filter(|id| {
        seen[shape(id)] += 1;
        seen[shape(id)] <= 2
    });
    for id in picked {
        for len in [5, 16, 17, id.len()] {
            let cut = (0..=len.min(id.len()))
                .rev()
                .find(|&i| id.is_char_boundary(i))
                .unwrap_or(0);
            let prefix = &id[..cut];
            let got = ledger.read_turn_prefix(prefix).expect("read");
            let mut want = ledger
                .ledger()
                .walk(&mut |v| {
                    v.kind() == Some(Kind::RewindBoundary)
                        || v.turn().is_some_and(|t| t.starts_with(prefix.as_bytes()))
                })
                .expect("walk");
            ledger.complete_rewinds(&mut want).expect("complete");
            assert_eq!(positions(&got), positions(&want), "{what} {prefix}");
        }
        let one: HashSet<Vec<u8>> = [id.as_bytes().to_vec()].into_iter().collect();
        let got = ledger.read_turns(&one).expect("read");
        let want = ledger
            .ledger()
            .walk(&mut |v| v.turn() == Some(id.as_bytes()))
            .expect("walk");
        assert_eq!(positions(&got), positions(&want), "{what} {id}");
        assert!(!got.entries.is_empty(), "{what} {id}");
    }
    let got = ledger.read_attachments().expect("read");
    let want = ledger
        .ledger()
        .walk(&mut |v| matches!(v.kind(), Some(Kind::SessionCreated | Kind::AttachmentAdded)))
        .expect("walk");
    assert_eq!(positions(&got), positions(&want), "{what}");
}

#[test]
fn session_turn_and_attachment_reads_equal_a_full_walk() {
    for seed in 1..=12u64 {
        let (_d, ledger, ids) = random_ledger(seed * 7919, 120, 700);
        assert!(ledger.ledger().segment_numbers().expect("segments").len() > 5);
        for round in 0..2 {
            assert_reads_equal_walk(&ledger, &ids, &format!("seed {seed}"));
            assert!(ledger
                .read_session("main")
                .expect("read")
                .damaged
                .is_empty());
            // The first round built the indexes; the second reads them from disk.
            assert!(round == 1 || index_files(&ledger) > 0);
        }
    }
}

type SessionRows = BTreeMap<String, (u64, Option<i64>, Option<i64>)>;
type UsageRows = BTreeMap<(String, String, i64), (u64, Usage)>;

/// Summaries computed from every record, by the definition: a turn's usage, less what its
/// workers' ended subtasks report (unless its end reports no usage at all), in the row of
/// its agent on the day it began; each worker's in its own row on the day its subtask
/// ended, the turn counted once per worker.
fn summaries_by_walk(entries: &[Entry]) -> (SessionRows, UsageRows) {
    let mut sessions: BTreeMap<String, (u64, Option<i64>, Option<i64>)> = BTreeMap::new();
    let mut usage: BTreeMap<(String, String, i64), (u64, Usage)> = BTreeMap::new();
    let mut turns: BTreeMap<String, (String, String, i64, Option<Usage>)> = BTreeMap::new();
    let mut handed: BTreeMap<String, Usage> = BTreeMap::new();
    let mut worked: HashSet<(String, String)> = HashSet::new();
    for e in entries {
        let Some(r) = &e.record else { continue };
        if let (Some(s), Some(at)) = (r.session(), r.at()) {
            let row = sessions.entry(s.to_owned()).or_default();
            row.1 = row.1.or(Some(at));
            row.2 = Some(row.2.map_or(at, |l| l.max(at)));
        }
        match r {
            Record::TurnBegun(b) => {
                sessions.entry(b.session.clone()).or_default().0 += 1;
                turns.insert(
                    b.turn.clone(),
                    (b.session.clone(), b.agent.clone(), day_of(b.at), None),
                );
            }
            Record::TurnEnded(x) => {
                if let Some(t) = turns.get_mut(&x.turn) {
                    t.3 = t.3.or(Some(x.usage));
                }
            }
            Record::SubtaskEnded(x) => {
                let Some(t) = turns.get(&x.turn).filter(|t| t.3.is_none()) else {
                    continue;
                };
                let row = usage
                    .entry((t.0.clone(), x.worker.clone(), day_of(x.at)))
                    .or_insert((0, Usage::ZERO));
                if worked.insert((x.turn.clone(), x.worker.clone())) {
                    row.0 += 1;
                }
                row.1.add(&x.usage);
                handed
                    .entry(x.turn.clone())
                    .or_insert(Usage::ZERO)
                    .add(&x.usage);
            }
            _ => {}
        }
    }
    let none = Usage {
        complete: false,
        ..Usage::ZERO
    };
    for (turn, (s, a, d, u)) in turns {
        let row = usage.entry((s, a, d)).or_insert((0, Usage::ZERO));
        row.0 += 1;
        let mut own = u.unwrap_or(none);
        if let (Some(h), true) = (handed.get(&turn), u.is_some_and(|u| u != none)) {
            own.prompt_tokens -= h.prompt_tokens;
            own.completion_tokens -= h.completion_tokens;
            own.calls -= h.calls;
        }
        row.1.add(&own);
    }
    (sessions, usage)
}

/// The summaries of every session, their usage and one session's give what every record
/// says.
fn assert_summaries_equal_walk(ledger: &Reader, what: &str) {
    let all = ledger.ledger().read_all().expect("read");
    let (want_sessions, want_usage) = summaries_by_walk(&all.entries);
    let got = ledger.summaries(None).expect("summaries");
    let sessions: BTreeMap<String, (u64, Option<i64>, Option<i64>)> = got
        .sessions
        .values()
        .map(|s| (s.session.clone(), (s.turns, s.created_at, s.last_activity)))
        .collect();
    assert_eq!(sessions, want_sessions, "{what}");
    let mut usage: BTreeMap<(String, String, i64), (u64, Usage)> = BTreeMap::new();
    for (s, u) in got.usage.clone() {
        let row = usage.entry((s, u.agent, u.day)).or_insert((0, Usage::ZERO));
        row.0 += u.turns;
        row.1.add(&u.usage);
    }
    for o in &got.open {
        usage
            .entry((o.session.clone(), o.agent.clone(), day_of(o.started_at)))
            .or_insert((0, Usage::ZERO))
            .1
            .complete = false;
    }
    assert_eq!(usage, want_usage, "{what}");
    let one = ledger.summaries(Some("b")).expect("summaries");
    assert_eq!(
        one.sessions.get("b").map(|s| s.turns),
        want_sessions.get("b").map(|s| s.0),
        "{what}"
    );
    // `sessions` (through the cache of the sealed segments' summary, from the second call).
    for _ in 0..2 {
        let listed = ledger.session_summaries().expect("sessions");
        let sessions: SessionRows = listed
            .sessions
            .values()
            .map(|s| (s.session.clone(), (s.turns, s.created_at, s.last_activity)))
            .collect();
        assert_eq!(sessions, want_sessions, "{what}: sessions");
        assert_eq!(listed.open, got.open, "{what}: open turns");
        assert_eq!(listed.damaged, got.damaged, "{what}: damage");
    }
}

/// Workers' ended subtasks (and interrupted turns) among the records: every session's and
/// each session's usage rows are what the records say, whichever segments a coordinator
/// turn's subtasks and end fall in, and nothing is reported as unattributable.
#[test]
fn workers_usage_is_taken_out_of_their_turns_rows_exactly_across_segments() {
    for seed in 1..=8u64 {
        let (_d, ledger) = setup(600);
        let mut history = History::new(seed * 7_919);
        history.subtasks = true;
        history.append(&ledger, 200);
        let all = ledger.ledger().read_all().expect("read");
        // A turn whose subtask ended in another segment than the turn itself.
        let mut ended_in: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for e in &all.entries {
            match &e.record {
                Some(Record::SubtaskEnded(x)) => {
                    ended_in.entry(x.turn.clone()).or_insert((e.pos.segment, 0));
                }
                Some(Record::TurnEnded(x)) => {
                    if let Some(t) = ended_in.get_mut(&x.turn) {
                        t.1 = e.pos.segment;
                    }
                }
                _ => {}
            }
        }
        assert!(
            ended_in.values().any(|(sub, end)| *end > *sub),
            "seed {seed}: no turn crosses a segment"
        );
        let (_, want) = summaries_by_walk(&all.entries);
        for round in 0..2 {
            let what = format!("seed {seed} round {round}");
            assert_summaries_equal_walk(&ledger, &what);
            for session in ["main", "b", "c.d"] {
                let got = ledger.summaries(Some(session)).expect("summaries");
                assert!(got.damaged.is_empty(), "{what}: {:?}", got.damaged);
                let mut rows: UsageRows = BTreeMap::new();
                for (s, u) in got.usage {
                    let row = rows.entry((s, u.agent, u.day)).or_insert((0, Usage::ZERO));
                    row.0 += u.turns;
                    row.1.add(&u.usage);
                }
                for o in &got.open {
                    rows.entry((o.session.clone(), o.agent.clone(), day_of(o.started_at)))
                        .or_insert((0, Usage::ZERO))
                        .1
                        .complete = false;
                }
                let want: UsageRows = want
                    .iter()
                    .filter(|((s, ..), _)| s == session)
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                assert_eq!(rows, want, "{what}: {session}");
            }
        }
    }
}

/// A subtask ended outside an open turn, or a turn ending with less usage than its workers'
/// subtasks report, is reported with the usage (of its own session only), and counted as
/// its records say: nothing is taken out of a row to hide it.
#[test]
fn usage_that_cannot_be_attributed_exactly_is_reported() {
    let (_d, ledger) = setup(600);
    let usage = |n: u64| Usage {
        prompt_tokens: n,
        completion_tokens: n,
        calls: 1,
        complete: true,
    };
    let begun = |turn: &str| {
        Record::TurnBegun(TurnBegun {
            turn: turn.into(),
            session: "s".into(),
            agent: "lead".into(),
            mode: "coordinator".into(),
            request: "r".into(),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            pid: 1,
            at: 1_700_000_000_000,
            schema: None,
        })
    };
    let subtask = |turn: &str, n: u64| {
        Record::SubtaskEnded(SubtaskEnded {
            turn: turn.into(),
            session: "s".into(),
            coordinator: "lead".into(),
            subtask: "one".into(),
            worker: "w".into(),
            state: TurnState::Completed,
            error: None,
            output: Bounded::default(),
            usage: usage(n),
            at: 1_700_000_000_000,
        })
    };
    let ended = |turn: &str, n: u64| {
        Record::TurnEnded(TurnEnded {
            turn: turn.into(),
            session: "s".into(),
            state: TurnState::Completed,
            error: None,
            usage: usage(n),
            at: 1_700_000_000_000,
        })
    };
    for r in [
        begun("t1"),
        subtask("t1", 5),
        ended("t1", 3),
        subtask("t1", 7),
        subtask("never", 11),
    ] {
        ledger.ledger().append_lazy(&[r]).expect("append");
    }
    for round in 0..2 {
        let got = ledger.summaries(Some("s")).expect("summaries");
        let reasons: Vec<&str> = got.damaged.iter().map(|d| d.reason.as_str()).collect();
        assert_eq!(reasons.len(), 3, "round {round}: {reasons:?}");
        assert!(
            reasons[0].contains("less usage than its workers"),
            "{reasons:?}"
        );
        assert!(reasons[1].contains("outside an open turn"), "{reasons:?}");
        let tokens = |agent: &str| -> u64 {
            got.usage
                .iter()
                .filter(|(_, u)| u.agent == agent)
                .map(|(_, u)| u.usage.prompt_tokens)
                .sum()
        };
        assert_eq!((tokens("lead"), tokens("w")), (3, 5), "round {round}");
        assert!(ledger
            .summaries(Some("other"))
            .expect("summaries")
            .damaged
            .is_empty());
    }
}

#[test]
fn summaries_equal_what_every_record_says() {
    for seed in 1..=12u64 {
        let (_d, ledger, _) = random_ledger(seed * 104_729, 150, 600);
        for _ in 0..2 {
            assert_summaries_equal_walk(&ledger, &format!("seed {seed}"));
        }
    }
}

/// The index of the newest segment's first records (written once a reader walked more than
/// an eighth of a segment of it) and a walk of what was appended since give what a walk of
/// the whole ledger gives: as records are appended, when the index is damaged, when a torn
/// write ends the segment, and when the segment lost bytes the index describes (a power
/// loss before they were synced).
#[test]
fn the_newest_segment_is_read_through_the_index_of_its_first_records() {
    let (dir, ledger) = setup(16_000);
    let mut ledger = ledger;
    let mut history = History::new(4242);
    let newest_index = |ledger: &Reader| {
        let n = *ledger
            .ledger()
            .segment_numbers()
            .expect("ls")
            .last()
            .expect("one");
        (
            ledger.ledger().segment_path(n),
            ledger.index_dir().join(crate::layout::index_file_name(n)),
        )
    };
    let reopen = || Reader::open(&dir.path().join("l"), &dir.path().join("lock"), 16_000);
    let mut indexed = 0;
    for round in 0..40 {
        history.append(&ledger, 9);
        let what = format!("round {round}");
        let (segment, index) = newest_index(&ledger);
        match round {
            12 | 25 if index.exists() => {
                // A flipped byte in the postings, past the head.
                let mut bytes = fs::read(&index).expect("read");
                let n = bytes.len();
                bytes[n - 40] ^= 0x10;
                fs::write(&index, bytes).expect("write");
            }
            18 => {
                // A torn write at the end, left by a crashed appender.
                use std::io::Write;
                let mut f = fs::OpenOptions::new()
                    .append(true)
                    .open(&segment)
                    .expect("open");
                f.write_all(&[0x40, 0, 0, 0, 7, 7]).expect("write");
            }
            30 if index.exists() => {
                // The segment lost its last bytes, which the index describes.
                let len = fs::metadata(&segment).expect("stat").len();
                let f = fs::OpenOptions::new()
                    .write(true)
                    .open(&segment)
                    .expect("open");
                f.set_len(len - 5).expect("truncate");
            }
            _ => {}
        }
        indexed += usize::from(index.exists());
        for _ in 0..2 {
            assert_reads_equal_walk(&ledger, &history.ids(), &what);
            assert_summaries_equal_walk(&ledger, &what);
        }
        if matches!(round, 18 | 30) {
            // The next appender cuts what is torn.
            ledger = reopen();
        }
    }
    assert!(
        indexed > 20,
        "the newest segment was indexed in {indexed} of 40 rounds"
    );
}

#[test]
fn a_missing_stale_or_damaged_index_is_rebuilt_silently() {
    let (_d, ledger, _) = random_ledger(99, 150, 600);
    let want = positions(&ledger.read_session("main").expect("read"));
    // Each read as another process's: this one keeps the indexes it has checked.
    let read = || {
        let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 600);
        positions(&fresh.read_session("main").expect("read"))
    };
    let dir = ledger.index_dir();
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(files.len() > 3);
    // Damage every byte position class: head, a section, the end; truncate one; delete one.
    let mut bytes = fs::read(&files[0]).expect("read");
    bytes[10] ^= 1;
    fs::write(&files[0], &bytes).expect("write");
    let mut bytes = fs::read(&files[1]).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 0x40;
    fs::write(&files[1], &bytes).expect("write");
    let bytes = fs::read(&files[2]).expect("read");
    fs::write(&files[2], &bytes[..bytes.len() / 2]).expect("write");
    fs::remove_file(&files[3]).expect("rm");
    assert_eq!(read(), want);
    assert_eq!(read(), want);
    // A stale index: one built for another segment's bytes.
    fs::copy(&files[4], &files[5]).expect("cp");
    assert_eq!(read(), want);
    fs::remove_dir_all(&dir).expect("rm -r");
    assert_eq!(read(), want);
    assert!(index_files(&ledger) > 3, "rebuilt");
}

#[test]
fn a_process_keeps_the_sealed_segments_it_has_read_until_one_is_replaced() {
    let (_d, ledger, _) = random_ledger(17, 150, 600);
    // The first read builds the indexes (and keeps none: they are on its heap), the second
    // maps and checks their files and keeps them: a third opens none.
    let want = positions(&ledger.read_session("main").expect("read"));
    assert_eq!(ledger.sealed_memo.entries().len(), 0);
    assert_eq!(positions(&ledger.read_session("main").expect("read")), want);
    let sealed = ledger.ledger().segment_set().expect("set").numbers.len() - 1;
    assert_eq!(ledger.sealed_memo.entries().len(), sealed);
    fs::remove_dir_all(ledger.index_dir()).expect("rm -r");
    assert_eq!(positions(&ledger.read_session("main").expect("read")), want);
    assert!(sealed > 3, "{sealed} sealed segments");
    let newest = ledger.ledger().segment_set().expect("set").numbers.len() as u64;
    let written: Vec<String> = fs::read_dir(ledger.index_dir())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| {
            *name != crate::layout::index_file_name(newest) && name != super::places::PLACES_CACHE
        })
        .collect();
    assert!(
        written.is_empty(),
        "only the newest segment's index and the places cache may be written again: {written:?}"
    );
    // A segment put in place of another (a restore, here a damaged copy) is read anew.
    let path = ledger.ledger().segment_path(2);
    let mut bytes = fs::read(&path).expect("read");
    bytes[crate::ledger::HEADER_LEN + 30] ^= 0x08;
    let copy = path.with_extension("copy");
    fs::write(&copy, bytes).expect("write");
    fs::rename(&copy, &path).expect("rename");
    let got = ledger.read_session("main").expect("read");
    assert_eq!(got.damaged.len(), 1, "{:?}", got.damaged);
    assert_eq!(got.damaged[0].path, path);
}

/// A process keeps the newest segment's indexed prefix and its index between reads, and
/// opens them again once another process replaced the index (rebuilt as the segment grew)
/// or the file was written in place: every read still gives what a walk gives.
#[test]
fn a_process_keeps_the_newest_segments_index_until_it_is_replaced() {
    use std::os::unix::fs::MetadataExt;
    let (dir, ledger) = setup(1 << 20);
    let other = Reader::open(&dir.path().join("l"), &dir.path().join("lock"), 1 << 20);
    let mut history = History::new(99);
    let newest = || ledger.index_dir().join(crate::layout::index_file_name(1));
    let inode = || fs::metadata(newest()).ok().map(|m| m.ino() as i64);
    let kept = |ledger: &Reader| {
        let newest = ledger.sealed_memo.newest();
        newest.as_ref().map(|(k, _, _)| k.index_inode as i64)
    };
    // Appended and read until a reader indexes the first records of the (only) segment.
    while inode().is_none() {
        history.append(&ledger, 200);
        ledger.read_session("main").expect("read");
    }
    assert_reads_equal_walk(&ledger, &history.ids(), "first");
    assert_eq!(kept(&ledger), inode());
    // Another process walks past what the index covers and indexes the segment again.
    let first = inode();
    while inode() == first {
        history.append(&other, 200);
        other.read_session("main").expect("read");
    }
    assert_eq!(ledger.ledger().segment_set().expect("set").numbers, vec![1]);
    assert_reads_equal_walk(&ledger, &history.ids(), "after the other");
    assert_eq!(kept(&ledger), inode());
    // Written in place (damage): a stamp that changed opens the file again.
    let mut bytes = fs::read(newest()).expect("read");
    for b in &mut bytes[64..] {
        *b ^= 0x5a;
    }
    fs::write(newest(), bytes).expect("write");
    assert_reads_equal_walk(&ledger, &history.ids(), "damaged in place");
}

/// A dropped ledger unmaps the segments and indexes it kept, unless it was opened for a
/// process about to exit (then the kernel unmaps them at exit).
#[test]
fn a_dropped_ledger_unmaps_what_it_kept_unless_the_process_is_about_to_exit() {
    let mapped = |path: &std::path::Path| {
        let maps = fs::read_to_string("/proc/self/maps").expect("maps");
        maps.contains(path.to_str().expect("utf-8"))
    };
    let (_d, ledger, _) = random_ledger(23, 150, 600);
    let (seg, index) = (ledger.ledger().segment_path(1), ledger.index_path(1));
    let (dir, lock) = (
        ledger.ledger().dir().to_owned(),
        ledger.ledger().lock_path().to_owned(),
    );
    drop(ledger);
    for leave_mapped in [false, true] {
        let ledger = Reader::new(
            Ledger::open(&dir, &lock, 600),
            super::IndexOptions {
                leave_mapped,
                ..Default::default()
            },
        );
        for _ in 0..2 {
            ledger.read_session("main").expect("read");
        }
        assert!(mapped(&seg) && mapped(&index), "kept and mapped");
        drop(ledger);
        assert_eq!(
            mapped(&seg) && mapped(&index),
            leave_mapped,
            "left mapped: {leave_mapped}"
        );
    }
}

#[test]
fn damage_in_an_indexed_segment_is_reported_by_every_read() {
    let (_d, ledger, _) = random_ledger(5, 150, 600);
    let path = ledger.ledger().segment_path(2);
    let mut bytes = fs::read(&path).expect("read");
    bytes[crate::ledger::HEADER_LEN + 30] ^= 0x08;
    fs::write(&path, bytes).expect("write");
    for _ in 0..2 {
        for session in ["main", "b", "c.d"] {
            let got = ledger.read_session(session).expect("read");
            assert_eq!(got.damaged.len(), 1, "{session}: {:?}", got.damaged);
            assert_eq!(got.damaged[0].path, path);
        }
        assert_eq!(ledger.summaries(None).expect("summaries").damaged.len(), 1);
        assert_eq!(ledger.read_turn_prefix("0").expect("read").damaged.len(), 1);
    }
}

/// The turns whose searchable text really matches `re` (what `history --search` keeps).
fn matching_turns(w: &Walked, re: &regex::Regex) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for e in &w.entries {
        let Some(r) = &e.record else { continue };
        let Some(turn) = r.turn() else { continue };
        let mut hit = false;
        super::terms::searchable(r, |text| hit |= re.is_match(text));
        if hit {
            out.insert(turn.to_owned());
        }
    }
    out
}

const VOCABULARY: &[&str] = &[
    "Ledger",
    "agent",
    "TIMEOUT",
    "time-out",
    "straße",
    "ÄRGER",
    "Kelvin",
    "\u{212A}elvin",
    "σίσυφος",
    "ΣΊΣΥΦΟΣ",
    "naïve",
    "x86_64",
    "42",
    "e-mail",
    "foo.bar",
    "日本語",
    "emoji🙂ok",
];

/// Words of the vocabulary with random separators.
fn random_text(rng: &mut Rng) -> String {
    let seps = [" ", ", ", "-", "\n", ": ", "/"];
    let mut text = String::new();
    for _ in 0..8 {
        text.push_str(VOCABULARY[rng.below(VOCABULARY.len())]);
        text.push_str(seps[rng.below(seps.len())]);
    }
    text
}

/// Turns with a record of every kind (tool calls, bounded outputs, plans, warnings...),
/// each free-text field a random text, across many segments: a search through the term
/// indexes keeps exactly the turns the scan keeps.
#[test]
fn search_through_the_term_indexes_equals_the_scan_over_random_queries() {
    let (_d, ledger) = setup(6000);
    let mut rng = Rng(0x5eed);
    let mut texts = Vec::new();
    for i in 0..120 {
        let id = format!("{:016x}", rng.next());
        let session = ["s", "t"][i % 2];
        let records =
            crate::ledger::samples::turn_of_every_kind(&id, session, i as i64, &mut || {
                // A word of its own: a query for it finds exactly the field it is in.
                let text = format!("{}marker{}", random_text(&mut rng), texts.len());
                texts.push(text.clone());
                text
            });
        for r in records {
            ledger.ledger().append_lazy(&[r]).expect("append");
        }
    }
    assert!(ledger.ledger().segment_numbers().expect("segments").len() > 4);
    let mut queries: Vec<String> = vec![
        "timeout".into(),
        "TIME-OUT".into(),
        "kelvin".into(),
        "KELVIN".into(),
        "σίσυφος".into(),
        "Straße".into(),
        "x86".into(),
        "86_6".into(),
        "-".into(),
        ", ".into(),
        "e-mail, ".into(),
        "ledger agent".into(),
        "日本".into(),
        "🙂".into(),
        "nowhere".into(),
    ];
    // Every field of every kind, by the word of its own.
    queries.extend((0..texts.len()).step_by(3).map(|n| format!("marker{n}")));
    for _ in 0..150 {
        // A piece of a text, cut at random characters.
        let t: Vec<char> = texts[rng.below(texts.len())].chars().collect();
        let a = rng.below(t.len());
        let b = (a + 1 + rng.below(14)).min(t.len());
        let mut q: String = t[a..b].iter().collect();
        if rng.below(3) == 0 {
            q = q.to_uppercase();
        }
        queries.push(q);
    }
    for q in queries {
        let bytes = crate::search::Matcher::new(&q).expect("matcher");
        let re = regex::RegexBuilder::new(&regex::escape(&q))
            .case_insensitive(true)
            .build()
            .expect("regex");
        let searcher = crate::search::Searcher::new(&ledger);
        let indexed = searcher.read_matching(&bytes, &q).expect("read");
        let scanned = searcher.read_matching_scan(&bytes).expect("read");
        assert_eq!(
            matching_turns(&indexed, &re),
            matching_turns(&scanned, &re),
            "query {q:?}"
        );
    }
}

/// The records of the turns a search matches, by position.
fn records_of(w: &Walked, turns: &std::collections::BTreeSet<String>) -> Vec<(u64, u64)> {
    w.entries
        .iter()
        .filter(|e| {
            e.record
                .as_ref()
                .and_then(Record::turn)
                .is_some_and(|t| turns.contains(t))
        })
        .map(|e| (e.pos.segment, e.pos.offset))
        .collect()
}

/// The search for `q` through the term indexes and by the scan, and the matcher that keeps
/// a turn (case-sensitive: these queries are in the texts' case).
fn indexed_and_scanned(ledger: &Reader, q: &str) -> (Walked, Walked, regex::Regex) {
    let bytes = crate::search::Matcher::new(q).expect("matcher");
    let re = regex::Regex::new(&regex::escape(q)).expect("regex");
    let searcher = crate::search::Searcher::new(ledger);
    let indexed = searcher.read_matching(&bytes, q).expect("read");
    let scanned = searcher.read_matching_scan(&bytes).expect("read");
    (indexed, scanned, re)
}

/// A search through the term indexes returns every record of a matched turn, as the scan
/// does, when turns span several segments (their begin segments before, their ends after).
#[test]
fn a_search_returns_whole_turns_that_span_segments() {
    for seed in 1..=6u64 {
        let (_d, ledger, _) = random_ledger(seed * 31_337, 200, 500);
        for q in [
            "output 1",
            "request 2",
            "output 4",
            "output",
            "request 17",
            "t 9",
        ] {
            let (indexed, scanned, re) = indexed_and_scanned(&ledger, q);
            let turns = matching_turns(&scanned, &re);
            assert_eq!(matching_turns(&indexed, &re), turns, "seed {seed} {q:?}");
            assert_eq!(
                records_of(&indexed, &turns),
                records_of(&scanned, &turns),
                "seed {seed} {q:?}"
            );
        }
    }
}

/// Whatever byte of an index is flipped, reads give what the walk gives: each section, and
/// each block of the blocked ones, is verified where it is read.
#[test]
fn any_flipped_byte_of_an_index_changes_no_read() {
    let (_d, ledger, ids) = random_ledger(8, 200, 900);
    assert_reads_equal_walk(&ledger, &ids, "built");
    let path = ledger.index_dir().join(crate::layout::index_file_name(2));
    // Each read as another process's (a process keeps the indexes it has verified).
    each_flipped_byte(&path, 150, 0x04, |what| {
        let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 900);
        assert_reads_equal_walk(&fresh, &ids, what);
        // Searches read the term maps, the words and their sorted suffixes.
        assert_searches_equal_scan(&fresh, &["utpu", "quest", "output 4", "put"], what);
    });
}

/// Whatever byte of an index is flipped, the sessions and usage it summarises are the
/// walk's: the session and usage rows are verified block by block where they are read.
#[test]
fn any_flipped_byte_of_an_index_changes_no_summary() {
    let (_d, ledger, _) = random_ledger(9, 200, 900);
    assert_summaries_equal_walk(&ledger, "built");
    let path = ledger.index_dir().join(crate::layout::index_file_name(2));
    each_flipped_byte(&path, 150, 0x10, |what| {
        let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 900);
        assert_summaries_equal_walk(&fresh, what);
    });
}

/// Flips bit `mask` of about `samples` bytes spread over the file at `path`, one byte at a
/// time (the last flip is left in place), and runs `check` after each, naming the byte.
fn each_flipped_byte(path: &std::path::Path, samples: usize, mask: u8, check: impl Fn(&str)) {
    let good = fs::read(path).expect("read");
    let step = (good.len() / samples).max(1);
    for at in (0..good.len()).step_by(step) {
        let mut bad = good.clone();
        bad[at] ^= mask;
        fs::write(path, &bad).expect("write");
        check(&format!("byte {at} of {}", good.len()));
    }
}

/// The cache of the sealed segments' session summaries is used only while it describes
/// their indexes: damaged, from another ledger, or left behind by a rebuilt index, it
/// changes no listing.
#[test]
fn the_sessions_cache_changes_no_listing() {
    let (_d, ledger, _) = random_ledger(21, 200, 900);
    assert_summaries_equal_walk(&ledger, "built");
    let path = ledger.index_dir().join(super::summary::SESSIONS_CACHE);
    assert!(path.exists(), "the cache is written");
    each_flipped_byte(&path, 100, 0x02, |what| {
        assert_summaries_equal_walk(&ledger, what)
    });
    // Another ledger's cache.
    let (_o, other, _) = random_ledger(22, 200, 900);
    other.session_summaries().expect("sessions");
    fs::copy(
        other.index_dir().join(super::summary::SESSIONS_CACHE),
        &path,
    )
    .expect("cp");
    assert_summaries_equal_walk(&ledger, "another ledger's cache");
    // An index rebuilt (from the same segment, now damaged): the cache no longer describes it.
    let seg = ledger.ledger().segment_path(3);
    let mut bytes = fs::read(&seg).expect("read");
    bytes[crate::ledger::HEADER_LEN + 20] ^= 0x01;
    fs::write(&seg, bytes).expect("write");
    ledger.forget_index(3);
    let listed = ledger.session_summaries().expect("sessions");
    assert_eq!(listed.damaged.len(), 1, "{:?}", listed.damaged);
    assert_summaries_equal_walk(&ledger, "damaged segment");
}

#[test]
fn fsck_names_an_index_of_another_format_version() {
    let (_d, ledger, _) = random_ledger(5, 150, 700);
    ledger.read_session("main").expect("read");
    assert!(ledger.check_indexes(false).expect("check").is_empty());
    let path = ledger.index_dir().join(crate::layout::index_file_name(2));
    let mut bytes = fs::read(&path).expect("read");
    let version = super::format::VERSION - 1;
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    fs::write(&path, &bytes).expect("write");
    let findings = ledger.check_indexes(false).expect("check");
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0]
            .message
            .contains(&format!("index in format {version}, not {}", version + 1)),
        "{findings:?}"
    );
    // Damage elsewhere is still damage.
    bytes[8..12].copy_from_slice(&(version + 1).to_le_bytes());
    bytes[20] ^= 1;
    fs::write(&path, &bytes).expect("write");
    let findings = ledger.check_indexes(false).expect("check");
    assert!(findings[0].message.contains("damaged"), "{findings:?}");
}

#[test]
fn a_word_inside_or_at_the_end_of_words_is_found_in_the_sorted_suffixes() {
    use super::terms::{needs, Need};
    let (_d, ledger) = setup(1 << 20);
    let words = [
        "needle",
        "haystackneedle",
        "needlework",
        "xneedlex",
        "ééneedle",
        "needleneedle",
        "eedle",
        "straßenadel",
        "other",
    ];
    for (i, w) in words.iter().enumerate() {
        for r in super::read::tests::turn(&format!("{i:016x}"), "s", w, "ok") {
            ledger.ledger().append_lazy(&[r]).expect("append");
        }
    }
    let seg = ledger.ledger().load_segment(1).expect("load");
    let (bytes, _) = super::Builder::from_segment(&seg)
        .expect("build")
        .finish(&seg, &[]);
    let index = super::Index::from_built(bytes.clone()).expect("index");
    // Every word's records are in their turn's postings: the index names turn rows.
    let turns_of = |values: Vec<u32>| -> Vec<usize> {
        let mut out: Vec<usize> = values
            .into_iter()
            .map(|v| {
                assert_ne!(v & super::TURN_POSTING, 0, "a record offset: {v}");
                let turn = index.turn_id(v & !super::TURN_POSTING).expect("turn");
                let offsets = index.turn_offsets(&turn).expect("offsets");
                assert_eq!(
                    index
                        .turn_offsets_at(u64::from(v & !super::TURN_POSTING))
                        .expect("row"),
                    offsets
                );
                usize::from_str_radix(std::str::from_utf8(&turn).expect("utf-8"), 16).expect("id")
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    for q in [
        "needle", "eedl", "e", "dle", "é", "éneedle", "ßenadel", "x", "nothing",
    ] {
        for need in [
            Need::Inside(q.into()),
            Need::Suffix(q.into()),
            Need::Prefix(q.into()),
            Need::Exact(q.into()),
        ] {
            let holds = |w: &str| match need {
                Need::Inside(_) => w.contains(q),
                Need::Suffix(_) => w.ends_with(q),
                Need::Prefix(_) => w.starts_with(q),
                Need::Exact(_) => w == q,
            };
            let want: Vec<usize> = (0..words.len()).filter(|&i| holds(words[i])).collect();
            let got = index.candidates(std::slice::from_ref(&need), 100);
            assert_eq!(
                turns_of(got.expect("read").expect("narrowed")),
                want,
                "{need:?}"
            );
        }
    }
    // A one-word query is a word inside words; too many words holding it: `None`.
    assert_eq!(needs("eedl"), Some(vec![Need::Inside("eedl".into())]));
    let few = index
        .candidates(&[Need::Inside("e".into())], 1)
        .expect("read");
    assert_eq!(few, None);
    // Any byte of the words' maps, the words and their suffixes flipped: a lookup that
    // reads it finds the index damaged, else answers as before.
    let needs_all: Vec<Need> = ["needle", "eedl", "dle", "é", "ßenadel", "x", "oth"]
        .iter()
        .flat_map(|q| [Need::Inside(q.to_string()), Need::Suffix(q.to_string())])
        .collect();
    let want: Vec<_> = needs_all
        .iter()
        .map(|n| {
            index
                .candidates(std::slice::from_ref(n), 100)
                .expect("read")
        })
        .collect();
    for s in [Section::TermsFst, Section::TermBytes, Section::TermSuffixes] {
        for at in index.file.span(s as usize) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            let damaged = super::Index::from_built(bad).expect("index");
            for (n, want) in needs_all.iter().zip(&want) {
                if let Ok(got) = damaged.candidates(std::slice::from_ref(n), 100) {
                    assert_eq!(&got, want, "{s:?} byte {at} flipped: {n:?}");
                }
            }
        }
    }
}

/// A session read opens only the sealed segments the places cache names for it (and the
/// last one), and gives what a walk gives however the cache is: missing, damaged, another
/// ledger's, or stale because segments were sealed or replaced since.
#[test]
fn a_session_read_opens_only_the_segments_that_hold_it() {
    let (d, ledger) = super::read::tests::setup(700);
    // One history (its turn ids are unique), with a session of one short turn and one
    // whose turn stays open across segments.
    let mut history = History::new(29);
    history.append(&ledger, 120);
    ledger
        .ledger()
        .append(&super::read::tests::turn("rare1", "rare", "q", "a"))
        .expect("append");
    let long = super::read::tests::turn("long1", "long", "q", "a");
    ledger.ledger().append(&long[..1]).expect("append");
    history.append(&ledger, 60);
    // Its output, which names no session, alone in a segment.
    ledger.ledger().append(&long[1..2]).expect("append");
    history.append(&ledger, 60);
    ledger.ledger().append(&long[2..]).expect("append");
    history.append(&ledger, 60);
    let sessions = ["main", "b", "c.d", "rare", "long", "none"];
    let check = |ledger: &Reader, what: &str| {
        for session in sessions {
            let got = ledger.read_session(session).expect("read");
            let want = session_by_walk(ledger, session);
            assert_eq!(positions(&got), positions(&want), "{what}: {session}");
            assert_eq!(got.damaged.len(), want.damaged.len(), "{what}: {session}");
            // One session's summary and usage (`usage -s`), as every session's tell it.
            let all = ledger.summaries(None).expect("summaries");
            let one = ledger.summaries(Some(session)).expect("summaries");
            assert_eq!(
                one.sessions.get(session),
                all.sessions.get(session),
                "{what}: {session}"
            );
            let rows = |s: &super::Summaries| {
                let mut rows: Vec<String> = s
                    .usage
                    .iter()
                    .filter(|(name, _)| name == session)
                    .map(|row| format!("{row:?}"))
                    .collect();
                rows.sort();
                rows
            };
            assert_eq!(rows(&one), rows(&all), "{what}: {session}");
            let open =
                |s: &super::Summaries| s.open.iter().filter(|o| o.session == session).count();
            assert_eq!(open(&one), open(&all), "{what}: {session}");
            assert_eq!(one.damaged.len(), want.damaged.len(), "{what}: {session}");
        }
    };
    check(&ledger, "indexes built");
    let path = ledger.index_dir().join(super::places::PLACES_CACHE);
    assert!(path.exists(), "the cache is written");
    let sealed = ledger.ledger().segment_set().expect("set").numbers.len() - 1;
    assert!(sealed > 8, "{sealed} sealed segments");
    // A process reading one session opens its segments and the last sealed one.
    let opened = |session: &str| {
        let fresh = Reader::open(&d.path().join("l"), &d.path().join("lock"), 700);
        let got = positions(&fresh.read_session(session).expect("read"));
        assert_eq!(
            got,
            positions(&session_by_walk(&fresh, session)),
            "{session}"
        );
        let n = fresh.sealed_memo.entries().len();
        n
    };
    assert_eq!(
        opened("none"),
        1,
        "no segment holds it: only the last is opened"
    );
    assert_eq!(opened("rare"), 2, "its segment and the last");
    let long_spans = opened("long");
    assert!(
        (3..sealed).contains(&long_spans),
        "{long_spans} of {sealed}"
    );
    assert_eq!(opened("main"), sealed);
    check(&ledger, "through the cache");
    each_flipped_byte(&path, 60, 0x04, |what| check(&ledger, what));
    // Another ledger's cache.
    let (_o, other, _) = random_ledger(41, 200, 700);
    other.read_session("main").expect("read");
    fs::copy(other.index_dir().join(super::places::PLACES_CACHE), &path).expect("cp");
    check(&ledger, "another ledger's cache");
    fs::remove_file(&path).expect("rm");
    check(&ledger, "rebuilt");
    // Segments sealed since the cache was written; then one replaced by another file.
    ledger
        .ledger()
        .append(&super::read::tests::turn("rare2", "rare", "q", "a"))
        .expect("append");
    history.append(&ledger, 60);
    check(&ledger, "segments sealed since");
    assert_eq!(opened("rare"), 3, "its two segments and the last");
    // A segment put in place of another (here a copy) is another file: the cache no longer
    // describes the segments, and the next reader opens them all and writes it again.
    let seg = ledger.ledger().segment_path(2);
    let copy = seg.with_extension("copy");
    fs::copy(&seg, &copy).expect("cp");
    fs::rename(&copy, &seg).expect("rename");
    let sealed = ledger.ledger().segment_set().expect("set").numbers.len() - 1;
    assert_eq!(opened("rare"), sealed);
    assert_eq!(opened("rare"), 3, "the cache is written again");
    fs::copy(&seg, &copy).expect("cp");
    fs::rename(&copy, &seg).expect("rename");
    ledger.forget_index(2);
    check(&ledger, "a segment replaced");
    assert_eq!(opened("rare"), 3, "the cache is written again");
    // Damage could be anyone's record: every session read reports it.
    let mut bytes = fs::read(&seg).expect("read");
    bytes[crate::ledger::HEADER_LEN + 30] ^= 0x08;
    fs::write(&copy, bytes).expect("write");
    fs::rename(&copy, &seg).expect("rename");
    ledger.forget_index(2);
    for round in ["built", "through the cache"] {
        for session in sessions {
            let got = ledger.read_session(session).expect("read");
            let want = session_by_walk(&ledger, session);
            assert_eq!(positions(&got), positions(&want), "{round}: {session}");
            assert_eq!(
                got.damaged.len(),
                1,
                "{round}: {session}: {:?}",
                got.damaged
            );
        }
    }
    assert_eq!(opened("none"), 2, "the damaged segment and the last");
}

/// With thousands of distinct words in a segment (hundreds of sampled suffixes), a word
/// inside words, at their start or end, finds what the scan finds, and through the index:
/// no search declares the index damaged (which would remove it and scan).
#[test]
fn the_sampled_suffixes_narrow_every_search_to_the_scans_result() {
    let (_d, ledger) = setup(128 << 10);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // Words over few letters share long heads, so many samples tie on their 8 bytes.
    let words: Vec<String> = (0..6000)
        .map(|_| {
            let len = 3 + (next() % 12) as usize;
            (0..len)
                .map(|_| (b'a' + (next() % 5) as u8) as char)
                .collect()
        })
        .collect();
    for batch in 0..150 {
        let mut records = Vec::new();
        for t in batch * 20..batch * 20 + 20 {
            let text: Vec<&str> = (0..12)
                .map(|_| words[(next() % words.len() as u64) as usize].as_str())
                .collect();
            records.extend(super::read::tests::turn(
                &format!("{t:016x}"),
                "s",
                &text.join(" "),
                "ok",
            ));
        }
        ledger.ledger().append(&records).expect("append");
    }
    let sealed = ledger.ledger().segment_set().expect("set").numbers.len() - 1;
    assert!(sealed >= 2, "{sealed} sealed segments");
    ledger.read_session("s").expect("build the indexes");
    // A first search merges the term indexes of whole spans of segments.
    indexed_and_scanned(&ledger, &words[0]);
    let files = || fs::read_dir(ledger.index_dir()).expect("ls").count();
    let built = files();
    for i in 0..100 {
        let w = &words[(next() % words.len() as u64) as usize];
        let (a, b) = ((next() as usize) % w.len(), (next() as usize) % w.len());
        let (a, b) = (a.min(b), a.max(b) + 1);
        let q = match i % 4 {
            0 => &w[a..b],
            1 => &w[a..],
            2 => &w[..b],
            _ => w,
        };
        let (indexed, scanned, re) = indexed_and_scanned(&ledger, q);
        assert_eq!(
            matching_turns(&indexed, &re),
            matching_turns(&scanned, &re),
            "{q:?}"
        );
    }
    assert_eq!(files(), built, "no index was found damaged and removed");
}

/// A build of missing indexes says so before and after (the command line prints it on a
/// terminal; in tests any build is long enough).
#[test]
fn a_long_build_of_the_indexes_is_reported() {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let (_d, ledger, _) = random_ledger(3, 150, 700);
    let dir = ledger.index_dir();
    let _ = fs::remove_dir_all(&dir);
    let fresh = Reader::new(
        Ledger::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 700),
        super::IndexOptions {
            report_builds: Some(|m| SAID.lock().expect("lock").push(m.to_owned())),
            ..Default::default()
        },
    );
    fresh.read_session("main").expect("read");
    let said = SAID.lock().expect("lock").clone();
    let wanted = format!(
        "of the ledger, once: the indexes are kept in {}",
        dir.display()
    );
    let at = said
        .iter()
        .position(|m| m.starts_with("indexing ") && m.contains(&wanted))
        .unwrap_or_else(|| panic!("{said:?}"));
    assert!(
        said[at + 1..].iter().any(|m| m.starts_with("indexed in ")),
        "{said:?}"
    );
}

#[test]
fn an_index_built_with_a_helper_thread_is_the_one_built_alone() {
    let (_d, ledger, _) = random_ledger(23, 1500, 1 << 30);
    let path = ledger.ledger().segment_path(1);
    let build = |helped: bool| {
        let seg = ledger.ledger().load_segment(1).expect("load");
        let from = if helped { 0 } else { usize::MAX };
        let b = super::Builder::from_segment_helped_from(&seg, from).expect("build");
        let intact = b.intact();
        (b.finish(&seg, &[]).0, intact)
    };
    let (alone, intact) = build(false);
    assert!(intact);
    assert_eq!(build(true), (alone, true));
    // A damaged record in the helper's half: neither way indexes its words.
    let mut bytes = fs::read(&path).expect("read");
    let at = bytes.len() / 4;
    bytes[at] ^= 0x5a;
    fs::write(&path, &bytes).expect("write");
    let (alone, intact) = build(false);
    assert!(!intact, "the flipped byte is found");
    assert_eq!(build(true), (alone, false));
}

/// A merged term index gives, for every segment it covers, what that segment's own
/// dictionary gives for any need; searches through them equal the scan.
#[test]
fn merged_term_indexes_give_what_each_segments_dictionary_gives() {
    use super::terms::Need;
    let (_d, ledger, _) = random_ledger(77, 1400, 400);
    let sealed = ledger.ledger().segment_numbers().expect("segments").len() - 1;
    assert!(sealed > 140, "{sealed} sealed segments");
    let plan = ledger.plan().expect("plan");
    let parts = plan.parts();
    let tiers = ledger.tiers_for(parts);
    let spans: Vec<(u64, u64)> = tiers.iter().map(|c| (c.tier.first, c.tier.last)).collect();
    let (mut want, mut f) = (Vec::new(), 1);
    for span in super::tier::SPANS {
        while f + span - 1 <= sealed as u64 {
            want.push((f, f + span - 1));
            f += span;
        }
    }
    assert_eq!(spans, want);
    for (first, last) in &spans {
        let path = ledger
            .index_dir()
            .join(super::tier::file_name(*first, *last));
        assert!(path.exists(), "{path:?}");
    }
    let needs = [
        Need::Exact("output".into()),
        Need::Prefix("out".into()),
        Need::Suffix("put".into()),
        Need::Inside("utp".into()),
        Need::Inside("1".into()),
        Need::Exact("12".into()),
        Need::Prefix("12".into()),
        Need::Suffix("2".into()),
        Need::Inside("23".into()),
        Need::Exact("nowhere".into()),
        Need::Inside("q".into()),
    ];
    for c in &tiers {
        for need in &needs {
            let merged = c.tier.values(need, 100_000).expect("read");
            for k in 0..c.tier.len() {
                let super::Part::Indexed { index, .. } = &parts[c.start + k] else {
                    panic!("not indexed");
                };
                let mut own = index.term_values(need, 100_000).expect("read");
                let mut from_tier = merged.as_ref().map(|m| m[k].clone());
                // A segment's dictionary may name a word twice (as a word start and by a
                // suffix): the postings read are the same.
                for v in own.iter_mut().chain(from_tier.iter_mut()) {
                    v.sort_unstable();
                    v.dedup();
                }
                assert_eq!(
                    from_tier,
                    own,
                    "{need:?} in segment {}",
                    c.tier.first + k as u64
                );
            }
        }
    }
    // A second search opens what the first built; a fresh process too.
    for q in TIER_QUERIES {
        let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 400);
        assert_searches_equal_scan(&fresh, &[q], "a fresh process");
    }
}

/// The searches a test of merged term indexes asks: words, word starts and ends, pieces.
const TIER_QUERIES: [&str; 6] = ["output 1", "request 2", "put", "quest 13", "1", "nowhere"];

/// Searches for each of `queries` through the indexes find the turns the scan finds.
fn assert_searches_equal_scan(ledger: &Reader, queries: &[&str], what: &str) {
    for &q in queries {
        let (indexed, scanned, re) = indexed_and_scanned(ledger, q);
        assert_eq!(
            matching_turns(&indexed, &re),
            matching_turns(&scanned, &re),
            "{what}: {q:?}"
        );
    }
}

/// Whatever byte of a merged term index is flipped, searches find what the scan finds: a
/// damaged one is removed where it is read, and built again by the next search.
#[test]
fn any_flipped_byte_of_a_merged_term_index_changes_no_search() {
    let (_d, ledger, _) = random_ledger(21, 330, 400);
    assert_searches_equal_scan(&ledger, &TIER_QUERIES, "built");
    let path = ledger.index_dir().join(super::tier::file_name(1, 32));
    assert!(path.exists());
    each_flipped_byte(&path, 120, 0x08, |what| {
        let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 400);
        assert_searches_equal_scan(&fresh, &TIER_QUERIES, what);
    });
    fs::write(&path, b"not a merged term index").expect("write");
    let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 400);
    assert_searches_equal_scan(&fresh, &TIER_QUERIES, "junk in its place");
    assert!(
        super::tier::Tier::open(&path).is_some_and(|t| t.verify_all()),
        "built again whole"
    );
}

/// A merged index of other indexes than its segments' (another ledger's, or one left from
/// before an index was rebuilt) is not used: searches build it again; `fsck` names it, and
/// a damaged or misnamed one, and `fsck --repair` leaves none.
#[test]
fn a_stale_or_damaged_merged_term_index_is_rebuilt_and_fsck_names_it() {
    let (_d, ledger, _) = random_ledger(22, 330, 400);
    let (_e, other, _) = random_ledger(23, 330, 400);
    assert_searches_equal_scan(&ledger, &TIER_QUERIES, "built");
    assert_searches_equal_scan(&other, &TIER_QUERIES, "other built");
    assert_eq!(ledger.check_indexes(false).expect("check"), vec![]);
    let name = super::tier::file_name(1, 32);
    let path = ledger.index_dir().join(&name);
    let good = fs::read(&path).expect("read");
    fs::copy(other.index_dir().join(&name), &path).expect("copy");
    let findings = ledger.check_indexes(false).expect("check");
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].message.contains("stale"), "{findings:?}");
    let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 400);
    assert_searches_equal_scan(&fresh, &TIER_QUERIES, "another ledger's");
    assert_eq!(fs::read(&path).expect("read"), good, "built again");
    // Damaged, misnamed, and a stray name: named; repaired.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    fs::write(&path, &bad).expect("write");
    fs::copy(
        &path,
        ledger.index_dir().join(super::tier::file_name(2, 33)),
    )
    .expect("copy");
    let findings = ledger.check_indexes(false).expect("check");
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(findings.len(), 2, "{messages:?}");
    assert!(messages[0].contains("fails its checksum"), "{messages:?}");
    assert!(messages[1].contains("not the span"), "{messages:?}");
    let repaired = ledger.check_indexes(true).expect("repair");
    assert_eq!(repaired.len(), 2, "{repaired:?}");
    assert!(repaired[0].message.ends_with("removed, and built again"));
    assert_eq!(ledger.check_indexes(false).expect("check"), vec![]);
    assert_eq!(fs::read(&path).expect("read"), good);
    assert!(!ledger
        .index_dir()
        .join(super::tier::file_name(2, 33))
        .exists());
}

/// The newest segment is never in a merged index (its index is rebuilt as it grows), and a
/// span whose segments are not all sealed is not merged.
#[test]
fn only_sealed_segments_are_merged() {
    let (_d, ledger, _) = random_ledger(24, 120, 400);
    let sealed = ledger.ledger().segment_numbers().expect("segments").len() as u64 - 1;
    assert_searches_equal_scan(&ledger, &TIER_QUERIES, "built");
    let plan = ledger.plan().expect("plan");
    let parts = plan.parts();
    let tiers = ledger.tiers_for(parts);
    assert!(!tiers.is_empty());
    assert!(tiers.iter().all(|c| c.tier.last <= sealed), "{sealed}");
    let last = tiers.iter().map(|c| c.tier.last).max().unwrap_or(0);
    assert!(sealed - last < super::tier::SPANS[1], "{sealed} {last}");
}

/// As segments are sealed, a process that searched keeps merging: when a span of 32 fills,
/// its merged index replaces those of 4 inside it, on disk and among what it keeps mapped.
#[test]
fn a_full_span_of_32_replaces_the_spans_of_4_inside_it() {
    let (_d, ledger) = setup(400);
    let mut history = History::new(25);
    while ledger.ledger().segment_numbers().expect("segments").len() < 14 {
        history.append(&ledger, 10);
    }
    assert_searches_equal_scan(&ledger, &TIER_QUERIES, "some spans of 4");
    let spans = |l: &Reader| -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = l
            .tier_memo
            .kept()
            .iter()
            .map(|t| (t.first, t.last))
            .collect();
        v.sort();
        v
    };
    assert_eq!(spans(&ledger), vec![(1, 4), (5, 8), (9, 12)]);
    while ledger.ledger().segment_numbers().expect("segments").len() < 38 {
        history.append(&ledger, 10);
    }
    assert_searches_equal_scan(&ledger, &TIER_QUERIES, "a span of 32");
    assert_eq!(spans(&ledger)[0], (1, 32));
    assert!(spans(&ledger).iter().skip(1).all(|&(first, _)| first > 32));
    for f in [1, 5, 9] {
        let small = ledger.index_dir().join(super::tier::file_name(f, f + 3));
        assert!(!small.exists(), "{small:?}");
    }
}

/// An index in the format before (which left the words of `ToolFinished` records out) is
/// rebuilt by the next read, and a word only a tool's output holds is found.
#[test]
fn an_index_of_an_earlier_format_is_rebuilt_and_finds_tool_output() {
    let (_d, ledger) = setup(900);
    for i in 0..40 {
        let id = format!("{i:016x}");
        let mut n = 0;
        let word = if i == 7 { "zanzibar" } else { "elsewhere" };
        let records = crate::ledger::samples::turn_of_every_kind(&id, "s", i, &mut || {
            n += 1;
            format!("text {n} of turn {i}")
        });
        for mut r in records {
            if let Record::ToolFinished(f) = &mut r {
                f.output.inline = format!("the output names {word}");
            }
            ledger.ledger().append_lazy(&[r]).expect("append");
        }
    }
    assert!(ledger.ledger().segment_numbers().expect("segments").len() > 3);
    let found = |ledger: &Reader| {
        let (indexed, scanned, re) = indexed_and_scanned(ledger, "zanzibar");
        let turns = matching_turns(&indexed, &re);
        assert_eq!(turns, matching_turns(&scanned, &re));
        turns.len()
    };
    assert_eq!(found(&ledger), 1);
    let path = ledger.index_dir().join(crate::layout::index_file_name(1));
    assert_eq!(
        super::format::version_of(&path),
        Some(super::format::VERSION)
    );
    let mut bytes = fs::read(&path).expect("read");
    bytes[8..12].copy_from_slice(&(super::format::VERSION - 1).to_le_bytes());
    fs::write(&path, &bytes).expect("write");
    let fresh = Reader::open(ledger.ledger().dir(), ledger.ledger().lock_path(), 900);
    assert_eq!(found(&fresh), 1);
    assert_eq!(
        super::format::version_of(&path),
        Some(super::format::VERSION),
        "rebuilt in the current format"
    );
}

/// The section table is the file format: its order and its blocks are pinned here (see
/// FORMAT.md); changing either is a new [`super::format::VERSION`].
#[test]
fn the_section_table_is_the_format() {
    let names: Vec<String> = Section::ALL.iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(
        names,
        [
            "Meta",
            "SessionsFst",
            "TermsFstParts",
            "PostingsBlocks",
            "TermPostingsBlocks",
            "TurnRowsBlocks",
            "TurnKeysBlocks",
            "TermBytesBlocks",
            "TermSuffixesBlocks",
            "SessionRowsBlocks",
            "UsageRowsBlocks",
            "TermSuffixSamples",
            "SessionRows",
            "TurnKeys",
            "TurnRows",
            "Postings",
            "UsageRows",
            "Rewinds",
            "Always",
            "TermsFst",
            "TermPostings",
            "TermBytes",
            "TermSuffixes",
        ]
    );
    assert_eq!(Section::COUNT, 23);
    let mut blocked = Section::BLOCKED.to_vec();
    blocked.sort_unstable();
    // (section, its block checksums, block size), as the format had them by hand.
    assert_eq!(
        blocked,
        [
            (12, 9, 4096),
            (13, 6, 512),
            (14, 5, 4096),
            (15, 3, 4096),
            (16, 10, 4096),
            (20, 4, 4096),
            (21, 7, 512),
            (22, 8, 512),
        ]
    );
}

/// The cache tokens and cost of `UsageCost` records go to the row they name (agent, the
/// day of `counted_at`), whatever segment they fall in, and each once: the rows' sum is the
/// records' sum, with the index built, read from disk, and for the newest segment alone.
#[test]
fn usage_cost_records_count_in_the_rows_they_name() {
    let (_d, ledger) = setup(600);
    let day = 86_400_000;
    let mut want: BTreeMap<(String, String, i64), UsageDetail> = BTreeMap::new();
    for i in 0..40u32 {
        let turn = format!("{i:016x}");
        let session = ["main", "b"][i as usize % 2].to_string();
        let at = 1_700_000_000_000 + i64::from(i) * day / 3;
        let mut records = vec![Record::TurnBegun(TurnBegun {
            turn: turn.clone(),
            session: session.clone(),
            agent: "lead".into(),
            mode: "single".into(),
            request: "r".repeat(40),
            inline_context: vec![],
            attachments: vec![],
            retry_of: None,
            schema: None,
            pid: 1,
            at,
        })];
        let detail = |n: u32| UsageDetail {
            calls: n,
            cache_write_tokens: u64::from(n) * 10,
            cache_read_tokens: u64::from(n) * 100,
            priced_calls: n.min(1),
            cost_nanos: u64::from(n) * 7,
        };
        let mut cost = |agent: &str, subtask: Option<String>, counted_at, d: UsageDetail| {
            want.entry((session.clone(), agent.to_owned(), day_of(counted_at)))
                .or_default()
                .add(&d);
            Record::UsageCost(UsageCost {
                turn: turn.clone(),
                session: session.clone(),
                agent: agent.into(),
                subtask,
                counted_at,
                detail: d,
                at: counted_at,
            })
        };
        // A worker's subtask ends the next day; the turn's own calls count on its first.
        records.push(cost("worker", Some("s1".into()), at + day, detail(i % 3)));
        records.push(Record::TurnEnded(TurnEnded {
            turn: turn.clone(),
            session: session.clone(),
            state: TurnState::Completed,
            error: None,
            usage: Usage::ZERO,
            at: at + day,
        }));
        records.push(cost("lead", None, at, detail(i % 4 + 1)));
        // One record per append: the turn's records fall in several segments.
        for r in records {
            ledger.ledger().append_lazy(&[r]).expect("append");
        }
    }
    for round in 0..2 {
        let got = ledger.summaries(None).expect("summaries");
        let mut rows: BTreeMap<(String, String, i64), UsageDetail> = BTreeMap::new();
        for (s, u) in got.usage {
            if u.detail != UsageDetail::default() {
                rows.entry((s, u.agent, u.day)).or_default().add(&u.detail);
            }
        }
        want.retain(|_, d| *d != UsageDetail::default());
        assert_eq!(rows, want, "round {round}");
        assert!(index_files(&ledger) > 1 || round == 0);
    }
}
