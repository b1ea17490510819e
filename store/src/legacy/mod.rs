//! Pre-1.0 compatibility inputs: the unversioned forms of today's namespaces.
//!
//! | current | pre-1.0 input |
//! |---|---|
//! | `checkpoints/v1/<component>/…` | `checkpoints/<component>/…` |
//! | `memory/core/v1/<component>.json` | `memory/core/<component>.json` |
//! | `memory/core/shared/v1/<label>.json` | `memory/core/shared/<label>.json` |
//! | `memory/daily_log/v1/<component>/` | `memory/daily_log/<component>/` |
//! | `memory/semantic/v1/<component>/` | `memory/semantic/<component>/` |
//! | `automation/runs-v1/` | `automation/runs/` |
//!
//! They are inputs, never write targets: nothing here creates, changes or removes a file
//! under a pre-1.0 path. Only those exact directories are looked at, one level deep, at most
//! [`MAX_ENTRIES`] entries each; an entry counts only when its name is what the current
//! namespace would call it (a canonical [`component`]: `%3a`, never `%3A`), and symbolic
//! links are never followed. The file formats are today's, except for checkpoints, whose
//! 0.1.x forms are in [`checkpoint`].

pub mod checkpoint;

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::layout::{
    component, runtime_id, LEGACY_AUTOMATION_RUNS_DIR, LEGACY_CHECKPOINTS_DIR,
    LEGACY_CORE_MEMORY_DIR, LEGACY_DAILY_LOG_DIR, LEGACY_SEMANTIC_DIR, LEGACY_SHARED_CORE_DIR,
};
use crate::{Error, Repo, Result};

/// At most this many entries of one legacy directory are considered (sorted by name); a
/// larger directory is not a pre-1.0 layout but something else, and is reported as cut.
pub const MAX_ENTRIES: usize = 4096;

/// Which pre-1.0 namespace an input belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    Checkpoints,
    CoreMemory,
    SharedCoreMemory,
    DailyLog,
    SemanticMemory,
    AutomationRuns,
}

impl InputKind {
    pub const ALL: [InputKind; 6] = [
        InputKind::Checkpoints,
        InputKind::CoreMemory,
        InputKind::SharedCoreMemory,
        InputKind::DailyLog,
        InputKind::SemanticMemory,
        InputKind::AutomationRuns,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Checkpoints => "checkpoints",
            InputKind::CoreMemory => "core-memory",
            InputKind::SharedCoreMemory => "shared-core-memory",
            InputKind::DailyLog => "daily-log",
            InputKind::SemanticMemory => "semantic-memory",
            InputKind::AutomationRuns => "automation-runs",
        }
    }

    /// The pre-1.0 directory, relative to `.axocoatl/`.
    pub fn dir(self) -> &'static str {
        match self {
            InputKind::Checkpoints => LEGACY_CHECKPOINTS_DIR,
            InputKind::CoreMemory => LEGACY_CORE_MEMORY_DIR,
            InputKind::SharedCoreMemory => LEGACY_SHARED_CORE_DIR,
            InputKind::DailyLog => LEGACY_DAILY_LOG_DIR,
            InputKind::SemanticMemory => LEGACY_SEMANTIC_DIR,
            InputKind::AutomationRuns => LEGACY_AUTOMATION_RUNS_DIR,
        }
    }

    /// Whether an entry of [`Self::dir`] is a directory (else a `.json` file).
    fn is_dir_entry(self) -> bool {
        !matches!(self, InputKind::CoreMemory | InputKind::SharedCoreMemory)
    }

    /// Whether the id is a runtime Agent id (`{session}:{agent}`…), as opposed to a shared
    /// block's label or an automation id.
    fn is_agent_scoped(self) -> bool {
        !matches!(
            self,
            InputKind::SharedCoreMemory | InputKind::AutomationRuns
        )
    }
}

/// One pre-1.0 input found in a repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Input {
    pub kind: InputKind,
    /// The runtime Agent id, shared block label or automation id it belongs to.
    pub id: String,
    /// The file or directory.
    pub path: PathBuf,
    /// Files inside a directory input (one level; at most [`MAX_ENTRIES`]).
    pub files: u64,
}

/// What [`scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    pub inputs: Vec<Input>,
    /// Legacy directories with more than [`MAX_ENTRIES`] entries: only the first were
    /// considered.
    pub cut: Vec<PathBuf>,
}

/// Every pre-1.0 input of a repository, in a stable order. Cheap when there is none: one
/// directory listing per namespace.
pub fn scan(repo: &Repo) -> Result<Scan> {
    let mut out = Scan::default();
    for kind in InputKind::ALL {
        let dir = repo.path(kind.dir());
        let (listed, cut) = entries(&dir)?;
        if cut {
            out.cut.push(dir.clone());
        }
        for (name, is_dir) in listed {
            if is_dir != kind.is_dir_entry() {
                continue;
            }
            let stem = if is_dir {
                name.as_str()
            } else {
                match name.strip_suffix(".json") {
                    Some(stem) => stem,
                    None => continue,
                }
            };
            let Some(id) = canonical_id(stem, kind.is_agent_scoped()) else {
                continue;
            };
            let path = dir.join(&name);
            let files = if is_dir {
                entries(&path)?.0.iter().filter(|(_, d)| !d).count() as u64
            } else {
                1
            };
            out.inputs.push(Input {
                kind,
                id,
                path,
                files,
            });
        }
    }
    Ok(out)
}

