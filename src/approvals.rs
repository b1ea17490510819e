//! `axocoatl approvals` and `approve`: what waits for a person, and the decisions. A
//! decision is a ledger record appended under the ledger's append lock only while its call
//! is undecided, so of decisions that arrive at once exactly one is recorded and the others
//! are told who answered and when. Continuing the turn is the engine's (a send with
//! `resume`), here or in serve's actor.

use axocoatl_store::ledger::record::{ApprovalDecided, Decision, TurnState};
use axocoatl_store::ledger::Record;

use crate::approval::TurnWait;
use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::history::{ApprovalView, Projection, Scope, TurnView, ViewState, Want};
use crate::workspace::Workspace;

/// A turn that waits for approval, and its held calls.
#[derive(Clone, Debug, PartialEq)]
pub struct WaitingTurn {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub request: String,
    /// When its first pending call was held.
    pub since: i64,
    /// Its held calls that have not run, decided or not.
    pub calls: Vec<ApprovalView>,
}

/// The turns that wait for approval: of `session`, or (`None`) of every session whose turn
/// lock's note names a waiting turn. Oldest first.
pub fn list(ws: &Workspace, session: Option<&str>) -> Result<Vec<WaitingTurn>> {
    let repo = ws.repo();
    let mut out = Vec::new();
    match session {
        Some(s) => {
            let p = Projection::of(repo, Scope::Session(s), Want::TURNS)?;
            out.extend(p.session_turns(s).filter_map(waiting));
        }
        None => {
            for (_, note) in crate::session::notes(repo)? {
                let p = Projection::of(repo, Scope::Prefix(&note.turn), Want::TURNS)?;
                out.extend(p.turn(&note.turn).and_then(waiting));
            }
        }
    }
    out.sort_by(|a, b| (a.since, &a.turn).cmp(&(b.since, &b.turn)));
    Ok(out)
}

/// The turn `prefix` names, if it waits for approval.
pub fn waiting_turn(ws: &Workspace, prefix: &str) -> Result<Option<WaitingTurn>> {
    let p = Projection::of(ws.repo(), Scope::Prefix(prefix), Want::TURNS)?;
    Ok(waiting(p.resolve(prefix)?))
}

fn waiting(t: &TurnView) -> Option<WaitingTurn> {
    if t.state != ViewState::Waiting {
        return None;
    }
    let calls: Vec<ApprovalView> = t.pending_approvals().cloned().collect();
    Some(WaitingTurn {
        turn: t.turn.clone(),
        session: t.session.clone(),
        agent: t.agent.clone(),
        request: t.request.clone(),
        since: calls
            .iter()
            .map(|c| c.requested_at)
            .min()
            .unwrap_or(t.started_at),
        calls,
    })
}

/// What `approve` decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub decision: Decision,
    /// The calls decided now: `(call id, tool)`. Empty: every held call was decided before
    /// (the turn is to be continued).
    pub decided: Vec<(String, String)>,
    /// The held calls still undecided after this: the turn waits for them.
    pub undecided: Vec<(String, String)>,
}

/// Records `decision` (with `reason`, by `by`) on the undecided held calls of the waiting
/// turn `prefix` names, or on its call `call` alone. Exactly one decision is recorded per
/// call: one that arrived first makes this [`RuntimeError::AlreadyDecided`].
pub fn decide(
    ws: &Workspace,
    prefix: &str,
    call: Option<&str>,
    decision: Decision,
    reason: Option<String>,
    by: String,
) -> Result<Decided> {
    let repo = ws.repo();
    let projection = Projection::of(repo, Scope::Prefix(prefix), Want::TURNS)?;
    let t = projection.resolve(prefix)?;
    if t.state != ViewState::Waiting {
        return Err(not_waiting(t));
    }
    let targets: Vec<String> = match call {
        Some(c) => vec![resolve_call(t, c)?],
        None => t
            .pending_approvals()
            .filter(|a| a.decision.is_none())
            .map(|a| a.call_id.clone())
            .collect(),
    };
    let (turn, session) = (t.turn.clone(), t.session.clone());
    axocoatl_store::failpoint::pause("approve.decide");
    let mut undecided = Vec::new();
    let outcome = repo.ledger().append_decided(t.begin, |entries| {
        let wait = TurnWait::of(&turn, entries.flatten());
        if let Some(state) = wait.ended() {
            let last = wait.held().iter().rev().find(|a| a.decision.is_some());
            return Err(Lost::Ended(state, last.cloned().map(Box::new)));
        }
        let mut records = Vec::new();
        for id in &targets {
            let Some(held) = wait.pending().rev().find(|a| a.call_id == *id) else {
                // The turn went on with it: the decision it went on with says who and when.
                let decided = wait.held().iter().rev().find(|a| a.call_id == *id);
                return Err(match decided.filter(|a| a.decision.is_some()) {
                    Some(a) => Lost::Decided(Box::new(a.clone())),
                    None => Lost::Started(id.clone()),
                });
            };
            if held.decision.is_some() {
                return Err(Lost::Decided(Box::new(held.clone())));
            }
            records.push(Record::ApprovalDecided(ApprovalDecided {
                turn: turn.clone(),
                session: session.clone(),
                call_id: id.clone(),
                decision,
                reason: reason.clone(),
                by: by.clone(),
                pid: std::process::id(),
                at: clock::now(),
            }));
        }
        undecided = wait
            .undecided()
            .filter(|a| !targets.contains(&a.call_id))
            .map(call_of)
            .collect();
        Ok(records)
    })?;
    outcome.map_err(|lost| lost.error(&turn))?;
    Ok(Decided {
        decided: targets
            .iter()
            .map(|id| {
                let tool = t
                    .pending_approvals()
                    .find(|a| a.call_id == *id)
                    .map(|a| a.tool.clone())
                    .unwrap_or_default();
                (id.clone(), tool)
            })
            .collect(),
        turn,
        session,
        agent: t.agent.clone(),
        decision,
        undecided,
    })
}

