//! Sleep-time consolidation: one model call per Agent reads its recent semantic records and
//! its core blocks and promotes durable facts into the core blocks.
//!
//! The pass is promotion-only by construction: the model answers with a list of edits, and
//! only two kinds exist, *append a fact to a block* and *rewrite one exact piece of a block*
//! (to a non-empty text). There is no edit that removes a fact from a block, and nothing
//! here can delete or change a semantic record. Every edit obeys the block's limit like any
//! other edit; refused edits are reported, the rest are applied.

use serde::Deserialize;

use crate::clock;

use super::core::{BlockView, CoreEdit, EditDone};
use super::semantic::Hit;
use super::AgentMemory;

/// The request recorded for a consolidation turn (its `TurnBegun.request`).
pub const REQUEST: &str = "Consolidate memory: promote durable facts from recent semantic records into core memory blocks.";
/// `TurnBegun.mode` of a consolidation pass.
pub const MODE: &str = "consolidation";
/// At most this many recent records are read by one pass.
pub const MAX_RECORDS: usize = 50;
/// At most this many edits of one answer are applied.
pub const MAX_EDITS: usize = 20;
/// Each record's text is cut to this many characters in the prompt.
const RECORD_CHARS: usize = 1500;

/// The system prompt of a consolidation call.
pub const SYSTEM: &str = "You maintain the core memory of an AI agent: a few small named blocks of durable facts that the agent sees on every turn. You are given the blocks and the agent's recent memory records. Promote facts that will stay useful (preferences, names, decisions, recurring context) into the blocks.\n\nRules:\n- Only add facts, or rewrite one exact piece of a block to correct or update a fact. Never remove facts.\n- Skip facts a block already holds, small talk, and anything temporary.\n- Stay within each block's remaining characters.\n\nAnswer with JSON only, in this shape:\n{\"edits\": [{\"label\": \"human\", \"append\": \"Prefers short answers.\"}, {\"label\": \"project\", \"old\": \"exact text in the block\", \"new\": \"its corrected text\"}]}\nAnswer {\"edits\": []} when there is nothing to promote.";

/// The user message of a consolidation call: the blocks, then the records oldest first.
pub fn prompt(blocks: &[BlockView], records: &[Hit]) -> String {
    let mut out = String::from("Core memory blocks:\n");
    for b in blocks {
        out.push_str(&format!(
            "<block label=\"{}\" chars=\"{}\" limit=\"{}\">\n{}\n</block>\n",
            b.label, b.chars, b.limit, b.value
        ));
    }
    out.push_str("\nRecent memory records, oldest first:\n");
    for r in records {
        let text: String = r.text.chars().take(RECORD_CHARS).collect();
        out.push_str(&format!(
            "<record at=\"{}\" source=\"{}\">\n{}\n</record>\n",
            clock::rfc3339(r.source.at),
            r.source.kind.as_str(),
            text
        ));
    }
    out
}

/// One edit as the model writes it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposedEdit {
    pub label: String,
    #[serde(default)]
    pub append: Option<String>,
    #[serde(default)]
    pub old: Option<String>,
    #[serde(default)]
    pub new: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    edits: Vec<ProposedEdit>,
}

/// The edits of a model's answer: the JSON object in it (code fences and text around it are
/// tolerated).
pub fn parse_answer(text: &str) -> Result<Vec<ProposedEdit>, String> {
    let start = text.find('{');
    let end = text.rfind('}');
    let json = match (start, end) {
        (Some(s), Some(e)) if s < e => &text[s..=e],
        _ => return Err("the answer holds no JSON object".into()),
    };
    serde_json::from_str::<Answer>(json)
        .map(|a| a.edits)
        .map_err(|e| format!("the answer is not {{\"edits\": [...]}}: {e}"))
}

/// What became of one proposed edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Done(EditDone),
    /// Refused, with the reason (limits, unknown block, text not found, a deletion).
    Refused {
        label: String,
        reason: String,
    },
}

