//! `axocoatl chat`

use std::io::Write;

use axocoatl::engine::{self, Attachments, SendOptions};
use axocoatl::history;
use axocoatl::provider::Cancel;
use axocoatl::workspace::Workspace;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::line::{Input, LineEditor};
use crate::send::OverrideArgs;
use crate::ui::Ui;

const COMMANDS: &str = "\
!retry   send the last request again (a new turn linked to it)
!rewind  take back the last turn (it stays in the ledger, superseded)
!stop    stop the session's active turn (one started elsewhere)
!help    this list
Ctrl-C stops a turn while it answers; Ctrl-D (or the end of input) leaves.";

/// Talk with an agent, one turn per line, in one session.
///
/// Each line you type is a `send` to the agent in the session (HEAD unless -s), streamed as
/// it arrives; the turns are recorded like any other (`history`, `show`, `retry`). Lines
/// starting with `!` are commands:
///
///   !retry   send the last request again (a new turn linked to it)
///   !rewind  take back the last turn (it stays in the ledger, superseded)
///   !stop    stop the session's active turn (one started elsewhere)
///   !help    the list of commands
///
/// Ctrl-C stops a turn while it answers and drops the line being typed at the prompt;
/// Ctrl-D on an empty line (or the end of piped input) leaves. On a terminal the prompt
/// edits like a shell's: arrows, Home/End, Ctrl-A/E/U/K/W, Up/Down for earlier lines.
///
/// Examples:
///   axocoatl chat
///   axocoatl chat -n -a coder
///   axocoatl chat -s review-42 -o temperature=0
///   printf 'hi\n!retry\n' | axocoatl chat -s scratch
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ChatArgs {
    /// The session [default: HEAD, initially `main`]; a new name creates the session.
    #[arg(short, long, add = ArgValueCandidates::new(crate::complete::sessions))]
    pub session: Option<String>,
    /// Start a new session (named by the time) and make it current.
    #[arg(short = 'n', long, conflicts_with = "session")]
    pub new: bool,
    /// The agent [default: default_agent, else the first autonomous agent].
    #[arg(short, long, add = ArgValueCandidates::new(crate::complete::agents))]
    pub agent: Option<String>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

pub fn run(args: ChatArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let chosen = if args.new {
        Some(axocoatl::sessions::start_new(&ws)?)
    } else {
        args.session.clone()
    };
    let (_, shown) = ws.session_for_turn(chosen.as_deref())?;
    let agent = {
        let config = ws.config()?;
        engine::resolve_agent(config, args.agent.as_deref())?
            .id
            .clone()
    };
    writeln!(
        ui.err,
        "chat with {agent} in session {shown}: one turn per line; !help lists commands, Ctrl-D leaves"
    )?;
    let mut editor = LineEditor::new();
    let prompt = format!("{shown}> ");
    let mut code = exit::OK;
    loop {
        ui.out.flush()?;
        let line = match editor.read(&prompt)? {
            Input::End => break,
            Input::Dropped => continue,
            Input::Line(line) => line,
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let done = match text {
            "!help" | "!?" => {
                writeln!(ui.err, "{COMMANDS}")?;
                Ok(exit::OK)
            }
            "!retry" => retry(&ws, &shown, &args, ui),
            "!rewind" => rewind(&ws, &shown, ui),
            "!stop" => stop(&ws, &shown, ui),
            t if t.starts_with('!') && !t.contains(char::is_whitespace) => Err(CliError::usage(
                format!("unknown command {t}"),
            )
            .hint("!retry, !rewind, !stop and !help are the commands; other lines are sent")),
            _ => turn(&ws, &shown, &args, line.trim_end().to_owned(), ui),
        };
        code = match done {
            Ok(c) => c,
            Err(e) if e.is_broken_pipe() => return Err(e),
            Err(e) => e.report(ui),
        };
    }
    Ok(code)
}

/// One turn, stopped (not the process ended) by Ctrl-C.
fn turn(ws: &Workspace, shown: &str, args: &ChatArgs, message: String, ui: &mut Ui) -> CliResult {
    let (session, _) = ws.session_for_turn(Some(shown))?;
    let opts = SendOptions {
        session,
        agent: args.agent.clone(),
        message,
        attachments: Attachments::Selection,
        overrides: args.overrides.overrides(),
        ..SendOptions::default()
    };
    cancellable(|cancel| crate::send::run_turn_cancelled(ws, opts, false, ui, Vec::new(), cancel))
}

/// Runs `f` with a cancellation that SIGINT and SIGTERM set, for as long as it runs.
fn cancellable(f: impl FnOnce(&Cancel) -> CliResult) -> CliResult {
    let cancel = Cancel::new();
    let ids: Vec<_> = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .filter_map(|sig| signal_hook::flag::register(sig, cancel.flag()).ok())
        .collect();
    let result = f(&cancel);
    for id in ids {
        signal_hook::low_level::unregister(id);
    }
    result
}

/// The session's newest turn that is not superseded.
fn last_turn(ws: &Workspace, shown: &str) -> CliResult<history::TurnView> {
    let session = ws.session_or_head(Some(shown))?;
    let projection = history::project_session(ws.repo(), &session)?;
    projection
        .session_turns(&session)
        .filter(|t| !t.superseded)
        .last()
        .cloned()
        .ok_or_else(|| CliError::new(axocoatl::ErrorKind::NotFound, "no turn in this session yet"))
}

fn retry(ws: &Workspace, shown: &str, args: &ChatArgs, ui: &mut Ui) -> CliResult {
    let last = last_turn(ws, shown)?;
    let opts = engine::retry_options(ws, &last.turn, false, &args.overrides.overrides())?;
    cancellable(|cancel| crate::send::run_turn_cancelled(ws, opts, false, ui, Vec::new(), cancel))
}

fn rewind(ws: &Workspace, shown: &str, ui: &mut Ui) -> CliResult {
    let last = last_turn(ws, shown)?;
    let o = axocoatl::serve::client::rewind(ws, &last.turn, Some(&last.session))?;
    writeln!(
        ui.err,
        "rewound turn {} (the conversation continues from before it); its request was:\n{}",
        o.target,
        crate::fmt::safe(&o.prefill)
    )?;
    Ok(exit::OK)
}

fn stop(ws: &Workspace, shown: &str, ui: &mut Ui) -> CliResult {
    let session = ws.session_or_head(Some(shown))?;
    let listing = history::sessions(ws.repo())?;
    let Some(active) = listing
        .sessions
        .get(&session)
        .and_then(|s| s.active_turn.clone())
    else {
        writeln!(ui.err, "no turn of session {shown} is active")?;
        return Ok(exit::OK);
    };
    let stopped = axocoatl::serve::client::stop(ws, &active)?;
    writeln!(ui.err, "stop requested for turn {}", stopped.turn)?;
    Ok(exit::OK)
}
