//! The matcher of `history --search`: a literal, matched case-insensitively (Unicode simple
//! case folding) in raw bytes, as ripgrep's engine matches it.
//!
//! Most searched words are ASCII, and an ASCII character folds only to its other case, but
//! `k` (also the Kelvin sign) and `s` (also the long s). Such a literal is found with
//! `memchr` and a few comparisons, which cost nothing to build; the regex engine took
//! 0.13-0.15 ms to build for a 12-letter word, more than the rest of an indexed search of
//! 100 turns. A non-ASCII literal, or one made only of `k`s and `s`s, is left to the regex
//! engine, as are haystacks over [`SHORT`] bytes.

use std::ops::Range;
use std::sync::OnceLock;

use regex_automata::meta;
use regex_automata::util::syntax;

/// A case-insensitive literal (see the module comment).
#[derive(Debug)]
pub struct Matcher {
    text: String,
    literal: Option<Literal>,
    regex: OnceLock<Result<meta::Regex, String>>,
}

/// One character of a literal made of ASCII characters: its two cases, and the one
/// non-ASCII character that also folds to it (the Kelvin sign for `k`, the long s for `s`).
#[derive(Clone, Copy, Debug)]
struct Atom {
    lower: u8,
    upper: u8,
    other: &'static [u8],
}

impl Atom {
    fn of(b: u8) -> Atom {
        let lower = b.to_ascii_lowercase();
        Atom {
            lower,
            upper: b.to_ascii_uppercase(),
            other: match lower {
                b'k' => "\u{212a}".as_bytes(),
                b's' => "\u{17f}".as_bytes(),
                _ => b"",
            },
        }
    }

    fn is(&self, b: u8) -> bool {
        b == self.lower || b == self.upper
    }

    /// The end of this atom's match starting at `at`.
    fn forward(&self, hay: &[u8], at: usize) -> Option<usize> {
        match hay.get(at) {
            Some(&b) if self.is(b) => Some(at + 1),
            _ if !self.other.is_empty() && hay[at.min(hay.len())..].starts_with(self.other) => {
                Some(at + self.other.len())
            }
            _ => None,
        }
    }

    /// The start of this atom's match ending at `end`.
    fn backward(&self, hay: &[u8], end: usize) -> Option<usize> {
        match end.checked_sub(1).map(|i| hay[i]) {
            Some(b) if self.is(b) => Some(end - 1),
            _ if !self.other.is_empty() && hay[..end].ends_with(self.other) => {
                Some(end - self.other.len())
            }
            _ => None,
        }
    }
}

/// A literal of ASCII characters: a match is each character in either case (or, for `k`
/// and `s`, the non-ASCII character that folds to it), found from its rarest character that
/// has no such other character.
#[derive(Debug)]
struct Literal {
    atoms: Vec<Atom>,
    /// The atom looked for with `memchr`.
    rare: usize,
}

impl Literal {
    fn new(text: &str) -> Option<Literal> {
        if !text.is_ascii() {
            return None;
        }
        let atoms: Vec<Atom> = text.bytes().map(Atom::of).collect();
        let rare = (0..atoms.len())
            .filter(|&i| atoms[i].other.is_empty())
            .min_by_key(|&i| rank(atoms[i].lower))?;
        Some(Literal { atoms, rare })
    }

    /// The match whose rare atom is at `hit`, if there is one.
    fn around(&self, hay: &[u8], hit: usize) -> Option<Range<usize>> {
        let mut start = hit;
        for a in self.atoms[..self.rare].iter().rev() {
            start = a.backward(hay, start)?;
        }
        let mut end = hit + 1;
        for a in &self.atoms[self.rare + 1..] {
            end = a.forward(hay, end)?;
        }
        Some(start..end)
    }

    /// The leftmost match starting at `from` or later. Matches are found in the order of
    /// their rare atoms, which is the order of their starts: the atoms before the rare one
    /// never hold its character (the first of the rarest is chosen), so a match whose rare
    /// atom comes later cannot span an earlier match's rare atom to start before it.
    fn find(&self, hay: &[u8], from: usize) -> Option<Range<usize>> {
        let a = self.atoms[self.rare];
        let mut at = from + self.rare;
        while at < hay.len() {
            let hit = at + memchr::memchr2(a.lower, a.upper, &hay[at..])?;
            at = hit + 1;
            if let Some(m) = self.around(hay, hit).filter(|m| m.start >= from) {
                return Some(m);
            }
        }
        None
    }
}

/// How rare a lower-cased ASCII byte is in text, lowest first (letters by their frequency in
/// English; digits and punctuation rarer than most letters, spaces the most common).
fn rank(b: u8) -> u8 {
    const LETTERS: &[u8; 26] = b"etaoinsrhldcumfpgwybvkxjqz";
    match b {
        b' ' | b'\n' | b'\t' => 255,
        b'a'..=b'z' => 254 - LETTERS.iter().position(|&l| l == b).unwrap_or(0) as u8 * 8,
        _ => 20,
    }
}

/// Past this many bytes, a search runs the regex engine (its SIMD prefilters scan faster
/// than one `memchr` when the rare byte is common); below it, the literal's own search,
/// which costs nothing to build.
const SHORT: usize = 1 << 20;

impl Matcher {
    /// The matcher of `text`. Fails (with the reason) only past the regex engine's size
    /// limits, for a text of many kilobytes that is not plain ASCII.
    pub fn new(text: &str) -> Result<Matcher, String> {
        let m = Matcher {
            text: text.to_owned(),
            literal: Literal::new(text),
            regex: OnceLock::new(),
        };
        if m.literal.is_none() {
            m.regex()?;
        }
        Ok(m)
    }

