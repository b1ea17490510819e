//! Matrices stored in a format the kernels do not run, converted once at load: Q4_K repacked
//! as Q4_1 (the same 4-bit values, 5 bits a weight), every other format widened to f32 a row
//! at a time and quantized to Q8_0 (8.5 bits a weight).
//!
//! The converted matrix is held in memory (the mapped file's copy is no longer read), so a
//! file of such matrices costs that memory on top of the page cache: see docs/providers.md.

use crate::gguf;
use crate::kquant::{self, KQuant};
use crate::quant::{self, Kind, BLOCK};
use crate::Error;

/// What the engine does with each format, for messages.
pub const FORMATS: &str = "it runs Q4_0, Q4_1 and Q8_0 as they are, repacks Q4_K as Q4_1, \
                           and widens F32, F16, BF16, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, Q6_K and \
                           Q8_K to Q8_0";

/// Converts the matrix `name` (`rows` rows of `cols` values, GGML type `ggml`, its bytes
/// `bytes` as the file has them) to a format the kernels run.
pub fn convert(
    name: &str,
    ggml: u32,
    bytes: &[u8],
    rows: usize,
    cols: usize,
) -> Result<(Kind, Vec<u8>), Error> {
    if gguf::type_size(ggml).is_none() {
        return Err(Error::Unsupported(format!(
            "tensor {name} is stored as {}, which the local provider does not run yet ({FORMATS}); \
             a GGUF file of one of those types of the same model works",
            gguf::type_name(ggml)
        )));
    }
    let row_bytes = bytes.len() / rows.max(1);
    let bad = |row: usize, block: usize| {
        Error::Format(format!(
            "tensor {name}: row {row}, block {block} holds a scale that is not a finite number or \
             values beyond ±{:.0} (what a Q8_0 block holds): the file is damaged",
            kquant::MAX_Q8_0
        ))
    };
    if ggml == KQuant::Q4K.ggml() {
        let mut out = Vec::with_capacity(rows * cols / BLOCK * Kind::Q4_1.block_bytes());
        for (r, row) in bytes.chunks_exact(row_bytes).enumerate() {
            kquant::q4k_to_q4_1(row, &mut out).map_err(|b| bad(r, b.index))?;
        }
        return Ok((Kind::Q4_1, out));
    }
    let mut out = Vec::with_capacity(rows * cols / BLOCK * Kind::Q8_0.block_bytes());
    let mut values = vec![0f32; cols];
    for (r, row) in bytes.chunks_exact(row_bytes).enumerate() {
        match KQuant::from_ggml(ggml) {
            Some(k) => kquant::dequantize_row(k, row, &mut values).map_err(|b| bad(r, b.index))?,
            None => {
                quant::widen_row(ggml, row, &mut values);
                if let Some(i) = values
                    .iter()
                    .position(|v| v.abs() > kquant::MAX_Q8_0 || v.is_nan())
                {
                    let per_block = gguf::type_size(ggml).map_or(1, |(_, n)| n);
                    return Err(bad(r, i / per_block));
                }
            }
        }
        quant::quantize_q8_0(&values, &mut out);
    }
    Ok((Kind::Q8_0, out))
}
