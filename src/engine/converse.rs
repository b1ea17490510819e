//! Step 3, converse: one agent talks with its model until it answers. Each round is
//! build request → budget check → call and record → run tools.
//!
//! Everything about the conversing agent comes in as a [`Conversant`], so the same loop
//! serves an autonomous agent's turn, each worker of a coordinator's turn and each answering
//! agent of a multi-agent turn.

use std::time::Duration;

use axocoatl_store::ledger::record::{
    ModelCallCost, ToolFinished, ToolStarted, TurnState, Usage, UsageDetail,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;

use super::record::Recorder;
use crate::budget::{self, InputEstimate};
use crate::clock;
use crate::config::{AgentConfig, Config, CostBudget, ResolvedProvider, TokenBudget};
use crate::conversation;
use crate::cost::{self, Price};
use crate::error::{Result, RuntimeError};
use crate::memory::turn::{MemoryRecorder, PassiveRecall};
use crate::memory::AgentMemory;
use crate::provider::{
    Cancel, ChatRequest, Completion, Event, Message, Provider, ProviderError, Role, Sampling,
    TextPart, ToolCall, ToolSchema,
};
use crate::tools::{self, Root, Toolbox, Workplace};
use crate::turn::{
    ContextSection, ContextSource, Exchange, RequestInfo, TurnEvent, TurnObserver, TurnOutcome,
    TurnSummary,
};

/// The agent a converse runs as, with everything that is its own.
pub struct Conversant<'a> {
    /// Its configuration: id, system prompt, sandbox, memory settings.
    pub agent: &'a AgentConfig,
    /// Its memory tiers, under its runtime id (the memory scope): `{session}:{agent}`, or
    /// `{session}:{coordinator}:worker:{worker}`.
    pub memory: AgentMemory,
    /// The workspace its tools see.
    pub root: Root,
    pub model: String,
    pub sampling: Sampling,
    pub budget: Option<TokenBudget>,
    /// Its `cost_budget:`, checked with `price`.
    pub cost_budget: Option<CostBudget>,
    /// What its model costs (see [`Conversant::priced`]); `None`: no price known, and calls
    /// are recorded without a cost.
    pub price: Option<Price>,
    /// The most conversation messages sent per request.
    pub max_messages: usize,
    /// Model calls per turn before the turn fails.
    pub max_steps: u32,
    pub toolbox: Toolbox,
    pub context: Vec<Box<dyn ContextSource>>,
    pub observers: Vec<Box<dyn TurnObserver>>,
    /// Set: a checkpoint is written after each response that calls tools.
    pub in_flight: Option<InFlight>,
    /// The MCP servers it may use, started when its converse begins with a model that
    /// calls tools (then `None`).
    pub mcp: Option<crate::mcp::ServerSet>,
    /// Its `approvals:` (none: no call waits).
    pub approvals: Option<super::wait::Gate>,
    /// Where a turn that waited goes on from (taken when its converse begins).
    pub resume: Option<super::wait::Resume>,
}

/// The in-flight checkpoint policy of a conversant.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    /// How many checkpoints to keep.
    pub keep: usize,
    /// The agent's cumulative usage before this turn.
    pub usage_before: Usage,
}

impl<'a> Conversant<'a> {
    /// An autonomous agent of `session`, as configured, whose tools see the workspace
    /// `dir`: its toolbox; its core memory and passive recall as context sections; its
    /// daily log and semantic memory as an observer.
    pub fn for_agent(
        repo: &Repo,
        agent: &'a AgentConfig,
        session: &str,
        model: &str,
        place: &Workplace,
    ) -> Result<Self> {
        let scope = crate::memory::agent_id(session, &agent.id);
        Conversant::in_scope(repo, agent, &scope, model, place)
    }

