//! Failpoints: named places in the store where a test can make an operation fail or the
//! process die, to prove that every write, sync, rename and roll-over is crash-safe; and a
//! few places between the runtime's steps (a rewind, an import) where a test pauses the
//! process to kill it there ([`pause`]).
//!
//! Compiled in only with the `failpoints` cargo feature (the test build turns it on through
//! a dev-dependency); otherwise [`hit`] is an inlined `Ok(())`. A build with the feature
//! reads `AXOCOATL_FAILPOINTS` once:
//!
//! ```text
//! AXOCOATL_FAILPOINTS="ledger.append.write=crash;fsutil.atomic.rename=error@2"
//! ```
//!
//! `error` makes the operation fail with an I/O error, `crash` aborts the process there (as
//! a `kill -9` would, without unwinding or flushing), `torn` (for writes that support it)
//! writes part of the bytes and then aborts, `sleep(MS)` waits MS milliseconds and goes on
//! (so a test can kill the process there). `@N` fires on the N-th hit in this process only
//! (default: every hit). `AXOCOATL_FAILPOINTS_LOG=FILE` appends the name of every
//! failpoint reached, one per line, so a test can learn which failpoints an operation
//! passes.

/// Every failpoint, in the order an append or an atomic write meets them. A test checks
/// that this list and the `hit("...")` calls in the source agree.
pub const NAMES: &[&str] = &[
    // The ledger.
    "ledger.append.write",
    "ledger.append.sync",
    "ledger.roll.sync",
    "ledger.segment.create",
    "ledger.segment.write",
    "ledger.segment.sync",
    "ledger.segment.rename",
    "ledger.segment.dir_sync",
    "ledger.tail.truncate",
    "ledger.torn_segment.remove",
    "ledger.damaged.move",
    // Atomic replacement of files (objects, checkpoints, HEAD, memory, the format marker).
    "fsutil.atomic.create",
    "fsutil.atomic.write",
    "fsutil.atomic.sync",
    "fsutil.atomic.rename",
    "fsutil.atomic.dir_sync",
    "fsutil.mkdir",
    "fsutil.claim.sync",
    "fsutil.stray.remove",
    // Locks and their notes.
    "lock.note.write",
    // Checkpoints kept beyond the newest few.
    "checkpoint.prune",
    // Ledger indexes (caches, written without fsync).
    "ledger.index.write",
    // The daily log of the memory tiers (appended without fsync: not the authority).
    "memory.daily_log.write",
    "memory.daily_log.truncate",
    // Semantic memory's records (a turn's exchange without fsync; added text with one).
    "memory.semantic.write",
    "memory.semantic.sync",
    "memory.semantic.repair_sync",
    "memory.semantic.damaged.move",
];

/// The runtime's places between two steps ([`pause`]) where a crash test stops the process
/// to kill it: after a rewind's boundary is appended, before the checkpoint is written;
/// after each step of importing a 0.1.x checkpoint (the turn step once per turn: `@N` is
/// the N-th); after a turn's approval requests are appended, before its lock's note says it
/// waits; and where `approve` has read what is undecided, before it appends its decision
/// (so that decisions racing each other are tested). A test checks that this list and the
/// `pause("...")` calls agree.
pub const PAUSES: &[&str] = &[
    "rewind.boundary.appended",
    "legacy.import.begun",
    "legacy.import.turn",
    "legacy.import.ended",
    "legacy.import.checkpoint",
    "approval.requested",
    "approve.decide",
];

/// What a failpoint does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Error,
    Crash,
    Torn,
    /// Waits this many milliseconds, then goes on.
    Sleep(u64),
}

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    use super::Action;

    struct Config {
        points: HashMap<String, (Action, Option<u64>)>,
        log: Option<std::path::PathBuf>,
        hits: Mutex<HashMap<&'static str, u64>>,
    }

    fn config() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| {
            let mut points = HashMap::new();
            let spec = std::env::var("AXOCOATL_FAILPOINTS").unwrap_or_default();
            for item in spec.split(';').filter(|s| !s.trim().is_empty()) {
                let Some((name, action)) = item.trim().split_once('=') else {
                    continue;
                };
                let (action, nth) = match action.split_once('@') {
                    Some((a, n)) => (a, n.parse().ok()),
                    None => (action, None),
                };
                let action = match action {
                    "error" => Action::Error,
                    "crash" => Action::Crash,
                    "torn" => Action::Torn,
                    sleep => match sleep
                        .strip_prefix("sleep(")
                        .and_then(|s| s.strip_suffix(')'))
                        .and_then(|ms| ms.parse().ok())
                    {
                        Some(ms) => Action::Sleep(ms),
                        None => continue,
                    },
                };
                points.insert(name.to_owned(), (action, nth));
            }
            Config {
                points,
                log: std::env::var_os("AXOCOATL_FAILPOINTS_LOG").map(Into::into),
                hits: Mutex::new(HashMap::new()),
            }
        })
    }

    pub fn action(name: &'static str) -> Option<Action> {
        let c = config();
        if c.points.is_empty() && c.log.is_none() {
            return None;
        }
        let n = {
            let mut hits = c.hits.lock().unwrap_or_else(|p| p.into_inner());
            let n = hits.entry(name).or_insert(0);
            *n += 1;
            *n
        };
        if let Some(log) = &c.log {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
            {
                let _ = writeln!(f, "{name}");
            }
        }
        match c.points.get(name) {
            Some(&(action, nth)) if nth.is_none_or(|k| k == n) => Some(action),
            _ => None,
        }
    }
}

