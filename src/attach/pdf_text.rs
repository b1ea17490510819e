//! A PDF's text layer under one budget for the whole document.
//!
//! A small file can describe enormous work: 300 pages that share one Flate content stream
//! inflating to 60 MB each stay under any per-page limit, and reading every page's text
//! before cutting it to 256 KiB once took all of a machine's memory. So the document has
//! one budget, and extraction stops at whichever comes first:
//!
//! - the text: past [`TEXT_CAP`] bytes nothing more can be kept, so no more page is read;
//! - the content: at most [`CONTENT_BUDGET`] bytes of content streams (and `ToUnicode`
//!   maps) are inflated and parsed for the whole document, at most [`PAGE_LIMIT`] for one
//!   page;
//! - a stop (Ctrl-C, SIGTERM, `stop`), looked at before each page and every few thousand
//!   operations.
//!
//! A page whose contents and fonts are those of a page already read (a stream shared by
//! many pages) has that page's text without being inflated or parsed again. Operations are
//! parsed one at a time (lopdf's `decode_iter`), never a page's whole list at once, and a
//! page with one operation of more than [`MAX_OPERANDS`] operands (a `TJ` array of
//! millions of strings, which the parser would hold as millions of objects) is not parsed:
//! its text is not read, and a note says so.

use std::collections::HashMap;
use std::rc::Rc;

use lopdf::content::Content;
use lopdf::{DecompressError, Dictionary, Encoding, Error as PdfError, Object, ObjectId};

use super::pdf::Pdf;
use super::AttachError;
use axocoatl_store::extracted::TEXT_CAP;

/// Content inflated and parsed for one document, at most.
pub const CONTENT_BUDGET: usize = 128 * 1024 * 1024;
/// Content inflated and parsed for one page, at most.
pub const PAGE_LIMIT: usize = 64 * 1024 * 1024;
/// Operands (objects, nested ones included) of one operation, at most.
pub const MAX_OPERANDS: usize = 100_000;
/// Operations parsed between two looks at the stop.
const STOP_EVERY: usize = 4096;

/// The text layer read from a document.
#[derive(Debug, Default)]
pub struct Layer {
    /// The text of each page read, in order: the first `pages.len()` pages.
    pub pages: Vec<String>,
    /// The text passed [`TEXT_CAP`]: the pages after the last one read were not needed.
    pub full: bool,
    /// What was not read, and why.
    pub notes: Vec<String>,
}

impl Layer {
    /// The document's text: the pages' texts one after another.
    pub fn text(&self) -> String {
        self.pages.concat()
    }
}

/// How reading the text layer ended early, besides a stop.
enum PageEnd {
    /// The page's text is read (maybe partly, when the text became full).
    Read(String),
    /// The page's text was not read; why, for a note.
    Skipped(String),
    /// The document's content budget is spent.
    Spent,
}

/// The state of one document's reading: what is left of the budget, and what was read
/// already.
struct Reading<'d, 'c> {
    pdf: &'d Pdf,
    content_left: usize,
    text_len: usize,
    /// The text of pages already read, by their contents and fonts.
    seen: HashMap<PageKey, String>,
    /// Font encodings already made, by their font dictionary.
    encodings: HashMap<usize, Option<Rc<Encoding<'d>>>>,
    stop: &'c dyn Fn() -> bool,
}

/// What a page's text depends on: its content streams and its fonts (by dictionary).
#[derive(Clone, PartialEq, Eq, Hash)]
struct PageKey {
    contents: Vec<ObjectId>,
    fonts: Vec<(Vec<u8>, usize)>,
}

fn stopped(name: &str, page: usize, of: usize) -> AttachError {
    AttachError::ReadStopped {
        name: name.to_owned(),
        at: format!(" on page {} of {of}", page + 1),
    }
}

