//! Sleep-time consolidation: one model call per Agent reads its recent semantic records and
//! its core blocks and promotes durable facts into the core blocks.
//!
//! The pass is promotion-only by construction: the model answers with a list of edits, and
//! only two kinds exist, *append a fact to a block* and *rewrite one exact piece of a block*
//! (to a non-empty text). There is no edit that removes a fact from a block, and nothing
//! here can delete or change a semantic record. Every edit obeys the block's limit like any
//! other edit; refused edits are reported, the rest are applied.

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{
    AgentOutput, Millis, ModelCallCost, SessionCreated, ToolResult, ToolStarted, TurnBegun,
    TurnEnded, TurnState, Usage, UsageCost, UsageDetail, Warning,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::lock::Lock;
use axocoatl_store::memory::{LogKind, LogRecord};
use axocoatl_store::Repo;
use serde::Deserialize;
use serde_json::json;

use crate::budget;
use crate::clock;
use crate::config::{AgentConfig, AgentRole, Config, ResolvedProvider, ResponseFormat};
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, ViewState, Want};
use crate::ids;
use crate::provider::{self, Cancel, ChatRequest, Event, Message, ProviderError, Role, Sampling};
use crate::session::ActiveNote;
use crate::workspace::Workspace;

use super::core::{BlockView, CoreEdit, EditDone};
use super::semantic::{Hit, SemanticStore};
use super::AgentMemory;

/// The request recorded for a consolidation turn (its `TurnBegun.request`).
pub const REQUEST: &str = "Consolidate memory: promote durable facts from recent semantic records into core memory blocks.";
/// `TurnBegun.mode` of a consolidation pass.
pub const MODE: &str = crate::turn::MODE_CONSOLIDATION;
/// At most this many recent records are read by one pass.
pub const MAX_RECORDS: usize = 50;
/// At most this many edits of one answer are applied.
pub const MAX_EDITS: usize = 20;
/// Each record's text is cut to this many characters in the prompt.
const RECORD_CHARS: usize = 1500;

/// The system prompt of a consolidation call.
pub const SYSTEM: &str = "You maintain the core memory of an AI agent: a few small named blocks of durable facts that the agent sees on every turn. You are given the blocks and the agent's recent memory records. Promote facts that will stay useful (preferences, names, decisions, recurring context) into the blocks.\n\nRules:\n- Only add facts, or rewrite one exact piece of a block to correct or update a fact. Never remove facts.\n- Skip facts a block already holds, small talk, and anything temporary.\n- Stay within each block's remaining characters.\n\nAnswer with JSON only, in this shape:\n{\"edits\": [{\"label\": \"human\", \"append\": \"Prefers short answers.\"}, {\"label\": \"project\", \"old\": \"exact text in the block\", \"new\": \"its corrected text\"}]}\nAnswer {\"edits\": []} when there is nothing to promote.";

/// When `serve` consolidates `agent` (its idle threshold and interval), or `None` when it
/// never does: an agent that is not autonomous (a worker has no actor; a coordinator's
/// memory is its workflow's), or whose `consolidation:` (its own, else the top-level
/// section) is off.
pub fn sleep_time(
    config: &Config,
    agent: &AgentConfig,
) -> Option<(std::time::Duration, std::time::Duration)> {
    let e = config.consolidation.for_agent(agent);
    (agent.role == AgentRole::Autonomous && e.enabled.0).then(|| {
        (
            std::time::Duration::from_secs(e.idle_threshold_secs.0),
            std::time::Duration::from_secs(e.interval_secs.0),
        )
    })
}

