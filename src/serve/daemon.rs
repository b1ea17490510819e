//! `serve` itself: a tokio runtime on the main thread (one thread: actors are started from
//! it, and `PR_SET_PDEATHSIG` follows the thread that started a child), blocking work (stop,
//! rewind, consolidation, automations) on tokio's blocking pool.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axocoatl_store::layout;
use axocoatl_store::lock::Lock;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};
use tracing::{error, info, warn};

use super::wire::{
    self, ActorInfo, ActorStatus, Reply, Request, ScheduleEntry, StatusReport, WireError,
    WireRewind, WireSend,
};
use super::{patch, LIVENESS_EVERY, MAX_FAILURES};
use crate::automation::{self, RunnerKind};
use crate::clock;
use crate::config::{AgentRole, Config};
use crate::error::{Result, RuntimeError};
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
enum Phase {
    Starting,
    Up,
    Restarting,
    Down,
}

struct Slot {
    session: String,
    agent: String,
    socket: PathBuf,
    phase: Phase,
    pid: Option<u32>,
    restarts: u32,
    failures: u32,
    last_error: Option<String>,
    /// Why serve itself killed the actor (liveness), for the restart's explanation.
    kill_reason: Option<String>,
    info: ActorInfo,
    /// Turns routed to it right now.
    busy: usize,
    restart: Arc<Notify>,
    /// How many times an actor of this slot became ready.
    starts: u64,
    last_consolidation: Option<Instant>,
    consolidating: bool,
}

struct State {
    /// Serve's configuration: the YAML as loaded at start, plus `agents set` patches.
    config: Config,
    slots: Vec<Slot>,
    patches: Vec<(String, String, String)>,
}

struct Daemon {
    ws: Arc<Workspace>,
    opts: ServeOptions,
    state: Mutex<State>,
    /// Bumped whenever a slot changes phase.
    changed: watch::Sender<u64>,
    shutdown: watch::Sender<bool>,
    /// Cancels serve's own turns (consolidation, automations) at shutdown.
    work: Cancel,
}

impl Daemon {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A workspace with serve's current configuration, for work on the blocking pool.
    fn workspace(&self) -> Result<Workspace> {
        let mut ws = Workspace::open(&self.opts.locator)?;
        ws.set_config(self.state().config.clone());
        Ok(ws)
    }
}

