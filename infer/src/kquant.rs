//! GGML's k-quant block formats (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K): super-blocks of 256
//! values whose sub-blocks of 16 or 32 values have their own scales (and minimums), those
//! scales quantized again against one or two half-precision numbers per super-block.
//!
//! The kernels do not run these blocks as they are. At load, a Q4_K matrix is repacked into
//! Q4_1 blocks (a Q4_K sub-block of 32 values is exactly a Q4_1 block: its scale `d · sc` and
//! minimum `-dmin · m` rounded to half precision, its 4-bit values unchanged), which costs 5
//! bits a weight instead of 4.5 and runs on the Q4_1 kernel; every other k-quant matrix is
//! widened to f32 a row at a time and quantized to Q8_0 (8.5 bits a weight), as F16 is.
//!
//! The dequantizers follow GGML's reference ones (`dequantize_row_q*_K`) value for value, in
//! the same order of operations, so that they give the same f32 bits.

use crate::quant::{f32_to_f16, read_f16, BLOCK};

pub mod encode;

/// Values per super-block.
pub const QK_K: usize = 256;

/// The k-quant types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KQuant {
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
}

impl KQuant {
    pub const ALL: [KQuant; 6] = [
        KQuant::Q2K,
        KQuant::Q3K,
        KQuant::Q4K,
        KQuant::Q5K,
        KQuant::Q6K,
        KQuant::Q8K,
    ];

    pub fn from_ggml(kind: u32) -> Option<KQuant> {
        Some(match kind {
            10 => KQuant::Q2K,
            11 => KQuant::Q3K,
            12 => KQuant::Q4K,
            13 => KQuant::Q5K,
            14 => KQuant::Q6K,
            15 => KQuant::Q8K,
            _ => return None,
        })
    }

    /// The GGML type number.
    pub fn ggml(self) -> u32 {
        match self {
            KQuant::Q2K => 10,
            KQuant::Q3K => 11,
            KQuant::Q4K => 12,
            KQuant::Q5K => 13,
            KQuant::Q6K => 14,
            KQuant::Q8K => 15,
        }
    }

    /// Bytes of one super-block of 256 values.
    pub fn block_bytes(self) -> usize {
        match self {
            KQuant::Q2K => 84,  // 16 scale/min bytes, 64 of 2-bit values, d, dmin
            KQuant::Q3K => 110, // 32 of high bits, 64 of 2-bit values, 12 of scales, d
            KQuant::Q4K => 144, // d, dmin, 12 of scales and minimums, 128 of 4-bit values
            KQuant::Q5K => 176, // the same, and 32 bytes of fifth bits
            KQuant::Q6K => 210, // 128 of low 4 bits, 64 of high 2 bits, 16 scales, d
            KQuant::Q8K => 292, // an f32 scale, 256 signed bytes, 16 sums of 16
        }
    }
}

/// A super-block whose scales the engine cannot use: one that is not a finite number, or
/// values beyond what half precision (the scale of the blocks the kernels run) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// The super-block's index in its row.
    pub index: usize,
}

/// The largest value a Q8_0 block holds: 127 times the largest half-precision scale.
pub const MAX_Q8_0: f32 = 127.0 * 65_504.0;

