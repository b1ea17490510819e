//! Diagnostics: what `axocoatl validate` reports, with the position to fix.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::tree::Pos;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem in a configuration file, pointing at the key or value to change.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Diagnostic {
    pub(crate) fn new(
        severity: Severity,
        file: &Path,
        pos: Pos,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file: file.to_path_buf(),
            line: pos.line,
            column: pos.column,
            message: message.into(),
            hint,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.severity.as_str(),
            self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    // No key or value of the schema is this long: spare the edit-distance matrix.
    if word.len() > 64 {
        return None;
    }
    let word = word.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| {
            (
                strsim::damerau_levenshtein(&word, &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|&(distance, candidate)| distance <= (candidate.chars().count() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, candidate)| candidate)
}

/// "did you mean `x`?" when a candidate is close, else the list of valid choices.
pub(crate) fn suggestion<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str> + Clone,
    what: &str,
) -> String {
    match closest(word, candidates.clone()) {
        Some(found) => format!("did you mean `{found}`?"),
        None => {
            let mut all: Vec<String> = Vec::new();
            for candidate in candidates {
                let quoted = format!("`{candidate}`");
                if !all.contains(&quoted) {
                    all.push(quoted);
                }
            }
            if all.is_empty() {
                format!(
                    "define `{}` first (there are no {what} yet)",
                    super::tree::shorten(word)
                )
            } else {
                format!("valid {what}: {}", all.join(", "))
            }
        }
    }
}
