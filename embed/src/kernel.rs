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

/// An instruction set the kernels may use on this CPU: a token that only complete runtime
/// detection makes ([`Isa::detect`]), so holding one is the proof the `unsafe` kernels need.
/// Detection checks every feature the functions of that level are compiled with (the
/// `target_feature` lists of this crate: a test compares them with what each level detects), so a
/// CPU with AVX-512F but not AVX-512BW, VL or DQ gets the AVX2 kernels, not illegal
/// instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isa(Level);

/// The levels, narrowest first: a CPU that has one has every level before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Generic,
    Avx2,
    Avx512,
}

/// The features each level's functions are compiled with: exactly what detection checks.
const AVX2_FEATURES: &[&str] = &["avx2", "fma"];
const AVX512_FEATURES: &[&str] = &["avx512f", "avx512bw", "avx512vl", "avx512dq", "avx2", "fma"];

impl Isa {
    /// The portable kernels, which every CPU runs.
    pub const GENERIC: Isa = Isa(Level::Generic);

    /// The widest level whose every feature this CPU has.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if AVX512_FEATURES.iter().all(|f| has(f)) {
                return Isa(Level::Avx512);
            }
            if AVX2_FEATURES.iter().all(|f| has(f)) {
                return Isa(Level::Avx2);
            }
        }
        Isa::GENERIC
    }

    pub fn is_avx512(self) -> bool {
        self.0 == Level::Avx512
    }

    pub fn is_avx2(self) -> bool {
        self.0 == Level::Avx2
    }

    pub fn name(self) -> &'static str {
        match self.0 {
            Level::Avx512 => "avx512",
            Level::Avx2 => "avx2",
            Level::Generic => "generic",
        }
    }
}

/// What the tests ask of a level.
#[cfg(test)]
impl Isa {
    /// This level and every narrower one, narrowest first (all of them run here: the tests
    /// compare each with the portable kernel).
    pub fn and_narrower(self) -> Vec<Isa> {
        [Level::Generic, Level::Avx2, Level::Avx512]
            .into_iter()
            .filter(|l| *l <= self.0)
            .map(Isa)
            .collect()
    }

    /// The CPU features this level's functions are compiled with.
    pub fn features(self) -> &'static [&'static str] {
        match self.0 {
            Level::Avx512 => AVX512_FEATURES,
            Level::Avx2 => AVX2_FEATURES,
            Level::Generic => &[],
        }
    }
}

