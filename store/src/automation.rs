//! Automation run records: `automation/runs-v1/<component>/`, one directory per automation
//! id (its [`component`]).
//!
//! # Files
//!
//! - `<stamp>.json`: the record of the scheduled occurrence at `<stamp>` (UTC,
//!   `YYYYMMDDTHHMMSS.mmmZ`). The name *is* the occurrence's logical identity (automation
//!   id, scheduled time), so a claim is the exclusive creation of that name: the content is
//!   written and fsynced in a temporary file first and published without replacing
//!   ([`publish_new`]); of several runners exactly one wins, the others do nothing. A record
//!   that stands for several skipped occurrences (a catch-up span) is named by the last.
//! - `<stamp>.manual-<nonce>.json`: a manual run (`automations run`), requested at `<stamp>`.
//! - `since.json`: when a runner first saw the automation; occurrences before are not due.
//! - `active/<record name>`: an empty marker for each record that is not terminal yet
//!   (claimed, queued or running), so finding the runs of a dead runner reads a few names,
//!   not every record.
//!
//! A record is JSON, replaced atomically ([`replace_with`]) as its run goes on: claimed or
//! queued → running (with its turn) → exactly one terminal state. While a record is not
//! terminal its runner holds an exclusive lock on the record's file (taken before the file
//! becomes visible, on every replacement), and the kernel drops it when the runner dies: a
//! record that is open and unlocked belongs to a dead runner, and the next runner records it
//! `interrupted` ([`Runs::take_over`]); it is never run again.
//!
//! Two lock files per automation live under `run/automations/`: the *schedule* lock, held
//! briefly while a runner reads the records, settles dead runs and claims; and the *run*
//! lock, held while one of its occurrences runs (what the overlap policy looks at).

use crate::civil::{civil_from_days, days_from_civil};
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{create_dir_private, create_new_private, publish_new, replace_with, sync_dir};
use crate::layout::{automation_lock_name, component, runtime_id, AUTOMATION_RUNS_DIR};
use crate::ledger::record::Millis;
use crate::lock::{self, Lock};
use crate::{Error, Repo, Result};

/// The format of the record files this build writes.
pub const RECORD_VERSION: u32 = 1;
pub use crate::layout::AUTOMATION_LOCKS_DIR as LOCKS_DIR;
use crate::layout::{AUTOMATION_ACTIVE_DIR as ACTIVE_DIR, AUTOMATION_SINCE_FILE as SINCE_FILE};
const MANUAL_TAG: &str = ".manual-";

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Claimed by a runner that is about to start it.
    Claimed,
    /// Claimed, waiting for the previous run of the automation to end (`overlap: queue`).
    Queued,
    /// Its turn began.
    Running,
    Completed,
    Failed,
    Stopped,
    /// Its runner died (found and recorded by the next runner).
    Interrupted,
    /// Not run: missed (catch-up rules) or overlapping (`overlap: skip`).
    Skipped,
    /// Its turn waits for a person's approval of a tool call (`approve` continues it; the
    /// history then shows how the turn ended). The runner is done with it.
    Waiting,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Claimed => "claimed",
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
            RunState::Interrupted => "interrupted",
            RunState::Skipped => "skipped",
            RunState::Waiting => "waiting",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            RunState::Claimed | RunState::Queued | RunState::Running
        )
    }
}

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// An occurrence of the schedule.
    Schedule,
    /// `axocoatl automations run`.
    Manual,
}

/// The process that claimed a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runner {
    /// `tick`, `serve` or `manual`.
    pub kind: String,
    pub pid: u32,
}

/// The occurrences a skipped record stands for: from `first` to the record's occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub first: Millis,
    /// How many; `None` when there were too many to count.
    pub count: Option<u64>,
}

/// One run of an automation (or one span of skipped occurrences).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub version: u32,
    pub automation: String,
    pub trigger: Trigger,
    /// The scheduled time in UTC milliseconds; for a manual run, when it was requested.
    pub occurrence: Millis,
    /// A manual run's unique part of its identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
    pub state: RunState,
    pub claimed_at: Millis,
    pub runner: Runner,
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub turn: Option<String>,
    #[serde(default)]
    pub started_at: Option<Millis>,
    #[serde(default)]
    pub ended_at: Option<Millis>,
    /// Why it was skipped, failed or interrupted.
    #[serde(default)]
    pub reason: Option<String>,
}

