//! Reading `axocoatl.yaml`: YAML syntax, then structure (types, required and unknown keys),
//! then the semantic rules. Every problem is reported at once: the semantic rules run on
//! what the structure kept, less what a structural error explains (see `partial.rs`), so
//! one mistake never shows up as a cascade and a misspelt provider is not held back until
//! a type error elsewhere is fixed. Only a syntax error, or a whole section of the wrong
//! shape, stops before the rules.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::de::{join, De, DeError};
use super::diag::{Diagnostic, Severity};
use super::partial;
use super::tree::{self, Kind, Locator, Node, Pos, Problem};
use super::types::Config;
use super::{approvals, costs, output_schema, relations, validate};

/// A configuration that passed validation, with the warnings it produced.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub config: Config,
    /// The file it was read from, as given.
    pub path: PathBuf,
    pub warnings: Vec<Diagnostic>,
}

impl Loaded {
    /// The directory relative paths in the config are resolved against.
    pub fn config_dir(&self) -> &Path {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }
}

/// The top-level sections, in the order the starter config documents them.
pub(crate) const TOP_LEVEL: &[&str] = &[
    "providers",
    "agents",
    "workflows",
    "consolidation",
    "automations",
    "mcp_servers",
    "checkpoint",
    "attachments",
    "telemetry",
    "on_approval_request",
    "prices",
    "default_agent",
    "default_session",
    "workspace",
];

/// The largest configuration file read: far more than any configuration needs (a system
/// prompt this long would not fit a model's context), small enough that a wrong path
/// (`/dev/zero`, a log file) is refused before it is read.
pub const CONFIG_SIZE_LIMIT: u64 = 4 * 1024 * 1024;

/// Reads, parses and validates a configuration file.
pub fn load(path: &Path) -> Result<Loaded, Vec<Diagnostic>> {
    match load_checked(path, |_| Ok::<(), std::convert::Infallible>(())) {
        Ok(loaded) => loaded,
        Err(never) => match never {},
    }
}

/// [`load`], with `check` asked about the file that was opened (its `fstat`) before
/// anything of it is read: the file checked is the file read. `check`'s error is the outer
/// one.
pub fn load_checked<E>(
    path: &Path,
    check: impl FnOnce(&std::fs::Metadata) -> Result<(), E>,
) -> Result<Result<Loaded, Vec<Diagnostic>>, E> {
    let text = match read_text_file_checked(path, CONFIG_SIZE_LIMIT, check)? {
        Ok(text) => text,
        Err(problem) => return Ok(Err(file_diagnostic(path, problem))),
    };
    Ok(load_str(path, &text))
}

/// The diagnostic of a configuration file that could not be read.
fn file_diagnostic(path: &Path, problem: FileProblem) -> Vec<Diagnostic> {
    let hint = match problem {
        FileProblem::NotFound => "create one with `axocoatl init`, or pass `--config FILE`",
        FileProblem::NotUtf8 { .. } => "save the file as UTF-8",
        FileProblem::TooLarge { .. } => {
            "check the path: a configuration is a few kilobytes of YAML"
        }
        FileProblem::NotAFile { .. } => "pass the path of a YAML file",
        FileProblem::Io(_) => "check that the path is a readable file",
    };
    let pos = match &problem {
        FileProblem::NotUtf8 { pos } => *pos,
        _ => Pos::START,
    };
    vec![Diagnostic::new(
        Severity::Error,
        path,
        pos,
        format!("configuration file {problem}"),
        Some(hint.into()),
    )]
}

/// Why a text file (the configuration, a script) could not be read.
#[derive(Debug)]
pub(crate) enum FileProblem {
    NotFound,
    /// A directory, a device, a socket: something that is not a file of text.
    NotAFile {
        what: &'static str,
    },
    TooLarge {
        size: Option<u64>,
        limit: u64,
    },
    /// Where the first byte that is not UTF-8 is.
    NotUtf8 {
        pos: Pos,
    },
    Io(std::io::Error),
}

