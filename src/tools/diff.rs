//! Unified diffs of what `write_file` and `edit_file` changed: the tool result carries one
//! (bounded), so the model sees what it did and people see it in `send` and `show`.
//!
//! Lines are compared with Myers' algorithm after the common head and tail are set aside
//! (most edits touch a few lines of a long file, so the search stays small); past
//! [`MAX_EDIT_DISTANCE`] differing lines the changed middle is shown as removed and added
//! whole rather than searched further.

/// Lines of context around each change, as `diff -u` shows them.
const CONTEXT: usize = 3;
/// Past this many differing lines, the middle is shown replaced whole (bounds time and the
/// search's memory: its trace grows with the square of this).
const MAX_EDIT_DISTANCE: usize = 1000;
/// A diff in a tool result is cut past this many lines…
pub const MAX_DIFF_LINES: usize = 200;
/// …or this many bytes, with a note saying how much was left out.
pub const MAX_DIFF_BYTES: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// Files larger than this (before or after) are not diffed: the result says so instead.
const MAX_DIFFED_BYTES: u64 = 4 << 20;

/// A file as it was before a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Before {
    Text(Vec<u8>),
    /// Why it was not read (too large, not a regular file, unreadable).
    Unread(&'static str),
}

/// Reads a file about to be replaced through its opened descriptor, when a diff of it is
/// worth making: a regular file of at most 4 MiB (a huge file is never read whole). The
/// descriptor is left at its end; the caller rewinds it before writing.
pub fn read_before(file: &mut std::fs::File) -> Before {
    use std::io::{Read, Seek};
    match file.metadata() {
        Ok(m) if !m.is_file() => Before::Unread("[no diff: it was not a regular file]"),
        Ok(m) if m.len() > MAX_DIFFED_BYTES => {
            Before::Unread("[no diff: the file was larger than 4 MiB]")
        }
        Ok(m) => {
            let mut bytes = Vec::with_capacity(m.len() as usize);
            let read = file
                .rewind()
                .and_then(|()| file.by_ref().take(MAX_DIFFED_BYTES).read_to_end(&mut bytes));
            match read {
                Ok(_) => Before::Text(bytes),
                Err(_) => Before::Unread("[no diff: the file could not be read before]"),
            }
        }
        Err(_) => Before::Unread("[no diff: the file could not be read before]"),
    }
}

/// `out` (a write or edit of `path`; an error is returned as it is) with the diff from
/// `before` (`None`: the file was created, and its content is in the call's own arguments)
/// to `new` after its first line: what the model, `send` and `show` see of the change.
pub fn attach(
    mut out: super::ToolOutput,
    path: &str,
    before: Option<&Before>,
    new: &str,
) -> super::ToolOutput {
    let Some(before) = before.filter(|_| !out.is_error) else {
        return out;
    };
    let diff = match before {
        Before::Unread(why) => Some(format!("{why}\n")),
        Before::Text(_) if new.len() as u64 > MAX_DIFFED_BYTES => {
            Some("[no diff: the file is larger than 4 MiB]\n".to_string())
        }
        Before::Text(old) => match std::str::from_utf8(old) {
            Ok(old) => for_result(path, Some(old), new),
            Err(_) => Some("[no diff: the file was not UTF-8 text before]\n".to_string()),
        },
    };
    match diff {
        Some(diff) => {
            out.text.push('\n');
            out.text.push_str(&diff);
        }
        None => out.text.push_str("\n(no change)"),
    }
    out
}

/// The unified diff turning `old` into `new` for the file `path` (`None` when they are the
/// same), cut as [`bounded`] cuts it. A file that did not exist is diffed from nothing.
pub fn for_result(path: &str, old: Option<&str>, new: &str) -> Option<String> {
    let diff = unified(path, old, new)?;
    Some(bounded(&diff, MAX_DIFF_LINES, MAX_DIFF_BYTES))
}

/// The unified diff turning `old` into `new` (`None` when they are the same).
pub fn unified(path: &str, old: Option<&str>, new: &str) -> Option<String> {
    if old == Some(new) {
        return None;
    }
    let a: Vec<&str> = old.map(split_lines).unwrap_or_default();
    let b: Vec<&str> = split_lines(new);
    let ops = diff_lines(&a, &b);
    let mut out = String::new();
    let from = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    out.push_str(&format!("--- {from}\n+++ b/{path}\n"));
    for hunk in hunks(&ops) {
        write_hunk(&mut out, &ops, &a, &b, hunk);
    }
    Some(out)
}