/// Takes the serve lock (briefly retried: a command probing whether serve runs holds it
/// for microseconds), or says who holds it.
fn take_lock(ws: &Workspace) -> Result<Lock> {
    let path = ws.repo().path(layout::SERVE_LOCK);
    for _ in 0..10 {
        if let Some(mut lock) = Lock::try_acquire(&path)? {
            lock.write_note(&format!("pid {}\n", std::process::id()))?;
            return Ok(lock);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = axocoatl_store::lock::peek_note(&path)
        .ok()
        .and_then(|n| n.trim().strip_prefix("pid ")?.trim().parse().ok());
    Err(RuntimeError::ServeRunning { pid })
}

/// Runs `serve` in the foreground until SIGINT or SIGTERM.
pub fn run(ws: Workspace, opts: ServeOptions) -> Result<()> {
    let config = ws.config()?.clone();
    let lock = take_lock(&ws)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RuntimeError::io("start the runtime of", "serve"))?;
    let result = runtime.block_on(serve(ws, config, opts));
    // Blocking work was cancelled; do not wait long for a pass that ignores it.
    runtime.shutdown_timeout(Duration::from_millis(300));
    drop(lock);
    result
}

async fn serve(ws: Workspace, config: Config, opts: ServeOptions) -> Result<()> {
    let repo = ws.repo();
    let socket = repo.path(super::SOCKET);
    let actors_dir = repo.path(super::ACTORS_DIR);
    axocoatl_store::fsutil::create_dir_private(&actors_dir)?;
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(RuntimeError::io("listen on", &socket))?;
    super::owner_only(&socket)?;
    let session = ws.session_or_head(None)?;
    let mut slots = Vec::new();
    // Workers are never actors of their own: their coordinator's actor runs them.
    for agent in config.agents.iter().filter(|a| a.role != AgentRole::Worker) {
        slots.push(new_slot(&actors_dir, slots.len(), &session, &agent.id));
    }
    let automations = config.automations.iter().any(|a| a.enabled);
    let consolidation = config.consolidation.enabled;
    let d = Arc::new(Daemon {
        ws: Arc::new(ws),
        opts,
        state: Mutex::new(State {
            config,
            slots,
            patches: Vec::new(),
        }),
        changed: watch::channel(0).0,
        shutdown: watch::channel(false).0,
        work: Cancel::new(),
    });
    info!(
        pid = std::process::id(),
        socket = %socket.display(),
        session = %session,
        actors = d.state().slots.len(),
        "serve started"
    );
    let mut supervisors = tokio::task::JoinSet::new();
    for i in 0..d.state().slots.len() {
        supervisors.spawn(supervise(d.clone(), i));
    }
    let mut background = tokio::task::JoinSet::new();
    background.spawn(liveness(d.clone()));
    if consolidation {
        background.spawn(consolidate_loop(d.clone()));
    }
    if automations {
        background.spawn(automations_loop(d.clone()));
    }
    let mut clients = tokio::task::JoinSet::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(RuntimeError::io("handle signals in", "serve"))?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(RuntimeError::io("handle signals in", "serve"))?;
    let (spawn_tx, mut spawn_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    clients.spawn(client(d.clone(), stream, spawn_tx.clone()));
                }
                Err(e) => warn!(error = %e, "accept failed"),
            },
            // Actors started on demand (a turn for a new session) are supervised from here,
            // the main thread.
            Some(i) = spawn_rx.recv() => {
                supervisors.spawn(supervise(d.clone(), i));
            }
            _ = term.recv() => { info!(signal = "SIGTERM", "stopping"); break; }
            _ = int.recv() => { info!(signal = "SIGINT", "stopping"); break; }
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
        }
    }
    // Shutdown: no new work; active turns end `stopped`; actors end; the lock goes.
    let deadline = Instant::now() + Duration::from_millis(4500);
    d.shutdown.send_replace(true);
    d.work.cancel();
    drop(listener);
    let _ = std::fs::remove_file(&socket);
    let until = tokio::time::Instant::from_std(deadline);
    while !supervisors.is_empty() {
        if tokio::time::timeout_at(until, supervisors.join_next())
            .await
            .is_err()
        {
            break;
        }
    }
    // Let the proxies hand the last outcomes over.
    let proxies = tokio::time::Instant::now() + Duration::from_millis(300);
    while !clients.is_empty() {
        if tokio::time::timeout_at(proxies.min(until), clients.join_next())
            .await
            .is_err()
        {
            break;
        }
    }
    background.abort_all();
    info!("serve stopped");
    Ok(())
}

fn new_slot(actors_dir: &std::path::Path, n: usize, session: &str, agent: &str) -> Slot {
    Slot {
        session: session.to_owned(),
        agent: agent.to_owned(),
        socket: actors_dir.join(format!("{n}.sock")),
        phase: Phase::Starting,
        pid: None,
        restarts: 0,
        failures: 0,
        last_error: None,
        kill_reason: None,
        info: ActorInfo::default(),
        busy: 0,
        restart: Arc::new(Notify::new()),
        starts: 0,
        last_consolidation: None,
        consolidating: false,
    }
}

#[expect(
    unsafe_code,
    reason = "kill(2) with a pid serve started and a signal number: no memory is touched"
)]
fn signal(pid: u32, sig: i32) {
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Starts slot `i`'s actor and keeps it up: restarted when it stops unexpectedly, down
/// after [`MAX_FAILURES`] consecutive failures until `agents restart`.
async fn supervise(d: Arc<Daemon>, i: usize) {
    let mut shutdown = d.shutdown.subscribe();
    let mut generation = 0u64;
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
        let failure = match start_actor(&d, &session, &agent, &socket, i, generation).await {
            Err(reason) => Some(reason),
            Ok(mut child) => {
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
                        if d.shutting_down() { return; }
                        let reason = d.state().slots[i].kill_reason.take().unwrap_or_else(|| match status {
                            Ok(s) => format!("the actor (pid {}) stopped unexpectedly ({s})", pid.unwrap_or(0)),
                            Err(e) => format!("cannot wait for the actor: {e}"),
                        });
                        Some(reason)
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
                        None
                    }
                    _ = shutdown.changed() => {
                        stop_child(&mut child).await;
                        return;
                    }
                }
            }
        };
        let Some(reason) = failure else { continue };
        let down = {
            let mut st = d.state();
            let s = &mut st.slots[i];
            s.failures += 1;
            s.pid = None;
            s.last_error = Some(reason.clone());
            if s.failures >= MAX_FAILURES {
                s.phase = Phase::Down;
                true
            } else {
                s.phase = Phase::Restarting;
                false
            }
        };
        d.bump();
        if down {
            error!(agent = %agent, session = %session, failures = MAX_FAILURES, error = %reason,
                   "agent down until `axocoatl agents restart`");
            tokio::select! {
                _ = restart.notified() => {
                    let mut st = d.state();
                    st.slots[i].failures = 0;
                    st.slots[i].restarts += 1;
                    st.slots[i].phase = Phase::Restarting;
                }
                _ = shutdown.changed() => return,
            }
            d.bump();
            continue;
        }
        let failures = d.state().slots[i].failures;
        warn!(agent = %agent, session = %session, failures, error = %reason, "actor failed; restarting");
        let backoff = Duration::from_millis(100 << failures.min(4));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        d.state().slots[i].restarts += 1;
    }
}