impl std::fmt::Display for FileProblem {
    /// Completes "configuration file …" / "script …".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileProblem::NotFound => write!(f, "not found"),
            FileProblem::NotAFile { what } => write!(f, "is {what}, not a regular file"),
            FileProblem::TooLarge { size, limit } => match size {
                Some(size) => write!(
                    f,
                    "is too large: {} (the limit is {})",
                    human_size(*size),
                    human_size(*limit)
                ),
                None => write!(f, "is too large: more than {}", human_size(*limit)),
            },
            FileProblem::NotUtf8 { .. } => write!(f, "is not UTF-8 text"),
            FileProblem::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

/// Reads a text file of at most `limit` bytes. Only regular files and pipes (`<(command)`)
/// are read: a directory, a device (`/dev/zero` never ends) or a socket is refused before it
/// is opened, and a pipe is read no further than the limit. A leading UTF-8 byte-order
/// mark is dropped.
pub(crate) fn read_text_file(path: &Path, limit: u64) -> Result<String, FileProblem> {
    match read_text_file_checked(path, limit, |_| Ok::<(), std::convert::Infallible>(())) {
        Ok(read) => read,
        Err(never) => match never {},
    }
}

/// [`read_text_file`], with `check` asked about the opened file before it is read: the outer
/// error is `check`'s refusal, the inner one a problem of the file.
fn read_text_file_checked<E>(
    path: &Path,
    limit: u64,
    check: impl FnOnce(&std::fs::Metadata) -> Result<(), E>,
) -> Result<Result<String, FileProblem>, E> {
    let (file, meta) = match open_text_file(path, limit) {
        Ok(opened) => opened,
        Err(problem) => return Ok(Err(problem)),
    };
    check(&meta)?;
    Ok(read_opened(file, limit))
}

/// Opens a text file of at most `limit` bytes after looking at what it is, and looks again
/// at what was opened: the file and its `fstat`.
fn open_text_file(
    path: &Path,
    limit: u64,
) -> Result<(std::fs::File, std::fs::Metadata), FileProblem> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => FileProblem::NotFound,
        _ => FileProblem::Io(e),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    check_file_type(&meta)?;
    if meta.is_file() && meta.len() > limit {
        return Err(FileProblem::TooLarge {
            size: Some(meta.len()),
            limit,
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // The path may have been replaced between the two looks.
    let meta = file.metadata().map_err(io)?;
    check_file_type(&meta)?;
    Ok((file, meta))
}

/// Reads an opened text file (see [`read_text_file`]).
fn read_opened(file: std::fs::File, limit: u64) -> Result<String, FileProblem> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(FileProblem::Io)?;
    if bytes.len() as u64 > limit {
        return Err(FileProblem::TooLarge { size: None, limit });
    }
    let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        Ok(text) => Ok(text.to_string()),
        Err(e) => Err(FileProblem::NotUtf8 {
            pos: position_of(body, e.valid_up_to()),
        }),
    }
}

/// `4 MiB`, `23.7 GiB`, `812 bytes`.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn check_file_type(meta: &std::fs::Metadata) -> Result<(), FileProblem> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Ok(());
        }
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a special file"
        };
        Err(FileProblem::NotAFile { what })
    }
    #[cfg(not(unix))]
    Err(FileProblem::NotAFile {
        what: if kind.is_dir() {
            "a directory"
        } else {
            "a special file"
        },
    })
}

/// The line and column (in characters) of byte `offset` of `bytes`, whose prefix up to
/// `offset` is UTF-8. Lines end as YAML ends them: `\n`, `\r\n` or `\r`.
fn position_of(bytes: &[u8], offset: usize) -> Pos {
    let before = std::str::from_utf8(&bytes[..offset.min(bytes.len())]).unwrap_or_default();
    let mut pos = Pos::START;
    let mut chars = before.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' => {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                pos.line += 1;
                pos.column = 1;
            }
            _ => pos.column += 1,
        }
    }
    pos
}

/// The rules of each entry, then each agent's approvals and output schema, prices and cost
/// budgets, then how entries refer to each other.
fn rules(config: &Config, loc: &Locator<'_>, file: &Path) -> Vec<Diagnostic> {
    let mut c = validate::Checker {
        file,
        loc,
        out: validate::validate(config, loc, file),
    };
    for (i, agent) in config.agents.iter().enumerate() {
        approvals::check_agent(&mut c, i, agent);
        output_schema::check(&mut c, i, agent);
    }
    approvals::check_hook(&mut c, config);
    costs::check(&mut c, config);
    relations::check(&mut c, config);
    c.out
}

