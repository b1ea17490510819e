//! `axocoatl mcp serve` in a build without the `mcp` feature: said plainly.

use crate::error::{Result, RuntimeError};
use crate::workspace::Locator;

pub fn tool_names(_read_only: bool) -> Vec<&'static str> {
    Vec::new()
}

pub fn serve_stdio(_locator: Locator, _read_only: bool) -> Result<()> {
    Err(RuntimeError::NotSupported(
        "`axocoatl mcp serve` in a build without the `mcp` feature".into(),
    ))
}
