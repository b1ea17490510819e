//! `axocoatl memory`

use std::io::{IsTerminal, Read, Write};

use axocoatl::clock;
use axocoatl::memory::daily::{parse_bound, record_line};
use axocoatl::memory::{recall, session_of, AgentMemory, CoreEdit, MemoryError};
use axocoatl::workspace::Workspace;
use clap::{Args, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::safe;
use crate::json::{
    ConsolidateEditJson, ConsolidateJson, ConsolidatePass, ConsolidationStatusJson, CoreBlockJson,
    CoreEditJson, CoreValueJson, HitJson, LogRecordJson, MemoryAddJson, MemoryStatusJson,
    ReindexJson, UsageJson,
};
use crate::ui::Ui;

/// Inspect and edit agent memory: core blocks, the daily log, semantic recall.
///
/// Every memory tier belongs to one agent in one session (`{session}:{agent}`); -a and -s
/// pick which [default: the default agent in the current session]. Only core blocks marked
/// `shared: true` are shared, by every agent declaring that label. Everything is on disk
/// under .axocoatl/memory/ and works offline.
///
/// Examples:
///   axocoatl memory core                       the core blocks of the default agent
///   axocoatl memory core set human "Prefers short answers."
///   axocoatl memory log --from 2026-01-01      what the agent did since January 1
///   axocoatl memory search "database migration" --top-k 3
///   echo "The staging host is db2." | axocoatl memory add
///   axocoatl memory consolidate                promote durable facts into core blocks
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub command: MemoryCommand,
    /// The agent [default: default_agent, else the first autonomous agent].
    #[arg(short, long, global = true)]
    pub agent: Option<String>,
    /// The session [default: HEAD].
    #[arg(short, long, global = true)]
    pub session: Option<String>,
    /// Print JSON Lines.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    Core(CoreArgs),
    Log(LogArgs),
    Search(SearchArgs),
    Add(AddArgs),
    Status(StatusArgs),
    Reindex(ReindexArgs),
    Consolidate(ConsolidateArgs),
}

/// Show or edit core memory: the named blocks injected into every turn.
///
/// Without a subcommand, shows every block the agent declares. Edits obey the block's
/// limit (in characters): an edit that would exceed it is refused and nothing changes.
///
/// Examples:
///   axocoatl memory core
///   axocoatl memory core show human > human.txt
///   axocoatl memory core set persona "You are terse."
///   axocoatl memory core append human "Works in UTC+1."
///   axocoatl memory core replace human "UTC+1" "UTC+2"
///   axocoatl memory core set project - < notes.md
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CoreArgs {
    #[command(subcommand)]
    pub action: Option<CoreAction>,
}

#[derive(Debug, Subcommand)]
pub enum CoreAction {
    /// Show every block, or only the value of LABEL.
    Show {
        /// Print only this block's value.
        label: Option<String>,
    },
    /// Set a block's whole value (VALUE `-` or absent: read stdin).
    Set {
        label: String,
        value: Option<String>,
    },
    /// Append a line to a block (TEXT `-` or absent: read stdin).
    Append {
        label: String,
        /// The line to add; `-` or absent reads it from stdin.
        text: Option<String>,
    },
    /// Replace the one occurrence of OLD in a block with NEW.
    Replace {
        label: String,
        old: String,
        new: String,
    },
}

/// Show the daily log: the agent's requests, answers, tool calls and memory edits.
///
/// One JSON Lines file per UTC date under .axocoatl/memory/daily_log/v1/. Times are dates
/// (YYYY-MM-DD: from its start, or to its end) or RFC 3339 times.
///
/// Examples:
///   axocoatl memory log                         today (UTC)
///   axocoatl memory log --from 2026-01-01 --to 2026-01-07
///   axocoatl memory log --from 2026-01-02T09:00:00Z --query deploy
///   axocoatl memory log --json | jq -r .text
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct LogArgs {
    /// Start of the range [default: today, UTC].
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// End of the range, inclusive [default: no end].
    #[arg(long, value_name = "TIME")]
    pub to: Option<String>,
    /// Only records containing TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub query: Option<String>,
    /// At most N records, oldest first.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub limit: usize,
}

