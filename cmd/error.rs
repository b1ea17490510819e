//! The CLI's one error type: a kind (which `exit::code` turns into the exit code), a
//! message, its causes and hints. Runtime errors bring their own kind, and what to do next
//! as data that `hints.rs` words.

use std::fmt::Write as _;
use std::io;

use axocoatl::{ErrorKind, RuntimeError};
use axocoatl_store::Error as StoreError;

use crate::exit;
use crate::ui::Ui;

#[derive(Debug)]
pub struct CliError {
    pub kind: ErrorKind,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
    /// Lines printed as they are (e.g. config diagnostics) before the message.
    pub details: Vec<String>,
    broken_pipe: bool,
}

pub type CliResult<T = i32> = Result<T, CliError>;

impl CliError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CliError {
        CliError {
            kind,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
            details: Vec::new(),
            broken_pipe: false,
        }
    }

    /// An error of the command line (exit 2).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(ErrorKind::Usage, message)
    }

    /// A bug in axocoatl (exit 70): an invariant broken, or one of its own types that does
    /// not serialize.
    pub fn internal(message: impl std::fmt::Display) -> CliError {
        CliError::new(ErrorKind::Internal, format!("internal error: {message}"))
            .hint(axocoatl::error::INTERNAL_HINT)
    }

    /// An I/O error on `path` while doing `what` ("write", "create", …).
    pub fn io(what: &str, path: &std::path::Path, e: io::Error) -> CliError {
        let mut err = CliError::new(
            ErrorKind::Failure,
            format!("cannot {what} {}", path.display()),
        );
        err.causes.push(e.to_string());
        err
    }

    /// Whether this is a write to a closed pipe, which ends a command quietly.
    pub fn is_broken_pipe(&self) -> bool {
        self.broken_pipe
    }

    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hints.push(hint.into());
        self
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
        let _ = io::Write::write_all(&mut ui.err, text.as_bytes());
        let _ = io::Write::flush(&mut ui.err);
        exit::code(self.kind)
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

/// Output errors: the terminal's streams name themselves in the error (see `ui.rs`).
impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        if e.get_ref()
            .is_some_and(|inner| inner.is::<crate::ui::Unserializable>())
        {
            return CliError::internal(e);
        }
        let mut err = CliError::new(ErrorKind::Failure, e.to_string());
        err.broken_pipe = e.kind() == io::ErrorKind::BrokenPipe;
        err
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> Self {
        RuntimeError::from(e).into()
    }
}

impl From<RuntimeError> for CliError {
    fn from(e: RuntimeError) -> Self {
        CliError {
            kind: e.kind(),
            message: e.to_string(),
            causes: match &e {
                RuntimeError::Remote(r) => r.causes.clone(),
                _ => causes_of(&e),
            },
            hints: crate::hints::of(&e),
            details: e.details(),
            broken_pipe: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--json` line that does not serialize is a bug: exit 70, with the report hint.
    #[test]
    fn an_unserializable_line_is_an_internal_error() {
        let cause = serde_json::from_str::<u8>("x").expect_err("not a number");
        let e = CliError::from(io::Error::other(crate::ui::Unserializable(cause)));
        assert_eq!(e.kind, ErrorKind::Internal);
        assert_eq!(exit::code(e.kind), 70);
        assert!(e.message.starts_with("internal error: "), "{}", e.message);
        assert_eq!(e.hints, [axocoatl::error::INTERNAL_HINT]);
        assert!(!e.is_broken_pipe());
    }
}
