//! Constrained decoding for `response_format: json`: a byte-level JSON recognizer.
//!
//! Before each sampled token the provider asks which tokens may follow, stepping the state
//! byte by byte ([`JsonState::push`]) down the vocabulary's trie, and masks the rest; after
//! the top-level object closes the reply ends. If the token budget
//! runs out first, [`JsonState::closing`] gives the shortest text that completes the document,
//! so the output always parses. The top level must be an object (OpenAI's `json_object`).
//!
//! Strings are checked as UTF-8 byte by byte (a character may span tokens), `\u` escapes of
//! surrogates are refused (serde_json rejects lone surrogates), and whitespace runs are capped
//! so a small model cannot idle in indentation.

/// Deepest nesting of objects and arrays (one bit per level).
const MAX_DEPTH: u8 = 64;
/// Longest run of whitespace between tokens of the document.
const MAX_WHITESPACE: u8 = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    /// After `-`: a digit must follow.
    Minus,
    /// A leading `0`: no more integer digits.
    Zero,
    Int,
    /// After `.`: a digit must follow.
    Dot,
    Frac,
    /// After `e`: a sign or digit.
    Exp,
    /// After `e+`: a digit must follow.
    ExpSign,
    ExpDigits,
}

impl Num {
    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Str {
    Plain,
    /// After a backslash.
    Escape,
    /// Inside `\uXXXX`, with the hex digits read so far and whether the first was `d`.
    Hex {
        read: u8,
        d: bool,
    },
    /// Inside a multi-byte character: `left` continuation bytes, the next in `lo..=hi`.
    Utf8 {
        left: u8,
        lo: u8,
        hi: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Before the document: `{` must come.
    Start,
    /// A value must come (after `:` or after `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    CommaOrClose,
    String {
        key: bool,
        at: Str,
    },
    Number(Num),
    /// Inside `true`, `false` or `null`: the bytes still expected.
    Literal {
        word: &'static [u8],
        at: u8,
    },
    /// The top-level object is closed.
    Done,
}

/// Where a JSON document is after the bytes fed so far. Small and `Copy`: the mask tries every
/// token on a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonState {
    mode: Mode,
    /// Bit `i` set: level `i` is an array, else an object (bits of levels not open: 0).
    stack: u64,
    depth: u8,
    whitespace: u8,
}

/// How many of the highest scores [`JsonState::greedy`] tries before the mask decides: in
/// JSON mode the model's own first choice is allowed most of the time.
const GREEDY_TRIES: usize = 4;

impl Default for JsonState {
    fn default() -> JsonState {
        JsonState::new()
    }
}

impl JsonState {
    pub fn new() -> JsonState {
        JsonState {
            mode: Mode::Start,
            stack: 0,
            depth: 0,
            whitespace: 0,
        }
    }

    /// Whether the top-level object has closed.
    pub fn is_done(&self) -> bool {
        self.mode == Mode::Done
    }