    /// An agent whose memory tiers live under the runtime id `scope` (a declared worker's
    /// `{session}:{coordinator}:worker:{worker}`), otherwise as [`Conversant::for_agent`].
    pub fn in_scope(
        repo: &Repo,
        agent: &'a AgentConfig,
        scope: &str,
        model: &str,
        place: &Workplace,
    ) -> Result<Self> {
        let root = Root::new(&place.dir, repo.root())
            .map_err(|e| RuntimeError::Invalid {
                message: format!("workspace {}: {e}", place.dir.display()),
                hint: "fix `workspace:` in the configuration".into(),
            })?
            .protecting(&place.config)
            .protecting_files(&place.trusted)
            .protecting_dirs(&place.trusted_dirs);
        let memory = AgentMemory::for_id(repo, scope, &agent.memory);
        let sampling = Sampling {
            temperature: agent.sampling.temperature,
            top_p: agent.sampling.top_p,
            max_tokens: budget::completion_bound(agent),
            response_format: agent.sampling.response_format,
            schema: None,
        };
        Ok(Conversant {
            agent,
            context: vec![
                Box::new(CoreMemory(memory.clone())),
                Box::new(PassiveRecall::new(memory.clone())),
            ],
            observers: vec![Box::new(MemoryRecorder::new(memory.clone()))],
            memory,
            root,
            toolbox: Toolbox::new(&agent.tools, agent.sandbox),
            model: model.to_owned(),
            sampling,
            budget: agent.token_budget.clone(),
            cost_budget: agent.cost_budget.clone(),
            price: None,
            max_messages: agent.memory.max_session_messages.max(1) as usize,
            max_steps: agent.max_steps(),
            in_flight: None,
            mcp: None,
            approvals: None,
            resume: None,
        })
    }

    /// With the price of the model `provider` runs, by `config`'s price table: each call is
    /// recorded with its cost, and a cost budget checked.
    pub fn priced(self, config: &Config, provider: &ResolvedProvider) -> Self {
        Conversant {
            price: config.price_of(provider),
            ..self
        }
    }

    /// Its memory scope (runtime id).
    pub fn scope(&self) -> &str {
        &self.memory.id
    }

    /// What its tools see of the turn.
    fn tool_context<'c>(&'c self, cx: &'c TurnCx<'_>) -> tools::Context<'c> {
        tools::Context {
            root: &self.root,
            sandbox: self.agent.sandbox,
            cancel: cx.cancel,
            memory: &self.memory,
            turn: Some(cx.turn),
            secret_env: cx.secret_env,
            limits: self.agent.command_limits,
        }
    }
}

/// Core memory as a section of the system prompt, on every request.
pub(super) struct CoreMemory(AgentMemory);

impl ContextSource for CoreMemory {
    fn section(&mut self, _request: &RequestInfo<'_>) -> Result<Option<ContextSection>> {
        let section = self.0.core_section();
        Ok(Some(ContextSection {
            label: "core_memory".into(),
            text: section.text,
            warnings: section.warnings,
        }))
    }
}

/// The turn a converse runs in.
pub struct TurnCx<'a> {
    pub repo: &'a Repo,
    pub turn: &'a str,
    pub session: &'a str,
    /// The user's request (what context sources may look up).
    pub request: &'a str,
    pub cancel: &'a Cancel,
    /// What the transcript holds of earlier turns.
    pub earlier: Earlier<'a>,
    /// Every environment variable a provider key is read from (kept from commands).
    pub secret_env: &'a [String],
}

/// The earlier turns a converse's transcript starts with, for passive recall (which
/// injects no exchange the request already carries, nor one a rewind superseded).
#[derive(Clone, Copy, Debug, Default)]
pub struct Earlier<'a> {
    /// The retained turns whose messages are the transcript's first `messages`, oldest
    /// first; each turn's messages begin with its one user message. The transcript may hold
    /// only the newest of them.
    pub turns: &'a [String],
    pub messages: usize,
    /// The session's turns a rewind superseded.
    pub superseded: &'a [String],
}

