//! Indexes: caches beside the segments (`ledger/v1/index/NNNNNNNNNNNN.idx`).
//!
//! A sealed segment never changes, so what the projections need from it can be kept beside
//! it: per session its records (grouped by turn) and summary (turns begun, first and last
//! activity, token usage per agent and day), per turn id its records, the rewind boundaries
//! and attachment records, the damage met while reading it, and the turns still open at its
//! end (carried into the next segment's index). A command then reads the records it needs
//! and not the whole ledger. The newest segment, which still grows, has an index of its
//! first records (bytes an append never changes), rebuilt by the reader that walked more
//! than an eighth of a segment (at most 2 MiB) past it; what was appended since is walked.
//!
//! The ledger stays the authority. An index is built when a reader first needs it, checked
//! against its segment (length, base sequence, the last record's sequence and checksum) and
//! against the index before it (a digest of the turns carried over), verified section by
//! section (the large ones block by block) as it is read, and rebuilt silently when
//! missing, stale or damaged. Nothing is fsynced: a crash leaves an old index, none, or a
//! damaged one, and each is rebuilt.

mod build;
mod format;
mod places;
mod plan;
mod read;
mod rows;
pub use plan::IndexFinding;
pub use plan::Plan;
use plan::{open_cache, seal_cache};
pub(crate) use plan::{Part, SealedMemo};
pub(crate) use read::Read;
mod suffixes;
mod summary;
pub(crate) mod terms;
#[cfg(test)]
mod tests;
mod tier;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use build::TURN_KEY;
pub(crate) use build::TURN_POSTING;
pub use build::{day_of, own_usage};
pub(crate) use build::{digest, Builder};
use format::{FileBytes, Rows, SectionFile, Stamp};
use rows::{Row, StoredUsage, TurnRow};
use suffixes::SuffixTable;
pub use summary::{SessionSummary, Summaries};
pub use terms::{field as search_field, searchable_fields};
pub(crate) use tier::TierMemo;

use crate::fsutil::{create_dir_private, write_atomic_parts, Durability};
use crate::layout::index_file_name;
use crate::ledger::record::Millis;
use crate::ledger::segment::{load, SegmentData};
use crate::ledger::{Damaged, Ledger, Position};
use crate::Result;

/// The index-backed reads of the ledger: the caches beside the log that answer reads
/// without walking it all (what tantivy's `IndexReader` is to its directory). Its reads (a
/// session, turns, rewinds, summaries) each start from a [`Plan`] of the segments; appends
/// and walks are the [`Ledger`]'s ([`Reader::ledger`]), searches the searcher's (built over
/// this reader in `search/`), so that a call says which of the three it is.
#[derive(Debug)]
pub struct Reader {
    ledger: Ledger,
    options: IndexOptions,
    sealed_memo: SealedMemo,
    tier_memo: TierMemo,
}

/// How a [`Reader`] keeps its indexes and says what it builds (set at open: see
/// [`crate::repo::OpenOptions`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct IndexOptions {
    /// For a process about to exit after one command: when the ledger is dropped, its kept
    /// segments and indexes stay mapped and the kernel unmaps them all at exit, in one pass
    /// (a `history --search` beside 1M turns spent ~1 ms of its ~10 unmapping 144 maps one
    /// by one). Never for a long-lived process (`serve`): each ledger it dropped would leave
    /// its maps.
    pub leave_mapped: bool,
    /// Called before and after a build of the indexes of more than 128 MiB of segments (the
    /// first command after the indexes were deleted, or are of an older version), and of a
    /// merged word index: the command line prints it on a terminal, so that a wait of
    /// seconds is explained.
    pub report_builds: Option<fn(&str)>,
}

impl Reader {
    /// Opens the ledger in `dir` (see [`Ledger::open`]) with its indexes, default options.
    pub fn open(dir: &Path, lock_path: &Path, segment_limit: u64) -> Reader {
        Reader::new(
            Ledger::open(dir, lock_path, segment_limit),
            IndexOptions::default(),
        )
    }

