//! Loading a GGUF file: weights (candle's quantized llama), tokenizer, chat template, and the
//! compute-thread setup.

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::Path;
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
}

pub fn load(path: &Path) -> Result<Loaded, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let file_len = file.metadata().map_err(|e| e.to_string())?.len();
    let mut reader = BufReader::new(file);
    let content = Content::read(&mut reader).map_err(|e| format!("not a GGUF file: {e}"))?;

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

    let device = Device::Cpu;
    let (weights, requantized) = if file_len <= REQUANTIZE_MAX_FILE {
        let (mut converted, requantized) = requantize(content, &mut reader)?;
        let content =
            Content::read(&mut converted).map_err(|e| format!("re-reading weights: {e}"))?;
        let weights = ModelWeights::from_gguf(content, &mut converted, &device)
            .map_err(|e| format!("cannot build the model: {e}"))?;
        (weights, requantized)
    } else {
        let weights = ModelWeights::from_gguf(content, &mut reader, &device)
            .map_err(|e| format!("cannot build the model: {e}"))?;
        (weights, 0)
    };

    Ok(Loaded {
        weights,
        tokenizer,
        template,
        context_length,
        requantized,
    })
}

/// Rewrites the file in memory with its legacy and k-quant matrices widened to Q8_0.
fn requantize(
    content: Content,
    reader: &mut BufReader<File>,
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
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "general.alignment")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
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
