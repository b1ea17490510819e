//! `axocoatl history`

use std::io::Write;

use axocoatl::clock;
use axocoatl::history::TurnView;
use axocoatl::query::{self, Hit};
use axocoatl::search::{matcher, Matcher};
use clap::Args;
use clap_complete::engine::ArgValueCandidates;
use serde::Serialize;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::{first_line, state};
use crate::json::TurnJson;
use crate::ui::Ui;

/// List turns, newest last, optionally searching them.
///
/// `--search` is a literal, case-insensitive (Unicode-aware) match across requests,
/// responses, errors, piped context (its label and text), attachment names, tool calls
/// (names, arguments and results) and warnings, in the current session or, with --all, in
/// every session. Each hit says where it matched: the field and a short piece of it
/// (`match` in --json). Superseded turns (before a rewind) are marked. As with grep, a
/// search that finds nothing exits 1.
///
/// Examples:
///   axocoatl history
///   axocoatl history -n 5                             the newest five turns
///   axocoatl history --all --search "timeout" --limit 20
///   axocoatl history --json | jq .state
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct HistoryArgs {
    /// The session [default: HEAD].
    #[arg(short, long, conflicts_with = "all", add = ArgValueCandidates::new(crate::complete::sessions))]
    pub session: Option<String>,
    /// Every session.
    #[arg(long)]
    pub all: bool,
    /// Only turns containing TEXT (literal, case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
    /// Only the newest N turns.
    #[arg(short = 'n', long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print JSON Lines, one object per turn.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: HistoryArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open_read()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    // One matcher searches, and highlights the matches in colour.
    let re = args.search.as_deref().map(matcher).transpose()?;
    let search = args.search.as_deref().zip(re.as_ref());
    let listing = query::history(ws.repo(), session.as_deref(), search, args.limit)?;
    crate::fmt::warn_problems(ui, &listing.problems, listing.unknown_kinds)?;
    let names = crate::fmt::AgentNames::of(&ws);
    if listing.matched == 0 && !args.json {
        let scope = session
            .as_deref()
            .map(|s| format!("session {}", ws.shown_session(s)))
            .unwrap_or_else(|| "any session".into());
        let what = if args.search.is_some() {
            "matching turns"
        } else {
            "turns"
        };
        writeln!(ui.err, "no {what} in {scope}")?;
    }
    let highlight = re.as_ref().filter(|_| ui.color);
    for (i, t) in listing.turns.iter().enumerate() {
        let hit = listing.hits.get(i);
        if args.json {
            let turn = TurnJson::new(t, &t.output, names.get(&t.agent))
                .shown_as(ws.shown_session(&t.session));
            match hit {
                Some(hit) => ui.json_line(&SearchJson { turn, hit })?,
                None => ui.json_line(&turn)?,
            }
        } else {
            let session = args.all.then(|| ws.session_label(&t.session));
            let mut line = text_line(ui, t, session.as_deref(), highlight);
            if let Some(hit) = hit {
                line.push_str(&hit_text(ui, hit, highlight));
            }
            writeln!(ui.out, "{line}")?;
        }
    }
    // As grep: a search that found nothing exits 1 (an error reading the ledger too).
    let nothing_found = args.search.is_some() && listing.matched == 0;
    Ok(if listing.problems.is_empty() && !nothing_found {
        exit::OK
    } else {
        exit::ERROR
    })
}

/// A turn a search found, with where it matched.
#[derive(Serialize)]
struct SearchJson<'a> {
    #[serde(flatten)]
    turn: TurnJson<'a>,
    #[serde(rename = "match")]
    hit: &'a Hit,
}

/// `  [tool_output of run_command: …the piece around the match…]`
fn hit_text(ui: &Ui, hit: &Hit, re: Option<&Matcher>) -> String {
    let field = match &hit.tool {
        Some(tool) if hit.field != "tool" => format!("{} of {tool}", hit.field),
        _ => hit.field.to_owned(),
    };
    let snippet = crate::fmt::safe(&hit.snippet);
    let snippet = match re {
        Some(re) => highlight(ui, re, &snippet),
        None => snippet,
    };
    format!("  [{}: {snippet}]", ui.paint("2", &field))
}

/// One turn as a line: id, time, agent, state, [session,] request → answer.
fn text_line(ui: &Ui, t: &TurnView, session: Option<&str>, re: Option<&Matcher>) -> String {
    let mut line = format!(
        "{}  {}  {:<12} {}",
        ui.paint("33", &t.turn),
        clock::short(t.started_at),
        first_line(&t.agent, 12),
        state(ui, t, 11),
    );
    if let Some(session) = session {
        line.push_str(&format!(" [{session}]"));
    }
    if t.superseded {
        line.push_str(&ui.paint("2", " (superseded)"));
    }
    let request = first_line(&t.request, 50);
    let answer = match (&t.error, t.output.is_empty(), &t.value) {
        (Some(e), true, _) => format!("error: {}", first_line(e, 50)),
        // A JSON value (a turn with a schema) on one line, not its first line (`{`).
        (_, _, Some(value)) => first_line(&value.to_string(), 50),
        _ => first_line(&t.output, 50),
    };
    let (request, answer) = match re {
        Some(re) => (highlight(ui, re, &request), highlight(ui, re, &answer)),
        None => (request, answer),
    };
    format!("{line} {request} → {answer}")
}

fn highlight(ui: &Ui, re: &Matcher, text: &str) -> String {
    let (mut out, mut last) = (String::new(), 0);
    for m in re.find_iter(text.as_bytes()) {
        out.push_str(&text[last..m.start]);
        out.push_str(&ui.paint("1;31", &text[m.clone()]));
        last = m.end;
    }
    out.push_str(&text[last..]);
    out
}