/// Parses and validates configuration text; `path_for_messages` names it in diagnostics.
pub fn load_str(path_for_messages: &Path, text: &str) -> Result<Loaded, Vec<Diagnostic>> {
    let file = path_for_messages;
    // Editors on Windows save a byte-order mark; it is not part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // YAML reads a NUL as the end of the text: say what it is, where, rather than report
    // whatever the cut-off document then lacks.
    if let Some(at) = text.find('\0') {
        return Err(vec![Diagnostic::new(
            Severity::Error,
            file,
            position_of(text.as_bytes(), at),
            "a NUL byte (\\0): a configuration file is text",
            Some(
                "remove it; a NUL usually means the file was saved by a binary tool or damaged"
                    .into(),
            ),
        )]);
    }
    let error = |problem: Problem| {
        Diagnostic::new(
            Severity::Error,
            file,
            problem.pos,
            problem.message,
            problem.hint,
        )
    };
    let parsed = tree::parse(text, "axocoatl.yaml").map_err(|problem| vec![error(problem)])?;
    let root = match parsed.root {
        Some(root) if !root.is_null() => root,
        _ => {
            return Err(vec![Diagnostic::new(
                Severity::Error,
                file,
                Pos::START,
                "the configuration file is empty",
                Some("add at least one agent under `agents:`; `axocoatl init` writes a commented starter config".into()),
            )])
        }
    };
    if !matches!(root.kind, Kind::Map(_)) {
        return Err(vec![Diagnostic::new(
            Severity::Error,
            file,
            root.pos,
            "the top level must be a mapping of sections (`agents:`, `providers:`, ...)",
            Some("start the file with `agents:` at column 1".into()),
        )]);
    }

    let unknown = RefCell::new(Vec::new());
    let mut failed = Vec::new();
    let mut kept = Kept::default();
    let config = structure(&root, &unknown, &mut failed, &mut kept);
    let mut diagnostics: Vec<Diagnostic> = parsed.problems.into_iter().map(error).collect();
    diagnostics.extend(unknown.into_inner().into_iter().chain(failed).map(|e| {
        let message = e.full_message();
        Diagnostic::new(
            Severity::Error,
            file,
            e.pos.unwrap_or(root.pos),
            message,
            e.hint,
        )
    }));
    if !kept.whole_section_failed {
        let structural: Vec<Pos> = diagnostics
            .iter()
            .map(|d| Pos {
                line: d.line,
                column: d.column,
            })
            .collect();
        let loc = Locator {
            root: &root,
            kept: kept.indexes,
        };
        diagnostics.extend(partial::unexplained(
            rules(&config, &loc, file),
            &root,
            &structural,
            &kept.failed_names,
        ));
    }
    diagnostics.sort_by_key(|d| (d.line, d.column));
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Err(diagnostics);
    }
    Ok(Loaded {
        config,
        path: file.to_path_buf(),
        warnings: diagnostics,
    })
}

/// What the typed configuration kept of the document's lists and maps.
#[derive(Default)]
struct Kept {
    /// Per list section that dropped items, the document index of each item kept.
    indexes: std::collections::HashMap<String, Vec<usize>>,
    /// The ids (list items) and names (map entries) of the items that did not deserialize:
    /// a rule that names one of them may be wrong only because it is missing.
    failed_names: Vec<String>,
    /// A list or map section did not deserialize at all: the rules would see none of it.
    whole_section_failed: bool,
}

/// Builds the typed config section by section and item by item, so a type error in one
/// agent does not hide the errors in the next.
fn structure(
    root: &Node,
    unknown: &RefCell<Vec<DeError>>,
    failed: &mut Vec<DeError>,
    kept: &mut Kept,
) -> Config {
    let mut config = Config::default();
    let Kind::Map(entries) = &root.kind else {
        return config;
    };
    let mut cx = Cx {
        unknown,
        failed,
        kept,
    };
    for entry in entries {
        let (node, key) = (&entry.value, entry.key.as_str());
        match key {
            "agents" => config.agents = cx.list(node, key),
            "workflows" => config.workflows = cx.list(node, key),
            "automations" => config.automations = cx.list(node, key),
            "providers" => config.providers = cx.named(node, key),
            "mcp_servers" => config.mcp_servers = cx.named(node, key),
            "consolidation" => config.consolidation = cx.one(node, key.into()).unwrap_or_default(),
            "checkpoint" => config.checkpoint = cx.one(node, key.into()).unwrap_or_default(),
            "attachments" => config.attachments = cx.one(node, key.into()).unwrap_or_default(),
            "telemetry" => config.telemetry = cx.one(node, key.into()).unwrap_or_default(),
            "on_approval_request" => {
                config.on_approval_request = cx.one(node, key.into()).flatten()
            }
            "prices" => config.prices = cx.list(node, key),
            "default_agent" => config.default_agent = cx.one(node, key.into()).flatten(),
            "default_session" => config.default_session = cx.one(node, key.into()).flatten(),
            "workspace" => config.workspace = cx.one(node, key.into()).flatten(),
            _ => cx.unknown.borrow_mut().push(DeError::unknown_key(
                key,
                entry.key_pos,
                "",
                TOP_LEVEL,
            )),
        }
    }
    config
}

