//! The daily log (memory Tier 2): append-only JSON Lines, one file per UTC date, under
//! `memory/daily_log/v1/<component>/YYYY-MM-DD.jsonl`.
//!
//! One line per activity record (a request, an answer, a tool call, a memory edit, a
//! consolidation), with its time, turn id and kind, readable with `jq` and `grep`. Appends
//! take an exclusive `flock` on the day's file, so lines of concurrent writers never
//! interleave; the file is never replaced or rewritten, only cut back to its last whole line
//! when a crash left a torn one. Appends are not fsynced: the ledger is the authority for
//! every turn, and the log is activity memory for the model and the shell. A crash can lose
//! the newest lines, never earlier ones.

use crate::civil::{civil_from_days, days_from_civil};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{create_dir_private, open_private};
use crate::layout::{component, runtime_id, DAILY_LOG_DIR};
use crate::ledger::record::Millis;
use crate::{Error, Repo, Result};

/// The longest text (and tool result) a record keeps, in bytes; longer text is cut at a
/// character boundary and the record says how long it was (`cut_from`).
pub const TEXT_LIMIT: usize = 16 * 1024;

/// What a record is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    /// The user's request that began a turn.
    Request,
    /// The Agent's answer that ended a turn (with the turn's state).
    Answer,
    /// One tool call, with its arguments and result.
    ToolCall,
    /// A change to a core memory block.
    MemoryEdit,
    /// A consolidation pass.
    Consolidation,
    /// Text given to memory from the shell (`axocoatl memory add`).
    Note,
    /// A kind written by a newer axocoatl.
    #[serde(other)]
    Other,
}

impl LogKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LogKind::Request => "request",
            LogKind::Answer => "answer",
            LogKind::ToolCall => "tool_call",
            LogKind::MemoryEdit => "memory_edit",
            LogKind::Consolidation => "consolidation",
            LogKind::Note => "note",
            LogKind::Other => "other",
        }
    }
}

/// One line of the daily log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    /// RFC 3339 UTC, for people reading the file.
    pub time: String,
    /// Milliseconds since the Unix epoch: what readers compare.
    pub ms: Millis,
    pub kind: LogKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// The tool of a tool call, the block of a memory edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub text: String,
    /// A tool call's result as the model saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// An answer's turn state (`completed`, `failed`, `stopped`, `interrupted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Set when `text` or `result` was cut to [`TEXT_LIMIT`]: the longer one's length in
    /// bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_from: Option<u64>,
}

impl LogRecord {
    pub fn new(ms: Millis, kind: LogKind, turn: Option<&str>, text: &str) -> LogRecord {
        let mut r = LogRecord {
            time: rfc3339(ms),
            ms,
            kind,
            turn: turn.map(str::to_owned),
            name: None,
            text: String::new(),
            result: None,
            state: None,
            is_error: false,
            cut_from: None,
        };
        r.text = r.bounded(text);
        r
    }

    pub fn name(mut self, name: &str) -> LogRecord {
        self.name = Some(name.to_owned());
        self
    }

    pub fn result(mut self, result: &str, is_error: bool) -> LogRecord {
        self.result = Some(self.bounded(result));
        self.is_error = is_error;
        self
    }

    pub fn state(mut self, state: &str) -> LogRecord {
        self.state = Some(state.to_owned());
        self
    }

    fn bounded(&mut self, text: &str) -> String {
        if text.len() <= TEXT_LIMIT {
            return text.to_owned();
        }
        let mut cut = TEXT_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.cut_from = Some(self.cut_from.unwrap_or(0).max(text.len() as u64));
        text[..cut].to_owned()
    }

    /// The UTC date of the record: the file it belongs to.
    pub fn date(&self) -> String {
        date(self.ms)
    }
}

/// What a range read found.
#[derive(Debug, Default)]
pub struct LogRead {
    /// Matching records in time order, at most the limit asked for.
    pub records: Vec<LogRecord>,
    /// Matching records past the limit.
    pub more: u64,
    /// Lines that do not parse: `(file, line number, reason)`. Reported, never skipped
    /// silently.
    pub damaged: Vec<(PathBuf, u64, String)>,
}

/// The daily log of one runtime Agent id.
#[derive(Clone, Debug)]
pub struct DailyLog {
    dir: PathBuf,
    /// The exact pre-1.0 directory (`memory/daily_log/<component>/`): reads merge its
    /// files, appends never go there.
    legacy: PathBuf,
}

