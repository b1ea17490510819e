//! The walk of find_files and grep: by descriptors, so that it cannot be led out of the
//! workspace.
//!
//! Each directory is opened relative to its parent's descriptor with `O_NOFOLLOW`: a
//! directory swapped for a symlink while the walk runs is skipped, never followed. Symlinks,
//! FIFOs, sockets and devices are never listed. Repositories (`.axocoatl`, found by name or
//! by identity) and `.git` are skipped. What `ignore`'s walker honours is honoured here, with
//! its matchers: `.ignore` before `.gitignore` before `.git/info/exclude` before the global
//! git excludes, the deepest directory first, in the directories walked and in those above
//! the start (up to the filesystem root), whether or not it is a git repository. Ignore
//! files are read like any other file: never through a symlink, never a FIFO.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fs::{FileType, Mode, OFlags};

use super::beneath::{self, Id, Want};
use super::path::Root;

/// Ignore files larger than this are not read.
const IGNORE_FILE_LIMIT: u64 = 1024 * 1024;
/// Directories deeper than this below the start are not entered (a loop of bind mounts).
const MAX_DEPTH: usize = 512;

/// The ignore rules of one directory.
struct Level {
    ignore: Gitignore,
    gitignore: Gitignore,
    exclude: Gitignore,
}

impl Level {
    fn read(dir: BorrowedFd<'_>, path: &Path) -> Level {
        let exclude = beneath::open_dir(dir, Path::new(".git/info"))
            .ok()
            .map_or_else(Gitignore::empty, |info| {
                matcher(info.as_fd(), "exclude", path)
            });
        Level {
            ignore: matcher(dir, ".ignore", path),
            gitignore: matcher(dir, ".gitignore", path),
            exclude,
        }
    }
}

/// The rules of the file `name` in `dir`, matched relative to `root`; empty when there is
/// no such regular file.
fn matcher(dir: BorrowedFd<'_>, name: &str, root: &Path) -> Gitignore {
    let Ok(opened) = beneath::open_last(dir, OsStr::new(name), Want::Read) else {
        return Gitignore::empty();
    };
    let mut text = String::new();
    if opened.len > IGNORE_FILE_LIMIT
        || opened
            .into_file()
            .take(IGNORE_FILE_LIMIT)
            .read_to_string(&mut text)
            .is_err()
    {
        return Gitignore::empty();
    }
    let mut builder = GitignoreBuilder::new(root);
    for line in text.lines() {
        // A line that is not a valid glob is skipped, as git and ripgrep skip it.
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Walks the files under `start` (an absolute path in the workspace, symlinks resolved, as
/// [`Root::resolve`] gives it), calling `visit` with each regular file's path relative to the
/// workspace, its directory's descriptor and its name, in path order. `start` itself, when a
/// file, is visited whatever the ignore files say.
pub fn files(
    root: &Root,
    start: &Path,
    visit: &mut dyn FnMut(&Path, BorrowedFd<'_>, &OsStr),
) -> Result<(), beneath::Refusal> {
    let rel = start.strip_prefix(root.dir()).unwrap_or(Path::new(""));
    let mut levels = Vec::new();
    // Above the workspace: the user's own directories, out of any agent's reach.
    for above in root
        .dir()
        .ancestors()
        .skip(1)
        .collect::<Vec<_>>()
        .iter()
        .rev()
    {
        if let Ok(fd) = rustix::fs::open(
            *above,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            levels.push(Level::read(fd.as_fd(), above));
        }
    }
    // From the workspace down to the start's directory.
    let mut dir = beneath::open_dir(root.fd(), Path::new(""))?;
    let mut path = root.dir().to_path_buf();
    let mut parts = rel.components().peekable();
    while let Some(part) = parts.next() {
        levels.push(Level::read(dir.as_fd(), &path));
        let name = part.as_os_str();
        if parts.peek().is_none() {
            let opened = match beneath::open_last(dir.as_fd(), name, Want::Read) {
                Err(beneath::Refusal::IsDir) => None,
                other => Some(other?),
            };
            if opened.is_some() {
                visit(rel, dir.as_fd(), name);
                return Ok(());
            }
        }
        dir = beneath::open_dir(dir.as_fd(), Path::new(name))?;
        path.push(name);
    }
    let (_, repo) = root.ids();
    let mut walk = Walk {
        global: GitignoreBuilder::new(root.dir()).build_global().0,
        levels,
        repo,
        visit,
    };
    let (top, _) = root.ids();
    beneath::check_beneath(dir.as_fd(), top, repo)?;
    walk.dir(dir, &path, rel, 0);
    Ok(())
}

struct Walk<'v> {
    levels: Vec<Level>,
    global: Gitignore,
    repo: Option<Id>,
    visit: &'v mut dyn FnMut(&Path, BorrowedFd<'_>, &OsStr),
}

impl Walk<'_> {
    fn dir(&mut self, dir: OwnedFd, path: &Path, rel: &Path, depth: usize) {
        self.levels.push(Level::read(dir.as_fd(), path));
        let entries = beneath::entries(dir.as_fd()).unwrap_or_default();
        for (name, t) in entries {
            if Root::skipped_name(&name) {
                continue;
            }
            let abs = path.join(&name);
            match t {
                FileType::RegularFile if !self.ignored(&abs, false) => {
                    (self.visit)(&rel.join(&name), dir.as_fd(), &name);
                }
                FileType::Directory if depth < MAX_DEPTH && !self.ignored(&abs, true) => {
                    // O_NOFOLLOW: a directory swapped for a symlink since the listing is
                    // not entered.
                    let Ok(sub) = rustix::fs::openat(
                        &dir,
                        &name,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) else {
                        continue;
                    };
                    if self.repo.is_some() && Id::of_fd(&sub).ok() == self.repo {
                        continue;
                    }
                    self.dir(sub, &abs, &rel.join(&name), depth + 1);
                }
                _ => {}
            }
        }
        self.levels.pop();
    }

    /// Whether the ignore files say to leave `path` out.
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let (mut ignore, mut gitignore, mut exclude) = (Match::None, Match::None, Match::None);
        for level in self.levels.iter().rev() {
            if ignore.is_none() {
                ignore = level.ignore.matched(path, is_dir);
            }
            if gitignore.is_none() {
                gitignore = level.gitignore.matched(path, is_dir);
            }
            if exclude.is_none() {
                exclude = level.exclude.matched(path, is_dir);
            }
        }
        ignore
            .or(gitignore)
            .or(exclude)
            .or(self.global.matched(path, is_dir))
            .is_ignore()
    }
}
