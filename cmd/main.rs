//! The `axocoatl` command line. One module per subcommand; this file parses, dispatches and
//! turns errors into messages and exit codes.

mod ctx;
mod error;
mod exit;
mod fmt;
mod ui;

mod attach;
mod export;
mod fsck;
mod history;
mod init;
mod retry;
mod rewind;
mod send;
mod sessions;
mod show;
mod stop;
mod usage;
mod util;
mod validate;

use std::io::Write;

use clap::{Parser, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::ui::Ui;

const AFTER_HELP: &str = "\
Examples:
  axocoatl init                       create .axocoatl/ and a starter axocoatl.yaml here
  axocoatl send \"Summarize README.md\"  one turn to the default agent, streamed
  git diff | axocoatl send \"review\"    the piped text goes along as context
  axocoatl stop 3f2a                  stop that exact turn from another terminal
  axocoatl history --search budget    find turns in the current session
";

/// A durable command-line runtime for LLM agents.
///
/// Every command works on the `.axocoatl/` repository found by walking up from the current
/// directory (like git), and on the `axocoatl.yaml` beside it.
#[derive(Debug, Parser)]
#[command(
    name = "axocoatl",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(after_help = format!("{AFTER_HELP}\n{}", exit::TABLE))]
pub struct Cli {
    #[command(flatten)]
    pub globals: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Init(init::InitArgs),
    Validate(validate::ValidateArgs),
    Send(send::SendArgs),
    Attach(attach::AttachArgs),
    Stop(stop::StopArgs),
    Retry(retry::RetryArgs),
    Rewind(rewind::RewindArgs),
    Sessions(sessions::SessionsArgs),
    History(history::HistoryArgs),
    Show(show::ShowArgs),
    Export(export::ExportArgs),
    Usage(usage::UsageArgs),
    Fsck(fsck::FsckArgs),
    #[command(hide = true)]
    Util(util::UtilArgs),
}

fn dispatch(cli: Cli, ui: &mut Ui) -> CliResult {
    let g = &cli.globals;
    match cli.command {
        Command::Init(args) => init::run(args, g, ui),
        Command::Validate(args) => validate::run(args, g, ui),
        Command::Send(args) => send::run(args, g, ui),
        Command::Attach(args) => attach::run(args, g, ui),
        Command::Stop(args) => stop::run(args, g, ui),
        Command::Retry(args) => retry::run(args, g, ui),
        Command::Rewind(args) => rewind::run(args, g, ui),
        Command::Sessions(args) => sessions::run(args, g, ui),
        Command::History(args) => history::run(args, g, ui),
        Command::Show(args) => show::run(args, g, ui),
        Command::Export(args) => export::run(args, g, ui),
        Command::Usage(args) => usage::run(args, g, ui),
        Command::Fsck(args) => fsck::run(args, g, ui),
        Command::Util(args) => util::run(args, g, ui),
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let mut ui = Ui::new(cli.globals.color);
    let code = match dispatch(cli, &mut ui) {
        Ok(code) => code,
        // A closed pipe (`axocoatl history | head`) is not an error.
        Err(e) if e.is_broken_pipe() => exit::OK,
        Err(e) => e.report(&mut ui),
    };
    let _ = ui.out.flush();
    std::process::exit(code);
}
