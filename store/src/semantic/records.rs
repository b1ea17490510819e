//! The `records` file: the retained text of semantic memory, append-only.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOSEMR1` |
//! | 8..12 | version (u32 LE) |
//! | 12..16 | CRC-32C of bytes 0..12 |
//!
//! then frames `len: u32 LE, CRC-32C of len's 4 bytes, CRC-32C of the payload, payload`
//! where the payload is a postcard [`StoredRecord`]. The header checksum keeps a damaged
//! length from being mistaken for a torn tail (which the next append would cut). Appends take
//! the store's lock, cut a torn tail left by a crash and write every frame of a batch at
//! once. A durable append (text whose only copy this is) `fdatasync`s the file and its
//! directory before returning, which also makes every earlier frame durable; a cached one (a
//! turn's exchange, whose authority is the ledger) is left to the kernel, like the daily log:
//! a power loss can lose the newest cached frames, never a durable one or a frame before it.
//! Opening reads only the frame lengths (and verifies the last frame), so it
//! costs one pass over 8 bytes per record; a reader verifies each record it decodes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::fsutil::{create_dir_private, open_private, sync_dir, write_atomic, Durability};
use crate::ledger::frame_le::{crc32c, le_u32};
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"AXOSEMR1";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 16;
pub const FRAME_HEADER: u64 = 12;
/// Largest payload of one record: records are chunks of a few hundred words.
pub const MAX_RECORD: usize = 1 << 20;

/// One record as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRecord {
    pub text: String,
    /// The turn whose exchange this text comes from.
    pub turn: Option<String>,
    /// What produced the text (the runtime's numbering).
    pub kind: u8,
    /// Milliseconds since the Unix epoch.
    pub at: i64,
}

/// A stretch of a `records` file that holds no readable record: one record whose bytes were
/// damaged after it was written. It keeps its id (the next record keeps its own), so the
/// rows of the caches stay aligned with the records; readers skip it.
///
/// Where a damaged frame header hides the record's length, the stretch runs to the next
/// intact record, and is taken for one record: when a damaged stretch covered several
/// records, the ids after it are off until `axocoatl fsck --repair` moves it aside (which
/// also drops the cache rows from there on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedSlot {
    pub id: u64,
    /// File offset of its first byte.
    pub offset: u64,
    pub len: u64,
    pub reason: String,
}

/// An open, read-only view of a `records` file: where each record (or damaged stretch)
/// starts.
#[derive(Debug)]
pub struct Records {
    path: PathBuf,
    map: Option<Mmap>,
    /// Start of each record's frame, or of a damaged stretch (see `damaged`), by id.
    offsets: Vec<u64>,
    /// The damaged stretches found by opening (by id). Opening checks frame headers only, so
    /// a record whose payload alone is damaged is found when it is read ([`Records::get`],
    /// [`Records::verify`]).
    damaged: Vec<DamagedSlot>,
    /// End of the last whole record.
    end: u64,
    torn: Option<u64>,
}

