//! `axocoatl send`

use std::borrow::Cow;
use std::io::{IsTerminal, Read, Write};

use axocoatl::engine::{self, Attachments, Overrides, SendOptions, TurnEvent, TurnOutcome};
use axocoatl::provider::Cancel;
use axocoatl::serve::client::{self, Client};
use axocoatl::serve::wire::WireSend;
use axocoatl::sessions;
use axocoatl::workspace::Workspace;
use axocoatl_store::ledger::record::TurnState;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::safe;
use crate::json::{SendEnd, SendLine, UsageJson};
use crate::ui::Ui;

/// Send a message to an agent: one durable turn, streamed to stdout.
///
/// The message comes from the argument, or from stdin when it is absent or `-`. With both an
/// argument and piped stdin, the piped text goes along as inline context. The session's
/// selected attachments (`axocoatl attach list`) go along too; `--attach FILE` adds one for
/// this turn only. `turn <id>` is printed to stderr as soon as the turn has begun, so it can
/// be stopped from another terminal with `axocoatl stop <id>`; Ctrl-C stops it the same way
/// (twice: exit at once).
///
/// Each send continues the session's conversation: `-n` starts a fresh one. `-m`,
/// `--system` and `-o` change the agent for this turn only; the turn records them (`show`
/// lists them, `retry` reuses them).
///
/// A session runs one turn at a time: when it is busy, send waits up to 2 s for the active
/// turn to end, then exits 8; --wait queues behind it instead.
///
/// With --schema (or an agent's output_schema), the reply must be a JSON value of that
/// schema, and stdout is that value alone (see docs/schema.md): the offline model is
/// constrained to it as it writes, every reply is validated, and one that does not match
/// fails the turn (exit 3) with its violations.
///
/// A tool call the agent's `approvals:` holds is asked about at once on a terminal;
/// elsewhere the turn waits (exit 12) and `axocoatl approve TURN` answers it.
///
/// Exit status: 0 completed, 3 failed, 4 stopped, 5 interrupted, 8 session busy, 12 waits
/// for approval.
///
/// Examples:
///   axocoatl send "What changed in the last release?"
///   axocoatl send --schema 'name, age int, tags [str]' "Invent a person." | jq .age
///   git diff | axocoatl send "review this"
///   axocoatl send -n "a new question, without the earlier turns"
///   axocoatl send -o temperature=0 --system "Answer in one word." "Capital of France?"
///   axocoatl send -m ollama:llama3.2 "hi"
///   echo "hello" | axocoatl send --json -s scratch
///   axocoatl send --attach error.png --attach app.log "why does this fail?"
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SendArgs {
    /// The message; `-` or absent reads it from stdin.
    pub message: Option<String>,
    /// The session [default: HEAD, initially `main`]; a new name creates the session.
    #[arg(short, long, add = ArgValueCandidates::new(crate::complete::sessions))]
    pub session: Option<String>,
    /// Start a new session (named by the time, printed on stderr) and make it current.
    #[arg(short = 'n', long, conflicts_with = "session")]
    pub new: bool,
    /// The agent [default: default_agent, else the first autonomous agent].
    #[arg(short, long, add = ArgValueCandidates::new(crate::complete::agents))]
    pub agent: Option<String>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
    #[command(flatten)]
    pub schema: SchemaArgs,
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

/// `-m`, `--system`, `-o`: the agent as this one turn uses it (`send`, `retry`, `chat`).
#[derive(Clone, Debug, Default, Args)]
pub struct OverrideArgs {
    /// This turn's model: one of the agent's provider, or PROVIDER:MODEL (`ollama:llama3.2`).
    #[arg(short, long, value_name = "MODEL", add = ArgValueCandidates::new(crate::complete::models))]
    pub model: Option<String>,
    /// This turn's system prompt, instead of the agent's.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// A sampling option for this turn (repeatable): temperature, top_p, max_tokens,
    /// response_format (text or json).
    #[arg(
        short = 'o',
        long = "option",
        value_name = "KEY=VALUE",
        value_parser = parse_option,
        add = ArgValueCandidates::new(crate::complete::options)
    )]
    pub options: Vec<(String, String)>,
}

