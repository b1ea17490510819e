//! The runtime's error type. The CLI maps each kind to an exit code and a hint.

use axocoatl_store::ledger::record::TurnState;

use crate::config::Diagnostic;
use crate::provider::ProviderError;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] axocoatl_store::Error),
    #[error("the configuration is not valid")]
    Config(Vec<Diagnostic>),
    #[error("no configuration file at {path}")]
    NoConfig { path: String },
    #[error("unknown agent {id:?}")]
    UnknownAgent { id: String, known: Vec<String> },
    #[error("agent {id:?} cannot be sent to directly: {reason}")]
    AgentRole { id: String, reason: String },
    #[error("the configuration has no autonomous agent to send to")]
    NoAgent,
    #[error("session {session:?} is busy{}", turn.as_ref().map(|t| format!(": turn {t} is active")).unwrap_or_default())]
    Busy {
        session: String,
        turn: Option<String>,
    },
    #[error("no automation {id:?}")]
    UnknownAutomation { id: String, known: Vec<String> },
    #[error("automation {automation:?} is running{}", if running.is_empty() { String::new() } else { format!(": {running}") })]
    AutomationBusy { automation: String, running: String },
    #[error("no turn matches {prefix:?}")]
    TurnNotFound { prefix: String },
    #[error("{prefix:?} matches several turns: {}", candidates.join(", "))]
    AmbiguousTurn {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("turn {turn} already {}", state_word(*state))]
    NotActive { turn: String, state: TurnState },
    #[error("{message}")]
    Refused { message: String, hint: String },
    #[error("{message}")]
    Invalid { message: String, hint: String },
    #[error("{0}")]
    Provider(#[from] ProviderError),
    #[error("{0} is not supported yet")]
    NotSupported(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn state_word(state: TurnState) -> &'static str {
    state.as_str()
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
