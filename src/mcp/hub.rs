//! The MCP servers of one owner (a turn, an `mcp list`, an agent's actor under `serve`):
//! started on demand, concurrently, and ended when the hub is dropped or shut down.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::client::Server;
use super::{CallResult, McpServerStatus, Prepared, ServerReport};
use crate::config::McpServerConfig;
use crate::provider::Cancel;

enum Slot {
    Running(Box<Server>),
    /// Why it is not running (it failed to start, died, or was stopped).
    Down(String),
}

/// One server of the hub, with its history.
struct Entry {
    slot: Slot,
    /// It was running and ended without being asked to: [`Hub::revive`] starts it again.
    died: bool,
    /// How many times it was started.
    starts: u32,
    /// Why it last ended or failed to start.
    last_error: Option<String>,
}

type Entries = BTreeMap<String, Entry>;

pub struct Hub {
    /// Current-thread: work happens only while a caller waits in `block_on`.
    rt: tokio::runtime::Runtime,
    configs: BTreeMap<String, McpServerConfig>,
    dir: PathBuf,
    entries: Mutex<Entries>,
    last_status: Mutex<Vec<McpServerStatus>>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.lock();
        let states: Vec<(&str, bool)> = entries
            .iter()
            .map(|(k, e)| (k.as_str(), matches!(e.slot, Slot::Running(_))))
            .collect();
        f.debug_struct("Hub")
            .field("dir", &self.dir)
            .field("running", &states)
            .finish()
    }
}

impl Hub {
    /// A hub for the servers of `configs`, whose relative paths and working directory are
    /// `dir` (the config file's directory). Nothing starts yet.
    pub fn new(configs: &BTreeMap<String, McpServerConfig>, dir: &Path) -> Result<Hub, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime MCP servers need: {e}"))?;
        Ok(Hub {
            rt,
            configs: configs.clone(),
            dir: dir.to_path_buf(),
            entries: Mutex::new(BTreeMap::new()),
            last_status: Mutex::new(Vec::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes sure each of `names` is running: starts those never started and restarts those
    /// that failed or died, all at once. Reports every server, in the order of `names`.
    pub fn prepare(&self, names: &[String], cancel: &Cancel) -> Prepared {
        let mut entries = self.lock();
        let mut starting: Vec<String> = Vec::new();
        for name in names {
            let alive = match entries.get_mut(name).map(|e| &mut e.slot) {
                Some(Slot::Running(server)) => server.exited().is_none(),
                _ => false,
            };
            if !alive && !starting.contains(name) {
                starting.push(name.clone());
            }
        }
        let mut prepared = Prepared {
            warnings: self.start(&mut entries, &starting, cancel),
            ..Prepared::default()
        };
        let mut seen = Vec::new();
        for name in names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let report = match entries.get(name).map(|e| &e.slot) {
                Some(Slot::Running(s)) => ServerReport {
                    server: name.clone(),
                    error: None,
                    tools: s.tools.clone(),
                },
                Some(Slot::Down(why)) => ServerReport {
                    server: name.clone(),
                    error: Some(why.clone()),
                    tools: Vec::new(),
                },
                None => ServerReport {
                    server: name.clone(),
                    error: Some(format!("MCP server `{name}` was not started")),
                    tools: Vec::new(),
                },
            };
            prepared.servers.push(report);
        }
        prepared
    }

    /// (Re)starts `names` concurrently: a running process of theirs is ended first. Returns
    /// the warnings of the servers that started (tools left out).
    fn start(&self, entries: &mut Entries, names: &[String], cancel: &Cancel) -> Vec<String> {
        let mut before: BTreeMap<String, (u32, Option<String>)> = BTreeMap::new();
        let mut dead: Vec<Server> = Vec::new();
        for name in names {
            let Some(old) = entries.remove(name) else {
                continue;
            };
            let mut last_error = old.last_error;
            if let Slot::Running(mut server) = old.slot {
                if let Some(why) = server.exited() {
                    last_error = Some(why);
                }
                dead.push(*server);
            }
            before.insert(name.clone(), (old.starts, last_error));
        }
        let started = self.rt.block_on(async {
            for server in dead {
                server.shutdown().await;
            }
            let mut set = tokio::task::JoinSet::new();
            for name in names {
                let Some(cfg) = self.configs.get(name).cloned() else {
                    continue;
                };
                let (name, dir, cancel) = (name.clone(), self.dir.clone(), cancel.clone());
                set.spawn(async move {
                    let r = Server::start(&name, &cfg, &dir, &cancel).await;
                    (name, r)
                });
            }
            let mut out = Vec::new();
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok(x) => out.push(x),
                    Err(e) => out.push((
                        String::new(),
                        Err(format!("an MCP server start failed: {e}")),
                    )),
                }
            }
            out
        });
        let mut warnings = Vec::new();
        for name in names {
            if !self.configs.contains_key(name) {
                let why = format!("`{name}` is not an entry of `mcp_servers:`");
                entries.insert(
                    name.clone(),
                    Entry {
                        slot: Slot::Down(why.clone()),
                        died: false,
                        starts: 0,
                        last_error: Some(why),
                    },
                );
            }
        }
        for (name, r) in started {
            let (starts, last_error) = before.remove(&name).unwrap_or_default();
            let entry = match r {
                Ok(mut server) => {
                    warnings.append(&mut server.warnings);
                    Entry {
                        slot: Slot::Running(Box::new(server)),
                        died: false,
                        starts: starts + 1,
                        last_error,
                    }
                }
                Err(why) => Entry {
                    slot: Slot::Down(why.clone()),
                    died: false,
                    starts: starts + 1,
                    last_error: Some(why),
                },
            };
            entries.insert(name, entry);
        }
        warnings
    }

