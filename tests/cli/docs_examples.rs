//! Every example of the documentation runs: the shell blocks (```sh) and configurations
//! (```yaml) of README.md, ARCHITECTURE.md, FORMAT.md, BENCHMARKS.md and docs/*.md.
//!
//! A page is followed as a reader would, top to bottom, in a directory of its own: README.md
//! in an empty one (its tour starts with `axocoatl init`), every other page in a fresh
//! repository (`axocoatl init` done, so the starter configuration and its offline `local`
//! model). A ```yaml block becomes the page's `axocoatl.yaml` and must pass `axocoatl
//! validate`; a ```sh block runs with `sh -eu` and must exit 0, every command of it. An HTML
//! comment on the line before a block changes that:
//!
//! - `<!-- not run: REASON -->`: the block is listed with its reason and not run (it needs a
//!   server, a network, another program, or it is what this test suite itself runs); the
//!   agents and automations its commands name must still be defined by the page's
//!   configuration at that point (`-a coder` on a page that never defines `coder` fails);
//! - `<!-- file: NAME -->`: the block is written to NAME in the page's directory (a script
//!   of the `script` provider, a tool's input), not validated.
//!
//! The test prints every example it ran, checked or skipped (`cargo test --test cli
//! docs_examples -- --nocapture`), and fails on the first page whose example fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One fenced block of a page.
#[derive(Debug)]
struct Block {
    line: usize,
    lang: String,
    text: String,
    /// `not run: …` or `file: …`, from the comment before the fence.
    directive: Option<String>,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = page.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let directive = i
            .checked_sub(1)
            .map(|p| lines[p].trim())
            .and_then(|l| l.strip_prefix("<!--"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(|l| l.trim().to_owned());
        let start = i;
        let mut text = String::new();
        i += 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            text.push_str(lines[i]);
            text.push('\n');
            i += 1;
        }
        out.push(Block {
            line: start + 1,
            lang: info.trim().to_owned(),
            text,
            directive,
        });
        i += 1;
    }
    out
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "FORMAT.md", "BENCHMARKS.md"]
        .iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_file())
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The environment a reader's shell has: the binary on PATH, their model cache, a home of
/// the page's own.
fn command(dir: &Path, home: &Path, bin_dir: &Path) -> Command {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME is set");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("timeout");
    c.arg("600")
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("XDG_CACHE_HOME", cache)
        .env("NO_COLOR", "1")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null());
    for k in ["AXOCOATL_MODEL", "AXOCOATL_EMBED_DIR"] {
        if let Some(v) = std::env::var_os(k) {
            c.env(k, v);
        }
    }
    c
}

/// What happened to one example, for the listing.
struct Listed {
    place: String,
    what: String,
    /// Ran (a shell block) or checked (a configuration), as opposed to skipped or written.
    ran: bool,
}

fn first_line(text: &str) -> String {
    let l = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let n = text.lines().filter(|l| !l.trim().is_empty()).count();
    let l: String = l.chars().take(70).collect();
    if n > 1 {
        format!("{l} (+{} lines)", n - 1)
    } else {
        l
    }
}

#[test]
fn every_example_of_the_documentation_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = pages(root);
    // Pages are independent: two at a time (the offline model keeps one core busy).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(usize, Result<Vec<Listed>, String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(page) = pages.get(i) else {
                            return done;
                        };
                        done.push((i, run_page(root, page)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a page's thread"))
            .collect()
    });
    let mut results = results;
    results.sort_by_key(|(i, _)| *i);
    let mut listed = Vec::new();
    let mut failures = Vec::new();
    for (_, r) in results {
        match r {
            Ok(l) => listed.extend(l),
            Err(e) => failures.push(e),
        }
    }
    let ran = listed.iter().filter(|l| l.ran).count();
    let width = listed.iter().map(|l| l.place.len()).max().unwrap_or(0);
    let mut report = format!("documentation examples: {ran} ran or checked\n");
    for l in &listed {
        report.push_str(&format!("  {:width$}  {}\n", l.place, l.what));
    }
    print_report(&report);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran > 0, "no example ran:\n{report}");
}

