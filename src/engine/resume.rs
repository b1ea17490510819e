//! The rest of a turn that waited for approval, once every held call of it is decided
//! (`approve`): here, or in serve's actor (a send whose options name the turn). Under the
//! session's lock the ledger must still say the turn waits with every held call decided; the
//! turn then goes on from what it saved, as the process that paused it would have: the
//! held round's calls run (or are answered with their denial) in order, then the model is
//! called again. A call that runs is recorded as started before it runs, so a turn whose
//! continuing process dies is interrupted, never continued twice.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{ApprovalDecided, Decision};

use super::begin::Begun;
use super::converse::Tally;
use super::finish::{self, Continued};
use super::prepare::Prepared;
use super::wait::Resume;
use crate::approval::Saved;
use crate::config::AgentConfig;
use crate::conversation;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, TurnView, ViewState, Want};
use crate::provider::{Cancel, Message, ToolCall};
use crate::session::{self, ActiveNote};
use crate::turn::{TurnEvent, TurnOutcome};
use crate::workspace::Workspace;

/// Continues the waiting turn `prefix` names.
pub(super) fn resume(
    ws: &Workspace,
    prefix: &str,
    ask_at_once: bool,
    held: Option<conversation::Conversation>,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, conversation::Conversation)> {
    let repo = ws.repo();
    let (turn, session) = {
        let p = Projection::of(repo, Scope::Prefix(prefix), Want::TURNS)?;
        let t = p.resolve(prefix)?;
        (t.turn.clone(), t.session.clone())
    };
    // Another process holds the session: it continues this turn already (or, once the
    // turn ended, runs the next one).
    let lock = session::lock_to_continue(repo, &session).map_err(|e| match e {
        RuntimeError::Busy { .. } => RuntimeError::NotWaiting {
            turn: turn.clone(),
            now: "is being continued by another process".into(),
        },
        e => e,
    })?;
    let projection = Projection::of(repo, Scope::Session(&session), Want::VIEWS)?;
    let t = projection
        .turn(&turn)
        .ok_or_else(|| RuntimeError::TurnNotFound {
            prefix: turn.clone(),
        })?;
    check_continuable(t)?;
    let config = ws.config()?;
    let base = config
        .agent(&t.agent)
        .ok_or_else(|| RuntimeError::Invalid {
            message: format!(
                "turn {turn} waited for agent {:?}, which is no longer in the configuration",
                t.agent
            ),
            hint: format!(
                "add agent {:?} back to {} to continue the turn, or stop it",
                t.agent,
                ws.config_path().display()
            )
            .into(),
        })?;
    let patched = match &t.overrides {
        Some(o) if !o.is_empty() => Some(o.apply(config, base)?),
        _ => None,
    };
    let agent = patched.as_ref().unwrap_or(base);
    let parts = Parts {
        t,
        agent,
        projection: &projection,
        ask_at_once,
    };
    go_on(ws, parts, lock, held, cancel, sink)
}

/// The waiting turn and what it continues with.
struct Parts<'a, 'w> {
    t: &'a TurnView,
    agent: &'w AgentConfig,
    projection: &'a Projection,
    ask_at_once: bool,
}

/// Only a turn that waits with every held call decided goes on.
fn check_continuable(t: &TurnView) -> Result<()> {
    if t.state != ViewState::Waiting {
        let now = match t.state {
            ViewState::Running => "is running".to_owned(),
            other => format!("ended {}", other.as_str()),
        };
        return Err(RuntimeError::NotWaiting {
            turn: t.turn.clone(),
            now,
        });
    }
    let undecided = t.undecided_calls();
    if !undecided.is_empty() {
        return Err(RuntimeError::Waiting {
            turn: t.turn.clone(),
            session: t.session.clone(),
            calls: undecided,
        });
    }
    Ok(())
}