/// The user message of a consolidation call: the blocks, then the records oldest first.
pub fn prompt(blocks: &[BlockView], records: &[Hit]) -> String {
    let mut out = String::from("Core memory blocks:\n");
    for b in blocks {
        out.push_str(&format!(
            "<block label=\"{}\" chars=\"{}\" limit=\"{}\">\n{}\n</block>\n",
            b.label, b.chars, b.limit, b.value
        ));
    }
    out.push_str("\nRecent memory records, oldest first:\n");
    for r in records {
        let text: String = r.text.chars().take(RECORD_CHARS).collect();
        out.push_str(&format!(
            "<record at=\"{}\" source=\"{}\">\n{}\n</record>\n",
            clock::rfc3339(r.source.at),
            r.source.kind.as_str(),
            text
        ));
    }
    out
}

/// One edit as the model writes it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposedEdit {
    pub label: String,
    #[serde(default)]
    pub append: Option<String>,
    #[serde(default)]
    pub old: Option<String>,
    #[serde(default)]
    pub new: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    edits: Vec<ProposedEdit>,
}

/// The edits of a model's answer: the JSON object in it (code fences and text around it are
/// tolerated).
pub fn parse_answer(text: &str) -> Result<Vec<ProposedEdit>, String> {
    let start = text.find('{');
    let end = text.rfind('}');
    let json = match (start, end) {
        (Some(s), Some(e)) if s < e => &text[s..=e],
        _ => return Err("the answer holds no JSON object".into()),
    };
    serde_json::from_str::<Answer>(json)
        .map(|a| a.edits)
        .map_err(|e| format!("the answer is not {{\"edits\": [...]}}: {e}"))
}

/// What became of one proposed edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Done(EditDone),
    /// Refused, with the reason (limits, unknown block, text not found, a deletion).
    Refused {
        label: String,
        reason: String,
    },
}

/// The core edit a proposal stands for, or why it is not a promotion.
fn as_edit(p: &ProposedEdit) -> Result<CoreEdit<'_>, String> {
    match (&p.append, &p.old, &p.new) {
        (Some(text), None, None) if !text.trim().is_empty() => Ok(CoreEdit::Append(text)),
        (Some(_), None, None) => Err("an empty fact".into()),
        (None, Some(old), Some(new)) if !new.trim().is_empty() => {
            Ok(CoreEdit::Replace { old, new })
        }
        (None, Some(_), Some(_)) => Err(
            "rewriting a fact to nothing would delete it; consolidation only adds or rewrites"
                .into(),
        ),
        _ => Err("an edit is either {label, append} or {label, old, new}".into()),
    }
}

impl AgentMemory {
    /// Applies the proposed edits of a consolidation answer, at most [`MAX_EDITS`].
    pub fn apply_consolidation(&self, proposed: &[ProposedEdit], turn: &str) -> Vec<Applied> {
        let mut out = Vec::new();
        for (i, p) in proposed.iter().enumerate() {
            let refused = |reason: String| Applied::Refused {
                label: p.label.clone(),
                reason,
            };
            if i >= MAX_EDITS {
                out.push(refused(format!("more than {MAX_EDITS} edits in one pass")));
                continue;
            }
            out.push(match as_edit(p) {
                Err(reason) => refused(reason),
                Ok(edit) => match self.edit(&p.label, edit, Some(turn)) {
                    Ok(done) => Applied::Done(done),
                    Err(e) => refused(e.to_string()),
                },
            });
        }
        out
    }
}

/// What one Agent's pass did.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    pub agent: String,
    /// The runtime id whose memory was read and edited.
    pub scope: String,
    pub result: PassResult,
}

#[derive(Clone, Debug, PartialEq)]
pub enum PassResult {
    /// No model call and nothing recorded: nothing new since the last pass.
    Skipped { reason: String },
    /// A consolidation turn ran.
    Ran {
        turn: String,
        state: TurnState,
        /// Semantic records read.
        records: usize,
        applied: Vec<Applied>,
        error: Option<String>,
        usage: Usage,
    },
}