fn parse_option(text: &str) -> Result<(String, String), String> {
    Overrides::parse_option(text)
}

/// `--schema`, `--schema-retries`: a reply that is a JSON value of a schema.
#[derive(Clone, Debug, Default, Args)]
pub struct SchemaArgs {
    /// The JSON Schema the reply must match: a file, inline JSON Schema, the concise form
    /// ('name, age int, tags [str]') or a stored schema's id (`axocoatl schemas`).
    #[arg(long, value_name = "SCHEMA")]
    pub schema: Option<String>,
    /// How many times a reply that does not match is asked for again, with its violations
    /// [default: the agent's schema_retries, else 0].
    #[arg(long, value_name = "N")]
    pub schema_retries: Option<u32>,
    #[command(flatten)]
    pub compact: CompactArg,
}

/// `--compact` (send, retry).
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct CompactArg {
    /// Print a turn's JSON value (with a schema) on one line.
    #[arg(long)]
    pub compact: bool,
}

impl SchemaArgs {
    /// The schema given, resolved (files relative to the current directory).
    pub fn resolve(&self, ws: &Workspace) -> CliResult<Option<axocoatl::schema::Schema>> {
        let Some(text) = &self.schema else {
            return Ok(None);
        };
        let dir = std::env::current_dir()
            .map_err(|e| CliError::io("read", std::path::Path::new("."), e))?;
        Ok(Some(axocoatl::schemas::resolve(ws, text, &dir)?))
    }
}

impl OverrideArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            model: self.model.clone(),
            system: self.system.clone(),
            options: self.options.clone(),
        }
    }
}

pub fn run(args: SendArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let json = args.json;
    let result = send(args, g, ui);
    json_error(ui, json, result)
}

fn send(args: SendArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    session_not_prompt(args.session.as_deref())?;
    let (message, context) = read_input(args.message.as_deref(), args.no_stdin)?;
    let ws = g.open()?;
    let schema = args.schema.resolve(&ws)?;
    ui.compact_values = args.schema.compact.compact;
    let mut notes = Vec::new();
    let session = if args.new {
        // What would refuse the turn is checked before the new session is made.
        engine::check_overrides(&ws, args.agent.as_deref(), &args.overrides.overrides())?;
        let started = sessions::start_new(&ws)?;
        notes.push(Note::Say(format!(
            "session {} (new, now current)",
            started.name
        )));
        started.ledger
    } else {
        let (session, shown) = ws.session_for_turn(args.session.as_deref())?;
        if args.session.is_some() {
            // Said once the turn has begun, if it created the session: the engine knows from
            // the session's own records, which it reads anyway (a lookup of every session's
            // summary here cost a third of a lean send's instructions).
            notes.push(Note::IfNewSession(format!("created session {shown}")));
        }
        session
    };
    let opts = SendOptions {
        session,
        agent: args.agent,
        message,
        inline_context: context,
        attachments: Attachments::Selection,
        attach_files: args.attach,
        wait: args.wait,
        overrides: args.overrides.overrides(),
        schema,
        schema_retries: args.schema.schema_retries,
        ..SendOptions::default()
    };
    run_turn_noting(&ws, opts, args.json, ui, notes)
}

/// `-s` names a session; words with spaces were meant as `--system` (as `-s` is in other
/// tools), so the error says so.
pub fn session_not_prompt(session: Option<&str>) -> CliResult<()> {
    let Some(text) = session else {
        return Ok(());
    };
    match axocoatl_store::layout::check_session_name(text) {
        Err(axocoatl_store::Error::InvalidName { reason, .. })
            if text.contains(char::is_whitespace) =>
        {
            Err(CliError::usage(format!(
                "-s {text:?}: -s names a session, and this is not a session name: {reason}"
            ))
            .hint(format!(
                "did you mean `--system {text:?}`? (this turn's system prompt)"
            )))
        }
        _ => Ok(()),
    }
}