    /// The indexes of `ledger`, none read yet.
    pub fn new(ledger: Ledger, options: IndexOptions) -> Reader {
        Reader {
            ledger,
            options,
            sealed_memo: SealedMemo::default(),
            tier_memo: TierMemo::default(),
        }
    }

    /// The log itself: appends and walks.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if self.options.leave_mapped {
            self.sealed_memo.leave_mapped();
            self.tier_memo.leave_mapped();
        }
    }
}

format::sections! {
    /// The sections of an index file, in order. The small tables every lookup reads (the
    /// block checksums, where each word map lies) come first, beside the head: the page fault
    /// that maps the head maps them too, instead of one more fault in each of 72 indexes.
    pub(crate) enum Section {
        /// postcard [`Meta`]
        Meta,
        /// session name → row number
        SessionsFst,
        /// per first byte of a word (256 rows): where its map lies in `TermsFst` (start, length)
        /// and its checksum, as u32s; a lookup verifies the map it reads, not the dictionary
        /// (which had to be verified whole, 40% of a search's time)
        TermsFstParts,
        /// the checksum of each block of `Postings`
        PostingsBlocks,
        /// the checksum of each block of `TermPostings`
        TermPostingsBlocks,
        /// the checksum of each block of `TurnRows`
        TurnRowsBlocks,
        /// the checksum of each block of `TurnKeys`
        TurnKeysBlocks,
        /// the checksum of each block of `TermBytes`
        TermBytesBlocks,
        /// the checksum of each block of `TermSuffixes`
        TermSuffixesBlocks,
        /// the checksum of each block of `SessionRows`: a lookup of one session verifies the
        /// rows around it (verifying the whole table in each of 72 segments was a fifth of the
        /// page faults of `usage -s S`)
        SessionRowsBlocks,
        /// the checksum of each block of `UsageRows`
        UsageRowsBlocks,
        /// the first 8 bytes of every 32nd sorted suffix (zero-padded after the 0 that ends its
        /// word): a search for a word inside words first narrows to the 32 suffixes between two
        /// samples in this dense table, then probes those (the binary search over all suffixes
        /// missed the cache twice per probe: a sixth of an in-process search)
        TermSuffixSamples,
        /// [`SessionRow`]s
        SessionRows(blocks = SessionRowsBlocks, size = format::BLOCK),
        /// the first [`TURN_KEY`] bytes of each turn id (zero-padded), in the order of
        /// `TurnRows` (by id): turns are found by a binary search that verifies only the blocks
        /// it reads (an `fst` map had to be verified whole, a third of a search's time)
        TurnKeys(blocks = TurnKeysBlocks, size = format::SMALL_BLOCK),
        /// turn rows ([`TurnRow`]s, 16 bytes each: session ordinal, first posting, postings count,
        /// begun in this segment), in the order of `TurnKeys`
        TurnRows(blocks = TurnRowsBlocks, size = format::BLOCK),
        /// record offsets (u32): per session its own records, then each turn's
        Postings(blocks = PostingsBlocks, size = format::BLOCK),
        /// [`UsageRow`]s, per session
        UsageRows(blocks = UsageRowsBlocks, size = format::BLOCK),
        /// offsets of rewind boundaries
        Rewinds,
        /// offsets of session-created and attachment records
        Always,
        /// folded word → (start << 32 | count) in `TermPostings`: one `fst` map per first byte
        /// of the words, one after the other (see `TermsFstParts`)
        TermsFst,
        /// what holds each word (u32s, ascending): the turn rows ([`TURN_POSTING`] | row) of
        /// the records in a turn's postings, the offsets of the others
        TermPostings(blocks = TermPostingsBlocks, size = format::BLOCK),
        /// every folded word, each ended by a 0
        TermBytes(blocks = TermBytesBlocks, size = format::SMALL_BLOCK),
        /// the position (u32) in `TermBytes` of every suffix of a word but the word itself,
        /// sorted by the suffix
        TermSuffixes(blocks = TermSuffixesBlocks, size = format::SMALL_BLOCK),
    }
}

/// Width in bytes of a row of `TermsFstParts`.
pub(crate) const TERMS_PART: usize = 12;

