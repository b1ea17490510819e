//! Merged term indexes (`ledger/v1/index/FFFFFFFFFFFF-LLLLLLLLLLLL.terms`): the words of a
//! run of sealed segments in one dictionary, so that a search asks one dictionary instead of
//! one per segment (as Lucene merges its segments' term dictionaries).
//!
//! A search of a ledger of 72 sealed segments looked its words up in 72 dictionaries and 72
//! tables of sorted suffixes: ~0.9 µs each, most of a search in process, and a few page
//! faults each in a fresh one. A merged index covers an aligned span of [`SPANS`] segments
//! (1–32, 33–64, ...; then 4 at a time for the segments after the last full 32), and is
//! built by the first search that finds such a span sealed and indexed, from the segments'
//! own indexes (their dictionaries merged, no record read). It lists, for each distinct
//! word, where its postings lie in each segment's index (start and count in that index's
//! `TermPostings`), so it holds no postings itself and is only valid beside the very
//! indexes it was built from: it names each one by its head's checksum, and a search uses
//! it only while every one of them is the index the plan opened.
//!
//! The words are stored sorted, so a whole word or the words starting with a piece are a
//! run of them, found by a binary search of the words' starts; a word end or a piece inside
//! words is found in their sorted suffixes, every suffix of every word, the word's own
//! included (see [`super::suffixes`]). No `fst` is needed. Like a segment's index it is a
//! cache: verified section by section and block by block as it is read, never fsynced,
//! deleted when found damaged and built again by the next search.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::format::{self, push_u32, push_u64, FileBytes, SectionFile};
use super::suffixes::{sorted_suffixes, suffix_samples, SuffixTable};
use super::terms::Need;
use super::{checked_partition_point, Index, Part, Stale};
use crate::index::Reader;
use crate::ledger::frame::{le_u32, le_u64};

pub const MAGIC: &[u8; 8] = b"AXOTERMS";
pub const VERSION: u32 = 1;

/// The spans a merged index covers, largest first: segments `k * span + 1` through
/// `(k + 1) * span`. 32 segments of 16 MiB hold ~450,000 turns; merging them takes about
/// a second and 150 MB of memory, once.
pub const SPANS: [u64; 2] = [32, 4];

super::format::sections! {
    /// The sections of a merged term index, in order.
    enum S {
        /// per covered segment: its number (u64), its index's head checksum (u32), 0 (u32)
        Covered,
        /// every distinct word, sorted, each ended by a 0
        Words(blocks = WordsBlocks, size = format::SMALL_BLOCK),
        /// where each word starts in `Words` (u32): by the words' order, a table of their
        /// starts' suffixes
        WordStarts(blocks = WordStartsBlocks, size = format::SMALL_BLOCK),
        /// the position (u32) in `Words` of every suffix of every word, sorted by the suffix
        Suffixes(blocks = SuffixesBlocks, size = format::SMALL_BLOCK),
        /// the heads of every 32nd sorted suffix (see [`super::suffixes`])
        Samples,
        /// per word, its first row in `Where` (u32), and one more: the end of the last word's
        WhereStarts(blocks = WhereStartsBlocks, size = format::SMALL_BLOCK),
        /// per word and segment holding it: the segment's place among the covered (u32), and
        /// where the word's postings lie in that segment's index (start, count: u32s)
        Where(blocks = WhereBlocks, size = format::SMALL_BLOCK),
        WordsBlocks,
        WordStartsBlocks,
        SuffixesBlocks,
        WhereStartsBlocks,
        WhereBlocks,
    }
}

const COVERED_ROW: usize = 16;
const WHERE_ROW: usize = 12;

/// The bytes of a merged index as built: its head, then its sections (written one after
/// another, never copied into one buffer unless the file cannot be written).
pub(crate) struct Built {
    head: Vec<u8>,
    sections: Vec<Vec<u8>>,
}

impl Built {
    fn parts(&self) -> Vec<&[u8]> {
        std::iter::once(&self.head[..])
            .chain(self.sections.iter().map(Vec::as_slice))
            .collect()
    }
}

/// An opened (or freshly built) merged term index.
#[derive(Debug)]
pub(crate) struct Tier {
    file: SectionFile,
    pub first: u64,
    pub last: u64,
    /// The covered segments, in order, each with the head checksum of its index.
    covered: Vec<(u64, u32)>,
}

