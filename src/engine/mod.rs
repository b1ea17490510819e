//! The turn engine: one `send` from a durable begin to exactly one terminal record.
//!
//! # The pipeline
//!
//! A turn is four steps, each a module with one entry function:
//!
//! 1. [`prepare`] (`prepare::prepare`): resolve the agent and its provider, take the
//!    session's turn lock (settling an orphan it names), project the session once for its
//!    conversation and attachment selection, bound the inline context and render the user
//!    message. Nothing is durable yet: an error here means the turn never began.
//! 2. [`begin`] (`begin::begin`): note the turn in the lock file, append `TurnBegun`
//!    (fsync), consume once-scoped attachments, report `TurnEvent::Begun`.
//! 3. [`converse`] (`converse::converse`): for one conversing agent, loop
//!    *build request* (system prompt + context sections + trimmed conversation + tool
//!    schemas) → *budget check* (estimate, reserve, refuse or warn) → *call and record*
//!    (stream, append `ModelCallCost`, in-flight checkpoint) → *run tools* (dispatch each call
//!    through the toolbox, append `ToolStarted`/`ToolFinished`), until an answer without
//!    tool calls, a budget stop, a stop request or the agent's `max_steps`.
//! 4. [`finish`] (`finish::finish`): append the output and exactly one `TurnEnded`
//!    (fsync), write the checkpoint, tell observers, clear the lock note.
//!
//! Records between begin and end are appended without waiting for the disk: the terminal
//! record's flush covers them, and a crash before it leaves a turn that recovery marks
//! interrupted. A stop request from any process (a ledger record, looked for by
//! [`watcher`]) or Ctrl-C cancels the provider stream within ~100 ms.
//!
//! # The path of one `send`, from the command line to the bytes
//!
//! Every name below is a link, so `cargo doc` fails when one moves (the command line's
//! part lives in the binary, which `cargo doc` does not document: `cmd/send.rs` names it).
//!
//! 1. `cmd/main.rs` `parse` (clap, against only the `send` subtree) → `dispatch` →
//!    `cmd/send.rs` `run`: `read_input` (the argument and piped stdin), `GlobalArgs::open`
//!    → [`Workspace::open`]: the store's [`Repo::open`] checks the format marker;
//!    [`session::recover_orphans`] reads the lock notes of the sessions marked in
//!    `run/active/` (of every session lock in a repository without that directory);
//!    [`rewind::repair_pending`]. Then [`Workspace::session_or_head`] and `run_turn` →
//!    [`send`] → [`send_held`].
//! 2. [`prepare::attach_files`] records the files given with `--attach`, then
//!    [`prepare::prepare`]: [`resolve_agent`], [`Workspace::resolve_provider`],
//!    [`session::lock`] (a `flock` on `run/sessions/<session>.lock`; the turn's note goes
//!    into it after an empty mark `run/active/<session>.lock`, both cleared, note first,
//!    when the turn ends), [`session::interrupt_if_open`] for an orphan the lock names,
//!    [`Projection::of`] of its [`Scope::Session`] (this session's records, through the
//!    indexes),
//!    [`conversation::current`] (the newest valid checkpoint through
//!    [`checkpoint::load_one`], or a rebuild from the ledger), [`attach::check_selection`],
//!    [`attach::user_message`], [`attach::check_images`], [`bound`] (long context goes to
//!    objects).
//! 3. [`begin::begin`]: [`session::set_note`], [`Ledger::append`] of `TurnBegun` (the first
//!    `fdatasync`), [`attach::consume`], [`TurnEvent::Begun`].
//! 4. [`finish::run`] → [`provider::open`], [`converse::Conversant::for_agent`] (its
//!    [`Toolbox::new`], its context sources [`converse::CoreMemory`] and
//!    [`PassiveRecall`](crate::memory::turn::PassiveRecall)) → [`converse::converse`]; each
//!    round [`converse::build_request`] → [`converse::check_budget`]
//!    ([`budget::estimate_request`], [`budget::check`]) and [`converse::check_cost_budget`]
//!    ([`cost::budget::check`](crate::cost::budget::check)) → [`converse::call_and_record`]
//!    ([`Provider::chat`] streams [`TurnEvent::Delta`] to the command's printer;
//!    [`Ledger::append_lazy`] of `ModelCallCost`; [`converse::checkpoint_in_flight`]) →
//!    [`converse::run_tools`] ([`Toolbox::call`]; `ToolStarted`/`ToolFinished` appended
//!    lazily) → [`converse::observe_exchange`]. Meanwhile [`watcher::stop_requested`] looks
//!    for a stop record every 20 ms through the [`Cancel`] probe.
//! 5. [`finish::finish`]: [`Ledger::append`] of `AgentOutput` (or `AgentOutputBounded`),
//!    `TurnEnded` and `UsageCost` (the second `fdatasync`), [`Conversation::after_turn`],
//!    [`checkpoint::write`] (the store's [`write_atomic`]), [`finish::observe_turn`],
//!    [`session::clear_note`].
//! 6. The bytes: [`Ledger::append`] takes `run/ledger.lock`, frames each record
//!    (`frame::encode_frame`, linked from the [ledger's own documentation](axocoatl_store::ledger):
//!    length, sequence, CRCs, kind, the postcard body of a [`Record`] from the one record
//!    table), writes to the newest segment and flushes after releasing
//!    the lock.
//! 7. Back in `cmd/send.rs`, `Printer::finish` prints `turn.ended` (or the closing line) and
//!    `exit::for_turn` gives the exit code; an error anywhere is a
//!    [`RuntimeError`] whose [`kind`](RuntimeError::kind) `exit::code` maps.
//!
//! # Seams
//!
//! - **Tools**: the run-tools step only calls [`Toolbox::call`] on the conversant's
//!   toolbox ([`converse::Conversant::toolbox`]: the registry's tools its allowlist or
//!   sandbox baseline names, and its MCP servers' tools). A running tool gets a
//!   [`crate::tools::Context`] with the workspace root, the sandbox, the conversant's memory
//!   and the turn's cancellation handle; a result carries `exit_code` and the call's
//!   duration besides text and `is_error`, recorded as `ToolFinished`.
//! - **Memory**: the build-request step appends the [`crate::turn::ContextSection`]s of
//!   [`converse::Conversant::context`] ([`crate::turn::ContextSource`]s: core memory and
//!   passive recall) to the system prompt, so the budget estimate counts their text; their
//!   warnings (a block cut to its limit) are the turn's, once.
//!   [`converse::Conversant::observers`] ([`crate::turn::TurnObserver`]) hear each exchange
//!   (after a response and its tool results) and the finished turn (after its terminal
//!   record): the daily log and semantic writes go there. A failing source or observer
//!   is a warning of the turn, never its failure.
//! - **serve**: [`send_held`] takes an actor's in-memory [`Conversation`] (used while it
//!   is current, else reloaded from the checkpoint or the ledger) and returns the updated
//!   one, so an actor runs turns without reloading its checkpoint.
//! - **Automations**: [`SendOptions::origin`] carries an automation's occurrence (id,
//!   scheduled time, trigger, runner) to the begin step, which records it as `TurnOrigin`
//!   in the same durable append as `TurnBegun`.
//! - **Coordinators and multi-agent sessions**: converse takes the conversing agent as a
//!   parameter ([`converse::Conversant`]: its config, memory tiers under its runtime id,
//!   workspace, model, sampling, budget, `max_steps`, toolbox, context sources and
//!   observers) with its own provider, so one coordinator turn runs several worker
//!   converses ([`coordinate`], the plan rules in [`crate::team`]), each under
//!   `{session}:{coordinator}:worker:{worker}`, and a multi-agent turn one per answering
//!   agent ([`multi`]), inside the one begin/finish of the turn.
//!
//! [`Workspace::open`]: crate::workspace::Workspace::open
//! [`Workspace::session_or_head`]: crate::workspace::Workspace::session_or_head
//! [`Workspace::resolve_provider`]: crate::workspace::Workspace::resolve_provider
//! [`Repo::open`]: axocoatl_store::Repo::open
//! [`session::recover_orphans`]: crate::session::recover_orphans
//! [`session::lock`]: crate::session::lock
//! [`session::interrupt_if_open`]: crate::session::interrupt_if_open
//! [`session::set_note`]: crate::session::set_note
//! [`session::clear_note`]: crate::session::clear_note
//! [`rewind::repair_pending`]: crate::rewind::repair_pending
//! [`Projection::of`]: Projection::of
//! [`Scope::Session`]: Scope::Session
//! [`conversation::current`]: crate::conversation::current
//! [`checkpoint::load_one`]: crate::checkpoint::load_one
//! [`checkpoint::write`]: crate::checkpoint::write
//! [`attach::check_selection`]: crate::attach::check_selection
//! [`attach::user_message`]: crate::attach::user_message
//! [`attach::check_images`]: crate::attach::check_images
//! [`attach::consume`]: crate::attach::consume
//! [`Ledger::append`]: axocoatl_store::ledger::Ledger::append
//! [`Ledger::append_lazy`]: axocoatl_store::ledger::Ledger::append_lazy
//! [`Record`]: axocoatl_store::ledger::Record
//! [`write_atomic`]: axocoatl_store::fsutil::write_atomic
//! [`provider::open`]: crate::provider::open
//! [`Provider::chat`]: crate::provider::Provider::chat
//! [`Toolbox::new`]: crate::tools::Toolbox::new
//! [`Toolbox::call`]: crate::tools::Toolbox::call
//! [`budget::estimate_request`]: crate::budget::estimate_request
//! [`budget::check`]: crate::budget::check
//! [`Conversation::after_turn`]: crate::conversation::Conversation::after_turn
//! [`RuntimeError`]: crate::error::RuntimeError

