//! An actor: the process that keeps one (session, agent)'s conversation in memory while
//! `serve` runs. `serve` starts it as `axocoatl util actor …` with the configuration it
//! loaded (plus `agents set` patches) on stdin; it dies with `serve` (`PR_SET_PDEATHSIG`).
//!
//! At start it checks that the agent's provider opens (a missing script or model file fails
//! the start, which `serve` counts), restores the conversation from the latest valid
//! checkpoint (or the ledger), listens on its own socket under `run/actors/`, and writes
//! `ready` on stdout. Each connection carries one request line (at most
//! [`super::sock::LINE_LIMIT`] bytes, sent within [`super::REQUEST_WITHIN`]), handled on a
//! thread of its own (at most [`MAX_CONNECTIONS`] at once: the oldest silent one is let go
//! for a new one):
//! a turn runs through [`crate::engine::send_held`] with the conversation held here (used
//! only while it is current, so a turn run by anyone else is never forked: the ledger and
//! the session lock decide), and its events go back as they happen. SIGTERM stops its
//! active turns (recorded `stopped`) and ends the process once they have.
//!
//! The agent's providers belong to the actor too: a `local` model is loaded at start and kept
//! for every turn ([`crate::provider::Kept`]), so a turn through `serve` pays no load.
//!
//! The agent's MCP servers belong to the actor: started at the first turn that needs them,
//! kept across turns, started again within [`MCP_WATCH_EVERY`] when one dies, shown by
//! `agents status`, and ended with the actor (on SIGTERM; if the actor is killed, their stdin
//! closes and an MCP server exits at end of input).

use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axocoatl_store::Repo;

use super::sock::{self, Line};
use super::wire::{self, ActorInfo, Reply, Request, WireError};
use crate::config::Config;
use crate::conversation::Conversation;
use crate::engine;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, TurnView, Want};
use crate::mcp::Hub;
use crate::provider::Cancel;
use crate::workspace::Workspace;

/// What an actor is started for.
#[derive(Clone, Debug)]
pub struct ActorArgs {
    pub session: String,
    pub agent: String,
    pub socket: PathBuf,
    /// The `serve` that started it: the actor ends if it is already gone.
    pub parent: u32,
}

/// How often the actor looks for MCP servers of its agent that died.
pub const MCP_WATCH_EVERY: Duration = Duration::from_secs(1);

/// Connections an actor serves at once (serve needs one per turn and one per ping).
pub const MAX_CONNECTIONS: usize = 64;

/// The connections an actor holds: how many, and those that have not sent their request
/// yet (oldest first), which can be let go.
#[derive(Default)]
struct Connections {
    next: AtomicU64,
    open: Mutex<(usize, VecDeque<(u64, UnixStream)>)>,
}

impl Connections {
    /// Admits a connection: its number, or `None` when every one held is busy.
    fn admit(&self, stream: &UnixStream) -> Option<u64> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.0 >= MAX_CONNECTIONS {
            let (_, oldest) = open.1.pop_front()?;
            // Its thread reads the end of its stream, and lets its place go.
            let _ = oldest.shutdown(std::net::Shutdown::Both);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let clone = stream.try_clone().ok()?;
        open.0 += 1;
        open.1.push_back((id, clone));
        Some(id)
    }

    /// The connection sent its request: it can no longer be let go.
    fn heard(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.1.retain(|(n, _)| *n != id);
    }

    fn close(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.1.retain(|(n, _)| *n != id);
        open.0 = open.0.saturating_sub(1);
    }
}

struct Shared {
    held: Mutex<Option<Conversation>>,
    active: Mutex<Vec<(u64, Cancel)>>,
    last_turn: Mutex<Option<String>>,
    last_end: Mutex<Instant>,
    next: Mutex<u64>,
    hub: Option<Arc<Hub>>,
}

