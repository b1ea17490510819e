//! Serve's supervision of the actors: each slot's actor is started, watched (its exit, and
//! a liveness ping every [`LIVENESS_EVERY`]) and restarted from the latest valid
//! checkpoint when it ends unexpectedly.
//!
//! The rule that leaves an agent `down` (until `agents restart`):
//! - [`MAX_FAILURES`] consecutive starts that fail (the actor ends or reports an error
//!   before it is ready);
//! - or a crash (an actor that was ready ends unexpectedly, or is killed for failing its
//!   liveness check) when [`MAX_CRASHES`] crashes were already restarted within
//!   [`CRASH_WINDOW`].
//!
//! A start that failed because serve or the actor ran out of descriptors counts toward
//! neither: it is retried, less and less often (up to every 30 s), as long as it lasts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tracing::{error, info, warn};

use super::sock::{self, Line, Quiet};
use super::state::{Daemon, Phase};
use super::wire::{self, ActorInfo, Reply, Request, WireError};
use super::{CRASH_WINDOW, LIVENESS_EVERY, MAX_CRASHES, MAX_FAILURES};

/// Why an actor did not become ready.
#[derive(Debug)]
pub(super) struct StartFailure {
    pub reason: String,
    /// Serve or the actor ran out of descriptors: serve's condition, not the agent's.
    pub descriptors: bool,
}

impl StartFailure {
    fn of(reason: String) -> StartFailure {
        StartFailure {
            descriptors: sock::says_out_of_descriptors(&reason),
            reason,
        }
    }
}

#[expect(
    unsafe_code,
    reason = "kill(2) with a pid serve started and a signal number: no memory is touched"
)]
pub(super) fn signal(pid: u32, sig: i32) {
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// How an actor's run ended.
enum Ended {
    /// It never became ready.
    Failed(StartFailure),
    /// It was ready and ended unexpectedly (or was killed for failing its liveness check).
    Crashed(String),
    /// `agents restart` (or `agents set`) ended it.
    Restarted,
}

/// Starts slot `i`'s actor and keeps it up (see the module's rule for `down`).
pub(super) async fn supervise(d: Arc<Daemon>, i: usize) {
    let mut shutdown = d.shutdown.subscribe();
    let mut generation = 0u64;
    // Consecutive starts that failed for lack of descriptors.
    let mut short = 0u32;
    let mut quiet = Quiet::new(Duration::from_secs(30));
    loop {
        if d.shutting_down() {
            return;
        }
        let (session, agent, socket, restart) = {
            let s = &d.state().slots[i];
            (
                s.session.clone(),
                s.agent.clone(),
                s.socket.clone(),
                s.restart.clone(),
            )
        };
        generation += 1;
        let started = Instant::now();
        let ended = match start_actor(&d, &session, &agent, &socket, i, generation).await {
            Err(f) => Ended::Failed(f),
            Ok(child) => {
                short = 0;
                let actor = Actor {
                    i,
                    session: &session,
                    agent: &agent,
                };
                match actor
                    .watch(&d, child, started, &restart, &mut shutdown)
                    .await
                {
                    Some(ended) => ended,
                    None => return,
                }
            }
        };
        let (reason, down, pause) = match ended {
            Ended::Restarted => continue,
            Ended::Failed(f) if f.descriptors => {
                short += 1;
                let pause =
                    Duration::from_millis(500u64 << short.min(6)).min(Duration::from_secs(30));
                if let Some(kept) = quiet.say() {
                    warn!(agent = %agent, session = %session, error = %f.reason, kept,
                          retry_ms = pause.as_millis() as u64,
                          "actor could not start for lack of file descriptors (not counted toward down); retrying");
                }
                mark_ended(&d, i, f.reason, false);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = restart.notified() => {}
                    _ = shutdown.changed() => return,
                }
                continue;
            }
            Ended::Failed(f) => {
                let mut st = d.state();
                let s = &mut st.slots[i];
                s.failures += 1;
                let down = s.failures >= MAX_FAILURES;
                let pause = Duration::from_millis(100 << s.failures.min(4));
                (f.reason, down, pause)
            }
            Ended::Crashed(reason) => {
                let (reason, down) = count_crash(&mut d.state().slots[i], reason);
                (reason, down, Duration::ZERO)
            }
        };
        mark_ended(&d, i, reason.clone(), down);
        if down {
            error!(agent = %agent, session = %session, error = %reason,
                   "agent down until `axocoatl agents restart`");
            if !wait_down(&d, i, &restart, &mut shutdown).await {
                return;
            }
            continue;
        }
        let failures = d.state().slots[i].failures;
        warn!(agent = %agent, session = %session, failures, error = %reason, "actor failed; restarting");
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => return,
        }
        d.state().slots[i].restarts += 1;
    }
}