/// The id a legacy entry name stands for, if the name is exactly what the current
/// namespace would call it. Agent-scoped ids contain a `:` (`{session}:{agent}`), which
/// also keeps the current namespaces' own directories (`v1`, `shared`) out.
fn canonical_id(name: &str, agent_scoped: bool) -> Option<String> {
    let id = runtime_id(name)?;
    if id.is_empty() || component(&id) != name || (agent_scoped && !id.contains(':')) {
        return None;
    }
    Some(id)
}

/// The names of the entries of `dir` that are regular files or directories (never
/// symbolic links), sorted, at most [`MAX_ENTRIES`], and whether there were more. A missing
/// directory has none.
pub fn entries(dir: &Path) -> Result<(Vec<(String, bool)>, bool)> {
    let iter = match fs::read_dir(dir) {
        Ok(iter) => iter,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        // A file where a legacy directory would be is not a legacy input.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok((Vec::new(), false)),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut out = Vec::new();
    let mut cut = false;
    for entry in iter {
        let entry = entry.map_err(Error::io("list", dir))?;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !(kind.is_file() || kind.is_dir()) {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if out.len() == MAX_ENTRIES {
            cut = true;
            break;
        }
        out.push((name, kind.is_dir()));
    }
    out.sort();
    Ok((out, cut))
}

/// Whether `path` is a regular file (a symbolic link is not, whatever it points to).
pub fn is_regular_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// Whether `path` is a directory (not a symbolic link to one).
pub fn is_plain_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

/// The pre-1.0 checkpoint directory of a component.
pub fn checkpoint_dir(repo: &Repo, component: &str) -> PathBuf {
    repo.path(LEGACY_CHECKPOINTS_DIR).join(component)
}

/// The pre-1.0 core memory file of a runtime Agent id.
pub fn core_file(root: &Path, agent_id: &str) -> PathBuf {
    root.join(LEGACY_CORE_MEMORY_DIR)
        .join(format!("{}.json", component(agent_id)))
}

/// The pre-1.0 file of a shared core memory block.
pub fn shared_core_file(root: &Path, label: &str) -> PathBuf {
    root.join(LEGACY_SHARED_CORE_DIR)
        .join(format!("{}.json", component(label)))
}

/// The pre-1.0 daily log directory of a runtime Agent id.
pub fn daily_log_dir(root: &Path, agent_id: &str) -> PathBuf {
    root.join(LEGACY_DAILY_LOG_DIR).join(component(agent_id))
}

/// The pre-1.0 semantic memory directory of a runtime Agent id.
pub fn semantic_dir(root: &Path, agent_id: &str) -> PathBuf {
    root.join(LEGACY_SEMANTIC_DIR).join(component(agent_id))
}

/// The pre-1.0 run record directory of an automation.
pub fn automation_runs_dir(root: &Path, automation: &str) -> PathBuf {
    root.join(LEGACY_AUTOMATION_RUNS_DIR)
        .join(component(automation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_names_count() {
        assert_eq!(
            canonical_id("main%3acoder", true).as_deref(),
            Some("main:coder")
        );
        assert_eq!(canonical_id("main%3Acoder", true), None);
        assert_eq!(canonical_id("v1", true), None);
        assert_eq!(canonical_id("shared", true), None);
        assert_eq!(canonical_id("brief", false).as_deref(), Some("brief"));
        assert_eq!(canonical_id("a.b", false), None);
    }

    #[test]
    fn scan_lists_each_namespace_and_ignores_links_and_current_dirs() {
        let (_dir, repo) = crate::repo::scratch();
        let root = repo.root().to_owned();
        let w = |rel: &str| {
            let p = root.join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(p, b"{}").expect("write");
        };
        w("checkpoints/main%3aa/00000000000000000003.json");
        w("memory/core/main%3aa.json");
        w("memory/core/shared/team.json");
        w("memory/daily_log/main%3aa/2025-01-02.jsonl");
        w("memory/semantic/main%3aa/records");
        w("automation/runs/brief/20250102T090000.000Z.json");
        w("memory/core/notes.txt");
        std::os::unix::fs::symlink(
            root.join("memory/core/main%3aa.json"),
            root.join("memory/core/x%3ay.json"),
        )
        .expect("symlink");
        let scan = scan(&repo).expect("scan");
        let got: Vec<(InputKind, &str, u64)> = scan
            .inputs
            .iter()
            .map(|i| (i.kind, i.id.as_str(), i.files))
            .collect();
        assert_eq!(
            got,
            vec![
                (InputKind::Checkpoints, "main:a", 1),
                (InputKind::CoreMemory, "main:a", 1),
                (InputKind::SharedCoreMemory, "team", 1),
                (InputKind::DailyLog, "main:a", 1),
                (InputKind::SemanticMemory, "main:a", 1),
                (InputKind::AutomationRuns, "brief", 1),
            ]
        );
    }
}