impl DailyLog {
    pub fn new(repo: &Repo, agent_id: &str) -> DailyLog {
        DailyLog {
            dir: repo.path(DAILY_LOG_DIR).join(component(agent_id)),
            legacy: crate::legacy::daily_log_dir(repo.root(), agent_id),
        }
    }

    /// The pre-1.0 directory whose files reads merge.
    pub fn legacy_dir(&self) -> &Path {
        &self.legacy
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a UTC date (`YYYY-MM-DD`).
    pub fn file_of(&self, date: &str) -> PathBuf {
        self.dir.join(format!("{date}.jsonl"))
    }

    /// Appends records, each to its date's file.
    pub fn append(&self, records: &[LogRecord]) -> Result<()> {
        let mut start = 0;
        while start < records.len() {
            let date = records[start].date();
            let mut end = start + 1;
            while end < records.len() && records[end].date() == date {
                end += 1;
            }
            let mut bytes = Vec::new();
            for r in &records[start..end] {
                serde_json::to_writer(&mut bytes, r).map_err(|e| Error::Encode {
                    what: "a daily log record",
                    reason: e.to_string(),
                })?;
                bytes.push(b'\n');
            }
            self.append_bytes(&self.file_of(&date), &bytes)?;
            start = end;
        }
        Ok(())
    }

    fn append_bytes(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        create_dir_private(&self.dir)?;
        let mut file = open_private(path, true)?;
        file.lock().map_err(Error::io("lock", path))?;
        let len = file.metadata().map_err(Error::io("stat", path))?.len();
        let whole = whole_lines_len(&file, len).map_err(Error::io("read", path))?;
        if whole < len {
            // A crash cut the last line short: drop it so the file stays whole lines.
            crate::failpoint::hit("memory.daily_log.truncate")
                .and_then(|()| file.set_len(whole))
                .map_err(Error::io("truncate", path))?;
        }
        crate::failpoint::hit_write("memory.daily_log.write", bytes, |b| file.write_all(b))
            .and_then(|()| file.write_all(bytes))
            .map_err(Error::io("append to", path))?;
        let _ = file.unlock();
        Ok(())
    }

    /// The dates that have a file, oldest first (in the current directory or the exact
    /// pre-1.0 one).
    pub fn dates(&self) -> Result<Vec<String>> {
        let mut dates = date_files(&self.dir)?;
        if crate::legacy::is_plain_dir(&self.legacy) {
            dates.extend(date_files(&self.legacy)?);
            dates.sort();
            dates.dedup();
        }
        Ok(dates)
    }

    /// The files of a date as read: the pre-1.0 one (a regular file only) then the current.
    fn files_of(&self, date: &str) -> Vec<PathBuf> {
        let legacy = self.legacy.join(format!("{date}.jsonl"));
        let mut files = Vec::with_capacity(2);
        if crate::legacy::is_regular_file(&legacy) {
            files.push(legacy);
        }
        files.push(self.file_of(date));
        files
    }

    /// The records with `from <= ms <= to` that `keep` accepts, in time order, at most
    /// `limit` of them (the rest are counted in `more`).
    pub fn read(
        &self,
        from: Millis,
        to: Millis,
        mut keep: impl FnMut(&LogRecord) -> bool,
        limit: usize,
    ) -> Result<LogRead> {
        let (first, last) = (date(from), date(to));
        let mut out = LogRead::default();
        for d in self.dates()? {
            if d < first || d > last {
                continue;
            }
            let mut records = Vec::new();
            for path in self.files_of(&d) {
                read_lines(&path, |n, _, line| match line {
                    Line::Record(r) => {
                        if r.ms >= from && r.ms <= to && keep(&r) {
                            records.push(r);
                        }
                    }
                    Line::Damaged(reason) => out.damaged.push((path.clone(), n, reason)),
                    Line::Torn => {}
                })?;
            }
            // Appenders of one file may race by a millisecond: keep time order.
            records.sort_by_key(|r| r.ms);
            for r in records {
                if out.records.len() < limit {
                    out.records.push(r);
                } else {
                    out.more += 1;
                }
            }
        }
        Ok(out)
    }
}

/// The dates of the `YYYY-MM-DD.jsonl` files in `dir`, sorted (none when it is missing).
fn date_files(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut dates: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let date = name.strip_suffix(".jsonl")?;
            is_date(date).then(|| date.to_owned())
        })
        .collect();
    dates.sort();
    Ok(dates)
}

