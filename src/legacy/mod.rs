//! Pre-1.0 compatibility: the 0.1.x checkpoint import.
//!
//! A 0.1.x single-agent session kept its conversation only in a checkpoint
//! (`checkpoints/<component>/`, formats in `axocoatl_store::legacy::checkpoint`). When such a
//! session has no canonical turns, its transcript is committed to the ledger first, one turn
//! per user request with its tool calls and answer, and only then is a current checkpoint
//! written. A turn whose last message is not a final assistant answer is recorded
//! `interrupted`, never `completed`.
//!
//! The import is idempotent: a `LegacyImportBegun` record opens it, each turn's id is derived
//! from the checkpoint's digest and the turn's index, and a `LegacyImportEnded` record closes
//! it. An import cut short (a kill at any point) is finished by the next one, appending only
//! what is missing; a finished one is never repeated. It runs under the session's turn lock,
//! on every open of the repository (cheap when there is nothing to import) and explicitly
//! (`axocoatl import`). The source file is only read.

mod turns;

pub use turns::turn_id;
use turns::{missing, split_turns, turn_records, turn_usage, LegacyTurn};

use std::collections::HashMap;

use axocoatl_store::failpoint;
use axocoatl_store::layout::{check_session_name, component, CHECKPOINTS_DIR};
use axocoatl_store::ledger::record::{LegacyImportBegun, LegacyImportEnded, Usage};
use axocoatl_store::ledger::Record;
use axocoatl_store::legacy::checkpoint::{self as v0, NotV0, V0Checkpoint};
use axocoatl_store::legacy::{self as store_legacy, Input, InputKind};
use axocoatl_store::Repo;
use serde::Serialize;

use crate::checkpoint;
use crate::clock;
use crate::conversation;
use crate::error::{Result, RuntimeError};
use crate::history::{Projection, TurnView, ViewState, Want};
use crate::session::{self, Wait};

/// Where a 0.1.x checkpoint stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ImportState {
    /// Not imported yet: the next import commits it.
    Pending,
    /// An import began and was cut short: the next one finishes it.
    Partial,
    /// Imported; only the current checkpoint is missing (the next import writes it).
    CheckpointMissing,
    /// Imported.
    Imported,
    /// Never imported: `reason` says why.
    Skipped,
}

impl ImportState {
    pub fn as_str(self) -> &'static str {
        match self {
            ImportState::Pending => "pending",
            ImportState::Partial => "partial",
            ImportState::CheckpointMissing => "checkpoint-missing",
            ImportState::Imported => "imported",
            ImportState::Skipped => "skipped",
        }
    }
}

/// One legacy checkpoint directory and what the import does (or would do) with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Candidate {
    pub session: String,
    pub agent: String,
    /// The checkpoint file (or its directory when none is usable), relative to `.axocoatl/`.
    pub source: String,
    /// `json` or `postcard-v0`.
    pub format: Option<&'static str>,
    pub digest: Option<String>,
    /// Turns in the transcript, and how many of them have a completed assistant response.
    pub turns: usize,
    pub completed: usize,
    pub interrupted: usize,
    /// Where it stood when looked at.
    pub state: ImportState,
    /// Why it is skipped.
    pub reason: Option<String>,
    /// What this run did: `imported`, `finished` (a partial import), `checkpoint-written`,
    /// or none (a dry run, nothing to do, skipped).
    pub action: Option<&'static str>,
}

/// The pre-1.0 inputs of a repository and the import's view of its checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub checkpoints: Vec<Candidate>,
    /// Every pre-1.0 input seen (checkpoint directories included).
    pub inputs: Vec<Input>,
    /// Automation run records copied into `automation/runs-v1/` (explicit import only).
    pub runs_copied: Vec<String>,
}

/// What the ledger says about a session and one import.
struct SessionState {
    begun: bool,
    ended: Option<u64>,
    /// Turns of the session that are not this import's.
    other_turns: usize,
    /// This import's turns, by id.
    imported: HashMap<String, TurnView>,
}