    fn regex(&self) -> Result<&meta::Regex, String> {
        self.regex
            .get_or_init(|| regex_of(&self.text))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether `hay` holds a match.
    pub fn is_match(&self, hay: impl AsRef<[u8]>) -> bool {
        self.find_iter(hay.as_ref()).next().is_some()
    }

    /// The matches in `hay`, leftmost first and not overlapping, as byte ranges.
    pub fn find_iter<'h>(&'h self, hay: &'h [u8]) -> Matches<'h> {
        let regex = if self.literal.is_none() || hay.len() > SHORT {
            self.regex().ok()
        } else {
            None
        };
        Matches(match (regex, &self.literal) {
            (Some(re), _) => Iter::Regex(re.find_iter(hay)),
            (None, Some(literal)) => Iter::Literal {
                literal,
                hay,
                at: 0,
            },
            (None, None) => Iter::Done,
        })
    }
}

/// The regex engine's matcher of `text`: each character matches its simple case folding
/// class, in raw bytes. Without the full DFA, which only made the build slower (0.39
/// against 0.15 ms for a 12-letter word) and a scan of 16 MiB no faster.
fn regex_of(text: &str) -> Result<meta::Regex, String> {
    meta::Regex::builder()
        .syntax(
            syntax::Config::new()
                .case_insensitive(true)
                .unicode(true)
                .utf8(false),
        )
        .configure(meta::Config::new().dfa(false).utf8_empty(false))
        .build(&regex_syntax::escape(text))
        .map_err(|e| e.to_string())
}

/// The iterator of [`Matcher::find_iter`].
pub struct Matches<'h>(Iter<'h>);

enum Iter<'h> {
    Literal {
        literal: &'h Literal,
        hay: &'h [u8],
        /// Where the next match may start.
        at: usize,
    },
    Regex(meta::FindMatches<'h, 'h>),
    /// No matcher (a regex that could not be built for a text that needs one).
    Done,
}

impl Iterator for Matches<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        match &mut self.0 {
            Iter::Regex(it) => it.next().map(|m| m.range()),
            Iter::Literal { literal, hay, at } => {
                let m = literal.find(hay, *at)?;
                *at = m.end;
                Some(m)
            }
            Iter::Done => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};

    /// Each ASCII character folds to its two cases, and `k` and `s` to one more character:
    /// what [`Atom::of`] says, checked against the folding tables of the regex engine.
    #[test]
    fn atoms_are_the_folding_classes_of_ascii_characters() {
        for b in 0u8..128 {
            let c = char::from(b);
            let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
            class.case_fold_simple();
            let mut members: Vec<char> = class.iter().flat_map(|r| r.start()..=r.end()).collect();
            members.sort_unstable();
            let a = Atom::of(b);
            let mut expected: Vec<char> = vec![char::from(a.lower), char::from(a.upper)];
            expected.extend(std::str::from_utf8(a.other).expect("utf-8").chars());
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(members, expected, "{c:?}");
        }
    }

    /// The literal's own search finds exactly the regex engine's matches, in haystacks made
    /// of the literal's letters in both cases, the Kelvin sign and the long s, other UTF-8
    /// and invalid bytes.
    #[test]
    fn the_literal_search_finds_what_the_regex_finds() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let letters = ["a", "B", "k", "S", "-", " "];
        let pieces = [
            "a", "A", "b", "B", "k", "K", "s", "S", "-", " ", "\u{212a}", "\u{17f}", "é", "\0",
            "\u{212b}", "ab", "sk",
        ];
        let mut literal_used = 0;
        for round in 0..20_000 {
            let text: String = (0..1 + next(5))
                .map(|_| letters[next(letters.len())])
                .collect();
            let m = Matcher::new(&text).expect("matcher");
            literal_used += usize::from(m.literal.is_some());
            let re = regex_of(&text).expect("regex");
            let mut hay = (0..next(30))
                .map(|_| pieces[next(pieces.len())])
                .collect::<String>()
                .into_bytes();
            if round % 4 == 0 && !hay.is_empty() {
                let i = next(hay.len());
                hay[i] = [0xff, 0x84, 0xe2, 0xc5][next(4)];
            }
            let ours: Vec<_> = m.find_iter(&hay).collect();
            let theirs: Vec<_> = re.find_iter(&hay).map(|m| m.range()).collect();
            assert_eq!(
                ours,
                theirs,
                "{text:?} in {:?}",
                String::from_utf8_lossy(&hay)
            );
            assert_eq!(m.is_match(&hay), !theirs.is_empty());
        }
        assert!(literal_used > 10_000, "{literal_used}");
    }

    #[test]
    fn literals_of_other_characters_go_to_the_regex() {
        for text in ["café", "ǅ", "sks", "K"] {
            assert!(
                Matcher::new(text).expect("matcher").literal.is_none(),
                "{text:?}"
            );
        }
        let m = Matcher::new("kelvin").expect("m");
        assert!(m.literal.is_some());
        assert!(m.is_match("\u{212a}ELVIN"));
        let m = Matcher::new("quasarneedle").expect("m");
        assert!(m.is_match("a QuaſarNeedle."));
        assert!(!m.is_match("Quasar-Needle"));
        assert_eq!(m.find_iter(b"xquasarneedlequasarneedle").count(), 2);
        // A long haystack is searched by the regex engine, with the same result.
        let mut long = vec![b'x'; SHORT + 10];
        long.extend_from_slice("QUAſARneedle".as_bytes());
        assert_eq!(
            m.find_iter(&long).collect::<Vec<_>>(),
            vec![SHORT + 10..SHORT + 23]
        );
    }
}
