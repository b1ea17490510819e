//! The end in this process of a turn that waits for approval: its lock's note says it
//! waits, `on_approval_request:` hears of it, and the caller is told how to answer.

use super::begin::Begun;
use super::prepare::Prepared;
use super::wait::Paused;
use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::session::ActiveNote;
use crate::turn::TurnEvent;
use crate::workspace::Workspace;

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// The paused turn's end in this process: its session lock's note says it waits (so every
/// other process leaves the session to it without reading the ledger),
/// `on_approval_request:` hears of it unless a person is asked at once, and the caller gets
/// [`RuntimeError::Waiting`]. The lock is released with `p`; the note stays.
pub(super) fn hold(
    ws: &Workspace,
    mut p: Prepared<'_>,
    begun: &Begun,
    paused: Paused,
    sink: &mut Sink<'_>,
) -> RuntimeError {
    let repo = ws.repo();
    axocoatl_store::failpoint::pause("approval.requested");
    let until = paused.requests.iter().filter_map(|r| r.expires_at).min();
    let note = ActiveNote {
        turn: begun.turn.clone(),
        session: p.session.clone(),
        begin: begun.start,
        pid: std::process::id(),
        waiting: Some(until),
    };
    if let Err(e) = crate::session::set_note(repo, &mut p.lock, &note) {
        return e.into();
    }
    if !p.ask_at_once {
        if let Err(e) = tell_hook(ws, &p, begun, &paused, sink) {
            return e;
        }
    }
    RuntimeError::Waiting {
        turn: begun.turn.clone(),
        session: p.session.clone(),
        calls: paused
            .requests
            .iter()
            .map(|r| format!("{} ({})", r.tool, r.call_id))
            .collect(),
    }
}

/// Runs `on_approval_request:`, if configured, with the requests as JSON on its stdin. Its
/// failure is a warning of the turn.
fn tell_hook(
    ws: &Workspace,
    p: &Prepared<'_>,
    begun: &Begun,
    paused: &Paused,
    sink: &mut Sink<'_>,
) -> Result<()> {
    let config = ws.config()?;
    let Some(hook) = &config.on_approval_request else {
        return Ok(());
    };
    let request = serde_json::json!({
        "turn": begun.turn,
        "session": ws.shown_session(&p.session),
        "agent": p.agent.id,
        "repository": ws.repo().workdir(),
        "calls": paused.requests.iter().map(|r| serde_json::json!({
            "call_id": r.call_id,
            "tool": r.tool,
            "arguments": crate::tools::for_model(&r.arguments.inline),
            "rule": r.rule,
            "expires_at": r.expires_at.map(clock::rfc3339),
        })).collect::<Vec<_>>(),
        "requested_at": paused.requests.first().map(|r| clock::rfc3339(r.at)),
        "approve": ["axocoatl", "approve", begun.turn],
        "deny": ["axocoatl", "approve", begun.turn, "--deny", "--reason", "REASON"],
    });
    if let Err(why) = crate::approval::run_hook(hook, &ws.config_dir(), &request) {
        let rec = super::record::Recorder {
            repo: ws.repo(),
            turn: &begun.turn,
            session: &p.session,
        };
        rec.warn(sink, "hook", why)?;
    }
    Ok(())
}
