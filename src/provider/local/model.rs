//! Loading a GGUF file: weights (candle's quantized llama), tokenizer, chat template, and the
//! compute-thread setup.

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;
use candle_transformers::models::quantized_llama::{ModelWeights, MAX_SEQ_LEN};

use super::template::{ChatTemplate, CHATML};
use super::tokenizer::GgufTokenizer;

/// Files up to this size have their 4- and 5-bit tensors widened to Q8_0 at load. candle's
/// Q8_0 kernels are about three times faster than its Q4_1 ones on CPU (SmolLM2-135M: ~24 →
/// ~75 tokens/s), at twice the memory; for large models memory bandwidth dominates and the
/// copy would cost gigabytes, so they stay as they are.
const REQUANTIZE_MAX_FILE: u64 = 512 * 1024 * 1024;

pub struct Loaded {
    pub weights: ModelWeights,
    pub tokenizer: GgufTokenizer,
    pub template: ChatTemplate,
    /// Positions the model was trained for, capped at what candle's llama supports.
    pub context_length: usize,
    /// How many tensors were widened to Q8_0.
    pub requantized: usize,
    /// What this load did with the ready-to-run copy.
    pub ready: Ready,
}

/// What a load did with the ready-to-run copy of its model file: a GGUF file with the
/// widened weights, made by the first load and read by later ones. Widening is most of a
/// load (every 4- and 5-bit matrix dequantized and quantized again, and the result rewritten
/// in memory before candle reads it), and reading the widened file instead also keeps the
/// process from holding the widened weights twice while candle builds its own: a one-shot
/// `send` of SmolLM2-135M, 1.39–1.53 → 0.77–1.06 s and 435 → 319 MiB peak (`bench/local_ready.sh`;
/// `bench/runs/2026-12-03/local-ready.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    /// Read from the ready-to-run copy.
    Used(PathBuf),
    /// Widened now and the copy written for the next load (it was missing, stale or damaged).
    Made(PathBuf),
    /// Widened now, no copy kept: no ready directory, a file too large to widen, or the copy
    /// could not be written (a read-only cache is not an error).
    None,
}

/// GGUF metadata keys of a ready-to-run copy: the model file it was made from (its length,
/// times and inode, so a replaced or rewritten file makes it stale) and how many tensors
/// were widened.
const MADE_FROM_KEY: &str = "axocoatl.ready.made_from";
const WIDENED_KEY: &str = "axocoatl.ready.widened";

pub fn load(path: &Path, ready_dir: Option<&Path>) -> Result<Loaded, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    let file_len = meta.len();
    let ready = ready_dir
        .filter(|_| file_len <= REQUANTIZE_MAX_FILE)
        .map(|dir| (dir.join(ready_name(path)), made_from(&meta)));
    if let Some((ready_path, stamp)) = &ready {
        if let Some(loaded) = load_ready(ready_path, stamp) {
            return Ok(loaded);
        }
    }

    let mut reader = BufReader::new(file);
    let content = Content::read(&mut reader).map_err(|e| format!("not a GGUF file: {e}"))?;
    check_architecture(&content)?;
    if file_len > REQUANTIZE_MAX_FILE {
        return build(content, &mut reader, 0, Ready::None);
    }
    let stamp = ready.as_ref().map(|(_, s)| s.as_str());
    let (mut converted, requantized) = requantize(content, &mut reader, stamp)?;
    let kept = match &ready {
        Some((ready_path, _)) if write_ready(ready_path, converted.get_ref()).is_ok() => {
            Ready::Made(ready_path.clone())
        }
        _ => Ready::None,
    };
    let content = Content::read(&mut converted).map_err(|e| format!("re-reading weights: {e}"))?;
    build(content, &mut converted, requantized, kept)
}

