//! Shell completions that know the repository: agents, sessions and turn ids.
//!
//! The scripts in `completions/` (and `COMPLETE=bash axocoatl`) call back into the binary
//! with `COMPLETE` set; clap_complete then completes the command line, asking the functions
//! below for the values of the arguments that name repository things. They read the
//! repository the command would use from the shell's directory (or `AXOCOATL_DIR`),
//! create nothing and write nothing; any failure completes nothing.

use axocoatl::workspace::{self, Locator, CONFIG_FILE};
use axocoatl_store::repo::OpenOptions;
use axocoatl_store::Repo;
use clap_complete::engine::CompletionCandidate;

/// How many of the newest turns of the current session are offered.
const TURNS: usize = 50;

/// The repository and configuration file a command started here would use, when they exist.
fn locate() -> Option<(Repo, std::path::PathBuf)> {
    let locator = Locator {
        cwd: std::env::current_dir().ok()?,
        repo: std::env::var_os(workspace::DIR_ENV).map(Into::into),
        config: std::env::var_os("AXOCOATL_CONFIG").map(Into::into),
        home: workspace::home_dir(),
        index: Default::default(),
    };
    let root = locator.find_repo().ok()?;
    let repo = Repo::open(&root, &OpenOptions::default()).ok()?;
    let config = match locator.config {
        Some(c) if c.is_absolute() => c,
        Some(c) => locator.cwd.join(c),
        None => repo.workdir().join(CONFIG_FILE),
    };
    Some((repo, config))
}

/// The agents of the configuration, with their names.
pub fn agents() -> Vec<CompletionCandidate> {
    let Some((_, config)) = locate() else {
        return Vec::new();
    };
    let Ok(loaded) = axocoatl::config::load(&config) else {
        return Vec::new();
    };
    loaded
        .config
        .agents
        .iter()
        .map(|a| {
            let c = CompletionCandidate::new(&a.id);
            match &a.name {
                Some(name) => c.help(Some(name.clone().into())),
                None => c,
            }
        })
        .collect()
}

/// The sessions, as people name them (renamed ones by their new name, removed ones not).
pub fn sessions() -> Vec<CompletionCandidate> {
    let Some((repo, _)) = locate() else {
        return Vec::new();
    };
    let Ok(list) = axocoatl::history::sessions(&repo) else {
        return Vec::new();
    };
    let names = axocoatl_store::names::Names::load(repo.root()).unwrap_or_default();
    list.sessions
        .values()
        .filter_map(|s| {
            let shown = names.shown(&s.session)?;
            let turns = if s.turns == 1 { "turn" } else { "turns" };
            Some(CompletionCandidate::new(shown).help(Some(format!("{} {turns}", s.turns).into())))
        })
        .collect()
}

/// The newest turns of the current session, newest first, with their requests.
pub fn turns() -> Vec<CompletionCandidate> {
    let Some((repo, _)) = locate() else {
        return Vec::new();
    };
    let Ok(head) = repo.head() else {
        return Vec::new();
    };
    let names = axocoatl_store::names::Names::load(repo.root()).unwrap_or_default();
    let session = match names.resolve(&head) {
        axocoatl_store::names::Resolved::Ledger(l) => l,
        axocoatl_store::names::Resolved::Freed => return Vec::new(),
    };
    let Ok(listing) = axocoatl::query::history(&repo, Some(&session), None, Some(TURNS)) else {
        return Vec::new();
    };
    listing
        .turns
        .iter()
        .rev()
        .map(|t| {
            CompletionCandidate::new(&t.turn)
                .help(Some(crate::fmt::first_line(&t.request, 60).into()))
        })
        .collect()
}