impl Tier {
    /// Merges the dictionaries of `indexes` (consecutive sealed segments `first..`, each with
    /// its number) into the bytes of a merged index; `None` when one of them turns out
    /// damaged (its segment's own index then answers, and is rebuilt).
    pub fn build(indexes: &[(u64, &Index)]) -> Option<Built> {
        use fst::Streamer;
        let first = indexes.first()?.0;
        let last = indexes.last()?.0;
        let mut words: Vec<u8> = Vec::new();
        let mut starts: Vec<u32> = Vec::new();
        let mut where_starts = Vec::new();
        let mut rows = Vec::new();
        let mut count = 0u32;
        let mut holders: Vec<(usize, u64)> = Vec::new();
        for b in 0..=255u8 {
            let mut maps = Vec::new();
            for (ordinal, (_, index)) in indexes.iter().enumerate() {
                if let Some(map) = index.words_from(b).ok()? {
                    maps.push((ordinal, map));
                }
            }
            let mut op = fst::map::OpBuilder::new();
            for (_, map) in &maps {
                op.push(map);
            }
            let mut union = op.union();
            while let Some((word, values)) = union.next() {
                std::str::from_utf8(word).ok()?;
                starts.push(u32::try_from(words.len()).ok()?);
                words.extend_from_slice(word);
                words.push(0);
                push_u32(&mut where_starts, count);
                holders.clear();
                holders.extend(values.iter().map(|v| (maps[v.index].0, v.value)));
                holders.sort_unstable();
                for &(ordinal, value) in &holders {
                    push_u32(&mut rows, ordinal as u32);
                    push_u32(&mut rows, (value >> 32) as u32);
                    push_u32(&mut rows, value as u32);
                    count = count.checked_add(1)?;
                }
            }
        }
        push_u32(&mut where_starts, count);
        // Positions past 4 GiB of words cannot be listed: such a span keeps its segments'
        // own dictionaries.
        u32::try_from(words.len()).ok()?;
        let suffixes = sorted_suffixes(&words, true);
        let mut sections: Vec<Vec<u8>> = vec![Vec::new(); S::COUNT];
        let mut covered = Vec::with_capacity(indexes.len() * COVERED_ROW);
        for (number, index) in indexes {
            push_u64(&mut covered, *number);
            push_u32(&mut covered, index.head_crc());
            push_u32(&mut covered, 0);
        }
        sections[S::Covered as usize] = covered;
        sections[S::Samples as usize] = suffix_samples(&words, &suffixes);
        let mut word_starts = Vec::with_capacity(starts.len() * 4);
        for s in starts {
            push_u32(&mut word_starts, s);
        }
        sections[S::Words as usize] = words;
        sections[S::WordStarts as usize] = word_starts;
        sections[S::Suffixes as usize] = suffixes;
        sections[S::WhereStarts as usize] = where_starts;
        sections[S::Where as usize] = rows;
        for &(blocked, table, block) in S::BLOCKED {
            sections[table] = format::block_crcs(&sections[blocked], block);
        }
        let mut fields = [0u8; format::FIELDS];
        fields[0..8].copy_from_slice(&first.to_le_bytes());
        fields[8..16].copy_from_slice(&last.to_le_bytes());
        Some(Built {
            head: format::encode_head(MAGIC, VERSION, &fields, &sections),
            sections,
        })
    }

    fn parse(bytes: FileBytes) -> Option<Tier> {
        let (fields, refs, _) = format::decode_file_head(&bytes, MAGIC, VERSION, S::COUNT)?;
        let file = SectionFile::new(bytes, refs, S::BLOCKED);
        let covered = file
            .section(S::Covered as usize)
            .ok()?
            .chunks_exact(COVERED_ROW)
            .map(|r| (le_u64(&r[0..8]), le_u32(&r[8..12])))
            .collect();
        Some(Tier {
            file,
            first: le_u64(&fields[0..8]),
            last: le_u64(&fields[8..16]),
            covered,
        })
    }

    /// A merged index built in memory.
    pub fn from_built(built: Built) -> Option<Tier> {
        let mut bytes = built.head;
        for s in built.sections {
            bytes.extend_from_slice(&s);
        }
        Tier::parse(FileBytes::Vec(bytes))
    }

    /// Opens the merged index at `path`, whatever it describes.
    pub fn open(path: &Path) -> Option<Tier> {
        Tier::parse(FileBytes::map(path)?)
    }