/// Runs a consolidation pass for `agent` in `session`: the runtime function behind
/// `axocoatl memory consolidate`, and what `serve` runs on idle. An autonomous Agent's
/// memory is `{session}:{agent}`; a declared Worker's is its scope under its coordinator
/// (`{session}:{coordinator}:worker:{worker}`); a Coordinator, which keeps no memory tiers
/// of its own, stands for its workflow: each of its declared Workers is consolidated. With
/// `None`, every autonomous Agent and every declared Worker is. Each pass that calls the
/// model is a turn of mode [`MODE`] in the ledger (its agent is the one consolidated):
/// begun durably, ended by exactly one terminal record, stoppable with `axocoatl stop`.
pub fn run(
    ws: &Workspace,
    session: &str,
    agent: Option<&str>,
    cancel: &Cancel,
) -> Result<Vec<Pass>> {
    let config = ws.config()?;
    check_session_name(session)?;
    let targets: Vec<(&AgentConfig, String)> = match agent {
        Some(id) => {
            let a = config.agent(id).ok_or_else(|| RuntimeError::UnknownAgent {
                id: id.to_owned(),
                known: config.agents.iter().map(|a| a.id.clone()).collect(),
            })?;
            match a.role {
                AgentRole::Coordinator => workers_of(config, session, a)?,
                _ => vec![(a, super::runtime_id_for(config, session, a)?)],
            }
        }
        None => {
            let mut all = Vec::new();
            for a in &config.agents {
                match a.role {
                    AgentRole::Autonomous => all.push((a, super::agent_id(session, &a.id))),
                    AgentRole::Coordinator
                        if config.workflows.iter().any(|w| w.entry_point == a.id) =>
                    {
                        all.extend(workers_of(config, session, a)?)
                    }
                    _ => {}
                }
            }
            all
        }
    };
    let mut passes = Vec::with_capacity(targets.len());
    for (agent, scope) in targets {
        passes.push(run_one(ws, session, agent, &scope, cancel)?);
        if cancel.is_cancelled() {
            break;
        }
    }
    Ok(passes)
}

/// The declared Workers of `coordinator`'s workflow, each with its memory scope.
fn workers_of<'c>(
    config: &'c Config,
    session: &str,
    coordinator: &AgentConfig,
) -> Result<Vec<(&'c AgentConfig, String)>> {
    let flow = config
        .workflows
        .iter()
        .find(|w| w.entry_point == coordinator.id)
        .ok_or_else(|| RuntimeError::AgentRole {
            id: coordinator.id.clone(),
            reason: "a coordinator is consolidated through its workflow's declared workers, and no workflow names it as its entry_point (run `axocoatl validate`)".into(),
        })?;
    Ok(flow
        .workers
        .iter()
        .filter_map(|w| config.agent(w))
        .map(|w| (w, super::worker_id(session, &coordinator.id, &w.id)))
        .collect())
}

/// The start of the last completed consolidation of `agent` in `session` (records retained
/// after it are "recent"), and whether the session exists in the ledger.
fn last_pass(ws: &Workspace, session: &str, agent: &str) -> Result<(Option<Millis>, bool)> {
    let projection = Projection::of(ws.repo(), Scope::Session(session), Want::VIEWS)?;
    let last = projection
        .session_turns(session)
        .filter(|t| t.agent == agent && t.mode == MODE && t.state == ViewState::Completed)
        .map(|t| t.started_at)
        .max();
    Ok((last, projection.sessions.contains_key(session)))
}

