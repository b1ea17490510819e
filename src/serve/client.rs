//! The command side of the control socket: `send`, `retry`, `rewind`, `stop` and `agents`
//! reach a running `serve` through it. When no `serve` runs (no socket file, or its lock is
//! free), [`connect`] says so and the command runs in process: a one-shot command pays one
//! `stat` for this, and never starts a runtime.

use std::io::{BufRead, BufReader, ErrorKind as IoKind, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axocoatl_store::layout;
use axocoatl_store::Repo;

use super::wire::{Reply, Request, StatusReport, WireSend};
use crate::control::StopAccepted;
use crate::engine::{TurnEvent, TurnOutcome};
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, Scope, Want};
use crate::provider::Cancel;
use crate::rewind::RewindOutcome;
use crate::workspace::Workspace;

/// The control socket, owner-only, under `run/`.
pub fn socket_path(repo: &Repo) -> PathBuf {
    repo.path(layout::SERVE_SOCKET)
}

/// Whether a `serve` holds the repository's serve lock.
pub fn serve_alive(repo: &Repo) -> Result<bool> {
    Ok(axocoatl_store::run::serve::held(repo)?)
}

/// A connection to the running `serve`.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    buf: Vec<u8>,
}

/// Connects to the running `serve`; `None` when none runs (the command runs in process).
pub fn connect(repo: &Repo) -> Result<Option<Client>> {
    let path = socket_path(repo);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if !serve_alive(repo)? {
            // A socket left by a serve that was killed.
            return Ok(None);
        }
        match axocoatl_store::run::serve::holder(repo) {
            Some(h) if h.protocol != Some(super::wire::PROTOCOL) => {
                return Err(RuntimeError::ServeOtherBuild {
                    pid: h.pid,
                    protocol: h.protocol,
                    ours: super::wire::PROTOCOL,
                })
            }
            // Serve is starting: it writes its note right after taking its lock.
            None if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            _ => {}
        }
        match super::sock::connect_std(&path) {
            Ok(stream) => return Client::new(stream, &path).map(Some),
            // Serve is starting (it binds after taking its lock) or ending.
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(RuntimeError::io("connect to", path)(e)),
        }
    }
}

/// Connects to the running `serve`, or [`RuntimeError::ServeNotRunning`] (`agents`).
pub fn require(repo: &Repo) -> Result<Client> {
    connect(repo)?.ok_or_else(|| RuntimeError::ServeNotRunning {
        repo: repo.workdir().to_path_buf(),
    })
}

impl Client {
    pub fn new(stream: UnixStream, path: &std::path::Path) -> Result<Client> {
        let reader = BufReader::new(
            stream
                .try_clone()
                .map_err(RuntimeError::io("connect to", path))?,
        );
        Ok(Client {
            stream,
            reader,
            buf: Vec::new(),
        })
    }

    fn request(&mut self, req: &Request) -> Result<()> {
        self.stream
            .write_all(&super::wire::line(req))
            .and_then(|()| self.stream.flush())
            .map_err(|e| RuntimeError::ServeLost {
                detail: format!("cannot write the request: {e}"),
            })
    }

