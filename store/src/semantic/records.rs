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

use crate::fsutil::{create_dir_private, open_private, sync_dir, Durability};
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

/// An open, read-only view of a `records` file: the offsets of its whole records.
#[derive(Debug)]
pub struct Records {
    path: PathBuf,
    map: Option<Mmap>,
    offsets: Vec<u64>,
    /// End of the last whole record.
    end: u64,
    torn: Option<u64>,
    damage: Option<(u64, &'static str)>,
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

/// How a file goes wrong at a frame.
enum Bad {
    /// A crash tore the last batch: nothing valid follows.
    Torn,
    Damage(&'static str),
}

/// A batch is written in one go, so a crash can only leave the last batch incomplete: a
/// prefix of its bytes, perhaps followed by zeros. A bad frame is therefore a torn tail
/// when no valid frame starts anywhere after it, and damage in the middle when one does
/// (found by trying every offset: a header and a payload checksum both matching by chance
/// is negligible). Only a file that is already bad pays for this search.
fn classify(map: &[u8], at: usize, reason: &'static str) -> Bad {
    let total = map.len();
    for p in at + 1..total.saturating_sub(FRAME_HEADER as usize) {
        if let Some(len) = frame_len(map, p) {
            if p + FRAME_HEADER as usize + len <= total && payload_ok(map, p, len) {
                return Bad::Damage(reason);
            }
        }
    }
    Bad::Torn
}

impl Records {
    /// Opens `path`; a missing or empty file is an empty store.
    pub fn open(path: &Path) -> Result<Records> {
        let mut recs = Records {
            path: path.to_owned(),
            map: None,
            offsets: Vec::new(),
            end: HEADER_LEN,
            torn: None,
            damage: None,
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
        // SAFETY: the file is only ever appended to, or a torn tail past every whole record
        // cut under the lock; this view reads only the whole records below its length.
        #[expect(
            unsafe_code,
            reason = "mapping a file: it is only appended to, or cut past the whole records this view reads"
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
            return Err(Error::Corrupt {
                path: path.to_owned(),
                offset: 0,
                reason: "not a semantic records file of version 1 (bad header)".into(),
            });
        }
        if !recs.scan(&map, false) {
            // Verify every frame to tell a torn tail from damage in the middle.
            recs.offsets.clear();
            recs.scan(&map, true);
        }
        recs.map = Some(map);
        Ok(recs)
    }

    /// Finds the whole records; `false` when the fast pass (headers and the last payload
    /// only) met a bad frame.
    fn scan(&mut self, map: &[u8], verify: bool) -> bool {
        let total = map.len();
        let mut at = HEADER_LEN as usize;
        let mut clean = true;
        while at < total {
            let bad = if total - at < FRAME_HEADER as usize {
                Some(Bad::Torn)
            } else {
                match frame_len(map, at) {
                    None => Some(classify(
                        map,
                        at,
                        "a record header's checksum does not match",
                    )),
                    Some(len) => {
                        let next = at + FRAME_HEADER as usize + len;
                        if next > total {
                            Some(Bad::Torn)
                        } else if (verify || next == total) && !payload_ok(map, at, len) {
                            Some(classify(map, at, "a record's checksum does not match"))
                        } else {
                            self.offsets.push(at as u64);
                            at = next;
                            None
                        }
                    }
                }
            };
            match bad {
                None => {}
                Some(Bad::Torn) => {
                    self.torn = Some(at as u64);
                    clean = false;
                    break;
                }
                Some(Bad::Damage(reason)) => {
                    self.damage = Some((at as u64, reason));
                    clean = false;
                    break;
                }
            }
        }
        self.end = at as u64;
        if !verify && !clean {
            self.torn = None;
            self.damage = None;
        }
        clean
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of whole records.
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

    /// Damage before the end (offset and reason): records from there on are not readable.
    pub fn damage(&self) -> Option<(u64, &'static str)> {
        self.damage
    }

    /// File offset of record `id`'s frame.
    pub fn offset(&self, id: u64) -> u64 {
        self.offsets.get(id as usize).copied().unwrap_or(self.end)
    }

    /// Record `id`, verified.
    pub fn get(&self, id: u64) -> Result<StoredRecord> {
        let (Some(map), Some(&at)) = (self.map.as_ref(), self.offsets.get(id as usize)) else {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                offset: self.end,
                reason: format!("no record {id} (there are {})", self.len()),
            });
        };
        let at = at as usize;
        let len = le_u32(&map[at..at + 4]) as usize;
        if !payload_ok(map, at, len) {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                offset: at as u64,
                reason: format!("record {id}'s checksum does not match"),
            });
        }
        postcard::from_bytes(&map[at + 12..at + 12 + len]).map_err(|e| Error::Corrupt {
            path: self.path.clone(),
            offset: at as u64,
            reason: format!("record {id} does not decode: {e}"),
        })
    }

    /// Appends `records` (the caller holds the store's lock) and returns the id of the first.
    /// A torn tail is cut first; damage before the end refuses the append. With
    /// [`Durability::Durable`] the file and its directory are synced before this returns
    /// (the directory always: an earlier cached append may have created the file).
    pub fn append(path: &Path, records: &[StoredRecord], durability: Durability) -> Result<u64> {
        let current = Records::open(path)?;
        if let Some((offset, reason)) = current.damage {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                offset,
                reason: format!(
                    "{reason}; nothing is appended to a damaged file (see `axocoatl fsck`)"
                ),
            });
        }
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

/// Cuts a torn tail (the caller holds the lock); damage elsewhere is left for the user.
pub fn repair_tail(path: &Path) -> Result<u64> {
    let recs = Records::open(path)?;
    let Some(torn) = recs.torn else {
        return Ok(0);
    };
    if recs.damage.is_some() {
        return Ok(0);
    }
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
