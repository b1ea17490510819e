//! The `vectors` file: one int8 row per record, for one embedding model.
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOSEMV1` |
//! | 8..12 | version (u32 LE) |
//! | 12..16 | dimensions (u32 LE) |
//! | 16..20 | quantization: 1 = int8, symmetric, one scale per row |
//! | 20..24 | reserved (0) |
//! | 24..56 | the model tag, zero-padded: rows of another model are never mixed in |
//! | 56..60 | reserved (0) |
//! | 60..64 | CRC-32C of bytes 0..60 |
//!
//! then rows of `dim` signed bytes, the scale (f32 LE: the vector is `scale * q`) and the
//! CRC-32C of both. Row `i` belongs to record `i`. The file is a cache of the records' text
//! under one model: written without fsync, verified row by row when opened (a valid prefix
//! is kept, the rest recomputed), replaced whole by a reindex.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::fsutil::{create_dir_private, open_private, write_atomic, Durability};
use crate::ledger::frame_le::{crc32c, le_u32};
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"AXOSEMV1";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 64;
pub const QUANT_INT8: u32 = 1;
pub const MAX_TAG: usize = 32;

/// One quantized vector.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorRow {
    pub q: Vec<i8>,
    pub scale: f32,
}

/// Bytes of one row of `dim` dimensions.
pub fn row_bytes(dim: usize) -> usize {
    dim + 8
}

fn header(tag: &str, dim: usize) -> Result<[u8; HEADER_LEN]> {
    if tag.len() > MAX_TAG {
        return Err(Error::Encode {
            what: "vector file header",
            reason: format!("model tag {tag:?} is longer than {MAX_TAG} bytes"),
        });
    }
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(dim as u32).to_le_bytes());
    h[16..20].copy_from_slice(&QUANT_INT8.to_le_bytes());
    h[24..24 + tag.len()].copy_from_slice(tag.as_bytes());
    let crc = crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    Ok(h)
}

fn encode_row(row: &VectorRow, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend(row.q.iter().map(|&v| v as u8));
    out.extend_from_slice(&row.scale.to_le_bytes());
    let crc = crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// An open `vectors` file: the rows that verify, for the model asked for.
#[derive(Debug)]
pub struct Vectors {
    path: PathBuf,
    dim: usize,
    map: Option<Mmap>,
    rows: usize,
    /// Why rows present in the file are not usable (another model, a bad row), if any.
    stale: Option<String>,
}

impl Vectors {
    /// Opens `path` for model `tag` with `dim` dimensions. A missing file, another model's
    /// file or damaged rows give fewer usable rows, never an error: vectors are a cache.
    pub fn open(path: &Path, tag: &str, dim: usize) -> Result<Vectors> {
        let mut v = Vectors {
            path: path.to_owned(),
            dim,
            map: None,
            rows: 0,
            stale: None,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(Error::io("open", path)(e)),
        };
        // SAFETY: rows are only appended, and a rewrite replaces the file by rename, so the
        // rows below the length seen here do not change under this view.
        #[expect(
            unsafe_code,
            reason = "mapping a file: rows are only appended, and a rewrite replaces the file by rename"
        )]
        let map = unsafe { Mmap::map(&file) }.map_err(Error::io("map", path))?;
        if map.len() < HEADER_LEN || map[0..HEADER_LEN] != header(tag, dim)? {
            v.stale = Some(if map.len() >= 56 && &map[0..8] == MAGIC {
                let other = String::from_utf8_lossy(&map[24..56]);
                format!(
                    "the vectors are of another model ({}) or format",
                    other.trim_end_matches('\0')
                )
            } else {
                "the vector file's header does not check".to_owned()
            });
            return Ok(v);
        }
        let rb = row_bytes(dim);
        let whole = (map.len() - HEADER_LEN) / rb;
        let mut rows = 0;
        while rows < whole {
            let at = HEADER_LEN + rows * rb;
            if crc32c(&map[at..at + dim + 4]) != le_u32(&map[at + dim + 4..at + rb]) {
                v.stale = Some(format!("vector row {rows} does not check"));
                break;
            }
            rows += 1;
        }
        v.rows = rows;
        v.map = Some(map);
        Ok(v)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows usable for the model asked for (a prefix of the records).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Why rows in the file were not usable.
    pub fn stale(&self) -> Option<&str> {
        self.stale.as_deref()
    }

    /// The usable rows, back to back, [`row_bytes`] each: `dim` signed bytes, then the
    /// scale (f32 LE) and a checksum.
    pub fn data(&self) -> &[u8] {
        match &self.map {
            Some(map) => &map[HEADER_LEN..HEADER_LEN + self.rows * row_bytes(self.dim)],
            None => &[],
        }
    }

    /// Cuts the file at `path` to at most `rows` rows, by its length alone (nothing is read):
    /// rows past the records there are belong to records a power cut took (records written
    /// without fsync), and must not be read as the vectors of the records appended next.
    pub fn cut(path: &Path, dim: usize, rows: u64) -> Result<()> {
        let keep = HEADER_LEN as u64 + rows * row_bytes(dim) as u64;
        match std::fs::metadata(path) {
            Ok(m) if m.len() > keep => open_private(path, false)?
                .set_len(keep)
                .map_err(Error::io("cut", path)),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("stat", path)(e)),
        }
    }

    /// Writes `rows` as rows `at..` (the caller holds the store's lock and `at` is at most
    /// the number of usable rows): rows from `at` on are replaced. A file of another model
    /// is started afresh (then `at` must be 0).
    pub fn append(path: &Path, tag: &str, dim: usize, at: usize, rows: &[VectorRow]) -> Result<()> {
        let current = Vectors::open(path, tag, dim)?;
        let fresh = current.rows == 0;
        if at > current.rows {
            return Err(Error::Encode {
                what: "vector rows",
                reason: format!(
                    "row {at} would leave a gap after {} usable rows in {}",
                    current.rows,
                    path.display()
                ),
            });
        }
        drop(current);
        let mut bytes = Vec::with_capacity(rows.len() * row_bytes(dim));
        if fresh {
            bytes.extend_from_slice(&header(tag, dim)?);
        }
        for row in rows {
            check_row(row, dim)?;
            encode_row(row, &mut bytes);
        }
        if fresh {
            if let Some(dir) = path.parent() {
                create_dir_private(dir)?;
            }
            return write_atomic(path, &bytes, Durability::Cache);
        }
        let mut file = open_private(path, false)?;
        let offset = (HEADER_LEN + at * row_bytes(dim)) as u64;
        file.set_len(offset)
            .and_then(|()| file.seek(SeekFrom::Start(offset)))
            .and_then(|_| file.write_all(&bytes))
            .map_err(Error::io("write", path))
    }

    /// Replaces the whole file with `rows` (a reindex).
    pub fn rewrite(path: &Path, tag: &str, dim: usize, rows: &[VectorRow]) -> Result<()> {
        let mut bytes = Vec::with_capacity(HEADER_LEN + rows.len() * row_bytes(dim));
        bytes.extend_from_slice(&header(tag, dim)?);
        for row in rows {
            check_row(row, dim)?;
            encode_row(row, &mut bytes);
        }
        if let Some(dir) = path.parent() {
            create_dir_private(dir)?;
        }
        write_atomic(path, &bytes, Durability::Cache)
    }
}

fn check_row(row: &VectorRow, dim: usize) -> Result<()> {
    if row.q.len() != dim || !row.scale.is_finite() {
        return Err(Error::Encode {
            what: "vector row",
            reason: format!(
                "{} dimensions (expected {dim}), scale {}",
                row.q.len(),
                row.scale
            ),
        });
    }
    Ok(())
}

/// Drops every row from `rows` on, whatever the file's model (the records from there on
/// were renumbered): cut by the width its header gives, or the whole file removed when its
/// header does not check.
pub fn drop_from(path: &Path, rows: u64) -> Result<()> {
    use std::io::Read;
    let mut head = [0u8; HEADER_LEN];
    let read = File::open(path).and_then(|mut f| f.read_exact(&mut head));
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Ok(()) if &head[0..8] == MAGIC && crc32c(&head[0..60]) == le_u32(&head[60..64]) => {
            let dim = le_u32(&head[12..16]) as usize;
            if dim > 0 {
                return Vectors::cut(path, dim, rows);
            }
        }
        _ => {}
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path)(e)),
    }
}

/// Checks a vector file whatever its model: the header and every row. Returns the number of
/// rows, or where and why it does not check.
pub fn check_file(path: &Path) -> std::result::Result<u64, (Option<u64>, String)> {
    let bytes = std::fs::read(path).map_err(|e| (None, format!("cannot read: {e}")))?;
    if bytes.len() < HEADER_LEN
        || &bytes[0..8] != MAGIC
        || crc32c(&bytes[0..60]) != le_u32(&bytes[60..64])
    {
        return Err((Some(0), "the vector file's header does not check".into()));
    }
    let dim = le_u32(&bytes[12..16]) as usize;
    if le_u32(&bytes[8..12]) != VERSION || le_u32(&bytes[16..20]) != QUANT_INT8 || dim == 0 {
        return Err((
            Some(8),
            "unknown vector file version or quantization".into(),
        ));
    }
    let rb = row_bytes(dim);
    let body = bytes.len() - HEADER_LEN;
    for i in 0..body / rb {
        let at = HEADER_LEN + i * rb;
        if crc32c(&bytes[at..at + dim + 4]) != le_u32(&bytes[at + dim + 4..at + rb]) {
            return Err((Some(at as u64), format!("vector row {i} does not check")));
        }
    }
    if !body.is_multiple_of(rb) {
        return Err((
            Some((HEADER_LEN + body / rb * rb) as u64),
            "the vector file ends in a partial row".into(),
        ));
    }
    Ok((body / rb) as u64)
}
