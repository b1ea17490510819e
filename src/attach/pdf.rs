//! A PDF's text, page by page, and the images of its pages, for OCR of the pages that have
//! no text layer (scans).
//!
//! What is read of a page's images: the image XObjects in the page's own resources, coded
//! as JPEG (DCTDecode), JPEG 2000 (JPXDecode), CCITT fax (group 3 or 4, put in a TIFF for
//! the decoder) or raw pixels behind the stream filters lopdf decodes (Flate with or
//! without PNG predictors, LZW, run length, ASCII hex and 85) in grey or RGB, 1 or 8 bits
//! per sample. Not read: JBIG2, images inside form XObjects or inline in the content,
//! indexed, CMYK and other colour spaces, 2, 4 and 16 bits per sample, and text drawn as
//! vector paths (that needs a renderer, which axocoatl does not have).

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};

use lopdf::{Dictionary, Document, Object, ObjectId, Stream};

use super::tiff::{self, Ccitt};
use super::AttachError;

/// A loaded document and its pages in order.
pub struct Pdf {
    doc: Document,
    pages: Vec<ObjectId>,
}

/// An image on a page, not decoded yet.
pub struct Found<'a> {
    pub width: u32,
    pub height: u32,
    pub coding: Coding<'a>,
}

pub enum Coding<'a> {
    /// Bytes an image decoder reads as they are: JPEG, JPEG 2000, or a TIFF around CCITT
    /// fax data.
    Encoded(Cow<'a, [u8]>),
    /// Samples behind the stream's filters.
    Raw {
        stream: &'a Stream,
        components: u32,
        bits: u32,
        invert: bool,
    },
    /// Why it is not read.
    Unsupported(String),
}

/// Pixels: 8-bit grey or RGB rows, or 1-bit rows (MSB first, 1 is white), each row
/// starting on a byte.
pub struct RawImage {
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// 0 for 1-bit pixels.
    pub bytes_per_pixel: u32,
}

fn fail(name: &str, detail: String) -> AttachError {
    AttachError::Pdf {
        name: name.to_owned(),
        detail,
    }
}

/// Runs third-party code that reads untrusted input: a panic in it is an error of the file,
/// never the end of the process.
pub(super) fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err("the PDF parser failed on this file".into()))
}

impl Pdf {
    pub fn load(name: &str, bytes: &[u8]) -> Result<Pdf, AttachError> {
        guarded(|| {
            let doc = Document::load_mem(bytes).map_err(|e| e.to_string())?;
            let pages = doc.get_pages().into_values().collect();
            Ok(Pdf { doc, pages })
        })
        .map_err(|e| fail(name, e))
    }

    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// The document, for the reading of its text layer (`pdf_text.rs`).
    pub(super) fn document(&self) -> &Document {
        &self.doc
    }

    /// The pages' objects, in order.
    pub(super) fn page_ids(&self) -> &[ObjectId] {
        &self.pages
    }

