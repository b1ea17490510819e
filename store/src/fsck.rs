//! Consistency checks over everything the store owns.

use std::path::PathBuf;

use crate::checkpoint::Checkpoints;
use crate::layout;
use crate::ledger::Damage;
use crate::{Error, Repo, Result};

/// What kind of problem a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// The newest segment ends in an incomplete record: `fsck --repair` truncates it.
    TornTail,
    /// A segment is damaged before its end.
    CorruptSegment,
    /// A record's payload does not decode.
    UndecodableRecord,
    /// A record of a kind this build does not know (written by a newer axocoatl).
    UnknownRecordKind,
    /// An object's content does not match its name.
    DamagedObject,
    /// A ledger record refers to an object that is not stored.
    MissingObject,
    /// A checkpoint does not decode; it will be ignored and rebuilt.
    BadCheckpoint,
    /// A memory file (core memory, daily log) does not parse, or has a newer version.
    BadMemoryFile,
    /// A core memory block is longer than its configured limit.
    OversizeMemoryBlock,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::TornTail => "torn-tail",
            FindingKind::CorruptSegment => "corrupt-segment",
            FindingKind::UndecodableRecord => "undecodable-record",
            FindingKind::UnknownRecordKind => "unknown-record-kind",
            FindingKind::DamagedObject => "damaged-object",
            FindingKind::MissingObject => "missing-object",
            FindingKind::BadCheckpoint => "bad-checkpoint",
            FindingKind::BadMemoryFile => "bad-memory-file",
            FindingKind::OversizeMemoryBlock => "oversize-memory-block",
        }
    }

    /// Whether the finding makes the repository unclean (warnings do not).
    pub fn is_error(self) -> bool {
        !matches!(self, FindingKind::UnknownRecordKind)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub file: PathBuf,
    pub offset: Option<u64>,
    pub message: String,
}

/// Counts of what was checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub segments: u64,
    pub records: u64,
    pub objects: u64,
    pub checkpoints: u64,
    pub memory_files: u64,
    pub findings: Vec<Finding>,
    /// Bytes cut by `--repair`.
    pub repaired_bytes: u64,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        !self.findings.iter().any(|f| f.kind.is_error())
    }
}

/// Checks the ledger, the objects, the checkpoints and the memory files. With `repair`, a
/// torn tail of the ledger or of a daily log is truncated first (and then not reported);
/// nothing else is ever changed.
pub fn check(repo: &Repo, repair: bool) -> Result<Report> {
    let mut report = Report::default();
    if repair {
        report.repaired_bytes = repo.ledger().repair_tail()?;
    }
    check_ledger(repo, &mut report)?;
    check_objects(repo, &mut report)?;
    check_checkpoints(repo, &mut report)?;
    crate::memory::fsck::check(repo, repair, &mut report)?;
    Ok(report)
}

/// What one segment's check found.
struct SegmentCheck {
    path: std::path::PathBuf,
    records: u64,
    first_seq: Option<(u64, u64)>,
    last_seq: Option<u64>,
    findings: Vec<Finding>,
}

/// Segments are checked in parallel (one per core at a time: checksums and decoding are
/// CPU-bound) and their findings merged in ledger order.
fn check_ledger(repo: &Repo, report: &mut Report) -> Result<()> {
    let ledger = repo.ledger();
    let numbers = ledger.segment_numbers()?;
    let newest = numbers.last().copied();
    let results = crate::ledger::parallel_map(&numbers, |number| {
        check_segment(repo, number, Some(number) != newest)
    });
    let mut last_seq: Option<u64> = None;
    for result in results {
        let seg = result?;
        report.segments += 1;
        report.records += seg.records;
        if let (Some(prev), Some((first, offset))) = (last_seq, seg.first_seq) {
            if first <= prev {
                report.findings.push(Finding {
                    kind: FindingKind::CorruptSegment,
                    file: seg.path.clone(),
                    offset: Some(offset),
                    message: format!("sequence number {first} after {prev}"),
                });
            }
        }
        last_seq = seg.last_seq.or(last_seq);
        report.findings.extend(seg.findings);
    }
    Ok(())
}