/// `diff` cut to at most `max_lines` lines and `max_bytes` bytes (at a line end), with a
/// last line saying how many lines were left out.
pub fn bounded(diff: &str, max_lines: usize, max_bytes: usize) -> String {
    let total = diff.lines().count();
    if total <= max_lines && diff.len() <= max_bytes {
        return diff.to_owned();
    }
    let mut out = String::new();
    let mut kept = 0;
    for line in diff.lines() {
        if kept == max_lines || out.len() + line.len() + 1 > max_bytes {
            break;
        }
        out.push_str(line);
        out.push('\n');
        kept += 1;
    }
    out.push_str(&format!(
        "[diff cut: {} more lines not shown; read the file for the rest]\n",
        total - kept
    ));
    out
}

/// Lines with their endings dropped; a last line without a newline counts as a line.
fn split_lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l))
        .collect()
}

/// One operation per line of `a` and `b`, in order.
fn diff_lines(a: &[&str], b: &[&str]) -> Vec<Op> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut ops = vec![Op::Same; head];
    match myers(ma, mb) {
        Some(middle) => ops.extend(middle),
        None => {
            ops.extend(std::iter::repeat_n(Op::Removed, ma.len()));
            ops.extend(std::iter::repeat_n(Op::Added, mb.len()));
        }
    }
    ops.extend(std::iter::repeat_n(Op::Same, tail));
    ops
}

/// Myers' shortest edit script, or `None` past [`MAX_EDIT_DISTANCE`].
fn myers(a: &[&str], b: &[&str]) -> Option<Vec<Op>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (a.len() + b.len()).min(MAX_EDIT_DISTANCE) as isize;
    let offset = max + 1;
    let mut v = vec![0isize; 2 * offset as usize + 1];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    'search: for d in 0..=max {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let at = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[at - 1] < v[at + 1]) {
                v[at + 1]
            } else {
                v[at - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[at] = x;
            if x >= n && y >= m {
                found = Some(d);
                break 'search;
            }
            k += 2;
        }
    }
    found?;
    // Walk the trace back from the end, one edit per step.
    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (n, m);
    for d in (1..trace.len() as isize).rev() {
        let v = &trace[d as usize];
        let k = x - y;
        let prev_k =
            if k == -d || (k != d && v[(k - 1 + offset) as usize] < v[(k + 1 + offset) as usize]) {
                k + 1
            } else {
                k - 1
            };
        let prev_x = v[(prev_k + offset) as usize];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            ops.push(Op::Same);
            x -= 1;
            y -= 1;
        }
        ops.push(if x == prev_x { Op::Added } else { Op::Removed });
        x = prev_x;
        y = prev_y;
    }
    while x > 0 && y > 0 {
        ops.push(Op::Same);
        x -= 1;
        y -= 1;
    }
    ops.reverse();
    Some(ops)
}

