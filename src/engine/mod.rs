//! The turn engine: one `send` from durable begin to exactly one terminal record.
//!
//! Lifecycle: take the session's turn lock, append the begin record (fsync), call the
//! provider while streaming, loop through allowed tools, and append the output and exactly
//! one terminal record (fsync). Tool and model-call records in between are appended without
//! waiting for the disk: the terminal record's flush covers them, and a crash before it
//! leaves a turn that recovery marks interrupted. A stop request from any process (a ledger
//! record) or Ctrl-C cancels the provider stream within ~100 ms.

pub mod conversation;
mod watcher;

use std::time::{Duration, Instant};

use axocoatl_store::layout::{check_session_name, session_lock_path};
use axocoatl_store::ledger::record::{
    AgentOutput, AttachmentPin, Bounded, InlineContext, ModelCall, SessionCreated, ToolFinished,
    ToolStarted, TurnBegun, TurnEnded, TurnState, Usage, Warning,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::lock::Lock;
use axocoatl_store::objects::Objects;

use crate::attach;
use crate::budget;
use crate::checkpoint;
use crate::clock;
use crate::config::{AgentConfig, AgentRole, CheckpointPolicy, Config};
use crate::error::{Result, RuntimeError};
use crate::history;
use crate::ids;
use crate::provider::{self, Cancel, ChatRequest, Event, Message, ProviderError, Role, Sampling};
use crate::session::{self, ActiveNote};
use crate::tools;
use crate::workspace::Workspace;

pub use conversation::render_user_message;

/// Text longer than this is kept in an object and referenced from the ledger.
pub const INLINE_LIMIT: usize = 64 * 1024;
/// How long a `send` waits for a busy session before giving up (without `--wait`).
pub const BUSY_WAIT: Duration = Duration::from_secs(2);

/// What to send.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    pub session: String,
    pub agent: Option<String>,
    pub message: String,
    /// Labelled inline context, e.g. `("stdin", text)`.
    pub inline_context: Vec<(String, String)>,
    pub attachments: Attachments,
    pub retry_of: Option<String>,
    /// Queue behind an active turn instead of failing.
    pub wait: bool,
    /// The automation occurrence that started this turn (none: a person sent it).
    pub origin: Option<TurnOrigin>,
}

/// Where a turn came from when no person sent it: an automation's occurrence. Recorded
/// (`TurnOrigin`) in the same durable append as the turn's begin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnOrigin {
    pub automation: String,
    /// The scheduled time of the occurrence (not when it ran); for a manual run, when it
    /// was requested.
    pub occurrence: clock::Millis,
    /// `schedule` or `manual`.
    pub trigger: String,
    /// What runs it: `tick`, `serve` or `manual`.
    pub runner: String,
}

/// The attachments a turn pins.
#[derive(Clone, Debug, PartialEq)]
pub enum Attachments {
    /// Exactly these (none for retry and rewind).
    Pinned(Vec<AttachmentPin>),
    /// The session's selection, as found under the session lock (what `send` does: one
    /// projection of the session serves the selection and the turn).
    Selection,
}

impl Default for Attachments {
    fn default() -> Attachments {
        Attachments::Pinned(Vec::new())
    }
}

