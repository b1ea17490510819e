//! The layers, checked from the source: the modules of `src/` and of the store's
//! `store/src/` depend on each other in one direction only (no import circles), the
//! store's ledger knows nothing of the indexes and searches built over it, the runtime
//! never parses command lines or prints, and what a turn's records mean is read in one
//! place (the fold).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The production source folders of the workspace: the runtime (`src`), the command line
/// (`cmd`) and the `src` of every other member of Cargo.toml's `[workspace]`, so a new
/// crate is under every rule the day it is added.
fn production_dirs() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = regex::Regex::new(r"(?s)members\s*=\s*\[(.*?)\]").expect("re");
    let list = members.captures(&manifest).expect("a members list")[1].to_owned();
    let mut dirs = vec!["src".to_owned(), "cmd".to_owned()];
    for m in list.split(',').map(|m| m.trim().trim_matches('"')) {
        if !m.is_empty() && m != "." {
            dirs.push(format!("{m}/src"));
        }
    }
    assert!(dirs.len() >= 4, "workspace members: {dirs:?}");
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !is_test_file(&path) {
            out.push(path);
        }
    }
}

/// A file of tests only (`tests.rs`, `walk_tests.rs`: declared `#[cfg(test)]`), which may
/// reach anywhere.
fn is_test_file(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|s| s == "tests" || s.to_string_lossy().ends_with("_tests"))
}

/// The code of a file: without comment lines (docs may name any module) and without its
/// `#[cfg(test)]` tail (tests may reach anywhere).
fn non_test_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    // The test module a file ends with: `#[cfg(test)]` before an inline `mod … {`. Other
    // `#[cfg(test)]` items (a test-only field or function) are read like the rest, and so
    // is everything after them.
    let tail = regex::Regex::new(
        r"(?m)^#\[cfg\(test\)\]\s*\n(?:pub(?:\([a-z]+\))?\s+)?mod\s+[a-z_0-9]+\s*\{",
    )
    .expect("re");
    let code = match tail.find(&text) {
        Some(m) => &text[..m.start()],
        None => &text,
    };
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Top-level module of `src/` → the top-level modules it names through `crate::`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let re = regex::Regex::new(r"crate::([a-z_]+)").expect("re");
    let tests = test_modules(&files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let rel = file.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" || module == "main" {
            continue;
        }
        let deps = graph.entry(module.clone()).or_default();
        for c in re.captures_iter(&non_test_source(file)) {
            if c[1] != *module {
                deps.insert(c[1].to_owned());
            }
        }
    }
    graph
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

/// No crate of the workspace has an import circle between its top-level modules.
#[test]
fn no_crate_has_import_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in production_dirs() {
        let graph = module_graph(&root.join(&dir));
        assert!(graph.len() > 3, "found the modules of {dir}: {graph:?}");
        for module in graph.keys() {
            if let Some(cycle) = cycle_from(&graph, module) {
                panic!("import circle in {dir}/: {}", cycle.join(" -> "));
            }
        }
    }
}

/// The module path of a file under a crate's source folder: `config/validate.rs` is
/// `config::validate`, `config/mod.rs` is `config`, `lib.rs` is the crate.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Every module path a file names through `crate::` or `super::` (groups `{a, b}` give one
/// path per item, each cut at its first segment inside the group), made absolute.
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let start = regex::Regex::new(r"\b(crate|(?:super::)*super)::").expect("re");
    let ident = regex::Regex::new(r"^[a-z_][a-z_0-9]*").expect("re");
    let mut out = Vec::new();
    for m in start.find_iter(code) {
        let text = m.as_str();
        let mut base: Vec<String> = if text.starts_with("crate") {
            Vec::new()
        } else {
            let ups = text.matches("super").count();
            me[..me.len().saturating_sub(ups)].to_vec()
        };
        let mut rest = &code[m.end()..];
        loop {
            if let Some(group) = rest.strip_prefix('{') {
                let body = &group[..group.find('}').unwrap_or(group.len())];
                for item in body.split(',') {
                    if let Some(id) = ident.find(item.trim()) {
                        let mut path = base.clone();
                        path.push(id.as_str().to_owned());
                        out.push(path);
                    }
                }
                break;
            }
            let Some(id) = ident.find(rest) else {
                out.push(base);
                break;
            };
            base.push(id.as_str().to_owned());
            rest = &rest[id.end()..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => {
                    out.push(base);
                    break;
                }
            }
        }
    }
    out
}

