//! `axocoatl usage`

use std::io::Write;

use axocoatl::usage;
use clap::{Args, ValueEnum};

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::{PriceJson, UsageGroup, UsageJson, UsageRowJson};
use crate::ui::Ui;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum By {
    #[default]
    Agent,
    Session,
    Day,
}

/// Report provider-reported token usage per agent, session or day, and what it cost.
///
/// Numbers are what providers reported for each call, summed from the ledger. A row is
/// marked incomplete when any of its calls had no usage reported; budgets are local guards,
/// not a billing record. CACHE-W and CACHE-R are the prompt tokens a provider's prompt
/// cache wrote and read (part of PROMPT). With --cost, COST is what the calls cost by the
/// price table when each was made; `>=` marks a floor when some call had no price or no
/// reported usage, `unknown` a row where none had both.
///
/// With --prices, print the price table instead: the configuration's `prices:` entries,
/// then the shipped list prices (US dollars per million tokens) and the date they were taken.
///
/// Examples:
///   axocoatl usage
///   axocoatl usage --cost --all --by day
///   axocoatl usage --all --by day --json
///   axocoatl usage --prices
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
    /// Add a COST column: US dollars by the price table (--json always has the cost).
    #[arg(long)]
    pub cost: bool,
    /// Print the price table in force instead of usage.
    #[arg(long, conflicts_with_all = ["session", "all", "by", "cost"])]
    pub prices: bool,
    /// Print JSON Lines: one object per row, then a total.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: UsageArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    if args.prices {
        return prices(&ws, args.json, ui);
    }
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
                usage: UsageJson::with_detail(&row.usage, &row.detail),
                group,
                turns: row.turns,
            })?;
        }
        ui.json_line(&UsageRowJson {
            usage: UsageJson::with_detail(&report.total.usage, &report.total.detail),
            group: UsageGroup::Total { total: true },
            turns: report.total.turns,
        })?;
        return Ok(code);
    }
    let cost_head = if args.cost { "        COST" } else { "" };
    writeln!(
        ui.out,
        "{:<20} {:>6} {:>6} {:>10} {:>9} {:>9} {:>11} {:>10}{cost_head}  complete",
        by.as_str().to_uppercase(),
        "TURNS",
        "CALLS",
        "PROMPT",
        "CACHE-W",
        "CACHE-R",
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
        let cost = if args.cost {
            format!(" {:>11}", cost_cell(row))
        } else {
            String::new()
        };
        writeln!(
            ui.out,
            "{:<20} {:>6} {:>6} {:>10} {:>9} {:>9} {:>11} {:>10}{cost}  {}",
            key,
            row.turns,
            u.calls,
            u.prompt_tokens,
            row.detail.cache_write_tokens,
            row.detail.cache_read_tokens,
            u.completion_tokens,
            u.total(),
            if u.complete { "yes" } else { "no" }
        )?;
    }
    if args.cost && !report.total.cost_complete() {
        writeln!(
            ui.out,
            "\ncost: some calls had no price or no reported usage (a price for a model goes under `prices:` in the configuration)"
        )?;
    }
    Ok(code)
}

/// A row's cost: `$0.0123`, a floor `>=$0.0123` when some call has none, `unknown` when no
/// call has one.
fn cost_cell(row: &usage::Row) -> String {
    let d = &row.detail;
    if row.cost_complete() {
        axocoatl::cost::usd(d.cost_nanos)
    } else if d.priced_calls == 0 {
        "unknown".to_string()
    } else {
        format!(">={}", axocoatl::cost::usd(d.cost_nanos))
    }
}

/// The price table in force: the configuration's entries, then the shipped rows.
fn prices(ws: &axocoatl::workspace::Workspace, json: bool, ui: &mut Ui) -> CliResult {
    use axocoatl::config::{shipped_as_of, shipped_prices, Price, PriceSource};
    let config = ws.config()?;
    let rows: Vec<Price> = config
        .prices
        .iter()
        .map(|e| Price::of(e, PriceSource::Config))
        .chain(
            shipped_prices()
                .iter()
                .map(|e| Price::of(e, PriceSource::Shipped)),
        )
        .collect();
    let as_of = shipped_as_of();
    if json {
        for p in &rows {
            ui.json_line(&PriceJson::of(p, as_of))?;
        }
        return Ok(exit::OK);
    }
    writeln!(
        ui.out,
        "{:<12} {:<24} {:>8} {:>8} {:>8} {:>8}  FROM",
        "PROVIDER", "MODEL", "INPUT", "OUTPUT", "CACHE-W", "CACHE-R"
    )?;
    for p in &rows {
        let from = match p.source {
            PriceSource::Config => "prices: of the configuration".to_string(),
            PriceSource::Shipped => format!("shipped ({as_of})"),
        };
        writeln!(
            ui.out,
            "{:<12} {:<24} {:>8} {:>8} {:>8} {:>8}  {from}",
            p.provider,
            p.model,
            rate(p.input),
            rate(p.output),
            rate(p.cache_write),
            rate(p.cache_read),
        )?;
    }
    writeln!(
        ui.out,
        "\nUS dollars per million tokens. For a call, a row of the configuration wins over a shipped one, one naming\nthe provider entry over one naming its kind, and the exact or longest model match (docs/providers.md)"
    )?;
    Ok(exit::OK)
}

/// A price as people write it: `3`, `0.30`, `0.075`.
fn rate(usd: f64) -> String {
    let s = format!("{usd:.3}");
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}00")
    } else if s.len() - s.find('.').unwrap_or(s.len()) == 2 {
        format!("{s}0")
    } else {
        s.to_string()
    }
}
