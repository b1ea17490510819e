//! Loading a GGUF file: the engine's model (the file mapped, its weights run as they are),
//! the tokenizer and the chat template from the same file, and the stale ready-to-run copies
//! earlier builds kept.

use std::path::{Path, PathBuf};

use axocoatl_infer::Model;

use super::template::{ChatTemplate, CHATML};
use super::tokenizer::GgufTokenizer;

pub struct Loaded {
    pub model: Model,
    pub tokenizer: GgufTokenizer,
    pub template: ChatTemplate,
    /// What identifies the model file for a saved attention cache: its header (metadata and
    /// tensor directory) and the file's identity on disk (device, inode, length, change and
    /// modification times), so a file replaced or rewritten in place makes every saved cache
    /// stale.
    pub fingerprint: [u8; 32],
    /// Ready-to-run copies of earlier builds that this load removed.
    pub removed: Vec<PathBuf>,
}

/// Everything the provider runs or trusts comes from the model file itself: the weights (the
/// file is mapped and its 4- and 8-bit matrices run as they are), the tokenizer and the chat
/// template. Nothing is read from a copy, so no copy can be planted or damaged into it.
pub fn load(path: &Path, ready_dir: Option<&Path>) -> Result<Loaded, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open: {e}"))?;
    let model = Model::open(path).map_err(|e| e.to_string())?;
    let gguf = model.gguf();
    let tokenizer = GgufTokenizer::from_gguf(gguf)?;
    let template_source = match gguf.get("tokenizer.chat_template") {
        Some(v) => v
            .as_str()
            .ok_or("metadata `tokenizer.chat_template` is not a string")?
            .to_string(),
        None => CHATML.to_string(),
    };
    let template = ChatTemplate::new(
        &template_source,
        tokenizer.bos.as_deref(),
        tokenizer.eos.as_deref(),
    )?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(model.header_bytes());
    hasher.update(stat_stamp(&meta).as_bytes());
    let fingerprint = *hasher.finalize().as_bytes();
    let removed = ready_dir.map(remove_stale_copies).unwrap_or_default();
    Ok(Loaded {
        model,
        tokenizer,
        template,
        fingerprint,
        removed,
    })
}

fn stat_stamp(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "len={} ctime={}.{:09} mtime={}.{:09} dev={} ino={}",
        meta.len(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.dev(),
        meta.ino()
    )
}

/// A file an earlier build kept in the ready directory: a ready-to-run copy (its 4- and 5-bit
/// weights widened to Q8_0, 145 MB for the default model) or the temporary file of a writer
/// killed while making one.
fn is_ready_copy(name: &str) -> bool {
    name.ends_with(".q8_0.gguf") || name.starts_with(".tmp-")
}

/// The ready-to-run copies in `dir` and their sizes. This build runs model files as they are
/// and keeps no copy, so every one found is stale (made by an earlier build).
pub fn ready_copies(dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, u64)> = entries
        .flatten()
        .filter(|e| is_ready_copy(&e.file_name().to_string_lossy()))
        .filter_map(|e| {
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            meta.is_file().then(|| (e.path(), meta.len()))
        })
        .collect();
    out.sort();
    out
}

/// Removes the stale ready-to-run copies in `dir` (see [`ready_copies`]); what could not be
/// removed (another user's directory, a read-only cache) is left, and read by nothing.
pub fn remove_stale_copies(dir: &Path) -> Vec<PathBuf> {
    ready_copies(dir)
        .into_iter()
        .filter(|(path, _)| std::fs::remove_file(path).is_ok())
        .map(|(path, _)| path)
        .collect()
}

/// Compute threads when the configuration names none. With more, a prompt's passes share
/// their tokens between threads, each taking whole groups of tokens through whole layers and
/// meeting the others about once per layer, asleep while it waits (never spinning), so on a
/// machine whose cores are busy 2 threads read a prompt no slower than 1; and a generated
/// token's steps share their rows and heads, on 2 idle cores 1.6-1.8× one thread's speed,
/// each token the way its recent tokens were faster, so that busy cores, where sharing is the
/// slower way, do not slow it down (BENCHMARKS.md). 1 stays the default: a process takes more
/// of the machine's cores only when its configuration says so.
pub const DEFAULT_THREADS: usize = 1;
