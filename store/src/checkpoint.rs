//! Checkpoint envelopes: `checkpoints/v1/<component>/<seq>.ckpt`.
//!
//! A checkpoint is a cache of an Agent's conversation. Its envelope is
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOCKPT1` |
//! | 8..12 | envelope version (u32 LE) |
//! | 12..20 | payload length (u64 LE) |
//! | 20..24 | CRC-32C of the payload |
//! | 24.. | payload (postcard, owned by the runtime) |
//!
//! Files are written atomically and owner-only, without fsync: a checkpoint lost in a crash
//! is rebuilt from the ledger, which is the authority.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::{Error, Result};

pub use crate::envelope::{
    decode_envelope, encode_envelope, split_envelope, ENVELOPE_LEN, ENVELOPE_VERSION, MAGIC,
    MAX_CHECKPOINT,
};

#[derive(Clone, Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    /// The pre-1.0 directory (`checkpoints/`) whose exact component directories are read
    /// as candidates too, never written: see [`Checkpoints::candidates`].
    legacy: Option<PathBuf>,
}

/// One checkpoint file on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointFile {
    pub component: String,
    /// The ledger sequence number the checkpoint reflects (its file name).
    pub seq: u64,
    pub path: PathBuf,
}

impl Checkpoints {
    pub fn new(dir: &Path) -> Checkpoints {
        Checkpoints {
            dir: dir.to_owned(),
            legacy: None,
        }
    }

    /// Checkpoints in `dir` that also read the pre-1.0 directory `legacy` as candidates.
    pub fn with_legacy(dir: &Path, legacy: &Path) -> Checkpoints {
        Checkpoints {
            dir: dir.to_owned(),
            legacy: Some(legacy.to_owned()),
        }
    }

    fn component_dir(&self, component: &str) -> PathBuf {
        self.dir.join(component)
    }

    /// Writes a checkpoint for `component` at ledger sequence `seq` and keeps the newest
    /// `keep` files. Refuses payloads whose envelope would exceed [`MAX_CHECKPOINT`].
    pub fn write(&self, component: &str, seq: u64, payload: &[u8], keep: usize) -> Result<PathBuf> {
        if payload.len() + ENVELOPE_LEN > MAX_CHECKPOINT {
            return Err(Error::RecordTooLarge {
                size: payload.len() + ENVELOPE_LEN,
                limit: MAX_CHECKPOINT,
            });
        }
        let dir = self.component_dir(component);
        create_dir_private(&dir)?;
        let path = dir.join(format!("{seq:020}.ckpt"));
        write_atomic(&path, &encode_envelope(payload), Durability::Cache)?;
        for old in self.list(component)?.into_iter().skip(keep.max(1)) {
            crate::failpoint::hit("checkpoint.prune")
                .and_then(|()| fs::remove_file(&old.path))
                .map_err(Error::io("remove", old.path.clone()))?;
        }
        Ok(path)
    }

    /// The checkpoints of `component`, newest first.
    pub fn list(&self, component: &str) -> Result<Vec<CheckpointFile>> {
        let dir = self.component_dir(component);
        let mut out = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io("list", dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(Error::io("list", dir.clone()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(seq) = name.strip_suffix(".ckpt").and_then(|s| s.parse().ok()) {
                out.push(CheckpointFile {
                    component: component.to_owned(),
                    seq,
                    path: entry.path(),
                });
            }
        }
        out.sort_by_key(|c| std::cmp::Reverse(c.seq));
        Ok(out)
    }

    /// The checkpoints to load for `component`, newest first: the current ones, and the
    /// `.ckpt` files of its exact pre-1.0 directory (`checkpoints/<component>/`, regular
    /// files only, the newest [`crate::legacy::checkpoint::MAX_FILES`]) whose sequence
    /// number no current file has: for the same version the current path wins. A legacy
    /// file in an older envelope fails to read like any incompatible checkpoint.
    pub fn candidates(&self, component: &str) -> Result<Vec<CheckpointFile>> {
        let mut out = self.list(component)?;
        let Some(legacy) = &self.legacy else {
            return Ok(out);
        };
        let dir = legacy.join(component);
        if !crate::legacy::is_plain_dir(&dir) {
            return Ok(out);
        }
        for file in crate::legacy::checkpoint::files(&dir)? {
            if !file.json && !out.iter().any(|c| c.seq == file.seq) {
                out.push(CheckpointFile {
                    component: component.to_owned(),
                    seq: file.seq,
                    path: file.path,
                });
            }
        }
        out.sort_by_key(|c| std::cmp::Reverse(c.seq));
        Ok(out)
    }

    /// Whether a checkpoint file lies at a pre-1.0 path (read-only to us).
    pub fn is_legacy(&self, file: &CheckpointFile) -> bool {
        !file.path.starts_with(&self.dir)
    }

    /// Every component that has a checkpoint directory.
    pub fn components(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io("list", self.dir.clone())(e)),
        };
        for entry in entries {
            let entry = entry.map_err(Error::io("list", self.dir.clone()))?;
            if entry.path().is_dir() {
                out.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Reads and verifies one checkpoint, returning its payload.
    pub fn read(&self, file: &CheckpointFile) -> Result<Vec<u8>> {
        self.read_with(file, <[u8]>::to_vec)
    }

    /// Verifies one checkpoint and hands its payload to `f` straight from a read-only memory
    /// map, without copying the file (checkpoints can be tens of MiB).
    pub fn read_with<T>(&self, file: &CheckpointFile, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        let handle = fs::File::open(&file.path).map_err(Error::io("open", file.path.clone()))?;
        // SAFETY: checkpoint files are replaced by rename, never modified in place, so the
        // mapped file does not change under us; the map is read-only.
        #[expect(
            unsafe_code,
            reason = "mapping a file: checkpoint files are replaced by rename, never modified in place"
        )]
        let map =
            unsafe { memmap2::Mmap::map(&handle) }.map_err(Error::io("map", file.path.clone()))?;
        decode_envelope(&map)
            .map(f)
            .map_err(|reason| Error::BadCheckpoint {
                path: file.path.clone(),
                reason,
            })
    }

    /// Where a provider's cache of `component`'s conversation is kept, beside its checkpoints
    /// ([`crate::layout::ATTENTION_CACHE_FILE`]).
    pub fn attention_cache_path(&self, component: &str) -> PathBuf {
        self.component_dir(component)
            .join(crate::layout::ATTENTION_CACHE_FILE)
    }

    /// The bytes of `component`'s conversation cache, when there is one of at most `limit`
    /// bytes (the provider verifies them: the file is a cache with a hash of its own). A
    /// symbolic link or anything but a regular file is not read.
    pub fn read_attention_cache(&self, component: &str, limit: usize) -> Option<Vec<u8>> {
        use std::io::Read;
        let path = self.attention_cache_path(component);
        let meta = fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > limit as u64 {
            return None;
        }
        let file = fs::File::open(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > limit as u64 {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit as u64).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Replaces `component`'s conversation cache, atomically and owner-only, without fsync
    /// (a cache lost in a crash is rebuilt by reading the conversation again).
    pub fn write_attention_cache(&self, component: &str, bytes: &[u8]) -> Result<()> {
        let dir = self.component_dir(component);
        create_dir_private(&dir)?;
        write_atomic(
            &dir.join(crate::layout::ATTENTION_CACHE_FILE),
            bytes,
            Durability::Cache,
        )
    }

    /// Drops `component`'s conversation cache (a rewind: the conversation it holds is no
    /// longer the one that continues). Missing is fine.
    pub fn remove_attention_cache(&self, component: &str) -> Result<()> {
        let path = self.attention_cache_path(component);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", path)(e)),
            _ => Ok(()),
        }
    }

    /// Removes one checkpoint (found corrupt or stale by the caller).
    /// A pre-1.0 file is never removed: compatibility inputs are preserved.
    pub fn remove(&self, file: &CheckpointFile) -> Result<()> {
        if self.is_legacy(file) {
            return Ok(());
        }
        fs::remove_file(&file.path).map_err(Error::io("remove", file.path.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_detects_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = Checkpoints::new(dir.path());
        for seq in 1..=5 {
            c.write("main%3aa", seq, format!("payload {seq}").as_bytes(), 3)
                .expect("write");
        }
        let files = c.list("main%3aa").expect("list");
        assert_eq!(
            files.iter().map(|f| f.seq).collect::<Vec<_>>(),
            vec![5, 4, 3]
        );
        assert_eq!(c.read(&files[0]).expect("read"), b"payload 5");
        let mut bytes = fs::read(&files[0].path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&files[0].path, bytes).expect("write");
        assert!(c.read(&files[0]).is_err());
        assert!(c.write("x", 1, &vec![0u8; MAX_CHECKPOINT], 3).is_err());
    }

    #[test]
    fn legacy_candidates_are_read_never_pruned_and_current_wins_for_the_same_seq() {
        let dir = tempfile::tempdir().expect("tempdir");
        let legacy = dir.path().join("checkpoints");
        let current = legacy.join("v1");
        let c = Checkpoints::with_legacy(&current, &legacy);
        let old = legacy.join("main%3aa");
        fs::create_dir_all(&old).expect("mkdir");
        fs::write(
            old.join("00000000000000000005.ckpt"),
            encode_envelope(b"legacy 5"),
        )
        .expect("write");
        fs::write(
            old.join("00000000000000000009.ckpt"),
            encode_envelope(b"legacy 9"),
        )
        .expect("write");
        fs::write(old.join("00000000000000000009.json"), b"{}").expect("write");
        c.write("main%3aa", 5, b"current 5", 1).expect("write");
        let got: Vec<(u64, Vec<u8>)> = c
            .candidates("main%3aa")
            .expect("candidates")
            .iter()
            .map(|f| (f.seq, c.read(f).expect("read")))
            .collect();
        assert_eq!(
            got,
            vec![(9, b"legacy 9".to_vec()), (5, b"current 5".to_vec())]
        );
        // Writing and pruning never touch the legacy directory, nor does remove.
        c.write("main%3aa", 6, b"current 6", 1).expect("write");
        for f in c.candidates("main%3aa").expect("candidates") {
            c.remove(&f).expect("remove");
        }
        assert_eq!(
            fs::read(old.join("00000000000000000005.ckpt")).expect("read"),
            encode_envelope(b"legacy 5")
        );
        assert!(old.join("00000000000000000009.ckpt").is_file());
        assert!(c.list("main%3aa").expect("list").is_empty());
    }
}
