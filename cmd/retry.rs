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
/// Retry can repeat tool effects: review the original turn and the current state first. It
/// is refused for a turn that used attachments, because silently substituting the current
/// selection would change the request: attach the files again and send a new turn.
///
/// Examples:
///   axocoatl retry 3f2a9c1e
///   axocoatl retry 3f2a -o temperature=0
///   axocoatl retry 3f2a -m ollama:qwen2.5:7b
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RetryArgs {
    /// The turn id, or a unique prefix of at least 4 characters.
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
        let ws = g.open()?;
        let opts = engine::retry_options(&ws, &args.turn, args.wait, &args.overrides.overrides())?;
        crate::send::run_turn(&ws, opts, args.json, ui)
    })();
    crate::send::json_error(ui, json, result)
}
