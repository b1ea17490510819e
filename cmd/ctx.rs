//! Global options and opening the workspace they point at.

use std::path::PathBuf;

use axocoatl::workspace::{Locator, Workspace, DIR_ENV};
use clap::Args;

use crate::error::CliResult;
use crate::ui::ColorChoice;

#[derive(Clone, Debug, Args)]
pub struct GlobalArgs {
    /// Run as if started in DIR.
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub chdir: Option<PathBuf>,
    /// The repository: a `.axocoatl` directory or the directory holding it.
    #[arg(long = "repo", value_name = "DIR", env = DIR_ENV, global = true)]
    pub repo: Option<PathBuf>,
    /// The configuration file [default: axocoatl.yaml beside .axocoatl/].
    #[arg(long, value_name = "FILE", env = "AXOCOATL_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// When to color output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
}

impl GlobalArgs {
    /// The directory commands start from: `-C DIR` or the current directory.
    pub fn cwd(&self) -> CliResult<PathBuf> {
        let here = std::env::current_dir().map_err(|e| {
            crate::error::CliError::io("read", std::path::Path::new("the current directory"), e)
        })?;
        Ok(match &self.chdir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => here.join(d),
            None => here,
        })
    }

    pub fn locator(&self) -> CliResult<Locator> {
        Ok(Locator {
            cwd: self.cwd()?,
            repo: self.repo.clone(),
            config: self.config.clone(),
        })
    }

    pub fn open(&self) -> CliResult<Workspace> {
        Ok(Workspace::open(&self.locator()?)?)
    }
}