/// The ranges of `ops` each hunk covers: changes with up to [`CONTEXT`] same lines around
/// them, merged when their context touches.
fn hunks(ops: &[Op]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if *op == Op::Same {
            continue;
        }
        let start = i.saturating_sub(CONTEXT);
        let end = (i + 1 + CONTEXT).min(ops.len());
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

fn write_hunk(out: &mut String, ops: &[Op], a: &[&str], b: &[&str], (start, end): (usize, usize)) {
    // Line numbers of the hunk's first line in each file.
    let (mut ia, mut ib) = (0, 0);
    for op in &ops[..start] {
        match op {
            Op::Same => {
                ia += 1;
                ib += 1;
            }
            Op::Removed => ia += 1,
            Op::Added => ib += 1,
        }
    }
    let count = |want: Op| {
        ops[start..end]
            .iter()
            .filter(|o| **o == Op::Same || **o == want)
            .count()
    };
    let (na, nb) = (count(Op::Removed), count(Op::Added));
    let first = |i: usize, n: usize| if n == 0 { i } else { i + 1 };
    out.push_str(&format!(
        "@@ -{},{na} +{},{nb} @@\n",
        first(ia, na),
        first(ib, nb)
    ));
    for op in &ops[start..end] {
        match op {
            Op::Same => {
                out.push(' ');
                out.push_str(a[ia]);
                ia += 1;
                ib += 1;
            }
            Op::Removed => {
                out.push('-');
                out.push_str(a[ia]);
                ia += 1;
            }
            Op::Added => {
                out.push('+');
                out.push_str(b[ib]);
                ib += 1;
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_line_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            unified("x.txt", Some(old), new).expect("a diff"),
            "--- a/x.txt\n+++ b/x.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
        assert_eq!(unified("x.txt", Some(old), old), None);
    }

    #[test]
    fn a_new_file_and_separate_hunks() {
        assert_eq!(
            unified("n.txt", None, "one\ntwo\n").expect("a diff"),
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        );
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("17\n", "");
        let diff = unified("n.txt", Some(&old), &new).expect("a diff");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("-2\n+two\n"), "{diff}");
        assert!(diff.contains("-17\n"), "{diff}");
    }

    #[test]
    fn the_edit_script_rebuilds_both_sides() {
        let cases = [
            ("abcabba", "cbabac"),
            ("", "xyz"),
            ("xyz", ""),
            ("aaaa", "aaba"),
            ("abcdef", "fedcba"),
        ];
        for (x, y) in cases {
            let a: Vec<String> = x.chars().map(String::from).collect();
            let b: Vec<String> = y.chars().map(String::from).collect();
            let (a, b): (Vec<&str>, Vec<&str>) = (
                a.iter().map(String::as_str).collect(),
                b.iter().map(String::as_str).collect(),
            );
            let ops = diff_lines(&a, &b);
            let (mut ia, mut ib) = (0, 0);
            let (mut ra, mut rb) = (Vec::new(), Vec::new());
            for op in ops {
                match op {
                    Op::Same => {
                        assert_eq!(a[ia], b[ib]);
                        ra.push(a[ia]);
                        rb.push(b[ib]);
                        ia += 1;
                        ib += 1;
                    }
                    Op::Removed => {
                        ra.push(a[ia]);
                        ia += 1;
                    }
                    Op::Added => {
                        rb.push(b[ib]);
                        ib += 1;
                    }
                }
            }
            assert_eq!((ra, rb), (a.clone(), b.clone()), "{x} → {y}");
        }
    }

    #[test]
    fn write_and_edit_results_carry_the_diff() {
        use crate::tools::testing::Fixture;
        use serde_json::json;
        let f = Fixture::new(crate::config::SandboxMode::WorkspaceWrite);
        let created = f.call(
            "write_file",
            json!({"path": "a.txt", "content": "one\ntwo\n"}),
        );
        assert_eq!(
            created.text, "created a.txt (8 bytes)",
            "the content is in the call"
        );
        let edited = f.call(
            "edit_file",
            json!({"path": "a.txt", "old": "two", "new": "2"}),
        );
        assert_eq!(
            edited.text,
            "replaced 1 occurrence in a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
        );
        let same = f.call(
            "write_file",
            json!({"path": "a.txt", "content": "one\n2\n"}),
        );
        assert_eq!(same.text, "wrote a.txt (6 bytes)\n(no change)");
        let rewritten = f.call(
            "write_file",
            json!({"path": "a.txt", "content": "zero\none\n2\n"}),
        );
        assert!(
            rewritten
                .text
                .ends_with("@@ -1,2 +1,3 @@\n+zero\n one\n 2\n"),
            "{}",
            rewritten.text
        );
    }

    #[test]
    fn what_is_not_worth_reading_is_never_read() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Opened without blocking, it is still never read: it is not a regular file.
            let mut opened = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .expect("open fifo");
            assert!(matches!(read_before(&mut opened), Before::Unread(_)));
        }
        let big = dir.path().join("big");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&big)
            .expect("create");
        file.set_len(MAX_DIFFED_BYTES + 1).expect("sparse");
        assert_eq!(
            read_before(&mut file),
            Before::Unread("[no diff: the file was larger than 4 MiB]")
        );
        let out = attach(
            crate::tools::ToolOutput::ok("wrote big"),
            "big",
            Some(&read_before(&mut file)),
            "x",
        );
        assert_eq!(
            out.text,
            "wrote big\n[no diff: the file was larger than 4 MiB]\n"
        );
    }

    #[test]
    fn long_diffs_are_cut_with_a_note() {
        let new: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let diff = for_result("big.txt", None, &new).expect("a diff");
        assert!(
            diff.lines().count() <= MAX_DIFF_LINES + 1,
            "{}",
            diff.lines().count()
        );
        assert!(
            diff.ends_with("more lines not shown; read the file for the rest]\n"),
            "{diff}"
        );
        // Past the search bound the middle is replaced whole, still a correct diff.
        let old: String = (0..3000).map(|i| format!("{i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("{}\n", i * 7)).collect();
        let diff = unified("x", Some(&old), &new).expect("a diff");
        assert!(
            diff.starts_with("--- a/x\n+++ b/x\n@@ -1,"),
            "{}",
            &diff[..40]
        );
    }
}
