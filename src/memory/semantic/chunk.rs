//! Splitting long text into records that fit the embedder's window.

/// Splits `text` into chunks of at most `max_words` whitespace-separated words, cut after a
/// sentence end (`.`, `!`, `?` before whitespace, or a line break) where one falls inside the
/// limit, else between words. Chunks are trimmed slices of the text, in order; blank text
/// gives none.
pub fn chunks(text: &str, max_words: usize) -> Vec<&str> {
    let max_words = max_words.max(1);
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let cut = cut_point(rest, max_words);
        let (head, tail) = rest.split_at(cut);
        let head = head.trim();
        if !head.is_empty() {
            out.push(head);
        }
        rest = tail.trim_start();
    }
    out
}

/// Byte offset where the first chunk of `text` (trimmed, non-empty) ends.
fn cut_point(text: &str, max_words: usize) -> usize {
    let mut words = 0;
    let mut in_word = false;
    let mut last_sentence_end = None;
    let mut last_word_end = text.len();
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                in_word = false;
                last_word_end = i;
                if matches!(prev, Some('.' | '!' | '?' | '。' | '！' | '？')) {
                    last_sentence_end = Some(i);
                }
                if words == max_words {
                    return last_sentence_end.unwrap_or(last_word_end);
                }
            }
            if c == '\n' && words > 0 {
                last_sentence_end = Some(i);
            }
        } else if !in_word {
            in_word = true;
            words += 1;
            if words > max_words {
                return last_sentence_end.unwrap_or(last_word_end);
            }
        }
        prev = Some(c);
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(chunks("  one two three  ", 5), vec!["one two three"]);
        assert!(chunks(" \n ", 5).is_empty());
    }

    #[test]
    fn cuts_at_sentence_ends_within_the_limit() {
        let text = "One two three. Four five six seven. Eight nine.";
        assert_eq!(
            chunks(text, 6),
            vec!["One two three.", "Four five six seven. Eight nine."]
        );
    }

    #[test]
    fn long_sentences_are_cut_between_words() {
        let text = "a b c d e f g";
        assert_eq!(chunks(text, 3), vec!["a b c", "d e f", "g"]);
    }

    #[test]
    fn every_word_is_kept_once_and_no_chunk_is_too_long() {
        let text: String = (0..1000)
            .map(|i| {
                if i % 17 == 0 {
                    format!("w{i}.\n")
                } else {
                    format!("w{i} ")
                }
            })
            .collect();
        let parts = chunks(&text, 120);
        let rejoined: Vec<&str> = parts.iter().flat_map(|c| c.split_whitespace()).collect();
        let original: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(rejoined, original);
        assert!(parts.iter().all(|c| c.split_whitespace().count() <= 120));
        assert!(parts.len() >= 9);
    }
}
