//! Following a turn from another process (`axocoatl follow`): what it has streamed so far,
//! then each event as it comes, until its terminal record; a turn that already ended gives
//! its answer at once.
//!
//! A running turn's events are in its stream file (the store's `run/streams/<turn>`, written
//! by whichever process runs the turn: a one-shot `send`, a `serve` actor, an automation's
//! runner); how it ended is read from the ledger, never from the stream. The follower reads
//! the stream, then looks in the ledger for the terminal record from the turn's begin on;
//! once it is there, it reads the stream to its end (the writer wrote every event before the
//! terminal record) and builds the outcome from the ledger. A stop asked for by the
//! follower (its caller's cancellation: Ctrl-C) is a stop of exactly that turn, as
//! `axocoatl stop ID` is.
//!
//! A turn that waits for a person's approval of a tool call (before the follower came, or
//! while it follows: the follower folds the turn again when it has new records) ends the
//! following as it ends `send`: with [`RuntimeError::Waiting`], naming the calls. The turn
//! goes on in the process that answers it (`axocoatl approve`), which `follow` can follow
//! again.

use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::TurnState;
use axocoatl_store::ledger::{Position, Record};
use axocoatl_store::run::stream::{Line, StreamReader};

use crate::control::StopAccepted;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, TurnView, ViewState, Want};
use crate::provider::Cancel;
use crate::turn::{TurnEvent, TurnOutcome};
use crate::workspace::Workspace;

/// How often a follower looks for new events and for the turn's end.
pub const POLL: Duration = Duration::from_millis(20);
/// How often a follower settles the turn as interrupted if its process died.
const ORPHAN_CHECK: Duration = Duration::from_millis(500);

/// What a follower reports, in order.
#[derive(Debug)]
pub enum Followed<'a> {
    /// An event of the turn, as the process running it reported it (`turn.begun` first).
    Event(TurnEvent<'a>),
    /// The turn reported more than its stream holds: the rest of its output comes from the
    /// ledger once it ends.
    Cut,
    /// The follower's stop was recorded for the turn.
    StopRequested(StopAccepted),
    /// The follower asked for a stop and the turn had already ended (its end follows).
    StopTooLate(RuntimeError),
}

/// The turn `reference` names: a turn id or a unique prefix of one, or `@`, the latest turn
/// of `session` (the active one while it runs). Returns its whole id.
pub fn resolve(ws: &Workspace, reference: &str, session: &str) -> Result<String> {
    if reference.trim() != "@" {
        let projection = Projection::of(ws.repo(), Scope::Prefix(reference), Want::VIEWS)?;
        return Ok(projection.resolve(reference)?.turn.clone());
    }
    let projection = Projection::of(ws.repo(), Scope::Session(session), Want::VIEWS)?;
    projection
        .session_turns(session)
        .max_by_key(|t| (t.started_at, t.begin_seq))
        .map(|t| t.turn.clone())
        .ok_or_else(|| RuntimeError::TurnNotFound {
            prefix: format!("@ (session {} has no turns)", ws.shown_session(session)),
        })
}

