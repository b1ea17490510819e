//! `axocoatl export`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::clock;
use axocoatl::history::TurnView;
use clap::{Args, ValueEnum};
use serde_json::json;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{turn_json, usage_text};
use crate::ui::Ui;

pub const NOT_A_BACKUP: &str = "This export is a copy of the recorded History for review or handoff. It is not a backup: it does not include the working tree, every data store, or enough information to restore axocoatl.";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Markdown,
    Json,
}

/// Export History: a readable transcript (markdown) or every turn with all its records (json).
///
/// An export is a copy, not a backup: it does not include the working tree, every data store,
/// or enough information to restore axocoatl.
///
/// When ledger records cannot be read (damage; see `axocoatl fsck`), the export is still
/// written with what could be read, marked INCOMPLETE at its top (markdown) or with
/// `"complete": false` and the damage listed (json), each damaged record is named on
/// stderr, and the exit code is 1.
///
/// Examples:
///   axocoatl export > transcript.md
///   axocoatl export --all --format json -o history.json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ExportArgs {
    /// The session [default: HEAD].
    #[arg(short, long, conflicts_with = "all")]
    pub session: Option<String>,
    /// Every session.
    #[arg(long)]
    pub all: bool,
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    pub format: Format,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: ExportArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let (projection, records) =
        axocoatl::history::project_scope_with_records(ws.repo(), session.as_deref())?;
    crate::fmt::warn_problems(ui, &projection)?;
    let turns: Vec<&TurnView> = projection
        .turns
        .iter()
        .filter(|t| session.as_deref().is_none_or(|s| t.session == s))
        .collect();
    let text = match args.format {
        Format::Markdown => markdown(&turns, session.as_deref(), &projection.problems),
        Format::Json => json_export(records, &turns, session.as_deref(), &projection.problems)?,
    };
    match args.output {
        Some(path) => {
            let path = if path.is_absolute() {
                path
            } else {
                g.cwd()?.join(path)
            };
            std::fs::write(&path, text).map_err(|e| {
                CliError::new(exit::ERROR, format!("cannot write {}: {e}", path.display()))
            })?;
        }
        None => ui.out.write_all(text.as_bytes())?,
    }
    // Never an incomplete copy in silence: marked inside, warned above, and a failure here.
    Ok(if projection.problems.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

type Damaged = axocoatl_store::ledger::Damaged;

fn markdown(turns: &[&TurnView], session: Option<&str>, damaged: &[Damaged]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let scope = session
        .map(|s| format!("session {s}"))
        .unwrap_or_else(|| "all sessions".into());
    let _ = writeln!(o, "# axocoatl History: {scope}\n");
    let _ = writeln!(o, "> {NOT_A_BACKUP}\n");
    if !damaged.is_empty() {
        let _ = writeln!(
            o,
            "> **INCOMPLETE**: {} damaged ledger record{} could not be read; what they held is missing below (run `axocoatl fsck`):",
            damaged.len(),
            if damaged.len() == 1 { "" } else { "s" }
        );
        for d in damaged {
            let _ = writeln!(o, "> - {d}");
        }
        let _ = writeln!(o);
    }
    let mut current = "";
    for t in turns {
        if session.is_none() && t.session != current {
            current = &t.session;
            let _ = writeln!(o, "## Session {}\n", t.session);
        }
        let mut head = format!("### Turn {} ({})", t.turn, t.state.as_str());
        if t.superseded {
            head.push_str(", superseded by a rewind");
        }
        let _ = writeln!(o, "{head}\n");
        let _ = writeln!(o, "- agent: {}", t.agent);
        let _ = writeln!(o, "- started: {}", clock::rfc3339(t.started_at));
        if let Some(e) = t.ended_at {
            let _ = writeln!(o, "- ended: {}", clock::rfc3339(e));
        }
        if let Some(r) = &t.retry_of {
            let _ = writeln!(o, "- retry of: {r}");
        }
        for c in &t.context {
            let _ = writeln!(o, "- context: {} ({} bytes)", c.label, c.len);
        }
        for a in &t.attachments {
            let _ = writeln!(
                o,
                "- attachment: {} {:?} ({}, {} bytes)",
                a.reference, a.name, a.media_type, a.size
            );
        }
        if let Some(u) = &t.usage {
            let _ = writeln!(o, "- usage: {}", usage_text(u));
        }
        let _ = writeln!(o, "\n**Request**\n\n{}\n", t.request);
        for x in &t.tools {
            let status = match (x.exit_code, x.is_error) {
                (Some(code), _) => format!(" (exit {code})"),
                (None, true) => " (error)".to_owned(),
                (None, false) => String::new(),
            };
            let _ = writeln!(
                o,
                "**Tool** `{}` `{}`{status} →\n\n```\n{}\n```\n",
                x.name,
                x.arguments,
                x.output.as_deref().unwrap_or("(no result)").trim_end()
            );
        }
        if !t.output.is_empty() {
            let _ = writeln!(o, "**Response**\n\n{}\n", t.output);
        }
        if let Some(e) = &t.error {
            let _ = writeln!(o, "**Error**: {e}\n");
        }
    }
    o
}

fn json_export(
    mut records: axocoatl::history::TurnRecords,
    turns: &[&TurnView],
    session: Option<&str>,
    damaged: &[Damaged],
) -> CliResult<String> {
    let mut body = |t: &TurnView| -> Vec<serde_json::Value> {
        let entries = records.remove(t.turn.as_str()).unwrap_or_default();
        entries
            .into_iter()
            .filter_map(|entry| {
                let record = entry.record?;
                let mut body = record.body_json();
                body["kind"] = json!(record.kind_name());
                body["seq"] = json!(entry.seq);
                Some(body)
            })
            .collect()
    };
    let out: Vec<_> = turns
        .iter()
        .map(|t| {
            let mut v = turn_json(t);
            v["records"] = json!(body(t));
            v
        })
        .collect();
    let doc = json!({
        "export": {
            "format": "axocoatl-history-export",
            "version": 1,
            "scope": session.map(|s| json!({"session": s})).unwrap_or_else(|| json!("all")),
            "note": NOT_A_BACKUP,
            "complete": damaged.is_empty(),
            "damaged": damaged.iter().map(|d| json!({
                "file": d.path.display().to_string(),
                "offset": d.offset,
                "reason": d.reason,
            })).collect::<Vec<_>>(),
        },
        "turns": out,
    });
    serde_json::to_string_pretty(&doc)
        .map(|s| s + "\n")
        .map_err(|e| CliError::new(exit::ERROR, e.to_string()))
}
