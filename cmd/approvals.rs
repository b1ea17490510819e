//! `axocoatl approvals`

use std::io::Write;

use axocoatl::approvals;
use axocoatl::clock;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::{first_line, safe};
use crate::json::ApprovalLine;
use crate::ui::Ui;

/// List the tool calls that wait for a person's approval.
///
/// A call waits when its agent's `approvals:` holds it; its turn waits too (neither running
/// nor ended, across processes and restarts) and holds its session until every held call is
/// decided with `axocoatl approve`, the turn is stopped, or its `approval_timeout` passes.
/// Each line names the turn, its session and agent, the call, the tool and its arguments,
/// the rule that held it and since when it waits. A decided call whose turn has not been
/// continued yet shows its decision.
///
/// Examples:
///   axocoatl approvals
///   axocoatl approvals --all --json | jq -r .turn
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ApprovalsArgs {
    /// The session [default: HEAD].
    #[arg(short, long, conflicts_with = "all", add = ArgValueCandidates::new(crate::complete::sessions))]
    pub session: Option<String>,
    /// Every session.
    #[arg(long)]
    pub all: bool,
    /// Print JSON Lines, one object per waiting call.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ApprovalsArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.scope(args.session.as_deref(), args.all)?;
    let waiting = approvals::list(&ws, session.as_deref())?;
    if waiting.is_empty() && !args.json {
        let scope = session
            .as_deref()
            .map(|s| format!("session {}", ws.shown_session(s)))
            .unwrap_or_else(|| "any session".into());
        writeln!(ui.err, "nothing waits for approval in {scope}")?;
    }
    for t in &waiting {
        let shown = ws.shown_session(&t.session);
        for c in &t.calls {
            if args.json {
                ui.json_line(&ApprovalLine {
                    turn: &t.turn,
                    session: shown,
                    agent: &t.agent,
                    call_id: &c.call_id,
                    tool: &c.tool,
                    arguments: &c.arguments,
                    rule: &c.rule,
                    requested_at: clock::rfc3339(c.requested_at),
                    expires_at: c.expires_at.map(clock::rfc3339),
                    decision: c.decision.as_deref(),
                })?;
                continue;
            }
            let mut line = format!(
                "{}  {}  {:<12} [{shown}] {} {} {}",
                ui.paint("33", &t.turn),
                clock::short(c.requested_at),
                first_line(&t.agent, 12),
                c.call_id,
                ui.paint("1", &c.tool),
                safe(&first_line(&c.arguments, 80)),
            );
            line.push_str(&ui.paint("2", &format!(" (rule: {})", safe(&c.rule))));
            match (&c.decision, c.expires_at) {
                (Some(d), _) => line.push_str(&format!(" {d}, to be continued")),
                (None, Some(e)) => line.push_str(&format!(" expires {}", clock::short(e))),
                (None, None) => {}
            }
            writeln!(ui.out, "{line}")?;
        }
    }
    Ok(exit::OK)
}
