//! Global options and opening the workspace they point at.

use std::io::Write;
use std::path::PathBuf;

use axocoatl::workspace::{self, Locator, Workspace, DIR_ENV};
use clap::Args;

use crate::error::CliResult;
use crate::ui::ColorChoice;

#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Run as if started in DIR (its repository, or one above it, must exist).
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
    /// No progress lines on stderr (they are only ever shown on a terminal).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Say on stderr which repository the command uses.
    #[arg(long, global = true)]
    pub print_repo: bool,
    /// How the repository's indexes are kept and their builds reported, chosen per command
    /// (see `main`), not on the command line.
    #[arg(skip)]
    pub index: axocoatl_store::index::IndexOptions,
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

    /// Where the repository and configuration are looked for. Without `-C`, a directory
    /// with no repository above it uses the home repository.
    pub fn locator(&self) -> CliResult<Locator> {
        Ok(Locator {
            cwd: self.cwd()?,
            repo: self.repo.clone(),
            config: self.config.clone(),
            home: if self.chdir.is_none() {
                workspace::home_dir()
            } else {
                None
            },
            index: self.index,
            read_only: false,
        })
    }

    /// Opens the repository; says so on stderr when this created the home repository (once:
    /// the next command finds it), and with `--print-repo`.
    pub fn open(&self) -> CliResult<Workspace> {
        let ws = Workspace::open(&self.locator()?)?;
        self.said(&ws);
        Ok(ws)
    }

    /// [`GlobalArgs::open`] for a command that only reads: outside a project, before the
    /// home repository exists, there is nothing to read, and it is not made for this.
    pub fn open_read(&self) -> CliResult<Workspace> {
        let locator = Locator {
            read_only: true,
            ..self.locator()?
        };
        let ws = Workspace::open(&locator)?;
        self.said(&ws);
        Ok(ws)
    }

    /// [`GlobalArgs::open`] without the pre-1.0 import every open runs.
    pub fn open_without_import(&self) -> CliResult<Workspace> {
        let ws = Workspace::open_without_import(&self.locator()?)?;
        self.said(&ws);
        Ok(ws)
    }

    fn said(&self, ws: &Workspace) {
        let mut err = std::io::stderr();
        let workdir = ws.repo().workdir().display().to_string();
        if ws.created_home {
            let _ = writeln!(
                err,
                "axocoatl: created the home repository in {workdir} with a starter {} \
                 (no .axocoatl/ here or above; `axocoatl init` makes one for a project)",
                workspace::CONFIG_FILE
            );
        }
        if self.print_repo {
            let _ = writeln!(
                err,
                "axocoatl: repository {} ({})",
                ws.repo().root().display(),
                ws.source.as_str()
            );
        }
    }
}