impl Pdf {
    /// The text layer of the pages in order, under the document's budget; `stop` is asked
    /// before each page and while a page is parsed. NUL characters become U+FFFD: extracted
    /// text never holds a NUL byte.
    pub fn text_layer(&self, name: &str, stop: &dyn Fn() -> bool) -> Result<Layer, AttachError> {
        let mut reading = Reading {
            pdf: self,
            content_left: CONTENT_BUDGET,
            text_len: 0,
            seen: HashMap::new(),
            encodings: HashMap::new(),
            stop,
        };
        let of = self.page_count();
        let mut layer = Layer::default();
        for (i, &page) in self.page_ids().iter().enumerate() {
            if stop() {
                return Err(stopped(name, i, of));
            }
            if reading.text_len > TEXT_CAP {
                layer.full = true;
                layer.notes.push(format!(
                    "the text passed {} by page {i} of {of}: the pages after it were not read",
                    crate::error::size_text(TEXT_CAP as u64)
                ));
                break;
            }
            let end = super::pdf::guarded(|| Ok(reading.page(page)))
                .map_err(|e| fail(name, e))?
                .map_err(|e| match e {
                    PageError::Stopped => stopped(name, i, of),
                    PageError::Pdf(e) => fail(name, e),
                })?;
            match end {
                PageEnd::Read(text) => layer.pages.push(text),
                PageEnd::Skipped(why) => {
                    layer.notes.push(format!("page {}: {why}", i + 1));
                    layer.pages.push(String::new());
                }
                PageEnd::Spent => {
                    layer.notes.push(format!(
                        "the document's content passed the {} read for one PDF on page {} of {of}: the text of that page and the pages after it was not read",
                        crate::error::size_text(CONTENT_BUDGET as u64),
                        i + 1
                    ));
                    break;
                }
            }
        }
        if reading.text_len > TEXT_CAP {
            layer.full = true;
        }
        Ok(layer)
    }
}

fn fail(name: &str, detail: String) -> AttachError {
    AttachError::Pdf {
        name: name.to_owned(),
        detail,
    }
}

/// Why a page's reading ended with an error.
enum PageError {
    Stopped,
    Pdf(String),
}