/// SIGTERM (its active turns end `stopped`), then SIGKILL after 4 s.
async fn stop_child(child: &mut Child) {
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
) -> std::result::Result<Child, String> {
    let config = serde_json::to_vec(&d.state().config)
        .map_err(|e| format!("cannot encode the configuration: {e}"))?;
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
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", d.opts.exe.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&config).await;
        let _ = stdin.write_all(b"\n").await;
    }
    let Some(stdout) = child.stdout.take() else {
        return Err("the actor has no stdout".into());
    };
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    let read = tokio::time::timeout(Duration::from_secs(120), reader.read_line(&mut line)).await;
    match read {
        Ok(Ok(_)) if line.trim() == "ready" => Ok(child),
        Ok(Ok(_)) if line.starts_with("error ") => {
            let _ = child.wait().await;
            Err(serde_json::from_str::<WireError>(&line["error ".len()..])
                .map(|e| {
                    let mut text = e.message;
                    for c in e.causes {
                        text.push_str(": ");
                        text.push_str(&c);
                    }
                    text
                })
                .unwrap_or_else(|_| line.trim().to_owned()))
        }
        Ok(_) => {
            let status = child.wait().await;
            Err(match status {
                Ok(s) => format!("the actor ended before it was ready ({s})"),
                Err(e) => format!("the actor ended before it was ready: {e}"),
            })
        }
        Err(_) => {
            let _ = child.start_kill();
            Err("the actor was not ready within 120 s".into())
        }
    }
}

/// Sends `req` to an actor and reads its one-line answer.
async fn ask(socket: &std::path::Path, req: &Request) -> std::io::Result<Reply> {
    let mut stream = UnixStream::connect(socket).await?;
    stream.write_all(&wire::line(req)).await?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).await?;
    serde_json::from_str(&line).map_err(std::io::Error::other)
}

