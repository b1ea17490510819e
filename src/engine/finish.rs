//! Step 4, finish: exactly one terminal record, then the caches and observers.
//! [`run`] drives a begun turn through converse to here.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{
    AgentOutput, AgentOutputBounded, ApprovalDecided, TurnEnded, TurnState, UsageCost,
};
use axocoatl_store::ledger::Record;

use super::begin::Begun;
use super::converse::{self, Conversant, InFlight, Tally, TurnCx, TurnError};
use super::coordinate;
use super::prepare::Prepared;
use super::record::Recorder;
use super::wait::{Gate, Resume};
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
    p: Prepared<'_>,
    begun: Begun,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, Conversation)> {
    run_from(ws, p, begun, None, cancel, sink)
}

/// How far a turn that waited for approval had come, to go on from there.
pub(crate) struct Continued {
    /// Its messages after its user message.
    pub messages: Vec<provider::Message>,
    pub tally: Tally,
    pub resume: Resume,
    /// The decisions its held calls go on with, by call id.
    pub decided: HashMap<String, ApprovalDecided>,
}

/// [`run`], or (`from`) the rest of a turn that waited for approval. A turn whose calls
/// wait again pauses instead of finishing ([`super::held::hold`]).
pub(crate) fn run_from(
    ws: &Workspace,
    mut p: Prepared<'_>,
    mut begun: Begun,
    from: Option<Continued>,
    cancel: &Cancel,
    caller: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, Conversation)> {
    let repo = ws.repo();
    // Every event goes to the turn's stream file too, for `axocoatl follow`.
    let mut stream = std::mem::take(&mut begun.stream);
    let mut tee = |ev: TurnEvent<'_>| {
        stream.event(&ev);
        caller(ev)
    };
    let sink: &mut dyn FnMut(TurnEvent<'_>) = &mut tee;
    let config = ws.config()?;
    let stop = watcher::stop_requested(ws, &begun.turn, begun.pos);
    let cancel = cancel.with_probe(watcher::POLL, stop);
    let place = workplace(ws, config, &p.workdir);
    let mut transcript = p.conversation.messages.clone();
    transcript.push(std::mem::replace(
        &mut p.user,
        provider::Message::new(provider::Role::User, ""),
    ));
    let mut tally = Tally::default();
    let mut resume = None;
    let mut decided = HashMap::new();
    if let Some(c) = from {
        transcript.extend(c.messages);
        tally = c.tally;
        resume = Some(c.resume);
        decided = c.decided;
    }
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
            kept: ws.kept_providers(),
        };
        if p.multi.is_some() {
            let (given, end) = super::multi::run(&pass, &mut transcript, &mut tally, &cx, sink);
            answers = given;
            end
        } else {
            coordinate::run(&pass, &mut transcript, &mut tally, &cx, sink)
        }
    } else {
        let single = Single {
            ws,
            config,
            place: &place,
            resume,
            decided,
        };
        single.converse(&p, &mut conv, &mut transcript, &mut tally, &cx, sink)
    };
    match end {
        Err(TurnError::Waiting(paused)) => {
            let waiting = super::held::hold(ws, p, &begun, paused, sink);
            // The process ends here; the ledger says the turn waits, and whoever continues
            // it writes its stream from then on.
            let _ = stream.end();
            Err(waiting)
        }
        end => {
            begun.stream = stream;
            finish(ws, p, begun, conv, transcript, tally, answers, end)
        }
    }
}

/// An autonomous agent's converse, from the start or from where it waited.
struct Single<'a> {
    ws: &'a Workspace,
    config: &'a Config,
    place: &'a Workplace,
    resume: Option<Resume>,
    decided: HashMap<String, ApprovalDecided>,
}

impl Single<'_> {
    fn converse<'w>(
        self,
        p: &Prepared<'w>,
        conv: &mut Option<Conversant<'w>>,
        transcript: &mut Vec<provider::Message>,
        tally: &mut Tally,
        cx: &TurnCx<'_>,
        sink: &mut dyn FnMut(TurnEvent<'_>),
    ) -> std::result::Result<(), TurnError> {
        let in_flight = (self.config.checkpoint.policy == CheckpointPolicy::AfterEachResponse)
            .then_some(InFlight {
                keep: self.config.checkpoint.keep,
                usage_before: p.conversation.usage,
            });
        let mut model = self
            .ws
            .open_provider(&p.provider)
            .map_err(TurnError::Provider)?;
        let repo = self.ws.repo();
        let c = Conversant::for_agent(repo, p.agent, &p.session, &p.provider.model, self.place)?
            .priced(self.config, &p.provider);
        let c = conv.insert(Conversant {
            in_flight,
            mcp: Some(server_set(self.ws, self.config)),
            approvals: Gate::of(p.agent, &p.always, self.decided),
            resume: self.resume,
            ..c
        });
        match &p.schema {
            Some(ts) => {
                super::structured::converse(c, model.as_mut(), transcript, tally, cx, sink, ts)
            }
            None => converse::converse(c, model.as_mut(), transcript, tally, cx, sink),
        }
    }
}

/// Where the turn's tools work: `dir` (see [`Workspace::tools_dir`]), with the
/// configuration file, the files it makes axocoatl run and the models axocoatl reads
/// (wherever their paths come from) kept out of their reach.
fn workplace(ws: &Workspace, config: &Config, dir: &std::path::Path) -> Workplace {
    let mut trusted = crate::config::trusted_files(config, &ws.config_dir());
    let env = |k: &str| std::env::var(k).ok();
    let embed_dir = crate::memory::embed::ModelFiles::locate(&env)
        .and_then(|f| f.model.parent().map(std::path::Path::to_path_buf));
    let (models, trusted_dirs) = crate::config::model_places(&env, embed_dir.as_deref());
    trusted.extend(models);
    Workplace {
        dir: dir.to_path_buf(),
        config: ws.config_path().to_path_buf(),
        trusted,
        trusted_dirs,
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
        // `run_from` holds a paused turn instead of finishing it.
        Err(TurnError::Waiting(_)) => (
            TurnState::Failed,
            Some("internal error: a paused turn was finished".into()),
        ),
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
    mut begun: Begun,
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
    if let Some(message) = begun.stream.take_failure() {
        records.push(rec.warning("stream", message));
    }
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
    // The terminal record is durable: a follower reads the end from the ledger now.
    if let Some(message) = std::mem::take(&mut begun.stream).end() {
        rec.note("stream", message)?;
    }
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