/// Within every module folder of every crate (`src/config/`, `src/serve/`, …), the modules
/// beside each other depend in one direction only, as the top-level modules do.
#[test]
fn no_module_folder_has_import_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut folders = 0;
    let mut circles = BTreeSet::new();
    for dir in production_dirs() {
        let src = root.join(&dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        // Folder (as a module path) -> child -> the children it names.
        let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for file in &files {
            let me = module_path(&src, file);
            let code = non_test_source(file);
            for target in named_paths(&code, &me) {
                // Every folder above this file that the target is also under.
                for depth in 0..me.len() {
                    let folder = &me[..depth];
                    if target.len() > depth && target[..depth] == *folder {
                        let (from, to) = (&me[depth], &target[depth]);
                        if from != to {
                            graphs
                                .entry(folder.to_vec())
                                .or_default()
                                .entry(from.clone())
                                .or_default()
                                .insert(to.clone());
                        }
                    }
                }
            }
        }
        for (folder, graph) in graphs.iter().filter(|(f, _)| !f.is_empty()) {
            folders += 1;
            for module in graph.keys() {
                if let Some(cycle) = cycle_from(graph, module) {
                    circles.insert(format!(
                        "{dir}/{}/: {}",
                        folder.join("/"),
                        cycle.join(" -> ")
                    ));
                }
            }
        }
    }
    assert!(folders > 10, "found {folders} module folders");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The ledger is the log (segments, frames, records, the walk); the indexes (`index/`) and
/// the searches (`search/`) are built over it and it names neither, as a journal knows
/// nothing of the trees kept beside it.
#[test]
fn the_ledger_imports_nothing_of_the_index_or_the_search() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("store/src");
    let graph = module_graph(&src);
    let ledger = graph.get("ledger").expect("store/src/ledger");
    for room in ["index", "search"] {
        assert!(
            graph.contains_key(room),
            "store/src/{room} exists: {graph:?}"
        );
        assert!(
            !ledger.contains(room),
            "store/src/ledger imports crate::{room}: the ledger knows nothing of what is built over it"
        );
    }
    let index = graph.get("index").expect("store/src/index");
    assert!(
        !index.contains("search"),
        "store/src/index imports crate::search: searches are built over the indexes"
    );
}

#[test]
fn the_runtime_never_parses_command_lines_or_prints() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for file in files {
        let text = non_test_source(&file);
        for word in ["clap::", "println!", "eprintln!", "print!(", "eprint!("] {
            assert!(
                !text.contains(word),
                "{} uses {word}: the runtime never parses command lines or prints (cmd/ does)",
                file.display()
            );
        }
    }
}

