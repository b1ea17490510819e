//! BERT's tokenizer as the `tokenizers` crate runs it for all-MiniLM-L6-v2 (added tokens
//! matched in the raw text, the BERT normalizer, the BERT pre-tokenizer, WordPiece, then
//! `[CLS] … [SEP]`), over the vocabulary section of the model file: the sorted strings are
//! searched in place, so opening builds no hash map of 30,522 words.

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

use crate::config::Config;

/// The tokenizer of one model file.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// The vocabulary section (copied out of the mapping: half a megabyte).
    bytes: Vec<u8>,
    words: usize,
    added: usize,
    /// Where the vocabulary's offsets, its ids, the added tokens' offsets and ids, and the
    /// strings start.
    word_offsets: usize,
    word_ids: usize,
    added_offsets: usize,
    added_ids: usize,
    strings: usize,
    config: Config,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `\t`, `\n` and `\r` are control characters that BERT counts as whitespace.
fn is_bert_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_bert_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

fn is_chinese_char(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

fn is_bert_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

impl Tokenizer {
    /// Reads a vocabulary section (see [`crate::format`]); `Err` says what does not check.
    pub(crate) fn from_section(bytes: &[u8], config: &Config) -> Result<Tokenizer, String> {
        let bad = |why: &str| format!("vocabulary section: {why}");
        if bytes.len() < 8 {
            return Err(bad("too short"));
        }
        let words = le_u32(bytes, 0) as usize;
        let added = le_u32(bytes, 4) as usize;
        let word_offsets = 8;
        let word_ids = word_offsets + 4 * (words + 1);
        let added_offsets = word_ids + 4 * words;
        let added_ids = added_offsets + 4 * (added + 1);
        let strings = added_ids + 4 * added;
        if words != config.vocab || added > 1024 || strings > bytes.len() {
            return Err(bad("counts disagree with the file's size"));
        }
        let t = Tokenizer {
            bytes: bytes.to_vec(),
            words,
            added,
            word_offsets,
            word_ids,
            added_offsets,
            added_ids,
            strings,
            config: *config,
        };
        let blob = bytes.len() - strings;
        // Offsets rise to the blob's end; ids are in the table; words are sorted and UTF-8.
        let mut last = 0;
        for (offsets, n) in [(word_offsets, words), (added_offsets, added)] {
            for i in 0..=n {
                let o = le_u32(bytes, offsets + 4 * i) as usize;
                if o < last || o > blob {
                    return Err(bad("string offsets out of order"));
                }
                last = o;
            }
        }
        if last != blob {
            return Err(bad("strings do not end with the section"));
        }
        for i in 0..words {
            if t.word_id(i) as usize >= config.vocab
                || (i > 0 && t.word(i - 1) >= t.word(i))
                || std::str::from_utf8(t.word(i)).is_err()
            {
                return Err(bad("words unsorted, not UTF-8 or of ids past the table"));
            }
        }
        for i in 0..added {
            if t.added_id(i) as usize >= config.vocab
                || t.added_token(i).is_empty()
                || std::str::from_utf8(t.added_token(i)).is_err()
            {
                return Err(bad("an added token is empty or past the table"));
            }
        }
        Ok(t)
    }

    fn string(&self, offsets: usize, i: usize) -> &[u8] {
        let s = le_u32(&self.bytes, offsets + 4 * i) as usize;
        let e = le_u32(&self.bytes, offsets + 4 * (i + 1)) as usize;
        &self.bytes[self.strings + s..self.strings + e]
    }

    fn word(&self, i: usize) -> &[u8] {
        self.string(self.word_offsets, i)
    }

    fn word_id(&self, i: usize) -> u32 {
        le_u32(&self.bytes, self.word_ids + 4 * i)
    }

    fn added_token(&self, i: usize) -> &[u8] {
        self.string(self.added_offsets, i)
    }

    fn added_id(&self, i: usize) -> u32 {
        le_u32(&self.bytes, self.added_ids + 4 * i)
    }

    /// The id of vocabulary entry `piece`.
    fn find(&self, piece: &[u8]) -> Option<u32> {
        let (mut lo, mut hi) = (0, self.words);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.word(mid).cmp(piece) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.word_id(mid)),
            }
        }
        None
    }

    /// The longest added token at the start of `text`: its length and id.
    fn added_at(&self, text: &[u8]) -> Option<(usize, u32)> {
        (0..self.added)
            .filter(|&i| text.starts_with(self.added_token(i)))
            .map(|i| (self.added_token(i).len(), self.added_id(i)))
            .max_by_key(|&(len, _)| len)
    }

    /// The token ids of `text`: `[CLS]`, the text's pieces (cut to fit the window), `[SEP]`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let budget = self.config.max_tokens - 2;
        let mut ids = Vec::with_capacity(16);
        let bytes = text.as_bytes();
        let mut start = 0;
        let mut at = 0;
        while at < bytes.len() && ids.len() < budget {
            if let Some((len, id)) = self.added_at(&bytes[at..]) {
                self.encode_plain(&text[start..at], &mut ids, budget);
                if ids.len() < budget {
                    ids.push(id);
                }
                at += len;
                start = at;
            } else {
                at += 1;
                while at < bytes.len() && !text.is_char_boundary(at) {
                    at += 1;
                }
            }
        }
        if ids.len() < budget {
            self.encode_plain(&text[start..], &mut ids, budget);
        }
        ids.truncate(budget);
        let mut out = Vec::with_capacity(ids.len() + 2);
        out.push(self.config.cls);
        out.extend(ids);
        out.push(self.config.sep);
        out
    }

    /// The BERT normalizer's output for `text`.
    pub fn normalize(&self, text: &str) -> String {
        let c = &self.config;
        let mut out = String::with_capacity(text.len() + 8);
        for ch in text.chars() {
            let ch = if c.clean_text {
                if ch == '\0' || ch == '\u{fffd}' || is_bert_control(ch) {
                    continue;
                }
                if is_bert_whitespace(ch) {
                    ' '
                } else {
                    ch
                }
            } else {
                ch
            };
            if c.chinese_chars && is_chinese_char(ch) {
                out.push(' ');
                out.push(ch);
                out.push(' ');
            } else {
                out.push(ch);
            }
        }
        if c.strip_accents {
            out = out
                .as_str()
                .nfd()
                .map(|(ch, _)| ch)
                .filter(|ch| !ch.is_mark_nonspacing())
                .collect();
        }
        if c.lowercase && (!out.is_ascii() || out.bytes().any(|b| b.is_ascii_uppercase())) {
            out = out.chars().flat_map(char::to_lowercase).collect();
        }
        out
    }

    /// Text without added tokens: normalized, split into words and punctuation, each word
    /// into WordPiece pieces, appended to `ids` while there is room.
    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>, budget: usize) {
        if text.is_empty() {
            return;
        }
        let normalized = self.normalize(text);
        let mut piece = String::new();
        for chunk in normalized.split(char::is_whitespace) {
            let mut word_start = 0;
            for (i, ch) in chunk.char_indices() {
                if is_bert_punctuation(ch) {
                    self.word_pieces(&chunk[word_start..i], ids, &mut piece);
                    self.word_pieces(&chunk[i..i + ch.len_utf8()], ids, &mut piece);
                    word_start = i + ch.len_utf8();
                }
                if ids.len() >= budget {
                    return;
                }
            }
            self.word_pieces(&chunk[word_start..], ids, &mut piece);
            if ids.len() >= budget {
                return;
            }
        }
    }

    /// WordPiece: the longest vocabulary entry at the start of the word, then the longest
    /// `##` entry at each next place; a word with a place no entry matches (or of more than
    /// `max_word_chars` characters) is one `[UNK]`.
    fn word_pieces(&self, word: &str, ids: &mut Vec<u32>, piece: &mut String) {
        if word.is_empty() {
            return;
        }
        if word.chars().count() > self.config.max_word_chars {
            ids.push(self.config.unk);
            return;
        }
        let mark = ids.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[start..end]);
                if let Some(id) = self.find(piece.as_bytes()) {
                    found = Some(id);
                    break;
                }
                end -= word[start..end]
                    .chars()
                    .next_back()
                    .map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(mark);
                    ids.push(self.config.unk);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::format::{tests::tiny_parts, write, Model, SOURCE_LEN};

    fn tokenizer() -> (tempfile::TempDir, Model) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.axoemb");
        write(&path, &tiny_parts(5), &[0; SOURCE_LEN]).expect("write");
        let m = Model::open(&path).expect("open");
        (dir, m)
    }

    #[test]
    fn words_split_into_the_longest_pieces() {
        let (_d, m) = tokenizer();
        let t = m.tokenizer();
        // [CLS]=2 the=5 cat=6 ##s=10 sat=7 on=8 the=5 mat=9 .=12 [SEP]=3
        assert_eq!(
            t.encode("The cats sat on the mat."),
            [2, 5, 6, 10, 7, 8, 5, 9, 12, 3]
        );
        // "rerun": no piece starts with "r" but "run" → "re…" is unknown: one [UNK].
        assert_eq!(t.encode("rerun"), [2, 1, 3]);
        // un + ##run
        assert_eq!(t.encode("unrun"), [2, 29, 30, 3]);
        assert_eq!(t.encode(""), [2, 3]);
        assert_eq!(t.encode("   \t\n "), [2, 3]);
    }

    #[test]
    fn added_tokens_are_matched_before_normalizing() {
        let (_d, m) = tokenizer();
        let t = m.tokenizer();
        assert_eq!(t.encode("a[MASK]b"), [2, 15, 4, 16, 3]);
        // Lowercased, it is no longer an added token: "[", "mask", "]" (mask is unknown).
        assert_eq!(t.encode("[mask]"), [2, 1, 1, 1, 3]);
        assert_eq!(t.encode("[CLS][CLS]"), [2, 2, 2, 3]);
    }

    #[test]
    fn accents_cjk_controls_and_case_are_normalized() {
        let (_d, m) = tokenizer();
        let t = m.tokenizer();
        assert_eq!(t.normalize("Ünï\u{0}ca\u{7}fé"), "unicafe");
        assert_eq!(t.normalize("a\u{3000}b\tc"), "a b c");
        assert_eq!(t.normalize("東京"), " 東  京 ");
        assert_eq!(t.encode("東京!"), [2, 26, 27, 14, 3]);
        // "é" is in this vocabulary but accents are stripped first: "e".
        assert_eq!(t.encode("É"), [2, 19, 3]);
    }

    #[test]
    fn long_texts_are_cut_to_the_window() {
        let (_d, m) = tokenizer();
        let t = m.tokenizer();
        let ids = t.encode(&"cat ".repeat(1000));
        assert_eq!(ids.len(), 32);
        assert_eq!((ids[0], ids[1], ids[30], ids[31]), (2, 6, 6, 3));
        let ids = t.encode(&"[SEP]".repeat(100));
        assert_eq!(ids.len(), 32);
        let long_word = "a".repeat(21);
        assert_eq!(t.encode(&long_word), [2, 1, 3]);
        let mut expected = vec![2, 15];
        expected.extend([20; 19]);
        expected.push(3);
        assert_eq!(t.encode(&"a".repeat(20)), expected);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Any text: `[CLS]` first, `[SEP]` last, within the window, every id in the table.
        #[test]
        fn any_text_gives_ids_of_the_table(text in "(\\PC|[\\[\\]A-Z ]){0,80}") {
            let (_d, m) = tokenizer();
            let ids = m.tokenizer().encode(&text);
            let c = m.config();
            proptest::prop_assert!(ids.len() >= 2 && ids.len() <= c.max_tokens);
            proptest::prop_assert_eq!(ids[0], c.cls);
            proptest::prop_assert_eq!(ids[ids.len() - 1], c.sep);
            proptest::prop_assert!(ids.iter().all(|&i| (i as usize) < c.vocab));
            let v = m.embed(&[&text]).expect("embed");
            let norm: f32 = v[0].iter().map(|x| x * x).sum();
            proptest::prop_assert!((norm - 1.0).abs() < 1e-4, "norm {}", norm);
        }
    }
}
