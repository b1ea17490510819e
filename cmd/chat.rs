//! `axocoatl chat`

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axocoatl::engine::{self, Attachments, SendOptions};
use axocoatl::history::{self, Projection, Scope, Want};
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
/// it arrives; the turns are recorded like any other (`history`, `show`, `retry`). A local
/// model is loaded for the first line only and kept for the next. Lines starting with `!`
/// are commands:
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
/// Exit status: 0 when it leaves (Ctrl-D, the end of input), whatever its turns did: each
/// turn that fails or is stopped says so as it ends (`history` lists them). A bad command
/// line is 2, no repository 10, as for every command.
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
    crate::send::session_not_prompt(args.session.as_deref())?;
    let mut ws = g.open()?;
    // A local model is loaded by the first line only.
    ws.keep_providers();
    let agent = {
        let config = ws.config()?;
        engine::resolve_agent(config, args.agent.as_deref())?
            .id
            .clone()
    };
    // A model or option that would refuse every turn is said before the first line.
    engine::check_overrides(&ws, Some(&agent), &args.overrides.overrides())?;
    let chosen = if args.new {
        Some(axocoatl::sessions::start_new(&ws)?.name)
    } else {
        args.session.clone()
    };
    let (_, shown) = ws.session_for_turn(chosen.as_deref())?;
    writeln!(
        ui.err,
        "chat with {agent} in session {shown}: one turn per line; !help lists commands, Ctrl-D leaves"
    )?;
    let signals = Signals::install();
    let mut editor = LineEditor::new();
    let prompt = format!("{shown}> ");
    let mut number = 0u64;
    loop {
        ui.out.flush()?;
        let read = editor.read(&prompt)?;
        number += 1;
        let line = match read {
            Input::End => break,
            Input::Dropped => continue,
            Input::Line(line) => line,
            Input::NotUtf8(why) => {
                CliError::usage(format!("line {number} of the input was not sent: {why}"))
                    .hint("send text as UTF-8 (e.g. through `iconv -t UTF-8`); the lines after it are read as usual")
                    .report(ui);
                continue;
            }
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
            "!retry" => retry(&ws, &shown, &args, &signals, ui),
            "!rewind" => rewind(&ws, &shown, ui),
            "!stop" => stop(&ws, &shown, ui),
            t if t.starts_with('!') && !t.contains(char::is_whitespace) => Err(CliError::usage(
                format!("unknown command {t}"),
            )
            .hint("!retry, !rewind, !stop and !help are the commands; other lines are sent")),
            _ => turn(&ws, &shown, &args, line.trim_end().to_owned(), &signals, ui),
        };
        // Each turn's end (failed, stopped) and each error is said as it happens; leaving
        // is not a failure of the chat.
        match done {
            Ok(_) => {}
            Err(e) if e.is_broken_pipe() => return Err(e),
            Err(e) => {
                e.report(ui);
            }
        }
    }
    Ok(exit::OK)
}

/// One turn, stopped (not the chat ended) by Ctrl-C.
fn turn(
    ws: &Workspace,
    shown: &str,
    args: &ChatArgs,
    message: String,
    signals: &Signals,
    ui: &mut Ui,
) -> CliResult {
    let (session, _) = ws.session_for_turn(Some(shown))?;
    let opts = SendOptions {
        session,
        agent: args.agent.clone(),
        message,
        attachments: Attachments::Selection,
        overrides: args.overrides.overrides(),
        ..SendOptions::default()
    };
    signals.turn(|cancel| crate::send::run_turn_cancelled(ws, opts, false, ui, Vec::new(), cancel))
}

/// What SIGINT, SIGTERM and SIGHUP do in a chat: at the prompt they end it (130, 143, 129;
/// the terminal put back first); during a turn the first stops the turn (the chat goes on)
/// and a second ends the chat.
struct Signals {
    /// At the prompt: a signal ends the process.
    idle: Arc<AtomicBool>,
    /// A signal came during the current turn.
    interrupted: Arc<AtomicBool>,
}

