//! OCR: the text of images, and of the pages of a PDF that have no text layer, read by
//! Tesseract once, when the attachment is added (`docs/ocr.md`).
//!
//! Bounds: every image's size is read from its header (every page's, for a TIFF) and
//! checked against `attachments.ocr.max_pixels` before anything is decoded, so a
//! decompression bomb never reaches the decoder or Tesseract; recognition asks between
//! words whether the time limit has passed or a stop arrived (Ctrl-C, SIGTERM, `serve`
//! ending), and the pages of an attachment are read one after the other with the same
//! checks between them.

#[cfg(feature = "ocr")]
mod engine;
#[cfg(not(feature = "ocr"))]
#[path = "engine_off.rs"]
mod engine;
#[cfg(feature = "ocr")]
mod tess;

use std::time::{Duration, Instant};

use axocoatl_store::extracted::{encode_ocr, OcrInfo};

use super::pdf::{self, Coding, Pdf, RawImage};
use super::sniff::cap_text;
use super::{tiff, AttachError};
use crate::config::OcrConfig;
pub use crate::ocr_data::{has_language, missing_languages, package_of};
use crate::provider::Cancel;
use engine::Engine;

/// Tesseract reads images up to this many pixels wide and high.
const MAX_SIDE: u32 = 32_767;

/// The media types OCR reads.
pub const READS: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/tiff",
    "image/webp",
    "image/bmp",
];

/// How OCR runs (`attachments.ocr` of axocoatl.yaml).
#[derive(Clone, Debug)]
pub struct Settings {
    pub enabled: bool,
    pub languages: Vec<String>,
    pub max_pixels: u64,
    pub timeout: Duration,
}

impl Settings {
    pub fn of(c: &OcrConfig) -> Settings {
        Settings {
            enabled: c.enabled,
            languages: c.languages.clone(),
            max_pixels: c.max_pixels,
            timeout: Duration::from_secs(c.timeout_secs),
        }
    }

    /// Tesseract's name for the languages: `eng+deu`.
    pub fn language_key(&self) -> String {
        self.languages.join("+")
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::of(&OcrConfig::default())
    }
}

/// Why OCR cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// `attachments.ocr.enabled: false`.
    Disabled,
    /// Built without the `ocr` feature.
    NotBuilt,
    /// Tesseract (or Leptonica) could not be loaded.
    NoLibrary(String),
    /// The data of these languages is not installed.
    Languages(Vec<String>),
    /// Tesseract did not start.
    Engine(String),
}

impl Unavailable {
    pub fn reason(&self) -> String {
        match self {
            Unavailable::Disabled => "OCR is off (attachments.ocr.enabled: false)".into(),
            Unavailable::NotBuilt => "this build of axocoatl has no OCR (the `ocr` feature)".into(),
            Unavailable::NoLibrary(why) => {
                format!("OCR needs Tesseract 5, which cannot be loaded: {why}")
            }
            Unavailable::Languages(missing) => format!(
                "the OCR language data {} {} not installed",
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" }
            ),
            Unavailable::Engine(why) => format!("OCR did not start: {why}"),
        }
    }