impl RunRecord {
    /// The file name of this record's identity.
    pub fn file_name(&self) -> String {
        match (self.trigger, &self.nonce) {
            (Trigger::Manual, Some(nonce)) => {
                format!("{}{MANUAL_TAG}{nonce}.json", stamp(self.occurrence))
            }
            _ => format!("{}.json", stamp(self.occurrence)),
        }
    }

    fn encode(&self) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(|e| Error::Encode {
            what: "automation run record",
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// `YYYYMMDDTHHMMSS.mmmZ` (UTC): file names sort in time order.
pub fn stamp(ms: Millis) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let secs = rem / 1000;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        rem % 1000
    )
}

/// The occurrence of a scheduled record's file name (`None` for any other name).
pub fn parse_scheduled_name(name: &str) -> Option<Millis> {
    let s = name.strip_suffix(".json")?;
    parse_stamp(s)
}

fn parse_stamp(s: &str) -> Option<Millis> {
    let b = s.as_bytes();
    if b.len() != 20 || b[8] != b'T' || b[15] != b'.' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss, ms) = (num(9..11)?, num(11..13)?, num(13..15)?, num(16..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let t = ((days_from_civil(y, m, d) * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms;
    // Only the canonical spelling (no 31 February).
    (stamp(t) == s).then_some(t)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct SinceFile {
    version: u32,
    automation: String,
    since: Millis,
}

/// A record file as listed: its name and content (or why it could not be read).
#[derive(Debug)]
pub struct Listed {
    pub path: PathBuf,
    pub record: std::result::Result<RunRecord, String>,
}

/// What [`Runs::take_over`] found for an open record.
#[derive(Debug)]
pub enum TakeOver {
    /// Its runner is alive.
    Alive,
    /// Nothing to do: it ended meanwhile (or its claim never completed); the marker is gone.
    Settled,
    /// Its runner died; the caller records the end through the returned claim.
    Dead(Box<Claim>),
}

/// What [`Runs::adopt_legacy`] did with the pre-1.0 records of one automation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adopted {
    /// Record names copied into `automation/runs-v1/` this time.
    pub copied: Vec<String>,
    /// Records whose identity the current namespace already has (it wins).
    pub present: u64,
    /// Files not copied, with the reason.
    pub refused: Vec<(PathBuf, String)>,
}

/// The run records of a repository.
#[derive(Clone, Debug)]
pub struct Runs {
    root: PathBuf,
    locks: PathBuf,
    /// The repository (`.axocoatl/`), for the pre-1.0 records read by `adopt_legacy`.
    repo_root: PathBuf,
}

impl Runs {
    pub fn new(repo: &Repo) -> Runs {
        Runs {
            root: repo.path(AUTOMATION_RUNS_DIR),
            locks: repo.path(LOCKS_DIR),
            repo_root: repo.root().to_owned(),
        }
    }

    /// The directory of an automation's records.
    pub fn dir(&self, automation: &str) -> PathBuf {
        self.root.join(component(automation))
    }

    /// The automation ids that have a record directory.
    pub fn automations(&self) -> Result<Vec<String>> {
        let mut out: Vec<String> = read_dir_names(&self.root)?
            .into_iter()
            .filter_map(|name| runtime_id(&name))
            .collect();
        out.sort();
        Ok(out)
    }

    fn lock_path(&self, automation: &str, what: &str) -> Result<PathBuf> {
        create_dir_private(&self.locks)?;
        Ok(self.locks.join(automation_lock_name(automation, what)))
    }

    /// The schedule lock: held briefly while reading records, settling dead runs and
    /// claiming, so runners decide one after the other.
    pub fn schedule_lock(&self, automation: &str) -> Result<Lock> {
        Lock::acquire(&self.lock_path(automation, "schedule")?)
    }

    /// The run lock: held while an occurrence of the automation runs. `wait: false` returns
    /// `None` when another run holds it.
    pub fn run_lock(&self, automation: &str, wait: bool) -> Result<Option<Lock>> {
        let path = self.lock_path(automation, "run")?;
        if wait {
            Lock::acquire(&path).map(Some)
        } else {
            Lock::try_acquire(&path)
        }
    }

    /// The note of the run lock (what the holder runs), read without taking it.
    pub fn run_lock_note(&self, automation: &str) -> String {
        let path = self.locks.join(automation_lock_name(automation, "run"));
        lock::peek_note(&path).unwrap_or_default()
    }

    /// When a runner first saw the automation, if one has.
    pub fn since(&self, automation: &str) -> Result<Option<Millis>> {
        let path = self.dir(automation).join(SINCE_FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<SinceFile>(&bytes)
                .map(|f| Some(f.since))
                .map_err(|e| Error::BadRecord {
                    path,
                    reason: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", path)(e)),
        }
    }

    /// Records that a runner first saw the automation at `at` (unless one did before) and
    /// returns the time that stands.
    pub fn mark_since(&self, automation: &str, at: Millis) -> Result<Millis> {
        let dir = self.dir(automation);
        ensure_dir(&dir)?;
        let file = SinceFile {
            version: RECORD_VERSION,
            automation: automation.to_owned(),
            since: at,
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| Error::Encode {
            what: "automation since marker",
            reason: e.to_string(),
        })?;
        match publish_new(&dir.join(SINCE_FILE), &bytes, |_| Ok(()))? {
            Some(_) => Ok(at),
            None => Ok(self.since(automation)?.unwrap_or(at)),
        }
    }

    /// The latest scheduled occurrence on record (from file names: no file is read).
    pub fn last_scheduled(&self, automation: &str) -> Result<Option<Millis>> {
        Ok(read_dir_names(&self.dir(automation))?
            .iter()
            .filter_map(|n| parse_scheduled_name(n))
            .max())
    }

    /// Whether the record of this identity exists.
    pub fn exists(&self, record: &RunRecord) -> bool {
        self.dir(&record.automation)
            .join(record.file_name())
            .exists()
    }

    /// Claims the identity of `record` (a non-terminal state) for this process: `None` if
    /// another runner claimed it first. The returned claim holds the record's lock.
    pub fn claim(&self, record: &RunRecord) -> Result<Option<Claim>> {
        debug_assert!(!record.state.is_terminal());
        let dir = self.dir(&record.automation);
        let active = dir.join(ACTIVE_DIR);
        ensure_dir(&dir)?;
        ensure_dir(&active)?;
        let name = record.file_name();
        let path = dir.join(&name);
        if path.exists() {
            return Ok(None);
        }
        // The marker first: a record that is open always has one (a marker without its
        // record is cleaned up by the next runner).
        let marker = active.join(&name);
        match create_new_private(&marker) {
            Ok(_) => sync_dir(&active)?,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
            }
            Err(e) => return Err(e),
        }
        let lock_it =
            |f: &File| -> Result<()> { f.lock().map_err(Error::io("lock", path.clone())) };
        match publish_new(&path, &record.encode()?, lock_it)? {
            Some(file) => Ok(Some(Claim {
                path,
                marker,
                file,
                record: record.clone(),
            })),
            None => Ok(None),
        }
    }

    /// Writes a terminal record (a skipped occurrence or span) if its identity is free;
    /// `false` if it was claimed already.
    pub fn record(&self, record: &RunRecord) -> Result<bool> {
        debug_assert!(record.state.is_terminal());
        let dir = self.dir(&record.automation);
        ensure_dir(&dir)?;
        Ok(publish_new(&dir.join(record.file_name()), &record.encode()?, |_| Ok(()))?.is_some())
    }

    /// Copies the pre-1.0 run records of `automation` (`automation/runs/<component>/`) into
    /// the current namespace. A record is copied only when its logical identity (automation
    /// id, occurrence, and for a manual run its nonce) is the one requested and is exactly
    /// what its physical path says (the directory of `automation`, the file name of its
    /// identity), and it is terminal (an open record has no runner left to settle it). A
    /// copy never replaces a current record of the same identity, and the old file is only
    /// read. Returns what was done.
    pub fn adopt_legacy(&self, automation: &str) -> Result<Adopted> {
        let mut out = Adopted::default();
        let legacy = crate::legacy::automation_runs_dir(&self.repo_root, automation);
        if !crate::legacy::is_plain_dir(&legacy) {
            return Ok(out);
        }
        let dir = self.dir(automation);
        for (name, is_dir) in crate::legacy::entries(&legacy)?.0 {
            if is_dir || !is_record_name(&name) {
                continue;
            }
            let path = legacy.join(&name);
            let bytes = fs::read(&path).map_err(Error::io("read", &path))?;
            let record = match decode(&bytes) {
                Ok(r) => r,
                Err(reason) => {
                    out.refused.push((path, reason));
                    continue;
                }
            };
            let problem = if record.automation != automation {
                Some(format!(
                    "names automation {:?}, not {automation:?}",
                    record.automation
                ))
            } else if record.file_name() != name {
                Some(format!(
                    "its identity belongs in {}, not {name}",
                    record.file_name()
                ))
            } else if !record.state.is_terminal() {
                Some(format!(
                    "it is still {}: no runner is left to settle it",
                    record.state.as_str()
                ))
            } else {
                None
            };
            if let Some(reason) = problem {
                out.refused.push((path, reason));
                continue;
            }
            let target = dir.join(&name);
            if target.exists() {
                out.present += 1;
                continue;
            }
            ensure_dir(&dir)?;
            match publish_new(&target, &bytes, |_| Ok(()))? {
                Some(_) => out.copied.push(name),
                None => out.present += 1,
            }
        }
        Ok(out)
    }

    /// The names of the automation's records that are not terminal (from their markers).
    pub fn open_names(&self, automation: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = read_dir_names(&self.dir(automation).join(ACTIVE_DIR))?
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Looks at the open record `name`: its runner alive, the record ended meanwhile, or its
    /// runner dead (the record's lock was free), in which case the caller now holds it.
    /// Call under the schedule lock, so a claim is never half made.
    pub fn take_over(&self, automation: &str, name: &str) -> Result<TakeOver> {
        let dir = self.dir(automation);
        let path = dir.join(name);
        let marker = dir.join(ACTIVE_DIR).join(name);
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                remove_marker(&marker)?;
                return Ok(TakeOver::Settled);
            }
            Err(e) => return Err(Error::io("open", path)(e)),
        };
        if !lock::try_lock_open(&file, &path)? {
            return Ok(TakeOver::Alive);
        }
        // The runner may have replaced the record (a new file) after we opened the old one.
        let current = fs::metadata(&path).map_err(Error::io("stat", path.clone()))?;
        let ours = file.metadata().map_err(Error::io("stat", path.clone()))?;
        if (current.dev(), current.ino()) != (ours.dev(), ours.ino()) {
            return self.take_over(automation, name);
        }
        let record = read_record(&mut file, &path)?;
        if record.state.is_terminal() {
            remove_marker(&marker)?;
            return Ok(TakeOver::Settled);
        }
        Ok(TakeOver::Dead(Box::new(Claim {
            path,
            marker,
            file,
            record,
        })))
    }

    /// The automation's records in name order (occurrence order), the newest `limit` only
    /// when given.
    pub fn list(&self, automation: &str, limit: Option<usize>) -> Result<Vec<Listed>> {
        let dir = self.dir(automation);
        let mut names: Vec<String> = read_dir_names(&dir)?
            .into_iter()
            .filter(|n| is_record_name(n))
            .collect();
        names.sort();
        if let Some(limit) = limit {
            let skip = names.len().saturating_sub(limit);
            names.drain(..skip);
        }
        Ok(names
            .into_iter()
            .map(|name| {
                let path = dir.join(name);
                let record = fs::read(&path)
                    .map_err(|e| format!("cannot be read: {e}"))
                    .and_then(|b| decode(&b));
                Listed { path, record }
            })
            .collect())
    }

    /// The names of the automation's records in occurrence order, without reading them
    /// (an export that already holds the terminal ones reads only the others).
    pub fn names(&self, automation: &str) -> Result<Vec<String>> {
        let mut names: Vec<String> = read_dir_names(&self.dir(automation))?
            .into_iter()
            .filter(|n| is_record_name(n))
            .collect();
        names.sort();
        Ok(names)
    }

    /// One record by its name (from [`Runs::names`]), or why it could not be read.
    pub fn read(&self, automation: &str, name: &str) -> Listed {
        let path = self.dir(automation).join(name);
        let record = fs::read(&path)
            .map_err(|e| format!("cannot be read: {e}"))
            .and_then(|b| decode(&b));
        Listed { path, record }
    }

    /// Whether the runner of an open record holds its lock (a quick look for listings).
    pub fn runner_alive(&self, listed_path: &Path) -> bool {
        match File::open(listed_path) {
            Ok(f) => !lock::try_lock_open(&f, listed_path).unwrap_or(true),
            Err(_) => false,
        }
    }

    /// Checks every record file (for `fsck`): returns the number checked and the problems.
    pub fn check(&self) -> Result<(u64, Vec<(PathBuf, String)>)> {
        let mut checked = 0;
        let mut problems = Vec::new();
        for dir_name in read_dir_names(&self.root)? {
            let dir = self.root.join(&dir_name);
            if !dir.is_dir() {
                problems.push((dir, "unexpected file among automation directories".into()));
                continue;
            }
            let Some(automation) = runtime_id(&dir_name).filter(|id| component(id) == dir_name)
            else {
                problems.push((dir, "directory name is not an encoded automation id".into()));
                continue;
            };
            let open = self.open_names(&automation)?;
            for name in read_dir_names(&dir)? {
                let path = dir.join(&name);
                if name.starts_with(".tmp-") || name == ACTIVE_DIR {
                    continue;
                }
                if name == SINCE_FILE {
                    checked += 1;
                    let problem = match fs::read(&path) {
                        Ok(b) => match serde_json::from_slice::<SinceFile>(&b) {
                            Ok(f) if f.automation != automation => Some(format!(
                                "names automation {:?} but lies in the directory of {automation:?}",
                                f.automation
                            )),
                            Ok(_) => None,
                            Err(e) => Some(format!("does not parse: {e}")),
                        },
                        Err(e) => Some(format!("cannot be read: {e}")),
                    };
                    problems.extend(problem.map(|p| (path, p)));
                    continue;
                }
                if !is_record_name(&name) {
                    problems.push((path, "unexpected file in a run record directory".into()));
                    continue;
                }
                checked += 1;
                let record = match fs::read(&path)
                    .map_err(|e| format!("cannot be read: {e}"))
                    .and_then(|b| decode(&b))
                {
                    Ok(r) => r,
                    Err(p) => {
                        problems.push((path, p));
                        continue;
                    }
                };
                if let Some(p) = check_record(&record, &automation, &name, &open) {
                    problems.push((path, p));
                }
            }
        }
        Ok((checked, problems))
    }
}

/// A record this process owns until its run ends: its file stays locked.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    marker: PathBuf,
    file: File,
    record: RunRecord,
}

impl Claim {
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the record with a state that is still open (durably), keeping it locked.
    pub fn update(&mut self, record: RunRecord) -> Result<()> {
        debug_assert!(!record.state.is_terminal());
        let path = self.path.clone();
        let file = replace_with(&self.path, &record.encode()?, |f| {
            f.lock().map_err(Error::io("lock", path))
        })?;
        // The old file's lock is released only now, after the new one is in place.
        self.file = file;
        self.record = record;
        Ok(())
    }

    /// Writes the terminal record (durably) and drops the claim.
    pub fn finish(self, record: RunRecord) -> Result<()> {
        debug_assert!(record.state.is_terminal());
        replace_with(&self.path, &record.encode()?, |_| Ok(()))?;
        remove_marker(&self.marker)
    }
}

/// Creates a directory of run records if it is missing, durably: a claim inside it must not
/// vanish with its directory in a power loss.
fn ensure_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    create_dir_private(dir)?;
    match dir.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

fn remove_marker(marker: &Path) -> Result<()> {
    match fs::remove_file(marker) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", marker)(e)),
    }
}

fn is_record_name(name: &str) -> bool {
    if let Some(rest) = name.strip_suffix(".json") {
        if parse_stamp(rest).is_some() {
            return true;
        }
        if let Some((stamp, nonce)) = rest.split_once(MANUAL_TAG) {
            return parse_stamp(stamp).is_some()
                && !nonce.is_empty()
                && nonce.bytes().all(|b| b.is_ascii_alphanumeric());
        }
    }
    false
}

fn decode(bytes: &[u8]) -> std::result::Result<RunRecord, String> {
    let record: RunRecord =
        serde_json::from_slice(bytes).map_err(|e| format!("does not parse: {e}"))?;
    if record.version > RECORD_VERSION {
        return Err(format!(
            "record version {} is newer than this build reads ({RECORD_VERSION})",
            record.version
        ));
    }
    Ok(record)
}

fn read_record(file: &mut File, path: &Path) -> Result<RunRecord> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(Error::io("read", path))?;
    decode(&bytes).map_err(|reason| Error::BadRecord {
        path: path.to_owned(),
        reason,
    })
}

/// What is wrong with a record that parsed, if anything.
fn check_record(r: &RunRecord, automation: &str, name: &str, open: &[String]) -> Option<String> {
    if r.automation != automation {
        return Some(format!(
            "names automation {:?} but lies in the directory of {automation:?}",
            r.automation
        ));
    }
    if r.file_name() != name {
        return Some(format!(
            "its identity ({} occurrence {}) belongs in {}, not {name}",
            match r.trigger {
                Trigger::Schedule => "scheduled",
                Trigger::Manual => "manual",
            },
            stamp(r.occurrence),
            r.file_name()
        ));
    }
    if (r.trigger == Trigger::Manual) != r.nonce.is_some() {
        return Some("a manual run has a nonce and a scheduled one none".into());
    }
    if let Some(span) = r.span {
        if r.state != RunState::Skipped || span.first > r.occurrence {
            return Some("a span must be skipped and start at or before its occurrence".into());
        }
    }
    if r.state.is_terminal() {
        if r.ended_at.is_none() {
            return Some(format!("state {} without an end time", r.state.as_str()));
        }
        if let (Some(s), Some(e)) = (r.started_at, r.ended_at) {
            if e < s {
                return Some("ends before it started".into());
            }
        }
    } else if !open.iter().any(|n| n == name) {
        return Some(format!(
            "state {} without its marker in active/: no runner would ever settle it",
            r.state.as_str()
        ));
    }
    if matches!(r.state, RunState::Running) && r.turn.is_none() {
        return Some("running without a turn".into());
    }
    None
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("list", dir))?;
        if let Ok(name) = entry.file_name().into_string() {
            out.push(name);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repo) {
        let (dir, repo) = crate::repo::scratch();
        (dir, repo)
    }