impl Signals {
    /// Installed once: signal-hook never gives a signal back its default action, so the
    /// handlers stay for the whole chat and the flags say what a signal does.
    fn install() -> Signals {
        let signals = Signals {
            idle: Arc::new(AtomicBool::new(true)),
            interrupted: Arc::new(AtomicBool::new(false)),
        };
        for (sig, code) in [
            (signal_hook::consts::SIGINT, 130),
            (signal_hook::consts::SIGTERM, 143),
            (signal_hook::consts::SIGHUP, 129),
        ] {
            // Actions run in the order they are registered: the exit sees `interrupted` as
            // it was before this signal, so only a second signal during a turn ends the chat.
            let (idle, interrupted) = (signals.idle.clone(), signals.interrupted.clone());
            let _ = exit_on(sig, code, move || {
                idle.load(Ordering::SeqCst) || interrupted.load(Ordering::SeqCst)
            });
            let _ = signal_hook::flag::register(sig, signals.interrupted.clone());
        }
        signals
    }

    /// Runs one turn: a signal stops it (within the turn's own ~100 ms).
    fn turn(&self, f: impl FnOnce(&Cancel) -> CliResult) -> CliResult {
        self.interrupted.store(false, Ordering::SeqCst);
        self.idle.store(false, Ordering::SeqCst);
        let cancel = Cancel::new();
        let (flag, interrupted) = (cancel.flag(), self.interrupted.clone());
        let done = Arc::new(AtomicBool::new(false));
        let watching = done.clone();
        let watcher = std::thread::spawn(move || {
            while !watching.load(Ordering::SeqCst) {
                if interrupted.load(Ordering::SeqCst) {
                    flag.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let result = f(&cancel);
        done.store(true, Ordering::SeqCst);
        let _ = watcher.join();
        self.interrupted.store(false, Ordering::SeqCst);
        self.idle.store(true, Ordering::SeqCst);
        result
    }
}

/// On `sig`, when `now` says so: the terminal back from raw mode, then exit with `code` (the
/// process ends inside the handler, so no destructor would restore it).
#[expect(
    unsafe_code,
    reason = "signal-hook's low-level register: the action only loads atomics, restores the terminal (tcsetattr) and _exits, all async-signal-safe"
)]
fn exit_on(
    sig: i32,
    code: i32,
    now: impl Fn() -> bool + Sync + Send + 'static,
) -> std::io::Result<signal_hook::SigId> {
    // SAFETY: the action allocates nothing and takes no lock: atomic loads, tcsetattr, _exit.
    unsafe {
        signal_hook::low_level::register(sig, move || {
            if now() {
                crate::line::restore_terminal();
                signal_hook::low_level::exit(code);
            }
        })
    }
}

/// The session's newest turn that is not superseded.
fn last_turn(ws: &Workspace, shown: &str) -> CliResult<history::TurnView> {
    let session = ws.session_or_head(Some(shown))?;
    let projection = Projection::of(ws.repo(), Scope::Session(&session), Want::VIEWS)?;
    projection
        .session_turns(&session)
        .filter(|t| !t.superseded)
        .last()
        .cloned()
        .ok_or_else(|| CliError::new(axocoatl::ErrorKind::NotFound, "no turn in this session yet"))
}

fn retry(
    ws: &Workspace,
    shown: &str,
    args: &ChatArgs,
    signals: &Signals,
    ui: &mut Ui,
) -> CliResult {
    let last = last_turn(ws, shown)?;
    let opts = engine::retry_options(ws, &last.turn, false, &args.overrides.overrides())?;
    crate::retry::warn_of_effects(ws, &last.turn, false, ui)?;
    signals.turn(|cancel| crate::send::run_turn_cancelled(ws, opts, false, ui, Vec::new(), cancel))
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