    pub fn hint(&self) -> String {
        match self {
            Unavailable::Disabled => {
                "set attachments.ocr.enabled: true in axocoatl.yaml to read images' text".into()
            }
            Unavailable::NotBuilt => {
                "build with `cargo build --features ocr` (a default feature)".into()
            }
            Unavailable::NoLibrary(_) => {
                "install it: apt-get install libtesseract5 tesseract-ocr-eng, or run scripts/setup-ocr.sh"
                    .into()
            }
            Unavailable::Languages(missing) => format!(
                "apt-get install {}, or change attachments.ocr.languages in axocoatl.yaml",
                missing
                    .iter()
                    .map(|l| package_of(l))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Unavailable::Engine(_) => {
                "check the language data with `axocoatl validate`; TESSDATA_PREFIX names its directory".into()
            }
        }
    }
}

/// Whether this build and machine can read images' text: the engine's name, or why not.
pub fn status(settings: &Settings) -> Result<String, Unavailable> {
    if !settings.enabled {
        return Err(Unavailable::Disabled);
    }
    Engine::new(settings).map(|e| e.name())
}

/// One page (or image) read.
pub struct PageRead {
    pub text: String,
    /// Each recognized word's confidence, 0 to 100.
    pub confidences: Vec<u8>,
}

impl PageRead {
    pub fn mean(&self) -> Option<u8> {
        mean(&self.confidences)
    }
}

fn mean(c: &[u8]) -> Option<u8> {
    (!c.is_empty()).then(|| (c.iter().map(|&x| u64::from(x)).sum::<u64>() / c.len() as u64) as u8)
}

/// How a recognition ended early.
pub enum Ended {
    /// A stop or the time limit; Tesseract had done `progress` percent of the page.
    Stopped {
        progress: u8,
    },
    Failed(String),
}

/// An attachment's text object (or none), and what to tell the user about it.
#[derive(Debug, Default)]
pub struct Read {
    /// The bytes of the text object: OCR text (with its header) or plain text.
    pub object: Option<Vec<u8>>,
    /// The length of the text before the cut to 256 KiB.
    pub text_len: usize,
    pub truncated: bool,
    pub ocr: Option<OcrInfo>,
    /// What was not read, and why (never silent).
    pub notes: Vec<String>,
}

impl Read {
    pub fn plain(text: String) -> Read {
        let text_len = text.len();
        let (text, truncated) = cap_text(text);
        Read {
            object: Some(text.into_bytes()),
            text_len,
            truncated,
            ..Read::default()
        }
    }
}

/// Reads the text of the attachments of one `attach add`, with one engine started when the
/// first image needs it.
pub struct Reader<'a> {
    settings: Settings,
    cancel: &'a Cancel,
    engine: Option<Result<Engine, Unavailable>>,
}

/// Where in an attachment OCR was when it ended.
fn at_page(page: usize, pages: usize, progress: u8) -> String {
    if pages > 1 {
        format!(" on page {} of {pages} ({progress}% of it read)", page + 1)
    } else {
        format!(" ({progress}% of the image read)")
    }
}