/// Files of modules declared `#[cfg(test)] mod name;` in `dir`'s `mod.rs` or `lib.rs`.
fn test_modules(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let re =
        regex::Regex::new(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([a-z_0-9]+)\s*;")
            .expect("re");
    let mut out = BTreeSet::new();
    for file in files {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let dir = match name {
            "mod.rs" | "lib.rs" | "main.rs" => file.parent().expect("dir").to_owned(),
            _ => file.with_extension(""),
        };
        let text = std::fs::read_to_string(file).expect("read");
        for c in re.captures_iter(&text) {
            out.insert(dir.join(format!("{}.rs", &c[1])));
            out.insert(dir.join(&c[1]).join("mod.rs"));
        }
    }
    // A test module's own modules (`tests/model.rs` beside `tests.rs`) are tests too.
    let dirs: Vec<PathBuf> = out.iter().map(|f| f.with_extension("")).collect();
    for file in files {
        if dirs.iter().any(|d| file.starts_with(d)) {
            out.insert(file.clone());
        }
    }
    out
}

/// Every file name under `.axocoatl/` is spelled in `store/src/layout.rs`: the runtime and
/// the command line join the repository's path with its constants and functions, never
/// with names of their own.
#[test]
fn repository_file_names_are_spelled_only_in_the_layout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layout = std::fs::read_to_string(root.join("store/src/layout.rs")).expect("layout.rs");
    let constant = regex::Regex::new(r#"pub const [A-Z_]+: &str = "([^"]+)";"#).expect("re");
    // Names specific enough to be found as they are: paths and names with a dot (but
    // `.gitignore`, which the file tools read in workspaces too).
    let names: BTreeSet<String> = constant
        .captures_iter(&layout)
        .map(|c| c[1].to_owned())
        .filter(|n| (n.contains('/') || n.contains('.')) && n != ".gitignore")
        .collect();
    assert!(names.contains("run/serve.sock"), "{names:?}");
    let literal = regex::Regex::new(r#""((?:[^"\\]|\\.)*)""#).expect("re");
    let char_literal = regex::Regex::new(r#"'(?:\\.|[^'\\])'"#).expect("re");
    let mut files = Vec::new();
    for dir in production_dirs() {
        rust_files(&root.join(dir), &mut files);
    }
    let tests = test_modules(&files);
    let mut spelled = Vec::new();
    let layout_file = root.join("store/src/layout.rs");
    for file in files
        .iter()
        .filter(|f| !tests.contains(*f) && **f != layout_file)
    {
        // Character literals first (`'"'` would pair the quotes around it wrongly).
        let code = char_literal
            .replace_all(&non_test_source(file), "' '")
            .into_owned();
        for c in literal.captures_iter(&code) {
            let s = &c[1];
            if names.contains(s) || s.starts_with("run/") || s.contains("/.axocoatl/") {
                spelled.push(format!(
                    "{}: {s:?}",
                    file.strip_prefix(root).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "file names of the repository spelled outside store/src/layout.rs (add a constant there):\n{}",
        spelled.join("\n")
    );
}

/// Release code reads no test-only environment variable: tests pause or break the binary
/// through the store's failpoints, which only the test build has (the `failpoints`
/// feature).
#[test]
fn release_code_reads_no_test_environment_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in production_dirs() {
        rust_files(&root.join(dir), &mut files);
    }
    for file in &files {
        assert!(
            !non_test_source(file).contains("AXOCOATL_TEST_"),
            "{} names an AXOCOATL_TEST_ variable: make it a failpoint (store/src/failpoint.rs)",
            file.display()
        );
    }
}

/// `text` with the contents of comments, string literals and character literals blanked
/// (newlines kept), so that braces and `fn` are only found in code.
fn blank_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if let Some(body) = rest.strip_prefix("/*") {
            let end = body.find("*/").map_or(b.len(), |n| i + 2 + n + 2);
            blank(&mut out, i, end);
            i = end;
        } else if !ident_before
            && (rest.starts_with("r#") || rest.starts_with("r\"") || rest.starts_with("br"))
        {
            let start = rest.find('r').map_or(0, |n| n + 1);
            let hashes = rest[start..].bytes().take_while(|&c| c == b'#').count();
            if rest.as_bytes().get(start + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let body = start + hashes + 1;
            let end = rest[body..]
                .find(&close)
                .map_or(b.len(), |n| i + body + n + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            let end = if b.get(i + 1) == Some(&b'\\') {
                rest[2..].find('\'').map(|n| i + 2 + n + 1)
            } else {
                rest.chars()
                    .nth(1)
                    .filter(|_| rest.chars().nth(2) == Some('\''))
                    .map(|c| i + 1 + c.len_utf8() + 1)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The functions of `file` outside its `#[cfg(test)]` tail: (lines, first line, name).
fn function_lengths(file: &Path) -> Vec<(usize, usize, String)> {
    let text = std::fs::read_to_string(file).expect("read");
    let code = blank_literals(match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text,
    });
    let head = regex::Regex::new(
        r"(?m)^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern)\s+)*fn\s+([A-Za-z_0-9]+)",
    )
    .expect("re");
    let mut out = Vec::new();
    for c in head.captures_iter(&code) {
        let start = c.get(0).expect("match").start();
        let mut depth = 0usize;
        let mut end = None;
        for (k, ch) in code[start..].char_indices() {
            match ch {
                ';' if depth == 0 => break,
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(start + k);
                        break;
                    }
                }
                _ => {}
            }
        }
        if let Some(end) = end {
            let first = code[..start].matches('\n').count() + 1;
            let last = code[..end].matches('\n').count() + 1;
            out.push((last - first + 1, first, c[1].to_owned()));
        }
    }
    out
}

/// No production function is over [`MAX_FN_LINES`] lines, signature and closing brace
/// included: a long function is split into named steps. Tests are left out (`#[cfg(test)]`
/// tails and test modules).
const MAX_FN_LINES: usize = 100;

/// Shown with `-- --nocapture`: how far the longest function is from the limit.
#[expect(
    clippy::print_stdout,
    reason = "the longest function is the test's record"
)]
fn report_longest(what: &str, place: &str) {
    println!("longest production {what}: {place}");
}

/// Production files of every crate: test files and test modules left out.
fn production_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in production_dirs() {
        rust_files(&root.join(dir), &mut files);
    }
    let tests = test_modules(&files);
    files.retain(|f| !tests.contains(f));
    files
}

#[test]
fn no_production_function_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut longest = (0, String::new());
    for file in production_files() {
        for (lines, line, name) in function_lengths(&file) {
            let rel = file.strip_prefix(root).unwrap_or(&file);
            let place = format!("{}:{line} {name}: {lines} lines", rel.display());
            if lines > MAX_FN_LINES {
                long.push(place.clone());
            }
            if lines > longest.0 {
                longest = (lines, place);
            }
        }
    }
    report_longest("function", &longest.1);
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

/// No production file is over [`MAX_FILE_LINES`] lines, its inline test module included
/// (a file's tests past that go to a `*_tests.rs` file of their own): a long file is split
/// into modules that each say what they own.
const MAX_FILE_LINES: usize = 1_000;

#[test]
fn no_production_file_is_over_1000_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    let mut largest = (0, String::new());
    for file in production_files() {
        let lines = std::fs::read_to_string(&file)
            .expect("read")
            .lines()
            .count();
        let rel = file.strip_prefix(root).unwrap_or(&file);
        let place = format!("{}: {lines} lines", rel.display());
        if lines > MAX_FILE_LINES {
            long.push(place.clone());
        }
        if lines > largest.0 {
            largest = (lines, place);
        }
    }
    report_longest("file", &largest.1);
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them into modules):\n{}",
        long.join("\n")
    );
}

/// The advice the runtime attaches to an error is a fact (`axocoatl::error::Next`): only
/// the command line (cmd/hints.rs) words it with the verbs a person types, so MCP clients
/// and serve's socket get no command line they cannot run.
#[test]
fn the_runtime_gives_advice_without_command_line_verbs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let error = non_test_source(&src.join("error.rs"));
    assert!(
        !error.contains("`axocoatl "),
        "src/error.rs names a command: say what would help as a `Next` and word it in cmd/hints.rs"
    );
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let start = regex::Regex::new(r"hint:|Next::say\(").expect("re");
    for file in files {
        let text = non_test_source(&file);
        for m in start.find_iter(&text) {
            // The advice runs to the first line that ends its field or call.
            let rest = &text[m.start()..];
            let end = rest
                .match_indices('\n')
                .map(|(i, _)| i)
                .find(|&i| rest[..i].trim_end().ends_with(','))
                .unwrap_or(rest.len());
            let advice = &rest[..end];
            assert!(
                !advice.contains("`axocoatl "),
                "{} gives advice naming a command: {advice}\nsay it as a `Next` and word it in cmd/hints.rs",
                file.display()
            );
        }
    }
}

