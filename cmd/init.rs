//! `axocoatl init`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::workspace::CONFIG_FILE;
use axocoatl_store::repo;
use clap::Args;
use serde_json::json;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::ui::Ui;

/// Create a repository: DIR/.axocoatl/ and a starter DIR/axocoatl.yaml.
///
/// An existing axocoatl.yaml is left untouched. Running init where a repository already
/// exists is refused and changes nothing.
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
    std::fs::create_dir_all(&dir).map_err(|e| {
        crate::error::CliError::new(exit::ERROR, format!("cannot create {}: {e}", dir.display()))
    })?;
    let root = repo::init(&dir)?;
    let config = dir.join(CONFIG_FILE);
    let wrote_config = if config.exists() {
        false
    } else {
        std::fs::write(&config, axocoatl::config::starter_config()).map_err(|e| {
            crate::error::CliError::new(
                exit::ERROR,
                format!("cannot write {}: {e}", config.display()),
            )
        })?;
        true
    };
    if args.json {
        ui.json_line(&json!({
            "repository": root,
            "config": config,
            "config_written": wrote_config,
            "session": axocoatl_store::layout::DEFAULT_SESSION,
        }))?;
    } else {
        writeln!(
            ui.out,
            "Initialized empty axocoatl repository in {}",
            root.display()
        )?;
        if wrote_config {
            writeln!(
                ui.out,
                "Wrote a starter configuration to {}",
                config.display()
            )?;
        } else {
            writeln!(
                ui.out,
                "Kept the existing configuration {}",
                config.display()
            )?;
        }
    }
    Ok(exit::OK)
}
