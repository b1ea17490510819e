//! Where Tesseract's language data is installed, and which Debian package holds a
//! language: what `validate` and OCR say about a language that is missing. A leaf: the
//! configuration's checks quote it as attachments do.

use std::path::PathBuf;

/// The Debian package with a language's data: `deu` → `tesseract-ocr-deu`, `chi_sim` →
/// `tesseract-ocr-chi-sim`.
pub fn package_of(language: &str) -> String {
    format!(
        "tesseract-ocr-{}",
        language.to_ascii_lowercase().replace(['_', '/'], "-")
    )
}

/// The directories Tesseract's language data may be in: `TESSDATA_PREFIX` (and its
/// `tessdata/`) when set, else where distributions install it.
fn tessdata_dirs() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("TESSDATA_PREFIX").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return vec![p.join("tessdata"), p];
    }
    [
        "/usr/share/tesseract-ocr/5/tessdata",
        "/usr/share/tesseract-ocr/4.00/tessdata",
        "/usr/share/tessdata",
        "/usr/local/share/tessdata",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}

/// Whether a language's data (`eng.traineddata`) is installed; true when no data
/// directory is known at all (Tesseract then says for itself).
pub fn has_language(language: &str) -> bool {
    let dirs: Vec<PathBuf> = tessdata_dirs().into_iter().filter(|d| d.is_dir()).collect();
    dirs.is_empty()
        || dirs
            .iter()
            .any(|d| d.join(format!("{language}.traineddata")).is_file())
}

/// The languages of `languages` whose data is not installed.
pub fn missing_languages(languages: &[String]) -> Vec<String> {
    languages
        .iter()
        .filter(|l| !has_language(l))
        .cloned()
        .collect()
}
