//! Element-wise functions of the encoder, written without branches or library calls so
//! that the compiler vectorizes them for the CPU features of the function they are inlined
//! into (see `forward`).

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding and subtracting this rounds an f32 below 2^22 to the nearest integer.
const ROUND: f32 = 12_582_912.0;

/// `e^x` within about 2 ulp for `x` in [-87, 88] (Cephes' `expf` polynomial); clamped
/// outside it.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let p = p * r * r + r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// The error function within a few 1e-7: a rational approximation on [-4, 4] (the one
/// Eigen and XLA use for f32), exact to f32 precision beyond it, where erf is ±1.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = -2.726_142_3e-10_f32;
    let p = p * x2 + 2.770_681_4e-8;
    let p = p * x2 - 2.101_024e-6;
    let p = p * x2 - 5.692_506_4e-5;
    let p = p * x2 - 7.349_906_3e-4;
    let p = p * x2 - 2.954_6e-3;
    let p = p * x2 - 1.609_603_3e-2;
    let q = -1.456_607_2e-5_f32;
    let q = q * x2 - 2.133_740_6e-4;
    let q = q * x2 - 1.682_827e-3;
    let q = q * x2 - 7.373_329e-3;
    let q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// GELU as BERT computes it: `x · ½ (1 + erf(x / √2))`.
#[inline(always)]
pub fn gelu(xs: &mut [f32]) {
    for x in xs.iter_mut() {
        *x = *x * (0.5 * (1.0 + erf(*x / std::f32::consts::SQRT_2)));
    }
}

/// Layer norm of one row in place: `(x - mean) / sqrt(var + eps) · gain + bias`.
#[inline(always)]
pub fn layer_norm(x: &mut [f32], gain: &[f32], bias: &[f32], eps: f32) {
    let n = x.len() as f32;
    let mean = x.iter().sum::<f32>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in x.iter_mut().zip(gain).zip(bias) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// Softmax of one row in place.
#[inline(always)]
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulp() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, std) = (exp(x), x.exp());
            assert!(
                ((ours - std) / std).abs() < 4e-7,
                "exp({x}) = {ours}, std {std}"
            );
            x += 0.0173;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
    }

    #[test]
    fn erf_is_close_to_the_series() {
        // erf by its Taylor series in f64 (converges quickly for |x| <= 3).
        fn series(x: f64) -> f64 {
            let (mut term, mut sum) = (x, x);
            for n in 1..200 {
                term *= -x * x / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        }
        let mut x = -3.0f64;
        while x <= 3.0 {
            let ours = f64::from(erf(x as f32));
            assert!((ours - series(x)).abs() < 3e-7, "erf({x}) = {ours}");
            x += 0.01;
        }
        assert!((erf(10.0) - 1.0).abs() < 1e-6 && (erf(-10.0) + 1.0).abs() < 1e-6);
        assert!(erf(1e-3) > 0.0 && erf(-1e-3) < 0.0 && erf(0.0) == 0.0);
    }

    #[test]
    fn softmax_and_norm_are_what_they_say() {
        let mut v = [1.0f32, 2.0, 3.0];
        softmax(&mut v);
        let e: Vec<f32> = [1.0f32, 2.0, 3.0].iter().map(|x| x.exp()).collect();
        let s: f32 = e.iter().sum();
        for (a, b) in v.iter().zip(&e) {
            assert!((a - b / s).abs() < 1e-6);
        }
        let mut x = [1.0f32, 2.0, 3.0, 6.0];
        layer_norm(&mut x, &[1.0; 4], &[0.5; 4], 0.0);
        let mean: f32 = x.iter().sum::<f32>() / 4.0;
        let var: f32 = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 4.0;
        assert!((mean - 0.5).abs() < 1e-6 && (var - 1.0).abs() < 1e-5);
    }
}
