//! What serve and its actors need of Unix sockets and descriptors: socket paths of any
//! length, request lines of bounded length, and the descriptor limit.
//!
//! - A socket path must fit `sun_path` (107 bytes and a NUL). A longer one (a repository
//!   deep in a file system) is bound and connected through `/proc/self/fd/N/NAME`, where N
//!   is a descriptor of the socket's directory opened for the call: a path relative to the
//!   working directory would need a `chdir`, which changes it for every thread at once.
//! - A request is one line of at most [`LINE_LIMIT`] bytes: past it the connection is
//!   answered with an error and closed, having held at most that much.
//! - The soft limit of open descriptors is raised to the hard limit at start; running out
//!   of descriptors (`EMFILE`, `ENFILE`) is serve's own condition, never an actor's fault.

use std::fs::File;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

/// The longest request line serve and the actors read: a turn's request with its inline
/// context (text piped on stdin) fits; a line that never ends does not grow a process past
/// it.
pub const LINE_LIMIT: usize = 64 << 20;

/// The most bytes of a socket path `sun_path` holds (108 with the terminating NUL).
const SUN_PATH: usize = 107;

/// A path a socket call accepts for a socket file: the path itself when it fits
/// `sun_path`, else one through a descriptor of its directory (kept open as long as this
/// value lives).
pub struct SocketPath {
    path: PathBuf,
    _dir: Option<File>,
}

impl SocketPath {
    pub fn of(path: &Path) -> io::Result<SocketPath> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        if path.as_os_str().len() <= SUN_PATH {
            return Ok(SocketPath {
                path: path.to_owned(),
                _dir: None,
            });
        }
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a socket file's path", path.display()),
            ));
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)?;
        let short = Path::new("/proc/self/fd")
            .join(dir.as_raw_fd().to_string())
            .join(name);
        if !Path::new("/proc/self/fd").is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the socket path {} is {} bytes, more than the {SUN_PATH} a Unix socket's path may have, and /proc is not mounted to reach it another way; move the repository to a shorter path",
                    path.display(),
                    path.as_os_str().len()
                ),
            ));
        }
        Ok(SocketPath {
            path: short,
            _dir: Some(dir),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Binds a listening socket at `path` (a blocking one: the actors' kind).
pub fn bind_std(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    std::os::unix::net::UnixListener::bind(SocketPath::of(path)?.path())
}

/// Connects to the socket at `path` (blocking).
pub fn connect_std(path: &Path) -> io::Result<std::os::unix::net::UnixStream> {
    std::os::unix::net::UnixStream::connect(SocketPath::of(path)?.path())
}

/// Binds serve's listening socket at `path`.
pub fn bind(path: &Path) -> io::Result<tokio::net::UnixListener> {
    tokio::net::UnixListener::bind(SocketPath::of(path)?.path())
}

/// Connects to the socket at `path` (serve to an actor).
pub async fn connect(path: &Path) -> io::Result<tokio::net::UnixStream> {
    let short = SocketPath::of(path)?;
    tokio::net::UnixStream::connect(short.path()).await
}

/// How a bounded line read ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line (its newline included) is in the buffer.
    Whole,
    /// The stream ended; the buffer holds what came after the last newline.
    End,
    /// The line passed the limit: the buffer holds its first bytes, the rest is unread.
    TooLong,
}

/// Reads one line into `buf`, never holding more than `limit` bytes of it.
pub async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> io::Result<Line> {
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (take, whole) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if buf.len() + take > limit {
            let room = limit - buf.len();
            buf.extend_from_slice(&available[..room]);
            r.consume(room);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        r.consume(take);
        if whole {
            return Ok(Line::Whole);
        }
    }
}

/// [`read_line`] for a blocking reader.
pub fn read_line_std<R: BufRead>(r: &mut R, buf: &mut Vec<u8>, limit: usize) -> io::Result<Line> {
    loop {
        let available = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (take, whole) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if buf.len() + take > limit {
            let room = limit - buf.len();
            buf.extend_from_slice(&available[..room]);
            r.consume(room);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        r.consume(take);
        if whole {
            return Ok(Line::Whole);
        }
    }
}

/// The error a request line past [`LINE_LIMIT`] is answered with.
pub fn too_long() -> crate::error::RuntimeError {
    crate::error::RuntimeError::Invalid {
        message: format!(
            "a request line longer than {} MiB: the connection is closed",
            LINE_LIMIT >> 20
        ),
        hint: "a request is one JSON line; send less inline context (attach large files instead)"
            .into(),
    }
}

/// Whether an I/O error is a lack of descriptors (this process's, or the system's): the
/// condition of the process that met it, not a fault of what it was doing.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether an error's text says a process ran out of descriptors (an actor's start error
/// arrives as text).
pub fn says_out_of_descriptors(text: &str) -> bool {
    let emfile = format!("(os error {})", libc::EMFILE);
    let enfile = format!("(os error {})", libc::ENFILE);
    text.contains(&emfile) || text.contains(&enfile)
}

/// Raises the soft limit of open descriptors to the hard limit; returns (before, after).
pub fn raise_descriptor_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[expect(
        unsafe_code,
        reason = "getrlimit writes the struct we pass, which lives on this stack frame"
    )]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        #[expect(
            unsafe_code,
            reason = "setrlimit reads the struct we pass, which lives on this stack frame"
        )]
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((before, lim.rlim_cur))
}

