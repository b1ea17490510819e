//! find_files and grep, with ripgrep's own crates: the `ignore` matchers (`.gitignore`,
//! `.ignore` and global git excludes, also outside a git repository) in a walk by
//! descriptors (`walk.rs`), `globset`, and `grep-searcher` (binary detection, line numbers)
//! with `grep-regex`.

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{sinks, BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::beneath::{self, Want};
use super::handler::Handler;
use super::path::OpenError;
use super::{walk, Context, ToolOutput};

/// Paths find_files lists, and lines grep prints, before it stops with a note.
const MAX_RESULTS: usize = 1000;
/// A matching line is cut to this many characters.
const MAX_LINE: usize = 400;

/// Why a walk from `shown` did not start.
fn walk_message(cx: &Context<'_>, shown: &str, e: beneath::Refusal) -> String {
    match cx.root.refusal(shown, e) {
        OpenError::Refused(why) => why,
        OpenError::NotFound => format!("{shown}: no such file or directory"),
        OpenError::Special(what) => format!("{shown} is {what}; grep searches regular files"),
        OpenError::IsDir | OpenError::NotDir => format!("{shown}: not a file or directory"),
        OpenError::Io(e) => format!("{shown}: {e}"),
    }
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
        let mut found: Vec<String> = Vec::new();
        let walked = walk::files(root, root.dir(), &mut |rel, _, _| {
            let rel = rel.to_string_lossy();
            if glob.is_match(rel.as_ref()) {
                found.push(rel.into_owned());
            }
        });
        if let Err(e) = walked {
            return ToolOutput::err(walk_message(cx, ".", e));
        }
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
        let shown = self.path.as_deref().unwrap_or(".");
        let start = match root.resolve(shown) {
            Ok(p) => p,
            Err(e) => return ToolOutput::err(e),
        };
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut lines = Vec::new();
        let mut total = 0usize;
        let walked = walk::files(root, &start, &mut |rel, dir, name| {
            // Opened like read_file opens: never through a symlink, never a FIFO.
            let Ok(file) = beneath::open_last(dir, name, Want::Read) else {
                return;
            };
            let rel = rel.display();
            let _ = searcher.search_file(
                &matcher,
                &file.into_file(),
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
        });
        if let Err(e) = walked {
            return ToolOutput::err(walk_message(cx, shown, e));
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

    /// The walk by descriptors honours what ripgrep's walker honoured: ignore files of the
    /// directories walked and of those above the start, `.ignore` before `.gitignore`, and
    /// `.git/info/exclude`; it never follows a symlink, even to a directory inside.
    #[test]
    fn ignore_files_apply_as_ripgrep_applies_them() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        f.write(".gitignore", "*.log\nbuild/\n");
        f.write(".ignore", "!keep.log\n");
        f.write(".git/info/exclude", "secret.txt\n");
        f.write("src/.gitignore", "gen.rs\n");
        for file in [
            "a.log",
            "keep.log",
            "secret.txt",
            "build/x.rs",
            "src/build/y.rs",
            "src/gen.rs",
            "src/lib.rs",
            "src/deep/gen.rs",
            "other/gen.rs",
        ] {
            f.write(file, "needle\n");
        }
        std::os::unix::fs::symlink("src", f.root.dir().join("link")).expect("symlink");
        let out = f.call("find_files", json!({"pattern": "*"}));
        assert_eq!(
            out.text,
            ".gitignore\n.ignore\nkeep.log\nother/gen.rs\nsrc/.gitignore\nsrc/lib.rs"
        );
        let out = f.call("grep", json!({"pattern": "needle", "path": "src"}));
        assert_eq!(out.text, "src/lib.rs:1:needle");
        // A file named explicitly is searched whatever the ignore files say.
        let out = f.call("grep", json!({"pattern": "needle", "path": "src/gen.rs"}));
        assert_eq!(out.text, "src/gen.rs:1:needle");
        // A symlink named explicitly is resolved inside the workspace, as read_file does.
        let out = f.call("grep", json!({"pattern": "needle", "path": "link/lib.rs"}));
        assert_eq!(out.text, "src/lib.rs:1:needle");
        let out = f.call("grep", json!({"pattern": "x", "path": "nope"}));
        assert_eq!(out.text, "nope: no such file or directory");
    }
}
