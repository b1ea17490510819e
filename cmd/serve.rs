//! `axocoatl serve` (alias `dev`)

use axocoatl::serve::{self, ServeOptions};
use clap::{Args, ValueEnum};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::ui::Ui;

/// Run the agents as long-lived supervised actors, in the foreground.
///
/// Holds .axocoatl/run/serve.lock while it runs (a second serve is refused with the
/// holder's pid, exit 8). Each autonomous agent gets an actor process for the current
/// session (more are started as turns arrive for other sessions) that keeps its
/// conversation in memory, restored from its latest valid checkpoint. While serve runs,
/// `send`, `retry`, `rewind` and `stop` reach the actors through the owner-only socket
/// .axocoatl/run/serve.sock, with the same output and exit codes as without it.
///
/// Supervision: every 5 s each actor must answer; one that stopped is restarted from its
/// checkpoint (its in-flight turn is recorded interrupted, never resumed); after 5
/// consecutive failures the agent stays down until `axocoatl agents restart ID`. With
/// `consolidation.enabled`, idle agents get sleep-time consolidation; `automations:` run
/// on their schedule (beside `automations tick` from cron, safely).
///
/// SIGINT or SIGTERM: active turns end stopped, the actors stop, the lock is released,
/// exit 0. Logs go to stderr. The configuration is read once, at start: to apply YAML
/// changes, validate them and restart serve.
///
/// Examples:
///   axocoatl serve
///   axocoatl dev --config ./axocoatl.yaml
///   axocoatl serve --log-format json 2>> serve.log
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// The format of the logs on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line per event, for people.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Structured logs on stderr, for serve and its actors alike.
pub fn init_logs(format: LogFormat, color: bool) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Json => builder.json().with_current_span(false).init(),
        LogFormat::Text => builder.with_ansi(color).init(),
    }
}

pub fn run(args: ServeArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    init_logs(args.log_format, ui.err_color);
    let ws = g.open()?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::io("find", std::path::Path::new("the axocoatl executable"), e))?;
    serve::run(
        ws,
        ServeOptions {
            exe,
            locator: g.locator()?,
            log_json: args.log_format == LogFormat::Json,
        },
    )?;
    Ok(exit::OK)
}
