//! Paths given by a model, resolved inside the workspace or refused.
//!
//! A path is relative to the workspace root. Refused: absolute paths, `..`, any component
//! named `.axocoatl` (a repository: the ledger must stay out of an agent's reach), and paths
//! that resolve outside the workspace or into the repository through symlinks (including
//! dangling ones, which a write would follow). The refusal is an error result for the model.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axocoatl_store::layout::REPO_DIR as REPO_DIR_NAME;

use super::beneath::{self, Id, Opened, Refusal, Want};
use crate::config::TrustedFile;

/// Where an agent's tools work: the workspace directory, and the files no tool may change:
/// the configuration file (an agent that could edit it could widen its own sandbox or
/// tools) and the files the configuration makes axocoatl run or read as code (MCP server
/// programs and their scripts, a script provider's replies, a local model).
#[derive(Clone, Debug)]
pub struct Workplace {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub trusted: Vec<TrustedFile>,
    /// Directories no tool may change anything in (the model cache: the local model, its
    /// ready-to-run copies, the embedder's files).
    pub trusted_dirs: Vec<TrustedFile>,
}

/// The workspace a tool works in (a path, and a descriptor every open starts from), the
/// repository it must never reach, and the files it must never change.
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
    repo: PathBuf,
    fd: Arc<OwnedFd>,
    id: Id,
    repo_id: Option<Id>,
    protected: Vec<Protected>,
}

/// A file no tool may change, and every path that leads to it.
#[derive(Clone, Debug)]
struct Protected {
    /// What it is, for the refusal ("axocoatl's configuration file").
    what: String,
    /// Where the configuration names it (absolute).
    given: PathBuf,
    /// `given` with every symlink resolved (the file itself may not exist).
    resolved: PathBuf,
    /// Every symlink met on the way from `given` to `resolved`, where it lies.
    links: Vec<PathBuf>,
    /// The file's identity, when it exists (a hard link to it is the same file).
    id: Option<Id>,
    /// A directory: everything beneath `given` and `resolved` is protected, and `files`
    /// are the identities of the files in it (and in its subdirectories, one level down).
    tree: bool,
    files: Vec<Id>,
}

impl Protected {
    fn new(path: &Path, what: &str) -> Protected {
        let given = match std::path::absolute(path) {
            Ok(p) => lexical(&p),
            Err(_) => lexical(path),
        };
        let (links, resolved) = symlink_chain(&given);
        Protected {
            what: what.to_owned(),
            given,
            id: Id::of_path(&resolved).ok(),
            resolved,
            links,
            tree: false,
            files: Vec::new(),
        }
    }

    /// A directory whose every file is protected.
    fn tree(path: &Path, what: &str) -> Protected {
        let mut p = Protected::new(path, what);
        p.tree = true;
        p.files = files_in(&p.resolved, 2);
        p
    }

    /// Whether the path `resolved` (symlinks resolved) or `lexical` (as given, absolute)
    /// reaches this file, or lies in this directory.
    fn reaches(&self, resolved: &Path, lexical: &Path) -> bool {
        if self.tree {
            return resolved.starts_with(&self.resolved)
                || lexical.starts_with(&self.given)
                || self.links.iter().any(|l| lexical.starts_with(l));
        }
        self.resolved == resolved
            || self.given == lexical
            || self.links.iter().any(|l| l == lexical)
            || self.links.iter().any(|l| l == resolved)
    }

    /// Whether the opened file `id` is this file, or one of this directory's.
    fn is(&self, id: Id) -> bool {
        self.id == Some(id) || self.files.contains(&id)
    }

    fn refusal(&self, input: &str) -> String {
        if self.tree {
            return format!(
                "path {input:?} refused: it is in {}; tools never change what is there",
                self.what
            );
        }
        format!(
            "path {input:?} refused: it is {}; tools never change it (a person edits it and runs `axocoatl validate`)",
            self.what
        )
    }
}

/// The identities of the regular files in `dir`, and in its subdirectories down to `depth`
/// levels (at most 10,000 files; symlinks are not followed).
fn files_in(dir: &Path, depth: usize) -> Vec<Id> {
    let mut out = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), depth)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten().take(10_000) {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_file() {
                if let Ok(id) = Id::of_path(&entry.path()) {
                    out.push(id);
                }
            } else if kind.is_dir() && depth > 1 {
                pending.push((entry.path(), depth - 1));
            }
            if out.len() >= 10_000 {
                return out;
            }
        }
    }
    out
}

/// `path` without its `.` components.
fn lexical(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

/// The symlinks met resolving `path` (absolute), in order, and where it leads: each
/// component is looked at with `lstat`; a symlink's target takes its place. What does not
/// exist is kept as named. More than 40 links (a loop) end the resolution where it is.
fn symlink_chain(path: &Path) -> (Vec<PathBuf>, PathBuf) {
    let mut pending: Vec<PathBuf> = path
        .components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut cur = PathBuf::from("/");
    let mut links = Vec::new();
    while let Some(part) = pending.pop() {
        match part.components().next() {
            Some(Component::RootDir) => cur = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                cur.pop();
            }
            Some(Component::Normal(name)) => {
                let next = cur.join(name);
                match std::fs::read_link(&next) {
                    Ok(target) if links.len() < 40 => {
                        links.push(next);
                        pending.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| PathBuf::from(c.as_os_str())),
                        );
                    }
                    _ => cur = next,
                }
            }
            _ => {}
        }
    }
    (links, cur)
}