/// Under `--json`, an error before the turn's end is also an `error` event on stdout (the
/// message goes to stderr as always).
pub fn json_error(ui: &mut Ui, json: bool, result: CliResult) -> CliResult {
    match result {
        Err(e) if json && !e.is_broken_pipe() => {
            let line = SendLine::End(SendEnd::Error {
                message: &e.message,
                causes: &e.causes,
                hints: &e.hints,
                exit_code: exit::code(e.kind),
            });
            let _ = ui.json_line(&line).and_then(|()| ui.out.flush());
            Err(e)
        }
        other => other,
    }
}

/// The message and inline context from the argument and stdin.
fn read_input(arg: Option<&str>, no_stdin: bool) -> CliResult<(String, Vec<(String, String)>)> {
    let stdin = std::io::stdin();
    let piped = !no_stdin && !stdin.is_terminal();
    let read_all = || -> CliResult<String> {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .map_err(|e| CliError::io("read", std::path::Path::new("standard input"), e))?;
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

/// Runs a turn and prints it; shared with `retry` and `rewind --edit`.
pub fn run_turn(ws: &Workspace, opts: SendOptions, json_mode: bool, ui: &mut Ui) -> CliResult {
    run_turn_noting(ws, opts, json_mode, ui, Vec::new())
}

/// What `send` says on stderr once the turn has begun.
pub enum Note {
    Say(String),
    /// Said only when the turn created its session.
    IfNewSession(String),
}

/// [`run_turn`], saying `notes` on stderr once the turn has begun (a session it created).
pub fn run_turn_noting(
    ws: &Workspace,
    opts: SendOptions,
    json_mode: bool,
    ui: &mut Ui,
    notes: Vec<Note>,
) -> CliResult {
    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The second signal ends the process at once; the first stops the turn.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    run_turn_cancelled(ws, opts, json_mode, ui, notes, &cancel)
}

/// [`run_turn_noting`] with the caller's cancellation (`chat` stops each turn on Ctrl-C
/// and carries on). A turn whose tool calls wait for approval is asked about at once on a
/// terminal (and continued when every call is answered); elsewhere it exits 12, saying how
/// to answer it.
pub fn run_turn_cancelled(
    ws: &Workspace,
    opts: SendOptions,
    json_mode: bool,
    ui: &mut Ui,
    notes: Vec<Note>,
    cancel: &Cancel,
) -> CliResult {
    let interactive = !json_mode && crate::question::can_ask(ui);
    let mut opts = SendOptions {
        ask_at_once: interactive,
        ..opts
    };
    let mut printer = Printer {
        ui,
        ws,
        json: json_mode,
        ended_with_newline: true,
        io_error: None,
        notes,
        schema: false,
    };
    loop {
        let mut sink = |ev: TurnEvent<'_>| printer.event(ev);
        // The route: through the running `serve` (its actor keeps the conversation and
        // streams the same events back), else in this process. The outcome and errors are
        // the same.
        let result = match through_serve(ws, &opts)? {
            Some((serve, wire)) => serve.send(ws, wire, cancel, &mut sink),
            None => engine::send(ws, opts.clone(), cancel, &mut sink),
        };
        if let Some(e) = printer.io_error.take() {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e.into());
            }
        }
        let turn = match result {
            Ok(outcome) => return printer.finish(&outcome),
            Err(e) => match waiting_turn(&e) {
                Some(turn) => turn,
                None => return Err(e.into()),
            },
        };
        let Some(waiting) = axocoatl::approvals::waiting_turn(ws, &turn)? else {
            // Answered and continued elsewhere already: say how it stands.
            return printer.waiting(&turn, "", &[]);
        };
        if interactive && !cancel.is_cancelled() {
            printer.line_break()?;
            if let Some(next) = crate::question::ask(ws, &waiting, printer.ui)? {
                opts = SendOptions {
                    ask_at_once: true,
                    ..next
                };
                continue;
            }
        }
        let calls: Vec<String> = waiting
            .calls
            .iter()
            .filter(|c| c.decision.is_none())
            .map(axocoatl::history::ApprovalView::label)
            .collect();
        return printer.waiting(&waiting.turn, &waiting.session, &calls);
    }
}

