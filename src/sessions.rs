//! Sessions as commands see them: listing, creating, switching (`HEAD`).
//!
//! Which session a command acts on: `-s NAME`, else `$AXOCOATL_SESSION`, else `HEAD`, else
//! (when `HEAD` is missing) the configuration's `default_session`
//! ([`Workspace::session_or_head`]). `init` points a new `HEAD` at `default_session` when the
//! configuration names one.

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{SessionAgents, SessionCreated};
use axocoatl_store::ledger::{Damaged, Record};

use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::history::{self, SessionView};
use crate::workspace::Workspace;

/// A session and whether it is the current one.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    pub view: SessionView,
    pub current: bool,
}

/// Every session, and what could not be read.
#[derive(Debug, Default)]
pub struct Listing {
    pub sessions: Vec<Listed>,
    /// Damaged records (never skipped silently: the caller shows these).
    pub problems: Vec<Damaged>,
}

/// Every session, by name, with the current one marked (and listed even before its first
/// record), from the ledger's indexes.
pub fn list(ws: &Workspace) -> Result<Listing> {
    let list = history::sessions(ws.repo())?;
    let current = ws.session_or_head(None)?;
    let mut sessions: Vec<SessionView> = list.sessions.into_values().collect();
    if !sessions.iter().any(|s| s.session == current) {
        sessions.push(SessionView {
            session: current.clone(),
            ..SessionView::default()
        });
        sessions.sort_by(|a, b| a.session.cmp(&b.session));
    }
    Ok(Listing {
        sessions: sessions
            .into_iter()
            .map(|view| Listed {
                current: view.session == current,
                view,
            })
            .collect(),
        problems: list.problems,
    })
}

/// Makes `name` the current session (`HEAD`); it must exist unless `create`.
pub fn switch(ws: &Workspace, name: &str, create: bool) -> Result<()> {
    check_session_name(name)?;
    if !create && name != ws.repo().head()? && !exists(ws, name)? {
        return Err(RuntimeError::NoSession {
            name: name.to_owned(),
        });
    }
    Ok(ws.repo().set_head(name)?)
}

/// Creates session `name` (a ledger record) and makes it current.
pub fn create(ws: &Workspace, name: &str) -> Result<()> {
    create_with(ws, name, &[])
}

/// Creates session `name` and makes it current; with `agents` (two or more autonomous
/// agents, each once), a multi-agent session whose turns the lattice activation rule
/// routes (recorded as `SessionAgents` with the session's creation).
pub fn create_with(ws: &Workspace, name: &str, agents: &[String]) -> Result<()> {
    check_session_name(name)?;
    if !agents.is_empty() {
        check_members(ws, agents)?;
    }
    if exists(ws, name)? {
        return Err(RuntimeError::SessionExists {
            name: name.to_owned(),
        });
    }
    let at = clock::now();
    let mut records = vec![Record::SessionCreated(SessionCreated {
        session: name.to_owned(),
        at,
    })];
    if !agents.is_empty() {
        records.push(Record::SessionAgents(SessionAgents {
            session: name.to_owned(),
            agents: agents.to_vec(),
            at,
        }));
    }
    ws.repo().ledger().append(&records)?;
    Ok(ws.repo().set_head(name)?)
}

/// The agents of a multi-agent session: at least two, each an autonomous agent, once.
fn check_members(ws: &Workspace, agents: &[String]) -> Result<()> {
    let config = ws.config()?;
    let hint =
        "name two or more autonomous agents of the configuration, e.g. `--agents critic,coder`"
            .to_owned();
    if agents.len() < 2 {
        return Err(RuntimeError::Invalid {
            message: "a multi-agent session needs at least two agents".into(),
            hint,
        });
    }
    for (i, id) in agents.iter().enumerate() {
        let agent = config.agent(id).ok_or_else(|| RuntimeError::UnknownAgent {
            id: id.clone(),
            known: config.agents.iter().map(|a| a.id.clone()).collect(),
        })?;
        if agent.role != crate::config::AgentRole::Autonomous {
            return Err(RuntimeError::Invalid {
                message: format!(
                    "agent {id:?} is a {}; a multi-agent session is made of autonomous agents",
                    if agent.role == crate::config::AgentRole::Worker {
                        "worker"
                    } else {
                        "coordinator"
                    }
                ),
                hint,
            });
        }
        if agents[..i].contains(id) {
            return Err(RuntimeError::Invalid {
                message: format!("agent {id:?} is listed twice"),
                hint,
            });
        }
    }
    Ok(())
}

fn exists(ws: &Workspace, name: &str) -> Result<bool> {
    Ok(history::sessions(ws.repo())?.sessions.contains_key(name))
}
