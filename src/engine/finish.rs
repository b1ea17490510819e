//! Step 4, finish: exactly one terminal record, then the caches and observers.
//! [`run`] drives a begun turn through converse to here.

use axocoatl_store::ledger::record::{
    AgentOutput, AgentOutputBounded, TurnEnded, TurnState, UsageCost,
};
use axocoatl_store::ledger::Record;

use super::begin::Begun;
use super::converse::{self, Conversant, InFlight, Tally, TurnCx, TurnError};
use super::coordinate;
use super::prepare::Prepared;
use super::record::Recorder;
use super::watcher;
use crate::clock;
use crate::config::{AgentRole, CheckpointPolicy, Config};
use crate::conversation::Conversation;
use crate::error::Result;
use crate::provider::{self, Cancel, ProviderError};
use crate::tools::Workplace;
use crate::turn::{TurnEvent, TurnOutcome, TurnSummary};
use crate::workspace::Workspace;

/// Output longer than this is recorded as [`AgentOutputBounded`]: inline up to
/// `INLINE_LIMIT`, whole in an object. Shorter output stays in one `AgentOutput` record,
/// where search sees all of it.
pub const OUTPUT_RECORD_LIMIT: usize = 8 << 20;

/// Converses as the prepared agent and finishes the turn, whatever happened.
pub(crate) fn run(
    ws: &Workspace,
    mut p: Prepared<'_>,
    begun: Begun,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, Conversation)> {
    let repo = ws.repo();
    let config = ws.config()?;
    let stop = watcher::stop_requested(ws, &begun.turn, begun.pos);
    let cancel = cancel.with_probe(watcher::POLL, stop);
    let place = workplace(ws, config);
    let in_flight =
        (config.checkpoint.policy == CheckpointPolicy::AfterEachResponse).then_some(InFlight {
            keep: config.checkpoint.keep,
            usage_before: p.conversation.usage,
        });
    let mut transcript = p.conversation.messages.clone();
    transcript.push(std::mem::replace(
        &mut p.user,
        provider::Message::new(provider::Role::User, ""),
    ));
    let mut tally = Tally::default();
    let secret_env = config.key_env_names();
    let cx = TurnCx {
        repo,
        turn: &begun.turn,
        session: &p.session,
        request: &p.request,
        cancel: &cancel,
        earlier: converse::Earlier {
            turns: &p.conversation_turns,
            messages: p.conversation.messages.len(),
            superseded: &p.superseded,
        },
        secret_env: &secret_env,
    };
    let mut conv = None;
    let mut answers = Vec::new();
    let end = if p.multi.is_some() || p.agent.role == AgentRole::Coordinator {
        let config_dir = ws.config_dir();
        let pass = coordinate::Pass {
            config,
            p: &p,
            dir: &place,
            config_dir: &config_dir,
        };
        if p.multi.is_some() {
            let (given, end) = super::multi::run(&pass, &mut transcript, &mut tally, &cx, sink);
            answers = given;
            end
        } else {
            coordinate::run(&pass, &mut transcript, &mut tally, &cx, sink)
        }
    } else {
        provider::open(&p.provider)
            .map_err(TurnError::Provider)
            .and_then(|mut model| {
                let model_name = &p.provider.model;
                let c = Conversant::for_agent(repo, p.agent, &p.session, model_name, &place)?
                    .priced(config, &p.provider);
                let c = conv.insert(Conversant {
                    in_flight,
                    mcp: Some(server_set(ws, config)),
                    ..c
                });
                converse::converse(c, model.as_mut(), &mut transcript, &mut tally, &cx, sink)
            })
    };
    finish(ws, p, &begun, conv, transcript, tally, answers, end)
}

/// Where the turn's tools work: the configured workspace (default: the configuration
/// file's directory), with the configuration file and the files it makes axocoatl run kept
/// out of their reach.
fn workplace(ws: &Workspace, config: &Config) -> Workplace {
    Workplace {
        dir: match &config.workspace {
            Some(d) => ws.config_dir().join(d),
            None => ws.config_dir(),
        },
        config: ws.config_path().to_path_buf(),
        trusted: crate::config::trusted_files(config, &ws.config_dir()),
    }
}

/// The MCP servers an agent's turn may start (or the actor's, which outlive the turn).
fn server_set(ws: &Workspace, config: &Config) -> crate::mcp::ServerSet {
    crate::mcp::ServerSet {
        configs: config.mcp_servers.clone(),
        dir: ws.config_dir(),
        hub: ws.kept_mcp(),
    }
}

/// The terminal state a converse's end gives the turn.
fn terminal(end: Result<(), TurnError>) -> (TurnState, Option<String>) {
    match end {
        Ok(()) => (TurnState::Completed, None),
        Err(TurnError::Provider(ProviderError::Cancelled)) => (TurnState::Stopped, None),
        Err(TurnError::Provider(e)) => (TurnState::Failed, Some(e.to_string())),
        Err(TurnError::Budget(msg)) | Err(TurnError::Subtask(msg)) => {
            (TurnState::Failed, Some(msg))
        }
        Err(TurnError::Runtime(e)) => (TurnState::Failed, Some(e.to_string())),
    }
}

