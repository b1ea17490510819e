//! Finding, creating and opening a repository.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::index::{IndexOptions, Reader};
use crate::layout::{
    self, FORMAT_FILE, FORMAT_MAGIC, FORMAT_VERSION, GITIGNORE_FILE, HEAD_FILE, REPO_DIR,
};
use crate::ledger::{Ledger, DEFAULT_SEGMENT_LIMIT};
use crate::objects::Objects;
use crate::search::Searcher;
use crate::{Error, Result};

/// Settings a repository is opened with.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Ledger segments roll over past this many bytes.
    pub segment_limit: u64,
    /// How the ledger keeps its indexes and says what it builds: set by the command line
    /// for a command about to exit (`leave_mapped`) and on a terminal (`report_builds`).
    pub index: IndexOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            segment_limit: DEFAULT_SEGMENT_LIMIT,
            index: IndexOptions::default(),
        }
    }
}

/// An open repository: the `.axocoatl` directory, checked.
#[derive(Debug)]
pub struct Repo {
    root: PathBuf,
    reader: Reader,
    objects: Objects,
}

/// Walks up from `start` to the first directory that holds `.axocoatl`, like git.
pub fn discover(start: &Path) -> Result<PathBuf> {
    let start = start.canonicalize().map_err(Error::io("resolve", start))?;
    for dir in start.ancestors() {
        let candidate = dir.join(REPO_DIR);
        if candidate.is_dir() {
            return Ok(candidate);
        }
    }
    Err(Error::NotFound { start })
}

/// Resolves an explicit repository path: the `.axocoatl` directory itself or the directory
/// that holds it.
pub fn resolve_explicit(path: &Path) -> Result<PathBuf> {
    let inner = path.join(REPO_DIR);
    if inner.is_dir() {
        return Ok(inner);
    }
    if path.join(FORMAT_FILE).is_file() {
        return Ok(path.to_owned());
    }
    Err(Error::NotFound {
        start: path.to_owned(),
    })
}

/// Creates `workdir/.axocoatl`. The format marker is written last, so a crash mid-init
/// leaves a directory that no command mistakes for a repository (and `init` may finish).
pub fn init(workdir: &Path) -> Result<PathBuf> {
    let root = workdir.join(REPO_DIR);
    if root.join(FORMAT_FILE).exists() {
        return Err(Error::AlreadyExists { path: root });
    }
    create_dir_private(&root)?;
    for dir in layout::INIT_DIRS {
        create_dir_private(&root.join(dir))?;
    }
    write_atomic(
        &root.join(HEAD_FILE),
        format!("{}\n", layout::DEFAULT_SESSION).as_bytes(),
        Durability::Durable,
    )?;
    write_atomic(&root.join(GITIGNORE_FILE), GITIGNORE, Durability::Durable)?;
    write_atomic(
        &root.join(FORMAT_FILE),
        format_marker(FORMAT_VERSION).as_bytes(),
        Durability::Durable,
    )?;
    Ok(root)
}

/// What `.axocoatl/.gitignore` holds: git ignores the whole repository, and the user's own
/// ignore files are not touched.
pub const GITIGNORE: &[u8] = b"*\n";

/// Restores `.axocoatl/.gitignore` when it is missing (a repository made before `init`
/// wrote it, or the file deleted). Best effort: a repository on a read-only medium still
/// opens, and an existing file, whatever it says, is the user's to keep.
fn ensure_gitignore(root: &Path) {
    let path = root.join(GITIGNORE_FILE);
    if fs::symlink_metadata(&path).is_err() {
        let _ = write_atomic(&path, GITIGNORE, Durability::Cache);
    }
}

pub fn format_marker(version: u32) -> String {
    format!("{FORMAT_MAGIC}\nformat {version}\n")
}

