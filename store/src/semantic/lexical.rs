//! The `lexical` file: a BM25 index over the first `docs` records, for the lexical path.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOSEML1` |
//! | 8..12 | version (u32 LE) |
//! | 12..16 | reserved (0) |
//! | 16..24 | documents indexed (u64 LE): records `0..docs` |
//! | 24..32 | length of the term dictionary (u64 LE) |
//! | 32..40 | length of the postings (u64 LE) |
//! | 40..44 | CRC-32C of everything after the header |
//! | 44..48 | CRC-32C of bytes 0..44 |
//!
//! then each document's length in terms (u32 LE), the term dictionary (an `fst` map from
//! term to the offset of its postings) and the postings: per term, LEB128 varints `df`, then
//! `df` pairs (document delta, term frequency). The file is a cache, replaced whole; one that
//! does not check is rebuilt from the records.

use std::collections::BTreeMap;
use std::path::Path;

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::ledger::frame_le::{crc32c, le_u32, le_u64};
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"AXOSEML1";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 48;

/// Collects documents (records) in order, then writes the index.
#[derive(Debug, Default)]
pub struct LexicalIndexBuilder {
    terms: BTreeMap<String, Vec<(u32, u32)>>,
    doc_lens: Vec<u32>,
}

impl LexicalIndexBuilder {
    pub fn new() -> LexicalIndexBuilder {
        LexicalIndexBuilder::default()
    }

