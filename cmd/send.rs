//! `axocoatl send`

use std::io::{IsTerminal, Read, Write};

use axocoatl::engine::{self, Attachments, SendOptions, TurnEvent, TurnOutcome};
use axocoatl::provider::Cancel;
use axocoatl::workspace::Workspace;
use axocoatl_store::ledger::record::TurnState;
use clap::Args;
use serde_json::json;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{safe, usage_json};
use crate::ui::Ui;

/// Send a message to an agent: one durable turn, streamed to stdout.
///
/// The message comes from the argument, or from stdin when it is absent or `-`. With both an
/// argument and piped stdin, the piped text goes along as inline context. The session's
/// selected attachments (`axocoatl attach list`) go along too; `--attach FILE` adds one for
/// this turn only. `turn <id>` is
/// printed to stderr as soon as the turn has begun, so it can be stopped from another
/// terminal with `axocoatl stop <id>`; Ctrl-C stops it the same way (twice: exit at once).
///
/// Exit status: 0 completed, 3 failed, 4 stopped, 5 interrupted, 8 session busy.
///
/// Examples:
///   axocoatl send "What changed in the last release?"
///   git diff | axocoatl send "review this"
///   echo "hello" | axocoatl send --json -s scratch
///   axocoatl send --attach error.png --attach app.log "why does this fail?"
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SendArgs {
    /// The message; `-` or absent reads it from stdin.
    pub message: Option<String>,
    /// The session [default: HEAD, initially `main`]; a new name creates the session.
    #[arg(short, long)]
    pub session: Option<String>,
    /// The agent [default: default_agent, else the first autonomous agent].
    #[arg(short, long)]
    pub agent: Option<String>,
    /// Write JSON Lines events to stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Queue behind an active turn of the session instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Never read stdin (for scripts whose stdin stays open).
    #[arg(long)]
    pub no_stdin: bool,
    /// Attach FILE to this turn only (once-scoped; repeatable).
    #[arg(long = "attach", value_name = "FILE")]
    pub attach: Vec<std::path::PathBuf>,
}

pub fn run(args: SendArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let (message, context) = read_input(args.message.as_deref(), args.no_stdin)?;
    let ws = g.open()?;
    let session = ws.session_or_head(args.session.as_deref())?;
    let added = crate::attach::add_for_turn(&ws, &session, &args.attach, ui)?;
    let opts = SendOptions {
        attachments: Attachments::Selection,
        session,
        agent: args.agent,
        message,
        inline_context: context,
        retry_of: None,
        wait: args.wait,
        origin: None,
    };
    let result = run_turn(&ws, opts, args.json, ui);
    if result.is_err() && !added.is_empty() {
        crate::attach::withdraw(&ws, &added, ui)?;
    }
    result
}

/// The message and inline context from the argument and stdin.
fn read_input(arg: Option<&str>, no_stdin: bool) -> CliResult<(String, Vec<(String, String)>)> {
    let stdin = std::io::stdin();
    let piped = !no_stdin && !stdin.is_terminal();
    let read_all = || -> CliResult<String> {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf)?;
        String::from_utf8(buf).map_err(|_| {
            CliError::usage("stdin is not UTF-8 text")
                .hint("attach binary files with `axocoatl attach add` instead")
        })
    };
    match arg {
        None | Some("-") => {
            if !piped {
                return Err(CliError::usage(
                    "no message: give one as an argument or pipe it on stdin",
                )
                .hint("axocoatl send \"your message\""));
            }
            let text = read_all()?;
            if text.trim().is_empty() {
                return Err(CliError::usage("the message on stdin is empty"));
            }
            Ok((text.trim_end_matches('\n').to_owned(), Vec::new()))
        }
        Some(m) => {
            if m.trim().is_empty() {
                return Err(CliError::usage("the message is empty"));
            }
            let mut context = Vec::new();
            if piped {
                let text = read_all()?;
                if !text.is_empty() {
                    context.push(("stdin".to_owned(), text));
                }
            }
            Ok((m.to_owned(), context))
        }
    }
}

