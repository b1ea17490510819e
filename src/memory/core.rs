//! Core memory (Tier 3): small named blocks injected into the system prompt on every turn,
//! edited by the Agent through `core_memory_append`, `core_memory_replace` and
//! `core_memory_set`, and from the shell through `axocoatl memory core`.
//!
//! Limits are in characters. An edit that would make a block longer than its limit is refused
//! with an error naming the limit, and nothing is written: never a silent cut. A block that is
//! already too long (its limit was lowered, or the file was edited by hand) is injected cut
//! to its limit with a note saying so, and `fsck` reports it.

use crate::clock;
use crate::config::CoreBlock;
use axocoatl_store::memory::{LogKind, LogRecord};

use super::AgentMemory;

pub use crate::error::MemoryError;

/// One edit of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreEdit<'a> {
    /// Adds a line at the end.
    Append(&'a str),
    /// Replaces the one occurrence of `old` with `new` (`old` must occur exactly once).
    Replace { old: &'a str, new: &'a str },
    /// Sets the whole value.
    Set(&'a str),
}

impl CoreEdit<'_> {
    fn name(&self) -> &'static str {
        match self {
            CoreEdit::Append(_) => "append",
            CoreEdit::Replace { .. } => "replace",
            CoreEdit::Set(_) => "set",
        }
    }

    /// The new value of a block whose value is `current`.
    pub fn apply(&self, label: &str, current: &str) -> Result<String, MemoryError> {
        Ok(match *self {
            CoreEdit::Append(text) if current.is_empty() => text.to_owned(),
            CoreEdit::Append(text) => format!("{current}\n{text}"),
            CoreEdit::Replace { old, new } => {
                if old.is_empty() {
                    return Err(MemoryError::EmptyOld);
                }
                match current.matches(old).count() {
                    0 => {
                        return Err(MemoryError::NotFound {
                            label: label.to_owned(),
                            old: old.to_owned(),
                        })
                    }
                    1 => current.replacen(old, new, 1),
                    count => {
                        return Err(MemoryError::Ambiguous {
                            label: label.to_owned(),
                            old: old.to_owned(),
                            count,
                        })
                    }
                }
            }
            CoreEdit::Set(value) => value.to_owned(),
        })
    }
}

/// What an edit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditDone {
    pub label: String,
    pub shared: bool,
    pub chars: usize,
    pub limit: u32,
    /// The daily log could not record the edit (the edit itself is written).
    pub warning: Option<String>,
}

/// The core memory section of the system prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreSection {
    /// Empty when no block has a value.
    pub text: String,
    /// Blocks cut to their limit, files that could not be read: for the turn's warnings.
    pub warnings: Vec<String>,
}

/// A block as shown by `axocoatl memory core show`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BlockView {
    pub label: String,
    pub shared: bool,
    pub limit: u32,
    pub chars: usize,
    pub value: String,
    /// The file that holds it.
    pub file: std::path::PathBuf,
}

impl AgentMemory {
    /// The declared block `label`.
    pub fn block(&self, label: &str) -> Result<&CoreBlock, MemoryError> {
        self.blocks
            .iter()
            .find(|b| b.label == label)
            .ok_or_else(|| MemoryError::UnknownBlock {
                label: label.to_owned(),
                known: self.blocks.iter().map(|b| b.label.clone()).collect(),
            })
    }

    /// Every declared block with its value.
    pub fn blocks_view(&self) -> Result<Vec<BlockView>, MemoryError> {
        let wanted: Vec<(&str, bool)> = self
            .blocks
            .iter()
            .map(|b| (b.label.as_str(), b.shared))
            .collect();
        let values = self.core.get_many(&wanted)?;
        Ok(self
            .blocks
            .iter()
            .zip(values)
            .map(|(b, value)| BlockView {
                label: b.label.clone(),
                shared: b.shared,
                limit: b.limit,
                chars: value.chars().count(),
                file: self.core.path_for(&b.label, b.shared),
                value,
            })
            .collect())
    }

