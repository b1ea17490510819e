//! The CLI's one error type: a message, its causes, hints, and the exit code.

use std::fmt::Write as _;
use std::io;

use axocoatl::RuntimeError;
use axocoatl_store::Error as StoreError;

use crate::exit;
use crate::ui::Ui;

#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
    pub code: i32,
    /// Lines printed as they are (e.g. config diagnostics) before the message.
    pub details: Vec<String>,
    broken_pipe: bool,
}

pub type CliResult<T = i32> = Result<T, CliError>;

impl CliError {
    pub fn new(code: i32, message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
            code,
            details: Vec::new(),
            broken_pipe: false,
        }
    }

    /// Whether this is a write to a closed pipe, which ends a command quietly.
    pub fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
    }

    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(exit::USAGE, message)
    }

    /// Prints the error and returns its exit code.
    pub fn report(self, ui: &mut Ui) -> i32 {
        let mut text = String::new();
        for d in &self.details {
            let _ = writeln!(text, "{d}");
        }
        let _ = writeln!(text, "{}: {}", ui.paint_err("31;1", "error"), self.message);
        for c in &self.causes {
            let _ = writeln!(text, "caused by: {c}");
        }
        for h in &self.hints {
            let _ = writeln!(text, "{}: {h}", ui.paint_err("36", "hint"));
        }
        let _ = ui.err.write_all(text.as_bytes());
        let _ = ui.err.flush();
        self.code
    }
}

fn causes_of(e: &dyn std::error::Error) -> Vec<String> {
    let mut out = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        out.push(s.to_string());
        source = s.source();
    }
    out
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        let mut err = CliError::new(exit::ERROR, e.to_string());
        err.broken_pipe = e.kind() == io::ErrorKind::BrokenPipe;
        err
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        let causes = causes_of(&e);
        let (code, hint) = match &e {
            StoreError::NotFound { .. } => (
                exit::NO_REPO,
                Some("run `axocoatl init` to create one here, or pass -C DIR, --repo DIR or AXOCOATL_DIR".to_string()),
            ),
            StoreError::UnsupportedFormat { .. } => (
                exit::NO_REPO,
                Some("this repository was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)".to_string()),
            ),
            StoreError::BadFormatMarker { .. } => (
                exit::NO_REPO,
                Some("if `axocoatl init` was interrupted, remove the directory and run it again".to_string()),
            ),
            StoreError::AlreadyExists { .. } => (exit::ERROR, Some("nothing was changed".to_string())),
            StoreError::Corrupt { .. } => (
                exit::ERROR,
                Some("run `axocoatl fsck` to see every problem; `axocoatl fsck --repair` fixes a torn tail".to_string()),
            ),
            StoreError::BadMemoryFile { .. } => (
                exit::ERROR,
                Some("run `axocoatl fsck` to see every problem; fix the file or remove it (its blocks start empty)".to_string()),
            ),
            StoreError::MemoryVersion { .. } => (
                exit::NO_REPO,
                Some("this memory file was written by a newer axocoatl; upgrade axocoatl to use it (nothing was changed)".to_string()),
            ),
            StoreError::InvalidName { .. } => (exit::USAGE, None),
            StoreError::ObjectMissing { .. } => (exit::NOT_FOUND, None),
            _ => (exit::ERROR, None),
        };
        let mut err = CliError::new(code, e.to_string());
        err.causes = causes;
        err.hints.extend(hint);
        err
    }
}

impl From<RuntimeError> for CliError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Store(s) => s.into(),
            RuntimeError::Config(diags) => {
                let mut err = CliError::new(
                    exit::ERROR,
                    format!(
                        "the configuration has {} error{}",
                        diags.len(),
                        if diags.len() == 1 { "" } else { "s" }
                    ),
                )
                .hint("fix them and check with `axocoatl validate`");
                err.details = diags.iter().map(|d| d.to_string()).collect();
                err
            }
            RuntimeError::NoConfig { path } => CliError::new(exit::ERROR, format!("no configuration file at {path}"))
                .hint("`axocoatl init` writes a starter axocoatl.yaml; --config FILE points at another one"),
            RuntimeError::UnknownAgent { id, known } => {
                CliError::new(exit::NOT_FOUND, format!("unknown agent {id:?}")).hint(if known.is_empty() {
                    "the configuration defines no agents".to_string()
                } else {
                    format!("known agents: {}", known.join(", "))
                })
            }
            RuntimeError::AgentRole { .. } => CliError::new(exit::REFUSED, e.to_string()),
            RuntimeError::NoAgent => CliError::new(exit::ERROR, e.to_string())
                .hint("add an agent with `role: autonomous` (the default) to axocoatl.yaml"),
            RuntimeError::Busy { ref turn, .. } => {
                let hint = match turn {
                    Some(t) => format!("wait for it, stop it with `axocoatl stop {t}`, or pass --wait to queue"),
                    None => "pass --wait to queue behind the active turn".to_string(),
                };
                CliError::new(exit::BUSY, e.to_string()).hint(hint)
            }
            RuntimeError::UnknownAutomation { ref known, .. } => {
                let hint = if known.is_empty() {
                    "the configuration defines no automations".to_string()
                } else {
                    format!("known automations: {}", known.join(", "))
                };
                CliError::new(exit::NOT_FOUND, e.to_string()).hint(hint)
            }
            RuntimeError::AutomationBusy { .. } => CliError::new(exit::BUSY, e.to_string())
                .hint("pass --wait to run after it ends"),
            RuntimeError::TurnNotFound { .. } => {
                CliError::new(exit::NOT_FOUND, e.to_string()).hint("`axocoatl history --all` lists turns")
            }
            RuntimeError::AmbiguousTurn { .. } => {
                CliError::new(exit::NOT_FOUND, e.to_string()).hint("give more characters of the id")
            }
            RuntimeError::NotActive { .. } => CliError::new(exit::NOT_ACTIVE, e.to_string())
                .hint("only an active turn can be stopped; refresh with `axocoatl history` before acting again"),
            RuntimeError::Refused { message, hint } => CliError::new(exit::REFUSED, message).hint(hint),
            RuntimeError::Invalid { message, hint } => CliError::new(exit::USAGE, message).hint(hint),
            RuntimeError::Provider(p) => CliError::new(exit::ERROR, p.to_string()),
            RuntimeError::NotSupported(what) => CliError::new(exit::ERROR, format!("{what} is not supported yet")),
            RuntimeError::Io { .. } => {
                let causes = causes_of(&e);
                let mut err = CliError::new(exit::ERROR, e.to_string());
                err.causes = causes;
                err
            }
        }
    }
}
