//! Step 3 for a coordinator: its workflow. Decompose (HTN methods of `crate::team::plan`,
//! tried in order) → run the subtasks in dependency order, independent ones in parallel up
//! to the workflow's `max_parallel`, each as a worker converse with its own provider,
//! model, sampling, budget, tools and memory scope → aggregate (the coordinator answers from
//! the results). Runs inside the one begin/finish of the turn.
//!
//! Records (between `TurnBegun` and `TurnEnded`): `PlanMade` (the method and subtasks),
//! `SubtaskStarted` and `SubtaskEnded` (state, the worker's whole output, its usage; then a
//! `UsageCost` with its calls' cache tokens and cost) for each subtask, and the `ModelCallCost`s and tool records of every agent under its own id.
//! The private orchestration state (`crate::orchestration`) follows the pass and is
//! cleared by the turn's terminal state.
//!
//! The coordinator's own calls (plan and aggregate) advertise no Tier 2-4 memory tools and
//! inject no core memory: a coordinator keeps only its conversation. Declared workers own
//! their tiers under `{session}:{coordinator}:worker:{worker}`; ad-hoc workers run with
//! the coordinator's provider, no memory tools and no memory section, so they leave nothing
//! durable but their records.

use std::path::Path;
use std::sync::mpsc;

use axocoatl_store::ledger::record::{
    PlanMade, PlannedSubtask, SubtaskEnded, SubtaskStarted, TurnState, UsageCost,
};
use axocoatl_store::ledger::Record;

use super::converse::{self, Conversant, Tally, TurnCx, TurnError};
use super::prepare::Prepared;
use super::watcher;
use crate::clock;
use crate::config::{AgentConfig, AgentRole, Config, ResolvedProvider, ResponseFormat};
use crate::error::{Result, RuntimeError};
use crate::memory::worker_id;
use crate::orchestration::{self, SubtaskState};
use crate::provider::{self, Message, Provider, ProviderError, Role};
use crate::team::plan::{self, Method, Progress, Step, Subtask};
use crate::tools::{Toolbox, Workplace};
use crate::turn::{ContextSection, ContextSource, RequestInfo, Running, TurnEvent};

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// Fixed text as a section of the system prompt (the planning instructions).
struct Fixed(&'static str, String);

impl ContextSource for Fixed {
    fn section(&mut self, _request: &RequestInfo<'_>) -> Result<Option<ContextSection>> {
        Ok(Some(ContextSection {
            label: self.0.to_owned(),
            text: self.1.clone(),
            warnings: Vec::new(),
        }))
    }
}

/// What every part of one pass reads.
pub(crate) struct Pass<'a> {
    pub config: &'a Config,
    pub p: &'a Prepared<'a>,
    /// The workspace the agents' tools see.
    pub dir: &'a Workplace,
    /// The directory of the configuration file (relative provider paths).
    pub config_dir: &'a Path,
}

/// Runs the coordinator's workflow. Appends the coordinator's answer to `transcript` and
/// every agent's usage to `tally`; the aggregated answer streams as the turn's output.
pub(crate) fn run(
    pass: &Pass<'_>,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<(), TurnError> {
    let p = pass.p;
    let (flow, workers) = plan::workflow_of(pass.config, &p.agent.id).ok_or_else(|| {
        TurnError::Runtime(RuntimeError::AgentRole {
            id: p.agent.id.clone(),
            reason: "no workflow names it as its entry_point".into(),
        })
    })?;
    let mut model = provider::open(&p.provider).map_err(TurnError::Provider)?;
    let (subtasks, method, rejected) =
        decompose(pass, &workers, model.as_mut(), transcript, tally, cx, sink)?;
    let recorded: Vec<PlannedSubtask> = subtasks.iter().map(planned).collect();
    cx.recorder().lazy(&[Record::PlanMade(PlanMade {
        turn: cx.turn.to_owned(),
        coordinator: p.agent.id.clone(),
        method: method.as_str().to_owned(),
        subtasks: recorded.clone(),
        rejected,
        at: clock::now(),
    })])?;
    sink(TurnEvent::Planned {
        turn: cx.turn.into(),
        method: method.as_str().into(),
        subtasks: recorded.as_slice().into(),
    });
    let mut progress = Progress::new(subtasks);
    let results = run_subtasks(
        pass,
        method,
        flow.max_parallel(),
        &mut progress,
        tally,
        cx,
        sink,
    )?;
    aggregate(pass, &results, model.as_mut(), transcript, tally, cx, sink)
}