impl Earlier<'_> {
    /// The earlier turns among `sent`, the newest messages of `transcript` that a request
    /// carries.
    fn window(&self, transcript: &[Message], sent: usize) -> &[String] {
        let first = transcript.len().saturating_sub(sent);
        let end = self.messages.min(transcript.len());
        let users = transcript
            .get(first.min(end)..end)
            .unwrap_or(&[])
            .iter()
            .filter(|m| m.role == Role::User)
            .count();
        &self.turns[self.turns.len().saturating_sub(users)..]
    }
}

impl TurnCx<'_> {
    pub(crate) fn recorder(&self) -> Recorder<'_> {
        Recorder {
            repo: self.repo,
            turn: self.turn,
            session: self.session,
        }
    }
}

/// What a converse has produced so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    /// The visible output, streamed.
    pub output: String,
    /// Provider-reported usage (`complete: false` once a call reported none), workers'
    /// subtasks included.
    pub usage: Usage,
    /// The cache tokens and cost of the calls `usage` counts, less the workers' subtasks
    /// (their ends record theirs): what the terminal record's `UsageCost` says.
    pub detail: UsageDetail,
    /// The workers' subtasks' cache tokens and cost, for the turn's whole cost.
    pub handed: UsageDetail,
    /// Tokens counted against `per_execution`: what providers reported, or the local
    /// estimate of what they did not.
    pub budget_used: u64,
    /// Why the last call ended (`stop`, `length`, …) and the tokens it reported writing.
    pub last_finish: Option<String>,
    pub last_completion_tokens: Option<u64>,
    /// Nanodollars counted against `per_execution_usd`: what calls cost by their reported
    /// usage, or what they reserved when a provider reported none.
    pub cost_used: u64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            output: String::new(),
            usage: Usage::ZERO,
            detail: UsageDetail::default(),
            handed: UsageDetail::default(),
            budget_used: 0,
            last_finish: None,
            last_completion_tokens: None,
            cost_used: 0,
        }
    }
}

impl Tally {
    /// Adds what `other` (another converse of the same turn, not a worker's subtask) used.
    pub fn absorb(&mut self, other: &Tally) {
        self.usage.add(&other.usage);
        self.detail.add(&other.detail);
        self.handed.add(&other.handed);
    }

    /// The turn's whole cache tokens and cost: its own calls' and its workers'.
    pub fn whole_detail(&self) -> UsageDetail {
        let mut whole = self.detail;
        whole.add(&self.handed);
        whole
    }
}

/// Why a converse ended early.
#[derive(Debug)]
pub enum TurnError {
    Provider(ProviderError),
    Budget(String),
    /// A coordinator's subtask failed (or the plan could not run to its end).
    Subtask(String),
    Runtime(RuntimeError),
    /// Tool calls wait for a person: the turn is paused, not ended.
    Waiting(super::wait::Paused),
}

impl From<RuntimeError> for TurnError {
    fn from(e: RuntimeError) -> Self {
        TurnError::Runtime(e)
    }
}

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// Starts the MCP servers of `conv` its toolbox needs (here, at the first turn that needs
/// them; they end with the toolbox, unless an actor keeps them) and adds their tools. A server that does not start is
/// a warning, never a failed turn.
fn start_mcp(conv: &mut Conversant<'_>, cx: &TurnCx<'_>, sink: &mut Sink<'_>) -> Result<()> {
    let Some(set) = conv.mcp.take() else {
        return Ok(());
    };
    if conv.agent.mcp_servers.is_empty() {
        return Ok(());
    }
    let hub = match set.hub {
        Some(kept) => Ok(kept),
        None => crate::mcp::Hub::new(&set.configs, &set.dir).map(std::sync::Arc::new),
    };
    let warnings = match hub {
        Ok(hub) => conv
            .toolbox
            .add_mcp(hub, &conv.agent.mcp_servers, &conv.agent.tools, cx.cancel),
        Err(why) => vec![why],
    };
    for w in warnings {
        cx.recorder().warn(sink, "mcp", w)?;
    }
    Ok(())
}