fn run_one(
    ws: &Workspace,
    session: &str,
    agent: &AgentConfig,
    scope: &str,
    cancel: &Cancel,
) -> Result<Pass> {
    let repo = ws.repo();
    let memory = AgentMemory::for_id(repo, scope, &agent.memory);
    let skipped = |reason: &str| Pass {
        agent: agent.id.clone(),
        scope: memory.id.clone(),
        result: PassResult::Skipped {
            reason: reason.to_owned(),
        },
    };
    let (since, session_exists) = last_pass(ws, session, &agent.id)?;
    let mut store = memory.semantic(repo)?;
    let records = recent_records(&mut store, since)?;
    if records.is_empty() {
        return Ok(skipped(match since {
            Some(_) => "no semantic records since the last consolidation",
            None => "no semantic records",
        }));
    }
    let blocks = memory.blocks_view()?;
    let resolved = ws.resolve_provider(agent)?;
    let mut lock = take_lock(ws, session)?;
    let (turn, begun_at) = begin(repo, &mut lock, session, session_exists, &agent.id)?;
    let price = ws.config()?.price_of(&resolved);
    let request = request(&resolved.model, agent, prompt(&blocks, &records));
    let mut output = String::new();
    let mut usage = Usage::ZERO;
    let mut detail = UsageDetail::default();
    let mut applied = Vec::new();
    let outcome = call(
        repo,
        (&resolved, price.as_ref()),
        &request,
        (&turn, session),
        agent,
        cancel,
        &mut output,
        (&mut usage, &mut detail),
    );
    let (state, error) = match outcome {
        Err(CallFailed::Cancelled) => (TurnState::Stopped, None),
        Err(CallFailed::Failed(e)) => (TurnState::Failed, Some(e)),
        Ok(()) => match parse_answer(&output) {
            Err(e) => (TurnState::Failed, Some(e)),
            Ok(proposed) => {
                applied = memory.apply_consolidation(&proposed, &turn);
                record_edits(repo, &turn, agent, &proposed, &applied)?;
                (TurnState::Completed, None)
            }
        },
    };
    let mut end = vec![
        Record::AgentOutput(AgentOutput {
            turn: turn.clone(),
            agent: agent.id.clone(),
            text: output.clone(),
            at: clock::now(),
        }),
        Record::TurnEnded(TurnEnded {
            turn: turn.clone(),
            session: session.to_owned(),
            state,
            error: error.clone(),
            usage,
            at: clock::now(),
        }),
    ];
    end.extend(usage_cost(&turn, session, &agent.id, begun_at, detail));
    repo.ledger().append(&end)?;
    crate::session::clear_note(repo, &mut lock)?;
    drop(lock);
    // The ledger holds the pass; the daily log line is activity memory (best effort).
    let summary = summary(state, records.len(), &applied, error.as_deref());
    let _ = memory.log.append(&[LogRecord::new(
        clock::now(),
        LogKind::Consolidation,
        Some(&turn),
        &summary,
    )
    .state(state.as_str())]);
    Ok(Pass {
        agent: agent.id.clone(),
        scope: memory.id.clone(),
        result: PassResult::Ran {
            turn,
            state,
            records: records.len(),
            applied,
            error,
            usage,
        },
    })
}

/// The cache tokens and cost of the pass's call, to follow its `TurnEnded` (none when no
/// call was made).
fn usage_cost(
    turn: &str,
    session: &str,
    agent: &str,
    begun_at: Millis,
    detail: UsageDetail,
) -> Option<Record> {
    (detail.calls > 0).then(|| {
        Record::UsageCost(UsageCost {
            turn: turn.to_owned(),
            session: session.to_owned(),
            agent: agent.to_owned(),
            subtask: None,
            counted_at: begun_at,
            detail,
            at: clock::now(),
        })
    })
}

/// The pass's one model call: the instructions and `prompt`, deterministic, answered in
/// JSON.
fn request(model: &str, agent: &AgentConfig, prompt: String) -> ChatRequest {
    ChatRequest {
        model: model.to_owned(),
        messages: vec![
            Message::new(Role::System, SYSTEM),
            Message::new(Role::User, prompt),
        ],
        tools: Vec::new(),
        sampling: Sampling {
            temperature: Some(0.0),
            top_p: None,
            // The bound a turn of this agent requests and reserves, so a background pass
            // spends no more than a turn may.
            max_tokens: budget::completion_bound(agent),
            response_format: Some(ResponseFormat::Json),
            schema: None,
        },
    }
}