/// Search semantic memory for records close in meaning to QUERY.
///
/// Uses the local embedding model when it is available, else the lexical fallback (BM25);
/// `axocoatl memory status` says which. The exchanges of turns a rewind superseded stay in
/// memory but are left out, unless --include-superseded.
///
/// Examples:
///   axocoatl memory search "what database do we use"
///   axocoatl memory search "deadline" --top-k 10 --json
///   axocoatl memory search "the old plan" --include-superseded
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SearchArgs {
    /// What to look for, in your own words.
    pub query: String,
    /// How many records [default: the agent's memory.recall.top_k].
    #[arg(long, value_name = "N")]
    pub top_k: Option<usize>,
    /// Also find the exchanges of turns a rewind superseded (marked as such).
    #[arg(long)]
    pub include_superseded: bool,
}

/// Add text to semantic memory (from the argument, or stdin when it is absent or `-`).
///
/// Long text is split into several records. The addition is noted in the daily log.
///
/// Examples:
///   axocoatl memory add "The staging database is db2.internal."
///   axocoatl memory add < decisions.md
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AddArgs {
    /// The text to retain; `-` or absent reads it from stdin.
    pub text: Option<String>,
}

/// Show what memory holds and which recall path (neural or lexical) is in use, and why.
///
/// Examples:
///   axocoatl memory status
///   axocoatl memory status -a coder --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct StatusArgs {}

/// Rebuild the search data of semantic memory from its records' text.
///
/// Needed after switching between the neural and the lexical path (e.g. once the embedding
/// model is fetched); the records themselves are never rewritten.
///
/// Examples:
///   axocoatl models fetch && axocoatl memory reindex
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ReindexArgs {}

/// Promote durable facts from recent semantic memory into core blocks (sleep-time
/// consolidation).
///
/// One model call per agent reads its recent semantic records and its core blocks and may
/// only add or rewrite facts in core blocks: it never deletes semantic records. Each pass is
/// recorded in the ledger as a turn of mode `consolidation` (see `axocoatl history`).
/// A declared worker is consolidated in its scope under its coordinator; -a COORDINATOR
/// consolidates each worker of its workflow (a coordinator keeps no memory of its own).
/// Without -a, every autonomous agent and every declared worker with memory in the session
/// is consolidated.
///
/// Examples:
///   axocoatl memory consolidate
///   axocoatl memory consolidate -a coder -s main
///   axocoatl memory consolidate -a lead                      the workers of lead's workflow
///   */30 * * * * cd ~/proj && axocoatl memory consolidate    in a crontab
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ConsolidateArgs {}

pub fn run(args: MemoryArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let json = args.json;
    let (session, agent) = (args.session.as_deref(), args.agent.as_deref());
    match args.command {
        MemoryCommand::Core(c) => core(&ws, session, agent, c, json, ui),
        MemoryCommand::Log(l) => log(&ws, session, agent, l, json, ui),
        MemoryCommand::Search(s) => search(&ws, session, agent, s, json, ui),
        MemoryCommand::Add(a) => add(&ws, session, agent, a, json, ui),
        MemoryCommand::Status(_) => status(&ws, session, agent, json, ui),
        MemoryCommand::Reindex(_) => reindex(&ws, session, agent, json, ui),
        MemoryCommand::Consolidate(_) => consolidate(&ws, session, agent, json, ui),
    }
}

fn memory_error(e: MemoryError) -> CliError {
    axocoatl::RuntimeError::from(e).into()
}

/// The text of an argument, or stdin when it is absent or `-`.
fn text_or_stdin(arg: Option<String>, what: &str) -> CliResult<String> {
    match arg.as_deref() {
        Some(text) if text != "-" => Ok(text.to_owned()),
        _ => {
            if std::io::stdin().is_terminal() {
                return Err(CliError::usage(format!(
                    "no {what}: give it as an argument or pipe it on stdin"
                )));
            }
            const MAX: u64 = 16 << 20;
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .take(MAX + 1)
                .read_to_end(&mut buf)?;
            if buf.len() as u64 > MAX {
                return Err(CliError::usage(format!(
                    "the {what} on stdin is over {} MiB",
                    MAX >> 20
                )));
            }
            let text = String::from_utf8(buf)
                .map_err(|_| CliError::usage(format!("the {what} on stdin is not UTF-8 text")))?;
            Ok(text.trim_end_matches('\n').to_owned())
        }
    }
}