/// A turn begun and not ended (yet) at the end of a segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenTurn {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub started_at: Millis,
    pub begin: Position,
    pub begin_seq: u64,
    /// What the turn's ended subtasks gave its workers so far (carried with the turn, so
    /// that its end takes exactly that out of the coordinator's row, whichever segment each
    /// subtask ended in).
    pub handed: Handed,
}

/// The usage a coordinator's turn handed to its workers' rows, one `SubtaskEnded` at a
/// time, and the workers counted as having worked in it (once each per turn).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handed {
    pub usage: crate::ledger::record::Usage,
    pub workers: Vec<String>,
}

impl Default for Handed {
    fn default() -> Handed {
        Handed {
            usage: crate::ledger::record::Usage::ZERO,
            workers: Vec::new(),
        }
    }
}

/// The small part of an index, decoded whenever the index is opened.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// Records that could not be read: (offset, reason).
    pub damaged: Vec<(u64, String)>,
    pub unknown_kinds: u64,
    /// Turns open at the end of the segment.
    pub open: Vec<OpenTurn>,
    /// Agent names, referred to by number from usage rows.
    pub agents: Vec<String>,
    /// Records whose usage could not be attributed exactly (session, offset, reason):
    /// reported by the summaries of usage, never corrected.
    pub usage_damaged: Vec<(String, u64, String)>,
    /// The turn ids a key does not spell, by row: those longer than a [`TURN_KEY`] (a key
    /// names such a turn only with every turn sharing its first bytes) and those ending in
    /// a 0 byte (which the key's padding hides). Ids the runtime makes are neither.
    pub long_ids: Vec<(u32, String)>,
}

/// One session's row in one segment's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionRow {
    post_start: u32,
    post_len: u32,
    pub turns: u32,
    usage_start: u32,
    usage_len: u32,
    pub first_at: Option<Millis>,
    pub last_at: Option<Millis>,
}

/// Token usage of one agent on one day (UTC), as far as one segment tells (see the
/// attribution in `build`): a turn's own agent counts the turns it began here on that day
/// and their usage as they end here, less what each turn handed its workers; a worker
/// counts the turns and usage of the subtasks it ended here that day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub agent: String,
    pub day: i64,
    pub turns: u64,
    pub usage: crate::ledger::record::Usage,
    /// The cache tokens and cost of the calls `usage` counts, as far as they were recorded.
    pub detail: crate::ledger::record::UsageDetail,
}

/// An index is damaged where it was about to be read: the caller reads the segment itself.
#[derive(Debug)]
pub(crate) struct Stale;

/// An opened (or freshly built) index of one segment.
#[derive(Debug)]
pub(crate) struct Index {
    file: SectionFile,
    stamp: Stamp,
    /// The checksum of the head, which covers every section's: names the whole index.
    head_crc: u32,
    pub meta: Meta,
    /// Maps of `TermsFst` whose checksum was verified, one bit per first byte.
    words_checked: [AtomicU64; 4],
}

impl Index {
    fn bytes(&self) -> &[u8] {
        self.file.bytes()
    }

    fn parse(bytes: FileBytes) -> Option<Index> {
        let (stamp, sections, head_crc) = format::decode_head(&bytes, Section::COUNT)?;
        let mut index = Index {
            file: SectionFile::new(bytes, sections, Section::BLOCKED),
            stamp,
            head_crc,
            meta: Meta::default(),
            words_checked: Default::default(),
        };
        index.meta = postcard::from_bytes(index.section(Section::Meta).ok()?).ok()?;
        Some(index)
    }

    /// An index built in memory.
    pub fn from_built(bytes: Vec<u8>) -> Option<Index> {
        Index::parse(FileBytes::Vec(bytes))
    }

    /// Opens the index file at `path` if it describes exactly the bytes of `seg`.
    pub fn open(path: &Path, seg: &SegmentData) -> Option<Index> {
        Index::open_file(path).filter(|index| index.describes(seg))
    }

    /// Opens the index file at `path`, whatever it describes.
    fn open_file(path: &Path) -> Option<Index> {
        Index::parse(FileBytes::map(path)?)
    }

    /// The checksum of the index's head, which names the whole index.
    pub fn head_crc(&self) -> u32 {
        self.head_crc
    }

