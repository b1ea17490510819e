//! The encoder's forward pass (BERT: embeddings, then per layer self-attention and a GELU
//! feed-forward, each followed by a residual layer norm) and the mean pooling.
//!
//! The texts of a batch are laid one after another as the rows of one matrix: the six
//! matrix products of each layer run over all their tokens at once, attention stays within
//! each text, and no row is padding. The whole pass is compiled once per instruction set
//! (the body is inlined into a function with that set's target features), so the
//! element-wise loops are vectorized for the CPU that runs them.

use crate::config::Config;
use crate::format::{LayerRef, Model, NormRef};
use crate::kernel::Isa;
use crate::math;
use crate::team::{self, Product, Team};
use crate::Result;

/// One unit vector per text (the mean of its last hidden states, L2-normalized).
pub(crate) fn run(model: &Model, texts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
    let h = model.config().hidden;
    let states = hidden(model, texts)?;
    let mut out = Vec::with_capacity(texts.len());
    let mut r = 0;
    for ids in texts {
        let t = ids.len();
        out.push(mean_pool(&states[r * h..(r + t) * h], h));
        r += t;
    }
    Ok(out)
}

/// The mean of `rows` (each `h` wide), L2-normalized.
fn mean_pool(rows: &[f32], h: usize) -> Vec<f32> {
    let mut sum = vec![0f32; h];
    let count = (rows.len() / h.max(1)).max(1) as f32;
    for row in rows.chunks_exact(h) {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v;
        }
    }
    sum.iter_mut().for_each(|s| *s /= count);
    let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    sum.iter_mut().for_each(|s| *s /= norm);
    sum
}

/// The last layer's hidden states of every token of every text, texts one after another,
/// with the matrix products split across the CPUs this process may use when they are big
/// enough to gain from it (see [`team`]).
pub(crate) fn hidden(model: &Model, texts: &[Vec<u32>]) -> Result<Vec<f32>> {
    let rows = texts.iter().map(Vec::len).sum();
    let threads = team::threads_for(rows, model.config().hidden);
    hidden_on(model, texts, threads, team::MIN_SPLIT)
}

/// [`hidden`] on `threads` threads (the caller's included), splitting products of at least
/// `min_split` multiply-adds.
pub(crate) fn hidden_on(
    model: &Model,
    texts: &[Vec<u32>],
    threads: usize,
    min_split: usize,
) -> Result<Vec<f32>> {
    let isa = Isa::detect();
    team::with_team(isa, threads, min_split, |team| {
        #[cfg(target_arch = "x86_64")]
        if isa.is_avx512() {
            #[expect(
                unsafe_code,
                reason = "calling a function compiled for a detected CPU feature"
            )]
            // SAFETY: `isa` was made by detection, which found every feature the function
            // is compiled with.
            return unsafe { hidden_avx512(team, model, texts) };
        }
        #[cfg(target_arch = "x86_64")]
        if isa.is_avx2() {
            #[expect(
                unsafe_code,
                reason = "calling a function compiled for a detected CPU feature"
            )]
            // SAFETY: as above.
            return unsafe { hidden_avx2(team, model, texts) };
        }
        hidden_body(team, model, texts)
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
fn hidden_avx512<'m>(team: &Team<'m>, model: &'m Model, texts: &[Vec<u32>]) -> Result<Vec<f32>> {
    hidden_body(team, model, texts)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn hidden_avx2<'m>(team: &Team<'m>, model: &'m Model, texts: &[Vec<u32>]) -> Result<Vec<f32>> {
    hidden_body(team, model, texts)
}

#[inline(always)]
fn norm_rows(x: &mut [f32], h: usize, n: NormRef<'_>, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        math::layer_norm(row, n.gain, n.bias, eps);
    }
}

#[inline(always)]
fn hidden_body<'m>(team: &Team<'m>, model: &'m Model, texts: &[Vec<u32>]) -> Result<Vec<f32>> {
    let c = *model.config();
    let mut b = Buffers::new(&c, texts);
    embeddings(model, texts, &mut b.x)?;
    for l in 0..c.layers {
        let layer = model.layer(l);
        self_attention(team, &layer, &c, texts, &mut b);
        feed_forward(team, &layer, &c, &mut b);
    }
    Ok(b.x)
}

