//! find_files and grep, with ripgrep's own crates: the `ignore` walker (honours .gitignore,
//! .ignore and global git excludes, also outside a git repository), `globset`, and
//! `grep-searcher` (binary detection, line numbers) with `grep-regex`.

use std::path::{Path, PathBuf};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{sinks, BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::path::Root;
use super::registry::Handler;
use super::{Context, ToolOutput};

/// Paths find_files lists, and lines grep prints, before it stops with a note.
const MAX_RESULTS: usize = 1000;
/// A matching line is cut to this many characters.
const MAX_LINE: usize = 400;

/// The files under `start` (a file or a directory), skipping ignored files, repositories and
/// `.git`, in path order.
fn walk(root: &Root, start: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ignore::WalkBuilder::new(start)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| !Root::skipped_name(e.file_name()))
        .build()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
        .filter(|p| p.starts_with(root.dir()))
        .collect();
    files.sort_unstable();
    files
}

fn more_note(shown: usize, total: usize, what: &str) -> String {
    format!("\n[{shown} of {total} {what} shown; narrow the search]")
}

/// Arguments of `find_files`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFiles {
    /// A glob matched against workspace-relative paths, e.g. `*.rs`, `src/**/mod.rs`.
    pattern: String,
}

impl Handler for FindFiles {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        let glob = match globset::GlobBuilder::new(&self.pattern)
            .literal_separator(false)
            .build()
        {
            Ok(g) => g.compile_matcher(),
            Err(e) => return ToolOutput::err(format!("invalid glob {:?}: {e}", self.pattern)),
        };
        let root = cx.root;
        let found: Vec<String> = walk(root, root.dir())
            .iter()
            .map(|p| root.display(p))
            .filter(|rel| glob.is_match(rel))
            .collect();
        if found.is_empty() {
            return ToolOutput::ok(format!("no files match {:?}", self.pattern));
        }
        let mut out = found[..found.len().min(MAX_RESULTS)].join("\n");
        if found.len() > MAX_RESULTS {
            out.push_str(&more_note(MAX_RESULTS, found.len(), "files"));
        }
        ToolOutput::ok(out)
    }
}

/// Arguments of `grep`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Grep {
    /// A regular expression (Rust syntax), or the exact text with `literal`.
    pattern: String,
    /// A file or directory to search, relative to the workspace root (default: all of it).
    #[serde(default)]
    path: Option<String>,
    /// Treat `pattern` as exact text, not a regular expression.
    #[serde(default)]
    literal: Option<bool>,
    /// Match regardless of case.
    #[serde(default)]
    ignore_case: Option<bool>,
}

impl Handler for Grep {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        let matcher = match RegexMatcherBuilder::new()
            .case_insensitive(self.ignore_case.unwrap_or(false))
            .fixed_strings(self.literal.unwrap_or(false))
            .build(&self.pattern)
        {
            Ok(m) => m,
            Err(e) => {
                return ToolOutput::err(format!(
                    "invalid regular expression {:?}: {e}; set literal to search for exact text",
                    self.pattern
                ))
            }
        };
        let root = cx.root;
        let start = match root.resolve(self.path.as_deref().unwrap_or(".")) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        if !start.exists() {
            return ToolOutput::err(format!(
                "{}: no such file or directory",
                self.path.as_deref().unwrap_or(".")
            ));
        }
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut lines = Vec::new();
        let mut total = 0usize;
        for file in walk(root, &start) {
            let rel = root.display(&file);
            let _ = searcher.search_path(
                &matcher,
                &file,
                sinks::Lossy(|n, line| {
                    total += 1;
                    if lines.len() < MAX_RESULTS {
                        let line = line.trim_end_matches(['\n', '\r']);
                        let cut: String = line.chars().take(MAX_LINE).collect();
                        let more = if cut.len() < line.len() { "…" } else { "" };
                        lines.push(format!("{rel}:{n}:{cut}{more}"));
                    }
                    Ok(true)
                }),
            );
        }
        if lines.is_empty() {
            return ToolOutput::ok(format!("no matches for {:?}", self.pattern));
        }
        let mut out = lines.join("\n");
        if total > lines.len() {
            out.push_str(&more_note(lines.len(), total, "matching lines"));
        }
        ToolOutput::ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Fixture;
    use crate::config::SandboxMode;
    use serde_json::json;

    #[test]
    fn find_files_honours_gitignore_and_skips_the_repository() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        f.write(".gitignore", "target/\n*.log\n");
        f.write("src/main.rs", "");
        f.write("src/lib/mod.rs", "");
        f.write("target/x.rs", "");
        f.write("a.log", "");
        f.write(".axocoatl/y.rs", "");
        let out = f.call("find_files", json!({"pattern": "*.rs"}));
        assert_eq!(out.text, "src/lib/mod.rs\nsrc/main.rs");
        let out = f.call("find_files", json!({"pattern": "src/*/mod.rs"}));
        assert_eq!(out.text, "src/lib/mod.rs");
        let none = f.call("find_files", json!({"pattern": "*.py"}));
        assert!(!none.is_error && none.text.starts_with("no files match"));
        assert!(f.call("find_files", json!({"pattern": "a[" })).is_error);
    }

    #[test]
    fn grep_prints_path_line_text() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        f.write("a.txt", "alpha\nBeta\ngamma beta\n");
        f.write("sub/b.txt", "beta.\n");
        f.write("bin.dat", "beta\0binary");
        let out = f.call("grep", json!({"pattern": "beta"}));
        assert_eq!(out.text, "a.txt:3:gamma beta\nsub/b.txt:1:beta.");
        let out = f.call(
            "grep",
            json!({"pattern": "BETA", "ignore_case": true, "path": "a.txt"}),
        );
        assert_eq!(out.text, "a.txt:2:Beta\na.txt:3:gamma beta");
        let out = f.call("grep", json!({"pattern": "beta.", "literal": true}));
        assert_eq!(out.text, "sub/b.txt:1:beta.");
        assert!(f.call("grep", json!({"pattern": "("})).is_error);
        assert!(
            f.call("grep", json!({"pattern": "x", "path": "../"}))
                .is_error
        );
    }
}
