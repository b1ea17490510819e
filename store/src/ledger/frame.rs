//! Segment headers and record framing.
//!
//! A segment starts with a 40-byte header:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOLEDGR` |
//! | 8..12 | format version (u32 LE) |
//! | 12..16 | header length (u32 LE, 40) |
//! | 16..24 | segment number (u64 LE) |
//! | 24..32 | base sequence: the sequence number of the record before this segment's first |
//! | 32..36 | reserved, zero |
//! | 36..40 | CRC-32C of bytes 0..36 |
//!
//! Then frames, each:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | payload length n (u32 LE) |
//! | 4..12 | sequence number (u64 LE) |
//! | 12..16 | CRC-32C of bytes 0..12 (the header check) |
//! | 16..18 | record kind (u16 LE) |
//! | 18..18+n | postcard payload |
//! | 18+n..22+n | CRC-32C of kind and payload |
//! | 22+n..26+n | frame length 26+n (u32 LE), so the last record is found from the end |

use crate::{Error, Result};

/// CRC-32C (Castagnoli) of `bytes`, by whichever implementation is faster at that length:
/// the SSE 4.2 instruction for short inputs, carry-less multiplication folding (crc-fast)
/// for the rest. Both compute the same function; a test checks they agree.
pub fn crc32c(bytes: &[u8]) -> u32 {
    if bytes.len() < 256 {
        crc32c::crc32c(bytes)
    } else {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
    }
}

pub const MAGIC: &[u8; 8] = b"AXOLEDGR";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 40;
pub const FRAME_OVERHEAD: usize = 26;
/// A record larger than this is refused: large payloads belong in objects.
pub const MAX_PAYLOAD: usize = 16 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub number: u64,
    pub base_seq: u64,
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        h[16..24].copy_from_slice(&self.number.to_le_bytes());
        h[24..32].copy_from_slice(&self.base_seq.to_le_bytes());
        let crc = crc32c(&h[0..36]);
        h[36..40].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Decodes a header; the error string says what is wrong.
    pub fn decode(bytes: &[u8]) -> std::result::Result<SegmentHeader, String> {
        if bytes.len() < HEADER_LEN {
            return Err(format!(
                "segment header is {} bytes, expected {HEADER_LEN}",
                bytes.len()
            ));
        }
        if &bytes[0..8] != MAGIC {
            return Err("not a ledger segment (bad magic)".into());
        }
        if crc32c(&bytes[0..36]) != le_u32(&bytes[36..40]) {
            return Err("segment header checksum mismatch".into());
        }
        let version = le_u32(&bytes[8..12]);
        if version != VERSION {
            return Err(format!(
                "segment format version {version}, this build reads {VERSION}"
            ));
        }
        Ok(SegmentHeader {
            number: le_u64(&bytes[16..24]),
            base_seq: le_u64(&bytes[24..32]),
        })
    }
}

/// Appends one encoded frame to `out`.
pub fn encode_frame(out: &mut Vec<u8>, seq: u64, kind: u16, payload: &[u8]) -> Result<()> {
    if payload.len() > MAX_PAYLOAD {
        return Err(Error::RecordTooLarge {
            size: payload.len(),
            limit: MAX_PAYLOAD,
        });
    }
    let start = out.len();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let hcrc = crc32c(&out[start..start + 12]);
    out.extend_from_slice(&hcrc.to_le_bytes());
    let body_start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(payload);
    let pcrc = crc32c(&out[body_start..]);
    out.extend_from_slice(&pcrc.to_le_bytes());
    out.extend_from_slice(&((FRAME_OVERHEAD + payload.len()) as u32).to_le_bytes());
    Ok(())
}

/// A frame found at some offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub seq: u64,
    pub kind: u16,
    pub payload: &'a [u8],
    pub len: usize,
}