/// Passes the failpoint `name`: `Err` when a test set it to `error`; never returns when it
/// is set to `crash`.
#[cfg(feature = "failpoints")]
pub fn hit(name: &'static str) -> std::io::Result<()> {
    match imp::action(name) {
        None => Ok(()),
        Some(Action::Sleep(ms)) => {
            sleep(ms);
            Ok(())
        }
        Some(Action::Crash | Action::Torn) => std::process::abort(),
        Some(Action::Error) => Err(std::io::Error::other(format!("failpoint {name}"))),
    }
}

/// Passes the failpoint `name` between two steps of the runtime that cannot fail there:
/// waits for `sleep(MS)`, aborts for `crash` and `torn`, ignores `error`.
#[cfg(feature = "failpoints")]
pub fn pause(name: &'static str) {
    match imp::action(name) {
        Some(Action::Sleep(ms)) => sleep(ms),
        Some(Action::Crash | Action::Torn) => std::process::abort(),
        Some(Action::Error) | None => {}
    }
}

#[cfg(feature = "failpoints")]
fn sleep(ms: u64) {
    std::thread::sleep(std::time::Duration::from_millis(ms));
}

/// Passes the failpoint `name` before writing `bytes`: like [`hit`], and for `torn`, writes
/// the first half of `bytes` with `write` and then aborts.
#[cfg(feature = "failpoints")]
pub fn hit_write(
    name: &'static str,
    bytes: &[u8],
    write: impl FnOnce(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match imp::action(name) {
        None => Ok(()),
        Some(Action::Sleep(ms)) => {
            sleep(ms);
            Ok(())
        }
        Some(Action::Crash) => std::process::abort(),
        Some(Action::Torn) => {
            let _ = write(&bytes[..bytes.len() / 2]);
            std::process::abort()
        }
        Some(Action::Error) => Err(std::io::Error::other(format!("failpoint {name}"))),
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &'static str) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn pause(_name: &'static str) {}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit_write(
    _name: &'static str,
    _bytes: &[u8],
    _write: impl FnOnce(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    Ok(())
}

/// Whether this build has failpoints compiled in.
pub const ENABLED: bool = cfg!(feature = "failpoints");

#[cfg(test)]
mod tests {
    /// Every `hit("…")`/`hit_write("…")` in the store's source and every `pause("…")` in
    /// the runtime's (`../src`) names a listed failpoint, and every listed failpoint is
    /// placed somewhere.
    #[test]
    fn the_list_matches_the_source() {
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let src = manifest.join("src");
        let runtime = manifest
            .join("../src")
            .canonicalize()
            .expect("the runtime's src");
        let mut used = std::collections::BTreeSet::new();
        let mut paused = std::collections::BTreeSet::new();
        let mut unmarked_syncs = Vec::new();
        let mut stack = vec![src.clone(), runtime];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("ls") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().and_then(|e| e.to_str()) != Some("rs")
                    || path.ends_with("failpoint.rs")
                {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("read");
                for part in text.split("failpoint::pause(\"").skip(1) {
                    paused.insert(part.split('"').next().expect("name").to_owned());
                }
                if !path.starts_with(&src) {
                    continue;
                }
                // Every fsync and fdatasync of the store outside tests passes a failpoint
                // first.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                let lines: Vec<&str> = code.lines().collect();
                for (i, line) in lines.iter().enumerate() {
                    if line.contains(".sync_data()") || line.contains(".sync_all()") {
                        let before = lines[i.saturating_sub(2)..=i].join("\n");
                        if !before.contains("failpoint::hit") {
                            unmarked_syncs.push(format!("{}:{}", path.display(), i + 1));
                        }
                    }
                }
                for marker in ["failpoint::hit(\"", "failpoint::hit_write(\""] {
                    for part in text.split(marker).skip(1) {
                        let name = part.split('"').next().expect("name");
                        used.insert(name.to_owned());
                    }
                }
            }
        }
        assert!(unmarked_syncs.is_empty(), "syncs without a failpoint just before them (a test counts a command's syncs by their failpoints): {unmarked_syncs:?}");
        let listed: std::collections::BTreeSet<String> =
            super::NAMES.iter().map(|s| s.to_string()).collect();
        assert_eq!(used, listed, "failpoint::NAMES and the source disagree");
        let pauses: std::collections::BTreeSet<String> =
            super::PAUSES.iter().map(|s| s.to_string()).collect();
        assert_eq!(paused, pauses, "failpoint::PAUSES and the source disagree");
    }
}
