//! Step 1, prepare: everything a turn needs before it begins. Nothing here is durable except
//! the files `send --attach` adds (taken back by [`withdraw`] when the turn does not begin)
//! and a checkpoint repair, which is a cache.

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{
    AgentActivation, AttachmentPin, AttachmentScope, InlineContext,
};
use axocoatl_store::ledger::{Damaged, MAX_PAYLOAD};
use axocoatl_store::lock::Lock;

use super::{resolve_agent, Attachments, SendOptions};
use crate::attach;
use crate::config::{AgentConfig, CheckpointPolicy, ResolvedProvider};
use crate::conversation::{self, Conversation};
use crate::error::{size_text, Result, RuntimeError};
use crate::history::{Projection, Scope, TurnView, ViewState, Want};
use crate::provider::{Cancel, Message};
use crate::session::{self, ActiveNote, Wait};
use crate::team::lattice;
use crate::turn::{TurnEvent, TurnOrigin};
use crate::workspace::Workspace;

/// The longest request a turn records: the begin record must fit in one ledger record with
/// room left for its bounded context and attachment pins.
pub const MESSAGE_LIMIT: usize = MAX_PAYLOAD - (1 << 20);

/// A turn ready to begin: its session is locked and its request is complete.
pub(crate) struct Prepared<'w> {
    pub session: String,
    /// The session has no record yet: the begin step creates it.
    pub new_session: bool,
    pub agent: &'w AgentConfig,
    pub provider: ResolvedProvider,
    pub lock: Lock,
    /// The agent's conversation before this turn.
    pub conversation: Conversation,
    /// The retained turns whose messages `conversation` holds (its newest ones), oldest
    /// first.
    pub conversation_turns: Vec<String>,
    /// The session's turns a rewind superseded.
    pub superseded: Vec<String>,
    /// This turn's user message as the model reads it (with image bytes).
    pub user: Message,
    pub request: String,
    pub inline: Vec<InlineContext>,
    pub attachments: Vec<AttachmentPin>,
    /// The once-scoped references among `attachments`, which the turn consumes.
    pub once: Vec<String>,
    pub retry_of: Option<String>,
    /// The automation occurrence that started it.
    pub origin: Option<TurnOrigin>,
    /// What the sender changed for this turn (recorded with its begin).
    pub overrides: crate::overrides::Overrides,
    /// A turn of a multi-agent session: who answers, and why.
    pub multi: Option<Multi<'w>>,
    /// The JSON Schema the reply must match.
    pub schema: Option<super::TurnSchema>,
    /// The tools and rules this session approved for good (`always`), and the turn that
    /// did.
    pub always: Vec<(String, String, String)>,
    /// A person is asked about held calls at once: `on_approval_request:` is not run.
    pub ask_at_once: bool,
    /// The directory the turn's tools work in (recorded with its begin).
    pub workdir: std::path::PathBuf,
}

/// A turn of a multi-agent session, as the lattice activation rule decided it.
pub(crate) struct Multi<'w> {
    /// Every agent's verdict, in the session's listing order.
    pub decisions: Vec<lattice::Decision>,
    /// The agents that answer, in order, with why.
    pub answering: Vec<(&'w AgentConfig, String)>,
}