/// One line of a daily log file as read.
pub enum Line {
    Record(LogRecord),
    /// A line that does not parse.
    Damaged(String),
    /// The last line has no newline: an append in progress or cut by a crash.
    Torn,
}

/// Calls `each(line_number, byte_offset, line)` for every line of a daily log file
/// (1-based line numbers).
pub fn read_lines(path: &Path, mut each: impl FnMut(u64, u64, Line)) -> Result<()> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path)(e)),
    };
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let (mut n, mut offset) = (0, 0);
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(Error::io("read", path))?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        if buf.last() != Some(&b'\n') {
            each(n, offset, Line::Torn);
            return Ok(());
        }
        match serde_json::from_slice::<LogRecord>(&buf) {
            Ok(r) => each(n, offset, Line::Record(r)),
            Err(e) => each(n, offset, Line::Damaged(format!("does not parse: {e}"))),
        }
        offset += read as u64;
    }
}

/// The length of the whole lines at the start of a file of `len` bytes.
fn whole_lines_len(file: &File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if end == len && chunk.last() == Some(&b'\n') {
            return Ok(len);
        }
        if let Some(i) = memrchr_newline(chunk) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn memrchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}

/// Cuts a daily log file back to its whole lines; returns the bytes removed.
pub fn repair_torn(path: &Path) -> Result<u64> {
    let file = open_private(path, true)?;
    file.lock().map_err(Error::io("lock", path))?;
    let len = file.metadata().map_err(Error::io("stat", path))?.len();
    let whole = whole_lines_len(&file, len).map_err(Error::io("read", path))?;
    if whole < len {
        file.set_len(whole).map_err(Error::io("truncate", path))?;
    }
    Ok(len - whole)
}

/// The runtime Agent ids that have a daily log.
pub fn agent_ids(repo: &Repo) -> Result<Vec<String>> {
    let dir = repo.path(DAILY_LOG_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", &dir)(e)),
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| runtime_id(e.file_name().to_str()?))
        .collect();
    ids.sort();
    Ok(ids)
}

/// Whether `s` is `YYYY-MM-DD` with a valid month and day.
pub fn is_date(s: &str) -> bool {
    parse_date(s).is_some()
}

