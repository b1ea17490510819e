//! The dot products of a forward pass: int8 blocks of weights against int8 blocks of
//! activations (every matrix product), and f32 queries against the f16 attention cache.
//!
//! Every kernel has a plain Rust version, which any CPU runs and which the property tests
//! hold the others to, and an AVX2 one (with FMA and F16C) as GGML writes it: `maddubs` of
//! unsigned by signed bytes, `madd` to 32-bit sums, one fused multiply-add of the block's
//! two scales per block. A matrix product takes the weight blocks of one row once and runs
//! them against up to eight activation rows, so a prompt read in batches reads each weight
//! from memory once per eight tokens rather than once per token.

use crate::quant::{read_f16, ActRow, Acts, Kind, BLOCK};

/// Which kernels run. An [`Avx2`] exists only where [`Isa::detect`] found every feature the
/// AVX2 kernels are compiled with, so holding one is the proof the intrinsics need.
#[derive(Clone, Copy, Debug)]
pub enum Isa {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx2(Avx2),
}

/// The token of a CPU with AVX2, FMA and F16C (the `target_feature`s of the x86 kernels).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct Avx2 {
    _detected: (),
}

impl Isa {
    /// The fastest kernels this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            return Isa::Avx2(Avx2 { _detected: () });
        }
        Isa::Plain
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Plain => "plain",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2(_) => "avx2",
        }
    }
}

/// A weight matrix of `rows` rows of `cols` values in one of the block formats.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub kind: Kind,
    pub rows: usize,
    pub cols: usize,
    pub bytes: &'a [u8],
}

impl MatRef<'_> {
    pub fn row_bytes(&self) -> usize {
        self.cols / BLOCK * self.kind.block_bytes()
    }

    pub fn row(&self, r: usize) -> &[u8] {
        let n = self.row_bytes();
        &self.bytes[r * n..(r + 1) * n]
    }

    /// Rows `first..first + len` as a matrix of their own.
    pub fn rows_from(&self, first: usize, len: usize) -> MatRef<'_> {
        let n = self.row_bytes();
        MatRef {
            rows: len,
            bytes: &self.bytes[first * n..(first + len) * n],
            ..*self
        }
    }
}

/// Activation rows a kernel runs against each weight row it reads: a prompt read in
/// batches reads each weight from memory once per this many tokens.
pub const GROUP: usize = 8;

/// `out[t · w.rows + r] = w[r] · x[t]` for every row `r` of `w` and every row `t` of `x`.
/// Each value is computed by the same instructions in the same order however many rows `x`
/// has: a row gives the same values in any batch (the forward pass relies on it to give the
/// same results whatever its threads and batches).
pub fn matmul(isa: Isa, w: &MatRef<'_>, x: &Acts, out: &mut [f32]) {
    assert!(
        x.cols == w.cols
            && w.cols.is_multiple_of(BLOCK)
            && w.bytes.len() == w.rows * w.row_bytes()
            && out.len() >= x.rows * w.rows,
        "matmul: shapes disagree"
    );
    matmul_rows(isa, w, x, 0, &mut out[..x.rows * w.rows]);
}

/// The rows of `x` from `first` on, as many as `out` has room for.
fn matmul_rows(isa: Isa, w: &MatRef<'_>, x: &Acts, first: usize, out: &mut [f32]) {
    match isa {
        Isa::Plain => matmul_with(w, x, first, out, dot_plain),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2(token) => x86::matmul(token, w, x, first, out),
    }
}