    /// Whether this index was built from the bytes `seg` holds now.
    fn describes(&self, seg: &SegmentData) -> bool {
        let s = &self.stamp;
        let len = seg.base + seg.bytes().len() as u64;
        let base_seq = seg.header().map(|h| h.1).ok();
        s.segment == seg.number
            && s.covered == len
            && base_seq.is_none_or(|b| b == s.base_seq)
            && (s.last_offset == 0
                || seg.frame_stamp(s.last_offset) == Some((s.last_seq, s.last_hcrc)))
    }

    /// Verifies every section (what `fsck` does; readers verify only what they read).
    fn verify_all(&self) -> bool {
        Section::ALL.iter().all(|&s| self.section(s).is_ok())
            && self.fst(Section::SessionsFst).is_ok()
            && (0..=255).all(|b| self.words_from(b).is_ok())
            && self.file.blocks_intact()
    }

    /// What holds every word `needs` asks for in this segment (a superset of where the query
    /// matches): turn rows ([`TURN_POSTING`] | row: see [`Index::turn_id`] and
    /// [`Index::turn_offsets_at`]) and offsets of records outside any turn's postings; or
    /// `None` when more than `limit` turns or records hold some word (a scan is then faster
    /// than the index).
    pub fn candidates(
        &self,
        needs: &[terms::Need],
        limit: usize,
    ) -> Result<Option<Vec<u32>>, Stale> {
        self.candidates_of(chosen(needs), limit, |_, need| {
            self.term_values(need, limit * 4)
        })
    }

