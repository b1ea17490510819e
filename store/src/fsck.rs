//! Consistency checks over everything the store owns.

use std::path::{Path, PathBuf};

use crate::checkpoint::Checkpoints;
use crate::fsutil;
use crate::layout;
use crate::ledger::Damage;
use crate::{Error, Repo, Result};

pub use crate::findings::{Finding, FindingKind, Report};

/// Checks the layout, `HEAD`, the ledger, the objects, the checkpoints and the memory
/// files. With `repair`, first: a torn or damaged end of the ledger is cut (damaged bytes
/// are kept in `ledger/v1/damaged/`), stray temporary files are removed, missing
/// directories that hold no data are recreated and a missing or unreadable `HEAD` is set to
/// the default session. Nothing else is ever changed.
pub fn check(repo: &Repo, repair: bool) -> Result<Report> {
    let mut report = Report::default();
    if repair {
        repair_layout(repo, &mut report)?;
        let done = repo.ledger().repair()?;
        report.repaired_bytes = done.bytes;
        report.repairs.extend(done.actions);
        for dir in temp_dirs(repo)? {
            for stray in fsutil::collect_strays(&dir)? {
                report.repairs.push(format!(
                    "removed the stray temporary file {} ({} bytes)",
                    rel(repo, &stray.path),
                    stray.len
                ));
            }
        }
    }
    check_layout(repo, &mut report)?;
    check_head(repo, &mut report);
    check_ledger(repo, &mut report)?;
    for f in repo.reader().check_indexes(repair)? {
        report.findings.push(Finding {
            kind: FindingKind::StaleIndex,
            file: f.path,
            offset: None,
            message: f.message,
        });
    }
    check_objects(repo, &mut report)?;
    check_checkpoints(repo, &mut report)?;
    let before = report.repaired_bytes;
    crate::memory::fsck::check(repo, repair, &mut report)?;
    if report.repaired_bytes > before {
        report.repairs.push(format!(
            "truncated torn tails of daily log files: {} bytes (a crash mid-append)",
            report.repaired_bytes - before
        ));
    }
    check_semantic(repo, repair, &mut report)?;
    check_strays(repo, &mut report)?;
    check_automation_runs(repo, &mut report)?;
    let legacy = crate::legacy::scan(repo)?;
    report.legacy = legacy.inputs;
    report.legacy_cut = legacy.cut;
    Ok(report)
}

fn rel(repo: &Repo, path: &Path) -> String {
    path.strip_prefix(repo.root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Directories of the layout that hold no data of their own: recreated when missing.
fn recreatable(dir: &str) -> bool {
    dir != layout::LEDGER_DIR && dir != "ledger"
}

fn repair_layout(repo: &Repo, report: &mut Report) -> Result<()> {
    for dir in layout::INIT_DIRS {
        let path = repo.path(dir);
        if recreatable(dir) && !path.is_dir() && !path.exists() {
            fsutil::create_dir_private(&path)?;
            report
                .repairs
                .push(format!("recreated the missing directory {dir}/"));
        }
    }
    if let Err(reason) = repo.head_problem() {
        repo.set_head(layout::DEFAULT_SESSION)?;
        report.repairs.push(format!(
            "{reason}; set it to `{}` (`axocoatl sessions switch NAME` picks another session)",
            layout::DEFAULT_SESSION
        ));
    }
    Ok(())
}

fn check_layout(repo: &Repo, report: &mut Report) -> Result<()> {
    for dir in layout::INIT_DIRS {
        let path = repo.path(dir);
        if path.is_dir() {
            continue;
        }
        let message = if recreatable(dir) {
            "missing: the next command that needs it recreates it, `axocoatl fsck --repair` does now"
                .to_string()
        } else {
            "missing: the ledger is gone; restore it from a backup (or `mkdir` it to start an empty ledger)"
                .to_string()
        };
        report.findings.push(Finding {
            kind: FindingKind::MissingDirectory,
            file: path,
            offset: None,
            message,
        });
    }
    Ok(())
}

fn check_head(repo: &Repo, report: &mut Report) {
    if let Err(reason) = repo.head_problem() {
        report.findings.push(Finding {
            kind: FindingKind::BadHead,
            file: repo.path(layout::HEAD_FILE),
            offset: None,
            message: format!(
                "{reason}; `axocoatl sessions switch NAME` rewrites it (`axocoatl fsck --repair` sets it to `{}`)",
                layout::DEFAULT_SESSION
            ),
        });
    }
}

/// Every directory that can hold the store's temporary files.
fn temp_dirs(repo: &Repo) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![repo.root().to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("list", dir)(e)),
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
        out.push(dir);
    }
    out.sort();
    Ok(out)
}