    /// Calls `tool` (its name on `server`) with `args`. Never fails: whatever goes wrong is
    /// an error result, with warnings for the user.
    pub fn call(&self, server: &str, tool: &str, args: &Value, cancel: &Cancel) -> CallResult {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(server) else {
            return CallResult::error(format!("MCP server `{server}` was not started"));
        };
        let running = match &mut entry.slot {
            Slot::Running(s) => s,
            Slot::Down(why) => {
                return CallResult::error(format!(
                    "{why}; its tools are unavailable until it starts again"
                ))
            }
        };
        let (result, alive) = self.rt.block_on(running.call(tool, args, cancel));
        if !alive {
            let why = if result.stopped {
                format!("MCP server `{server}` was ended when the turn was stopped")
            } else {
                result.text.clone()
            };
            entry.died = !result.stopped;
            entry.last_error = Some(why.clone());
            if let Slot::Running(dead) = std::mem::replace(&mut entry.slot, Slot::Down(why)) {
                self.rt.block_on(dead.shutdown());
            }
        }
        result
    }

    /// Starts again every server that was running and has ended since (it crashed, was
    /// killed, or died in a call): what `serve`'s actors do between turns, so that a
    /// server lives as long as its agent. Returns one line per server it started again.
    pub fn revive(&self, cancel: &Cancel) -> Vec<String> {
        let mut entries = self.lock();
        let mut names = Vec::new();
        for (name, entry) in entries.iter_mut() {
            let ended = match &mut entry.slot {
                Slot::Running(server) => server.exited().is_some(),
                Slot::Down(_) => entry.died,
            };
            if ended {
                names.push(name.clone());
            }
        }
        if names.is_empty() {
            return Vec::new();
        }
        let mut lines = self.start(&mut entries, &names, cancel);
        for name in &names {
            let Some(entry) = entries.get(name) else {
                continue;
            };
            let why = entry.last_error.as_deref().unwrap_or("it ended");
            lines.push(match &entry.slot {
                Slot::Running(s) => format!("{why}; started again (pid {})", s.pid()),
                Slot::Down(now) => format!("MCP server `{name}` could not be started again: {now}"),
            });
        }
        lines
    }

    /// Each server it has started, by name: state, pid, restarts, last error. Never waits:
    /// while a call or a start holds the servers, the last status taken is returned.
    pub fn status(&self) -> Vec<McpServerStatus> {
        let mut last = self.last_status.lock().unwrap_or_else(|p| p.into_inner());
        let mut entries = match self.entries.try_lock() {
            Ok(e) => e,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return last.clone(),
        };
        *last = entries
            .iter_mut()
            .map(|(name, entry)| {
                let (state, pid, ended) = match &mut entry.slot {
                    Slot::Running(s) => match s.exited() {
                        None => ("running", Some(s.pid()), None),
                        Some(why) => ("down", None, Some(why)),
                    },
                    Slot::Down(_) => ("down", None, None),
                };
                McpServerStatus {
                    server: name.clone(),
                    state: state.to_owned(),
                    pid,
                    restarts: entry.starts.saturating_sub(1),
                    last_error: ended.or_else(|| entry.last_error.clone()),
                }
            })
            .collect();
        last.clone()
    }

    /// Ends every running server now (their stdin closed, then SIGTERM, SIGKILL).
    pub fn shutdown(&self) {
        let running: Vec<Server> = std::mem::take(&mut *self.lock())
            .into_values()
            .filter_map(|e| match e.slot {
                Slot::Running(s) => Some(*s),
                Slot::Down(_) => None,
            })
            .collect();
        if running.is_empty() {
            return;
        }
        self.rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for server in running {
                set.spawn(server.shutdown());
            }
            while set.join_next().await.is_some() {}
        });
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.shutdown();
    }
}