    /// Edits a block under its file's lock and records the edit in the daily log.
    pub fn edit(
        &self,
        label: &str,
        edit: CoreEdit<'_>,
        turn: Option<&str>,
    ) -> Result<EditDone, MemoryError> {
        let block = self.block(label)?;
        let limit = block.limit;
        let chars = self.core.update(label, block.shared, |current| {
            let new = edit.apply(label, current)?;
            let chars = new.chars().count();
            if chars > limit as usize {
                return Err(MemoryError::Limit {
                    label: label.to_owned(),
                    chars,
                    limit,
                });
            }
            Ok((new, chars))
        })?;
        let text = match edit {
            CoreEdit::Append(t) | CoreEdit::Set(t) => t.to_owned(),
            CoreEdit::Replace { old, new } => format!("{old} → {new}"),
        };
        let record = LogRecord::new(
            clock::now(),
            LogKind::MemoryEdit,
            turn,
            &format!("{}: {text}", edit.name()),
        )
        .name(label);
        let warning = self
            .log
            .append(&[record])
            .err()
            .map(|e| format!("the daily log did not record the edit of {label:?}: {e}"));
        Ok(EditDone {
            label: label.to_owned(),
            shared: block.shared,
            chars,
            limit,
            warning,
        })
    }

    /// The value of every declared block, in order: the Agent's own file is read once, and a
    /// damaged file fails only the blocks it holds.
    fn values(&self) -> Vec<Result<String, String>> {
        let own: Vec<(&str, bool)> = self
            .blocks
            .iter()
            .filter(|b| !b.shared)
            .map(|b| (b.label.as_str(), false))
            .collect();
        let mut own = match self.core.get_many(&own) {
            Ok(values) => values.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => own.iter().map(|_| Err(e.to_string())).collect(),
        }
        .into_iter();
        self.blocks
            .iter()
            .map(|b| {
                if b.shared {
                    self.core.get(&b.label, true).map_err(|e| e.to_string())
                } else {
                    own.next().unwrap_or(Ok(String::new()))
                }
            })
            .collect()
    }

