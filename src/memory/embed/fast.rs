//! The ready-to-run file beside the model files: found and checked, or made.
//!
//! `model.axoemb` (see `axocoatl_embed::format`) is made from `model.onnx` and
//! `tokenizer.json` by [`super::convert`] when `axocoatl models fetch` installs them (or the
//! first time a process needs the embedder, if they were put in place otherwise), then only
//! mapped. Its header carries a fingerprint of the two files it was made from (their
//! sizes and modification times) and of this converter's version: when either file is
//! replaced, or the file is damaged, it is made again. A new file is installed only after its
//! vectors agree with the reference engine's (tract over the ONNX file) on a few probe
//! texts; otherwise the reference engine stays in use, and the reason is kept.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use axocoatl_embed::format::{self, SOURCE_LEN};
use axocoatl_embed::Model;

use super::{convert, onnx, ModelFiles};

/// Bumped whenever the converter writes a different file from the same model files.
const CONVERTER: &str = "axocoatl ready-to-run embedder, converter 1";

/// The fast path's vectors must have at least this cosine with the reference engine's on
/// every probe text, or the file is not installed.
pub const MIN_COSINE: f32 = 0.999;

/// Texts both engines embed before a new file is installed: words in and out of the
/// vocabulary, punctuation, accents, CJK, an added token, a long text.
const PROBES: &[&str] = &[
    "The cat sat on the mat.",
    "Quarterly revenue grew by twelve percent; margins did not.",
    "Ünïcode façade — naïve café, 東京 and emoji 🙂 survive tokenization.",
    "x",
    "Restart the nginx reverse-proxy on orca-02 after rotating TLS certs [SEP] then check",
    "The build server in the basement runs Debian and has two cores; its disk does a few \
     hundred fsyncs per second, and the nightly job that rebuilds the search index starts at \
     three in the morning, after the backups, unless the previous run is still going, in \
     which case it waits for a lock held in /var/run and writes a line to the journal.",
];

/// What the ready-to-run file is made from: the two model files' sizes and modification
/// times, and the converter's version.
pub(super) fn fingerprint(files: &ModelFiles) -> std::io::Result<[u8; SOURCE_LEN]> {
    let mut h = blake3::Hasher::new();
    h.update(CONVERTER.as_bytes());
    for path in [&files.model, &files.tokenizer] {
        let meta = std::fs::metadata(path)?;
        let mtime = meta
            .modified()?
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        h.update(&meta.len().to_le_bytes());
        h.update(&mtime.to_le_bytes());
    }
    Ok(*h.finalize().as_bytes())
}

/// The ready-to-run file of `files`, when it is there, checks, and was made from them.
pub(super) fn open(files: &ModelFiles) -> Result<Model, String> {
    let model = Model::open(&files.ready).map_err(|e| match e {
        axocoatl_embed::Error::Io { .. } if !files.ready.exists() => {
            format!("{} is not made yet", files.ready.display())
        }
        e => e.to_string(),
    })?;
    let want = fingerprint(files).map_err(|e| {
        format!(
            "the model files {} is made from cannot be read: {e}",
            files.ready.display()
        )
    })?;
    if model.source() != &want {
        return Err(format!(
            "{} was made from other model files",
            files.ready.display()
        ));
    }
    Ok(model)
}

/// Holds `<ready file>.lock` while one process makes the file; others wait, then find it.
/// `None` when the lock cannot be had (a read-only directory): the file cannot be written
/// there either, and making it will say why.
fn lock(ready: &Path) -> Option<File> {
    let path = PathBuf::from(format!("{}.lock", ready.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    file.lock().ok()?;
    Some(file)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The lowest cosine between the two engines' vectors of the probe texts, and its text.
fn agreement(fast: &Model, reference: &onnx::Model) -> Result<(f32, &'static str), String> {
    let ours = fast.embed(PROBES).map_err(|e| e.to_string())?;
    let theirs = reference.embed(PROBES).map_err(|e| e.to_string())?;
    Ok(ours
        .iter()
        .zip(&theirs)
        .zip(PROBES)
        .map(|((a, b), text)| (cosine(a, b), *text))
        .fold((f32::INFINITY, ""), |m, x| if x.0 < m.0 { x } else { m }))
}

/// Opens the ready-to-run file of `files`, making it first when it is missing, stale or
/// damaged (then `true` comes with it). `reference` loads the reference engine, which the
/// converter needs (to check the new file). `Err` says why the fast path cannot be used.
pub(super) fn open_or_make<'r>(
    files: &ModelFiles,
    reference: &dyn Fn() -> Result<&'r onnx::Model, String>,
) -> Result<(Model, bool), String> {
    let why = match open(files) {
        Ok(m) => return Ok((m, false)),
        Err(why) => why,
    };
    let _lock = lock(&files.ready);
    // Another process may have made it while this one waited for the lock.
    if let Ok(m) = open(files) {
        return Ok((m, false));
    }
    make(files, reference()?)
        .map(|m| (m, true))
        .map_err(|e| format!("{why}, and making it failed: {e}"))
}

/// Converts the model files, checks the result against `reference` and installs it.
pub(super) fn make(files: &ModelFiles, reference: &onnx::Model) -> Result<Model, String> {
    let source = fingerprint(files).map_err(|e| e.to_string())?;
    let parts = convert::parts(files).map_err(|e| e.to_string())?;
    // One name, under the lock: a file left by a process killed while writing it is
    // overwritten by the next one.
    let fresh = PathBuf::from(format!("{}.new", files.ready.display()));
    format::write(&fresh, &parts, &source).map_err(|e| e.to_string())?;
    drop(parts);
    let checked = Model::open(&fresh)
        .map_err(|e| e.to_string())
        .and_then(|m| agreement(&m, reference));
    let (cos, text) = match checked {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(&fresh);
            return Err(e);
        }
    };
    if cos < MIN_COSINE {
        let _ = std::fs::remove_file(&fresh);
        return Err(format!(
            "the converted model disagrees with the reference engine (cosine {cos:.5} on {text:?})"
        ));
    }
    std::fs::rename(&fresh, &files.ready).map_err(|e| {
        let _ = std::fs::remove_file(&fresh);
        format!("cannot install {}: {e}", files.ready.display())
    })?;
    Model::open(&files.ready).map_err(|e| e.to_string())
}