fn check_strays(repo: &Repo, report: &mut Report) -> Result<()> {
    for dir in temp_dirs(repo)? {
        for stray in fsutil::strays_in(&dir)? {
            report.findings.push(Finding {
                kind: FindingKind::StrayTempFile,
                file: stray.path,
                offset: None,
                message: format!(
                    "{} bytes left by a process that died mid-write; the next write there or `axocoatl fsck --repair` removes it",
                    stray.len
                ),
            });
        }
    }
    Ok(())
}

/// What one segment's check found.
struct SegmentCheck {
    path: PathBuf,
    records: u64,
    base_seq: Option<u64>,
    first_seq: Option<(u64, u64)>,
    last_seq: Option<u64>,
    findings: Vec<Finding>,
}

/// Segments are checked in parallel (one per core at a time: checksums and decoding are
/// CPU-bound) and their findings merged in ledger order, with the checks of the set: no
/// segment missing, each starting where the one before it ended.
fn check_ledger(repo: &Repo, report: &mut Report) -> Result<()> {
    let ledger = repo.ledger();
    if !ledger.dir().is_dir() {
        return Ok(()); // reported by the layout check
    }
    let set = ledger.segment_set()?;
    if let Some((number, len)) = set.torn {
        report.findings.push(Finding {
            kind: FindingKind::TornTail,
            file: ledger.segment_path(number),
            offset: Some(0),
            message: format!(
                "the newest segment is {len} bytes, shorter than its header (a crash or a full disk while it was created); it holds no record and is ignored; the next append or `axocoatl fsck --repair` removes it"
            ),
        });
    }
    for e in set.problems(ledger.dir()) {
        if let Error::Corrupt { path, reason, .. } = e {
            report.findings.push(Finding {
                kind: FindingKind::MissingSegment,
                file: path,
                offset: None,
                message: reason,
            });
        }
    }
    let numbers = set.numbers;
    let newest = numbers.last().copied();
    let results = crate::ledger::parallel_map(&numbers, |number| {
        check_segment(repo, number, Some(number) != newest)
    });
    let mut prev: Option<(u64, u64)> = None; // (segment number, last sequence number)
    for (result, &number) in results.into_iter().zip(&numbers) {
        let seg = result?;
        report.segments += 1;
        report.records += seg.records;
        if let (Some((prev_number, last)), Some(base)) = (prev, seg.base_seq) {
            if prev_number + 1 == number && base != last {
                report.findings.push(Finding {
                    kind: FindingKind::StraySegment,
                    file: seg.path.clone(),
                    offset: Some(0),
                    message: format!(
                        "the segment starts after sequence number {base}, but the one before it ends at {last}: records are missing or repeated (a segment from another ledger?)"
                    ),
                });
            }
        }
        if let (Some((_, last)), Some((first, offset))) = (prev, seg.first_seq) {
            if first <= last {
                report.findings.push(Finding {
                    kind: FindingKind::CorruptSegment,
                    file: seg.path.clone(),
                    offset: Some(offset),
                    message: format!("sequence number {first} after {last}"),
                });
            }
        }
        if let Some(last) = seg.last_seq.or(seg.base_seq) {
            prev = Some((number, last));
        }
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
        base_seq: None,
        first_seq: None,
        last_seq: None,
        findings: Vec::new(),
    };
    match seg.header() {
        Err(reason) => {
            let kind = if reason.contains("file name says") {
                FindingKind::StraySegment
            } else {
                FindingKind::CorruptSegment
            };
            out.findings.push(Finding {
                kind,
                file: path,
                offset: Some(0),
                message: reason,
            });
            return Ok(out);
        }
        Ok((_, base)) => out.base_seq = Some(base),
    }
    let findings = std::cell::RefCell::new(Vec::new());
    let mut records = 0;
    let mut first_seq = None;
    let mut last_seq: Option<u64> = out.base_seq;
    seg.frames_all(
        0,
        |fr| {
            records += 1;
            if first_seq.is_none() {
                first_seq = Some((fr.seq, fr.offset));
            }
            let mut findings = findings.borrow_mut();
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
                Ok(Some(record)) => {
                    check_references(repo, &record, &path, fr.offset, &mut findings)
                }
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
        },
        |damage| {
            findings
                .borrow_mut()
                .push(damage_finding(&path, sealed, damage))
        },
    );
    out.records = records;
    out.first_seq = first_seq;
    out.last_seq = if records > 0 { last_seq } else { None };
    out.findings.extend(findings.into_inner());
    Ok(out)
}