/// Begins the pass as a turn of kind consolidation (the session too, when new) under the
/// session lock `lock`; returns its id.
fn begin(
    repo: &Repo,
    lock: &mut Lock,
    session: &str,
    session_exists: bool,
    agent: &str,
) -> Result<(String, Millis)> {
    let turn = ids::new_id();
    let now = clock::now();
    let (_, head) = repo.ledger().head()?;
    crate::session::set_note(
        repo,
        lock,
        &ActiveNote {
            turn: turn.clone(),
            session: session.to_owned(),
            begin: head,
            pid: std::process::id(),
            waiting: None,
        },
    )?;
    let mut begin = Vec::with_capacity(2);
    if !session_exists {
        begin.push(Record::SessionCreated(SessionCreated {
            session: session.to_owned(),
            at: clock::now(),
        }));
    }
    begin.push(Record::TurnBegun(TurnBegun {
        turn: turn.clone(),
        session: session.to_owned(),
        agent: agent.to_owned(),
        mode: MODE.into(),
        request: REQUEST.into(),
        inline_context: Vec::new(),
        attachments: Vec::new(),
        retry_of: None,
        pid: std::process::id(),
        at: now,
        schema: None,
    }));
    repo.ledger().append(&begin)?;
    Ok((turn, now))
}

/// "completed: read 3 records, 1 edit applied, 0 refused": the daily log's line of a pass.
fn summary(state: TurnState, records: usize, applied: &[Applied], error: Option<&str>) -> String {
    let done = applied
        .iter()
        .filter(|a| matches!(a, Applied::Done(_)))
        .count();
    format!(
        "{}: read {records} record{}, {done} edit{} applied, {} refused{}",
        state.as_str(),
        if records == 1 { "" } else { "s" },
        if done == 1 { "" } else { "s" },
        applied.len() - done,
        error.map(|e| format!(" ({e})")).unwrap_or_default()
    )
}

enum CallFailed {
    Cancelled,
    Failed(String),
}

impl From<ProviderError> for CallFailed {
    fn from(e: ProviderError) -> CallFailed {
        match e {
            ProviderError::Cancelled => CallFailed::Cancelled,
            e => CallFailed::Failed(e.to_string()),
        }
    }
}

