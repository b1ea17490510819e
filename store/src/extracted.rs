//! The extracted text of an attachment, as its text object holds it.
//!
//! Plain text (of a text file or a PDF's text layer) is stored as it is: UTF-8, at most
//! [`TEXT_CAP`] bytes. Text that OCR read (from an image, or from the pages
//! of a PDF that have no text layer) is stored with what produced it, so that everything
//! said about it (engine, languages, mean confidence) travels with the text and with every
//! turn that pins it:
//!
//! ```text
//! \0axocoatl-ocr 1\n
//! {"engine":"tesseract 5.3.0","languages":"eng","confidence":91,"words":12,"pages":1,"of_pages":1,"text_len":73}\n
//! <the text, at most TEXT_CAP bytes>
//! ```
//!
//! The leading NUL byte and the line after it tell the two apart: plain extracted text
//! never starts so (text files with NUL bytes are refused; NUL characters of a PDF's text
//! are replaced, and older builds' PDF text that began with one is still plain text).

use serde::{Deserialize, Serialize};

/// Extracted text is cut to at most this many bytes (at a character boundary).
pub const TEXT_CAP: usize = 256 * 1024;

/// The first line of an OCR text object.
pub const OCR_MAGIC: &[u8] = b"\0axocoatl-ocr 1\n";

/// What OCR produced a text with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OcrInfo {
    /// The engine and its version, e.g. `tesseract 5.3.0`.
    pub engine: String,
    /// The engine's language codes joined by `+`, e.g. `eng` or `eng+deu`.
    pub languages: String,
    /// The mean of the recognized words' confidences, 0 to 100; `None` when no word was
    /// recognized.
    pub confidence: Option<u8>,
    /// How many words were recognized.
    pub words: u64,
    /// How many pages OCR read: 1 for an image of one page; for a PDF, its pages without a
    /// text layer.
    pub pages: u32,
    /// How many pages the attachment has.
    pub of_pages: u32,
    /// The length of the whole text in bytes, before the cut to [`TEXT_CAP`].
    pub text_len: u64,
}

/// A text object, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extracted<'a> {
    Plain(&'a str),
    Ocr(OcrInfo, &'a str),
}

impl<'a> Extracted<'a> {
    /// The text itself.
    pub fn text(&self) -> &'a str {
        match self {
            Extracted::Plain(t) | Extracted::Ocr(_, t) => t,
        }
    }

    pub fn ocr(&self) -> Option<&OcrInfo> {
        match self {
            Extracted::Plain(_) => None,
            Extracted::Ocr(info, _) => Some(info),
        }
    }
}

/// The bytes of the text object of OCR text (`text` already cut to [`TEXT_CAP`]).
pub fn encode_ocr(info: &OcrInfo, text: &str) -> Vec<u8> {
    let header = serde_json::to_vec(info).unwrap_or_default();
    let mut out = Vec::with_capacity(OCR_MAGIC.len() + header.len() + 1 + text.len());
    out.extend_from_slice(OCR_MAGIC);
    out.extend_from_slice(&header);
    out.push(b'\n');
    out.extend_from_slice(text.as_bytes());
    out
}

/// Decodes a text object, checking what every text object must be: UTF-8, at most
/// [`TEXT_CAP`] bytes of text, and for OCR text a header that parses and holds together.
pub fn decode(bytes: &[u8]) -> Result<Extracted<'_>, String> {
    let Some(rest) = bytes.strip_prefix(OCR_MAGIC) else {
        return Ok(Extracted::Plain(checked_text(bytes)?));
    };
    let end = memchr::memchr(b'\n', rest).ok_or("OCR text without the end of its header")?;
    let info: OcrInfo = serde_json::from_slice(&rest[..end])
        .map_err(|e| format!("the OCR header does not parse: {e}"))?;
    let text = checked_text(&rest[end + 1..])?;
    if info.confidence.is_some_and(|c| c > 100) {
        return Err("a mean confidence over 100".into());
    }
    if info.pages > info.of_pages || info.of_pages == 0 {
        return Err(format!(
            "OCR read {} pages of {}",
            info.pages, info.of_pages
        ));
    }
    if (text.len() as u64) > info.text_len {
        return Err(format!(
            "holds {} bytes of text but says the text had {}",
            text.len(),
            info.text_len
        ));
    }
    if (info.words == 0) != info.confidence.is_none() {
        return Err("a mean confidence that does not go with its word count".into());
    }
    Ok(Extracted::Ocr(info, text))
}

fn checked_text(bytes: &[u8]) -> Result<&str, String> {
    if bytes.len() > TEXT_CAP {
        return Err(format!(
            "{} bytes of text, more than the cap of {TEXT_CAP}",
            bytes.len()
        ));
    }
    std::str::from_utf8(bytes).map_err(|e| format!("text that is not UTF-8: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> OcrInfo {
        OcrInfo {
            engine: "tesseract 5.3.0".into(),
            languages: "eng".into(),
            confidence: Some(91),
            words: 2,
            pages: 1,
            of_pages: 1,
            text_len: 11,
        }
    }

    #[test]
    fn ocr_text_round_trips_and_plain_text_stays_plain() {
        let bytes = encode_ocr(&info(), "hello world");
        assert_eq!(
            decode(&bytes).expect("decodes"),
            Extracted::Ocr(info(), "hello world")
        );
        assert_eq!(
            decode(b"plain words").expect("decodes"),
            Extracted::Plain("plain words")
        );
        assert_eq!(decode(b"").expect("decodes"), Extracted::Plain(""));
    }

    #[test]
    fn damaged_text_objects_are_refused() {
        let good = encode_ocr(&info(), "hello world");
        let cut = &good[..OCR_MAGIC.len() + 5];
        assert!(decode(cut).is_err());
        let mut bad_json = good.clone();
        bad_json[OCR_MAGIC.len()] = b'[';
        assert!(decode(&bad_json).is_err());
        assert!(decode(b"caf\xe9").is_err());
        assert!(decode(&vec![b'a'; TEXT_CAP + 1]).is_err());
        // Text of an older build that happens to start with a NUL is still plain text.
        assert_eq!(
            decode(b"\0older text").expect("decodes"),
            Extracted::Plain("\0older text")
        );
        let lie = |f: fn(&mut OcrInfo)| {
            let mut i = info();
            f(&mut i);
            decode(&encode_ocr(&i, "hello world")).is_err()
        };
        assert!(lie(|i| i.confidence = Some(101)));
        assert!(lie(|i| i.pages = 2));
        assert!(lie(|i| i.text_len = 3));
        assert!(lie(|i| i.confidence = None));
        assert!(lie(|i| i.words = 0));
    }
}