/// Why a tool's path was not opened.
#[derive(Debug)]
pub enum OpenError {
    /// A rule of the workspace: the whole message for the model.
    Refused(String),
    NotFound,
    IsDir,
    NotDir,
    /// What it is instead of a regular file or directory ("a FIFO").
    Special(&'static str),
    Io(io::Error),
}

/// What a tool opened, and its path (absolute, symlinks resolved) for messages.
#[derive(Debug)]
pub struct Target {
    pub opened: Opened,
    pub path: PathBuf,
}

impl Root {
    /// `workspace` and `repo` (the `.axocoatl` directory) are canonicalized here, and the
    /// workspace is opened: every tool's open starts from that descriptor.
    pub fn new(workspace: &Path, repo: &Path) -> io::Result<Root> {
        let dir = workspace.canonicalize()?;
        let repo = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
        let fd = rustix::fs::open(
            &dir,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        Ok(Root {
            id: Id::of_fd(&fd)?,
            repo_id: Id::of_path(&repo).ok(),
            fd: Arc::new(fd),
            dir,
            repo,
            protected: Vec::new(),
        })
    }

    /// The same root, with `config` (the configuration file) protected from writes.
    pub fn protecting(mut self, config: &Path) -> Root {
        self.protected
            .push(Protected::new(config, "axocoatl's configuration file"));
        self
    }

    /// The same root, with each of `files` protected from writes.
    pub fn protecting_files(mut self, files: &[TrustedFile]) -> Root {
        self.protected
            .extend(files.iter().map(|f| Protected::new(&f.path, &f.what)));
        self
    }

    /// The same root, with everything in each of `dirs` protected from writes.
    pub fn protecting_dirs(mut self, dirs: &[TrustedFile]) -> Root {
        self.protected
            .extend(dirs.iter().map(|d| Protected::tree(&d.path, &d.what)));
        self
    }

    /// Makes each protected directory that lies in the workspace and does not exist yet
    /// (and its missing parents), so that a command finds it read-only rather than free
    /// to be made with what the command wants in it.
    pub fn make_protected_dirs(&self) {
        for p in self.protected.iter().filter(|p| p.tree) {
            if p.resolved.starts_with(&self.dir)
                && !p.resolved.starts_with(&self.repo)
                && p.resolved.symlink_metadata().is_err()
            {
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&p.resolved);
            }
        }
    }

    /// Every protected path a command with a writable workspace must find read-only: each
    /// protected file that lies in the workspace, and each symlink in the workspace on the
    /// way to one (wherever the file lies), so that no command can replace the link.
    pub fn read_only_for_commands(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for p in &self.protected {
            let places = p.links.iter().chain(std::iter::once(&p.resolved));
            for place in places {
                let inside = place.starts_with(&self.dir) && place != &self.dir;
                if inside
                    && !place.starts_with(&self.repo)
                    && place.symlink_metadata().is_ok()
                    && !out.contains(&place.as_path())
                {
                    out.push(place);
                }
            }
        }
        out
    }

    /// [`Root::resolve`] for a tool that writes: the protected files are refused too, by
    /// the path given, by the path it resolves to, and by every symlink that leads to them.
    pub fn resolve_for_write(&self, input: &str) -> Result<PathBuf, String> {
        let path = self.resolve(input)?;
        let lexical = lexical(&self.dir.join(input));
        let refused = self.protected.iter().find(|p| p.reaches(&path, &lexical));
        match refused {
            Some(p) => Err(p.refusal(input)),
            None => Ok(path),
        }
    }

    /// Opens what `input` names as `want` says: checked by name first ([`Root::resolve`],
    /// or [`Root::resolve_for_write`] for a write), then opened from the workspace's
    /// descriptor without following any symlink (`beneath.rs`), then checked again by what
    /// was opened: its directory lies in the workspace and not in the repository, and a
    /// file to write is not a protected one (by device and inode).
    pub fn open(&self, input: &str, want: Want) -> Result<Target, OpenError> {
        let writes = matches!(want, Want::Write | Want::ReadWrite);
        let path = if writes {
            self.resolve_for_write(input)
        } else {
            self.resolve(input)
        }
        .map_err(OpenError::Refused)?;
        let rel = path.strip_prefix(&self.dir).unwrap_or(Path::new(""));
        let (parent, name) = match rel.file_name() {
            Some(name) => (rel.parent().unwrap_or(Path::new("")), name),
            None => (Path::new(""), OsStr::new(".")),
        };
        let refusal = |r: Refusal| self.refusal(input, r);
        let dir = if want == Want::Write {
            beneath::create_dirs(self.fd.as_fd(), parent)
        } else {
            beneath::open_dir(self.fd.as_fd(), parent)
        }
        .map_err(refusal)?;
        beneath::check_beneath(dir.as_fd(), self.id, self.repo_id).map_err(refusal)?;
        let opened = beneath::open_last(dir.as_fd(), name, want).map_err(refusal)?;
        if opened.is_dir && Some(opened.id) == self.repo_id {
            return Err(refusal(Refusal::InRepo));
        }
        if writes {
            if let Some(p) = self.protected.iter().find(|p| p.is(opened.id)) {
                return Err(OpenError::Refused(p.refusal(input)));
            }
        }
        Ok(Target { opened, path })
    }

