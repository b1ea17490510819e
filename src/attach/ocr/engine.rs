//! One Tesseract engine for the attachments of one `attach add`: the languages loaded once,
//! and orientation detection when its data is installed.

use super::tess::{self, Api, Library, Pix, Recognized};
use super::{has_language, Ended, PageRead, Settings, Unavailable};

/// A reading with at least this mean confidence is kept as it is. Below it (a page turned
/// sideways or upside down reads at 30-40, an upright one at 85-95), orientation detection
/// looks at the page, and when it says the page is turned, the page is read again upright
/// and the better reading is kept. Upright pages, the common case, so cost one reading:
/// detection takes 0.4 s of CPU on a dense A4 page at 300 dpi, a quarter of a reading.
const UPRIGHT: u8 = 70;

pub struct Engine {
    lib: &'static Library,
    api: Api,
    /// Orientation detection (`osd.traineddata`), started when a page first needs it;
    /// `Some(None)` when its data is not installed.
    osd: Option<Option<Api>>,
}

impl Engine {
    pub fn new(settings: &Settings) -> Result<Engine, Unavailable> {
        let lib = tess::library().map_err(|e| Unavailable::NoLibrary(e.to_owned()))?;
        let missing = super::missing_languages(&settings.languages);
        if !missing.is_empty() {
            return Err(Unavailable::Languages(missing));
        }
        let api =
            Api::new(lib, &settings.languages.join("+"), false).map_err(Unavailable::Engine)?;
        Ok(Engine {
            lib,
            api,
            osd: None,
        })
    }

    /// `tesseract 5.3.0`.
    pub fn name(&self) -> String {
        format!("tesseract {}", self.lib.version)
    }

    /// The width and height in an image's header, without decoding it.
    pub fn header(&self, bytes: &[u8]) -> Option<(u32, u32)> {
        self.lib.header(bytes).map(|h| (h.width, h.height))
    }

    /// Decodes `bytes` (page `tiff_page` of a TIFF), which its header said is `size`, and
    /// reads it.
    pub fn read(
        &mut self,
        bytes: &[u8],
        tiff_page: Option<u32>,
        size: (u32, u32),
        stop: &mut dyn FnMut() -> bool,
    ) -> Result<PageRead, Ended> {
        let pix = self
            .lib
            .decode(bytes, tiff_page)
            .ok_or_else(|| Ended::Failed("the image does not decode".into()))?;
        if (pix.width(), pix.height()) != size {
            return Err(Ended::Failed(format!(
                "the image decodes to {} x {} pixels, not the {} x {} its header says",
                pix.width(),
                pix.height(),
                size.0,
                size.1
            )));
        }
        if stop() {
            return Err(Ended::Stopped { progress: 0 });
        }
        let first = self.recognize(&pix, stop)?;
        if first.mean().is_some_and(|m| m >= UPRIGHT) {
            return Ok(first);
        }
        let lib = self.lib;
        let osd = self.osd.get_or_insert_with(|| {
            has_language("osd")
                .then(|| Api::new(lib, "osd", true).ok())
                .flatten()
        });
        let turn = match osd {
            Some(osd) => osd.orientation(&pix).map_or(0, |(quarters, _)| quarters),
            None => 0,
        };
        if turn == 0 {
            return Ok(first);
        }
        let turned = pix
            .rotated(turn)
            .ok_or_else(|| Ended::Failed("the image could not be turned upright".into()))?;
        let second = self.recognize(&turned, stop)?;
        Ok(if second.mean() > first.mean() {
            second
        } else {
            first
        })
    }

    fn recognize(&mut self, pix: &Pix, stop: &mut dyn FnMut() -> bool) -> Result<PageRead, Ended> {
        self.api.set_pix(pix);
        match self.api.recognize(stop) {
            // Tesseract keeps a confidence for words that came out empty: a page without
            // text has no words.
            Recognized::Done { text, .. } if text.trim().is_empty() => Ok(PageRead {
                text,
                confidences: Vec::new(),
            }),
            Recognized::Done { text, confidences } => Ok(PageRead { text, confidences }),
            Recognized::Cancelled { progress } => Err(Ended::Stopped { progress }),
            Recognized::Failed => Err(Ended::Failed("Tesseract could not read the image".into())),
        }
    }
}
