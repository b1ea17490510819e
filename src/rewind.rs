//! Rewind: move a single-Agent session's conversation head to just before a turn.
//!
//! A rewind appends a supersession boundary to the ledger (nothing is erased) and then
//! prepares the Agent's checkpoint from the retained transcript. The two are not one atomic
//! write: a marker file under `run/rewind-pending/` is written before the boundary and
//! removed after the checkpoint, and any open that finds a marker repairs the checkpoint
//! from the ledger, which is the authority.

use axocoatl_store::ledger::record::RewindBoundary;
use axocoatl_store::ledger::Record;
use axocoatl_store::run::pending_rewind;
use axocoatl_store::Repo;

use crate::clock;
use crate::config::{AgentRole, Config};
use crate::conversation;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, TurnView, Want};
use crate::session::{self, Wait};

pub const MULTI_AGENT_REASON: &str = "Coordinator and multi-Agent Sessions cannot currently be rewound because child checkpoints cannot be projected safely across that boundary";

#[derive(Clone, Debug, PartialEq)]
pub struct RewindOutcome {
    pub session: String,
    pub agent: String,
    pub target: String,
    /// The turns now superseded (the target and every later turn of the session).
    pub superseded: Vec<String>,
    /// The target's request, to revise and send again.
    pub prefill: String,
    pub checkpoint_written: bool,
}

/// Rewinds the session of turn `prefix` to just before it. `config` (when it loads) says
/// whether the turn's agent is a coordinator and how many checkpoints to keep.
pub fn rewind(
    repo: &Repo,
    config: Option<&Config>,
    prefix: &str,
    session: Option<&str>,
) -> Result<RewindOutcome> {
    // Resolve among every turn (an ambiguous prefix is refused), then read only its session.
    let of_session = Projection::of(repo, Scope::Prefix(prefix), Want::VIEWS)?
        .resolve(prefix)?
        .session
        .clone();
    let projection = Projection::of(repo, Scope::Session(&of_session), Want::VIEWS)?;
    let target = projection.resolve(prefix)?;
    check_target(target, session)?;
    let session = target.session.clone();
    let _lock = session::lock(repo, &session, Wait::No, "rewind")?;
    let turns: Vec<&TurnView> = projection.session_turns(&session).collect();
    check_single_agent(&turns, target, config)?;
    let start = turns
        .iter()
        .position(|t| t.turn == target.turn)
        .unwrap_or(0);
    let superseded: Vec<String> = turns[start..]
        .iter()
        .filter(|t| !t.superseded)
        .map(|t| t.turn.clone())
        .collect();
    let agent = target.agent.clone();
    let pending = pending_rewind::mark(repo, &session, &agent)?;
    let seq = append_boundary(repo, &session, &agent, &target.turn)?;
    crate::checkpoint::drop_conversation_cache(repo, &session, &agent);
    let prefill = target.request.clone();
    let target_id = target.turn.clone();
    // The checkpoint holds the turns before the target: the boundary supersedes the target
    // and every later turn, and the session's lock kept any other turn out since it was
    // read, so the session is not read again (beside 1M turns the second read was a third
    // of a rewind: its records came through the segments' maps, one page fault each).
    let checkpoint_written = write_checkpoint(
        repo,
        &session,
        &agent,
        &turns[..start],
        seq,
        keep_of(config),
    )?;
    drop(turns);
    drop(projection);
    pending.done();
    Ok(RewindOutcome {
        session,
        agent,
        target: target_id,
        superseded,
        prefill,
        checkpoint_written,
    })
}

/// The turn must be in `session` (when given) and still part of the conversation.
fn check_target(target: &TurnView, session: Option<&str>) -> Result<()> {
    if let Some(s) = session.filter(|s| *s != target.session) {
        return Err(RuntimeError::Invalid {
            message: format!(
                "turn {} belongs to session {:?}, not {s:?}",
                target.turn, target.session
            ),
            hint: "leave out --session, or name the turn's own session".into(),
        });
    }
    if target.superseded {
        return Err(RuntimeError::Refused {
            message: format!(
                "turn {} is already superseded by an earlier rewind",
                target.turn
            ),
            hint: crate::error::Next::RewindToACurrentTurn,
        });
    }
    Ok(())
}

