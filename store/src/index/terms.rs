//! The term index of a segment: lower-cased (case-folded), Unicode-aware words of the
//! searchable text of each record, each with the offsets of the records that contain it.
//!
//! A literal, case-insensitive query matches inside one field of one record, so the words
//! of the query are in that record: a word of the query with non-word characters on both
//! sides is a whole word of the record, the last word (when the query ends with it) starts
//! one, the first (when the query starts with it) ends one, and a query of one word lies
//! inside one. The records holding candidates for every word are intersected; the caller
//! confirms each candidate against the text, so a result is exactly what the full scan
//! finds. Folding is the one the regex engine uses for case-insensitive matching (simple
//! case folding), so a word folds the same way in the index and in the query.

use std::cell::RefCell;
use std::collections::HashMap;

use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

use crate::ledger::record::Record;

/// The canonical member of `c`'s simple case folding class: the lower-case ASCII letter
/// when the class has one (so `K`, `k` and the Kelvin sign fold to `k`), else its smallest
/// lower-case member, else its smallest member.
pub fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    thread_local! {
        static CACHE: RefCell<HashMap<char, char>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|cache| {
        *cache.borrow_mut().entry(c).or_insert_with(|| {
            let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
            class.case_fold_simple();
            let mut members = class.iter().flat_map(|r| r.start()..=r.end());
            let all: Vec<char> = members.by_ref().take(64).collect();
            all.iter()
                .find(|m| m.is_ascii())
                .map(|m| m.to_ascii_lowercase())
                .or_else(|| all.iter().filter(|m| m.is_lowercase()).min().copied())
                .or_else(|| all.iter().min().copied())
                .unwrap_or(c)
        })
    })
}

/// Whether a folded character is part of a word.
fn is_word(folded: char) -> bool {
    folded.is_alphanumeric()
}

/// Calls `f` with each word of `text`, folded.
pub fn words(text: &str, mut f: impl FnMut(&str)) {
    let mut word = String::new();
    for c in text.chars() {
        let c = fold(c);
        if is_word(c) {
            word.push(c);
        } else if !word.is_empty() {
            f(&word);
            word.clear();
        }
    }
    if !word.is_empty() {
        f(&word);
    }
}

/// The fields a search looks in, by the names search results give them.
pub mod field {
    pub const REQUEST: &str = "request";
    pub const OUTPUT: &str = "output";
    pub const ERROR: &str = "error";
    pub const CONTEXT: &str = "context_label";
    pub const ATTACHMENT: &str = "attachment";
    pub const TOOL: &str = "tool";
    pub const ARGUMENTS: &str = "tool_arguments";
    pub const TOOL_OUTPUT: &str = "tool_output";
    pub const WARNING: &str = "warning";
    /// Not a record's: the text OCR read from an attached image or scanned page (in its
    /// text object; the runtime searches it apart from the index).
    pub const ATTACHMENT_TEXT: &str = "attachment_text";
}