fn core(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    args: CoreArgs,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let (memory, _) = AgentMemory::resolve(ws, session, agent)?;
    let (label, edit_text, old_new);
    let edit = match args.action {
        None | Some(CoreAction::Show { label: None }) => return show_blocks(&memory, json, ui),
        Some(CoreAction::Show { label: Some(label) }) => {
            let block = memory.block(&label).map_err(memory_error)?;
            let value = memory
                .core
                .get(&block.label, block.shared)
                .map_err(|e| memory_error(e.into()))?;
            if json {
                ui.json_line(&CoreValueJson {
                    label: &label,
                    shared: block.shared,
                    limit: block.limit,
                    chars: value.chars().count(),
                    value: &value,
                })?;
            } else {
                writeln!(ui.out, "{}", safe(&value))?;
            }
            return Ok(exit::OK);
        }
        Some(CoreAction::Set { label: l, value }) => {
            label = l;
            edit_text = text_or_stdin(value, "value")?;
            CoreEdit::Set(&edit_text)
        }
        Some(CoreAction::Append { label: l, text }) => {
            label = l;
            edit_text = text_or_stdin(text, "text")?;
            CoreEdit::Append(&edit_text)
        }
        Some(CoreAction::Replace { label: l, old, new }) => {
            label = l;
            old_new = (old, new);
            CoreEdit::Replace {
                old: &old_new.0,
                new: &old_new.1,
            }
        }
    };
    let done = memory.edit(&label, edit, None).map_err(memory_error)?;
    if let Some(w) = &done.warning {
        ui.warn(w)?;
    }
    if json {
        ui.json_line(&CoreEditJson {
            label: &done.label,
            shared: done.shared,
            chars: done.chars,
            limit: done.limit,
        })?;
    } else {
        writeln!(
            ui.out,
            "{}: {}/{} characters{}",
            done.label,
            done.chars,
            done.limit,
            if done.shared { " (shared)" } else { "" }
        )?;
    }
    Ok(exit::OK)
}

fn show_blocks(memory: &AgentMemory, json: bool, ui: &mut Ui) -> CliResult {
    let blocks = memory.blocks_view().map_err(memory_error)?;
    let root = |p: &std::path::Path| {
        let s = p.display().to_string();
        match s.find(&format!("/{}/", axocoatl_store::layout::REPO_DIR)) {
            Some(i) => s[i + 1..].to_owned(),
            None => s,
        }
    };
    for (i, b) in blocks.iter().enumerate() {
        if json {
            ui.json_line(&CoreBlockJson {
                agent_id: &memory.id,
                label: &b.label,
                shared: b.shared,
                limit: b.limit,
                chars: b.chars,
                value: &b.value,
                file: root(&b.file),
            })?;
            continue;
        }
        if i > 0 {
            writeln!(ui.out)?;
        }
        let shared = if b.shared { "shared, " } else { "" };
        if b.value.is_empty() {
            writeln!(ui.out, "[{}] {shared}empty, limit {}", b.label, b.limit)?;
        } else {
            let over = if b.chars > b.limit as usize {
                " (over its limit: run `axocoatl fsck`)"
            } else {
                ""
            };
            writeln!(
                ui.out,
                "[{}] {shared}{}/{} characters{over}",
                b.label, b.chars, b.limit
            )?;
            writeln!(ui.out, "{}", safe(&b.value))?;
        }
    }
    Ok(exit::OK)
}

fn bound(arg: Option<&str>, end: bool, default: i64, flag: &str) -> CliResult<i64> {
    match arg {
        None => Ok(default),
        Some(s) => parse_bound(s, end).ok_or_else(|| {
            CliError::usage(format!(
                "{flag} {s:?} is neither a date (YYYY-MM-DD) nor an RFC 3339 time"
            ))
            .hint("e.g. --from 2026-01-02 or --from 2026-01-02T09:30:00Z")
        }),
    }
}