/// Usage is attributed once, where the indexes are built (`store/src/index/build.rs`
/// moves a worker's usage out of its coordinator's row, exactly): no other production code
/// subtracts from a usage's tokens or calls, so no reader corrects (and hides) what the
/// rows say.
#[test]
fn only_the_index_builder_subtracts_usage() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let owner = root.join("store/src/index/build.rs");
    let mut files = Vec::new();
    for dir in production_dirs() {
        rust_files(&root.join(dir), &mut files);
    }
    let tests = test_modules(&files);
    let sub = regex::Regex::new(
        r"\.(prompt_tokens|completion_tokens|calls)\s*(-=|\.(saturating_sub|checked_sub|wrapping_sub|overflowing_sub)\b|-[^>=])",
    )
    .expect("re");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !tests.contains(*f) && **f != owner) {
        let code = blank_literals(&non_test_source(file));
        for m in sub.find_iter(&code) {
            let rel = file.strip_prefix(root).unwrap_or(file);
            found.push(format!("{}: {}", rel.display(), m.as_str()));
        }
    }
    assert!(
        found.is_empty(),
        "usage subtracted outside store/src/index/build.rs (attribute it there):\n{}",
        found.join("\n")
    );
    let builder = blank_literals(&std::fs::read_to_string(&owner).expect("build.rs"));
    assert!(sub.is_match(&builder), "the builder's attribution is found");
}

