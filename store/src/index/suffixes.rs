//! Sorted suffixes of a dictionary: the words holding a piece of a word, one binary search
//! away.
//!
//! The words are stored one after another, each ended by a 0 (which no word holds), and the
//! suffixes as the positions (u32) where they start in those bytes, sorted by the bytes from
//! there through the word's 0. A segment's index lists the suffixes of each word but the
//! word itself (it finds whole words and word starts in its `fst` maps); a merged term index
//! (see `tier`) lists every suffix, the words' own among them, and so needs no map. Beside
//! them, the first [`SAMPLE_HEAD`] bytes of every [`SAMPLE_EVERY`]th suffix in a dense table:
//! a search first narrows to the suffixes between two samples, then probes those (a binary
//! search over all suffixes missed the cache twice per probe).

use std::ops::Range;

use super::format::SectionFile;
use super::{checked_partition_point_in, pad_key, partition_point, Stale};
use crate::ledger::frame::le_u32;

/// Every how many sorted suffixes one is sampled.
pub const SAMPLE_EVERY: usize = 32;
/// Bytes of a sampled suffix's head.
pub const SAMPLE_HEAD: usize = 8;

/// The words, each ended by a 0, and their suffixes but the words' own, sorted (see
/// [`sorted_suffixes`]): a segment's table.
pub fn suffix_table<'a>(words: impl Iterator<Item = &'a str>) -> (Vec<u8>, Vec<u8>) {
    let mut bytes = Vec::new();
    for word in words {
        bytes.extend_from_slice(word.as_bytes());
        bytes.push(0);
    }
    let suffixes = sorted_suffixes(&bytes, false);
    (bytes, suffixes)
}

/// The bytes from `p` through the 0 that ends its word.
fn tail(bytes: &[u8], p: u32) -> &[u8] {
    let rest = &bytes[p as usize..];
    &rest[..memchr::memchr(0, rest).map_or(rest.len(), |z| z + 1)]
}

/// Calls `f` with the position of every suffix of the words of `bytes` (each ended by a 0)
/// that starts at a character: the word's own too when `with_words`.
fn each_suffix(bytes: &[u8], with_words: bool, mut f: impl FnMut(u32)) {
    let mut start = true;
    for (i, &b) in bytes.iter().enumerate() {
        if b == 0 {
            start = true;
            continue;
        }
        // A character starts at any byte but a UTF-8 continuation byte.
        if b & 0xc0 != 0x80 && (with_words || !start) {
            f(i as u32);
        }
        start = false;
    }
}

/// Tables from this many suffixes on are sorted by two threads.
const PARALLEL_SORT: usize = 1 << 20;

/// The position (u32 LE) of every suffix of the words of `bytes` (each ended by a 0) that
/// starts at a character (the word's own when `with_words`), sorted by the suffix through
/// its 0, equal ones by position.
pub fn sorted_suffixes(bytes: &[u8], with_words: bool) -> Vec<u8> {
    // Put into one bucket per first byte (the buckets' order is the suffixes' order), then
    // each bucket sorted alone: a merged index of 64 segments has ~25 million suffixes, and
    // only one bucket at a time is held with its sort keys.
    let mut counts = [0usize; 257];
    each_suffix(bytes, with_words, |p| {
        counts[usize::from(bytes[p as usize]) + 1] += 1
    });
    for b in 1..257 {
        counts[b] += counts[b - 1];
    }
    // The table is filled in place (a merged index's is ~100 MB): positions as u32 LE.
    let mut sorted = vec![0u8; counts[256] * 4];
    let mut next = counts;
    each_suffix(bytes, with_words, |p| {
        let b = usize::from(bytes[p as usize]);
        sorted[next[b] * 4..next[b] * 4 + 4].copy_from_slice(&p.to_le_bytes());
        next[b] += 1;
    });
    let sort_buckets = |mut rest: &mut [u8], buckets: std::ops::Range<usize>| {
        for b in buckets {
            let (bucket, after) = rest.split_at_mut((counts[b + 1] - counts[b]) * 4);
            sort_bucket(bytes, bucket);
            rest = after;
        }
    };
    if counts[256] < PARALLEL_SORT {
        sort_buckets(&mut sorted, 0..256);
    } else {
        // Two halves of about as many suffixes, each on a thread of its own.
        let half = (1..256)
            .find(|&b| counts[b] >= counts[256] / 2)
            .unwrap_or(256);
        let (low, high) = sorted.split_at_mut(counts[half] * 4);
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| sort_buckets(high, half..256));
            sort_buckets(low, 0..half);
            helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        });
    }
    sorted
}

