//! The `axocoatl` command line. One module per subcommand; this file parses, dispatches and
//! turns errors into messages and exit codes.

mod ctx;
mod error;
mod exit;
mod fmt;
mod hints;
mod json;
mod json_cost;
mod json_memory;
mod json_ref;
mod line;
mod manpage;
mod progress;
mod ui;

mod agents;
mod approvals;
mod approve;
mod attach;
mod automations;
mod chat;
mod complete;
mod export;
mod follow;
mod fsck;
mod history;
mod import;
mod init;
mod mcp;
mod memory;
mod models;
mod question;
mod repo;
mod retry;
mod rewind;
mod schemas;
mod send;
mod serve;
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

pub(crate) const AFTER_HELP: &str = "\
Examples:
  axocoatl init                        create .axocoatl/ and a starter axocoatl.yaml here
  axocoatl send \"Summarize README.md\"  one turn to the default agent, streamed
  git diff | axocoatl send \"review\"    the piped text goes along as context
  axocoatl show @                      the latest turn of the current session
  axocoatl stop 3f2a                   stop that exact turn from another terminal
  axocoatl history --search budget     find turns in the current session
";

/// What `--version` prints after the name: the version, the commit and the build date
/// (see build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("AXOCOATL_BUILD"), ")");

/// A durable command-line runtime for LLM agents.
///
/// Every command works on the `.axocoatl/` repository found by walking up from the current
/// directory (like git), and on the `axocoatl.yaml` beside it.
#[derive(Debug, Parser)]
#[command(
    name = "axocoatl",
    version = VERSION,
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
    Chat(chat::ChatArgs),
    Attach(attach::AttachArgs),
    Stop(stop::StopArgs),
    Approvals(approvals::ApprovalsArgs),
    Approve(approve::ApproveArgs),
    Follow(follow::FollowArgs),
    Retry(retry::RetryArgs),
    Rewind(rewind::RewindArgs),
    Sessions(sessions::SessionsArgs),
    Schemas(schemas::SchemasArgs),
    History(history::HistoryArgs),
    Show(show::ShowArgs),
    Export(export::ExportArgs),
    Usage(usage::UsageArgs),
    Automations(automations::AutomationsArgs),
    Fsck(fsck::FsckArgs),
    Import(import::ImportArgs),
    Memory(memory::MemoryArgs),
    Models(models::ModelsArgs),
    #[command(alias = "dev")]
    Serve(serve::ServeArgs),
    Agents(agents::AgentsArgs),
    Mcp(mcp::McpArgs),
    Repo(repo::RepoArgs),
    #[command(hide = true)]
    Util(util::UtilArgs),
}

/// Parses a command line. Building clap's whole command tree (every subcommand with its
/// arguments and help) took ~0.25 ms of every run, a tenth of `send`'s budget; so a line that
/// names a subcommand is first parsed against a tree holding only that one. Anything that
/// does not parse that way (help, version, errors with their suggestions) is parsed again
/// against the whole tree, so what users see does not change.
fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let narrowed = args
        .get(1..)
        .and_then(subcommand_named)
        .and_then(narrow)
        .and_then(|cmd| cmd.try_get_matches_from(&args).ok())
        .and_then(|m| Cli::from_arg_matches(&m).ok());
    match narrowed {
        Some(cli) => Ok(cli),
        None => Cli::try_parse_from(args).map_err(familiar_words),
    }
}

/// Subcommands people reach for from other tools, and ours that does that.
const FAMILIAR: &[(&str, &str)] = &[("log", "history"), ("logs", "history")];

/// An unknown subcommand that another tool's user would type (`git log`) gets a
/// suggestion of ours that does what it does, which spelling alone would not find.
fn familiar_words(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    if e.kind() != clap::error::ErrorKind::InvalidSubcommand
        || e.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return e;
    }
    let ours = match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(word)) => FAMILIAR
            .iter()
            .find(|(theirs, _)| theirs == word)
            .map(|(_, ours)| *ours),
        _ => None,
    };
    if let Some(ours) = ours {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::String(ours.to_owned()),
        );
    }
    e
}