/// Runs `conv` over `transcript` (every message so far, this turn's user message last)
/// until the model answers without tool calls. Appends to `transcript` and `tally`.
pub fn converse(
    conv: &mut Conversant<'_>,
    provider: &mut dyn Provider,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    provider.keep_conversation(Some(crate::checkpoint::conversation_cache(
        cx.repo,
        &conv.memory.id,
    )));
    let schemas = if provider.supports_tools() {
        start_mcp(conv, cx, sink)?;
        conv.toolbox.schemas(&conv.tool_context(cx))
    } else {
        Vec::new()
    };
    let info = RequestInfo {
        turn: cx.turn,
        scope: &conv.memory.id,
        request: cx.request,
        window: &[],
        superseded: cx.earlier.superseded,
    };
    let mut first_step = 0;
    match conv.resume.take() {
        // A turn that waited: its held round runs (or is denied) first.
        Some(resume) => {
            first_step = resume.steps;
            // The round began with the model's response before the pause: its observers
            // hear the whole exchange now.
            let start = transcript
                .iter()
                .rposition(|m| m.role == Role::Assistant)
                .unwrap_or(transcript.len());
            if let Some(held) = run_tools(conv, &resume.pending, transcript, cx, sink)? {
                return Err(super::wait::pause(
                    conv,
                    &resume.pending[held..],
                    transcript,
                    tally,
                    first_step,
                    cx,
                    sink,
                ));
            }
            observe_exchange(conv, &transcript[start..], cx, sink)?;
        }
        None => {
            for observer in conv.observers.iter_mut() {
                if let Err(e) = observer.before_turn(&info) {
                    cx.recorder().warn(sink, "memory", e.to_string())?;
                }
            }
        }
    }
    for step in first_step..conv.max_steps {
        if cx.cancel.is_cancelled() {
            return Err(TurnError::Provider(ProviderError::Cancelled));
        }
        let start = transcript.len();
        let request = build_request(conv, transcript, &schemas, step == 0, cx, sink)?;
        let input = check_budget(conv, provider, &request, tally, cx, sink)?;
        check_cost_budget(conv, &request, &input, tally, cx, sink)?;
        let calls = call_and_record(conv, provider, &request, input, transcript, tally, cx, sink)?;
        if let Some(held) = run_tools(conv, &calls, transcript, cx, sink)? {
            return Err(super::wait::pause(
                conv,
                &calls[held..],
                transcript,
                tally,
                step + 1,
                cx,
                sink,
            ));
        }
        observe_exchange(conv, &transcript[start..], cx, sink)?;
        if calls.is_empty() {
            return Ok(());
        }
    }
    Err(TurnError::Runtime(RuntimeError::Refused {
        message: format!(
            "the model made {} calls (max_steps) without a final answer",
            conv.max_steps
        ),
        hint: format!(
            "raise `max_steps` of agent {:?} in the configuration, or check its prompt and tools",
            conv.agent.id
        )
        .into(),
    }))
}

