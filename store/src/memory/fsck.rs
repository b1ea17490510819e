//! `fsck` of the memory files: core memory (parses, version) and the daily log (every line
//! parses, lives in the file of its date, the file ends in a whole line). Block limits come
//! from the configuration, which the store does not read: [`check_limits`] takes them from
//! the runtime.

use std::path::Path;

use crate::findings::{Finding, FindingKind, Report};
use crate::layout::{runtime_id, CORE_MEMORY_DIR, DAILY_LOG_DIR, SHARED_CORE_DIR};
use crate::memory::core;
use crate::memory::daily_log::{self, Line};
use crate::{Error, Repo, Result};

/// Checks every memory file. With `repair`, a daily log's torn last line (a crash
/// mid-append) is cut off (and counted in `repaired_bytes`) instead of reported.
pub fn check(repo: &Repo, repair: bool, report: &mut Report) -> Result<()> {
    check_core(repo, report);
    check_daily_log(repo, repair, report)
}

fn finding(file: &Path, offset: Option<u64>, message: String) -> Finding {
    Finding {
        kind: FindingKind::BadMemoryFile,
        file: file.to_owned(),
        offset,
        message,
    }
}

/// The `.json` files of a core memory directory.
fn core_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    files.sort();
    files
}

fn check_core(repo: &Repo, report: &mut Report) {
    for dir in [CORE_MEMORY_DIR, SHARED_CORE_DIR] {
        for path in core_files(&repo.path(dir)) {
            report.memory_files += 1;
            let message = match core::read_file(&path) {
                Ok(_) => continue,
                Err(Error::BadMemoryFile { reason, .. }) => format!(
                    "{reason}; edits of its blocks are refused until it is fixed or removed"
                ),
                Err(Error::MemoryVersion { found, .. }) => format!(
                    "written by a newer axocoatl (version {found}); this build neither reads nor rewrites it: upgrade axocoatl"
                ),
                Err(e) => format!("cannot be read: {e}"),
            };
            report.findings.push(finding(&path, None, message));
        }
    }
}

fn check_daily_log(repo: &Repo, repair: bool, report: &mut Report) -> Result<()> {
    let root = repo.path(DAILY_LOG_DIR);
    let Ok(components) = std::fs::read_dir(&root) else {
        return Ok(());
    };
    let mut dirs: Vec<_> = components.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !dir.is_dir() || runtime_id(name).is_none() {
            report.findings.push(finding(
                &dir,
                None,
                "not the daily log directory of an Agent id".into(),
            ));
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            report
                .findings
                .push(finding(&dir, None, "cannot be listed".into()));
            continue;
        };
        let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            let date = file
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .filter(|d| daily_log::is_date(d));
            let Some(date) = date else {
                report.findings.push(finding(
                    &file,
                    None,
                    "not a daily log file (YYYY-MM-DD.jsonl)".into(),
                ));
                continue;
            };
            report.memory_files += 1;
            check_log_file(&file, date, repair, report)?;
        }
    }
    Ok(())
}

fn check_log_file(file: &Path, date: &str, repair: bool, report: &mut Report) -> Result<()> {
    let mut torn = None;
    let mut findings = Vec::new();
    daily_log::read_lines(file, |n, offset, line| match line {
        Line::Record(r) if r.date() != date => findings.push(finding(
            file,
            Some(offset),
            format!("line {n}: a record of {} in the file of {date}", r.date()),
        )),
        Line::Record(_) => {}
        Line::Damaged(reason) => {
            findings.push(finding(file, Some(offset), format!("line {n} {reason}")))
        }
        Line::Torn => torn = Some((n, offset)),
    })?;
    report.findings.extend(findings);
    if let Some((n, offset)) = torn {
        if repair {
            report.repaired_bytes += daily_log::repair_torn(file)?;
        } else {
            report.findings.push(finding(
                file,
                Some(offset),
                format!("line {n} is incomplete (a crash mid-append); the next append or `axocoatl fsck --repair` removes it"),
            ));
        }
    }
    Ok(())
}

/// Core blocks longer than their configured limit. `limit_of(Some(agent_id), label)` is the
/// limit of an Agent's own block, `limit_of(None, label)` the limit of a shared block (the
/// smallest among the Agents declaring it); `None` when the configuration does not declare
/// that block.
pub fn check_limits(
    repo: &Repo,
    limit_of: &dyn Fn(Option<&str>, &str) -> Option<u32>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for (dir, shared) in [(CORE_MEMORY_DIR, false), (SHARED_CORE_DIR, true)] {
        for path in core_files(&repo.path(dir)) {
            let Ok(file) = core::read_file(&path) else {
                continue; // reported by `check`
            };
            let owner = if shared {
                None
            } else {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                match runtime_id(stem) {
                    Some(id) => Some(id),
                    None => continue,
                }
            };
            for (label, value) in &file.blocks {
                let Some(limit) = limit_of(owner.as_deref(), label) else {
                    continue;
                };
                let chars = value.chars().count();
                if chars > limit as usize {
                    out.push(Finding {
                        kind: FindingKind::OversizeMemoryBlock,
                        file: path.clone(),
                        offset: None,
                        message: format!(
                            "block {label:?} holds {chars} characters; its limit is {limit}: only the first {limit} are injected; shorten it with `axocoatl memory core set {label} ...`"
                        ),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{CoreMemory, DailyLog, LogKind, LogRecord};
    use std::io::Write;

    #[test]
    fn findings_name_the_file_and_repair_cuts_a_torn_line() {
        let (_dir, repo) = crate::repo::scratch();
        let m = CoreMemory::new(&repo, "main:a");
        m.set("human", false, "0123456789").expect("set");
        m.set("team", true, "ok").expect("set");
        let log = DailyLog::new(&repo, "main:a");
        log.append(&[LogRecord::new(5, LogKind::Request, None, "x")])
            .expect("append");
        let mut report = Report::default();
        check(&repo, false, &mut report).expect("check");
        assert_eq!((report.memory_files, report.findings.len()), (3, 0));

        let limits = |owner: Option<&str>, label: &str| match (owner, label) {
            (Some("main:a"), "human") => Some(4),
            (None, "team") => Some(10),
            _ => None,
        };
        let over = check_limits(&repo, &limits);
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].message.contains("limit is 4"), "{over:?}");

        let file = log.file_of("1970-01-01");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .expect("open");
        f.write_all(b"nope\n{\"par").expect("damage");
        std::fs::write(m.path_for("team", true), r#"{"version":9,"blocks":{}}"#).expect("w");
        let mut report = Report::default();
        check(&repo, false, &mut report).expect("check");
        let msgs: Vec<String> = report
            .findings
            .iter()
            .map(|f| format!("{} {:?} {}", f.file.display(), f.offset, f.message))
            .collect();
        assert_eq!(msgs.len(), 3, "{msgs:#?}");
        assert!(msgs[0].contains("team.json") && msgs[0].contains("version 9"));
        assert!(msgs[1].contains("1970-01-01.jsonl") && msgs[1].contains("line 2 does not parse"));
        assert!(msgs[2].contains("line 3 is incomplete"), "{msgs:#?}");
        let mut report = Report::default();
        check(&repo, true, &mut report).expect("check");
        assert_eq!((report.findings.len(), report.repaired_bytes), (2, 5));
    }
}