    /// Whether all of `bytes` may come next. Empty input is refused: it would not advance.
    /// (The mask asks it of the whole vocabulary at once: `Vocab::allowed_by` with
    /// [`JsonState::push`].)
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return false;
        }
        let mut s = *self;
        bytes.iter().all(|&b| s.push(b))
    }

    /// Greedy decoding's pick without masking the vocabulary: the highest scores in turn
    /// (`argmax`, which picks the first highest) until a token whose bytes (`bytes_of`,
    /// empty for a token that may never come) this state takes. That is the token the mask
    /// and `argmax` would pick: no allowed token scores higher, and none of the same score
    /// comes before it. It costs a check of a few tokens' bytes where the mask walks the
    /// vocabulary (~1.3 ms a token with SmolLM2's 49,152). `None` after [`GREEDY_TRIES`]
    /// refusals, when the mask decides; the scores of the tokens refused are ruled out.
    pub fn greedy<'v>(
        &self,
        scores: &mut [f32],
        bytes_of: impl Fn(u32) -> &'v [u8],
        argmax: impl Fn(&[f32]) -> u32,
    ) -> Option<u32> {
        for _ in 0..GREEDY_TRIES {
            let id = argmax(scores);
            let score = scores.get_mut(id as usize)?;
            if *score == f32::NEG_INFINITY {
                return None;
            }
            if self.accepts(bytes_of(id)) {
                return Some(id);
            }
            *score = f32::NEG_INFINITY;
        }
        None
    }

    /// Feeds `bytes`; returns false (state unspecified) if they break the grammar.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.push(b))
    }

    /// The shortest bytes that turn what was fed into a complete document. Bytes, not text:
    /// they may finish a character whose first bytes were already fed.
    pub fn closing(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self.mode {
            Mode::Start => return b"{}".to_vec(),
            Mode::Done => return out,
            Mode::Value => out.extend_from_slice(b"null"),
            Mode::ValueOrClose | Mode::KeyOrClose | Mode::CommaOrClose => {}
            Mode::Key => out.extend_from_slice(b"\"\":null"),
            Mode::Colon => out.extend_from_slice(b":null"),
            Mode::String { key, at } => {
                match at {
                    Str::Plain => {}
                    Str::Escape => out.push(b'n'),
                    Str::Hex { read, .. } => (read..4).for_each(|_| out.push(b'0')),
                    Str::Utf8 { .. } => {
                        // Finish the character with the smallest allowed bytes.
                        let mut s = *self;
                        while let Mode::String {
                            at: Str::Utf8 { lo, .. },
                            ..
                        } = s.mode
                        {
                            out.push(lo);
                            s.push(lo);
                        }
                    }
                }
                out.push(b'"');
                if key {
                    out.extend_from_slice(b":null");
                }
            }
            Mode::Number(n) => {
                if !n.complete() {
                    out.push(b'0');
                }
            }
            Mode::Literal { word, at } => out.extend_from_slice(&word[usize::from(at)..]),
        }
        for level in (0..self.depth).rev() {
            out.push(if self.stack >> level & 1 == 1 {
                b']'
            } else {
                b'}'
            });
        }
        out
    }

    pub(super) fn push(&mut self, b: u8) -> bool {
        let ws = matches!(b, b' ' | b'\n' | b'\t' | b'\r');
        match self.mode {
            Mode::String { key, at } => return self.push_string(key, at, b),
            Mode::Number(n) => {
                if let Some(next) = number_step(n, b) {
                    self.mode = Mode::Number(next);
                    return true;
                }
                if !n.complete() {
                    return false;
                }
                self.mode = Mode::CommaOrClose;
            }
            Mode::Literal { word, at } => {
                if word.get(usize::from(at)) != Some(&b) {
                    return false;
                }
                let at = at + 1;
                self.mode = if usize::from(at) == word.len() {
                    Mode::CommaOrClose
                } else {
                    Mode::Literal { word, at }
                };
                return true;
            }
            _ => {}
        }
        if ws {
            if self.whitespace >= MAX_WHITESPACE {
                return false;
            }
            self.whitespace += 1;
            return true;
        }
        self.whitespace = 0;
        match self.mode {
            Mode::Start => b == b'{' && self.open(false),
            Mode::Done => false,
            Mode::Value => self.value(b),
            Mode::ValueOrClose => (b == b']' && self.close(true)) || self.value(b),
            Mode::KeyOrClose => (b == b'}' && self.close(false)) || self.key(b),
            Mode::Key => self.key(b),
            Mode::Colon => {
                self.mode = Mode::Value;
                b == b':'
            }
            Mode::CommaOrClose => {
                let array = self.in_array();
                match b {
                    b',' => {
                        self.mode = if array { Mode::Value } else { Mode::Key };
                        true
                    }
                    b']' => array && self.close(true),
                    b'}' => !array && self.close(false),
                    _ => false,
                }
            }
            Mode::String { .. } | Mode::Number(_) | Mode::Literal { .. } => false,
        }
    }

    fn in_array(&self) -> bool {
        self.depth > 0 && self.stack >> (self.depth - 1) & 1 == 1
    }

    fn open(&mut self, array: bool) -> bool {
        if self.depth >= MAX_DEPTH {
            return false;
        }
        if array {
            self.stack |= 1 << self.depth;
        } else {
            self.stack &= !(1 << self.depth);
        }
        self.depth += 1;
        self.mode = if array {
            Mode::ValueOrClose
        } else {
            Mode::KeyOrClose
        };
        true
    }

    fn close(&mut self, array: bool) -> bool {
        if self.depth == 0 || self.in_array() != array {
            return false;
        }
        self.depth -= 1;
        // Only the open levels' bits are set, so that equal states compare equal (JSON mode
        // keeps the masks of the states it was in).
        self.stack &= !(1 << self.depth);
        self.mode = if self.depth == 0 {
            Mode::Done
        } else {
            Mode::CommaOrClose
        };
        true
    }

    fn key(&mut self, b: u8) -> bool {
        self.mode = Mode::String {
            key: true,
            at: Str::Plain,
        };
        b == b'"'
    }

    fn value(&mut self, b: u8) -> bool {
        self.mode = match b {
            b'{' => return self.open(false),
            b'[' => return self.open(true),
            b'"' => Mode::String {
                key: false,
                at: Str::Plain,
            },
            b'-' => Mode::Number(Num::Minus),
            b'0' => Mode::Number(Num::Zero),
            b'1'..=b'9' => Mode::Number(Num::Int),
            b't' => Mode::Literal {
                word: b"true",
                at: 1,
            },
            b'f' => Mode::Literal {
                word: b"false",
                at: 1,
            },
            b'n' => Mode::Literal {
                word: b"null",
                at: 1,
            },
            _ => return false,
        };
        true
    }

    fn push_string(&mut self, key: bool, at: Str, b: u8) -> bool {
        let next = match at {
            Str::Plain => match b {
                b'"' => {
                    self.mode = if key { Mode::Colon } else { Mode::CommaOrClose };
                    return true;
                }
                b'\\' => Str::Escape,
                0x00..=0x1F => return false,
                0x20..=0x7F => Str::Plain,
                0xC2..=0xDF => utf8(1, 0x80, 0xBF),
                0xE0 => utf8(2, 0xA0, 0xBF),
                0xED => utf8(2, 0x80, 0x9F),
                0xE1..=0xEF => utf8(2, 0x80, 0xBF),
                0xF0 => utf8(3, 0x90, 0xBF),
                0xF1..=0xF3 => utf8(3, 0x80, 0xBF),
                0xF4 => utf8(3, 0x80, 0x8F),
                _ => return false,
            },
            Str::Utf8 { left, lo, hi } => {
                if b < lo || b > hi {
                    return false;
                }
                if left == 1 {
                    Str::Plain
                } else {
                    utf8(left - 1, 0x80, 0xBF)
                }
            }
            Str::Escape => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Str::Plain,
                b'u' => Str::Hex { read: 0, d: false },
                _ => return false,
            },
            Str::Hex { read, d } => {
                if !b.is_ascii_hexdigit() {
                    return false;
                }
                // \uD800..\uDFFF: surrogates, refused.
                if read == 1 && d && matches!(b, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F') {
                    return false;
                }
                if read == 3 {
                    Str::Plain
                } else {
                    Str::Hex {
                        read: read + 1,
                        d: read == 0 && matches!(b, b'd' | b'D'),
                    }
                }
            }
        };
        self.mode = Mode::String { key, at: next };
        true
    }
}