/// The activations of one pass (`rows` tokens of all texts), reused by every layer.
struct Buffers {
    rows: usize,
    /// The hidden states, the layer's input and output.
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    ctx: Vec<f32>,
    up: Vec<f32>,
    scratch: Scratch,
}

impl Buffers {
    fn new(c: &Config, texts: &[Vec<u32>]) -> Buffers {
        let h = c.hidden;
        let rows: usize = texts.iter().map(Vec::len).sum();
        let longest = texts.iter().map(Vec::len).max().unwrap_or(0);
        Buffers {
            rows,
            x: vec![0f32; rows * h],
            q: vec![0f32; rows * h],
            k: vec![0f32; rows * h],
            v: vec![0f32; rows * h],
            ctx: vec![0f32; rows * h],
            up: vec![0f32; rows * c.ffn],
            scratch: Scratch {
                keys: vec![0f32; longest * h / c.heads],
                scores: vec![0f32; longest],
            },
        }
    }
}

/// Each token's word row + token type 0 + its position, then a layer norm, into `x`.
#[inline(always)]
fn embeddings(model: &Model, texts: &[Vec<u32>], x: &mut [f32]) -> Result<()> {
    let c = *model.config();
    let h = c.hidden;
    let token_type = model.token_type();
    let mut r = 0;
    for ids in texts {
        for (p, &id) in ids.iter().enumerate() {
            let row = &mut x[r * h..(r + 1) * h];
            model.word(id, row)?;
            for (v, t) in row.iter_mut().zip(token_type) {
                *v += t;
            }
            model.add_position(p.min(c.max_positions - 1), row);
            r += 1;
        }
    }
    norm_rows(x, h, model.embedding_norm(), c.norm_eps);
    Ok(())
}

/// `x = norm(x + attention(x) · Wo)`: queries, keys and values in one split product,
/// attention within each text, then the output projection.
#[inline(always)]
fn self_attention<'m>(
    team: &Team<'m>,
    layer: &LayerRef<'m>,
    c: &Config,
    texts: &[Vec<u32>],
    b: &mut Buffers,
) {
    let h = c.hidden;
    let [wq, wk, wv, wo, _, _] = &layer.linears;
    team.run(
        b.rows,
        &mut [
            Product {
                x: &b.x,
                m: *wq,
                y: &mut b.q,
            },
            Product {
                x: &b.x,
                m: *wk,
                y: &mut b.k,
            },
            Product {
                x: &b.x,
                m: *wv,
                y: &mut b.v,
            },
        ],
    );
    let mut r0 = 0;
    for ids in texts {
        let t = ids.len();
        let span = r0 * h..(r0 + t) * h;
        attention(
            &b.q[span.clone()],
            &b.k[span.clone()],
            &b.v[span.clone()],
            t,
            h,
            c.heads,
            &mut b.scratch,
            &mut b.ctx[span],
        );
        r0 += t;
    }
    // ctx · Wo + x, normed, is the next x (q is free: it holds the product).
    team.run(
        b.rows,
        &mut [Product {
            x: &b.ctx,
            m: *wo,
            y: &mut b.q,
        }],
    );
    residual_norm(b, h, layer.attention_norm, c.norm_eps);
}

/// `x = norm(x + gelu(x · Wup) · Wdown)`.
#[inline(always)]
fn feed_forward<'m>(team: &Team<'m>, layer: &LayerRef<'m>, c: &Config, b: &mut Buffers) {
    let [_, _, _, _, wup, wdown] = &layer.linears;
    team.run(
        b.rows,
        &mut [Product {
            x: &b.x,
            m: *wup,
            y: &mut b.up,
        }],
    );
    math::gelu(&mut b.up);
    team.run(
        b.rows,
        &mut [Product {
            x: &b.up,
            m: *wdown,
            y: &mut b.q,
        }],
    );
    residual_norm(b, c.hidden, layer.output_norm, c.norm_eps);
}