/// The one model call of a pass, recorded as a `ModelCallCost` (with its cost by `price`).
#[allow(clippy::too_many_arguments)]
fn call(
    repo: &Repo,
    (resolved, price): (&ResolvedProvider, Option<&crate::config::Price>),
    request: &ChatRequest,
    (turn, session): (&str, &str),
    agent: &AgentConfig,
    cancel: &Cancel,
    output: &mut String,
    (usage, detail): (&mut Usage, &mut UsageDetail),
) -> std::result::Result<(), CallFailed> {
    let mut provider = provider::open(resolved)?;
    let estimate = budget::estimate_request(request, &|t| provider.count_tokens(t));
    let completion_bound = u64::from(request.sampling.max_tokens.unwrap_or(0));
    if let Some(b) = &agent.token_budget {
        if let Some(v) = budget::check(b, &estimate, completion_bound, 0) {
            if budget::enforce(b) {
                return Err(CallFailed::Failed(v.message));
            }
            let message = format!("{} (overflow_policy warn: sent anyway)", v.message);
            warn(repo, turn, session, &message)?;
        }
    }
    let completion = provider.chat(request, cancel, &mut |ev| {
        if let Event::Delta(text) = ev {
            output.push_str(&text);
        }
    })?;
    *usage = completion.usage.usage();
    let cost = price.and_then(|p| crate::cost::call_nanos(p, &completion.usage));
    *detail = UsageDetail {
        calls: 1,
        cache_write_tokens: completion.usage.cache_write_tokens.unwrap_or(0),
        cache_read_tokens: completion.usage.cache_read_tokens.unwrap_or(0),
        priced_calls: u32::from(cost.is_some()),
        cost_nanos: cost.unwrap_or(0),
    };
    let recorded = repo
        .ledger()
        .append_lazy(&[Record::ModelCallCost(ModelCallCost {
            turn: turn.to_owned(),
            agent: agent.id.clone(),
            provider: provider.name().to_owned(),
            model: request.model.clone(),
            reserved_tokens: estimate.total() + completion_bound,
            prompt_tokens: completion.usage.prompt_tokens,
            completion_tokens: completion.usage.completion_tokens,
            cache_write_tokens: completion.usage.cache_write_tokens,
            cache_read_tokens: completion.usage.cache_read_tokens,
            cost_nanos: cost,
            finish_reason: completion.finish_reason.clone(),
            at: clock::now(),
        })]);
    recorded.map_err(|e| CallFailed::Failed(e.to_string()))?;
    // A provider-reported overrun fails the pass as it stops a turn: its edits are not
    // applied.
    if let Some(b) = &agent.token_budget {
        // What the provider did not report is counted as a turn counts it: the input as
        // estimated, the answer's tokens.
        let used = completion.usage.prompt_tokens.unwrap_or(estimate.total())
            + completion.usage.completion_tokens.unwrap_or_else(|| {
                provider
                    .count_tokens(output)
                    .map(|n| n as u64)
                    .unwrap_or_else(|| budget::estimate_text(output))
            });
        if let Some(v) = budget::check_reported(b, used, used) {
            if budget::enforce(b) {
                return Err(CallFailed::Failed(format!(
                    "{}; the pass applied none of its edits",
                    v.message
                )));
            }
            warn(repo, turn, session, &v.message)?;
        }
    }
    Ok(())
}

/// Records a budget warning of the pass's turn.
fn warn(
    repo: &Repo,
    turn: &str,
    session: &str,
    message: &str,
) -> std::result::Result<(), CallFailed> {
    let record = Record::Warning(Warning {
        turn: Some(turn.to_owned()),
        session: session.to_owned(),
        code: "budget".to_owned(),
        message: message.to_owned(),
        at: clock::now(),
    });
    repo.ledger()
        .append_lazy(&[record])
        .map(|_| ())
        .map_err(|e| CallFailed::Failed(e.to_string()))
}

/// Each proposed edit as a tool start and result of the turn, as `show` displays tools.
fn record_edits(
    repo: &Repo,
    turn: &str,
    agent: &AgentConfig,
    proposed: &[ProposedEdit],
    applied: &[Applied],
) -> Result<()> {
    let mut records = Vec::with_capacity(2 * applied.len());
    for (i, (p, a)) in proposed.iter().zip(applied).enumerate() {
        let (name, args) = match (&p.append, &p.old, &p.new) {
            (Some(text), _, _) => (
                "core_memory_append",
                json!({"label": p.label, "content": text}),
            ),
            _ => (
                "core_memory_replace",
                json!({"label": p.label, "old": p.old, "new": p.new}),
            ),
        };
        let (is_error, text) = match a {
            Applied::Done(d) => (
                false,
                format!(
                    "block {:?} now holds {} of its {} characters",
                    d.label, d.chars, d.limit
                ),
            ),
            Applied::Refused { reason, .. } => (true, reason.clone()),
        };
        let call_id = format!("consolidate_{i}");
        records.push(Record::ToolStarted(ToolStarted {
            turn: turn.to_owned(),
            agent: agent.id.clone(),
            call_id: call_id.clone(),
            name: name.to_owned(),
            arguments: crate::bounded::bound(repo.objects(), &args.to_string())?,
            at: clock::now(),
        }));
        records.push(Record::ToolResult(ToolResult {
            turn: turn.to_owned(),
            agent: agent.id.clone(),
            call_id,
            name: name.to_owned(),
            is_error,
            output: crate::bounded::bound(repo.objects(), &text)?,
            at: clock::now(),
        }));
    }
    repo.ledger().append_lazy(&records)?;
    Ok(())
}