/// Milliseconds at 00:00 UTC of a `YYYY-MM-DD` date.
pub fn parse_date(s: &str) -> Option<Millis> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400_000)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `YYYY-MM-DD` (UTC) of a time.
pub fn date(ms: Millis) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(ms: Millis) -> String {
    let rem = ms.rem_euclid(86_400_000);
    let secs = rem / 1000;
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        date(ms),
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Millis = 86_400_000;
    // 2026-01-02T03:04:05Z
    const T: Millis = 1_767_323_045_000;

    fn repo() -> (tempfile::TempDir, Repo) {
        let (dir, repo) = crate::repo::scratch();
        (dir, repo)
    }

    #[test]
    fn dates_and_times() {
        assert_eq!(rfc3339(T), "2026-01-02T03:04:05.000Z");
        assert_eq!(date(T), "2026-01-02");
        assert_eq!(
            parse_date("2026-01-02"),
            Some(T - (3 * 3600 + 4 * 60 + 5) * 1000)
        );
        assert_eq!(date(parse_date("2024-02-29").expect("leap")), "2024-02-29");
        for bad in [
            "2026-02-29",
            "2026-13-01",
            "2026-1-02",
            "20260102",
            "2026-01-0x",
        ] {
            assert!(!is_date(bad), "{bad}");
        }
    }

    #[test]
    fn appends_go_to_the_file_of_their_utc_date_and_read_back_in_range() {
        let (_d, repo) = repo();
        let log = DailyLog::new(&repo, "main:a");
        log.append(&[
            LogRecord::new(T, LogKind::Request, Some("t1"), "hello"),
            LogRecord::new(T + 1, LogKind::Answer, Some("t1"), "hi").state("completed"),
            LogRecord::new(T + DAY, LogKind::ToolCall, Some("t2"), "{}")
                .name("core_memory_set")
                .result("ok", false),
        ])
        .expect("append");
        assert_eq!(log.dates().expect("dates"), ["2026-01-02", "2026-01-03"]);
        let file = repo.path("memory/daily_log/v1/main%3aa/2026-01-02.jsonl");
        let text = std::fs::read_to_string(&file).expect("read");
        assert_eq!(text.lines().count(), 2);
        assert!(text.starts_with(
            r#"{"time":"2026-01-02T03:04:05.000Z","ms":1767323045000,"kind":"request","turn":"t1","text":"hello"}"#
        ), "{text}");
        let all = log.read(0, Millis::MAX, |_| true, 10).expect("read");
        assert_eq!(all.records.len(), 3);
        let day2 = log.read(T + DAY, T + 2 * DAY, |_| true, 10).expect("read");
        assert_eq!(day2.records.len(), 1);
        assert_eq!(day2.records[0].name.as_deref(), Some("core_memory_set"));
        let bounded = log.read(0, Millis::MAX, |_| true, 1).expect("read");
        assert_eq!((bounded.records.len(), bounded.more), (1, 2));
        let other = DailyLog::new(&repo, "main:b");
        assert!(other
            .read(0, Millis::MAX, |_| true, 10)
            .expect("read")
            .records
            .is_empty());
        assert_eq!(agent_ids(&repo).expect("ids"), ["main:a"]);
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let long = "é".repeat(TEXT_LIMIT);
        let r = LogRecord::new(T, LogKind::Request, None, &long);
        assert!(r.text.len() <= TEXT_LIMIT);
        assert_eq!(r.cut_from, Some(long.len() as u64));
    }

    #[test]
    fn a_torn_line_is_ignored_and_cut_by_the_next_append_damage_is_reported() {
        let (_d, repo) = repo();
        let log = DailyLog::new(&repo, "main:a");
        log.append(&[LogRecord::new(T, LogKind::Request, None, "one")])
            .expect("append");
        let file = log.file_of("2026-01-02");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open");
        f.write_all(b"{\"time\":\"2026-").expect("tear");
        let read = log.read(0, Millis::MAX, |_| true, 10).expect("read");
        assert_eq!((read.records.len(), read.damaged.len()), (1, 0));
        log.append(&[LogRecord::new(T + 5, LogKind::Request, None, "two")])
            .expect("append");
        let read = log.read(0, Millis::MAX, |_| true, 10).expect("read");
        let texts: Vec<&str> = read.records.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["one", "two"]);
        f.write_all(b"garbage\n").expect("damage");
        log.append(&[LogRecord::new(T + 9, LogKind::Request, None, "three")])
            .expect("append");
        let read = log.read(0, Millis::MAX, |_| true, 10).expect("read");
        assert_eq!(read.records.len(), 3);
        assert_eq!(read.damaged.len(), 1);
        assert_eq!(read.damaged[0].1, 3);
        f.write_all(b"{\"torn").expect("tear");
        assert_eq!(repair_torn(&file).expect("repair"), 6);
        assert_eq!(repair_torn(&file).expect("repair"), 0);
    }

    #[test]
    fn unknown_kinds_from_newer_builds_are_read() {
        let r: LogRecord =
            serde_json::from_str(r#"{"time":"x","ms":1,"kind":"dream","text":"t","future":true}"#)
                .expect("parse");
        assert_eq!(r.kind, LogKind::Other);
    }

    #[test]
    fn reads_merge_the_legacy_directory_and_appends_go_to_v1_only() {
        let (_dir, repo) = repo();
        let log = DailyLog::new(&repo, "main:a");
        let legacy = repo.root().join("memory/daily_log/main%3aa");
        std::fs::create_dir_all(&legacy).expect("mkdir");
        let old = LogRecord::new(T - DAY, LogKind::Request, Some("t0"), "old day");
        let same_day = LogRecord::new(T - 1000, LogKind::Request, Some("t1"), "old, same day");
        let mut bytes = Vec::new();
        serde_json::to_writer(&mut bytes, &old).expect("json");
        bytes.push(b'\n');
        std::fs::write(legacy.join(format!("{}.jsonl", date(T - DAY))), &bytes).expect("write");
        let mut bytes = Vec::new();
        serde_json::to_writer(&mut bytes, &same_day).expect("json");
        bytes.push(b'\n');
        let legacy_today = legacy.join(format!("{}.jsonl", date(T)));
        std::fs::write(&legacy_today, &bytes).expect("write");
        log.append(&[LogRecord::new(T, LogKind::Answer, Some("t2"), "new")])
            .expect("append");
        assert_eq!(std::fs::read(&legacy_today).expect("read"), bytes);
        assert!(log.file_of(&date(T)).exists());
        assert_eq!(log.dates().expect("dates"), vec![date(T - DAY), date(T)]);
        let read = log.read(0, T + DAY, |_| true, 10).expect("read");
        let texts: Vec<&str> = read.records.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, vec!["old day", "old, same day", "new"]);
    }
}
