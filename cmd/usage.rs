//! `axocoatl usage`

use std::io::Write;

use axocoatl::usage;
use clap::{Args, ValueEnum};

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::{UsageGroup, UsageJson, UsageRowJson};
use crate::ui::Ui;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum By {
    #[default]
    Agent,
    Session,
    Day,
}

/// Report provider-reported token usage per agent, session or day.
///
/// Numbers are what providers reported for each call, summed from the ledger. A row is
/// marked incomplete when any of its calls had no usage reported; budgets are local guards,
/// not a billing record.
///
/// Examples:
///   axocoatl usage
///   axocoatl usage --all --by day --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct UsageArgs {
    /// The session [default: HEAD].
    #[arg(short, long, conflicts_with = "all")]
    pub session: Option<String>,
    /// Every session.
    #[arg(long)]
    pub all: bool,
    /// Group rows by agent, session or day (UTC).
    #[arg(long, value_enum, default_value_t = By::Agent)]
    pub by: By,
    /// Print JSON Lines: one object per row, then a total.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: UsageArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open_read()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let by = match args.by {
        By::Agent => usage::By::Agent,
        By::Session => usage::By::Session,
        By::Day => usage::By::Day,
    };
    let report = usage::report(ws.repo(), session.as_deref(), by)?;
    crate::fmt::warn_problems(ui, &report.problems, 0)?;
    let code = if report.problems.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    };
    let names = crate::fmt::AgentNames::of(&ws);
    if args.json {
        for row in &report.rows {
            let group = match by {
                usage::By::Agent => UsageGroup::Agent {
                    agent: &row.key,
                    agent_name: names.get(&row.key),
                },
                usage::By::Session => UsageGroup::Session { session: &row.key },
                usage::By::Day => UsageGroup::Day { day: &row.key },
            };
            ui.json_line(&UsageRowJson {
                usage: UsageJson::from(&row.usage),
                group,
                turns: row.turns,
            })?;
        }
        ui.json_line(&UsageRowJson {
            usage: UsageJson::from(&report.total.usage),
            group: UsageGroup::Total { total: true },
            turns: report.total.turns,
        })?;
        return Ok(code);
    }
    writeln!(
        ui.out,
        "{:<20} {:>6} {:>6} {:>10} {:>11} {:>10}  complete",
        by.as_str().to_uppercase(),
        "TURNS",
        "CALLS",
        "PROMPT",
        "COMPLETION",
        "TOTAL"
    )?;
    for row in report.rows.iter().chain(std::iter::once(&report.total)) {
        let u = &row.usage;
        let mut key = row.key.clone();
        if let (usage::By::Agent, Some(name)) = (by, names.get(&row.key)) {
            if !std::ptr::eq(row, &report.total) {
                key = format!("{key} ({name})");
            }
        }
        writeln!(
            ui.out,
            "{:<20} {:>6} {:>6} {:>10} {:>11} {:>10}  {}",
            key,
            row.turns,
            u.calls,
            u.prompt_tokens,
            u.completion_tokens,
            u.total(),
            if u.complete { "yes" } else { "no" }
        )?;
    }
    Ok(code)
}
