//! The MCP servers of one owner (a turn, an `mcp list`, later an agent's actor): started on
//! demand, concurrently, and ended when the hub is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use super::client::Server;
use super::{CallResult, Prepared, ServerReport};
use crate::config::McpServerConfig;
use crate::provider::Cancel;

enum Slot {
    Running(Box<Server>),
    /// Why it is not running (it failed to start, died, or was stopped).
    Down(String),
}

pub struct Hub {
    /// Current-thread: work happens only while a caller waits in `block_on`.
    rt: tokio::runtime::Runtime,
    configs: BTreeMap<String, McpServerConfig>,
    dir: PathBuf,
    slots: Mutex<BTreeMap<String, Slot>>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let states: Vec<(&str, bool)> = slots
            .iter()
            .map(|(k, s)| (k.as_str(), matches!(s, Slot::Running(_))))
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
            slots: Mutex::new(BTreeMap::new()),
        })
    }

    /// Makes sure each of `names` is running: starts those never started and restarts those
    /// that failed or died, all at once. Reports every server, in the order of `names`.
    pub fn prepare(&self, names: &[String], cancel: &Cancel) -> Prepared {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut starting = Vec::new();
        for name in names {
            let alive = match slots.get_mut(name) {
                Some(Slot::Running(server)) => server.exited().is_none(),
                _ => false,
            };
            if !alive && !starting.contains(name) {
                starting.push(name.clone());
            }
        }
        let dead: Vec<Server> = starting
            .iter()
            .filter_map(|n| match slots.remove(n) {
                Some(Slot::Running(s)) => Some(*s),
                _ => None,
            })
            .collect();
        let mut prepared = Prepared::default();
        let started = self.rt.block_on(async {
            for server in dead {
                server.shutdown().await;
            }
            let mut set = tokio::task::JoinSet::new();
            for name in &starting {
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
        for name in &starting {
            if !self.configs.contains_key(name) {
                slots.insert(
                    name.clone(),
                    Slot::Down(format!("`{name}` is not an entry of `mcp_servers:`")),
                );
            }
        }
        for (name, r) in started {
            let slot = match r {
                Ok(mut server) => {
                    prepared.warnings.append(&mut server.warnings);
                    Slot::Running(Box::new(server))
                }
                Err(why) => Slot::Down(why),
            };
            slots.insert(name, slot);
        }
        let mut seen = Vec::new();
        for name in names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let report = match slots.get(name) {
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

    /// Calls `tool` (its name on `server`) with `args`. Never fails: whatever goes wrong is
    /// an error result, with warnings for the user.
    pub fn call(&self, server: &str, tool: &str, args: &Value, cancel: &Cancel) -> CallResult {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let running = match slots.get_mut(server) {
            Some(Slot::Running(s)) => s,
            Some(Slot::Down(why)) => {
                return CallResult::error(format!(
                    "{why}; its tools are unavailable until it starts again (at the next turn)"
                ))
            }
            None => {
                return CallResult::error(format!("MCP server `{server}` was not started"));
            }
        };
        let (result, alive) = self.rt.block_on(running.call(tool, args, cancel));
        if !alive {
            let why = if result.stopped {
                format!("MCP server `{server}` was ended when the turn was stopped")
            } else {
                result.text.clone()
            };
            if let Some(Slot::Running(dead)) = slots.insert(server.to_owned(), Slot::Down(why)) {
                self.rt.block_on(dead.shutdown());
            }
        }
        result
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let slots = std::mem::take(self.slots.get_mut().unwrap_or_else(|p| p.into_inner()));
        let running: Vec<Server> = slots
            .into_values()
            .filter_map(|s| match s {
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
