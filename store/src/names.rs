//! Session names: which name a session is shown and addressed by, when it differs from the
//! name its records carry in the ledger (a rename), and which sessions were removed.
//!
//! Ledger records never change, so a session keeps the name it was created with there (its
//! *ledger name*). `sessions rename OLD NEW` maps NEW to that ledger name; `sessions rm NAME`
//! marks the ledger name removed (its records stay; listings leave it out). A name freed by
//! either can be used again: the new session gets a ledger name of its own (`NAME.2`, …)
//! and is shown as NAME.
//!
//! The map is one small text file (`NAMES_FILE`), read with the repository's other refs
//! (like `HEAD`) and replaced atomically under its lock. A repository that never renamed or
//! removed a session has no such file, and every name is its own ledger name.
//!
//! ```text
//! axocoatl session names 1
//! alias review-42 2026-01-02-030405
//! removed scratch 1767323045000 scratch
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::fsutil::{write_atomic, Durability};
use crate::layout::{self, check_session_name};
use crate::ledger::record::Millis;
use crate::lock::Lock;
use crate::{Error, Result};

const MAGIC: &str = "axocoatl session names 1";

/// What a name that commands are given refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// The session whose records carry this ledger name (possibly none yet).
    Ledger(String),
    /// No session goes by this name now, and its ledger name belongs to another session
    /// (renamed away) or to a removed one: a new session of this name needs a ledger name
    /// of its own.
    Freed,
}

/// The session name map of one repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// Shown name → ledger name, where they differ.
    aliases: BTreeMap<String, String>,
    /// Removed ledger names → when they were removed, and the name they had then.
    removed: BTreeMap<String, (Millis, String)>,
}

impl Names {
    /// Reads the map of the repository at `root` (empty when the file is absent).
    pub fn load(root: &Path) -> Result<Names> {
        let path = root.join(layout::NAMES_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => Names::parse(&path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Names::default()),
            Err(e) => Err(Error::io("read", path)(e)),
        }
    }

    /// Changes the map of the repository at `root` under its lock: `change` sees the
    /// current map and returns what the caller wants back; the result is written before the
    /// lock is released. An unchanged map is not written.
    pub fn update<T>(root: &Path, change: impl FnOnce(&mut Names) -> Result<T>) -> Result<T> {
        let _lock = Lock::acquire(&root.join(layout::NAMES_LOCK))?;
        let mut names = Names::load(root)?;
        let before = names.clone();
        let out = change(&mut names)?;
        if names != before {
            write_atomic(
                &root.join(layout::NAMES_FILE),
                names.encode().as_bytes(),
                Durability::Durable,
            )?;
        }
        Ok(out)
    }