/// Slot `i` has no actor now: why, and whether it is down or restarting.
fn mark_ended(d: &Daemon, i: usize, reason: String, down: bool) {
    {
        let mut st = d.state();
        let s = &mut st.slots[i];
        s.pid = None;
        s.last_error = Some(reason);
        s.phase = if down { Phase::Down } else { Phase::Restarting };
    }
    d.bump();
}

/// Keeps slot `i` down until `agents restart` (true) or serve shuts down (false).
async fn wait_down(
    d: &Daemon,
    i: usize,
    restart: &tokio::sync::Notify,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        _ = restart.notified() => {
            let mut st = d.state();
            let s = &mut st.slots[i];
            s.failures = 0;
            s.crashes.clear();
            s.restarts += 1;
            s.phase = Phase::Restarting;
        }
        _ = shutdown.changed() => return false,
    }
    d.bump();
    true
}

/// Records a crash of slot `s`'s actor: the reason to show, and whether the agent is now
/// down (too many crashes within [`CRASH_WINDOW`]).
fn count_crash(s: &mut super::state::Slot, reason: String) -> (String, bool) {
    let now = Instant::now();
    s.crashes.retain(|t| now.duration_since(*t) < CRASH_WINDOW);
    let down = s.crashes.len() >= MAX_CRASHES;
    s.crashes.push_back(now);
    if !down {
        return (reason, false);
    }
    let reason = format!(
        "{reason}; its actors crashed {} times within {} minutes",
        s.crashes.len(),
        CRASH_WINDOW.as_secs() / 60
    );
    (reason, true)
}

/// The actor of slot `i`, while [`supervise`] watches it.
struct Actor<'a> {
    i: usize,
    session: &'a str,
    agent: &'a str,
}

impl Actor<'_> {
    /// Marks the slot up with the ready `child`, then waits until the actor ends, a restart
    /// is asked for, or serve shuts down (`None`: the child is stopped and supervision ends).
    async fn watch(
        &self,
        d: &Daemon,
        mut child: Child,
        started: Instant,
        restart: &tokio::sync::Notify,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Option<Ended> {
        let (i, agent, session) = (self.i, self.agent, self.session);
        let pid = child.id();
        {
            let mut st = d.state();
            let s = &mut st.slots[i];
            s.phase = Phase::Up;
            s.starts += 1;
            s.pid = pid;
            s.failures = 0;
            s.info = ActorInfo {
                pid: pid.unwrap_or(0),
                ..ActorInfo::default()
            };
        }
        d.bump();
        info!(agent = %agent, session = %session, pid = pid.unwrap_or(0),
              ms = started.elapsed().as_millis() as u64, "actor ready");
        tokio::select! {
            status = child.wait() => {
                if d.shutting_down() { return None; }
                let reason = d.state().slots[i].kill_reason.take().unwrap_or_else(|| match status {
                    Ok(s) => format!("the actor (pid {}) stopped unexpectedly ({s})", pid.unwrap_or(0)),
                    Err(e) => format!("cannot wait for the actor: {e}"),
                });
                Some(Ended::Crashed(reason))
            }
            _ = restart.notified() => {
                stop_child(&mut child).await;
                let mut st = d.state();
                st.slots[i].restarts += 1;
                st.slots[i].phase = Phase::Restarting;
                st.slots[i].pid = None;
                drop(st);
                d.bump();
                info!(agent = %agent, session = %session, "actor restarting on request");
                Some(Ended::Restarted)
            }
            _ = shutdown.changed() => {
                stop_child(&mut child).await;
                None
            }
        }
    }
}

