//! `axocoatl sessions`

use std::io::Write;

use axocoatl::{clock, sessions};
use clap::{Args, Subcommand};
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::json::{SessionActionJson, SessionJson};
use crate::ui::Ui;

/// List sessions; create, switch, rename and remove them.
///
/// Without a subcommand, lists every session with its turn count, last activity and active
/// turn; `*` marks the current one (HEAD). `send -n` starts a fresh session in one step.
///
/// Examples:
///   axocoatl sessions
///   axocoatl sessions new review-42
///   axocoatl sessions new panel --agents critic,coder,tester
///   axocoatl sessions switch main
///   axocoatl sessions rename review-42 review-43
///   axocoatl sessions rm review-43
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// Print JSON Lines, one object per session.
    #[arg(long)]
    pub json: bool,
    /// List removed sessions too.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Make NAME the current session (HEAD).
    Switch {
        #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
        name: String,
        /// Create the session if it does not exist.
        #[arg(short, long)]
        create: bool,
    },
    /// Create session NAME and make it current.
    ///
    /// With --agents, a multi-agent session: each user turn goes to the agents the lattice
    /// activation rule picks (an `@agent` mention always does), in `depends_on` order,
    /// each seeing the earlier answers (see docs/teams.md).
    New {
        name: String,
        /// The autonomous agents of a multi-agent session, comma-separated (at least two).
        #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
        agents: Vec<String>,
    },
    /// Remove session NAME from listings; refused while one of its turns is active.
    ///
    /// The ledger keeps its records: `history --all`, `show` and `export` still find its
    /// turns, and `sessions --all` lists it as removed. NAME is free again: sending to it
    /// starts a new, empty session (so `sessions rm main` gives a fresh `main`).
    #[command(alias = "remove")]
    Rm {
        #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
        name: String,
    },
    /// Rename session FROM to TO (HEAD follows); FROM is free again.
    Rename {
        #[arg(add = ArgValueCandidates::new(crate::complete::sessions))]
        from: String,
        to: String,
    },
}

pub fn run(args: SessionsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    // Listing sessions reads; outside a project it makes no home repository.
    let ws = if args.command.is_none() {
        g.open_read()?
    } else {
        g.open()?
    };
    match args.command {
        None => {
            let listing = sessions::list(&ws, args.all)?;
            crate::fmt::warn_problems(ui, &listing.problems, 0)?;
            for s in &listing.sessions {
                let v = &s.view;
                if args.json {
                    ui.json_line(&SessionJson {
                        session: &s.name,
                        current: s.current,
                        turns: v.turns,
                        last_activity: v.last_activity.map(clock::rfc3339),
                        active_turn: v.active_turn.as_deref(),
                        removed_at: s.removed_at.map(clock::rfc3339),
                    })?;
                    continue;
                }
                let mark = if s.current { "*" } else { " " };
                let last = v
                    .last_activity
                    .map(clock::short)
                    .unwrap_or_else(|| "-".into());
                let active = v
                    .active_turn
                    .as_deref()
                    .map(|t| format!("  active {t}"))
                    .unwrap_or_default();
                let turns = if v.turns == 1 { "turn " } else { "turns" };
                let removed = if s.removed_at.is_some() {
                    "  (removed)"
                } else {
                    ""
                };
                writeln!(
                    ui.out,
                    "{mark} {:<20} {:>5} {turns}  {last}{active}{removed}",
                    s.name, v.turns
                )?;
            }
            Ok(if listing.problems.is_empty() {
                exit::OK
            } else {
                exit::ERROR
            })
        }
        Some(SessionsCommand::Switch { name, create }) => {
            sessions::switch(&ws, &name, create)?;
            report(ui, args.json, &name, "switched")
        }
        Some(SessionsCommand::New { name, agents }) => {
            sessions::create_with(&ws, &name, &agents)?;
            report(ui, args.json, &name, "created")
        }
        Some(SessionsCommand::Rm { name }) => {
            sessions::remove(&ws, &name)?;
            let current = ws.head().ok().as_deref() == Some(name.as_str());
            if args.json {
                ui.json_line(&SessionActionJson {
                    session: &name,
                    current,
                    action: "removed",
                })?;
            } else {
                writeln!(
                    ui.out,
                    "Removed session {name} (its turns stay in the ledger: `axocoatl history --all`)"
                )?;
                if current {
                    writeln!(ui.out, "The next turn starts a new, empty session {name}")?;
                }
            }
            Ok(exit::OK)
        }
        Some(SessionsCommand::Rename { from, to }) => {
            sessions::rename(&ws, &from, &to)?;
            let current = ws.head().ok().as_deref() == Some(to.as_str());
            if args.json {
                ui.json_line(&SessionActionJson {
                    session: &to,
                    current,
                    action: "renamed",
                })?;
            } else {
                writeln!(ui.out, "Renamed session {from} to {to}")?;
            }
            Ok(exit::OK)
        }
    }
}

fn report(ui: &mut Ui, json_mode: bool, name: &str, what: &str) -> CliResult {
    if json_mode {
        ui.json_line(&SessionActionJson {
            session: name,
            current: true,
            action: what,
        })?;
    } else if what == "created" {
        writeln!(ui.out, "Created session {name} (now current)")?;
    } else {
        writeln!(ui.out, "Switched to session {name}")?;
    }
    Ok(exit::OK)
}
