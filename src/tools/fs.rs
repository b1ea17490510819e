//! The file tools: read_file, list_dir, write_file, edit_file.

use std::io::{Read, Seek, Write};

use schemars::JsonSchema;
use serde::Deserialize;

use super::beneath::Want;
use super::handler::Handler;
use super::path::{OpenError, Target};
use super::{Context, ToolOutput};
use crate::config::SandboxMode;

/// Files larger than this are not read whole.
const READ_LIMIT: u64 = 32 * 1024 * 1024;
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
const SNIFF: usize = 8192;

/// Arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// The file, relative to the workspace root.
    path: String,
    /// The first line to read, counting from 1.
    #[serde(default)]
    offset: Option<u64>,
    /// How many lines to read.
    #[serde(default)]
    limit: Option<u64>,
}

impl Handler for ReadFile {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        let bytes = match cx
            .root
            .open(&self.path, Want::Read)
            .map_err(|e| open_message(&self.path, e, "read_file"))
            .and_then(|t| read_text(t, &self.path))
        {
            Ok(b) => b.1,
            Err(e) => return ToolOutput::err(e),
        };
        let text = String::from_utf8_lossy(&bytes);
        if self.offset.is_none() && self.limit.is_none() {
            return ToolOutput::ok(text.into_owned());
        }
        let first = self.offset.unwrap_or(1).max(1);
        let total = text.lines().count() as u64;
        if first > total.max(1) {
            return ToolOutput::err(format!(
                "{}: offset {first} is past the end: the file has {total} lines",
                self.path
            ));
        }
        let take = self.limit.unwrap_or(u64::MAX);
        let mut out = String::new();
        let mut last = first - 1;
        for line in text
            .split_inclusive('\n')
            .skip((first - 1) as usize)
            .take(take.min(usize::MAX as u64) as usize)
        {
            out.push_str(line);
            last += 1;
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[lines {first}-{last} of {total}]"));
        ToolOutput::ok(out)
    }
}

/// The whole text of an opened regular file (and the file, positioned at its end).
fn read_text(target: Target, shown: &str) -> Result<(std::fs::File, Vec<u8>), String> {
    let len = target.opened.len;
    if len > READ_LIMIT {
        return Err(format!(
            "{shown} is {len} bytes, more than read_file reads ({READ_LIMIT}); use grep, or run_command with head/tail",
        ));
    }
    let mut file = target.opened.into_file();
    let mut bytes = Vec::with_capacity(len as usize);
    (&mut file)
        .take(READ_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|e| io_message(shown, &e))?;
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        return Err(format!(
            "{shown} is a binary file ({} bytes); read_file reads text",
            bytes.len()
        ));
    }
    Ok((file, bytes))
}

fn io_message(shown: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file or directory"),
        _ => format!("{shown}: {e}"),
    }
}

/// What `tool` tells the model when `shown` could not be opened.
fn open_message(shown: &str, e: OpenError, tool: &str) -> String {
    match e {
        OpenError::Refused(why) => why,
        OpenError::NotFound => format!("{shown}: no such file or directory"),
        OpenError::IsDir if tool == "read_file" => format!("{shown} is a directory; use list_dir"),
        OpenError::IsDir => format!("{shown} is a directory"),
        OpenError::NotDir => format!("{shown} is a file; use read_file"),
        OpenError::Special(what) if tool == "list_dir" => {
            format!("{shown} is {what}, not a directory")
        }
        OpenError::Special(what) => format!(
            "{shown} is {what}, not a regular file; {tool} {} regular files only",
            if tool == "read_file" {
                "reads"
            } else {
                "changes"
            }
        ),
        OpenError::Io(e) => io_message(shown, &e),
    }
}

/// Arguments of `list_dir`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDir {
    /// The directory, relative to the workspace root (`.` for the root).
    #[serde(default)]
    path: Option<String>,
}

impl Handler for ListDir {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        let shown = self.path.as_deref().unwrap_or(".");
        let dir = match cx.root.open(shown, Want::Dir) {
            Ok(t) => t.opened,
            Err(e) => return ToolOutput::err(open_message(shown, e, "list_dir")),
        };
        let entries = match super::beneath::entries(std::os::fd::AsFd::as_fd(&dir.fd)) {
            Ok(e) => e,
            Err(e) => return ToolOutput::err(io_message(shown, &e)),
        };
        let mut names: Vec<String> = entries
            .into_iter()
            .filter(|(name, _)| name != axocoatl_store::layout::REPO_DIR)
            .map(|(name, t)| {
                let mut name = name.to_string_lossy().into_owned();
                if t == rustix::fs::FileType::Directory {
                    name.push('/');
                } else if t == rustix::fs::FileType::Symlink {
                    name.push('@');
                }
                name
            })
            .collect();
        names.sort_unstable();
        if names.is_empty() {
            return ToolOutput::ok(format!("{shown} is empty"));
        }
        ToolOutput::ok(names.join("\n"))
    }
}