/// Sorts the suffixes at `bucket` (positions in `bytes`, u32 LE) by the bytes through their
/// 0, equal ones by position.
fn sort_bucket(bytes: &[u8], bucket: &mut [u8]) {
    // Sorted by their first 8 bytes as a number (zero-padded past the 0, so the order is the
    // bytes' order), the rest compared only between suffixes whose heads are equal and hold
    // no 0 (comparing suffixes byte by byte, each found by its 0, was a sixth of a build).
    let mut keyed: Vec<(u64, u32)> = bucket
        .chunks_exact(4)
        .map(|p| {
            let p = le_u32(p);
            (u64::from_be_bytes(pad_key(tail(bytes, p), 0)), p)
        })
        .collect();
    // Equal suffixes (of different words) by position: one order for the same words.
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| {
                if a.0 & 0xff == 0 {
                    // Equal heads that end within them: the same suffix.
                    std::cmp::Ordering::Equal
                } else {
                    tail(bytes, a.1).cmp(tail(bytes, b.1))
                }
            })
            .then(a.1.cmp(&b.1))
    });
    for (slot, (_, p)) in bucket.chunks_exact_mut(4).zip(keyed) {
        slot.copy_from_slice(&p.to_le_bytes());
    }
}

/// The first [`SAMPLE_HEAD`] bytes (zero-padded past the 0 that ends the word) of every
/// [`SAMPLE_EVERY`]th suffix of `suffixes` (positions in `words`).
pub fn suffix_samples(words: &[u8], suffixes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(suffixes.len() / 4 / SAMPLE_EVERY * SAMPLE_HEAD + SAMPLE_HEAD);
    for at in suffixes.chunks_exact(4).step_by(SAMPLE_EVERY) {
        out.extend_from_slice(&pad_key::<SAMPLE_HEAD>(tail(words, le_u32(at)), 0));
    }
    out
}

/// The sorted suffixes of a file of sections: the sections of the words (blocked), of the
/// suffixes (blocked) and of the samples (read unverified: a wrong sample can only narrow a
/// search to a wrong window, which the verified probes around its result find).
pub(crate) struct SuffixTable<'a> {
    pub file: &'a SectionFile,
    pub words: usize,
    pub suffixes: usize,
    /// None: a binary search over all of them (a table of the words' own starts, whose
    /// ranks are the words' numbers).
    pub samples: Option<usize>,
}

impl<'a> SuffixTable<'a> {
    /// The table of `file` whose words, suffixes and samples are these sections.
    pub fn of(file: &'a SectionFile, [words, suffixes, samples]: [usize; 3]) -> Self {
        SuffixTable {
            file,
            words,
            suffixes,
            samples: Some(samples),
        }
    }

    /// How many suffixes the table lists.
    pub fn len(&self) -> Result<usize, Stale> {
        Ok(self.file.len(self.suffixes)? / 4)
    }

    /// Where in the words suffix `i` starts (its entry verified when `checked`).
    pub fn position(&self, i: usize, checked: bool) -> Result<usize, Stale> {
        Ok(le_u32(self.file.read(self.suffixes, i * 4, 4, checked)?) as usize)
    }

