//! Reading `axocoatl.yaml`: YAML syntax, then structure (types, required and unknown keys),
//! then the semantic rules. Each stage reports every problem it finds; a later stage runs
//! only when the earlier ones found none, so one mistake never shows up as a cascade.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::de::{join, De, DeError};
use super::diag::{Diagnostic, Severity};
use super::tree::{self, Kind, Locator, Node, Pos, Problem};
use super::types::Config;
use super::validate;

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
    "checkpoint",
    "default_agent",
    "default_session",
    "workspace",
];

/// Reads, parses and validates a configuration file.
pub fn load(path: &Path) -> Result<Loaded, Vec<Diagnostic>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let (message, hint) = match e.kind() {
            std::io::ErrorKind::NotFound => (
                "configuration file not found".to_string(),
                "create one with `axocoatl init`, or pass `--config FILE`",
            ),
            std::io::ErrorKind::InvalidData => (
                "configuration file is not UTF-8 text".to_string(),
                "save the file as UTF-8",
            ),
            _ => (
                format!("cannot read configuration file: {e}"),
                "check that the path is a readable file",
            ),
        };
        vec![Diagnostic::new(
            Severity::Error,
            path,
            Pos::START,
            message,
            Some(hint.into()),
        )]
    })?;
    load_str(path, &text)
}

/// Parses and validates configuration text; `path_for_messages` names it in diagnostics.
pub fn load_str(path_for_messages: &Path, text: &str) -> Result<Loaded, Vec<Diagnostic>> {
    let file = path_for_messages;
    let error = |problem: Problem| {
        Diagnostic::new(
            Severity::Error,
            file,
            problem.pos,
            problem.message,
            problem.hint,
        )
    };
    let parsed = tree::parse(text).map_err(|problem| vec![error(problem)])?;
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
    let config = structure(&root, &unknown, &mut failed);
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
    if diagnostics.is_empty() {
        diagnostics = validate::validate(&config, &Locator { root: &root }, file);
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

/// Builds the typed config section by section and item by item, so a type error in one
/// agent does not hide the errors in the next.
fn structure(root: &Node, unknown: &RefCell<Vec<DeError>>, failed: &mut Vec<DeError>) -> Config {
    let mut config = Config::default();
    let Kind::Map(entries) = &root.kind else {
        return config;
    };
    let mut cx = Cx { unknown, failed };
    for entry in entries {
        let (node, key) = (&entry.value, entry.key.as_str());
        match key {
            "agents" => config.agents = cx.list(node, key),
            "workflows" => config.workflows = cx.list(node, key),
            "automations" => config.automations = cx.list(node, key),
            "providers" => config.providers = cx.named(node, key),
            "consolidation" => config.consolidation = cx.one(node, key.into()).unwrap_or_default(),
            "checkpoint" => config.checkpoint = cx.one(node, key.into()).unwrap_or_default(),
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
            Kind::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.one(item, format!("{path}[{i}]")))
                .collect(),
            _ => self.one(node, path.into()).unwrap_or_default(),
        }
    }

    fn named<T: DeserializeOwned>(&mut self, node: &Node, path: &str) -> BTreeMap<String, T> {
        match &node.kind {
            Kind::Map(entries) => entries
                .iter()
                .filter_map(|e| Some((e.key.clone(), self.one(&e.value, join(path, &e.key))?)))
                .collect(),
            _ => self.one(node, path.into()).unwrap_or_default(),
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