/// Takes the session's turn lock, waiting as long as `send` does.
fn take_lock(ws: &Workspace, session: &str) -> Result<Lock> {
    let mut lock = crate::session::lock(
        ws.repo(),
        session,
        crate::session::Wait::Briefly,
        "consolidate",
    )?;
    if let Some(orphan) = ActiveNote::decode(&lock.read_note()?) {
        crate::session::interrupt_if_open(ws.repo(), &orphan)?;
    }
    Ok(lock)
}

/// The semantic records retained after `since` (all when `None`), oldest first, at most
/// [`MAX_RECORDS`] (the newest).
fn recent_records(store: &mut SemanticStore, since: Option<Millis>) -> Result<Vec<Hit>> {
    store.recent(since, MAX_RECORDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use crate::memory::semantic::{Source, SourceKind};
    use axocoatl_store::Repo;

    #[test]
    fn answers_parse_with_fences_and_refuse_other_shapes() {
        let edits = parse_answer(
            "Sure!\n```json\n{\"edits\": [{\"label\": \"human\", \"append\": \"Likes tea.\"}]}\n```",
        )
        .expect("parse");
        assert_eq!(edits.len(), 1);
        assert_eq!(edits[0].append.as_deref(), Some("Likes tea."));
        assert!(parse_answer("nothing to do").is_err());
        assert!(parse_answer("{\"edits\": [{\"label\": \"h\", \"delete\": \"x\"}]}").is_err());
        assert_eq!(parse_answer("{\"edits\": []}").expect("empty"), []);
    }

    #[test]
    fn only_promotions_are_applied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = axocoatl_store::repo::init(dir.path()).expect("init");
        let repo = Repo::open(&root, &Default::default()).expect("open");
        let m = AgentMemory::for_id(&repo, "main:a", &MemoryConfig::default());
        m.edit("human", CoreEdit::Set("Name: Ada."), None)
            .expect("set");
        let p = |label: &str, append: Option<&str>, old: Option<&str>, new: Option<&str>| {
            ProposedEdit {
                label: label.into(),
                append: append.map(Into::into),
                old: old.map(Into::into),
                new: new.map(Into::into),
            }
        };
        let applied = m.apply_consolidation(
            &[
                p("human", Some("Likes tea."), None, None),
                p("human", None, Some("Ada"), Some("Ada Lovelace")),
                p("human", None, Some("Likes tea."), Some("")),
                p("human", Some("x"), Some("y"), None),
                p("nope", Some("x"), None, None),
            ],
            "t1",
        );
        let refused: Vec<String> = applied
            .iter()
            .filter_map(|a| match a {
                Applied::Refused { reason, .. } => Some(reason.clone()),
                Applied::Done(_) => None,
            })
            .collect();
        assert_eq!(refused.len(), 3, "{refused:?}");
        assert!(refused[0].contains("delete"));
        assert!(refused[2].contains("no core memory block"));
        assert_eq!(
            m.core.get("human", false).expect("get"),
            "Name: Ada Lovelace.\nLikes tea."
        );
        let blocks = m.blocks_view().expect("blocks");
        let text = prompt(
            &blocks,
            &[Hit {
                id: 0,
                score: 1.0,
                text: "User: I like tea".into(),
                source: Source {
                    turn: None,
                    kind: SourceKind::Exchange,
                    at: 0,
                },
            }],
        );
        assert!(text.contains("<block label=\"human\" chars=\"30\" limit=\"2000\">\nName: Ada Lovelace.\nLikes tea.\n</block>"), "{text}");
        assert!(text.contains("<record at=\"1970-01-01T00:00:00.000Z\" source=\"exchange\">\nUser: I like tea\n</record>"));
    }
}
