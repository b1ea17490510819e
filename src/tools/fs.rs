//! The file tools: read_file, list_dir, write_file, edit_file.

use std::io::Read;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::registry::Handler;
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
        let path = match cx.root.resolve(&self.path) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        let bytes = match read_text_file(&path, &self.path) {
            Ok(b) => b,
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

fn read_text_file(path: &Path, shown: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| io_message(shown, &e))?;
    if meta.is_dir() {
        return Err(format!("{shown} is a directory; use list_dir"));
    }
    if meta.len() > READ_LIMIT {
        return Err(format!(
            "{shown} is {} bytes, more than read_file reads ({READ_LIMIT}); use grep, or run_command with head/tail",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(READ_LIMIT).read_to_end(&mut bytes))
        .map_err(|e| io_message(shown, &e))?;
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        return Err(format!(
            "{shown} is a binary file ({} bytes); read_file reads text",
            bytes.len()
        ));
    }
    Ok(bytes)
}

fn io_message(shown: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file or directory"),
        _ => format!("{shown}: {e}"),
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
        let path = match cx.root.resolve(shown) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return ToolOutput::err(format!("{shown} is a file; use read_file"))
            }
            Err(e) => return ToolOutput::err(io_message(shown, &e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name() != axocoatl_store::layout::REPO_DIR)
            .map(|e| {
                let mut name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                } else if e.file_type().is_ok_and(|t| t.is_symlink()) {
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
        let path = match cx.root.resolve_for_write(&self.path) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        if path.is_dir() {
            return ToolOutput::err(format!("{} is a directory", self.path));
        }
        let created = !path.exists();
        let before = (!created).then(|| super::diff::read_before(&path));
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &self.content));
        let out = match result {
            Ok(()) => ToolOutput::ok(format!(
                "{} {} ({} bytes)",
                if created { "created" } else { "wrote" },
                cx.root.display(&path),
                self.content.len()
            )),
            Err(e) => ToolOutput::err(io_message(&self.path, &e)),
        };
        let shown = cx.root.display(&path);
        super::diff::attach(out, &shown, before.as_ref(), &self.content)
    }
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
        let path = match cx.root.resolve_for_write(&self.path) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        if self.old.is_empty() {
            return ToolOutput::err("`old` is empty; give the exact text to replace");
        }
        let bytes = match read_text_file(&path, &self.path) {
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
        let out = match std::fs::write(&path, &new) {
            Ok(()) => ToolOutput::ok(format!(
                "replaced {count} occurrence{} in {}",
                if count == 1 { "" } else { "s" },
                cx.root.display(&path)
            )),
            Err(e) => ToolOutput::err(io_message(&self.path, &e)),
        };
        let before = super::diff::Before::Text(text.into_bytes());
        super::diff::attach(out, &cx.root.display(&path), Some(&before), &new)
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
}
