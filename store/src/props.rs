//! Property tests: every decoder of the store meets arbitrary and damaged bytes without
//! panicking, and what it accepts round-trips.
//!
//! Cases per property: `AXOCOATL_PROPTEST_CASES` (`scripts/soak.sh` runs hundreds of
//! thousands), else [`DEFAULT_CASES`]; the property that touches files runs a two-hundredth of
//! that. Test names start with `props_` so that `cargo test -p axocoatl-store props` runs
//! exactly them.

use proptest::prelude::*;

use crate::checkpoint::{decode_envelope, encode_envelope};
use crate::ledger::frame::{self, encode_frame, parse_at_with, resync, SegmentHeader};
use crate::ledger::record::*;
use crate::ledger::{Damage, Record, RecordView, SegmentData, HEADER_LEN};

/// Cases per property in the normal test run.
pub const DEFAULT_CASES: u32 = 10_000;

fn cases() -> u32 {
    std::env::var("AXOCOATL_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

fn config(divisor: u32) -> ProptestConfig {
    ProptestConfig {
        cases: (cases() / divisor).max(1),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn bounded(s: &str) -> Bounded {
    Bounded {
        inline: s.into(),
        object: Some("ab".repeat(32)),
        len: s.len() as u64,
    }
}

/// One record of every kind, with every optional field set.
pub(crate) fn samples() -> Vec<Record> {
    let pin = AttachmentPin {
        reference: "r1".into(),
        name: "notes.md".into(),
        media_type: "text/markdown".into(),
        size: 12,
        object: "cd".repeat(32),
        text_object: Some("ef".repeat(32)),
    };
    vec![
        SessionCreated {
            session: "main".into(),
            at: 1,
        }
        .into(),
        TurnBegun {
            turn: "0123456789abcdef".into(),
            session: "main".into(),
            agent: "helper".into(),
            mode: "single".into(),
            request: "hello ünïcode".into(),
            inline_context: vec![InlineContext {
                label: "stdin".into(),
                text: bounded("piped"),
            }],
            attachments: vec![pin],
            retry_of: Some("fedcba9876543210".into()),
            pid: 42,
            at: -5,
            schema: None,
        }
        .into(),
        TurnEnded {
            turn: "t".into(),
            session: "main".into(),
            state: TurnState::Stopped,
            error: Some("boom".into()),
            usage: Usage {
                prompt_tokens: 1,
                completion_tokens: 2,
                calls: 3,
                complete: false,
            },
            at: i64::MAX,
        }
        .into(),
        AgentOutput {
            turn: "t".into(),
            agent: "a".into(),
            text: "out".into(),
            at: 0,
        }
        .into(),
        ToolStarted {
            turn: "t".into(),
            agent: "a".into(),
            call_id: "c".into(),
            name: "read_file".into(),
            arguments: bounded("{}"),
            at: 0,
        }
        .into(),
        ToolResult {
            turn: "t".into(),
            agent: "a".into(),
            call_id: "c".into(),
            name: "read_file".into(),
            is_error: true,
            output: bounded("no such file"),
            at: 0,
        }
        .into(),
        ModelCall {
            turn: "t".into(),
            agent: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            reserved_tokens: 100,
            prompt_tokens: Some(3),
            completion_tokens: None,
            finish_reason: Some("stop".into()),
            at: 0,
        }
        .into(),
        StopRequested {
            turn: "t".into(),
            session: "main".into(),
            pid: 1,
            at: 0,
        }
        .into(),
        RewindBoundary {
            session: "main".into(),
            agent: "a".into(),
            target: "t".into(),
            at: 0,
        }
        .into(),
        Warning {
            turn: Some("t".into()),
            session: "main".into(),
            code: "w".into(),
            message: "careful".into(),
            at: 0,
        }
        .into(),
        AttachmentAdded {
            reference: "r".into(),
            session: "main".into(),
            name: "n".into(),
            media_type: "image/png".into(),
            size: 1,
            scope: AttachmentScope::Session,
            object: "ab".repeat(32),
            text_object: None,
            text_truncated: true,
            at: 0,
        }
        .into(),
        AttachmentRemoved {
            reference: "r".into(),
            session: "main".into(),
            at: 0,
        }
        .into(),
        AttachmentConsumed {
            reference: "r".into(),
            session: "main".into(),
            turn: "t".into(),
            at: 0,
        }
        .into(),
        LegacyImportBegun {
            session: "main".into(),
            agent: "a".into(),
            source: "checkpoints/main%3aa/7.json".into(),
            digest: "ab".repeat(32),
            format: "json".into(),
            turns: 3,
            at: 0,
        }
        .into(),
        LegacyImportEnded {
            session: "main".into(),
            agent: "a".into(),
            digest: "ab".repeat(32),
            turns: 3,
            at: 0,
        }
        .into(),
        Note { text: "n".into() }.into(),
    ]
}

/// A byte string and ways to damage it.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Zero(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..40)
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..64).prop_map(|(i, n)| Mutation::Zero(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            Mutation::Flip(i, x) => {
                if !bytes.is_empty() {
                    bytes[i % len] ^= x;
                }
            }
            Mutation::Truncate(i) => bytes.truncate(i % (len + 1)),
            Mutation::Insert(i, b) => {
                let at = i % (bytes.len() + 1);
                bytes.splice(at..at, b.iter().copied());
            }
            Mutation::Zero(i, n) => {
                let at = i % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes[at..end].fill(0);
                }
            }
        }
    }
}

/// A valid segment holding `payloads` as notes, sample records and raw kinds.
fn segment(number: u64, base: u64, records: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut data = SegmentHeader {
        number,
        base_seq: base,
    }
    .encode()
    .to_vec();
    for (i, (kind, payload)) in records.iter().enumerate() {
        encode_frame(&mut data, base + 1 + i as u64, *kind, payload).expect("encode");
    }
    data
}

fn records() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
    let samples: Vec<(u16, Vec<u8>)> = samples()
        .into_iter()
        .map(|r| (r.kind(), r.encode_body(Vec::new()).expect("encode")))
        .collect();
    let n = samples.len();
    proptest::collection::vec(
        prop_oneof![
            (0..n).prop_map(move |i| samples[i].clone()),
            (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..64)),
        ],
        0..8,
    )
}

