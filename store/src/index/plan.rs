//! The plan of a read: every segment with its index, opened, checked against the index
//! before it and built when missing, stale or damaged; what a process keeps of the plan for
//! the next one; rebuilding and checking the indexes (`fsck`).

use super::*;

/// Whether `seg` starts where the segment before it ended (`last_seq`, when known). A
/// segment that repeats earlier records is skipped; one after missing records is read. Each
/// is reported in `parts`.
pub(super) fn follows(seg: &SegmentData, last_seq: Option<u64>, parts: &mut Vec<Part>) -> bool {
    let (Some(last), Ok((_, base))) = (last_seq, seg.header()) else {
        return true;
    };
    if base < last {
        parts.push(Part::Unreadable(Damaged {
            path: seg.path.clone(),
            offset: Some(0),
            reason: format!("the segment starts after sequence number {base}, but the one before it ends at {last}: its records repeat earlier ones (a stray copy of a segment?); skipped"),
        }));
        return false;
    }
    if base > last {
        parts.push(Part::Unreadable(Damaged {
            path: seg.path.clone(),
            offset: Some(0),
            reason: format!("the segment starts after sequence number {base}, but the one before it ends at {last}: records are missing"),
        }));
    }
    true
}

/// How one segment is read by a command.
#[derive(Debug)]
pub(crate) enum Part {
    /// A sealed segment and its index.
    Indexed {
        seg: Arc<SegmentData>,
        index: Arc<Index>,
    },
    /// What was appended to the newest segment since it was indexed (all of it when it has
    /// no index), or a segment that cannot be indexed: walked.
    Raw { seg: Arc<SegmentData> },
    /// A segment that could not be opened.
    Unreadable(Damaged),
}

impl Part {
    /// The number of the segment read, if it could be opened.
    pub(super) fn segment(&self) -> Option<u64> {
        match self {
            Part::Indexed { seg, .. } | Part::Raw { seg } => Some(seg.number),
            Part::Unreadable(_) => None,
        }
    }
}

/// The plan of a read: every segment of the ledger, oldest first, and how a read takes it
/// (through its checked index, walked, or not at all, with why). Made by [`Reader::plan`];
/// the reads of the reader and the searcher each start from one.
#[derive(Debug)]
pub struct Plan {
    parts: Vec<Part>,
}

impl Plan {
    /// The segments, in order.
    pub(crate) fn parts(&self) -> &[Part] {
        &self.parts
    }

    pub(super) fn of(parts: Vec<Part>) -> Plan {
        Plan { parts }
    }

    pub(crate) fn into_parts(self) -> Vec<Part> {
        self.parts
    }
}

/// A sealed segment as a plan reads it: (inode of its file, its bytes, its index).
pub(super) type Kept = (u64, Arc<SegmentData>, Arc<Index>);

/// The sealed segments of the last plan, with their indexes (checked against them when
/// opened, verified as far as they were read since), kept for the next plan of the process:
/// `serve`, a search of an open repository, or a command that reads the ledger twice no
/// longer opens, maps and checks every segment and index again. A sealed segment never
/// changes, and a file put in its place (a restore) has another inode, so an entry is used
/// only for the same inode; an index found damaged is forgotten with its file.
///
/// Beside them, the newest segment's indexed prefix and its index, for the same segment
/// file (inode) and the same index file (inode, length, change time): appends never change
/// the prefix, and an index rebuilt as the segment grows is renamed into place, so it has
/// another inode. Opening, mapping, parsing and unmapping the two was a tenth of an indexed
/// search in process.
#[derive(Debug, Default)]
pub(crate) struct SealedMemo(
    Mutex<HashMap<u64, Kept>>,
    Mutex<Option<NewestKept>>,
    Mutex<Option<Arc<Planned>>>,
    Mutex<Option<(TailStamp, Arc<SegmentData>)>>,
);