/// Runs the examples of one page in order; the first that fails ends the page.
fn run_page(root: &Path, page: &Path) -> Result<Vec<Listed>, String> {
    let bin = Path::new(crate::common::env::bin());
    let bin_dir = bin.parent().expect("the binary's directory");
    let mut listed = Vec::new();
    let rel = page
        .strip_prefix(root)
        .expect("under the root")
        .display()
        .to_string();
    let text = std::fs::read_to_string(page).expect("read page");
    let examples: Vec<Block> = blocks(&text)
        .into_iter()
        .filter(|b| b.lang == "sh" || b.lang == "yaml")
        .collect();
    if examples.is_empty() {
        return Ok(listed);
    }
    let tmp = tempfile::Builder::new()
        .prefix("axodocs")
        .tempdir()
        .expect("tempdir");
    let dir = tmp.path().join("project");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    if rel != "README.md" {
        let init = command(&dir, &home, bin_dir)
            .args(["axocoatl", "init"])
            .output()
            .expect("run init");
        if !init.status.success() {
            return Err(format!("init for {rel}: {init:?}"));
        }
    }
    for b in examples {
        let place = format!("{rel}:{}", b.line);
        match b.directive.as_deref() {
            Some(d) if d.starts_with("not run:") => {
                if b.lang == "sh" {
                    let config =
                        std::fs::read_to_string(dir.join("axocoatl.yaml")).unwrap_or_default();
                    let unknown = undefined_names(&b.text, &config);
                    if !unknown.is_empty() {
                        return Err(format!(
                            "{place}: the example (not run) names what the page's configuration does not define: {}",
                            unknown.join(", ")
                        ));
                    }
                }
                listed.push(Listed {
                    place,
                    what: format!("not run  {}: {}", b.lang, d["not run:".len()..].trim()),
                    ran: false,
                });
                continue;
            }
            Some(d) if d.starts_with("file:") => {
                let name = d["file:".len()..].trim();
                if name.contains("..") || name.starts_with('/') {
                    return Err(format!("{place}: file names stay in the page's directory"));
                }
                let p = dir.join(name);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).expect("mkdir");
                }
                std::fs::write(&p, &b.text).expect("write file");
                listed.push(Listed {
                    place,
                    what: format!("file     {name}"),
                    ran: false,
                });
                continue;
            }
            Some(d) if d.starts_with("not run") || d.starts_with("file") => {
                return Err(format!(
                    "{place}: `{d}`: write `not run: REASON` or `file: NAME`"
                ));
            }
            _ => {}
        }
        let mut cmd = command(&dir, &home, bin_dir);
        let what = if b.lang == "yaml" {
            std::fs::write(dir.join("axocoatl.yaml"), &b.text).expect("write config");
            cmd.args(["axocoatl", "validate"]);
            format!("checked  yaml: axocoatl validate ({})", first_line(&b.text))
        } else {
            cmd.args(["sh", "-euc", &b.text]);
            format!("ran      sh: {}", first_line(&b.text))
        };
        let out = cmd.output().expect("run example");
        if !out.status.success() {
            return Err(format!(
                "{place}: the {} example failed ({}):\n{}\n----- stdout -----\n{}\n----- stderr -----\n{}",
                b.lang,
                out.status,
                b.text,
                tail(&out.stdout),
                tail(&out.stderr)
            ));
        }
        listed.push(Listed {
            place,
            what,
            ran: true,
        });
    }
    Ok(listed)
}

/// The words of each `axocoatl ...` command of a shell block, up to a pipe, a redirection,
/// a `;`, `&&` or a comment (quotes removed; enough for the names examples use).
fn commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        for part in line.split(['|', ';', '&', '>', '<']) {
            let part = part.split(" #").next().unwrap_or("");
            let words: Vec<String> = part
                .split_whitespace()
                .map(|w| w.trim_matches(['"', '\'', '(', ')', '$']).to_owned())
                .collect();
            if let Some(at) = words.iter().position(|w| w == "axocoatl") {
                out.push(words[at + 1..].to_vec());
            }
        }
    }
    out
}

