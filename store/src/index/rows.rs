//! The fixed-width rows of a segment's index, each layout in one place: encode and decode
//! side by side, every field at a byte offset in the row.

use super::format::{push_u32, push_u64};
use super::SessionRow;
use crate::ledger::frame::{le_u32, le_u64};
use crate::ledger::record::{Millis, UsageDetail};

/// A fixed-width row of an index section.
pub(crate) trait Row: Sized {
    /// Width in bytes.
    const WIDTH: usize;

    /// Appends the row's [`Row::WIDTH`] bytes to `out`.
    fn encode(&self, out: &mut Vec<u8>);

    /// The row at the start of `bytes`; `None` when they are too short.
    fn decode(bytes: &[u8]) -> Option<Self>;
}

/// The u32 at byte `at` of a row already checked to be long enough.
fn u32_at(row: &[u8], at: usize) -> u32 {
    le_u32(&row[at..at + 4])
}

/// The u64 at byte `at` of a row already checked to be long enough.
fn u64_at(row: &[u8], at: usize) -> u64 {
    le_u64(&row[at..at + 8])
}

/// A `SessionRows` row: where the session's postings and usage rows lie, its turns begun,
/// flags (bit 0: the times are set), first and last activity.
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | first posting | 4..8 postings count | 8..12 turns begun |
/// | 12..16 | first usage row | 16..20 usage rows count | 20..24 flags |
/// | 24..32 | first activity (ms) | 32..40 last activity (ms) |
impl Row for SessionRow {
    const WIDTH: usize = 40;

    fn encode(&self, out: &mut Vec<u8>) {
        push_u32(out, self.post_start);
        push_u32(out, self.post_len);
        push_u32(out, self.turns);
        push_u32(out, self.usage_start);
        push_u32(out, self.usage_len);
        push_u32(out, u32::from(self.first_at.is_some()));
        push_u64(out, self.first_at.unwrap_or(0) as u64);
        push_u64(out, self.last_at.unwrap_or(0) as u64);
    }

    fn decode(bytes: &[u8]) -> Option<SessionRow> {
        let r = bytes.get(..Self::WIDTH)?;
        let has_at = u32_at(r, 20) & 1 != 0;
        Some(SessionRow {
            post_start: u32_at(r, 0),
            post_len: u32_at(r, 4),
            turns: u32_at(r, 8),
            usage_start: u32_at(r, 12),
            usage_len: u32_at(r, 16),
            first_at: has_at.then(|| u64_at(r, 24) as Millis),
            last_at: has_at.then(|| u64_at(r, 32) as Millis),
        })
    }
}

/// A `TurnRows` row: the turn's session (its ordinal among the segment's sessions), where
/// its postings lie, and whether it began in this segment (u32s at bytes 0, 4, 8 and 12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TurnRow {
    pub session: u32,
    pub post_start: u32,
    pub post_len: u32,
    pub begun_here: bool,
}

impl Row for TurnRow {
    const WIDTH: usize = 16;

    fn encode(&self, out: &mut Vec<u8>) {
        push_u32(out, self.session);
        push_u32(out, self.post_start);
        push_u32(out, self.post_len);
        push_u32(out, u32::from(self.begun_here));
    }

    fn decode(bytes: &[u8]) -> Option<TurnRow> {
        let r = bytes.get(..Self::WIDTH)?;
        Some(TurnRow {
            session: u32_at(r, 0),
            post_start: u32_at(r, 4),
            post_len: u32_at(r, 8),
            begun_here: u32_at(r, 12) != 0,
        })
    }
}

/// A `UsageRows` row: the usage of one agent on one day (see [`super::UsageRow`]), as stored
/// (the agent by its number in the index's list of agents).
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | agent | 4..8 turns | 8..12 calls | 12..16 complete (0 or 1) |
/// | 16..24 | day (days since 1970) | 24..32 prompt tokens | 32..40 completion tokens |
/// | 40..44 | calls with cache counts | 44..48 calls with a cost | 48..56 cache write tokens |
/// | 56..64 | cache read tokens | 64..72 cost (billionths of a US dollar) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoredUsage {
    pub agent: u32,
    pub turns: u32,
    pub calls: u32,
    pub complete: bool,
    pub day: i64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub detail: UsageDetail,
}

