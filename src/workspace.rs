//! Opening a repository and its configuration; orphan recovery on every open.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use axocoatl_store::names::{Names, Resolved};
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
    /// The directory of the home repository ([`home_dir`]), used when discovery finds no
    /// repository; `None` keeps discovery strict (`-C DIR` must lead to a repository).
    pub home: Option<PathBuf>,
    /// How the repository's ledger keeps its indexes and reports their builds (the command
    /// line sets them per command).
    pub index: axocoatl_store::index::IndexOptions,
    /// Only read: a home repository not made yet is not made for this command (there is
    /// nothing in it to read), and opening is an error instead.
    pub read_only: bool,
}

/// How a repository was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--repo` / `AXOCOATL_DIR`.
    Explicit,
    /// A `.axocoatl/` in the start directory or one above it.
    Discovered,
    /// None of those: the home repository.
    Home,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Explicit => "explicit",
            Source::Discovered => "discovered",
            Source::Home => "home",
        }
    }
}

/// The repository a command uses, before it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The `.axocoatl` directory (for the home repository, possibly not created yet).
    pub root: PathBuf,
    pub source: Source,
}

impl Located {
    /// Whether the repository exists (its format marker does).
    pub fn exists(&self) -> bool {
        self.root.join(axocoatl_store::layout::FORMAT_FILE).exists()
    }
}

/// The directory of the home repository: `$XDG_DATA_HOME/axocoatl`, else
/// `~/.local/share/axocoatl`; `None` when neither variable gives an absolute path.
pub fn home_dir() -> Option<PathBuf> {
    let absolute = |key: &str| {
        std::env::var_os(key)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_DATA_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".local/share")))
        .map(|d| d.join("axocoatl"))
}

impl Locator {
    /// The repository commands use: explicit, else found walking up, else the home
    /// repository (which may not exist yet). One that another user owns or can write is
    /// refused unless the user allows it ([`crate::trust`]).
    pub fn locate(&self) -> Result<Located> {
        let located = self.locate_unchecked()?;
        crate::trust::check_repository(&located.root)?;
        Ok(located)
    }

    fn locate_unchecked(&self) -> Result<Located> {
        if let Some(p) = &self.repo {
            let p = if p.is_absolute() {
                p.clone()
            } else {
                self.cwd.join(p)
            };
            return Ok(Located {
                root: repo::resolve_explicit(&p)?,
                source: Source::Explicit,
            });
        }
        match (repo::discover(&self.cwd), &self.home) {
            (Ok(root), _) => Ok(Located {
                root,
                source: Source::Discovered,
            }),
            (Err(axocoatl_store::Error::NotFound { .. }), Some(home)) => Ok(Located {
                root: home.join(axocoatl_store::layout::REPO_DIR),
                source: Source::Home,
            }),
            (Err(e), _) => Err(e.into()),
        }
    }

    /// The repository commands use, when it exists (a home repository not created yet is
    /// not found).
    pub fn find_repo(&self) -> Result<PathBuf> {
        let located = self.locate()?;
        if located.source == Source::Home && !located.exists() {
            return Err(axocoatl_store::Error::NotFound {
                start: self.cwd.clone(),
            }
            .into());
        }
        Ok(located.root)
    }
}

/// Why the configuration was not loaded (kept, so that each use says the same).
#[derive(Debug)]
enum NotLoaded {
    Invalid(Vec<Diagnostic>),
    /// Not trusted ([`crate::trust`]), or the allow-list did not read: the error as it
    /// was reported.
    Refused(crate::error::RemoteError),
}