/// Asks the kernel to kill this process when its parent dies, then checks the parent is
/// still `parent` (it may have died before the request).
fn die_with_parent(parent: u32) -> Result<()> {
    #[expect(
        unsafe_code,
        reason = "prctl(PR_SET_PDEATHSIG) takes integers only and touches no memory of ours"
    )]
    let rc = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    if rc != 0 {
        return Err(RuntimeError::io(
            "set the parent-death signal of",
            "the actor",
        )(std::io::Error::last_os_error()));
    }
    #[expect(unsafe_code, reason = "getppid has no arguments and cannot fail")]
    let now = unsafe { libc::getppid() };
    if now as u32 != parent {
        return Err(RuntimeError::ServeLost {
            detail: format!("serve (pid {parent}) ended before its actor started"),
        });
    }
    Ok(())
}

/// Runs the actor until SIGTERM. `config` is serve's configuration; `ready` is where the
/// first line (`ready`, or nothing when the start fails: the error goes to the caller) goes.
pub fn run(
    mut ws: Workspace,
    config: Config,
    args: ActorArgs,
    ready: &mut dyn Write,
) -> Result<()> {
    die_with_parent(args.parent)?;
    ws.set_config(config);
    let hub = mcp_hub(&mut ws, &args.agent)?;
    // The agent's model is loaded once, here, and kept for every turn.
    ws.keep_providers();
    let ws = Arc::new(ws);
    let config = ws.config()?;
    let agent = engine::resolve_agent(config, Some(&args.agent))?;
    let resolved = ws.resolve_provider(agent)?;
    // The provider must be able to start (its model or script file is there): a start
    // that fails here is what `serve` counts towards `down`. A local model loaded here is
    // kept for the first turn.
    drop(ws.open_provider(&resolved)?);
    let shared = shared_state(ws.repo(), &args.session, &agent.id, hub.clone())?;
    let _ = std::fs::remove_file(&args.socket);
    let listener =
        sock::bind_std(&args.socket).map_err(RuntimeError::io("listen on", &args.socket))?;
    super::owner_only(&args.socket)?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone())
            .map_err(RuntimeError::io("handle signals in", "the actor"))?;
    }
    {
        let (shared, hub) = (shared.clone(), hub.clone());
        let socket = args.socket.clone();
        std::thread::spawn(move || watch_term(&term, &shared, &socket, hub.as_deref()));
    }
    if let Some(hub) = hub {
        let args = args.clone();
        std::thread::spawn(move || keep_mcp_alive(&hub, &args));
    }
    writeln!(ready, "ready").map_err(RuntimeError::io("write to", "serve"))?;
    ready
        .flush()
        .map_err(RuntimeError::io("write to", "serve"))?;
    let connections = Arc::new(Connections::default());
    let mut quiet = sock::Quiet::new(Duration::from_secs(10));
    let mut pause = Duration::ZERO;
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(s) => {
                pause = Duration::ZERO;
                s
            }
            Err(e) => {
                if let Some(kept) = quiet.say() {
                    tracing::warn!(agent = %args.agent, error = %e, kept, "accept failed");
                }
                if sock::out_of_descriptors(&e) {
                    pause = (pause * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                    std::thread::sleep(pause);
                }
                continue;
            }
        };
        let Some(id) = connections.admit(&stream) else {
            let busy = RuntimeError::Refused {
                message: format!(
                    "the actor holds {MAX_CONNECTIONS} connections already, all of them busy"
                ),
                hint: "try again in a moment".into(),
            };
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write_all(&wire::line(&Reply::Error(WireError::from(&busy))));
            continue;
        };
        let ws = ws.clone();
        let shared = shared.clone();
        let args = args.clone();
        let connections = connections.clone();
        std::thread::spawn(move || {
            handle(&ws, &shared, &args, stream, &|| connections.heard(id));
            connections.close(id);
            // A failed sync poisoned this process's ledger handle: every later append
            // through it fails. End, so serve starts an actor that opens the repository
            // again (a crash it counts).
            if let Some(cause) = ws.repo().ledger().poisoned() {
                tracing::error!(agent = %args.agent, session = %args.session, error = %cause,
                                "a sync of the ledger failed; the actor ends so that its successor opens the repository again");
                std::process::exit(3);
            }
        });
    }
    Ok(())
}

