//! A build without the `ocr` feature has no engine: every attempt says so.

use super::{Ended, PageRead, Settings, Unavailable};

/// No value of this type exists: this build cannot read text in images.
pub enum Engine {}

impl Engine {
    pub fn new(_: &Settings) -> Result<Engine, Unavailable> {
        Err(Unavailable::NotBuilt)
    }

    pub fn name(&self) -> String {
        match *self {}
    }

    pub fn header(&self, _: &[u8]) -> Option<(u32, u32)> {
        match *self {}
    }

    pub fn read(
        &mut self,
        _: &[u8],
        _: Option<u32>,
        _: (u32, u32),
        _: &mut dyn FnMut() -> bool,
    ) -> Result<PageRead, Ended> {
        match *self {}
    }
}