    /// The core memory section injected into the system prompt on every turn: each block
    /// with a value, cut to its limit when it is over it (with a note and a warning).
    pub fn core_section(&self) -> CoreSection {
        let mut out = CoreSection::default();
        let mut body = String::new();
        for (b, value) in self.blocks.iter().zip(self.values()) {
            let value = match value {
                Ok(v) => v,
                Err(e) => {
                    out.warnings.push(format!(
                        "core memory block {:?} was not injected: {e}; run `axocoatl fsck`",
                        b.label
                    ));
                    continue;
                }
            };
            if value.is_empty() {
                continue;
            }
            let chars = value.chars().count();
            let shown = if chars > b.limit as usize {
                out.warnings.push(format!(
                    "core memory block {:?} holds {chars} characters, over its limit of {}: only the first {} were injected; shorten it with `axocoatl memory core set {}`",
                    b.label, b.limit, b.limit, b.label
                ));
                let cut: String = value.chars().take(b.limit as usize).collect();
                format!(
                    "{cut}\n[cut: this block holds {chars} characters, over its limit of {}]",
                    b.limit
                )
            } else {
                value
            };
            body.push_str(&format!("<{}>\n{}\n</{}>\n", b.label, shown, b.label));
        }
        if !body.is_empty() {
            out.text = format!("Core memory:\n{body}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use axocoatl_store::Repo;

    fn memory(blocks: &str) -> (tempfile::TempDir, Repo, MemoryConfig) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = axocoatl_store::repo::init(dir.path()).expect("init");
        let repo = Repo::open(&root, &Default::default()).expect("open");
        let mut config = MemoryConfig::default();
        for b in blocks.split(',').filter(|b| !b.is_empty()) {
            let mut parts = b.split(':');
            let label = parts.next().expect("label").to_owned();
            let limit = parts
                .next()
                .map(|l| l.parse().expect("limit"))
                .unwrap_or(2000);
            let shared = parts.next() == Some("shared");
            config.core.blocks.push(CoreBlock {
                label,
                limit,
                shared,
            });
        }
        (dir, repo, config)
    }

    #[test]
    fn replace_needs_exactly_one_occurrence() {
        let e = CoreEdit::Replace {
            old: "tea",
            new: "coffee",
        };
        assert_eq!(e.apply("x", "likes tea").expect("one"), "likes coffee");
        assert!(matches!(
            e.apply("x", "tea, tea"),
            Err(MemoryError::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            e.apply("x", "zzz"),
            Err(MemoryError::NotFound { .. })
        ));
        let empty = CoreEdit::Replace { old: "", new: "b" };
        assert!(matches!(
            empty.apply("x", "zzz"),
            Err(MemoryError::EmptyOld)
        ));
        assert_eq!(CoreEdit::Append("b").apply("x", "").expect("a"), "b");
        assert_eq!(CoreEdit::Append("b").apply("x", "a").expect("a"), "a\nb");
    }

    #[test]
    fn an_edit_over_the_limit_is_an_error_naming_it_and_changes_nothing() {
        let (_d, repo, config) = memory("human:10");
        let m = AgentMemory::for_id(&repo, "main:a", &config);
        m.edit("human", CoreEdit::Set("0123456789"), None)
            .expect("fits");
        let e = m
            .edit("human", CoreEdit::Append("x"), Some("t1"))
            .expect_err("over");
        assert_eq!(
            e.to_string(),
            "block \"human\" would hold 12 characters, over its limit of 10 characters; nothing was changed"
        );
        assert_eq!(m.core.get("human", false).expect("get"), "0123456789");
        let eleven = "é".repeat(11);
        let out = m.edit("human", CoreEdit::Set(&eleven), None);
        assert!(out.expect_err("over").to_string().contains("limit of 10"));
        let replace = CoreEdit::Replace {
            old: "0123",
            new: "ab",
        };
        let ok = m.edit("human", replace, Some("t2")).expect("ok");
        assert_eq!((ok.chars, ok.limit), (8, 10));
        assert!(m
            .edit("nope", CoreEdit::Set("x"), None)
            .expect_err("unknown")
            .to_string()
            .contains("no core memory block \"nope\" (blocks: human)"));
        let log = m.log.read(0, i64::MAX, |_| true, 10).expect("log");
        let edits: Vec<(&str, &str)> = log
            .records
            .iter()
            .map(|r| (r.text.as_str(), r.turn.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            edits,
            [("set: 0123456789", ""), ("replace: 0123 → ab", "t2")]
        );
    }

    #[test]
    fn shared_blocks_are_seen_by_agents_declaring_the_label_only() {
        let (_d, repo, with) = memory("team:100:shared,human");
        let (_d2, _r2, without) = memory("human");
        let (_d3, _r3, private) = memory("team:100");
        let a = AgentMemory::for_id(&repo, "main:a", &with);
        let b = AgentMemory::for_id(&repo, "other:b", &with);
        let c = AgentMemory::for_id(&repo, "main:c", &without);
        let d = AgentMemory::for_id(&repo, "main:d", &private);
        a.edit("team", CoreEdit::Set("ships fridays"), None)
            .expect("set");
        a.edit("human", CoreEdit::Set("likes tea"), None)
            .expect("set");
        assert!(b.core_section().text.contains("ships fridays"));
        assert!(!b.core_section().text.contains("likes tea"));
        assert_eq!(c.core_section(), CoreSection::default());
        assert_eq!(d.core_section().text, "");
        assert!(c.edit("team", CoreEdit::Set("x"), None).is_err());
    }

    #[test]
    fn an_oversize_block_is_injected_cut_with_a_warning() {
        let (_d, repo, config) = memory("human:5");
        let m = AgentMemory::for_id(&repo, "main:a", &config);
        m.core.set("human", false, "0123456789").expect("raw set");
        let s = m.core_section();
        assert!(s.text.contains("<human>\n01234\n[cut: this block holds 10 characters, over its limit of 5]\n</human>"), "{}", s.text);
        assert_eq!(s.warnings.len(), 1);
        std::fs::write(m.core.path_for("human", false), "{oops").expect("damage");
        let s = m.core_section();
        assert_eq!(s.text, "");
        assert!(s.warnings[0].contains("main%3aa.json"), "{:?}", s.warnings);
    }
}