/// The agents and automations the commands of `text` name (`-a ID`, `agents status ID`,
/// `automations run ID`, …) that the configuration `config` does not define.
fn undefined_names(text: &str, config: &str) -> Vec<String> {
    let yaml = axocoatl::config::yaml_value(config).unwrap_or_default();
    let ids = |section: &str| -> Vec<String> {
        yaml.get(section)
            .and_then(|v| v.as_array())
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("id").and_then(|v| v.as_str()).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (agents, automations) = (ids("agents"), ids("automations"));
    let mut unknown = Vec::new();
    for words in commands(text) {
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut named: Vec<(&str, &str)> = Vec::new();
        for pair in w.windows(2) {
            if matches!(pair[0], "-a" | "--agent") {
                named.push(("agent", pair[1]));
            }
        }
        match w.as_slice() {
            ["agents", "status" | "restart" | "set", id, ..] if !id.starts_with('-') => {
                named.push(("agent", id))
            }
            ["automations", "run" | "runs", id, ..] if !id.starts_with('-') => {
                named.push(("automation", id))
            }
            _ => {}
        }
        for (what, id) in named {
            let known = if what == "agent" {
                &agents
            } else {
                &automations
            };
            if !known.iter().any(|k| k == id) {
                unknown.push(format!("{what} `{id}`"));
            }
        }
    }
    unknown
}

#[test]
fn names_of_examples_not_run_are_checked() {
    let config = "agents:\n  - {id: assistant, provider: local}\nautomations:\n  - {id: brief, schedule: \"0 8 * * *\", request: hi}\n";
    let text = "axocoatl agents status coder --json   # state\naxocoatl send -a assistant hi | jq .\naxocoatl automations run brief && axocoatl agents restart assistant\naxocoatl automations run nightly\n";
    assert_eq!(
        undefined_names(text, config),
        ["agent `coder`", "automation `nightly`"]
    );
}

#[expect(
    clippy::print_stdout,
    reason = "the listing of every example is the test's record"
)]
fn print_report(report: &str) {
    println!("{report}");
}

fn tail(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(4000);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    s[start..].to_owned()
}

#[test]
fn blocks_and_their_directives_are_found() {
    let page = "text\n<!-- not run: needs a server -->\n```sh\naxocoatl serve\n```\n\n```yaml\na: 1\n```\n<!-- file: r.yaml -->\n```yaml\nreplies: []\n```\n";
    let b = blocks(page);
    assert_eq!(b.len(), 3);
    assert_eq!(
        (b[0].line, b[0].lang.as_str(), b[0].text.as_str()),
        (3, "sh", "axocoatl serve\n")
    );
    assert_eq!(b[0].directive.as_deref(), Some("not run: needs a server"));
    assert_eq!(b[1].directive, None);
    assert_eq!(b[2].directive.as_deref(), Some("file: r.yaml"));
}

#[test]
fn a_failing_example_or_configuration_fails_its_page() {
    let root = tempfile::tempdir().expect("tempdir");
    let page = root.path().join("docs/page.md");
    std::fs::create_dir_all(page.parent().expect("docs")).expect("mkdir");
    let write = |text: &str| std::fs::write(&page, text).expect("write page");

    write("```sh\naxocoatl history\ntrue\n```\n<!-- not run: a reason -->\n```sh\nfalse\n```\n");
    let listed = run_page(root.path(), &page).expect("runs");
    assert_eq!(listed.len(), 2);
    assert!(listed[0].ran && !listed[1].ran);

    write("```sh\naxocoatl history\nfalse\ntrue\n```\n");
    let err = run_page(root.path(), &page)
        .err()
        .expect("a failing command fails the page");
    assert!(
        err.starts_with("docs/page.md:1: the sh example failed"),
        "{err}"
    );

    write("```yaml\nagents:\n  - id: a\n```\n");
    let err = run_page(root.path(), &page)
        .err()
        .expect("an invalid configuration fails");
    assert!(err.contains("the yaml example failed"), "{err}");
}

#[test]
fn every_link_between_pages_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)\s]*)?\)").expect("re");
    let mut broken = Vec::new();
    let mut checked = 0;
    let mut pages = pages(root);
    pages.extend(
        std::fs::read_dir(root.join("bench/runs"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("read page");
        let dir = page.parent().expect("a page's directory");
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if !dir.join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(checked > 0);
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
}