fn refuse_read_only(cx: &Context<'_>, tool: &str) -> Option<ToolOutput> {
    (cx.sandbox == SandboxMode::ReadOnly).then(|| {
        ToolOutput::err(format!(
            "{tool} is refused: this agent's sandbox is read-only"
        ))
    })
}

/// Arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// The file, relative to the workspace root.
    path: String,
    /// The whole new content of the file.
    content: String,
}

impl Handler for WriteFile {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        if let Some(refused) = refuse_read_only(cx, "write_file") {
            return refused;
        }
        let target = match cx.root.open(&self.path, Want::Write) {
            Ok(t) => t,
            Err(e) => return ToolOutput::err(open_message(&self.path, e, "write_file")),
        };
        let created = target.opened.created;
        let shown = cx.root.display(&target.path);
        let mut file = target.opened.into_file();
        let before = (!created).then(|| super::diff::read_before(&mut file));
        let out = match replace_content(&mut file, self.content.as_bytes()) {
            Ok(()) => ToolOutput::ok(format!(
                "{} {shown} ({} bytes)",
                if created { "created" } else { "wrote" },
                self.content.len()
            )),
            Err(e) => ToolOutput::err(io_message(&self.path, &e)),
        };
        super::diff::attach(out, &shown, before.as_ref(), &self.content)
    }
}

/// Replaces the whole content of an opened file in place (its inode, owner and mode stay).
fn replace_content(file: &mut std::fs::File, content: &[u8]) -> std::io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(content)
}

/// Arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFile {
    /// The file, relative to the workspace root.
    path: String,
    /// The exact text to replace (whitespace included).
    old: String,
    /// The text to put in its place.
    new: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    replace_all: Option<bool>,
}

impl Handler for EditFile {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        if let Some(refused) = refuse_read_only(cx, "edit_file") {
            return refused;
        }
        let target = match cx.root.open(&self.path, Want::ReadWrite) {
            Ok(t) => t,
            Err(e) => return ToolOutput::err(open_message(&self.path, e, "edit_file")),
        };
        if self.old.is_empty() {
            return ToolOutput::err("`old` is empty; give the exact text to replace");
        }
        let shown = cx.root.display(&target.path);
        let (mut file, bytes) = match read_text(target, &self.path) {
            Ok(b) => b,
            Err(e) => return ToolOutput::err(e),
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return ToolOutput::err(format!(
                "{} is not UTF-8 text; edit_file changes text files",
                self.path
            ));
        };
        let count = text.matches(self.old.as_str()).count();
        let all = self.replace_all.unwrap_or(false);
        if count == 0 {
            return ToolOutput::err(format!(
                "`old` does not occur in {}; read the file and copy the exact text",
                self.path
            ));
        }
        if count > 1 && !all {
            return ToolOutput::err(format!(
                "`old` occurs {count} times in {}; add surrounding text so it occurs once, or set replace_all",
                self.path
            ));
        }
        let new = text.replace(self.old.as_str(), &self.new);
        let out = match replace_content(&mut file, new.as_bytes()) {
            Ok(()) => ToolOutput::ok(format!(
                "replaced {count} occurrence{} in {shown}",
                if count == 1 { "" } else { "s" },
            )),
            Err(e) => ToolOutput::err(io_message(&self.path, &e)),
        };
        let before = super::diff::Before::Text(text.into_bytes());
        super::diff::attach(out, &shown, Some(&before), &new)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Fixture;
    use serde_json::json;

