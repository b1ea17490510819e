//! Numbers within `minimum`/`maximum`, decided digit by digit.
//!
//! The grammar writes numbers as `-?(0|[1-9][0-9]*)(\.[0-9]+)?` (no exponent), at most
//! [`NUM_MAX`] bytes (16 for integers, exact in an `f64`). A prefix may be extended when some
//! completion of it is in range, and a *witness* shows it: the prefix itself (with a `0`
//! after a trailing `-` or `.`), or a bound written out (`minimum`, `maximum`, and for
//! integers the whole numbers inside them). Following a witness keeps one at every step, so
//! the grammar never reaches a prefix it cannot finish; a prefix whose only completions have
//! no witness is refused, which only narrows what is generated.

/// The bounds of a number node.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NumRule {
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Whole numbers only (`type: integer`).
    pub integer: bool,
}

/// The longest number generated.
pub const NUM_MAX: usize = 24;
/// The longest integer generated: a sign and 15 digits, all exact in an `f64`.
const INT_MAX: usize = 16;

fn cap(rule: &NumRule) -> usize {
    if rule.integer {
        INT_MAX
    } else {
        NUM_MAX
    }
}

/// Whether `text` starts a number of the grammar.
fn prefix_ok(text: &[u8], integer: bool) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let (int, frac) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
        None => (digits, None),
    };
    if !int.iter().all(u8::is_ascii_digit) || (int.len() > 1 && int[0] == b'0') {
        return false;
    }
    match frac {
        None => true,
        Some(f) => !integer && !int.is_empty() && f.iter().all(u8::is_ascii_digit),
    }
}

/// Whether `text` is a whole number of the grammar (not a prefix of one).
fn whole(text: &[u8], integer: bool) -> bool {
    prefix_ok(text, integer)
        && text.last().is_some_and(u8::is_ascii_digit)
        && text.len() <= if integer { INT_MAX } else { NUM_MAX }
}

fn in_range(text: &[u8], rule: &NumRule) -> bool {
    let Some(v) = std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
    else {
        return false;
    };
    rule.min.is_none_or(|m| v >= m) && rule.max.is_none_or(|m| v <= m)
}

/// Whether `text` is a number the rule accepts.
pub fn complete(text: &[u8], rule: &NumRule) -> bool {
    whole(text, rule.integer) && in_range(text, rule)
}

/// `text` finished the shortest way: a `0` after a trailing `-` or `.`.
fn padded(text: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    if out.last().is_none_or(|&b| b == b'-' || b == b'.') {
        out.push(b'0');
    }
    out
}

fn witnesses(rule: &NumRule) -> Vec<Vec<u8>> {
    let mut out = vec![b"0".to_vec()];
    for (bound, round) in [
        (rule.min, f64::ceil as fn(f64) -> f64),
        (rule.max, f64::floor),
    ] {
        if let Some(b) = bound {
            out.push(format!("{b}").into_bytes());
            if rule.integer && b.abs() < 1e15 {
                out.push(format!("{}", round(b)).into_bytes());
            }
        }
    }
    out
}

/// Whether some number the rule accepts starts with `text`.
pub fn viable(text: &[u8], rule: &NumRule) -> bool {
    if text.len() > cap(rule) || !prefix_ok(text, rule.integer) {
        return false;
    }
    close(text, rule).is_some()
}

/// The fewest bytes that finish `text` into a number the rule accepts.
pub fn close(text: &[u8], rule: &NumRule) -> Option<usize> {
    std::iter::once(padded(text))
        .chain(witnesses(rule))
        .filter(|w| w.starts_with(text) && complete(w, rule))
        .map(|w| w.len() - text.len())
        .min()
}

/// The shortest number the rule accepts.
pub fn shortest(rule: &NumRule) -> Option<Vec<u8>> {
    witnesses(rule)
        .into_iter()
        .filter(|w| complete(w, rule))
        .min_by_key(Vec::len)
}

/// Whether any number of the kind (`integer`) is within the rule's bounds.
pub fn satisfiable(rule: &NumRule, integer: bool) -> bool {
    shortest(&NumRule { integer, ..*rule }).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min: Option<f64>, max: Option<f64>, integer: bool) -> NumRule {
        NumRule { min, max, integer }
    }

    #[test]
    fn prefixes_follow_the_grammar() {
        let any = rule(None, None, false);
        for ok in [
            "", "-", "0", "-0", "0.", "0.5", "12", "12.", "12.25", "-3.0",
        ] {
            assert!(viable(ok.as_bytes(), &any), "{ok}");
        }
        for bad in ["01", "--1", "1.2.", "1e", ".5", "-.5", "+1", "1-"] {
            assert!(!viable(bad.as_bytes(), &any), "{bad}");
        }
        assert!(!viable(b"1.", &rule(None, None, true)));
        assert!(complete(b"12.25", &any) && !complete(b"12.", &any) && !complete(b"-", &any));
    }

    #[test]
    fn ranges_prune_prefixes_that_cannot_land_inside() {
        let r = rule(Some(0.5), Some(1.5), false);
        for ok in ["0", "0.", "0.5", "0.75", "1", "1.", "1.5", "1.25"] {
            assert!(viable(ok.as_bytes(), &r), "{ok}");
        }
        for bad in ["-", "2", "0.4", "0.49", "1.51", "10"] {
            assert!(!viable(bad.as_bytes(), &r), "{bad}");
        }
        let neg = rule(Some(-10.0), Some(-2.0), true);
        for ok in ["-", "-1", "-10", "-2", "-9"] {
            assert!(viable(ok.as_bytes(), &neg), "{ok}");
        }
        for bad in ["0", "-11", "-100", "-1.", "1"] {
            assert!(!viable(bad.as_bytes(), &neg), "{bad}");
        }
        assert_eq!(shortest(&neg), Some(b"-2".to_vec()));
        assert_eq!(shortest(&rule(Some(2.5), Some(2.7), true)), None);
        assert_eq!(shortest(&rule(Some(2.5), None, true)), Some(b"3".to_vec()));
        assert_eq!(close(b"-1", &neg), Some(1));
    }

    /// Every viable prefix can be finished: walking any digit that keeps it viable ends in a
    /// number in range.
    #[test]
    fn a_viable_prefix_never_dead_ends() {
        let rules = [
            rule(Some(0.1), Some(0.2), false),
            rule(Some(-7.25), Some(3.0), false),
            rule(Some(1.0 / 3.0), Some(2.0 / 3.0), false),
            rule(Some(18.0), Some(120.0), true),
            rule(Some(-1e9), Some(-999_999.5), true),
            rule(None, Some(-0.001), false),
        ];
        let alphabet = b"-0123456789.";
        for r in &rules {
            let mut stack = vec![Vec::new()];
            let mut seen = 0;
            while let Some(p) = stack.pop() {
                seen += 1;
                if seen > 20_000 {
                    break;
                }
                let next: Vec<Vec<u8>> = alphabet
                    .iter()
                    .map(|&b| [p.as_slice(), &[b]].concat())
                    .filter(|q| viable(q, r))
                    .collect();
                assert!(
                    complete(&p, r) || !next.is_empty(),
                    "{:?}: dead end at {:?}",
                    r,
                    String::from_utf8_lossy(&p)
                );
                stack.extend(next.into_iter().take(3));
            }
        }
    }
}
