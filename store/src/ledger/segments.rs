//! The set of segment files: creating one atomically, listing and checking the set, and
//! the repairs `fsck --repair` makes at the end of the ledger.
//!
//! A segment appears under its final name only complete: its header is written to a
//! temporary file, synced, and linked into place (never over an existing file), then the
//! directory is synced. A segment shorter than its header can still be met as the newest
//! (left by a build before this one, killed or out of space at a roll-over): it holds no
//! record, so readers ignore it as a torn tail and the next appender or `fsck --repair`
//! removes it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frame::{SegmentHeader, HEADER_LEN};
use super::segment::load;
use super::{Damage, Ledger, Tail};
use crate::failpoint;
use crate::fsutil::{collect_strays, open_private, sync_dir, temp_file_in};
use crate::layout::{parse_segment_file_name, segment_file_name, LEDGER_DAMAGED_DIR_NAME};
use crate::{Error, Result};

/// The segment files of a ledger directory, as found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentSet {
    /// The segments readers walk, oldest first (a torn newest segment left out).
    pub numbers: Vec<u64>,
    /// The inode of each of `numbers`' files, as listed.
    pub inodes: Vec<u64>,
    /// Runs of segment numbers that are missing before the newest: `(first, last)`.
    /// Segment numbers start at 1 and have no gaps; a gap is a deleted segment whose
    /// records are lost.
    pub missing: Vec<(u64, u64)>,
    /// The newest segment when it is shorter than its header: `(number, length)`.
    pub torn: Option<(u64, u64)>,
}

impl SegmentSet {
    /// Errors describing the missing segments, for walks that report damage as they go.
    pub fn problems(&self, dir: &Path) -> Vec<Error> {
        self.missing
            .iter()
            .map(|&(first, last)| Error::Corrupt {
                path: dir.join(segment_file_name(first)),
                offset: 0,
                reason: if first == last {
                    "this segment is missing (a later one exists): its records are lost; restore it from a backup".into()
                } else {
                    format!(
                        "segments {first} to {last} are missing (a later one exists): their records are lost; restore them from a backup"
                    )
                },
            })
            .collect()
    }
}

/// What a directory's stat says of its entries: a file created, removed or renamed in it
/// changes its change and modification times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirStamp {
    inode: u64,
    pub(super) mtime: (i64, i64),
    ctime: (i64, i64),
}

impl DirStamp {
    fn of(m: &fs::Metadata) -> DirStamp {
        use std::os::unix::fs::MetadataExt;
        DirStamp {
            inode: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// How long after a directory changed its listing is kept: a file system stamps times
/// with a coarse clock (a tick of up to 10 ms on Linux, 2 s on FAT), so an entry added in
/// the tick of the last change may leave the times as they were. A listing is kept only
/// when it was taken this long after that change (as git trusts its index's stat data).
const RACY: std::time::Duration = std::time::Duration::from_secs(2);

/// The ledger directory's last listing in this process, with the stamp the directory had
/// before it was read: a plan of an open repository (a search in process, `serve`) no
/// longer reads the directory (72 entries beside 1M turns: a twentieth of an indexed
/// search). It is used only while the stamp is the same, the change it records lies
/// [`RACY`] before the listing, and no segment after the newest listed exists (segments
/// are only ever added as the next number).
#[derive(Debug, Default)]
pub(crate) struct ListingMemo(std::sync::Mutex<Option<(DirStamp, Listed)>>);

/// Segment numbers with the inodes of their files, oldest first.
type Listed = Vec<(u64, u64)>;

impl ListingMemo {
    pub(super) fn unchanged(
        &self,
        stamp: &DirStamp,
        no_next: impl Fn(u64) -> bool,
    ) -> Option<Listed> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (s, entries) = kept.as_ref()?;
        let newest = entries.last().map_or(0, |&(n, _)| n);
        (s == stamp && no_next(newest)).then(|| entries.clone())
    }

    /// Keeps `entries`, listed under `stamp`, if the directory's modification time
    /// `modified` lies [`RACY`] before `stat_at`, when its stat was taken.
    fn keep(
        &self,
        stamp: DirStamp,
        modified: Option<std::time::SystemTime>,
        stat_at: std::time::SystemTime,
        entries: &[(u64, u64)],
    ) {
        // An entry added or removed sets both times to the clock's tick: the stamp stays the
        // same only for a change in the tick of the modification time.
        let settled = modified.is_some_and(|c| c + RACY <= stat_at);
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
            settled.then(|| (stamp, entries.to_vec()));
    }

    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        self.kept_stamp().is_some()
    }

    #[cfg(test)]
    pub(super) fn kept_stamp(&self) -> Option<DirStamp> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref().map(|(s, _)| *s)
    }
}