    fn record(occurrence: Millis, state: RunState) -> RunRecord {
        RunRecord {
            version: RECORD_VERSION,
            automation: "brief".into(),
            trigger: Trigger::Schedule,
            occurrence,
            nonce: None,
            span: None,
            state,
            claimed_at: occurrence + 5,
            runner: Runner {
                kind: "tick".into(),
                pid: 1,
            },
            session: Some("briefs".into()),
            turn: None,
            started_at: None,
            ended_at: state.is_terminal().then_some(occurrence + 9),
            reason: None,
        }
    }

    #[test]
    fn stamps_sort_and_round_trip() {
        for ms in [0, 1_767_323_045_123, 951_868_799_999] {
            let s = stamp(ms);
            assert_eq!(parse_stamp(&s), Some(ms), "{s}");
        }
        assert_eq!(stamp(1_767_323_045_123), "20260102T030405.123Z");
        assert!(stamp(1_000) < stamp(60_000));
        assert_eq!(parse_stamp("20260231T000000.000Z"), None);
        assert_eq!(parse_stamp("2026-01-02T03:04:05Z"), None);
    }

    #[test]
    fn one_claim_wins_and_the_loser_does_nothing() {
        let (_d, repo) = repo();
        let runs = Runs::new(&repo);
        let r = record(60_000, RunState::Claimed);
        let first = runs.claim(&r).expect("claim").expect("won");
        assert!(
            runs.claim(&r).expect("claim").is_none(),
            "second claim lost"
        );
        // The holder is alive: no one can take the record over.
        let name = r.file_name();
        assert_eq!(runs.open_names("brief").expect("open"), vec![name.clone()]);
        assert!(matches!(
            runs.take_over("brief", &name).expect("look"),
            TakeOver::Alive
        ));
        let mut done = first.record().clone();
        done.state = RunState::Completed;
        done.ended_at = Some(70_000);
        first.finish(done).expect("finish");
        assert!(runs.open_names("brief").expect("open").is_empty());
        assert_eq!(runs.last_scheduled("brief").expect("last"), Some(60_000));
        let (checked, problems) = runs.check().expect("check");
        assert_eq!((checked, problems), (1, vec![]));
    }

