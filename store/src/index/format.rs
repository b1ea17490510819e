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
//! sorted suffixes; version 8 lists turn rows, not records, as the postings of the words;
//! version 9 indexes the words of tool results recorded as `ToolFinished` and of bounded
//! agent outputs, which version 8 left out; version 10 gives workers usage rows of their
//! own, out of their coordinators' rows, carries what an open turn handed its workers with
//! it, and drops the flag of version 3; version 11 widens the usage rows with the prompt
//! cache's tokens and the cost of the calls).
//! Nothing here is fsynced: an index is a cache, rebuilt from the ledger whenever it is
//! missing, stale or damaged.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Stale;
use crate::ledger::frame::{crc32c, le_u32, le_u64};

pub const MAGIC: &[u8; 8] = b"AXOINDEX";
pub const VERSION: u32 = 11;
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

/// Bytes of a head's own fields, after its magic, version and section count.
pub const FIELDS: usize = FIXED - 16;

impl Stamp {
    fn fields(&self) -> [u8; FIELDS] {
        let mut out = [0u8; FIELDS];
        for (i, v) in [
            self.segment,
            self.covered,
            self.base_seq,
            self.last_seq,
            self.last_offset,
        ]
        .into_iter()
        .enumerate()
        {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out[40..44].copy_from_slice(&self.last_hcrc.to_le_bytes());
        out[44..48].copy_from_slice(&self.carry_in.to_le_bytes());
        out
    }

    fn of_fields(f: &[u8; FIELDS]) -> Stamp {
        Stamp {
            segment: le_u64(&f[0..8]),
            covered: le_u64(&f[8..16]),
            base_seq: le_u64(&f[16..24]),
            last_seq: le_u64(&f[24..32]),
            last_offset: le_u64(&f[32..40]),
            last_hcrc: le_u32(&f[40..44]),
            carry_in: le_u32(&f[44..48]),
        }
    }
}

/// Assembles an index file from its stamp and sections.
pub fn encode(stamp: &Stamp, sections: &[Vec<u8>]) -> Vec<u8> {
    encode_file(MAGIC, VERSION, &stamp.fields(), sections)
}

/// Assembles a file of sections: `magic`, `version`, the section count, the head's own
/// `fields`, the section table, the head's checksum, then the sections.
pub fn encode_file(
    magic: &[u8; 8],
    version: u32,
    fields: &[u8; FIELDS],
    sections: &[Vec<u8>],
) -> Vec<u8> {
    let mut out = encode_head(magic, version, fields, sections);
    out.reserve(sections.iter().map(Vec::len).sum::<usize>());
    for s in sections {
        out.extend_from_slice(s);
    }
    out
}

/// The head of the file [`encode_file`] assembles: what comes before the sections.
pub fn encode_head(
    magic: &[u8; 8],
    version: u32,
    fields: &[u8; FIELDS],
    sections: &[Vec<u8>],
) -> Vec<u8> {
    let head_len = FIXED + SECTION_ENTRY * sections.len() + 4;
    let mut out = Vec::with_capacity(head_len);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    out.extend_from_slice(fields);
    let mut offset = head_len as u64;
    for s in sections {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c(s).to_le_bytes());
        offset += s.len() as u64;
    }
    let crc = crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Where a section lies, and its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionRef {
    pub start: usize,
    pub len: usize,
    pub crc: u32,
}

/// The format version a file of sections says it is in, when it starts with `magic`.
fn version(bytes: &[u8], magic: &[u8; 8]) -> Option<u32> {
    let version = bytes.get(8..12)?;
    (&bytes[0..8] == magic).then(|| le_u32(version))
}

/// The format version an index file at `path` says it is in, when it starts like one.
pub fn version_of(path: &std::path::Path) -> Option<u32> {
    version_of_file(path, MAGIC)
}

/// The format version a file of sections at `path` says it is in, when it starts with
/// `magic`.
pub fn version_of_file(path: &std::path::Path, magic: &[u8; 8]) -> Option<u32> {
    use std::io::Read;
    let mut head = [0u8; 12];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    version(&head, magic)
}

/// Reads the head of an index file: its stamp, section table and the head's checksum (which
/// covers every section's checksum, so it names the whole index). `None` when the head is
/// damaged, of another version, or does not describe `expected` sections inside the file.
pub fn decode_head(bytes: &[u8], expected: usize) -> Option<(Stamp, Vec<SectionRef>, u32)> {
    let (fields, sections, crc) = decode_file_head(bytes, MAGIC, VERSION, expected)?;
    Some((Stamp::of_fields(&fields), sections, crc))
}

/// [`decode_head`] of a file of sections written by [`encode_file`] with `magic` and
/// `version`: its own fields instead of a stamp.
pub fn decode_file_head(
    bytes: &[u8],
    magic: &[u8; 8],
    version_wanted: u32,
    expected: usize,
) -> Option<([u8; FIELDS], Vec<SectionRef>, u32)> {
    if bytes.len() < FIXED + 4 || version(bytes, magic) != Some(version_wanted) {
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
    let mut fields = [0u8; FIELDS];
    fields.copy_from_slice(&bytes[16..FIXED]);
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
    Some((fields, sections, le_u32(&bytes[head_len..])))
}

/// The bytes of a file of sections: mapped from its file, or built in memory.
#[derive(Debug)]
pub(crate) enum FileBytes {
    Map(memmap2::Mmap),
    Vec(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Map(m) => m,
            FileBytes::Vec(v) => v,
        }
    }
}

impl FileBytes {
    /// The file at `path`, mapped.
    pub fn map(path: &std::path::Path) -> Option<FileBytes> {
        let file = std::fs::File::open(path).ok()?;
        // SAFETY: index files are only ever replaced by rename, never written in place; a
        // damaged one fails its checksums.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
        Some(FileBytes::Map(map))
    }
}

/// A section checked block by block: (the section, the section of its blocks' checksums,
/// the block size).
pub(crate) type Blocked = (usize, usize, usize);

/// Declares the sections of a file in one table, in the order they lie in the file: the
/// enum (whose discriminants are that order, the head's section numbers), `ALL` (every
/// section, in order), `COUNT`, and `BLOCKED` (the sections checked block by block, each
/// with the section of its block checksums and its block size). A section checked block by
/// block is written `Name(blocks = ChecksumsSection, size = BLOCK_SIZE)`.
macro_rules! sections {
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$doc:meta])*
                $section:ident $((blocks = $table:ident, size = $block:expr))?,
            )*
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        $vis enum $name {
            $($(#[$doc])* $section,)*
        }

        impl $name {
            /// Every section, in file order.
            pub(crate) const ALL: &'static [$name] = &[$($name::$section),*];
            /// How many sections a file has.
            pub(crate) const COUNT: usize = Self::ALL.len();
            /// The sections checked block by block: (section, section of its block
            /// checksums, block size).
            pub(crate) const BLOCKED: &'static [$crate::index::format::Blocked] = &[
                $($(($name::$section as usize, $name::$table as usize, $block),)?)*
            ];
        }
    };
}
pub(crate) use sections;