/// The turn an error says waits for approval (in process, or through serve).
fn waiting_turn(e: &axocoatl::RuntimeError) -> Option<String> {
    use axocoatl::error::Next;
    match e {
        axocoatl::RuntimeError::Waiting { turn, .. } => Some(turn.clone()),
        axocoatl::RuntimeError::Remote(r) if r.kind == axocoatl::ErrorKind::AwaitingApproval => {
            r.next.iter().find_map(|n| match n {
                Next::Approve { turn } => Some(turn.clone()),
                _ => None,
            })
        }
        _ => None,
    }
}

/// The running `serve` to send the turn through, with the options as they cross its
/// socket; `None` runs the turn here: no `serve` runs (a `stat` tells), or the options
/// cannot cross (pinned attachments, an automation origin: only serve's own runners make
/// those, in process).
fn through_serve(ws: &Workspace, opts: &SendOptions) -> CliResult<Option<(Client, WireSend)>> {
    let Some(mut wire) = WireSend::from_options(opts) else {
        return Ok(None);
    };
    // serve's actors know serve's directory, not this command's.
    if wire.workdir.is_none() {
        wire.workdir = ws.here().map(Into::into);
    }
    Ok(client::connect(ws.repo())?.map(|serve| (serve, wire)))
}

/// A turn's JSON value, alone on stdout: pretty-printed, or on one line (`--compact`).
fn print_value(ui: &mut Ui, value: &serde_json::Value) -> std::io::Result<()> {
    let text = if ui.compact_values {
        serde_json::to_string(value)
    } else {
        serde_json::to_string_pretty(value)
    };
    writeln!(ui.out, "{}", text.unwrap_or_default())?;
    ui.out.flush()
}

fn say_notes(err: &mut dyn Write, notes: Vec<Note>, new_session: bool) -> std::io::Result<()> {
    for note in notes {
        match note {
            Note::Say(text) => writeln!(err, "{text}")?,
            Note::IfNewSession(text) if new_session => writeln!(err, "{text}")?,
            Note::IfNewSession(_) => {}
        }
    }
    Ok(())
}

/// Prints a turn's events as they come (`send`, `retry`, `follow`).
pub(crate) struct Printer<'u> {
    ui: &'u mut Ui,
    ws: &'u Workspace,
    json: bool,
    ended_with_newline: bool,
    /// The first output error: later events are not printed.
    io_error: Option<std::io::Error>,
    /// Said on stderr when the turn has begun.
    notes: Vec<Note>,
    /// The reply must match a schema: stdout gets its JSON value, not the text.
    schema: bool,
}

