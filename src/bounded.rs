//! Text a ledger record keeps inline up to a bound; past it the whole text goes to an object
//! and the record keeps its first bytes and the object's name.

use axocoatl_store::ledger::record::Bounded;
use axocoatl_store::objects::Objects;

use crate::error::Result;

/// Text longer than this is kept in an object and referenced from the ledger.
pub const INLINE_LIMIT: usize = 64 * 1024;

/// Keeps text inline up to [`INLINE_LIMIT`] bytes; past it the whole text goes to an object.
pub fn bound(objects: &Objects, text: &str) -> Result<Bounded> {
    if text.len() <= INLINE_LIMIT {
        return Ok(Bounded {
            inline: text.to_owned(),
            object: None,
            len: text.len() as u64,
        });
    }
    let mut cut = INLINE_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(Bounded {
        inline: text[..cut].to_owned(),
        object: Some(objects.put(text.as_bytes())?),
        len: text.len() as u64,
    })
}

/// Output that is not UTF-8: `text` (its lossy decoding, what the model saw) inline up to
/// [`INLINE_LIMIT`], and the exact bytes `raw` in an object whatever their size, so nothing
/// of them is lost. The object decoded lossily is `text` again.
pub fn bound_bytes(objects: &Objects, text: &str, raw: &[u8]) -> Result<Bounded> {
    let mut cut = text.len().min(INLINE_LIMIT);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(Bounded {
        inline: text[..cut].to_owned(),
        object: Some(objects.put(raw)?),
        len: raw.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_keeps_small_text_inline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(dir.path());
        let small = bound(&objects, "hello").expect("bound");
        assert_eq!(
            (small.inline.as_str(), small.object, small.len),
            ("hello", None, 5)
        );
        let big = "é".repeat(INLINE_LIMIT);
        let b = bound(&objects, &big).expect("bound");
        assert!(b.inline.len() <= INLINE_LIMIT && b.object.is_some());
        assert_eq!(
            objects.get(b.object.as_deref().expect("obj")).expect("get"),
            big.as_bytes()
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(dir.path());
        let raw = b"ab\xff\xfecd\n".to_vec();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let b = bound_bytes(&objects, &text, &raw).expect("bound");
        assert_eq!(
            (b.inline.as_str(), b.len),
            (text.as_str(), raw.len() as u64)
        );
        assert_eq!(
            objects.get(b.object.as_deref().expect("obj")).expect("get"),
            raw
        );
    }
}
