//! Semantic memory files: `memory/semantic/v1/<component>/`.
//!
//! | file | what | durability |
//! |---|---|---|
//! | `records` | the retained text, append-only framed records (the authority) | added text fsynced; a turn's exchange (the ledger holds it) not |
//! | `vectors` | one fixed-size int8 row per record, for one embedding model | cache |
//! | `lexical` | BM25 index (doc lengths, `fst` term dictionary, postings) over a prefix of the records | cache |
//! | `path` | the recall path last announced to the user (for the one-time warning) | cache |
//! | `lock` | held by writers | |
//!
//! A record's id is its position: 0, 1, 2, … . Row `i` of `vectors` belongs to record `i`.
//! The caches are checked when they are opened (header, checksums, agreement with the
//! records); whatever does not check is treated as missing and rebuilt from the text.
//! Records written without fsync can be lost to a power cut while a cache of them survives:
//! a writer replaces vector rows from the first id it appends and drops a `lexical` index
//! that covers more records than there are, so no cache ever speaks for a lost record's id.
//! Readers take no lock: records and rows are appended, and a reader sees a prefix.

pub mod lexical;
pub mod records;
pub mod vectors;

use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::{component, SEMANTIC_DIR};
use crate::lock::Lock;
use crate::{Repo, Result};

pub use lexical::{LexicalIndex, LexicalIndexBuilder};
pub use records::{DamagedSlot, Records, StoredRecord};
pub use vectors::{VectorRow, Vectors};

pub use crate::layout::{
    SEMANTIC_LEXICAL_FILE as LEXICAL_FILE, SEMANTIC_LOCK_FILE as LOCK_FILE,
    SEMANTIC_PATH_FILE as PATH_FILE, SEMANTIC_RECORDS_FILE as RECORDS_FILE,
    SEMANTIC_VECTORS_FILE as VECTORS_FILE,
};

/// The directory of one runtime Agent id's semantic memory.
#[derive(Clone, Debug)]
pub struct SemanticDir {
    dir: PathBuf,
    /// The pre-1.0 `records` of the same Agent id (`memory/semantic/<component>/records`),
    /// read while the current one is absent; never written.
    legacy: Option<PathBuf>,
}

impl SemanticDir {
    pub fn new(repo: &Repo, agent_id: &str) -> SemanticDir {
        SemanticDir {
            dir: repo.path(SEMANTIC_DIR).join(component(agent_id)),
            legacy: Some(crate::legacy::semantic_dir(repo.root(), agent_id).join(RECORDS_FILE)),
        }
    }

    pub fn at(dir: &Path) -> SemanticDir {
        SemanticDir {
            dir: dir.to_owned(),
            legacy: None,
        }
    }

    /// The pre-1.0 records file when it is the one to read: the current one is absent and it
    /// is a regular file in a plain directory (symbolic links are never followed).
    fn legacy_records(&self) -> Option<&Path> {
        let legacy = self.legacy.as_deref()?;
        if self.file(RECORDS_FILE).exists() {
            return None;
        }
        let plain = legacy.parent().is_some_and(crate::legacy::is_plain_dir);
        (plain && crate::legacy::is_regular_file(legacy)).then_some(legacy)
    }

    /// The records file to read: the current one, or while it is absent the pre-1.0 one of
    /// the same Agent id when there is one. Record ids are the same in both (a copy).
    pub fn records_path(&self) -> PathBuf {
        match self.legacy_records() {
            Some(legacy) => legacy.to_owned(),
            None => self.file(RECORDS_FILE),
        }
    }

    /// Before the first append (under [`lock`](Self::lock)): when only the pre-1.0 records
    /// exist, copies them to the current file (written atomically, fsynced), so the current
    /// store starts from them. The old file is left as it is. Returns whether it copied.
    pub fn adopt_legacy(&self) -> Result<bool> {
        let Some(legacy) = self.legacy_records() else {
            return Ok(false);
        };
        let bytes = std::fs::read(legacy).map_err(crate::Error::io("read", legacy))?;
        create_dir_private(&self.dir)?;
        write_atomic(&self.file(RECORDS_FILE), &bytes, Durability::Durable)?;
        Ok(true)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether anything was ever written here.
    pub fn exists(&self) -> bool {
        self.file(RECORDS_FILE).exists()
    }

    /// The writers' lock (creates the directory).
    pub fn lock(&self) -> Result<Lock> {
        create_dir_private(&self.dir)?;
        Lock::acquire(&self.file(LOCK_FILE))
    }

    /// The recall path last announced (`""` when never).
    pub fn announced_path(&self) -> String {
        std::fs::read_to_string(self.file(PATH_FILE))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    }

    pub fn set_announced_path(&self, path: &str) -> Result<()> {
        create_dir_private(&self.dir)?;
        write_atomic(
            &self.file(PATH_FILE),
            format!("{path}\n").as_bytes(),
            Durability::Cache,
        )
    }
}

/// One problem found by [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
    /// Whether it damages the authority (records) rather than a rebuildable cache.
    pub is_error: bool,
}

