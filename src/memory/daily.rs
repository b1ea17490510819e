//! The daily log (Tier 2) in the runtime: what a turn records in it, and the
//! `recall_timeframe` tool that reads it back by time range.

use axocoatl_store::ledger::record::Millis;
use axocoatl_store::memory::daily_log::{self, LogRead};
use axocoatl_store::memory::{DailyLog, LogKind, LogRecord};

use crate::clock;

use super::AgentMemory;

/// At most this many records answer one `recall_timeframe` call.
pub const TOOL_RECORDS: usize = 50;
/// At most this much text (bytes) answers one `recall_timeframe` call.
pub const TOOL_BYTES: usize = 16 * 1024;
/// Each record's text is cut to this many characters in a tool answer.
const TOOL_RECORD_CHARS: usize = 600;

/// What one turn writes to its Agent's daily log: a record per request, tool call and
/// answer (memory edits are recorded by the edit itself). Writing never fails the turn: a
/// record that could not be written becomes a warning of the turn.
#[derive(Debug)]
pub struct TurnLog {
    log: DailyLog,
    turn: String,
}

impl TurnLog {
    pub fn new(memory: &AgentMemory, turn: &str) -> TurnLog {
        TurnLog {
            log: memory.log.clone(),
            turn: turn.to_owned(),
        }
    }

    fn write(&self, record: LogRecord) -> Option<String> {
        self.log
            .append(&[record])
            .err()
            .map(|e| format!("the daily log did not record this turn's activity: {e}"))
    }

    fn record(&self, kind: LogKind, text: &str) -> LogRecord {
        LogRecord::new(clock::now(), kind, Some(&self.turn), text)
    }

    pub fn request(&self, text: &str) -> Option<String> {
        self.write(self.record(LogKind::Request, text))
    }

    pub fn tool_call(
        &self,
        name: &str,
        arguments: &str,
        result: &str,
        is_error: bool,
    ) -> Option<String> {
        self.write(
            self.record(LogKind::ToolCall, arguments)
                .name(name)
                .result(result, is_error),
        )
    }

    /// The answer that ended the turn, with its state (and error, if any).
    pub fn answer(&self, output: &str, state: &str, error: Option<&str>) -> Option<String> {
        let mut r = self.record(LogKind::Answer, output).state(state);
        if let Some(e) = error {
            r = r.result(e, true);
        }
        self.write(r)
    }
}