/// Prepares the turn `opts` asks for, from `held` when an actor keeps the conversation.
/// `patched` is the agent with this turn's overrides applied, when it has some.
pub(crate) fn prepare<'w>(
    ws: &'w Workspace,
    opts: SendOptions,
    held: Option<Conversation>,
    patched: Option<&'w AgentConfig>,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<Prepared<'w>> {
    check_request(&opts.message)?;
    check_session_name(&opts.session)?;
    // An explicit agent of a multi-agent session is checked against its members below.
    let (mut agent, mut provider) = match patched {
        Some(agent) => (agent, ws.resolve_provider(agent)?),
        None => target(ws, opts.agent.as_deref())?,
    };
    let mut lock = lock_session(ws, &opts.session, opts.wait, sink)?;
    // We hold the lock, so any turn its note names has lost its owner.
    if let Some(orphan) = ActiveNote::decode(&lock.read_note()?) {
        session::interrupt_if_open(ws.repo(), &orphan)?;
    }
    let projection = Projection::of(ws.repo(), Scope::Session(&opts.session), Want::VIEWS)?;
    refuse_while_waiting(&projection, &opts.session)?;
    let multi = match projection.session_agents.get(&opts.session) {
        Some(_) if patched.is_some() => return Err(RuntimeError::NotSupported(
            "a per-call model, system prompt or option (-m, --system, -o) in a multi-agent session"
                .into(),
        )),
        Some(members) => Some(decide(ws, &opts, members, &projection)?),
        None => None,
    };
    if let Some((first, _)) = multi.as_ref().and_then(|m| m.answering.first()) {
        (agent, provider) = target(ws, Some(&first.id))?;
    }
    let schema = super::structured::for_turn(ws, agent, &opts, multi.is_some())?;
    if let Some((a, _)) = multi
        .iter()
        .flat_map(|m| &m.answering)
        .find(|(a, _)| a.approvals.asks())
    {
        return Err(RuntimeError::NotSupported(format!(
            "approvals (agent {:?}) in a multi-agent session",
            a.id
        )));
    }
    let always = super::wait::granted(&projection, &opts.session);
    let state = load_session(ws, &opts, agent, held, projection, multi.is_some())?;
    warn_damaged(&state.damaged, state.conversation.rebuilt, sink);
    let mut user = attach::user_message(
        ws.repo(),
        &opts.message,
        &opts.inline_context,
        &state.attachments,
        true,
    )?;
    // Read (and verified) before the turn begins, so a damaged object or an image for a
    // provider that cannot read images refuses the turn instead of failing it.
    attach::check_images(ws.repo(), &mut user, &state.attachments, &provider)?;
    let inline = opts
        .inline_context
        .iter()
        .map(|(label, text)| {
            Ok(InlineContext {
                label: label.clone(),
                text: super::bound(ws.repo().objects(), text)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Prepared {
        session: opts.session,
        new_session: state.new_session,
        agent,
        provider,
        lock,
        conversation: state.conversation,
        conversation_turns: state.conversation_turns,
        superseded: state.superseded,
        user,
        request: opts.message,
        inline,
        attachments: state.attachments,
        once: state.once,
        retry_of: opts.retry_of,
        origin: opts.origin,
        overrides: opts.overrides,
        multi,
        schema,
        always,
        ask_at_once: opts.ask_at_once,
        workdir: match opts.workdir {
            Some(dir) => dir,
            None => ws.tools_dir()?,
        },
    })
}

/// A session whose turn waits for approval takes no other turn: the ledger says so even
/// when the lock's note was lost (a power cut).
fn refuse_while_waiting(projection: &Projection, session: &str) -> Result<()> {
    match projection
        .session_turns(session)
        .find(|t| t.state == ViewState::Waiting)
    {
        Some(t) => Err(RuntimeError::HeldForApproval {
            session: session.to_owned(),
            turn: t.turn.clone(),
            command: "send",
        }),
        None => Ok(()),
    }
}

/// Applies the lattice activation rule (`crate::team::lattice`) to a turn of a
/// multi-agent session: each member's previous activation (from the session's last
/// decision), its threshold and decay, and the request's relevance to its id, name, prompt
/// and latest outputs. `send -a` picks one member to answer alone.
fn decide<'w>(
    ws: &'w Workspace,
    opts: &SendOptions,
    members: &[String],
    projection: &crate::history::Projection,
) -> Result<Multi<'w>> {
    let config = ws.config()?;
    let turns: Vec<&TurnView> = projection.session_turns(&opts.session).collect();
    let previous = turns
        .iter()
        .rev()
        .find(|t| !t.activation.is_empty())
        .map(|t| t.activation.clone())
        .unwrap_or_default();
    let mut agents = Vec::with_capacity(members.len());
    let mut candidates = Vec::with_capacity(members.len());
    for id in members {
        let agent = config.agent(id).ok_or_else(|| RuntimeError::Invalid {
            message: format!(
                "agent {id:?} of multi-agent session {:?} is no longer in the configuration",
                opts.session
            ),
            hint: format!(
                "add agent {id:?} back to {}, or start a new session",
                ws.config_path().display()
            )
            .into(),
        })?;
        candidates.push(candidate(agent, &turns, &previous, &opts.message));
        agents.push(agent);
    }
    let mut decisions = lattice::decide(&candidates, &opts.message);
    if let Some(chosen) = opts.agent.as_deref() {
        choose(&mut decisions, chosen, members, &opts.session)?;
    }
    let mut order: Vec<(usize, usize)> = decisions
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.order.map(|o| (o, i)))
        .collect();
    order.sort_unstable();
    let answering = order
        .into_iter()
        .map(|(_, i)| (agents[i], decisions[i].reason.clone()))
        .collect();
    Ok(Multi {
        decisions,
        answering,
    })
}

