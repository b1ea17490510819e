//! `axocoatl retry`

use axocoatl::engine;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::send::OverrideArgs;
use crate::ui::Ui;

/// Send the request of an earlier turn again, as a new turn linked to it.
///
/// The new turn uses the original's per-call model, system prompt and options (`send -m`,
/// `--system`, `-o`); those given here are laid over them. A reply that had to match a
/// schema (`send --schema`) must match it again, with the same retries.
///
/// Retry can repeat tool effects: when the original turn's tools changed files or ran
/// commands, retry names those calls in a warning before the new turn (a `warning` event
/// under --json); review the original turn and the current state first. It is refused for
/// a turn that used attachments, because silently substituting the current
/// selection would change the request: attach the files again and send a new turn.
///
/// Examples:
///   axocoatl retry 3f2a9c1e
///   axocoatl retry @                the latest turn of the current session
///   axocoatl retry 3f2a -o temperature=0
///   axocoatl retry 3f2a -m ollama:qwen2.5:7b
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RetryArgs {
    /// The turn: its id, a unique prefix of at least 4 characters, or `@` (the current
    /// session's latest turn), `@~N` (the N-th before it).
    #[arg(add = ArgValueCandidates::new(crate::complete::turns))]
    pub turn: String,
    #[command(flatten)]
    pub overrides: OverrideArgs,
    #[command(flatten)]
    pub compact: crate::send::CompactArg,
    /// Write JSON Lines events to stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Queue behind an active turn of the session instead of failing.
    #[arg(long)]
    pub wait: bool,
}

pub fn run(args: RetryArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let json = args.json;
    ui.compact_values = args.compact.compact;
    let result = (|| {
        let ws = g.open_read()?;
        let turn = axocoatl::turnref::resolve(&ws, &args.turn, None)?;
        let opts = engine::retry_options(&ws, &turn, args.wait, &args.overrides.overrides())?;
        if let Some(original) = &opts.retry_of {
            warn_of_effects(&ws, original, args.json, ui)?;
        }
        crate::send::run_turn(&ws, opts, args.json, ui)
    })();
    crate::send::json_error(ui, json, result)
}

/// Says it when the original turn's tools changed files or ran commands: the new turn may
/// do them again (on stderr; under `--json` also as a `warning` event before the turn).
pub fn warn_of_effects(
    ws: &axocoatl::workspace::Workspace,
    original: &str,
    json: bool,
    ui: &mut Ui,
) -> CliResult<()> {
    let effects = axocoatl::effects::of_turn_named(ws, original)?;
    if effects.is_empty() {
        return Ok(());
    }
    let message = format!(
        "turn {original}'s tools changed files or ran commands: {}; the retry sends the same request, so the new turn may do them again (nothing was rolled back)",
        axocoatl::effects::list(&effects, 5)
    );
    ui.warn(&crate::fmt::safe(&message))?;
    if json {
        ui.json_line(&crate::json::SendLine::Event(&engine::TurnEvent::Warning {
            turn: "".into(),
            message: message.as_str().into(),
        }))?;
    }
    Ok(())
}
