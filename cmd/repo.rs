//! `axocoatl repo`

use std::io::Write;

use axocoatl::workspace::{Source, CONFIG_FILE};
use clap::Args;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::RepoJson;
use crate::ui::Ui;

/// Print which repository commands use here, and how it was found.
///
/// Commands use `--repo DIR` (or AXOCOATL_DIR), else the first `.axocoatl/` in the current
/// directory or one above it (like git), else the home repository in
/// $XDG_DATA_HOME/axocoatl (default ~/.local/share/axocoatl), made with a starter
/// configuration the first time a command needs it. With `-C DIR` there is no home
/// fallback: DIR must have a repository. This command creates nothing.
///
/// The `.axocoatl` directory is printed on stdout; how it was found and its configuration
/// file on stderr.
///
/// Examples:
///   axocoatl repo
///   cd "$(dirname "$(axocoatl repo)")"
///   axocoatl repo --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RepoArgs {
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RepoArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let located = g.locator()?.locate()?;
    let workdir = located.root.parent().unwrap_or(&located.root).to_path_buf();
    let config = match &g.config {
        Some(c) if c.is_absolute() => c.clone(),
        Some(c) => g.cwd()?.join(c),
        None => workdir.join(CONFIG_FILE),
    };
    let exists = located.exists();
    if args.json {
        ui.json_line(&RepoJson {
            repository: &located.root,
            config: &config,
            source: located.source.as_str(),
            exists,
        })?;
        return Ok(exit::OK);
    }
    writeln!(ui.out, "{}", located.root.display())?;
    let how = match located.source {
        Source::Explicit => "named by --repo or AXOCOATL_DIR",
        Source::Discovered => "found here or above",
        Source::Home => "the home repository: no .axocoatl/ here or above",
    };
    writeln!(ui.err, "{how}; configuration {}", config.display())?;
    if !exists {
        writeln!(
            ui.err,
            "not created yet: the first command that needs it creates it (or `axocoatl init` makes one here)"
        )?;
    }
    Ok(exit::OK)
}