/// Every [`LIVENESS_EVERY`]: each actor that is up must answer a ping within 3 s, or it is
/// killed (and restarted by its supervisor, which records why).
async fn liveness(d: Arc<Daemon>) {
    let mut every = tokio::time::interval(LIVENESS_EVERY);
    loop {
        every.tick().await;
        let up: Vec<(usize, PathBuf, Option<u32>)> = d
            .state()
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.phase == Phase::Up)
            .map(|(i, s)| (i, s.socket.clone(), s.pid))
            .collect();
        for (i, socket, pid) in up {
            match tokio::time::timeout(Duration::from_secs(3), ask(&socket, &Request::Ping)).await {
                Ok(Ok(Reply::Pong(info))) => d.state().slots[i].info = info,
                other => {
                    let detail = match other {
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => "no answer within 3 s".into(),
                        Ok(Ok(r)) => format!("an unexpected answer {r:?}"),
                    };
                    let still =
                        d.state().slots[i].phase == Phase::Up && d.state().slots[i].pid == pid;
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
    }
}

/// One client connection: one request, answered.
async fn client(
    d: Arc<Daemon>,
    stream: UnixStream,
    spawn: tokio::sync::mpsc::UnboundedSender<usize>,
) {
    // Another repository's sandboxed command may find this socket by its path.
    if crate::tools::sandbox::peer_is_sandboxed(std::os::fd::AsFd::as_fd(&stream)) {
        warn!("refused a connection from a sandboxed command");
        return;
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    if reader.read_line(&mut line).await.is_err() {
        return;
    }
    let reply = match serde_json::from_str::<Request>(&line) {
        Ok(Request::Send(w)) => match route(&d, w, &spawn, &mut write).await {
            Ok(()) => return,
            Err(e) => Reply::Error(WireError::from(&e)),
        },
        Ok(req) => answer(&d, req, &spawn).await,
        Err(e) => Reply::Error(WireError::from(&RuntimeError::Invalid {
            message: format!("a request that does not parse: {e}"),
            hint: "the client and serve must be the same axocoatl build".into(),
        })),
    };
    let _ = write.write_all(&wire::line(&reply)).await;
}

/// The slot of (session, agent), made (and its actor started) when there is none.
fn slot_for(
    d: &Daemon,
    session: &str,
    agent: &str,
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
) -> usize {
    let mut st = d.state();
    if let Some(i) = st
        .slots
        .iter()
        .position(|s| s.session == session && s.agent == agent)
    {
        return i;
    }
    let n = st.slots.len();
    let dir = d.ws.repo().path(super::ACTORS_DIR);
    st.slots.push(new_slot(&dir, n, session, agent));
    drop(st);
    let _ = spawn.send(n);
    n
}

/// A turn: to the actor of its session and agent, whose answer is copied back as it comes.
async fn route(
    d: &Daemon,
    w: WireSend,
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
    client: &mut tokio::net::unix::OwnedWriteHalf,
) -> Result<()> {
    if d.shutting_down() {
        return Err(RuntimeError::ServeLost {
            detail: "serve is stopping".into(),
        });
    }
    axocoatl_store::layout::check_session_name(&w.session)?;
    let agent = {
        let st = d.state();
        crate::engine::resolve_agent(&st.config, w.agent.as_deref())?
            .id
            .clone()
    };
    let i = slot_for(d, &w.session, &agent, spawn);
    let mut changed = d.changed.subscribe();
    let socket = loop {
        {
            let st = d.state();
            let s = &st.slots[i];
            match s.phase {
                Phase::Up => break s.socket.clone(),
                Phase::Down => {
                    return Err(RuntimeError::AgentDown {
                        id: agent,
                        error: s.last_error.clone().unwrap_or_default(),
                    })
                }
                Phase::Starting | Phase::Restarting => {}
            }
        }
        if changed.changed().await.is_err() || d.shutting_down() {
            return Err(RuntimeError::ServeLost {
                detail: "serve is stopping".into(),
            });
        }
    };
    let mut actor = UnixStream::connect(&socket)
        .await
        .map_err(RuntimeError::io("connect to", &socket))?;
    actor
        .write_all(&wire::line(&Request::Send(w)))
        .await
        .map_err(RuntimeError::io("write to", &socket))?;
    d.state().slots[i].busy += 1;
    let copied = tokio::io::copy(&mut actor, client).await;
    d.state().slots[i].busy -= 1;
    if let Err(e) = copied {
        warn!(error = %e, "a turn's answer could not be copied to its client");
    }
    Ok(())
}

/// Requests serve answers itself.
async fn answer(
    d: &Arc<Daemon>,
    req: Request,
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
) -> Reply {
    let result = match req {
        Request::Stop { turn } => {
            let ws = d.ws.clone();
            blocking(move || crate::control::stop(&ws, &turn))
                .await
                .map(|a| Reply::Stopped {
                    turn: a.turn,
                    session: a.session,
                })
        }
        Request::Rewind { turn, session } => {
            let ws = d.ws.clone();
            let config = d.state().config.clone();
            blocking(move || {
                crate::rewind::rewind(ws.repo(), Some(&config), &turn, session.as_deref())
            })
            .await
            .map(|o| Reply::Rewound(WireRewind::from(o)))
        }
        Request::Status { agent } => status(d, agent.as_deref()).await.map(Reply::Status),
        Request::Restart { agent } => restart(d, &agent, spawn)
            .await
            .map(|message| Reply::Done { message }),
        Request::Set { agent, key, value } => set(d, &agent, &key, &value, spawn)
            .await
            .map(|message| Reply::Done { message }),
        Request::Send(_) | Request::Ping => Err(RuntimeError::NotSupported(
            "this request to serve itself".into(),
        )),
    };
    result.unwrap_or_else(|e| Reply::Error(WireError::from(&e)))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(RuntimeError::ServeLost {
            detail: format!("serve's worker failed: {e}"),
        })
    })
}

fn check_agent(config: &Config, agent: &str) -> Result<()> {
    let a = config
        .agent(agent)
        .ok_or_else(|| RuntimeError::UnknownAgent {
            id: agent.to_owned(),
            known: config.agents.iter().map(|a| a.id.clone()).collect(),
        })?;
    match a.role {
        AgentRole::Worker => Err(super::worker_refusal(agent)),
        AgentRole::Coordinator | AgentRole::Autonomous => Ok(()),
    }
}

/// Restarts every actor of `agent`; returns once those that were up have a successor that
/// is ready (or the agent went down), so the next turn meets the new actor.
async fn restart(
    d: &Daemon,
    agent: &str,
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
) -> Result<String> {
    check_agent(&d.state().config, agent)?;
    let session = d.ws.session_or_head(None)?;
    let mut changed = d.changed.subscribe();
    let mut n = 0;
    let mut waiting = Vec::new();
    {
        let mut st = d.state();
        for (i, s) in st
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(_, s)| s.agent == agent)
        {
            s.failures = 0;
            s.restart.notify_one();
            if s.phase == Phase::Up {
                waiting.push((i, s.starts));
            }
            n += 1;
        }
    }
    if n == 0 {
        slot_for(d, &session, agent, spawn);
        n = 1;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let done = {
            let st = d.state();
            waiting
                .iter()
                .all(|&(i, starts)| st.slots[i].starts > starts || st.slots[i].phase == Phase::Down)
        };
        if done
            || d.shutting_down()
            || !matches!(
                tokio::time::timeout_at(deadline, changed.changed()).await,
                Ok(Ok(()))
            )
        {
            break;
        }
    }
    info!(agent, actors = n, "restart requested");
    Ok(format!(
        "restarted agent {agent} ({n} actor{}) from its latest checkpoint; the configuration file is not reloaded (restart serve for that)",
        if n == 1 { "" } else { "s" }
    ))
}

