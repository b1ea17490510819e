//! `axocoatl sessions`

use std::io::Write;

use axocoatl::clock;
use axocoatl::history;
use axocoatl_store::layout::check_session_name;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::ui::Ui;

/// List sessions, or switch and create them.
///
/// Without a subcommand, lists every session with its turn count, last activity and active
/// turn; `*` marks the current one (HEAD).
///
/// Examples:
///   axocoatl sessions
///   axocoatl sessions new review-42
///   axocoatl sessions switch main
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// Print JSON Lines, one object per session.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Make NAME the current session (HEAD).
    Switch {
        name: String,
        /// Create the session if it does not exist.
        #[arg(short, long)]
        create: bool,
    },
    /// Create session NAME and make it current.
    New { name: String },
}

pub fn run(args: SessionsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let list = history::sessions(ws.repo())?;
    crate::fmt::warn_damaged(ui, &list.problems)?;
    let head = ws.repo().head()?;
    match args.command {
        None => {
            let mut sessions: Vec<_> = list.sessions.values().cloned().collect();
            if !sessions.iter().any(|s| s.session == head) {
                sessions.push(history::SessionView {
                    session: head.clone(),
                    ..Default::default()
                });
                sessions.sort_by(|a, b| a.session.cmp(&b.session));
            }
            for s in &sessions {
                if args.json {
                    ui.json_line(&json!({
                        "session": s.session,
                        "current": s.session == head,
                        "turns": s.turns,
                        "last_activity": s.last_activity.map(clock::rfc3339),
                        "active_turn": s.active_turn,
                    }))?;
                } else {
                    let mark = if s.session == head { "*" } else { " " };
                    let last = s
                        .last_activity
                        .map(clock::short)
                        .unwrap_or_else(|| "-".into());
                    let active = s
                        .active_turn
                        .as_deref()
                        .map(|t| format!("  active {t}"))
                        .unwrap_or_default();
                    writeln!(
                        ui.out,
                        "{mark} {:<20} {:>5} turn{}  {last}{active}",
                        s.session,
                        s.turns,
                        if s.turns == 1 { " " } else { "s" }
                    )?;
                }
            }
            Ok(if list.problems.is_empty() {
                exit::OK
            } else {
                exit::ERROR
            })
        }
        Some(SessionsCommand::Switch { name, create }) => {
            check_session_name(&name)?;
            if !create && !list.sessions.contains_key(&name) && name != head {
                return Err(
                    CliError::new(exit::NOT_FOUND, format!("no session {name:?}")).hint(format!(
                        "create it with `axocoatl sessions new {name}` (or `switch --create`)"
                    )),
                );
            }
            ws.repo().set_head(&name)?;
            report(ui, args.json, &name, "switched")
        }
        Some(SessionsCommand::New { name }) => {
            check_session_name(&name)?;
            if list.sessions.contains_key(&name) {
                return Err(CliError::new(
                    exit::REFUSED,
                    format!("session {name:?} already exists"),
                )
                .hint(format!(
                    "switch to it with `axocoatl sessions switch {name}`"
                )));
            }
            ws.repo()
                .ledger()
                .append(&[axocoatl_store::ledger::Record::SessionCreated(
                    axocoatl_store::ledger::record::SessionCreated {
                        session: name.clone(),
                        at: clock::now(),
                    },
                )])?;
            ws.repo().set_head(&name)?;
            report(ui, args.json, &name, "created")
        }
    }
}

fn report(ui: &mut Ui, json_mode: bool, name: &str, what: &str) -> CliResult {
    if json_mode {
        ui.json_line(&json!({"session": name, "current": true, "action": what}))?;
    } else if what == "created" {
        writeln!(ui.out, "Created session {name} (now current)")?;
    } else {
        writeln!(ui.out, "Switched to session {name}")?;
    }
    Ok(exit::OK)
}