/// Appends the output and the terminal record (one fsync), writes the checkpoint, tells
/// the observers and clears the lock note.
#[expect(
    clippy::too_many_arguments,
    reason = "the turn's whole end: what was prepared and begun, who conversed, what they said and how it ended"
)]
pub(super) fn finish(
    ws: &Workspace,
    mut p: Prepared<'_>,
    begun: &Begun,
    conv: Option<Conversant<'_>>,
    transcript: Vec<crate::provider::Message>,
    tally: Tally,
    answers: Vec<(String, String)>,
    end: Result<(), TurnError>,
) -> Result<(TurnOutcome, Conversation)> {
    let repo = ws.repo();
    let rec = Recorder {
        repo,
        turn: &begun.turn,
        session: &p.session,
    };
    let (state, error) = terminal(end);
    // A multi-agent turn records each agent's answer; others the agent's output.
    let mut records = if p.multi.is_some() {
        answers
            .iter()
            .map(|(agent, text)| output_record(&rec, agent, text))
            .collect::<Result<Vec<_>>>()?
    } else {
        vec![output_record(&rec, &p.agent.id, &tally.output)?]
    };
    records.push(Record::TurnEnded(TurnEnded {
        turn: begun.turn.clone(),
        session: p.session.clone(),
        state,
        error: error.clone(),
        usage: tally.usage,
        at: clock::now(),
    }));
    // Its calls' cache tokens and cost, in the same append (its workers' went with their
    // subtasks' ends); a turn that made no call has none to record.
    if tally.detail.calls > 0 {
        records.push(Record::UsageCost(UsageCost {
            turn: begun.turn.clone(),
            session: p.session.clone(),
            agent: p.agent.id.clone(),
            subtask: None,
            counted_at: begun.at,
            detail: tally.detail,
            at: clock::now(),
        }));
    }
    let ended = repo.ledger().append(&records)?;
    let seq = ended.last().map(|a| a.seq).unwrap_or(0);
    if p.agent.role == AgentRole::Coordinator {
        // Any terminal state clears the private orchestration state: the next turn
        // decomposes fresh.
        if let Err(e) = crate::orchestration::clear(repo, &p.session, &p.agent.id) {
            rec.note("orchestration", e.to_string())?;
        }
    }
    let after =
        p.conversation
            .after_turn(&begun.turn, state, transcript, &tally.output, &tally.usage);
    let config = ws.config()?;
    // A multi-agent session's conversation is rebuilt from the ledger: no one agent's cache.
    if config.checkpoint.policy != CheckpointPolicy::Never && p.multi.is_none() {
        // The final snapshot matches what a rebuild from the ledger would retain.
        let snap = after.snapshot(seq);
        let keep = config.checkpoint.keep;
        if let Err(e) = crate::checkpoint::write(repo, &p.session, &p.agent.id, &snap, keep) {
            rec.note("checkpoint", e.to_string())?;
        }
    }
    let outcome = TurnOutcome {
        turn: begun.turn.clone(),
        session: p.session.clone(),
        agent: p.agent.id.clone(),
        agent_name: p.agent.name.clone(),
        state,
        output: tally.output,
        error,
        usage: tally.usage,
    };
    if let Some(mut conv) = conv {
        observe_turn(&mut conv, &rec, &p.request, &outcome)?;
    }
    crate::session::clear_note(repo, &mut p.lock)?;
    crate::telemetry::turn_ended(config, repo, begun.start, &outcome.turn);
    Ok((outcome, after))
}

/// The record of the turn's output: whole in one record, or bounded when it is too long
/// for one (a runaway reply).
fn output_record(rec: &Recorder<'_>, agent: &str, text: &str) -> Result<Record> {
    let at = clock::now();
    if text.len() <= OUTPUT_RECORD_LIMIT {
        return Ok(Record::AgentOutput(AgentOutput {
            turn: rec.turn.to_owned(),
            agent: agent.to_owned(),
            text: text.to_owned(),
            at,
        }));
    }
    Ok(Record::AgentOutputBounded(AgentOutputBounded {
        turn: rec.turn.to_owned(),
        agent: agent.to_owned(),
        text: rec.bound(text)?,
        at,
    }))
}

/// Tells the observers the turn ended. Their failures are warnings, recorded durably (the
/// turn's own records are already flushed).
pub(super) fn observe_turn(
    conv: &mut Conversant<'_>,
    rec: &Recorder<'_>,
    request: &str,
    outcome: &TurnOutcome,
) -> Result<()> {
    let summary = TurnSummary {
        turn: rec.turn,
        scope: &conv.memory.id,
        request,
        outcome,
    };
    let mut failures = Vec::new();
    for observer in conv.observers.iter_mut() {
        if let Err(e) = observer.after_turn(&summary) {
            failures.push(e.to_string());
        }
    }
    let records: Vec<Record> = failures
        .into_iter()
        .map(|message| rec.warning("memory", message))
        .collect();
    if !records.is_empty() {
        rec.repo.ledger().append(&records)?;
    }
    Ok(())
}