/// Projections are made in one place: `Projection::of` (a scope and what to keep), or
/// `Projection::from_walked`/`from_entries` for records a caller walked itself (a search
/// of `src/search.rs` is one); no other public function returns a projection, so no entry
/// point of its own grows beside them.
#[test]
fn projections_are_made_by_projection_of() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "cmd"] {
        rust_files(&root.join(dir), &mut files);
    }
    let tests = test_modules(&files);
    let signature = regex::Regex::new(
        r"pub(?:\([a-z]+\))?\s+fn\s+([a-z_0-9]+)\s*(?:<[^>]*>)?\(([^{;]*?)\)\s*->\s*([^{;]*)",
    )
    .expect("re");
    let projection = regex::Regex::new(r"\bProjection\b").expect("re");
    let allowed = [
        ("src/history.rs", "of"),
        ("src/history.rs", "from_walked"),
        ("src/history.rs", "from_entries"),
        ("src/search.rs", "search"),
        ("src/search.rs", "search_with"),
    ];
    let mut makers = BTreeSet::new();
    let mut others = Vec::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let rel = file.strip_prefix(root).unwrap_or(file);
        let rel = rel.to_string_lossy().replace('\\', "/");
        let code = blank_literals(&non_test_source(file));
        for c in signature.captures_iter(&code) {
            if !projection.is_match(&c[3]) {
                continue;
            }
            let at = (rel.as_str(), &c[1]);
            if allowed.contains(&at) {
                makers.insert(format!("{}:{}", at.0, at.1));
            } else {
                others.push(format!("{rel}: fn {}", &c[1]));
            }
        }
    }
    assert!(
        others.is_empty(),
        "public functions returning a Projection besides Projection::of (give them a Scope or a Want):\n{}",
        others.join("\n")
    );
    assert_eq!(makers.len(), allowed.len(), "{makers:?}");
}

/// The record kinds of the ledger (`records!` in `store/src/ledger/record.rs`): each name,
/// and whether its records name a turn.
fn record_kinds(root: &Path) -> Vec<(String, bool)> {
    let table =
        std::fs::read_to_string(root.join("store/src/ledger/record.rs")).expect("record.rs");
    let row = regex::Regex::new(r"(?m)^\s*\d+ => ([A-Z][A-Za-z]*) \[([^\]]*)\],").expect("re");
    row.captures_iter(&table)
        .map(|c| (c[1].to_owned(), c[2].contains("Turn")))
        .collect()
}

/// The kinds of `Record` that `code` matches on (as a pattern, not as a value it builds).
fn matched_kinds(code: &str) -> BTreeSet<String> {
    let wildcard = regex::Regex::new(r"Record::([A-Z]\w*)\s*\(\s*(?:_|\.\.)\s*\)").expect("re");
    let binding = regex::Regex::new(
        r"Record::([A-Z]\w*)\s*\(\s*(?:ref\s+|mut\s+)?[a-z_][a-z0-9_]*\s*\)[\s)]*(?:=>|\||\bif\b|=[^=>])",
    )
    .expect("re");
    wildcard
        .captures_iter(code)
        .chain(binding.captures_iter(code))
        .map(|c| c[1].to_owned())
        .collect()
}