/// The sections of a file, each verified against its checksum when it is first read whole,
/// and those of the `blocked` table block by block where they are read; what was verified is
/// remembered (a file is kept between the reads of a process, and shared by its threads).
#[derive(Debug)]
pub(crate) struct SectionFile {
    bytes: FileBytes,
    refs: Vec<SectionRef>,
    blocked: &'static [Blocked],
    /// Sections whose checksum was verified, one bit each.
    checked: AtomicU64,
    /// Blocks of the `blocked` sections whose checksum was verified, one bit each.
    blocks_checked: Box<[Box<[AtomicU64]>]>,
}

impl SectionFile {
    pub fn new(bytes: FileBytes, refs: Vec<SectionRef>, blocked: &'static [Blocked]) -> Self {
        let blocks_checked = blocked
            .iter()
            .map(|&(s, _, block)| {
                let len = refs.get(s).map_or(0, |r| r.len);
                let words = len.div_ceil(block).div_ceil(64);
                (0..words).map(|_| AtomicU64::new(0)).collect()
            })
            .collect();
        SectionFile {
            bytes,
            refs,
            blocked,
            checked: AtomicU64::new(0),
            blocks_checked,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Where section `s` lies in the file.
    #[cfg(test)]
    pub fn span(&self, s: usize) -> std::ops::Range<usize> {
        self.refs[s].start..self.refs[s].start + self.refs[s].len
    }

    pub fn is_mapped(&self) -> bool {
        matches!(self.bytes, FileBytes::Map(_))
    }

    /// The bytes of section `s`, not verified (the caller verifies what it reads).
    pub fn unchecked(&self, s: usize) -> Result<&[u8], Stale> {
        let r = self.refs.get(s).ok_or(Stale)?;
        self.bytes.get(r.start..r.start + r.len).ok_or(Stale)
    }

    pub fn len(&self, s: usize) -> Result<usize, Stale> {
        self.refs.get(s).map(|r| r.len).ok_or(Stale)
    }

    /// The bytes of section `s`, verified whole.
    pub fn section(&self, s: usize) -> Result<&[u8], Stale> {
        let crc = self.refs.get(s).ok_or(Stale)?.crc;
        let bytes = self.unchecked(s)?;
        verify_once(&self.checked, s as u8, bytes, crc)?;
        Ok(bytes)
    }

    /// [`SectionFile::blocked`] when `checked`, else the bytes unverified: for the probes of
    /// a binary search, whose result is verified where it matters.
    pub fn read(&self, s: usize, start: usize, len: usize, checked: bool) -> Result<&[u8], Stale> {
        if checked {
            return self.blocked(s, start, len);
        }
        let all = self.unchecked(s)?;
        all.get(start..start.checked_add(len).ok_or(Stale)?)
            .ok_or(Stale)
    }

    /// `len` bytes from `start` of one of the blocked sections, verifying only the blocks
    /// they lie in.
    pub fn blocked(&self, s: usize, start: usize, len: usize) -> Result<&[u8], Stale> {
        let slot = self
            .blocked
            .iter()
            .position(|&(b, _, _)| b == s)
            .ok_or(Stale)?;
        let (_, table, block) = self.blocked[slot];
        let seen = &self.blocks_checked[slot];
        let all = self.unchecked(s)?;
        let wanted = all
            .get(start..start.checked_add(len).ok_or(Stale)?)
            .ok_or(Stale)?;
        if len == 0 || self.checked.load(Ordering::Relaxed) & (1 << s) != 0 {
            return Ok(wanted);
        }
        for b in start / block..=(start + len - 1) / block {
            let (word, bit) = (seen.get(b / 64).ok_or(Stale)?, (b % 64) as u8);
            if word.load(Ordering::Relaxed) & (1 << bit) != 0 {
                continue;
            }
            // The table of block checksums is not verified whole: a damaged entry fails
            // the block it names, as a damaged block does (the merged term index of 64
            // segments has 1.3 MB of them, which a search of a fresh process verified).
            let crcs = self.unchecked(table)?;
            if crcs.len() != all.len().div_ceil(block) * 4 {
                return Err(Stale);
            }
            let bytes = &all[b * block..((b + 1) * block).min(all.len())];
            verify_once(word, bit, bytes, le_u32(&crcs[b * 4..b * 4 + 4]))?;
        }
        Ok(wanted)
    }

    /// Whether the blocks of every blocked section match their checksums (what `fsck`
    /// checks; readers verify the blocks they read).
    pub fn blocks_intact(&self) -> bool {
        self.blocked.iter().all(|&(s, table, block)| {
            matches!((self.section(s), self.section(table)),
                (Ok(bytes), Ok(crcs)) if block_crcs(bytes, block) == crcs)
        })
    }
}

/// Verifies `bytes` against `crc` unless bit `bit` of `seen` says they were, and sets it:
/// every part of an index (section, block, map) is checked once per process.
pub(crate) fn verify_once(seen: &AtomicU64, bit: u8, bytes: &[u8], crc: u32) -> Result<(), Stale> {
    let bit = 1u64 << bit;
    if seen.load(Ordering::Relaxed) & bit == 0 {
        if crc32c(bytes) != crc {
            return Err(Stale);
        }
        seen.fetch_or(bit, Ordering::Relaxed);
    }
    Ok(())
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