impl Ledger {
    /// Every file named like a segment, oldest first, as listed (torn or not).
    pub fn listed_segment_numbers(&self) -> Result<Vec<u64>> {
        Ok(self
            .listed_segments()?
            .into_iter()
            .map(|(n, _)| n)
            .collect())
    }

    /// Every file named like a segment, oldest first, with its inode: the directory's last
    /// listing in this process while it is unchanged (see [`ListingMemo`]), else listed.
    fn listed_segments(&self) -> Result<Listed> {
        use std::os::unix::fs::DirEntryExt;
        let stat_at = std::time::SystemTime::now();
        let dir = fs::metadata(&self.dir).map_err(Error::io("stat", self.dir.clone()))?;
        let stamp = DirStamp::of(&dir);
        if let Some(entries) = self.listing.unchanged(&stamp, |newest| {
            fs::symlink_metadata(self.segment_path(newest + 1)).is_err()
        }) {
            return Ok(entries);
        }
        let mut numbers = Vec::new();
        let entries = fs::read_dir(&self.dir).map_err(Error::io("list", self.dir.clone()))?;
        for entry in entries {
            let entry = entry.map_err(Error::io("list", self.dir.clone()))?;
            if let Some(n) = entry.file_name().to_str().and_then(parse_segment_file_name) {
                numbers.push((n, entry.ino()));
            }
        }
        numbers.sort_unstable();
        self.listing
            .keep(stamp, dir.modified().ok(), stat_at, &numbers);
        Ok(numbers)
    }