/// The ready-to-run copy at `ready_path` when it is there, was made from the model file as it
/// is now (`stamp`) and reads whole; `None` otherwise (the caller widens again and rewrites it).
fn load_ready(ready_path: &Path, stamp: &str) -> Option<Loaded> {
    let mut reader = BufReader::new(File::open(ready_path).ok()?);
    let content = Content::read(&mut reader).ok()?;
    let made_from = content.metadata.get(MADE_FROM_KEY)?.to_string().ok()?;
    if made_from != stamp {
        return None;
    }
    let widened = content.metadata.get(WIDENED_KEY)?.to_u32().ok()? as usize;
    check_architecture(&content).ok()?;
    build(
        content,
        &mut reader,
        widened,
        Ready::Used(ready_path.to_path_buf()),
    )
    .ok()
}

/// Writes a ready-to-run copy whole or not at all, with the store's atomic write: a reader
/// never sees half of one, processes making it at once each put a whole one in place, and
/// the temporary file of a process killed while writing (145 MB for the default model) is
/// removed by the next write into the directory. A cache: no fsync.
fn write_ready(ready_path: &Path, bytes: &[u8]) -> Result<(), axocoatl_store::Error> {
    use axocoatl_store::fsutil;
    if let Some(dir) = ready_path.parent() {
        fsutil::create_dir_private(dir)?;
    }
    fsutil::write_atomic(ready_path, bytes, fsutil::Durability::Cache)
}

/// `<file stem>-<16 hex digits of the file's absolute path>.q8_0.gguf`: one copy per model
/// file, wherever it is, and the same name for the same file under another relative path.
fn ready_name(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let hash = blake3::hash(absolute.as_os_str().as_encoded_bytes());
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{stem}-{}.q8_0.gguf", &hash.to_hex()[..16])
}

/// How this build widens a model file; a copy made another way is stale (as the embedder's
/// ready-to-run file names its converter). Changing [`widen_all`] or what it widens to changes
/// this.
const WIDENING: &str = "q8_0/1";

/// What a copy records of the way it was made and of the model file it was made from: length,
/// change and modification times in nanoseconds, device and inode. `models fetch` installs by
/// rename (a new inode), and any write in place changes the change time, which no tool can set
/// back.
fn made_from(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!(
        "widening={WIDENING} len={} ctime={}.{:09} mtime={}.{:09} dev={} ino={}",
        meta.len(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.dev(),
        meta.ino()
    )
}

fn check_architecture(content: &Content) -> Result<(), String> {
    let arch = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if arch != "llama" {
        return Err(format!(
            "architecture `{arch}` is not supported (the local provider runs GGUF files of the \
             llama architecture with a byte-level BPE vocabulary, such as SmolLM2 and Llama 3)"
        ));
    }
    Ok(())
}

/// The model, tokenizer and chat template of a GGUF file's `content`, its tensors read from
/// `reader`.
fn build<R: std::io::Read + std::io::Seek>(
    content: Content,
    reader: &mut R,
    requantized: usize,
    ready: Ready,
) -> Result<Loaded, String> {
    let tokenizer = GgufTokenizer::from_gguf(&content)?;
    let template_source = match content.metadata.get("tokenizer.chat_template") {
        Some(v) => v.to_string().map_err(|e| e.to_string())?.clone(),
        None => CHATML.to_string(),
    };
    let template = ChatTemplate::new(
        &template_source,
        tokenizer.bos.as_deref(),
        tokenizer.eos.as_deref(),
    )?;
    let context_length = content
        .metadata
        .get("llama.context_length")
        .and_then(|v| v.to_u32().ok())
        .map_or(MAX_SEQ_LEN, |n| (n as usize).min(MAX_SEQ_LEN));
    let weights = ModelWeights::from_gguf(content, reader, &Device::Cpu)
        .map_err(|e| format!("cannot build the model: {e}"))?;
    Ok(Loaded {
        weights,
        tokenizer,
        template,
        context_length,
        requantized,
        ready,
    })
}

/// Rewrites the file in memory with its legacy and k-quant matrices widened to Q8_0 (and,
/// with `made_from`, the metadata of a ready-to-run copy).
fn requantize(
    content: Content,
    reader: &mut BufReader<File>,
    made_from: Option<&str>,
) -> Result<(Cursor<Vec<u8>>, usize), String> {
    let device = Device::Cpu;
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content
            .tensor(reader, name, &device)
            .map_err(|e| format!("tensor {name}: {e}"))?;
        tensors.push((name.as_str(), tensor));
    }
    let converted = tensors.iter().filter(|(_, t)| widens(t)).count();
    // Conversion is most of the load time and each tensor is independent: use every core.
    // Plain threads, not candle's pool, so a busy machine slows this down but cannot stall it.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_worker = tensors.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = tensors
            .chunks_mut(per_worker)
            .map(|part| scope.spawn(move || widen_all(part)))
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err("conversion panicked".into()))
        })
    })?;

    // `gguf_file::write` aligns tensors to 32 bytes; a stated alignment would mislead the reader.
    let ready_values = made_from.map(|stamp| {
        [
            (MADE_FROM_KEY, Value::String(stamp.to_owned())),
            (WIDENED_KEY, Value::U32(converted as u32)),
        ]
    });
    // In key order (the parsed metadata is a hash map), so the same file widens to the same
    // bytes in every process.
    let mut metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "general.alignment" && !k.starts_with("axocoatl."))
        .map(|(k, v)| (k.as_str(), v))
        .chain(ready_values.iter().flatten().map(|(k, v)| (*k, v)))
        .collect();
    metadata.sort_by_key(|(k, _)| *k);
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut out = Cursor::new(Vec::new());
    gguf_file::write(&mut out, &metadata, &refs).map_err(|e| format!("re-writing weights: {e}"))?;
    out.set_position(0);
    Ok((out, converted))
}

