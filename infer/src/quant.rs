//! Block formats: the weights' (GGML's Q4_0, Q4_1, Q8_0, read as the file has them) and the
//! activations' (each row of 32-value blocks quantized to int8 with a scale, as GGML's Q8_0
//! and Q8_1), with half-precision conversion done in plain Rust.

/// Values per block in every quantized format here.
pub const BLOCK: usize = 32;

/// The weight formats the kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 18 bytes a block: an f16 scale, then 16 bytes of 4-bit values offset by 8.
    Q4_0,
    /// 20 bytes a block: an f16 scale and an f16 minimum, then 16 bytes of 4-bit values.
    Q4_1,
    /// 34 bytes a block: an f16 scale, then 32 signed bytes.
    Q8_0,
}

impl Kind {
    pub fn block_bytes(self) -> usize {
        match self {
            Kind::Q4_0 => 18,
            Kind::Q4_1 => 20,
            Kind::Q8_0 => 34,
        }
    }

    /// The GGML type number.
    pub fn ggml(self) -> u32 {
        match self {
            Kind::Q4_0 => 2,
            Kind::Q4_1 => 3,
            Kind::Q8_0 => 8,
        }
    }

    pub fn from_ggml(kind: u32) -> Option<Kind> {
        match kind {
            2 => Some(Kind::Q4_0),
            3 => Some(Kind::Q4_1),
            8 => Some(Kind::Q8_0),
            _ => None,
        }
    }
}

/// IEEE half to single precision, exactly.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalize.
            let shift = man.leading_zeros() - 21;
            let man = (man << shift) & 0x3ff;
            sign | ((113 - shift) << 23) | (man << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Single to half precision, rounding to nearest even (as F16C's `vcvtps2ph` does).
pub fn f32_to_f16(f: f32) -> u16 {
    let bits = f.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let man = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = man >> shift;
        let rest = man & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let round = u32::from(rest > mid || (rest == mid && half & 1 == 1));
        return sign | (half + round) as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    let round = u32::from(rest > 0x1000 || (rest == 0x1000 && half & 1 == 1));
    sign | (half + round) as u16
}

/// Rounds through half precision, as a scale stored in a block is.
pub fn round_f16(f: f32) -> f32 {
    f16_to_f32(f32_to_f16(f))
}

pub fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

/// Rows of activations quantized for the kernels: per block of 32 values, int8 values, and
/// the pair `[d, s]`: the scale `d` and `s = d · Σ q` (what a Q4_1 weight's minimum
/// multiplies), both rounded through half precision as GGML's Q8_0 and Q8_1 blocks store
/// them, and kept side by side so that a kernel loads both at once.
#[derive(Clone, Debug, Default)]
pub struct Acts {
    pub cols: usize,
    pub rows: usize,
    pub qs: Vec<[i8; BLOCK]>,
    pub ds: Vec<[f32; 2]>,
}

/// One quantized row of [`Acts`].
#[derive(Clone, Copy, Debug)]
pub struct ActRow<'a> {
    pub qs: &'a [[i8; BLOCK]],
    pub ds: &'a [[f32; 2]],
}

/// `x` rounded to the nearest whole number, ties to even, for `|x| < 2^22` (as the AVX2
/// quantizer's `round` does; without SSE 4.1 at compile time `round_ties_even` is a call).
fn round_even(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23
    (x + MAGIC) - MAGIC
}

impl Acts {
    /// Quantizes `rows` rows of `cols` values (`cols` a multiple of 32) from `x`.
    pub fn quantize(&mut self, x: &[f32], rows: usize, cols: usize) {
        assert!(cols.is_multiple_of(BLOCK) && x.len() >= rows * cols);
        let blocks = rows * cols / BLOCK;
        self.cols = cols;
        self.rows = rows;
        self.qs.resize(blocks, [0; BLOCK]);
        self.ds.resize(blocks, [0.0; 2]);
        let (chunks, _) = x[..rows * cols].as_chunks::<BLOCK>();
        for ((chunk, qs), ds) in chunks.iter().zip(&mut self.qs).zip(&mut self.ds) {
            let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qs.iter_mut().zip(chunk) {
                *q = round_even(v * id).clamp(-127.0, 127.0) as i8;
                sum += i32::from(*q);
            }
            *ds = [round_f16(d), round_f16(d * sum as f32)];
        }
    }

    pub fn row(&self, r: usize) -> ActRow<'_> {
        let blocks = self.cols / BLOCK;
        ActRow {
            qs: &self.qs[r * blocks..(r + 1) * blocks],
            ds: &self.ds[r * blocks..(r + 1) * blocks],
        }
    }
}