    #[test]
    fn read_whole_and_by_lines() {
        let f = Fixture::new(crate::config::SandboxMode::ReadOnly);
        f.write("a.txt", "one\ntwo\nthree\n");
        assert_eq!(
            f.call("read_file", json!({"path": "a.txt"})).text,
            "one\ntwo\nthree\n"
        );
        let part = f.call(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 1}),
        );
        assert_eq!(part.text, "two\n[lines 2-2 of 3]");
        let past = f.call("read_file", json!({"path": "a.txt", "offset": 9}));
        assert!(
            past.is_error && past.text.contains("3 lines"),
            "{}",
            past.text
        );
        f.write("bin", "a\0b");
        assert!(f
            .call("read_file", json!({"path": "bin"}))
            .text
            .contains("binary"));
        let dir = f.call("read_file", json!({"path": "."}));
        assert!(dir.is_error && dir.text.contains("directory"));
        let missing = f.call("read_file", json!({"path": "nope"}));
        assert!(missing.is_error && missing.text.contains("no such file"));
    }

    #[test]
    fn list_dir_marks_directories_and_hides_the_repository() {
        let f = Fixture::new(crate::config::SandboxMode::ReadOnly);
        f.write("b.txt", "");
        f.write("src/a.rs", "");
        let out = f.call("list_dir", json!({"path": "."}));
        assert_eq!(out.text, "b.txt\nsrc/");
        assert_eq!(f.call("list_dir", json!({})).text, "b.txt\nsrc/");
        assert!(f.call("list_dir", json!({"path": "b.txt"})).is_error);
    }

    #[test]
    fn write_and_edit() {
        let f = Fixture::new(crate::config::SandboxMode::WorkspaceWrite);
        let out = f.call(
            "write_file",
            json!({"path": "d/n.txt", "content": "x = 1\nx = 1\n"}),
        );
        assert_eq!(out.text, "created d/n.txt (12 bytes)");
        let twice = f.call(
            "edit_file",
            json!({"path": "d/n.txt", "old": "x = 1", "new": "y"}),
        );
        assert!(
            twice.is_error && twice.text.contains("occurs 2 times"),
            "{}",
            twice.text
        );
        let all = f.call(
            "edit_file",
            json!({"path": "d/n.txt", "old": "x = 1", "new": "y", "replace_all": true}),
        );
        assert!(all
            .text
            .starts_with("replaced 2 occurrences in d/n.txt\n--- a/"));
        assert_eq!(f.read("d/n.txt"), "y\ny\n");
        let none = f.call(
            "edit_file",
            json!({"path": "d/n.txt", "old": "zzz", "new": ""}),
        );
        assert!(none.is_error && none.text.contains("does not occur"));
        let bad = f.call("write_file", json!({"path": "d/n.txt"}));
        assert!(
            bad.is_error && bad.text.contains("invalid arguments"),
            "{}",
            bad.text
        );
    }

    #[test]
    fn read_only_agents_cannot_write_even_when_forced() {
        let f = Fixture::new(crate::config::SandboxMode::ReadOnly);
        f.write("a.txt", "a");
        for (tool, args) in [
            ("write_file", json!({"path": "a.txt", "content": "b"})),
            (
                "edit_file",
                json!({"path": "a.txt", "old": "a", "new": "b"}),
            ),
        ] {
            let out = f.call(tool, args);
            assert!(
                out.is_error && out.text.contains("read-only"),
                "{}",
                out.text
            );
        }
        assert_eq!(f.read("a.txt"), "a");
    }

    /// A FIFO (or any special file) is refused at once by every file tool, never opened for
    /// reading or writing: opening one could block the turn for good.
    #[test]
    fn fifos_are_refused_without_blocking() {
        let f = Fixture::new(crate::config::SandboxMode::WorkspaceWrite);
        let dir = f.root.dir().to_path_buf();
        for fifo in ["pipe", "sub/pipe", ".gitignore", "sub/.ignore"] {
            std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
            rustix::fs::mknodat(
                rustix::fs::CWD,
                dir.join(fifo),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_bits_truncate(0o600),
                0,
            )
            .expect("mkfifo");
        }
        f.write("sub/a.txt", "hay\n");
        for (tool, args, says) in [
            (
                "read_file",
                json!({"path": "pipe"}),
                "pipe is a FIFO, not a regular file; read_file reads regular files only",
            ),
            (
                "write_file",
                json!({"path": "pipe", "content": "x"}),
                "pipe is a FIFO, not a regular file; write_file changes regular files only",
            ),
            (
                "edit_file",
                json!({"path": "sub/pipe", "old": "a", "new": "b"}),
                "sub/pipe is a FIFO, not a regular file; edit_file changes regular files only",
            ),
            (
                "list_dir",
                json!({"path": "pipe"}),
                "pipe is a FIFO, not a directory",
            ),
            (
                "grep",
                json!({"pattern": "x", "path": "pipe"}),
                "pipe is a FIFO; grep searches regular files",
            ),
        ] {
            let out = f.call(tool, args);
            assert!(out.is_error, "{tool}: {}", out.text);
            assert_eq!(out.text, says, "{tool}");
        }
        // Walks skip FIFOs, and FIFOs named like ignore files are not read.
        assert_eq!(
            f.call("grep", json!({"pattern": "hay"})).text,
            "sub/a.txt:1:hay"
        );
        assert_eq!(
            f.call("find_files", json!({"pattern": "*"})).text,
            "sub/a.txt"
        );
        assert_eq!(
            f.call("list_dir", json!({"path": "sub"})).text,
            ".ignore\na.txt\npipe"
        );
    }

    /// A command of the agent swaps a directory of the workspace with a symlink to outside
    /// (or to the repository) while the file tools run: no tool reads, lists or writes
    /// anything there.
    #[test]
    fn racing_symlink_swaps_never_lead_a_tool_out_of_the_workspace() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let f = Fixture::new(crate::config::SandboxMode::WorkspaceWrite);
        let ws = f.root.dir().to_path_buf();
        let outside = ws.parent().expect("parent").join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        std::fs::write(outside.join("f.txt"), "SECRET\n").expect("write");
        std::fs::write(outside.join("format"), "SECRET\n").expect("write");
        std::fs::write(outside.join("only-outside.txt"), "SECRET\n").expect("write");
        let repo = f.root.repo().to_path_buf();
        let before = [tree(&outside), tree(&repo)];
        let (mut calls, mut refused) = (0, 0);
        for target in [&outside, &repo] {
            f.write("d/f.txt", "inside\n");
            f.write("d/format", "inside\n");
            std::os::unix::fs::symlink(target, ws.join("s")).expect("symlink");
            let (d, s) = (ws.join("d"), ws.join("s"));
            let stop = AtomicBool::new(false);
            let swaps = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        swaps.fetch_add(1, Ordering::Relaxed);
                        let _ = rustix::fs::renameat_with(
                            rustix::fs::CWD,
                            &d,
                            rustix::fs::CWD,
                            &s,
                            rustix::fs::RenameFlags::EXCHANGE,
                        );
                    }
                });
                while swaps.load(Ordering::Relaxed) < 100 {
                    std::thread::yield_now();
                }
                // A failed check must still stop the racer, or the scope never ends.
                let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    for i in 0..50 {
                        for file in ["d/f.txt", "d/format"] {
                            let out = f.call("read_file", json!({"path": file}));
                            refused += usize::from(out.is_error);
                            assert!(
                                out.is_error || out.text == "inside\n" || out.text == "written",
                                "{file} read elsewhere: {}",
                                out.text
                            );
                        }
                        let out = f.call("list_dir", json!({"path": "d"}));
                        assert!(
                            !out.text.contains("only-outside") && !out.text.contains("HEAD"),
                            "listed elsewhere: {}",
                            out.text
                        );
                        let out = f.call("grep", json!({"pattern": "SECRET|HEAD", "path": "d"}));
                        assert!(
                            out.is_error || out.text.starts_with("no matches"),
                            "grep elsewhere: {}",
                            out.text
                        );
                        let out = f.call("find_files", json!({"pattern": "**/*"}));
                        assert!(
                            !out.text.contains("only-outside") && !out.text.contains("HEAD"),
                            "found elsewhere: {}",
                            out.text
                        );
                        f.call(
                            "write_file",
                            json!({"path": format!("d/w{i}.txt"), "content": "written"}),
                        );
                        f.call(
                            "write_file",
                            json!({"path": "d/format", "content": "written"}),
                        );
                        f.call(
                            "edit_file",
                            json!({"path": "d/f.txt", "old": "inside", "new": "inside"}),
                        );
                        calls += 9;
                    }
                }));
                stop.store(true, Ordering::Relaxed);
                if let Err(panic) = checks {
                    std::panic::resume_unwind(panic);
                }
            });
            std::fs::remove_file(ws.join("s"))
                .or_else(|_| std::fs::remove_file(ws.join("d")))
                .expect("the symlink");
            let _ = std::fs::remove_dir_all(ws.join("d"));
            let _ = std::fs::remove_dir_all(ws.join("s"));
        }
        assert!(calls >= 300);
        // The racer did swap while the tools ran: some reads met a symlink and were refused.
        assert!(refused > 0, "no read ever met a swapped directory");
        assert_eq!(tree(&outside), before[0], "nothing outside was written");
        assert_eq!(
            tree(&repo),
            before[1],
            "nothing in the repository was written"
        );
    }

    /// Every file under `dir` with its content, in path order.
    fn tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let p = e.path();
                if e.file_type().expect("type").is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }
}
