//! What `serve`'s tasks share: the daemon (workspace, options, the actor slots behind one
//! lock, the shutdown and change signals) and each slot's phase. The daemon's loops
//! (`daemon`) and the actors' supervisors (`supervise`) both work on it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{watch, Notify};

use super::wire::ActorInfo;
use crate::config::Config;
use crate::error::Result;
use crate::provider::Cancel;
use crate::workspace::{Locator, Workspace};

/// How `serve` was started.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The axocoatl binary: actors are started from it.
    pub exe: PathBuf,
    /// Where the repository and configuration were found (actors and background passes
    /// open their own workspace from it).
    pub locator: Locator,
    /// Logs as JSON lines (else text): actors log in the same format.
    pub log_json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Starting,
    Up,
    Restarting,
    Down,
}

pub(super) struct Slot {
    pub session: String,
    pub agent: String,
    pub socket: PathBuf,
    pub phase: Phase,
    pub pid: Option<u32>,
    pub restarts: u32,
    /// Consecutive failed starts.
    pub failures: u32,
    /// When its actors crashed, within the crash window.
    pub crashes: VecDeque<Instant>,
    pub last_error: Option<String>,
    /// Why serve itself killed the actor (liveness), for the restart's explanation.
    pub kill_reason: Option<String>,
    pub info: ActorInfo,
    /// Turns routed to it right now.
    pub(super) busy: usize,
    pub restart: Arc<Notify>,
    /// How many times an actor of this slot became ready.
    pub starts: u64,
    pub(super) last_consolidation: Option<Instant>,
    pub(super) consolidating: bool,
}

pub(super) struct State {
    /// Serve's configuration: the YAML as loaded at start, plus `agents set` patches.
    pub config: Config,
    pub slots: Vec<Slot>,
    pub(super) patches: Vec<(String, String, String)>,
}

pub(super) struct Daemon {
    pub ws: Arc<Workspace>,
    pub opts: ServeOptions,
    pub(super) state: Mutex<State>,
    /// Bumped whenever a slot changes phase.
    pub(super) changed: watch::Sender<u64>,
    pub shutdown: watch::Sender<bool>,
    /// Cancels serve's own turns (consolidation, automations) at shutdown.
    pub(super) work: Cancel,
    /// Clients that have not sent their request yet, oldest first, each with what lets it
    /// go: the first to be let go when serve holds as many clients as it may.
    pub(super) waiting: Mutex<VecDeque<(u64, Arc<Notify>)>>,
}

impl Daemon {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    pub(super) fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub(super) fn waiting(&self) -> MutexGuard<'_, VecDeque<(u64, Arc<Notify>)>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets the oldest client that has sent nothing go; whether there was one.
    pub(super) fn let_go_oldest_silent(&self) -> bool {
        match self.waiting().pop_front() {
            Some((_, go)) => {
                go.notify_one();
                true
            }
            None => false,
        }
    }

    /// A workspace with serve's current configuration, for work on the blocking pool.
    pub(super) fn workspace(&self) -> Result<Workspace> {
        let mut ws = Workspace::open(&self.opts.locator)?;
        ws.set_config(self.state().config.clone());
        Ok(ws)
    }
}