    /// The suffixes (by rank) that start with `key`: `None` past `most` of them.
    pub fn starting_with(&self, key: &[u8], most: usize) -> Result<Option<Range<usize>>, Stale> {
        let n = self.len()?;
        let head = |i: usize, checked: bool| self.head(self.position(i, checked)?, key, checked);
        let first = checked_partition_point_in(self.window(key, n)?, n, |i, checked| {
            Ok(head(i, checked)? < key)
        })?;
        // The suffixes starting with `key` follow `first`, usually a few: they are counted by
        // galloping from it (a probe or two) rather than a second search.
        let starts = |i: usize| Ok(i < n && head(i, true)? == key);
        let mut end = first;
        if starts(first)? {
            let (mut last, mut step) = (first, 1);
            while starts(last + step)? {
                last += step;
                step *= 2;
                if last - first >= most {
                    return Ok(None);
                }
            }
            end = last + 1 + partition_point(step - 1, |i| starts(last + 1 + i))?;
        }
        Ok((end - first <= most).then_some(first..end))
    }

    /// The range of sorted suffixes that holds the first one not below `key`, by the sampled
    /// heads: after the last sample whose head is below `key`'s first bytes, through the
    /// first whose head is above them.
    fn window(&self, key: &[u8], n: usize) -> Result<Range<usize>, Stale> {
        let Some(samples) = self.samples else {
            return Ok(0..n);
        };
        let samples = self.file.unchecked(samples)?;
        if samples.len() != n.div_ceil(SAMPLE_EVERY) * SAMPLE_HEAD {
            return Err(Stale);
        }
        let k: [u8; SAMPLE_HEAD] = pad_key(key, 0);
        let sample = |s: usize| &samples[s * SAMPLE_HEAD..(s + 1) * SAMPLE_HEAD];
        let count = samples.len() / SAMPLE_HEAD;
        // A head below `k` is a suffix below `key`, one above `k` a suffix not below it (one
        // that starts with `key` when `key` is shorter than a head); an equal head says
        // nothing.
        let below = partition_point(count, |s| Ok(sample(s) < k.as_slice()))?;
        let above =
            below + partition_point(count - below, |s| Ok(sample(below + s) <= k.as_slice()))?;
        let lo = below.saturating_sub(1) * SAMPLE_EVERY + usize::from(below > 0);
        let hi = (above * SAMPLE_EVERY).min(n);
        Ok(lo.min(hi)..hi)
    }

    /// The first `key.len()` bytes of the suffix at `at` (fewer when its 0 comes first,
    /// which is then the last byte): compared with `key`, they order the suffix as the
    /// whole suffix would, and equal `key` exactly when the suffix starts with it.
    fn head(&self, at: usize, key: &[u8], checked: bool) -> Result<&[u8], Stale> {
        let total = self.file.len(self.words)?;
        let take = key.len().min(total.checked_sub(at).ok_or(Stale)?);
        let bytes = self.file.read(self.words, at, take, checked)?;
        Ok(match memchr::memchr(0, bytes) {
            Some(z) => &bytes[..=z],
            None => bytes,
        })
    }

    /// The bytes of the words from `at` through the 0 that ends its word.
    fn through_zero(&self, at: usize) -> Result<&[u8], Stale> {
        let total = self.file.len(self.words)?;
        let mut len = 32;
        loop {
            let take = len.min(total.checked_sub(at).ok_or(Stale)?);
            let bytes = self.file.blocked(self.words, at, take)?;
            if let Some(z) = memchr::memchr(0, bytes) {
                return Ok(&bytes[..=z]);
            }
            if take < len {
                return Err(Stale);
            }
            len *= 4;
        }
    }

    /// The word that byte `at` of the words lies in, and where it starts.
    pub fn word_around(&self, at: usize) -> Result<(usize, &[u8]), Stale> {
        let mut back = 32;
        let start = loop {
            let from = at.saturating_sub(back);
            let bytes = self.file.blocked(self.words, from, at - from)?;
            if let Some(z) = memchr::memrchr(0, bytes) {
                break from + z + 1;
            }
            if from == 0 {
                break 0;
            }
            back *= 4;
        };
        let word = self.through_zero(start)?;
        Ok((start, &word[..word.len() - 1]))
    }
}