/// Only an autonomous single-Agent session can be rewound.
fn check_single_agent(
    turns: &[&TurnView],
    target: &TurnView,
    config: Option<&Config>,
) -> Result<()> {
    let mut agents: Vec<&str> = turns
        .iter()
        .filter(|t| !t.superseded)
        .map(|t| t.agent.as_str())
        .collect();
    agents.sort_unstable();
    agents.dedup();
    let hint = crate::error::Next::say("start a new session for the revised request instead");
    if agents.len() > 1 || target.mode != "single" {
        return Err(RuntimeError::Refused {
            message: format!(
                "session {:?} has turns of {} agents: {MULTI_AGENT_REASON}",
                target.session,
                agents.len()
            ),
            hint: hint.clone(),
        });
    }
    let coordinator = config
        .and_then(|c| c.agent(&target.agent))
        .is_some_and(|a| a.role == AgentRole::Coordinator);
    if coordinator {
        return Err(RuntimeError::Refused {
            message: format!(
                "agent {:?} is a coordinator: {MULTI_AGENT_REASON}",
                target.agent
            ),
            hint,
        });
    }
    Ok(())
}

/// Appends the rewind's boundary (fsync), once the rewind is marked pending. Returns the
/// boundary's sequence number. The marker makes any later open repair the checkpoint should
/// this process die before it does.
fn append_boundary(repo: &Repo, session: &str, agent: &str, target: &str) -> Result<u64> {
    let appended = repo
        .ledger()
        .append(&[Record::RewindBoundary(RewindBoundary {
            session: session.to_owned(),
            agent: agent.to_owned(),
            target: target.to_owned(),
            at: clock::now(),
        })])?;
    // Where a crash test kills the process: the boundary is durable, the checkpoint not.
    axocoatl_store::failpoint::pause("rewind.boundary.appended");
    Ok(appended.last().map(|a| a.seq).unwrap_or(0))
}

/// How many checkpoints to keep: as configured, else the default.
fn keep_of(config: Option<&Config>) -> usize {
    config.map(|c| c.checkpoint.keep).unwrap_or(3)
}

/// Writes the Agent's checkpoint from what the ledger retains.
fn repair(repo: &Repo, session: &str, agent: &str, seq: u64, keep: usize) -> Result<bool> {
    let projection = Projection::of(repo, Scope::Session(session), Want::VIEWS)?;
    let turns: Vec<&TurnView> = projection.session_turns(session).collect();
    write_checkpoint(repo, session, agent, &turns, seq, keep)
}

/// Writes the Agent's checkpoint of the conversation of `turns` (its session's, oldest
/// first) as of ledger sequence `seq`; whether it was written.
fn write_checkpoint(
    repo: &Repo,
    session: &str,
    agent: &str,
    turns: &[&TurnView],
    seq: u64,
    keep: usize,
) -> Result<bool> {
    let conversation = conversation::load(repo, session, agent, turns)?;
    Ok(conversation::write(
        repo,
        session,
        agent,
        &conversation,
        seq,
        keep,
    ))
}

/// Finishes rewinds that were interrupted between the ledger boundary and the checkpoint.
/// `config` is asked for only when there is one to finish.
pub fn repair_pending(repo: &Repo, config: &dyn Fn() -> Option<usize>) -> Result<Vec<String>> {
    let mut repaired = Vec::new();
    for pending in pending_rewind::all(repo) {
        let Ok(_lock) = session::try_lock(repo, &pending.session)? else {
            continue;
        };
        let (seq, _) = repo.ledger().head()?;
        repair(
            repo,
            &pending.session,
            &pending.agent,
            seq,
            config().unwrap_or(3),
        )?;
        repaired.push(format!("{}:{}", pending.session, pending.agent));
        pending.done();
    }
    Ok(repaired)
}
