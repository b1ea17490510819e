//! The bytes of an index file (`ledger/v1/index/NNNNNNNNNNNN.idx`).
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOINDEX` |
//! | 8..12 | version (u32 LE) |
//! | 12..16 | number of sections n |
//! | 16..24 | segment number |
//! | 24..32 | bytes of the segment indexed (its length when sealed) |
//! | 32..40 | the segment's base sequence |
//! | 40..48 | sequence number of the last record indexed |
//! | 48..56 | offset of the last record indexed (0: none) |
//! | 56..60 | that record's header checksum, as written in the segment |
//! | 60..64 | digest of the turns open when the segment began (carried from the previous one) |
//! | 64..64+20n | per section: offset (u64), length (u64), CRC-32C (u32) |
//! | then 4 | CRC-32C of every byte before it |
//!
//! The first five fields after the count tie the index to the segment bytes it was built
//! from; the digest ties it to the index before it. Each section has its own checksum, so a
//! reader verifies only what it reads; the large lists of offsets also have a checksum per
//! 4 KiB block (per 512 bytes for what a binary search reads: turn keys, words, suffixes),
//! in a section of their own, so that a lookup verifies the blocks it reads and not
//! megabytes of postings (since version 2; version 3 flags the sessions with ended
//! subtasks in their rows; version 4 finds turns by a table of their ids' first bytes;
//! version 5 adds the sorted suffixes of the words, for a query inside or at the end of
//! words; version 6 checks the session and usage rows by block too; version 7 samples the
//! sorted suffixes; version 8 lists turn rows, not records, as the postings of the words).
//! Nothing here is fsynced: an index is a cache, rebuilt from the ledger whenever it is
//! missing, stale or damaged.

use crate::ledger::frame::{crc32c, le_u32, le_u64};

pub const MAGIC: &[u8; 8] = b"AXOINDEX";
pub const VERSION: u32 = 8;
/// Bytes per checksummed block of a blocked section read in runs (postings, rows).
pub const BLOCK: usize = 4096;
/// Bytes per checksummed block of a blocked section read by a binary search, whose probes
/// each land in another block (turn keys, the words and their suffixes).
pub const SMALL_BLOCK: usize = 512;
const FIXED: usize = 64;
const SECTION_ENTRY: usize = 20;

/// What ties an index to its segment (and to the index before it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub segment: u64,
    pub covered: u64,
    pub base_seq: u64,
    pub last_seq: u64,
    pub last_offset: u64,
    pub last_hcrc: u32,
    pub carry_in: u32,
}

/// Assembles an index file from its stamp and sections.
pub fn encode(stamp: &Stamp, sections: &[Vec<u8>]) -> Vec<u8> {
    let head_len = FIXED + SECTION_ENTRY * sections.len() + 4;
    let total = head_len + sections.iter().map(Vec::len).sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    for v in [
        stamp.segment,
        stamp.covered,
        stamp.base_seq,
        stamp.last_seq,
        stamp.last_offset,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&stamp.last_hcrc.to_le_bytes());
    out.extend_from_slice(&stamp.carry_in.to_le_bytes());
    let mut offset = head_len as u64;
    for s in sections {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c(s).to_le_bytes());
        offset += s.len() as u64;
    }
    let crc = crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    for s in sections {
        out.extend_from_slice(s);
    }
    out
}

/// Where a section lies, and its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionRef {
    pub start: usize,
    pub len: usize,
    pub crc: u32,
}

/// The format version index bytes say they are in, when they start like an index.
fn version(bytes: &[u8]) -> Option<u32> {
    let version = bytes.get(8..12)?;
    (&bytes[0..8] == MAGIC).then(|| le_u32(version))
}

/// The format version an index file at `path` says it is in, when it starts like one.
pub fn version_of(path: &std::path::Path) -> Option<u32> {
    use std::io::Read;
    let mut head = [0u8; 12];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    version(&head)
}

/// Reads the head of an index file: its stamp, section table and the head's checksum (which
/// covers every section's checksum, so it names the whole index). `None` when the head is
/// damaged, of another version, or does not describe `expected` sections inside the file.
pub fn decode_head(bytes: &[u8], expected: usize) -> Option<(Stamp, Vec<SectionRef>, u32)> {
    if bytes.len() < FIXED + 4 || version(bytes) != Some(VERSION) {
        return None;
    }
    let n = le_u32(&bytes[12..16]) as usize;
    if n != expected {
        return None;
    }
    let head_len = FIXED + SECTION_ENTRY * n;
    if bytes.len() < head_len + 4 || crc32c(&bytes[..head_len]) != le_u32(&bytes[head_len..]) {
        return None;
    }
    let stamp = Stamp {
        segment: le_u64(&bytes[16..24]),
        covered: le_u64(&bytes[24..32]),
        base_seq: le_u64(&bytes[32..40]),
        last_seq: le_u64(&bytes[40..48]),
        last_offset: le_u64(&bytes[48..56]),
        last_hcrc: le_u32(&bytes[56..60]),
        carry_in: le_u32(&bytes[60..64]),
    };
    let mut sections = Vec::with_capacity(n);
    for i in 0..n {
        let e = &bytes[FIXED + SECTION_ENTRY * i..];
        let start = usize::try_from(le_u64(&e[0..8])).ok()?;
        let len = usize::try_from(le_u64(&e[8..16])).ok()?;
        if start.checked_add(len)? > bytes.len() {
            return None;
        }
        sections.push(SectionRef {
            start,
            len,
            crc: le_u32(&e[16..20]),
        });
    }
    Some((stamp, sections, le_u32(&bytes[head_len..])))
}

/// The CRC-32C of each `block` bytes of `section` (the last one may be shorter), as `u32`s.
pub fn block_crcs(section: &[u8], block: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(section.len().div_ceil(block) * 4);
    for block in section.chunks(block) {
        out.extend_from_slice(&crc32c(block).to_le_bytes());
    }
    out
}

/// A table of fixed-width rows of little-endian `u32`/`u64` fields.
pub struct Rows<'a> {
    bytes: &'a [u8],
    width: usize,
}

impl<'a> Rows<'a> {
    pub fn new(bytes: &'a [u8], width: usize) -> Rows<'a> {
        Rows { bytes, width }
    }

    /// Row `i`, or `None` past the end.
    pub fn row(&self, i: usize) -> Option<&'a [u8]> {
        let start = i.checked_mul(self.width)?;
        self.bytes.get(start..start + self.width)
    }
}

pub fn u32_at(row: &[u8], field: usize) -> u32 {
    le_u32(&row[field * 4..field * 4 + 4])
}

pub fn u64_at(row: &[u8], byte: usize) -> u64 {
    le_u64(&row[byte..byte + 8])
}

pub fn push_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trips_and_any_flipped_byte_is_refused() {
        let stamp = Stamp {
            segment: 3,
            covered: 1000,
            base_seq: 7,
            last_seq: 99,
            last_offset: 900,
            last_hcrc: 0xdead_beef,
            carry_in: 42,
        };
        let sections = vec![b"one".to_vec(), Vec::new(), b"three".to_vec()];
        let bytes = encode(&stamp, &sections);
        let (back, refs, _) = decode_head(&bytes, 3).expect("decodes");
        assert_eq!(back, stamp);
        assert_eq!(&bytes[refs[2].start..refs[2].start + refs[2].len], b"three");
        assert_eq!(refs[2].crc, crc32c(b"three"));
        assert!(decode_head(&bytes, 2).is_none(), "another layout");
        let head_len = FIXED + SECTION_ENTRY * 3 + 4;
        for i in 0..head_len {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_head(&bad, 3).is_none(), "byte {i}");
        }
        for cut in 0..head_len {
            assert!(decode_head(&bytes[..cut], 3).is_none());
        }
    }
}
