//! The lexical path: BM25 over the records' words.
//!
//! The index file (`axocoatl_store::semantic::lexical`) covers the records present when it
//! was built; records added since (the tail) are scored by reading their text, and the index
//! is rebuilt once the tail grows past an eighth of the store.

use std::collections::HashMap;

use axocoatl_store::semantic::{LexicalIndex, LexicalIndexBuilder};

/// BM25 parameters (the usual defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Words too common to say anything about a record.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so",
    "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we",
    "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you",
    "your",
];

/// The terms of a text: lowercased runs of letters and digits, stopwords dropped, a light
/// English suffix stripping (plurals, `-ing`, `-ed`) so that "deploys" finds "deployed".
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let lower = word.to_lowercase();
        if STOPWORDS.contains(&lower.as_str()) {
            continue;
        }
        out.push(stem(&lower));
    }
    out
}

fn stem(word: &str) -> String {
    if !word.is_ascii() || word.len() <= 3 {
        return word.to_owned();
    }
    for (suffix, keep) in [
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("s", ""),
    ] {
        if let Some(base) = word.strip_suffix(suffix) {
            let plural_like = suffix != "s"
                || !(base.ends_with('s') || base.ends_with('u') || base.ends_with('i'));
            if base.len() >= 3 && plural_like {
                return format!("{base}{keep}");
            }
        }
    }
    word.to_owned()
}

/// Builds an index over the terms of `docs`, in order.
pub fn build<'a>(docs: impl IntoIterator<Item = &'a str>) -> LexicalIndexBuilder {
    let mut b = LexicalIndexBuilder::new();
    for d in docs {
        let t = terms(d);
        b.add(t.iter().map(String::as_str));
    }
    b
}

/// BM25 of every record holding a query term, over the index (records `0..index.docs()`)
/// and the tail (records from `index.docs()` on, given as text). Scores are divided by the
/// query's upper bound (every term with an unbounded frequency in a short record), so they
/// lie in `[0, 1)`. Returns `(record, score)` pairs, best first, at most `top_k`.
pub fn search(
    index: Option<&LexicalIndex>,
    tail: &[String],
    query: &str,
    top_k: usize,
) -> Vec<(u64, f32)> {
    let mut query_terms = terms(query);
    query_terms.sort();
    query_terms.dedup();
    let base = index.map(|ix| ix.docs()).unwrap_or(0);
    let tail_terms: Vec<Vec<String>> = tail.iter().map(|t| terms(t)).collect();
    let n = base + tail.len() as u64;
    if n == 0 || query_terms.is_empty() || top_k == 0 {
        return Vec::new();
    }
    let total_len = index.map(|ix| ix.total_len()).unwrap_or(0)
        + tail_terms.iter().map(|t| t.len() as u64).sum::<u64>();
    let avgdl = (total_len as f32 / n as f32).max(1.0);
    let doc_len = |doc: u64| -> f32 {
        if doc < base {
            index.map(|ix| ix.doc_len(doc)).unwrap_or(0) as f32
        } else {
            tail_terms[(doc - base) as usize].len() as f32
        }
    };
    let mut scores: HashMap<u64, f32> = HashMap::new();
    let mut upper = 0f32;
    for term in &query_terms {
        let mut postings = index.map(|ix| ix.postings(term)).unwrap_or_default();
        for (i, t) in tail_terms.iter().enumerate() {
            let tf = t.iter().filter(|w| *w == term).count() as u32;
            if tf > 0 {
                postings.push((base + i as u64, tf));
            }
        }
        let df = postings.len() as f32;
        if df == 0.0 {
            continue;
        }
        let idf = (1.0 + (n as f32 - df + 0.5) / (df + 0.5)).ln();
        upper += idf * (K1 + 1.0);
        for (doc, tf) in postings {
            let tf = tf as f32;
            let norm = K1 * (1.0 - B + B * doc_len(doc) / avgdl);
            *scores.entry(doc).or_default() += idf * tf * (K1 + 1.0) / (tf + norm);
        }
    }
    if upper <= 0.0 {
        return Vec::new();
    }
    let mut ranked: Vec<(u64, f32)> = scores.into_iter().map(|(d, s)| (d, s / upper)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(top_k);
    ranked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_lowercased_stemmed_and_without_stopwords() {
        assert_eq!(
            terms("The servers were Deployed; deploying 2 caches!"),
            vec!["server", "deploy", "deploy", "2", "cache"]
        );
        assert_eq!(terms("Ünïcode STRASSE"), vec!["ünïcode", "strasse"]);
    }

    #[test]
    fn index_and_tail_score_alike() {
        let docs = [
            "the database backups run nightly",
            "my cat likes fish",
            "backups of the cat pictures",
        ];
        let whole = build(docs.iter().copied()).encode().expect("encode");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lexical");
        std::fs::write(&path, whole).expect("write");
        let ix = LexicalIndex::open(&path).expect("read").expect("checks");
        let from_index = search(Some(&ix), &[], "cat backups", 3);
        let tail: Vec<String> = docs.iter().map(|s| s.to_string()).collect();
        let from_tail = search(None, &tail, "cat backups", 3);
        let half = build(docs[..1].iter().copied()).encode().expect("encode");
        std::fs::write(&path, half).expect("write");
        let ix1 = LexicalIndex::open(&path).expect("read").expect("checks");
        let mixed = search(Some(&ix1), &tail[1..], "cat backups", 3);
        assert_eq!(from_index, from_tail);
        assert_eq!(from_index, mixed);
        assert_eq!(from_index[0].0, 2, "the record with both words first");
        assert!(from_index.iter().all(|&(_, s)| s > 0.0 && s < 1.0));
        assert!(search(Some(&ix), &[], "the of", 3).is_empty());
    }
}