/// What the actor's connections share: the agent's conversation in `session` as the ledger
/// holds it, held for its next turn.
fn shared_state(
    repo: &Repo,
    session: &str,
    agent: &str,
    hub: Option<Arc<Hub>>,
) -> Result<Arc<Shared>> {
    let projection = Projection::of(repo, Scope::Session(session), Want::VIEWS)?;
    let turns: Vec<&TurnView> = projection.session_turns(session).collect();
    let conversation = crate::conversation::current(repo, session, agent, &turns, None)?;
    Ok(Arc::new(Shared {
        held: Mutex::new(Some(conversation)),
        active: Mutex::new(Vec::new()),
        last_turn: Mutex::new(turns.last().map(|t| t.turn.clone())),
        last_end: Mutex::new(Instant::now()),
        next: Mutex::new(0),
        hub,
    }))
}

/// The hub that keeps the agent's MCP servers across its turns (none when it uses none):
/// set on the workspace, so every turn of this actor uses it.
fn mcp_hub(ws: &mut Workspace, agent: &str) -> Result<Option<Arc<Hub>>> {
    let config = ws.config()?;
    let agent = engine::resolve_agent(config, Some(agent))?;
    if agent.mcp_servers.is_empty() {
        return Ok(None);
    }
    match Hub::new(&config.mcp_servers, &ws.config_dir()) {
        Ok(hub) => {
            let hub = Arc::new(hub);
            ws.keep_mcp(hub.clone());
            Ok(Some(hub))
        }
        // The build has no MCP: each turn says so as it does in process.
        Err(_) => Ok(None),
    }
}

/// Every [`MCP_WATCH_EVERY`], starts again the agent's MCP servers that died since they
/// were last used (killed, crashed, ended mid-call), and logs each restart.
fn keep_mcp_alive(hub: &Hub, args: &ActorArgs) {
    loop {
        std::thread::sleep(MCP_WATCH_EVERY);
        for line in hub.revive(&Cancel::new()) {
            tracing::warn!(agent = %args.agent, session = %args.session, "{line}");
        }
    }
}