impl Row for StoredUsage {
    const WIDTH: usize = 72;

    fn encode(&self, out: &mut Vec<u8>) {
        push_u32(out, self.agent);
        push_u32(out, self.turns);
        push_u32(out, self.calls);
        push_u32(out, u32::from(self.complete));
        push_u64(out, self.day as u64);
        push_u64(out, self.prompt_tokens);
        push_u64(out, self.completion_tokens);
        push_u32(out, self.detail.calls);
        push_u32(out, self.detail.priced_calls);
        push_u64(out, self.detail.cache_write_tokens);
        push_u64(out, self.detail.cache_read_tokens);
        push_u64(out, self.detail.cost_nanos);
    }

    fn decode(bytes: &[u8]) -> Option<StoredUsage> {
        let r = bytes.get(..Self::WIDTH)?;
        Some(StoredUsage {
            agent: u32_at(r, 0),
            turns: u32_at(r, 4),
            calls: u32_at(r, 8),
            complete: u32_at(r, 12) != 0,
            day: u64_at(r, 16) as i64,
            prompt_tokens: u64_at(r, 24),
            completion_tokens: u64_at(r, 32),
            detail: UsageDetail {
                calls: u32_at(r, 40),
                priced_calls: u32_at(r, 44),
                cache_write_tokens: u64_at(r, 48),
                cache_read_tokens: u64_at(r, 56),
                cost_nanos: u64_at(r, 64),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `row`, checks its width, decodes it back, and refuses one byte less.
    fn round_trip<R: Row + PartialEq + std::fmt::Debug>(row: R) -> Vec<u8> {
        let mut bytes = vec![0xEE];
        row.encode(&mut bytes);
        let bytes = bytes.split_off(1);
        assert_eq!(bytes.len(), R::WIDTH);
        assert_eq!(R::decode(&bytes), Some(row));
        assert_eq!(R::decode(&bytes[..R::WIDTH - 1]), None);
        bytes
    }

    #[test]
    fn a_session_row_round_trips_at_its_byte_offsets() {
        let row = SessionRow {
            post_start: 1,
            post_len: 2,
            turns: 3,
            usage_start: 4,
            usage_len: 5,
            first_at: Some(6),
            last_at: Some(1 << 40),
        };
        let bytes = round_trip(row);
        assert_eq!(le_u32(&bytes[16..20]), 5);
        assert_eq!(le_u32(&bytes[20..24]), 1);
        assert_eq!(le_u64(&bytes[32..40]), 1 << 40);
        round_trip(SessionRow {
            first_at: None,
            last_at: None,
            ..row
        });
    }

    #[test]
    fn a_turn_row_round_trips_at_its_byte_offsets() {
        let row = TurnRow {
            session: 7,
            post_start: 8,
            post_len: 9,
            begun_here: true,
        };
        let bytes = round_trip(row);
        assert_eq!(le_u32(&bytes[4..8]), 8);
        assert_eq!(le_u32(&bytes[12..16]), 1);
        round_trip(TurnRow {
            begun_here: false,
            ..row
        });
    }

    #[test]
    fn a_usage_row_round_trips_at_its_byte_offsets() {
        let row = StoredUsage {
            agent: 1,
            turns: 2,
            calls: 3,
            complete: true,
            day: 20_000,
            prompt_tokens: 1 << 33,
            completion_tokens: 5,
            detail: UsageDetail {
                calls: 6,
                cache_write_tokens: 7,
                cache_read_tokens: 1 << 34,
                priced_calls: 8,
                cost_nanos: 9,
            },
        };
        let bytes = round_trip(row);
        assert_eq!(le_u64(&bytes[16..24]), 20_000);
        assert_eq!(le_u64(&bytes[24..32]), 1 << 33);
        assert_eq!(le_u32(&bytes[44..48]), 8);
        assert_eq!(le_u64(&bytes[56..64]), 1 << 34);
        assert_eq!(le_u64(&bytes[64..72]), 9);
        round_trip(StoredUsage {
            complete: false,
            day: -1,
            ..row
        });
    }
}
