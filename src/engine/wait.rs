//! A turn that waits for a person. The run-tools step asks the agent's [`Gate`] about each
//! call before it runs: free calls run, calls decided earlier run or are answered with
//! their denial, and a call its `approvals:` holds pauses the turn: [`pause`] saves what
//! the turn goes on from (an object) and records a request per held call (one durable
//! append), then [`super::held::hold`] marks the session lock's note and tells `on_approval_request:`.
//! The process ends the turn's part there; `approve` decides and `super::resume` goes on.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{ApprovalDecided, ApprovalRequested, Decision, Millis};
use axocoatl_store::ledger::Record;

use super::converse::{Conversant, Tally, TurnCx, TurnError};
use crate::approval::{Policy, Saved, SAVED_VERSION};
use crate::checkpoint::{CkMessage, CkToolCall};
use crate::clock;
use crate::config::{AgentConfig, ApprovalTimeout};
use crate::error::RuntimeError;
use crate::history::Projection;
use crate::provider::{Message, ToolCall};
use crate::turn::TurnEvent;

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// What an agent's calls must pass before they run.
#[derive(Debug)]
pub struct Gate {
    policy: Policy,
    timeout: Option<ApprovalTimeout>,
    /// `(tool, rule)` this session approved for good, and in which turn.
    always: Vec<(String, String, String)>,
    /// The decisions of the held calls a continued turn goes on with, by call id.
    decided: HashMap<String, ApprovalDecided>,
}

/// What becomes of one call.
#[derive(Debug)]
pub enum Verdict {
    /// It runs.
    Run,
    /// It runs, with these records (an `always` approval) written with its start.
    RunRecorded(Vec<Record>),
    /// It is answered with this text, without running (a denial).
    Deny(String),
    /// It waits for a person: the turn pauses before it.
    Hold,
}

/// Why a turn paused: the requests it recorded.
#[derive(Debug)]
pub struct Paused {
    pub requests: Vec<ApprovalRequested>,
}

/// Where a continued turn goes on from.
#[derive(Debug)]
pub struct Resume {
    /// The held round's calls that have not run, in order.
    pub pending: Vec<ToolCall>,
    /// Model calls made before the pause.
    pub steps: u32,
}

/// The tools and rules that turns of `session` approved for good (`always`), with the turn
/// that did, from its projection. A rewound turn's answers no longer count.
pub(crate) fn granted(projection: &Projection, session: &str) -> Vec<(String, String, String)> {
    projection
        .session_turns(session)
        .filter(|t| !t.superseded)
        .flat_map(|t| {
            t.approvals
                .iter()
                .filter(|a| a.decision.as_deref() == Some(Decision::ApprovedAlways.as_str()))
                .map(|a| (a.tool.clone(), a.rule.clone(), t.turn.clone()))
        })
        .collect()
}

impl Gate {
    /// `agent`'s gate, with the session's `always` answers and the decisions a continued
    /// turn goes on with; `None` when none of its calls can wait and none was decided.
    pub(crate) fn of(
        agent: &AgentConfig,
        always: &[(String, String, String)],
        decided: HashMap<String, ApprovalDecided>,
    ) -> Option<Gate> {
        let policy = Policy::of(&agent.approvals);
        (policy.asks() || !decided.is_empty()).then(|| Gate {
            policy,
            timeout: agent.approval_timeout,
            always: always.to_vec(),
            decided,
        })
    }

    /// The verdict on `call` of `conv`.
    pub(super) fn admit(
        &self,
        conv: &Conversant<'_>,
        call: &ToolCall,
        cx: &TurnCx<'_>,
        sink: &mut Sink<'_>,
    ) -> std::result::Result<Verdict, TurnError> {
        // A decision stands even when the configuration no longer holds the call.
        if let Some(d) = self.decided.get(&call.id) {
            decided_event(cx, call, d, sink);
            if d.decision.runs() {
                return Ok(Verdict::Run);
            }
            let reason = d
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            return Ok(Verdict::Deny(format!(
                "not run: a person denied this call ({}){reason}",
                d.by
            )));
        }
        let Some(rule) = self.rule(conv, call) else {
            return Ok(Verdict::Run);
        };
        let Some((_, _, turn)) = self
            .always
            .iter()
            .find(|(tool, r, _)| *tool == call.name && *r == rule)
        else {
            return Ok(Verdict::Hold);
        };
        // Approved for the session: recorded as a request and its decision, with the call's
        // start (nothing waits on them).
        let now = clock::now();
        let decision = ApprovalDecided {
            turn: cx.turn.to_owned(),
            session: cx.session.to_owned(),
            call_id: call.id.clone(),
            decision: Decision::Approved,
            reason: Some(format!("`always` answered in turn {turn}")),
            by: "the session's `always`".into(),
            pid: std::process::id(),
            at: now,
        };
        decided_event(cx, call, &decision, sink);
        let request = self.request(conv, call, rule, String::new(), cx, now)?;
        Ok(Verdict::RunRecorded(vec![
            Record::ApprovalRequested(request),
            Record::ApprovalDecided(decision),
        ]))
    }