fn log(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    args: LogArgs,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let (memory, _) = AgentMemory::resolve(ws, session, agent)?;
    let now = clock::now();
    let today = now - now.rem_euclid(86_400_000);
    let from = bound(args.from.as_deref(), false, today, "--from")?;
    let to = bound(args.to.as_deref(), true, i64::MAX, "--to")?;
    if from > to {
        return Err(CliError::usage("--from is after --to"));
    }
    let read = memory.timeframe(from, to, args.query.as_deref(), args.limit)?;
    for (file, line, reason) in &read.damaged {
        ui.warn(&format!(
            "{}: line {line} {reason} (run `axocoatl fsck`)",
            file.display()
        ))?;
    }
    for r in &read.records {
        if json {
            ui.json_line(&LogRecordJson::from(r))?;
        } else {
            writeln!(ui.out, "{}", record_line(r, 200))?;
        }
    }
    if read.more > 0 {
        ui.warn(&format!(
            "{} more record{} in this range: raise --limit or narrow --from/--to",
            read.more,
            if read.more == 1 { "" } else { "s" }
        ))?;
    }
    Ok(exit::OK)
}

fn search(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    args: SearchArgs,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    if args.query.trim().is_empty() {
        return Err(CliError::usage("the query is empty"));
    }
    let (memory, agent) = AgentMemory::resolve(ws, session, agent)?;
    let top_k = args
        .top_k
        .unwrap_or(agent.memory.recall.top_k as usize)
        .max(1);
    let mut store = memory.semantic(ws.repo())?;
    if let Some(w) = store.path_warning()? {
        ui.warn(&w)?;
    }
    let superseded = recall::superseded_turns(ws.repo(), session_of(&memory.id))?;
    let hits = if args.include_superseded {
        store.search(&args.query, top_k)?
    } else {
        recall::search_excluding(&mut store, &args.query, top_k, &superseded, None)?
    };
    for w in store.damage() {
        ui.warn(&w)?;
    }
    for h in &hits {
        let rewound = recall::of_turns(h, &superseded);
        if json {
            ui.json_line(&HitJson::new(h, rewound))?;
        } else {
            let turn = h
                .source
                .turn
                .as_deref()
                .map(|t| format!(" [turn {}]", t.get(..8).unwrap_or(t)))
                .unwrap_or_default();
            writeln!(
                ui.out,
                "{:.3}  {} {}{turn}{}",
                h.score,
                clock::rfc3339(h.source.at),
                h.source.kind.as_str(),
                if rewound {
                    " (superseded by a rewind)"
                } else {
                    ""
                }
            )?;
            for line in safe(&h.text).lines() {
                writeln!(ui.out, "  {line}")?;
            }
        }
    }
    if hits.is_empty() && !json {
        writeln!(ui.out, "no records")?;
    }
    Ok(exit::OK)
}

fn add(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    args: AddArgs,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let text = text_or_stdin(args.text, "text")?;
    if text.trim().is_empty() {
        return Err(CliError::usage("the text is empty"));
    }
    let (memory, _) = AgentMemory::resolve(ws, session, agent)?;
    let mut store = memory.semantic(ws.repo())?;
    if let Some(w) = store.path_warning()? {
        ui.warn(&w)?;
    }
    let ids = memory.add_text(&mut store, &text)?;
    for w in store.damage() {
        ui.warn(&w)?;
    }
    if json {
        ui.json_line(&MemoryAddJson {
            agent_id: &memory.id,
            records: &ids,
        })?;
    } else {
        writeln!(
            ui.out,
            "added {} record{} to {}",
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            memory.id
        )?;
    }
    Ok(exit::OK)
}

