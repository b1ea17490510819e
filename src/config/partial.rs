//! The semantic rules over a configuration with structural errors: which of their findings
//! a structural error already explains.
//!
//! `validate` reports every error at once, so the rules run on what deserialized even when
//! some of it did not. Two kinds of finding would then be a cascade of one mistake, and are
//! left out until it is fixed:
//!
//! - a finding inside an item (an agent, a provider entry, a section's key) that has a
//!   structural error of its own: `modle: m` is an unknown key, and the agent then "needs a
//!   `model`" only because of it; or about a whole section one of whose items has one ("no
//!   agents are defined", when the only agent did not deserialize);
//! - a finding that names an item which did not deserialize at all: agent `b` with a type
//!   error is missing from the typed configuration, so `default_agent: b` would be "unknown".

use super::diag::Diagnostic;
use super::tree::{Kind, Node, Pos};

/// The `id` of a list item, when it has one as a scalar.
pub(super) fn id_of(item: &Node) -> Option<String> {
    match &item.entry("id")?.value.kind {
        Kind::Scalar(s) => Some(s.value.clone()),
        _ => None,
    }
}

/// Where an item of the document starts, and where the section holding it does (a
/// section's own key is an item too: a finding there is about the whole section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    start: Pos,
    section: Pos,
}

/// Every item of the document, in document order: every top-level key, and within a
/// section each list item and each key of its mapping.
fn items(root: &Node) -> Vec<Item> {
    let mut out = Vec::new();
    if let Kind::Map(sections) = &root.kind {
        for s in sections {
            let item = |start| Item {
                start,
                section: s.key_pos,
            };
            out.push(item(s.key_pos));
            match &s.value.kind {
                Kind::Seq(values) => out.extend(values.iter().map(|v| item(v.pos))),
                Kind::Map(entries) => out.extend(entries.iter().map(|e| item(e.key_pos))),
                Kind::Scalar(_) => {}
            }
        }
    }
    out.sort();
    out
}

/// The item a position lies in: the last item starting at or before it.
fn item_of(items: &[Item], pos: Pos) -> Option<Item> {
    let i = items
        .partition_point(|item| item.start <= pos)
        .checked_sub(1)?;
    Some(items[i])
}

/// The findings of the rules that no structural error explains (all of them when there is
/// none). `structural` are the positions of the structural errors; `failed` the ids and
/// names of the items that did not deserialize.
pub(super) fn unexplained(
    semantic: Vec<Diagnostic>,
    root: &Node,
    structural: &[Pos],
    failed: &[String],
) -> Vec<Diagnostic> {
    if structural.is_empty() {
        return semantic;
    }
    let items = items(root);
    // The items with a structural error, and the keys of their sections.
    let broken: Vec<Pos> = structural
        .iter()
        .filter_map(|p| item_of(&items, *p))
        .flat_map(|item| [item.start, item.section])
        .collect();
    let quoted: Vec<String> = failed.iter().map(|n| format!("`{n}`")).collect();
    semantic
        .into_iter()
        .filter(|d| {
            let pos = Pos {
                line: d.line,
                column: d.column,
            };
            let inside = item_of(&items, pos).is_some_and(|i| broken.contains(&i.start));
            let names_missing = quoted.iter().any(|q| d.message.contains(q.as_str()));
            !inside && !names_missing
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn report(yaml: &str) -> Vec<String> {
        match super::super::load_str(Path::new("t.yaml"), yaml) {
            Ok(_) => Vec::new(),
            Err(diags) => diags
                .iter()
                .map(|d| format!("{}:{} {}", d.line, d.column, d.message))
                .collect(),
        }
    }

    #[test]
    fn structural_and_semantic_errors_are_reported_together() {
        // A type error in one agent, a misspelt provider in another, a misspelt
        // default_agent: all three at once.
        let found = report(
            "agents:\n  - id: a\n    provider: local\n    max_steps: many\n  - id: b\n    provider: olama\n    model: m\ndefault_agent: c\n",
        );
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with("4:16 "), "{found:#?}");
        assert!(
            found[1].starts_with("6:15 ") && found[1].contains("provider `olama`"),
            "{found:#?}"
        );
        assert!(
            found[2].starts_with("8:16 ") && found[2].contains("`c`"),
            "{found:#?}"
        );
    }

    #[test]
    fn what_a_structural_error_explains_is_left_out() {
        // `modle` is unknown, so the agent's missing model is its consequence.
        let found = report("agents:\n  - id: a\n    provider: ollama\n    modle: m\n");
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("modle"), "{found:#?}");
        // Agent `b` did not deserialize, so `default_agent: b` is not reported unknown.
        let found = report(
            "agents:\n  - id: a\n    provider: local\n  - id: b\n    provider: local\n    max_steps: many\ndefault_agent: b\n",
        );
        assert_eq!(found.len(), 1, "{found:#?}");
        // A section of the wrong shape stops before the rules.
        let found = report("agents: everyone\ndefault_agent: x\n");
        assert_eq!(found.len(), 1, "{found:#?}");
    }
}
