//! What `history`, `show` and `export` present: the turns of a scope (optionally those
//! matching a search), one turn by id or prefix, every record of some turns.

use std::collections::{HashMap, HashSet};

use axocoatl_store::ledger::Damaged;
use axocoatl_store::Repo;

use crate::error::Result;
use crate::history::{Projection, Scope, TurnView, Want};
use crate::search::Matcher;

/// Turns in ledger order, and what was met reading them.
#[derive(Debug, Default)]
pub struct Listing {
    pub turns: Vec<TurnView>,
    /// For a search, where each turn matched (beside `turns`); empty otherwise.
    pub hits: Vec<Hit>,
    /// How many turns matched before `limit` kept the newest.
    pub matched: usize,
    /// Damage met while reading (never skipped silently: callers show these).
    pub problems: Vec<Damaged>,
    /// Records of kinds this build does not know.
    pub unknown_kinds: u64,
}

impl Listing {
    fn of(p: Projection, keep: impl Fn(&TurnView) -> bool) -> Listing {
        let turns: Vec<TurnView> = p.turns.into_iter().filter(|t| keep(t)).collect();
        Listing {
            matched: turns.len(),
            turns,
            hits: Vec::new(),
            problems: p.problems,
            unknown_kinds: p.unknown_kinds,
        }
    }
}

/// Where a search matched a turn: the field (named as in
/// [`axocoatl_store::index::search_field`]), the tool whose call it is for a tool's fields,
/// and a short piece of the field around the first match.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Hit {
    pub field: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub snippet: String,
}

/// Characters of a field shown on each side of a match.
const AROUND: usize = 40;
/// Characters of the match itself shown, at most.
const MATCH_SHOWN: usize = 200;

/// The first field of a turn that matches, in the order a person reads the turn: the
/// request, the answer, the error, context labels and the piped text (its first 64 KiB),
/// attachment names, tool calls (name,
/// arguments, result) and warnings. The ledger's term index covers each of these
/// (`searchable_fields`), so a search through it finds what a scan finds. (The text OCR
/// read in a turn's attachments matches too: see [`history()`].)
pub fn first_hit(re: &Matcher, t: &TurnView) -> Option<Hit> {
    use axocoatl_store::index::search_field as f;
    let hit = |field: &'static str, tool: Option<&str>, text: &str| {
        snippet(re, text).map(|snippet| Hit {
            field,
            tool: tool.map(str::to_owned),
            snippet,
        })
    };
    hit(f::REQUEST, None, &t.request)
        .or_else(|| hit(f::OUTPUT, None, &t.output))
        .or_else(|| t.error.as_deref().and_then(|e| hit(f::ERROR, None, e)))
        .or_else(|| {
            t.context
                .iter()
                .find_map(|c| hit(f::CONTEXT, None, &c.label))
        })
        .or_else(|| {
            t.inline_context
                .iter()
                .find_map(|c| hit(f::CONTEXT_TEXT, None, &c.text.inline))
        })
        .or_else(|| {
            t.attachments
                .iter()
                .find_map(|a| hit(f::ATTACHMENT, None, &a.name))
        })
        .or_else(|| {
            t.tools.iter().find_map(|x| {
                let tool = Some(x.name.as_str());
                hit(f::TOOL, tool, &x.name)
                    .or_else(|| hit(f::ARGUMENTS, tool, &x.arguments))
                    .or_else(|| {
                        x.output
                            .as_deref()
                            .and_then(|o| hit(f::TOOL_OUTPUT, tool, o))
                    })
            })
        })
        .or_else(|| t.warnings.iter().find_map(|w| hit(f::WARNING, None, w)))
}

/// Whether a turn matches (see [`first_hit`]).
pub fn turn_matches(re: &Matcher, t: &TurnView) -> bool {
    first_hit(re, t).is_some()
}

/// The first match in `text` with up to [`AROUND`] characters on each side, on one line
/// (runs of whitespace as one space), `…` where it was cut; `None` without a match.
pub fn snippet(re: &Matcher, text: &str) -> Option<String> {
    let m = re.find_iter(text.as_bytes()).next()?;
    let (mut start, mut end) = (m.start, m.end);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let before: Vec<char> = text[..start].chars().rev().take(AROUND + 1).collect();
    let shown: String = text[start..end].chars().take(MATCH_SHOWN).collect();
    let cut_match = shown.len() < end - start;
    let after: Vec<char> = if cut_match {
        Vec::new()
    } else {
        text[end..].chars().take(AROUND + 1).collect()
    };
    let mut out = String::new();
    if before.len() > AROUND {
        out.push('…');
    }
    out.extend(before.iter().take(AROUND).rev());
    out.push_str(&shown);
    out.extend(after.iter().take(AROUND));
    if after.len() > AROUND || cut_match {
        out.push('…');
    }
    Some(one_line(&out))
}

/// Runs of whitespace (newlines, tabs) as one space.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