impl<'d> Reading<'d, '_> {
    fn page(&mut self, page: ObjectId) -> Result<PageEnd, PageError> {
        let doc = self.pdf.document();
        let fonts = doc
            .get_page_fonts(page)
            .map_err(|e| PageError::Pdf(e.to_string()))?;
        let key = PageKey {
            contents: doc.get_page_contents(page),
            fonts: fonts
                .iter()
                .map(|(n, d)| (n.clone(), *d as *const Dictionary as usize))
                .collect(),
        };
        if let Some(text) = self.seen.get(&key) {
            let text = text.clone();
            self.text_len += text.len();
            return Ok(PageEnd::Read(text));
        }
        let mut encodings: HashMap<Vec<u8>, Rc<Encoding<'d>>> = HashMap::new();
        for (name, &font) in &fonts {
            match self.encoding(font)? {
                Some(e) => {
                    encodings.insert(name.clone(), e);
                }
                None if self.content_left == 0 => return Ok(PageEnd::Spent),
                None => {}
            }
        }
        let content = match self.content(&key.contents)? {
            Ok(content) => content,
            Err(end) => return Ok(end),
        };
        if let Some(n) = widest_operation(&content) {
            return Ok(PageEnd::Skipped(format!(
                "an operation of its content has more than {n} operands; its text was not read"
            )));
        }
        let text = self.operations(&content, &encodings)?;
        self.seen.insert(key, text.clone());
        Ok(PageEnd::Read(text))
    }

    /// The encoding of `font`, made once per font dictionary; a `ToUnicode` map is charged
    /// to the budget. `None` when it does not read (the font's text is skipped, as lopdf
    /// does) or the budget is spent.
    fn encoding(&mut self, font: &'d Dictionary) -> Result<Option<Rc<Encoding<'d>>>, PageError> {
        let id = font as *const Dictionary as usize;
        if let Some(e) = self.encodings.get(&id) {
            return Ok(e.clone());
        }
        let doc = self.pdf.document();
        let mut limit = self.content_left.min(PAGE_LIMIT);
        if let Ok(stream) = font
            .get_deref(b"ToUnicode", doc)
            .and_then(Object::as_stream)
        {
            match stream.decompressed_content_with_limit(limit) {
                Ok(bytes) => {
                    self.content_left -= bytes.len();
                    limit = bytes.len().max(1);
                }
                Err(PdfError::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                    self.content_left = self.content_left.saturating_sub(limit);
                    return Ok(None);
                }
                Err(_) => {}
            }
        }
        let e = font
            .get_font_encoding_with_limit(doc, limit)
            .ok()
            .map(Rc::new);
        self.encodings.insert(id, e.clone());
        Ok(e)
    }

    /// The page's content streams, inflated and joined, charged to the budget; or how the
    /// page ends without them.
    fn content(&mut self, ids: &[ObjectId]) -> Result<Result<Vec<u8>, PageEnd>, PageError> {
        let doc = self.pdf.document();
        let mut content = Vec::new();
        for id in ids {
            let Ok(stream) = doc.get_object(*id).and_then(Object::as_stream) else {
                continue;
            };
            let page_left = PAGE_LIMIT.saturating_sub(content.len());
            let limit = page_left.min(self.content_left);
            let bytes = match stream.decompressed_content_with_limit(limit) {
                Ok(bytes) => bytes,
                Err(PdfError::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                    self.content_left = self.content_left.saturating_sub(limit);
                    return Ok(Err(if limit == page_left {
                        PageEnd::Skipped(format!(
                            "its content inflates past {}; its text was not read",
                            crate::error::size_text(PAGE_LIMIT as u64)
                        ))
                    } else {
                        PageEnd::Spent
                    }));
                }
                // A stream that does not inflate is read as it is (as lopdf does).
                Err(_) if stream.content.len() <= limit => stream.content.clone(),
                Err(_) => return Ok(Err(PageEnd::Spent)),
            };
            self.content_left -= bytes.len();
            content.extend_from_slice(&bytes);
            content.push(b'\n');
            if (self.stop)() {
                return Err(PageError::Stopped);
            }
        }
        Ok(Ok(content))
    }

    /// The text of the content's operations (as lopdf's `extract_text`), until the
    /// document's text is full.
    fn operations(
        &mut self,
        content: &[u8],
        encodings: &HashMap<Vec<u8>, Rc<Encoding<'d>>>,
    ) -> Result<String, PageError> {
        let mut text = String::new();
        let mut current: Option<&Encoding<'d>> = None;
        for (n, op) in Content::decode_iter(content).enumerate() {
            if n % STOP_EVERY == 0 && (self.stop)() {
                return Err(PageError::Stopped);
            }
            if self.text_len + text.len() > TEXT_CAP {
                break;
            }
            let op = op.map_err(|e| PageError::Pdf(e.to_string()))?;
            match op.operator.as_str() {
                "Tf" => {
                    current = op
                        .operands
                        .first()
                        .and_then(|o| o.as_name().ok())
                        .and_then(|n| encodings.get(n))
                        .map(|e| &**e);
                }
                "Tj" | "TJ" => collect(&mut text, current, &op.operands),
                "'" => {
                    newline(&mut text);
                    collect(&mut text, current, &op.operands);
                }
                "\"" => {
                    newline(&mut text);
                    collect(&mut text, current, op.operands.get(2..).unwrap_or(&[]));
                }
                "T*" | "ET" => newline(&mut text),
                _ => {}
            }
        }
        let text = text.replace('\0', "\u{fffd}");
        self.text_len += text.len();
        Ok(text)
    }
}

fn newline(text: &mut String) {
    if !text.ends_with('\n') {
        text.push('\n');
    }
}

/// The text of a text-showing operation's operands (strings, arrays of strings and
/// spacings); nothing without a font encoding, as lopdf does.
fn collect(text: &mut String, encoding: Option<&Encoding<'_>>, operands: &[Object]) {
    let Some(encoding) = encoding else {
        return;
    };
    for operand in operands {
        match operand {
            Object::String(bytes, _) => {
                let _ = encoding.write_to_string(bytes, text);
            }
            Object::Array(items) => {
                collect(text, Some(encoding), items);
                text.push(' ');
            }
            Object::Integer(i) if *i < -100 => text.push(' '),
            _ => {}
        }
    }
}