/// Whether this CPU has the named feature (the names `target_feature` takes).
#[cfg(target_arch = "x86_64")]
fn has(feature: &str) -> bool {
    match feature {
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
        "avx512vl" => std::arch::is_x86_feature_detected!("avx512vl"),
        "avx512dq" => std::arch::is_x86_feature_detected!("avx512dq"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        _ => false,
    }
}

/// `y[r, o] = Σ_i x[r, i] · W[i, o] · scale[o] + bias[o]` for `rows` rows, with the kernels
/// of `isa`.
#[inline(always)]
pub fn linear(isa: Isa, x: &[f32], rows: usize, m: &LinearRef<'_>, y: &mut [f32]) {
    check(x, rows, m, y.len());
    #[expect(
        unsafe_code,
        reason = "the column kernel over a checked, borrowed output"
    )]
    // SAFETY: the shapes are checked; `y` is borrowed whole for the call.
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
/// nothing else reads or writes in `cols` during the call. (`isa` needs no promise: only
/// detection makes one.)
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
    match isa.0 {
        // SAFETY: `isa` was made by detection, so the CPU has every feature the kernel is
        // compiled with; the caller keeps the rest of the contract above.
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => unsafe { x86::linear_avx512(x, rows, m, y, cols) },
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => unsafe { x86::linear_avx2(x, rows, m, y, cols) },
        // SAFETY: the caller keeps the contract above.
        _ => unsafe { linear_generic(x, rows, m, y, cols) },
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
                // SAFETY: row `r0 + i` < `rows` and columns `n0..n0 + NR` lie in `cols`,
                // which the caller lends to this call alone.
                let out = unsafe { std::slice::from_raw_parts_mut(y.add((r0 + i) * n + n0), NR) };
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
        // SAFETY: the caller's function is compiled with AVX-512F (its `Isa` came from detection)
        // and vouches that `x` holds `M` rows of `k`, `w` `k` rows of `n` weights, `scale` and
        // `bias` `n` values, and that `y`'s `M` rows × 32 columns from `n0` are its own.
        unsafe {
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
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub unsafe fn linear_avx512(
        x: &[f32],
        rows: usize,
        m: &LinearRef<'_>,
        y: *mut f32,
        cols: Range<usize>,
    ) {
        // SAFETY: every pointer offset stays within the shapes `kernel::check` passed, and each
        // block writes only rows of `rows` and columns of `cols`, which the caller lends.
        unsafe {
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
        // SAFETY: as for `block512`, with AVX2 and FMA and 16 columns.
        unsafe {
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
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn linear_avx2(
        x: &[f32],
        rows: usize,
        m: &LinearRef<'_>,
        y: *mut f32,
        cols: Range<usize>,
    ) {
        // SAFETY: as for `linear_avx512`.
        unsafe {
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
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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

    /// One product's operands, as the property test draws them.
    #[derive(Debug, Clone)]
    struct Case {
        rows: usize,
        k: usize,
        n: usize,
        weights: Vec<u8>,
        scales: Vec<f32>,
        bias: Vec<f32>,
        x: Vec<f32>,
    }

    fn case() -> impl Strategy<Value = Case> {
        (1usize..=30, 1usize..=70, 1usize..=5).prop_flat_map(|(rows, k, blocks)| {
            let n = blocks * COLUMN_BLOCK;
            (
                proptest::collection::vec(any::<u8>(), k * n),
                proptest::collection::vec(1e-4f32..0.1, n),
                proptest::collection::vec(-4f32..4.0, n),
                proptest::collection::vec(-8f32..8.0, rows * k),
            )
                .prop_map(move |(weights, scales, bias, x)| Case {
                    rows,
                    k,
                    n,
                    weights,
                    scales,
                    bias,
                    x,
                })
        })
    }

    proptest! {
        /// Every kernel this CPU runs agrees with the definition (in f64) on arbitrary
        /// shapes and values, ragged row blocks and every column block included.
        #[test]
        fn every_kernel_computes_the_product(c in case()) {
            let m = LinearRef {
                weights: &c.weights,
                inputs: c.k,
                outputs: c.n,
                scales: &c.scales,
                bias: &c.bias,
            };
            let want = reference(&c.x, c.rows, &m);
            // The sum's magnitude bounds the rounding of any order of the additions.
            let bound: Vec<f64> = (0..c.rows * c.n)
                .map(|i| {
                    let (r, o) = (i / c.n, i % c.n);
                    let mag: f64 = (0..c.k)
                        .map(|j| {
                            (f64::from(c.x[r * c.k + j]) * f64::from(c.weights[j * c.n + o] as i8))
                                .abs()
                        })
                        .sum();
                    mag * f64::from(c.scales[o]) * 1e-6 + 1e-6
                })
                .collect();
            for isa in Isa::detect().and_narrower() {
                let mut y = vec![f32::NAN; c.rows * c.n];
                linear(isa, &c.x, c.rows, &m, &mut y);
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    prop_assert!(
                        (f64::from(*a) - b).abs() <= bound[i],
                        "{}: value {i} of {}x{}x{}: {a} vs {b}", isa.name(), c.rows, c.k, c.n
                    );
                }
            }
        }
    }

    /// Every `target_feature` list of this crate is exactly the feature set of the level its
    /// function is named for, so detection checks all a kernel is compiled with.
    #[test]
    fn kernels_are_compiled_for_exactly_the_features_detection_checks() {
        let levels = [Isa(Level::Avx2), Isa(Level::Avx512)];
        let sources = [
            ("kernel.rs", include_str!("kernel.rs")),
            ("forward.rs", include_str!("forward.rs")),
            ("team.rs", include_str!("team.rs")),
            ("math.rs", include_str!("math.rs")),
        ];
        let attr = "#[target_feature(enable = \"";
        let mut seen = 0;
        for (file, text) in sources {
            let mut rest = text;
            while let Some(at) = rest.find(attr) {
                let list = &rest[at + attr.len()..];
                let list = &list[..list.find('"').expect("closing quote")];
                let after = &rest[at..];
                let name_at = after.find("fn ").expect("a function follows") + 3;
                let name: String = after[name_at..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let level = levels
                    .iter()
                    .find(|l| name.ends_with(&format!("_{}", l.name())))
                    .unwrap_or_else(|| panic!("{file}: fn {name} is named for no level"));
                let mut got: Vec<&str> = list.split(',').collect();
                let mut want = level.features().to_vec();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "{file}: fn {name}");
                seen += 1;
                rest = &rest[at + attr.len()..];
            }
        }
        assert!(seen >= 4, "found {seen} target_feature functions");
    }

    #[test]
    fn detection_orders_the_levels() {
        let all = Isa::detect().and_narrower();
        assert_eq!(all[0], Isa::GENERIC);
        assert_eq!(*all.last().expect("one"), Isa::detect());
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
