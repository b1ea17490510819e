//! What a file is (by its content, not its name), whether it may be attached, and the text
//! a model reads from it. Nothing here writes: a file is refused before anything is stored.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::AttachError;

/// Images up to this size (inclusive) are accepted.
pub const IMAGE_CAP: u64 = 10 * 1024 * 1024;
/// Other supported documents up to this size (inclusive) are accepted.
pub const DOCUMENT_CAP: u64 = 25 * 1024 * 1024;
/// What `attach add` accepts, for the message that refuses everything else.
pub use crate::catalog::SUPPORTED_ATTACHMENTS as SUPPORTED;
/// Extracted text is cut to at most this many bytes (at a character boundary).
pub use axocoatl_store::extracted::TEXT_CAP;

/// How many leading bytes the content sniffer looks at.
const HEAD: u64 = 8192;

/// Image types that the HTTP providers pass to models (Ollama and OpenAI-compatible both
/// accept these four).
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// Image types that reach models only as the text OCR reads in them.
const OCR_IMAGE_TYPES: [&str; 2] = ["image/tiff", "image/bmp"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Image,
    Pdf,
    Text,
}

/// A file checked and read, ready to have its text extracted and be stored.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub name: String,
    pub media_type: String,
    pub kind: Kind,
    pub bytes: Vec<u8>,
    /// The text of a text file, whole (images' and PDFs' text is read later).
    pub text: Option<String>,
}

/// Whether a media type is one of the images models are given.
pub fn is_image(media_type: &str) -> bool {
    IMAGE_TYPES.contains(&media_type)
}

/// Whether a media type is an image that reaches models only through OCR.
pub fn is_ocr_image(media_type: &str) -> bool {
    OCR_IMAGE_TYPES.contains(&media_type)
}

/// The name an attachment is stored under: only the final component of `path`, lossily
/// decoded, with control and bidirectional-override characters escaped. A name is data,
/// never a path.
pub fn safe_name(path: &Path) -> String {
    let raw = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let last = raw.rsplit('/').next().unwrap_or_default();
    let mut out = String::with_capacity(last.len());
    for c in last.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        "unnamed".to_owned()
    } else {
        out
    }
}

/// Whether the leading bytes of a file read as UTF-8 text (a character cut by the end of
/// the sample is fine) without NUL bytes.
fn looks_like_text(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    }
}

/// The media type of a text file, by its extension (the content already said "text").
fn text_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "xml" => "text/xml",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "css" => "text/css",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" | "tsx" => "text/x-typescript",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "go" => "text/x-go",
        "java" => "text/x-java",
        "c" | "h" => "text/x-c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "text/x-c++",
        "rb" => "text/x-ruby",
        "sh" | "bash" | "zsh" => "text/x-shellscript",
        "sql" => "application/sql",
        _ => "text/plain",
    }
}

/// Cuts `text` to at most `TEXT_CAP` bytes at a character boundary.
pub fn cap_text(mut text: String) -> (String, bool) {
    if text.len() <= TEXT_CAP {
        return (text, false);
    }
    let mut cut = TEXT_CAP;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    (text, true)
}

/// Checks and reads the file at `path`: its type by content sniffing, its size against the
/// cap of that type (before reading it whole), and its extracted text.
pub fn prepare(path: &Path) -> Result<Prepared, AttachError> {
    let name = safe_name(path);
    let shown = path.display().to_string();
    let read_err = |source: std::io::Error| AttachError::Read {
        path: shown.clone(),
        source,
    };
    // Look before opening: opening a FIFO waits for a writer, possibly forever, and a
    // device may never end. Then look again at what was opened, in case the path changed.
    if !std::fs::metadata(path).map_err(read_err)?.is_file() {
        return Err(AttachError::NotAFile { path: shown });
    }
    let file = File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(AttachError::NotAFile { path: shown });
    }
    let size = meta.len();
    let mut head = Vec::new();
    (&file)
        .take(HEAD)
        .read_to_end(&mut head)
        .map_err(read_err)?;
    let sniffed = infer::get(&head);
    let (kind, media_type) = match sniffed {
        Some(t) if is_image(t.mime_type()) => (Kind::Image, t.mime_type().to_owned()),
        // A BMP is known by two letters only: text that starts with "BM" is still text.
        Some(t) if is_ocr_image(t.mime_type()) && !looks_like_text(&head) => {
            (Kind::Image, t.mime_type().to_owned())
        }
        Some(t) if t.mime_type() == "application/pdf" => (Kind::Pdf, t.mime_type().to_owned()),
        Some(t) if t.matcher_type() == infer::MatcherType::Text => {
            (Kind::Text, t.mime_type().to_owned())
        }
        // Some magic numbers are two letters ("BM", "MZ"): text that starts with them is
        // still text.
        _ if looks_like_text(&head) => (Kind::Text, text_type(path).to_owned()),
        other => {
            return Err(AttachError::Unsupported {
                name,
                detected: other.map(|t| t.mime_type().to_owned()),
            })
        }
    };
    let (cap, what) = match kind {
        Kind::Image => (IMAGE_CAP, "images"),
        _ => (DOCUMENT_CAP, "documents"),
    };
    let too_large = |size: u64| AttachError::TooLarge {
        name: name.clone(),
        size,
        cap,
        what,
    };
    if size > cap {
        return Err(too_large(size));
    }
    let mut bytes = head;
    (&file)
        .take(cap + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > cap {
        // The file grew while it was read.
        return Err(too_large(bytes.len() as u64));
    }
    let text = match kind {
        Kind::Image | Kind::Pdf => None,
        Kind::Text => {
            let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
            match std::str::from_utf8(body) {
                Ok(s) if !s.contains('\0') => Some(s.to_owned()),
                _ => {
                    return Err(AttachError::Unsupported {
                        name,
                        detected: Some("binary data or text that is not UTF-8".into()),
                    })
                }
            }
        }
    };
    Ok(Prepared {
        name,
        media_type,
        kind,
        bytes,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_data_not_paths() {
        assert_eq!(safe_name(Path::new("a/b/../notes.md")), "notes.md");
        assert_eq!(
            safe_name(Path::new("x/bad\nname\u{1b}[31m.txt")),
            "bad\\nname\\u{1b}[31m.txt"
        );
        assert_eq!(
            safe_name(Path::new("evil\u{202e}txt.exe")),
            "evil\\u{202e}txt.exe"
        );
        assert_eq!(safe_name(Path::new("..")), "unnamed");
        assert_eq!(safe_name(Path::new("/")), "unnamed");
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_names_are_decoded_lossily() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"dir/caf\xe9.txt"));
        assert_eq!(safe_name(p), "caf\u{fffd}.txt");
    }

    #[test]
    fn text_is_cut_at_a_char_boundary() {
        let (t, cut) = cap_text("a".repeat(TEXT_CAP));
        assert_eq!((t.len(), cut), (TEXT_CAP, false));
        let (t, cut) = cap_text("é".repeat(TEXT_CAP));
        assert_eq!((t.len(), cut), (TEXT_CAP, true));
        let (t, cut) = cap_text(format!("a{}", "é".repeat(TEXT_CAP)));
        assert_eq!((t.len(), cut), (TEXT_CAP - 1, true));
    }

    #[test]
    fn sniffing_looks_at_content() {
        assert!(looks_like_text(b"BMW notes"));
        assert!(looks_like_text("caf\u{e9}".as_bytes().split_at(4).0));
        assert!(!looks_like_text(b"\x89PNG\r\n\x1a\n\0\0"));
        assert!(!looks_like_text(b"\xff\xfe\xfd"));
    }
}
