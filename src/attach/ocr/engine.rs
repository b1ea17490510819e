//! One Tesseract engine for the attachments of one `attach add`: the languages loaded once,
//! and orientation detection when its data is installed.

use super::tess::{self, Api, Library, Pix, Recognized};
use super::{has_language, Ended, PageRead, Settings, Unavailable};

/// Below this mean confidence, a page read after turning it is read unturned too, and the
/// better reading is kept (orientation detection can be wrong on little text).
const TURNED_KEEP: u8 = 60;

pub struct Engine {
    lib: &'static Library,
    api: Api,
    /// Orientation detection (`osd.traineddata`), when installed.
    osd: Option<Api>,
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
        let osd = if has_language("osd") {
            Api::new(lib, "osd", true).ok()
        } else {
            None
        };
        Ok(Engine { lib, api, osd })
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
        let turn = match self.osd.as_mut() {
            Some(osd) => osd.orientation(&pix).map_or(0, |(quarters, _)| quarters),
            None => 0,
        };
        if turn == 0 {
            return self.recognize(&pix, stop);
        }
        let turned = pix
            .rotated(turn)
            .ok_or_else(|| Ended::Failed("the image could not be turned upright".into()))?;
        let first = self.recognize(&turned, stop)?;
        if first.mean().is_some_and(|m| m >= TURNED_KEEP) {
            return Ok(first);
        }
        let second = self.recognize(&pix, stop)?;
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
