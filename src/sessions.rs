//! Sessions as commands see them: listing, creating, switching (`HEAD`).
//!
//! Which session a command acts on: `-s NAME`, else `$AXOCOATL_SESSION`, else `HEAD`, else
//! (when `HEAD` is missing) the configuration's `default_session`
//! ([`Workspace::session_or_head`]). `init` points a new `HEAD` at `default_session` when the
//! configuration names one.

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{SessionAgents, SessionCreated};
use axocoatl_store::ledger::{Damaged, Record};
use axocoatl_store::names::Names;

use crate::clock;
use crate::error::{Result, RuntimeError};
use crate::history::{self, SessionView};
use crate::workspace::Workspace;

/// A session and whether it is the current one.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// Its summary, under the name its records carry (`view.session`).
    pub view: SessionView,
    /// The name people know it by (differs from `view.session` after a rename).
    pub name: String,
    pub current: bool,
    /// When it was removed (`sessions rm`); listed only with `--all`.
    pub removed_at: Option<axocoatl_store::ledger::record::Millis>,
}

/// Every session, and what could not be read.
#[derive(Debug, Default)]
pub struct Listing {
    pub sessions: Vec<Listed>,
    /// Damaged records (never skipped silently: the caller shows these).
    pub problems: Vec<Damaged>,
}

/// Every session, by the name people know it by, with the current one marked (and listed
/// even before its first record), from the ledger's indexes; removed sessions only with
/// `removed`.
pub fn list(ws: &Workspace, removed: bool) -> Result<Listing> {
    let list = history::sessions(ws.repo())?;
    let current = ws.session_or_head(None)?;
    let names = ws.names()?;
    let mut sessions: Vec<SessionView> = list.sessions.into_values().collect();
    if !sessions.iter().any(|s| s.session == current) {
        sessions.push(SessionView {
            session: current.clone(),
            ..SessionView::default()
        });
    }
    let mut listed: Vec<Listed> = sessions
        .into_iter()
        .filter_map(|view| {
            let gone = names.removed(&view.session);
            if gone.is_some() && !removed {
                return None;
            }
            Some(Listed {
                name: match gone {
                    Some((_, name)) => name.to_owned(),
                    None => ws.shown_session(&view.session).to_owned(),
                },
                current: view.session == current,
                removed_at: gone.map(|(at, _)| at),
                view,
            })
        })
        .collect();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Listing {
        sessions: listed,
        problems: list.problems,
    })
}

/// Makes `name` the current session (`HEAD`); it must exist unless `create`.
pub fn switch(ws: &Workspace, name: &str, create: bool) -> Result<()> {
    check_session_name(name)?;
    if !create && name != ws.head()? && !exists(ws, &ws.ledger_name(name)?)? {
        return Err(RuntimeError::NoSession {
            name: name.to_owned(),
        });
    }
    ws.set_head(name)
}

/// A new session made by [`start_new`]: the name people know it by, and the name its
/// records carry (they differ when the name was freed by a rename or removal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub name: String,
    pub ledger: String,
}

/// Creates a new session named by the time (`2026-01-02-030405`, UTC; `-2`, `-3`, … when
/// taken) and makes it current (`HEAD`). The name is taken atomically: the check that it is
/// free and its `SessionCreated` record happen under the repository's lock of session names,
/// so concurrent `send -n` (`xargs -P`, `parallel`) each get a session of their own,
/// whatever the timing, and a name another process took is never used again.
pub fn start_new(ws: &Workspace) -> Result<Started> {
    let at = clock::now();
    let time = clock::rfc3339(at);
    // `2026-01-02T03:04:05.678Z` → `2026-01-02-030405`
    let base = format!("{}-{}", &time[..10], time[11..19].replace(':', ""));
    let repo = ws.repo();
    let started = Names::update(repo.root(), |names| {
        // Read under the lock: a session another process created a moment ago is seen.
        let taken = repo.reader().session_summaries()?.sessions;
        let in_ledger = |n: &str| taken.contains_key(n);
        for n in 1u32..=10_000 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let ledger = match names.resolve(&name) {
                axocoatl_store::names::Resolved::Ledger(ledger) => ledger,
                // A name a rename or removal freed is free for a new session, under a ledger
                // name of its own.
                axocoatl_store::names::Resolved::Freed => {
                    let fresh = names.fresh_ledger_name(&name, &in_ledger)?;
                    names.set_alias(&name, &fresh);
                    fresh
                }
            };
            if in_ledger(&ledger) {
                continue;
            }
            repo.ledger()
                .append(&[Record::SessionCreated(SessionCreated {
                    session: ledger.clone(),
                    at,
                })])?;
            return Ok(Some(Started { name, ledger }));
        }
        Ok(None)
    })?;
    let Some(started) = started else {
        return Err(RuntimeError::Invalid {
            message: format!("no session name starting with {base} is free"),
            hint: crate::error::Next::NameSession,
        });
    };
    ws.set_head(&started.name)?;
    Ok(started)
}