fn utf8(left: u8, lo: u8, hi: u8) -> Str {
    Str::Utf8 { left, lo, hi }
}

fn number_step(n: Num, b: u8) -> Option<Num> {
    let digit = b.is_ascii_digit();
    Some(match (n, b) {
        (Num::Minus, b'0') => Num::Zero,
        (Num::Minus, _) if digit => Num::Int,
        (Num::Int, _) if digit => Num::Int,
        (Num::Zero | Num::Int, b'.') => Num::Dot,
        (Num::Dot | Num::Frac, _) if digit => Num::Frac,
        (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
        (Num::Exp, b'+' | b'-') => Num::ExpSign,
        (Num::Exp | Num::ExpSign | Num::ExpDigits, _) if digit => Num::ExpDigits,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vocabulary's trie walked with the grammar allows exactly the tokens whose bytes
    /// the state accepts one token at a time, from every state a reply passes through.
    #[test]
    fn walking_the_vocabulary_allows_what_each_token_s_bytes_would() {
        let words: Vec<&[u8]> = vec![
            b"",
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b"\":",
            b"\": ",
            b":",
            b",",
            b", ",
            b" ",
            b"\n",
            b"a",
            b"ab",
            b"abc",
            b"true",
            b"tr",
            b"false",
            b"null",
            b"nu",
            b"1",
            b"12",
            b"-",
            b"-3",
            b"0.5",
            b"e",
            b"E+",
            b"\\",
            b"\\n",
            b"\\u",
            b"00e9",
            b"{\"",
            b"\"}",
            b"\"]",
            b"},",
            b"],",
            b"{\"a\":",
            "\u{e9}".as_bytes(),
            b"\xC3",
            b"\xA9",
            b"\x01",
        ];
        let vocab = super::super::schema_mask::Vocab::new(&words, &[]);
        let mut state = JsonState::new();
        let reply =
            "{\"ab\": [1, -3, 0.5e+2, true, null, \"a\\n\\u00e9\u{e9}\"], \"c\": {\"d\": false}}"
                .as_bytes();
        let mut allowed = Vec::new();
        for (i, &b) in reply.iter().enumerate() {
            vocab.allowed_by(state, |s, b| s.push(b), &mut allowed);
            for (id, word) in words.iter().enumerate() {
                assert_eq!(
                    allowed[id],
                    state.accepts(word),
                    "after {:?}, token {:?}",
                    String::from_utf8_lossy(&reply[..i]),
                    String::from_utf8_lossy(word)
                );
            }
            assert!(state.push(b), "the reply is JSON at byte {i}");
        }
    }

    /// Greedy decoding's shortcut picks what the mask then `argmax` picks, or leaves it to
    /// the mask, from every state of a reply, over scores with ties and refused favourites.
    #[test]
    fn greedy_picks_what_the_mask_would() {
        let words: Vec<&[u8]> = vec![
            b"", b"{", b"}", b"[", b"]", b"\"", b"\":", b":", b",", b" ", b"a", b"ab", b"true",
            b"1", b"-", b"0.5", b"\\", b"\\n", b"{\"", b"\"}", b"},", b"\x01", b"\n",
        ];
        let vocab = super::super::schema_mask::Vocab::new(&words, &[]);
        let reply = b"{\"ab\": [1, -3, true, \"a\\n\"], \"c\": {\"d\": 0.5}}";
        let argmax = super::super::argmax;
        let mut state = JsonState::new();
        let mut seed = 11u32;
        let (mut shortcut, mut masked) = (0, 0);
        let mut allowed = Vec::new();
        for (i, &b) in reply.iter().enumerate() {
            vocab.allowed_by(state, |s, b| s.push(b), &mut allowed);
            for _ in 0..20 {
                // Few distinct scores, so that ties are common.
                let scores: Vec<f32> = (0..words.len())
                    .map(|_| {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        ((seed >> 16) % 5) as f32
                    })
                    .collect();
                let mut want = scores.clone();
                for (s, ok) in want.iter_mut().zip(&allowed) {
                    if !ok {
                        *s = f32::NEG_INFINITY;
                    }
                }
                let want = argmax(&want);
                let mut tried = scores.clone();
                match state.greedy(&mut tried, |id| words[id as usize], argmax) {
                    Some(id) => {
                        shortcut += 1;
                        assert_eq!(id, want, "after {:?}", String::from_utf8_lossy(&reply[..i]));
                    }
                    None => masked += 1,
                }
            }
            assert!(state.push(b), "the reply is JSON at byte {i}");
        }
        assert!(
            shortcut > 0 && masked > 0,
            "{shortcut} picked, {masked} left to the mask"
        );
    }

    /// The masks JSON mode keeps are the masks of the states the reply is in, through a reply
    /// that comes back to states and goes through more states than are kept.
    #[test]
    fn a_kept_mask_is_the_mask_of_the_state() {
        let words: Vec<&[u8]> = vec![
            b"{", b"}", b"[", b"]", b"\"", b":", b",", b" ", b"a", b"1", b"]}", b"}]", b"]]",
            b"}}", b"]]}", b"}]]", b"1]}", b"1}]",
        ];
        let vocab = std::sync::Arc::new(super::super::schema_mask::Vocab::new(&words, &[]));
        let mut c = super::super::JsonConstraint {
            state: JsonState::new(),
            vocab: vocab.clone(),
            masks: Vec::new(),
            oldest: 0,
            spent: std::time::Duration::ZERO,
        };
        // 40 levels of nesting and back, twice: more states than are kept, each met again
        // after its mask was replaced. The levels are arrays and objects in an irregular
        // order, and tokens such as `]}` close two at once, so the masks of the levels differ.
        let pattern = 0x2c5a_93e1_76b4_u64;
        let (mut deep, mut close) = (Vec::new(), Vec::new());
        for level in 0..40 {
            if pattern >> level & 1 == 1 {
                deep.extend_from_slice(b"[1, \"a\", ");
                close.push(b']');
            } else {
                deep.extend_from_slice(b"{\"a\": ");
                close.push(b'}');
            }
        }
        deep.extend_from_slice(b"1");
        deep.extend(close.iter().rev());
        let reply = [&b"{\"a\": "[..], &deep, b", \"aa\": ", &deep, b"}"].concat();
        let mut fresh = Vec::new();
        for (i, &b) in reply.iter().enumerate() {
            vocab.allowed_by(c.state, |s, b| s.push(b), &mut fresh);
            assert_eq!(c.allowed(), &fresh[..], "at byte {i}");
            assert!(c.state.push(b), "the reply is JSON at byte {i}");
        }
        assert_eq!(c.masks.len(), super::super::KEPT_MASKS);
    }

    fn feed(text: &[u8]) -> Option<JsonState> {
        let mut s = JsonState::new();
        s.feed(text).then_some(s)
    }

    #[test]
    fn accepts_valid_documents() {
        for doc in [
            &br#"{}"#[..],
            br#"{"a": [1, -0.5e+3, true, null, "x\u00e9\n"], "b": {"c": false}}"#,
            "{\"k\": \"caf\u{e9} \u{1F600}\"}".as_bytes(),
            b"{ \"a\" : [ ] }",
        ] {
            let s = feed(doc);
            assert!(
                s.is_some_and(|s| s.is_done()),
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn refuses_invalid_continuations() {
        for bad in [
            &b"["[..],
            b"{a",
            b"{\"a\" 1",
            b"{\"a\":01",
            b"{\"a\":1,}",
            b"{\"a\":tru}",
            b"{\"a\":\"\n",
            b"{\"a\":\"\\ud800",
            b"{\"a\":\"\xC0",
            b"{}}",
            b"{\"a\":[}",
        ] {
            assert!(feed(bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn closing_completes_any_prefix() {
        let doc =
            "{\"a\": [1, {\"b\": \"x\\u00e9 \u{e9}\", \"c\": -2.5e3}], \"d\": true, \"e\": null}";
        let bytes = doc.as_bytes();
        for cut in 0..bytes.len() {
            let Some(state) = feed(&bytes[..cut]) else {
                panic!("prefix {cut} refused");
            };
            let mut text = bytes[..cut].to_vec();
            text.extend_from_slice(&state.closing());
            let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&text);
            assert!(parsed.is_ok(), "{}", String::from_utf8_lossy(&text));
        }
    }

    #[test]
    fn whitespace_runs_are_capped() {
        let s = JsonState::new();
        assert!(s.accepts(b"  {"));
        assert!(!s.accepts(&[b' '; 40]));
    }
}