fn check_segment(repo: &Repo, number: u64, sealed: bool) -> Result<SegmentCheck> {
    let seg = repo.ledger().load_segment(number)?;
    let path = seg.path.clone();
    let mut out = SegmentCheck {
        path: path.clone(),
        records: 0,
        first_seq: None,
        last_seq: None,
        findings: Vec::new(),
    };
    match seg.header() {
        Err(reason) => {
            out.findings.push(Finding {
                kind: FindingKind::CorruptSegment,
                file: path,
                offset: Some(0),
                message: reason,
            });
            return Ok(out);
        }
        Ok((n, _)) if n != number => out.findings.push(Finding {
            kind: FindingKind::CorruptSegment,
            file: path.clone(),
            offset: Some(0),
            message: format!("header says segment {n}, file name says {number}"),
        }),
        Ok(_) => {}
    }
    let mut findings = Vec::new();
    let mut records = 0;
    let mut first_seq = None;
    let mut last_seq: Option<u64> = None;
    let damage = seg.frames(0, |fr| {
        records += 1;
        if first_seq.is_none() {
            first_seq = Some((fr.seq, fr.offset));
        }
        if let Some(prev) = last_seq {
            if fr.seq <= prev {
                findings.push(Finding {
                    kind: FindingKind::CorruptSegment,
                    file: path.clone(),
                    offset: Some(fr.offset),
                    message: format!("sequence number {} after {prev}", fr.seq),
                });
            }
        }
        last_seq = Some(fr.seq);
        match crate::ledger::decode(fr.kind, fr.payload) {
            Ok(Some(record)) => check_references(repo, &record, &path, fr.offset, &mut findings),
            Ok(None) => findings.push(Finding {
                kind: FindingKind::UnknownRecordKind,
                file: path.clone(),
                offset: Some(fr.offset),
                message: format!("record kind {} is unknown to this build; skipped", fr.kind),
            }),
            Err(e) => findings.push(Finding {
                kind: FindingKind::UndecodableRecord,
                file: path.clone(),
                offset: Some(fr.offset),
                message: format!("record of kind {} does not decode: {e}", fr.kind),
            }),
        }
    });
    out.records = records;
    out.first_seq = first_seq;
    out.last_seq = last_seq;
    out.findings.extend(findings);
    match damage {
        None => {}
        Some(Damage::TornTail { offset, len }) if !sealed => out.findings.push(Finding {
            kind: FindingKind::TornTail,
            file: path,
            offset: Some(offset),
            message: format!(
                "{len} bytes of an incomplete record at the end (a crash mid-append); `axocoatl fsck --repair` truncates them"
            ),
        }),
        Some(Damage::TornTail { offset, .. }) => out.findings.push(Finding {
            kind: FindingKind::CorruptSegment,
            file: path,
            offset: Some(offset),
            message: "sealed segment ends inside a record".into(),
        }),
        Some(Damage::Corrupt { offset, reason }) => out.findings.push(Finding {
            kind: FindingKind::CorruptSegment,
            file: path,
            offset: Some(offset),
            message: reason,
        }),
    }
    Ok(out)
}

fn check_references(
    repo: &Repo,
    record: &crate::ledger::Record,
    path: &std::path::Path,
    offset: u64,
    findings: &mut Vec<Finding>,
) {
    use crate::ledger::Record as R;
    let mut hashes: Vec<&str> = Vec::new();
    match record {
        R::TurnBegun(r) => {
            for c in &r.inline_context {
                hashes.extend(c.text.object.as_deref());
            }
            for a in &r.attachments {
                hashes.push(&a.object);
                hashes.extend(a.text_object.as_deref());
            }
        }
        R::ToolStarted(r) => hashes.extend(r.arguments.object.as_deref()),
        R::ToolResult(r) => hashes.extend(r.output.object.as_deref()),
        R::AttachmentAdded(r) => {
            hashes.push(&r.object);
            hashes.extend(r.text_object.as_deref());
        }
        _ => {}
    }
    for hash in hashes {
        if !repo.objects().contains(hash) {
            findings.push(Finding {
                kind: FindingKind::MissingObject,
                file: path.to_owned(),
                offset: Some(offset),
                message: format!("refers to object {hash}, which is not stored"),
            });
        }
    }
}

fn check_objects(repo: &Repo, report: &mut Report) -> Result<()> {
    for hash in repo.objects().list()? {
        report.objects += 1;
        match repo.objects().get(&hash) {
            Ok(_) => {}
            Err(Error::ObjectDamaged { actual, .. }) => report.findings.push(Finding {
                kind: FindingKind::DamagedObject,
                file: repo.objects().path(&hash),
                offset: None,
                message: format!("content hashes to {actual}"),
            }),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn check_checkpoints(repo: &Repo, report: &mut Report) -> Result<()> {
    let checkpoints = Checkpoints::new(&repo.path(layout::CHECKPOINTS_DIR));
    for component in checkpoints.components()? {
        for file in checkpoints.list(&component)? {
            report.checkpoints += 1;
            if let Err(Error::BadCheckpoint { reason, .. }) = checkpoints.read_with(&file, |_| ()) {
                report.findings.push(Finding {
                    kind: FindingKind::BadCheckpoint,
                    file: file.path.clone(),
                    offset: None,
                    message: format!("{reason}; it is ignored and rebuilt from the ledger"),
                });
            }
        }
    }
    Ok(())
}
