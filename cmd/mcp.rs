//! `axocoatl mcp`

use std::io::Write;

use crate::json::{McpServerLine, McpToolLine};
use axocoatl::mcp::{Hub, ServerReport};
use axocoatl::provider::Cancel;
use clap::{Args, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::fmt::{first_line, safe};
use crate::ui::Ui;

/// The Model Context Protocol both ways: agents use MCP servers' tools, and this
/// repository is served to other agents.
///
/// MCP servers are declared under `mcp_servers:` in axocoatl.yaml; an agent lists the ones
/// whose tools it may use (`mcp_servers: [files]`). Their tools reach the model as
/// `mcp__<server>__<tool>`, and an agent's `tools:` allowlist names them the same way.
///
///   mcp_servers:
///     files:
///       command: python3
///       args: [fs_server.py]
///       env: { LOG_LEVEL: warn }   # only these plus PATH and HOME are passed
///   agents:
///     - id: coder
///       mcp_servers: [files]
///
/// Examples:
///   axocoatl mcp list
///   axocoatl mcp serve --read-only
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    List(ListArgs),
    Serve(ServeArgs),
}

/// Start each MCP server of axocoatl.yaml, and list its state and its tools.
///
/// Every server is started (all at once, each within its `startup_timeout_secs`), asked for
/// its tools, and ended. Tools are shown by the names models and allowlists use.
///
/// Exit status: 0, or 1 when a server did not start.
///
/// Examples:
///   axocoatl mcp list
///   axocoatl mcp list --json | jq '.tools[].name'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListArgs {
    /// Print JSON Lines, one object per server.
    #[arg(long)]
    pub json: bool,
}

/// Serve this repository to other agents over MCP on stdin and stdout.
///
/// Tools: `send` (a turn of an agent of this repository; returns the turn id and the
/// answer), `stop` (an active turn), `history_search`, `show_turn` and `memory_search`.
/// With --read-only, `send` and `stop` are not offered. Runs until the client closes
/// stdin. Configure it in an MCP client, e.g. Claude Code:
///
///   claude mcp add axocoatl -- axocoatl -C /path/to/project mcp serve
///
/// or Codex (~/.codex/config.toml):
///
///   [mcp_servers.axocoatl]
///   command = "axocoatl"
///   args = ["-C", "/path/to/project", "mcp", "serve"]
///
/// Examples:
///   axocoatl mcp serve
///   axocoatl -C ~/proj mcp serve --read-only
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Offer only the tools that read (no `send`, no `stop`).
    #[arg(long)]
    pub read_only: bool,
}

pub fn run(args: McpArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    match args.command {
        McpCommand::List(l) => list(l, g, ui),
        McpCommand::Serve(s) => {
            axocoatl::mcp_serve::serve_stdio(g.locator()?, s.read_only)?;
            Ok(exit::OK)
        }
    }
}

fn list(args: ListArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let config = ws.config()?;
    let names: Vec<String> = config.mcp_servers.keys().cloned().collect();
    if names.is_empty() {
        writeln!(
            ui.err,
            "no MCP servers: add them under `mcp_servers:` in {}",
            ws.config_path().display()
        )?;
        return Ok(exit::OK);
    }
    let hub = Hub::new(&config.mcp_servers, &ws.config_dir())
        .map_err(|why| CliError::new(axocoatl::ErrorKind::Failure, why))?;
    let prepared = hub.prepare(&names, &Cancel::new());
    drop(hub);
    for w in &prepared.warnings {
        ui.warn(w)?;
    }
    let agents_of = |server: &str| -> Vec<&str> {
        config
            .agents
            .iter()
            .filter(|a| a.mcp_servers.iter().any(|s| s == server))
            .map(|a| a.id.as_str())
            .collect()
    };
    let mut failed = false;
    for s in &prepared.servers {
        failed |= s.error.is_some();
        let agents = agents_of(&s.server);
        if args.json {
            ui.json_line(&server_json(s, &agents))?;
        } else {
            print_server(ui, s, &agents)?;
        }
    }
    Ok(if failed { exit::ERROR } else { exit::OK })
}

fn server_json<'a>(s: &'a ServerReport, agents: &'a [&'a str]) -> McpServerLine<'a> {
    McpServerLine {
        server: &s.server,
        state: if s.error.is_some() {
            "failed"
        } else {
            "running"
        },
        error: s.error.as_deref(),
        agents,
        tools: s
            .tools
            .iter()
            .map(|t| McpToolLine {
                name: &t.qualified,
                server_name: &t.name,
                description: &t.description,
                input_schema: &t.input_schema,
            })
            .collect(),
    }
}

fn print_server(ui: &mut Ui, s: &ServerReport, agents: &[&str]) -> std::io::Result<()> {
    let used = if agents.is_empty() {
        "no agent lists it".to_owned()
    } else {
        format!("agents: {}", agents.join(", "))
    };
    let name = ui.paint("1", &s.server);
    match &s.error {
        Some(why) => {
            let state = ui.paint("31", "failed");
            writeln!(ui.out, "{name}  {state}  ({used})")?;
            writeln!(ui.out, "  {}", safe(why))?;
        }
        None => {
            let n = s.tools.len();
            let state = ui.paint("32", "running");
            writeln!(
                ui.out,
                "{name}  {state}  {n} tool{}  ({used})",
                if n == 1 { "" } else { "s" }
            )?;
            let width = s.tools.iter().map(|t| t.qualified.len()).max().unwrap_or(0);
            for t in &s.tools {
                writeln!(
                    ui.out,
                    "  {:<width$}  {}",
                    t.qualified,
                    first_line(&t.description, 80)
                )?;
            }
        }
    }
    Ok(())
}