    /// [`Index::candidates`] of the needs [`chosen`] picked, each (with its place among
    /// them) looked up by `values`: where the postings of the words it asks for lie, as this
    /// segment's dictionary gives them or a merged term index.
    pub fn candidates_of<'n>(
        &self,
        chosen: impl IntoIterator<Item = &'n terms::Need>,
        limit: usize,
        mut values: impl FnMut(usize, &terms::Need) -> Result<Option<Vec<u64>>, Stale>,
    ) -> Result<Option<Vec<u32>>, Stale> {
        let mut result: Option<Vec<u32>> = None;
        for (k, need) in chosen.into_iter().enumerate() {
            let mut found: Vec<u32> = Vec::new();
            // Each word is in at least one record.
            let Some(values) = values(k, need)? else {
                return Ok(None);
            };
            for v in values {
                let (start, len) = ((v >> 32) as usize * 4, (v & 0xffff_ffff) as usize * 4);
                let bytes = self.blocked(Section::TermPostings, start, len)?;
                found.extend(bytes.chunks_exact(4).map(crate::ledger::frame::le_u32));
                if found.len() > limit * 4 {
                    return Ok(None);
                }
            }
            found.sort_unstable();
            found.dedup();
            if found.len() > limit {
                return Ok(None);
            }
            result = Some(match result {
                None => found,
                Some(prev) => intersect(&prev, &found),
            });
        }
        Ok(result.or(Some(Vec::new())))
    }

    /// The values in `map` (where their postings are) of the words `need` asks for: the word
    /// itself, the words starting with it, and (through the sorted suffixes) the words
    /// holding it after their first character or ending with it; `None` past `most` words.
    fn term_values(&self, need: &terms::Need, most: usize) -> Result<Option<Vec<u64>>, Stale> {
        use terms::Need;
        let mut out = Vec::new();
        let w = need.word().as_bytes();
        let map = match w.first() {
            Some(&b) => self.words_from(b)?,
            None => None,
        };
        match (need, map) {
            (_, None) => {}
            (Need::Exact(_) | Need::Suffix(_), Some(map)) => out.extend(map.get(w)),
            (Need::Prefix(_) | Need::Inside(_), Some(map)) => {
                if !starting_with(&map, w, most, &mut out) {
                    return Ok(None);
                }
            }
        }
        if let Need::Suffix(_) | Need::Inside(_) = need {
            // A suffix runs through the 0 that ends its word: one that ends with `w` is `w`
            // and that 0.
            let mut key = w.to_vec();
            if matches!(need, Need::Suffix(_)) {
                key.push(0);
            }
            let table = self.suffix_table();
            let Some(range) = table.starting_with(&key, most)? else {
                return Ok(None);
            };
            let mut words: Vec<&[u8]> = Vec::new();
            for i in range {
                words.push(table.word_around(table.position(i, true)?)?.1);
            }
            // A word holding `w` twice has two such suffixes.
            words.sort_unstable();
            words.dedup();
            for word in words {
                let map = self.words_from(*word.first().ok_or(Stale)?)?;
                out.push(map.and_then(|m| m.get(word)).ok_or(Stale)?);
            }
        }
        Ok((out.len() <= most).then_some(out))
    }

    /// The sorted suffixes of the words of this segment (each word's own left out).
    fn suffix_table(&self) -> SuffixTable<'_> {
        let s = [
            Section::TermBytes,
            Section::TermSuffixes,
            Section::TermSuffixSamples,
        ];
        SuffixTable::of(&self.file, s.map(|s| s as usize))
    }

    /// The map of the words whose first byte is `first`, if any word starts with it.
    fn words_from(&self, first: u8) -> Result<Option<fst::Map<&[u8]>>, Stale> {
        use crate::ledger::frame::le_u32;
        let row = usize::from(first) * TERMS_PART;
        let rows = self.section(Section::TermsFstParts)?;
        if rows.len() != 256 * TERMS_PART {
            return Err(Stale);
        }
        let r = &rows[row..row + TERMS_PART];
        let (start, len) = (le_u32(&r[0..4]) as usize, le_u32(&r[4..8]) as usize);
        if len == 0 {
            return Ok(None);
        }
        let all = self.unchecked(Section::TermsFst)?;
        let bytes = all
            .get(start..start.checked_add(len).ok_or(Stale)?)
            .ok_or(Stale)?;
        let seen = &self.words_checked[usize::from(first / 64)];
        format::verify_once(seen, first % 64, bytes, le_u32(&r[8..12]))?;
        fst::Map::new(bytes).map(Some).map_err(|_| Stale)
    }

    /// The bytes of section `s`, not verified (the caller verifies what it reads).
    fn unchecked(&self, s: Section) -> Result<&[u8], Stale> {
        self.file.unchecked(s as usize)
    }

    fn section_len(&self, s: Section) -> Result<usize, Stale> {
        self.file.len(s as usize)
    }

    /// The digest of the turns open when the segment began, as this index was built with.
    pub fn carry_in(&self) -> u32 {
        self.stamp.carry_in
    }

    fn section(&self, s: Section) -> Result<&[u8], Stale> {
        self.file.section(s as usize)
    }

    /// [`Index::blocked`] when `checked`, else the bytes unverified: for the probes of a
    /// binary search, whose result is verified where it matters (see
    /// [`checked_partition_point`]).
    fn read(&self, s: Section, start: usize, len: usize, checked: bool) -> Result<&[u8], Stale> {
        self.file.read(s as usize, start, len, checked)
    }

    /// `len` bytes from `start` of one of the [`Section::BLOCKED`] sections, verifying only the blocks
    /// they lie in.
    fn blocked(&self, s: Section, start: usize, len: usize) -> Result<&[u8], Stale> {
        self.file.blocked(s as usize, start, len)
    }

    fn fst(&self, s: Section) -> Result<fst::Map<&[u8]>, Stale> {
        fst::Map::new(self.section(s)?).map_err(|_| Stale)
    }

    fn session_row(&self, ordinal: u64) -> Result<SessionRow, Stale> {
        let start = (ordinal as usize)
            .checked_mul(SessionRow::WIDTH)
            .ok_or(Stale)?;
        SessionRow::decode(self.blocked(Section::SessionRows, start, SessionRow::WIDTH)?)
            .ok_or(Stale)
    }

    /// The row of session `name`, if it has records in this segment.
    pub fn session(&self, name: &str) -> Result<Option<SessionRow>, Stale> {
        match self.fst(Section::SessionsFst)?.get(name) {
            Some(i) => self.session_row(i).map(Some),
            None => Ok(None),
        }
    }

    /// Every session with records in this segment, by name.
    pub fn sessions(&self) -> Result<Vec<(String, SessionRow)>, Stale> {
        use fst::Streamer;
        let map = self.fst(Section::SessionsFst)?;
        let mut stream = map.stream();
        let mut out = Vec::new();
        while let Some((name, i)) = stream.next() {
            let name = String::from_utf8(name.to_vec()).map_err(|_| Stale)?;
            out.push((name, self.session_row(i)?));
        }
        Ok(out)
    }

    /// Calls `f` with the name of every session with records in this segment, in order
    /// (no row decoded, nothing allocated).
    pub fn each_session_name(&self, mut f: impl FnMut(&str)) -> Result<(), Stale> {
        use fst::Streamer;
        let map = self.fst(Section::SessionsFst)?;
        let mut stream = map.keys();
        while let Some(name) = stream.next() {
            f(std::str::from_utf8(name).map_err(|_| Stale)?);
        }
        Ok(())
    }

    fn postings(&self, start: u32, len: u32) -> Result<Vec<u32>, Stale> {
        let mut out = Vec::new();
        self.add_postings(start, len, &mut out)?;
        Ok(out)
    }

    /// [`Index::postings`], added to `out`.
    fn add_postings(&self, start: u32, len: u32, out: &mut Vec<u32>) -> Result<(), Stale> {
        let bytes = self.blocked(Section::Postings, start as usize * 4, len as usize * 4)?;
        out.extend(bytes.chunks_exact(4).map(crate::ledger::frame::le_u32));
        Ok(())
    }

    /// The offsets of every record of a session in this segment.
    pub fn session_offsets(&self, row: &SessionRow) -> Result<Vec<u32>, Stale> {
        self.postings(row.post_start, row.post_len)
    }

    /// The offsets of the records of the turn in row `ordinal` (what [`Index::turn_offsets`]
    /// gives for its id, without the search).
    pub fn turn_offsets_at(&self, ordinal: u64) -> Result<Vec<u32>, Stale> {
        let mut out = Vec::new();
        self.add_turn_offsets_at(ordinal, &mut out)?;
        Ok(out)
    }

    /// [`Index::turn_offsets_at`], added to `out`.
    pub fn add_turn_offsets_at(&self, ordinal: u64, out: &mut Vec<u32>) -> Result<(), Stale> {
        let start = (ordinal as usize)
            .checked_mul(TurnRow::WIDTH)
            .ok_or(Stale)?;
        let row = TurnRow::decode(self.blocked(Section::TurnRows, start, TurnRow::WIDTH)?);
        let row = row.ok_or(Stale)?;
        self.add_postings(row.post_start, row.post_len, out)
    }

    /// The id of the turn in row `row`.
    pub fn turn_id(&self, row: u32) -> Result<Vec<u8>, Stale> {
        let long = &self.meta.long_ids;
        if let Ok(i) = long.binary_search_by_key(&row, |(r, _)| *r) {
            return Ok(long[i].1.as_bytes().to_vec());
        }
        let at = (row as usize).checked_mul(TURN_KEY).ok_or(Stale)?;
        let key = self.blocked(Section::TurnKeys, at, TURN_KEY)?;
        let end = key.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(key[..end].to_vec())
    }

    /// The offsets of the records of the turns whose id starts with `prefix` (and of some
    /// turns whose id only shares its first [`TURN_KEY`] bytes: readers keep the records of
    /// the turns they asked for).
    pub fn turn_prefix_offsets(&self, prefix: &[u8]) -> Result<Vec<u32>, Stale> {
        self.turns_keyed(prefix, false)
    }

    /// The offsets of the records of turn `id` in this segment (and of the turns whose id
    /// shares its first [`TURN_KEY`] bytes, when it is longer: readers keep only its own).
    pub fn turn_offsets(&self, id: &[u8]) -> Result<Vec<u32>, Stale> {
        self.turns_keyed(id, true)
    }

    /// The records of the turns whose key starts with `prefix` cut to [`TURN_KEY`] bytes
    /// (`exact`: whose key is it, zero-padded, when it is shorter).
    fn turns_keyed(&self, prefix: &[u8], exact: bool) -> Result<Vec<u32>, Stale> {
        let p = &prefix[..prefix.len().min(TURN_KEY)];
        let (keys, rows) = (
            self.section_len(Section::TurnKeys)?,
            self.section_len(Section::TurnRows)?,
        );
        let n = keys / TURN_KEY;
        if keys % TURN_KEY != 0 || (n * TurnRow::WIDTH != rows && n != 0) {
            return Err(Stale);
        }
        let key =
            |i: usize, checked: bool| self.read(Section::TurnKeys, i * TURN_KEY, TURN_KEY, checked);
        // The rows from the first whose key is not below `p` padded with zeros to the last
        // whose key starts with `p` (or, exactly, is `p` padded).
        let low: [u8; TURN_KEY] = pad_key(p, 0);
        let high = if exact && p.len() < TURN_KEY {
            low
        } else {
            pad_key(p, 0xff)
        };
        let first = checked_partition_point(n, |i, checked| Ok(key(i, checked)? < low.as_slice()))?;
        let end = checked_partition_point(n, |i, checked| Ok(key(i, checked)? <= high.as_slice()))?;
        // A turn whose id is longer than its key is told apart by its full id; another's key
        // is its whole id, which the range already matched against a query no longer than a
        // key.
        let long = &self.meta.long_ids;
        let mut out = Vec::new();
        for row in first..end.max(first) {
            let matches = match long.binary_search_by_key(&(row as u32), |(r, _)| *r) {
                Ok(i) if exact => long[i].1.as_bytes() == prefix,
                Ok(i) => long[i].1.as_bytes().starts_with(prefix),
                Err(_) => prefix.len() <= TURN_KEY,
            };
            if !matches {
                continue;
            }
            out.extend(self.turn_offsets_at(row as u64)?);
        }
        Ok(out)
    }

    /// The offsets listed in a section of plain offsets.
    pub fn offsets(&self, s: Section) -> Result<Vec<u32>, Stale> {
        Ok(self
            .section(s)?
            .chunks_exact(4)
            .map(crate::ledger::frame::le_u32)
            .collect())
    }

    /// A session's usage rows in this segment.
    pub fn usage(&self, row: &SessionRow) -> Result<Vec<UsageRow>, Stale> {
        let (start, len) = (row.usage_start as usize, row.usage_len as usize);
        let bytes = self.blocked(
            Section::UsageRows,
            start.checked_mul(StoredUsage::WIDTH).ok_or(Stale)?,
            len.checked_mul(StoredUsage::WIDTH).ok_or(Stale)?,
        )?;
        let rows = Rows::new(bytes, StoredUsage::WIDTH);
        let mut out = Vec::with_capacity(len);
        for i in 0..len {
            let r = StoredUsage::decode(rows.row(i).ok_or(Stale)?).ok_or(Stale)?;
            let agent = self.meta.agents.get(r.agent as usize).ok_or(Stale)?;
            out.push(UsageRow {
                agent: agent.clone(),
                turns: u64::from(r.turns),
                usage: crate::ledger::record::Usage {
                    calls: r.calls,
                    complete: r.complete,
                    prompt_tokens: r.prompt_tokens,
                    completion_tokens: r.completion_tokens,
                },
                detail: r.detail,
                day: r.day,
            });
        }
        Ok(out)
    }

    /// What the index says could not be read, as damage of `seg`.
    pub fn damaged(&self, seg: &SegmentData) -> Vec<Damaged> {
        Index::as_damage(self.meta.damaged.iter().map(|(o, r)| (o, r)), seg)
    }

    /// The records of session `only` (or of every session) whose usage the index could not
    /// attribute exactly, as damage of `seg`.
    pub fn usage_damaged(&self, seg: &SegmentData, only: Option<&str>) -> Vec<Damaged> {
        let found = self.meta.usage_damaged.iter();
        let found = found.filter(|(s, ..)| only.is_none_or(|only| only == s));
        Index::as_damage(found.map(|(_, o, r)| (o, r)), seg)
    }

    fn as_damage<'a>(
        found: impl Iterator<Item = (&'a u64, &'a String)>,
        seg: &SegmentData,
    ) -> Vec<Damaged> {
        found
            .map(|(offset, reason)| Damaged {
                path: seg.path.clone(),
                offset: Some(*offset),
                reason: reason.clone(),
            })
            .collect()
    }
}