/// Follows turn `id` (a whole id, as [`resolve`] gives) until it ends; returns how it
/// ended, from the ledger, or [`RuntimeError::Waiting`] once it waits for approval. `cancel`
/// set (Ctrl-C) asks for a stop of exactly this turn, once.
pub fn follow(
    ws: &Workspace,
    id: &str,
    cancel: &Cancel,
    sink: &mut dyn FnMut(Followed<'_>),
) -> Result<TurnOutcome> {
    let repo = ws.repo();
    let view = view_of(ws, id)?;
    if !matches!(view.state, ViewState::Running | ViewState::Waiting) {
        let outcome = outcome_of(ws, &view)?;
        replay(&outcome, sink);
        return Ok(outcome);
    }
    let mut follower = Follower {
        reader: StreamReader::open(repo, id)?,
        printed: String::new(),
        began: false,
        cut: false,
    };
    let mut pos = view.begin;
    let mut stop_asked = false;
    let mut orphans_checked = Instant::now();
    // Whether the turn may wait: it did when the follower came, or recorded more since (a
    // request for approval among them, perhaps).
    let mut may_wait = view.state == ViewState::Waiting;
    loop {
        follower.drain(repo, id, sink)?;
        match scan(ws, id, &mut pos)? {
            Seen::End => {
                follower.drain(repo, id, sink)?;
                break;
            }
            Seen::Records => may_wait = true,
            Seen::Nothing => {}
        }
        if may_wait {
            may_wait = false;
            let now = view_of(ws, id)?;
            if now.state == ViewState::Waiting {
                follower.drain(repo, id, sink)?;
                return Err(waiting(&now));
            }
        }
        if cancel.is_cancelled() && !stop_asked {
            stop_asked = true;
            match crate::serve::client::stop(ws, id) {
                Ok(accepted) => sink(Followed::StopRequested(accepted)),
                Err(e @ RuntimeError::NotActive { .. }) => sink(Followed::StopTooLate(e)),
                Err(e) => return Err(e),
            }
        }
        if orphans_checked.elapsed() >= ORPHAN_CHECK {
            // A turn whose process died is recorded interrupted, so the wait ends.
            crate::session::recover_orphans(repo)?;
            orphans_checked = Instant::now();
        }
        std::thread::sleep(POLL);
    }
    let outcome = outcome_of(ws, &view_of(ws, id)?)?;
    follower.finish(&outcome, sink);
    Ok(outcome)
}

/// The stream of a running turn as far as it has been read.
struct Follower {
    /// `None` until the stream file is found (or when the turn writes none).
    reader: Option<StreamReader>,
    /// The output text reported so far (for the rest after a cut).
    printed: String,
    /// Whether `turn.begun` was reported.
    began: bool,
    cut: bool,
}

impl Follower {
    /// Reports the events written since the last look.
    fn drain(
        &mut self,
        repo: &axocoatl_store::Repo,
        id: &str,
        sink: &mut dyn FnMut(Followed<'_>),
    ) -> Result<()> {
        if self.reader.is_none() && !self.began {
            // Begun a moment ago: its stream file may be created just after its record.
            self.reader = StreamReader::open(repo, id)?;
        }
        let Some(reader) = &mut self.reader else {
            return Ok(());
        };
        for line in reader.read()? {
            match line {
                Line::Cut => {
                    self.cut = true;
                    sink(Followed::Cut);
                }
                Line::Entry(text) => {
                    // A line that does not parse is skipped: the ledger has the turn whole.
                    let Ok(ev) = serde_json::from_str::<TurnEvent<'_>>(&text) else {
                        continue;
                    };
                    match &ev {
                        TurnEvent::Begun { .. } => self.began = true,
                        TurnEvent::Delta { text, .. } => self.printed.push_str(text),
                        _ => {}
                    }
                    sink(Followed::Event(ev));
                }
            }
        }
        Ok(())
    }

    /// After the end: what the stream did not carry. A turn whose stream was never read
    /// gives its answer as one piece; a cut stream the rest of the output.
    fn finish(self, outcome: &TurnOutcome, sink: &mut dyn FnMut(Followed<'_>)) {
        if !self.began {
            replay(outcome, sink);
            return;
        }
        if self.cut {
            if let Some(rest) = outcome.output.strip_prefix(self.printed.as_str()) {
                if !rest.is_empty() {
                    sink(Followed::Event(TurnEvent::Delta {
                        turn: outcome.turn.as_str().into(),
                        text: rest.into(),
                    }));
                }
            }
        }
    }
}

/// An ended turn as events: its begin and its whole output as one piece.
fn replay(outcome: &TurnOutcome, sink: &mut dyn FnMut(Followed<'_>)) {
    sink(Followed::Event(TurnEvent::Begun {
        turn: outcome.turn.as_str().into(),
        session: outcome.session.as_str().into(),
        agent: outcome.agent.as_str().into(),
        agent_name: outcome.agent_name.as_deref().map(Into::into),
        attachments: (&[][..]).into(),
        schema: None,
        new_session: false,
    }));
    if !outcome.output.is_empty() {
        sink(Followed::Event(TurnEvent::Delta {
            turn: outcome.turn.as_str().into(),
            text: outcome.output.as_str().into(),
        }));
    }
}

/// Whether turn `id` has a terminal record at or after `pos` (moved past what was read).
/// What the ledger says of a turn since the follower last looked.
enum Seen {
    Nothing,
    /// Records of it, none terminal: what they mean (a call that asks for approval, say) is
    /// the fold's to tell.
    Records,
    /// Its terminal record.
    End,
}

fn scan(ws: &Workspace, id: &str, pos: &mut Position) -> Result<Seen> {
    let mut seen = Seen::Nothing;
    for entry in ws.repo().ledger().scan(*pos) {
        let entry = entry?;
        *pos = entry.next;
        match &entry.record {
            Some(Record::TurnEnded(e)) if e.turn == id => return Ok(Seen::End),
            Some(r) if r.turn() == Some(id) => seen = Seen::Records,
            _ => {}
        }
    }
    Ok(seen)
}

/// The error that ends following a turn that waits: the calls no one has decided, as
/// `send` names them.
fn waiting(view: &TurnView) -> RuntimeError {
    RuntimeError::Waiting {
        turn: view.turn.clone(),
        session: view.session.clone(),
        calls: view.undecided_calls(),
    }
}

fn view_of(ws: &Workspace, id: &str) -> Result<TurnView> {
    let projection = Projection::of(ws.repo(), Scope::Prefix(id), Want::VIEWS)?;
    Ok(projection.resolve(id)?.clone())
}

/// How turn `view` ended, as `send` reports it.
fn outcome_of(ws: &Workspace, view: &TurnView) -> Result<TurnOutcome> {
    let state = match view.state {
        ViewState::Completed => TurnState::Completed,
        ViewState::Failed => TurnState::Failed,
        ViewState::Stopped => TurnState::Stopped,
        // Read once the ledger has its terminal record, so never still running or waiting.
        ViewState::Interrupted | ViewState::Running | ViewState::Waiting => TurnState::Interrupted,
    };
    let config = ws.config().ok();
    Ok(TurnOutcome {
        turn: view.turn.clone(),
        session: view.session.clone(),
        agent: view.agent.clone(),
        agent_name: config
            .and_then(|c| c.agent(&view.agent))
            .and_then(|a| a.name.clone()),
        state,
        output: crate::query::full_output(ws.repo(), view)?,
        error: view.error.clone(),
        usage: view
            .usage
            .unwrap_or(axocoatl_store::ledger::record::Usage::ZERO),
    })
}