/// Walks a segment's bytes every way the readers do; checks what they deliver is sound.
fn walk_everything(data: &[u8], sealed: bool, probe: usize) {
    let seg = SegmentData::from_bytes(1, data.to_vec(), sealed);
    let _ = seg.header();
    let mut last_end = 0u64;
    let mut damage_at = Vec::new();
    seg.frames_all(
        0,
        |fr| {
            assert!(fr.offset >= last_end, "frames in order");
            last_end = fr.offset + fr.len;
            assert!(
                seg.payload_ok(&fr),
                "a verified walk delivers intact frames"
            );
            let _ = seg.entry(&fr);
        },
        |d| {
            let offset = match d {
                Damage::TornTail { offset, .. }
                | Damage::Corrupt { offset, .. }
                | Damage::DamagedTail { offset, .. } => offset,
            };
            damage_at.push(offset);
        },
    );
    assert!(damage_at.windows(2).all(|w| w[0] < w[1]), "{damage_at:?}");
    let _ = seg.frames(0, |fr| assert!(seg.payload_ok(&fr)));
    let _ = seg.frames_unverified(0, |fr| {
        if seg.payload_ok(&fr) {
            let _ = seg.checked_entry(&fr);
        } else {
            assert!(seg.checked_entry(&fr).is_err());
        }
    });
    let _ = seg.frame_at(probe.min(data.len()) as u64);
    let _ = seg.frames(probe as u64, |_| {});
}