mod begin;
pub mod converse;
mod coordinate;
mod finish;
mod held;
mod multi;
mod prepare;
mod record;
mod resume;
mod stream;
mod structured;
mod wait;
mod watcher;

use std::path::PathBuf;

use axocoatl_store::ledger::record::AttachmentPin;

use crate::config::{AgentConfig, AgentRole, Config};
use crate::conversation::Conversation;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, Want};
use crate::provider::Cancel;
use crate::workspace::Workspace;

pub use crate::attach::render_user_message;
pub use crate::overrides::Overrides;
pub use crate::session::BUSY_WAIT;
pub use crate::turn::{TurnEvent, TurnOrigin, TurnOutcome};
pub use record::{bound, INLINE_LIMIT};
pub use structured::{schema_of, TurnSchema};

/// What to send.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    pub session: String,
    pub agent: Option<String>,
    pub message: String,
    /// Labelled inline context, e.g. `("stdin", text)`.
    pub inline_context: Vec<(String, String)>,
    pub attachments: Attachments,
    /// Files to attach (once-scoped) for this turn first, as `send --attach` does; they are
    /// taken out of the selection again when the turn does not begin.
    pub attach_files: Vec<PathBuf>,
    pub retry_of: Option<String>,
    /// Queue behind an active turn instead of failing after [`BUSY_WAIT`].
    pub wait: bool,
    /// The automation occurrence that started this turn (none: a person sent it).
    pub origin: Option<TurnOrigin>,
    /// This turn's own model, system prompt and sampling (`send -m/--system/-o`).
    pub overrides: Overrides,
    /// The JSON Schema the reply must match (`send --schema`, a retried turn's); `None`:
    /// the agent's `output_schema:`, if it has one.
    pub schema: Option<crate::schema::Schema>,
    /// How many times a reply that breaks the schema is asked for again; `None`: the
    /// agent's `schema_retries:`, else 0.
    pub schema_retries: Option<u32>,
    /// Continue this turn, which waited for approval and whose held calls are all
    /// decided, instead of beginning one (`approve`); `session` and `agent` are its own,
    /// the other options are not used.
    pub resume: Option<String>,
    /// A person is asked about held calls at once (a terminal prompt follows a pause), so
    /// `on_approval_request:` is not run.
    pub ask_at_once: bool,
    /// The directory the turn's tools work in, when the caller chose it (a command sent
    /// through `serve` from the home repository: the directory it ran in); else the
    /// workspace's own ([`Workspace::tools_dir`]).
    pub workdir: Option<PathBuf>,
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
        AgentRole::Coordinator => match crate::team::plan::workflow_of(config, &agent.id) {
            Some(_) => Ok(agent),
            None => Err(RuntimeError::AgentRole {
                id: agent.id.clone(),
                reason: "a coordinator runs only as the entry_point of a workflow, and none names it (run `axocoatl validate`)".into(),
            }),
        },
    }
}

