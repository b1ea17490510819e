//! `axocoatl agents`: talk to the running `serve`.

use std::io::Write;

use axocoatl::serve::client;
use axocoatl::serve::wire::{Request, StatusReport};
use clap::{Args, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::json::AgentsLine;
use crate::ui::Ui;

/// See and steer the agents of the running `axocoatl serve`.
///
/// Every subcommand talks to the serve of this repository through its control socket;
/// without one running they exit 10. Changes are in memory only: `set` never writes
/// axocoatl.yaml, and `restart --config` does not reload it (restart serve for that).
///
/// Examples:
///   axocoatl agents list
///   axocoatl agents status assistant --json
///   axocoatl agents restart coder
///   axocoatl agents set coder model=qwen2.5-coder:7b
///   axocoatl agents set coder sampling.temperature=0.2
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AgentsArgs {
    #[command(subcommand)]
    pub command: AgentsCommand,
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// One line per actor: agent, session, state, pid, restarts, last turn.
    ///
    /// States: running (a turn is active), idle, starting, restarting, down.
    ///
    /// Examples:
    ///   axocoatl agents list
    ///   axocoatl agents list --json | jq -r 'select(.state == "down") | .agent'
    #[command(verbatim_doc_comment)]
    List {
        /// One JSON object per actor.
        #[arg(long)]
        json: bool,
    },
    /// Each actor (of agent ID, or all) with its last error, and serve's automation
    /// schedule.
    ///
    /// Examples:
    ///   axocoatl agents status
    ///   axocoatl agents status coder --json
    #[command(verbatim_doc_comment)]
    Status {
        /// The agent [default: every agent].
        id: Option<String>,
        /// One JSON object per actor (`type: actor`), then per automation
        /// (`type: automation`).
        #[arg(long)]
        json: bool,
    },
    /// Restart agent ID's actors from their latest checkpoints (also brings a down agent
    /// back).
    ///
    /// Active turns of the agent end stopped. The configuration is the one serve started
    /// with (plus `agents set` patches): --config does not reload the YAML file.
    /// A `role: worker` agent cannot be restarted directly (exit 11).
    ///
    /// Examples:
    ///   axocoatl agents restart coder
    #[command(verbatim_doc_comment)]
    Restart {
        /// The agent.
        id: String,
    },
    /// Patch agent ID in serve's memory and restart it: KEY is a field of the agent as in
    /// axocoatl.yaml (dotted for nested ones). The YAML file is not changed.
    ///
    /// Examples:
    ///   axocoatl agents set coder model=qwen2.5-coder:7b
    ///   axocoatl agents set coder system_prompt="Answer in one sentence."
    ///   axocoatl agents set coder sampling.temperature=0.2
    #[command(verbatim_doc_comment)]
    Set {
        /// The agent.
        id: String,
        /// KEY=VALUE (VALUE is YAML: a number, a list, or text).
        #[arg(value_name = "KEY=VALUE")]
        assignment: String,
    },
}

pub fn run(args: AgentsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let connect = || client::require(ws.repo());
    match args.command {
        AgentsCommand::List { json } => {
            let report = connect()?.status(None)?;
            print_actors(ui, &report, json)?;
        }
        AgentsCommand::Status { id, json } => {
            let report = connect()?.status(id.as_deref())?;
            print_status(ui, &report, json)?;
        }
        AgentsCommand::Restart { id } => {
            let message = connect()?.act(&Request::Restart { agent: id })?;
            writeln!(ui.out, "{message}")?;
            if let Some(config) = &g.config {
                writeln!(
                    ui.err,
                    "note: --config {} was not reloaded: serve keeps the configuration it started with",
                    config.display()
                )?;
            }
        }
        AgentsCommand::Set { id, assignment } => {
            let Some((key, value)) = assignment.split_once('=') else {
                return Err(CliError::usage(format!("{assignment:?} is not KEY=VALUE"))
                    .hint("axocoatl agents set coder model=qwen2.5-coder:7b"));
            };
            let message = connect()?.act(&Request::Set {
                agent: id,
                key: key.trim().to_owned(),
                value: value.to_owned(),
            })?;
            writeln!(ui.out, "{message}")?;
        }
    }
    Ok(exit::OK)
}

fn print_actors(ui: &mut Ui, report: &StatusReport, json: bool) -> CliResult<()> {
    if json {
        for a in &report.actors {
            ui.json_line(&AgentsLine::Actor {
                agent: &a.agent,
                session: &a.session,
                state: &a.state,
                pid: a.pid,
                restarts: a.restarts,
                last_error: a.last_error.as_deref(),
                last_turn: a.last_turn.as_deref(),
                mcp_servers: &a.mcp_servers,
            })?;
        }
        return Ok(());
    }
    let w = |f: fn(&axocoatl::serve::wire::ActorStatus) -> usize, min: usize| {
        report.actors.iter().map(f).max().unwrap_or(0).max(min)
    };
    let (wa, ws) = (w(|a| a.agent.len(), 5), w(|a| a.session.len(), 7));
    writeln!(
        ui.out,
        "{:wa$}  {:ws$}  {:10}  {:>8}  {:>8}  LAST TURN",
        "AGENT", "SESSION", "STATE", "PID", "RESTARTS"
    )?;
    for a in &report.actors {
        writeln!(
            ui.out,
            "{:wa$}  {:ws$}  {:10}  {:>8}  {:>8}  {}",
            a.agent,
            a.session,
            a.state,
            a.pid.map(|p| p.to_string()).unwrap_or("-".into()),
            a.restarts,
            a.last_turn.as_deref().unwrap_or("-")
        )?;
    }
    Ok(())
}

fn print_status(ui: &mut Ui, report: &StatusReport, json: bool) -> CliResult<()> {
    if json {
        print_actors(ui, report, true)?;
        for a in &report.automations {
            ui.json_line(&AgentsLine::Automation {
                automation: &a.automation,
                enabled: a.enabled,
                schedule: &a.schedule,
                next: a.next.as_deref(),
            })?;
        }
        return Ok(());
    }
    writeln!(ui.out, "serve pid {}", report.pid)?;
    for a in &report.actors {
        writeln!(
            ui.out,
            "{} (session {}): {}, pid {}, {} restart{}",
            a.agent,
            a.session,
            a.state,
            a.pid.map(|p| p.to_string()).unwrap_or("-".into()),
            a.restarts,
            if a.restarts == 1 { "" } else { "s" }
        )?;
        writeln!(
            ui.out,
            "  last turn: {}",
            a.last_turn.as_deref().unwrap_or("none")
        )?;
        if let Some(e) = &a.last_error {
            writeln!(ui.out, "  last error: {e}")?;
        }
        for m in &a.mcp_servers {
            writeln!(
                ui.out,
                "  mcp server {}: {}, pid {}, {} restart{}",
                m.server,
                m.state,
                m.pid.map(|p| p.to_string()).unwrap_or("-".into()),
                m.restarts,
                if m.restarts == 1 { "" } else { "s" }
            )?;
            if let Some(e) = &m.last_error {
                writeln!(ui.out, "    last error: {e}")?;
            }
        }
    }
    for (agent, key, value) in &report.patches {
        writeln!(ui.out, "patched in memory: {agent} {key}={value}")?;
    }
    if report.automations.is_empty() {
        writeln!(ui.out, "automations: none configured")?;
    } else {
        writeln!(ui.out, "automations (run by serve):")?;
        for a in &report.automations {
            writeln!(
                ui.out,
                "  {}  {}  {}",
                a.automation,
                a.schedule,
                match (&a.next, a.enabled) {
                    (_, false) => "disabled".to_owned(),
                    (Some(n), true) => format!("next {n}"),
                    (None, true) => "no next occurrence".to_owned(),
                }
            )?;
        }
    }
    Ok(())
}