/// Checks every semantic store of a repository: each record's checksum and body, and that
/// the caches agree with the records. With `repair`, a torn tail of `records` (a crash
/// mid-append) is cut, and damaged records are moved aside to `damaged/` in their store
/// (the caches' rows from the first of them on are dropped: they are rebuilt from the
/// text). Returns the number of stores checked, the problems left and what was repaired.
pub fn check(repo: &Repo, repair: bool) -> Result<Checked> {
    let root = repo.path(SEMANTIC_DIR);
    let mut out = Checked::default();
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(crate::Error::io("list", &root)(e)),
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let sd = SemanticDir::at(&dir);
        if !sd.exists() {
            continue;
        }
        out.stores += 1;
        if repair {
            out.repairs.extend(repair_dir(&sd)?);
        }
        out.problems.extend(check_dir(&sd)?);
    }
    Ok(out)
}

/// What [`check`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Stores checked.
    pub stores: u64,
    pub problems: Vec<Problem>,
    /// What `repair` changed, one sentence each (file paths are absolute).
    pub repairs: Vec<String>,
}

/// The directory `fsck --repair` moves a store's damaged records to.
pub use crate::layout::SEMANTIC_DAMAGED_DIR as DAMAGED_DIR;

/// Cuts a torn tail and moves damaged records aside, under the store's lock.
fn repair_dir(sd: &SemanticDir) -> Result<Vec<String>> {
    let _lock = sd.lock()?;
    let path = sd.file(RECORDS_FILE);
    let mut done = Vec::new();
    let cut = records::repair_tail(&path)?;
    if cut > 0 {
        done.push(format!(
            "cut a torn tail of {cut} bytes from {} (a crash mid-append)",
            path.display()
        ));
    }
    let moved = records::repair_damaged(&path, &sd.file(DAMAGED_DIR))?;
    if let Some(first) = moved.first() {
        // The records after a moved one have new ids: no cache row from there on is theirs.
        vectors::drop_from(&sd.file(VECTORS_FILE), first.slot.id)?;
        LexicalIndex::drop_beyond(&sd.file(LEXICAL_FILE), first.slot.id)?;
    }
    for m in moved {
        done.push(format!(
            "moved damaged record {} ({} bytes at byte {}: {}) of the semantic memory store {} to {}; the records after it are renumbered, and their search data is rebuilt on use or by `axocoatl memory reindex`",
            m.slot.id,
            m.slot.len,
            m.slot.offset,
            m.slot.reason,
            path.display(),
            m.file.display()
        ));
    }
    Ok(done)
}

fn check_dir(sd: &SemanticDir) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let path = sd.file(RECORDS_FILE);
    let recs = Records::open(&path)?;
    if let Some(torn) = recs.torn_tail() {
        problems.push(Problem {
            file: path.clone(),
            offset: Some(torn),
            message: "torn tail (a crash mid-append); `fsck --repair` cuts it".into(),
            is_error: true,
        });
    }
    for slot in recs.verify() {
        problems.push(Problem {
            file: path.clone(),
            offset: Some(slot.offset),
            message: format!(
                "semantic memory record {} ({} bytes) is damaged: {}; readers skip it, `fsck --repair` moves it aside",
                slot.id, slot.len, slot.reason
            ),
            is_error: true,
        });
    }
    let vpath = sd.file(VECTORS_FILE);
    if vpath.exists() {
        match vectors::check_file(&vpath) {
            Ok(rows) if rows > recs.len() => problems.push(Problem {
                file: vpath,
                offset: None,
                message: format!(
                    "{rows} vectors for {} records; `axocoatl memory reindex` rebuilds them",
                    recs.len()
                ),
                is_error: false,
            }),
            Ok(_) => {}
            Err((offset, message)) => problems.push(Problem {
                file: vpath,
                offset,
                message: format!("{message}; `axocoatl memory reindex` rebuilds the vectors"),
                is_error: false,
            }),
        }
    }
    let lpath = sd.file(LEXICAL_FILE);
    if lpath.exists() {
        match LexicalIndex::open(&lpath) {
            Ok(Some(ix)) if ix.docs() > recs.len() => problems.push(Problem {
                file: lpath,
                offset: None,
                message: format!(
                    "the lexical index covers {} records but there are {}; it is rebuilt on use",
                    ix.docs(),
                    recs.len()
                ),
                is_error: false,
            }),
            Ok(Some(_)) => {}
            Ok(None) => problems.push(Problem {
                file: lpath,
                offset: None,
                message: "the lexical index does not check; it is rebuilt on use".into(),
                is_error: false,
            }),
            Err(e) => problems.push(Problem {
                file: lpath,
                offset: None,
                message: e.to_string(),
                is_error: false,
            }),
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests;