/// Runs one turn.
pub fn send(
    ws: &Workspace,
    opts: SendOptions,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<TurnOutcome> {
    send_held(ws, opts, None, cancel, sink).map(|(outcome, _)| outcome)
}

/// Runs one turn from `held`, an actor's in-memory conversation (used only while it is
/// current), and returns the conversation after the turn with the outcome.
pub fn send_held(
    ws: &Workspace,
    opts: SendOptions,
    held: Option<Conversation>,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<(TurnOutcome, Conversation)> {
    if let Some(turn) = opts.resume.clone() {
        return resume::resume(ws, &turn, opts.ask_at_once, held, cancel, sink);
    }
    let patched = patched_agent(ws, &opts)?;
    let added = prepare::attach_files(ws, &opts, cancel, sink)?;
    let started =
        prepare::prepare(ws, opts, held, patched.as_ref(), sink).and_then(|mut prepared| {
            let begun = begin::begin(ws, &mut prepared, sink)?;
            Ok((prepared, begun))
        });
    match started {
        Ok((prepared, begun)) => finish::run(ws, prepared, begun, cancel, sink),
        Err(e) => {
            prepare::withdraw(ws, &added, sink);
            Err(e)
        }
    }
}

/// Checks that `overrides` apply to `agent` (the default agent when `None`): what a
/// command runs before it changes anything (`send -n` makes a session, `chat` starts
/// reading lines).
pub fn check_overrides(ws: &Workspace, agent: Option<&str>, overrides: &Overrides) -> Result<()> {
    let opts = SendOptions {
        agent: agent.map(str::to_owned),
        overrides: overrides.clone(),
        ..SendOptions::default()
    };
    patched_agent(ws, &opts).map(|_| ())
}

/// The agent the turn goes to with its per-call overrides applied (checked before anything
/// is attached or locked); `None` without overrides.
fn patched_agent(ws: &Workspace, opts: &SendOptions) -> Result<Option<AgentConfig>> {
    if opts.overrides.is_empty() {
        return Ok(None);
    }
    let config = ws.config()?;
    let agent = resolve_agent(config, opts.agent.as_deref())?;
    let patched = opts.overrides.apply(config, agent)?;
    // The provider it now names must resolve (a model it needs, a known entry).
    ws.resolve_provider(&patched)?;
    Ok(Some(patched))
}

/// A new turn repeating the request of turn `prefix` (refused when it used attachments:
/// substituting the current selection would silently change the request), with the
/// original's overrides and `overrides` laid over them.
pub fn retry_options(
    ws: &Workspace,
    prefix: &str,
    wait: bool,
    overrides: &Overrides,
) -> Result<SendOptions> {
    let projection = Projection::of(ws.repo(), Scope::Prefix(prefix), Want::VIEWS)?;
    let original = projection.resolve(prefix)?;
    if let Some((_, name)) = ws.names()?.removed(&original.session) {
        return Err(RuntimeError::Refused {
            message: format!(
                "turn {} belongs to session {name:?}, which was removed (`sessions rm`); a retry would write into a session no listing shows",
                original.turn
            ),
            hint: crate::error::Next::say(
                "send its request again in a current session (the turn still shows it)",
            ),
        });
    }
    let workdir = original.workdir.as_ref().map(PathBuf::from);
    if let Some(dir) = workdir.as_ref().filter(|d| !d.is_dir()) {
        return Err(RuntimeError::Refused {
            message: format!(
                "turn {} worked in {}, which is no longer a directory; a retry would run its tools elsewhere",
                original.turn,
                dir.display()
            ),
            hint: crate::error::Next::say("send the request again from the directory to work in"),
        });
    }
    let n = original.attachments.len();
    if n > 0 {
        return Err(RuntimeError::Refused {
            message: format!(
                "turn {} used {n} attachment{}; retry would silently change the request",
                original.turn,
                if n == 1 { "" } else { "s" }
            ),
            hint: "attach the files again and send a new turn".into(),
        });
    }
    let (schema, schema_retries) = match &original.schema {
        Some(used) => {
            let (schema, retries) = structured::stored(ws, used)?;
            (Some(schema), Some(retries))
        }
        None => (None, None),
    };
    Ok(SendOptions {
        session: original.session.clone(),
        agent: Some(original.agent.clone()),
        message: original.request.clone(),
        inline_context: crate::conversation::inline_context(ws.repo(), original)?,
        attachments: Attachments::Pinned(Vec::new()),
        retry_of: Some(original.turn.clone()),
        wait,
        overrides: original
            .overrides
            .clone()
            .unwrap_or_default()
            .merged(overrides),
        schema,
        schema_retries,
        // The same request in the same place: a home repository's turn is retried in the
        // directory it worked in, wherever the retry is typed.
        workdir,
        ..SendOptions::default()
    })
}