    /// The workspace's descriptor.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The identities of the workspace and of the repository.
    pub fn ids(&self) -> (Id, Option<Id>) {
        (self.id, self.repo_id)
    }

    /// What the model is told when `input` could not be opened for `r`.
    pub fn refusal(&self, input: &str, r: Refusal) -> OpenError {
        let refused = |why: &str| OpenError::Refused(format!("path {input:?} refused: {why}"));
        match r {
            Refusal::NotFound => OpenError::NotFound,
            Refusal::IsDir => OpenError::IsDir,
            Refusal::NotDir => OpenError::NotDir,
            Refusal::Special(what) => OpenError::Special(what),
            Refusal::Changed => refused("it changed while it was being opened (a part of it was replaced, by a symbolic link or otherwise); try again"),
            Refusal::InRepo => refused("the repository (.axocoatl/) is never reachable by tools"),
            Refusal::Outside => refused("it resolves outside the workspace (through a symlink)"),
            Refusal::Io(e) => OpenError::Io(e),
        }
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
    use crate::config::TrustedFile;

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

    #[test]
    fn a_chain_of_symlinks_is_followed_and_recorded() {
        let (tmp, root) = setup();
        let ws = root.dir().to_path_buf();
        std::fs::create_dir(ws.join("conf")).expect("mkdir");
        std::fs::write(ws.join("conf/real.yaml"), "x").expect("write");
        std::os::unix::fs::symlink("conf/link.yaml", ws.join("axocoatl.yaml")).expect("ln");
        std::os::unix::fs::symlink("../confdir/real.yaml", ws.join("conf/link.yaml")).expect("ln");
        std::os::unix::fs::symlink("conf", ws.join("confdir")).expect("ln");
        let (links, real) = symlink_chain(&ws.join("axocoatl.yaml"));
        assert_eq!(
            links,
            [
                ws.join("axocoatl.yaml"),
                ws.join("conf/link.yaml"),
                ws.join("confdir")
            ]
        );
        assert_eq!(real, ws.join("conf/real.yaml"));
        let (links, real) = symlink_chain(&tmp.path().join("ws/./nothing/here"));
        assert!(links.is_empty());
        assert_eq!(real, ws.join("nothing/here"));
    }

    /// A configuration reached through symlinks, and a copy of it by hard link: every way to
    /// it is refused to the write tools, and commands get the links and the file.
    #[test]
    fn protected_files_are_refused_by_every_path_that_reaches_them() {
        let (tmp, root) = setup();
        let ws = root.dir().to_path_buf();
        std::fs::create_dir(ws.join("conf")).expect("mkdir");
        std::fs::write(ws.join("conf/real.yaml"), "x").expect("write");
        std::fs::hard_link(ws.join("conf/real.yaml"), ws.join("copy.yaml")).expect("ln");
        std::os::unix::fs::symlink("conf/real.yaml", ws.join("axocoatl.yaml")).expect("ln");
        std::fs::write(ws.join("server.py"), "").expect("write");
        let root = root
            .protecting(&tmp.path().join("ws/./axocoatl.yaml"))
            .protecting_files(&[
                TrustedFile {
                    path: ws.join("server.py"),
                    what: "the program of MCP server `s`".into(),
                },
                TrustedFile {
                    path: ws.join("tools/missing.py"),
                    what: "the program of MCP server `m`".into(),
                },
            ]);
        for (input, what) in [
            ("axocoatl.yaml", "configuration file"),
            ("./conf/real.yaml", "configuration file"),
            ("copy.yaml", "configuration file"),
            ("server.py", "MCP server `s`"),
            ("tools/missing.py", "MCP server `m`"),
        ] {
            for want in [Want::Write, Want::ReadWrite] {
                let err = match root.open(input, want) {
                    Err(OpenError::Refused(why)) => why,
                    other => panic!("{input}: {other:?}"),
                };
                assert!(
                    err.contains(what) && err.contains("tools never change it"),
                    "{input}: {err}"
                );
            }
            if input != "tools/missing.py" {
                root.open(input, Want::Read).expect("reading is allowed");
            }
        }
        assert!(!ws.join("tools").exists(), "nothing was created");
        assert_eq!(
            root.read_only_for_commands(),
            [
                ws.join("axocoatl.yaml"),
                ws.join("conf/real.yaml"),
                ws.join("server.py")
            ]
        );
    }
}
