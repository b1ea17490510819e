//! `export --format sqlite`: the ledger's records applied to SQLite tables.
//!
//! A new file is written under a temporary name beside the target (no journal, no
//! syncing while it fills), its full-text index built in one pass, then synced and renamed
//! into place: a reader never sees half an export, and a crash leaves only the temporary
//! file. The file is left in WAL mode, so Datasette reads it while a refresh writes.
//!
//! A refresh opens the existing file, checks in one `BEGIN IMMEDIATE` transaction that it
//! is an export of this repository, of the same scope and of a schema this build writes,
//! and that the record it stopped after is still the same record of the ledger; then it
//! applies the records past it and moves the recorded position, and commits. Two refreshes
//! at once run one after the other (SQLite's write lock); a refresh killed midway leaves
//! the file as it was.

mod apply;
mod schema;

use std::path::{Path, PathBuf};

use axocoatl_store::ledger::{Damaged, Entry, Position};
use axocoatl_store::Repo;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use super::{fingerprint, SqliteReport};
use crate::error::{Result, RuntimeError};

pub use schema::SCHEMA_VERSION;

/// What `_meta.exporter` says of every export this program writes.
const EXPORTER: &str = "axocoatl";

/// How long a refresh waits for another one writing the same file.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where an export stopped: the last record it read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub seq: u64,
    pub pos: Position,
    pub next: Position,
    pub fingerprint: String,
}

impl Mark {
    fn of(e: &Entry) -> Mark {
        Mark {
            seq: e.seq,
            pos: e.pos,
            next: e.next,
            fingerprint: fingerprint(e),
        }
    }
}

/// The identity of a repository's history: the fingerprint of its first turn's begin
/// record (a fresh random turn id, the request and the time) and where that record is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Identity {
    fingerprint: String,
    pos: Position,
}

/// The `_meta` of an export.
#[derive(Debug, Default)]
struct Meta {
    /// Empty while the ledger had no turn.
    repository: Identity,
    scope: String,
    mark: Mark,
    /// Records earlier exports into the file could not read.
    damaged: u64,
    /// The version of the file's tables (an older one is upgraded by the refresh).
    schema: u32,
}

pub(crate) fn sql_error(path: &Path) -> impl Fn(rusqlite::Error) -> RuntimeError + '_ {
    move |e| RuntimeError::io("write the SQLite export", path)(std::io::Error::other(e.to_string()))
}

pub fn export(repo: &Repo, session: Option<&str>, path: &Path) -> Result<SqliteReport> {
    let scope = session.map_or_else(|| "all".to_owned(), |s| format!("session:{s}"));
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(RuntimeError::Refused {
            message: format!("{} is not a regular file", path.display()),
            hint: "give -o a file name for the database".into(),
        }),
        Ok(m) if m.len() > 0 => refresh(repo, session, path, &scope),
        _ => create(repo, session, path, &scope, &repository_identity(repo)),
    }
}

/// The identity of the repository's history (empty while it has no turn).
fn repository_identity(repo: &Repo) -> Identity {
    repo.ledger()
        .scan_all()
        .flatten()
        .find(|e| e.kind == axocoatl_store::ledger::Kind::TurnBegun.tag())
        .map(|e| Identity {
            fingerprint: fingerprint(&e),
            pos: e.pos,
        })
        .unwrap_or_default()
}

/// The record at `pos`, read alone: one frame of its segment decoded and verified, however
/// long the ledger (a refresh checks two records this way before it reads what is new).
fn record_at(repo: &Repo, pos: Position) -> Option<Entry> {
    let seg = repo.ledger().load_segment(pos.segment).ok()?;
    let frame = seg.frame_at(pos.offset).ok()??;
    seg.checked_entry(&frame).ok()
}

