//! The session lock note (`src/session.rs`, written into `run/sessions/*.lock` and read by
//! every process that looks for orphaned turns) meets arbitrary bytes without panicking,
//! and what it accepts round-trips. The store's own decoders have theirs in
//! `store/src/props.rs`. Cases: `AXOCOATL_PROPTEST_CASES`, else 10,000.

use axocoatl::session::ActiveNote;
use axocoatl_store::ledger::Position;
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("AXOCOATL_PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn props_lock_notes_decode_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Some(note) = ActiveNote::decode(&text) {
            prop_assert_eq!(ActiveNote::decode(&note.encode()), Some(note));
        }
    }

    #[test]
    fn props_lock_notes_decode_damaged_notes(
        turn in "[0-9a-f]{16}",
        session in "[A-Za-z0-9_.-]{1,20}",
        segment in any::<u64>(),
        offset in any::<u64>(),
        pid in any::<u32>(),
        cut in any::<usize>(),
        flip in any::<(usize, u8)>(),
    ) {
        let note = ActiveNote { turn, session, begin: Position { segment, offset }, pid, waiting: None };
        let text = note.encode();
        prop_assert_eq!(ActiveNote::decode(&text), Some(note));
        let mut bytes = text.into_bytes();
        bytes.truncate(cut % (bytes.len() + 1));
        if !bytes.is_empty() {
            let i = flip.0 % bytes.len();
            bytes[i] ^= flip.1;
        }
        let _ = ActiveNote::decode(&String::from_utf8_lossy(&bytes));
    }
}
