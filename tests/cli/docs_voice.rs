//! The guides speak to users: README.md and docs/*.md say what a user can rely on and how
//! to use it. Source paths, test names, record kind numbers, the source's constants and
//! descriptions of the machine a figure was measured on belong elsewhere: code tours in
//! ARCHITECTURE.md, the format in FORMAT.md, figures in BENCHMARKS.md and bench/runs/.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn guides() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") && !path.ends_with("json.md") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Names of the `const`s of the production source (`LINE_LIMIT`, `FLUSH_BOUND`, …): what
/// they mean for a user is said in words and numbers, not by the constant's name.
fn source_constants() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let re = regex::Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))?\s+)?const\s+([A-Z][A-Z0-9_]+)\s*:")
        .expect("re");
    let mut out = BTreeSet::new();
    let mut stack: Vec<PathBuf> = ["src", "cmd", "store/src", "embed/src"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read");
                out.extend(re.captures_iter(&text).map(|c| c[1].to_owned()));
            }
        }
    }
    out
}

#[test]
fn guides_name_no_source_paths_tests_kind_numbers_or_machines() {
    let rules: [(&str, &str); 5] = [
        (r"\b[\w./-]+\.rs\b", "a source file"),
        (
            r"(?:^|[\s`(])(?:src|cmd|store/src|embed/src|tests|benches)/",
            "a source folder",
        ),
        (
            r"\b[a-z_][a-z0-9_]*::[a-z_][a-z0-9_]*",
            "a test name or Rust path",
        ),
        (r"(?i)\b(?:record )?kinds? \d+", "a record kind number"),
        (
            r"(?i)\b\d+-core\b|\bload (?:average )?(?:near |of )?\d|\bthis (?:project's )?machine\b|\bperf record\b|\bAMD EPYC\b",
            "the machine a figure was measured on",
        ),
    ];
    let rules: Vec<(regex::Regex, &str)> = rules
        .iter()
        .map(|(re, what)| (regex::Regex::new(re).expect("re"), *what))
        .collect();
    let mut constants = source_constants();
    // Names of the kernel's interface that the source spells itself (libc lacks them): a
    // user reads them in the kernel's documentation too.
    constants.remove("CLOSE_RANGE_CLOEXEC");
    assert!(constants.len() > 50, "found {} constants", constants.len());
    let word = regex::Regex::new(r"\b[A-Z][A-Z0-9_]+\b").expect("re");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for file in guides() {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file).expect("read");
        for (n, line) in text.lines().enumerate() {
            for (re, what) in &rules {
                if let Some(m) = re.find(line) {
                    found.push(format!("{rel}:{}: {what}: {}", n + 1, m.as_str().trim()));
                }
            }
            for m in word.find_iter(line) {
                if constants.contains(m.as_str()) && m.as_str().contains('_') {
                    found.push(format!(
                        "{rel}:{}: a source constant: {}",
                        n + 1,
                        m.as_str()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the guides speak to users (code tours go to ARCHITECTURE.md, formats to FORMAT.md, \
         figures to BENCHMARKS.md and bench/runs/):\n{}",
        found.join("\n")
    );
}