/// What a running turn reports to its caller.
#[derive(Debug)]
pub enum TurnEvent<'a> {
    Begun {
        turn: &'a str,
        session: &'a str,
        agent: &'a str,
        /// The attachments pinned to the turn.
        attachments: &'a [AttachmentPin],
    },
    Delta(&'a str),
    ToolStarted {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    /// `output` is cut to [`tools::MODEL_OUTPUT_CAP`] with a note, as the model sees it.
    ToolResult {
        call_id: &'a str,
        name: &'a str,
        output: &'a str,
        is_error: bool,
        /// A command's exit code.
        exit_code: Option<i32>,
        duration_ms: u64,
    },
    Warning(&'a str),
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    pub turn: String,
    pub session: String,
    pub agent: String,
    pub state: TurnState,
    pub output: String,
    pub error: Option<String>,
    pub usage: Usage,
}

/// Resolves the agent a turn goes to: explicit, else `default_agent`, else the first
/// autonomous agent. Only autonomous agents take turns directly.
pub fn resolve_agent<'a>(config: &'a Config, explicit: Option<&str>) -> Result<&'a AgentConfig> {
    let agent = match explicit {
        Some(id) => config.agent(id).ok_or_else(|| RuntimeError::UnknownAgent {
            id: id.to_owned(),
            known: config.agents.iter().map(|a| a.id.clone()).collect(),
        })?,
        None => config.default_agent().ok_or(RuntimeError::NoAgent)?,
    };
    match agent.role {
        AgentRole::Autonomous => Ok(agent),
        AgentRole::Worker => Err(RuntimeError::AgentRole {
            id: agent.id.clone(),
            reason: "a worker runs only inside its coordinator's workflow; send to the coordinator"
                .into(),
        }),
        AgentRole::Coordinator => Err(RuntimeError::NotSupported(format!(
            "sending to coordinator {:?} (coordinator-led workflows)",
            agent.id
        ))),
    }
}

/// Keeps text inline up to `INLINE_LIMIT` bytes; past it the whole text goes to an object.
pub fn bound(objects: &Objects, text: &str) -> Result<Bounded> {
    if text.len() <= INLINE_LIMIT {
        return Ok(Bounded {
            inline: text.to_owned(),
            object: None,
            len: text.len() as u64,
        });
    }
    let mut cut = INLINE_LIMIT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(Bounded {
        inline: text[..cut].to_owned(),
        object: Some(objects.put(text.as_bytes())?),
        len: text.len() as u64,
    })
}