/// The values of one weight row of `cols` values, widened to f32 (the token embedding's
/// lookup: one row, not the whole table).
pub fn dequantize_row(kind: Kind, row: &[u8], out: &mut [f32]) {
    let bb = kind.block_bytes();
    for (block, out) in row.chunks_exact(bb).zip(out.chunks_exact_mut(BLOCK)) {
        let d = read_f16(block, 0);
        match kind {
            Kind::Q8_0 => {
                for (o, &q) in out.iter_mut().zip(&block[2..34]) {
                    *o = f32::from(q as i8) * d;
                }
            }
            Kind::Q4_0 | Kind::Q4_1 => {
                let (m, qs) = match kind {
                    Kind::Q4_1 => (read_f16(block, 2), &block[4..20]),
                    _ => (-8.0 * d, &block[2..18]),
                };
                for (j, &b) in qs.iter().enumerate() {
                    out[j] = f32::from(b & 0x0f) * d + m;
                    out[j + 16] = f32::from(b >> 4) * d + m;
                }
            }
        }
    }
}

/// Quantizes f32 values to Q8_0 blocks (GGML's reference rounding), for weights stored in a
/// format the kernels do not run (F32, F16, BF16, Q5_0, Q5_1), widened once at load.
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    for chunk in x.chunks_exact(BLOCK) {
        let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend(
            chunk
                .iter()
                .map(|&v| round_half_away(v * id).clamp(-127, 127) as i8 as u8),
        );
    }
}

/// `x.round() as i32` (halves away from zero, as GGML's `roundf`) for `|x|` below 2^23,
/// without the call to the C library's `roundf` that x86-64 without SSE4.1 makes for each
/// value: the integer part by truncation, and the fraction left (exact, as both are floats
/// of the same binade or less) decides.
fn round_half_away(x: f32) -> i32 {
    let i = x as i32;
    let f = x - i as f32;
    if f >= 0.5 {
        i + 1
    } else if f <= -0.5 {
        i - 1
    } else {
        i
    }
}

/// Widens a row of a format the kernels do not run to f32 (`None` for a format this crate
/// does not read at all).
pub fn widen_row(ggml: u32, row: &[u8], out: &mut [f32]) -> Option<()> {
    match ggml {
        0 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        1 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        30 => {
            for (o, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
            }
        }
        6 | 7 => {
            let q5_1 = ggml == 7;
            let bb = if q5_1 { 24 } else { 22 };
            for (block, out) in row.chunks_exact(bb).zip(out.chunks_exact_mut(BLOCK)) {
                let d = read_f16(block, 0);
                let (m, rest) = if q5_1 {
                    (read_f16(block, 2), &block[4..])
                } else {
                    (-16.0 * d, &block[2..])
                };
                let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
                let qs = &rest[4..20];
                for (j, &b) in qs.iter().enumerate() {
                    let h0 = ((qh >> j) & 1) << 4;
                    let h1 = ((qh >> (j + 16)) & 1) << 4;
                    out[j] = (u32::from(b & 0x0f) | h0) as f32 * d + m;
                    out[j + 16] = (u32::from(b >> 4) | h1) as f32 * d + m;
                }
            }
        }
        2 | 3 | 8 => dequantize_row(Kind::from_ggml(ggml)?, row, out),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_halves_away_from_zero_is_the_library_s() {
        let mut xs: Vec<f32> = Vec::new();
        for k in -300..300 {
            let half = k as f32 + 0.5;
            let bits = half.to_bits();
            xs.extend([
                half,
                f32::from_bits(bits - 1),
                f32::from_bits(bits + 1),
                k as f32,
            ]);
        }
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..1_000_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Any f32 bit pattern whose magnitude is below 2^23.
            let x = f32::from_bits(seed as u32);
            if x.abs() < 8_388_608.0 {
                xs.push(x);
            }
        }
        xs.extend([0.0, -0.0, f32::NAN, 0.49999997, -0.49999997]);
        for x in xs {
            assert_eq!(round_half_away(x), x.round() as i32, "{x:e}");
        }
    }

    #[test]
    fn half_precision_round_trips_every_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x} -> {f}");
            }
        }
        // Ties round to even; overflow to infinity; tiny values to zero.
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16(1e6), 0x7c00);
        assert_eq!(f32_to_f16(1e-10), 0);
    }

    #[test]
    fn quantized_rows_come_back_close() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 64) as f32 - 31.5) / 7.0)
            .collect();
        let mut a = Acts::default();
        a.quantize(&x, 2, 32);
        for r in 0..2 {
            let row = a.row(r);
            let [d, s] = row.ds[0];
            let back: Vec<f32> = row.qs[0].iter().map(|&q| f32::from(q) * d).collect();
            for (b, v) in back.iter().zip(&x[r * 32..]) {
                assert!((b - v).abs() <= d * 0.51 + 1e-3, "{b} vs {v}");
            }
            let sum: i32 = row.qs[0].iter().map(|&q| i32::from(q)).sum();
            assert!((s - d * sum as f32).abs() <= s.abs() * 1e-3 + 1e-3);
        }
    }
}
