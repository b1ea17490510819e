//! One forward pass over a batch of new tokens, as items that threads take in turn.
//!
//! The batch is cut into groups of [`GROUP`] tokens, the kernels' batch (each weight row is
//! read from memory once per group). Every step of a layer is a token's own except the
//! attention, where a token reads the keys and values of the positions before it, and only
//! those (causal attention). So a group goes through the model as a chain of items: item
//! `(s, g)` takes group `g` through the second half of layer `s - 1` (the attention, the
//! output projection and the feed-forward) and the first half of layer `s` (the norm and the
//! queries, keys and values, whose keys and values it publishes). It waits only for the keys
//! and values of layer `s - 1` of the groups up to its own. Threads take items in order from
//! a counter: a thread that finds its item's keys not yet published sleeps until they are
//! (never spinning), and threads meet only there, about once per layer, instead of after
//! every matrix product; a thread the system is not running holds back only the item it
//! took, and the others take the rest.
//!
//! Each value is computed by the same instructions in the same order whatever thread computes
//! it and however many there are (the attention reads its positions segment by segment, in
//! order, which adds them up as one contiguous run would), so the thread count never changes
//! a result.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use super::share::{Alone, Share};
use super::{Layer, Model};
use crate::cache::Cache;
use crate::kernel::{self, GROUP};
use crate::quant::{self, Acts};

/// The keys and values of one group at one layer, in half precision as the cache holds them.
pub(super) struct Kv {
    pub keys: Vec<u16>,
    pub values: Vec<u16>,
}

/// A group's state between its items: its hidden states and the queries of the layer whose
/// attention comes next.
struct Group {
    /// Its first token's index in the batch.
    first: usize,
    x: Vec<f32>,
    q: Vec<f32>,
}

/// Buffers of one thread, reused from item to item.
#[derive(Default)]
struct Work {
    normed: Vec<f32>,
    acts: Acts,
    k: Vec<f32>,
    v: Vec<f32>,
    out: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
}

