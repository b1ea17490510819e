//! Opening what a tool names through a descriptor of the workspace directory.
//!
//! A tool's path is first checked by name (`Root::resolve`: no `..`, no absolute path, no
//! `.axocoatl`, symlinks resolved and kept inside the workspace). That check cannot be
//! trusted on its own: the tools run in axocoatl's own, unconfined process, and a command of
//! the agent can swap a directory for a symlink between the check and the open
//! (`renameat2(RENAME_EXCHANGE)`). So the checked path is then opened relative to a
//! descriptor of the workspace, never following a symlink: its directories with `openat2`
//! and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (Linux 5.6 and later),
//! or one `openat(O_NOFOLLOW)` per component where the kernel lacks it; its last component
//! with `O_NOFOLLOW | O_NONBLOCK` relative to the directory's descriptor. Then what was
//! opened is looked at: its type (a FIFO or a device is never opened for reading or
//! writing: looked at before the open and again after it), its identity (the same file the
//! look before the open saw), and where its directory lies (walking `..` up to the
//! workspace without meeting the repository).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// A file's identity: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id {
    dev: u64,
    ino: u64,
}

impl Id {
    pub fn of(st: &rustix::fs::Stat) -> Id {
        Id {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }

    pub fn of_fd(fd: impl AsFd) -> io::Result<Id> {
        Ok(Id::of(&rustix::fs::fstat(fd)?))
    }

    pub fn of_path(path: &Path) -> io::Result<Id> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(Id {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Why an open did not give what was asked for.
#[derive(Debug)]
pub enum Refusal {
    NotFound,
    /// A directory where a file was asked for.
    IsDir,
    /// A file where a directory was asked for.
    NotDir,
    /// Neither a regular file nor a directory: what it is ("a FIFO", "a socket", …).
    Special(&'static str),
    /// The path changed between the check by name and the open (a part of it became a
    /// symlink or stopped being a directory).
    Changed,
    /// What was opened lies in the repository.
    InRepo,
    /// What was opened lies outside the workspace.
    Outside,
    Io(io::Error),
}

impl From<Errno> for Refusal {
    fn from(e: Errno) -> Refusal {
        match e {
            Errno::NOENT => Refusal::NotFound,
            // A symlink met with O_NOFOLLOW or RESOLVE_NO_SYMLINKS, or a file where the
            // check saw a directory: the path was changed after it was checked.
            Errno::LOOP | Errno::NOTDIR | Errno::XDEV => Refusal::Changed,
            e => Refusal::Io(e.into()),
        }
    }
}

/// What a file type is called in messages.
pub fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a special file",
    }
}

/// Flags every open of the last component carries: never through a symlink, never blocking
/// (a FIFO without a writer), never taking a terminal, never inherited by a command.
fn last_flags() -> OFlags {
    OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// The directory `rel` (plain names only; empty for `base` itself) beneath `base`, opened
/// `O_PATH` without following any symlink.
pub fn open_dir(base: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, Refusal> {
    open_dir_with(base, rel, openat2_works())
}

fn open_dir_with(base: BorrowedFd<'_>, rel: &Path, openat2: bool) -> Result<OwnedFd, Refusal> {
    if rel.as_os_str().is_empty() {
        return Ok(rustix::io::fcntl_dupfd_cloexec(base, 0)?);
    }
    if !openat2 {
        return by_components(base, rel, false);
    }
    let opened = rustix::fs::openat2(
        base,
        rel,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    );
    Ok(opened?)
}

/// [`open_dir`], creating the directories that do not exist (like `mkdir -p`).
pub fn create_dirs(base: BorrowedFd<'_>, rel: &Path) -> Result<OwnedFd, Refusal> {
    match open_dir(base, rel) {
        Err(Refusal::NotFound) => by_components(base, rel, true),
        other => other,
    }
}

/// One `openat(O_PATH | O_DIRECTORY | O_NOFOLLOW)` per component: a symlink anywhere is
/// refused (`ENOTDIR`, since `O_PATH | O_NOFOLLOW` opens the link itself).
fn by_components(base: BorrowedFd<'_>, rel: &Path, create: bool) -> Result<OwnedFd, Refusal> {
    let mut cur = rustix::io::fcntl_dupfd_cloexec(base, 0)?;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(Refusal::Changed);
        };
        let open = |dir: &OwnedFd| {
            rustix::fs::openat(
                dir,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        cur = match open(&cur) {
            Err(Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&cur, name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open(&cur)?
            }
            other => other?,
        };
    }
    Ok(cur)
}

/// Whether this kernel (and whatever filters its system calls) lets us use `openat2`.
fn openat2_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        !matches!(
            rustix::fs::openat2(
                rustix::fs::CWD,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH,
            ),
            Err(Errno::NOSYS | Errno::PERM | Errno::INVAL)
        )
    })
}

/// Checks that `dir` lies beneath the directory `top` and not in (or at) `repo`, by walking
/// `..` from it: the check looks at what was opened, whatever its path was.
pub fn check_beneath(dir: BorrowedFd<'_>, top: Id, repo: Option<Id>) -> Result<(), Refusal> {
    let mut cur = rustix::io::fcntl_dupfd_cloexec(dir, 0)?;
    let mut id = Id::of_fd(&cur).map_err(Refusal::Io)?;
    // Deeper than PATH_MAX allows a path to name.
    for _ in 0..4096 {
        if Some(id) == repo {
            return Err(Refusal::InRepo);
        }
        if id == top {
            return Ok(());
        }
        let up = rustix::fs::openat(
            &cur,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let up_id = Id::of_fd(&up).map_err(Refusal::Io)?;
        if up_id == id {
            // The root of the filesystem, without passing the workspace.
            return Err(Refusal::Outside);
        }
        cur = up;
        id = up_id;
    }
    Err(Refusal::Outside)
}

/// What [`open_last`] is asked to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// An existing regular file, to read.
    Read,
    /// An existing regular file, to read and write in place.
    ReadWrite,
    /// A regular file to write, created when it does not exist.
    Write,
    /// An existing directory, to list.
    Dir,
}

/// An opened file or directory.
#[derive(Debug)]
pub struct Opened {
    pub fd: OwnedFd,
    pub id: Id,
    pub len: u64,
    pub is_dir: bool,
    /// The open created the file.
    pub created: bool,
}

impl Opened {
    pub fn into_file(self) -> File {
        File::from(self.fd)
    }
}

/// Opens `name` (one component, or `.` for `dir` itself) in `dir` as `want` says, never
/// through a symlink and never opening a FIFO or a device.
pub fn open_last(dir: BorrowedFd<'_>, name: &OsStr, want: Want) -> Result<Opened, Refusal> {
    open_last_once(dir, name, want, true)
}

fn open_last_once(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    want: Want,
    again: bool,
) -> Result<Opened, Refusal> {
    let before = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(Errno::NOENT) if want == Want::Write => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(st) = &before {
        check_type(FileType::from_raw_mode(st.st_mode), want)?;
    }
    let access = match want {
        Want::Read => OFlags::RDONLY,
        Want::ReadWrite => OFlags::RDWR,
        // Read too: the content it replaces is read for the change's diff.
        Want::Write => OFlags::RDWR,
        Want::Dir => OFlags::RDONLY | OFlags::DIRECTORY,
    };
    let mode = Mode::from_bits_truncate(0o666);
    let (fd, created) = match before {
        Some(_) => (
            rustix::fs::openat(dir, name, access | last_flags(), mode)?,
            false,
        ),
        None => match rustix::fs::openat(
            dir,
            name,
            access | last_flags() | OFlags::CREATE | OFlags::EXCL,
            mode,
        ) {
            Ok(fd) => (fd, true),
            // Created by someone else since the look: open what is there, if it is a file.
            Err(Errno::EXIST) if again => return open_last_once(dir, name, want, false),
            Err(e) => return Err(e.into()),
        },
    };
    let st = rustix::fs::fstat(&fd)?;
    let t = FileType::from_raw_mode(st.st_mode);
    check_type(t, want)?;
    let id = Id::of(&st);
    if before.is_some_and(|b| Id::of(&b) != id) {
        return Err(Refusal::Changed);
    }
    // Reads and writes of a regular file block as they always do.
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)?;
    Ok(Opened {
        fd,
        id,
        len: st.st_size.max(0) as u64,
        is_dir: t == FileType::Directory,
        created,
    })
}

fn check_type(t: FileType, want: Want) -> Result<(), Refusal> {
    match (t, want) {
        (FileType::RegularFile, Want::Dir) => Err(Refusal::NotDir),
        (FileType::RegularFile, _) | (FileType::Directory, Want::Dir) => Ok(()),
        (FileType::Directory, _) => Err(Refusal::IsDir),
        (FileType::Symlink, _) => Err(Refusal::Changed),
        (other, _) => Err(Refusal::Special(kind_name(other))),
    }
}

/// The entries of an opened directory (not `.` and `..`), with their types (a symlink is a
/// symlink, never what it points to), in byte order of their names.
pub fn entries(dir: BorrowedFd<'_>) -> io::Result<Vec<(std::ffi::OsString, FileType)>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    // A descriptor of its own to read from (`dir` may be an `O_PATH` one, which cannot be).
    let readable = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for entry in rustix::fs::Dir::new(readable)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = OsStr::from_bytes(name).to_owned();
        let t = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
            t => t,
        };
        out.push((name, t));
    }
    out.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn ws() -> (tempfile::TempDir, OwnedFd) {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("ws/a/b")).expect("mkdir");
        std::fs::write(tmp.path().join("ws/a/b/f"), "f").expect("write");
        std::os::unix::fs::symlink("a", tmp.path().join("ws/link")).expect("symlink");
        std::os::unix::fs::symlink("..", tmp.path().join("ws/up")).expect("symlink");
        let fd = rustix::fs::open(
            tmp.path().join("ws"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("open ws");
        (tmp, fd)
    }

    /// Both ways of opening directories (openat2, and one component at a time) refuse every
    /// symlink on the way and open the rest.
    #[test]
    fn directories_open_beneath_without_symlinks_either_way() {
        let (_tmp, fd) = ws();
        for openat2 in [true, false] {
            let b = open_dir_with(fd.as_fd(), Path::new("a/b"), openat2).expect("a/b");
            let f = open_last(b.as_fd(), OsStr::new("f"), Want::Read).expect("f");
            assert_eq!(f.len, 1);
            for through_link in ["link/b", "link", "up", "up/ws/a"] {
                let r = open_dir_with(fd.as_fd(), Path::new(through_link), openat2);
                assert!(matches!(r, Err(Refusal::Changed)), "{through_link}: {r:?}");
            }
            let r = open_dir_with(fd.as_fd(), Path::new("a/nope"), openat2);
            assert!(matches!(r, Err(Refusal::NotFound)), "{r:?}");
            let r = open_dir_with(fd.as_fd(), Path::new("a/b/f"), openat2);
            assert!(matches!(r, Err(Refusal::Changed)), "{r:?}");
        }
    }

    #[test]
    fn the_last_component_is_never_a_symlink_fifo_or_device() {
        let (tmp, fd) = ws();
        let fifo = tmp.path().join("ws/pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_bits_truncate(0o600),
            0,
        )
        .expect("mkfifo");
        for want in [Want::Read, Want::ReadWrite, Want::Write] {
            let r = open_last(fd.as_fd(), OsStr::new("pipe"), want);
            assert!(matches!(r, Err(Refusal::Special("a FIFO"))), "{r:?}");
            let r = open_last(fd.as_fd(), OsStr::new("link"), want);
            assert!(matches!(r, Err(Refusal::Changed)), "{r:?}");
            let r = open_last(fd.as_fd(), OsStr::new("a"), want);
            assert!(matches!(r, Err(Refusal::IsDir)), "{r:?}");
        }
        let r = open_last(fd.as_fd(), OsStr::new("pipe"), Want::Dir);
        assert!(matches!(r, Err(Refusal::Special("a FIFO"))), "{r:?}");
        let null = rustix::fs::open("/dev", OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
            .expect("/dev");
        let r = open_last(null.as_fd(), OsStr::new("null"), Want::Write);
        assert!(
            matches!(r, Err(Refusal::Special("a character device"))),
            "{r:?}"
        );
        let made = open_last(fd.as_fd(), OsStr::new("new"), Want::Write).expect("create");
        assert!(made.created && !made.is_dir);
        let again = open_last(fd.as_fd(), OsStr::new("new"), Want::Write).expect("open");
        assert!(!again.created && again.id == made.id);
    }

    #[test]
    fn the_walk_up_finds_the_workspace_and_not_the_repository() {
        let (tmp, fd) = ws();
        let top = Id::of_fd(&fd).expect("id");
        let b = open_dir(fd.as_fd(), Path::new("a/b")).expect("a/b");
        check_beneath(b.as_fd(), top, None).expect("beneath");
        let a = Id::of_path(&tmp.path().join("ws/a")).expect("id");
        assert!(matches!(
            check_beneath(b.as_fd(), top, Some(a)),
            Err(Refusal::InRepo)
        ));
        let outside = rustix::fs::open(tmp.path(), OFlags::PATH, Mode::empty()).expect("tmp");
        assert!(matches!(
            check_beneath(outside.as_fd(), top, None),
            Err(Refusal::Outside)
        ));
    }

    #[test]
    fn entries_are_sorted_and_symlinks_stay_symlinks() {
        let (_tmp, fd) = ws();
        let dir = open_last(fd.as_fd(), OsStr::new("."), Want::Dir).expect("open");
        let got: Vec<(String, FileType)> = entries(dir.fd.as_fd())
            .expect("entries")
            .into_iter()
            .map(|(n, t)| (n.to_string_lossy().into_owned(), t))
            .collect();
        assert_eq!(
            got,
            [
                ("a".to_owned(), FileType::Directory),
                ("link".to_owned(), FileType::Symlink),
                ("up".to_owned(), FileType::Symlink)
            ]
        );
    }
}