/// SIGTERM (its active turns end `stopped`), then SIGKILL after 4 s.
pub(super) async fn stop_child(child: &mut Child) {
    if let Some(pid) = child.id() {
        signal(pid, libc::SIGTERM);
    }
    if tokio::time::timeout(Duration::from_secs(4), child.wait())
        .await
        .is_err()
    {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

/// Starts an actor process and waits for its `ready`; the reason when it does not come.
async fn start_actor(
    d: &Daemon,
    session: &str,
    agent: &str,
    socket: &std::path::Path,
    n: usize,
    generation: u64,
) -> std::result::Result<Child, StartFailure> {
    let config = serde_json::to_vec(&d.state().config)
        .map_err(|e| StartFailure::of(format!("cannot encode the configuration: {e}")))?;
    let mut cmd = Command::new(&d.opts.exe);
    cmd.arg("--repo")
        .arg(d.ws.repo().root())
        .arg("--config")
        .arg(d.ws.config_path())
        .args(["util", "actor", "--session", session, "--agent", agent])
        .arg("--socket")
        .arg(socket)
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--log-format")
        .arg(if d.opts.log_json { "json" } else { "text" })
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    if let Some(seed) = std::env::var_os(crate::ids::SEED_ENV) {
        // Reproducible ids (tests), distinct per actor process.
        let mut seed = seed;
        seed.push(format!("-actor{n}-{generation}"));
        cmd.env(crate::ids::SEED_ENV, seed);
    }
    let mut child = cmd.spawn().map_err(|e| StartFailure {
        reason: format!("cannot start {}: {e}", d.opts.exe.display()),
        descriptors: sock::out_of_descriptors(&e),
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&config).await;
        let _ = stdin.write_all(b"\n").await;
    }
    let Some(stdout) = child.stdout.take() else {
        return Err(StartFailure::of("the actor has no stdout".into()));
    };
    let mut line = Vec::new();
    let mut reader = BufReader::new(stdout);
    let read = tokio::time::timeout(
        Duration::from_secs(120),
        sock::read_line(&mut reader, &mut line, sock::LINE_LIMIT),
    )
    .await;
    let line = String::from_utf8_lossy(&line).into_owned();
    match read {
        Ok(Ok(Line::Whole)) if line.trim() == "ready" => Ok(child),
        Ok(Ok(Line::Whole)) if line.starts_with("error ") => {
            let _ = child.wait().await;
            Err(StartFailure::of(
                serde_json::from_str::<WireError>(&line["error ".len()..])
                    .map(|e| {
                        let mut text = e.message;
                        for c in e.causes {
                            text.push_str(": ");
                            text.push_str(&c);
                        }
                        text
                    })
                    .unwrap_or_else(|_| line.trim().to_owned()),
            ))
        }
        Ok(_) => {
            let _ = child.start_kill();
            let status = child.wait().await;
            Err(StartFailure::of(match status {
                Ok(s) => format!("the actor ended before it was ready ({s})"),
                Err(e) => format!("the actor ended before it was ready: {e}"),
            }))
        }
        Err(_) => {
            let _ = child.start_kill();
            Err(StartFailure::of(
                "the actor was not ready within 120 s".into(),
            ))
        }
    }
}

/// Sends `req` to an actor and reads its one-line answer.
pub(super) async fn ask(socket: &std::path::Path, req: &Request) -> std::io::Result<Reply> {
    let mut stream = sock::connect(socket).await?;
    stream.write_all(&wire::line(req)).await?;
    let mut line = Vec::new();
    match sock::read_line(&mut BufReader::new(stream), &mut line, sock::LINE_LIMIT).await? {
        Line::TooLong => Err(std::io::Error::other("an answer longer than 64 MiB")),
        Line::Whole | Line::End => serde_json::from_slice(&line).map_err(std::io::Error::other),
    }
}

/// Every [`LIVENESS_EVERY`]: each actor that is up must answer a ping within 3 s, or it is
/// killed (and restarted by its supervisor, which records why and counts it as a crash).
/// A ping serve could not send for lack of descriptors says nothing about the actor.
pub(super) async fn liveness(d: Arc<Daemon>) {
    let mut every = tokio::time::interval(LIVENESS_EVERY);
    let mut quiet = Quiet::new(Duration::from_secs(30));
    loop {
        every.tick().await;
        let up: Vec<(usize, std::path::PathBuf, Option<u32>)> = d
            .state()
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.phase == Phase::Up)
            .map(|(i, s)| (i, s.socket.clone(), s.pid))
            .collect();
        for (i, socket, pid) in up {
            let detail = match tokio::time::timeout(
                Duration::from_secs(3),
                ask(&socket, &Request::Ping),
            )
            .await
            {
                Ok(Ok(Reply::Pong(info))) => {
                    d.state().slots[i].info = info;
                    continue;
                }
                // It answered (an actor holding too many connections says so): alive.
                Ok(Ok(_)) => continue,
                Ok(Err(e)) if sock::out_of_descriptors(&e) => {
                    if let Some(kept) = quiet.say() {
                        warn!(error = %e, kept, "liveness check skipped: serve is out of file descriptors");
                    }
                    continue;
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "no answer within 3 s".to_owned(),
            };
            let still = {
                let st = d.state();
                st.slots[i].phase == Phase::Up && st.slots[i].pid == pid
            };
            if let (true, Some(pid)) = (still, pid) {
                warn!(pid, error = %detail, "actor failed its liveness check; killing it");
                d.state().slots[i].kill_reason = Some(format!(
                    "the actor (pid {pid}) failed its liveness check: {detail}"
                ));
                signal(pid, libc::SIGKILL);
            }
        }
    }
}
