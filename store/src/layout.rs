//! Every file name under `.axocoatl/`, in one place.

use std::path::{Path, PathBuf};

/// The directory name a repository lives in, beside the user's `axocoatl.yaml`.
pub const REPO_DIR: &str = ".axocoatl";
/// The format marker: written last by `init`, checked first by every open.
pub const FORMAT_FILE: &str = "format";
/// First line of the format marker.
pub const FORMAT_MAGIC: &str = "axocoatl repository";
/// The repository format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
pub const HEAD_FILE: &str = "HEAD";
/// The home repository's current session per directory (`crate::heads`); absent until a
/// directory chooses one.
pub const HEADS_DIR: &str = "heads";
/// Renamed and removed sessions (`crate::names`); absent until the first rename or removal.
pub const NAMES_FILE: &str = "session-names";
pub const NAMES_LOCK: &str = "run/session-names.lock";
/// Keeps git from listing the repository as untracked: written by `init`, restored on open.
pub const GITIGNORE_FILE: &str = ".gitignore";
pub const DEFAULT_SESSION: &str = "main";
pub const LEDGER_DIR: &str = "ledger/v1";
pub const LEDGER_INDEX_DIR: &str = "ledger/v1/index";
/// Where `fsck --repair` keeps damaged bytes it cut from the end of the ledger.
pub const LEDGER_DAMAGED_DIR: &str = "ledger/v1/damaged";
pub const LEDGER_DAMAGED_DIR_NAME: &str = "damaged";
/// The indexes' directory inside the ledger directory (`LEDGER_INDEX_DIR`).
pub const INDEX_SUBDIR: &str = "index";
pub const OBJECTS_DIR: &str = "objects";
pub const CHECKPOINTS_DIR: &str = "checkpoints/v1";
/// A provider's cache of one agent's conversation (the local model's attention cache), in
/// the agent's checkpoint directory: `checkpoints/v1/<component>/attention.cache`.
pub const ATTENTION_CACHE_FILE: &str = "attention.cache";
pub const DAILY_LOG_DIR: &str = "memory/daily_log/v1";
pub const CORE_MEMORY_DIR: &str = "memory/core/v1";
pub const SHARED_CORE_DIR: &str = "memory/core/shared/v1";
pub const SEMANTIC_DIR: &str = "memory/semantic/v1";
pub const AUTOMATION_RUNS_DIR: &str = "automation/runs-v1";
/// Pre-1.0 compatibility inputs: the unversioned forms of the namespaces above. They are
/// read (never written) as `crate::legacy` says.
pub const LEGACY_CHECKPOINTS_DIR: &str = "checkpoints";
pub const LEGACY_DAILY_LOG_DIR: &str = "memory/daily_log";
pub const LEGACY_CORE_MEMORY_DIR: &str = "memory/core";
pub const LEGACY_SHARED_CORE_DIR: &str = "memory/core/shared";
pub const LEGACY_SEMANTIC_DIR: &str = "memory/semantic";
pub const LEGACY_AUTOMATION_RUNS_DIR: &str = "automation/runs";
pub const RUN_DIR: &str = "run";
pub const SESSION_LOCKS_DIR: &str = "run/sessions";
/// One empty file per session whose lock holds an active-turn note (named as its lock
/// file): where the orphan sweep looks, so that it does not open every session's lock.
pub const ACTIVE_SESSIONS_DIR: &str = "run/active";
pub const LEDGER_LOCK: &str = "run/ledger.lock";
pub const SERVE_LOCK: &str = "run/serve.lock";
/// Locks of memory files replaced by read-modify-write (core memory), made on first use.
pub const MEMORY_LOCKS_DIR: &str = "run/memory";
/// `serve`'s control socket: commands reach its agents through it.
pub const SERVE_SOCKET: &str = "run/serve.sock";
/// Where `serve`'s actors listen, one socket each ([`actor_socket_name`]).
pub const ACTORS_DIR: &str = "run/actors";
/// Rewinds whose boundary is in the ledger and whose checkpoint may not be written yet: one
/// file per agent ([`rewind_pending_path`]), removed once it is, so the next command
/// finishes what a crash left.
pub const REWIND_PENDING_DIR: &str = "run/rewind-pending";
/// What each running turn has reported so far, one file per turn ([`stream_path`]),
/// removed when it ends: `axocoatl follow` reads it from another process.
pub const STREAMS_DIR: &str = "run/streams";
/// One note per user (named by the uid) that names the private, randomly named directory
/// in the system's temporary directory under which that user's commands get their
/// `$TMPDIR`: found again by later processes, so that what a killed one left is swept.
pub const SCRATCH_NOTES_DIR: &str = "run/scratch";
/// Lock files of automations (volatile coordination, not history).
pub const AUTOMATION_LOCKS_DIR: &str = "run/automations";
/// In an automation's record directory: the occurrences running now.
pub const AUTOMATION_ACTIVE_DIR: &str = "active";
/// In an automation's record directory: when a runner first saw it.
pub const AUTOMATION_SINCE_FILE: &str = "since.json";
/// In one agent's semantic memory directory: the records, their vectors, the lexical index,
/// the agent id the directory is for, and the store's lock.
pub const SEMANTIC_RECORDS_FILE: &str = "records";
pub const SEMANTIC_VECTORS_FILE: &str = "vectors";
pub const SEMANTIC_LEXICAL_FILE: &str = "lexical";
pub const SEMANTIC_PATH_FILE: &str = "path";
pub const SEMANTIC_LOCK_FILE: &str = "lock";
/// Beside a semantic store's files: where `fsck --repair` moves its damaged records.
pub const SEMANTIC_DAMAGED_DIR: &str = "damaged";
/// Beside the ledger's indexes: the caches of record places and of session summaries.
pub const PLACES_CACHE_FILE: &str = "places.cache";
pub const SESSIONS_CACHE_FILE: &str = "sessions.cache";
/// The extension of lock files.
pub const LOCK_EXTENSION: &str = "lock";
pub const TMP_DIR: &str = "tmp";