    /// The images of page `index` (from 0), in the order of the page's resources.
    pub fn images(&self, index: usize) -> Vec<Found<'_>> {
        let Some(&page) = self.pages.get(index) else {
            return Vec::new();
        };
        let found = guarded(|| {
            let images = self.doc.get_page_images(page).map_err(|e| e.to_string())?;
            Ok(images
                .iter()
                .filter_map(|image| self.found(image.id))
                .collect::<Vec<_>>())
        });
        found.unwrap_or_else(|e| {
            vec![Found {
                width: 0,
                height: 0,
                coding: Coding::Unsupported(format!("its images do not read: {e}")),
            }]
        })
    }

    fn found(&self, id: ObjectId) -> Option<Found<'_>> {
        let stream = self.doc.get_object(id).ok()?.as_stream().ok()?;
        let dict = &stream.dict;
        let number = |key: &[u8]| dict.get(key).ok().and_then(|o| o.as_i64().ok());
        let width = u32::try_from(number(b"Width")?).ok()?;
        let height = u32::try_from(number(b"Height")?).ok()?;
        let filters: Vec<Vec<u8>> = stream
            .filters()
            .map(|f| f.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default();
        let unsupported = |why: String| {
            Some(Found {
                width,
                height,
                coding: Coding::Unsupported(why),
            })
        };
        let last = filters.last().map(Vec::as_slice);
        let coding = match last {
            Some(b"DCTDecode" | b"JPXDecode" | b"CCITTFaxDecode") if filters.len() > 1 => {
                return unsupported(format!(
                    "an image coded with {} filters in a row",
                    filters.len()
                ));
            }
            Some(b"DCTDecode" | b"JPXDecode") => Coding::Encoded(Cow::Borrowed(&stream.content)),
            Some(b"CCITTFaxDecode") => {
                let params = self.params(dict);
                let param = |key: &[u8]| params.and_then(|p| p.get(key).ok());
                let int = |key: &[u8], default: i64| {
                    param(key).and_then(|o| o.as_i64().ok()).unwrap_or(default)
                };
                let flag = |key: &[u8]| param(key).and_then(|o| o.as_bool().ok()).unwrap_or(false);
                let c = Ccitt {
                    width: u32::try_from(int(b"Columns", 1728)).ok()?,
                    height: match int(b"Rows", 0) {
                        rows if rows > 0 => u32::try_from(rows).ok()?,
                        _ => height,
                    },
                    k: int(b"K", 0),
                    black_is_1: flag(b"BlackIs1"),
                    byte_align: flag(b"EncodedByteAlign"),
                };
                Coding::Encoded(Cow::Owned(tiff::wrap_ccitt(&stream.content, &c)))
            }
            Some(other) if !raw_filter(other) => {
                return unsupported(format!(
                    "an image coded with {}, which OCR does not read",
                    String::from_utf8_lossy(other)
                ));
            }
            _ => {
                let mask = dict
                    .get(b"ImageMask")
                    .ok()
                    .and_then(|o| o.as_bool().ok())
                    .unwrap_or(false);
                let (components, bits) = if mask {
                    (1, 1)
                } else {
                    match self.components(dict) {
                        Ok(c) => (c, number(b"BitsPerComponent").unwrap_or(8) as u32),
                        Err(why) => return unsupported(why),
                    }
                };
                if bits != 1 && bits != 8 {
                    return unsupported(format!("an image of {bits} bits per sample"));
                }
                if components == 3 && bits == 1 {
                    return unsupported("a 1-bit colour image".into());
                }
                let invert = matches!(
                    dict.get(b"Decode").ok().and_then(|o| o.as_array().ok()),
                    Some(d) if d.first().and_then(|o| o.as_float().ok()) == Some(1.0)
                );
                Coding::Raw {
                    stream,
                    components,
                    bits,
                    invert,
                }
            }
        };
        Some(Found {
            width,
            height,
            coding,
        })
    }

    fn params<'a>(&'a self, dict: &'a Dictionary) -> Option<&'a Dictionary> {
        let o = self.resolve(dict.get(b"DecodeParms").ok()?);
        match o {
            Object::Dictionary(d) => Some(d),
            Object::Array(a) => match a.last().map(|o| self.resolve(o)) {
                Some(Object::Dictionary(d)) => Some(d),
                _ => None,
            },
            _ => None,
        }
    }

    fn resolve<'a>(&'a self, o: &'a Object) -> &'a Object {
        match o {
            Object::Reference(id) => self.doc.get_object(*id).unwrap_or(o),
            _ => o,
        }
    }

    /// Samples per pixel of an image's colour space: 1 (grey) or 3 (RGB).
    fn components(&self, dict: &Dictionary) -> Result<u32, String> {
        let space = dict
            .get(b"ColorSpace")
            .map(|o| self.resolve(o))
            .map_err(|_| "an image without a colour space".to_owned())?;
        let (name, icc) = match space {
            Object::Name(n) => (n.as_slice(), None),
            Object::Array(a) => match a.first().and_then(|o| o.as_name().ok()) {
                Some(n) => (n, a.get(1)),
                None => return Err("an image with an unreadable colour space".into()),
            },
            _ => return Err("an image with an unreadable colour space".into()),
        };
        match name {
            b"DeviceGray" | b"CalGray" | b"G" => Ok(1),
            b"DeviceRGB" | b"CalRGB" | b"RGB" => Ok(3),
            b"ICCBased" => {
                let n = icc
                    .map(|o| self.resolve(o))
                    .and_then(|o| o.as_stream().ok())
                    .and_then(|s| s.dict.get(b"N").ok())
                    .and_then(|o| o.as_i64().ok());
                match n {
                    Some(1) => Ok(1),
                    Some(3) => Ok(3),
                    _ => Err("an image in an ICC colour space that is neither grey nor RGB".into()),
                }
            }
            other => Err(format!(
                "an image in the {} colour space",
                String::from_utf8_lossy(other)
            )),
        }
    }
}

fn raw_filter(name: &[u8]) -> bool {
    matches!(
        name,
        b"FlateDecode" | b"LZWDecode" | b"RunLengthDecode" | b"ASCIIHexDecode" | b"ASCII85Decode"
    )
}

/// The pixels of a raw image, its filters undone within the bytes its size allows (a
/// stream that inflates further is refused).
pub fn raw_pixels(
    stream: &Stream,
    width: u32,
    height: u32,
    components: u32,
    bits: u32,
    invert: bool,
) -> Result<RawImage, String> {
    let stride = (u64::from(width) * u64::from(components) * u64::from(bits)).div_ceil(8);
    let want = stride
        .checked_mul(u64::from(height))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or("an image too large to hold")?;
    // PNG predictors add a byte to every row before they are undone.
    let limit = want.saturating_add(height as usize);
    let mut data = guarded(|| {
        stream
            .decompressed_content_with_limit(limit)
            .map_err(|e| format!("its pixels do not decode: {e}"))
    })?;
    if data.len() < want {
        return Err(format!(
            "its pixels are {} bytes, short of the {want} its size needs",
            data.len()
        ));
    }
    data.truncate(want);
    if invert {
        for b in &mut data {
            *b = !*b;
        }
    }
    Ok(RawImage {
        data,
        width,
        height,
        bytes_per_pixel: if bits == 1 { 0 } else { components },
    })
}
