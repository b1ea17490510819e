//! `axocoatl usage`

use std::collections::BTreeMap;
use std::io::Write;

use axocoatl::history;
use axocoatl_store::ledger::record::Usage;
use clap::{Args, ValueEnum};
use serde_json::json;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::usage_json;
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

#[derive(Default)]
struct Row {
    turns: u64,
    usage: Usage,
}

pub fn run(args: UsageArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let list = history::usage(ws.repo(), session.as_deref())?;
    crate::fmt::warn_damaged(ui, &list.problems)?;
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut total = Row {
        turns: 0,
        usage: Usage::ZERO,
    };
    for r in list.rows {
        let key = match args.by {
            By::Agent => r.agent,
            By::Session => r.session,
            By::Day => r.day,
        };
        let row = rows.entry(key).or_insert_with(|| Row {
            turns: 0,
            usage: Usage::ZERO,
        });
        row.turns += r.turns;
        row.usage.add(&r.usage);
        total.turns += r.turns;
        total.usage.add(&r.usage);
    }
    let code = if list.problems.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    };
    let key_name = match args.by {
        By::Agent => "agent",
        By::Session => "session",
        By::Day => "day",
    };
    if args.json {
        for (key, row) in &rows {
            let mut v = usage_json(&row.usage);
            v[key_name] = json!(key);
            v["turns"] = json!(row.turns);
            ui.json_line(&v)?;
        }
        let mut v = usage_json(&total.usage);
        v["total"] = json!(true);
        v["turns"] = json!(total.turns);
        ui.json_line(&v)?;
        return Ok(code);
    }
    writeln!(
        ui.out,
        "{:<20} {:>6} {:>6} {:>10} {:>11} {:>10}  complete",
        key_name.to_uppercase(),
        "TURNS",
        "CALLS",
        "PROMPT",
        "COMPLETION",
        "TOTAL"
    )?;
    for (key, row) in rows
        .iter()
        .chain(std::iter::once((&"total".to_string(), &total)))
    {
        let u = &row.usage;
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