fn session_state(repo: &Repo, session: &str, digest: &str, turns: usize) -> Result<SessionState> {
    let walked = repo.reader().read_session(session)?;
    let mut begun = false;
    let mut ended = None;
    for e in &walked.entries {
        match &e.record {
            Some(Record::LegacyImportBegun(b)) if b.digest == digest => begun = true,
            Some(Record::LegacyImportEnded(x)) if x.digest == digest => ended = Some(e.seq),
            _ => {}
        }
    }
    let ids: Vec<String> = (0..turns).map(|i| turn_id(digest, i)).collect();
    // Only this import's own process may leave its turns open, and it holds the session
    // lock while it runs: the projection never records them interrupted behind its back.
    let projection = Projection::from_entries(walked, &mut |_| true, Want::VIEWS);
    let mut imported = HashMap::new();
    let mut other_turns = 0;
    for t in projection.turns {
        if t.session != session {
            continue;
        }
        if ids.contains(&t.turn) {
            imported.insert(t.turn.clone(), t);
        } else {
            other_turns += 1;
        }
    }
    Ok(SessionState {
        begun,
        ended,
        other_turns,
        imported,
    })
}

fn rel(repo: &Repo, path: &std::path::Path) -> String {
    path.strip_prefix(repo.root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A 0.1.x checkpoint that read, with its transcript split into turns.
type Usable = (V0Checkpoint, Vec<LegacyTurn>);

/// The candidate of one legacy checkpoint directory, and its checkpoint when usable.
fn candidate(
    repo: &Repo,
    input: &Input,
    agents_of_session: usize,
) -> Result<(Candidate, Option<Usable>)> {
    let (session, agent) = input.id.split_once(':').unwrap_or((&input.id, ""));
    let mut c = Candidate {
        session: session.to_owned(),
        agent: agent.to_owned(),
        source: rel(repo, &input.path),
        format: None,
        digest: None,
        turns: 0,
        completed: 0,
        interrupted: 0,
        state: ImportState::Skipped,
        reason: None,
        action: None,
    };
    let skip = |mut c: Candidate, reason: String| {
        c.reason = Some(reason);
        Ok((c, None))
    };
    if agent.contains(':') {
        return skip(
            c,
            "a Coordinator Worker's checkpoint: only single-agent sessions are imported".into(),
        );
    }
    if let Err(e) = check_session_name(session) {
        return skip(c, e.to_string());
    }
    if agents_of_session > 1 {
        return skip(
            c,
            format!("session {session:?} has checkpoints of {agents_of_session} agents: only a single-agent session is imported"),
        );
    }
    let ck = match first_v0(repo, &input.path)? {
        Ok(ck) => ck,
        Err(reason) => return skip(c, reason),
    };
    c.source = rel(repo, &ck.file.path);
    c.format = Some(ck.format.as_str());
    c.digest = Some(ck.digest.clone());
    if ck.transcript.agent != input.id {
        return skip(
            c,
            format!(
                "it names agent {:?} but lies in the directory of {:?}",
                ck.transcript.agent, input.id
            ),
        );
    }
    let turns = split_turns(&ck.transcript.messages);
    c.turns = turns.len();
    c.completed = turns.iter().filter(|t| t.completed).count();
    c.interrupted = c.turns - c.completed;
    if turns.is_empty() {
        return skip(c, "its transcript has no turns".into());
    }
    let state = session_state(repo, session, &ck.digest, turns.len())?;
    c.state = if state.ended.is_some() {
        if has_current_checkpoint(repo, &input.id) {
            ImportState::Imported
        } else {
            ImportState::CheckpointMissing
        }
    } else if state.other_turns > 0 {
        c.reason = Some(format!(
            "session {session:?} already has {} canonical turn{}: the ledger is the authority",
            state.other_turns,
            if state.other_turns == 1 { "" } else { "s" }
        ));
        ImportState::Skipped
    } else if state.begun || !state.imported.is_empty() {
        ImportState::Partial
    } else {
        ImportState::Pending
    };
    Ok((c, Some((ck, turns))))
}

/// The first 0.1.x checkpoint of the directory `dir`, or why there is none to import.
fn first_v0(
    repo: &Repo,
    dir: &std::path::Path,
) -> Result<std::result::Result<V0Checkpoint, String>> {
    let mut bad = None;
    let mut current_format = false;
    for file in v0::files(dir)? {
        match v0::read(&file)? {
            Ok(ck) => return Ok(Ok(ck)),
            Err(NotV0::Current) => current_format = true,
            Err(NotV0::Bad(reason)) => {
                bad.get_or_insert((rel(repo, &file.path), reason));
            }
        }
    }
    Ok(Err(match (bad, current_format) {
        (Some((path, reason)), _) => format!("no usable 0.1.x checkpoint ({path}: {reason})"),
        (None, true) => {
            "its checkpoints are in today's format: read as checkpoints, nothing to import".into()
        }
        (None, false) => "no 0.1.x checkpoint in it".into(),
    }))
}

fn has_current_checkpoint(repo: &Repo, agent_id: &str) -> bool {
    checkpoint::store(repo)
        .list(&component(agent_id))
        .is_ok_and(|l| !l.is_empty())
}

/// The legacy checkpoint directories, each with the number of agents its session has there.
fn checkpoint_inputs(inputs: &[Input]) -> Vec<(&Input, usize)> {
    let dirs: Vec<&Input> = inputs
        .iter()
        .filter(|i| i.kind == InputKind::Checkpoints)
        .collect();
    let session_of = |i: &Input| i.id.split_once(':').map(|(s, _)| s.to_owned());
    dirs.iter()
        .map(|i| {
            let n = dirs
                .iter()
                .filter(|o| session_of(o) == session_of(i))
                .count();
            (*i, n)
        })
        .collect()
}

/// How this build reads a pre-1.0 input (one sentence, for `fsck` and `import`).
pub fn how_read(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Checkpoints => {
            "0.1.x checkpoints are imported into session history; today's format is read as a checkpoint candidate"
        }
        InputKind::CoreMemory => "read while memory/core/v1/ has no file for this agent",
        InputKind::SharedCoreMemory => "read while memory/core/shared/v1/ has no file for this label",
        InputKind::DailyLog => "merged into daily log reads (appends go to memory/daily_log/v1/)",
        InputKind::SemanticMemory => {
            "records read while memory/semantic/v1/ has none for this agent; the first write copies them there"
        }
        InputKind::AutomationRuns => {
            "records copied into automation/runs-v1/ when the automation runs, is listed or imported"
        }
    }
}

/// What `axocoatl import --dry-run` shows: every pre-1.0 input and where each 0.1.x
/// checkpoint stands. Nothing is written.
pub fn plan(repo: &Repo) -> Result<Report> {
    let scan = store_legacy::scan(repo)?;
    let mut report = Report::default();
    for (input, agents) in checkpoint_inputs(&scan.inputs) {
        report.checkpoints.push(candidate(repo, input, agents)?.0);
    }
    report.inputs = scan.inputs;
    Ok(report)
}

/// Imports every pending 0.1.x checkpoint and finishes every partial import (explicit
/// `axocoatl import`); `automations` are the configured automation ids whose pre-1.0 run
/// records are copied. A busy session is an error.
pub fn import(repo: &Repo, keep: usize, automations: &[String]) -> Result<Report> {
    let mut report = run(repo, keep, Wait::Briefly)?;
    let runs = axocoatl_store::automation::Runs::new(repo);
    for id in automations {
        report.runs_copied.extend(
            runs.adopt_legacy(id)?
                .copied
                .into_iter()
                .map(|name| format!("{id}/{name}")),
        );
    }
    Ok(report)
}

/// The import every open of the repository runs: nothing to do costs one directory listing
/// (`checkpoints/`), and a directory whose Agent has a current checkpoint is not looked into.
/// A session busy with a turn is left for a later open.
pub fn import_on_open(repo: &Repo, keep: &dyn Fn() -> Option<usize>) -> Result<Vec<Candidate>> {
    let dir = repo.path(axocoatl_store::layout::LEGACY_CHECKPOINTS_DIR);
    let (entries, _) = store_legacy::entries(&dir)?;
    let current = std::path::Path::new(CHECKPOINTS_DIR)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("v1");
    let maybe = entries.iter().any(|(name, is_dir)| {
        *is_dir
            && name != current
            && axocoatl_store::layout::runtime_id(name)
                .is_some_and(|id| id.contains(':') && !has_current_checkpoint(repo, &id))
    });
    if !maybe {
        return Ok(Vec::new());
    }
    let keep = keep().unwrap_or_else(|| crate::config::CheckpointConfig::default().keep);
    Ok(run(repo, keep, Wait::No)?.checkpoints)
}

fn run(repo: &Repo, keep: usize, wait: Wait) -> Result<Report> {
    let scan = store_legacy::scan(repo)?;
    let mut report = Report::default();
    let inputs = checkpoint_inputs(&scan.inputs);
    let total = inputs.len();
    for (done, (input, agents)) in inputs.into_iter().enumerate() {
        crate::progress::report(crate::progress::Progress::Importing { done, total });
        let (c, usable) = candidate(repo, input, agents)?;
        let (
            Some((ck, turns)),
            ImportState::Pending | ImportState::Partial | ImportState::CheckpointMissing,
        ) = (usable, c.state)
        else {
            report.checkpoints.push(c);
            continue;
        };
        let lock = match session::lock(repo, &c.session, wait, "import") {
            Ok(lock) => lock,
            Err(RuntimeError::Busy { .. } | RuntimeError::HeldForApproval { .. })
                if wait == Wait::No =>
            {
                report.checkpoints.push(c);
                continue;
            }
            Err(e) => return Err(e),
        };
        let action = commit(repo, &c, &ck, &turns, keep)?;
        drop(lock);
        report.checkpoints.push(Candidate {
            action,
            state: c.state,
            ..c
        });
    }
    if total > 0 {
        crate::progress::report(crate::progress::Progress::Done);
    }
    report.inputs = scan.inputs;
    Ok(report)
}

/// Commits the transcript (what is missing of it) and then the checkpoint. The caller holds
/// the session lock; the state is read again under it.
fn commit(
    repo: &Repo,
    c: &Candidate,
    ck: &V0Checkpoint,
    turns: &[LegacyTurn],
    keep: usize,
) -> Result<Option<&'static str>> {
    let (session, agent) = (c.session.as_str(), c.agent.as_str());
    let state = session_state(repo, session, &ck.digest, turns.len())?;
    if state.ended.is_none() && state.other_turns > 0 {
        return Ok(None); // a turn began meanwhile: the ledger is the authority
    }
    let ledger = repo.ledger();
    let mut action = None;
    let mut end_seq = state.ended;
    if state.ended.is_none() {
        action = Some(if state.begun { "finished" } else { "imported" });
        if !state.begun {
            ledger.append_lazy(&[Record::LegacyImportBegun(LegacyImportBegun {
                session: session.to_owned(),
                agent: agent.to_owned(),
                source: c.source.clone(),
                digest: ck.digest.clone(),
                format: ck.format.as_str().to_owned(),
                turns: turns.len() as u32,
                at: clock::now(),
            })])?;
            failpoint::pause("legacy.import.begun");
        }
        for (i, t) in turns.iter().enumerate() {
            let records = turn_records(repo, ck, session, agent, i, t)?;
            let records = match state.imported.get(&turn_id(&ck.digest, i)) {
                Some(seen) if seen.state != ViewState::Running => continue,
                Some(seen) => missing(records, seen),
                None => records,
            };
            ledger.append_lazy(&records)?;
            failpoint::pause("legacy.import.turn");
        }
        let appended = ledger.append(&[Record::LegacyImportEnded(LegacyImportEnded {
            session: session.to_owned(),
            agent: agent.to_owned(),
            digest: ck.digest.clone(),
            turns: turns.len() as u32,
            at: clock::now(),
        })])?;
        end_seq = appended.last().map(|a| a.seq);
        failpoint::pause("legacy.import.ended");
    }
    if !has_current_checkpoint(repo, &format!("{session}:{agent}")) {
        write_checkpoint(repo, ck, session, agent, turns, end_seq.unwrap_or(0), keep);
        action = action.or(Some("checkpoint-written"));
        failpoint::pause("legacy.import.checkpoint");
    }
    Ok(action)
}

/// The current checkpoint after an import: the transcript's completed turns, as they were
/// (a failed write only means the next turn rebuilds from the ledger).
fn write_checkpoint(
    repo: &Repo,
    ck: &V0Checkpoint,
    session: &str,
    agent: &str,
    turns: &[LegacyTurn],
    seq: u64,
    keep: usize,
) -> bool {
    let mut messages = Vec::new();
    let mut head = None;
    let mut usage = Usage::ZERO;
    for (i, t) in turns.iter().enumerate() {
        if t.completed {
            messages.extend(t.messages.iter().cloned());
            head = Some(turn_id(&ck.digest, i));
            usage.add(&turn_usage(t));
        }
    }
    let snapshot = conversation::snapshot(&messages, head, false, usage, seq);
    checkpoint::write(repo, session, agent, &snapshot, keep).is_ok()
}