/// On SIGTERM: stop every active turn, wait for them to end (they record `stopped`), end
/// the MCP servers, exit.
fn watch_term(term: &AtomicBool, shared: &Shared, socket: &std::path::Path, hub: Option<&Hub>) {
    while !term.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(4);
    loop {
        let active = shared.active.lock().map(|a| a.clone()).unwrap_or_default();
        if active.is_empty() || Instant::now() >= deadline {
            break;
        }
        for (_, cancel) in &active {
            cancel.cancel();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let the last outcome reach its client before the process ends.
    std::thread::sleep(Duration::from_millis(50));
    let _ = std::fs::remove_file(socket);
    if let Some(hub) = hub {
        hub.shutdown();
    }
    // The spans of its last turns (a failure is logged by the exporter).
    let _ = crate::telemetry::flush(crate::telemetry::FLUSH_BOUND);
    std::process::exit(0);
}

fn handle(ws: &Workspace, shared: &Shared, args: &ActorArgs, stream: UnixStream, heard: &dyn Fn()) {
    // Another repository's sandboxed command may find this socket by its path.
    if crate::tools::sandbox::peer_is_sandboxed(std::os::fd::AsFd::as_fd(&stream)) {
        return;
    }
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let _ = read_half.set_read_timeout(Some(super::REQUEST_WITHIN));
    let mut reader = BufReader::new(read_half);
    let mut line = Vec::new();
    let read = sock::read_line_std(&mut reader, &mut line, sock::LINE_LIMIT);
    heard();
    let mut out = stream;
    match read {
        Ok(Line::Whole) => {}
        Ok(Line::End) if !line.is_empty() => {}
        Ok(Line::TooLong) => {
            let _ = out.write_all(&wire::line(&Reply::Error(WireError::from(
                &sock::too_long(),
            ))));
            return;
        }
        Ok(Line::End) | Err(_) => return,
    }
    drop(reader);
    let mut registered = None;
    let reply = match serde_json::from_slice::<Request>(&line) {
        Ok(Request::Ping) => Reply::Pong(info(shared)),
        Ok(Request::Send(w)) => {
            let (reply, id) = turn(ws, shared, args, w.into_options(), &mut out);
            registered = id;
            reply
        }
        Ok(other) => Reply::Error(WireError::from(&RuntimeError::NotSupported(format!(
            "{other:?} sent to an actor"
        )))),
        Err(e) => Reply::Error(WireError::from(&RuntimeError::Invalid {
            message: format!("a request that does not parse: {e}"),
            hint: "the client and serve must be the same axocoatl build".into(),
        })),
    };
    let _ = out.write_all(&wire::line(&reply));
    let _ = out.flush();
    // Only once its outcome is on its way is a turn no longer active (SIGTERM waits for it).
    if let (Some(id), Ok(mut active)) = (registered, shared.active.lock()) {
        active.retain(|(n, _)| *n != id);
    }
}

fn info(shared: &Shared) -> ActorInfo {
    ActorInfo {
        pid: std::process::id(),
        active: shared.active.lock().map(|a| a.len()).unwrap_or(0),
        last_turn: shared.last_turn.lock().ok().and_then(|t| t.clone()),
        idle_ms: shared
            .last_end
            .lock()
            .map(|t| t.elapsed().as_millis() as u64)
            .unwrap_or(0),
        mcp: shared.hub.as_ref().map(|h| h.status()).unwrap_or_default(),
    }
}

fn turn(
    ws: &Workspace,
    shared: &Shared,
    args: &ActorArgs,
    opts: engine::SendOptions,
    out: &mut UnixStream,
) -> (Reply, Option<u64>) {
    if opts.session != args.session {
        let reply = Reply::Error(WireError::from(&RuntimeError::Invalid {
            message: format!(
                "this actor keeps session {:?}, not {:?}",
                args.session, opts.session
            ),
            hint: "serve routes each turn to the actor of its session".into(),
        }));
        return (reply, None);
    }
    // `opts.agent` stays as the client gave it: serve routed the turn here by the agent it
    // resolves to, and in a multi-agent session none given means the lattice decides.
    let cancel = Cancel::new();
    let id = {
        let mut next = shared.next.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        *next
    };
    if let Ok(mut active) = shared.active.lock() {
        active.push((id, cancel.clone()));
    }
    let held = shared.held.lock().ok().and_then(|mut h| h.take());
    let mut sink = |ev: engine::TurnEvent<'_>| {
        let line = wire::line(&Reply::Event {
            event: ev.into_owned(),
        });
        if out.write_all(&line).and_then(|()| out.flush()).is_err() {
            // The client is gone (killed): nobody waits for this turn any more.
            cancel.cancel();
        }
    };
    let started = Instant::now();
    let session = opts.session.clone();
    let result = engine::send_held(ws, opts, held, &cancel, &mut sink);
    if let Ok(mut t) = shared.last_end.lock() {
        *t = Instant::now();
    }
    // One line per turn in serve's log: which turn, how it ended, how long, what it used.
    let ms = started.elapsed().as_millis() as u64;
    match &result {
        Ok((o, _)) => tracing::info!(
            turn = %o.turn,
            session = %o.session,
            agent = %o.agent,
            state = %o.state.as_str(),
            ms,
            prompt_tokens = o.usage.prompt_tokens,
            completion_tokens = o.usage.completion_tokens,
            "turn ended"
        ),
        Err(e) => {
            tracing::warn!(session = %session, agent = %args.agent, error = %e, ms, "turn not run")
        }
    }
    let reply = match result {
        Ok((outcome, conversation)) => {
            if let Ok(mut h) = shared.held.lock() {
                *h = Some(conversation);
            }
            if let Ok(mut t) = shared.last_turn.lock() {
                *t = Some(outcome.turn.clone());
            }
            Reply::Outcome(outcome)
        }
        Err(e) => Reply::Error(WireError::from(&e)),
    };
    (reply, Some(id))
}
