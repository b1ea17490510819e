//! The canonical Session ledger: append-only segments of framed, checksummed records.
//!
//! Appends from many processes are serialised by a short exclusive lock around the write
//! only; the `fdatasync` that makes a record durable runs after the lock is released, so
//! concurrent appenders share flushes (group commit). Every record gets the next sequence
//! number. A torn tail (a crash mid-append) is ignored by readers and truncated by the next
//! appender; corruption anywhere else is reported, never skipped silently.
//!
//! [`Ledger::append`] frames each record with [`frame::encode_frame`] (length, sequence,
//! header CRC, kind, the postcard body of a [`Record`], payload CRC, trailer length).

mod begun;
pub(crate) mod frame;
/// Little-endian helpers and the checksum shared with the other envelopes of the store.
pub(crate) mod frame_le {
    pub use super::frame::{crc32c, le_u32, le_u64};
}
pub mod record;
pub mod samples;
pub(crate) mod segment;
mod segments;
mod walk;

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use frame::{FRAME_OVERHEAD, HEADER_LEN, MAX_PAYLOAD};
pub use record::{Kind, Record, RecordView};
pub use segment::{decode, parallel_map, Damage, RawFrame, SegmentData};
pub use segments::{Repair, SegmentSet};
pub(crate) use walk::{decode_at, select};
pub use walk::{Damaged, Scan, Walked};

use crate::failpoint;
use crate::fsutil::open_private;
use crate::layout::segment_file_name;
use crate::lock::{LockFile, LockGuard};
use crate::{Error, Result};
use frame::{Parsed, SegmentHeader};

/// Segments roll over at this size unless configured otherwise. Every reader reads the
/// newest segment whole (sealed ones through their indexes), so its size bounds what any
/// command reads: 16 MiB keeps that under ~10 ms (64 MiB cost 30-50 ms per command beside a
/// full tail).
pub const DEFAULT_SEGMENT_LIMIT: u64 = 16 << 20;

/// Where a record starts: segment number and byte offset in it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Position {
    pub segment: u64,
    pub offset: u64,
}

impl Position {
    /// Before every record.
    pub const START: Position = Position {
        segment: 0,
        offset: 0,
    };
}

/// A record read back, with where it lives. `record` is `None` for a kind this build does
/// not know (written by a newer axocoatl): skip it with a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub pos: Position,
    /// Where the next record starts.
    pub next: Position,
    pub kind: u16,
    pub record: Option<Record>,
}

/// The result of an append: the sequence number and position of each record written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub seq: u64,
    pub pos: Position,
    pub next: Position,
}

#[derive(Debug)]
struct Tail {
    number: u64,
    path: PathBuf,
    /// Shared so that the flush after an append can run outside the lock without a `dup`.
    file: Arc<File>,
    end: u64,
    last_seq: u64,
    /// Damage at the end of the segment that no intact record follows (from `end` on):
    /// reads go on, appends are refused until `fsck --repair` moves it aside.
    damaged: Option<Error>,
}

#[derive(Debug)]
pub struct Ledger {
    dir: PathBuf,
    lock_path: PathBuf,
    lock_file: std::sync::OnceLock<LockFile>,
    segment_limit: u64,
    tail: Mutex<Option<Tail>>,
    /// Set by the first failed sync of the ledger in this process: what failed.
    poisoned: Mutex<Option<String>>,
    listing: segments::ListingMemo,
}

impl Ledger {
    /// Opens the ledger in `dir`, serialising appends with the lock file `lock_path`.
    pub fn open(dir: &Path, lock_path: &Path, segment_limit: u64) -> Ledger {
        Ledger {
            dir: dir.to_owned(),
            lock_path: lock_path.to_owned(),
            lock_file: std::sync::OnceLock::new(),
            segment_limit: segment_limit.max((HEADER_LEN + FRAME_OVERHEAD) as u64),
            tail: Mutex::new(None),
            poisoned: Mutex::new(None),
            listing: segments::ListingMemo::default(),
        }
    }