    /// The segment files and what is wrong with the set: gaps, a torn newest segment.
    pub fn segment_set(&self) -> Result<SegmentSet> {
        let (mut numbers, mut inodes): (Vec<u64>, Vec<u64>) =
            self.listed_segments()?.into_iter().unzip();
        let mut torn = None;
        if let Some(&newest) = numbers.last() {
            let path = self.segment_path(newest);
            match fs::metadata(&path) {
                Ok(m) if m.len() < HEADER_LEN as u64 => {
                    torn = Some((newest, m.len()));
                    numbers.pop();
                    inodes.pop();
                }
                Ok(_) => {}
                // Removed by a repair between the listing and the stat.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    numbers.pop();
                    inodes.pop();
                }
                Err(e) => return Err(Error::io("stat", path)(e)),
            }
        }
        let mut missing = Vec::new();
        let mut expected = 1;
        for &n in &numbers {
            if n > expected {
                missing.push((expected, n - 1));
            }
            expected = n + 1;
        }
        Ok(SegmentSet {
            numbers,
            inodes,
            missing,
            torn,
        })
    }

    /// Creates segment `number` holding only its header, atomically: a crash or a full disk
    /// leaves no segment file at all (at most a stray temporary file, collected here next
    /// time). If another process created it first, that one is used.
    pub(super) fn create_segment(&self, number: u64, base_seq: u64) -> Result<Tail> {
        let path = self.dir.join(segment_file_name(number));
        collect_strays(&self.dir)?;
        failpoint::hit("ledger.segment.create")
            .map_err(Error::io("create a temporary file in", self.dir.clone()))?;
        let mut tmp = temp_file_in(&self.dir)?;
        let tmp_path = tmp.path().to_path_buf();
        let header = SegmentHeader { number, base_seq }.encode();
        failpoint::hit_write("ledger.segment.write", &header, |b| tmp.write_all(b))
            .and_then(|()| tmp.write_all(&header))
            .map_err(Error::io("write", tmp_path.clone()))?;
        failpoint::hit("ledger.segment.sync")
            .and_then(|()| tmp.as_file().sync_data())
            .map_err(Error::io("sync", tmp_path.clone()))?;
        failpoint::hit("ledger.segment.rename").map_err(Error::io("create", path.clone()))?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                // Created by another process between our listing and our create: use it.
                drop(e.file);
                let file = open_private(&path, true)?;
                let header = super::read_header(&file, &path)?;
                return Ok(Tail {
                    number,
                    path,
                    file: Arc::new(file),
                    end: HEADER_LEN as u64,
                    last_seq: header.base_seq,
                    damaged: None,
                });
            }
            Err(e) => return Err(Error::io("create", path)(e.error)),
        }
        failpoint::hit("ledger.segment.dir_sync")
            .map_err(Error::io("sync directory", self.dir.clone()))?;
        sync_dir(&self.dir)?;
        let file = open_private(&path, true)?;
        Ok(Tail {
            number,
            path,
            file: Arc::new(file),
            end: HEADER_LEN as u64,
            last_seq: base_seq,
            damaged: None,
        })
    }

    /// Removes a torn newest segment (shorter than its header: it holds no record). The
    /// caller holds the append lock.
    pub(super) fn remove_torn_segment(&self, number: u64) -> Result<()> {
        let path = self.segment_path(number);
        match failpoint::hit("ledger.torn_segment.remove").and_then(|()| fs::remove_file(&path)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("remove the torn segment", path)(e)),
        }
        sync_dir(&self.dir)
    }

    /// What `fsck --repair` does to the ledger, under the append lock: removes a torn
    /// newest segment, moves a damaged last record aside (to `ledger/v1/damaged/`, so that
    /// nothing is destroyed) and truncates a torn tail. Damage before the last intact
    /// record is left for the user: it is reported, and appends go on past it.
    pub fn repair(&self) -> Result<Repair> {
        let mut guard = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.append_lock()?;
        *guard = None;
        let mut repair = Repair::default();
        let set = self.segment_set()?;
        if let Some((number, len)) = set.torn {
            self.remove_torn_segment(number)?;
            repair.bytes += len;
            repair.actions.push(format!(
                "removed {}: {len} bytes, shorter than a segment header (a crash or a full disk while it was created)",
                segment_file_name(number)
            ));
        }
        if let Some(&newest) = set.numbers.last() {
            let header_ok = load(&self.segment_path(newest), newest, false, 0)?
                .header()
                .is_ok();
            if !header_ok {
                // A damaged header is reported by fsck, never guessed at or cut.
                return Ok(repair);
            }
            self.move_damaged_tail(newest, &mut repair)?;
            let path = self.segment_path(newest);
            let before = fs::metadata(&path)
                .map_err(Error::io("stat", path.clone()))?
                .len();
            let tail = self.sync_tail(&mut guard)?;
            if tail.number == newest && tail.end < before {
                repair.bytes += before - tail.end;
                repair.actions.push(format!(
                    "truncated a torn tail of {} bytes at byte {} of {} (a crash mid-append)",
                    before - tail.end,
                    tail.end,
                    segment_file_name(newest)
                ));
            }
        }
        Ok(repair)
    }

    /// If the newest segment ends in damage that no intact record follows (and that is not
    /// a torn write, which the tail sync truncates), copies those bytes to
    /// `ledger/v1/damaged/<segment>.<offset>` and truncates the segment before them.
    fn move_damaged_tail(&self, number: u64, repair: &mut Repair) -> Result<()> {
        let seg = load(&self.segment_path(number), number, false, 0)?;
        let mut tail = None;
        seg.frames_all(
            0,
            |_| {},
            |d| {
                if let Damage::DamagedTail { offset, len, .. } = d {
                    tail = Some((offset, len));
                }
            },
        );
        let Some((offset, len)) = tail else {
            return Ok(());
        };
        let name = segment_file_name(number);
        let dir = self.damaged_dir();
        crate::fsutil::create_dir_private(&dir)?;
        let aside = dir.join(format!("{name}.{offset}"));
        let bytes = &seg.bytes()[offset as usize..];
        failpoint::hit("ledger.damaged.move").map_err(Error::io("write", aside.clone()))?;
        crate::fsutil::write_atomic(&aside, bytes, crate::fsutil::Durability::Durable)?;
        let file = open_private(&seg.path, true)?;
        failpoint::hit("ledger.tail.truncate")
            .and_then(|()| file.set_len(offset))
            .and_then(|()| file.sync_data())
            .map_err(Error::io("truncate", seg.path.clone()))?;
        repair.bytes += len;
        repair.actions.push(format!(
            "moved the damaged last {len} bytes at byte {offset} of {name} to {}/{name}.{offset} and truncated the segment there",
            LEDGER_DAMAGED_DIR_NAME
        ));
        Ok(())
    }

    /// Where `fsck --repair` keeps the damaged bytes it cut from the end of the ledger.
    pub fn damaged_dir(&self) -> PathBuf {
        self.dir.join(LEDGER_DAMAGED_DIR_NAME)
    }

    /// Reads the header of segment `number`; `Ok(None)` when the file is shorter than one.
    pub(super) fn try_header(&self, file: &fs::File, path: &Path) -> Result<Option<SegmentHeader>> {
        let mut h = [0u8; HEADER_LEN];
        match file.read_exact_at(&mut h, 0) {
            Ok(()) => SegmentHeader::decode(&h)
                .map(Some)
                .map_err(|reason| Error::Corrupt {
                    path: path.to_owned(),
                    offset: 0,
                    reason,
                }),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(Error::io("read the header of", path)(e)),
        }
    }
}

/// What a repair of the ledger did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// One sentence per change.
    pub actions: Vec<String>,
    /// Bytes removed from segments (moved aside or truncated).
    pub bytes: u64,
}