    /// Whether it was built from exactly `indexes` (the covered segments' indexes, in order).
    pub fn describes<'a>(&self, indexes: impl ExactSizeIterator<Item = (u64, &'a Index)>) -> bool {
        indexes.len() == self.covered.len()
            && indexes
                .zip(&self.covered)
                .all(|((n, index), &(m, crc))| n == m && index.head_crc() == crc)
    }

    /// How many segments it covers.
    pub fn len(&self) -> usize {
        self.covered.len()
    }

    /// Verifies every section and block (what `fsck` does).
    pub fn verify_all(&self) -> bool {
        S::ALL
            .iter()
            .all(|&s| self.file.section(s as usize).is_ok())
            && self.file.blocks_intact()
    }

    fn table(&self) -> SuffixTable<'_> {
        SuffixTable::of(
            &self.file,
            [S::Words, S::Suffixes, S::Samples].map(|s| s as usize),
        )
    }

    /// For each covered segment (by its place), what its own dictionary gives for `need`:
    /// where the postings of the words it asks for lie in its index (start << 32 | count).
    /// `None` when more than `most` words (or suffixes) qualify: the caller scans.
    pub fn values(&self, need: &Need, most: usize) -> Result<Option<Vec<Vec<u64>>>, Stale> {
        let w = need.word().as_bytes();
        // A suffix runs through the 0 that ends its word: a word that is `w`, or ends with
        // it, has a suffix `w` and that 0.
        let mut key = w.to_vec();
        if let Need::Exact(_) | Need::Suffix(_) = need {
            key.push(0);
        }
        let ids: Vec<usize> = if let Need::Exact(_) | Need::Prefix(_) = need {
            // The words starting with `w` are a run of the sorted words: their numbers.
            let words = SuffixTable {
                file: &self.file,
                words: S::Words as usize,
                suffixes: S::WordStarts as usize,
                samples: None,
            };
            match words.starting_with(&key, most)? {
                Some(range) => range.collect(),
                None => return Ok(None),
            }
        } else {
            let table = self.table();
            let Some(range) = table.starting_with(&key, most)? else {
                return Ok(None);
            };
            let mut ids = Vec::with_capacity(range.len());
            for i in range {
                ids.push(self.word_at(table.position(i, true)?)?);
            }
            // A word holding `w` twice has two such suffixes.
            ids.sort_unstable();
            ids.dedup();
            ids
        };
        let mut out = vec![Vec::new(); self.covered.len()];
        for id in ids {
            let bounds = self.file.blocked(S::WhereStarts as usize, id * 4, 8)?;
            let (from, to) = (
                le_u32(&bounds[0..4]) as usize,
                le_u32(&bounds[4..8]) as usize,
            );
            let len = to.checked_sub(from).ok_or(Stale)?;
            let rows = self
                .file
                .blocked(S::Where as usize, from * WHERE_ROW, len * WHERE_ROW)?;
            for r in rows.chunks_exact(WHERE_ROW) {
                let place = out.get_mut(le_u32(&r[0..4]) as usize).ok_or(Stale)?;
                place.push(u64::from(le_u32(&r[4..8])) << 32 | u64::from(le_u32(&r[8..12])));
            }
        }
        Ok(Some(out))
    }

    /// The number of the word that byte `at` of `Words` lies in.
    fn word_at(&self, at: usize) -> Result<usize, Stale> {
        let n = self.file.len(S::WordStarts as usize)? / 4;
        let start = |i: usize, checked: bool| -> Result<usize, Stale> {
            Ok(le_u32(self.file.read(S::WordStarts as usize, i * 4, 4, checked)?) as usize)
        };
        // The last word starting at or before `at`.
        let after = checked_partition_point(n, |i, checked| Ok(start(i, checked)? <= at))?;
        after.checked_sub(1).ok_or(Stale)
    }
}

/// The file name of the merged term index of segments `first` through `last`.
pub fn file_name(first: u64, last: u64) -> String {
    format!("{first:012}-{last:012}.terms")
}

/// The segments a merged index's file name says it covers.
pub fn parse_file_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".terms")?;
    let (a, b) = stem.split_once('-')?;
    let digits = |s: &str| s.len() == 12 && s.bytes().all(|c| c.is_ascii_digit());
    (digits(a) && digits(b)).then(|| Some((a.parse().ok()?, b.parse().ok()?)))?
}

/// The merged indexes a process opened or built, by the segments they cover: a search in
/// an open repository (`serve`, `mcp serve`) finds them kept while they describe the
/// indexes its plan opened.
#[derive(Debug, Default)]
pub(crate) struct TierMemo(Mutex<Vec<Arc<Tier>>>);