/// The newest segment's file as its records past an index were read: the next plan of the
/// process is handed the same bytes (and the frames its walks found in them) while the
/// file is this one, as long and as last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TailStamp {
    segment: u64,
    inode: u64,
    from: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The sealed part of the last plan of every segment (each read through its index file),
/// for the next plan over the same segment files: a search in an open repository no longer
/// checks 72 segments' indexes against each other (a tenth of it in process).
#[derive(Debug)]
pub(crate) struct Planned {
    numbers: Vec<u64>,
    inodes: Vec<u64>,
    parts: Vec<(Arc<SegmentData>, Arc<Index>)>,
    /// The turns open at the end of the last sealed segment.
    carry: Vec<OpenTurn>,
    last_seq: Option<u64>,
}

/// The newest segment's prefix as a plan reads it: its stamp, the prefix, its index.
pub(super) type NewestKept = (NewestStamp, Arc<SegmentData>, Arc<Index>);

/// What the kept newest prefix and index are used for: the same segment file and the same
/// index file, unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NewestStamp {
    segment: u64,
    segment_inode: u64,
    pub(super) index_inode: u64,
    index_len: u64,
    index_ctime: (i64, i64),
}

/// A sealed segment of a plan, or why it cannot be read.
type Sealed = std::result::Result<Arc<SegmentData>, Damaged>;

/// Builds of at least this many bytes of segments are reported (about a second here; any
/// build in tests).
const REPORTED_BUILD: u64 = if cfg!(test) { 1 } else { 128 << 20 };

impl SealedMemo {
    /// Forgets what is kept without unmapping it (see [`IndexOptions::leave_mapped`]).
    pub(super) fn leave_mapped(&mut self) {
        let kept = std::mem::take(self.0.get_mut().unwrap_or_else(|p| p.into_inner()));
        std::mem::forget(kept);
        std::mem::forget(self.1.get_mut().unwrap_or_else(|p| p.into_inner()).take());
        std::mem::forget(self.2.get_mut().unwrap_or_else(|p| p.into_inner()).take());
        std::mem::forget(self.3.get_mut().unwrap_or_else(|p| p.into_inner()).take());
    }