/// Runs a turn and prints it; shared with `retry`.
pub fn run_turn(ws: &Workspace, opts: SendOptions, json_mode: bool, ui: &mut Ui) -> CliResult {
    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The second signal ends the process at once; the first stops the turn.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let mut io_error: Option<std::io::Error> = None;
    let mut turn_id = String::new();
    let mut ended_with_newline = true;
    let outcome = {
        let mut sink = |ev: TurnEvent<'_>| {
            if io_error.is_some() {
                return;
            }
            if let Err(e) = emit(ui, json_mode, &mut turn_id, &mut ended_with_newline, ev) {
                io_error = Some(e);
            }
        };
        engine::send(ws, opts, &cancel, &mut sink)?
    };
    if let Some(e) = io_error {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    finish(ui, json_mode, ended_with_newline, &outcome)
}

fn emit(
    ui: &mut Ui,
    json_mode: bool,
    turn_id: &mut String,
    ended_with_newline: &mut bool,
    ev: TurnEvent<'_>,
) -> std::io::Result<()> {
    match ev {
        TurnEvent::Begun {
            turn,
            session,
            agent,
            attachments,
        } => {
            *turn_id = turn.to_owned();
            if json_mode {
                ui.json_line(&json!({"type": "turn.begun", "turn": turn, "session": session, "agent": agent}))?;
                ui.out.flush()?;
            } else {
                writeln!(ui.err, "turn {turn}")?;
                for pin in attachments {
                    writeln!(ui.err, "{}", crate::attach::pin_line(pin))?;
                }
                ui.err.flush()?;
            }
        }
        TurnEvent::Delta(text) => {
            if json_mode {
                ui.json_line(&json!({"type": "delta", "turn": turn_id, "text": text}))?;
            } else {
                write!(ui.out, "{}", safe(text))?;
                if !text.is_empty() {
                    *ended_with_newline = text.ends_with('\n');
                }
            }
            ui.out.flush()?;
        }
        TurnEvent::ToolStarted {
            call_id,
            name,
            arguments,
        } => {
            if json_mode {
                ui.json_line(&json!({"type": "tool.started", "turn": turn_id, "call_id": call_id, "name": name, "arguments": arguments}))?;
            } else {
                writeln!(
                    ui.err,
                    "tool {name} {}",
                    crate::fmt::first_line(arguments, 120)
                )?;
            }
        }
        TurnEvent::ToolResult {
            call_id,
            name,
            output,
            is_error,
            exit_code,
            duration_ms,
        } => {
            if json_mode {
                ui.json_line(&json!({"type": "tool.result", "turn": turn_id, "call_id": call_id, "name": name, "output": output, "is_error": is_error, "exit_code": exit_code, "duration_ms": duration_ms}))?;
            } else {
                let status = match (is_error, exit_code) {
                    (_, Some(code)) if code != 0 => format!("exit {code}"),
                    (true, _) => "error".to_owned(),
                    (false, _) => "ok".to_owned(),
                };
                writeln!(
                    ui.err,
                    "tool {name} {status}: {}",
                    crate::fmt::first_line(output, 120)
                )?;
            }
        }
        TurnEvent::Warning(message) => {
            if json_mode {
                ui.json_line(&json!({"type": "warning", "turn": turn_id, "message": message}))?;
            } else {
                ui.warn(message)?;
            }
        }
    }
    Ok(())
}

fn finish(ui: &mut Ui, json_mode: bool, ended_with_newline: bool, o: &TurnOutcome) -> CliResult {
    let code = match o.state {
        TurnState::Completed => exit::OK,
        TurnState::Failed => exit::TURN_FAILED,
        TurnState::Stopped => exit::TURN_STOPPED,
        TurnState::Interrupted => exit::TURN_INTERRUPTED,
    };
    let out = if json_mode {
        ui.json_line(&json!({
            "type": "turn.ended",
            "turn": o.turn,
            "session": o.session,
            "agent": o.agent,
            "state": o.state.as_str(),
            "output": o.output,
            "usage": usage_json(&o.usage),
            "error": o.error,
        }))
    } else {
        (|| {
            if !ended_with_newline {
                writeln!(ui.out)?;
            }
            ui.out.flush()?;
            match o.state {
                TurnState::Completed => Ok(()),
                TurnState::Stopped => writeln!(ui.err, "turn {} stopped", o.turn),
                _ => {
                    let label = ui.paint_err("31;1", "error");
                    writeln!(
                        ui.err,
                        "{label}: turn {} {}: {}",
                        o.turn,
                        o.state.as_str(),
                        o.error.as_deref().unwrap_or("no detail")
                    )
                }
            }
        })()
    };
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e.into()),
        Ok(()) => {}
    }
    Ok(code)
}