/// Checks the format marker of `root`; nothing is written before it passes.
pub fn check_format(root: &Path) -> Result<()> {
    let path = root.join(FORMAT_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::BadFormatMarker {
                path,
                reason: "the file is missing (an interrupted `axocoatl init`?)".into(),
            })
        }
        Err(e) => return Err(Error::io("read", path)(e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    if lines.next() != Some(FORMAT_MAGIC) {
        return Err(Error::BadFormatMarker {
            path,
            reason: format!("the first line is not {FORMAT_MAGIC:?}"),
        });
    }
    let found = lines
        .next()
        .and_then(|l| l.strip_prefix("format "))
        .map(str::trim)
        .unwrap_or("");
    match found.parse::<u32>() {
        Ok(v) if v == FORMAT_VERSION => Ok(()),
        _ => Err(Error::UnsupportedFormat {
            path,
            found: if found.is_empty() {
                "(none)".into()
            } else {
                found.into()
            },
            supported: FORMAT_VERSION,
        }),
    }
}

impl Repo {
    /// Opens the repository at `root` (a `.axocoatl` directory) after checking its format.
    pub fn open(root: &Path, options: &OpenOptions) -> Result<Repo> {
        check_format(root)?;
        ensure_gitignore(root);
        Ok(Repo {
            root: root.to_owned(),
            reader: Reader::new(
                Ledger::open(
                    &root.join(layout::LEDGER_DIR),
                    &root.join(layout::LEDGER_LOCK),
                    options.segment_limit,
                ),
                options.index,
            ),
            objects: Objects::new(&root.join(layout::OBJECTS_DIR)),
        })
    }

    /// The `.axocoatl` directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory that holds `.axocoatl` (and usually `axocoatl.yaml`).
    pub fn workdir(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    /// The ledger: appends and walks of its records.
    pub fn ledger(&self) -> &Ledger {
        self.reader.ledger()
    }

    /// The reads the ledger's indexes answer (a session, turns, rewinds, summaries), each
    /// from a [`crate::index::Plan`] of the segments.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The searches of the ledger, narrowed through its term indexes.
    pub fn searcher(&self) -> Searcher<'_> {
        Searcher::new(&self.reader)
    }

    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The current session named by `HEAD`.
    pub fn head(&self) -> Result<String> {
        self.read_head().map_err(|reason| Error::BadHead {
            path: self.root.join(HEAD_FILE),
            reason,
        })
    }

    /// What is wrong with `HEAD`, if anything (for `fsck`).
    pub fn head_problem(&self) -> std::result::Result<(), String> {
        self.read_head().map(|_| ())
    }

    fn read_head(&self) -> std::result::Result<String, String> {
        let path = self.root.join(HEAD_FILE);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("HEAD is missing".into())
            }
            Err(e) => return Err(format!("HEAD cannot be read: {e}")),
        };
        let text = String::from_utf8(bytes).map_err(|_| "HEAD is not UTF-8 text".to_string())?;
        let name = text.trim().to_owned();
        layout::check_session_name(&name).map_err(|e| match e {
            Error::InvalidName { reason, .. } => {
                format!("HEAD does not name a session ({name:?}: {reason})")
            }
            e => e.to_string(),
        })?;
        Ok(name)
    }

    pub fn set_head(&self, session: &str) -> Result<()> {
        layout::check_session_name(session)?;
        write_atomic(
            &self.root.join(HEAD_FILE),
            format!("{session}\n").as_bytes(),
            Durability::Durable,
        )
    }
}

/// A new repository in a temporary directory (removed when the directory is dropped).
#[cfg(test)]
pub(crate) fn scratch() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = init(dir.path()).expect("init");
    let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
    (dir, repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_open_and_refusals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = init(dir.path()).expect("init");
        assert!(matches!(init(dir.path()), Err(Error::AlreadyExists { .. })));
        let repo = Repo::open(&root, &OpenOptions::default()).expect("open");
        assert_eq!(repo.head().expect("head"), "main");
        assert_eq!(
            fs::read(root.join(GITIGNORE_FILE)).expect("read"),
            GITIGNORE
        );
        fs::remove_file(root.join(GITIGNORE_FILE)).expect("rm");
        Repo::open(&root, &OpenOptions::default()).expect("open");
        assert_eq!(
            fs::read(root.join(GITIGNORE_FILE)).expect("read"),
            GITIGNORE,
            "restored"
        );
        fs::write(root.join(FORMAT_FILE), format_marker(FORMAT_VERSION + 1)).expect("write");
        match Repo::open(&root, &OpenOptions::default()) {
            Err(Error::UnsupportedFormat {
                found, supported, ..
            }) => {
                assert_eq!((found.as_str(), supported), ("2", 1));
            }
            other => panic!("{other:?}"),
        }
        let sub = dir.path().join("a/b");
        fs::create_dir_all(&sub).expect("mkdir");
        assert_eq!(
            discover(&sub).expect("discover"),
            root.canonicalize().expect("canon")
        );
    }
}