impl TierMemo {
    pub(super) fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Tier>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TierMemo {
    /// Forgets what is kept without unmapping it (see [`super::IndexOptions::leave_mapped`]).
    pub(super) fn leave_mapped(&mut self) {
        std::mem::forget(std::mem::take(
            self.0.get_mut().unwrap_or_else(|p| p.into_inner()),
        ));
    }
}

/// A merged index that a search uses: the covered segments are `parts[start..start + len]`.
pub(crate) struct Covering {
    pub start: usize,
    pub tier: Arc<Tier>,
}

impl Reader {
    fn tier_path(&self, first: u64, last: u64) -> PathBuf {
        self.index_dir().join(file_name(first, last))
    }

    /// The merged term indexes for a search of `parts` (a plan): one for each aligned span
    /// of [`SPANS`] segments that are all sealed and indexed, opened when its file describes
    /// their indexes, else built from them (and written, best effort); the segments of no
    /// such span are looked up one by one.
    pub(crate) fn tiers_for(&self, parts: &[Part]) -> Vec<Covering> {
        // The sealed, indexed segments, by number: where each lies in `parts`. The newest
        // segment's first records have an index too, which is rebuilt as it grows: a merged
        // index never covers it.
        let newest = parts.iter().filter_map(Part::segment).max();
        let mut sealed: Vec<(u64, usize)> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if let Part::Indexed { seg, .. } = part {
                if Some(seg.number) != newest {
                    sealed.push((seg.number, i));
                }
            }
        }
        let at = |n: u64| sealed.binary_search_by_key(&n, |&(m, _)| m).ok();
        let index_of = |i: usize| match &parts[i] {
            Part::Indexed { index, .. } => Some(index.as_ref()),
            _ => None,
        };
        let mut out = Vec::new();
        // Which of `sealed` a merged index covers already.
        let mut covered = vec![false; sealed.len()];
        let Some(&(top, _)) = sealed.last() else {
            return out;
        };
        for span in SPANS {
            let mut first = 1;
            while first + span - 1 <= top {
                let last = first + span - 1;
                first += span;
                // The span's segments, all sealed and indexed, lie one after another in the
                // plan, and none is covered yet.
                let (Some(from), Some(to)) = (at(last + 1 - span), at(last)) else {
                    continue;
                };
                let (start, end) = (sealed[from].1, sealed[to].1);
                if to - from + 1 != span as usize
                    || end - start + 1 != span as usize
                    || covered[from..=to].iter().any(|&c| c)
                {
                    continue;
                }
                let indexes: Option<Vec<(u64, &Index)>> = (start..=end)
                    .zip(last + 1 - span..=last)
                    .map(|(i, n)| index_of(i).map(|x| (n, x)))
                    .collect();
                if let Some(tier) = indexes.and_then(|x| self.tier_of(last + 1 - span, last, &x)) {
                    covered[from..=to].iter_mut().for_each(|c| *c = true);
                    out.push(Covering { start, tier });
                }
            }
        }
        out.sort_by_key(|c| c.start);
        out
    }

    /// The merged index of segments `first..=last` with these indexes: kept, opened from
    /// its file, or built.
    fn tier_of(&self, first: u64, last: u64, indexes: &[(u64, &Index)]) -> Option<Arc<Tier>> {
        let describes = |t: &Tier| t.describes(indexes.iter().copied());
        {
            let kept = self.tier_memo.kept();
            if let Some(t) = kept
                .iter()
                .find(|t| t.first == first && t.last == last && describes(t))
            {
                return Some(t.clone());
            }
        }
        let path = self.tier_path(first, last);
        let tier = match Tier::open(&path).filter(|t| describes(t)) {
            Some(t) => t,
            None => {
                let report = self
                    .options
                    .report_builds
                    .filter(|_| last - first + 1 >= SPANS[0]);
                let started = report.map(|report| {
                    report(&format!(
                        "merging the word indexes of segments {first} to {last}, once: kept in {}",
                        self.index_dir().display()
                    ));
                    (report, std::time::Instant::now())
                });
                let built = Tier::build(indexes)?;
                if let Some((report, start)) = started {
                    report(&format!("merged in {:.1} s", start.elapsed().as_secs_f64()));
                }
                let written = self.write_cache_parts(&path, &built.parts());
                // The spans inside it are no longer asked.
                if last - first + 1 > SPANS[SPANS.len() - 1] {
                    let small = SPANS[SPANS.len() - 1];
                    let mut f = first;
                    while f + small - 1 <= last {
                        let _ = std::fs::remove_file(self.tier_path(f, f + small - 1));
                        f += small;
                    }
                }
                // A long-lived process maps the file rather than keeping the bytes.
                match written
                    .then(|| Tier::open(&path))
                    .flatten()
                    .filter(|t| describes(t))
                {
                    Some(t) => t,
                    None => Tier::from_built(built)?,
                }
            }
        };
        let tier = Arc::new(tier);
        let mut kept = self.tier_memo.kept();
        // Those it replaces (the same span, or smaller ones inside it, whose files a merge
        // deleted) are no longer kept mapped.
        kept.retain(|t| t.last < first || t.first > last);
        kept.push(tier.clone());
        Some(tier)
    }

