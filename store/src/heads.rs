//! The current session of each directory that works in the home repository.
//!
//! A project's repository has one current session, `HEAD`. The home repository serves
//! every directory without a repository of its own, so it keeps a current session per
//! directory instead: terminals in two directories then never share a conversation, nor
//! wait on each other's turn lock. Each is one small file under [`HEADS_DIR`], named by a
//! digest of the directory's path, holding the session's name and the directory (for
//! people reading it), replaced atomically like `HEAD`.
//!
//! ```text
//! 2026-01-02-030405
//! /home/ana/src/tool
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::{self, HEADS_DIR};
use crate::repo::Repo;
use crate::{Error, Result};

/// The file of `dir`'s current session, under the repository at `root`.
pub fn head_path(root: &Path, dir: &Path) -> PathBuf {
    let digest = blake3::hash(dir.as_os_str().as_encoded_bytes());
    let hex = digest.to_hex();
    root.join(HEADS_DIR).join(&hex.as_str()[..32])
}

impl Repo {
    /// The current session of directory `dir` (an absolute, resolved path); `None` when
    /// none was chosen there yet.
    pub fn dir_head(&self, dir: &Path) -> Result<Option<String>> {
        let path = head_path(self.root(), dir);
        let text = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", path)(e)),
        };
        let bad = |reason: String| Error::BadHead {
            path: path.clone(),
            reason,
        };
        let text = String::from_utf8(text).map_err(|_| bad("not UTF-8 text".into()))?;
        let name = text.lines().next().unwrap_or("").trim().to_owned();
        layout::check_session_name(&name)
            .map_err(|e| bad(format!("it does not name a session ({name:?}: {e})")))?;
        Ok(Some(name))
    }

    /// Makes `session` the current session of directory `dir`.
    pub fn set_dir_head(&self, dir: &Path, session: &str) -> Result<()> {
        layout::check_session_name(session)?;
        create_dir_private(&self.root().join(HEADS_DIR))?;
        write_atomic(
            &head_path(self.root(), dir),
            format!("{session}\n{}\n", dir.display()).as_bytes(),
            Durability::Durable,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_directory_has_its_own_current_session() {
        let (_dir, repo) = crate::repo::scratch();
        let (a, b) = (Path::new("/work/a"), Path::new("/work/b"));
        assert_eq!(repo.dir_head(a).expect("read"), None);
        repo.set_dir_head(a, "one").expect("set");
        repo.set_dir_head(b, "two").expect("set");
        assert_eq!(repo.dir_head(a).expect("read").as_deref(), Some("one"));
        assert_eq!(repo.dir_head(b).expect("read").as_deref(), Some("two"));
        assert_eq!(repo.head().expect("HEAD"), layout::DEFAULT_SESSION);
        assert!(repo.set_dir_head(a, "../x").is_err());
        std::fs::write(head_path(repo.root(), a), "not a name!\n").expect("write");
        assert!(repo.dir_head(a).is_err());
    }
}
