//! `axocoatl init`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::workspace;
use clap::Args;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::InitJson;
use crate::ui::Ui;

/// Create a repository: DIR/.axocoatl/ and a starter DIR/axocoatl.yaml.
///
/// An existing axocoatl.yaml is left untouched; when it names a `default_session`, that
/// session becomes the current one (HEAD). Running init where a repository already exists
/// is refused and changes nothing.
///
/// Examples:
///   axocoatl init
///   axocoatl init ~/agents/reviewer
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct InitArgs {
    /// The directory to create the repository in [default: the current directory].
    pub dir: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: InitArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let cwd = g.cwd()?;
    let dir = match args.dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => cwd.join(d),
        None => cwd,
    };
    let done = workspace::init(&dir)?;
    if args.json {
        ui.json_line(&InitJson {
            repository: &done.repository,
            config: &done.config,
            config_written: done.config_written,
            session: &done.session,
        })?;
        return Ok(exit::OK);
    }
    let (root, config) = (done.repository.display(), done.config.display());
    writeln!(ui.out, "Initialized empty axocoatl repository in {root}")?;
    if done.config_written {
        writeln!(ui.out, "Wrote a starter configuration to {config}")?;
    } else {
        writeln!(ui.out, "Kept the existing configuration {config}")?;
    }
    Ok(exit::OK)
}
