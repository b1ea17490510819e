//! `axocoatl export`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::clock;
use axocoatl::history::TurnView;
use axocoatl::{query, ErrorKind};
use clap::{Args, ValueEnum};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{safe, usage_text, AgentNames};
use crate::json::{
    DamagedJson, ExportHeader, ExportJson, ExportScope, ExportSummaryJson, ExportTurn, RecordJson,
    TurnJson,
};
use crate::ui::Ui;

pub const NOT_A_BACKUP: &str = "This export is a copy of the recorded History for review or handoff. It is not a backup: it does not include the working tree, every data store, or enough information to restore axocoatl.";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable transcript.
    #[default]
    Markdown,
    /// Every turn with all its records.
    Json,
    /// A SQLite database for SQL and Datasette (needs -o; refreshed in place).
    Sqlite,
    /// OpenTelemetry traces of ended turns: OTLP JSON, one trace per line.
    Otlp,
}

/// Export History: a readable transcript (markdown), every turn with all its records
/// (json), a SQLite database (sqlite) or OpenTelemetry traces (otlp).
///
/// An export is a copy, not a backup: it does not include the working tree, every data store,
/// or enough information to restore axocoatl.
///
/// --format sqlite -o FILE writes tables of sessions, turns, events (every record in ledger
/// order, full-text indexed as Datasette expects), model and tool calls, subtasks,
/// attachments and automation runs. Exporting again into the same FILE adds only what the
/// ledger gained since, in one transaction (cron can refresh it every minute); a file of
/// another repository, scope or exporter is refused. See docs/export.md.
///
/// --format otlp writes the traces that `telemetry:` sends for new turns, for past ones: one
/// OTLP JSON export request per turn and line. See docs/telemetry.md.
///
/// When ledger records cannot be read (damage; see `axocoatl fsck`), the export is still
/// written with what could be read, marked INCOMPLETE at its top (markdown) or with
/// `"complete": false` and the damage listed (json), each damaged record is named on
/// stderr, and the exit code is 1.
///
/// With -o FILE, --json prints what was written as one JSON line on stdout (format, path,
/// scope, turns, complete, damaged; sqlite adds created, turns_added and seq; otlp adds
/// spans and running).
///
/// Examples:
///   axocoatl export > transcript.md
///   axocoatl export --all --format json -o history.json
///   axocoatl export --all --format sqlite -o history.db && datasette history.db
///   axocoatl export --all --format sqlite -o history.db --json | jq .turns_added
///   axocoatl export --all --format otlp -o traces.jsonl
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
    /// With -o FILE: print what was written as one JSON line on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The format's name in `--json`.
fn format_name(f: Format) -> &'static str {
    match f {
        Format::Markdown => "markdown",
        Format::Json => "json",
        Format::Sqlite => "sqlite",
        Format::Otlp => "otlp",
    }
}