/// The first word of `args` that is not an option or a global option's value.
fn subcommand_named(args: &[std::ffi::OsString]) -> Option<&str> {
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let word = word.to_str()?;
        match word {
            "--" => return None,
            "-C" | "--repo" | "--config" | "--color" => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => return Some(w),
        }
    }
    None
}

/// The top-level command with only subcommand `name`, as the derive would build it.
fn narrow(name: &str) -> Option<clap::Command> {
    use clap::Args;
    let sub = clap::Command::new(name.to_owned());
    let sub = match name {
        "init" => init::InitArgs::augment_args(sub),
        "validate" => validate::ValidateArgs::augment_args(sub),
        "send" => send::SendArgs::augment_args(sub),
        "chat" => chat::ChatArgs::augment_args(sub),
        "attach" => attach::AttachArgs::augment_args(sub),
        "automations" => automations::AutomationsArgs::augment_args(sub),
        "stop" => stop::StopArgs::augment_args(sub),
        "approvals" => approvals::ApprovalsArgs::augment_args(sub),
        "approve" => approve::ApproveArgs::augment_args(sub),
        "follow" => follow::FollowArgs::augment_args(sub),
        "retry" => retry::RetryArgs::augment_args(sub),
        "rewind" => rewind::RewindArgs::augment_args(sub),
        "sessions" => sessions::SessionsArgs::augment_args(sub),
        "schemas" => schemas::SchemasArgs::augment_args(sub),
        "history" => history::HistoryArgs::augment_args(sub),
        "show" => show::ShowArgs::augment_args(sub),
        "export" => export::ExportArgs::augment_args(sub),
        "usage" => usage::UsageArgs::augment_args(sub),
        "fsck" => fsck::FsckArgs::augment_args(sub),
        "import" => import::ImportArgs::augment_args(sub),
        "memory" => memory::MemoryArgs::augment_args(sub),
        "models" => models::ModelsArgs::augment_args(sub),
        "serve" | "dev" => serve::ServeArgs::augment_args(sub),
        "agents" => agents::AgentsArgs::augment_args(sub),
        "mcp" => mcp::McpArgs::augment_args(sub),
        "repo" => repo::RepoArgs::augment_args(sub),
        "util" => util::UtilArgs::augment_args(sub),
        _ => return None,
    };
    let top = clap::Command::new("axocoatl")
        .version(VERSION)
        .propagate_version(true)
        .subcommand_required(true);
    Some(GlobalArgs::augment_args(top).subcommand(sub))
}

fn dispatch(cli: Cli, ui: &mut Ui) -> CliResult {
    let g = &cli.globals;
    match cli.command {
        Command::Init(args) => init::run(args, g, ui),
        Command::Validate(args) => validate::run(args, g, ui),
        Command::Send(args) => send::run(args, g, ui),
        Command::Chat(args) => chat::run(args, g, ui),
        Command::Attach(args) => attach::run(args, g, ui),
        Command::Automations(args) => automations::run(args, g, ui),
        Command::Stop(args) => stop::run(args, g, ui),
        Command::Approvals(args) => approvals::run(args, g, ui),
        Command::Approve(args) => approve::run(args, g, ui),
        Command::Follow(args) => follow::run(args, g, ui),
        Command::Retry(args) => retry::run(args, g, ui),
        Command::Rewind(args) => rewind::run(args, g, ui),
        Command::Sessions(args) => sessions::run(args, g, ui),
        Command::Schemas(args) => schemas::run(args, g, ui),
        Command::History(args) => history::run(args, g, ui),
        Command::Show(args) => show::run(args, g, ui),
        Command::Export(args) => export::run(args, g, ui),
        Command::Usage(args) => usage::run(args, g, ui),
        Command::Fsck(args) => fsck::run(args, g, ui),
        Command::Import(args) => import::run(args, g, ui),
        Command::Memory(args) => memory::run(args, g, ui),
        Command::Models(args) => models::run(args, g, ui),
        Command::Serve(args) => serve::run(args, g, ui),
        Command::Agents(args) => agents::run(args, g, ui),
        Command::Mcp(args) => mcp::run(args, g, ui),
        Command::Repo(args) => repo::run(args, g, ui),
        Command::Util(args) => util::run(args, g, ui),
    }
}