fn header() -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32c(&h[0..12]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

fn payload_ok(bytes: &[u8], at: usize, len: usize) -> bool {
    crc32c(&bytes[at + 12..at + 12 + len]) == le_u32(&bytes[at + 8..at + 12])
}

/// The payload length of the frame at `at`, when its header checks.
fn frame_len(bytes: &[u8], at: usize) -> Option<usize> {
    let len = le_u32(&bytes[at..at + 4]);
    (crc32c(&bytes[at..at + 4]) == le_u32(&bytes[at + 4..at + 8])
        && len != 0
        && len as usize <= MAX_RECORD)
        .then_some(len as usize)
}

/// The first offset after `from` where a whole, valid frame starts (header and payload both
/// check: matching by chance is negligible), if any.
fn next_frame(map: &[u8], from: usize) -> Option<usize> {
    let total = map.len();
    (from..total.saturating_sub(FRAME_HEADER as usize)).find(|&p| {
        frame_len(map, p)
            .is_some_and(|len| p + FRAME_HEADER as usize + len <= total && payload_ok(map, p, len))
    })
}

impl Records {
    /// Opens `path`; a missing or empty file is an empty store.
    pub fn open(path: &Path) -> Result<Records> {
        let mut recs = Records {
            path: path.to_owned(),
            map: None,
            offsets: Vec::new(),
            damaged: Vec::new(),
            end: HEADER_LEN,
            torn: None,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(recs),
            Err(e) => return Err(Error::io("open", path)(e)),
        };
        let len = file.metadata().map_err(Error::io("stat", path))?.len();
        if len == 0 {
            return Ok(recs);
        }
        // SAFETY: the file is only ever appended to, cut past every whole record under the
        // lock, or replaced whole by a rename (`fsck --repair`); this view reads only the
        // whole records below its length.
        #[expect(
            unsafe_code,
            reason = "mapping a file: it is only appended to, cut past the whole records this view reads, or replaced by a rename"
        )]
        let map = unsafe { Mmap::map(&file) }.map_err(Error::io("map", path))?;
        if map.len() < HEADER_LEN as usize {
            // A crash while the header was written: nothing was ever stored.
            recs.torn = Some(0);
            recs.end = 0;
            recs.map = Some(map);
            return Ok(recs);
        }
        if map[0..HEADER_LEN as usize] != header() {
            return Err(Error::SemanticDamaged {
                path: path.to_owned(),
                offset: 0,
                reason: "not a semantic records file of version 1 (bad header)".into(),
            });
        }
        recs.scan(&map);
        recs.map = Some(map);
        Ok(recs)
    }

    /// Finds the records: walks the frame headers (and checks the last payload), stepping
    /// over damage that an intact record follows.
    ///
    /// A batch is written in one go, so a crash can only leave the last batch incomplete: a
    /// prefix of its bytes, perhaps followed by zeros. A bad frame is therefore a torn tail
    /// when no valid frame starts anywhere after it, and damage in the middle when one does.
    /// Only a file that is already bad pays for that search.
    fn scan(&mut self, map: &[u8]) {
        let total = map.len();
        let mut at = HEADER_LEN as usize;
        while at < total {
            if total - at < FRAME_HEADER as usize {
                self.torn = Some(at as u64);
                break;
            }
            let (reason, next) = match frame_len(map, at) {
                Some(len) => {
                    let next = at + FRAME_HEADER as usize + len;
                    if next > total {
                        // The header checks, so the length is right: a cut batch.
                        self.torn = Some(at as u64);
                        break;
                    }
                    if next == total && !payload_ok(map, at, len) {
                        // Indistinguishable from a torn write: nothing follows it.
                        self.torn = Some(at as u64);
                        break;
                    }
                    self.offsets.push(at as u64);
                    at = next;
                    continue;
                }
                None => match next_frame(map, at + 1) {
                    Some(next) => ("a record header's checksum does not match", next),
                    None => {
                        self.torn = Some(at as u64);
                        break;
                    }
                },
            };
            self.damaged.push(DamagedSlot {
                id: self.offsets.len() as u64,
                offset: at as u64,
                len: (next - at) as u64,
                reason: reason.to_owned(),
            });
            self.offsets.push(at as u64);
            at = next;
        }
        self.end = at as u64;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of records: ids `0..len()`, damaged ones included (they keep their ids).
    pub fn len(&self) -> u64 {
        self.offsets.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Where a torn tail starts, if the file ends in an incomplete record.
    pub fn torn_tail(&self) -> Option<u64> {
        self.torn
    }

    /// The damaged stretches opening found (damaged frame headers). Records whose payload
    /// alone is damaged are found by [`Records::verify`].
    pub fn damaged(&self) -> &[DamagedSlot] {
        &self.damaged
    }

    /// File offset of record `id`'s frame.
    pub fn offset(&self, id: u64) -> u64 {
        self.offsets.get(id as usize).copied().unwrap_or(self.end)
    }

    /// Record `id`, verified: `Ok(Err(slot))` when it is damaged (readers skip it and go on
    /// with the next), `Err` when there is no record `id`.
    pub fn read(&self, id: u64) -> Result<std::result::Result<StoredRecord, DamagedSlot>> {
        let (Some(map), Some(&at)) = (self.map.as_ref(), self.offsets.get(id as usize)) else {
            return Err(Error::SemanticDamaged {
                path: self.path.clone(),
                offset: self.end,
                reason: format!("no record {id} (there are {})", self.len()),
            });
        };
        if let Ok(i) = self.damaged.binary_search_by_key(&id, |d| d.id) {
            return Ok(Err(self.damaged[i].clone()));
        }
        let at = at as usize;
        let len = le_u32(&map[at..at + 4]) as usize;
        let damaged = |reason: String| DamagedSlot {
            id,
            offset: at as u64,
            len: (len + FRAME_HEADER as usize) as u64,
            reason,
        };
        if at + FRAME_HEADER as usize + len > map.len() || !payload_ok(map, at, len) {
            return Ok(Err(damaged("a record's checksum does not match".into())));
        }
        Ok(postcard::from_bytes(&map[at + 12..at + 12 + len])
            .map_err(|e| damaged(format!("it does not decode: {e}"))))
    }

    /// Record `id`, verified; a damaged record is [`Error::SemanticDamaged`].
    pub fn get(&self, id: u64) -> Result<StoredRecord> {
        self.read(id)?.map_err(|slot| Error::SemanticDamaged {
            path: self.path.clone(),
            offset: slot.offset,
            reason: format!(
                "record {} ({} bytes) is damaged: {}",
                slot.id, slot.len, slot.reason
            ),
        })
    }

    /// Every damaged record: the stretches opening found, and the records whose payload does
    /// not check or decode. Reads every record.
    pub fn verify(&self) -> Vec<DamagedSlot> {
        (0..self.len())
            .filter_map(|id| self.read(id).ok().and_then(|r| r.err()))
            .collect()
    }

    /// Appends `records` (the caller holds the store's lock) and returns the id of the first.
    /// A torn tail is cut first; damaged records before the end stay where they are (readers
    /// step over them) and the new records follow the last whole one. With
    /// [`Durability::Durable`] the file and its directory are synced before this returns
    /// (the directory always: an earlier cached append may have created the file).
    pub fn append(path: &Path, records: &[StoredRecord], durability: Durability) -> Result<u64> {
        let current = Records::open(path)?;
        let first = current.len();
        let mut bytes = Vec::new();
        for r in records {
            let payload = postcard::to_stdvec(r).map_err(|e| Error::Encode {
                what: "semantic record",
                reason: e.to_string(),
            })?;
            if payload.len() > MAX_RECORD {
                return Err(Error::RecordTooLarge {
                    size: payload.len(),
                    limit: MAX_RECORD,
                });
            }
            let len = (payload.len() as u32).to_le_bytes();
            bytes.extend_from_slice(&len);
            bytes.extend_from_slice(&crc32c(&len).to_le_bytes());
            bytes.extend_from_slice(&crc32c(&payload).to_le_bytes());
            bytes.extend_from_slice(&payload);
        }
        drop(current.map);
        if let Some(dir) = path.parent() {
            create_dir_private(dir)?;
        }
        let file = open_private(path, false)?;
        let file_len = file.metadata().map_err(Error::io("stat", path))?.len();
        let end = if file_len < HEADER_LEN {
            file.set_len(0).map_err(Error::io("truncate", path))?;
            file.write_all_at(&header(), 0)
                .map_err(Error::io("write", path))?;
            HEADER_LEN
        } else {
            if file_len > current.end {
                file.set_len(current.end)
                    .map_err(Error::io("cut the torn tail of", path))?;
            }
            current.end
        };
        crate::failpoint::hit_write("memory.semantic.write", &bytes, |b| {
            file.write_all_at(b, end)
        })
        .and_then(|()| file.write_all_at(&bytes, end))
        .map_err(Error::io("write", path))?;
        if durability == Durability::Durable {
            crate::failpoint::hit("memory.semantic.sync")
                .and_then(|()| file.sync_data())
                .map_err(Error::io("sync", path))?;
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
        }
        Ok(first)
    }
}

/// Cuts a torn tail (the caller holds the lock); returns the bytes cut.
pub fn repair_tail(path: &Path) -> Result<u64> {
    let recs = Records::open(path)?;
    let Some(torn) = recs.torn else {
        return Ok(0);
    };
    let len = std::fs::metadata(path)
        .map_err(Error::io("stat", path))?
        .len();
    drop(recs);
    let keep = if torn < HEADER_LEN { 0 } else { torn };
    let file = open_private(path, false)?;
    file.set_len(keep)
        .map_err(Error::io("cut the torn tail of", path))?;
    crate::failpoint::hit("memory.semantic.repair_sync")
        .and_then(|()| file.sync_data())
        .map_err(Error::io("sync", path))?;
    Ok(len - keep)
}

/// A damaged record [`repair_damaged`] moved aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedAside {
    pub slot: DamagedSlot,
    /// Where its bytes are now.
    pub file: PathBuf,
}

