//! `axocoatl history`

use std::io::Write;

use axocoatl::clock;
use axocoatl::history::TurnView;
use clap::Args;
use regex::Regex;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{first_line, state, turn_json};
use crate::ui::Ui;

/// List turns, newest last, optionally searching them.
///
/// `--search` is a literal, case-insensitive (Unicode-aware) match across requests,
/// responses, errors and context metadata (context labels, attachment names, tool names and
/// arguments), in the current session or, with --all, in every session. Superseded turns
/// (before a rewind) are marked.
///
/// Examples:
///   axocoatl history
///   axocoatl history --all --search "timeout" --limit 20
///   axocoatl history --json | jq .state
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct HistoryArgs {
    /// The session [default: HEAD].
    #[arg(short, long, conflicts_with = "all")]
    pub session: Option<String>,
    /// Every session.
    #[arg(long)]
    pub all: bool,
    /// Only turns containing TEXT (literal, case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
    /// Only the newest N turns.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print JSON Lines, one object per turn.
    #[arg(long)]
    pub json: bool,
}

/// The case-insensitive literal matcher used by `history --search`.
pub fn matcher(text: &str) -> CliResult<Regex> {
    if text.is_empty() {
        return Err(CliError::usage("--search needs some text"));
    }
    regex::RegexBuilder::new(&regex::escape(text))
        .case_insensitive(true)
        .build()
        .map_err(|e| CliError::usage(format!("cannot search for {text:?}: {e}")))
}

/// Whether a turn matches: requests, responses, errors, context metadata, and tool calls
/// (name, arguments and result).
pub fn turn_matches(re: &Regex, t: &TurnView) -> bool {
    re.is_match(&t.request)
        || re.is_match(&t.output)
        || t.error.as_deref().is_some_and(|e| re.is_match(e))
        || t.context.iter().any(|c| re.is_match(&c.label))
        || t.attachments.iter().any(|a| re.is_match(&a.name))
        || t.tools.iter().any(|x| {
            re.is_match(&x.name)
                || re.is_match(&x.arguments)
                || x.output.as_deref().is_some_and(|o| re.is_match(o))
        })
        || t.warnings.iter().any(|w| re.is_match(w))
}

pub fn run(args: HistoryArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let projection = match &args.search {
        Some(text) => axocoatl::search::search(ws.repo(), text)?,
        None => axocoatl::history::project_scope(ws.repo(), session.as_deref())?,
    };
    crate::fmt::warn_problems(ui, &projection)?;
    let re = args.search.as_deref().map(matcher).transpose()?;
    let mut turns: Vec<&TurnView> = projection
        .turns
        .iter()
        .filter(|t| session.as_deref().is_none_or(|s| t.session == s))
        .filter(|t| re.as_ref().is_none_or(|re| turn_matches(re, t)))
        .collect();
    if turns.is_empty() && !args.json {
        let scope = session
            .as_deref()
            .map(|s| format!("session {s}"))
            .unwrap_or_else(|| "any session".into());
        let what = if args.search.is_some() {
            "matching turns"
        } else {
            "turns"
        };
        writeln!(ui.err, "no {what} in {scope}")?;
    }
    if let Some(n) = args.limit {
        let skip = turns.len().saturating_sub(n);
        turns.drain(..skip);
    }
    for t in turns {
        if args.json {
            ui.json_line(&turn_json(t))?;
            continue;
        }
        let mut line = format!(
            "{}  {}  {:<12} {}",
            ui.paint("33", &t.turn),
            clock::short(t.started_at),
            first_line(&t.agent, 12),
            state(ui, t, 11),
        );
        if args.all {
            line.push_str(&format!(" [{}]", t.session));
        }
        if t.superseded {
            line.push_str(&ui.paint("2", " (superseded)"));
        }
        let request = first_line(&t.request, 50);
        let answer = match (&t.error, t.output.is_empty()) {
            (Some(e), true) => format!("error: {}", first_line(e, 50)),
            _ => first_line(&t.output, 50),
        };
        let (request, answer) = match &re {
            Some(re) if ui.color => (highlight(ui, re, &request), highlight(ui, re, &answer)),
            _ => (request, answer),
        };
        writeln!(ui.out, "{line} {request} → {answer}")?;
    }
    Ok(if projection.problems.is_empty() {
        exit::OK
    } else {
        exit::ERROR
    })
}

fn highlight(ui: &Ui, re: &Regex, text: &str) -> String {
    re.replace_all(text, |c: &regex::Captures<'_>| ui.paint("1;31", &c[0]))
        .into_owned()
}