/// The request of one round: the system prompt with every context section, the newest
/// whole turns of the conversation, the tool schemas and the sampling controls. The
/// sections' warnings are reported on the `first` round only.
pub(super) fn build_request(
    conv: &mut Conversant<'_>,
    transcript: &[Message],
    schemas: &[ToolSchema],
    first: bool,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<ChatRequest, TurnError> {
    let mut system = conv.agent.system_prompt.clone().unwrap_or_default();
    let mut parts = Vec::new();
    if !system.is_empty() {
        parts.push(TextPart {
            start: 0,
            end: system.len(),
            volatile: false,
        });
    }
    let sent = conversation::trim_to(transcript, conv.max_messages);
    let info = RequestInfo {
        turn: cx.turn,
        scope: &conv.memory.id,
        request: cx.request,
        window: cx.earlier.window(transcript, sent.len()),
        superseded: cx.earlier.superseded,
    };
    for source in conv.context.iter_mut() {
        let section = match source.section(&info) {
            Ok(Some(section)) => section,
            Ok(None) => continue,
            Err(e) => {
                cx.recorder().warn(sink, "memory", e.to_string())?;
                continue;
            }
        };
        for w in section.warnings.into_iter().filter(|_| first) {
            cx.recorder().warn(sink, "memory", w)?;
        }
        if !section.text.is_empty() {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            let start = system.len();
            system.push_str(&section.text);
            parts.push(TextPart {
                start,
                end: system.len(),
                volatile: source.volatile(),
            });
        }
    }
    let mut messages = Vec::with_capacity(sent.len() + 1);
    if !system.is_empty() {
        let mut m = Message::new(Role::System, system);
        m.parts = parts;
        messages.push(m);
    }
    messages.extend(sent);
    Ok(ChatRequest {
        model: conv.model.clone(),
        messages,
        tools: schemas.to_vec(),
        sampling: conv.sampling.clone(),
    })
}

/// Estimates the request and checks the reservation against the budget: refuses under
/// `abort`, warns and goes on under `warn`. Returns the input estimate.
pub(super) fn check_budget(
    conv: &Conversant<'_>,
    provider: &dyn Provider,
    request: &ChatRequest,
    tally: &Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<InputEstimate, TurnError> {
    let estimate = budget::estimate_request(request, &|t| provider.count_tokens(t));
    let Some(b) = &conv.budget else {
        return Ok(estimate);
    };
    let completion_bound = request.sampling.max_tokens.unwrap_or(0) as u64;
    if let Some(v) = budget::check(b, &estimate, completion_bound, tally.budget_used) {
        if budget::enforce(b) {
            return Err(TurnError::Budget(v.message));
        }
        let message = format!("{} (overflow_policy warn: sent anyway)", v.message);
        cx.recorder().warn(sink, "budget", message)?;
    }
    Ok(estimate)
}

/// Checks the call's reservation, priced, against the cost budget, as [`check_budget`]
/// checks tokens: refuses under `abort`, warns and goes on under `warn`.
pub(super) fn check_cost_budget(
    conv: &Conversant<'_>,
    request: &ChatRequest,
    estimate: &InputEstimate,
    tally: &Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    let Some(b) = &conv.cost_budget else {
        return Ok(());
    };
    let completion_bound = request.sampling.max_tokens.unwrap_or(0) as u64;
    let price = conv.price.as_ref();
    let spent = tally.cost_used;
    if let Some(v) = cost::budget::check(b, price, &conv.model, estimate, completion_bound, spent) {
        if cost::budget::enforce(b) {
            return Err(TurnError::Budget(v.message));
        }
        let message = format!("{} (overflow_policy warn: sent anyway)", v.message);
        cx.recorder().warn(sink, "budget", message)?;
    }
    Ok(())
}

/// Calls the model, streaming its text to the caller, and records the call. Appends the
/// response to `transcript` (and checkpoints it when tools follow) and returns its tool
/// calls.
#[expect(
    clippy::too_many_arguments,
    reason = "one round's whole state: the conversant, its model, the request and its estimate, the transcript, the tally, the turn and its caller"
)]
pub(super) fn call_and_record(
    conv: &Conversant<'_>,
    provider: &mut dyn Provider,
    request: &ChatRequest,
    input: InputEstimate,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<Vec<ToolCall>, TurnError> {
    let mut warnings = Vec::new();
    let output = &mut tally.output;
    let result = provider.chat(request, cx.cancel, &mut |ev| match ev {
        Event::Delta(text) => {
            output.push_str(&text);
            sink(TurnEvent::Delta {
                turn: cx.turn.into(),
                text: text.as_str().into(),
            });
        }
        Event::ToolCall(_) => {}
        Event::Warning(w) => warnings.push(w),
    });
    for w in warnings {
        cx.recorder().warn(sink, "provider", w)?;
    }
    let completion = match result {
        Ok(completion) => completion,
        Err(e) => {
            if matches!(e, ProviderError::Cancelled) {
                // A call cut short by a stop: it was made, and what it used was never
                // reported, so the turn's usage is unknown rather than zero.
                tally.usage.add(&Usage {
                    calls: 1,
                    complete: false,
                    ..Usage::ZERO
                });
            }
            return Err(TurnError::Provider(e));
        }
    };
    let call = count_call(provider, &completion, input, tally);
    tally.last_finish = completion.finish_reason.clone();
    tally.last_completion_tokens = completion.usage.completion_tokens;
    let completion_bound = request.sampling.max_tokens.unwrap_or(0) as u64;
    if cut_at_length(completion.finish_reason.as_deref()) {
        cx.recorder()
            .warn(sink, "max_tokens", cut_notice(request.sampling.max_tokens))?;
    }
    let cost = count_cost(conv, &completion, input, completion_bound, tally);
    let usage = completion.usage;
    let seq = cx.recorder().lazy(&[Record::ModelCallCost(ModelCallCost {
        turn: cx.turn.to_owned(),
        agent: conv.agent.id.clone(),
        provider: provider.name().to_owned(),
        model: conv.model.clone(),
        reserved_tokens: input.total() + completion_bound,
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cost_nanos: cost,
        finish_reason: completion.finish_reason.clone(),
        at: clock::now(),
    })])?;
    check_budgets(conv, call.total(), cost, tally, cx, sink)?;
    let calls = completion.message.tool_calls.clone();
    transcript.push(completion.message);
    // After a response without tool calls the turn ends and its final snapshot is written
    // at once: an in-flight one would be replaced immediately.
    if !calls.is_empty() {
        checkpoint_in_flight(conv, transcript, tally, seq, cx, sink)?;
    }
    Ok(calls)
}

/// The token and cost budgets after a call, by what it reported using: past a limit the
/// turn stops (`enforce`) or a warning is recorded.
fn check_budgets(
    conv: &Conversant<'_>,
    call_total: u64,
    cost: Option<u64>,
    tally: &Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    if let Some(b) = &conv.budget {
        // `per_execution` counts this conversant's own calls, as the reservation before the
        // call did (`budget_used`): a coordinator's tally also carries its workers' usage,
        // which their own budgets answer for.
        if let Some(v) = budget::check_reported(b, call_total, tally.budget_used) {
            if budget::enforce(b) {
                return Err(TurnError::Budget(format!(
                    "{}; the turn stopped after that response",
                    v.message
                )));
            }
            cx.recorder().warn(sink, "budget", v.message)?;
        }
    }
    if let (Some(b), Some(cost)) = (&conv.cost_budget, cost) {
        if let Some(v) = cost::budget::check_reported(b, cost, tally.cost_used) {
            if cost::budget::enforce(b) {
                return Err(TurnError::Budget(format!(
                    "{}; the turn stopped after that response",
                    v.message
                )));
            }
            cx.recorder().warn(sink, "budget", v.message)?;
        }
    }
    Ok(())
}

/// Whether a call's finish reason says its output was cut at the length limit
/// (OpenAI-compatible servers say `length`, Anthropic `max_tokens`).
fn cut_at_length(finish_reason: Option<&str>) -> bool {
    matches!(finish_reason, Some("length" | "max_tokens"))
}

/// What a turn says when the model's output was cut by its length limit, so a reader knows
/// the answer is incomplete (the text itself just ends).
fn cut_notice(max_tokens: Option<u32>) -> String {
    match max_tokens {
        Some(n) => format!(
            "the output was cut at max_tokens ({n} tokens): the answer is incomplete; raise the turn's max_tokens option or the agent's `sampling.max_tokens`"
        ),
        None => "the output was cut at the provider's length limit: the answer is incomplete; set a larger max_tokens".to_owned(),
    }
}

/// Adds a call's usage to the tally: what the provider reported, and for `per_execution`
/// the local estimate of what it did not report (input as estimated, output counted).
fn count_call(
    provider: &dyn Provider,
    completion: &Completion,
    input: InputEstimate,
    tally: &mut Tally,
) -> Usage {
    let reported = completion.usage;
    let call = reported.usage();
    tally.usage.add(&call);
    let count = |t: &str| {
        provider
            .count_tokens(t)
            .map(|n| n as u64)
            .unwrap_or_else(|| budget::estimate_text(t))
    };
    let prompt = reported.prompt_tokens.unwrap_or_else(|| input.total());
    let completion_tokens = reported.completion_tokens.unwrap_or_else(|| {
        let m = &completion.message;
        count(&m.content)
            + m.tool_calls
                .iter()
                .map(|c| count(&c.name) + count(&c.arguments.to_string()))
                .sum::<u64>()
    });
    tally.budget_used += prompt + completion_tokens;
    call
}

/// Adds a call's cache tokens and cost to the tally, and returns its cost: by its reported
/// usage and the conversant's price, `None` without either. For `per_execution_usd` a call
/// without a cost counts what it reserved, when the price is known.
fn count_cost(
    conv: &Conversant<'_>,
    completion: &Completion,
    input: InputEstimate,
    completion_bound: u64,
    tally: &mut Tally,
) -> Option<u64> {
    let usage = &completion.usage;
    let cost = conv.price.as_ref().and_then(|p| cost::call_nanos(p, usage));
    tally.detail.add(&UsageDetail {
        calls: 1,
        cache_write_tokens: usage.cache_write_tokens.unwrap_or(0),
        cache_read_tokens: usage.cache_read_tokens.unwrap_or(0),
        priced_calls: u32::from(cost.is_some()),
        cost_nanos: cost.unwrap_or(0),
    });
    let counted = cost.or_else(|| {
        let price = conv.price.as_ref()?;
        Some(cost::budget::reservation(price, &input, completion_bound))
    });
    tally.cost_used = tally.cost_used.saturating_add(counted.unwrap_or(0));
    cost
}

pub(super) fn checkpoint_in_flight(
    conv: &Conversant<'_>,
    transcript: &[Message],
    tally: &Tally,
    seq: u64,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    let Some(policy) = conv.in_flight else {
        return Ok(());
    };
    let mut usage = policy.usage_before;
    usage.add(&tally.usage);
    let snap = conversation::snapshot(transcript, Some(cx.turn.to_owned()), true, usage, seq);
    if let Err(e) =
        crate::checkpoint::write(cx.repo, cx.session, &conv.agent.id, &snap, policy.keep)
    {
        cx.recorder().warn(sink, "checkpoint", e.to_string())?;
    }
    Ok(())
}

/// Runs each tool call through the toolbox, recording its start and result, and appends
/// the results (as the model sees them: cut past 64 KiB) to `transcript`. After a stop the
/// remaining calls of the round are answered without running, so the conversation stays
/// well formed (every call has its result). A call the agent's `approvals:` holds stops the
/// round: `Some(i)`, the index of the first call that must wait (it and the calls after it
/// have not run).
pub(super) fn run_tools(
    conv: &Conversant<'_>,
    calls: &[ToolCall],
    transcript: &mut Vec<Message>,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<Option<usize>, TurnError> {
    let rec = cx.recorder();
    let tool_cx = conv.tool_context(cx);
    for (i, call) in calls.iter().enumerate() {
        let verdict = match &conv.approvals {
            Some(gate) if !cx.cancel.is_cancelled() => gate.admit(conv, call, cx, sink)?,
            _ => super::wait::Verdict::Run,
        };
        let mut starting = match verdict {
            super::wait::Verdict::Hold => return Ok(Some(i)),
            super::wait::Verdict::RunRecorded(ref records) => records.clone(),
            _ => Vec::new(),
        };
        let arguments = call.arguments.to_string();
        starting.push(Record::ToolStarted(ToolStarted {
            turn: cx.turn.to_owned(),
            agent: conv.agent.id.clone(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: rec.bound(&arguments)?,
            at: clock::now(),
        }));
        rec.lazy(&starting)?;
        sink(TurnEvent::ToolStarted {
            turn: cx.turn.into(),
            call_id: call.id.as_str().into(),
            name: call.name.as_str().into(),
            arguments: tools::for_model(&arguments).into(),
        });
        let done = if cx.cancel.is_cancelled() {
            tools::Call {
                output: tools::ToolOutput::err("not run: the turn was stopped"),
                duration: Duration::ZERO,
                warnings: Vec::new(),
            }
        } else if let super::wait::Verdict::Deny(answer) = verdict {
            tools::Call {
                output: tools::ToolOutput::err(answer),
                duration: Duration::ZERO,
                warnings: Vec::new(),
            }
        } else {
            conv.toolbox.call(&tool_cx, &call.name, &call.arguments)
        };
        for w in done.warnings {
            rec.warn(sink, "mcp", w)?;
        }
        let out = done.output;
        let duration_ms = done.duration.as_millis() as u64;
        rec.lazy(&[Record::ToolFinished(ToolFinished {
            turn: cx.turn.to_owned(),
            agent: conv.agent.id.clone(),
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error: out.is_error,
            output: match &out.raw {
                Some(raw) => rec.bound_bytes(&out.text, raw)?,
                None => rec.bound(&out.text)?,
            },
            exit_code: out.exit_code,
            duration_ms,
            at: clock::now(),
        })])?;
        let shown = tools::for_model(&out.text);
        sink(TurnEvent::ToolResult {
            turn: cx.turn.into(),
            call_id: call.id.as_str().into(),
            name: call.name.as_str().into(),
            output: shown.as_str().into(),
            is_error: out.is_error,
            exit_code: out.exit_code,
            duration_ms,
        });
        let mut msg = Message::new(Role::Tool, shown);
        msg.tool_call_id = Some(call.id.clone());
        msg.name = Some(call.name.clone());
        transcript.push(msg);
    }
    Ok(None)
}

/// Tells `conv`'s observers that its part of a turn ended: a declared worker's subtask, or
/// one agent's answer in a multi-agent turn (the daily log's answer line, the exchange in
/// semantic memory). `end` is how its converse ended. Their failures are warnings of the
/// turn.
pub(crate) fn observe_end(
    conv: &mut Conversant<'_>,
    cx: &TurnCx<'_>,
    tally: &Tally,
    end: &Result<(), TurnError>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    let (state, error) = match end {
        Ok(()) => (TurnState::Completed, None),
        Err(TurnError::Provider(ProviderError::Cancelled)) => (TurnState::Stopped, None),
        Err(TurnError::Provider(e)) => (TurnState::Failed, Some(e.to_string())),
        Err(TurnError::Budget(m)) | Err(TurnError::Subtask(m)) => {
            (TurnState::Failed, Some(m.clone()))
        }
        Err(TurnError::Runtime(e)) => (TurnState::Failed, Some(e.to_string())),
        // A worker's or an answering agent's calls never wait (validate and prepare
        // refuse approvals there).
        Err(TurnError::Waiting(_)) => (TurnState::Failed, Some("waits for approval".into())),
    };
    let outcome = TurnOutcome {
        turn: cx.turn.to_owned(),
        session: cx.session.to_owned(),
        agent: conv.agent.id.clone(),
        agent_name: conv.agent.name.clone(),
        state,
        output: tally.output.clone(),
        error,
        usage: tally.usage,
    };
    let summary = TurnSummary {
        turn: cx.turn,
        scope: &conv.memory.id,
        request: cx.request,
        outcome: &outcome,
    };
    for observer in conv.observers.iter_mut() {
        if let Err(e) = observer.after_turn(&summary) {
            cx.recorder().warn(sink, "memory", e.to_string())?;
        }
    }
    Ok(())
}

/// Tells the conversant's observers about one exchange (a response and its tool results).
pub(super) fn observe_exchange(
    conv: &mut Conversant<'_>,
    messages: &[Message],
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), TurnError> {
    let exchange = Exchange {
        turn: cx.turn,
        scope: &conv.memory.id,
        request: cx.request,
        messages,
    };
    for observer in conv.observers.iter_mut() {
        if let Err(e) = observer.after_exchange(&exchange) {
            cx.recorder().warn(sink, "memory", e.to_string())?;
        }
    }
    Ok(())
}