    fn parse(path: &Path, bytes: &[u8]) -> Result<Names> {
        let bad = |line: usize, reason: &str| Error::BadNames {
            path: path.to_owned(),
            line,
            reason: reason.to_owned(),
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad(1, "not UTF-8 text"))?;
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, MAGIC)) => {}
            _ => return Err(bad(1, "the first line is not the expected header")),
        }
        let mut names = Names::default();
        for (i, line) in lines {
            let n = i + 1;
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                ["alias", shown, ledger] => {
                    for name in [shown, ledger] {
                        check_session_name(name).map_err(|_| bad(n, "not a session name"))?;
                    }
                    names
                        .aliases
                        .insert((*shown).to_owned(), (*ledger).to_owned());
                }
                ["removed", ledger, at, shown] => {
                    for name in [ledger, shown] {
                        check_session_name(name).map_err(|_| bad(n, "not a session name"))?;
                    }
                    let at = at.parse().map_err(|_| bad(n, "not a time"))?;
                    names
                        .removed
                        .insert((*ledger).to_owned(), (at, (*shown).to_owned()));
                }
                _ => {
                    return Err(bad(
                        n,
                        "expected `alias NAME LEDGER` or `removed LEDGER TIME NAME`",
                    ))
                }
            }
        }
        Ok(names)
    }

    fn encode(&self) -> String {
        let mut out = format!("{MAGIC}\n");
        for (shown, ledger) in &self.aliases {
            out.push_str(&format!("alias {shown} {ledger}\n"));
        }
        for (ledger, (at, shown)) in &self.removed {
            out.push_str(&format!("removed {ledger} {at} {shown}\n"));
        }
        out
    }

    /// Whether the map is empty (every name is its own ledger name).
    pub fn is_empty(&self) -> bool {
        self.aliases.is_empty() && self.removed.is_empty()
    }

    /// What `name` refers to.
    pub fn resolve(&self, name: &str) -> Resolved {
        if let Some(ledger) = self.aliases.get(name) {
            return Resolved::Ledger(ledger.clone());
        }
        if self.claimed(name) {
            Resolved::Freed
        } else {
            Resolved::Ledger(name.to_owned())
        }
    }

    /// Whether `ledger` is the ledger name of a renamed or removed session, so that no new
    /// session may take it.
    pub fn claimed(&self, ledger: &str) -> bool {
        self.removed.contains_key(ledger) || self.aliases.values().any(|l| l == ledger)
    }

    /// The name the session with ledger name `ledger` is shown by; `None` when it was
    /// removed.
    pub fn shown<'a>(&'a self, ledger: &'a str) -> Option<&'a str> {
        if self.removed.contains_key(ledger) {
            return None;
        }
        Some(
            self.aliases
                .iter()
                .find(|(_, l)| l.as_str() == ledger)
                .map_or(ledger, |(shown, _)| shown.as_str()),
        )
    }

    /// When the session with ledger name `ledger` was removed, and the name it had then.
    pub fn removed(&self, ledger: &str) -> Option<(Millis, &str)> {
        self.removed
            .get(ledger)
            .map(|(at, shown)| (*at, shown.as_str()))
    }

    /// Gives the session with ledger name `ledger` the name `shown` (dropping any name it
    /// had). The caller checks that `shown` is free.
    pub fn set_alias(&mut self, shown: &str, ledger: &str) {
        self.aliases.retain(|_, l| l != ledger);
        if shown != ledger {
            self.aliases.insert(shown.to_owned(), ledger.to_owned());
        }
    }

    /// Marks the session with ledger name `ledger` removed, freeing the name it was shown by.
    pub fn remove(&mut self, ledger: &str, at: Millis) {
        let shown = self.shown(ledger).unwrap_or(ledger).to_owned();
        self.aliases.retain(|_, l| l != ledger);
        self.removed.insert(ledger.to_owned(), (at, shown));
    }

    /// A ledger name for a new session shown as `name`: `name.2`, `name.3`, … the first that
    /// no session has taken (`taken` says which names have records in the ledger).
    pub fn fresh_ledger_name(&self, name: &str, taken: &dyn Fn(&str) -> bool) -> Result<String> {
        for n in 2u32.. {
            let suffix = format!(".{n}");
            // Session names are at most 100 bytes: the suffix replaces the end if needed.
            let mut base = name.to_owned();
            while base.len() + suffix.len() > 100 {
                base.pop();
            }
            let candidate = format!("{base}{suffix}");
            if check_session_name(&candidate).is_ok()
                && !self.claimed(&candidate)
                && !self.aliases.contains_key(&candidate)
                && !taken(&candidate)
            {
                return Ok(candidate);
            }
        }
        Err(Error::InvalidName {
            name: name.to_owned(),
            reason: "no free ledger name is left for it",
        })
    }
}

/// The path of the map file of the repository at `root` (for fsck and messages).
pub fn names_path(root: &Path) -> PathBuf {
    root.join(layout::NAMES_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_remove_and_reuse() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        assert_eq!(Names::load(root).expect("load"), Names::default());
        Names::update(root, |n| {
            n.set_alias("review", "main");
            Ok(())
        })
        .expect("update");
        let names = Names::load(root).expect("load");
        assert_eq!(names.resolve("review"), Resolved::Ledger("main".into()));
        assert_eq!(names.resolve("main"), Resolved::Freed);
        assert_eq!(names.shown("main"), Some("review"));
        let fresh = names
            .fresh_ledger_name("main", &|n| n == "main.2")
            .expect("fresh");
        assert_eq!(fresh, "main.3");
        Names::update(root, |n| {
            n.remove("main", 7);
            n.set_alias("main", &fresh);
            Ok(())
        })
        .expect("update");
        let names = Names::load(root).expect("load");
        assert_eq!(names.shown("main"), None, "removed");
        assert_eq!(names.removed("main"), Some((7, "review")));
        assert_eq!(names.shown("main.3"), Some("main"));
        assert_eq!(names.resolve("main"), Resolved::Ledger("main.3".into()));
        assert_eq!(names.resolve("review"), Resolved::Ledger("review".into()));
        // Renaming back to the ledger name stores no alias.
        let mut n = names.clone();
        n.set_alias("main.3", "main.3");
        assert_eq!(n.shown("main.3"), Some("main.3"));
        assert_eq!(n.resolve("main"), Resolved::Freed, "still removed");
    }

    #[test]
    fn a_damaged_map_is_an_error_naming_its_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(layout::NAMES_FILE),
            format!("{MAGIC}\nalias a\n"),
        )
        .expect("write");
        match Names::load(dir.path()) {
            Err(Error::BadNames { line: 2, .. }) => {}
            other => panic!("{other:?}"),
        }
        std::fs::write(dir.path().join(layout::NAMES_FILE), "alias a b\n").expect("write");
        assert!(Names::load(dir.path()).is_err());
    }
}
