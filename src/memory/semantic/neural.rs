//! The neural path's scoring: int8 vectors compared by integer dot products.
//!
//! Each unit vector is stored as `scale * q` with `q` in `-127..=127` (one scale per vector),
//! a quarter of the bytes of f32: 100k records are 39 MB, scanned in a few milliseconds.
//! The query is quantized the same way, so a score is `dot(q_query, q_row) * s_query * s_row`,
//! the cosine within about 1e-2.

use axocoatl_store::semantic::vectors::{row_bytes, VectorRow};

/// The int8 form of a vector.
pub fn quantize(v: &[f32]) -> VectorRow {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return VectorRow {
            q: vec![0; v.len()],
            scale: 0.0,
        };
    }
    let scale = max / 127.0;
    VectorRow {
        q: v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
            .collect(),
        scale,
    }
}

/// The `top_k` rows of `data` (rows of [`row_bytes`]`(dim)` bytes as the store lays them
/// out) closest to `query`, best first, as `(row, score)`.
pub fn search(data: &[u8], dim: usize, query: &VectorRow, top_k: usize) -> Vec<(u64, f32)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has the features the function is compiled for.
            #[expect(
                unsafe_code,
                reason = "calling a function compiled for a detected CPU feature"
            )]
            return unsafe { search_avx512(data, dim, query, top_k) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            #[expect(
                unsafe_code,
                reason = "calling a function compiled for a detected CPU feature"
            )]
            return unsafe { search_avx2(data, dim, query, top_k) };
        }
    }
    search_generic(data, dim, query, top_k)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn search_avx512(data: &[u8], dim: usize, query: &VectorRow, top_k: usize) -> Vec<(u64, f32)> {
    search_generic(data, dim, query, top_k)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn search_avx2(data: &[u8], dim: usize, query: &VectorRow, top_k: usize) -> Vec<(u64, f32)> {
    search_generic(data, dim, query, top_k)
}

/// The scan; inlined into each feature-specific copy above so the dot product is
/// vectorized for that CPU.
#[inline(always)]
fn search_generic(data: &[u8], dim: usize, query: &VectorRow, top_k: usize) -> Vec<(u64, f32)> {
    let rb = row_bytes(dim);
    let mut top = TopK::new(top_k);
    if query.q.len() != dim || top_k == 0 {
        return Vec::new();
    }
    for (i, row) in data.chunks_exact(rb).enumerate() {
        let d = dot_bytes(&query.q, &row[..dim]);
        let scale = f32::from_le_bytes([row[dim], row[dim + 1], row[dim + 2], row[dim + 3]]);
        top.push(i as u64, d as f32 * scale * query.scale);
    }
    top.into_sorted()
}

/// The dot product of `a` with the stored bytes `b`, each byte an `i8`.
#[inline(always)]
fn dot_bytes(a: &[i8], b: &[u8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(i8::from_ne_bytes([y])))
        .sum()
}

/// The best `k` of a stream of scores.
pub struct TopK {
    k: usize,
    items: Vec<(u64, f32)>,
    /// The lowest score kept once `items` is full.
    floor: f32,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            items: Vec::with_capacity(k.min(1024) + 1),
            floor: f32::NEG_INFINITY,
        }
    }

    #[inline(always)]
    pub fn push(&mut self, id: u64, score: f32) {
        if self.items.len() == self.k && score <= self.floor {
            return;
        }
        self.push_slow(id, score);
    }

    #[inline(never)]
    fn push_slow(&mut self, id: u64, score: f32) {
        if self.k == 0 || score.is_nan() {
            return;
        }
        // Kept sorted best first; ties keep the earlier record first.
        let at = self.items.partition_point(|&(_, s)| s >= score);
        self.items.insert(at, (id, score));
        self.items.truncate(self.k);
        if self.items.len() == self.k {
            self.floor = self.items[self.k - 1].1;
        }
    }

    pub fn into_sorted(self) -> Vec<(u64, f32)> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn layout(rows: &[VectorRow]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in rows {
            out.extend(r.q.iter().map(|&v| v as u8));
            out.extend_from_slice(&r.scale.to_le_bytes());
            out.extend_from_slice(&[0; 4]);
        }
        out
    }

    #[test]
    fn quantized_scores_are_close_to_cosines_and_ranked() {
        let dim = 64;
        let vecs: Vec<Vec<f32>> = (0..200)
            .map(|i| {
                unit(
                    &(0..dim)
                        .map(|d| ((i * 31 + d * 7) % 23) as f32 - 11.0)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let rows: Vec<VectorRow> = vecs.iter().map(|v| quantize(v)).collect();
        let data = layout(&rows);
        let query = &vecs[17];
        let hits = search(&data, dim, &quantize(query), 5);
        assert_eq!(hits.len(), 5);
        assert_eq!(
            hits[0].0 % 23,
            17,
            "an identical vector (period 23) comes first"
        );
        assert!((hits[0].1 - 1.0).abs() < 0.02, "{}", hits[0].1);
        for &(i, s) in &hits {
            let exact: f32 = vecs[i as usize].iter().zip(query).map(|(a, b)| a * b).sum();
            assert!((exact - s).abs() < 0.02, "row {i}: {s} vs {exact}");
        }
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        assert!(search(&data, dim, &quantize(query), 0).is_empty());
    }

    #[test]
    fn top_k_keeps_the_best() {
        let mut t = TopK::new(3);
        for (i, s) in [0.1, 0.9, 0.5, 0.7, 0.2, 0.9].into_iter().enumerate() {
            t.push(i as u64, s);
        }
        assert_eq!(t.into_sorted(), vec![(1, 0.9), (5, 0.9), (3, 0.7)]);
    }
}