pub(super) struct Pass<'a> {
    model: &'a Model,
    /// The positions before the batch (read only while the pass runs).
    cache: &'a Cache,
    start: usize,
    /// `(cos, sin)` of every pair of every new position.
    rope: Vec<(f32, f32)>,
    groups: Vec<Mutex<Group>>,
    /// Keys and values of group `g` at layer `l`, at `l · groups + g`, set once.
    kv: Vec<OnceLock<Kv>>,
    /// The next item to take: `stage · groups + group`.
    next: AtomicUsize,
    /// Set when a thread panicked inside the pass: the others stop waiting.
    aborted: Mutex<bool>,
    published: Condvar,
    work: Vec<Mutex<Work>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a thread of this pass panicked; the pass is then abandoned and the
    // panic raised again by the pool, so what the lock holds is never used as a result.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'a> Pass<'a> {
    /// A pass reading `tokens` after the positions of `cache`, for up to `threads` threads.
    pub(super) fn new(model: &'a Model, cache: &'a Cache, tokens: &[u32], threads: usize) -> Self {
        let c = &model.config;
        let e = c.embedding;
        let embedding = model.mat(&model.embedding);
        let groups: Vec<Mutex<Group>> = tokens
            .chunks(GROUP)
            .enumerate()
            .map(|(i, chunk)| {
                let mut x = vec![0f32; chunk.len() * e];
                for (row, &t) in x.chunks_exact_mut(e).zip(chunk) {
                    quant::dequantize_row(embedding.kind, embedding.row(t as usize), row);
                }
                Mutex::new(Group {
                    first: i * GROUP,
                    x,
                    q: Vec::new(),
                })
            })
            .collect();
        let start = cache.len();
        let groups_len = groups.len();
        Pass {
            model,
            cache,
            start,
            rope: model.rope_table(start, tokens.len()),
            kv: (0..c.layers * groups.len())
                .map(|_| OnceLock::new())
                .collect(),
            groups,
            next: AtomicUsize::new(0),
            aborted: Mutex::new(false),
            published: Condvar::new(),
            work: (0..threads.clamp(1, groups_len))
                .map(|_| Mutex::default())
                .collect(),
        }
    }

    /// How many threads can work at once: one per group at most.
    pub(super) fn threads(&self) -> usize {
        self.work.len()
    }

    /// Takes items until none is left; `thread` (below [`Pass::threads`]) names the buffers.
    pub(super) fn run(&self, thread: usize) {
        self.run_sharing(thread, &mut Alone::default());
    }

    /// [`Pass::run`], each step's parts run by `share`.
    pub(super) fn run_sharing(&self, thread: usize, share: &mut dyn Share) {
        let Some(work) = self.work.get(thread) else {
            return;
        };
        let mut w = lock(work);
        let _abort = AbortOnPanic(self);
        let groups = self.groups.len();
        let items = (self.model.layers.len() + 1) * groups;
        loop {
            let item = self.next.fetch_add(1, Ordering::Relaxed);
            if item >= items || !self.item(&mut w, share, item / groups, item % groups) {
                return;
            }
        }
    }

    /// The keys and values of every layer (layer by layer, group by group) and the hidden
    /// state of the batch's last token, once every item is done.
    pub(super) fn finish(self) -> (Vec<Kv>, Vec<f32>) {
        let e = self.model.config.embedding;
        let last = self
            .groups
            .last()
            .map(|g| {
                let x = &lock(g).x;
                x[x.len() - e..].to_vec()
            })
            .unwrap_or_default();
        let kv = self
            .kv
            .into_iter()
            .filter_map(OnceLock::into_inner)
            .collect();
        (kv, last)
    }

    /// Item `(stage, g)`; false when the pass was abandoned.
    fn item(&self, w: &mut Work, share: &mut dyn Share, stage: usize, g: usize) -> bool {
        let layers = &self.model.layers;
        let ready = if stage == 0 {
            Vec::new()
        } else {
            match self.wait_for(stage - 1, g) {
                Some(ready) => ready,
                None => return false,
            }
        };
        let mut group = lock(&self.groups[g]);
        if stage > 0 {
            let layer = &layers[stage - 1];
            self.attention(layer, stage - 1, &ready, &mut group, w, share);
            self.feed_forward(layer, &mut group, w, share);
        }
        let kv = layers
            .get(stage)
            .map(|layer| self.project(layer, &mut group, w, share));
        drop(group);
        if let Some(kv) = kv {
            // Only this item sets this cell.
            drop(self.kv[stage * self.groups.len() + g].set(kv));
            let _guard = lock(&self.aborted);
            self.published.notify_all();
        }
        true
    }

    /// The keys and values of layer `l` of groups `0..=g`, waiting until they are published;
    /// `None` when the pass was abandoned.
    fn wait_for(&self, l: usize, g: usize) -> Option<Vec<&Kv>> {
        let cells = &self.kv[l * self.groups.len()..][..=g];
        let ready = || cells.iter().map(OnceLock::get).collect::<Option<Vec<_>>>();
        if let Some(ready) = ready() {
            return Some(ready);
        }
        let mut aborted = lock(&self.aborted);
        loop {
            if *aborted {
                return None;
            }
            if let Some(ready) = ready() {
                return Some(ready);
            }
            aborted = self
                .published
                .wait(aborted)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The norm before the attention, the queries (kept in the group) and the keys and values
    /// (returned), rotated by their positions.
    fn project(&self, layer: &Layer, group: &mut Group, w: &mut Work, share: &mut dyn Share) -> Kv {
        let m = self.model;
        let c = &m.config;
        let (e, hd, kvw) = (c.embedding, c.head_dim, c.kv_width());
        let qw = c.heads * hd;
        let n = group.x.len() / e;
        norm_into_acts(&group.x, &layer.attn_norm, c.rms_eps, e, w);
        group.q.resize(n * qw, 0.0);
        w.k.resize(n * kvw, 0.0);
        w.v.resize(n * kvw, 0.0);
        share.matmul(m.isa, &m.mat(&layer.q), &w.acts, &mut group.q);
        share.matmul(m.isa, &m.mat(&layer.k), &w.acts, &mut w.k);
        share.matmul(m.isa, &m.mat(&layer.v), &w.acts, &mut w.v);
        let pairs = hd / 2;
        for t in 0..n {
            let at = (group.first + t) * pairs;
            let table = &self.rope[at..at + pairs];
            for head in group.q[t * qw..(t + 1) * qw].chunks_exact_mut(hd) {
                apply_rope(head, table);
            }
            for head in w.k[t * kvw..(t + 1) * kvw].chunks_exact_mut(hd) {
                apply_rope(head, table);
            }
        }
        Kv {
            keys: w.k.iter().map(|&x| quant::f32_to_f16(x)).collect(),
            values: w.v.iter().map(|&x| quant::f32_to_f16(x)).collect(),
        }
    }

    /// The attention of the group's tokens over the positions before each (the cache's, then
    /// the batch's groups in `ready`), its output projection, added to the hidden states.
    fn attention(
        &self,
        layer: &Layer,
        l: usize,
        ready: &[&Kv],
        group: &mut Group,
        w: &mut Work,
        share: &mut dyn Share,
    ) {
        let m = self.model;
        let c = &m.config;
        let (e, hd, kvw) = (c.embedding, c.head_dim, c.kv_width());
        let qw = c.heads * hd;
        let n = group.x.len() / e;
        let (old_keys, old_values) = self.cache.layer(l);
        let heads_per_kv = c.heads / c.kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        w.out.clear();
        w.out.resize(n * qw, 0.0);
        for t in 0..n {
            // Positions this token sees: the cache's, then the batch's up to itself, in order.
            let visible = self.start + group.first + t + 1;
            let segments = || {
                let own = ready.len() - 1;
                std::iter::once((old_keys, old_values, self.start))
                    .chain(ready.iter().enumerate().map(move |(h, kv)| {
                        let rows = if h == own { t + 1 } else { kv.keys.len() / kvw };
                        (&kv.keys[..], &kv.values[..], rows)
                    }))
                    .filter(|&(_, _, rows)| rows > 0)
            };
            let queries = &group.q[t * qw..(t + 1) * qw];
            // Each head's output is its own run of `hd` values.
            share.parts(&mut w.out[t * qw..(t + 1) * qw], hd, &|h, out, scores| {
                let kv = (h / heads_per_kv) * hd;
                let q = &queries[h * hd..(h + 1) * hd];
                scores.resize(visible, 0.0);
                let mut at = 0;
                for (keys, _, rows) in segments() {
                    let out = &mut scores[at..at + rows];
                    kernel::scores_f16(m.isa, q, keys, kvw, kv, scale, out);
                    at += rows;
                }
                softmax(scores);
                let mut at = 0;
                for (_, values, rows) in segments() {
                    let weights = &scores[at..at + rows];
                    kernel::weighted_sum_f16(m.isa, weights, values, kvw, kv, out);
                    at += rows;
                }
            });
        }
        w.acts.quantize(&w.out, n, qw);
        w.proj.resize(n * e, 0.0);
        share.matmul(m.isa, &m.mat(&layer.o), &w.acts, &mut w.proj);
        for (a, b) in group.x.iter_mut().zip(&w.proj) {
            *a += b;
        }
    }

    fn feed_forward(&self, layer: &Layer, group: &mut Group, w: &mut Work, share: &mut dyn Share) {
        let m = self.model;
        let c = &m.config;
        let (e, ff) = (c.embedding, c.feed_forward);
        let n = group.x.len() / e;
        norm_into_acts(&group.x, &layer.ffn_norm, c.rms_eps, e, w);
        w.gate.resize(n * ff, 0.0);
        w.up.resize(n * ff, 0.0);
        share.matmul(m.isa, &m.mat(&layer.gate), &w.acts, &mut w.gate);
        share.matmul(m.isa, &m.mat(&layer.up), &w.acts, &mut w.up);
        for (g, u) in w.gate.iter_mut().zip(&w.up) {
            *g = *g / (1.0 + (-*g).exp()) * u;
        }
        w.acts.quantize(&w.gate, n, ff);
        w.proj.resize(n * e, 0.0);
        share.matmul(m.isa, &m.mat(&layer.down), &w.acts, &mut w.proj);
        for (a, b) in group.x.iter_mut().zip(&w.proj) {
            *a += b;
        }
    }
}

/// Abandons the pass when the thread holding it unwinds, so that no other thread waits for
/// keys and values the panicking one will never publish.
struct AbortOnPanic<'p, 'a>(&'p Pass<'a>);

impl Drop for AbortOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *lock(&self.0.aborted) = true;
            self.0.published.notify_all();
        }
    }
}

/// Each row of `x` (`e` wide) normalized by `weight` into `w.normed`, then quantized into
/// `w.acts`: the input of a layer's first products and of its feed-forward.
fn norm_into_acts(x: &[f32], weight: &[f32], eps: f32, e: usize, w: &mut Work) {
    let n = x.len() / e;
    w.normed.resize(n * e, 0.0);
    for (row, out) in x.chunks_exact(e).zip(w.normed.chunks_exact_mut(e)) {
        rms_norm(row, weight, eps, out);
    }
    w.acts.quantize(&w.normed, n, e);
}

pub(super) fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * scale * w;
    }
}

/// Rotates each pair `(2j, 2j + 1)` of a head's values by its angle (GGML's "normal" rope,
/// the one llama files are converted for).
fn apply_rope(head: &mut [f32], table: &[(f32, f32)]) {
    for (pair, &(cos, sin)) in head.chunks_exact_mut(2).zip(table) {
        let (a, b) = (pair[0], pair[1]);
        pair[0] = a * cos - b * sin;
        pair[1] = a * sin + b * cos;
    }
}

fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}