fn planned(s: &Subtask) -> PlannedSubtask {
    PlannedSubtask {
        id: s.id.clone(),
        worker: s.worker.clone(),
        role: s.role.clone(),
        task: s.task.clone(),
        depends_on: s.depends_on.clone(),
    }
}

/// The coordinator as a conversant: its provider, model and sampling, no memory section and
/// no memory tools.
fn coordinator<'a>(
    pass: &Pass<'a>,
    cx: &TurnCx<'_>,
) -> std::result::Result<Conversant<'a>, TurnError> {
    let p = pass.p;
    let mut c = Conversant::for_agent(cx.repo, p.agent, &p.session, &p.provider.model, pass.dir)?
        .priced(pass.config, &p.provider);
    // No core memory, no recall, no daily log or semantic writes: Tier 1 only.
    c.context.clear();
    c.observers.clear();
    c.toolbox = c.toolbox.without_memory();
    Ok(c)
}

/// HTN decomposition: the model's plan (with one repair round), else the fallback method.
/// Returns the plan (in dependency order), its method and why proposals were rejected.
fn decompose(
    pass: &Pass<'_>,
    workers: &[&AgentConfig],
    model: &mut dyn Provider,
    transcript: &[Message],
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<(Vec<Subtask>, Method, Vec<String>), TurnError> {
    let names: Vec<&str> = workers.iter().map(|w| w.id.as_str()).collect();
    let mut conv = coordinator(pass, cx)?;
    conv.toolbox = Toolbox::empty(conv.toolbox.sandbox());
    conv.context = vec![Box::new(Fixed("plan", plan::instructions(workers)))];
    conv.sampling.response_format = Some(ResponseFormat::Json);
    conv.max_steps = 1;
    let mut messages = transcript.to_vec();
    let mut rejected = Vec::new();
    for method in [Method::Model, Method::ModelRepaired] {
        let reply = propose(&mut conv, model, &mut messages, tally, cx, sink)?;
        match plan::parse(&reply, &names) {
            Ok(subtasks) => return Ok((plan::order(subtasks), method, rejected)),
            Err(errors) => {
                rejected.push(errors.join("; "));
                messages.push(Message::new(Role::User, plan::repair_request(&errors)));
            }
        }
    }
    Ok((
        plan::fallback(workers, &pass.p.request),
        Method::Fallback,
        rejected,
    ))
}

/// One plan call: its text is the plan, not output (no deltas reach the caller).
fn propose(
    conv: &mut Conversant<'_>,
    model: &mut dyn Provider,
    messages: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<String, TurnError> {
    let mut call = Tally {
        budget_used: tally.budget_used,
        cost_used: tally.cost_used,
        ..Tally::default()
    };
    let mut quiet = |ev: TurnEvent<'_>| {
        if !matches!(ev, TurnEvent::Delta { .. }) {
            sink(ev)
        }
    };
    let end = converse::converse(conv, model, messages, &mut call, cx, &mut quiet);
    tally.absorb(&call);
    tally.budget_used = call.budget_used;
    tally.cost_used = call.cost_used;
    end.map(|()| call.output)
}

/// What a worker thread tells the pass.
enum Msg {
    /// A worker's warning or tool event, for the turn's caller.
    Event(TurnEvent<'static>),
    Done(usize, Tally, std::result::Result<(), TurnError>),
}

/// A finished subtask's result, for its dependents and the aggregate.
#[derive(Clone, Debug)]
struct Result_ {
    subtask: Subtask,
    output: String,
}

/// The subtasks' progress while the pass runs them.
struct Board<'p> {
    progress: &'p mut Progress,
    /// Each completed subtask's output.
    outputs: Vec<Option<String>>,
    /// The first subtask that failed, said: no more start.
    failure: Option<String>,
    /// Orchestration-state writes so far.
    step: u64,
}

/// Runs the plan: starts each subtask once its dependencies are done, at most
/// `max_parallel` at once. A stop stops every running worker (each recorded `stopped`) and
/// starts no more; a failed subtask starts no more and fails the turn once the running ones
/// end.
fn run_subtasks(
    pass: &Pass<'_>,
    method: Method,
    max_parallel: usize,
    progress: &mut Progress,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<Vec<Result_>, TurnError> {
    let n = progress.subtasks.len();
    let mut board = Board {
        progress,
        outputs: vec![None; n],
        failure: None,
        step: 0,
    };
    save_state(pass, method, board.progress, cx, sink, &mut board.step)?;
    std::thread::scope(|scope| -> std::result::Result<(), TurnError> {
        let (tx, rx) = mpsc::channel::<Msg>();
        loop {
            if board.failure.is_none() && !cx.cancel.is_cancelled() {
                for i in board.progress.ready() {
                    if board.progress.running() >= max_parallel {
                        break;
                    }
                    let (sub, deps) = begin_subtask(&mut board, i, cx, sink)?;
                    let tx = tx.clone();
                    scope.spawn(move || {
                        let mut forward = forwarder(tx.clone());
                        let (worker_tally, end) = run_worker(pass, &sub, &deps, cx, &mut forward);
                        let _ = tx.send(Msg::Done(i, worker_tally, end));
                    });
                    save_state(pass, method, board.progress, cx, sink, &mut board.step)?;
                }
            }
            if board.progress.running() == 0 {
                return Ok(());
            }
            match rx.recv_timeout(watcher::POLL) {
                Ok(Msg::Event(ev)) => sink(ev),
                Ok(Msg::Done(i, worker_tally, end)) => {
                    // The worker's cache tokens and cost go with its subtask's end.
                    tally.usage.add(&worker_tally.usage);
                    tally.handed.add(&worker_tally.whole_detail());
                    end_subtask(pass, &mut board, i, worker_tally, end, cx, sink)?;
                    save_state(pass, method, board.progress, cx, sink, &mut board.step)?;
                }
                // Looking runs the stop probe while every worker waits on its model.
                Err(_) => {}
            }
        }
    })?;
    results(board, cx)
}

/// Marks subtask `i` running, records its start, and gathers its dependencies' results.
fn begin_subtask(
    board: &mut Board<'_>,
    i: usize,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<(Subtask, Vec<Result_>), TurnError> {
    board.progress.state[i] = Step::Running;
    let sub = board.progress.subtasks[i].clone();
    cx.recorder()
        .lazy(&[Record::SubtaskStarted(SubtaskStarted {
            turn: cx.turn.to_owned(),
            subtask: sub.id.clone(),
            worker: sub.worker.clone(),
            at: clock::now(),
        })])?;
    sink(TurnEvent::SubtaskStarted {
        turn: cx.turn.into(),
        subtask: sub.id.as_str().into(),
        worker: sub.worker.as_str().into(),
        state: Running::Running,
    });
    let deps = sub
        .depends_on
        .iter()
        .filter_map(|d| {
            let j = board.progress.index(d)?;
            Some(Result_ {
                subtask: board.progress.subtasks[j].clone(),
                output: board.outputs[j].clone().unwrap_or_default(),
            })
        })
        .collect();
    Ok((sub, deps))
}

/// A worker's event sink: its warnings and tool events go to the pass; its text is its
/// subtask's result, not the turn's output.
fn forwarder(tx: mpsc::Sender<Msg>) -> impl FnMut(TurnEvent<'_>) {
    move |ev: TurnEvent<'_>| {
        if matches!(
            ev,
            TurnEvent::Warning { .. }
                | TurnEvent::ToolStarted { .. }
                | TurnEvent::ToolResult { .. }
        ) {
            let _ = tx.send(Msg::Event(ev.into_owned()));
        }
    }
}

/// Records how subtask `i` ended and keeps its output (or the failure that stops the plan).
fn end_subtask(
    pass: &Pass<'_>,
    board: &mut Board<'_>,
    i: usize,
    worker_tally: Tally,
    end: std::result::Result<(), TurnError>,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<(), TurnError> {
    let sub = board.progress.subtasks[i].clone();
    let (state, error) = match end {
        Ok(()) => (TurnState::Completed, None),
        Err(TurnError::Provider(ProviderError::Cancelled)) => (TurnState::Stopped, None),
        Err(e) => (TurnState::Failed, Some(describe(e))),
    };
    let rec = cx.recorder();
    let at = clock::now();
    let detail = worker_tally.whole_detail();
    let mut records = vec![Record::SubtaskEnded(SubtaskEnded {
        turn: cx.turn.to_owned(),
        session: cx.session.to_owned(),
        coordinator: pass.p.agent.id.clone(),
        subtask: sub.id.clone(),
        worker: sub.worker.clone(),
        state,
        error: error.clone(),
        output: rec.bound(&worker_tally.output)?,
        usage: worker_tally.usage,
        at,
    })];
    if detail.calls > 0 {
        records.push(Record::UsageCost(UsageCost {
            turn: cx.turn.to_owned(),
            session: cx.session.to_owned(),
            agent: sub.worker.clone(),
            subtask: Some(sub.id.clone()),
            counted_at: at,
            detail,
            at,
        }));
    }
    rec.lazy(&records)?;
    sink(TurnEvent::SubtaskEnded {
        turn: cx.turn.into(),
        subtask: sub.id.as_str().into(),
        worker: sub.worker.as_str().into(),
        state,
        error: error.as_deref().map(Into::into),
    });
    board.progress.state[i] = if state == TurnState::Completed {
        board.outputs[i] = Some(worker_tally.output);
        Step::Done
    } else {
        Step::Ended
    };
    if state == TurnState::Failed && board.failure.is_none() {
        board.failure = Some(format!(
            "subtask {} ({}) failed: {}",
            sub.id,
            sub.worker,
            error.unwrap_or_default()
        ));
    }
    Ok(())
}

/// Every subtask's result once all ran; else why the plan did not run to its end.
fn results(board: Board<'_>, cx: &TurnCx<'_>) -> std::result::Result<Vec<Result_>, TurnError> {
    if cx.cancel.is_cancelled() {
        return Err(TurnError::Provider(ProviderError::Cancelled));
    }
    if let Some(f) = board.failure {
        return Err(TurnError::Subtask(f));
    }
    if !board.progress.all_done() {
        return Err(TurnError::Subtask(
            "the plan could not run to its end".to_owned(),
        ));
    }
    Ok(board
        .progress
        .subtasks
        .iter()
        .zip(board.outputs)
        .map(|(s, o)| Result_ {
            subtask: s.clone(),
            output: o.unwrap_or_default(),
        })
        .collect())
}

fn describe(e: TurnError) -> String {
    match e {
        TurnError::Provider(e) => e.to_string(),
        TurnError::Budget(m) | TurnError::Subtask(m) => m,
        TurnError::Runtime(e) => e.to_string(),
    }
}

/// Writes the private orchestration state (a cache: a failure is a warning).
fn save_state(
    pass: &Pass<'_>,
    method: Method,
    progress: &Progress,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
    step: &mut u64,
) -> std::result::Result<(), TurnError> {
    *step += 1;
    let state = orchestration::State {
        turn: cx.turn.to_owned(),
        coordinator: pass.p.agent.id.clone(),
        method: method.as_str().to_owned(),
        subtasks: progress
            .subtasks
            .iter()
            .zip(&progress.state)
            .map(|(s, st)| SubtaskState {
                id: s.id.clone(),
                worker: s.worker.clone(),
                state: match st {
                    Step::Pending => "pending",
                    Step::Running => "running",
                    Step::Done => "completed",
                    Step::Ended => "ended",
                }
                .to_owned(),
            })
            .collect(),
    };
    if let Err(e) = orchestration::write(cx.repo, cx.session, &state, *step) {
        cx.recorder().warn(
            sink,
            "orchestration",
            format!("orchestration state not written: {e}"),
        )?;
    }
    Ok(())
}

/// An ad-hoc worker: the coordinator's provider, model, sampling (without its JSON format),
/// tools and sandbox, with `role` as its system prompt.
fn adhoc_agent(coordinator: &AgentConfig, sub: &Subtask) -> AgentConfig {
    let mut a = coordinator.clone();
    a.id = format!("adhoc:{}", sub.id);
    a.name = None;
    a.role = AgentRole::Worker;
    a.system_prompt = sub.role.clone();
    a.depends_on = Vec::new();
    a.sampling.response_format = None;
    a.memory = crate::config::MemoryConfig::default();
    a
}

/// One subtask on its worker: returns what it produced and how it ended.
fn run_worker(
    pass: &Pass<'_>,
    sub: &Subtask,
    deps: &[Result_],
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> (Tally, std::result::Result<(), TurnError>) {
    let mut tally = Tally::default();
    let end = (|| {
        let p = pass.p;
        let adhoc;
        let (agent, resolved, scope): (&AgentConfig, ResolvedProvider, String) = if sub.is_adhoc() {
            adhoc = adhoc_agent(p.agent, sub);
            let scope = format!("{}:{}:adhoc:{}", p.session, p.agent.id, sub.id);
            (&adhoc, p.provider.clone(), scope)
        } else {
            let agent = pass.config.agent(&sub.worker).ok_or_else(|| {
                TurnError::Runtime(RuntimeError::UnknownAgent {
                    id: sub.worker.clone(),
                    known: pass.config.agents.iter().map(|a| a.id.clone()).collect(),
                })
            })?;
            let env = |k: &str| std::env::var(k).ok();
            let resolved = pass
                .config
                .resolve_provider(agent, &env, pass.config_dir)
                .map_err(|message| {
                    TurnError::Runtime(RuntimeError::Invalid {
                        message,
                        hint: format!("check the provider of worker {:?}", agent.id).into(),
                    })
                })?;
            let scope = worker_id(&p.session, &p.agent.id, &agent.id);
            (agent, resolved, scope)
        };
        let mut model = provider::open(&resolved).map_err(TurnError::Provider)?;
        let mut conv = Conversant::in_scope(cx.repo, agent, &scope, &resolved.model, pass.dir)?
            .priced(pass.config, &resolved);
        if sub.is_adhoc() {
            conv.context.clear();
            conv.observers.clear();
            conv.toolbox = conv.toolbox.without_memory();
        }
        let mut transcript = vec![Message::new(
            Role::User,
            worker_request(&p.request, sub, deps),
        )];
        let wcx = TurnCx {
            repo: cx.repo,
            turn: cx.turn,
            session: cx.session,
            request: &sub.task,
            cancel: cx.cancel,
            // A worker's transcript holds only its subtask.
            earlier: converse::Earlier::default(),
            secret_env: cx.secret_env,
        };
        let end = converse::converse(
            &mut conv,
            model.as_mut(),
            &mut transcript,
            &mut tally,
            &wcx,
            sink,
        );
        // A declared worker keeps its subtask in its memory tiers, as an agent keeps a turn:
        // the answer in its daily log, the exchange in its semantic memory.
        if !sub.is_adhoc() {
            converse::observe_end(&mut conv, &wcx, &tally, &end, sink)?;
        }
        end
    })();
    (tally, end)
}

/// What a worker is asked: its subtask, the user's request it serves, and the results of
/// the subtasks it depends on.
fn worker_request(request: &str, sub: &Subtask, deps: &[Result_]) -> String {
    let mut text = format!(
        "Subtask {}: {}\n\nThe user's request it serves:\n{request}",
        sub.id, sub.task
    );
    for d in deps {
        text.push_str(&format!(
            "\n\nResult of subtask {} ({}):\n{}",
            d.subtask.id, d.subtask.worker, d.output
        ));
    }
    text
}

/// The coordinator answers the request from the subtasks' results; its answer streams as
/// the turn's output and joins its conversation.
fn aggregate(
    pass: &Pass<'_>,
    results: &[Result_],
    model: &mut dyn Provider,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> std::result::Result<(), TurnError> {
    let mut conv = coordinator(pass, cx)?;
    let mut text = String::from(
        "Your workers finished their subtasks. Answer the user's request from their results:",
    );
    for r in results {
        text.push_str(&format!(
            "\n\nSubtask {} ({}): {}\nResult:\n{}",
            r.subtask.id, r.subtask.worker, r.subtask.task, r.output
        ));
    }
    let mut messages = transcript.clone();
    messages.push(Message::new(Role::User, text));
    let from = messages.len();
    let end = converse::converse(&mut conv, model, &mut messages, tally, cx, sink);
    transcript.extend(messages.drain(from..));
    end
}