/// Removes session `name` from listings: its records stay in the ledger (`history --all`,
/// `show` and `export` still find its turns), and the name is free for a new session.
/// Refused while a turn of the session is active.
pub fn remove(ws: &Workspace, name: &str) -> Result<()> {
    check_session_name(name)?;
    let ledger = ws.ledger_name(name)?;
    if !exists(ws, &ledger)? {
        return Err(RuntimeError::NoSession {
            name: name.to_owned(),
        });
    }
    // Held while the removal is written: no turn of the session begins meanwhile.
    let _lock = crate::session::lock(
        ws.repo(),
        &ledger,
        crate::session::Wait::No,
        "remove the session",
    )?;
    let at = clock::now();
    Names::update(ws.repo().root(), |names| {
        names.remove(&ledger, at);
        Ok(())
    })?;
    Ok(())
}

/// Renames session `from` to `to`. Its records keep the name they were written with; the
/// session is shown and addressed as `to` from now on, and `from` is free for a new
/// session. `HEAD` follows the rename.
pub fn rename(ws: &Workspace, from: &str, to: &str) -> Result<()> {
    check_session_name(from)?;
    check_session_name(to)?;
    let ledger = ws.ledger_name(from)?;
    let current = ws.head().ok();
    if !exists(ws, &ledger)? && current.as_deref() != Some(from) {
        return Err(RuntimeError::NoSession {
            name: from.to_owned(),
        });
    }
    if from != to && exists(ws, &ws.ledger_name(to)?)? {
        return Err(RuntimeError::SessionExists {
            name: to.to_owned(),
        });
    }
    Names::update(ws.repo().root(), |names| {
        names.set_alias(to, &ledger);
        Ok(())
    })?;
    if current.as_deref() == Some(from) {
        ws.set_head(to)?;
    }
    Ok(())
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
    if exists(ws, &ws.ledger_name(name)?)? {
        return Err(RuntimeError::SessionExists {
            name: name.to_owned(),
        });
    }
    // A name freed by a rename or removal gets a ledger name of its own here.
    let (ledger, _) = ws.session_for_turn(Some(name))?;
    let at = clock::now();
    let mut records = vec![Record::SessionCreated(SessionCreated {
        session: ledger.clone(),
        at,
    })];
    if !agents.is_empty() {
        records.push(Record::SessionAgents(SessionAgents {
            session: ledger,
            agents: agents.to_vec(),
            at,
        }));
    }
    ws.repo().ledger().append(&records)?;
    ws.set_head(name)
}

/// The agents of a multi-agent session: at least two, each an autonomous agent, once.
fn check_members(ws: &Workspace, agents: &[String]) -> Result<()> {
    let config = ws.config()?;
    let hint = crate::error::Next::say(
        "name two or more autonomous agents of the configuration, e.g. `--agents critic,coder`",
    );
    if agents.len() < 2 {
        return Err(RuntimeError::Invalid {
            message: "a multi-agent session needs at least two agents".into(),
            hint: hint.clone(),
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
                hint: hint.clone(),
            });
        }
        if agents[..i].contains(id) {
            return Err(RuntimeError::Invalid {
                message: format!("agent {id:?} is listed twice"),
                hint: hint.clone(),
            });
        }
    }
    Ok(())
}

/// Whether the ledger has records of the session with ledger name `name`.
pub fn exists(ws: &Workspace, name: &str) -> Result<bool> {
    Ok(history::sessions(ws.repo())?.sessions.contains_key(name))
}
