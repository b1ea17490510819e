//! `axocoatl serve`: the one long-lived mode. It holds `run/serve.lock`, keeps one actor
//! process per live (session, autonomous agent) with its conversation in memory, routes
//! `send`, `retry`, `rewind` and `stop` of the repository through an owner-only control
//! socket (`run/serve.sock`), supervises the actors (liveness every 5 s, restart from the
//! latest valid checkpoint, `down` after 5 consecutive failed starts or a 6th crash within
//! 10 minutes), and runs sleep-time consolidation and the automation schedule.
//!
//! Limits: a request is one line of at most [`sock::LINE_LIMIT`] (64 MiB); a client must
//! send it within [`REQUEST_WITHIN`]; serve holds at most [`sock::max_clients`] clients
//! (the oldest still silent one is let go for a new one); running out of descriptors
//! pauses accepting and is never counted against an agent.
//!
//! - [`wire`]: the socket's JSON Lines protocol;
//! - [`client`]: what one-shot commands use (no runtime: a `stat` when no serve runs);
//! - [`actor`]: the actor process (`axocoatl util actor`, hidden);
//! - [`daemon`]: serve itself (tokio: the socket, the actors' processes, timers, signals);
//! - [`state`]: what its tasks share (the actors' slots and phases), and [`supervise`]:
//!   the actors' supervisors;
//! - [`patch`]: `agents set`, in memory only.

pub mod actor;
pub mod client;
mod daemon;
pub mod patch;
pub mod sock;
mod state;
mod supervise;
pub mod wire;

pub use daemon::run;
pub use state::ServeOptions;

use std::path::Path;

use crate::error::{Result, RuntimeError};

/// How often serve checks that each actor answers.
pub const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Consecutive failed starts after which an agent stays down.
pub const MAX_FAILURES: u32 = 5;
/// Crashes of an agent's actors (it ended unexpectedly, or failed its liveness check) that
/// are restarted within [`CRASH_WINDOW`]: the next one leaves the agent down.
pub const MAX_CRASHES: usize = 5;
/// The window [`MAX_CRASHES`] counts in.
pub const CRASH_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);
/// How long a client may take to send its request line.
pub const REQUEST_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The seed's reason a worker is never started or restarted on its own.
pub fn worker_refusal(agent: &str) -> RuntimeError {
    RuntimeError::Refused {
        message: format!(
            "agent {agent:?} has `role: worker`: a worker cannot be started or restarted directly"
        ),
        hint: "edit its YAML and restart its coordinator".into(),
    }
}

/// Makes a socket file owner-only (its directory `run/` already is).
fn owner_only(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(RuntimeError::io("set the permissions of", path))
}
