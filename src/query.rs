//! What `history`, `show` and `export` present: the turns of a scope (optionally those
//! matching a search), one turn by id or prefix, every record of some turns.

use std::collections::{HashMap, HashSet};

use axocoatl_store::ledger::Damaged;
use axocoatl_store::Repo;

use crate::error::Result;
use crate::history::{self, Projection, TurnView};
use crate::search::Matcher;

/// Turns in ledger order, and what was met reading them.
#[derive(Debug, Default)]
pub struct Listing {
    pub turns: Vec<TurnView>,
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
            problems: p.problems,
            unknown_kinds: p.unknown_kinds,
        }
    }
}

/// Whether a turn matches: requests, responses, errors, context metadata (context labels,
/// attachment names, warnings) and tool calls (name, arguments and result). (The text OCR
/// read in a turn's attachments matches too: see [`history()`].)
pub fn turn_matches(re: &Matcher, t: &TurnView) -> bool {
    let is = |s: &str| re.is_match(s);
    is(&t.request)
        || is(&t.output)
        || t.error.as_deref().is_some_and(is)
        || t.context.iter().any(|c| is(&c.label))
        || t.attachments.iter().any(|a| is(&a.name))
        || t.tools
            .iter()
            .any(|x| is(&x.name) || is(&x.arguments) || x.output.as_deref().is_some_and(is))
        || t.warnings.iter().any(|w| is(w))
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
        None => history::project_scope(repo, session)?,
    };
    let re = search.map(|(_, re)| re);
    let mut listing = Listing::of(projection, |t| {
        session.is_none_or(|s| t.session == s) && re.is_none_or(|re| turn_matches(re, t))
    });
    if let Some((_, re)) = search {
        let have: HashSet<String> = listing.turns.iter().map(|t| t.turn.clone()).collect();
        let more: Vec<TurnView> = ocr_matches(repo, re)?
            .into_iter()
            .filter(|t| !have.contains(&t.turn) && session.is_none_or(|s| t.session == s))
            .collect();
        if !more.is_empty() {
            listing.turns.extend(more);
            listing.turns.sort_by_key(|t| t.begin_seq);
            listing.matched = listing.turns.len();
        }
    }
    if let Some(n) = limit {
        let skip = listing.turns.len().saturating_sub(n);
        listing.turns.drain(..skip);
    }
    Ok(listing)
}

/// The turns that pinned an attachment whose OCR text matches `re`: OCR text lives in
/// objects, not in the ledger that the search reads. The attachments' records are few and
/// indexed; a matching reference's turns are found through its name, which every turn that
/// pins it records (and the ledger search finds), then kept by the reference itself.
fn ocr_matches(repo: &Repo, re: &Matcher) -> Result<Vec<TurnView>> {
    let attachments = history::project_walked(repo, repo.ledger().read_attachments()?)?.attachments;
    let mut read: HashMap<String, bool> = HashMap::new();
    let mut hits: HashSet<String> = HashSet::new();
    let mut names: Vec<String> = Vec::new();
    for r in attachments.all() {
        let Some(hash) = &r.text_object else { continue };
        if !(r.media_type.starts_with("image/") || r.media_type == "application/pdf") {
            continue;
        }
        let matched = match read.get(hash) {
            Some(m) => *m,
            None => {
                // Only OCR text is read whole (a PDF's text layer is not searched); a damaged
                // text object is fsck's to report, and the search goes on without it.
                let m = is_ocr_text(repo, hash)
                    && matches!(
                        crate::attach::stored_text(repo, Some(hash)),
                        Ok(crate::attach::Text::Ocr(_, text)) if re.is_match(&text)
                    );
                read.insert(hash.clone(), m);
                m
            }
        };
        if matched {
            hits.insert(r.reference.clone());
            if !names.contains(&r.name) {
                names.push(r.name.clone());
            }
        }
    }
    let mut out: Vec<TurnView> = Vec::new();
    for name in names {
        let Ok(by_name) = crate::search::matcher(&name) else {
            continue;
        };
        for t in crate::search::search_with(repo, &by_name, &name)?.turns {
            if t.attachments.iter().any(|a| hits.contains(&a.reference))
                && !out.iter().any(|o| o.turn == t.turn)
            {
                out.push(t);
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
    let projection = history::project_prefix(repo, prefix)?;
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
    let (projection, entries) = history::project_scope_with_records(repo, session)?;
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