struct Cx<'a> {
    unknown: &'a RefCell<Vec<DeError>>,
    failed: &'a mut Vec<DeError>,
    kept: &'a mut Kept,
}

impl Cx<'_> {
    fn one<T: DeserializeOwned>(&mut self, node: &Node, path: String) -> Option<T> {
        let de = De {
            node,
            path,
            unknown: self.unknown,
        };
        T::deserialize(de).map_err(|e| self.failed.push(e)).ok()
    }

    fn list<T: DeserializeOwned>(&mut self, node: &Node, path: &str) -> Vec<T> {
        match &node.kind {
            Kind::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut at = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match self.one(item, format!("{path}[{i}]")) {
                        Some(value) => {
                            out.push(value);
                            at.push(i);
                        }
                        None => self.kept.failed_names.extend(partial::id_of(item)),
                    }
                }
                if at.len() < items.len() {
                    self.kept.indexes.insert(path.to_owned(), at);
                }
                out
            }
            _ => self.whole(node, path),
        }
    }

    fn named<T: DeserializeOwned>(&mut self, node: &Node, path: &str) -> BTreeMap<String, T> {
        match &node.kind {
            Kind::Map(entries) => {
                let mut out = BTreeMap::new();
                for e in entries {
                    match self.one(&e.value, join(path, &e.key)) {
                        Some(value) => {
                            out.insert(e.key.clone(), value);
                        }
                        None => self.kept.failed_names.push(e.key.clone()),
                    }
                }
                out
            }
            _ => self.whole(node, path),
        }
    }

    /// A list or map section given as something else: an empty one (null) is fine, else
    /// its error is reported and the rules do not run.
    fn whole<T: DeserializeOwned + Default>(&mut self, node: &Node, path: &str) -> T {
        match self.one(node, path.into()) {
            Some(value) => value,
            None => {
                self.kept.whole_section_failed = true;
                T::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(yaml: &str) -> Loaded {
        match load_str(Path::new("t.yaml"), yaml) {
            Ok(loaded) => loaded,
            Err(diagnostics) => panic!("{diagnostics:#?}"),
        }
    }

    fn errors(yaml: &str) -> Vec<String> {
        load_str(Path::new("t.yaml"), yaml)
            .expect_err("invalid")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn anchors_and_aliases_are_expanded() {
        let loaded = ok("agents:\n  - id: a\n    provider: local\n    sampling: &s {temperature: 0.2, top_p: 0.5}\n  - id: b\n    provider: local\n    sampling: *s\n");
        assert_eq!(loaded.config.agents[1].sampling.top_p, Some(0.5));
    }

    #[test]
    fn text_fields_take_any_scalar_and_quotes_keep_numbers_text() {
        let loaded =
            ok("agents:\n  - id: 7\n    provider: ollama\n    model: 3.10\n    name: yes\n");
        let agent = &loaded.config.agents[0];
        assert_eq!(
            (
                agent.id.as_str(),
                agent.model.as_deref(),
                agent.name.as_deref()
            ),
            ("7", Some("3.10"), Some("yes"))
        );
        let errs =
            errors("agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: \"12\"}\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("4:28:"), "{errs:?}");
        assert!(errs[0].contains("found the text `12`"), "{errs:?}");
    }

    #[test]
    fn floats_where_whole_numbers_belong_say_so() {
        let errs =
            errors("agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: 4096.0}\n");
        assert!(errs[0].contains("found the number 4096.0"), "{errs:?}");
    }

    #[test]
    fn empty_lists_and_sections_are_defaults() {
        let loaded = ok("agents:\n  - id: a\n    provider: local\n    tools:\n    depends_on: []\nconsolidation:\ncheckpoint: {}\n");
        assert!(loaded.config.agents[0].tools.is_empty());
        assert_eq!(loaded.config.consolidation.interval_secs, 1800);
        assert_eq!(loaded.config.checkpoint.keep, 3);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let errs = errors("agents:\n  - {name: \"ünïcödé\", id: a, provider: local, modle: x}\n");
        assert!(
            errs[0].starts_with("t.yaml:2:47: error: agents[0]: unknown key `modle`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_type_error_in_one_agent_does_not_hide_the_next() {
        let errs = errors("agents:\n  - id: a\n    provider: 5\n    role: boss\n  - id: b\n    provider: local\n    sampling: {top_p: high}\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn config_dir_is_the_parent_or_the_current_dir() {
        let mut loaded = ok("agents:\n  - {id: a, provider: local}\n");
        assert_eq!(loaded.config_dir(), Path::new("."));
        loaded.path = PathBuf::from("/srv/p/axocoatl.yaml");
        assert_eq!(loaded.config_dir(), Path::new("/srv/p"));
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_key() {
        let loaded = ok("\u{feff}agents:\n  - {id: a, provider: local}\n");
        assert_eq!(loaded.config.agents[0].id, "a");
    }

    #[test]
    fn a_nul_is_named_with_its_position() {
        let errs = errors("agents:\n  - id: a\n    pro\0vider: local\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("t.yaml:3:8: error: a NUL byte"),
            "{errs:?}"
        );
    }

    #[test]
    fn an_alias_bomb_is_refused_at_the_alias_that_crosses_the_limit() {
        let mut yaml = String::from(
            "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for level in 1..10 {
            let refs = vec![format!("*a{}", level - 1); 9].join(",");
            yaml.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        let errs = errors(&yaml);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("copy more than 16 MiB"), "{errs:?}");
        assert!(errs[0].starts_with("t.yaml:6:"), "{errs:?}");
    }

    #[test]
    fn anchors_nested_around_a_large_value_are_bounded_too() {
        let big = format!("\"{}\"", "x".repeat(1 << 20));
        let mut yaml = String::from("x: ");
        for n in 0..40 {
            yaml.push_str(&format!("&n{n} ["));
        }
        yaml.push_str(&big);
        yaml.push_str(&"]".repeat(40));
        let errs = errors(&yaml);
        assert!(errs[0].contains("copy more than 16 MiB"), "{errs:?}");
    }

    #[test]
    fn nesting_is_bounded() {
        let errs = errors(&format!("{}a\n", "- ".repeat(100_000)));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("nest more than 64 levels"), "{errs:?}");
        let errs = errors(&format!("x: {}{}\n", "[".repeat(200), "]".repeat(200)));
        assert!(errs[0].contains("nest more than 64 levels"), "{errs:?}");
    }

    #[test]
    fn long_keys_are_cut_in_messages() {
        let errs = errors(&format!(
            "agents:\n  - {{id: a, provider: local, {}: 1}}\n",
            "k".repeat(100_000)
        ));
        assert!(errs[0].len() < 1000, "{}", errs[0].len());
        assert!(errs[0].contains("unknown key `kkkk"), "{errs:?}");
    }

    #[test]
    fn files_are_read_within_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "\u{feff}agents: []\n").expect("write");
        assert_eq!(read_text_file(&file, 100).expect("read"), "agents: []\n");
        assert!(matches!(
            read_text_file(&file, 5),
            Err(FileProblem::TooLarge {
                size: Some(14),
                limit: 5
            })
        ));
        assert!(matches!(
            read_text_file(dir.path(), 100),
            Err(FileProblem::NotAFile {
                what: "a directory"
            })
        ));
        assert!(matches!(
            read_text_file(&dir.path().join("none"), 100),
            Err(FileProblem::NotFound)
        ));
        std::fs::write(&file, b"agents:\n  - \xff").expect("write");
        match read_text_file(&file, 100) {
            Err(FileProblem::NotUtf8 { pos }) => assert_eq!(pos, Pos { line: 2, column: 5 }),
            other => panic!("{other:?}"),
        }
        #[cfg(unix)]
        assert!(matches!(
            read_text_file(Path::new("/dev/zero"), 100),
            Err(FileProblem::NotAFile {
                what: "a character device"
            })
        ));
        assert_eq!(human_size(4 << 20), "4 MiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(812), "812 bytes");
    }

    #[test]
    fn top_level_sections_match_the_schema() {
        let value = serde_json::to_value(Config::default()).expect("serializes");
        let mut keys: Vec<&str> = value
            .as_object()
            .expect("map")
            .keys()
            .map(String::as_str)
            .collect();
        let mut known = TOP_LEVEL.to_vec();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(
            keys, known,
            "update TOP_LEVEL and `structure` together with Config"
        );
    }
}