/// `x = norm(q + x)`: the product in `q` plus the residual, normed, becomes the next `x`.
#[inline(always)]
fn residual_norm(b: &mut Buffers, h: usize, norm: NormRef<'_>, eps: f32) {
    for (a, x) in b.q.iter_mut().zip(&b.x) {
        *a += x;
    }
    norm_rows(&mut b.q, h, norm, eps);
    std::mem::swap(&mut b.x, &mut b.q);
}

struct Scratch {
    /// One head's keys, transposed: `head_dim × tokens`.
    keys: Vec<f32>,
    scores: Vec<f32>,
}

/// Multi-head self-attention of one text's `t` tokens (no mask: no token is padding).
#[inline(always)]
#[expect(
    clippy::too_many_arguments,
    reason = "the parts of one attention, spelled out"
)]
fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    h: usize,
    heads: usize,
    scratch: &mut Scratch,
    out: &mut [f32],
) {
    let dh = h / heads;
    let scale = 1.0 / (dh as f32).sqrt();
    let keys = &mut scratch.keys[..dh * t];
    let scores = &mut scratch.scores[..t];
    for head in 0..heads {
        let col = head * dh;
        for j in 0..t {
            for d in 0..dh {
                keys[d * t + j] = k[j * h + col + d];
            }
        }
        for i in 0..t {
            scores.iter_mut().for_each(|s| *s = 0.0);
            let qi = &q[i * h + col..i * h + col + dh];
            for (d, &qd) in qi.iter().enumerate() {
                let qd = qd * scale;
                for (s, kd) in scores.iter_mut().zip(&keys[d * t..(d + 1) * t]) {
                    *s += qd * kd;
                }
            }
            math::softmax(scores);
            let o = &mut out[i * h + col..i * h + col + dh];
            o.iter_mut().for_each(|x| *x = 0.0);
            for (j, &p) in scores.iter().enumerate() {
                for (x, vd) in o.iter_mut().zip(&v[j * h + col..j * h + col + dh]) {
                    *x += p * vd;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tests::tiny_parts;
    use crate::format::{write, Parts, SOURCE_LEN};

    /// The forward pass in f64, straight from BERT's definition, over the parts as given
    /// (weights dequantized first, as the ONNX graph folds them).
    fn reference(p: &Parts, ids: &[u32]) -> Vec<f64> {
        let c = &p.config;
        let h = c.hidden;
        let t = ids.len();
        let norm = |x: &mut [f64], gain: &[f32], bias: &[f32]| {
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            for (i, v) in x.iter_mut().enumerate() {
                *v = (*v - mean) / (var + f64::from(c.norm_eps)).sqrt() * f64::from(gain[i])
                    + f64::from(bias[i]);
            }
        };
        let mut x = vec![0f64; t * h];
        for (pos, &id) in ids.iter().enumerate() {
            let id = id as usize;
            for d in 0..h {
                x[pos * h + d] = f64::from(p.words.values[id * h + d])
                    * f64::from(p.words.scales[id])
                    + f64::from(p.token_types[d])
                    + f64::from(p.positions.values[pos * h + d])
                        * f64::from(p.positions.scales[pos]);
            }
            norm(
                &mut x[pos * h..(pos + 1) * h],
                &p.embedding_norm.gain,
                &p.embedding_norm.bias,
            );
        }
        let lin = |x: &[f64], m: &crate::format::Linear, k: usize, n: usize| {
            let mut y = vec![0f64; t * n];
            for r in 0..t {
                for o in 0..n {
                    let mut s = 0f64;
                    for i in 0..k {
                        s +=
                            x[r * k + i] * f64::from(m.weights[i * n + o]) * f64::from(m.scales[o]);
                    }
                    y[r * n + o] = s + f64::from(m.bias[o]);
                }
            }
            y
        };
        let dh = h / c.heads;
        for layer in &p.layers {
            let q = lin(&x, &layer.query, h, h);
            let k = lin(&x, &layer.key, h, h);
            let v = lin(&x, &layer.value, h, h);
            let mut ctx = vec![0f64; t * h];
            for head in 0..c.heads {
                for i in 0..t {
                    let mut s: Vec<f64> = (0..t)
                        .map(|j| {
                            (0..dh)
                                .map(|d| q[i * h + head * dh + d] * k[j * h + head * dh + d])
                                .sum::<f64>()
                                / (dh as f64).sqrt()
                        })
                        .collect();
                    let max = s.iter().cloned().fold(f64::MIN, f64::max);
                    s.iter_mut().for_each(|z| *z = (*z - max).exp());
                    let sum: f64 = s.iter().sum();
                    for d in 0..dh {
                        ctx[i * h + head * dh + d] =
                            (0..t).map(|j| s[j] / sum * v[j * h + head * dh + d]).sum();
                    }
                }
            }
            let mut a = lin(&ctx, &layer.output, h, h);
            for (i, z) in a.iter_mut().enumerate() {
                *z += x[i];
            }
            for r in 0..t {
                norm(
                    &mut a[r * h..(r + 1) * h],
                    &layer.attention_norm.gain,
                    &layer.attention_norm.bias,
                );
            }
            x = a;
            let mut u = lin(&x, &layer.up, h, c.ffn);
            for z in u.iter_mut() {
                *z =
                    *z * 0.5 * (1.0 + f64::from(math::erf((*z / std::f64::consts::SQRT_2) as f32)));
            }
            let mut d = lin(&u, &layer.down, c.ffn, h);
            for (i, z) in d.iter_mut().enumerate() {
                *z += x[i];
            }
            for r in 0..t {
                norm(
                    &mut d[r * h..(r + 1) * h],
                    &layer.output_norm.gain,
                    &layer.output_norm.bias,
                );
            }
            x = d;
        }
        x
    }

    #[test]
    fn the_pass_is_berts_and_batches_change_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.axoemb");
        let parts = tiny_parts(11);
        write(&path, &parts, &[0; SOURCE_LEN]).expect("write");
        let m = Model::open(&path).expect("open");
        let texts = [
            vec![2, 5, 6, 10, 7, 8, 5, 9, 12, 3],
            vec![2, 3],
            vec![
                2, 26, 27, 14, 1, 1, 19, 20, 21, 22, 23, 24, 25, 28, 29, 30, 3,
            ],
        ];
        for ids in &texts {
            let want = reference(&parts, ids);
            let got = m.hidden_states(ids).expect("hidden");
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((f64::from(*a) - b).abs() < 2e-4, "value {i}: {a} vs {b}");
            }
        }
        // A batch gives each text the vector it gets alone.
        let batch = run(&m, &texts).expect("batch");
        for (ids, v) in texts.iter().zip(&batch) {
            let alone = run(&m, std::slice::from_ref(ids)).expect("alone");
            let cos: f32 = alone[0].iter().zip(v).map(|(a, b)| a * b).sum();
            assert!(cos > 0.99999, "{cos}");
            let norm: f32 = v.iter().map(|a| a * a).sum();
            assert!((norm - 1.0).abs() < 1e-5);
        }
        assert!(run(&m, &[]).expect("empty").is_empty());
    }

    #[test]
    fn every_instruction_set_gives_the_same_states() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.axoemb");
        write(&path, &tiny_parts(13), &[0; SOURCE_LEN]).expect("write");
        let m = Model::open(&path).expect("open");
        let texts = [vec![2, 5, 6, 10, 7, 8, 5, 9, 12, 3, 15, 16, 17, 18, 19, 3]];
        let generic =
            team::with_team(Isa::GENERIC, 1, 0, |t| hidden_body(t, &m, &texts)).expect("generic");
        let best = hidden(&m, &texts).expect("best");
        for (a, b) in generic.iter().zip(&best) {
            assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        }
    }

    #[test]
    fn a_pass_split_across_threads_equals_one_threads_bit_for_bit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.axoemb");
        write(&path, &tiny_parts(17), &[0; SOURCE_LEN]).expect("write");
        let m = Model::open(&path).expect("open");
        let texts = [
            vec![2, 5, 6, 10, 7, 8, 5, 9, 12, 3, 15, 16, 17, 18, 19, 3],
            vec![2, 26, 27, 14, 3],
        ];
        let one = hidden_on(&m, &texts, 1, 0).expect("one thread");
        for threads in [2, team::MAX_THREADS] {
            // Every product split, however small.
            let split = hidden_on(&m, &texts, threads, 0).expect("split");
            assert!(
                one.iter()
                    .zip(&split)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{threads} threads"
            );
        }
    }
}