/// The core edit a proposal stands for, or why it is not a promotion.
fn as_edit(p: &ProposedEdit) -> Result<CoreEdit<'_>, String> {
    match (&p.append, &p.old, &p.new) {
        (Some(text), None, None) if !text.trim().is_empty() => Ok(CoreEdit::Append(text)),
        (Some(_), None, None) => Err("an empty fact".into()),
        (None, Some(old), Some(new)) if !new.trim().is_empty() => {
            Ok(CoreEdit::Replace { old, new })
        }
        (None, Some(_), Some(_)) => Err(
            "rewriting a fact to nothing would delete it; consolidation only adds or rewrites"
                .into(),
        ),
        _ => Err("an edit is either {label, append} or {label, old, new}".into()),
    }
}

impl AgentMemory {
    /// Applies the proposed edits of a consolidation answer, at most [`MAX_EDITS`].
    pub fn apply_consolidation(&self, proposed: &[ProposedEdit], turn: &str) -> Vec<Applied> {
        let mut out = Vec::new();
        for (i, p) in proposed.iter().enumerate() {
            let refused = |reason: String| Applied::Refused {
                label: p.label.clone(),
                reason,
            };
            if i >= MAX_EDITS {
                out.push(refused(format!("more than {MAX_EDITS} edits in one pass")));
                continue;
            }
            out.push(match as_edit(p) {
                Err(reason) => refused(reason),
                Ok(edit) => match self.edit(&p.label, edit, Some(turn)) {
                    Ok(done) => Applied::Done(done),
                    Err(e) => refused(e.to_string()),
                },
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use crate::memory::semantic::{Source, SourceKind};
    use axocoatl_store::Repo;

    #[test]
    fn answers_parse_with_fences_and_refuse_other_shapes() {
        let edits = parse_answer(
            "Sure!\n```json\n{\"edits\": [{\"label\": \"human\", \"append\": \"Likes tea.\"}]}\n```",
        )
        .expect("parse");
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].append.as_deref(), Some("Likes tea."));
        assert!(parse_answer("nothing to do").is_err());
        assert!(parse_answer("{\"edits\": [{\"label\": \"h\", \"delete\": \"x\"}]}").is_err());
        assert_eq!(parse_answer("{\"edits\": []}").expect("empty"), []);
    }

    #[test]
    fn only_promotions_are_applied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = axocoatl_store::repo::init(dir.path()).expect("init");
        let repo = Repo::open(&root, &Default::default()).expect("open");
        let m = AgentMemory::for_id(&repo, "main:a", &MemoryConfig::default());
        m.edit("human", CoreEdit::Set("Name: Ada."), None)
            .expect("set");
        let p = |label: &str, append: Option<&str>, old: Option<&str>, new: Option<&str>| {
            ProposedEdit {
                label: label.into(),
                append: append.map(Into::into),
                old: old.map(Into::into),
                new: new.map(Into::into),
            }
        };
        let applied = m.apply_consolidation(
            &[
                p("human", Some("Likes tea."), None, None),
                p("human", None, Some("Ada"), Some("Ada Lovelace")),
                p("human", None, Some("Likes tea."), Some("")),
                p("human", Some("x"), Some("y"), None),
                p("nope", Some("x"), None, None),
            ],
            "t1",
        );
        let refused: Vec<String> = applied
            .iter()
            .filter_map(|a| match a {
                Applied::Refused { reason, .. } => Some(reason.clone()),
                Applied::Done(_) => None,
            })
            .collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[0].contains("delete"));
        assert!(refused[2].contains("no core memory block"));
        assert_eq!(
            m.core.get("human", false).expect("get"),
            "Name: Ada Lovelace.\nLikes tea."
        );
        let blocks = m.blocks_view().expect("blocks");
        let text = prompt(
            &blocks,
            &[Hit {
                id: 0,
                score: 1.0,
                text: "User: I like tea".into(),
                source: Source {
                    turn: None,
                    kind: SourceKind::Exchange,
                    at: 0,
                },
            }],
        );
        assert!(text.contains("<block label=\"human\" chars=\"30\" limit=\"2000\">\nName: Ada Lovelace.\nLikes tea.\n</block>"), "{text}");
        assert!(text.contains("<record at=\"1970-01-01T00:00:00.000Z\" source=\"exchange\">\nUser: I like tea\n</record>"));
    }
}