/// `agent` as the lattice rule sees it for `message`: its activation before this turn and
/// the request's relevance to its id, name, prompt and last three outputs.
fn candidate(
    agent: &AgentConfig,
    turns: &[&TurnView],
    previous: &[AgentActivation],
    message: &str,
) -> lattice::Candidate {
    let mut profile = format!(
        "{} {} {}",
        agent.id,
        agent.name.as_deref().unwrap_or(""),
        agent.system_prompt.as_deref().unwrap_or("")
    );
    let recent = turns
        .iter()
        .rev()
        .flat_map(|t| t.outputs.iter())
        .filter(|(a, _)| *a == agent.id);
    for (_, text) in recent.take(3) {
        profile.push('\n');
        profile.push_str(text);
    }
    lattice::Candidate {
        agent: agent.id.clone(),
        depends_on: agent.depends_on.clone(),
        threshold: agent
            .activation_threshold
            .unwrap_or(lattice::DEFAULT_THRESHOLD),
        decay: agent.activation_decay.unwrap_or(lattice::DEFAULT_DECAY),
        previous: previous
            .iter()
            .find(|a| a.agent == agent.id)
            .map(|a| lattice::from_milli(a.activation))
            .unwrap_or(0.0),
        relevance: lattice::relevance(message, &profile),
    }
}

/// `-a chosen` in a multi-agent session: that member alone answers (a non-member is refused).
fn choose(
    decisions: &mut [lattice::Decision],
    chosen: &str,
    members: &[String],
    session: &str,
) -> Result<()> {
    if !members.iter().any(|m| m == chosen) {
        return Err(RuntimeError::Invalid {
            message: format!(
                "agent {chosen:?} is not an agent of multi-agent session {session:?} ({})",
                members.join(", ")
            ),
            hint: "leave out -a to let the activation rule choose, or mention an agent as @agent"
                .into(),
        });
    }
    for d in decisions.iter_mut() {
        let picked = d.agent == chosen;
        d.order = picked.then_some(0);
        d.reason = if picked {
            "answered: chosen with -a".into()
        } else {
            "did not answer: another agent was chosen with -a".into()
        };
    }
    Ok(())
}

/// Takes the session's turn lock: waiting up to `BUSY_WAIT`, or with `queue` for as long as
/// the active turn runs (saying which turn it waits for).
fn lock_session(
    ws: &Workspace,
    session: &str,
    queue: bool,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<Lock> {
    if !queue {
        return session::lock(ws.repo(), session, Wait::Briefly, "send");
    }
    match session::lock(ws.repo(), session, Wait::No, "send") {
        Ok(lock) => Ok(lock),
        Err(RuntimeError::Busy { turn, .. }) => {
            sink(TurnEvent::Waiting {
                session: session.into(),
                turn: turn.as_deref().map(Into::into),
            });
            session::lock(ws.repo(), session, Wait::Queue, "send")
        }
        Err(RuntimeError::HeldForApproval { turn, .. }) => {
            sink(TurnEvent::Waiting {
                session: session.into(),
                turn: Some(turn.as_str().into()),
            });
            session::lock(ws.repo(), session, Wait::Queue, "send")
        }
        Err(e) => Err(e),
    }
}

/// Refuses what cannot be recorded, before anything else happens.
fn check_request(message: &str) -> Result<()> {
    if message.len() > MESSAGE_LIMIT {
        return Err(RuntimeError::Invalid {
            message: format!(
                "the message is {}; a message can be at most {}",
                size_text(message.len() as u64),
                size_text(MESSAGE_LIMIT as u64)
            ),
            hint: crate::error::Next::PipeTheText,
        });
    }
    Ok(())
}

/// The agent a turn goes to and its provider.
fn target<'w>(
    ws: &'w Workspace,
    explicit: Option<&str>,
) -> Result<(&'w AgentConfig, ResolvedProvider)> {
    let config = ws.config()?;
    let agent = resolve_agent(config, explicit)?;
    let resolved = ws.resolve_provider(agent)?;
    Ok((agent, resolved))
}

/// What one projection of the session says, under the session lock.
struct SessionState {
    new_session: bool,
    conversation: Conversation,
    conversation_turns: Vec<String>,
    superseded: Vec<String>,
    attachments: Vec<AttachmentPin>,
    once: Vec<String>,
    /// Records of the session that could not be read.
    damaged: Vec<Damaged>,
}