/// The 6-bit scale and minimum of sub-block `j` (0..8) of a Q4_K or Q5_K super-block, packed
/// in its 12 scale bytes (GGML's `get_scale_min_k4`).
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 16 signed 6-bit scales of a Q3_K super-block, from its 12 scale bytes.
fn scales_q3k(q: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { q[j] & 0xf } else { q[j - 8] >> 4 };
        let high = (q[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// Dequantizes one super-block (`block` of [`KQuant::block_bytes`] bytes) into 256 values.
pub fn dequantize_block(kind: KQuant, b: &[u8], y: &mut [f32]) {
    let y = &mut y[..QK_K];
    match kind {
        KQuant::Q2K => q2k(b, y),
        KQuant::Q3K => q3k(b, y),
        KQuant::Q4K | KQuant::Q5K => q45k(kind == KQuant::Q5K, b, y),
        KQuant::Q6K => q6k(b, y),
        KQuant::Q8K => {
            let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            for (o, &q) in y.iter_mut().zip(&b[4..4 + QK_K]) {
                *o = d * f32::from(q as i8);
            }
        }
    }
}

fn q2k(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[..16], &b[16..80]);
    let (d, min) = (read_f16(b, 80), read_f16(b, 82));
    let mut is = 0;
    for (half, q) in qs.chunks_exact(32).enumerate() {
        for j in 0..4 {
            let shift = 2 * j;
            for part in 0..2 {
                let sc = scales[is];
                is += 1;
                let dl = d * f32::from(sc & 0xf);
                let ml = min * f32::from(sc >> 4);
                let at = half * 128 + j * 32 + part * 16;
                for l in 0..16 {
                    y[at + l] = dl * f32::from((q[part * 16 + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

fn q3k(b: &[u8], y: &mut [f32]) {
    let (hm, qs) = (&b[..32], &b[32..96]);
    let scales = scales_q3k(&b[96..108]);
    let d = read_f16(b, 108);
    let mut is = 0;
    for (half, q) in qs.chunks_exact(32).enumerate() {
        for j in 0..4 {
            let shift = 2 * j;
            let m = 1u8 << (half * 4 + j);
            for part in 0..2 {
                let dl = d * f32::from(scales[is]);
                is += 1;
                let at = half * 128 + j * 32 + part * 16;
                for l in 0..16 {
                    let low = ((q[part * 16 + l] >> shift) & 3) as i8;
                    let high = if hm[part * 16 + l] & m != 0 { 0 } else { 4 };
                    y[at + l] = dl * f32::from(low - high);
                }
            }
        }
    }
}

fn q45k(five: bool, b: &[u8], y: &mut [f32]) {
    let (d, min) = (read_f16(b, 0), read_f16(b, 2));
    let scales = &b[4..16];
    let (qh, qs) = if five {
        (&b[16..48], &b[48..176])
    } else {
        (&[][..], &b[16..144])
    };
    for (pair, ql) in qs.chunks_exact(32).enumerate() {
        for part in 0..2 {
            let (sc, m) = scale_min_k4(2 * pair + part, scales);
            let (d1, m1) = (d * f32::from(sc), min * f32::from(m));
            let bit = 1u8 << (2 * pair + part);
            let out = &mut y[pair * 64 + part * 32..][..32];
            for (l, o) in out.iter_mut().enumerate() {
                let mut q = (ql[l] >> (4 * part)) & 0xf;
                if five && qh[l] & bit != 0 {
                    q += 16;
                }
                *o = d1 * f32::from(q) - m1;
            }
        }
    }
}

fn q6k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 208);
    for half in 0..2 {
        let ql = &b[half * 64..][..64];
        let qh = &b[128 + half * 32..][..32];
        let sc = &b[192 + half * 8..][..8];
        let y = &mut y[half * 128..][..128];
        for l in 0..32 {
            let is = l / 16;
            let q = [
                (ql[l] & 0xf) | ((qh[l] & 3) << 4),
                (ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4),
                (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
            ];
            for (k, q) in q.into_iter().enumerate() {
                let s = f32::from(sc[is + 2 * k] as i8);
                y[l + 32 * k] = d * s * f32::from(q as i8 - 32);
            }
        }
    }
}

/// Whether a super-block's own scales are finite numbers (a hostile file's may be NaN or
/// infinite half or single precision values).
fn scales_finite(kind: KQuant, b: &[u8]) -> bool {
    match kind {
        KQuant::Q2K => read_f16(b, 80).is_finite() && read_f16(b, 82).is_finite(),
        KQuant::Q3K => read_f16(b, 108).is_finite(),
        KQuant::Q4K | KQuant::Q5K => read_f16(b, 0).is_finite() && read_f16(b, 2).is_finite(),
        KQuant::Q6K => read_f16(b, 208).is_finite(),
        KQuant::Q8K => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite(),
    }
}

/// Dequantizes a row of super-blocks into `out` (as many values as the row holds), refusing
/// a super-block whose scales are not finite or whose values a Q8_0 block cannot hold.
pub fn dequantize_row(kind: KQuant, row: &[u8], out: &mut [f32]) -> Result<(), BadBlock> {
    let blocks = row.chunks_exact(kind.block_bytes());
    for (index, (b, y)) in blocks.zip(out.chunks_exact_mut(QK_K)).enumerate() {
        if !scales_finite(kind, b) {
            return Err(BadBlock { index });
        }
        dequantize_block(kind, b, y);
        if !y.iter().all(|v| v.abs() <= MAX_Q8_0) {
            return Err(BadBlock { index });
        }
    }
    Ok(())
}

/// Repacks a row of Q4_K super-blocks as Q4_1 blocks (8 of 20 bytes for each super-block),
/// appended to `out`. Each Q4_1 block's scale and minimum are the sub-block's `d · sc` and
/// `-dmin · m` rounded to half precision (a relative change of at most 2^-11 of the scale);
/// the 4-bit values are the same. A super-block whose scale or minimum is not finite in half
/// precision is refused.
pub fn q4k_to_q4_1(row: &[u8], out: &mut Vec<u8>) -> Result<(), BadBlock> {
    for (index, b) in row.chunks_exact(KQuant::Q4K.block_bytes()).enumerate() {
        let (d, min) = (read_f16(b, 0), read_f16(b, 2));
        let (scales, qs) = (&b[4..16], &b[16..144]);
        for (pair, ql) in qs.chunks_exact(32).enumerate() {
            for part in 0..2 {
                let (sc, m) = scale_min_k4(2 * pair + part, scales);
                let scale = f32_to_f16(d * f32::from(sc));
                let minimum = f32_to_f16(-(min * f32::from(m)));
                // 0x7c00 in the exponent bits: infinite or NaN in half precision.
                if scale & 0x7c00 == 0x7c00 || minimum & 0x7c00 == 0x7c00 {
                    return Err(BadBlock { index });
                }
                out.extend_from_slice(&scale.to_le_bytes());
                out.extend_from_slice(&minimum.to_le_bytes());
                let shift = 4 * part;
                for i in 0..BLOCK / 2 {
                    let lo = (ql[i] >> shift) & 0xf;
                    let hi = (ql[i + BLOCK / 2] >> shift) & 0xf;
                    out.push(lo | (hi << 4));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