fn create(
    repo: &Repo,
    session: Option<&str>,
    path: &Path,
    scope: &str,
    repository: &Identity,
) -> Result<SqliteReport> {
    let tmp = temp_path(path);
    let _ = std::fs::remove_file(&tmp);
    let result = fill_new(repo, session, &tmp, path, scope, repository);
    match result {
        Ok(report) => {
            publish(&tmp, path)?;
            Ok(report)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export.db".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn fill_new(
    repo: &Repo,
    session: Option<&str>,
    tmp: &Path,
    path: &Path,
    scope: &str,
    repository: &Identity,
) -> Result<SqliteReport> {
    let err = sql_error(path);
    let mut conn = Connection::open(tmp).map_err(&err)?;
    // A file nobody sees until it is renamed into place needs no journal and no syncs:
    // it is synced once, whole, before the rename.
    // The keys are declared for the tools that read the file (Datasette links them) but not
    // enforced while it is written: rows arrive in ledger order, and a record whose
    // referent a damaged ledger lost must not fail the whole export.
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA application_id = {}; PRAGMA user_version = {SCHEMA_VERSION};",
        schema::APPLICATION_ID
    ))
    .map_err(&err)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Exclusive)
        .map_err(&err)?;
    tx.execute_batch(schema::TABLES).map_err(&err)?;
    tx.execute_batch(schema::APPROVALS_TABLE).map_err(&err)?;
    let meta = Meta {
        repository: repository.clone(),
        scope: scope.to_owned(),
        mark: Mark::default(),
        damaged: 0,
        schema: SCHEMA_VERSION,
    };
    let mut report = apply_from(repo, session, &tx, &meta, path)?;
    report.created = true;
    tx.execute_batch(schema::FTS_TABLE).map_err(&err)?;
    tx.execute_batch(schema::FTS_REBUILD).map_err(&err)?;
    tx.execute_batch(schema::FTS_TRIGGERS).map_err(&err)?;
    tx.commit().map_err(&err)?;
    // Refreshes and readers (Datasette) then share the file without blocking each other.
    conn.execute_batch("PRAGMA journal_mode = WAL;")
        .map_err(&err)?;
    conn.close().map_err(|(_, e)| err(e))?;
    Ok(report)
}

/// Syncs the finished file and renames it into place (then syncs the directory).
fn publish(tmp: &Path, path: &Path) -> Result<()> {
    let sync = |p: &Path| -> std::io::Result<()> { std::fs::File::open(p)?.sync_all() };
    sync(tmp).map_err(RuntimeError::io("sync", tmp))?;
    std::fs::rename(tmp, path).map_err(RuntimeError::io("rename into place", path))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    sync(dir).map_err(RuntimeError::io("sync", dir))
}

fn refresh(repo: &Repo, session: Option<&str>, path: &Path, scope: &str) -> Result<SqliteReport> {
    let err = sql_error(path);
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(&err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
    check_identity(&conn, path)?;
    conn.execute_batch("PRAGMA foreign_keys = OFF;")
        .map_err(&err)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    // Read under the write lock: a refresh that waited for another sees where that one
    // stopped.
    let mut meta = read_meta(&tx, path)?;
    check_meta(&meta, path, scope)?;
    if meta.repository.fingerprint.is_empty() {
        meta.repository = repository_identity(repo);
    } else if record_at(repo, meta.repository.pos)
        .is_none_or(|e| fingerprint(&e) != meta.repository.fingerprint)
    {
        return Err(RuntimeError::Refused {
            message: format!(
                "{} is an export of another repository (its first turn is not this one's)",
                path.display()
            ),
            hint: "export this repository into a new file".into(),
        });
    }
    upgrade(&tx, meta.schema, path)?;
    let report = apply_from(repo, session, &tx, &meta, path)?;
    tx.commit().map_err(&err)?;
    Ok(report)
}

/// Brings the tables of a file of version `from` up to [`SCHEMA_VERSION`], in the
/// refresh's transaction (a failed refresh leaves the file as it was).
fn upgrade(tx: &Transaction<'_>, from: u32, path: &Path) -> Result<()> {
    let err = sql_error(path);
    for (_, step) in schema::UPGRADES.iter().filter(|(n, _)| *n >= from) {
        tx.execute_batch(step).map_err(&err)?;
    }
    if from < SCHEMA_VERSION {
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))
            .map_err(&err)?;
    }
    Ok(())
}