/// Adds the values of the words of `map` that start with `w` to `out` (in no order); false
/// past `most` of them. The words are found by following `w` from the root and then every
/// transition below (a range stream from `w` set up a stack and a bound for each of the 72
/// maps of a search, a tenth of its time in process).
fn starting_with(map: &fst::Map<&[u8]>, w: &[u8], most: usize, out: &mut Vec<u64>) -> bool {
    use fst::raw::Output;
    let fst = map.as_fst();
    let (mut node, mut output) = (fst.root(), Output::zero());
    for &b in w {
        let Some(i) = node.find_input(b) else {
            return true;
        };
        let t = node.transition(i);
        (node, output) = (fst.node(t.addr), output.cat(t.out));
    }
    let mut below = vec![(node, output)];
    while let Some((node, output)) = below.pop() {
        if node.is_final() {
            out.push(output.cat(node.final_output()).value());
            if out.len() > most {
                return false;
            }
        }
        below.extend(
            node.transitions()
                .map(|t| (fst.node(t.addr), output.cat(t.out))),
        );
    }
    true
}

/// The needs of a query that an index looks up: whole words and word starts narrow best; a
/// word that may lie inside or at the end of words is looked up only when nothing else
/// narrows (the longest one).
pub(crate) fn chosen(needs: &[terms::Need]) -> Vec<&terms::Need> {
    use terms::Need;
    let mut chosen: Vec<&Need> = needs
        .iter()
        .filter(|n| matches!(n, Need::Exact(_) | Need::Prefix(_)))
        .collect();
    if chosen.is_empty() {
        chosen.extend(needs.iter().max_by_key(|n| n.word().len()));
    }
    chosen
}