    /// Adds the next document, given as its terms (repeats count).
    pub fn add<'a>(&mut self, terms: impl IntoIterator<Item = &'a str>) {
        let doc = self.doc_lens.len() as u32;
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        let mut len = 0u32;
        for t in terms {
            *counts.entry(t).or_default() += 1;
            len += 1;
        }
        for (t, tf) in counts {
            match self.terms.get_mut(t) {
                Some(list) => list.push((doc, tf)),
                None => {
                    self.terms.insert(t.to_owned(), vec![(doc, tf)]);
                }
            }
        }
        self.doc_lens.push(len);
    }

    pub fn docs(&self) -> u64 {
        self.doc_lens.len() as u64
    }

    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut postings = Vec::new();
        let mut map = fst::MapBuilder::memory();
        for (term, list) in &self.terms {
            map.insert(term.as_bytes(), postings.len() as u64)
                .map_err(|e| Error::Encode {
                    what: "lexical index",
                    reason: e.to_string(),
                })?;
            put_varint(&mut postings, list.len() as u64);
            let mut prev = 0u32;
            for &(doc, tf) in list {
                put_varint(&mut postings, u64::from(doc - prev));
                put_varint(&mut postings, u64::from(tf));
                prev = doc;
            }
        }
        let fst_bytes = map.into_inner().map_err(|e| Error::Encode {
            what: "lexical index",
            reason: e.to_string(),
        })?;
        let mut body =
            Vec::with_capacity(self.doc_lens.len() * 4 + fst_bytes.len() + postings.len());
        for len in &self.doc_lens {
            body.extend_from_slice(&len.to_le_bytes());
        }
        body.extend_from_slice(&fst_bytes);
        body.extend_from_slice(&postings);
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(self.doc_lens.len() as u64).to_le_bytes());
        out.extend_from_slice(&(fst_bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&(postings.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32c(&body).to_le_bytes());
        let hcrc = crc32c(&out[0..44]);
        out.extend_from_slice(&hcrc.to_le_bytes());
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Replaces the index file at `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.encode()?;
        if let Some(dir) = path.parent() {
            create_dir_private(dir)?;
        }
        write_atomic(path, &bytes, Durability::Cache)
    }
}

/// The documents a header says its index covers, when the header checks (magic, version,
/// its own checksum); the body is not looked at.
fn header_docs(bytes: &[u8]) -> Option<u64> {
    let head = bytes.get(..HEADER_LEN)?;
    (&head[0..8] == MAGIC
        && le_u32(&head[8..12]) == VERSION
        && crc32c(&head[0..44]) == le_u32(&head[44..48]))
    .then(|| le_u64(&head[16..24]))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// A loaded, checked lexical index.
pub struct LexicalIndex {
    doc_lens: Vec<u32>,
    total_len: u64,
    terms: fst::Map<Vec<u8>>,
    postings: Vec<u8>,
}

impl std::fmt::Debug for LexicalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LexicalIndex")
            .field("docs", &self.doc_lens.len())
            .field("terms", &self.terms.len())
            .finish_non_exhaustive()
    }
}

impl LexicalIndex {
    /// Loads `path`: `None` when it is missing or does not check (then it is rebuilt).
    pub fn open(path: &Path) -> Result<Option<LexicalIndex>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", path)(e)),
        };
        Ok(LexicalIndex::decode(bytes))
    }

    /// Removes the index at `path` when its header says it covers more than `records`
    /// records (rows of records a power cut took: records written without fsync), so that
    /// it never speaks for the records appended next; returns whether it did. Reads the
    /// header alone.
    pub fn drop_beyond(path: &Path, records: u64) -> Result<bool> {
        if LexicalIndex::docs_in_header(path).is_none_or(|docs| docs <= records) {
            return Ok(false);
        }
        match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("remove", path)(e)),
        }
    }

    /// The number of records the index at `path` says it covers, from its header alone
    /// (`None` when there is no file or its header does not check).
    fn docs_in_header(path: &Path) -> Option<u64> {
        use std::io::Read;
        let mut head = [0u8; HEADER_LEN];
        std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
        header_docs(&head)
    }

    fn decode(bytes: Vec<u8>) -> Option<LexicalIndex> {
        let docs = header_docs(&bytes)?;
        if crc32c(&bytes[HEADER_LEN..]) != le_u32(&bytes[40..44]) {
            return None;
        }
        let docs = usize::try_from(docs).ok()?;
        let fst_len = usize::try_from(le_u64(&bytes[24..32])).ok()?;
        let post_len = usize::try_from(le_u64(&bytes[32..40])).ok()?;
        let lens_end = HEADER_LEN.checked_add(docs.checked_mul(4)?)?;
        let fst_end = lens_end.checked_add(fst_len)?;
        if fst_end.checked_add(post_len)? != bytes.len() {
            return None;
        }
        let doc_lens: Vec<u32> = bytes[HEADER_LEN..lens_end]
            .chunks_exact(4)
            .map(le_u32)
            .collect();
        let terms = fst::Map::new(bytes[lens_end..fst_end].to_vec()).ok()?;
        let postings = bytes[fst_end..].to_vec();
        Some(LexicalIndex {
            total_len: doc_lens.iter().map(|&l| u64::from(l)).sum(),
            doc_lens,
            terms,
            postings,
        })
    }

    /// Records indexed: `0..docs()`.
    pub fn docs(&self) -> u64 {
        self.doc_lens.len() as u64
    }

    /// Length in terms of document `doc`.
    pub fn doc_len(&self, doc: u64) -> u32 {
        self.doc_lens.get(doc as usize).copied().unwrap_or(0)
    }

    /// Sum of all document lengths.
    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    /// Number of distinct terms.
    pub fn terms(&self) -> usize {
        self.terms.len()
    }

    /// `(document, term frequency)` of every document holding `term`, in document order;
    /// empty for an unknown term.
    pub fn postings(&self, term: &str) -> Vec<(u64, u32)> {
        let Some(offset) = self.terms.get(term.as_bytes()) else {
            return Vec::new();
        };
        let mut at = offset as usize;
        let Some(df) = get_varint(&self.postings, &mut at) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(df as usize);
        let mut doc = 0u64;
        for _ in 0..df {
            let (Some(delta), Some(tf)) = (
                get_varint(&self.postings, &mut at),
                get_varint(&self.postings, &mut at),
            ) else {
                break;
            };
            doc += delta;
            out.push((doc, tf as u32));
        }
        out
    }

    /// Number of documents holding `term`.
    pub fn df(&self, term: &str) -> u64 {
        let Some(offset) = self.terms.get(term.as_bytes()) else {
            return 0;
        };
        let mut at = offset as usize;
        get_varint(&self.postings, &mut at).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut b = LexicalIndexBuilder::new();
        b.add(["cat", "sat", "cat"]);
        b.add(["dog"]);
        b.add(["cat", "dog"]);
        let bytes = b.encode().expect("encode");
        let ix = LexicalIndex::decode(bytes.clone()).expect("decodes");
        assert_eq!(ix.docs(), 3);
        assert_eq!(ix.postings("cat"), vec![(0, 2), (2, 1)]);
        assert_eq!(ix.postings("dog"), vec![(1, 1), (2, 1)]);
        assert_eq!(ix.df("sat"), 1);
        assert!(ix.postings("bird").is_empty());
        assert_eq!(ix.doc_len(0), 3);
        assert_eq!(ix.total_len(), 6);
        for i in [3, 20, 50, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(LexicalIndex::decode(bad).is_none(), "flip at {i}");
        }
        assert!(LexicalIndex::decode(bytes[..bytes.len() - 1].to_vec()).is_none());
    }
}
