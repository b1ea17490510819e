//! `y = (x · W) ⊙ scale + bias` for f32 rows `x` and int8 weights `W` (`inputs × outputs`,
//! row-major, one scale per output column): the encoder's every matrix product.
//!
//! Each kernel walks blocks of up to `MR` rows and `NR` columns: for each input `k` it
//! converts the `NR` weights of row `k` from int8 to f32 in registers, once, and adds their
//! products with the block's `MR` inputs to `MR × NR` accumulators held in registers. The
//! weights are read from the mapped file as they are: nothing is unpacked or copied per
//! process. x86-64 CPUs with AVX-512 or AVX2 get kernels written with their intrinsics; any
//! other CPU a plain loop the compiler vectorizes.

use crate::format::{LinearRef, COLUMN_BLOCK};

/// The instruction sets the kernels are written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Avx512,
    Avx2,
    Generic,
}

impl Isa {
    /// The best one this CPU has.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2;
            }
        }
        Isa::Generic
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Generic => "generic",
        }
    }
}

/// `y[r, o] = Σ_i x[r, i] · W[i, o] · scale[o] + bias[o]` for `rows` rows. `isa` must be
/// what [`Isa::detect`] returned (or [`Isa::Generic`]).
#[inline(always)]
pub fn linear(isa: Isa, x: &[f32], rows: usize, m: &LinearRef<'_>, y: &mut [f32]) {
    check(x, rows, m, y.len());
    // SAFETY: the shapes are checked; `y` is borrowed whole for the call.
    #[expect(
        unsafe_code,
        reason = "the column kernel over a checked, borrowed output"
    )]
    unsafe {
        linear_columns(isa, x, rows, m, y.as_mut_ptr(), 0..m.outputs)
    }
}

/// Panics unless `x` (`rows × inputs`), an output of `y_len` values and `m` fit together.
#[inline(always)]
pub fn check(x: &[f32], rows: usize, m: &LinearRef<'_>, y_len: usize) {
    let (k, n) = (m.inputs, m.outputs);
    assert!(
        x.len() >= rows * k
            && y_len >= rows * n
            && m.weights.len() == k * n
            && m.scales.len() == n
            && m.bias.len() == n
            && n % COLUMN_BLOCK == 0,
        "linear: shapes disagree"
    );
}

/// [`linear`] for the output columns `cols` only: the other columns of `y` are neither read
/// nor written, so threads may fill disjoint column ranges of one output at once. Each
/// output value is computed by the same instructions in the same order whatever the range,
/// so a product split by columns equals the whole product bit for bit.
///
/// # Safety
/// The shapes must have passed [`check`], `cols` must lie within `0..m.outputs` with both
/// ends multiples of [`COLUMN_BLOCK`], `y` must point to `rows × m.outputs` values that
/// nothing else reads or writes in `cols` during the call, and `isa` must be what
/// [`Isa::detect`] returned (or [`Isa::Generic`]).
#[inline(always)]
#[expect(
    unsafe_code,
    reason = "writes through a raw pointer the caller vouches for"
)]
pub unsafe fn linear_columns(
    isa: Isa,
    x: &[f32],
    rows: usize,
    m: &LinearRef<'_>,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    debug_assert!(
        cols.start.is_multiple_of(COLUMN_BLOCK)
            && cols.end.is_multiple_of(COLUMN_BLOCK)
            && cols.end <= m.outputs
    );
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => x86::linear_avx512(x, rows, m, y, cols),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => x86::linear_avx2(x, rows, m, y, cols),
        _ => linear_generic(x, rows, m, y, cols),
    }
}

/// Splits `rows` into `blocks` nearly equal blocks of at most `mr`: 14 rows with `mr` 12
/// are 7 + 7, not 12 + 2 (a thin block uses the registers poorly).
#[inline(always)]
fn block_rows(rows: usize, mr: usize) -> usize {
    let blocks = rows.div_ceil(mr);
    rows.div_ceil(blocks.max(1))
}

/// The portable kernel: blocks of 4 rows × 16 columns, written for the compiler to
/// vectorize.
///
/// # Safety
/// As [`linear_columns`].
#[expect(
    unsafe_code,
    reason = "writes through a raw pointer the caller vouches for"
)]
unsafe fn linear_generic(
    x: &[f32],
    rows: usize,
    m: &LinearRef<'_>,
    y: *mut f32,
    cols: std::ops::Range<usize>,
) {
    const MR: usize = 4;
    const NR: usize = 16;
    let (k, n) = (m.inputs, m.outputs);
    let mut r0 = 0;
    while r0 < rows {
        let mr = (rows - r0).min(MR);
        for n0 in cols.clone().step_by(NR) {
            let mut acc = [[0f32; NR]; MR];
            for kk in 0..k {
                let w = &m.weights[kk * n + n0..kk * n + n0 + NR];
                let mut wf = [0f32; NR];
                for (f, &b) in wf.iter_mut().zip(w) {
                    *f = f32::from(b as i8);
                }
                for (i, a) in acc.iter_mut().enumerate().take(mr) {
                    let xi = x[(r0 + i) * k + kk];
                    for (a, f) in a.iter_mut().zip(&wf) {
                        *a += xi * f;
                    }
                }
            }
            for (i, a) in acc.iter().enumerate().take(mr) {
                // SAFETY: row `r0 + i` < `rows` and columns `n0..n0 + NR` lie in `cols`.
                let out = std::slice::from_raw_parts_mut(y.add((r0 + i) * n + n0), NR);
                for (j, o) in out.iter_mut().enumerate() {
                    *o = a[j] * m.scales[n0 + j] + m.bias[n0 + j];
                }
            }
        }
        r0 += mr;
    }
}

