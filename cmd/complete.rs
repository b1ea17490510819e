//! Shell completions that know the repository: agents, sessions, turns (the running ones
//! for `stop`), attachments, automations, models and providers.
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

/// The repository and configuration file a command started here would use, when they
/// exist, and (for the home repository) the directory whose current session is the one.
fn locate() -> Option<(Repo, std::path::PathBuf, Option<std::path::PathBuf>)> {
    let locator = Locator {
        cwd: std::env::current_dir().ok()?,
        repo: std::env::var_os(workspace::DIR_ENV).map(Into::into),
        config: std::env::var_os("AXOCOATL_CONFIG").map(Into::into),
        home: workspace::home_dir(),
        index: Default::default(),
        read_only: true,
    };
    let located = locator.locate().ok()?;
    if !located.exists() {
        return None;
    }
    let repo = Repo::open(&located.root, &OpenOptions::default()).ok()?;
    let config = match locator.config {
        Some(c) if c.is_absolute() => c,
        Some(c) => locator.cwd.join(c),
        None => repo.workdir().join(CONFIG_FILE),
    };
    let here = match located.source {
        workspace::Source::Home => locator.cwd.canonicalize().ok(),
        _ => None,
    };
    Some((repo, config, here))
}

/// The configuration a command started here would read.
fn config() -> Option<axocoatl::config::Config> {
    let (_, path, _) = locate()?;
    axocoatl::config::load(&path).ok().map(|l| l.config)
}

/// The agents of the configuration, with their names.
pub fn agents() -> Vec<CompletionCandidate> {
    let Some(config) = config() else {
        return Vec::new();
    };
    config
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
    let Some((repo, _, _)) = locate() else {
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
    let Some((repo, _, here)) = locate() else {
        return Vec::new();
    };
    let head = match &here {
        Some(dir) => match repo.dir_head(dir) {
            Ok(head) => head.unwrap_or_else(|| workspace::dir_session(dir)),
            Err(_) => return Vec::new(),
        },
        None => match repo.head() {
            Ok(head) => head,
            Err(_) => return Vec::new(),
        },
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
        .chain([
            CompletionCandidate::new("@").help(Some("the latest turn of the session".into())),
            CompletionCandidate::new("@~1").help(Some("the turn before it".into())),
        ])
        .collect()
}

/// The turns running now, in any session (what `stop` can stop).
pub fn active_turns() -> Vec<CompletionCandidate> {
    let Some((repo, _, _)) = locate() else {
        return Vec::new();
    };
    let Ok(list) = axocoatl::history::sessions(&repo) else {
        return Vec::new();
    };
    let names = axocoatl_store::names::Names::load(repo.root()).unwrap_or_default();
    list.sessions
        .values()
        .filter_map(|s| {
            let turn = s.active_turn.as_deref()?;
            let shown = names.shown(&s.session).unwrap_or(&s.session);
            Some(CompletionCandidate::new(turn).help(Some(format!("running in {shown}").into())))
        })
        .collect()
}

/// How long completing `-m` waits for a server to list its models: a Tab press must not
/// hang on a server that is down.
const LIST_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// `-m`: every provider as `NAME:` and, for the providers the configuration's agents use
/// whose server lists its models (Ollama, OpenAI-compatible), `NAME:MODEL`; the default
/// agent's provider's models also bare (`-m MODEL` names a model of the agent's provider).
pub fn models() -> Vec<CompletionCandidate> {
    let Some((_, path, _)) = locate() else {
        return Vec::new();
    };
    let Ok(loaded) = axocoatl::config::load(&path) else {
        return Vec::new();
    };
    let config = &loaded.config;
    let dir = loaded.config_dir().to_path_buf();
    let mut out: Vec<CompletionCandidate> = axocoatl::config::provider_names(config)
        .into_iter()
        .map(|p| CompletionCandidate::new(format!("{p}:")).help(Some("provider".into())))
        .collect();
    let default = config.default_agent().map(|a| a.provider.as_str());
    let env = |k: &str| std::env::var(k).ok();
    let mut asked: Vec<&str> = Vec::new();
    for agent in &config.agents {
        if asked.contains(&agent.provider.as_str()) {
            continue;
        }
        asked.push(&agent.provider);
        let Ok(resolved) = config.resolve_provider(agent, &env, &dir) else {
            continue;
        };
        let Some(listed) = axocoatl::provider::listed_models(&resolved, LIST_WAIT) else {
            continue;
        };
        for model in listed {
            if default == Some(agent.provider.as_str()) {
                out.push(CompletionCandidate::new(&model));
            }
            out.push(CompletionCandidate::new(format!(
                "{}:{model}",
                agent.provider
            )));
        }
    }
    out
}

/// `-o`: the sampling keys, each with `=` (and response_format's two values).
pub fn options() -> Vec<CompletionCandidate> {
    axocoatl::overrides::OPTION_KEYS
        .iter()
        .flat_map(|k| match *k {
            "response_format" => vec![format!("{k}=text"), format!("{k}=json")],
            _ => vec![format!("{k}=")],
        })
        .map(CompletionCandidate::new)
        .collect()
}

/// The models `models fetch` knows.
pub fn known_models() -> Vec<CompletionCandidate> {
    axocoatl::models::KNOWN
        .iter()
        .map(|m| CompletionCandidate::new(m.name).help(Some(m.description.into())))
        .collect()
}

/// The automations of the configuration.
pub fn automations() -> Vec<CompletionCandidate> {
    let Some(config) = config() else {
        return Vec::new();
    };
    config
        .automations
        .iter()
        .map(|a| CompletionCandidate::new(&a.id).help(Some(a.schedule.clone().into())))
        .collect()
}

/// The attachment references of the repository, with their names.
pub fn references() -> Vec<CompletionCandidate> {
    let Some((repo, _, _)) = locate() else {
        return Vec::new();
    };
    let scope = axocoatl::history::Scope::Attachments;
    let Ok(p) = axocoatl::history::Projection::of(&repo, scope, axocoatl::history::Want::TURNS)
    else {
        return Vec::new();
    };
    p.attachments
        .all()
        .map(|r| {
            CompletionCandidate::new(&r.reference)
                .help(Some(format!("{} ({})", r.name, r.state.as_str()).into()))
        })
        .collect()
}
