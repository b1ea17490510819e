//! `axocoatl rewind`

use std::io::{BufRead, IsTerminal, Write};

use axocoatl::engine::SendOptions;
use axocoatl::ErrorKind;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::json::RewindJson;
use crate::ui::Ui;

/// Move a session's conversation head back to just before TURN.
///
/// TURN and every later turn of its session are superseded: they stay in the ledger, in
/// `history` (marked superseded) and in exports, but the model no longer sees them. The
/// earlier request is printed (to stdout) so it can be revised and sent again.
///
/// Rewind is not a rollback: it restores no files or Git state, reverses no network calls or
/// other external effects, deletes no attachments or memory, and re-attaches no context from
/// the old turn. Only an autonomous single-Agent session with no active turn can be rewound.
///
/// Examples:
///   axocoatl rewind 3f2a9c1e --yes
///   axocoatl rewind @~2 --yes                  the third-latest turn of the current session
///   axocoatl rewind 3f2a --edit                revise the request in $EDITOR, then send it
///   axocoatl rewind 3f2a --yes --json | jq -r .prefill
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RewindArgs {
    /// The turn to rewind to (it and every later turn are superseded): its id, a unique
    /// prefix, or `@`, `@~N` (the session's latest turn, the N-th before it).
    #[arg(add = ArgValueCandidates::new(crate::complete::turns))]
    pub turn: String,
    /// The session the turn must belong to [default: the turn's own session].
    #[arg(short, long)]
    pub session: Option<String>,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    /// Open $EDITOR on the earlier request and send the result as a new turn, with that
    /// turn's own `-m`, `--system` and `-o`.
    #[arg(long, conflicts_with = "json")]
    pub edit: bool,
    /// Print the result as JSON (the request is in `prefill`).
    #[arg(long)]
    pub json: bool,
}

fn confirm(ui: &mut Ui, question: &str) -> CliResult<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::new(
            ErrorKind::Refused,
            "refusing to rewind without confirmation",
        )
        .hint("pass --yes to confirm from a script"));
    }
    write!(ui.err, "{question} [y/N] ")?;
    ui.err.flush()?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::io("read", std::path::Path::new("standard input"), e))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}

pub fn run(args: RewindArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open_read()?;
    let turn = axocoatl::turnref::resolve(&ws, &args.turn, args.session.as_deref())?;
    if !args.yes {
        let question = format!(
            "Rewind to before turn {}? It and every later turn of its session will be superseded (kept in history). Files and external effects are not restored.",
            turn
        );
        if !confirm(ui, &question)? {
            writeln!(ui.err, "rewind cancelled; nothing changed")?;
            return Ok(exit::REFUSED);
        }
    }
    let o = axocoatl::serve::client::rewind(&ws, &turn, args.session.as_deref())?;
    let effects = axocoatl::effects::of_turns(&ws, &o.session, &o.superseded)?;
    // The session as people name it (after a rename, not as its records do).
    let shown = ws.shown_session(&o.session).to_owned();
    if args.json {
        ui.json_line(&RewindJson {
            session: &shown,
            agent: &o.agent,
            target: &o.target,
            superseded: &o.superseded,
            prefill: &o.prefill,
            checkpoint: o.checkpoint_written,
            effects: &effects,
        })?;
        return Ok(exit::OK);
    }
    writeln!(
        ui.err,
        "Rewound session {} to before turn {}: {} turn{} superseded (still in history and exports).",
        shown,
        o.target,
        o.superseded.len(),
        if o.superseded.len() == 1 { "" } else { "s" }
    )?;
    writeln!(ui.err, "Nothing else was undone: files, external effects, memory and attachments stay as they are.")?;
    if !effects.is_empty() {
        writeln!(
            ui.err,
            "What the superseded turns' tools did stays done: {}.",
            crate::fmt::safe(&axocoatl::effects::list(&effects, 5))
        )?;
    }
    if !args.edit {
        writeln!(ui.err, "The earlier request, to revise and send again:")?;
        writeln!(ui.out, "{}", o.prefill)?;
        return Ok(exit::OK);
    }
    let edited = edit(&o.prefill)?;
    if edited.trim().is_empty() {
        writeln!(ui.err, "the edited request is empty; nothing sent")?;
        return Ok(exit::OK);
    }
    if !args.yes
        && !confirm(
            ui,
            &format!(
                "Send this as a new turn to session {}?\n\n{}\n\n",
                shown,
                edited.trim_end()
            ),
        )?
    {
        writeln!(ui.err, "not sent")?;
        return Ok(exit::OK);
    }
    // The request sent again keeps the schema its reply had to match.
    let (schema, schema_retries) = axocoatl::engine::schema_of(&ws, &o.target)?;
    // The turn's own model, system prompt and options go with its revised request, as
    // `retry` keeps them; its attachments and piped context do not (a rewind re-attaches
    // nothing).
    let overrides = axocoatl::query::show(ws.repo(), &o.target)?
        .overrides
        .unwrap_or_default();
    let opts = SendOptions {
        session: o.session,
        agent: Some(o.agent),
        message: edited.trim_end().to_owned(),
        schema,
        schema_retries,
        overrides,
        ..SendOptions::default()
    };
    crate::send::run_turn(&ws, opts, false, ui)
}

/// Lets the user edit `text` in $VISUAL / $EDITOR (default `vi`).
fn edit(text: &str) -> CliResult<String> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let dir = std::env::temp_dir();
    let file = tempfile::Builder::new()
        .prefix("axocoatl-request-")
        .suffix(".md")
        .tempfile()
        .map_err(|e| CliError::io("create a file in", &dir, e))?;
    std::fs::write(file.path(), text).map_err(|e| CliError::io("write", file.path(), e))?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .map_err(|e| {
            CliError::new(
                ErrorKind::Failure,
                format!("cannot run the editor {editor:?}: {e}"),
            )
        })?;
    if !status.success() {
        return Err(CliError::new(
            ErrorKind::Failure,
            format!("the editor {editor:?} failed ({status}); nothing sent"),
        ));
    }
    std::fs::read_to_string(file.path()).map_err(|e| CliError::io("read", file.path(), e))
}