proptest! {
    #![proptest_config(config(1))]

    #[test]
    fn props_segment_header_decodes_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        number in any::<u64>(),
        base in any::<u64>(),
    ) {
        if let Ok(h) = SegmentHeader::decode(&bytes) {
            prop_assert_eq!(&h.encode()[16..32], &bytes[16..32]);
        }
        let h = SegmentHeader { number, base_seq: base };
        prop_assert_eq!(SegmentHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn props_frame_parse_meets_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        offset in 0usize..700,
    ) {
        for verify in [true, false] {
            if let frame::Parsed::Frame(f) = parse_at_with(&bytes, offset, verify) {
                prop_assert!(offset + f.len <= bytes.len());
                let _ = frame::payload_ok(&bytes, offset, f.payload.len());
                if verify {
                    let mut again = Vec::new();
                    encode_frame(&mut again, f.seq, f.kind, f.payload).expect("encode");
                    prop_assert_eq!(&again[..], &bytes[offset..offset + f.len]);
                }
            }
        }
        if let Some(at) = resync(&bytes, offset) {
            prop_assert!(at >= offset);
            let parsed_ok = matches!(parse_at_with(&bytes, at, true), frame::Parsed::Frame(_));
            prop_assert!(parsed_ok);
        }
    }

    #[test]
    fn props_damaged_segments_walk_without_panicking(
        records in records(),
        mutations in proptest::collection::vec(mutation(), 0..4),
        sealed in any::<bool>(),
        probe in 0usize..2000,
    ) {
        let mut data = segment(1, 0, &records);
        apply(&mut data, &mutations);
        walk_everything(&data, sealed, probe);
    }

    #[test]
    fn props_intact_records_survive_damage_elsewhere(
        before in records(),
        after in records(),
        junk in proptest::collection::vec(any::<u8>(), 1..80),
    ) {
        // Damage between two runs of intact frames: every frame after it is still read.
        let first = segment(1, 0, &before);
        let second = segment(1, before.len() as u64, &after);
        let mut data = first;
        data.extend_from_slice(&junk);
        data.extend_from_slice(&second[HEADER_LEN..]);
        let seg = SegmentData::from_bytes(1, data, true);
        let mut seqs = Vec::new();
        seg.frames_all(0, |fr| seqs.push(fr.seq), |_| {});
        let tail: Vec<u64> = (before.len() as u64 + 1..=(before.len() + after.len()) as u64).collect();
        prop_assert!(seqs.ends_with(&tail), "{:?} does not end with {:?}", seqs, tail);
        prop_assert!(seqs.starts_with(&(1..=before.len() as u64).collect::<Vec<_>>()));
    }

    #[test]
    fn props_records_decode_arbitrary_payloads(
        kind in 0u16..40,
        payload in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        if let Ok(Some(record)) = Record::decode(kind, &payload) {
            prop_assert_eq!(record.kind(), kind);
            let again = record.encode_body(Vec::new()).expect("encode");
            prop_assert_eq!(Record::decode(kind, &again).expect("decode"), Some(record.clone()));
            let _ = record.body_json();
            let _ = (record.turn(), record.session());
        }
    }

    #[test]
    fn props_record_views_read_arbitrary_bodies_in_place(
        tag in 0u16..40,
        body in proptest::collection::vec(any::<u8>(), 0..200),
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        let view = RecordView::new(tag, &body);
        let _ = (view.kind(), view.turn(), view.session(), view.reference(), view.decode());
        // On a real record the fields read in place agree with the decoded record.
        let samples = samples();
        let sample = &samples[which % samples.len()];
        let mut bytes = sample.encode_body(Vec::new()).expect("encode");
        let view = RecordView::new(sample.kind(), &bytes);
        if let Some(turn) = view.turn() {
            prop_assert_eq!(Some(turn), sample.turn().map(str::as_bytes));
        }
        if let Some(session) = view.session() {
            prop_assert_eq!(Some(session), sample.session().map(str::as_bytes));
        }
        apply(&mut bytes, &mutations);
        let view = RecordView::new(sample.kind(), &bytes);
        let _ = (view.turn(), view.session(), view.reference(), view.decode());
    }

    #[test]
    fn props_records_decode_damaged_encodings(
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let samples = samples();
        let sample = &samples[which % samples.len()];
        let mut bytes = sample.encode_body(Vec::new()).expect("encode");
        apply(&mut bytes, &mutations);
        if let Ok(Some(record)) = Record::decode(sample.kind(), &bytes) {
            let again = record.encode_body(Vec::new()).expect("encode");
            prop_assert_eq!(Record::decode(sample.kind(), &again).expect("decode"), Some(record));
        }
    }

    #[test]
    fn props_checkpoint_envelopes_decode_arbitrary_and_damaged_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        if let Ok(p) = decode_envelope(&bytes) {
            prop_assert_eq!(encode_envelope(p), bytes.clone());
        }
        let mut env = encode_envelope(&payload);
        prop_assert_eq!(decode_envelope(&env), Ok(&payload[..]));
        apply(&mut env, &mutations);
        if let Ok(p) = decode_envelope(&env) {
            prop_assert_eq!(encode_envelope(p), env.clone());
        }
    }

    #[test]
    fn props_legacy_checkpoints_decode_arbitrary_and_damaged_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        texts in proptest::collection::vec(("\\PC{0,12}", 0u8..4, proptest::option::of("[a-z0-9]{1,4}")), 0..5),
        saved_at in any::<i64>(),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        use crate::legacy::checkpoint::{self as v0, Message, Role, ToolCall, Transcript};
        let _ = v0::decode_json(&bytes);
        let _ = v0::decode_postcard(&bytes);
        let role = |r: u8| [Role::System, Role::User, Role::Assistant, Role::Tool][usize::from(r)];
        let t = Transcript {
            agent: "main:a".into(),
            saved_at,
            messages: texts
                .into_iter()
                .map(|(content, r, call)| Message {
                    role: role(r),
                    content,
                    tool_calls: call
                        .iter()
                        .map(|id| ToolCall { id: id.clone(), name: "read_file".into(), arguments: "{}".into() })
                        .collect(),
                    tool_call_id: call,
                    name: None,
                })
                .collect(),
        };
        let mut json = v0::encode_json(&t);
        let mut postcard = v0::encode_postcard(&t);
        prop_assert_eq!(v0::decode_json(&json), Ok(t.clone()));
        prop_assert_eq!(v0::decode_postcard(&postcard), Ok(t));
        apply(&mut json, &mutations);
        apply(&mut postcard, &mutations);
        let _ = v0::decode_json(&json);
        if let Ok(t) = v0::decode_postcard(&postcard) {
            prop_assert_eq!(v0::encode_postcard(&t), postcard);
        }
    }

    #[test]
    fn props_core_memory_files_parse_arbitrary_and_damaged_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        blocks in proptest::collection::btree_map("[a-z]{1,8}", "\\PC{0,20}", 0..4),
        mutations in proptest::collection::vec(mutation(), 0..3),
    ) {
        let path = std::path::Path::new("main%3ahelper.json");
        let parse = |b: &[u8]| crate::memory::core::parse(path, b);
        if let Ok(file) = parse(&bytes) {
            let again = serde_json::to_vec(&file).expect("json");
            prop_assert_eq!(parse(&again).expect("parse"), file);
        }
        let file = crate::memory::CoreFile { version: crate::memory::CORE_VERSION, blocks };
        let mut json = serde_json::to_vec_pretty(&file).expect("json");
        prop_assert_eq!(parse(&json).expect("parse"), file);
        apply(&mut json, &mutations);
        if let Ok(file) = parse(&json) {
            let again = serde_json::to_vec(&file).expect("json");
            prop_assert_eq!(parse(&again).expect("parse"), file);
        }
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// A ledger directory of damaged segments: readers, `fsck`, its repair and appends
    /// never panic, and after a repair that leaves `fsck` clean an append works.
    #[test]
    fn props_ledgers_of_damaged_segments_open_check_and_repair(
        segs in proptest::collection::vec((records(), proptest::collection::vec(mutation(), 0..3)), 1..4),
        torn in proptest::option::of(0usize..HEADER_LEN),
    ) {
        let (_dir, repo) = crate::repo::scratch();
        let root = repo.root().to_owned();
        let mut base = 0;
        for (i, (records, mutations)) in segs.iter().enumerate() {
            let mut data = segment(i as u64 + 1, base, records);
            base += records.len() as u64;
            apply(&mut data, mutations);
            std::fs::write(repo.ledger().segment_path(i as u64 + 1), data).expect("write");
        }
        if let Some(n) = torn {
            let header = SegmentHeader { number: segs.len() as u64 + 1, base_seq: base }.encode();
            std::fs::write(repo.ledger().segment_path(segs.len() as u64 + 1), &header[..n]).expect("write");
        }
        let _ = repo.ledger().scan_all().count();
        let _ = repo.ledger().read_all();
        let _ = repo.searcher()
            .read_matching(&crate::search::Matcher::new("n").expect("re"), "n");
        let _ = crate::fsck::check(&repo, false).expect("fsck");
        let repaired = crate::fsck::check(&repo, true).expect("fsck --repair");
        let fresh = crate::Repo::open(&root, &crate::repo::OpenOptions::default()).expect("open");
        let appended = fresh.ledger().append(&[Note { text: "after".into() }.into()]);
        if repaired.is_clean() {
            prop_assert!(appended.is_ok(), "{:?}", appended);
        }
        let _ = fresh.ledger().scan_all().count();
    }
}