/// The turns of `session` (every session with `None`), only those matching `search` (its
/// text and that text's [`crate::search::matcher`]) when given, only the newest `limit` when given.
pub fn history(
    repo: &Repo,
    session: Option<&str>,
    search: Option<(&str, &Matcher)>,
    limit: Option<usize>,
) -> Result<Listing> {
    // One matcher finds the candidate turns and keeps those that really match.
    let projection = match search {
        Some((text, re)) => crate::search::search_with(repo, re, text)?,
        None => Projection::of(repo, Scope::session_or_repo(session), Want::VIEWS)?,
    };
    let mut listing = Listing::of(projection, |t| session.is_none_or(|s| t.session == s));
    if let Some((_, re)) = search {
        let mut found: Vec<(TurnView, Hit)> = std::mem::take(&mut listing.turns)
            .into_iter()
            .filter_map(|t| first_hit(re, &t).map(|hit| (t, hit)))
            .collect();
        let have: HashSet<String> = found.iter().map(|(t, _)| t.turn.clone()).collect();
        let more: Vec<(TurnView, Hit)> = ocr_matches(repo, re)?
            .into_iter()
            .filter(|(t, _)| !have.contains(&t.turn) && session.is_none_or(|s| t.session == s))
            .collect();
        if !more.is_empty() {
            found.extend(more);
            found.sort_by_key(|(t, _)| t.begin_seq);
        }
        (listing.turns, listing.hits) = found.into_iter().unzip();
        listing.matched = listing.turns.len();
    }
    if let Some(n) = limit {
        let skip = listing.turns.len().saturating_sub(n);
        listing.turns.drain(..skip);
        listing.hits.drain(..skip.min(listing.hits.len()));
    }
    Ok(listing)
}

/// The turns that pinned an attachment whose OCR text matches `re`, each with where: OCR
/// text lives in objects, not in the ledger that the search reads. The attachments' records are few and
/// indexed; a matching reference's turns are found through its name, which every turn that
/// pins it records (and the ledger search finds), then kept by the reference itself.
fn ocr_matches(repo: &Repo, re: &Matcher) -> Result<Vec<(TurnView, Hit)>> {
    let attachments = Projection::of(repo, Scope::Attachments, Want::VIEWS)?.attachments;
    // Per text object, the snippet of its match (`None`: no match).
    let mut read: HashMap<String, Option<String>> = HashMap::new();
    let mut hits: HashMap<String, String> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    for r in attachments.all() {
        let Some(hash) = &r.text_object else { continue };
        if !(r.media_type.starts_with("image/") || r.media_type == "application/pdf") {
            continue;
        }
        let matched = match read.get(hash) {
            Some(m) => m.clone(),
            None => {
                // Only OCR text is read whole (a PDF's text layer is not searched); a damaged
                // text object is fsck's to report, and the search goes on without it.
                let m = if is_ocr_text(repo, hash) {
                    match crate::attach::stored_text(repo, Some(hash)) {
                        Ok(crate::attach::Text::Ocr(_, text)) => snippet(re, &text),
                        _ => None,
                    }
                } else {
                    None
                };
                read.insert(hash.clone(), m.clone());
                m
            }
        };
        if let Some(snippet) = matched {
            hits.insert(r.reference.clone(), snippet);
            if !names.contains(&r.name) {
                names.push(r.name.clone());
            }
        }
    }
    let mut out: Vec<(TurnView, Hit)> = Vec::new();
    for name in names {
        let Ok(by_name) = crate::search::matcher(&name) else {
            continue;
        };
        for t in crate::search::search_with(repo, &by_name, &name)?.turns {
            let snippet = t.attachments.iter().find_map(|a| hits.get(&a.reference));
            if let Some(snippet) = snippet.filter(|_| !out.iter().any(|(o, _)| o.turn == t.turn)) {
                let hit = Hit {
                    field: axocoatl_store::index::search_field::ATTACHMENT_TEXT,
                    tool: None,
                    snippet: snippet.clone(),
                };
                out.push((t, hit));
            }
        }
    }
    Ok(out)
}

/// Whether a text object holds OCR text, from its first bytes.
fn is_ocr_text(repo: &Repo, hash: &str) -> bool {
    use std::io::Read;
    let magic = axocoatl_store::extracted::OCR_MAGIC;
    if !axocoatl_store::objects::is_hash(hash) {
        return false;
    }
    let mut head = vec![0; magic.len()];
    std::fs::File::open(repo.objects().path(hash))
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == magic
}

/// The turn `prefix` names (an id or a unique prefix of at least 4 characters), whole.
pub fn show(repo: &Repo, prefix: &str) -> Result<TurnView> {
    let projection = Projection::of(repo, Scope::Prefix(prefix), Want::VIEWS)?;
    Ok(projection.resolve(prefix)?.clone())
}

/// One ledger record as an export lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordBody {
    pub kind: &'static str,
    pub seq: u64,
    /// The record's fields.
    pub body: serde_json::Value,
}

/// The turns of `session` (every session with `None`) and every record of each, by turn
/// id in ledger order, from one walk of the ledger (for `export`).
pub fn export(
    repo: &Repo,
    session: Option<&str>,
) -> Result<(Listing, HashMap<String, Vec<RecordBody>>)> {
    let mut projection = Projection::of(repo, Scope::session_or_repo(session), Want::RECORDS)?;
    let entries = std::mem::take(&mut projection.records);
    let listing = Listing::of(projection, |t| session.is_none_or(|s| t.session == s));
    let records = entries
        .into_iter()
        .map(|(turn, entries)| {
            let bodies = entries
                .into_iter()
                .filter_map(|entry| {
                    let record = entry.record?;
                    Some(RecordBody {
                        kind: record.kind_name(),
                        seq: entry.seq,
                        body: record.body_json(),
                    })
                })
                .collect();
            (turn, bodies)
        })
        .collect();
    Ok((listing, records))
}

/// A turn's whole output, from its object when it was too long for one record.
pub fn full_output(repo: &Repo, t: &TurnView) -> Result<String> {
    crate::conversation::output_text(repo, t)
}