/// Directories `init` creates, parents first.
pub const INIT_DIRS: &[&str] = &[
    "ledger",
    LEDGER_DIR,
    LEDGER_INDEX_DIR,
    OBJECTS_DIR,
    "checkpoints",
    CHECKPOINTS_DIR,
    "memory",
    "memory/daily_log",
    DAILY_LOG_DIR,
    "memory/core",
    CORE_MEMORY_DIR,
    "memory/core/shared",
    SHARED_CORE_DIR,
    "memory/semantic",
    SEMANTIC_DIR,
    "automation",
    AUTOMATION_RUNS_DIR,
    RUN_DIR,
    SESSION_LOCKS_DIR,
    TMP_DIR,
];

/// Maps a runtime Agent id such as `main:coder` or `main:lead:worker:w1` to a file name that
/// is safe on every OS and reversible: ASCII letters, digits, `-` and `_` stay; every other
/// byte becomes `%XX` (two lowercase hex digits), so the mapping is injective and a
/// component never starts with a dot or contains a path separator.
pub fn component(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push('%');
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

/// The inverse of [`component`]; `None` for a string that `component` never produces.
pub fn runtime_id(component: &str) -> Option<String> {
    let bytes = component.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = component.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Checks a session name: it becomes part of file names and of `HEAD`.
pub fn check_session_name(name: &str) -> crate::Result<()> {
    let reason = if name.is_empty() {
        Some("a session name cannot be empty")
    } else if name.len() > 100 {
        Some("a session name is at most 100 bytes")
    } else if name.starts_with(['.', '-']) {
        Some("a session name cannot start with '.' or '-'")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some("use only letters, digits, '-', '_' and '.'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(crate::Error::InvalidName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

pub fn segment_file_name(number: u64) -> String {
    format!("{number:012}.seg")
}

/// The index of segment `number`, in [`INDEX_SUBDIR`] of the ledger directory.
pub fn index_file_name(number: u64) -> String {
    format!("{number:012}.idx")
}

pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The stream file of running turn `turn` (an id: hex digits only, checked by the caller).
pub fn stream_path(root: &Path, turn: &str) -> PathBuf {
    root.join(STREAMS_DIR).join(turn)
}

pub fn session_lock_path(root: &Path, session: &str) -> PathBuf {
    root.join(SESSION_LOCKS_DIR)
        .join(format!("{}.{LOCK_EXTENSION}", component(session)))
}

/// The lock `what` (`schedule` or `run`) of automation `automation`, in the automations'
/// lock directory.
pub fn automation_lock_name(automation: &str, what: &str) -> String {
    format!("{}.{what}.{LOCK_EXTENSION}", component(automation))
}

/// The lock of the core memory file of runtime agent `agent_id`, in [`MEMORY_LOCKS_DIR`].
pub fn core_lock_name(agent_id: &str) -> String {
    format!("core-{}.{LOCK_EXTENSION}", component(agent_id))
}

/// The lock of shared core block `label`, in [`MEMORY_LOCKS_DIR`].
pub fn shared_core_lock_name(label: &str) -> String {
    format!("shared-{}.{LOCK_EXTENSION}", component(label))
}

/// The socket of actor `n` in [`ACTORS_DIR`]: numbered by serve, as sockets need short paths.
pub fn actor_socket_name(n: usize) -> String {
    format!("{n}.sock")
}

/// The pending-rewind file of the agent `agent` of `session`, in [`REWIND_PENDING_DIR`].
pub fn rewind_pending_path(root: &Path, session: &str, agent: &str) -> PathBuf {
    root.join(REWIND_PENDING_DIR)
        .join(component(&format!("{session}:{agent}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_round_trips() {
        for id in [
            "main:coder",
            "a.b:c/d",
            "x:lead:worker:w1",
            "ünï:cödé",
            "..",
            "",
        ] {
            let c = component(id);
            assert!(!c.contains(['/', '\\', ':', '.']), "{c}");
            assert_eq!(runtime_id(&c).as_deref(), Some(id));
        }
        assert_eq!(component("main:coder"), "main%3acoder");
    }

    #[test]
    fn session_names() {
        assert!(check_session_name("main").is_ok());
        assert!(check_session_name("feature-1.2_x").is_ok());
        for bad in ["", ".hidden", "-x", "a/b", "a b", "ä"] {
            assert!(check_session_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn segment_names() {
        assert_eq!(segment_file_name(7), "000000000007.seg");
        assert_eq!(parse_segment_file_name("000000000007.seg"), Some(7));
        assert_eq!(parse_segment_file_name("7.seg"), None);
    }
}