/// How many clients serve holds at once with `limit` descriptors: a client running a turn
/// holds two (its own, and one to its actor); the rest (actors' pipes, liveness checks,
/// the ledger, logs) keep a reserve.
pub fn max_clients(limit: u64) -> usize {
    const RESERVE: u64 = 128;
    (limit.saturating_sub(RESERVE) / 2).clamp(8, 4096) as usize
}

/// A warning said at most once per period, with how many were kept quiet since.
#[derive(Debug)]
pub struct Quiet {
    every: Duration,
    last: Option<Instant>,
    kept: u64,
}

impl Quiet {
    pub const fn new(every: Duration) -> Quiet {
        Quiet {
            every,
            last: None,
            kept: 0,
        }
    }

    /// `Some(n)` when this one is to be said (n: those kept quiet before it).
    pub fn say(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < self.every)
        {
            self.kept += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_past_the_limit_holds_no_more_than_the_limit() {
        let mut input = std::io::Cursor::new(vec![b'x'; 1000]);
        let mut r = std::io::BufReader::with_capacity(64, &mut input);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_std(&mut r, &mut buf, 100).expect("read"),
            Line::TooLong
        );
        assert_eq!(buf.len(), 100);
        let mut r = std::io::BufReader::new(&b"{\"op\":\"ping\"}\nmore"[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_std(&mut r, &mut buf, 100).expect("read"),
            Line::Whole
        );
        assert_eq!(buf, b"{\"op\":\"ping\"}\n");
        buf.clear();
        assert_eq!(
            read_line_std(&mut r, &mut buf, 100).expect("read"),
            Line::End
        );
        assert_eq!(buf, b"more");
        // Exactly the limit, newline included, is a line.
        let mut r = std::io::BufReader::new(&b"abc\n"[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_std(&mut r, &mut buf, 4).expect("read"),
            Line::Whole
        );
    }

    #[test]
    fn a_long_socket_path_is_reached_through_its_directory() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut deep = dir.path().to_path_buf();
        while deep.as_os_str().len() < 200 {
            deep.push("a-rather-long-directory-name");
        }
        std::fs::create_dir_all(&deep).expect("mkdir");
        let socket = deep.join("0.sock");
        assert!(socket.as_os_str().len() > 200);
        // Too long for the socket calls themselves.
        assert!(std::os::unix::net::UnixListener::bind(&socket).is_err());
        let listener = bind_std(&socket).expect("bind");
        assert!(socket.exists(), "the socket file is where it was asked for");
        let _client = connect_std(&socket).expect("connect");
        let (_server, _) = listener.accept().expect("accept");
    }

    #[test]
    fn out_of_descriptors_is_told_apart() {
        assert!(out_of_descriptors(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(out_of_descriptors(&io::Error::from_raw_os_error(
            libc::ENFILE
        )));
        assert!(!out_of_descriptors(&io::Error::from_raw_os_error(
            libc::ENOENT
        )));
        let text = io::Error::from_raw_os_error(libc::EMFILE).to_string();
        assert!(
            says_out_of_descriptors(&format!("cannot open x: {text}")),
            "{text}"
        );
        assert!(!says_out_of_descriptors("cannot open x: No such file"));
        assert_eq!(max_clients(1024), 448);
        assert_eq!(max_clients(64), 8);
    }

    #[test]
    fn a_quiet_warning_is_said_once_per_period_with_the_count_kept() {
        let mut q = Quiet::new(Duration::from_secs(3600));
        assert_eq!(q.say(), Some(0));
        for _ in 0..1000 {
            assert_eq!(q.say(), None);
        }
        q.last = Some(Instant::now() - Duration::from_secs(3601));
        assert_eq!(q.say(), Some(1000));
    }
}