#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "SIMD intrinsics over raw pointers whose bounds `linear` checked"
)]
mod x86 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::block_rows;
    use crate::format::LinearRef;

    /// One block of `M` rows (starting at `x`, stride `k`) × 32 columns from `n0`, for AVX-512.
    #[inline(always)]
    #[expect(
        clippy::too_many_arguments,
        reason = "a kernel's pointers and strides, spelled out"
    )]
    unsafe fn block512<const M: usize>(
        x: *const f32,
        k: usize,
        w: *const u8,
        n: usize,
        n0: usize,
        scale: *const f32,
        bias: *const f32,
        y: *mut f32,
    ) {
        let mut acc0 = [_mm512_setzero_ps(); M];
        let mut acc1 = [_mm512_setzero_ps(); M];
        let mut wp = w.add(n0);
        for kk in 0..k {
            let lo = _mm_loadu_si128(wp as *const __m128i);
            let hi = _mm_loadu_si128(wp.add(16) as *const __m128i);
            let w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
            let w1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
            for i in 0..M {
                let xv = _mm512_set1_ps(*x.add(i * k + kk));
                acc0[i] = _mm512_fmadd_ps(xv, w0, acc0[i]);
                acc1[i] = _mm512_fmadd_ps(xv, w1, acc1[i]);
            }
            wp = wp.add(n);
        }
        let s0 = _mm512_loadu_ps(scale.add(n0));
        let s1 = _mm512_loadu_ps(scale.add(n0 + 16));
        let b0 = _mm512_loadu_ps(bias.add(n0));
        let b1 = _mm512_loadu_ps(bias.add(n0 + 16));
        for i in 0..M {
            let out = y.add(i * n + n0);
            _mm512_storeu_ps(out, _mm512_fmadd_ps(acc0[i], s0, b0));
            _mm512_storeu_ps(out.add(16), _mm512_fmadd_ps(acc1[i], s1, b1));
        }
    }

    #[target_feature(enable = "avx512f")]
    pub unsafe fn linear_avx512(
        x: &[f32],
        rows: usize,
        m: &LinearRef<'_>,
        y: *mut f32,
        cols: Range<usize>,
    ) {
        const MR: usize = 12;
        let (k, n) = (m.inputs, m.outputs);
        let mr = block_rows(rows, MR);
        let (w, s, b) = (m.weights.as_ptr(), m.scales.as_ptr(), m.bias.as_ptr());
        // Row blocks outside, column blocks inside: the block's rows stay in cache while
        // the weights (at most 590 KB here) stream from L2.
        let mut r0 = 0;
        while r0 < rows {
            let this = (rows - r0).min(mr);
            let xp = x.as_ptr().add(r0 * k);
            let yp = y.add(r0 * n);
            for n0 in cols.clone().step_by(32) {
                match this {
                    12 => block512::<12>(xp, k, w, n, n0, s, b, yp),
                    11 => block512::<11>(xp, k, w, n, n0, s, b, yp),
                    10 => block512::<10>(xp, k, w, n, n0, s, b, yp),
                    9 => block512::<9>(xp, k, w, n, n0, s, b, yp),
                    8 => block512::<8>(xp, k, w, n, n0, s, b, yp),
                    7 => block512::<7>(xp, k, w, n, n0, s, b, yp),
                    6 => block512::<6>(xp, k, w, n, n0, s, b, yp),
                    5 => block512::<5>(xp, k, w, n, n0, s, b, yp),
                    4 => block512::<4>(xp, k, w, n, n0, s, b, yp),
                    3 => block512::<3>(xp, k, w, n, n0, s, b, yp),
                    2 => block512::<2>(xp, k, w, n, n0, s, b, yp),
                    _ => block512::<1>(xp, k, w, n, n0, s, b, yp),
                }
            }
            r0 += this;
        }
    }

    /// One block of `M` rows × 16 columns from `n0`, for AVX2.
    #[inline(always)]
    #[expect(
        clippy::too_many_arguments,
        reason = "a kernel's pointers and strides, spelled out"
    )]
    unsafe fn block256<const M: usize>(
        x: *const f32,
        k: usize,
        w: *const u8,
        n: usize,
        n0: usize,
        scale: *const f32,
        bias: *const f32,
        y: *mut f32,
    ) {
        let mut acc0 = [_mm256_setzero_ps(); M];
        let mut acc1 = [_mm256_setzero_ps(); M];
        let mut wp = w.add(n0);
        for kk in 0..k {
            let lo = _mm_loadl_epi64(wp as *const __m128i);
            let hi = _mm_loadl_epi64(wp.add(8) as *const __m128i);
            let w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
            let w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
            for i in 0..M {
                let xv = _mm256_set1_ps(*x.add(i * k + kk));
                acc0[i] = _mm256_fmadd_ps(xv, w0, acc0[i]);
                acc1[i] = _mm256_fmadd_ps(xv, w1, acc1[i]);
            }
            wp = wp.add(n);
        }
        let s0 = _mm256_loadu_ps(scale.add(n0));
        let s1 = _mm256_loadu_ps(scale.add(n0 + 8));
        let b0 = _mm256_loadu_ps(bias.add(n0));
        let b1 = _mm256_loadu_ps(bias.add(n0 + 8));
        for i in 0..M {
            let out = y.add(i * n + n0);
            _mm256_storeu_ps(out, _mm256_fmadd_ps(acc0[i], s0, b0));
            _mm256_storeu_ps(out.add(8), _mm256_fmadd_ps(acc1[i], s1, b1));
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn linear_avx2(
        x: &[f32],
        rows: usize,
        m: &LinearRef<'_>,
        y: *mut f32,
        cols: Range<usize>,
    ) {
        const MR: usize = 6;
        let (k, n) = (m.inputs, m.outputs);
        let mr = block_rows(rows, MR);
        let (w, s, b) = (m.weights.as_ptr(), m.scales.as_ptr(), m.bias.as_ptr());
        let mut r0 = 0;
        while r0 < rows {
            let this = (rows - r0).min(mr);
            let xp = x.as_ptr().add(r0 * k);
            let yp = y.add(r0 * n);
            for n0 in cols.clone().step_by(16) {
                match this {
                    6 => block256::<6>(xp, k, w, n, n0, s, b, yp),
                    5 => block256::<5>(xp, k, w, n, n0, s, b, yp),
                    4 => block256::<4>(xp, k, w, n, n0, s, b, yp),
                    3 => block256::<3>(xp, k, w, n, n0, s, b, yp),
                    2 => block256::<2>(xp, k, w, n, n0, s, b, yp),
                    _ => block256::<1>(xp, k, w, n, n0, s, b, yp),
                }
            }
            r0 += this;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product in f64, straight from the definition.
    fn reference(x: &[f32], rows: usize, m: &LinearRef<'_>) -> Vec<f64> {
        let (k, n) = (m.inputs, m.outputs);
        let mut y = vec![0f64; rows * n];
        for r in 0..rows {
            for o in 0..n {
                let dot: f64 = (0..k)
                    .map(|i| f64::from(x[r * k + i]) * f64::from(m.weights[i * n + o] as i8))
                    .sum();
                y[r * n + o] = dot * f64::from(m.scales[o]) + f64::from(m.bias[o]);
            }
        }
        y
    }

    #[test]
    fn every_kernel_computes_the_product() {
        let (k, n) = (40, 64);
        let weights: Vec<u8> = (0..k * n).map(|i| (i * 37 % 251) as u8).collect();
        let scales: Vec<f32> = (0..n).map(|o| 0.01 + o as f32 * 1e-4).collect();
        let bias: Vec<f32> = (0..n).map(|o| o as f32 * 0.1 - 3.0).collect();
        let m = LinearRef {
            weights: &weights,
            inputs: k,
            outputs: n,
            scales: &scales,
            bias: &bias,
        };
        let mut isas = vec![Isa::Generic];
        if Isa::detect() != Isa::Generic {
            isas.push(Isa::detect());
        }
        #[cfg(target_arch = "x86_64")]
        if Isa::detect() == Isa::Avx512 {
            isas.push(Isa::Avx2);
        }
        for rows in [1, 2, 5, 7, 13, 14, 25, 30] {
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                .collect();
            let want = reference(&x, rows, &m);
            for &isa in &isas {
                let mut y = vec![f32::NAN; rows * n];
                linear(isa, &x, rows, &m, &mut y);
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(*a) - b).abs() < 1e-4 * b.abs().max(1.0),
                        "{isa:?}, {rows} rows, value {i}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn blocks_are_balanced() {
        assert_eq!(block_rows(14, 12), 7);
        assert_eq!(block_rows(12, 12), 12);
        assert_eq!(block_rows(25, 12), 9);
        assert_eq!(block_rows(1, 12), 1);
        assert_eq!(block_rows(7, 6), 4);
    }
}
