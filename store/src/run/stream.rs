//! The stream file of a running turn: what the turn has reported so far, one line each, so
//! that another process can show it (`axocoatl follow`) and then keep up with it.
//!
//! `run/streams/<turn>` is created when the turn begins and removed after its terminal
//! record is durable (the ledger stays the authority: a stream is never read to learn how a
//! turn ended). It is bounded: past [`STREAM_LIMIT`] bytes the writer adds one [`Line::Cut`]
//! marker and nothing more, so a runaway reply cannot fill the disk through it. Lines are
//! opaque to the store (the runtime writes one event per line, without a newline inside);
//! the file starts with a header naming the format. Nothing is synced: a crash loses the
//! file's tail, never the ledger's, and whoever settles the orphan removes the file.
//!
//! A reader that opened the file keeps reading it after the writer removed it (the inode
//! lives while it is open), so a follower that sees the turn end in the ledger reads the
//! file to its end and misses nothing the turn wrote before its terminal record.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::PathBuf;

use crate::fsutil::{create_dir_private, create_new_private};
use crate::layout::{self, stream_path};
use crate::{Error, Repo, Result};

/// The most bytes a stream file holds (past it: the cut marker, then nothing).
pub const STREAM_LIMIT: u64 = 8 << 20;
/// The first line of every stream file.
const HEADER: &[u8] = b"axocoatl-stream 1\n";
/// The marker line written once the limit is reached (never a line the runtime writes: it
/// writes JSON objects).
const CUT: &[u8] = b"cut\n";

/// One line of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A line the writer wrote.
    Entry(String),
    /// The stream reached [`STREAM_LIMIT`]: the turn reported more than it holds.
    Cut,
}

fn check_turn(turn: &str) -> Result<()> {
    if !turn.is_empty() && turn.len() <= 64 && turn.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(());
    }
    Err(Error::Encode {
        what: "a stream file name",
        reason: format!("{turn:?} is not a turn id"),
    })
}

/// The writing end, held by the process running the turn.
#[derive(Debug)]
pub struct StreamWriter {
    file: File,
    path: PathBuf,
    written: u64,
    cut: bool,
}

impl StreamWriter {
    /// Creates the stream file of `turn` (and `run/streams/`, the first time), with its
    /// header. A file left by an earlier process for the same id is replaced.
    pub fn create(repo: &Repo, turn: &str) -> Result<StreamWriter> {
        check_turn(turn)?;
        let path = stream_path(repo.root(), turn);
        let file = match create_new_private(&path) {
            Ok(f) => f,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                create_dir_private(&repo.path(layout::STREAMS_DIR))?;
                create_new_private(&path)?
            }
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
                fs::remove_file(&path).map_err(Error::io("remove", &path))?;
                create_new_private(&path)?
            }
            Err(e) => return Err(e),
        };
        let mut w = StreamWriter {
            file,
            path,
            written: 0,
            cut: false,
        };
        w.write(HEADER)?;
        Ok(w)
    }

    /// Appends `line` and a newline in one write, or the cut marker once `line` would take
    /// the file past [`STREAM_LIMIT`]. Returns whether `line` was written.
    pub fn line(&mut self, line: &str) -> Result<bool> {
        if self.cut {
            return Ok(false);
        }
        let size = line.len() as u64 + 1;
        if self.written + size + CUT.len() as u64 > STREAM_LIMIT {
            self.cut = true;
            self.write(CUT)?;
            return Ok(false);
        }
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.write(&bytes)?;
        Ok(true)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(Error::io("write", &self.path))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Removes the file: the turn's terminal record is durable.
    pub fn remove(self) -> Result<()> {
        remove_path(&self.path)
    }
}

fn remove_path(path: &std::path::Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", path)(e)),
        _ => Ok(()),
    }
}

/// Removes the stream file of `turn` if one is left (its process died). A name that is no
/// turn id (a garbled lock note) names no stream file.
pub fn remove(repo: &Repo, turn: &str) -> Result<()> {
    if check_turn(turn).is_err() {
        return Ok(());
    }
    remove_path(&stream_path(repo.root(), turn))
}

/// The reading end: the lines written so far, then each new one as it comes.
#[derive(Debug)]
pub struct StreamReader {
    file: File,
    path: PathBuf,
    /// Bytes read after the last complete line.
    partial: Vec<u8>,
    /// Bytes read in all (never more than the limit, whatever the file holds).
    read: u64,
    header: bool,
}

