//! Lattice activation: who answers a turn of a multi-agent session.
//!
//! The rule (docs/teams.md):
//!
//! 1. Each agent of the session carries an activation from its previous turn (0 at first).
//!    Each user turn first decays it: `decayed = previous × max(0, 1 − activation_decay)`.
//! 2. The turn raises it by the request's relevance to the agent, a number in 0..1: the
//!    similarity of the request to the agent's id, name, system prompt and recent outputs
//!    (the memory embedder's cosine when its model is available, else the lexical fallback:
//!    the share of the request's words found in that text).
//!    `activation = decayed + relevance`.
//! 3. An explicit `@agent` mention raises it past its threshold:
//!    `activation = max(activation, threshold) + 1`.
//! 4. Agents at or above their `activation_threshold` answer, in `depends_on` order (the
//!    session's listing order among equals), each seeing the earlier answers of the turn.
//!    If none is, the most activated one answers (the first listed among equals).
//!
//! The activation after the turn is what the next turn decays.

use std::collections::BTreeSet;

/// Default `activation_threshold`.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// Default `activation_decay`.
pub const DEFAULT_DECAY: f64 = 0.5;

/// What the rule knows of one agent.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub agent: String,
    pub depends_on: Vec<String>,
    pub threshold: f64,
    pub decay: f64,
    /// Its activation after the previous turn.
    pub previous: f64,
    /// The request's relevance to it (0..1).
    pub relevance: f64,
}

/// The rule's verdict for one agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub agent: String,
    pub decayed: f64,
    pub relevance: f64,
    pub mentioned: bool,
    pub activation: f64,
    pub threshold: f64,
    /// Its place among those who answer (0 first), or `None`.
    pub order: Option<usize>,
    pub reason: String,
}

/// The agents a request mentions as `@agent`: the whole id after an `@` that does not follow
/// a letter or digit.
pub fn mentions(request: &str, agents: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in request.match_indices('@') {
        // `name@host` is an address, not a mention.
        if request[..i]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
        {
            continue;
        }
        let rest = &request[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let name = rest[..end].trim_end_matches('.');
        if let Some(a) = agents.iter().find(|a| a.as_str() == name) {
            out.insert(a.clone());
        }
    }
    out
}

/// Applies the rule to `candidates` (in the session's listing order).
pub fn decide(candidates: &[Candidate], request: &str) -> Vec<Decision> {
    let ids: Vec<String> = candidates.iter().map(|c| c.agent.clone()).collect();
    let mentioned = mentions(request, &ids);
    let mut out: Vec<Decision> = candidates
        .iter()
        .map(|c| {
            let decayed = c.previous * (1.0 - c.decay).max(0.0);
            let is_mentioned = mentioned.contains(&c.agent);
            let mut activation = decayed + c.relevance;
            if is_mentioned {
                activation = activation.max(c.threshold) + 1.0;
            }
            Decision {
                agent: c.agent.clone(),
                decayed,
                relevance: c.relevance,
                mentioned: is_mentioned,
                activation,
                threshold: c.threshold,
                order: None,
                reason: String::new(),
            }
        })
        .collect();
    let above: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].activation >= out[i].threshold)
        .collect();
    let answering = if above.is_empty() {
        let best = (0..out.len()).fold(None::<usize>, |best, i| match best {
            Some(b) if out[b].activation >= out[i].activation => Some(b),
            _ => Some(i),
        });
        best.into_iter().collect()
    } else {
        by_dependencies(candidates, &above)
    };
    for (place, &i) in answering.iter().enumerate() {
        out[i].order = Some(place);
    }
    let fallback = above.is_empty();
    for d in out.iter_mut() {
        d.reason = reason(d, fallback);
    }
    out
}

fn reason(d: &Decision, fallback: bool) -> String {
    let numbers = format!(
        "activation {:.2} = decayed {:.2} + relevance {:.2}{}, threshold {:.2}",
        d.activation,
        d.decayed,
        d.relevance,
        if d.mentioned {
            ", raised by @mention"
        } else {
            ""
        },
        d.threshold
    );
    match (d.order, d.mentioned, fallback) {
        (Some(_), true, _) => format!("answered: mentioned as @{} ({numbers})", d.agent),
        (Some(_), false, false) => format!("answered: at or above its threshold ({numbers})"),
        (Some(_), false, true) => {
            format!("answered: no agent reached its threshold and it was the most activated ({numbers})")
        }
        (None, _, _) => format!("did not answer: below its threshold ({numbers})"),
    }
}

/// `chosen` (indices into `candidates`) in `depends_on` order, listing order among equals.
fn by_dependencies(candidates: &[Candidate], chosen: &[usize]) -> Vec<usize> {
    let mut left: Vec<usize> = chosen.to_vec();
    let mut out: Vec<usize> = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let next = left.iter().position(|&i| {
            candidates[i]
                .depends_on
                .iter()
                .all(|d| !left.iter().any(|&j| j != i && candidates[j].agent == *d))
        });
        out.push(left.remove(next.unwrap_or(0)));
    }
    out
}