    pub(super) fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Kept>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kept segment and index of each of `numbers` whose file has the inode listed.
    pub(super) fn kept(
        &self,
        numbers: &[u64],
        inodes: &[u64],
    ) -> Vec<Option<(Arc<SegmentData>, Arc<Index>)>> {
        let entries = self.entries();
        numbers
            .iter()
            .zip(inodes)
            .map(|(n, ino)| match entries.get(n) {
                Some((kept_ino, seg, index)) if kept_ino == ino => {
                    Some((seg.clone(), index.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// Keeps the sealed segments of a plan just made, and only those; an index built in
    /// memory is not kept (its file, mapped by the next plan, is: a long-lived process
    /// holds no copy of the indexes on its heap).
    pub(super) fn keep(&self, kept: Vec<(u64, Kept)>) {
        *self.entries() = kept
            .into_iter()
            .filter(|(_, (_, _, index))| index.file.is_mapped())
            .collect();
    }

    /// Keeps these too (a plan of some of the sealed segments), leaving the others kept.
    pub(super) fn add(&self, kept: Vec<(u64, Kept)>) {
        self.entries().extend(
            kept.into_iter()
                .filter(|(_, (_, _, index))| index.file.is_mapped()),
        );
    }

    /// The sealed part of the last plan, if `set` lists the same sealed segment files.
    pub(super) fn planned(&self, set: &crate::ledger::SegmentSet) -> Option<Arc<Planned>> {
        let planned = self.2.lock().unwrap_or_else(|p| p.into_inner());
        let p = planned.as_ref()?;
        let sealed = set.numbers.len().checked_sub(1)?;
        (set.missing.is_empty()
            && set.numbers[..sealed] == p.numbers[..]
            && set.inodes[..sealed] == p.inodes[..])
            .then(|| p.clone())
    }

    pub(super) fn newest_records(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<(TailStamp, Arc<SegmentData>)>> {
        self.3.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn plan_made(&self, planned: Planned) {
        *self.2.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(planned));
    }

    /// Forgets segment `number` (its index was found damaged).
    pub(crate) fn forget(&self, number: u64) {
        *self.2.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.entries().remove(&number);
        let mut newest = self.newest();
        if newest.as_ref().is_some_and(|(k, _, _)| k.segment == number) {
            *newest = None;
        }
    }

    pub(super) fn newest(&self) -> std::sync::MutexGuard<'_, Option<NewestKept>> {
        self.1.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reader {
    /// The directory of the indexes.
    pub fn index_dir(&self) -> PathBuf {
        self.ledger.dir().join(crate::layout::INDEX_SUBDIR)
    }

    pub(super) fn index_path(&self, number: u64) -> PathBuf {
        self.index_dir().join(index_file_name(number))
    }

    /// Every segment, oldest first, each with its index when it is sealed. Missing, stale
    /// or damaged indexes are built (in parallel, one segment per core) and written. The
    /// sealed segments and their checked indexes are kept for the next plan of this process
    /// (see [`SealedMemo`]).
    pub fn plan(&self) -> Result<Plan> {
        let set = self.ledger.segment_set()?;
        // A missing segment is damage: its records are lost, and a reader must say so.
        let mut parts: Vec<Part> = set
            .problems(self.ledger.dir())
            .into_iter()
            .map(|e| Part::Unreadable(Damaged::from_error(e)))
            .collect();
        let (newest, sealed) = match set.numbers.split_last() {
            Some((&newest, sealed)) => (Some(newest), sealed),
            None => (None, &[][..]),
        };
        if let Some(planned) = self.sealed_memo.planned(&set) {
            let mut parts = Vec::with_capacity(planned.parts.len() + 2);
            parts.extend(planned.parts.iter().map(|(seg, index)| Part::Indexed {
                seg: seg.clone(),
                index: index.clone(),
            }));
            if let (Some(n), Some(&inode)) = (newest, set.inodes.last()) {
                self.plan_newest(n, inode, &planned.carry, planned.last_seq, &mut parts);
            }
            return Ok(Plan { parts });
        }
        let (mut segs, mut found) = self.open_sealed(sealed, &set.inodes);
        // Build what is missing or stale in parallel; the carried turns are settled below.
        let mut builders = self.build_missing(&segs, &found);
        let mut carry: Vec<OpenTurn> = Vec::new();
        let mut last_seq: Option<u64> = None;
        let mut keep: Vec<(u64, Kept)> = Vec::new();
        for (i, seg) in segs.drain(..).enumerate() {
            let seg = match seg {
                Ok(seg) => seg,
                Err(d) => {
                    parts.push(Part::Unreadable(d));
                    continue;
                }
            };
            if !follows(&seg, last_seq, &mut parts) {
                continue;
            }
            let index = match found[i].take() {
                Some(index) if index.carry_in() == digest(&carry) => Some(index),
                _ => self.build(&seg, builders[i].take(), &carry).map(Arc::new),
            };
            match index {
                Some(index) => {
                    carry.clone_from(&index.meta.open);
                    last_seq = Some(index.stamp.last_seq);
                    keep.push((seg.number, (set.inodes[i], seg.clone(), index.clone())));
                    parts.push(Part::Indexed { seg, index });
                }
                None => {
                    last_seq = None;
                    parts.push(Part::Raw { seg });
                }
            }
        }
        // Every sealed segment read through its index file: the next plan of the process
        // over the same files starts from here.
        let whole = parts.len() == sealed.len()
            && parts
                .iter()
                .all(|p| matches!(p, Part::Indexed { index, .. } if index.file.is_mapped()));
        self.sealed_memo.keep(keep);
        if whole {
            self.sealed_memo.plan_made(Planned {
                numbers: sealed.to_vec(),
                inodes: set.inodes[..sealed.len()].to_vec(),
                parts: parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Indexed { seg, index } => Some((seg.clone(), index.clone())),
                        _ => None,
                    })
                    .collect(),
                carry: carry.clone(),
                last_seq,
            });
        }
        if let (Some(n), Some(&inode)) = (newest, set.inodes.last()) {
            self.plan_newest(n, inode, &carry, last_seq, &mut parts);
        }
        Ok(Plan { parts })
    }

    /// The sealed segments `sealed` (`inodes` lists their files' inodes), each with its
    /// index when one is kept for it or its file describes it.
    pub(super) fn open_sealed(
        &self,
        sealed: &[u64],
        inodes: &[u64],
    ) -> (Vec<Sealed>, Vec<Option<Arc<Index>>>) {
        let kept = self.sealed_memo.kept(sealed, inodes);
        let mut segs: Vec<Sealed> = Vec::new();
        let mut found: Vec<Option<Arc<Index>>> = Vec::new();
        for (&n, kept) in sealed.iter().zip(kept) {
            let (seg, index) = match kept {
                Some((seg, index)) => (Ok(seg), Some(index)),
                None => match load(&self.ledger.segment_path(n), n, true, 0) {
                    Ok(seg) => {
                        let index = Index::open(&self.index_path(n), &seg).map(Arc::new);
                        (Ok(Arc::new(seg)), index)
                    }
                    Err(e) => (Err(Damaged::from_error(e)), None),
                },
            };
            segs.push(seg);
            found.push(index);
        }
        (segs, found)
    }

    /// The builders of the indexes `found` lacks for the readable `segs`, built in parallel
    /// (one segment per core); a long build is reported (see [`IndexOptions::report_builds`]).
    pub(super) fn build_missing(
        &self,
        segs: &[Sealed],
        found: &[Option<Arc<Index>>],
    ) -> Vec<Option<Builder>> {
        let missing: Vec<u64> = (0..segs.len() as u64)
            .filter(|&i| found[i as usize].is_none() && segs[i as usize].is_ok())
            .collect();
        let mut builders: Vec<Option<Builder>> = (0..segs.len()).map(|_| None).collect();
        let bytes: u64 = missing
            .iter()
            .filter_map(|&i| segs[i as usize].as_ref().ok())
            .map(|seg| seg.bytes().len() as u64)
            .sum();
        let report = self
            .options
            .report_builds
            .filter(|_| bytes >= REPORTED_BUILD);
        let started = report.map(|report| {
            report(&format!(
                "indexing {} segments ({} MiB) of the ledger, once: the indexes are kept in {}",
                missing.len(),
                bytes >> 20,
                self.index_dir().display()
            ));
            (report, std::time::Instant::now())
        });
        let built = crate::ledger::parallel_map(&missing, |i| match &segs[i as usize] {
            Ok(seg) => Builder::from_segment(seg),
            Err(_) => None,
        });
        if let Some((report, start)) = started {
            report(&format!(
                "indexed in {:.1} s",
                start.elapsed().as_secs_f64()
            ));
        }
        for (i, b) in missing.iter().zip(built) {
            builders[*i as usize] = b;
        }
        builders
    }

    /// How the newest segment is read: through the index of its first records and a walk
    /// of what was appended since, when it has such an index; else walked whole. A reader
    /// that walks more than [`Reader::newest_reindex`] bytes indexes them for the next.
    pub(super) fn plan_newest(
        &self,
        n: u64,
        inode: u64,
        carry: &[OpenTurn],
        last_seq: Option<u64>,
        parts: &mut Vec<Part>,
    ) {
        let path = self.ledger.segment_path(n);
        let reindex = self.newest_reindex();
        if let Some((view, index)) = self.open_newest_index(n, inode, carry) {
            match self.newest_records(&path, n, inode, index.stamp.covered) {
                Ok(rest) if rest.bytes().len() as u64 <= reindex => {
                    if follows(&view, last_seq, parts) {
                        parts.push(Part::Indexed { seg: view, index });
                        parts.push(Part::Raw { seg: rest });
                    }
                    return;
                }
                Ok(_) => {} // much appended since: indexed again below
                Err(e) => return parts.push(Part::Unreadable(Damaged::from_error(e))),
            }
        }
        let seg = match load(&path, n, false, 0) {
            Ok(seg) => seg,
            Err(e) => return parts.push(Part::Unreadable(Damaged::from_error(e))),
        };
        if !follows(&seg, last_seq, parts) {
            return;
        }
        if seg.bytes().len() as u64 > reindex {
            if let Some(b) = Builder::from_segment(&seg).filter(Builder::intact) {
                let (bytes, _) = b.finish(&seg, carry);
                self.write_index(n, &bytes);
                // Its records were just read: this reader uses the index too (it covers
                // every intact record; a torn write after them is not one).
                if let Some(index) = Index::from_built(bytes) {
                    return parts.push(Part::Indexed {
                        seg: Arc::new(seg),
                        index: Arc::new(index),
                    });
                }
            }
        }
        parts.push(Part::Raw { seg: Arc::new(seg) });
    }

    /// The newest segment's bytes from `from` on: those the last plan of the process read
    /// when the file is the same (inode), as long and unchanged since, else read.
    pub(super) fn newest_records(
        &self,
        path: &Path,
        n: u64,
        inode: u64,
        from: u64,
    ) -> Result<Arc<SegmentData>> {
        use std::os::unix::fs::MetadataExt;
        let stamp = std::fs::metadata(path).ok().map(|m| TailStamp {
            segment: n,
            inode: m.ino(),
            from,
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        });
        let mut kept = self.sealed_memo.newest_records();
        if let (Some(stamp), Some((k, seg))) = (stamp, kept.as_ref()) {
            // A file's times tick coarsely: the last bytes kept must also still be the
            // file's (a torn write cut and as many bytes appended in one tick).
            if stamp == *k && stamp.inode == inode && ends_with_file(seg, path) {
                return Ok(seg.clone());
            }
        }
        let seg = Arc::new(load(path, n, false, from)?);
        // Kept only when it holds what the stamp says (nothing was appended in between).
        *kept = stamp
            .filter(|s| s.inode == inode && seg.base + seg.bytes().len() as u64 == s.len)
            .map(|s| (s, seg.clone()));
        Ok(seg)
    }

    /// How many bytes of the newest segment a reader walks before it indexes them: an
    /// eighth of a segment, at most 2 MiB (so a 16 MiB segment is indexed about 8 times
    /// as it fills, and no command walks more than 2 MiB of it).
    pub(super) fn newest_reindex(&self) -> u64 {
        (self.ledger.segment_limit() / 8).clamp(1, 2 << 20)
    }

    /// The index of the newest segment's first records, with those records mapped, if it
    /// still describes them; kept for the next plan of the process (see [`SealedMemo`]).
    pub(super) fn open_newest_index(
        &self,
        n: u64,
        inode: u64,
        carry: &[OpenTurn],
    ) -> Option<(Arc<SegmentData>, Arc<Index>)> {
        use std::os::unix::fs::MetadataExt;
        let path = self.index_path(n);
        // Stat'ed before it is opened: a file put in place in between is opened and kept
        // under the older stamp, so the next plan opens it again (never the reverse). The
        // stamp also changes when the file is written in place (damage).
        let m = std::fs::metadata(&path).ok()?;
        let key = NewestStamp {
            segment: n,
            segment_inode: inode,
            index_inode: m.ino(),
            index_len: m.len(),
            index_ctime: (m.ctime(), m.ctime_nsec()),
        };
        let mut newest = self.sealed_memo.newest();
        let kept = match &*newest {
            // The segment must still hold the prefix (a repair may have cut it).
            Some((k, view, index))
                if *k == key
                    && std::fs::metadata(self.ledger.segment_path(n))
                        .is_ok_and(|m| m.len() >= index.stamp.covered)
                    && index.describes(view) =>
            {
                Some((view.clone(), index.clone()))
            }
            _ => None,
        };
        let (view, index) = match kept {
            Some(both) => both,
            None => {
                let index = Index::open_file(&path)?;
                if index.stamp.segment != n {
                    return None;
                }
                let view = crate::ledger::segment::load_prefix(
                    &self.ledger.segment_path(n),
                    n,
                    index.stamp.covered,
                )?;
                if !index.describes(&view) {
                    return None;
                }
                let (view, index) = (Arc::new(view), Arc::new(index));
                *newest = Some((key, view.clone(), index.clone()));
                (view, index)
            }
        };
        (index.carry_in() == digest(carry)).then_some((view, index))
    }

    /// Builds the index of sealed segment `number` again from its bytes and writes it;
    /// returns its size in bytes (0 when `number` is no sealed segment). For benchmarks and
    /// tools: readers build what they need by themselves.
    pub fn rebuild_index(&self, number: u64) -> Result<u64> {
        let mut carry: Vec<OpenTurn> = Vec::new();
        for part in self.plan()?.into_parts() {
            if let Part::Indexed { seg, index } = part {
                if seg.number == number {
                    return Ok(self
                        .build(&seg, None, &carry)
                        .map_or(0, |i| i.bytes().len() as u64));
                }
                carry = index.meta.open.clone();
            }
        }
        Ok(0)
    }

    /// Builds (or finishes building) the index of `seg` and writes it, best effort: an index
    /// that cannot be written is still used for this command.
    pub(super) fn build(
        &self,
        seg: &SegmentData,
        builder: Option<Builder>,
        carry: &[OpenTurn],
    ) -> Option<Index> {
        let builder = builder.or_else(|| Builder::from_segment(seg))?;
        let (bytes, _) = builder.finish(seg, carry);
        self.write_index(seg.number, &bytes);
        Index::from_built(bytes)
    }

    /// Writes an index file, best effort: an index that cannot be written is still used by
    /// the command that built it.
    pub(super) fn write_index(&self, number: u64, bytes: &[u8]) {
        self.write_cache(&self.index_path(number), bytes);
    }

    /// Writes a file of the index directory (an index, the sessions cache) by rename, best
    /// effort and unsynced: a cache.
    pub(super) fn write_cache(&self, path: &Path, bytes: &[u8]) {
        self.write_cache_parts(path, &[bytes]);
    }

    /// [`Reader::write_cache`] of a file assembled from `parts`, one after another; whether
    /// it was written.
    pub(super) fn write_cache_parts(&self, path: &Path, parts: &[&[u8]]) -> bool {
        let dir = self.index_dir();
        let first = parts.first().copied().unwrap_or_default();
        create_dir_private(&dir).is_ok()
            && crate::failpoint::hit_write("ledger.index.write", first, |b| {
                // A crash test's worst case: half an index in place, as an unsynced write
                // can leave it after a power loss.
                std::fs::write(path, b)
            })
            .is_ok()
            && write_atomic_parts(&dir, path, parts, Durability::Cache).is_ok()
    }
}

/// A cache file of the index directory (the sessions and places caches): `magic`, `body`,
/// and the CRC-32C of the body.
pub(super) fn seal_cache(magic: &[u8], body: &[u8]) -> Vec<u8> {
    let mut bytes = magic.to_vec();
    bytes.extend_from_slice(body);
    bytes.extend_from_slice(&crate::ledger::frame::crc32c(body).to_le_bytes());
    bytes
}

/// The body of a cache file written by [`seal_cache`], if it is intact.
pub(super) fn open_cache<'a>(magic: &[u8], bytes: &'a [u8]) -> Option<&'a [u8]> {
    let body = bytes.strip_prefix(magic)?;
    let (body, crc) = body.split_at_checked(body.len().checked_sub(4)?)?;
    (crate::ledger::frame::crc32c(body) == crate::ledger::frame::le_u32(crc)).then_some(body)
}

/// An index file that is not what it should be (found by `fsck`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexFinding {
    pub path: PathBuf,
    pub message: String,
}

impl Reader {
    /// Checks every index file against its segment, the index before it and its checksums,
    /// and looks for files that are no index of a sealed segment. With `repair`, rebuilds
    /// the indexes found wanting (and missing ones) and removes the strays. Indexes are
    /// caches: a finding never makes the repository unclean.
    pub fn check_indexes(&self, repair: bool) -> Result<Vec<IndexFinding>> {
        let numbers = self.ledger.segment_numbers()?;
        let sealed: Vec<u64> = numbers
            .iter()
            .copied()
            .take(numbers.len().saturating_sub(1))
            .collect();
        let mut findings = Vec::new();
        let mut carry: Vec<OpenTurn> = Vec::new();
        // The head checksum of each sealed segment's index as readers will find it (checked,
        // or as built again).
        let mut heads: HashMap<u64, u32> = HashMap::new();
        for &n in &sealed {
            let Ok(seg) = load(&self.ledger.segment_path(n), n, true, 0) else {
                continue; // the ledger check reports an unreadable segment
            };
            let path = self.index_path(n);
            let problem = if !path.exists() {
                None
            } else {
                match Index::open(&path, &seg) {
                    None => Some(match format::version_of(&path) {
                        Some(v) if v != format::VERSION => format!(
                            "in format {v}, not {} (written by another version of axocoatl)",
                            format::VERSION
                        ),
                        _ => "damaged, or built from other bytes than its segment's".to_owned(),
                    }),
                    Some(i) if !i.verify_all() => Some("a section fails its checksum".to_owned()),
                    Some(i) if i.carry_in() != digest(&carry) => Some(
                        "stale: built with other turns carried from the segment before".to_owned(),
                    ),
                    Some(i) => {
                        carry = i.meta.open.clone();
                        heads.insert(n, i.head_crc());
                        continue;
                    }
                }
            };
            if let Some(p) = problem {
                let then = if repair {
                    "; rebuilt"
                } else {
                    "; it is rebuilt when next needed, or by `axocoatl fsck --repair`"
                };
                findings.push(IndexFinding {
                    path: path.clone(),
                    message: format!("index {p}{then}"),
                });
            }
            let built = if repair {
                self.build(&seg, None, &carry)
            } else {
                Builder::from_segment(&seg)
                    .and_then(|b| Index::from_built(b.finish(&seg, &carry).0))
            };
            if let Some(index) = built {
                carry = index.meta.open.clone();
                heads.insert(n, index.head_crc());
            }
        }
        findings.extend(self.check_tiers(&heads, repair));
        // The newest segment's index (of its first records) is checked by every reader.
        let mut wanted: HashSet<String> = numbers.iter().map(|&n| index_file_name(n)).collect();
        wanted.insert(summary::SESSIONS_CACHE.to_owned());
        wanted.insert(places::PLACES_CACHE.to_owned());
        if let Ok(entries) = std::fs::read_dir(self.index_dir()) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                // Temporary files of interrupted writes are fsck's stray-temp-file findings;
                // merged term indexes were checked above.
                if wanted.contains(&name)
                    || name.starts_with(".tmp-")
                    || tier::parse_file_name(&name).is_some()
                {
                    continue;
                }
                let then = if repair {
                    "; removed"
                } else {
                    "; `axocoatl fsck --repair` removes it"
                };
                findings.push(IndexFinding {
                    path: entry.path(),
                    message: format!("not the index of a segment{then}"),
                });
                if repair {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(findings)
    }
}