fn status(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let (memory, agent) = AgentMemory::resolve(ws, session, agent)?;
    let blocks = memory.blocks_view().map_err(memory_error)?;
    let dates = memory.log.dates()?;
    let store = memory.semantic(ws.repo())?;
    let s = store.status()?;
    let damaged = store.verify();
    for w in store.damage() {
        ui.warn(&w)?;
    }
    let recall = &agent.memory.recall;
    let consolidation = consolidation_status(ws.config()?, agent);
    if json {
        ui.json_line(&MemoryStatusJson {
            agent_id: &memory.id,
            recall_path: s.path.as_str(),
            reason: s.reason.as_deref(),
            hint: s.hint.as_deref(),
            records: s.records,
            damaged,
            indexed: s.indexed,
            passive_inject: recall.passive_inject,
            top_k: recall.top_k,
            min_score: recall.min_score,
            core_blocks: blocks.len(),
            core_blocks_with_value: blocks.iter().filter(|b| !b.value.is_empty()).count(),
            daily_log_days: dates.len(),
            daily_log_first: dates.first().map(String::as_str),
            daily_log_last: dates.last().map(String::as_str),
            consolidation,
        })?;
        return Ok(exit::OK);
    }
    let path = match &s.reason {
        Some(reason) => format!("{} ({reason})", s.path.as_str()),
        None => s.path.as_str().to_owned(),
    };
    writeln!(ui.out, "agent id:        {}", memory.id)?;
    writeln!(ui.out, "recall path:     {path}")?;
    if let Some(hint) = &s.hint {
        writeln!(ui.out, "hint:            {hint}")?;
    }
    let damaged = match damaged {
        0 => String::new(),
        n => format!(" ({n} damaged: run `axocoatl fsck --repair`)"),
    };
    writeln!(
        ui.out,
        "semantic:        {} record{}{damaged}, {} indexed",
        s.records,
        if s.records == 1 { "" } else { "s" },
        s.indexed
    )?;
    writeln!(
        ui.out,
        "passive recall:  {}",
        if recall.passive_inject {
            format!(
                "on (top_k {}, min_score {})",
                recall.top_k, recall.min_score
            )
        } else {
            "off".to_owned()
        }
    )?;
    writeln!(
        ui.out,
        "core blocks:     {} declared, {} with a value",
        blocks.len(),
        blocks.iter().filter(|b| !b.value.is_empty()).count()
    )?;
    match (dates.first(), dates.last()) {
        (Some(first), Some(last)) => writeln!(
            ui.out,
            "daily log:       {} day{}, {first} to {last}",
            dates.len(),
            if dates.len() == 1 { "" } else { "s" }
        )?,
        _ => writeln!(ui.out, "daily log:       empty")?,
    }
    writeln!(
        ui.out,
        "consolidation:   {}",
        consolidation_line(&consolidation, agent)
    )?;
    Ok(exit::OK)
}

/// The consolidation that applies to `agent`.
fn consolidation_status(
    config: &axocoatl::config::Config,
    agent: &axocoatl::config::AgentConfig,
) -> ConsolidationStatusJson {
    use axocoatl::config::ConsolidationSource::Agent;
    let e = config.consolidation.for_agent(agent);
    let from_agent = [
        ("enabled", e.enabled.1),
        ("idle_threshold_secs", e.idle_threshold_secs.1),
        ("interval_secs", e.interval_secs.1),
    ]
    .into_iter()
    .filter(|(_, source)| *source == Agent)
    .map(|(key, _)| key)
    .collect();
    ConsolidationStatusJson {
        by_serve: axocoatl::memory::consolidate::sleep_time(config, agent).is_some(),
        enabled: e.enabled.0,
        idle_threshold_secs: e.idle_threshold_secs.0,
        interval_secs: e.interval_secs.0,
        from_agent,
    }
}

