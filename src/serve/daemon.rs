//! `serve` itself: a tokio runtime on the main thread (one thread: actors are started from
//! it, and `PR_SET_PDEATHSIG` follows the thread that started a child), blocking work (stop,
//! rewind, consolidation, automations) on tokio's blocking pool.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axocoatl_store::layout;
use axocoatl_store::lock::Lock;
use axocoatl_store::run;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{watch, Notify};
use tracing::{info, warn};

use super::sock::{self, Line, Quiet};
use super::state::{Daemon, Phase, ServeOptions, Slot, State};
use super::supervise::{ask, liveness, supervise};
use super::wire::{
    self, ActorInfo, ActorStatus, Reply, Request, ScheduleEntry, StatusReport, WireError,
    WireRewind, WireSend,
};
use super::{patch, REQUEST_WITHIN};
use crate::automation::{self, RunnerKind};
use crate::clock;
use crate::config::{AgentRole, Config};
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, Want};
use crate::provider::Cancel;
use crate::workspace::Workspace;

/// Takes the serve lock (briefly retried: a command probing whether serve runs holds it
/// for microseconds), or says who holds it.
fn take_lock(ws: &Workspace) -> Result<Lock> {
    for _ in 0..10 {
        if let Some(lock) = run::serve::try_take(ws.repo(), wire::PROTOCOL)? {
            return Ok(lock);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(RuntimeError::ServeRunning {
        pid: run::serve::holder(ws.repo()).map(|h| h.pid),
    })
}

/// Runs `serve` in the foreground until SIGINT or SIGTERM.
pub fn run(ws: Workspace, opts: ServeOptions) -> Result<()> {
    let config = ws.config()?.clone();
    let lock = take_lock(&ws)?;
    // Every idle client holds a descriptor: take all the process may have (its actors
    // inherit the limit).
    match sock::raise_descriptor_limit() {
        Ok((before, after)) if before != after => {
            info!(
                before,
                after, "raised the open file limit to its hard limit"
            )
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot raise the open file limit"),
    }
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
    // Handled before the socket exists and "serve started" is logged: a SIGTERM sent as soon
    // as serve says it runs (a supervisor, a script) stops it cleanly, never by the default
    // action that would leave its socket and actors behind.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(RuntimeError::io("handle signals in", "serve"))?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(RuntimeError::io("handle signals in", "serve"))?;
    let repo = ws.repo();
    let socket = repo.path(layout::SERVE_SOCKET);
    let actors_dir = repo.path(layout::ACTORS_DIR);
    axocoatl_store::fsutil::create_dir_private(&actors_dir)?;
    let _ = std::fs::remove_file(&socket);
    let listener = sock::bind(&socket).map_err(RuntimeError::io("listen on", &socket))?;
    super::owner_only(&socket)?;
    let max_clients = sock::max_clients(descriptor_limit());
    let session = ws.session_or_head(None)?;
    let automations = config.automations.iter().any(|a| a.enabled);
    let consolidation = config
        .agents
        .iter()
        .any(|a| crate::memory::consolidate::sleep_time(&config, a).is_some());
    let d = new_daemon(ws, config, opts, &actors_dir, &session);
    info!(
        pid = std::process::id(),
        socket = %socket.display(),
        session = %session,
        actors = d.state().slots.len(),
        max_clients,
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
    let (spawn_tx, mut spawn_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let mut next_client = 0u64;
    // Accepting pauses while the process is out of descriptors (growing up to 1 s).
    let pause = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(pause);
    let (mut paused, mut pause_for) = (false, Duration::ZERO);
    let mut accept_quiet = Quiet::new(Duration::from_secs(10));
    let mut full_quiet = Quiet::new(Duration::from_secs(10));
    loop {
        tokio::select! {
            accepted = listener.accept(), if !paused => match accepted {
                Ok((stream, _)) => {
                    pause_for = Duration::ZERO;
                    if clients.len() >= max_clients {
                        let let_go = d.let_go_oldest_silent();
                        if let Some(kept) = full_quiet.say() {
                            warn!(max_clients, kept, "serve holds as many clients as it may; {}",
                                  if let_go { "the oldest that sent nothing is let go" } else { "a new one is refused" });
                        }
                        if !let_go {
                            refuse(&stream, max_clients);
                            continue;
                        }
                    }
                    next_client += 1;
                    let go = Arc::new(Notify::new());
                    d.waiting().push_back((next_client, go.clone()));
                    clients.spawn(client(d.clone(), stream, spawn_tx.clone(), next_client, go));
                }
                Err(e) => {
                    if sock::out_of_descriptors(&e) {
                        d.let_go_oldest_silent();
                        pause_for = (pause_for * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                        pause.as_mut().reset(tokio::time::Instant::now() + pause_for);
                        paused = true;
                    }
                    if let Some(kept) = accept_quiet.say() {
                        warn!(error = %e, kept, pause_ms = pause_for.as_millis() as u64, "accept failed");
                    }
                }
            },
            () = &mut pause, if paused => paused = false,
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
    shut_down(&d, listener, &socket, supervisors, clients, background).await;
    Ok(())
}

/// The daemon, with a slot for each agent that is an actor of its own in `session`.
fn new_daemon(
    ws: Workspace,
    config: Config,
    opts: ServeOptions,
    actors_dir: &std::path::Path,
    session: &str,
) -> Arc<Daemon> {
    let mut slots = Vec::new();
    // Workers are never actors of their own: their coordinator's actor runs them.
    for agent in config.agents.iter().filter(|a| a.role != AgentRole::Worker) {
        slots.push(new_slot(actors_dir, slots.len(), session, &agent.id));
    }
    Arc::new(Daemon {
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
        waiting: Mutex::new(VecDeque::new()),
    })
}

/// Shutdown: no new work; active turns end `stopped`; actors
/// end; the clients get their last outcomes (the caller then lets the lock go).
async fn shut_down(
    d: &Daemon,
    listener: tokio::net::UnixListener,
    socket: &std::path::Path,
    mut supervisors: tokio::task::JoinSet<()>,
    mut clients: tokio::task::JoinSet<()>,
    mut background: tokio::task::JoinSet<()>,
) {
    let deadline = Instant::now() + Duration::from_millis(4500);
    d.shutdown.send_replace(true);
    d.work.cancel();
    drop(listener);
    let _ = std::fs::remove_file(socket);
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
}

/// The soft limit of open descriptors (1024 when it cannot be read).
fn descriptor_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 1024,
        rlim_max: 1024,
    };
    #[expect(
        unsafe_code,
        reason = "getrlimit writes the struct we pass, which lives on this stack frame"
    )]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc == 0 {
        lim.rlim_cur
    } else {
        1024
    }
}

/// Tells a client serve cannot take that it is busy (without waiting for it) and closes.
fn refuse(stream: &UnixStream, max_clients: usize) {
    let e = RuntimeError::Refused {
        message: format!("serve holds {max_clients} clients already, all of them busy"),
        hint: "try again in a moment".into(),
    };
    let _ = stream.try_write(&wire::line(&Reply::Error(WireError::from(&e))));
}

fn new_slot(actors_dir: &std::path::Path, n: usize, session: &str, agent: &str) -> Slot {
    Slot {
        session: session.to_owned(),
        agent: agent.to_owned(),
        socket: actors_dir.join(layout::actor_socket_name(n)),
        phase: Phase::Starting,
        pid: None,
        restarts: 0,
        failures: 0,
        crashes: VecDeque::new(),
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

/// One client connection: one request line (within [`REQUEST_WITHIN`], of at most
/// [`sock::LINE_LIMIT`] bytes), answered. `go` lets it go before it sent its request.
async fn client(
    d: Arc<Daemon>,
    stream: UnixStream,
    spawn: tokio::sync::mpsc::UnboundedSender<usize>,
    id: u64,
    go: Arc<Notify>,
) {
    // Another repository's sandboxed command may find this socket by its path.
    if crate::tools::sandbox::peer_is_sandboxed(std::os::fd::AsFd::as_fd(&stream)) {
        warn!("refused a connection from a sandboxed command");
        return;
    }
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let read = tokio::select! {
        r = sock::read_line(&mut reader, &mut line, sock::LINE_LIMIT) => Some(r),
        () = tokio::time::sleep(REQUEST_WITHIN) => None,
        () = go.notified() => None,
    };
    d.waiting().retain(|(n, _)| *n != id);
    let reply = match read {
        // Silent for too long, or let go for a newer client: closed without a word (it
        // may not read either).
        None | Some(Err(_)) => return,
        Some(Ok(Line::End)) if line.is_empty() => return,
        Some(Ok(Line::TooLong)) => {
            let _ = write
                .write_all(&wire::line(&Reply::Error(WireError::from(
                    &sock::too_long(),
                ))))
                .await;
            return;
        }
        Some(Ok(Line::Whole | Line::End)) => request(&d, &line, &spawn, &mut write).await,
    };
    let Some(reply) = reply else { return };
    let _ = write.write_all(&wire::line(&reply)).await;
}

/// Answers one request line; `None` when a turn's answer was copied to the client already.
async fn request(
    d: &Arc<Daemon>,
    line: &[u8],
    spawn: &tokio::sync::mpsc::UnboundedSender<usize>,
    write: &mut tokio::net::unix::OwnedWriteHalf,
) -> Option<Reply> {
    Some(match serde_json::from_slice::<Request>(line) {
        Ok(Request::Send(w)) => match route(d, w, spawn, write).await {
            Ok(()) => return None,
            Err(e) => Reply::Error(WireError::from(&e)),
        },
        Ok(req) => answer(d, req, spawn).await,
        Err(e) => Reply::Error(WireError::from(&RuntimeError::Invalid {
            message: format!("a request that does not parse: {e}"),
            hint: "the client and serve must be the same axocoatl build".into(),
        })),
    })
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
    let dir = d.ws.repo().path(layout::ACTORS_DIR);
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
    let mut actor = sock::connect(&socket)
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
        // Each opens the repository afresh: a ledger handle whose sync failed refuses
        // appends until the repository is opened again (see `Ledger::poisoned`).
        Request::Stop { turn } => {
            let locator = d.opts.locator.clone();
            blocking(move || crate::control::stop(&Workspace::open(&locator)?, &turn))
                .await
                .map(|a| Reply::Stopped {
                    turn: a.turn,
                    session: a.session,
                })
        }
        Request::Rewind { turn, session } => {
            let ws = d.workspace();
            let config = d.state().config.clone();
            blocking(move || {
                crate::rewind::rewind(ws?.repo(), Some(&config), &turn, session.as_deref())
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
            // A restart asked for starts the count again, and forgets why it was down.
            s.failures = 0;
            s.crashes.clear();
            s.last_error = None;
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
    let last = last_turns(d, agent).await;
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
            last_turn: last
                .get(&(s.session.clone(), s.agent.clone()))
                .cloned()
                .or_else(|| s.info.last_turn.clone()),
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

/// The newest turn of each (session, agent) of the actors `agent` selects, from the
/// ledger: turns the actors ran, and those serve ran for them (consolidation passes,
/// automations) or `automations tick` did. Empty when the ledger cannot be read (the
/// actors' own account stands).
async fn last_turns(d: &Daemon, agent: Option<&str>) -> HashMap<(String, String), String> {
    let mut sessions: Vec<String> = d
        .state()
        .slots
        .iter()
        .filter(|s| agent.is_none_or(|a| a == s.agent))
        .map(|s| s.session.clone())
        .collect();
    sessions.sort();
    sessions.dedup();
    let ws = d.ws.clone();
    let read = blocking(move || {
        let mut out = HashMap::new();
        for session in sessions {
            let projection = Projection::of(ws.repo(), Scope::Session(&session), Want::VIEWS)?;
            for t in projection.session_turns(&session) {
                out.insert((session.clone(), t.agent.clone()), t.turn.clone());
            }
        }
        Ok(out)
    });
    read.await.unwrap_or_else(|e| {
        warn!(error = %e, "agents status: cannot read the last turns from the ledger");
        HashMap::new()
    })
}

/// Sleep-time consolidation: each autonomous agent's actor idle for its
/// `idle_threshold_secs` (no turn running, none routed) gets a promotion-only pass, at most
/// once per its `interval_secs`; an agent whose `consolidation:` turns it off gets none.
/// Never for workers (they have no actors) or coordinators (their memory is the
/// workflow's), never while a turn is active.
async fn consolidate_loop(d: Arc<Daemon>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        let candidates: Vec<(usize, PathBuf, Duration)> = {
            let st = d.state();
            st.slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let agent = st.config.agent(&s.agent)?;
                    let (threshold, interval) =
                        crate::memory::consolidate::sleep_time(&st.config, agent)?;
                    (s.phase == Phase::Up
                        && s.busy == 0
                        && !s.consolidating
                        && s.last_consolidation.is_none_or(|t| t.elapsed() >= interval))
                    .then(|| (i, s.socket.clone(), threshold))
                })
                .collect()
        };
        for (i, socket, threshold) in candidates {
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