    /// The rule that holds `call`, if one does.
    fn rule(&self, conv: &Conversant<'_>, call: &ToolCall) -> Option<String> {
        let root = &conv.root;
        let resolve = |path: &str| root.resolve(path).ok().map(|p| root.display(&p));
        self.policy.rule_for(&call.name, &call.arguments, &resolve)
    }

    fn request(
        &self,
        conv: &Conversant<'_>,
        call: &ToolCall,
        rule: String,
        state: String,
        cx: &TurnCx<'_>,
        now: Millis,
    ) -> std::result::Result<ApprovalRequested, TurnError> {
        Ok(ApprovalRequested {
            turn: cx.turn.to_owned(),
            session: cx.session.to_owned(),
            agent: conv.agent.id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: cx.recorder().bound(&call.arguments.to_string())?,
            rule,
            state,
            expires_at: self
                .timeout
                .map(|t| now.saturating_add((t.secs as i64).saturating_mul(1000))),
            pid: std::process::id(),
            at: now,
        })
    }
}

fn decided_event(cx: &TurnCx<'_>, call: &ToolCall, d: &ApprovalDecided, sink: &mut Sink<'_>) {
    sink(TurnEvent::ApprovalDecided {
        turn: cx.turn.into(),
        call_id: call.id.as_str().into(),
        name: call.name.as_str().into(),
        decision: d.decision.as_str().into(),
        reason: d.reason.as_deref().map(Into::into),
        by: d.by.as_str().into(),
    });
}

/// Pauses the turn before `pending` (the calls of the round that have not run, the first
/// one held): saves what the turn goes on from, then records a request for each held call
/// in one durable append. Returns the error that carries the pause up to the turn's end.
pub(super) fn pause(
    conv: &Conversant<'_>,
    pending: &[ToolCall],
    transcript: &[Message],
    tally: &Tally,
    steps: u32,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> TurnError {
    match record_pause(conv, pending, transcript, tally, steps, cx, sink) {
        Ok(paused) => TurnError::Waiting(paused),
        Err(e) => e,
    }
}

fn record_pause(
    conv: &Conversant<'_>,
    pending: &[ToolCall],
    transcript: &[Message],
    tally: &Tally,
    steps: u32,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<Paused, TurnError> {
    let gate = conv.approvals.as_ref().ok_or_else(|| {
        RuntimeError::Internal("a call was held by an agent without approvals".into())
    })?;
    // This turn's messages after its user message (which the ledger's begin rebuilds).
    let own = transcript.get(cx.earlier.messages + 1..).unwrap_or(&[]);
    let saved = Saved {
        version: SAVED_VERSION,
        messages: own.iter().map(CkMessage::from).collect(),
        pending: pending
            .iter()
            .map(|c| CkToolCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.to_string(),
            })
            .collect(),
        output: tally.output.clone(),
        usage: tally.usage,
        budget_used: tally.budget_used,
        steps,
        detail: tally.detail,
        handed: tally.handed,
        cost_used: tally.cost_used,
    };
    let state = saved.store(cx.repo)?;
    let now = clock::now();
    let mut requests = Vec::new();
    for call in pending {
        let held = gate.rule(conv, call).filter(|rule| {
            !gate.decided.contains_key(&call.id)
                && !gate
                    .always
                    .iter()
                    .any(|(tool, r, _)| *tool == call.name && r == rule)
        });
        if let Some(rule) = held {
            requests.push(gate.request(conv, call, rule, state.clone(), cx, now)?);
        }
    }
    let records: Vec<Record> = requests
        .iter()
        .cloned()
        .map(Record::ApprovalRequested)
        .collect();
    cx.repo
        .ledger()
        .append(&records)
        .map_err(RuntimeError::from)?;
    for r in &requests {
        sink(TurnEvent::ApprovalRequested {
            turn: cx.turn.into(),
            call_id: r.call_id.as_str().into(),
            name: r.tool.as_str().into(),
            arguments: crate::tools::for_model(&r.arguments.inline).into(),
            rule: r.rule.as_str().into(),
            expires_at: r.expires_at.map(|e| clock::rfc3339(e).into()),
        });
    }
    Ok(Paused { requests })
}