/// The refusal of an export that cannot be written (a read-only file or directory).
fn read_only(path: &Path, why: &str) -> RuntimeError {
    RuntimeError::Refused {
        message: format!("{} cannot be refreshed: {why}", path.display()),
        hint: "make the file and its directory writable (SQLite writes its -wal and -shm files beside it), or give -o a new file name".into(),
    }
}

/// Whether a SQLite error says the file (or its directory) cannot be written or opened
/// for writing, rather than that it is not an export.
fn is_unwritable(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(
            rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
        )
    )
}

/// Refuses a file that is not an export at all before anything is written to it, and one
/// that cannot be written, saying which.
fn check_identity(conn: &Connection, path: &Path) -> Result<()> {
    if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
        return Err(read_only(path, "the file is read-only"));
    }
    let not_ours = |e: rusqlite::Error| {
        if is_unwritable(&e) {
            return read_only(path, &e.to_string());
        }
        RuntimeError::Refused {
            message: format!("{} is not an axocoatl export: {e}", path.display()),
            hint: "give -o a new file name (an export is refreshed only into a file it wrote)"
                .into(),
        }
    };
    let id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(not_ours)?;
    if id != schema::APPLICATION_ID {
        return Err(RuntimeError::Refused {
            message: format!(
                "{} is not an axocoatl export: its SQLite application id is {id:#x}, not {:#x}",
                path.display(),
                schema::APPLICATION_ID
            ),
            hint: "give -o a new file name (an export is refreshed only into a file it wrote)"
                .into(),
        });
    }
    Ok(())
}

fn read_meta(tx: &Transaction<'_>, path: &Path) -> Result<Meta> {
    let refused = |why: String| RuntimeError::Refused {
        message: format!("{} is not an axocoatl export: {why}", path.display()),
        hint: "give -o a new file name (an export is refreshed only into a file it wrote)".into(),
    };
    let mut stmt = tx
        .prepare("SELECT key, value FROM _meta")
        .map_err(|e| refused(e.to_string()))?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(|e| refused(e.to_string()))?;
    let mut map = std::collections::HashMap::new();
    for row in rows {
        let (k, v) = row.map_err(|e| refused(e.to_string()))?;
        map.insert(k, v);
    }
    let get = |k: &str| map.get(k).cloned().unwrap_or_default();
    if get("exporter") != EXPORTER {
        return Err(refused("its _meta table names no axocoatl exporter".into()));
    }
    let version: u32 = get("schema_version").parse().unwrap_or(u32::MAX);
    if version > SCHEMA_VERSION {
        return Err(RuntimeError::Refused {
            message: format!(
                "{} was written by a newer exporter (schema {version}; this axocoatl writes schema {SCHEMA_VERSION})",
                path.display()
            ),
            hint: "refresh it with the axocoatl that wrote it, or export into a new file".into(),
        });
    }
    if version == 0 {
        return Err(refused("its _meta table names no schema version".into()));
    }
    let num = |k: &str| get(k).parse::<u64>().unwrap_or(0);
    Ok(Meta {
        repository: Identity {
            fingerprint: get("repository"),
            pos: Position {
                segment: num("repository_segment"),
                offset: num("repository_offset"),
            },
        },
        scope: get("scope"),
        mark: Mark {
            seq: num("ledger_seq"),
            pos: Position {
                segment: num("ledger_record_segment"),
                offset: num("ledger_record_offset"),
            },
            next: Position {
                segment: num("ledger_segment"),
                offset: num("ledger_offset"),
            },
            fingerprint: get("ledger_record"),
        },
        damaged: num("damaged_records"),
        schema: version,
    })
}