/// `Some(MAX_OPERANDS)` when an operation of `content` has more operands than that
/// (nested ones included), looked at without parsing: strings, comments and the data of
/// inline images are stepped over; every other token before an operator counts.
fn widest_operation(content: &[u8]) -> Option<usize> {
    let mut count = 0usize;
    let mut i = 0;
    let n = content.len();
    while i < n {
        let b = content[i];
        match b {
            b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' | b'\0' => i += 1,
            b'%' => {
                while i < n && content[i] != b'\n' && content[i] != b'\r' {
                    i += 1;
                }
            }
            b'(' => {
                i = skip_string(content, i);
                count += 1;
            }
            b'<' if content.get(i + 1) == Some(&b'<') => {
                i += 2;
                count += 1;
            }
            b'>' if content.get(i + 1) == Some(&b'>') => i += 2,
            b'<' => {
                while i < n && content[i] != b'>' {
                    i += 1;
                }
                i += 1;
                count += 1;
            }
            b'[' | b'{' => {
                i += 1;
                count += 1;
            }
            b']' | b'}' | b'>' | b')' => i += 1,
            b'/' => {
                i = skip_regular(content, i + 1);
                count += 1;
            }
            _ => {
                let start = i;
                i = skip_regular(content, i + 1);
                let token = &content[start..i];
                if is_operator(token) {
                    if token == b"ID" {
                        i = skip_inline_image(content, i);
                    }
                    count = 0;
                } else {
                    count += 1;
                }
            }
        }
        if count > MAX_OPERANDS {
            return Some(MAX_OPERANDS);
        }
    }
    None
}

fn is_delimiter_or_space(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\r'
            | b'\n'
            | b'\x0c'
            | b'\0'
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'/'
            | b'%'
    )
}

fn skip_regular(content: &[u8], mut i: usize) -> usize {
    while i < content.len() && !is_delimiter_or_space(content[i]) {
        i += 1;
    }
    i
}

/// An operator: a regular token that is not a number or a keyword of the object syntax.
fn is_operator(token: &[u8]) -> bool {
    let numeric = token
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'));
    !numeric && !matches!(token, b"true" | b"false" | b"null")
}

/// The index after the literal string starting at `i` (balanced parentheses, escapes).
fn skip_string(content: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < content.len() {
        match content[i] {
            b'\\' => i += 1,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index after an inline image's data (after `ID`): its `EI` between white space.
fn skip_inline_image(content: &[u8], mut i: usize) -> usize {
    while i + 2 < content.len() {
        if content[i].is_ascii_whitespace()
            && &content[i + 1..i + 3] == b"EI"
            && content.get(i + 3).is_none_or(|b| is_delimiter_or_space(*b))
        {
            return i + 3;
        }
        i += 1;
    }
    content.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_with_too_many_operands_are_found_without_parsing() {
        let small = b"BT /F1 12 Tf (Hello) Tj [(a) -120 (b)] TJ ET";
        assert_eq!(widest_operation(small), None);
        let mut wide = b"BT [".to_vec();
        for _ in 0..=MAX_OPERANDS {
            wide.extend_from_slice(b"(a)");
        }
        wide.extend_from_slice(b"] TJ ET");
        assert_eq!(widest_operation(&wide), Some(MAX_OPERANDS));
        let mut numbers = Vec::new();
        for _ in 0..=MAX_OPERANDS {
            numbers.extend_from_slice(b"1 ");
        }
        numbers.extend_from_slice(b"re");
        assert_eq!(widest_operation(&numbers), Some(MAX_OPERANDS));
        // Many short operations are fine, strings with brackets and inline images too.
        let mut many = Vec::new();
        for _ in 0..(2 * MAX_OPERANDS) {
            many.extend_from_slice(b"(x[) Tj ");
        }
        many.extend_from_slice(b"BI /W 1 /H 1 ID [[[[ \xff EI Q");
        assert_eq!(widest_operation(&many), None);
    }
}