impl<'u> Printer<'u> {
    /// A printer of a turn's events to `ui`, as text or JSON Lines.
    pub(crate) fn new(ui: &'u mut Ui, ws: &'u Workspace, json: bool) -> Printer<'u> {
        Printer {
            ui,
            ws,
            json,
            ended_with_newline: true,
            io_error: None,
            notes: Vec::new(),
            schema: false,
        }
    }

    /// The first error printing met (a closed pipe included).
    pub(crate) fn take_io_error(&mut self) -> Option<std::io::Error> {
        self.io_error.take()
    }

    /// The terminal, for what is not one of the turn's events.
    pub(crate) fn ui(&mut self) -> &mut Ui {
        &mut *self.ui
    }

    pub(crate) fn event(&mut self, ev: TurnEvent<'_>) {
        if self.io_error.is_some() {
            return;
        }
        let printed = if self.json {
            self.json_event(ev)
        } else {
            self.text_event(ev)
        };
        if let Err(e) = printed {
            self.io_error = Some(e);
        }
    }

    /// Events that are not part of the JSON stream, written as text in both modes.
    fn side_event(&mut self, ev: &TurnEvent<'_>) -> std::io::Result<bool> {
        let ui = &mut *self.ui;
        match ev {
            TurnEvent::AttachmentTruncated { name, text_len } => ui.warn(&format!(
                "{}: the extracted text ({}) was cut to {}",
                safe(name),
                axocoatl::attach::size_text(*text_len as u64),
                axocoatl::attach::size_text(axocoatl::attach::TEXT_CAP as u64)
            ))?,
            TurnEvent::AttachmentWithdrawn {
                reference,
                name,
                error: None,
            } => writeln!(
                ui.err,
                "attachment {reference} {} withdrawn: the turn did not begin",
                safe(name)
            )?,
            TurnEvent::AttachmentWithdrawn {
                reference,
                error: Some(e),
                ..
            } => ui.warn(&format!("attachment {reference} stays selected: {e}"))?,
            TurnEvent::Waiting { session, turn } => {
                if ui.err_is_terminal {
                    let active = turn
                        .as_ref()
                        .map(|t| format!("turn {t}"))
                        .unwrap_or("the active turn".into());
                    writeln!(
                        ui.err,
                        "waiting for {active} of session {session} to end (--wait)"
                    )?;
                    ui.err.flush()?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn json_event(&mut self, mut ev: TurnEvent<'_>) -> std::io::Result<()> {
        if self.side_event(&ev)? {
            return Ok(());
        }
        if let TurnEvent::Begun {
            session,
            attachments,
            new_session,
            ..
        } = &mut ev
        {
            say_notes(
                &mut self.ui.err,
                std::mem::take(&mut self.notes),
                *new_session,
            )?;
            // Not part of `turn.begun` (the note above says it).
            *new_session = false;
            // The session as people name it (after a rename, not as its records do); the
            // pins are not part of `turn.begun` (`show --json` lists them).
            *session = self.ws.shown_session(session).to_owned().into();
            *attachments = Cow::Borrowed(&[]);
        }
        self.ui.json_line(&SendLine::Event(&ev))?;
        self.ui.out.flush()
    }

    /// The turn has begun: the notes, its id and pins on stderr.
    fn begun_text(&mut self, ev: &TurnEvent<'_>) -> std::io::Result<()> {
        let TurnEvent::Begun {
            turn,
            attachments,
            schema,
            new_session,
            ..
        } = ev
        else {
            return Ok(());
        };
        let ui = &mut *self.ui;
        say_notes(&mut ui.err, std::mem::take(&mut self.notes), *new_session)?;
        writeln!(ui.err, "turn {turn}")?;
        for pin in attachments.iter() {
            writeln!(ui.err, "{}", crate::attach::pin_line(pin))?;
        }
        ui.err.flush()?;
        self.schema = schema.is_some();
        Ok(())
    }

    /// The events of approvals, as text on stderr; `false` for other events.
    fn approval_text(&mut self, ev: &TurnEvent<'_>) -> std::io::Result<bool> {
        let ui = &mut *self.ui;
        match ev {
            TurnEvent::ApprovalRequested {
                call_id,
                name,
                arguments,
                rule,
                expires_at,
                ..
            } => {
                let until = expires_at
                    .as_ref()
                    .map(|e| format!("; expires {e}"))
                    .unwrap_or_default();
                writeln!(
                    ui.err,
                    "approval needed: {name} {} ({call_id}, rule: {}{until})",
                    crate::fmt::first_line(&safe(arguments), 120),
                    safe(rule)
                )?;
            }
            TurnEvent::ApprovalDecided {
                name,
                decision,
                reason,
                by,
                ..
            } => {
                let why = reason
                    .as_ref()
                    .map(|r| format!(": {}", safe(r)))
                    .unwrap_or_default();
                writeln!(ui.err, "{name} {decision} by {}{why}", safe(by))?;
            }
            TurnEvent::Continued { turn, .. } => {
                say_notes(&mut ui.err, std::mem::take(&mut self.notes), false)?;
                writeln!(ui.err, "turn {turn} continues")?;
                ui.err.flush()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn text_event(&mut self, ev: TurnEvent<'_>) -> std::io::Result<()> {
        if self.side_event(&ev)? || self.approval_text(&ev)? {
            return Ok(());
        }
        if let TurnEvent::Begun { .. } = ev {
            return self.begun_text(&ev);
        }
        let ui = &mut *self.ui;
        match ev {
            TurnEvent::Begun { .. } => {}
            // With a schema, the value alone goes to stdout, once validated.
            TurnEvent::Delta { .. } if self.schema => {}
            TurnEvent::Value { value, .. } => {
                print_value(ui, &value)?;
                self.ended_with_newline = true;
            }
            TurnEvent::Delta { text, .. } => {
                write!(ui.out, "{}", safe(&text))?;
                if !text.is_empty() {
                    self.ended_with_newline = text.ends_with('\n');
                }
                ui.out.flush()?;
            }
            TurnEvent::ToolStarted { .. } | TurnEvent::ToolResult { .. } => {
                return self.tool_event(ev)
            }
            TurnEvent::Warning { message, .. } => ui.warn(&safe(&message))?,
            TurnEvent::Planned {
                method, subtasks, ..
            } => writeln!(
                ui.err,
                "plan ({method}): {}",
                subtasks
                    .iter()
                    .map(|s| format!("{} [{}]", s.id, s.worker))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?,
            TurnEvent::SubtaskStarted {
                subtask, worker, ..
            } => writeln!(ui.err, "subtask {subtask} [{worker}] started")?,
            TurnEvent::SubtaskEnded {
                subtask,
                worker,
                state,
                error,
                ..
            } => match error {
                Some(e) => writeln!(
                    ui.err,
                    "subtask {subtask} [{worker}] {}: {}",
                    state.as_str(),
                    crate::fmt::first_line(&safe(&e), 120)
                )?,
                None => writeln!(ui.err, "subtask {subtask} [{worker}] {}", state.as_str())?,
            },
            TurnEvent::Answering { agent, reason, .. } => {
                if !self.ended_with_newline {
                    writeln!(ui.out)?;
                    self.ended_with_newline = true;
                }
                writeln!(ui.err, "{agent} answers ({})", safe(&reason))?;
                ui.err.flush()?;
            }
            TurnEvent::AttachmentTruncated { .. }
            | TurnEvent::AttachmentWithdrawn { .. }
            | TurnEvent::Waiting { .. }
            | TurnEvent::ApprovalRequested { .. }
            | TurnEvent::ApprovalDecided { .. }
            | TurnEvent::Continued { .. } => {}
        }
        Ok(())
    }

    /// A line break after output that did not end with one (before a question).
    fn line_break(&mut self) -> std::io::Result<()> {
        if !self.ended_with_newline {
            writeln!(self.ui.out)?;
            self.ended_with_newline = true;
        }
        self.ui.out.flush()
    }

    /// The end of a turn that waits for approval of `calls`: exit 12, and `turn.waiting` or
    /// how to answer it.
    pub(crate) fn waiting(mut self, turn: &str, session: &str, calls: &[String]) -> CliResult {
        let out = if self.json {
            let session = self.ws.shown_session(session);
            self.ui.json_line(&SendLine::End(SendEnd::TurnWaiting {
                turn,
                session,
                calls,
                exit_code: exit::AWAITING_APPROVAL,
            }))
        } else {
            (|| {
                self.line_break()?;
                let ui = &mut *self.ui;
                let what = if calls.is_empty() {
                    "approval".to_owned()
                } else {
                    format!("approval of {}", calls.join(", "))
                };
                writeln!(ui.err, "turn {turn} waits for {what}")?;
                let hint = ui.paint_err("36", "hint");
                writeln!(
                    ui.err,
                    "{hint}: {}",
                    crate::hints::words(&axocoatl::error::Next::Approve {
                        turn: turn.to_owned()
                    })
                )
            })()
        };
        match out {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        Ok(exit::AWAITING_APPROVAL)
    }

    /// A tool's call or result, on stderr; its diff of a file, coloured.
    fn tool_event(&mut self, ev: TurnEvent<'_>) -> std::io::Result<()> {
        let ui = &mut *self.ui;
        match ev {
            TurnEvent::ToolStarted {
                name, arguments, ..
            } => {
                // On a terminal, stdout and stderr share the screen: a tool line starts on
                // a line of its own, and its arguments read as `key=value`, not JSON.
                let shared = ui.out_is_terminal && ui.err_is_terminal;
                if shared && !self.ended_with_newline {
                    writeln!(ui.out)?;
                    ui.out.flush()?;
                    self.ended_with_newline = true;
                }
                let shown = if ui.err_is_terminal {
                    crate::fmt::readable_arguments(&arguments, 120)
                } else {
                    crate::fmt::first_line(&arguments, 120)
                };
                writeln!(ui.err, "tool {name} {shown}")?
            }
            TurnEvent::ToolResult {
                name,
                output,
                is_error,
                exit_code,
                ..
            } => {
                let status = match (is_error, exit_code) {
                    (_, Some(code)) if code != 0 => format!("exit {code}"),
                    (true, _) => "error".to_owned(),
                    (false, _) => "ok".to_owned(),
                };
                let first = crate::fmt::first_line(&output, 120);
                writeln!(ui.err, "tool {name} {status}: {first}")?;
                if let Some(diff) = crate::fmt::tool_diff(&name, &output) {
                    for line in diff.lines() {
                        let line = crate::fmt::diff_line(line, |c, t| ui.paint_err(c, t));
                        writeln!(ui.err, "  {line}")?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The end of the turn: its exit code, and `turn.ended` or a closing line.
    pub(crate) fn finish(self, o: &TurnOutcome) -> CliResult {
        let ui = self.ui;
        let out = if self.json {
            ui.json_line(&SendLine::End(SendEnd::TurnEnded {
                turn: &o.turn,
                session: self.ws.shown_session(&o.session),
                agent: &o.agent,
                agent_name: o.agent_name.as_deref(),
                state: o.state.as_str(),
                output: &o.output,
                usage: UsageJson::from(&o.usage),
                error: o.error.as_deref(),
            }))
        } else {
            (|| {
                if !self.ended_with_newline {
                    writeln!(ui.out)?;
                }
                ui.out.flush()?;
                match o.state {
                    TurnState::Completed => Ok(()),
                    TurnState::Stopped => {
                        writeln!(ui.err, "turn {} stopped", o.turn)?;
                        // What its tools did before the stop stays done. (A ledger that
                        // cannot be read now leaves this note out; the stop stands.)
                        let effects =
                            axocoatl::effects::of_turn_named(self.ws, &o.turn).unwrap_or_default();
                        if effects.is_empty() {
                            return Ok(());
                        }
                        writeln!(
                            ui.err,
                            "what its tools did stays done (a stop rolls nothing back): {}",
                            safe(&axocoatl::effects::list(&effects, 5))
                        )
                    }
                    _ => {
                        let label = ui.paint_err("31;1", "error");
                        let (detail, hints) =
                            crate::fmt::split_hints(o.error.as_deref().unwrap_or("no detail"));
                        let (turn, state) = (&o.turn, o.state.as_str());
                        writeln!(ui.err, "{label}: turn {turn} {state}: {}", safe(&detail))?;
                        for hint in hints {
                            let label = ui.paint_err("36", "hint");
                            writeln!(ui.err, "{label}: {}", safe(hint))?;
                        }
                        Ok(())
                    }
                }
            })()
        };
        match out {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(e.into()),
            Ok(()) => {}
        }
        Ok(exit::for_turn(o.state))
    }
}