fn go_on<'w>(
    ws: &'w Workspace,
    parts: Parts<'_, 'w>,
    mut lock: axocoatl_store::lock::Lock,
    held: Option<conversation::Conversation>,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, conversation::Conversation)> {
    let repo = ws.repo();
    let Parts {
        t,
        agent,
        projection,
        ask_at_once,
    } = parts;
    let state = t
        .pending_approvals()
        .map(|a| a.state.clone())
        .find(|s| !s.is_empty())
        .ok_or_else(|| {
            RuntimeError::Internal(format!("turn {} waits without a saved state", t.turn))
        })?;
    let saved = Saved::load(repo, &state)?;
    let provider = ws.resolve_provider(agent)?;
    let turns: Vec<&TurnView> = projection.session_turns(&t.session).collect();
    let conversation = conversation::current(repo, &t.session, &agent.id, &turns, held)?;
    let inline = conversation::inline_context(repo, t)?;
    let user = crate::attach::user_message(repo, &t.request, &inline, &t.attachments, true)?;
    // From here the turn is this process's: its note no longer says it waits.
    session::set_note(
        repo,
        &mut lock,
        &ActiveNote {
            turn: t.turn.clone(),
            session: t.session.clone(),
            begin: t.begin,
            pid: std::process::id(),
            waiting: None,
        },
    )?;
    let (_, head) = repo.ledger().head()?;
    let begun = Begun {
        turn: t.turn.clone(),
        // `follow` reads the rest of the turn from here on.
        stream: super::stream::Stream::start(repo, &t.turn),
        pos: head,
        start: t.begin,
        at: t.started_at,
    };
    let prepared = Prepared {
        session: t.session.clone(),
        new_session: false,
        agent,
        provider,
        lock,
        conversation,
        conversation_turns: turns
            .iter()
            .filter(|v| v.agent == agent.id && conversation::retained(v))
            .map(|v| v.turn.clone())
            .collect(),
        superseded: turns
            .iter()
            .filter(|v| v.superseded)
            .map(|v| v.turn.clone())
            .collect(),
        user,
        request: t.request.clone(),
        inline: Vec::new(),
        attachments: t.attachments.clone(),
        once: Vec::new(),
        retry_of: t.retry_of.clone(),
        origin: None,
        overrides: t.overrides.clone().unwrap_or_default(),
        multi: None,
        always: super::wait::granted(projection, &t.session),
        ask_at_once,
        // The schema its reply must match, as when it began.
        schema: match &t.schema {
            Some(used) => {
                let (schema, retries) = super::structured::stored(ws, used)?;
                Some(super::TurnSchema { schema, retries })
            }
            None => None,
        },
        // Where its tools worked before it waited.
        workdir: match &t.workdir {
            Some(dir) => std::path::PathBuf::from(dir),
            None => ws.tools_dir()?,
        },
    };
    sink(TurnEvent::Continued {
        turn: t.turn.as_str().into(),
        session: t.session.as_str().into(),
        agent: agent.id.as_str().into(),
    });
    let continued = continued(saved, t);
    finish::run_from(ws, prepared, begun, Some(continued), cancel, sink)
}

/// Where the turn goes on from: its saved state and the decisions made.
fn continued(saved: Saved, t: &TurnView) -> Continued {
    Continued {
        messages: saved.messages.iter().map(Message::from).collect(),
        tally: Tally {
            output: saved.output,
            usage: saved.usage,
            budget_used: saved.budget_used,
            detail: saved.detail,
            handed: saved.handed,
            cost_used: saved.cost_used,
            ..Tally::default()
        },
        resume: Resume {
            pending: saved
                .pending
                .iter()
                .map(|c| ToolCall::from_text(c.id.clone(), c.name.clone(), &c.arguments))
                .collect(),
            steps: saved.steps,
        },
        decided: decisions(t),
    }
}

/// The decisions of the turn's pending held calls, by call id.
fn decisions(t: &TurnView) -> HashMap<String, ApprovalDecided> {
    t.pending_approvals()
        .filter_map(|a| {
            let decision = Decision::named(a.decision.as_deref()?)?;
            Some((
                a.call_id.clone(),
                ApprovalDecided {
                    turn: t.turn.clone(),
                    session: t.session.clone(),
                    call_id: a.call_id.clone(),
                    decision,
                    reason: a.reason.clone(),
                    by: a.by.clone().unwrap_or_default(),
                    pid: 0,
                    at: a.decided_at.unwrap_or_default(),
                },
            ))
        })
        .collect()
}