    /// Takes the append lock (the lock file stays open between appends).
    fn append_lock(&self) -> Result<LockGuard<'_>> {
        if self.lock_file.get().is_none() {
            let _ = self.lock_file.set(LockFile::open(&self.lock_path)?);
        }
        match self.lock_file.get() {
            Some(f) => f.lock(),
            None => Err(unreachable_io(&self.dir)),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file that serialises appends.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// Segments roll over past this many bytes.
    pub fn segment_limit(&self) -> u64 {
        self.segment_limit
    }

    /// Why appends through this handle are refused, if an earlier sync failed.
    pub fn poisoned(&self) -> Option<String> {
        self.poisoned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A failed sync: from now on every append through this handle is refused.
    fn poison(&self, e: &Error) {
        let mut p = self.poisoned.lock().unwrap_or_else(|p| p.into_inner());
        if p.is_none() {
            *p = Some(
                std::error::Error::source(e).map_or_else(|| e.to_string(), |s| format!("{e}: {s}")),
            );
        }
    }

    fn refuse_if_poisoned(&self) -> Result<()> {
        match self.poisoned() {
            Some(cause) => Err(Error::Poisoned {
                path: self.dir.clone(),
                cause,
            }),
            None => Ok(()),
        }
    }

    /// Appends records durably: when this returns, they are on disk.
    pub fn append(&self, records: &[Record]) -> Result<Vec<Appended>> {
        self.append_inner(Position::START, records, |_| Ok::<(), ()>(()), true)
            .map(|r| r.unwrap_or_default())
    }

    /// Appends records without waiting for the disk: they survive the death of this
    /// process (they are in the kernel's cache) but not a power loss until the next durable
    /// append, which flushes them too. For progress records inside a turn whose durable
    /// begin and end bracket them.
    pub fn append_lazy(&self, records: &[Record]) -> Result<Vec<Appended>> {
        self.append_inner(Position::START, records, |_| Ok::<(), ()>(()), false)
            .map(|r| r.unwrap_or_default())
    }

    /// Appends records only if `check` accepts the records written from `since` up to now,
    /// read under the append lock: nothing can be appended between the check and the write.
    /// With `since` at the current end this is cheap. `Ok(Err(e))` means the check refused.
    pub fn append_checked<E>(
        &self,
        since: Position,
        records: &[Record],
        check: impl FnOnce(&mut dyn Iterator<Item = Result<Entry>>) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<Vec<Appended>, E>> {
        self.append_inner(since, records, check, true)
    }

    /// Appends durably the records `decide` makes of the records written from `since` up
    /// to now, read under the append lock (so what it decided on is still the end of the
    /// ledger when they are written). `Ok(Err(e))` means it refused; no records, nothing
    /// appended.
    pub fn append_decided<E>(
        &self,
        since: Position,
        decide: impl FnOnce(
            &mut dyn Iterator<Item = Result<Entry>>,
        ) -> std::result::Result<Vec<Record>, E>,
    ) -> Result<std::result::Result<Vec<Appended>, E>> {
        self.append_core(since, true, |scan| decide(scan).map(Cow::Owned), true)
    }

    fn append_inner<E>(
        &self,
        since: Position,
        records: &[Record],
        check: impl FnOnce(&mut dyn Iterator<Item = Result<Entry>>) -> std::result::Result<(), E>,
        sync: bool,
    ) -> Result<std::result::Result<Vec<Appended>, E>> {
        let read = since != Position::START || records.is_empty();
        self.append_core(
            since,
            read,
            |scan| check(scan).map(|()| Cow::Borrowed(records)),
            sync,
        )
    }

    /// The one append: under the append lock, `produce` sees the records from `since` (when
    /// `read`; else nothing) and gives the records to write.
    fn append_core<'r, E>(
        &self,
        since: Position,
        read: bool,
        produce: impl FnOnce(
            &mut dyn Iterator<Item = Result<Entry>>,
        ) -> std::result::Result<Cow<'r, [Record]>, E>,
        sync: bool,
    ) -> Result<std::result::Result<Vec<Appended>, E>> {
        self.refuse_if_poisoned()?;
        let mut guard = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let lock = self.append_lock()?;
        let tail = self.sync_tail(&mut guard)?;
        let end = Position {
            segment: tail.number,
            offset: tail.end,
        };
        let produced = if read && since < end {
            let mut scan = self.scan(since).take_while(move |e| match e {
                Ok(e) => e.pos < end,
                Err(_) => true,
            });
            produce(&mut scan)
        } else {
            produce(&mut std::iter::empty())
        };
        let records = match produced {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let records: &[Record] = &records;
        if records.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        if let Some(e) = &tail.damaged {
            return Err(clone_corrupt(e));
        }
        let Frames {
            bytes,
            starts,
            last_seq: seq,
        } = encode_frames(records, tail.last_seq)?;
        if tail.end > HEADER_LEN as u64 && tail.end + bytes.len() as u64 > self.segment_limit {
            self.roll(tail).inspect_err(|e| {
                if matches!(e, Error::Io { op: "sync", .. }) {
                    self.poison(e);
                }
            })?;
        }
        failpoint::hit_write("ledger.append.write", &bytes, |b| {
            (&*tail.file).write_all(b)
        })
        .and_then(|()| (&*tail.file).write_all(&bytes))
        .map_err(|e| {
            // A failed write may have left part of the frames (ENOSPC, EFBIG): cut them
            // now while the lock is held, so no later appender starts after garbage.
            let _ = tail.file.set_len(tail.end);
            Error::io("append to", tail.path.clone())(e)
        })?;
        let base = tail.end;
        tail.end += bytes.len() as u64;
        tail.last_seq = seq;
        let number = tail.number;
        let end = tail.end;
        let file = Arc::clone(&tail.file);
        let path = tail.path.clone();
        drop(lock);
        drop(guard);
        if sync {
            // Outside the lock: concurrent appenders share this flush.
            failpoint::hit("ledger.append.sync")
                .and_then(|()| file.sync_data())
                .map_err(Error::io("sync", path))
                .inspect_err(|e| self.poison(e))?;
        }
        let mut out = Vec::with_capacity(starts.len());
        for (i, &(seq, start)) in starts.iter().enumerate() {
            let next = starts.get(i + 1).map_or(end, |&(_, s)| base + s);
            out.push(Appended {
                seq,
                pos: Position {
                    segment: number,
                    offset: base + start,
                },
                next: Position {
                    segment: number,
                    offset: next,
                },
            });
        }
        Ok(Ok(out))
    }

    /// The sequence number of the newest record and the position after it.
    pub fn head(&self) -> Result<(u64, Position)> {
        let mut guard = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.append_lock()?;
        let tail = self.sync_tail(&mut guard)?;
        Ok((
            tail.last_seq,
            Position {
                segment: tail.number,
                offset: tail.end,
            },
        ))
    }

    /// Brings the cached tail up to date with what other processes appended. Must be called
    /// with the append lock held: then any incomplete frame at the end is a torn write.
    fn sync_tail<'a>(&self, slot: &'a mut Option<Tail>) -> Result<&'a mut Tail> {
        if slot.is_none() {
            *slot = Some(self.discover_tail()?);
        }
        let tail = slot.as_mut().ok_or_else(|| unreachable_io(&self.dir))?;
        loop {
            let len = tail
                .file
                .metadata()
                .map_err(Error::io("stat", tail.path.clone()))?
                .len();
            if len != tail.end {
                tail.damaged = None;
                self.catch_up(tail, len)?;
            }
            // Another appender rolls to a new segment only when its record does not fit in
            // this one; while even the largest record fits, there is no newer segment to
            // look for (one stat fewer per append).
            if tail.end + (MAX_PAYLOAD + FRAME_OVERHEAD) as u64 <= self.segment_limit {
                return Ok(tail);
            }
            let next = self.dir.join(segment_file_name(tail.number + 1));
            if !next.exists() {
                return Ok(tail);
            }
            let file = open_private(&next, true)?;
            let Some(header) = self.try_header(&file, &next)? else {
                // Shorter than its header: a torn roll-over of an older build. We hold the
                // append lock, so nobody is writing it.
                drop(file);
                self.remove_torn_segment(tail.number + 1)?;
                return Ok(tail);
            };
            check_number(&header, tail.number + 1, &next)?;
            *tail = Tail {
                number: tail.number + 1,
                path: next,
                file: Arc::new(file),
                end: HEADER_LEN as u64,
                last_seq: header.base_seq,
                damaged: None,
            };
        }
    }

    /// Reads the frames between the cached end and `len`, truncating a torn tail. Damage
    /// that intact records follow is stepped over (readers and `fsck` report it); damage at
    /// the very end is refused with the repair that fixes it.
    fn catch_up(&self, tail: &mut Tail, len: u64) -> Result<()> {
        if len < tail.end {
            return Err(Error::Corrupt {
                path: tail.path.clone(),
                offset: len,
                reason: format!("segment shrank below {} bytes", tail.end),
            });
        }
        let mut buf = vec![0u8; (len - tail.end) as usize];
        tail.file
            .read_exact_at(&mut buf, tail.end)
            .map_err(Error::io("read", tail.path.clone()))?;
        let mut at = 0usize;
        loop {
            match frame::parse_at(&buf, at) {
                Parsed::Frame(f) => {
                    tail.last_seq = f.seq;
                    at += f.len;
                }
                Parsed::End => break,
                Parsed::Incomplete | Parsed::BadLast(_) => {
                    let cut = tail.end + at as u64;
                    failpoint::hit("ledger.tail.truncate")
                        .and_then(|()| tail.file.set_len(cut))
                        .and_then(|()| tail.file.sync_data())
                        .map_err(Error::io("truncate the torn tail of", tail.path.clone()))
                        .inspect_err(|e| self.poison(e))?;
                    buf.truncate(at);
                    break;
                }
                Parsed::BadPayload { len, .. } => at += len,
                Parsed::Corrupt(reason) => match frame::resync(&buf, at + 1) {
                    Some(next) => at = next,
                    None => {
                        tail.damaged = Some(Error::Corrupt {
                            path: tail.path.clone(),
                            offset: tail.end + at as u64,
                            reason: format!(
                                "{reason}: the last record of the ledger is damaged, so nothing can be appended after it; `axocoatl fsck --repair` moves it aside to {}/",
                                crate::layout::LEDGER_DAMAGED_DIR
                            ),
                        });
                        break;
                    }
                },
            }
        }
        tail.end += at as u64;
        Ok(())
    }

    fn discover_tail(&self) -> Result<Tail> {
        let set = self.segment_set()?;
        if let Some((torn, _)) = set.torn {
            // Shorter than its header: a torn roll-over. It holds no record.
            self.remove_torn_segment(torn)?;
        }
        let Some(&number) = set.numbers.last() else {
            return self.create_segment(set.torn.map_or(1, |(n, _)| n), 0);
        };
        let path = self.dir.join(segment_file_name(number));
        let file = open_private(&path, true)?;
        let header = read_header(&file, &path)?;
        check_number(&header, number, &path)?;
        let len = file
            .metadata()
            .map_err(Error::io("stat", path.clone()))?
            .len();
        // Fast path: the trailer of the last frame says where it starts.
        if len > HEADER_LEN as u64 {
            let take = len
                .min((MAX_PAYLOAD + FRAME_OVERHEAD) as u64)
                .min(len - HEADER_LEN as u64);
            let mut last4 = [0u8; 4];
            file.read_exact_at(&mut last4, len - 4)
                .map_err(Error::io("read", path.clone()))?;
            let flen = u32::from_le_bytes(last4) as u64;
            if flen >= FRAME_OVERHEAD as u64 && flen <= take {
                let mut buf = vec![0u8; flen as usize];
                file.read_exact_at(&mut buf, len - flen)
                    .map_err(Error::io("read", path.clone()))?;
                if let Parsed::Frame(f) = frame::parse_at(&buf, 0) {
                    if f.len as u64 == flen {
                        return Ok(Tail {
                            number,
                            path,
                            file: Arc::new(file),
                            end: len,
                            last_seq: f.seq,
                            damaged: None,
                        });
                    }
                }
            }
        }
        // Slow path (empty segment or torn tail): scan forward from the header.
        let mut tail = Tail {
            number,
            path,
            file: Arc::new(file),
            end: HEADER_LEN as u64,
            last_seq: header.base_seq,
            damaged: None,
        };
        self.catch_up(&mut tail, len)?;
        Ok(tail)
    }

    fn roll(&self, tail: &mut Tail) -> Result<()> {
        failpoint::hit("ledger.roll.sync")
            .and_then(|()| tail.file.sync_data())
            .map_err(Error::io("sync", tail.path.clone()))?;
        *tail = self.create_segment(tail.number + 1, tail.last_seq)?;
        Ok(())
    }

    /// The numbers of the segments readers walk, oldest first: a newest segment shorter
    /// than its header (a torn roll-over) is left out.
    pub fn segment_numbers(&self) -> Result<Vec<u64>> {
        Ok(self.segment_set()?.numbers)
    }

    pub fn segment_path(&self, number: u64) -> PathBuf {
        self.dir.join(segment_file_name(number))
    }

    /// Reads records from `from` (inclusive) to the current end.
    pub fn scan(&self, from: Position) -> Scan {
        Scan::new(self, from)
    }

    /// Reads every record.
    pub fn scan_all(&self) -> Scan {
        Scan::new(self, Position::START)
    }

    /// Loads the bytes of one segment: memory-mapped when sealed, read when it is the newest
    /// (which may still grow, or be truncated by a torn-tail repair).
    pub fn load_segment(&self, number: u64) -> Result<SegmentData> {
        let newest = self.segment_numbers()?.last().copied().unwrap_or(0);
        let sealed = number < newest;
        segment::load(&self.segment_path(number), number, sealed, 0)
    }
}

/// Frames encoded for one append.
struct Frames {
    bytes: Vec<u8>,
    /// Each frame's sequence number and offset in `bytes`.
    starts: Vec<(u64, u64)>,
    /// The sequence number of the last one.
    last_seq: u64,
}

/// The frames of `records`, numbered after `last_seq`.
fn encode_frames(records: &[Record], last_seq: u64) -> Result<Frames> {
    let mut bytes = Vec::with_capacity(256 * records.len());
    let mut starts = Vec::with_capacity(records.len());
    let mut seq = last_seq;
    for record in records {
        seq += 1;
        starts.push((seq, bytes.len() as u64));
        let payload = record
            .encode_body(Vec::with_capacity(128))
            .map_err(|e| Error::Encode {
                what: record.kind_name(),
                reason: e.to_string(),
            })?;
        frame::encode_frame(&mut bytes, seq, record.kind(), &payload)?;
    }
    Ok(Frames {
        bytes,
        starts,
        last_seq: seq,
    })
}

fn clone_corrupt(e: &Error) -> Error {
    match e {
        Error::Corrupt {
            path,
            offset,
            reason,
        } => Error::Corrupt {
            path: path.clone(),
            offset: *offset,
            reason: reason.clone(),
        },
        other => Error::Corrupt {
            path: PathBuf::new(),
            offset: 0,
            reason: other.to_string(),
        },
    }
}

fn unreachable_io(dir: &Path) -> Error {
    Error::io("open the ledger in", dir)(std::io::Error::other("tail missing"))
}

/// A segment whose header names another number is a stray copy (or a renamed file): it is
/// never appended to or read as the segment its name says.
fn check_number(header: &SegmentHeader, number: u64, path: &Path) -> Result<()> {
    if header.number == number {
        return Ok(());
    }
    Err(Error::Corrupt {
        path: path.to_owned(),
        offset: 0,
        reason: stray_reason(header.number, number),
    })
}

fn stray_reason(header: u64, name: u64) -> String {
    format!(
        "the header says segment {header} but the file name says {name}: a stray copy or a renamed segment; move it out of the ledger directory"
    )
}

fn read_header(file: &File, path: &Path) -> Result<SegmentHeader> {
    let mut h = [0u8; HEADER_LEN];
    file.read_exact_at(&mut h, 0)
        .map_err(Error::io("read the header of", path))?;
    SegmentHeader::decode(&h).map_err(|reason| Error::Corrupt {
        path: path.to_owned(),
        offset: 0,
        reason,
    })
}

#[cfg(test)]
mod tests;