/// `on while serve runs: after 120 s idle, at most every 1800 s (this agent's interval_secs)`.
fn consolidation_line(
    c: &ConsolidationStatusJson,
    agent: &axocoatl::config::AgentConfig,
) -> String {
    use axocoatl::config::AgentRole;
    let whose = if c.from_agent.is_empty() {
        "the top-level `consolidation:`".to_owned()
    } else {
        format!("this agent's {}", c.from_agent.join(", "))
    };
    match agent.role {
        AgentRole::Worker | AgentRole::Coordinator => format!(
            "not run by serve for a {} (`axocoatl memory consolidate -a {}` runs a pass)",
            if agent.role == AgentRole::Worker {
                "worker"
            } else {
                "coordinator"
            },
            agent.id
        ),
        AgentRole::Autonomous if c.by_serve => format!(
            "on while serve runs: after {} s idle, at most every {} s ({whose})",
            c.idle_threshold_secs, c.interval_secs
        ),
        AgentRole::Autonomous => format!(
            "off ({}; `axocoatl memory consolidate` still runs a pass on request)",
            if c.from_agent.contains(&"enabled") {
                "this agent's `consolidation: false`"
            } else {
                "`consolidation.enabled` is false"
            }
        ),
    }
}

fn reindex(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let (memory, _) = AgentMemory::resolve(ws, session, agent)?;
    let mut store = memory.semantic(ws.repo())?;
    let done = store.reindex()?;
    for w in store.damage() {
        ui.warn(&w)?;
    }
    if json {
        ui.json_line(&ReindexJson {
            agent_id: &memory.id,
            recall_path: done.path.as_str(),
            records: done.records,
            damaged: store.damage().len(),
        })?;
    } else {
        writeln!(
            ui.out,
            "reindexed {} record{} of {} for the {} path",
            done.records,
            if done.records == 1 { "" } else { "s" },
            memory.id,
            done.path.as_str()
        )?;
    }
    Ok(exit::OK)
}

fn consolidate(
    ws: &Workspace,
    session: Option<&str>,
    agent: Option<&str>,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    use axocoatl::memory::consolidate::{self, Applied, PassResult};
    use axocoatl_store::ledger::record::TurnState;
    let session = ws.session_or_head(session)?;
    let cancel = axocoatl::provider::Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The second signal ends the process at once; the first stops the pass.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let passes = consolidate::run(ws, &session, agent, &cancel)?;
    let mut code = exit::OK;
    for p in &passes {
        match &p.result {
            PassResult::Skipped { reason } => {
                if json {
                    ui.json_line(&ConsolidateJson {
                        agent: &p.agent,
                        agent_id: &p.scope,
                        pass: ConsolidatePass::Skipped { skipped: reason },
                    })?;
                } else {
                    writeln!(ui.out, "{}: skipped: {reason}", p.agent)?;
                }
            }
            PassResult::Ran {
                turn,
                state,
                records,
                applied,
                error,
                usage,
            } => {
                code = code.max(match state {
                    TurnState::Completed => exit::OK,
                    TurnState::Stopped => exit::TURN_STOPPED,
                    TurnState::Failed => exit::TURN_FAILED,
                    TurnState::Interrupted => exit::TURN_INTERRUPTED,
                });
                if json {
                    ui.json_line(&ConsolidateJson {
                        agent: &p.agent,
                        agent_id: &p.scope,
                        pass: ConsolidatePass::Ran {
                            turn,
                            state: state.as_str(),
                            records: *records,
                            edits: applied.iter().map(ConsolidateEditJson::from).collect(),
                            error: error.as_deref(),
                            usage: UsageJson::from(usage),
                        },
                    })?;
                    continue;
                }
                let done = applied
                    .iter()
                    .filter(|a| matches!(a, Applied::Done(_)))
                    .count();
                writeln!(
                    ui.out,
                    "{}: {} (turn {turn}): read {records} record{}, {done} edit{} applied, {} refused",
                    p.agent,
                    state.as_str(),
                    if *records == 1 { "" } else { "s" },
                    if done == 1 { "" } else { "s" },
                    applied.len() - done
                )?;
                for a in applied {
                    match a {
                        Applied::Done(d) => writeln!(
                            ui.out,
                            "  {}: now {}/{} characters",
                            d.label, d.chars, d.limit
                        )?,
                        Applied::Refused { label, reason } => {
                            writeln!(ui.out, "  {label}: refused: {}", safe(reason))?
                        }
                    }
                }
                if let Some(e) = error {
                    ui.warn(&format!("{}: {}", p.agent, safe(e)))?;
                }
            }
        }
    }
    Ok(code)
}