async fn set(
    d: &Daemon,
    agent: &str,
    key: &str,
    value: &str,
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
) -> Result<String> {
    {
        let mut st = d.state();
        check_agent(&st.config, agent)?;
        let patched = patch::patched(&st.config, agent, key, value)?;
        patch::apply(&mut st.config, patched);
        st.patches
            .push((agent.to_owned(), key.to_owned(), value.to_owned()));
    }
    info!(agent, key, value, "agent patched in memory");
    restart(d, agent, spawn).await?;
    Ok(format!(
        "set {key} of agent {agent} in memory and restarted it; {} is unchanged (the patch ends with this serve)",
        d.ws.config_path().display()
    ))
}

async fn status(d: &Arc<Daemon>, agent: Option<&str>) -> Result<StatusReport> {
    if let Some(a) = agent {
        let st = d.state();
        if st.config.agent(a).is_none() {
            return Err(RuntimeError::UnknownAgent {
                id: a.to_owned(),
                known: st.config.agents.iter().map(|a| a.id.clone()).collect(),
            });
        }
    }
    // Fresh from each actor that is up (its last turn, whether a turn runs).
    let up: Vec<(usize, PathBuf)> = d
        .state()
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.phase == Phase::Up && agent.is_none_or(|a| a == s.agent))
        .map(|(i, s)| (i, s.socket.clone()))
        .collect();
    for (i, socket) in up {
        if let Ok(Ok(Reply::Pong(info))) =
            tokio::time::timeout(Duration::from_secs(1), ask(&socket, &Request::Ping)).await
        {
            d.state().slots[i].info = info;
        }
    }
    let ws = d.ws.clone();
    let schedule = blocking(move || automation::status(&ws, clock::now(), 1)).await?;
    let st = d.state();
    let actors = st
        .slots
        .iter()
        .filter(|s| agent.is_none_or(|a| a == s.agent))
        .map(|s| ActorStatus {
            agent: s.agent.clone(),
            session: s.session.clone(),
            state: match s.phase {
                Phase::Up if s.busy > 0 || s.info.active > 0 => "running",
                Phase::Up => "idle",
                Phase::Starting => "starting",
                Phase::Restarting => "restarting",
                Phase::Down => "down",
            }
            .into(),
            pid: s.pid,
            restarts: s.restarts,
            last_error: s.last_error.clone(),
            last_turn: s.info.last_turn.clone(),
            mcp_servers: s.info.mcp.clone(),
        })
        .collect();
    Ok(StatusReport {
        pid: std::process::id(),
        actors,
        automations: schedule
            .into_iter()
            .map(|a| ScheduleEntry {
                automation: a.id,
                enabled: a.enabled,
                schedule: a.schedule,
                next: a.next.first().map(|o| clock::rfc3339(o.utc)),
            })
            .collect(),
        patches: st.patches.clone(),
    })
}

