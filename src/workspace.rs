//! Opening a repository and its configuration; orphan recovery on every open.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use axocoatl_store::repo::{self, OpenOptions};
use axocoatl_store::Repo;

use crate::config::{self, AgentConfig, Config, Diagnostic, Loaded, ResolvedProvider};
use crate::error::{Result, RuntimeError};
use crate::session;

/// The config file name beside `.axocoatl/`.
pub const CONFIG_FILE: &str = "axocoatl.yaml";
/// Overrides the repository location (the `.axocoatl` directory or the one holding it).
pub const DIR_ENV: &str = "AXOCOATL_DIR";
/// The session commands act on when `-s` is not given (before `HEAD`).
pub const SESSION_ENV: &str = "AXOCOATL_SESSION";
/// Segment size limit in bytes (tests use small segments).
pub const SEGMENT_LIMIT_ENV: &str = "AXOCOATL_SEGMENT_LIMIT";

/// Where to look for the repository and the configuration.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    /// The directory discovery starts from (after `-C`).
    pub cwd: PathBuf,
    /// `--repo` / `AXOCOATL_DIR`.
    pub repo: Option<PathBuf>,
    /// `--config`.
    pub config: Option<PathBuf>,
}

impl Locator {
    pub fn find_repo(&self) -> Result<PathBuf> {
        match &self.repo {
            Some(p) => {
                let p = if p.is_absolute() {
                    p.clone()
                } else {
                    self.cwd.join(p)
                };
                Ok(repo::resolve_explicit(&p)?)
            }
            None => Ok(repo::discover(&self.cwd)?),
        }
    }
}

pub struct Workspace {
    repo: Repo,
    config_path: PathBuf,
    config: OnceLock<std::result::Result<Loaded, Vec<Diagnostic>>>,
    /// Turns found orphaned at open and recorded as interrupted.
    pub recovered: Vec<String>,
    /// MCP servers this process keeps across turns (an actor's).
    mcp: Option<std::sync::Arc<crate::mcp::Hub>>,
}