fn call_of(a: &ApprovalView) -> (String, String) {
    (a.call_id.clone(), a.tool.clone())
}

/// Why a decision was not recorded, found under the ledger's lock.
enum Lost {
    /// The turn ended, after its last decision (if one came).
    Ended(TurnState, Option<Box<ApprovalView>>),
    Started(String),
    /// The held call was decided: by whom, how and when.
    Decided(Box<ApprovalView>),
}

impl Lost {
    fn error(self, turn: &str) -> RuntimeError {
        match self {
            Lost::Ended(state, last) => RuntimeError::NotWaiting {
                turn: turn.to_owned(),
                now: format!(
                    "ended {}{}",
                    state.as_str(),
                    last.and_then(|a| decision_words(&a)).unwrap_or_default()
                ),
            },
            Lost::Started(call) => RuntimeError::AlreadyDecided {
                turn: turn.to_owned(),
                call,
                what: "decided, and the turn went on with it".into(),
            },
            Lost::Decided(d) => RuntimeError::AlreadyDecided {
                turn: turn.to_owned(),
                call: d.call_id.clone(),
                what: format!(
                    "{} by {} at {}",
                    decided_as(d.decision.as_deref().unwrap_or_default()),
                    d.by.as_deref().unwrap_or_default(),
                    clock::rfc3339(d.decided_at.unwrap_or_default())
                ),
            },
        }
    }
}

/// A held call of `t` by its id, or a unique prefix of it.
fn resolve_call(t: &TurnView, given: &str) -> Result<String> {
    if let Some(a) = t.pending_approvals().find(|a| a.call_id == given) {
        return Ok(a.call_id.clone());
    }
    let found: Vec<&ApprovalView> = t
        .pending_approvals()
        .filter(|a| a.call_id.starts_with(given))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.call_id.clone()),
        _ => {
            let held: Vec<String> = t
                .pending_approvals()
                .map(|a| format!("{} ({})", a.call_id, a.tool))
                .collect();
            Err(RuntimeError::Invalid {
                message: format!(
                    "turn {} holds no call {given:?}{}",
                    t.turn,
                    if found.is_empty() {
                        String::new()
                    } else {
                        " alone: it starts several".to_owned()
                    }
                ),
                hint: format!("its held calls: {}", held.join(", ")).into(),
            })
        }
    }
}

/// A decision's name as the words of a sentence ("was … by alice").
fn decided_as(decision: &str) -> &str {
    match decision {
        "always" => "approved for the session",
        other => other,
    }
}

/// "; its call call_0 was approved by alice via approve at …": who answered, and when
/// (none while undecided).
fn decision_words(a: &ApprovalView) -> Option<String> {
    Some(format!(
        "; its call {} was {} by {} at {}",
        a.call_id,
        decided_as(a.decision.as_deref()?),
        a.by.as_deref()?,
        clock::rfc3339(a.decided_at?)
    ))
}

fn not_waiting(t: &TurnView) -> RuntimeError {
    let mut now = match t.state {
        ViewState::Running => "is running".to_owned(),
        other => format!("ended {}", other.as_str()),
    };
    // Its last decision, if one came: who answered, and when.
    if let Some(words) = t.approvals.iter().rev().find_map(decision_words) {
        now.push_str(&words);
    }
    RuntimeError::NotWaiting {
        turn: t.turn.clone(),
        now,
    }
}