    #[test]
    fn an_update_keeps_the_lock_and_a_dropped_claim_is_taken_over() {
        let (_d, repo) = repo();
        let runs = Runs::new(&repo);
        let r = record(120_000, RunState::Claimed);
        let name = r.file_name();
        let mut claim = runs.claim(&r).expect("claim").expect("won");
        let mut running = r.clone();
        running.state = RunState::Running;
        running.turn = Some("t1".into());
        claim.update(running).expect("update");
        assert!(matches!(
            runs.take_over("brief", &name).expect("look"),
            TakeOver::Alive
        ));
        // As a killed runner: the file handle closes, the kernel releases the lock.
        drop(claim);
        let TakeOver::Dead(dead) = runs.take_over("brief", &name).expect("look") else {
            panic!("the runner is gone");
        };
        assert_eq!(dead.record().turn.as_deref(), Some("t1"));
        let mut end = dead.record().clone();
        end.state = RunState::Interrupted;
        end.ended_at = Some(130_000);
        dead.finish(end).expect("finish");
        assert!(runs.open_names("brief").expect("open").is_empty());
        let listed = runs.list("brief", None).expect("list");
        assert_eq!(
            listed[0].record.as_ref().expect("ok").state,
            RunState::Interrupted
        );
    }

    #[test]
    fn since_is_kept_by_the_first_runner() {
        let (_d, repo) = repo();
        let runs = Runs::new(&repo);
        assert_eq!(runs.since("brief").expect("since"), None);
        assert_eq!(runs.mark_since("brief", 5).expect("mark"), 5);
        assert_eq!(runs.mark_since("brief", 9).expect("mark"), 5);
        assert_eq!(runs.automations().expect("ids"), vec!["brief".to_string()]);
    }