/// Takes the session's turn lock, waiting briefly (or indefinitely with `wait`).
fn take_session_lock(ws: &Workspace, session: &str, wait: bool) -> Result<Lock> {
    let path = session_lock_path(ws.repo().root(), session);
    if wait {
        return Ok(Lock::acquire(&path)?);
    }
    let deadline = Instant::now() + BUSY_WAIT;
    loop {
        if let Some(lock) = Lock::try_acquire(&path)? {
            return Ok(lock);
        }
        if Instant::now() >= deadline {
            let turn = session::noted_turn(&path);
            return Err(RuntimeError::Busy {
                session: session.to_owned(),
                turn,
            });
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Runs one turn.
pub fn send(
    ws: &Workspace,
    opts: SendOptions,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<TurnOutcome> {
    let config = ws.config()?;
    let agent = resolve_agent(config, opts.agent.as_deref())?;
    check_session_name(&opts.session)?;
    let env = |k: &str| std::env::var(k).ok();
    let resolved = config
        .resolve_provider(agent, &env, &ws.config_dir())
        .map_err(|message| RuntimeError::Invalid {
            message,
            hint: format!(
                "check the provider of agent {:?} in {}",
                agent.id,
                ws.config_path().display()
            ),
        })?;
    let repo = ws.repo();
    let mut lock = take_session_lock(ws, &opts.session, opts.wait)?;
    // We hold the lock, so any turn its note names has lost its owner.
    if let Some(orphan) = ActiveNote::decode(&lock.read_note()?) {
        session::interrupt_if_open(repo, &orphan)?;
    }

    let projection = crate::history::project_session(repo, &opts.session)?;
    let session_exists = projection.sessions.contains_key(&opts.session);
    let session_turns: Vec<&history::TurnView> = projection.session_turns(&opts.session).collect();
    let prior = conversation::load(repo, &opts.session, &agent.id, &session_turns)?;
    drop(session_turns);
    warn_damaged(&projection.problems, prior.rebuilt, sink);
    let attachments = match &opts.attachments {
        Attachments::Selection => projection.attachments.selection(&opts.session),
        Attachments::Pinned(pins) => pins.clone(),
    };
    // Under the lock: the pins must still be selected (a concurrent turn may have consumed one).
    let once = attach::check_selection(&projection.attachments, &opts.session, &attachments)?;
    drop(projection);
    let ck_policy = config.checkpoint.policy;
    let ck_keep = config.checkpoint.keep;
    if prior.rebuilt && ck_policy != CheckpointPolicy::Never {
        // The cache was missing, corrupt or stale (e.g. after a rewind): repair it from the
        // ledger before serving.
        let (seq, _) = repo.ledger().head()?;
        conversation::write_prior(repo, &opts.session, &agent.id, &prior, seq, ck_keep);
    }

    let objects = repo.objects();
    let mut inline = Vec::with_capacity(opts.inline_context.len());
    for (label, text) in &opts.inline_context {
        inline.push(InlineContext {
            label: label.clone(),
            text: bound(objects, text)?,
        });
    }
    // Read (and verify) the attachments before the turn begins, so a damaged object or an
    // image for a provider that cannot read images refuses the turn instead of failing it.
    let user = attach::user_message(
        repo,
        &opts.message,
        &opts.inline_context,
        &attachments,
        true,
    )?;
    attach::check_images(&user, &attachments, &resolved)?;
    let turn = ids::new_id();
    let now = clock::now();
    let (_, head) = repo.ledger().head()?;
    lock.write_note(
        &ActiveNote {
            turn: turn.clone(),
            session: opts.session.clone(),
            begin: head,
            pid: std::process::id(),
        }
        .encode(),
    )?;
    let mut begin = Vec::with_capacity(2);
    if !session_exists {
        begin.push(Record::SessionCreated(SessionCreated {
            session: opts.session.clone(),
            at: now,
        }));
    }
    begin.push(Record::TurnBegun(TurnBegun {
        turn: turn.clone(),
        session: opts.session.clone(),
        agent: agent.id.clone(),
        mode: "single".into(),
        request: opts.message.clone(),
        inline_context: inline,
        attachments: attachments.clone(),
        retry_of: opts.retry_of.clone(),
        pid: std::process::id(),
        at: now,
    }));
    if let Some(origin) = &opts.origin {
        begin.push(Record::TurnOrigin(
            axocoatl_store::ledger::record::TurnOrigin {
                turn: turn.clone(),
                session: opts.session.clone(),
                automation: origin.automation.clone(),
                occurrence: origin.occurrence,
                trigger: origin.trigger.clone(),
                runner: origin.runner.clone(),
                pid: std::process::id(),
                at: now,
            },
        ));
    }
    let appended = repo.ledger().append(&begin)?;
    let begin_pos = appended.last().map(|a| a.next).unwrap_or(head);
    attach::consume(repo, &opts.session, &turn, &once)?;
    sink(TurnEvent::Begun {
        turn: &turn,
        session: &opts.session,
        agent: &agent.id,
        attachments: &attachments,
    });

    let cancel = &cancel.with_probe(watcher::POLL, watcher::stop_requested(ws, &turn, begin_pos));
    let mut run = TurnRun {
        ws,
        agent,
        turn: &turn,
        session: &opts.session,
        cancel,
        output: String::new(),
        usage: Usage::ZERO,
        prior_usage: prior.usage,
        checkpoint: (ck_policy == CheckpointPolicy::AfterEachResponse).then_some(ck_keep),
        transcript: prior.messages.clone(),
    };
    run.transcript.push(user);
    let result = provider::open(&resolved)
        .map_err(TurnError::Provider)
        .and_then(|mut p| run.converse(p.as_mut(), &resolved.model, sink));
    let (state, error) = match result {
        Ok(()) => (TurnState::Completed, None),
        Err(TurnError::Provider(ProviderError::Cancelled)) => (TurnState::Stopped, None),
        Err(TurnError::Provider(e)) => (TurnState::Failed, Some(e.to_string())),
        Err(TurnError::Budget(msg)) => (TurnState::Failed, Some(msg)),
        Err(TurnError::Runtime(e)) => (TurnState::Failed, Some(e.to_string())),
    };
    let end = [
        Record::AgentOutput(AgentOutput {
            turn: turn.clone(),
            agent: agent.id.clone(),
            text: run.output.clone(),
            at: clock::now(),
        }),
        Record::TurnEnded(TurnEnded {
            turn: turn.clone(),
            session: opts.session.clone(),
            state,
            error: error.clone(),
            usage: run.usage,
            at: clock::now(),
        }),
    ];
    let ended = repo.ledger().append(&end)?;
    if ck_policy != CheckpointPolicy::Never {
        // The final snapshot matches what a rebuild from the ledger would retain.
        let mut usage = prior.usage;
        usage.add(&run.usage);
        let keep_turn = match state {
            TurnState::Completed => true,
            TurnState::Stopped => !run.output.is_empty(),
            _ => false,
        };
        let (messages, head) = if !keep_turn {
            (prior.messages.clone(), prior.head_turn.clone())
        } else {
            let mut m = run.transcript.clone();
            if state == TurnState::Stopped {
                m.push(Message::new(Role::Assistant, run.output.clone()));
            }
            (m, Some(turn.clone()))
        };
        let seq = ended.last().map(|a| a.seq).unwrap_or(0);
        let snap = conversation::snapshot(&messages, head, false, usage, seq);
        if let Err(e) = checkpoint::write(repo, &opts.session, &agent.id, &snap, ck_keep) {
            record_warning(repo, &turn, &opts.session, "checkpoint", e.to_string())?;
        }
    }
    lock.write_note("")?;
    drop(lock);
    let TurnRun { output, usage, .. } = run;
    Ok(TurnOutcome {
        turn,
        session: opts.session,
        agent: agent.id.clone(),
        state,
        output,
        error,
        usage,
    })
}

enum TurnError {
    Provider(ProviderError),
    Budget(String),
    Runtime(RuntimeError),
}

impl From<RuntimeError> for TurnError {
    fn from(e: RuntimeError) -> Self {
        TurnError::Runtime(e)
    }
}

impl From<axocoatl_store::Error> for TurnError {
    fn from(e: axocoatl_store::Error) -> Self {
        TurnError::Runtime(e.into())
    }
}

/// Says (every time) that records of the session could not be read: the turn goes on with
/// what could be.
fn warn_damaged(
    damaged: &[axocoatl_store::ledger::Damaged],
    rebuilt: bool,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) {
    let effect = if rebuilt {
        "the model's context is rebuilt without it"
    } else {
        "the session's history lacks it"
    };
    for d in damaged {
        sink(TurnEvent::Warning(&format!(
            "{d}; {effect} (run `axocoatl fsck`)"
        )));
    }
}

/// Records a warning of a turn in the ledger (lazily: the terminal record flushes it).
fn record_warning(
    repo: &axocoatl_store::Repo,
    turn: &str,
    session: &str,
    code: &str,
    message: String,
) -> Result<()> {
    repo.ledger().append_lazy(&[Record::Warning(Warning {
        turn: Some(turn.to_owned()),
        session: session.to_owned(),
        code: code.to_owned(),
        message,
        at: clock::now(),
    })])?;
    Ok(())
}

struct TurnRun<'a> {
    ws: &'a Workspace,
    agent: &'a AgentConfig,
    turn: &'a str,
    session: &'a str,
    cancel: &'a Cancel,
    output: String,
    /// Usage of this turn's calls.
    usage: Usage,
    /// The Agent's cumulative usage before this turn.
    prior_usage: Usage,
    /// `Some(keep)` when a checkpoint is written after each model response.
    checkpoint: Option<usize>,
    /// Every message of the conversation so far, this turn's included.
    transcript: Vec<Message>,
}

impl TurnRun<'_> {
    fn warn(
        &mut self,
        sink: &mut dyn FnMut(TurnEvent<'_>),
        code: &str,
        message: String,
    ) -> Result<(), TurnError> {
        sink(TurnEvent::Warning(&message));
        record_warning(self.ws.repo(), self.turn, self.session, code, message)?;
        Ok(())
    }

    fn converse(
        &mut self,
        provider: &mut dyn provider::Provider,
        model: &str,
        sink: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<(), TurnError> {
        let repo = self.ws.repo();
        let agent = self.agent;
        let memory = crate::memory::AgentMemory::open(repo, self.session, agent);
        let config = self.ws.config()?;
        let dir = match &config.workspace {
            Some(p) => self.ws.config_dir().join(p),
            None => self.ws.config_dir(),
        };
        let root = tools::Root::new(&dir, repo.root()).map_err(|e| RuntimeError::Invalid {
            message: format!("workspace {}: {e}", dir.display()),
            hint: format!("fix `workspace:` in {}", self.ws.config_path().display()),
        })?;
        let toolbox = tools::Toolbox::new(&agent.tools, agent.sandbox);
        let cx = tools::Context {
            root: &root,
            sandbox: agent.sandbox,
            cancel: self.cancel,
            memory: &memory,
            turn: Some(self.turn),
        };
        let schemas: Vec<_> = if provider.supports_tools() {
            toolbox.schemas(&cx)
        } else {
            Vec::new()
        };
        let mut sampling = Sampling {
            temperature: agent.sampling.temperature,
            top_p: agent.sampling.top_p,
            max_tokens: agent.sampling.max_tokens,
            response_format: agent.sampling.response_format,
        };
        if agent.token_budget.is_some() && sampling.max_tokens.is_none() {
            sampling.max_tokens = Some(budget::DEFAULT_COMPLETION_BOUND);
        }
        let max_steps = agent.max_steps();
        for step in 0..max_steps {
            if self.cancel.is_cancelled() {
                return Err(TurnError::Provider(ProviderError::Cancelled));
            }
            let mut system = agent.system_prompt.clone().unwrap_or_default();
            let section = memory.core_section();
            if step == 0 {
                for w in section.warnings {
                    self.warn(sink, "memory", w)?;
                }
            }
            let core = section.text;
            if !core.is_empty() {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(&core);
            }
            let sent = conversation::trim_to(
                &self.transcript,
                agent.memory.max_session_messages.max(1) as usize,
            );
            let mut all = Vec::with_capacity(sent.len() + 1);
            if !system.is_empty() {
                all.push(Message::new(Role::System, system));
            }
            all.extend(sent);
            let request = ChatRequest {
                model: model.to_owned(),
                messages: all,
                tools: schemas.clone(),
                sampling: sampling.clone(),
            };
            let estimate = budget::estimate_request(&request, &|t| provider.count_tokens(t));
            let completion_bound = sampling.max_tokens.unwrap_or(0) as u64;
            let reserved = estimate.total() + completion_bound;
            if let Some(b) = &agent.token_budget {
                if let Some(v) = budget::check(b, &estimate, completion_bound, self.usage.total()) {
                    if budget::enforce(b) {
                        return Err(TurnError::Budget(v.message));
                    }
                    self.warn(
                        sink,
                        "budget",
                        format!("{} (overflow_policy warn: sent anyway)", v.message),
                    )?;
                }
            }
            let mut warnings = Vec::new();
            let output = &mut self.output;
            let result = provider.chat(&request, self.cancel, &mut |ev| match ev {
                Event::Delta(text) => {
                    output.push_str(&text);
                    sink(TurnEvent::Delta(&text));
                }
                Event::ToolCall(_) => {}
                Event::Warning(w) => warnings.push(w),
            });
            for w in warnings {
                self.warn(sink, "provider", w)?;
            }
            let completion = result.map_err(TurnError::Provider)?;
            let call_usage = Usage {
                prompt_tokens: completion.usage.prompt_tokens.unwrap_or(0),
                completion_tokens: completion.usage.completion_tokens.unwrap_or(0),
                calls: 1,
                complete: completion.usage.reported(),
            };
            self.usage.add(&call_usage);
            let call_record = repo.ledger().append_lazy(&[Record::ModelCall(ModelCall {
                turn: self.turn.to_owned(),
                agent: agent.id.clone(),
                provider: provider.name().to_owned(),
                model: model.to_owned(),
                reserved_tokens: reserved,
                prompt_tokens: completion.usage.prompt_tokens,
                completion_tokens: completion.usage.completion_tokens,
                finish_reason: completion.finish_reason.clone(),
                at: clock::now(),
            })])?;
            if let Some(b) = &agent.token_budget {
                if let Some(v) = budget::check_reported(b, call_usage.total(), self.usage.total()) {
                    if budget::enforce(b) {
                        return Err(TurnError::Budget(format!(
                            "{}; the turn stopped after that response",
                            v.message
                        )));
                    }
                    self.warn(sink, "budget", v.message)?;
                }
            }
            let calls = completion.message.tool_calls.clone();
            self.transcript.push(completion.message);
            // After a response without tool calls the turn ends and its final snapshot is
            // written at once: an in-flight one would be replaced immediately.
            if let (Some(keep), false) = (self.checkpoint, calls.is_empty()) {
                let mut usage = self.prior_usage;
                usage.add(&self.usage);
                let seq = call_record.last().map(|a| a.seq).unwrap_or(0);
                let snap = conversation::snapshot(
                    &self.transcript,
                    Some(self.turn.to_owned()),
                    true,
                    usage,
                    seq,
                );
                if let Err(e) = crate::checkpoint::write(repo, self.session, &agent.id, &snap, keep)
                {
                    self.warn(sink, "checkpoint", e.to_string())?;
                }
            }
            if calls.is_empty() {
                return Ok(());
            }
            for call in calls {
                let args = call.arguments.to_string();
                repo.ledger()
                    .append_lazy(&[Record::ToolStarted(ToolStarted {
                        turn: self.turn.to_owned(),
                        agent: agent.id.clone(),
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: bound(repo.objects(), &args)?,
                        at: clock::now(),
                    })])?;
                sink(TurnEvent::ToolStarted {
                    call_id: &call.id,
                    name: &call.name,
                    arguments: &tools::for_model(&args),
                });
                // After a stop the remaining calls of the round are answered without running,
                // so the conversation stays well formed (every call has its result).
                let done = if self.cancel.is_cancelled() {
                    tools::Call {
                        output: tools::ToolOutput::err("not run: the turn was stopped"),
                        duration: Duration::ZERO,
                    }
                } else {
                    toolbox.call(&cx, &call.name, &call.arguments)
                };
                let out = done.output;
                let duration_ms = done.duration.as_millis() as u64;
                repo.ledger()
                    .append_lazy(&[Record::ToolFinished(ToolFinished {
                        turn: self.turn.to_owned(),
                        agent: agent.id.clone(),
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        is_error: out.is_error,
                        output: bound(repo.objects(), &out.text)?,
                        exit_code: out.exit_code,
                        duration_ms,
                        at: clock::now(),
                    })])?;
                let shown = tools::for_model(&out.text);
                sink(TurnEvent::ToolResult {
                    call_id: &call.id,
                    name: &call.name,
                    output: &shown,
                    is_error: out.is_error,
                    exit_code: out.exit_code,
                    duration_ms,
                });
                let mut msg = Message::new(Role::Tool, shown);
                msg.tool_call_id = Some(call.id.clone());
                msg.name = Some(call.name.clone());
                self.transcript.push(msg);
            }
        }
        Err(TurnError::Runtime(RuntimeError::Refused {
            message: format!("the model made {max_steps} calls (max_steps) without a final answer"),
            hint: format!(
                "raise `max_steps` of agent {:?} in {}, or check its prompt and tools",
                agent.id,
                self.ws.config_path().display()
            ),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_keeps_small_text_inline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(dir.path());
        let small = bound(&objects, "hello").expect("bound");
        assert_eq!(
            (small.inline.as_str(), small.object, small.len),
            ("hello", None, 5)
        );
        let big = "é".repeat(INLINE_LIMIT);
        let b = bound(&objects, &big).expect("bound");
        assert!(b.inline.len() <= INLINE_LIMIT && b.object.is_some());
        assert_eq!(
            objects.get(b.object.as_deref().expect("obj")).expect("get"),
            big.as_bytes()
        );
    }
}
