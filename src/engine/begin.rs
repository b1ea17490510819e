//! Step 2, begin: the turn becomes durable. From here on it ends with exactly one terminal
//! record, written by this process or, if it dies, by whichever process finds the orphan.

use axocoatl_store::ledger::record::{self, Millis, SessionCreated, TurnBegun};
use axocoatl_store::ledger::{Position, Record};

use super::prepare::Prepared;
use crate::attach;
use crate::clock;
use crate::error::Result;
use crate::ids;
use crate::session::ActiveNote;
use crate::team::lattice;
use crate::turn::TurnEvent;
use crate::workspace::Workspace;

/// A turn whose begin record is durable.
pub(crate) struct Begun {
    pub turn: String,
    /// Just after the begin record: where to look for a stop request.
    pub pos: Position,
    /// At or before the begin record: where the turn's records start (its trace reads them).
    pub start: Position,
    /// The time its begin record carries (usage by day counts the turn on that day).
    pub at: Millis,
}

/// Notes the turn in its session lock (so an orphan can be found), appends `TurnBegun`
/// (with `SessionCreated` for a new session and `TurnOrigin` for an automation's turn) with
/// one fsync, consumes the once-scoped attachments, and reports [`TurnEvent::Begun`].
pub(crate) fn begin(
    ws: &Workspace,
    p: &mut Prepared<'_>,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<Begun> {
    let repo = ws.repo();
    let turn = ids::new_id();
    let now = clock::now();
    let (_, head) = repo.ledger().head()?;
    crate::session::set_note(
        repo,
        &mut p.lock,
        &ActiveNote {
            turn: turn.clone(),
            session: p.session.clone(),
            begin: head,
            pid: std::process::id(),
        },
    )?;
    let records = begin_records(p, &turn, now);
    let appended = repo.ledger().append(&records)?;
    let pos = appended.last().map(|a| a.next).unwrap_or(head);
    attach::consume(repo, &p.session, &turn, &p.once)?;
    sink(TurnEvent::Begun {
        turn: turn.as_str().into(),
        session: p.session.as_str().into(),
        agent: p.agent.id.as_str().into(),
        agent_name: p.agent.name.as_deref().map(Into::into),
        attachments: p.attachments.as_slice().into(),
    });
    Ok(Begun {
        turn,
        pos,
        start: head,
        at: now,
    })
}

/// The records that begin `turn`: the session (when new), the turn, what started it (an
/// automation), and who answers a multi-agent turn and why.
fn begin_records(p: &mut Prepared<'_>, turn: &str, now: Millis) -> Vec<Record> {
    let mut records = Vec::with_capacity(2);
    if p.new_session {
        records.push(Record::SessionCreated(SessionCreated {
            session: p.session.clone(),
            at: now,
        }));
    }
    records.push(Record::TurnBegun(TurnBegun {
        turn: turn.to_owned(),
        session: p.session.clone(),
        agent: p.agent.id.clone(),
        mode: if p.multi.is_some() { "multi" } else { "single" }.into(),
        request: p.request.clone(),
        inline_context: std::mem::take(&mut p.inline),
        attachments: p.attachments.clone(),
        retry_of: p.retry_of.clone(),
        pid: std::process::id(),
        at: now,
    }));
    if let Some(origin) = &p.origin {
        records.push(Record::TurnOrigin(record::TurnOrigin {
            turn: turn.to_owned(),
            session: p.session.clone(),
            automation: origin.automation.clone(),
            occurrence: origin.occurrence,
            trigger: origin.trigger.clone(),
            runner: origin.runner.clone(),
            pid: std::process::id(),
            at: now,
        }));
    }
    if !p.overrides.is_empty() {
        records.push(Record::TurnOverrides(record::TurnOverrides {
            turn: turn.to_owned(),
            session: p.session.clone(),
            model: p.overrides.model.clone(),
            system: p.overrides.system.clone(),
            options: p.overrides.options.clone(),
            at: now,
        }));
    }
    if let Some(multi) = &p.multi {
        records.push(Record::ActivationDecided(record::ActivationDecided {
            turn: turn.to_owned(),
            session: p.session.clone(),
            agents: multi
                .decisions
                .iter()
                .map(|d| record::AgentActivation {
                    agent: d.agent.clone(),
                    decayed: lattice::to_milli(d.decayed),
                    relevance: lattice::to_milli(d.relevance),
                    mentioned: d.mentioned,
                    activation: lattice::to_milli(d.activation),
                    threshold: lattice::to_milli(d.threshold),
                    answered: d.order.is_some(),
                    reason: d.reason.clone(),
                })
                .collect(),
            at: now,
        }));
    }
    records
}
