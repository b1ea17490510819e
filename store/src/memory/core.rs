//! Core memory files: `memory/core/v1/<component>.json` per runtime Agent id and
//! `memory/core/shared/v1/<label>.json` for blocks marked `shared: true`.
//!
//! Each file is a small JSON document (`{"version": 1, "blocks": {label: value}}`) replaced
//! atomically. Core memory is model-facing state that the ledger does not reproduce, so it is
//! written durably. An edit is a read-modify-write under an exclusive lock on the file's
//! lock (`run/memory/`), so two processes editing the same file never lose an update.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::{
    component, core_lock_name, shared_core_lock_name, CORE_MEMORY_DIR, MEMORY_LOCKS_DIR,
    SHARED_CORE_DIR,
};
use crate::lock::Lock;
use crate::{Error, Repo, Result};

/// The core memory file version this build reads and writes.
pub const CORE_VERSION: u32 = 1;
/// A core memory file larger than this is refused unread: blocks have limits of a few
/// thousand characters, so a file this large is damage, not memory.
pub const MAX_CORE_FILE: u64 = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreFile {
    pub version: u32,
    /// Block label → value.
    pub blocks: BTreeMap<String, String>,
}

impl Default for CoreFile {
    fn default() -> CoreFile {
        CoreFile {
            version: CORE_VERSION,
            blocks: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CoreMemory {
    own: PathBuf,
    own_lock: PathBuf,
    shared_dir: PathBuf,
    locks_dir: PathBuf,
    /// The repository root, for the pre-1.0 files read when a current one is absent.
    root: PathBuf,
    agent_id: String,
}

impl CoreMemory {
    /// The core memory of runtime Agent id `agent_id` (e.g. `main:coder`).
    pub fn new(repo: &Repo, agent_id: &str) -> CoreMemory {
        let c = component(agent_id);
        let locks_dir = repo.path(MEMORY_LOCKS_DIR);
        CoreMemory {
            own: repo.path(CORE_MEMORY_DIR).join(format!("{c}.json")),
            own_lock: locks_dir.join(core_lock_name(agent_id)),
            shared_dir: repo.path(SHARED_CORE_DIR),
            locks_dir,
            root: repo.root().to_owned(),
            agent_id: agent_id.to_owned(),
        }
    }

    /// The pre-1.0 file read in place of `path_for(label, shared)` while that is absent.
    pub fn legacy_path_for(&self, label: &str, shared: bool) -> PathBuf {
        if shared {
            crate::legacy::shared_core_file(&self.root, label)
        } else {
            crate::legacy::core_file(&self.root, &self.agent_id)
        }
    }

    /// The file of block `(label, shared)` as read: the current one, or while it is absent
    /// the exact pre-1.0 file (never written: the first edit writes the current file,
    /// starting from what the pre-1.0 one held).
    fn read_for(&self, label: &str, shared: bool) -> Result<CoreFile> {
        let current = self.path_for(label, shared);
        let legacy = self.legacy_path_for(label, shared);
        if std::fs::symlink_metadata(&current).is_err() && crate::legacy::is_regular_file(&legacy) {
            return read_file(&legacy);
        }
        read_file(&current)
    }

    /// The file that holds block `label`.
    pub fn path_for(&self, label: &str, shared: bool) -> PathBuf {
        if shared {
            self.shared_dir.join(format!("{}.json", component(label)))
        } else {
            self.own.clone()
        }
    }

    fn lock_for(&self, label: &str, shared: bool) -> PathBuf {
        if shared {
            self.locks_dir.join(shared_core_lock_name(label))
        } else {
            self.own_lock.clone()
        }
    }

    /// The values of several blocks `(label, shared)` at once: the Agent's own file is read
    /// once, not once per block.
    pub fn get_many(&self, blocks: &[(&str, bool)]) -> Result<Vec<String>> {
        let mut own: Option<CoreFile> = None;
        let mut out = Vec::with_capacity(blocks.len());
        for &(label, shared) in blocks {
            let value = if shared {
                self.get(label, true)?
            } else {
                if own.is_none() {
                    own = Some(self.read_for(label, false)?);
                }
                own.as_ref()
                    .and_then(|f| f.blocks.get(label).cloned())
                    .unwrap_or_default()
            };
            out.push(value);
        }
        Ok(out)
    }

    /// The value of a block ("" when never written).
    pub fn get(&self, label: &str, shared: bool) -> Result<String> {
        let file = self.read_for(label, shared)?;
        Ok(file.blocks.get(label).cloned().unwrap_or_default())
    }

    /// Sets a block's whole value.
    pub fn set(&self, label: &str, shared: bool, value: &str) -> Result<()> {
        self.update(label, shared, |_| Ok::<_, Error>((value.to_owned(), ())))
    }

    /// Replaces a block's value with what `edit` makes of the current one, under the file's
    /// lock: a concurrent edit from another process is applied before or after this one,
    /// never lost. When `edit` fails nothing is written and its error is returned.
    pub fn update<T, E: From<Error>>(
        &self,
        label: &str,
        shared: bool,
        edit: impl FnOnce(&str) -> std::result::Result<(String, T), E>,
    ) -> std::result::Result<T, E> {
        let path = self.path_for(label, shared);
        let lock_path = self.lock_for(label, shared);
        create_dir_private(&self.locks_dir)?;
        let _lock = Lock::acquire(&lock_path)?;
        let mut file = self.read_for(label, shared)?;
        let current = file.blocks.get(label).map(String::as_str).unwrap_or("");
        let (value, out) = edit(current)?;
        file.version = CORE_VERSION;
        file.blocks.insert(label.to_owned(), value);
        if let Some(dir) = path.parent() {
            create_dir_private(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| Error::Encode {
            what: "core memory",
            reason: e.to_string(),
        })?;
        write_atomic(&path, &bytes, Durability::Durable)?;
        Ok(out)
    }
}

/// Reads a core memory file: an absent file is empty; a file that does not parse, or was
/// written by a newer axocoatl, is an error naming it (never read as empty, so an edit cannot
/// replace blocks it could not read).
pub fn read_file(path: &Path) -> Result<CoreFile> {
    let bytes = match std::fs::metadata(path) {
        Ok(meta) if meta.len() > MAX_CORE_FILE => {
            return Err(Error::BadMemoryFile {
                path: path.to_owned(),
                reason: format!(
                    "it is {} bytes; a core memory file is at most {} MiB",
                    meta.len(),
                    MAX_CORE_FILE >> 20
                ),
            })
        }
        Ok(_) => std::fs::read(path).map_err(Error::io("read", path))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CoreFile::default()),
        Err(e) => return Err(Error::io("read", path)(e)),
    };
    parse(path, &bytes)
}

/// Parses the bytes of a core memory file (see [`read_file`]).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<CoreFile> {
    let bad = |reason: String| Error::BadMemoryFile {
        path: path.to_owned(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("does not parse: {e}")))?;
    // The version is checked before the shape: a newer version may have another shape.
    let version = value
        .get("version")
        .ok_or_else(|| bad("it has no `version`".into()))?;
    let version = version
        .as_u64()
        .ok_or_else(|| bad(format!("`version` is {version}, not a whole number")))?;
    if version > u64::from(CORE_VERSION) {
        return Err(Error::MemoryVersion {
            path: path.to_owned(),
            found: version,
            supported: CORE_VERSION,
        });
    }
    if version != u64::from(CORE_VERSION) {
        return Err(bad(format!(
            "version {version} is not a core memory version"
        )));
    }
    serde_json::from_value(value).map_err(|e| bad(format!("does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repo) {
        let (dir, repo) = crate::repo::scratch();
        (dir, repo)
    }

    #[test]
    fn own_and_shared_blocks_live_in_their_files() {
        let (_d, repo) = repo();
        let a = CoreMemory::new(&repo, "main:a");
        let b = CoreMemory::new(&repo, "other:b");
        a.set("human", false, "likes tea").expect("set");
        a.set("team", true, "ships fridays").expect("set");
        assert_eq!(b.get("human", false).expect("get"), "");
        assert_eq!(b.get("team", true).expect("get"), "ships fridays");
        assert_eq!(
            a.get_many(&[("human", false), ("team", true), ("persona", false)])
                .expect("many"),
            ["likes tea", "ships fridays", ""]
        );
        assert!(repo.path("memory/core/v1/main%3aa.json").is_file());
        assert!(repo.path("memory/core/shared/v1/team.json").is_file());
    }

    #[test]
    fn a_failed_edit_writes_nothing() {
        let (_d, repo) = repo();
        let m = CoreMemory::new(&repo, "main:a");
        m.set("human", false, "x").expect("set");
        let r: std::result::Result<(), Error> = m.update("human", false, |_| {
            Err(Error::InvalidName {
                name: "n".into(),
                reason: "no",
            })
        });
        assert!(r.is_err());
        assert_eq!(m.get("human", false).expect("get"), "x");
    }

    #[test]
    fn newer_versions_and_damage_are_refused_naming_the_file() {
        let (_d, repo) = repo();
        let m = CoreMemory::new(&repo, "main:a");
        let path = m.path_for("human", false);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(
            &path,
            r#"{"version": 2, "blocks": {"human": "future"}, "x": 1}"#,
        )
        .expect("write");
        match m.set("human", false, "past") {
            Err(Error::MemoryVersion { found: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert!(std::fs::read_to_string(&path)
            .expect("read")
            .contains("future"));
        std::fs::write(&path, "{not json").expect("write");
        let e = m.get("human", false).expect_err("corrupt");
        assert!(matches!(e, Error::BadMemoryFile { .. }));
        assert!(e.to_string().contains("main%3aa.json"), "{e}");
        assert!(!e.to_string().contains("ledger"), "{e}");
        std::fs::write(&path, r#"{"blocks": {}}"#).expect("write");
        assert!(m.get("human", false).is_err());
    }

    #[test]
    fn the_legacy_file_is_read_while_the_current_one_is_absent_and_never_written() {
        let (_dir, repo) = repo();
        let legacy = repo.root().join("memory/core/main%3aa.json");
        let shared = repo.root().join("memory/core/shared/team.json");
        let old = br#"{"version": 1, "blocks": {"human": "likes tea", "persona": "old"}}"#;
        std::fs::write(&legacy, old).expect("write");
        std::fs::write(&shared, br#"{"version": 1, "blocks": {"team": "t"}}"#).expect("write");
        let m = CoreMemory::new(&repo, "main:a");
        assert_eq!(m.get("human", false).expect("get"), "likes tea");
        assert_eq!(m.get("team", true).expect("get"), "t");
        m.set("persona", false, "new").expect("set");
        assert_eq!(std::fs::read(&legacy).expect("read"), old);
        assert_eq!(m.get("human", false).expect("get"), "likes tea");
        assert_eq!(m.get("persona", false).expect("get"), "new");
        // Current present: the legacy file no longer counts, even for blocks it has.
        std::fs::write(&legacy, br#"{"version": 1, "blocks": {"project": "p"}}"#).expect("write");
        assert_eq!(m.get("project", false).expect("get"), "");
    }
}