/// The loop of a matrix product over a kernel `dot(kind, weight row, activation rows, sums)`.
#[inline(always)]
fn matmul_with(
    w: &MatRef<'_>,
    x: &Acts,
    first: usize,
    out: &mut [f32],
    dot: impl Fn(Kind, &[u8], &[ActRow<'_>], &mut [f32]),
) {
    let count = out.len() / w.rows;
    let mut sums = [0f32; GROUP];
    let mut t = 0;
    while t < count {
        let n = (count - t).min(GROUP);
        let rows: [ActRow<'_>; GROUP] = std::array::from_fn(|i| x.row(first + t + i.min(n - 1)));
        let out = &mut out[t * w.rows..(t + n) * w.rows];
        for r in 0..w.rows {
            dot(w.kind, w.row(r), &rows[..n], &mut sums[..n]);
            for (i, s) in sums[..n].iter().enumerate() {
                out[i * w.rows + r] = *s;
            }
        }
        t += n;
    }
}

/// The plain kernel: per block, the integer dot product, scaled by both scales, added in
/// block order (and for Q4_1, the minimum times the activations' sum, added apart).
pub fn dot_plain(kind: Kind, w: &[u8], xs: &[ActRow<'_>], sums: &mut [f32]) {
    let bb = kind.block_bytes();
    for (x, sum) in xs.iter().zip(sums.iter_mut()) {
        let mut acc = 0f32;
        let mut mins = 0f32;
        for ((block, q), &[xd, xs]) in w.chunks_exact(bb).zip(x.qs).zip(x.ds) {
            let d = read_f16(block, 0);
            let dot: i32 = match kind {
                Kind::Q8_0 => block[2..34]
                    .iter()
                    .zip(q)
                    .map(|(&w, &x)| i32::from(w as i8) * i32::from(x))
                    .sum(),
                Kind::Q4_0 | Kind::Q4_1 => {
                    let (qs, offset) = match kind {
                        Kind::Q4_1 => (&block[4..20], 0),
                        _ => (&block[2..18], 8),
                    };
                    qs.iter()
                        .enumerate()
                        .map(|(j, &w)| {
                            (i32::from(w & 0x0f) - offset) * i32::from(q[j])
                                + (i32::from(w >> 4) - offset) * i32::from(q[j + 16])
                        })
                        .sum()
                }
            };
            acc += d * xd * dot as f32;
            if kind == Kind::Q4_1 {
                mins += read_f16(block, 2) * xs;
            }
        }
        *sum = acc + mins;
    }
}

/// `Σ q[i] · k[i]` with `k` in half precision.
pub fn dot_f16(isa: Isa, q: &[f32], k: &[u16]) -> f32 {
    let mut out = [0f32];
    scores_f16(isa, q, k, q.len(), 0, 1.0, &mut out);
    out[0]
}

/// `out[i] += a · v[i]` with `v` in half precision.
pub fn axpy_f16(isa: Isa, out: &mut [f32], a: f32, v: &[u16]) {
    let len = out.len();
    weighted_sum_f16(isa, &[a], v, len, 0, out);
}

/// One head's attention scores: `out[p] = scale · Σ q[i] · keys[p · stride + offset + i]`
/// for each position `p` of `out`, the keys in half precision.
pub fn scores_f16(
    isa: Isa,
    q: &[f32],
    keys: &[u16],
    stride: usize,
    offset: usize,
    scale: f32,
    out: &mut [f32],
) {
    let hd = q.len();
    assert!(offset + hd <= stride && keys.len() >= out.len() * stride);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2(token) if hd.is_multiple_of(8) => {
            x86::scores_f16(token, q, keys, stride, offset, scale, out)
        }
        _ => {
            for (p, o) in out.iter_mut().enumerate() {
                let k = &keys[p * stride + offset..p * stride + offset + hd];
                let dot: f32 = q
                    .iter()
                    .zip(k)
                    .map(|(&a, &b)| a * crate::quant::f16_to_f32(b))
                    .sum();
                *o = dot * scale;
            }
        }
    }
}

/// One head's attention output: `out[i] += Σ_p weights[p] · values[p · stride + offset + i]`,
/// the values in half precision.
pub fn weighted_sum_f16(
    isa: Isa,
    weights: &[f32],
    values: &[u16],
    stride: usize,
    offset: usize,
    out: &mut [f32],
) {
    let hd = out.len();
    assert!(offset + hd <= stride && values.len() >= weights.len() * stride);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2(token) if hd.is_multiple_of(8) => {
            x86::weighted_sum_f16(token, weights, values, stride, offset, out)
        }
        _ => {
            for (p, &w) in weights.iter().enumerate() {
                let v = &values[p * stride + offset..p * stride + offset + hd];
                for (o, &b) in out.iter_mut().zip(v) {
                    *o += w * crate::quant::f16_to_f32(b);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "AVX2 intrinsics: unaligned loads from slices of checked length, and calls into \
              target_feature functions guarded by a detected `Avx2` token"
)]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Avx2, MatRef, GROUP};
    use crate::quant::{ActRow, Acts, Kind};

    pub fn matmul(token: Avx2, w: &MatRef<'_>, x: &Acts, first: usize, out: &mut [f32]) {
        let _ = token;
        // SAFETY: an `Avx2` is made only after AVX2, FMA and F16C were detected, the features
        // `matmul_avx2` is compiled with.
        unsafe { matmul_avx2(w, x, first, out) }
    }

    /// [`super::matmul_with`] over the AVX2 kernel (written out: a closure would not be
    /// compiled with this function's target features).
    #[target_feature(enable = "avx2,fma,f16c")]
    fn matmul_avx2(w: &MatRef<'_>, x: &Acts, first: usize, out: &mut [f32]) {
        let count = out.len() / w.rows;
        let mut sums = [0f32; GROUP];
        let mut t = 0;
        while t < count {
            let n = (count - t).min(GROUP);
            let rows: [ActRow<'_>; GROUP] =
                std::array::from_fn(|i| x.row(first + t + i.min(n - 1)));
            let out = &mut out[t * w.rows..(t + n) * w.rows];
            for r in 0..w.rows {
                let row = w.row(r);
                match n {
                    8 => dot4::<8>(w.kind, row, &rows, &mut sums),
                    7 => dot4::<7>(w.kind, row, &rows, &mut sums),
                    6 => dot4::<6>(w.kind, row, &rows, &mut sums),
                    5 => dot4::<5>(w.kind, row, &rows, &mut sums),
                    4 => dot4::<4>(w.kind, row, &rows, &mut sums),
                    3 => dot4::<3>(w.kind, row, &rows, &mut sums),
                    2 => dot4::<2>(w.kind, row, &rows, &mut sums),
                    _ => dot4::<1>(w.kind, row, &rows, &mut sums),
                }
                for (i, s) in sums[..n].iter().enumerate() {
                    out[i * w.rows + r] = *s;
                }
            }
            t += n;
        }
    }

    /// The AVX2 kernel for a known number `N` of activation rows.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn dot4<const N: usize>(
        kind: Kind,
        w: &[u8],
        xs: &[ActRow<'_>; GROUP],
        sums: &mut [f32; GROUP],
    ) {
        match kind {
            Kind::Q4_1 => dot_q4_1::<N>(w, xs, sums),
            Kind::Q4_0 => dot_signed::<N, 18>(w, xs, sums),
            Kind::Q8_0 => dot_signed::<N, 34>(w, xs, sums),
        }
    }

    /// Q4_1 weights (unsigned 4-bit values, a scale and a minimum per block) against rows of
    /// activations: per block, `maddubs` of the values by the activations, one fused
    /// multiply-add by the product of the scales; the minimum times the activations' sum is
    /// added in a lane of its own, from the same multiplication.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn dot_q4_1<const N: usize>(w: &[u8], xs: &[ActRow<'_>; GROUP], sums: &mut [f32; GROUP]) {
        let (blocks, _) = w.as_chunks::<20>();
        let mut acc = [_mm256_setzero_ps(); N];
        let low = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let zero = _mm_setzero_ps();
        for (b, block) in blocks.iter().enumerate() {
            let head = i32::from_le_bytes([block[0], block[1], block[2], block[3]]);
            // [d, m, 0, 0]
            let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(head));
            let packed = load16(&block[4..20]);
            let q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(packed), packed), low);
            for n in 0..N {
                let y = load32_i8(&xs[n].qs[b]);
                // [d · xd, m · xs, 0, 0]
                let scales = _mm_mul_ps(dm, load2(&xs[n].ds[b]));
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones);
                let sum = _mm256_fmadd_ps(
                    _mm256_broadcastss_ps(scales),
                    _mm256_cvtepi32_ps(dot),
                    acc[n],
                );
                // The minimum's part goes into lane 1, alone.
                let min = _mm256_zextps128_ps256(_mm_blend_ps::<0b0010>(zero, scales));
                acc[n] = _mm256_add_ps(sum, min);
            }
        }
        for n in 0..N {
            sums[n] = hsum(acc[n]);
        }
    }

    /// Signed weights, `B`-byte blocks of an f16 scale and then the values: Q8_0 (34 bytes,
    /// 32 signed bytes) or Q4_0 (18 bytes, 4-bit values offset by 8). `maddubs` takes unsigned
    /// × signed bytes, so the weights give their magnitude and move their sign onto the
    /// activations.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn dot_signed<const N: usize, const B: usize>(
        w: &[u8],
        xs: &[ActRow<'_>; GROUP],
        sums: &mut [f32; GROUP],
    ) {
        let (blocks, _) = w.as_chunks::<B>();
        let mut acc = [_mm256_setzero_ps(); N];
        let low = _mm256_set1_epi8(0x0f);
        let eight = _mm256_set1_epi8(8);
        let ones = _mm256_set1_epi16(1);
        for (b, block) in blocks.iter().enumerate() {
            let d = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(u16::from_le_bytes([
                block[0], block[1],
            ]))));
            let q = if B == 34 {
                load32(&block[2..])
            } else {
                let packed = load16(&block[2..]);
                let q =
                    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(packed), packed), low);
                _mm256_sub_epi8(q, eight)
            };
            let ax = _mm256_sign_epi8(q, q);
            for n in 0..N {
                let y = load32_i8(&xs[n].qs[b]);
                let sy = _mm256_sign_epi8(y, q);
                let dot = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), ones);
                let scale = _mm_mul_ss(d, _mm_set_ss(xs[n].ds[b][0]));
                acc[n] = _mm256_fmadd_ps(
                    _mm256_broadcastss_ps(scale),
                    _mm256_cvtepi32_ps(dot),
                    acc[n],
                );
            }
        }
        for n in 0..N {
            sums[n] = hsum(acc[n]);
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn hsum(x: __m256) -> f32 {
        let r = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
        let r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        let r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load32(bytes: &[u8]) -> __m256i {
        assert!(bytes.len() >= 32);
        // SAFETY: 32 readable bytes (checked); `loadu` needs no alignment.
        unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load32_i8(bytes: &[i8; 32]) -> __m256i {
        // SAFETY: an array of 32 bytes; `loadu` needs no alignment.
        unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load16(bytes: &[u8]) -> __m128i {
        assert!(bytes.len() >= 16);
        // SAFETY: 16 readable bytes (checked); `loadu` needs no alignment.
        unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
    }

    /// `[v[0], v[1], 0, 0]`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load2(v: &[f32; 2]) -> __m128 {
        // SAFETY: an array of two floats is 8 readable bytes; `load_sd` needs no alignment.
        _mm_castpd_ps(unsafe { _mm_load_sd(v.as_ptr().cast()) })
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load_f16x8(v: &[u16]) -> __m256 {
        assert!(v.len() >= 8);
        // SAFETY: 8 readable half-precision values (checked); `loadu` needs no alignment.
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(v.as_ptr().cast()) })
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn load_f32x8(v: &[f32]) -> __m256 {
        assert!(v.len() >= 8);
        // SAFETY: 8 readable floats (checked); `loadu` needs no alignment.
        unsafe { _mm256_loadu_ps(v.as_ptr()) }
    }

    pub fn scores_f16(
        token: Avx2,
        q: &[f32],
        keys: &[u16],
        stride: usize,
        offset: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let _ = token;
        // SAFETY: the token proves AVX2, FMA and F16C were detected.
        unsafe { scores_f16_avx2(q, keys, stride, offset, scale, out) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn scores_f16_avx2(
        q: &[f32],
        keys: &[u16],
        stride: usize,
        offset: usize,
        scale: f32,
        out: &mut [f32],
    ) {
        let hd = q.len();
        for (p, o) in out.iter_mut().enumerate() {
            let k = &keys[p * stride + offset..p * stride + offset + hd];
            let mut acc = _mm256_setzero_ps();
            for (q, k) in q.chunks_exact(8).zip(k.chunks_exact(8)) {
                acc = _mm256_fmadd_ps(load_f32x8(q), load_f16x8(k), acc);
            }
            *o = hsum(acc) * scale;
        }
    }

    pub fn weighted_sum_f16(
        token: Avx2,
        weights: &[f32],
        values: &[u16],
        stride: usize,
        offset: usize,
        out: &mut [f32],
    ) {
        let _ = token;
        // SAFETY: the token proves AVX2, FMA and F16C were detected.
        unsafe { weighted_sum_f16_avx2(weights, values, stride, offset, out) }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    fn weighted_sum_f16_avx2(
        weights: &[f32],
        values: &[u16],
        stride: usize,
        offset: usize,
        out: &mut [f32],
    ) {
        let hd = out.len();
        for (p, &w) in weights.iter().enumerate() {
            let v = &values[p * stride + offset..p * stride + offset + hd];
            let a = _mm256_set1_ps(w);
            for (o, v) in out.chunks_exact_mut(8).zip(v.chunks_exact(8)) {
                let r = _mm256_fmadd_ps(a, load_f16x8(v), load_f32x8(o));
                // SAFETY: `o` is 8 writable floats; `storeu` needs no alignment.
                unsafe { _mm256_storeu_ps(o.as_mut_ptr(), r) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::quant::f32_to_f16;

    /// A weight matrix of random blocks of `kind`: scales in a realistic range, any bytes.
    fn weights(kind: Kind, rows: usize, cols: usize, seed: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0usize;
        let mut next = || {
            i += 1;
            seed[i % seed.len()].wrapping_mul(31).wrapping_add(i as u8)
        };
        for _ in 0..rows * cols / BLOCK {
            let d = f32_to_f16(f32::from(next()) / 4096.0 + 1e-4);
            out.extend_from_slice(&d.to_le_bytes());
            if kind == Kind::Q4_1 {
                let m = f32_to_f16(-f32::from(next()) / 2048.0);
                out.extend_from_slice(&m.to_le_bytes());
            }
            let header = if kind == Kind::Q4_1 { 4 } else { 2 };
            for _ in header..kind.block_bytes() {
                out.push(next());
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every kernel of this CPU against the plain one, for every weight format and every
        /// number of activation rows a matrix product batches.
        #[test]
        fn kernels_agree_with_the_plain_one(
            seed in proptest::collection::vec(any::<u8>(), 1..64),
            x in proptest::collection::vec(-8.0f32..8.0, 11 * 96),
            rows in 1usize..6,
            tokens in 1usize..12,
        ) {
            let cols = 96;
            for kind in [Kind::Q4_0, Kind::Q4_1, Kind::Q8_0] {
                let bytes = weights(kind, rows, cols, &seed);
                let w = MatRef { kind, rows, cols, bytes: &bytes };
                let mut acts = Acts::default();
                acts.quantize(&x, tokens, cols);
                let mut plain = vec![0f32; tokens * rows];
                let mut fast = vec![0f32; tokens * rows];
                matmul(Isa::Plain, &w, &acts, &mut plain);
                matmul(Isa::detect(), &w, &acts, &mut fast);
                for (p, f) in plain.iter().zip(&fast) {
                    prop_assert!((p - f).abs() <= 1e-3 * (1.0 + p.abs()), "{kind:?}: {p} vs {f}");
                }
                // Each row alone gives the values it gives in the batch, to the bit.
                for (t, want) in fast.chunks_exact(rows).enumerate() {
                    let mut one = Acts::default();
                    one.quantize(&x[t * cols..], 1, cols);
                    let mut alone = vec![0f32; rows];
                    matmul(Isa::detect(), &w, &one, &mut alone);
                    prop_assert_eq!(&alone[..], want, "row {} alone", t);
                }
            }
        }

        #[test]
        fn attention_kernels_agree_with_the_plain_ones(
            q in proptest::collection::vec(-4.0f32..4.0, 64),
            k in proptest::collection::vec(-4.0f32..4.0, 64),
            a in -2.0f32..2.0,
        ) {
            let k: Vec<u16> = k.iter().map(|&v| f32_to_f16(v)).collect();
            let plain = dot_f16(Isa::Plain, &q, &k);
            let fast = dot_f16(Isa::detect(), &q, &k);
            prop_assert!((plain - fast).abs() <= 1e-3 * (1.0 + plain.abs()));
            let mut p = q.clone();
            let mut f = q.clone();
            axpy_f16(Isa::Plain, &mut p, a, &k);
            axpy_f16(Isa::detect(), &mut f, a, &k);
            for (p, f) in p.iter().zip(&f) {
                prop_assert!((p - f).abs() <= 1e-4 * (1.0 + p.abs()));
            }
        }
    }

    /// The plain kernel against the definition: the dequantized weights times the
    /// dequantized activations, for every weight format.
    #[test]
    fn the_plain_kernel_computes_the_dot_product_of_the_values() {
        let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let mut acts = Acts::default();
        acts.quantize(&x, 1, 64);
        let row = acts.row(0);
        for kind in [Kind::Q4_0, Kind::Q4_1, Kind::Q8_0] {
            let bytes = weights(kind, 2, 64, &[3, 141, 59, 26, 5]);
            let m = MatRef {
                kind,
                rows: 2,
                cols: 64,
                bytes: &bytes,
            };
            let mut out = [0f32; 2];
            matmul(Isa::Plain, &m, &acts, &mut out);
            for (r, o) in out.iter().enumerate() {
                let mut wr = [0f32; 64];
                crate::quant::dequantize_row(kind, m.row(r), &mut wr);
                let want: f32 = wr
                    .iter()
                    .zip(row.qs.iter().flatten())
                    .enumerate()
                    .map(|(i, (w, &q))| w * f32::from(q) * row.ds[i / BLOCK][0])
                    .sum();
                assert!(
                    (o - want).abs() < 2e-3 * (1.0 + want.abs()),
                    "{kind:?}: {o} vs {want}"
                );
            }
        }
    }
}