/// What lies at an offset of a segment.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    Frame(Frame<'a>),
    /// Nothing: the end of the data.
    End,
    /// The data ends inside a frame, or only zeros follow: a write that never completed.
    /// At the end of the newest segment this is a torn tail; anywhere else corruption.
    Incomplete,
    /// The frame is the last bytes of the data but fails its checksum: a torn write if it is
    /// the newest segment's last frame.
    BadLast(String),
    /// A frame whose header checksum holds and whose trailer repeats its length, but whose
    /// payload fails its checksum, with more data after it: its bounds are intact, so a walk
    /// reports it and goes on at `len` bytes further.
    BadPayload {
        len: usize,
        reason: String,
    },
    /// Corruption that is followed by more data.
    Corrupt(String),
}

/// Parses the frame at `offset` of `data` (the whole segment, header included).
pub fn parse_at(data: &[u8], offset: usize) -> Parsed<'_> {
    parse_at_with(data, offset, true)
}

/// Like [`parse_at`]; with `verify_payload` false no checksum is computed for a frame whose
/// trailer matches its length, for walks that decode few records and verify those
/// themselves with [`payload_ok`].
pub fn parse_at_with(data: &[u8], offset: usize, verify_payload: bool) -> Parsed<'_> {
    let rest = &data[offset.min(data.len())..];
    if rest.is_empty() {
        return Parsed::End;
    }
    if rest.len() < 16 {
        return Parsed::Incomplete;
    }
    let n = le_u32(&rest[0..4]) as usize;
    let seq = le_u64(&rest[4..12]);
    if !verify_payload {
        // Fast walk: the trailer, 22 + n bytes on, must repeat the frame length, which a
        // damaged length field fails; anything odd is classified by the checked path.
        // [`payload_ok`] checks both checksums of a frame before it is decoded.
        let len = FRAME_OVERHEAD.saturating_add(n);
        if n <= MAX_PAYLOAD && rest.len() >= len && le_u32(&rest[len - 4..len]) as usize == len {
            let body = &rest[16..18 + n];
            return Parsed::Frame(Frame {
                seq,
                kind: le_u16(&body[0..2]),
                payload: &body[2..],
                len,
            });
        }
        return parse_at_with(data, offset, true);
    }
    if crc32c(&rest[0..12]) != le_u32(&rest[12..16]) {
        // A file system may extend a file with zeros when a crash interrupts an append.
        if rest.iter().all(|&b| b == 0) {
            return Parsed::Incomplete;
        }
        return Parsed::Corrupt("frame header checksum mismatch".into());
    }
    if n > MAX_PAYLOAD {
        return Parsed::Corrupt(format!("frame length {n} exceeds the limit"));
    }
    let len = FRAME_OVERHEAD + n;
    if rest.len() < len {
        return Parsed::Incomplete;
    }
    let body = &rest[16..18 + n];
    let pcrc = le_u32(&rest[18 + n..22 + n]);
    let trailer = le_u32(&rest[22 + n..26 + n]) as usize;
    let problem = if verify_payload && crc32c(body) != pcrc {
        Some("record checksum mismatch".to_string())
    } else if trailer != len {
        Some(format!(
            "frame trailer says {trailer} bytes, header says {len}"
        ))
    } else {
        None
    };
    match problem {
        Some(p) if rest.len() == len => Parsed::BadLast(p),
        Some(p) if trailer == len => Parsed::BadPayload { len, reason: p },
        Some(p) => Parsed::Corrupt(p),
        None => Parsed::Frame(Frame {
            seq,
            kind: le_u16(&body[0..2]),
            payload: &body[2..],
            len,
        }),
    }
}

/// The first offset at or after `from` where an intact frame starts (both checksums and the
/// trailer hold): where a walk resumes after damage that broke frame bounds. `None` when no
/// intact frame follows.
pub fn resync(data: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at + FRAME_OVERHEAD <= data.len() {
        let rest = &data[at..];
        // The header checksum first: it rules out almost every offset for 12 bytes of CRC.
        if crc32c(&rest[0..12]) == le_u32(&rest[12..16]) {
            if let Parsed::Frame(_) = parse_at(data, at) {
                return Some(at);
            }
        }
        at += 1;
    }
    None
}