/// Whether the last bytes (up to 64) that `seg` holds are those of the file at `path` at
/// the same place.
fn ends_with_file(seg: &SegmentData, path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let held = seg.bytes();
    let tail = &held[held.len().saturating_sub(64)..];
    let at = seg.base + (held.len() - tail.len()) as u64;
    let mut now = vec![0u8; tail.len()];
    std::fs::File::open(path).is_ok_and(|f| f.read_exact_at(&mut now, at).is_ok() && now == tail)
}

/// `key` cut or padded with `fill` to `N` bytes (a turn key, a sampled suffix's head).
fn pad_key<const N: usize>(key: &[u8], fill: u8) -> [u8; N] {
    let mut out = [fill; N];
    let n = key.len().min(N);
    out[..n].copy_from_slice(&key[..n]);
    out
}

/// [`partition_point`] of entries of an index read unverified (`below(i, false)`), then
/// verified around the result (`below(i, true)`, which fails on damage): the two entries
/// that end and start the run of those below. Were they intact, the result is the point of
/// the intact entries (which are sorted) whatever the others hold, so a binary search checks
/// two blocks of each section it reads instead of one per probe (most of the checksums of a
/// first search, and of the memory it touches).
fn checked_partition_point(
    n: usize,
    below: impl Fn(usize, bool) -> Result<bool, Stale>,
) -> Result<usize, Stale> {
    checked_partition_point_in(0..n, n, below)
}

/// [`checked_partition_point`] of `0..n` searched in `window` only (where something else,
/// such as sampled keys, says the point lies): verified around the result against all of
/// `0..n`, so a wrong window is damage found, never a wrong point.
fn checked_partition_point_in(
    window: std::ops::Range<usize>,
    n: usize,
    below: impl Fn(usize, bool) -> Result<bool, Stale>,
) -> Result<usize, Stale> {
    let lo = window.start;
    let p = lo + partition_point(window.len(), |i| below(lo + i, false))?;
    if (p > 0 && !below(p - 1, true)?) || (p < n && below(p, true)?) {
        return Err(Stale);
    }
    Ok(p)
}

/// The first of `0..n` for which `below` is false (`below` true for a prefix of `0..n`).
fn partition_point(n: usize, below: impl Fn(usize) -> Result<bool, Stale>) -> Result<usize, Stale> {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid)? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The offsets in both ascending lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}