pub fn open_options() -> OpenOptions {
    let mut options = OpenOptions::default();
    if let Some(limit) = std::env::var(SEGMENT_LIMIT_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
    {
        options.segment_limit = limit;
    }
    options
}

impl Workspace {
    /// Finds and opens the repository (format checked first), then records orphaned turns
    /// (begun, never ended, owner gone) as interrupted.
    pub fn open(locator: &Locator) -> Result<Workspace> {
        Workspace::open_with(locator, true)
    }

    /// [`Workspace::open`] without the 0.1.x import every open runs (for `axocoatl import`,
    /// which runs it itself and reports it, and `--dry-run`, which must not).
    pub fn open_without_import(locator: &Locator) -> Result<Workspace> {
        Workspace::open_with(locator, false)
    }

    fn open_with(locator: &Locator, import: bool) -> Result<Workspace> {
        let root = locator.find_repo()?;
        let repo = Repo::open(&root, &open_options())?;
        let config_path = match &locator.config {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => locator.cwd.join(p),
            None => repo.workdir().join(CONFIG_FILE),
        };
        let recovered = session::recover_orphans(&repo)?;
        // Temporary directories of commands whose process was killed.
        crate::scratch::sweep();
        let ws = Workspace {
            repo,
            config_path,
            config: OnceLock::new(),
            recovered,
            mcp: None,
        };
        // A rewind that died between its ledger boundary and its checkpoint: the ledger is
        // the authority, so the checkpoint is repaired before anything is served.
        crate::rewind::repair_pending(&ws.repo, &|| ws.config().ok().map(|c| c.checkpoint.keep))?;
        // A 0.1.x session without canonical turns is imported before anything is served.
        if import {
            crate::legacy::import_on_open(&ws.repo, &|| {
                ws.config().ok().map(|c| c.checkpoint.keep)
            })?;
        }
        Ok(ws)
    }

    pub fn repo(&self) -> &Repo {
        &self.repo
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The validated configuration, loaded on first use.
    pub fn loaded(&self) -> Result<&Loaded> {
        let loaded = self.config.get_or_init(|| config::load(&self.config_path));
        match loaded {
            Ok(l) => Ok(l),
            Err(diags) => {
                if !self.config_path.exists() {
                    return Err(RuntimeError::NoConfig {
                        path: self.config_path.display().to_string(),
                    });
                }
                Err(RuntimeError::Config(diags.clone()))
            }
        }
    }

    pub fn config(&self) -> Result<&Config> {
        self.loaded().map(|l| &l.config)
    }

    /// Keeps the MCP servers of this process's turns in `hub` (an actor's): they outlive
    /// each turn instead of ending with it.
    pub fn keep_mcp(&mut self, hub: std::sync::Arc<crate::mcp::Hub>) {
        self.mcp = Some(hub);
    }

    /// The hub set by [`Workspace::keep_mcp`], if any.
    pub fn kept_mcp(&self) -> Option<std::sync::Arc<crate::mcp::Hub>> {
        self.mcp.clone()
    }

    /// Uses `config` instead of reading the file (an actor runs with its `serve`'s
    /// configuration, patches included).
    pub fn set_config(&mut self, config: Config) {
        self.config = OnceLock::from(Ok(Loaded {
            config,
            path: self.config_path.clone(),
            warnings: Vec::new(),
        }));
    }

    /// Changes the configuration in memory only (`serve`'s `agents set`): the file is not
    /// touched.
    pub fn patch_config(&mut self, patch: impl FnOnce(&mut Config)) -> Result<()> {
        self.loaded()?;
        if let Some(Ok(loaded)) = self.config.get_mut() {
            patch(&mut loaded.config);
        }
        Ok(())
    }

    /// The directory relative config paths are resolved against.
    pub fn config_dir(&self) -> PathBuf {
        self.config_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.repo.workdir().to_path_buf())
    }

    /// `agent`'s provider as the configuration gives it, with this process's environment
    /// (API keys, `OLLAMA_HOST`) and paths relative to the configuration file; an error
    /// names the agent and the file to fix.
    pub fn resolve_provider(&self, agent: &AgentConfig) -> Result<ResolvedProvider> {
        let env = |k: &str| std::env::var(k).ok();
        self.config()?
            .resolve_provider(agent, &env, &self.config_dir())
            .map_err(|message| RuntimeError::Invalid {
                message,
                hint: format!(
                    "check the provider of agent {:?} in {}",
                    agent.id,
                    self.config_path().display()
                ),
            })
    }

    /// The sessions a listing covers: `None` for every session (`--all`), else the explicit
    /// one or `HEAD`.
    pub fn scope(&self, explicit: Option<&str>, all: bool) -> Result<Option<String>> {
        if all {
            Ok(None)
        } else {
            self.session_or_head(explicit).map(Some)
        }
    }

    /// The session a command acts on: `explicit` (`-s`), else `$AXOCOATL_SESSION`, else
    /// `HEAD`, else (when `HEAD` is missing) the configuration's `default_session`.
    pub fn session_or_head(&self, explicit: Option<&str>) -> Result<String> {
        let chosen = explicit
            .map(str::to_owned)
            .or_else(|| std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()));
        if let Some(s) = chosen {
            axocoatl_store::layout::check_session_name(&s)?;
            return Ok(s);
        }
        match self.repo.head() {
            Ok(head) => Ok(head),
            // A missing HEAD (damage that fsck reports) falls back to `default_session`.
            Err(e) => match (&e, self.default_session()) {
                (axocoatl_store::Error::BadHead { path, .. }, Some(session)) if !path.exists() => {
                    Ok(session)
                }
                _ => Err(e.into()),
            },
        }
    }

    /// The configuration's `default_session`, when it loads and names one.
    pub fn default_session(&self) -> Option<String> {
        self.config().ok().and_then(|c| c.default_session.clone())
    }
}

/// What [`init`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Initialized {
    /// The new `.axocoatl` directory.
    pub repository: PathBuf,
    pub config: PathBuf,
    /// A starter configuration was written (an existing one is kept as it is).
    pub config_written: bool,
    /// The current session (`HEAD`): the configuration's `default_session`, else `main`.
    pub session: String,
}

/// Creates a repository in `dir` (created if needed) and a starter `axocoatl.yaml` beside it
/// unless one exists. A kept configuration's `default_session` becomes `HEAD`.
pub fn init(dir: &Path) -> Result<Initialized> {
    std::fs::create_dir_all(dir).map_err(RuntimeError::io("create", dir))?;
    let repository = repo::init(dir)?;
    let config = dir.join(CONFIG_FILE);
    let config_written = !config.exists();
    if config_written {
        std::fs::write(&config, config::starter_config())
            .map_err(RuntimeError::io("write", &config))?;
    }
    let mut session = axocoatl_store::layout::DEFAULT_SESSION.to_owned();
    let named = config::load(&config)
        .ok()
        .and_then(|l| l.config.default_session);
    if let Some(name) = named.filter(|n| axocoatl_store::layout::check_session_name(n).is_ok()) {
        let r = Repo::open(&repository, &open_options())?;
        r.set_head(&name)?;
        session = name;
    }
    Ok(Initialized {
        repository,
        config,
        config_written,
        session,
    })
}