/// A turn's records are read in one place: the fold (`src/fold/`) decides what each kind
/// means for a turn, and history, the exports and the traces take the turns it folds. Its
/// one match names every kind of record, with no catch-all arm, so a kind added to the
/// ledger does not compile until the fold decides; and no other production code matches
/// the kinds of a turn's records but the few that ask one fact of a turn's life and fold
/// nothing, each named here with why.
#[test]
fn only_the_fold_reads_what_a_turn_s_records_mean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kinds = record_kinds(root);
    assert!(kinds.len() > 20, "found the record kinds: {kinds:?}");
    let fold = root.join("src/fold/records.rs");
    let code = blank_literals(&non_test_source(&fold));
    let named = matched_kinds(&code);
    let missing: Vec<&str> = kinds
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !named.contains(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "src/fold/records.rs does not decide what these kinds mean for a turn: {missing:?}"
    );
    assert!(
        !regex::Regex::new(r"\b_\s*=>").expect("re").is_match(&code),
        "src/fold/records.rs has a catch-all arm: name each kind instead"
    );

    let turn_kinds: BTreeSet<String> = kinds
        .iter()
        .filter(|(_, of_turn)| *of_turn)
        .map(|(k, _)| k.clone())
        .collect();
    // (file, the turn kinds it may match, why it is no fold)
    let allowed: [(&str, &[&str], &str); 8] = [
        (
            "src/relations.rs",
            &["AttachmentConsumed", "TurnBegun"],
            "attachment state, the session projection's: what a turn pinned and consumed",
        ),
        (
            "src/session.rs",
            &["TurnBegun", "TurnEnded"],
            "whether a turn is still open, under the append lock",
        ),
        (
            "src/control.rs",
            &["TurnEnded"],
            "waits for a turn's terminal record",
        ),
        (
            "src/follow.rs",
            &["TurnEnded"],
            "waits for the followed turn's terminal record",
        ),
        (
            "src/engine/watcher.rs",
            &["StopRequested"],
            "the running turn's stop probe",
        ),
        (
            "src/automation/runner.rs",
            &["TurnEnded", "TurnOrigin"],
            "the turn an automation occurrence started, and whether it ended",
        ),
        (
            "src/legacy/turns.rs",
            &[
                "AgentOutput",
                "AgentOutputBounded",
                "ModelCall",
                "ToolResult",
                "ToolStarted",
                "TurnBegun",
            ],
            "the records an import is about to write, not the ledger's",
        ),
        (
            "src/export/sqlite/apply/events.rs",
            &["*"],
            "the export's events table: one row per record, record by record",
        ),
    ];
    let mut files = Vec::new();
    for dir in ["src", "cmd"] {
        rust_files(&root.join(dir), &mut files);
    }
    let tests = test_modules(&files);
    let mut found = Vec::new();
    let mut used = BTreeSet::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let rel = file.strip_prefix(root).unwrap_or(file);
        let rel = rel.to_string_lossy().replace('\\', "/");
        if rel.starts_with("src/fold/") {
            continue;
        }
        let code = blank_literals(&non_test_source(file));
        let allow = allowed.iter().find(|(f, _, _)| *f == rel);
        for kind in matched_kinds(&code).intersection(&turn_kinds) {
            match allow {
                Some((_, ok, _)) if ok.contains(&"*") || ok.contains(&kind.as_str()) => {
                    used.insert(rel.clone());
                }
                _ => found.push(format!("{rel}: Record::{kind}")),
            }
        }
    }
    assert!(
        found.is_empty(),
        "the kinds of a turn's records matched outside src/fold/ (fold the turn with crate::fold and read the TurnView):\n{}",
        found.join("\n")
    );
    let stale: Vec<&str> = allowed
        .iter()
        .map(|(f, _, _)| *f)
        .filter(|f| !used.contains(*f))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed but matching no turn kind any more: {stale:?}"
    );
}

/// The ledger's three rooms are three types: the `Ledger` appends and walks, the index
/// `Reader` answers reads each from a `Plan` of the segments, and the `Searcher`
/// (`store/src/search/`) searches. The reader does not deref to the ledger and the searcher
/// adds no methods to the reader, so `repo.ledger().x()` is an append or a walk,
/// `repo.reader().x()` an index read and `repo.searcher().x()` a search.
#[test]
fn the_ledger_the_reader_and_the_searcher_are_three_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("store/src"), &mut files);
    let tests = test_modules(&files);
    let deref = regex::Regex::new(
        r"\bimpl\b[^{;]*\b(Deref|DerefMut|AsRef<[^>]*>|Borrow<[^>]*>)\s+for\s+Reader\b",
    )
    .expect("re");
    let methods = regex::Regex::new(r"\bimpl\b[^{;]*\bReader\s*\{").expect("re");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let code = blank_literals(&non_test_source(file));
        if deref.is_match(&code) {
            found.push(format!("{rel}: the Reader derefs to (or lends itself as) another type: call reader.ledger() for appends and walks"));
        }
        if methods.is_match(&code) && !rel.starts_with("store/src/index/") {
            found.push(format!("{rel}: adds methods to the Reader outside store/src/index/ (searches go on search::Searcher)"));
        }
    }
    let plan = non_test_source(&root.join("store/src/index/plan.rs"));
    if !regex::Regex::new(r"pub fn plan\(&self\) -> Result<Plan>")
        .expect("re")
        .is_match(&plan)
    {
        found.push("store/src/index/plan.rs: Reader::plan does not return a Plan value".into());
    }
    let repo = non_test_source(&root.join("store/src/repo.rs"));
    for signature in [
        "pub fn ledger(&self) -> &Ledger",
        "pub fn reader(&self) -> &Reader",
        "pub fn searcher(&self) -> Searcher<'_>",
    ] {
        if !repo.contains(signature) {
            found.push(format!("store/src/repo.rs: no `{signature}`"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