fn check_meta(meta: &Meta, path: &Path, scope: &str) -> Result<()> {
    if meta.scope != scope {
        let says = |s: &str| match s.strip_prefix("session:") {
            Some(name) => format!("session {name}"),
            None => "every session (--all)".to_owned(),
        };
        return Err(RuntimeError::Refused {
            message: format!(
                "{} holds {}, not {}",
                path.display(),
                says(&meta.scope),
                says(scope)
            ),
            hint: format!(
                "refresh it with the same scope ({}), or export into a new file",
                match meta.scope.strip_prefix("session:") {
                    Some(name) => format!("-s {name}"),
                    None => "--all".into(),
                }
            )
            .into(),
        });
    }
    Ok(())
}

/// Applies every record past `meta`'s position and records the new position.
fn apply_from(
    repo: &Repo,
    session: Option<&str>,
    tx: &Transaction<'_>,
    meta: &Meta,
    path: &Path,
) -> Result<SqliteReport> {
    let scan = if meta.mark.seq == 0 {
        repo.ledger().scan_all()
    } else {
        verify_mark(repo, &meta.mark, path)?;
        repo.ledger().scan(meta.mark.next)
    };
    let mut damaged: Vec<Damaged> = Vec::new();
    let mut applier = apply::Applier::new(repo, tx, session, path)?;
    if meta.schema < schema::REFOLDED && meta.mark.seq > 0 {
        // Coordinators' turns of an older file counted their workers' usage as their own.
        applier.rewrite(schema::COORDINATOR_TURNS, meta.mark.seq)?;
    }
    let mut mark = meta.mark.clone();
    let mut records = 0u64;
    for item in scan {
        match item {
            Ok(entry) => {
                records += 1;
                mark = Mark::of(&entry);
                applier.apply(entry)?;
            }
            Err(e) => damaged.push(Damaged::from(e)),
        }
    }
    let mut report = applier.finish()?;
    apply::automation_runs(repo, tx, session, path)?;
    write_meta(tx, path, meta, &mark, meta.damaged + damaged.len() as u64)?;
    report.records = records;
    report.seq = mark.seq;
    report.damaged = damaged;
    Ok(report)
}

/// The record an export stopped after must still be that record, where it was.
fn verify_mark(repo: &Repo, mark: &Mark, path: &Path) -> Result<()> {
    match record_at(repo, mark.pos) {
        Some(e) if e.seq == mark.seq && fingerprint(&e) == mark.fingerprint => Ok(()),
        found => Err(RuntimeError::Refused {
            message: format!(
                "{} stopped after ledger record {} at segment {} byte {}, and the ledger {}",
                path.display(),
                mark.seq,
                mark.pos.segment,
                mark.pos.offset,
                match found {
                    Some(e) =>
                        format!("now holds another record there (sequence number {})", e.seq),
                    None => "no longer holds that record".to_owned(),
                }
            ),
            hint: crate::error::Next::ExportAnew,
        }),
    }
}

fn write_meta(
    tx: &Transaction<'_>,
    path: &Path,
    meta: &Meta,
    mark: &Mark,
    damaged: u64,
) -> Result<()> {
    let err = sql_error(path);
    let pairs: Vec<(&str, String)> = vec![
        ("exporter", EXPORTER.to_owned()),
        ("schema_version", SCHEMA_VERSION.to_string()),
        ("axocoatl_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("repository", meta.repository.fingerprint.clone()),
        (
            "repository_segment",
            meta.repository.pos.segment.to_string(),
        ),
        ("repository_offset", meta.repository.pos.offset.to_string()),
        ("scope", meta.scope.clone()),
        ("ledger_seq", mark.seq.to_string()),
        ("ledger_record", mark.fingerprint.clone()),
        ("ledger_record_segment", mark.pos.segment.to_string()),
        ("ledger_record_offset", mark.pos.offset.to_string()),
        ("ledger_segment", mark.next.segment.to_string()),
        ("ledger_offset", mark.next.offset.to_string()),
        ("exported_at", crate::clock::rfc3339(crate::clock::now())),
        ("damaged_records", damaged.to_string()),
    ];
    let mut stmt = tx
        .prepare("INSERT INTO _meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        .map_err(&err)?;
    for (k, v) in pairs {
        stmt.execute((k, v)).map_err(&err)?;
    }
    Ok(())
}