/// Sleep-time consolidation: each autonomous agent's actor idle for `idle_threshold_secs`
/// (no turn running, none routed) gets a promotion-only pass, at most once per
/// `interval_secs`. Never for workers (they have no actors) or coordinators (their memory
/// is the workflow's), never while a turn is active.
async fn consolidate_loop(d: Arc<Daemon>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        let (threshold, interval) = {
            let st = d.state();
            (
                Duration::from_secs(st.config.consolidation.idle_threshold_secs),
                Duration::from_secs(st.config.consolidation.interval_secs),
            )
        };
        let candidates: Vec<(usize, PathBuf)> = {
            let st = d.state();
            let autonomous = |agent: &str| {
                st.config
                    .agent(agent)
                    .is_some_and(|a| a.role == AgentRole::Autonomous)
            };
            st.slots
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.phase == Phase::Up
                        && autonomous(&s.agent)
                        && s.busy == 0
                        && !s.consolidating
                        && s.last_consolidation.is_none_or(|t| t.elapsed() >= interval)
                })
                .map(|(i, s)| (i, s.socket.clone()))
                .collect()
        };
        for (i, socket) in candidates {
            let Ok(Ok(Reply::Pong(info))) =
                tokio::time::timeout(Duration::from_secs(3), ask(&socket, &Request::Ping)).await
            else {
                continue;
            };
            let idle = info.active == 0 && Duration::from_millis(info.idle_ms) >= threshold;
            let idle_ms = info.idle_ms;
            let (session, agent) = {
                let mut st = d.state();
                let s = &mut st.slots[i];
                s.info = info;
                if !idle || s.busy > 0 {
                    continue;
                }
                s.consolidating = true;
                s.last_consolidation = Some(Instant::now());
                (s.session.clone(), s.agent.clone())
            };
            let ws = match d.workspace() {
                Ok(ws) => ws,
                Err(e) => {
                    warn!(error = %e, "consolidation: cannot open the repository");
                    d.state().slots[i].consolidating = false;
                    continue;
                }
            };
            let cancel = d.work.clone();
            let d2 = d.clone();
            info!(agent = %agent, session = %session, idle_ms, "consolidation pass starting");
            tokio::task::spawn_blocking(move || {
                match crate::memory::consolidate::run(&ws, &session, Some(&agent), &cancel) {
                    Ok(passes) => {
                        for p in passes {
                            info!(agent = %p.agent, scope = %p.scope, idle_ms, result = ?p.result, "consolidation pass");
                        }
                    }
                    Err(e) => {
                        warn!(agent = %agent, session = %session, error = %e, "consolidation failed")
                    }
                }
                d2.state().slots[i].consolidating = false;
            });
        }
    }
}

/// The automation schedule, run by serve (runner `serve` + its pid), racing safely with
/// `automations tick` from cron: every occurrence is claimed durably before it runs.
async fn automations_loop(d: Arc<Daemon>) {
    let mut every = tokio::time::interval(Duration::from_secs(15));
    loop {
        every.tick().await;
        if d.shutting_down() {
            return;
        }
        let ws = match d.workspace() {
            Ok(ws) => ws,
            Err(e) => {
                warn!(error = %e, "automations: cannot open the repository");
                continue;
            }
        };
        let cancel = d.work.clone();
        let pass = tokio::task::spawn_blocking(move || {
            automation::run_due(&ws, clock::now(), RunnerKind::Serve, &cancel, &mut |h| {
                info!(
                    automation = %h.record.automation,
                    occurrence = %clock::rfc3339(h.record.occurrence),
                    outcome = ?h.record.state,
                    turn = ?h.record.turn,
                    "automation run"
                );
            })
        })
        .await;
        match pass {
            Ok(Ok(results)) => {
                for (id, r) in results {
                    if let Err(e) = r {
                        warn!(automation = %id, error = %e, "automation failed");
                    }
                }
                info!("automations pass done");
            }
            Ok(Err(e)) => warn!(error = %e, "automations pass failed"),
            Err(e) => warn!(error = %e, "automations pass panicked"),
        }
    }
}