pub fn run(args: ExportArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    if args.json && args.output.is_none() && args.format != Format::Sqlite {
        return Err(CliError::usage(
            "--json prints a summary of an export written to a file: give it with -o FILE",
        )
        .hint("axocoatl export --all --format json -o history.json --json"));
    }
    let ws = g.open_read()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let scope = match &session {
        Some(s) => ExportScope::Session {
            session: ws.shown_session(s).to_owned(),
        },
        None => ExportScope::All("all"),
    };
    let to = Destination {
        path: args.output.map(|p| absolute(p, g)).transpose()?,
        json: args.json.then_some(scope),
    };
    match args.format {
        Format::Sqlite => return sqlite(&ws, session.as_deref(), to, ui),
        Format::Otlp => return otlp(&ws, session.as_deref(), to, ui),
        Format::Markdown | Format::Json => {}
    }
    let (listing, records) = query::export(ws.repo(), session.as_deref())?;
    crate::fmt::warn_problems(ui, &listing.problems, listing.unknown_kinds)?;
    let turns = &listing.turns;
    let outputs = turns
        .iter()
        .map(|t| query::full_output(ws.repo(), t))
        .collect::<Result<Vec<String>, _>>()?;
    let names = AgentNames::of(&ws);
    let text = match args.format {
        Format::Markdown | Format::Sqlite | Format::Otlp => markdown(
            turns,
            &outputs,
            // Piped text whole, from its object when it was too long for the turn's record.
            &turns
                .iter()
                .map(|t| axocoatl::conversation::inline_context(ws.repo(), t))
                .collect::<Result<Vec<_>, _>>()?,
            session.as_deref(),
            &listing.problems,
            &|s: &str| ws.shown_session(s).to_owned(),
        ),
        Format::Json => {
            let damaged = &listing.problems;
            json_export(
                records,
                turns,
                &outputs,
                &names,
                session.as_deref(),
                damaged,
                &|s: &str| ws.shown_session(s).to_owned(),
            )?
        }
    };
    match to.path {
        Some(path) => {
            std::fs::write(&path, text).map_err(|e| CliError::io("write", &path, e))?;
            if let Some(scope) = to.json {
                let summary = ExportSummaryJson::new(
                    format_name(args.format),
                    &path,
                    scope,
                    turns.len() as u64,
                    &listing.problems,
                );
                ui.json_line(&summary)?;
            }
        }
        // A copy for a file or a pipe is exact; on a terminal, control sequences from
        // prompts or model output are escaped, as `history` and `show` do.
        None if ui.out_is_terminal => ui.out.write_all(safe(&text).as_bytes())?,
        None => ui.out.write_all(text.as_bytes())?,
    }
    // Never an incomplete copy in silence: marked inside, warned above, and a failure here.
    Ok(if listing.problems.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

type Damaged = axocoatl_store::ledger::Damaged;

fn absolute(path: PathBuf, g: &GlobalArgs) -> CliResult<PathBuf> {
    Ok(if path.is_absolute() {
        path
    } else {
        g.cwd()?.join(path)
    })
}

/// The exit code of an export that could not read every record: named on stderr, and 1.
fn damaged_exit(ui: &mut Ui, damaged: &[Damaged], unknown_kinds: u64) -> CliResult {
    crate::fmt::warn_problems(ui, damaged, unknown_kinds)?;
    Ok(if damaged.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

/// Where an export goes: a file (else stdout), and with `--json` the scope its summary
/// names.
struct Destination {
    path: Option<PathBuf>,
    json: Option<ExportScope>,
}

fn sqlite(
    ws: &axocoatl::workspace::Workspace,
    session: Option<&str>,
    to: Destination,
    ui: &mut Ui,
) -> CliResult {
    let Some(path) = to.path else {
        return Err(CliError::new(
            ErrorKind::Usage,
            "--format sqlite writes a database file: give it with -o FILE",
        )
        .hint("axocoatl export --all --format sqlite -o history.db"));
    };
    let report = axocoatl::export::sqlite(ws.repo(), session, &path)?;
    if let Some(scope) = to.json {
        let mut summary =
            ExportSummaryJson::new("sqlite", &path, scope, report.turns, &report.damaged);
        summary.created = Some(report.created);
        summary.turns_added = Some(report.turns_added);
        summary.seq = Some(report.seq);
        ui.json_line(&summary)?;
        return damaged_exit(ui, &report.damaged, report.unknown_kinds);
    }
    writeln!(
        ui.err,
        "{} {}: {} turn{} ({} new), up to ledger record {}",
        if report.created { "wrote" } else { "refreshed" },
        path.display(),
        report.turns,
        if report.turns == 1 { "" } else { "s" },
        report.turns_added,
        report.seq
    )?;
    damaged_exit(ui, &report.damaged, report.unknown_kinds)
}

fn otlp(
    ws: &axocoatl::workspace::Workspace,
    session: Option<&str>,
    to: Destination,
    ui: &mut Ui,
) -> CliResult {
    // Traces need the configuration only for what spans may carry (content, keys to
    // redact, provider systems): the ledger alone exports with the defaults.
    let config = ws.config().cloned().unwrap_or_default();
    let config = &config;
    let report = match &to.path {
        Some(path) => {
            let mut text = Vec::new();
            let report = axocoatl::telemetry::backfill(ws.repo(), config, session, &mut text)?;
            std::fs::write(path, text).map_err(|e| CliError::io("write", path, e))?;
            report
        }
        None => axocoatl::telemetry::backfill(ws.repo(), config, session, &mut ui.out)?,
    };
    if let (Some(path), Some(scope)) = (&to.path, to.json) {
        let mut summary =
            ExportSummaryJson::new("otlp", path, scope, report.turns, &report.damaged);
        summary.spans = Some(report.spans);
        summary.running = Some(report.running);
        ui.json_line(&summary)?;
        return damaged_exit(ui, &report.damaged, 0);
    }
    let running = if report.running > 0 {
        format!(
            "; {} running turn{} left out",
            report.running,
            if report.running == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    writeln!(
        ui.err,
        "{} trace{} ({} spans){running}",
        report.turns,
        if report.turns == 1 { "" } else { "s" },
        report.spans
    )?;
    damaged_exit(ui, &report.damaged, 0)
}

fn markdown(
    turns: &[TurnView],
    outputs: &[String],
    contexts: &[Vec<(String, String)>],
    session: Option<&str>,
    damaged: &[Damaged],
    // The name a session is shown by (after `sessions rename`), from its ledger name.
    shown: &dyn Fn(&str) -> String,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let scope = session
        .map(|s| format!("session {}", shown(s)))
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
    for ((t, output), context) in turns.iter().zip(outputs).zip(contexts) {
        if session.is_none() && t.session != current {
            current = &t.session;
            let _ = writeln!(o, "## Session {}\n", shown(&t.session));
        }
        markdown_turn(&mut o, t, output, context);
    }
    o
}

/// The calls of `t` held for approval, each with its decision.
fn markdown_approvals(o: &mut String, t: &TurnView) {
    use std::fmt::Write as _;
    for a in &t.approvals {
        let decided = match (&a.decision, &a.by) {
            (Some(d), Some(by)) => {
                let why = a
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                format!("{d} by {by}{why}")
            }
            _ if t.ended_at.is_some() => "no decision".to_owned(),
            _ => "waiting".to_owned(),
        };
        let _ = writeln!(
            o,
            "**Approval** `{}` `{}` (rule `{}`): {decided}\n",
            a.tool, a.arguments, a.rule
        );
    }
}

/// A fence of backticks longer than any run of them in `text`, so no line of it closes the
/// block.
fn fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// A coordinator's plan: each subtask, its worker and what it waits for.
fn markdown_plan(o: &mut String, t: &TurnView) {
    use std::fmt::Write as _;
    if let Some(plan) = &t.plan {
        let _ = writeln!(o, "**Plan ({})**\n", plan.method);
        for s in &plan.subtasks {
            let role = s
                .role
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            let deps = if s.depends_on.is_empty() {
                String::new()
            } else {
                format!(", after {}", s.depends_on.join(", "))
            };
            let _ = writeln!(o, "- `{}`: {}{role}{deps}: {}", s.id, s.worker, s.task);
        }
        for r in &plan.rejected {
            let _ = writeln!(o, "- rejected proposal: {r}");
        }
        let _ = writeln!(o);
    }
}

fn markdown_turn(o: &mut String, t: &TurnView, output: &str, context: &[(String, String)]) {
    use std::fmt::Write as _;
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
        for line in crate::fmt::cache_cost_lines(u, &t.detail) {
            let _ = writeln!(o, "- {line}");
        }
    }
    if let Some(s) = &t.schema {
        let _ = writeln!(o, "- schema: {}", s.object);
    }
    let _ = writeln!(o, "\n**Request**\n\n{}\n", t.request);
    for (label, text) in context {
        let f = fence(text);
        let _ = writeln!(
            o,
            "**Context** `{label}`\n\n{f}\n{}\n{f}\n",
            text.trim_end_matches('\n')
        );
    }
    markdown_approvals(o, t);
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
    for a in &t.activation {
        let _ = writeln!(o, "**Activation** `{}`: {}\n", a.agent, a.reason);
    }
    markdown_plan(o, t);
    for s in &t.subtasks {
        let _ = writeln!(
            o,
            "**Subtask** `{}` ({}, {})\n\n{}\n",
            s.subtask,
            s.worker,
            s.state.as_str(),
            s.error.as_deref().unwrap_or(&s.output)
        );
    }
    if t.value.is_some() {
        // A reply that matched its schema: a JSON value.
        let _ = writeln!(
            o,
            "**Response** (JSON)\n\n```json\n{}\n```\n",
            output.trim_end()
        );
    } else if !output.is_empty() {
        let _ = writeln!(o, "**Response**\n\n{output}\n");
    }
    if let Some(e) = &t.error {
        let _ = writeln!(o, "**Error**: {e}\n");
    }
}

fn json_export(
    mut records: std::collections::HashMap<String, Vec<query::RecordBody>>,
    turns: &[TurnView],
    outputs: &[String],
    names: &AgentNames,
    session: Option<&str>,
    damaged: &[Damaged],
    // The name a session is shown by; the records keep the ledger's.
    shown: &dyn Fn(&str) -> String,
) -> CliResult<String> {
    let shown_names: Vec<String> = turns.iter().map(|t| shown(&t.session)).collect();
    let doc = ExportJson {
        export: ExportHeader {
            format: "axocoatl-history-export",
            version: 1,
            scope: match session {
                Some(s) => ExportScope::Session { session: shown(s) },
                None => ExportScope::All("all"),
            },
            note: NOT_A_BACKUP,
            complete: damaged.is_empty(),
            damaged: damaged.iter().map(DamagedJson::of).collect(),
        },
        turns: turns
            .iter()
            .zip(outputs)
            .zip(&shown_names)
            .map(|((t, output), shown_name)| ExportTurn {
                turn: TurnJson::new(t, output, names.get(&t.agent))
                    .with_cost(t)
                    .shown_as(shown_name),
                records: records
                    .remove(&t.turn)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| RecordJson {
                        body: r.body,
                        kind: r.kind,
                        seq: r.seq,
                    })
                    .collect(),
            })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| CliError::new(ErrorKind::Failure, e.to_string()))?;
    Ok(text + "\n")
}