impl StreamReader {
    /// Opens the stream file of `turn`; `None` when there is none (the turn has not begun,
    /// has ended, or was begun by a process that writes none).
    pub fn open(repo: &Repo, turn: &str) -> Result<Option<StreamReader>> {
        check_turn(turn)?;
        let path = stream_path(repo.root(), turn);
        // A file planted in its place (only the owner can write `run/streams/`) fails the
        // header check.
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", &path)(e)),
        };
        Ok(Some(StreamReader {
            file,
            path,
            partial: Vec::new(),
            read: 0,
            header: false,
        }))
    }

    /// The complete lines written since the last call (a line still being written waits for
    /// the next). A file that is not a stream (a wrong header) is an error.
    pub fn read(&mut self) -> Result<Vec<Line>> {
        let budget = STREAM_LIMIT + HEADER.len() as u64 - self.read;
        let mut chunk = Vec::new();
        (&mut self.file)
            .take(budget)
            .read_to_end(&mut chunk)
            .map_err(Error::io("read", &self.path))?;
        self.read += chunk.len() as u64;
        self.partial.extend_from_slice(&chunk);
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(n) = self.partial[start..].iter().position(|&b| b == b'\n') {
            let line = &self.partial[start..start + n + 1];
            start += n + 1;
            if !self.header {
                if line != HEADER {
                    return Err(Error::Corrupt {
                        path: self.path.clone(),
                        offset: 0,
                        reason: "not a turn's stream (no header)".into(),
                    });
                }
                self.header = true;
            } else if line == CUT {
                lines.push(Line::Cut);
            } else {
                let text = String::from_utf8_lossy(&line[..n]).into_owned();
                lines.push(Line::Entry(text));
            }
        }
        self.partial.drain(..start);
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = crate::repo::init(dir.path()).expect("init");
        let repo = Repo::open(&root, &Default::default()).expect("open");
        (dir, repo)
    }

    #[test]
    fn lines_are_read_as_written_even_after_the_file_is_removed() {
        let (_dir, repo) = repo();
        assert!(StreamReader::open(&repo, "abc1").expect("open").is_none());
        let mut w = StreamWriter::create(&repo, "abc1").expect("create");
        let mut r = StreamReader::open(&repo, "abc1")
            .expect("open")
            .expect("exists");
        assert_eq!(r.read().expect("read"), []);
        assert!(w.line("{\"a\":1}").expect("line"));
        assert!(w.line("{\"b\":2}").expect("line"));
        assert_eq!(
            r.read().expect("read"),
            [
                Line::Entry("{\"a\":1}".into()),
                Line::Entry("{\"b\":2}".into())
            ]
        );
        w.line("{\"c\":3}").expect("line");
        w.remove().expect("remove");
        assert_eq!(r.read().expect("read"), [Line::Entry("{\"c\":3}".into())]);
        assert!(StreamReader::open(&repo, "abc1").expect("open").is_none());
    }

    #[test]
    fn a_stream_stops_at_its_limit_with_one_cut_marker() {
        let (_dir, repo) = repo();
        let mut w = StreamWriter::create(&repo, "abc2").expect("create");
        let big = "x".repeat(1 << 20);
        let mut written = 0;
        while w.line(&big).expect("line") {
            written += 1;
        }
        assert!(!w.line("small").expect("line"), "nothing after the cut");
        assert_eq!(written, 7);
        let size = fs::metadata(stream_path(repo.root(), "abc2"))
            .expect("stat")
            .len();
        assert!(size <= STREAM_LIMIT, "{size}");
        let mut r = StreamReader::open(&repo, "abc2")
            .expect("open")
            .expect("exists");
        let lines = r.read().expect("read");
        assert_eq!(lines.len(), 8);
        assert_eq!(lines.last(), Some(&Line::Cut));
    }

    #[test]
    fn a_partial_line_waits_and_a_bad_name_or_header_is_refused() {
        let (_dir, repo) = repo();
        assert!(StreamWriter::create(&repo, "../x").is_err());
        assert!(StreamReader::open(&repo, "a/b").is_err());
        let mut w = StreamWriter::create(&repo, "abc3").expect("create");
        let mut r = StreamReader::open(&repo, "abc3")
            .expect("open")
            .expect("exists");
        w.write(b"{\"half").expect("write");
        assert_eq!(r.read().expect("read"), []);
        w.write(b"\":1}\n").expect("write");
        assert_eq!(
            r.read().expect("read"),
            [Line::Entry("{\"half\":1}".into())]
        );
        fs::write(stream_path(repo.root(), "abc4"), "garbage\n").expect("write");
        let mut bad = StreamReader::open(&repo, "abc4")
            .expect("open")
            .expect("exists");
        assert!(bad.read().is_err());
    }
}
