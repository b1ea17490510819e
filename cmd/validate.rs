//! `axocoatl validate`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::config::{self, Severity};
use axocoatl::workspace::CONFIG_FILE;
use clap::Args;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::ValidateLine;
use crate::ui::Ui;

/// Check a configuration file and report every problem at once.
///
/// Each problem is printed as FILE:LINE:COLUMN: message, with a hint. Exit 0 when valid,
/// 1 when not. No repository is needed.
///
/// Examples:
///   axocoatl validate
///   axocoatl validate ./axocoatl.yaml --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ValidateArgs {
    /// The file to check [default: --config, else axocoatl.yaml of the repository, else ./axocoatl.yaml].
    pub file: Option<PathBuf>,
    /// Print JSON Lines: one object per diagnostic, then a summary object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ValidateArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let cwd = g.cwd()?;
    let file = match args.file.or_else(|| g.config.clone()) {
        Some(f) if f.is_absolute() => f,
        Some(f) => cwd.join(f),
        None => match g.locator()?.find_repo() {
            Ok(root) => root.parent().unwrap_or(&root).join(CONFIG_FILE),
            Err(_) => cwd.join(CONFIG_FILE),
        },
    };
    let shown = file.strip_prefix(&cwd).unwrap_or(&file).to_path_buf();
    let (diags, summary) = match config::load(&file) {
        Ok(loaded) => {
            let c = &loaded.config;
            let summary = (c.agents.len(), c.workflows.len(), c.automations.len());
            (loaded.warnings, Some(summary))
        }
        Err(diags) => (diags, None),
    };
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diags.len() - errors;
    if args.json {
        for d in &diags {
            ui.json_line(&ValidateLine::Diagnostic {
                diagnostic: d,
                kind: "diagnostic",
            })?;
        }
        ui.json_line(&ValidateLine::Summary {
            kind: "summary",
            file: &file,
            valid: summary.is_some(),
            errors,
            warnings,
            agents: summary.map(|s| s.0),
            workflows: summary.map(|s| s.1),
            automations: summary.map(|s| s.2),
        })?;
    } else {
        for d in &diags {
            let text = d.to_string();
            match d.severity {
                Severity::Error => writeln!(ui.err, "{text}")?,
                Severity::Warning => writeln!(ui.err, "{text}")?,
            }
        }
        match summary {
            Some((a, w, au)) => writeln!(
                ui.out,
                "{}: valid ({a} agent{}, {w} workflow{}, {au} automation{}{})",
                shown.display(),
                plural(a),
                plural(w),
                plural(au),
                if warnings > 0 {
                    format!(", {warnings} warning{}", plural(warnings))
                } else {
                    String::new()
                }
            )?,
            None => writeln!(
                ui.err,
                "{}: invalid ({errors} error{}{})",
                shown.display(),
                plural(errors),
                if warnings > 0 {
                    format!(", {warnings} warning{}", plural(warnings))
                } else {
                    String::new()
                }
            )?,
        }
    }
    Ok(if summary.is_some() {
        exit::OK
    } else {
        exit::ERROR
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
