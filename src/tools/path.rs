//! Paths given by a model, resolved inside the workspace or refused.
//!
//! A path is relative to the workspace root. Refused: absolute paths, `..`, any component
//! named `.axocoatl` (a repository: the ledger must stay out of an agent's reach), and paths
//! that resolve outside the workspace or into the repository through symlinks (including
//! dangling ones, which a write would follow). The refusal is an error result for the model.

use std::io;
use std::path::{Component, Path, PathBuf};

use axocoatl_store::layout::REPO_DIR as REPO_DIR_NAME;

/// Where an agent's tools work: the workspace directory, and the configuration file, which
/// no tool may change (an agent that could edit it could widen its own sandbox or tools).
#[derive(Clone, Debug)]
pub struct Workplace {
    pub dir: PathBuf,
    pub config: PathBuf,
}

/// The workspace a tool works in, the repository it must never reach, and the configuration
/// file it must never change.
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
    repo: PathBuf,
    /// Canonical, when it exists.
    config: Option<PathBuf>,
}

impl Root {
    /// `workspace` and `repo` (the `.axocoatl` directory) are canonicalized here.
    pub fn new(workspace: &Path, repo: &Path) -> io::Result<Root> {
        let dir = workspace.canonicalize()?;
        let repo = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
        Ok(Root {
            dir,
            repo,
            config: None,
        })
    }

    /// The same root, with `config` (the configuration file) protected from writes.
    pub fn protecting(mut self, config: &Path) -> Root {
        self.config = config.canonicalize().ok();
        self
    }

    /// The configuration file when it lies inside the workspace (so `run_command` must keep
    /// it read-only).
    pub fn config_inside(&self) -> Option<&Path> {
        self.config
            .as_deref()
            .filter(|c| c.starts_with(&self.dir) && c.is_file())
    }

    /// [`Root::resolve`] for a tool that writes: the configuration file is refused too.
    pub fn resolve_for_write(&self, input: &str) -> Result<PathBuf, String> {
        let path = self.resolve(input)?;
        let real = path.canonicalize().unwrap_or_else(|_| path.clone());
        if self.config.as_deref() == Some(real.as_path()) {
            return Err(format!(
                "path {input:?} refused: it is axocoatl's configuration file; tools never change it (a person edits it and runs `axocoatl validate`)"
            ));
        }
        Ok(path)
    }

    /// The canonical workspace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The repository directory (canonical when it exists).
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// Resolves `input` to an absolute path inside the workspace (existing or not).
    pub fn resolve(&self, input: &str) -> Result<PathBuf, String> {
        let refuse = |why: &str| Err(format!("path {input:?} refused: {why}"));
        if input.contains('\0') {
            return refuse("it contains a NUL byte");
        }
        let given = Path::new(input);
        if given.is_absolute() {
            return refuse(
                "absolute paths are not allowed; give a path relative to the workspace root",
            );
        }
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for c in given.components() {
            match c {
                Component::Normal(name) if name == REPO_DIR_NAME => {
                    return refuse("the repository (.axocoatl/) is never reachable by tools");
                }
                Component::Normal(name) => parts.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    return refuse("`..` is not allowed; paths stay inside the workspace");
                }
                Component::RootDir | Component::Prefix(_) => {
                    return refuse("absolute paths are not allowed");
                }
            }
        }
        // The longest existing prefix, with its symlinks resolved; the rest must not exist
        // at all (not even as a dangling symlink).
        let mut existing = parts.len();
        let real = loop {
            let candidate: PathBuf = parts[..existing]
                .iter()
                .fold(self.dir.clone(), |p, c| p.join(c));
            match candidate.canonicalize() {
                Ok(real) => break real,
                Err(e) if e.kind() == io::ErrorKind::NotFound && existing > 0 => {
                    if candidate.symlink_metadata().is_ok() {
                        return refuse("it is a symlink to nothing; it could point anywhere");
                    }
                    existing -= 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                    return refuse("a part of it is a file, not a directory");
                }
                Err(e) => return Err(format!("path {input:?}: {e}")),
            }
        };
        if !real.starts_with(&self.dir) {
            return refuse("it resolves outside the workspace (through a symlink)");
        }
        if real.starts_with(&self.repo) {
            return refuse("the repository (.axocoatl/) is never reachable by tools");
        }
        Ok(parts[existing..].iter().fold(real, |p, c| p.join(c)))
    }

    /// `abs` relative to the workspace root, for messages (`.` for the root itself).
    pub fn display(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.dir) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => abs.to_string_lossy().into_owned(),
        }
    }

    /// Whether a walk should skip this entry name (repositories and git internals).
    pub fn skipped_name(name: &std::ffi::OsStr) -> bool {
        name == REPO_DIR_NAME || name == ".git"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Root) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).expect("mkdir");
        std::fs::create_dir_all(ws.join(".axocoatl")).expect("mkdir");
        std::fs::write(ws.join("src/a.txt"), "a").expect("write");
        std::fs::write(tmp.path().join("secret"), "s").expect("write");
        let root = Root::new(&ws, &ws.join(".axocoatl")).expect("root");
        (tmp, root)
    }

    #[test]
    fn inside_paths_resolve_existing_or_not() {
        let (_t, root) = setup();
        let a = root.resolve("src/a.txt").expect("ok");
        assert_eq!(root.display(&a), "src/a.txt");
        let new = root.resolve("./src/new/b.txt").expect("ok");
        assert_eq!(root.display(&new), "src/new/b.txt");
        assert_eq!(root.display(&root.resolve(".").expect("ok")), ".");
        assert_eq!(root.display(&root.resolve("").expect("ok")), ".");
    }

    #[test]
    fn escapes_are_refused() {
        let (tmp, root) = setup();
        let ws = root.dir().to_path_buf();
        std::os::unix::fs::symlink("/", ws.join("slash")).expect("symlink");
        std::os::unix::fs::symlink(tmp.path().join("secret"), ws.join("out")).expect("symlink");
        std::os::unix::fs::symlink(tmp.path().join("nothing"), ws.join("dangling"))
            .expect("symlink");
        std::os::unix::fs::symlink(".axocoatl", ws.join("repo")).expect("symlink");
        for (input, why) in [
            ("../x", "`..`"),
            ("src/../../x", "`..`"),
            ("/etc/passwd", "absolute"),
            ("/proc/self/root/etc/passwd", "absolute"),
            ("slash/etc/passwd", "outside the workspace"),
            ("slash", "outside the workspace"),
            ("out", "outside the workspace"),
            ("dangling", "symlink to nothing"),
            (".axocoatl/HEAD", "repository"),
            ("src/.axocoatl", "repository"),
            ("repo/HEAD", "repository"),
            ("src/a.txt/x", "not a directory"),
        ] {
            let err = root.resolve(input).expect_err(input);
            assert!(err.contains(why), "{input}: {err}");
        }
    }
}