    /// The next reply line; `Ok(None)` when the read timed out (see [`Client::send`]).
    fn next(&mut self) -> Result<Option<Reply>> {
        match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(0) => Err(RuntimeError::ServeLost {
                detail: "serve closed the connection before answering".into(),
            }),
            Ok(_) if self.buf.last() != Some(&b'\n') => Err(RuntimeError::ServeLost {
                detail: "serve closed the connection in the middle of an answer".into(),
            }),
            Ok(_) => {
                let reply =
                    serde_json::from_slice(&self.buf).map_err(|e| RuntimeError::ServeLost {
                        detail: format!("an answer that does not parse: {e}"),
                    });
                self.buf.clear();
                reply.map(Some)
            }
            Err(e) if matches!(e.kind(), IoKind::WouldBlock | IoKind::TimedOut) => Ok(None),
            Err(e) if e.kind() == IoKind::Interrupted => Ok(None),
            Err(e) => Err(RuntimeError::ServeLost {
                detail: e.to_string(),
            }),
        }
    }

    fn answer(&mut self, req: &Request) -> Result<Reply> {
        self.request(req)?;
        loop {
            match self.next()? {
                Some(Reply::Error(e)) => return Err(e.into()),
                Some(reply) => return Ok(reply),
                None => continue,
            }
        }
    }

    /// Runs a turn in the actor of its session and agent, reporting its events to `sink`
    /// as they come, exactly as `engine::send` does in process. A cancel (Ctrl-C) becomes a
    /// stop request of the turn once it has begun, as in process.
    pub fn send(
        mut self,
        ws: &Workspace,
        opts: WireSend,
        cancel: &Cancel,
        sink: &mut dyn FnMut(TurnEvent<'_>),
    ) -> Result<TurnOutcome> {
        self.request(&Request::Send(opts))?;
        self.stream
            .set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| RuntimeError::ServeLost {
                detail: e.to_string(),
            })?;
        let mut turn: Option<String> = None;
        let mut agent_name: Option<String> = None;
        let mut stop_sent = false;
        loop {
            if !stop_sent && cancel.is_cancelled() {
                if let Some(t) = &turn {
                    // The same stop another terminal would send; the actor's turn sees it.
                    let _ = crate::control::stop(ws, t);
                    stop_sent = true;
                }
            }
            let next = match (self.next(), &turn) {
                // The actor died under the turn (kill -9): report how the ledger ends it.
                (Err(RuntimeError::ServeLost { .. }), Some(t)) => {
                    return ended_without_answer(ws, t, agent_name)
                }
                (next, _) => next?,
            };
            match next {
                None => continue,
                Some(Reply::Event { event }) => {
                    match &event {
                        TurnEvent::Begun {
                            turn: t,
                            agent_name: name,
                            ..
                        } => {
                            turn = Some(t.to_string());
                            agent_name = name.as_deref().map(str::to_owned);
                        }
                        TurnEvent::Continued { turn: t, .. } => turn = Some(t.to_string()),
                        _ => {}
                    }
                    sink(event);
                }
                Some(Reply::Outcome(o)) => return Ok(o),
                Some(Reply::Error(e)) => return Err(e.into()),
                Some(other) => {
                    return Err(RuntimeError::ServeLost {
                        detail: format!("an unexpected answer to a turn: {other:?}"),
                    })
                }
            }
        }
    }

    pub fn stop(mut self, turn: &str) -> Result<StopAccepted> {
        match self.answer(&Request::Stop {
            turn: turn.to_owned(),
        })? {
            Reply::Stopped { turn, session } => Ok(StopAccepted { turn, session }),
            other => Err(unexpected(other)),
        }
    }

    pub fn rewind(mut self, turn: &str, session: Option<&str>) -> Result<RewindOutcome> {
        match self.answer(&Request::Rewind {
            turn: turn.to_owned(),
            session: session.map(str::to_owned),
        })? {
            Reply::Rewound(o) => Ok(o.into()),
            other => Err(unexpected(other)),
        }
    }

    pub fn status(mut self, agent: Option<&str>) -> Result<StatusReport> {
        match self.answer(&Request::Status {
            agent: agent.map(str::to_owned),
        })? {
            Reply::Status(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// `agents restart` and `agents set`: the sentence serve answers.
    pub fn act(mut self, req: &Request) -> Result<String> {
        match self.answer(req)? {
            Reply::Done { message } => Ok(message),
            other => Err(unexpected(other)),
        }
    }
}

/// A turn whose actor (or serve) ended before answering: once the ledger has its terminal
/// record (the restarted actor, or any next command, records it `interrupted`), the
/// outcome as recorded.
fn ended_without_answer(
    ws: &Workspace,
    turn: &str,
    agent_name: Option<String>,
) -> Result<TurnOutcome> {
    let lost = || RuntimeError::ServeLost {
        detail: format!("the process running turn {turn} ended before the turn did"),
    };
    let Some(state) = crate::control::wait_for_end(ws, turn, Some(Duration::from_secs(10)))? else {
        return Err(lost());
    };
    let projection = Projection::of(ws.repo(), Scope::Prefix(turn), Want::VIEWS)?;
    let view = projection.resolve(turn)?;
    Ok(TurnOutcome {
        turn: view.turn.clone(),
        session: view.session.clone(),
        agent: view.agent.clone(),
        agent_name,
        state,
        output: crate::conversation::output_text(ws.repo(), view)?,
        error: view.error.clone(),
        usage: view.usage.unwrap_or_default(),
    })
}

/// `stop`: through the running `serve`, else in process.
pub fn stop(ws: &Workspace, prefix: &str) -> Result<StopAccepted> {
    match connect(ws.repo())? {
        Some(client) => client.stop(prefix),
        None => crate::control::stop(ws, prefix),
    }
}

/// `rewind`: through the running `serve` (under the session lock, so never beside a turn
/// of an actor), else in process.
pub fn rewind(ws: &Workspace, prefix: &str, session: Option<&str>) -> Result<RewindOutcome> {
    match connect(ws.repo())? {
        Some(client) => client.rewind(prefix, session),
        None => crate::rewind::rewind(ws.repo(), ws.config().ok(), prefix, session),
    }
}

fn unexpected(reply: Reply) -> RuntimeError {
    RuntimeError::ServeLost {
        detail: format!("an unexpected answer: {reply:?}"),
    }
}