    /// Forgets the merged index of segments `first..=last` and deletes its file (it was
    /// found damaged): the next search builds it again.
    pub(crate) fn forget_tier(&self, first: u64, last: u64) {
        self.tier_memo
            .kept()
            .retain(|t| !(t.first == first && t.last == last));
        let _ = std::fs::remove_file(self.tier_path(first, last));
    }
}

impl Reader {
    /// Checks every merged term index file against the indexes of the segments it covers
    /// (`heads`: the head checksum of each sealed segment's index) and its checksums. With
    /// `repair`, removes those found wanting and builds every merged index a search would.
    pub(crate) fn check_tiers(
        &self,
        heads: &std::collections::HashMap<u64, u32>,
        repair: bool,
    ) -> Vec<super::IndexFinding> {
        let mut findings = Vec::new();
        let Ok(entries) = std::fs::read_dir(self.index_dir()) else {
            return findings;
        };
        let mut names: Vec<(String, u64, u64)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (first, last) = parse_file_name(&name)?;
                Some((name, first, last))
            })
            .collect();
        names.sort();
        for (name, first, last) in names {
            let path = self.index_dir().join(&name);
            let span = last.checked_sub(first).map(|d| d + 1);
            let aligned =
                span.is_some_and(|s| first >= 1 && SPANS.contains(&s) && (first - 1) % s == 0);
            let problem = match Tier::open(&path) {
                _ if !aligned => {
                    Some("not the span of a merged term index".to_owned())
                }
                None => Some(match format::version_of_file(&path, MAGIC) {
                    Some(v) if v != VERSION => format!(
                        "merged term index in format {v}, not {VERSION} (written by another version of axocoatl)"
                    ),
                    _ => "merged term index damaged".to_owned(),
                }),
                Some(t) if (t.first, t.last) != (first, last) => {
                    Some("merged term index of other segments than its name says".to_owned())
                }
                Some(t) if !t.verify_all() => {
                    Some("merged term index: a section fails its checksum".to_owned())
                }
                Some(t)
                    if !t
                        .covered
                        .iter()
                        .all(|(n, crc)| heads.get(n) == Some(crc)) =>
                {
                    Some(
                        "merged term index is stale: built from other indexes than its segments' (or of segments no longer sealed)"
                            .to_owned(),
                    )
                }
                Some(_) => None,
            };
            if let Some(p) = problem {
                let then = if repair {
                    "; removed, and built again"
                } else {
                    "; it is built again by the next search, or by `axocoatl fsck --repair`"
                };
                findings.push(super::IndexFinding {
                    path: path.clone(),
                    message: format!("{p}{then}"),
                });
                if repair {
                    self.forget_tier(first, last);
                }
            }
        }
        if repair {
            if let Ok(plan) = self.plan() {
                self.tiers_for(plan.parts());
            }
        }
        findings
    }
}

#[cfg(test)]
mod tests {
    use super::S;

    /// The section table is the file format: its order and its blocks are pinned here (see
    /// FORMAT.md); changing either is a new [`super::VERSION`].
    #[test]
    fn the_section_table_is_the_format() {
        let names: Vec<String> = S::ALL.iter().map(|s| format!("{s:?}")).collect();
        assert_eq!(
            names,
            [
                "Covered",
                "Words",
                "WordStarts",
                "Suffixes",
                "Samples",
                "WhereStarts",
                "Where",
                "WordsBlocks",
                "WordStartsBlocks",
                "SuffixesBlocks",
                "WhereStartsBlocks",
                "WhereBlocks",
            ]
        );
        assert_eq!(S::COUNT, 12);
        assert_eq!(
            S::BLOCKED,
            [
                (1, 7, 512),
                (2, 8, 512),
                (3, 9, 512),
                (5, 10, 512),
                (6, 11, 512)
            ]
        );
    }
}