impl<'a> Reader<'a> {
    pub fn new(settings: Settings, cancel: &'a Cancel) -> Reader<'a> {
        Reader {
            settings,
            cancel,
            engine: None,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether OCR may run at all (it may still be unavailable on this machine).
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    fn engine(&mut self) -> Result<&mut Engine, Unavailable> {
        if !self.settings.enabled {
            return Err(Unavailable::Disabled);
        }
        let settings = &self.settings;
        match self.engine.get_or_insert_with(|| Engine::new(settings)) {
            Ok(e) => Ok(e),
            Err(u) => Err(u.clone()),
        }
    }

    fn too_many_pixels(
        &self,
        name: &str,
        page: Option<String>,
        w: u32,
        h: u32,
    ) -> Option<AttachError> {
        let over =
            w > MAX_SIDE || h > MAX_SIDE || u64::from(w) * u64::from(h) > self.settings.max_pixels;
        over.then(|| AttachError::TooManyPixels {
            name: name.to_owned(),
            page,
            width: w,
            height: h,
            max: self
                .settings
                .max_pixels
                .min(u64::from(MAX_SIDE) * u64::from(MAX_SIDE)),
        })
    }

    /// The error for a recognition that ended at `at`: stopped when a stop arrived, else
    /// out of time.
    fn ended(&self, name: &str, why: Ended, at: String) -> AttachError {
        match why {
            Ended::Stopped { .. } if self.cancel.is_cancelled() => AttachError::OcrStopped {
                name: name.to_owned(),
                at,
            },
            Ended::Stopped { .. } => AttachError::OcrTimeout {
                name: name.to_owned(),
                secs: self.settings.timeout.as_secs(),
                at,
            },
            Ended::Failed(detail) => AttachError::OcrFailed {
                name: name.to_owned(),
                detail,
            },
        }
    }

    /// The text of an image: OCR text, or none with a note saying why (an image that only
    /// OCR makes useful, TIFF or BMP, is refused instead).
    pub fn image(
        &mut self,
        name: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<Read, AttachError> {
        if !READS.contains(&media_type) {
            return Ok(Read {
                notes: vec![format!(
                    "OCR does not read {media_type} images (it reads PNG, JPEG, TIFF, WebP and BMP); the model gets the image only"
                )],
                ..Read::default()
            });
        }
        let languages = self.settings.language_key();
        let engine = match self.engine() {
            Ok(e) => e,
            Err(u) if super::sniff::is_image(media_type) => {
                return Ok(Read {
                    notes: vec![format!(
                        "{}; the model gets the image only, without its text; {}",
                        u.reason(),
                        u.hint()
                    )],
                    ..Read::default()
                })
            }
            Err(u) => {
                return Err(AttachError::OcrUnavailable {
                    name: name.to_owned(),
                    reason: format!(
                        "{media_type} images reach models only as OCR text, and {}",
                        u.reason()
                    ),
                    hint: u.hint().into(),
                })
            }
        };
        let unreadable = |detail: String| AttachError::OcrFailed {
            name: name.to_owned(),
            detail,
        };
        let tiff = media_type == "image/tiff";
        let sizes = if tiff {
            tiff::pages(bytes).map_err(|why| unreadable(format!("its {why}")))?
        } else {
            vec![engine
                .header(bytes)
                .ok_or_else(|| unreadable(format!("its {media_type} header does not read")))?]
        };
        let pages = sizes.len();
        let label = |i: usize| (pages > 1).then(|| format!("page {} of {pages}", i + 1));
        for (i, &(w, h)) in sizes.iter().enumerate() {
            if let Some(e) = self.too_many_pixels(name, label(i), w, h) {
                return Err(e);
            }
        }
        let deadline = Instant::now() + self.settings.timeout;
        let cancel = self.cancel;
        let mut stop = || cancel.is_cancelled() || Instant::now() >= deadline;
        let mut text = String::new();
        let mut confidences = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let engine = self.engine().map_err(|u| unreadable(u.reason()))?;
            let read = match engine.read(bytes, tiff.then_some(i as u32), size, &mut stop) {
                Ok(r) => r,
                Err(why) => {
                    let progress = match &why {
                        Ended::Stopped { progress } => *progress,
                        Ended::Failed(_) => 0,
                    };
                    let at = at_page(i, pages, progress);
                    return Err(self.ended(name, why, at));
                }
            };
            if pages > 1 {
                text.push_str(&format!("[page {} of {pages}]\n", i + 1));
            }
            text.push_str(read.text.trim_end());
            text.push('\n');
            confidences.extend(read.confidences);
        }
        let engine = self.engine().map_err(|u| unreadable(u.reason()))?.name();
        Ok(ocr_read(
            engine,
            languages,
            text.trim_end().to_owned(),
            &confidences,
            pages as u32,
            pages as u32,
            Vec::new(),
        ))
    }

    /// The engine, or (it stopped being there) an OCR failure of `name`.
    fn engine_or_failed(&mut self, name: &str) -> Result<&mut Engine, AttachError> {
        self.engine().map_err(|u| AttachError::OcrFailed {
            name: name.to_owned(),
            detail: u.reason(),
        })
    }

    /// The text of a PDF: its text layer, and OCR of the images of its pages that have
    /// none (pages that OCR cannot read are named in the notes).
    pub fn pdf(&mut self, name: &str, bytes: &[u8]) -> Result<Read, AttachError> {
        let doc = Pdf::load(name, bytes)?;
        let cancel = self.cancel;
        let layer = doc.text_layer(name, &|| cancel.is_cancelled())?;
        let texts = &layer.pages;
        let scanned = scanned_pages(&doc, &layer);
        if scanned.is_empty() {
            let mut read = Read::plain(layer.text());
            read.notes = layer.notes;
            return Ok(read);
        }
        let of_pages = doc.page_count();
        let pages_text = page_list(&scanned);
        let deadline = Instant::now() + self.settings.timeout;
        let mut stop = || cancel.is_cancelled() || Instant::now() >= deadline;
        let mut notes = layer.notes.clone();
        let mut read_pages: Vec<(usize, String, Vec<u8>)> = Vec::new();
        for (n, &i) in scanned.iter().enumerate() {
            if cancel.is_cancelled() {
                let at = stopped_at(i, n, scanned.len(), 0);
                return Err(self.ended(name, Ended::Stopped { progress: 0 }, at));
            }
            if let Err(u) = self.engine() {
                return Ok(without_ocr(layer, &pages_text, scanned.len(), &u));
            }
            let mut page_text = String::new();
            let mut confidences = Vec::new();
            let mut any = false;
            for found in doc.images(i) {
                let page = Some(format!("page {} of {of_pages}", i + 1));
                let (w, h) = (found.width, found.height);
                if let Some(e) = self.too_many_pixels(name, page.clone(), w, h) {
                    return Err(e);
                }
                let encoded = match image_bytes(found.coding, w, h) {
                    Ok(encoded) => encoded,
                    Err(why) => {
                        notes.push(format!("page {}: {why}", i + 1));
                        continue;
                    }
                };
                let Some(size) = self.engine_or_failed(name)?.header(&encoded) else {
                    notes.push(format!(
                        "page {}: an image whose header does not read",
                        i + 1
                    ));
                    continue;
                };
                if let Some(e) = self.too_many_pixels(name, page, size.0, size.1) {
                    return Err(e);
                }
                let engine = self.engine_or_failed(name)?;
                let tiff = encoded.starts_with(b"II*\0") || encoded.starts_with(b"MM\0*");
                match engine.read(&encoded, tiff.then_some(0), size, &mut stop) {
                    Ok(r) => {
                        any = true;
                        page_text.push_str(r.text.trim_end());
                        page_text.push('\n');
                        confidences.extend(r.confidences);
                    }
                    Err(Ended::Failed(why)) => {
                        notes.push(format!("page {}: {why}", i + 1));
                    }
                    Err(Ended::Stopped { progress }) => {
                        let at = stopped_at(i, n, scanned.len(), progress);
                        return Err(self.ended(name, Ended::Stopped { progress }, at));
                    }
                }
            }
            if any {
                read_pages.push((i, page_text, confidences));
            }
        }
        if read_pages.is_empty() {
            notes.push(format!(
                "{pages_text} without a text layer could not be read by OCR"
            ));
            let mut read = Read::plain(layer.text());
            read.notes = notes;
            return Ok(read);
        }
        let (text, all_conf) = with_ocr_pages(texts, &read_pages);
        let engine = match self.engine() {
            Ok(e) => e.name(),
            Err(u) => u.reason(),
        };
        Ok(ocr_read(
            engine,
            self.settings.language_key(),
            text,
            &all_conf,
            read_pages.len() as u32,
            of_pages as u32,
            notes,
        ))
    }
}

/// The pages of a PDF that OCR reads: those read whose text layer is empty and that have
/// images. None when the text is full already; pages not read are not read by OCR either.
fn scanned_pages(doc: &Pdf, layer: &super::pdf_text::Layer) -> Vec<usize> {
    let texts = &layer.pages;
    (0..texts.len())
        .filter(|&i| !layer.full && texts[i].trim().is_empty() && !doc.images(i).is_empty())
        .collect()
}

/// A PDF's text layer alone, with a note that its `count` pages without one (`pages_text`)
/// were not read, for reason `u`.
fn without_ocr(
    layer: super::pdf_text::Layer,
    pages_text: &str,
    count: usize,
    u: &Unavailable,
) -> Read {
    let were = if count == 1 { "was" } else { "were" };
    let mut read = Read::plain(layer.text());
    read.notes = layer.notes;
    read.notes.push(format!(
        "{pages_text} without a text layer {were} not read: {}; {}",
        u.reason(),
        u.hint()
    ));
    read
}

/// Where OCR of a PDF stopped: on page index `i`, the `n`-th (from 0) of the `of` pages
/// without text, `progress` percent into it.
fn stopped_at(i: usize, n: usize, of: usize, progress: u8) -> String {
    format!(
        " on page {} ({} of the {of} pages without text; {progress}% of the page read)",
        i + 1,
        n + 1
    )
}

/// The bytes of a PDF page's image that the OCR engine reads (raw samples as a PNM), or why
/// there are none.
fn image_bytes(coding: Coding<'_>, w: u32, h: u32) -> Result<Vec<u8>, String> {
    match coding {
        Coding::Unsupported(why) => Err(why),
        Coding::Encoded(b) => Ok(b.into_owned()),
        Coding::Raw {
            stream,
            components,
            bits,
            invert,
        } => match pdf::raw_pixels(stream, w, h, components, bits, invert) {
            Ok(raw) => Ok(pnm(&raw)),
            Err(why) => Err(format!("an image that does not read: {why}")),
        },
    }
}

/// The text of a PDF whose pages' text layers are `texts`, with the pages OCR read
/// (`read_pages`: page index, text, word confidences) in place of their empty layers, each
/// under a line that says so; and the confidences of every word OCR read.
fn with_ocr_pages(texts: &[String], read_pages: &[(usize, String, Vec<u8>)]) -> (String, Vec<u8>) {
    let mut all_conf = Vec::new();
    let mut text = String::new();
    for (i, t) in texts.iter().enumerate() {
        match read_pages.iter().find(|(p, _, _)| *p == i) {
            Some((_, page_text, conf)) => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                let mean =
                    mean(conf).map_or("no words".into(), |m| format!("mean confidence {m}%"));
                text.push_str(&format!(
                    "[page {}: no text layer; OCR text, {mean}]\n{page_text}",
                    i + 1
                ));
                all_conf.extend_from_slice(conf);
            }
            None => text.push_str(t),
        }
    }
    (text, all_conf)
}

/// "page 3", "pages 2, 3 and 5".
fn page_list(pages: &[usize]) -> String {
    let n: Vec<String> = pages.iter().map(|p| (p + 1).to_string()).collect();
    match n.as_slice() {
        [one] => format!("page {one}"),
        [rest @ .., last] => format!("pages {} and {last}", rest.join(", ")),
        [] => "no page".into(),
    }
}

fn ocr_read(
    engine: String,
    languages: String,
    text: String,
    confidences: &[u8],
    pages: u32,
    of_pages: u32,
    notes: Vec<String>,
) -> Read {
    let text_len = text.len();
    let (text, truncated) = cap_text(text);
    let info = OcrInfo {
        engine,
        languages,
        confidence: mean(confidences),
        words: confidences.len() as u64,
        pages,
        of_pages,
        text_len: text_len as u64,
    };
    Read {
        object: Some(encode_ocr(&info, &text)),
        text_len,
        truncated,
        ocr: Some(info),
        notes,
    }
}

/// Raw pixels as a PNM file (PGM, PPM, or PBM where 1 is black), which the decoder reads
/// like any other image.
fn pnm(raw: &RawImage) -> Vec<u8> {
    let (magic, max) = match raw.bytes_per_pixel {
        0 => ("P4", ""),
        1 => ("P5", "255\n"),
        _ => ("P6", "255\n"),
    };
    let mut out = format!("{magic}\n{} {}\n{max}", raw.width, raw.height).into_bytes();
    let start = out.len();
    out.extend_from_slice(&raw.data);
    if raw.bytes_per_pixel == 0 {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_packages_are_debian_names() {
        assert_eq!(package_of("deu"), "tesseract-ocr-deu");
        assert_eq!(package_of("chi_sim"), "tesseract-ocr-chi-sim");
    }

    #[test]
    fn page_lists_read_as_english() {
        assert_eq!(page_list(&[2]), "page 3");
        assert_eq!(page_list(&[1, 2, 4]), "pages 2, 3 and 5");
    }

    #[test]
    fn raw_pixels_become_pnm() {
        let raw = RawImage {
            data: vec![0b1010_0000],
            width: 3,
            height: 1,
            bytes_per_pixel: 0,
        };
        assert_eq!(pnm(&raw), b"P4\n3 1\n\x5f".to_vec());
        let grey = RawImage {
            data: vec![0, 255],
            width: 2,
            height: 1,
            bytes_per_pixel: 1,
        };
        assert_eq!(pnm(&grey), b"P5\n2 1\n255\n\x00\xff".to_vec());
    }
}