/// Whether the command line asks for `--json` (options end at `--`).
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

fn main() {
    // Past `ulimit -f` a write raises SIGXFSZ, whose default kills the process silently; when
    // it is handled, the write fails with EFBIG instead and is reported with its path, as a
    // full disk is.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    // `COMPLETE=bash axocoatl ...` (what the scripts in completions/ run): complete the
    // command line and exit. Without the variable this returns at once.
    clap_complete::CompleteEnv::with_factory(<Cli as clap::CommandFactory>::command).complete();
    let mut cli = match parse(std::env::args_os().collect()) {
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
    // The commands that read years of history, and a turn's `send` and `retry` (one
    // workspace each, beside the stop watcher's, which maps no segment), exit right after:
    // their maps of segments and indexes are left for the kernel to unmap at exit (see
    // `IndexOptions::leave_mapped`). Those that print a listing buffer it.
    let listing = matches!(
        cli.command,
        Command::History(_)
            | Command::Show(_)
            | Command::Sessions(_)
            | Command::Usage(_)
            | Command::Export(_)
    );
    if listing
        || matches!(
            cli.command,
            Command::Stop(_) | Command::Send(_) | Command::Retry(_)
        )
    {
        cli.globals.index.leave_mapped = true;
    }
    if listing {
        ui.buffer_out();
    }
    // Slow steps (loading a local model, reading a long prompt, building the indexes of a
    // large ledger, importing pre-1.0 state) are drawn on a terminal, unless the output is
    // for a script (`--json`) or `--quiet` asks for silence.
    if ui.err_is_terminal && !cli.globals.quiet && !json_requested() {
        progress::install();
        cli.globals.index.report_builds = Some(progress::index_build);
    }
    // What is still buffered is written before an error is reported, and a failure to
    // write it (a full disk under `export > file`) is the command's error; a reader gone
    // (a closed pipe) leaves the command's own exit code (a stopped `send` still exits 4).
    let finished = dispatch(cli, &mut ui).and_then(|code| match ui.out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(code),
    });
    // Traces of the turns this process ran go out after its output, within a short bound
    // (an endpoint that cannot be reached is a warning, never the command's failure).
    if let Some(warning) = axocoatl::telemetry::flush(axocoatl::telemetry::FLUSH_BOUND) {
        let _ = ui.warn(&warning);
    }
    let code = match finished {
        Ok(code) => code,
        // A closed pipe (`axocoatl history | head`) is not an error.
        Err(e) if e.is_broken_pipe() => exit::OK,
        Err(e) => {
            let _ = ui.out.flush();
            e.report(&mut ui)
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(line: &[&str]) -> (String, String) {
        let args: Vec<std::ffi::OsString> = std::iter::once("axocoatl")
            .chain(line.iter().copied())
            .map(Into::into)
            .collect();
        let narrowed = narrow(subcommand_named(&args[1..]).expect("a subcommand"))
            .expect("known")
            .try_get_matches_from(&args)
            .map(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m).expect("matches"));
        let full = Cli::try_parse_from(&args);
        (
            format!("{:?}", narrowed.map_err(|e| e.kind())),
            format!("{:?}", full.map_err(|e| e.kind())),
        )
    }

    #[test]
    fn narrowed_parse_equals_the_whole_tree() {
        let lines: &[&[&str]] = &[
            &["send", "hi"],
            &[
                "-C", "/tmp", "send", "--json", "-s", "a", "--agent", "x", "hi",
            ],
            &[
                "send",
                "--attach",
                "a.png",
                "--attach",
                "b.md",
                "--wait",
                "--no-stdin",
                "-",
            ],
            &[
                "--color", "never", "--repo", "r", "history", "--all", "--search", "x", "--limit",
                "3",
            ],
            &["history", "-s", "main", "--json"],
            &["--config", "c.yaml", "stop", "abcd", "--wait"],
            &["approvals", "--all", "--json"],
            &[
                "approve", "abcd", "call_1", "--deny", "--reason", "no", "--no-run",
            ],
            &["attach", "add", "f.txt", "--scope", "session"],
            &["attach", "list", "--json"],
            &["automations", "tick"],
            &["automations", "runs", "brief", "--limit", "3", "--json"],
            &["-C", "/tmp", "automations", "run", "brief", "--wait"],
            &["automations", "list", "--json"],
            &["sessions"],
            &["sessions", "switch", "work"],
            &["show", "abcd", "--json"],
            &["export", "--all", "--format", "json", "-o", "out.json"],
            &["retry", "abcd"],
            &["rewind", "--help"],
            &["usage", "--json"],
            &["fsck", "--repair"],
            &[
                "memory", "core", "set", "human", "x", "-a", "coder", "--json",
            ],
            &["memory", "-s", "main", "log", "--from", "2026-01-01"],
            &["init", "dir"],
            &["mcp", "list", "--json"],
            &["-C", "/tmp", "mcp", "serve", "--read-only"],
            &["validate", "x.yaml", "--json"],
            &["send", "--bogus"],
            &["attach"],
        ];
        for line in lines {
            let (narrowed, full) = both(line);
            // Where the narrowed tree refuses a line, the whole tree parses it again.
            if narrowed.starts_with("Ok") || full.starts_with("Ok") {
                assert_eq!(narrowed, full, "{line:?}");
            }
        }
    }

    /// `narrow` and `subcommand_named` list by hand what the derive knows; these keep them
    /// from drifting (a miss would only cost speed: the whole tree parses the line again).
    #[test]
    fn narrow_knows_every_subcommand_and_every_global_option_with_a_value() {
        use clap::CommandFactory;
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            assert!(narrow(name).is_some(), "narrow() does not know {name:?}");
        }
        let globals = <GlobalArgs as clap::Args>::augment_args(clap::Command::new("g"));
        for arg in globals.get_arguments() {
            if !arg.get_action().takes_values() {
                continue;
            }
            let spellings = arg
                .get_short()
                .map(|c| format!("-{c}"))
                .into_iter()
                .chain(arg.get_long().map(|l| format!("--{l}")));
            for word in spellings {
                let line = [word.as_str(), "send", "history"].map(std::ffi::OsString::from);
                assert_eq!(
                    subcommand_named(&line),
                    Some("history"),
                    "{word} takes a value"
                );
            }
        }
    }

    /// clap's own consistency checks over the whole command tree (conflicts, defaults,
    /// value names, help) run here, not only when a line happens to reach them.
    #[test]
    fn the_command_tree_passes_clap_debug_assert() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        for sub in Cli::command().get_subcommands() {
            narrow(sub.get_name()).expect("known").debug_assert();
        }
    }

    /// The words of the first `axocoatl ...` command in a shell line: quotes removed, up to
    /// the first unquoted `|`, `>`, `<`, `;`, `&` or `)`, or two spaces (a description
    /// follows).
    fn axocoatl_words(line: &str) -> Option<Vec<String>> {
        let at = line.find("axocoatl ")?;
        let mut words = Vec::new();
        let (mut word, mut quote, mut any) = (String::new(), None, false);
        let mut previous = ' ';
        for c in line[at..].chars() {
            let gap = quote.is_none() && c == ' ' && previous == ' ' && !words.is_empty();
            previous = c;
            if gap {
                break;
            }
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '"' | '\'') => {
                    quote = Some(c);
                    any = true;
                }
                (None, '>' | '<') => {
                    // `2>> log`: the descriptor is the redirection's, not a word.
                    if !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
                        word.clear();
                    }
                    break;
                }
                (None, '|' | ';' | '&' | ')') => break,
                (None, c) if c.is_whitespace() => {
                    if any || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, c) => word.push(c),
            }
        }
        if any || !word.is_empty() {
            words.push(word);
        }
        Some(words)
    }

    /// Every example of every `--help` is a command line the parser accepts.
    #[test]
    fn every_help_example_parses() {
        use clap::CommandFactory;
        fn visit(cmd: &mut clap::Command, out: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            if let Some(examples) = help.split("Examples:").nth(1) {
                for line in examples.lines() {
                    let line = line.trim();
                    if line.is_empty() || line.ends_with(':') && !line.contains("axocoatl") {
                        if line.is_empty() {
                            continue;
                        }
                        break;
                    }
                    if line.contains("axocoatl ") {
                        out.push(line.to_owned());
                    }
                }
            }
            for sub in cmd.get_subcommands_mut() {
                visit(sub, out);
            }
        }
        let mut lines = Vec::new();
        visit(&mut Cli::command(), &mut lines);
        assert_eq!(
            misaligned_examples(&mut Cli::command()),
            Vec::<String>::new()
        );
        assert!(lines.len() > 50, "{} examples", lines.len());
        for line in lines {
            let words = axocoatl_words(&line).expect("a command");
            if let Err(e) = Cli::try_parse_from(&words) {
                panic!("the example `{line}` does not parse ({words:?}):\n{e}");
            }
        }
    }

    /// The column where an example's description starts: after the first run of two or
    /// more spaces past the command (outside quotes); `None` without a description.
    fn description_column(line: &str) -> Option<usize> {
        let start = line.len() - line.trim_start().len();
        let mut quote = None;
        let bytes = line.as_bytes();
        for i in start..bytes.len() {
            match (quote, bytes[i]) {
                (Some(q), c) if c == q => quote = None,
                (None, b'"' | b'\'') => quote = Some(bytes[i]),
                (None, b' ') if bytes.get(i + 1) == Some(&b' ') => {
                    let end = (i..bytes.len()).find(|&j| bytes[j] != b' ')?;
                    return Some(end);
                }
                _ => {}
            }
        }
        None
    }

    /// Each `--help`'s examples whose descriptions do not start in one column, as
    /// `COMMAND: LINE`.
    fn misaligned_examples(cmd: &mut clap::Command) -> Vec<String> {
        let mut out = Vec::new();
        let help = cmd.render_long_help().to_string();
        if let Some(examples) = help.split("Examples:").nth(1) {
            let block: Vec<&str> = examples
                .lines()
                .skip_while(|l| l.trim().is_empty())
                .take_while(|l| l.starts_with(' ') || l.is_empty())
                .collect();
            let columns: Vec<(usize, &str)> = block
                .iter()
                .filter_map(|l| description_column(l).map(|c| (c, *l)))
                .collect();
            if let Some((first, _)) = columns.first() {
                for (c, l) in &columns {
                    if c != first {
                        out.push(format!("{}: {l}", cmd.get_name()));
                    }
                }
            }
        }
        for sub in cmd.get_subcommands_mut() {
            out.extend(misaligned_examples(sub));
        }
        out
    }

    #[test]
    fn the_subcommand_is_found_past_global_options() {
        let words = |l: &[&str]| -> Vec<std::ffi::OsString> { l.iter().map(Into::into).collect() };
        assert_eq!(
            subcommand_named(&words(&["-C", "send", "history"])),
            Some("history")
        );
        assert_eq!(
            subcommand_named(&words(&["--color=never", "show", "x"])),
            Some("show")
        );
        assert_eq!(subcommand_named(&words(&["--", "send"])), None);
        assert_eq!(subcommand_named(&words(&["--json"])), None);
    }
}