/// Whether the frame at `offset` (which parsed) has an intact header and payload.
pub fn payload_ok(data: &[u8], offset: usize, payload_len: usize) -> bool {
    if crc32c(&data[offset..offset + 12]) != le_u32(&data[offset + 12..offset + 16]) {
        return false;
    }
    let body = &data[offset + 16..offset + 18 + payload_len];
    let pcrc = le_u32(&data[offset + 18 + payload_len..offset + 22 + payload_len]);
    crc32c(body) == pcrc
}

pub fn le_u16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

pub fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[0..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(records: &[&[u8]]) -> Vec<u8> {
        let mut data = SegmentHeader {
            number: 1,
            base_seq: 0,
        }
        .encode()
        .to_vec();
        for (i, r) in records.iter().enumerate() {
            encode_frame(&mut data, i as u64 + 1, 14, r).expect("encode");
        }
        data
    }

    #[test]
    fn both_crc_implementations_agree() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let data: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for len in (0..600).chain([1000, 1024, 4095, 4096, 5000]) {
            for start in [0, 1, 7] {
                let b = &data[start..start + len.min(data.len() - start)];
                assert_eq!(
                    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32,
                    crc32c::crc32c(b),
                    "length {len}, offset {start}"
                );
            }
        }
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn frames_round_trip() {
        let data = segment(&[b"one", b"", b"three"]);
        let mut offset = HEADER_LEN;
        let mut seen = vec![];
        while let Parsed::Frame(f) = parse_at(&data, offset) {
            seen.push((f.seq, f.payload.to_vec()));
            offset += f.len;
        }
        assert_eq!(parse_at(&data, offset), Parsed::End);
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[2], (3, b"three".to_vec()));
    }

    #[test]
    fn every_truncation_of_the_last_frame_is_incomplete_or_badlast() {
        let data = segment(&[b"first", b"second record"]);
        let second = HEADER_LEN + FRAME_OVERHEAD + 5;
        for cut in second + 1..data.len() {
            let p = parse_at(&data[..cut], second);
            assert!(
                matches!(p, Parsed::Incomplete | Parsed::BadLast(_)),
                "cut {cut}: {p:?}"
            );
        }
    }

    #[test]
    fn a_flipped_byte_in_the_middle_is_corruption() {
        let mut data = segment(&[b"first", b"second"]);
        data[HEADER_LEN + 18] ^= 0x40;
        // The payload is damaged but the frame's bounds hold: a walk can go on after it.
        assert!(matches!(
            parse_at(&data, HEADER_LEN),
            Parsed::BadPayload { len, .. } if len == FRAME_OVERHEAD + 5
        ));
        assert_eq!(
            resync(&data, HEADER_LEN + 1),
            Some(HEADER_LEN + FRAME_OVERHEAD + 5)
        );
    }

    #[test]
    fn the_fast_walk_defers_checksums_to_payload_ok() {
        let mut data = segment(&[b"first", b"second"]);
        data[HEADER_LEN + 18] ^= 0x40; // inside the first payload
        let Parsed::Frame(f) = parse_at_with(&data, HEADER_LEN, false) else {
            panic!("the trailer still matches, so the fast walk goes on");
        };
        assert!(!payload_ok(&data, HEADER_LEN, f.payload.len()));
        let second = HEADER_LEN + f.len;
        let Parsed::Frame(g) = parse_at_with(&data, second, false) else {
            panic!("second frame");
        };
        assert!(payload_ok(&data, second, g.payload.len()));
        // A damaged length field fails the trailer check and is classified properly.
        let mut bad = segment(&[b"first", b"second"]);
        bad[HEADER_LEN] ^= 0x01;
        assert!(matches!(
            parse_at_with(&bad, HEADER_LEN, false),
            Parsed::Corrupt(_)
        ));
    }

    #[test]
    fn header_round_trips() {
        let h = SegmentHeader {
            number: 9,
            base_seq: 1234,
        };
        assert_eq!(SegmentHeader::decode(&h.encode()), Ok(h));
        let mut bad = h.encode();
        bad[20] ^= 1;
        assert!(SegmentHeader::decode(&bad).is_err());
    }
}