/// Parses a range bound: `YYYY-MM-DD` (the start of that UTC day, or its last millisecond
/// for the end of a range) or an RFC 3339 time (`2026-01-02T03:04:05Z`, `...+02:00`; without
/// a zone, UTC).
pub fn parse_bound(s: &str, end: bool) -> Option<Millis> {
    let s = s.trim();
    if let Some(day) = daily_log::parse_date(s) {
        return Some(if end { day + 86_399_999 } else { day });
    }
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let day = daily_log::parse_date(date)?;
    let (time, offset_min) = if let Some(t) = time.strip_suffix(['Z', 'z']) {
        (t, 0)
    } else if let Some(i) = time.rfind(['+', '-']) {
        let (t, zone) = time.split_at(i);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        if h > 23 || m > 59 {
            return None;
        }
        (t, sign * (h * 60 + m))
    } else {
        (time, 0)
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut parts = hms.split(':');
    let hh: i64 = parts.next()?.parse().ok()?;
    let mm: i64 = parts.next()?.parse().ok()?;
    let ss: i64 = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    Some(day + ((hh * 60 + mm - offset_min) * 60 + ss) * 1000 + ms)
}

/// Whether a record contains `query` (case-insensitive) in its text, result or name.
pub fn matches(r: &LogRecord, query_lower: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(query_lower);
    has(&r.text) || r.result.as_deref().is_some_and(has) || r.name.as_deref().is_some_and(has)
}

impl AgentMemory {
    /// The daily log records in `[from, to]` containing `query`, at most `limit`.
    pub fn timeframe(
        &self,
        from: Millis,
        to: Millis,
        query: Option<&str>,
        limit: usize,
    ) -> Result<LogRead, axocoatl_store::Error> {
        let q = query.map(str::to_lowercase).filter(|q| !q.is_empty());
        self.log.read(
            from,
            to,
            |r| q.as_deref().is_none_or(|q| matches(r, q)),
            limit,
        )
    }

    /// Runs a `recall_timeframe` call: `Ok(text)` or `Err(text)` for the model.
    pub fn run_timeframe_tool(
        &self,
        from: &str,
        to: &str,
        query: Option<&str>,
    ) -> Result<String, String> {
        let bound = |name: &str, s: &str, end: bool| -> Result<Millis, String> {
            parse_bound(s, end).ok_or_else(|| {
                format!("{name}: {s:?} is neither a date (YYYY-MM-DD) nor an RFC 3339 time")
            })
        };
        let (from, to) = (bound("from", from, false)?, bound("to", to, true)?);
        if from > to {
            return Err(format!(
                "the range is empty: from {} is after to {}",
                clock::rfc3339(from),
                clock::rfc3339(to)
            ));
        }
        let read = self
            .timeframe(from, to, query, TOOL_RECORDS)
            .map_err(|e| e.to_string())?;
        Ok(render_for_model(&read, from, to))
    }
}

/// A `recall_timeframe` answer: one line per record, bounded in records and bytes, saying
/// what was left out.
pub fn render_for_model(read: &LogRead, from: Millis, to: Millis) -> String {
    let range = format!("{} to {}", clock::rfc3339(from), clock::rfc3339(to));
    if read.records.is_empty() && read.more == 0 {
        let mut out = format!("No daily log records from {range}.");
        push_damage(&mut out, read);
        return out;
    }
    let mut out = format!("Daily log records from {range}:\n");
    let mut left = read.more;
    for (i, r) in read.records.iter().enumerate() {
        let line = record_line(r, TOOL_RECORD_CHARS);
        if out.len() + line.len() > TOOL_BYTES {
            left += (read.records.len() - i) as u64;
            break;
        }
        out.push_str(&line);
        out.push('\n');
    }
    if left > 0 {
        out.push_str(&format!(
            "({left} more record{} in this range: narrow the range or add a query)\n",
            if left == 1 { "" } else { "s" }
        ));
    }
    push_damage(&mut out, read);
    out
}

fn push_damage(out: &mut String, read: &LogRead) {
    if !read.damaged.is_empty() {
        out.push_str(&format!(
            "({} damaged line{} could not be read)\n",
            read.damaged.len(),
            if read.damaged.len() == 1 { "" } else { "s" }
        ));
    }
}

/// One record as a line: time, kind, tool or block, turn, text (cut to `max` characters,
/// newlines shown as `⏎`).
pub fn record_line(r: &LogRecord, max: usize) -> String {
    let mut line = format!("{} {}", r.time, r.kind.as_str());
    if let Some(state) = &r.state {
        line.push_str(&format!(" ({state})"));
    }
    if let Some(name) = &r.name {
        line.push_str(&format!(" {name}"));
    }
    if let Some(turn) = &r.turn {
        line.push_str(&format!(" [turn {}]", turn.get(..8).unwrap_or(turn)));
    }
    line.push_str(": ");
    line.push_str(&one_line(&r.text, max));
    if let Some(result) = &r.result {
        line.push_str(if r.is_error { " → error: " } else { " → " });
        line.push_str(&one_line(result, max / 2));
    }
    line
}

fn one_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= max {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('⏎'),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use axocoatl_store::Repo;

    const T: Millis = 1_767_323_045_000; // 2026-01-02T03:04:05Z

    #[test]
    fn bounds() {
        let day = daily_log::parse_date("2026-01-02").expect("d");
        assert_eq!(parse_bound("2026-01-02", false), Some(day));
        assert_eq!(parse_bound("2026-01-02", true), Some(day + 86_399_999));
        assert_eq!(parse_bound("2026-01-02T03:04:05Z", false), Some(T));
        assert_eq!(parse_bound("2026-01-02T03:04:05", false), Some(T));
        assert_eq!(parse_bound("2026-01-02T05:04:05+02:00", false), Some(T));
        assert_eq!(
            parse_bound("2026-01-01T22:04:05.250-05:00", true),
            Some(T + 250)
        );
        assert_eq!(parse_bound("2026-01-02 03:04", false), Some(T - 5000));
        for bad in [
            "yesterday",
            "2026-01-02T25:00:00Z",
            "2026-02-30",
            "2026-01-02Tx",
        ] {
            assert_eq!(parse_bound(bad, false), None, "{bad}");
        }
    }

    #[test]
    fn timeframe_tool_reads_the_range_bounded_and_filtered() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = axocoatl_store::repo::init(dir.path()).expect("init");
        let repo = Repo::open(&root, &Default::default()).expect("open");
        let m = AgentMemory::for_id(&repo, "main:a", &MemoryConfig::default());
        let mut records = Vec::new();
        for i in 0..60 {
            records.push(LogRecord::new(
                T + i,
                LogKind::Request,
                Some("abcdef0123456789"),
                &format!("request {i}\nmore"),
            ));
        }
        records.push(
            LogRecord::new(T + 86_400_000, LogKind::Answer, Some("t"), "Tea it is")
                .state("completed"),
        );
        m.log.append(&records).expect("append");
        let day1 = m
            .run_timeframe_tool("2026-01-02", "2026-01-02", None)
            .expect("ok");
        assert!(day1.starts_with("Daily log records from 2026-01-02T00:00:00.000Z to 2026-01-02T23:59:59.999Z:\n2026-01-02T03:04:05.000Z request [turn abcdef01]: request 0⏎more\n"), "{day1}");
        assert!(
            day1.ends_with("(10 more records in this range: narrow the range or add a query)\n"),
            "{day1}"
        );
        let tea = m
            .run_timeframe_tool("2026-01-01", "2026-01-04T00:00:00Z", Some("TEA"))
            .expect("ok");
        assert_eq!(tea.lines().count(), 2, "{tea}");
        assert!(
            tea.contains("answer (completed) [turn t]: Tea it is"),
            "{tea}"
        );
        assert!(m
            .run_timeframe_tool("2026-01-03", "2026-01-02", None)
            .expect_err("empty")
            .contains("the range is empty"));
        assert!(m
            .run_timeframe_tool("last week", "2026-01-02", None)
            .expect_err("bad")
            .contains("neither a date"));
        let none = m
            .run_timeframe_tool("2025-01-01", "2025-01-02", None)
            .expect("ok");
        assert!(none.starts_with("No daily log records"), "{none}");
    }
}