    #[test]
    fn fsck_finds_a_misplaced_or_unsettleable_record() {
        let (_d, repo) = repo();
        let runs = Runs::new(&repo);
        assert!(runs
            .record(&record(60_000, RunState::Skipped))
            .expect("record"));
        assert!(!runs
            .record(&record(60_000, RunState::Skipped))
            .expect("again"));
        let dir = runs.dir("brief");
        // A record renamed to another occurrence, and an open one without its marker.
        fs::copy(
            dir.join(stamp(60_000) + ".json"),
            dir.join(stamp(0) + ".json"),
        )
        .expect("cp");
        let open = record(180_000, RunState::Running);
        fs::write(dir.join(open.file_name()), open.encode().expect("encode")).expect("write");
        fs::write(dir.join(stamp(240_000) + ".json"), b"{").expect("write");
        let (checked, problems) = runs.check().expect("check");
        assert_eq!(checked, 4);
        let text: Vec<String> = problems.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text.iter().any(|p| p.contains("belongs in")), "{text:?}");
        assert!(
            text.iter().any(|p| p.contains("does not parse")),
            "{text:?}"
        );
        assert!(text.iter().any(|p| p.contains("marker")), "{text:?}");
    }

    #[test]
    fn legacy_records_are_copied_only_when_identity_and_path_match() {
        let (_dir, repo) = repo();
        let runs = Runs::new(&repo);
        let legacy = repo.root().join("automation/runs/brief");
        fs::create_dir_all(&legacy).expect("mkdir");
        let mut done = record(1_700_000_040_000, RunState::Completed);
        done.ended_at = Some(1_700_000_050_000);
        let put = |name: &str, r: &RunRecord| {
            fs::write(legacy.join(name), r.encode().expect("encode")).expect("write");
        };
        put(&done.file_name(), &done);
        // Right automation, wrong file name for its occurrence.
        let mut moved = done.clone();
        moved.occurrence = 1_700_000_100_000;
        put("20231114T231400.000Z.json", &moved);
        // Another automation's record in this directory.
        let mut other = done.clone();
        other.automation = "other".into();
        other.occurrence = 1_700_000_200_000;
        put(&other.file_name(), &other);
        // Still open.
        let open = record(1_700_000_300_000, RunState::Running);
        put(&open.file_name(), &open);
        let before: Vec<(String, Vec<u8>)> = read_dir_names(&legacy)
            .expect("names")
            .into_iter()
            .map(|n| (n.clone(), fs::read(legacy.join(&n)).expect("read")))
            .collect();
        let adopted = runs.adopt_legacy("brief").expect("adopt");
        assert_eq!(adopted.copied, vec![done.file_name()]);
        assert_eq!(adopted.refused.len(), 3, "{adopted:?}");
        assert_eq!(runs.list("brief", None).expect("list").len(), 1);
        // Again: the current copy wins, nothing more is copied.
        let again = runs.adopt_legacy("brief").expect("adopt");
        assert!(again.copied.is_empty());
        assert_eq!(again.present, 1);
        // And nothing is copied for an identity never requested.
        assert!(runs.adopt_legacy("other").expect("adopt").copied.is_empty());
        let after: Vec<(String, Vec<u8>)> = read_dir_names(&legacy)
            .expect("names")
            .into_iter()
            .map(|n| (n.clone(), fs::read(legacy.join(&n)).expect("read")))
            .collect();
        assert_eq!(before, after);
    }
}
