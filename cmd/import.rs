//! `axocoatl import`

use std::io::Write;

use axocoatl::legacy::{self, Candidate, ImportState};
use axocoatl_store::legacy::InputKind;
use clap::Args;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::ImportLine;
use crate::ui::Ui;

/// Import pre-1.0 state: the transcripts of 0.1.x checkpoints into session history.
///
/// A 0.1.x single-agent session kept its conversation only in a checkpoint
/// (.axocoatl/checkpoints/<component>/<seq>.json or <seq>.ckpt). When its session has no
/// canonical turns, the whole transcript is committed to the ledger first, one turn per
/// request with its tool calls and answer (a turn without a completed assistant response is
/// recorded interrupted), and only then is a current checkpoint written. Every command does
/// this when it opens the repository; `import` does it and says what it did, and copies the
/// pre-1.0 run records of the configured automations into automation/runs-v1/.
///
/// `--dry-run` lists every pre-1.0 input (checkpoints, core memory, shared core memory,
/// daily logs, semantic memory, automation runs), how it is read, and what would be
/// imported, and writes nothing. Pre-1.0 files are only ever read: this is not a general
/// migration tool and it erases nothing (see docs/legacy.md).
///
/// Examples:
///   axocoatl import --dry-run
///   axocoatl import
///   axocoatl import --json | jq 'select(.type == "checkpoint") | .state'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ImportArgs {
    /// Show what would be imported; write nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Print JSON Lines: one object per checkpoint and per other input, then a summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ImportArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open_without_import()?;
    let report = plan_or_import(&ws, args.dry_run)?;
    let rel = |p: &std::path::Path| {
        p.strip_prefix(ws.repo().root())
            .unwrap_or(p)
            .display()
            .to_string()
    };
    for c in &report.checkpoints {
        if args.json {
            ui.json_line(&ImportLine::Checkpoint(c))?;
        } else {
            writeln!(ui.out, "{}", describe(c, args.dry_run))?;
        }
    }
    let others: Vec<_> = report
        .inputs
        .iter()
        .filter(|i| i.kind != InputKind::Checkpoints)
        .collect();
    for i in &others {
        if args.json {
            ui.json_line(&ImportLine::Input {
                kind: i.kind.as_str(),
                id: &i.id,
                path: rel(&i.path),
                files: i.files,
                read: legacy::how_read(i.kind),
            })?;
        } else {
            writeln!(
                ui.out,
                "{}: {} of {}: {}",
                rel(&i.path),
                i.kind.as_str(),
                i.id,
                legacy::how_read(i.kind)
            )?;
        }
    }
    for name in &report.runs_copied {
        if !args.json {
            writeln!(
                ui.out,
                "automation/runs/{name}: copied into automation/runs-v1/"
            )?;
        }
    }
    let count = |f: &dyn Fn(&Candidate) -> bool| report.checkpoints.iter().filter(|c| f(c)).count();
    let imported = count(&|c| c.action.is_some());
    let pending = count(&|c| {
        c.action.is_none()
            && matches!(
                c.state,
                ImportState::Pending | ImportState::Partial | ImportState::CheckpointMissing
            )
    });
    let done = count(&|c| c.action.is_none() && c.state == ImportState::Imported);
    let skipped = count(&|c| c.state == ImportState::Skipped);
    if args.json {
        ui.json_line(&ImportLine::Summary {
            dry_run: args.dry_run,
            imported,
            pending,
            already_imported: done,
            skipped,
            other_inputs: others.len(),
            runs_copied: &report.runs_copied,
        })?;
    } else if report.inputs.is_empty() {
        writeln!(ui.out, "no pre-1.0 inputs")?;
    } else {
        let what = if args.dry_run {
            format!("{pending} to import")
        } else {
            format!("{imported} imported")
        };
        writeln!(
            ui.out,
            "{what}, {done} already imported, {skipped} skipped; {} other pre-1.0 input{} read in place{}",
            others.len(),
            if others.len() == 1 { "" } else { "s" },
            if args.dry_run { " (dry run: nothing written)" } else { "" }
        )?;
    }
    Ok(exit::OK)
}

/// What importing would do (`dry_run`), or what it did.
fn plan_or_import(ws: &axocoatl::workspace::Workspace, dry_run: bool) -> CliResult<legacy::Report> {
    if dry_run {
        return Ok(legacy::plan(ws.repo())?);
    }
    let keep = ws
        .config()
        .map(|c| c.checkpoint.keep)
        .unwrap_or_else(|_| axocoatl::config::CheckpointConfig::default().keep);
    let automations: Vec<String> = ws
        .config()
        .map(|c| c.automations.iter().map(|a| a.id.clone()).collect())
        .unwrap_or_default();
    Ok(legacy::import(ws.repo(), keep, &automations)?)
}

/// One line about a legacy checkpoint directory.
fn describe(c: &Candidate, dry_run: bool) -> String {
    let turns = format!(
        "{} turn{} ({} completed, {} interrupted)",
        c.turns,
        if c.turns == 1 { "" } else { "s" },
        c.completed,
        c.interrupted
    );
    let format = c.format.map(|f| format!(" ({f})")).unwrap_or_default();
    let into = format!("session {} (agent {})", c.session, c.agent);
    let what = match (c.state, c.action, dry_run) {
        (ImportState::Skipped, _, _) => {
            return format!(
                "{}{format}: skipped: {}",
                c.source,
                c.reason.as_deref().unwrap_or("not importable")
            )
        }
        (_, Some("checkpoint-written"), _) => {
            format!("already imported into {into}; its checkpoint written now")
        }
        (_, Some("finished"), _) => format!("import into {into} finished: {turns}"),
        (_, Some(_), _) => format!("imported into {into}: {turns}"),
        (ImportState::Imported, None, _) => format!("already imported into {into}"),
        (ImportState::Pending, None, true) => format!("would import into {into}: {turns}"),
        (ImportState::Partial, None, true) => {
            format!("would finish the import into {into} cut short: {turns}")
        }
        (ImportState::CheckpointMissing, None, true) => {
            format!("already imported into {into}; would write its checkpoint")
        }
        (_, None, _) => format!("not imported now (session {} is busy)", c.session),
    };
    format!("{}{format}: {what}", c.source)
}