fn load_session(
    ws: &Workspace,
    opts: &SendOptions,
    agent: &AgentConfig,
    held: Option<Conversation>,
    projection: crate::history::Projection,
    multi: bool,
) -> Result<SessionState> {
    let repo = ws.repo();
    let turns: Vec<&TurnView> = projection.session_turns(&opts.session).collect();
    let conversation = if multi {
        // The session's shared conversation: every retained turn, each with the answers of
        // all its agents.
        conversation::group(repo, &turns)?
    } else {
        conversation::current(repo, &opts.session, &agent.id, &turns, held)?
    };
    let conversation_turns = turns
        .iter()
        .filter(|t| (multi || t.agent == agent.id) && conversation::retained(t))
        .map(|t| t.turn.clone())
        .collect();
    let superseded = turns
        .iter()
        .filter(|t| t.superseded)
        .map(|t| t.turn.clone())
        .collect();
    let attachments = match &opts.attachments {
        Attachments::Selection => projection.attachments.selection(&opts.session),
        Attachments::Pinned(pins) => pins.clone(),
    };
    // Under the lock: the pins must still be selected (a concurrent turn may have consumed one).
    let once = attach::check_selection(&projection.attachments, &opts.session, &attachments)?;
    let config = ws.config()?;
    if !multi
        && conversation.rebuilt
        && !turns.is_empty()
        && config.checkpoint.policy != CheckpointPolicy::Never
    {
        // The cache was missing, corrupt or stale (e.g. after a rewind): repair it from the
        // ledger before serving. A session with no turns yet has nothing to cache: the turn's
        // end writes its first checkpoint.
        let (seq, _) = repo.ledger().head()?;
        let keep = config.checkpoint.keep;
        conversation::write(repo, &opts.session, &agent.id, &conversation, seq, keep);
    }
    Ok(SessionState {
        new_session: !projection.sessions.contains_key(&opts.session),
        conversation,
        conversation_turns,
        superseded,
        attachments,
        once,
        damaged: projection.problems,
    })
}

/// Says (every time) that records of the session could not be read: the turn goes on with
/// what could be.
fn warn_damaged(damaged: &[Damaged], rebuilt: bool, sink: &mut dyn FnMut(TurnEvent<'_>)) {
    let effect = if rebuilt {
        "the model's context is rebuilt without it"
    } else {
        "the session's history lacks it"
    };
    for d in damaged {
        // Before the turn begins: no turn to name.
        sink(TurnEvent::Warning {
            turn: "".into(),
            message: format!("{d}; {effect} (run `axocoatl fsck`)").into(),
        });
    }
}

/// Adds `opts.attach_files` to the session, once-scoped, before the turn is prepared.
/// Returns the references this call recorded (not those already selected).
pub(crate) fn attach_files(
    ws: &Workspace,
    opts: &SendOptions,
    cancel: &Cancel,
    sink: &mut dyn FnMut(TurnEvent<'_>),
) -> Result<Vec<(String, String)>> {
    if opts.attach_files.is_empty() {
        return Ok(Vec::new());
    }
    check_session_name(&opts.session)?;
    let reading = attach::Reading {
        ocr: attach::ocr::Settings::of(&ws.config()?.attachments.ocr),
        cancel,
    };
    let added = attach::add(
        ws.repo(),
        &opts.session,
        &opts.attach_files,
        AttachmentScope::Once,
        &reading,
    )?;
    for a in &added {
        for note in &a.notes {
            // Before the turn begins: no turn to name.
            sink(TurnEvent::Warning {
                turn: "".into(),
                message: format!("{}: {note}", a.reference.name).into(),
            });
        }
        if a.reference.text_truncated {
            sink(TurnEvent::AttachmentTruncated {
                name: a.reference.name.as_str().into(),
                text_len: a.text_len,
            });
        }
    }
    Ok(added
        .into_iter()
        .filter(|a| !a.reused)
        .map(|a| (a.reference.reference, a.reference.name))
        .collect())
}

/// Takes back what [`attach_files`] recorded when the turn did not begin, so a later turn
/// does not carry files meant for this one. A reference the turn consumed stays.
pub(crate) fn withdraw(
    ws: &Workspace,
    added: &[(String, String)],
    sink: &mut dyn FnMut(TurnEvent<'_>),
) {
    for (reference, name) in added {
        let error = match attach::remove(ws.repo(), reference) {
            Ok(_) => None,
            Err(RuntimeError::Attach(attach::AttachError::NotSelected { .. })) => continue,
            Err(e) => Some(e.to_string()),
        };
        sink(TurnEvent::AttachmentWithdrawn {
            reference: reference.into(),
            name: name.into(),
            error: error.map(Into::into),
        });
    }
}