/// Moves every damaged record of the `records` file at `path` aside (the caller holds the
/// store's lock): each one's bytes are copied to `aside/records.<offset>` (fsynced), then
/// the file is replaced by one holding only its whole records (written atomically). The
/// records after a damaged one move down by one id, so the caller drops the caches' rows
/// from the first moved id on. A torn tail is left for [`repair_tail`].
pub fn repair_damaged(path: &Path, aside: &Path) -> Result<Vec<MovedAside>> {
    let recs = Records::open(path)?;
    let damaged = recs.verify();
    if damaged.is_empty() {
        return Ok(Vec::new());
    }
    let Some(map) = recs.map.as_ref() else {
        return Ok(Vec::new());
    };
    create_dir_private(aside)?;
    let mut moved = Vec::with_capacity(damaged.len());
    for slot in damaged.iter() {
        let file = aside.join(format!("{}.{}", crate::semantic::RECORDS_FILE, slot.offset));
        let bytes = &map[slot.offset as usize..(slot.offset + slot.len) as usize];
        crate::failpoint::hit("memory.semantic.damaged.move").map_err(Error::io("write", &file))?;
        write_atomic(&file, bytes, Durability::Durable)?;
        moved.push(MovedAside {
            slot: slot.clone(),
            file,
        });
    }
    let mut kept = Vec::with_capacity(recs.end as usize);
    kept.extend_from_slice(&map[..HEADER_LEN as usize]);
    let mut bad = damaged.iter().map(|d| d.id).peekable();
    for id in 0..recs.len() {
        if bad.peek() == Some(&id) {
            bad.next();
            continue;
        }
        kept.extend_from_slice(&map[recs.offset(id) as usize..recs.offset(id + 1) as usize]);
    }
    // A torn tail after the whole records stays for `repair_tail` to cut and report.
    kept.extend_from_slice(&map[recs.end as usize..]);
    drop(recs);
    write_atomic(path, &kept, Durability::Durable)?;
    Ok(moved)
}