fn damage_finding(path: &Path, sealed: bool, damage: Damage) -> Finding {
    let (kind, offset, message) = match damage {
        Damage::TornTail { offset, len } if !sealed => (
            FindingKind::TornTail,
            offset,
            format!(
                "{len} bytes of an incomplete record at the end (a crash mid-append); the next append or `axocoatl fsck --repair` truncates them"
            ),
        ),
        Damage::TornTail { offset, .. } => (
            FindingKind::CorruptSegment,
            offset,
            "sealed segment ends inside a record".into(),
        ),
        Damage::DamagedTail {
            offset,
            len,
            reason,
        } => (
            FindingKind::DamagedTail,
            offset,
            format!(
                "{reason}: the last {len} bytes are damaged and block appends; `axocoatl fsck --repair` moves them to {}/ and truncates",
                layout::LEDGER_DAMAGED_DIR
            ),
        ),
        Damage::Corrupt { offset, reason } => (FindingKind::CorruptSegment, offset, reason),
    };
    Finding {
        kind,
        file: path.to_owned(),
        offset: Some(offset),
        message,
    }
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
        R::ToolFinished(r) => hashes.extend(r.output.object.as_deref()),
        R::AttachmentAdded(r) => {
            hashes.push(&r.object);
            hashes.extend(r.text_object.as_deref());
            if let Some(text) = &r.text_object {
                check_text_object(repo, r, text, path, offset, findings);
            }
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

/// An attachment's text object decodes (UTF-8 within the cap; OCR text with a header that
/// holds together), and an image's text is OCR text. A missing or damaged object is
/// reported by the object checks.
fn check_text_object(
    repo: &Repo,
    added: &crate::ledger::record::AttachmentAdded,
    hash: &str,
    path: &std::path::Path,
    offset: u64,
    findings: &mut Vec<Finding>,
) {
    let Ok(bytes) = repo.objects().get(hash) else {
        return;
    };
    let problem = match crate::extracted::decode(&bytes) {
        Err(e) => Some(e),
        Ok(crate::extracted::Extracted::Plain(_)) if added.media_type.starts_with("image/") => {
            Some("an image's text is not OCR text".into())
        }
        Ok(_) => None,
    };
    if let Some(problem) = problem {
        findings.push(Finding {
            kind: FindingKind::BadAttachmentText,
            file: path.to_owned(),
            offset: Some(offset),
            message: format!(
                "attachment {} ({}): its text object {hash}: {problem}",
                added.reference, added.name
            ),
        });
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

fn check_automation_runs(repo: &Repo, report: &mut Report) -> Result<()> {
    let (checked, problems) = crate::automation::Runs::new(repo).check()?;
    report.run_records += checked;
    report
        .findings
        .extend(problems.into_iter().map(|(file, message)| Finding {
            kind: FindingKind::BadRunRecord,
            file,
            offset: None,
            message,
        }));
    Ok(())
}

/// Semantic memory stores count as memory files; `--repair` cuts a torn tail of their
/// records like the ledger's and moves damaged records aside.
fn check_semantic(repo: &Repo, repair: bool, report: &mut Report) -> Result<()> {
    let checked = crate::semantic::check(repo, repair)?;
    report.memory_files += checked.stores;
    let root = repo.root().to_string_lossy().into_owned();
    report.repairs.extend(
        checked
            .repairs
            .into_iter()
            .map(|r| r.replace(&format!("{root}/"), "")),
    );
    report
        .findings
        .extend(checked.problems.into_iter().map(|p| Finding {
            kind: if p.is_error {
                FindingKind::BadSemanticRecords
            } else {
                FindingKind::StaleSemanticCache
            },
            file: p.file,
            offset: p.offset,
            message: p.message,
        }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::ledger::record::Note;
    use crate::ledger::Record;
    use crate::repo::{self, OpenOptions};

    fn repo(limit: u64) -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = repo::init(dir.path()).expect("init");
        let repo = Repo::open(
            &root,
            &OpenOptions {
                segment_limit: limit,
                ..Default::default()
            },
        )
        .expect("open");
        (dir, repo)
    }

    fn notes(repo: &Repo, n: usize) {
        for i in 0..n {
            repo.ledger()
                .append(&[Record::Note(Note {
                    text: format!("record {i:03}"),
                })])
                .expect("append");
        }
    }

    fn kinds(report: &Report) -> Vec<&'static str> {
        report.findings.iter().map(|f| f.kind.as_str()).collect()
    }

    /// A pid no process can have (above the kernel's maximum).
    fn dead_pid() -> u64 {
        fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(4_194_304)
            + 1
    }

    #[test]
    fn a_short_newest_segment_is_reported_and_removed_by_repair() {
        let (_d, repo) = repo(300);
        notes(&repo, 6);
        let n = repo.ledger().segment_numbers().expect("n").len() as u64;
        let torn = repo.ledger().segment_path(n + 1);
        fs::write(&torn, b"AXOLE").expect("write");
        let report = check(&repo, false).expect("fsck opens a repository with a torn segment");
        assert_eq!(kinds(&report), vec!["torn-tail"]);
        let report = check(&repo, true).expect("repair");
        assert!(report.is_clean(), "{:?}", report.findings);
        assert!(!torn.exists());
        assert_eq!(report.records, 6);
    }

    #[test]
    fn every_damaged_record_of_a_segment_is_reported() {
        let (_d, repo) = repo(crate::ledger::DEFAULT_SEGMENT_LIMIT);
        notes(&repo, 10);
        let path = repo.ledger().segment_path(1);
        let mut bytes = fs::read(&path).expect("read");
        let frame = (bytes.len() - HEADER) / 10;
        for i in [2, 5, 7] {
            bytes[HEADER + i * frame + 20] ^= 0x01; // inside record i's payload
        }
        fs::write(&path, bytes).expect("write");
        let report = check(&repo, false).expect("fsck");
        assert_eq!(
            kinds(&report),
            vec!["corrupt-segment", "corrupt-segment", "corrupt-segment"],
            "{:?}",
            report.findings
        );
        assert_eq!(report.records, 7, "the intact records are all verified");
    }
    const HEADER: usize = crate::ledger::HEADER_LEN;

    #[test]
    fn a_missing_sealed_segment_and_a_stray_copy_are_reported() {
        let (_d, repo) = repo(300);
        notes(&repo, 30);
        let ledger = repo.ledger();
        let n = ledger.segment_numbers().expect("n").len() as u64;
        assert!(n >= 3);
        fs::copy(ledger.segment_path(1), ledger.segment_path(n + 1)).expect("copy");
        fs::remove_file(ledger.segment_path(2)).expect("rm");
        let report = check(&repo, false).expect("fsck");
        let k = kinds(&report);
        assert!(k.contains(&"missing-segment"), "{:?}", report.findings);
        assert!(k.contains(&"stray-segment"), "{:?}", report.findings);
        assert!(!report.is_clean());
    }

    #[test]
    fn a_damaged_last_record_is_moved_aside_by_repair() {
        let (_d, repo) = repo(crate::ledger::DEFAULT_SEGMENT_LIMIT);
        notes(&repo, 3);
        let path = repo.ledger().segment_path(1);
        let mut bytes = fs::read(&path).expect("read");
        let last = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4")) as usize;
        let start = bytes.len() - last;
        bytes[start + 5] ^= 0x01; // the sequence number: the frame header check fails
        fs::write(&path, &bytes).expect("write");
        // A fresh handle (as a new process would) refuses to append after it…
        let fresh = Repo::open(repo.root(), &OpenOptions::default()).expect("open");
        let err = fresh
            .ledger()
            .append(&[Record::Note(Note { text: "x".into() })])
            .expect_err("refused");
        assert!(err.to_string().contains("fsck --repair"), "{err}");
        let report = check(&fresh, false).expect("fsck");
        assert!(!report.is_clean());
        // …and the repair its message names works, so its hint cannot loop.
        let report = check(&fresh, true).expect("repair");
        assert!(report.is_clean(), "{:?}", report.findings);
        assert_eq!(fs::metadata(&path).expect("stat").len() as usize, start);
        let aside = repo.path("ledger/v1/damaged");
        assert_eq!(fs::read_dir(&aside).expect("ls").count(), 1);
        fresh
            .ledger()
            .append(&[Record::Note(Note { text: "x".into() })])
            .expect("append after repair");
        assert!(check(&fresh, false).expect("fsck").is_clean());
    }

    #[test]
    fn a_missing_or_corrupt_head_is_reported_and_repaired() {
        let (_d, repo) = repo(crate::ledger::DEFAULT_SEGMENT_LIMIT);
        let head = repo.path(layout::HEAD_FILE);
        for content in [None, Some(&b"\xff\xfe"[..]), Some(b"../../etc\n")] {
            match content {
                None => fs::remove_file(&head).expect("rm"),
                Some(c) => fs::write(&head, c).expect("write"),
            }
            let err = repo.head().expect_err("bad head");
            assert!(err.to_string().contains("HEAD"), "{err}");
            assert!(err.to_string().contains("fsck --repair"), "{err}");
            let report = check(&repo, false).expect("fsck");
            assert_eq!(kinds(&report), vec!["bad-head"]);
            assert!(check(&repo, true).expect("repair").is_clean());
            assert_eq!(repo.head().expect("head"), "main");
        }
    }

    #[test]
    fn a_missing_run_directory_is_reported_and_recreated() {
        let (_d, repo) = repo(crate::ledger::DEFAULT_SEGMENT_LIMIT);
        fs::remove_dir_all(repo.path(layout::RUN_DIR)).expect("rm");
        let report = check(&repo, false).expect("fsck");
        assert!(kinds(&report).contains(&"missing-directory"));
        // The next write recreates it.
        notes(&repo, 1);
        crate::lock::Lock::acquire(&layout::session_lock_path(repo.root(), "main"))
            .expect("session lock");
        assert!(check(&repo, false).expect("fsck").is_clean());
        fs::remove_dir_all(repo.path(layout::RUN_DIR)).expect("rm");
        assert!(check(&repo, true).expect("repair").is_clean());
        assert!(repo.path(layout::SESSION_LOCKS_DIR).is_dir());
    }

    #[test]
    fn stray_temporary_files_are_reported_and_collected() {
        let (_d, repo) = repo(crate::ledger::DEFAULT_SEGMENT_LIMIT);
        let objects = repo.path(layout::OBJECTS_DIR);
        let stray = objects.join(format!(".tmp-{}-abc123", dead_pid()));
        fs::write(&stray, vec![7u8; 1000]).expect("write");
        let live = objects.join(format!(".tmp-{}-live", std::process::id()));
        fs::write(&live, b"being written").expect("write");
        let report = check(&repo, false).expect("fsck");
        assert_eq!(kinds(&report), vec!["stray-temp-file"]);
        assert!(report.is_clean(), "a stray file is a warning");
        // The next write of an object collects it; a live writer's file stays.
        repo.objects().put(b"hello").expect("put");
        assert!(!stray.exists());
        assert!(live.exists());
        let ck = repo.path(layout::CHECKPOINTS_DIR).join("c");
        fs::create_dir_all(&ck).expect("mkdir");
        let stray = ck.join(format!(".tmp-{}-x", dead_pid()));
        fs::write(&stray, b"x").expect("write");
        let report = check(&repo, true).expect("repair");
        assert!(report.findings.is_empty(), "{:?}", report.findings);
        assert!(!stray.exists());
    }
}
