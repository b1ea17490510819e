//! Plain quantizers into the k-quant formats, for making test and benchmark model files from
//! a model's weights (the engine itself never writes one).
//!
//! They choose each sub-block's scale (and minimum) from its extremes and round every value
//! to the nearest step, which is simpler and a little less accurate than the searches
//! llama.cpp's quantizers make; the bytes they write are valid blocks of each format, which
//! any GGML reader dequantizes the same way.

use super::{KQuant, QK_K};
use crate::quant::{f32_to_f16, round_f16};

/// Appends the super-blocks of `x` (a multiple of 256 values) quantized to `kind`.
pub fn quantize_row(kind: KQuant, x: &[f32], out: &mut Vec<u8>) {
    assert!(
        x.len().is_multiple_of(QK_K),
        "rows of k-quants hold 256-value blocks"
    );
    for x in x.chunks_exact(QK_K) {
        let start = out.len();
        out.resize(start + kind.block_bytes(), 0);
        let b = &mut out[start..];
        match kind {
            KQuant::Q2K => q2k(x, b),
            KQuant::Q3K => q3k(x, b),
            KQuant::Q4K => q45k(x, b, false),
            KQuant::Q5K => q45k(x, b, true),
            KQuant::Q6K => q6k(x, b),
            KQuant::Q8K => q8k(x, b),
        }
    }
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// `v / by` rounded to the nearest whole number in `lo..=hi` (0 when `by` is 0).
fn step(v: f32, by: f32, lo: f32, hi: f32) -> f32 {
    if by == 0.0 {
        0f32.clamp(lo, hi)
    } else {
        (v / by).round().clamp(lo, hi)
    }
}

/// The whole number of `by` steps that reaches `v` from zero, rounded away from zero so that
/// the scale it makes covers `v` (0 when `by` is 0), at most `hi` in magnitude.
fn cover(v: f32, by: f32, hi: f32) -> f32 {
    if by == 0.0 {
        0.0
    } else {
        ((v / by).abs().ceil() * (v / by).signum()).clamp(-hi, hi)
    }
}

/// A half-precision super-block scale of which `steps` steps reach at least `max`.
fn super_scale(max: f32, steps: f32) -> f32 {
    let d = round_f16(max / steps);
    if d * steps >= max {
        d
    } else {
        crate::quant::f16_to_f32(f32_to_f16(d) + 1)
    }
}

/// Per sub-block of `n` values, the step of `levels` levels and the minimum (as a
/// non-negative offset) that cover its values and zero.
fn ranges(x: &[f32], n: usize, levels: f32) -> Vec<(f32, f32)> {
    x.chunks_exact(n)
        .map(|s| {
            let lo = s.iter().fold(0f32, |m, &v| m.min(v));
            let hi = s.iter().fold(0f32, |m, &v| m.max(v));
            ((hi - lo) / levels, -lo)
        })
        .collect()
}

fn q2k(x: &[f32], b: &mut [u8]) {
    let r = ranges(x, 16, 3.0);
    let dmin = super_scale(r.iter().fold(0f32, |m, p| m.max(p.1)), 15.0);
    // Minimums first (covering each sub-block's lowest value), then the steps that reach
    // from there to its highest.
    let ms: Vec<f32> = r.iter().map(|p| cover(p.1, dmin, 15.0)).collect();
    let need: Vec<f32> = x
        .chunks_exact(16)
        .zip(&ms)
        .map(|(s, &m)| (s.iter().fold(0f32, |a, &v| a.max(v)) + dmin * m) / 3.0)
        .collect();
    let d = super_scale(need.iter().fold(0f32, |a, &v| a.max(v)), 15.0);
    for (s, (&need, &m)) in need.iter().zip(&ms).enumerate() {
        let sc = cover(need, d, 15.0);
        b[s] = sc as u8 | ((m as u8) << 4);
        let (dl, ml) = (d * sc, dmin * m);
        // Sub-block s: half s / 8, shift pair (s % 8) / 2, bytes 16 · (s % 2) of that half.
        let (half, j, part) = (s / 8, (s % 8) / 2, s % 2);
        for l in 0..16 {
            let q = step(x[s * 16 + l] + ml, dl, 0.0, 3.0) as u8;
            b[16 + half * 32 + part * 16 + l] |= q << (2 * j);
        }
    }
    b[80..82].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    b[82..84].copy_from_slice(&f32_to_f16(dmin).to_le_bytes());
}

fn q3k(x: &[f32], b: &mut [u8]) {
    // Signed scales that put each sub-block's value of the largest magnitude at -4, the end
    // of the range -4..=3 that has no counterpart.
    let scales: Vec<f32> = x
        .chunks_exact(16)
        .map(|s| {
            -s.iter()
                .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
                / 4.0
        })
        .collect();
    let d = super_scale(scales.iter().fold(0f32, |m, &v| m.max(v.abs())), 31.0);
    for (s, &scale) in scales.iter().enumerate() {
        let sc = cover(scale, d, 31.0);
        let stored = (sc as i32 + 32) as u8;
        if s < 8 {
            b[96 + s] |= stored & 0xf;
        } else {
            b[96 + s - 8] |= (stored & 0xf) << 4;
        }
        b[96 + 8 + s % 4] |= (stored >> 4) << (2 * (s / 4));
        let dl = d * sc;
        let (half, j, part) = (s / 8, (s % 8) / 2, s % 2);
        for l in 0..16 {
            let u = (step(x[s * 16 + l], dl, -4.0, 3.0) + 4.0) as u8;
            b[32 + half * 32 + part * 16 + l] |= (u & 3) << (2 * j);
            b[part * 16 + l] |= (u >> 2) << (half * 4 + j);
        }
    }
    b[108..110].copy_from_slice(&f32_to_f16(d).to_le_bytes());
}

fn q45k(x: &[f32], b: &mut [u8], five: bool) {
    let top = if five { 31.0 } else { 15.0 };
    let r = ranges(x, 32, top);
    let dmin = super_scale(r.iter().fold(0f32, |m, p| m.max(p.1)), 63.0);
    let ms: Vec<f32> = r.iter().map(|p| cover(p.1, dmin, 63.0)).collect();
    let need: Vec<f32> = x
        .chunks_exact(32)
        .zip(&ms)
        .map(|(s, &m)| (s.iter().fold(0f32, |a, &v| a.max(v)) + dmin * m) / top)
        .collect();
    let d = super_scale(need.iter().fold(0f32, |a, &v| a.max(v)), 63.0);
    b[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    b[2..4].copy_from_slice(&f32_to_f16(dmin).to_le_bytes());
    let qs_at = if five { 48 } else { 16 };
    for (s, (&need, &m)) in need.iter().zip(&ms).enumerate() {
        let (sc, m) = (cover(need, d, 63.0) as u8, m as u8);
        if s < 4 {
            b[4 + s] |= sc;
            b[4 + s + 4] |= m;
        } else {
            b[4 + s + 4] |= (sc & 0xf) | ((m & 0xf) << 4);
            b[4 + s - 4] |= (sc >> 4) << 6;
            b[4 + s] |= (m >> 4) << 6;
        }
        let (dl, ml) = (d * f32::from(sc), dmin * f32::from(m));
        let (pair, part) = (s / 2, s % 2);
        for l in 0..32 {
            let q = step(x[s * 32 + l] + ml, dl, 0.0, top) as u8;
            b[qs_at + pair * 32 + l] |= (q & 0xf) << (4 * part);
            if five {
                b[16 + l] |= (q >> 4) << s;
            }
        }
    }
}

fn q6k(x: &[f32], b: &mut [u8]) {
    let scales: Vec<f32> = x.chunks_exact(16).map(|s| amax(s) / 31.0).collect();
    let d = super_scale(scales.iter().fold(0f32, |m, &v| m.max(v)), 127.0);
    let mut q = [0u8; QK_K];
    for (s, &scale) in scales.iter().enumerate() {
        let sc = cover(scale, d, 127.0);
        b[192 + s] = sc as i8 as u8;
        for l in 0..16 {
            q[s * 16 + l] = (step(x[s * 16 + l], d * sc, -32.0, 31.0) + 32.0) as u8;
        }
    }
    for half in 0..2 {
        let q = &q[half * 128..][..128];
        for l in 0..32 {
            b[half * 64 + l] = (q[l] & 0xf) | ((q[l + 64] & 0xf) << 4);
            b[half * 64 + l + 32] = (q[l + 32] & 0xf) | ((q[l + 96] & 0xf) << 4);
            b[128 + half * 32 + l] = (q[l] >> 4)
                | ((q[l + 32] >> 4) << 2)
                | ((q[l + 64] >> 4) << 4)
                | ((q[l + 96] >> 4) << 6);
        }
    }
    b[208..210].copy_from_slice(&f32_to_f16(d).to_le_bytes());
}

fn q8k(x: &[f32], b: &mut [u8]) {
    let d = amax(x) / 127.0;
    b[0..4].copy_from_slice(&d.to_le_bytes());
    for (k, chunk) in x.chunks_exact(16).enumerate() {
        let mut sum = 0i16;
        for (l, &v) in chunk.iter().enumerate() {
            let q = step(v, d, -127.0, 127.0) as i8;
            b[4 + k * 16 + l] = q as u8;
            sum += i16::from(q);
        }
        b[260 + 2 * k..262 + 2 * k].copy_from_slice(&sum.to_le_bytes());
    }
}