fn widens(tensor: &QTensor) -> bool {
    tensor.rank() == 2
        && matches!(
            tensor.dtype(),
            GgmlDType::Q4_0
                | GgmlDType::Q4_1
                | GgmlDType::Q5_0
                | GgmlDType::Q5_1
                | GgmlDType::Q2K
                | GgmlDType::Q3K
                | GgmlDType::Q4K
                | GgmlDType::Q5K
                | GgmlDType::Q6K
        )
}

fn widen_all(tensors: &mut [(&str, QTensor)]) -> Result<(), String> {
    let device = Device::Cpu;
    for (name, tensor) in tensors.iter_mut() {
        if widens(tensor) {
            let dense = tensor
                .dequantize(&device)
                .map_err(|e| format!("tensor {name}: {e}"))?;
            *tensor = QTensor::quantize(&dense, GgmlDType::Q8_0)
                .map_err(|e| format!("tensor {name}: {e}"))?;
        }
    }
    Ok(())
}

/// Compute threads when the configuration names none. candle's worker pool busy-waits for its
/// slowest worker, so when another process holds a core every step waits for a descheduled
/// thread; one thread never waits on another. Measured with benches/local.rs on 2 cores
/// (SmolLM2-135M, generation tokens/s): idle, 1 thread ~47 and 2 threads ~73; with both cores
/// kept busy, 1 thread ~25 but 2 threads ~4. `threads: 2` is the faster choice only on a machine
/// that is otherwise idle.
pub const DEFAULT_THREADS: usize = 1;

static THREADS: OnceLock<usize> = OnceLock::new();

/// Sets the process-wide compute thread count on first use and returns the count in force.
/// candle sizes its pool once per process from `CANDLE_NUM_THREADS`, so later loads that ask
/// for another count get the first one (the caller reports that).
pub fn init_threads(requested: Option<usize>) -> usize {
    *THREADS.get_or_init(|| {
        let from_env = std::env::var("CANDLE_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n > 0);
        let n = requested.or(from_env).unwrap_or(DEFAULT_THREADS).max(1);
        // candle reads this once, when its pool is first used (just below); the variable is the
        // only way to size the pool. Setting it races only with another thread reading the
        // environment at the same instant, which is why this runs once, at the first load.
        std::env::set_var("CANDLE_NUM_THREADS", n.to_string());
        candle_core::utils::barrier_pool().n_workers() + 1
    })
}