/// The relevance of `request` to an agent described by `profile`, in 0..1: the cosine of
/// their embeddings when the memory embedder's model is available, else
/// [`lexical_relevance`].
pub fn relevance(request: &str, profile: &str) -> f64 {
    if let Ok(embedder) = crate::memory::embed::Embedder::shared() {
        if let Ok(v) = embedder.embed(&[request, profile]) {
            if let [a, b] = v.as_slice() {
                let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
                return f64::from(dot).clamp(0.0, 1.0);
            }
        }
    }
    lexical_relevance(request, profile)
}

/// The lexical fallback of relevance: the share of the request's words (lowercased letters
/// and digits, 3 characters or more, common English words left out) that occur in
/// `profile`.
pub fn lexical_relevance(request: &str, profile: &str) -> f64 {
    let query = words(request);
    if query.is_empty() {
        return 0.0;
    }
    let have = words(profile);
    let hits = query.iter().filter(|w| have.contains(*w)).count();
    hits as f64 / query.len() as f64
}

const STOP: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "her", "was", "one",
    "our", "out", "has", "have", "had", "his", "how", "its", "may", "new", "now", "see", "who",
    "did", "get", "let", "say", "she", "too", "use", "that", "this", "with", "what", "from",
    "they", "will", "would", "there", "their", "about", "which", "when", "make", "like", "into",
    "than", "them", "then", "these", "some", "your", "please", "could", "should",
];

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .collect()
}

/// From thousandths, as recorded.
pub fn from_milli(v: i64) -> f64 {
    v as f64 / 1000.0
}

/// To thousandths, as recorded.
pub fn to_milli(v: f64) -> i64 {
    (v * 1000.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(agent: &str, previous: f64, relevance: f64, deps: &[&str]) -> Candidate {
        Candidate {
            agent: agent.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            threshold: DEFAULT_THRESHOLD,
            decay: DEFAULT_DECAY,
            previous,
            relevance,
        }
    }

    fn answering(d: &[Decision]) -> Vec<&str> {
        let mut a: Vec<&Decision> = d.iter().filter(|d| d.order.is_some()).collect();
        a.sort_by_key(|d| d.order);
        a.into_iter().map(|d| d.agent.as_str()).collect()
    }

    #[test]
    fn a_mention_raises_past_the_threshold() {
        let d = decide(
            &[cand("a", 0.0, 0.0, &[]), cand("b", 0.0, 0.0, &[])],
            "what do you think, @b?",
        );
        assert_eq!(answering(&d), ["b"]);
        assert!(d[1].mentioned && d[1].activation >= 1.5);
        assert!(
            d[1].reason.starts_with("answered: mentioned as @b"),
            "{}",
            d[1].reason
        );
        assert!(d[0].reason.starts_with("did not answer"));
    }

    #[test]
    fn activation_decays_per_turn_and_relevance_adds() {
        // previous 1.0 decays by half to 0.5: at the threshold, so it answers.
        let d = decide(&[cand("a", 1.0, 0.0, &[]), cand("b", 0.2, 0.1, &[])], "x");
        assert_eq!(d[0].decayed, 0.5);
        assert!((d[1].activation - 0.2).abs() < 1e-9);
        assert_eq!(answering(&d), ["a"]);
        // Next turn: 0.25, below: the most activated answers anyway.
        let d = decide(&[cand("a", 0.5, 0.0, &[]), cand("b", 0.2, 0.1, &[])], "x");
        assert_eq!(d[0].decayed, 0.25);
        assert_eq!(answering(&d), ["a"]);
        assert!(d[0].reason.contains("most activated"), "{}", d[0].reason);
    }

    #[test]
    fn those_above_answer_in_depends_on_order() {
        let d = decide(
            &[
                cand("writer", 0.0, 0.9, &["researcher"]),
                cand("researcher", 0.0, 0.6, &[]),
                cand("idle", 0.0, 0.1, &[]),
            ],
            "x",
        );
        assert_eq!(answering(&d), ["researcher", "writer"]);
    }

    #[test]
    fn mentions_need_a_whole_known_id() {
        let agents = vec!["b".to_owned(), "bob".to_owned()];
        let m = mentions("ask @bob, not @bo or email@b.", &agents);
        assert_eq!(m.into_iter().collect::<Vec<_>>(), ["bob"]);
        let m = mentions("@b.", &agents);
        assert_eq!(m.into_iter().collect::<Vec<_>>(), ["b"]);
    }

    #[test]
    fn lexical_relevance_is_the_share_of_request_words_found() {
        let r = lexical_relevance(
            "Review the Rust code please",
            "A careful Rust code reviewer",
        );
        assert!((r - 2.0 / 3.0).abs() < 1e-9, "{r}");
        assert_eq!(lexical_relevance("", "x"), 0.0);
    }
}