/// The searchable text of a record, field by field: what `history --search` matches in a
/// turn. Every kind is named, so a new kind cannot be left out of the index unseen.
pub fn searchable_fields(record: &Record, mut f: impl FnMut(&'static str, &str)) {
    match record {
        Record::TurnBegun(b) => {
            f(field::REQUEST, &b.request);
            for c in &b.inline_context {
                f(field::CONTEXT, &c.label);
            }
            for a in &b.attachments {
                f(field::ATTACHMENT, &a.name);
            }
        }
        Record::AgentOutput(o) => f(field::OUTPUT, &o.text),
        Record::AgentOutputBounded(o) => f(field::OUTPUT, &o.text.inline),
        Record::TurnEnded(e) => {
            if let Some(error) = &e.error {
                f(field::ERROR, error);
            }
        }
        Record::ToolStarted(s) => {
            f(field::TOOL, &s.name);
            f(field::ARGUMENTS, &s.arguments.inline);
        }
        Record::ToolResult(r) => {
            f(field::TOOL, &r.name);
            f(field::TOOL_OUTPUT, &r.output.inline);
        }
        Record::ToolFinished(r) => {
            f(field::TOOL, &r.name);
            f(field::TOOL_OUTPUT, &r.output.inline);
        }
        Record::Warning(w) => {
            if w.turn.is_some() {
                f(field::WARNING, &w.message);
            }
        }
        // What a turn's search result does not show (ids, models, plans, usage, a turn's
        // own model and system prompt), or records of no turn.
        Record::SessionCreated(_)
        | Record::ModelCall(_)
        | Record::ModelCallCost(_)
        | Record::UsageCost(_)
        | Record::TurnOverrides(_)
        | Record::StopRequested(_)
        | Record::RewindBoundary(_)
        | Record::AttachmentAdded(_)
        | Record::AttachmentRemoved(_)
        | Record::AttachmentConsumed(_)
        | Record::Note(_)
        | Record::TurnOrigin(_)
        | Record::PlanMade(_)
        | Record::SubtaskStarted(_)
        | Record::SubtaskEnded(_)
        | Record::ActivationDecided(_)
        | Record::SessionAgents(_)
        | Record::LegacyImportBegun(_)
        | Record::LegacyImportEnded(_) => {}
    }
}

/// [`searchable_fields`] without the fields' names.
pub fn searchable(record: &Record, mut f: impl FnMut(&str)) {
    searchable_fields(record, |_, text| f(text));
}

/// Where a word of the query must appear in a word of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// The whole word.
    Exact(String),
    /// A word starting with it.
    Prefix(String),
    /// A word ending with it.
    Suffix(String),
    /// A word containing it.
    Inside(String),
}

impl Need {
    pub fn word(&self) -> &str {
        match self {
            Need::Exact(w) | Need::Prefix(w) | Need::Suffix(w) | Need::Inside(w) => w,
        }
    }
}

/// What the index must find for a query: every need in one record. `None` when the query
/// has no word at all (the caller scans).
pub fn needs(query: &str) -> Option<Vec<Need>> {
    let folded: Vec<char> = query.chars().map(fold).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < folded.len() {
        if !is_word(folded[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < folded.len() && is_word(folded[i]) {
            i += 1;
        }
        let word: String = folded[start..i].iter().collect();
        let left = start > 0;
        let right = i < folded.len();
        out.push(match (left, right) {
            (true, true) => Need::Exact(word),
            (true, false) => Need::Prefix(word),
            (false, true) => Need::Suffix(word),
            (false, false) => Need::Inside(word),
        });
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_follows_simple_case_folding() {
        assert_eq!(fold('A'), 'a');
        assert_eq!(fold('\u{212A}'), 'k', "the Kelvin sign is a k");
        assert_eq!(fold('\u{17F}'), 's', "the long s is an s");
        assert_eq!(fold('Σ'), fold('σ'));
        assert_eq!(fold('ς'), fold('σ'));
        assert_eq!(fold('Ä'), 'ä');
        let mut w = Vec::new();
        words("Hello, WORLD-wide ÄÖÜ straße 42x", |t| {
            w.push(t.to_owned())
        });
        assert_eq!(w, vec!["hello", "world", "wide", "äöü", "straße", "42x"]);
    }

    #[test]
    fn needs_say_where_each_word_must_be() {
        assert_eq!(needs("needle"), Some(vec![Need::Inside("needle".into())]));
        assert_eq!(
            needs("Quasar-Needle"),
            Some(vec![
                Need::Suffix("quasar".into()),
                Need::Prefix("needle".into())
            ])
        );
        assert_eq!(
            needs(" a big deal "),
            Some(vec![
                Need::Exact("a".into()),
                Need::Exact("big".into()),
                Need::Exact("deal".into())
            ])
        );
        assert_eq!(needs("--> "), None);
    }
}
