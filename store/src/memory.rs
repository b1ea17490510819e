//! Core memory files: `memory/core/v1/<component>.json` per Agent and
//! `memory/core/shared/v1/<label>.json` for blocks marked `shared: true`.
//!
//! Each file is a small JSON document replaced atomically. Core memory is model-facing state
//! that the ledger does not reproduce, so it is written durably.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::{component, CORE_MEMORY_DIR, SHARED_CORE_DIR};
use crate::{Error, Repo, Result};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreFile {
    pub version: u32,
    /// Block label → value.
    pub blocks: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub struct CoreMemory {
    own: PathBuf,
    shared_dir: PathBuf,
}

impl CoreMemory {
    /// The core memory of runtime Agent id `agent_id` (e.g. `main:coder`).
    pub fn new(repo: &Repo, agent_id: &str) -> CoreMemory {
        CoreMemory {
            own: repo
                .path(CORE_MEMORY_DIR)
                .join(format!("{}.json", component(agent_id))),
            shared_dir: repo.path(SHARED_CORE_DIR),
        }
    }

    fn path_for(&self, label: &str, shared: bool) -> PathBuf {
        if shared {
            self.shared_dir.join(format!("{}.json", component(label)))
        } else {
            self.own.clone()
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
                    own = Some(read_file(&self.own)?);
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
        let file = read_file(&self.path_for(label, shared))?;
        Ok(file.blocks.get(label).cloned().unwrap_or_default())
    }

    pub fn set(&self, label: &str, shared: bool, value: &str) -> Result<()> {
        let path = self.path_for(label, shared);
        let mut file = read_file(&path)?;
        file.version = 1;
        file.blocks.insert(label.to_owned(), value.to_owned());
        if let Some(dir) = path.parent() {
            create_dir_private(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| Error::Encode {
            what: "core memory",
            reason: e.to_string(),
        })?;
        write_atomic(&path, &bytes, Durability::Durable)
    }
}

fn read_file(path: &Path) -> Result<CoreFile> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
            path: path.to_owned(),
            offset: e.column() as u64,
            reason: format!("core memory does not parse: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CoreFile::default()),
        Err(e) => Err(Error::io("read", path)(e)),
    }
}
