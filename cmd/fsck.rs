//! `axocoatl fsck`

use std::io::Write;

use axocoatl::workspace::open_options;
use axocoatl_store::fsck;
use axocoatl_store::Repo;
use clap::Args;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::FsckLine;
use crate::ui::Ui;

/// Check the repository: ledger, objects, checkpoints, memory files, automation run records.
///
/// Prints one line per finding: FILE[:OFFSET]: KIND: what is wrong. Exit 0 when clean, 9
/// when something is wrong. `--repair` fixes what a crash or a full disk leaves behind and
/// changes nothing else: it cuts a torn or damaged end of the ledger (damaged bytes are kept
/// in ledger/v1/damaged/) or a torn tail of a daily log file, removes stray temporary files,
/// recreates missing directories that hold no data, and sets a missing or unreadable HEAD to
/// `main`. Memory files: core memory (parses, its version, blocks within the limits
/// axocoatl.yaml gives them) and every line of the daily log. Pre-1.0 inputs (the
/// unversioned forms of today's directories) are listed, one line each, with how they are
/// read; they are never changed (see `axocoatl import --dry-run`).
///
/// Examples:
///   axocoatl fsck
///   axocoatl fsck --repair --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct FsckArgs {
    /// Repair what a crash or a full disk leaves behind (nothing else is ever changed).
    #[arg(long)]
    pub repair: bool,
    /// Print JSON Lines: one object per finding, then a summary.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: FsckArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    // Open without orphan recovery: fsck reports what is on disk and writes only on --repair.
    let locator = g.locator()?;
    let root = locator.find_repo()?;
    let repo = Repo::open(&root, &open_options())?;
    let mut report = fsck::check(&repo, args.repair)?;
    // Core block limits are configuration: checked when it loads.
    match axocoatl::memory::fsck::oversize_blocks_located(&repo, &locator) {
        Ok(findings) => report.findings.extend(findings),
        Err(note) => ui.warn(&note)?,
    }
    let rel = |p: &std::path::Path| {
        p.strip_prefix(repo.root())
            .unwrap_or(p)
            .display()
            .to_string()
    };
    if !args.json {
        for repair in &report.repairs {
            writeln!(ui.out, "repaired: {repair}")?;
        }
    }
    for f in &report.findings {
        if args.json {
            ui.json_line(&FsckLine::Finding {
                kind: f.kind.as_str(),
                error: f.kind.is_error(),
                file: rel(&f.file),
                offset: f.offset,
                message: &f.message,
            })?;
        } else {
            let at = f.offset.map(|o| format!(":{o}")).unwrap_or_default();
            writeln!(
                ui.out,
                "{}{at}: {}: {}",
                rel(&f.file),
                f.kind.as_str(),
                f.message
            )?;
        }
    }
    for i in &report.legacy {
        let read = axocoatl::legacy::how_read(i.kind);
        if args.json {
            ui.json_line(&FsckLine::Legacy {
                kind: i.kind.as_str(),
                id: &i.id,
                file: rel(&i.path),
                files: i.files,
                read,
            })?;
        } else {
            writeln!(
                ui.out,
                "{}: pre-1.0 {} of {}: {read}",
                rel(&i.path),
                i.kind.as_str(),
                i.id
            )?;
        }
    }
    for dir in &report.legacy_cut {
        ui.warn(&format!(
            "{}: more than {} entries; only the first were considered as pre-1.0 inputs",
            rel(dir),
            axocoatl_store::legacy::MAX_ENTRIES
        ))?;
    }
    let clean = report.is_clean();
    summary(&report, clean, args.json, ui)?;
    Ok(if clean { exit::OK } else { exit::FSCK_FINDINGS })
}

/// The last line: what was checked, and whether it is clean.
fn summary(report: &fsck::Report, clean: bool, json: bool, ui: &mut Ui) -> CliResult<()> {
    if json {
        ui.json_line(&FsckLine::Summary {
            clean,
            segments: report.segments,
            records: report.records,
            objects: report.objects,
            checkpoints: report.checkpoints,
            memory_files: report.memory_files,
            run_records: report.run_records,
            findings: report.findings.len(),
            repaired_bytes: report.repaired_bytes,
            repairs: &report.repairs,
            legacy_inputs: report.legacy.len(),
        })?;
    } else {
        let runs = if report.run_records > 0 {
            format!(
                ", {} automation run record{}",
                report.run_records,
                s(report.run_records)
            )
        } else {
            String::new()
        };
        writeln!(
            ui.out,
            "{}: {} segment{}, {} record{}, {} object{}, {} checkpoint{}, {} memory file{}{runs}",
            if clean { "clean" } else { "problems found" },
            report.segments,
            s(report.segments),
            report.records,
            s(report.records),
            report.objects,
            s(report.objects),
            report.checkpoints,
            s(report.checkpoints),
            report.memory_files,
            s(report.memory_files),
        )?;
    }
    Ok(())
}

fn s(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