pub struct Workspace {
    repo: Repo,
    config_path: PathBuf,
    config: OnceLock<std::result::Result<Loaded, NotLoaded>>,
    /// Turns found orphaned at open and recorded as interrupted.
    pub recovered: Vec<String>,
    /// MCP servers this process keeps across turns (an actor's).
    mcp: Option<std::sync::Arc<crate::mcp::Hub>>,
    /// Providers this process keeps loaded across turns (`chat`'s, an actor's).
    providers: Option<std::sync::Arc<crate::provider::Kept>>,
    /// Renamed and removed sessions, read on first use.
    names: OnceLock<Names>,
    /// How the repository was found.
    pub source: Source,
    /// This open created the home repository (with a starter configuration).
    pub created_home: bool,
    /// For the home repository, the directory the command runs in (resolved): its current
    /// session is that directory's, and agents' tools work there.
    here: Option<PathBuf>,
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
        let located = locator.locate()?;
        let mut created_home = false;
        if located.source == Source::Home && !located.exists() && locator.read_only {
            return Err(RuntimeError::NoHomeYet {
                start: locator.cwd.display().to_string(),
                home: located.root.display().to_string(),
            });
        }
        if located.source == Source::Home && !located.exists() {
            let workdir = located.root.parent().unwrap_or(&located.root);
            match init(workdir) {
                Ok(_) => created_home = true,
                // Another process made it first.
                Err(RuntimeError::Store(axocoatl_store::Error::AlreadyExists { .. })) => {}
                Err(e) => return Err(e),
            }
        }
        if created_home {
            // Made now, in a directory that may already have been there.
            crate::trust::check_repository(&located.root)?;
        }
        let root = located.root;
        let options = OpenOptions {
            index: locator.index,
            ..open_options()
        };
        let repo = Repo::open(&root, &options)?;
        let config_path = match &locator.config {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => locator.cwd.join(p),
            None => repo.workdir().join(CONFIG_FILE),
        };
        let recovered = session::recover_orphans(&repo)?;
        // Temporary directories of commands whose process was killed.
        crate::scratch::sweep(repo.root());
        let ws = Workspace {
            repo,
            config_path,
            config: OnceLock::new(),
            recovered,
            mcp: None,
            providers: None,
            names: OnceLock::new(),
            source: located.source,
            created_home,
            here: match located.source {
                Source::Home => Some(
                    locator
                        .cwd
                        .canonicalize()
                        .map_err(RuntimeError::io("resolve", &locator.cwd))?,
                ),
                Source::Explicit | Source::Discovered => None,
            },
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

    /// For the home repository, the directory the command runs in; `None` for a project's.
    pub fn here(&self) -> Option<&Path> {
        self.here.as_deref()
    }

    /// Where agents' tools work: the configuration's `workspace:` (relative to the
    /// configuration file); without one, a project's directory (the configuration's), or
    /// for the home repository the directory the command runs in.
    pub fn tools_dir(&self) -> Result<PathBuf> {
        let config = self.config()?;
        Ok(match (&config.workspace, &self.here) {
            (Some(d), _) => self.config_dir().join(d),
            (None, Some(here)) => here.clone(),
            (None, None) => self.config_dir(),
        })
    }

    /// The current session, as people name it: `HEAD`, or in the home repository the
    /// current session of the directory the command runs in (each directory has its own,
    /// named after it until one is chosen there).
    pub fn head(&self) -> std::result::Result<String, axocoatl_store::Error> {
        match &self.here {
            Some(here) => Ok(self
                .repo
                .dir_head(here)?
                .unwrap_or_else(|| dir_session(here))),
            None => self.repo.head(),
        }
    }

    /// Makes `session` the current session ([`Workspace::head`]).
    pub fn set_head(&self, session: &str) -> Result<()> {
        match &self.here {
            Some(here) => self.repo.set_dir_head(here, session)?,
            None => self.repo.set_head(session)?,
        }
        Ok(())
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The validated configuration, loaded on first use. A file another user owns or can
    /// write is refused unless the user allows it ([`crate::trust`]).
    pub fn loaded(&self) -> Result<&Loaded> {
        let loaded = self.config.get_or_init(|| {
            let path = &self.config_path;
            match config::load_checked(path, |meta| crate::trust::check_configuration(path, meta)) {
                Ok(read) => read.map_err(NotLoaded::Invalid),
                Err(refused) => Err(NotLoaded::Refused(crate::error::RemoteError::of(&refused))),
            }
        });
        match loaded {
            Ok(l) => Ok(l),
            Err(NotLoaded::Refused(e)) => Err(RuntimeError::Remote(e.clone())),
            Err(NotLoaded::Invalid(diags)) => {
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

    /// Keeps the providers of this process's turns loaded from one turn to the next (`chat`,
    /// a `serve` actor): a `local` model is loaded by the first turn only.
    pub fn keep_providers(&mut self) {
        self.providers
            .get_or_insert_with(crate::provider::Kept::new);
    }

    /// The providers kept by [`Workspace::keep_providers`], if any.
    pub fn kept_providers(&self) -> Option<&std::sync::Arc<crate::provider::Kept>> {
        self.providers.as_ref()
    }

    /// Opens `resolved` for a turn: from the providers this process keeps, when it keeps
    /// them, else anew.
    pub fn open_provider(
        &self,
        resolved: &ResolvedProvider,
    ) -> std::result::Result<crate::provider::Held, crate::provider::ProviderError> {
        crate::provider::kept::open_in(self.providers.as_ref(), resolved)
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
                )
                .into(),
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
    /// `HEAD`, else (when `HEAD` is missing) the configuration's `default_session`; as the
    /// ledger knows it (see [`Workspace::ledger_name`]).
    pub fn session_or_head(&self, explicit: Option<&str>) -> Result<String> {
        let chosen = self.chosen_session(explicit)?;
        self.ledger_name(&chosen)
    }

    /// The session a turn goes to, as [`Workspace::session_or_head`] names it, with the
    /// name shown to people; a name freed by a rename or removal gets its ledger name
    /// now (recorded, so the turn's session is found by that name afterwards).
    pub fn session_for_turn(&self, explicit: Option<&str>) -> Result<(String, String)> {
        let chosen = self.chosen_session(explicit)?;
        let root = self.repo.root();
        let ledger = match self.names()?.resolve(&chosen) {
            Resolved::Ledger(ledger) => ledger,
            Resolved::Freed => Names::update(root, |names| match names.resolve(&chosen) {
                Resolved::Ledger(ledger) => Ok(ledger),
                Resolved::Freed => {
                    let fresh = names.fresh_ledger_name(&chosen, &|n| self.in_ledger(n))?;
                    names.set_alias(&chosen, &fresh);
                    Ok(fresh)
                }
            })?,
        };
        Ok((ledger, chosen))
    }

    /// The session name a command was given or defaults to, as people name it.
    pub fn chosen_session(&self, explicit: Option<&str>) -> Result<String> {
        let chosen = explicit
            .map(str::to_owned)
            .or_else(|| std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()));
        if let Some(s) = chosen {
            axocoatl_store::layout::check_session_name(&s)?;
            return Ok(s);
        }
        match self.head() {
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

    /// The renamed and removed sessions of this repository (read once).
    pub fn names(&self) -> Result<&Names> {
        if let Some(names) = self.names.get() {
            return Ok(names);
        }
        let names = Names::load(self.repo.root())?;
        Ok(self.names.get_or_init(|| names))
    }

    /// The name the ledger's records carry for the session people call `name`: the same
    /// name unless the session was renamed; for a name freed by a rename or removal, the
    /// name a new session of that name would get (nothing is written).
    pub fn ledger_name(&self, name: &str) -> Result<String> {
        match self.names()?.resolve(name) {
            Resolved::Ledger(ledger) => Ok(ledger),
            Resolved::Freed => self
                .names()?
                .fresh_ledger_name(name, &|n| self.in_ledger(n))
                .map_err(Into::into),
        }
    }

    /// The name people know the session with ledger name `ledger` by (itself unless it
    /// was renamed; a removed session, the name it had when it was removed).
    pub fn shown_session<'a>(&'a self, ledger: &'a str) -> &'a str {
        match self.names() {
            Ok(names) if !names.is_empty() => names
                .shown(ledger)
                .or_else(|| names.removed(ledger).map(|(_, name)| name))
                .unwrap_or(ledger),
            _ => ledger,
        }
    }

    /// [`Workspace::shown_session`] for people reading a listing: a removed session is
    /// marked so (its name may be another session's now).
    pub fn session_label(&self, ledger: &str) -> String {
        let shown = self.shown_session(ledger);
        match self.names() {
            Ok(names) if names.removed(ledger).is_some() => format!("{shown} (removed)"),
            _ => shown.to_owned(),
        }
    }

    /// Whether the ledger has records of session `name`.
    fn in_ledger(&self, name: &str) -> bool {
        crate::history::sessions(&self.repo)
            .map(|l| l.sessions.contains_key(name))
            .unwrap_or(true)
    }

    /// The configuration's `default_session`, when it loads and names one.
    pub fn default_session(&self) -> Option<String> {
        self.config().ok().and_then(|c| c.default_session.clone())
    }
}

/// The session a directory using the home repository starts in: its name (what letters,
/// digits, `-`, `_` and `.` it has, at most 40 bytes) and a digest of its whole path, so two
/// directories of the same name never share one (`/home/ana/src/tool` → `tool-4e1a0c`).
pub fn dir_session(dir: &Path) -> String {
    let name: String = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut name = name.trim_start_matches(['.', '-']).to_owned();
    name.truncate(40);
    if name.is_empty() {
        name.push_str("dir");
    }
    let digest = blake3::hash(dir.as_os_str().as_encoded_bytes()).to_hex();
    format!("{name}-{}", &digest.as_str()[..6])
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
