//! The forward pass's matrix products split across the CPU's cores.
//!
//! A [`Team`] lives for one forward pass: the calling thread and up to [`MAX_THREADS`] − 1
//! helpers spawned in a [`std::thread::scope`]. Each product (or each group of independent
//! products: a layer's query, key and value) is cut into chunks of [`CHUNK_COLUMNS`] output
//! columns over all rows, and every thread takes chunks from one counter until none is left.
//! The caller takes chunks too and never waits for a helper that has not started, so on a
//! busy machine a product costs what it costs on one thread; it only waits for the chunks a
//! helper is computing (a few microseconds each).
//!
//! A chunk runs [`kernel::linear_columns`], which computes each output value with the same
//! instructions in the same order whatever the columns: the vectors are bit for bit those of
//! one thread.
//!
//! On this project's 2-core machine two threads make a 14-token pass 1.0–1.4 ms instead
//! of 1.8–2.7 ms, with the same CPU time. Handing work to a helper costs microseconds, so a product
//! (or group) below [`MIN_SPLIT`] multiply-adds stays on the calling thread: one 384 × 384
//! product of under 14 tokens; splitting at 1 M, 2 M or 5 M multiply-adds timed the same
//! within noise. Between two products a helper spins for [`SPIN`] before it sleeps: the gaps
//! within a pass (attention, layer norms) are shorter than waking it again.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::format::LinearRef;
use crate::kernel::{self, Isa};

/// Most threads a pass uses (the caller included).
pub const MAX_THREADS: usize = 4;

/// Output columns per chunk: two AVX-512 column blocks.
pub const CHUNK_COLUMNS: usize = 64;

/// Fewest multiply-adds (rows × inputs × outputs, over the products handed over together)
/// worth splitting.
pub const MIN_SPLIT: usize = 2_000_000;

/// How long a helper keeps looking for the next product before it sleeps.
const SPIN: Duration = Duration::from_micros(100);

/// `published` when the pass is over.
const QUIT: u64 = u64::MAX;

/// Threads a pass over `rows` tokens in all uses: one when its products are too small to
/// split, else the CPUs this process may run on (its affinity mask), at most
/// [`MAX_THREADS`].
pub fn threads_for(rows: usize, hidden: usize) -> usize {
    if rows * hidden * hidden * 3 < MIN_SPLIT {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// One product to compute: `y = x · m` over `rows` rows.
pub struct Product<'x, 'm> {
    pub x: &'x [f32],
    pub m: LinearRef<'m>,
    pub y: &'x mut [f32],
}

/// What a helper needs of one product: its pointers outlive the product only while the
/// caller waits for every chunk (see [`Team::run`]).
#[derive(Clone, Copy)]
struct Part<'m> {
    x: *const f32,
    x_len: usize,
    m: LinearRef<'m>,
    y: *mut f32,
}

#[derive(Clone, Copy)]
struct Job<'m> {
    isa: Isa,
    rows: usize,
    parts: [Option<Part<'m>>; 3],
    chunks: usize,
}

#[expect(
    unsafe_code,
    reason = "sending the raw pointers of a product to the helpers"
)]
// SAFETY: a job's pointers are to buffers the caller of `Team::run` borrows (the inputs
// shared, the outputs exclusively) until every chunk of the job is done; threads write
// disjoint column ranges of the outputs.
unsafe impl Send for Job<'_> {}

impl Job<'_> {
    /// Product and column range of chunk `c`.
    fn chunk(&self, mut c: usize) -> Option<(Part<'_>, std::ops::Range<usize>)> {
        for part in self.parts.iter().flatten() {
            let n = part.m.outputs.div_ceil(CHUNK_COLUMNS);
            if c < n {
                let start = c * CHUNK_COLUMNS;
                return Some((*part, start..(start + CHUNK_COLUMNS).min(part.m.outputs)));
            }
            c -= n;
        }
        None
    }

    fn run_chunk(&self, c: usize) {
        if let Some((p, cols)) = self.chunk(c) {
            // SAFETY: `x` holds `x_len` values the caller keeps alive and unchanged until
            // the job is done; the shapes passed `kernel::check`; no other thread computes
            // chunk `c`, so nothing else touches these columns of `y` meanwhile.
            #[expect(unsafe_code, reason = "one chunk of a product, see above")]
            unsafe {
                let x = std::slice::from_raw_parts(p.x, p.x_len);
                kernel::linear_columns(self.isa, x, self.rows, &p.m, p.y, cols);
            }
        }
    }
}

struct State<'m> {
    job: Option<Job<'m>>,
    generation: u64,
    /// Helpers waiting on the condition variable.
    sleeping: usize,
}

/// The threads of one forward pass. Made by [`with_team`].
pub struct Team<'m> {
    isa: Isa,
    helpers: usize,
    /// Products smaller than this many multiply-adds are not split.
    min_split: usize,
    state: Mutex<State<'m>>,
    wake: Condvar,
    /// The generation of the newest job, or [`QUIT`]; read by spinning helpers.
    published: AtomicU64,
    /// The job's generation (high 32 bits) and its next chunk (low 32 bits): a helper
    /// holding an older job's copy cannot take a chunk of a newer one.
    claim: AtomicU64,
    done: AtomicUsize,
}

/// Runs `f` with a team of `threads` threads (the caller and `threads - 1` helpers) using
/// the kernels of `isa`, splitting products of at least `min_split` multiply-adds.
pub fn with_team<'m, R>(
    isa: Isa,
    threads: usize,
    min_split: usize,
    f: impl FnOnce(&Team<'m>) -> R,
) -> R {
    let team = Team {
        isa,
        helpers: threads.clamp(1, MAX_THREADS) - 1,
        min_split,
        state: Mutex::new(State {
            job: None,
            generation: 0,
            sleeping: 0,
        }),
        wake: Condvar::new(),
        published: AtomicU64::new(0),
        claim: AtomicU64::new(0),
        done: AtomicUsize::new(0),
    };
    if team.helpers == 0 {
        return f(&team);
    }
    std::thread::scope(|s| {
        for _ in 0..team.helpers {
            s.spawn(|| team.help());
        }
        let r = f(&team);
        team.lock().generation = QUIT;
        team.published.store(QUIT, Ordering::Release);
        team.wake.notify_all();
        r
    })
}

impl<'m> Team<'m> {
    fn lock(&self) -> MutexGuard<'_, State<'m>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Computes each of `products` (at most three, independent of each other) over `rows`
    /// rows, split across the team when they are big enough.
    pub fn run(&self, rows: usize, products: &mut [Product<'_, 'm>]) {
        assert!(
            products.len() <= 3,
            "a team runs at most three products at once"
        );
        let mut work = 0;
        for p in products.iter() {
            kernel::check(p.x, rows, &p.m, p.y.len());
            work += rows * p.m.inputs * p.m.outputs;
        }
        if self.helpers == 0 || work < self.min_split {
            for p in products.iter_mut() {
                kernel::linear(self.isa, p.x, rows, &p.m, p.y);
            }
            return;
        }
        let mut parts = [None; 3];
        let mut chunks = 0;
        for (slot, p) in parts.iter_mut().zip(products.iter_mut()) {
            chunks += p.m.outputs.div_ceil(CHUNK_COLUMNS);
            *slot = Some(Part {
                x: p.x.as_ptr(),
                x_len: p.x.len(),
                m: p.m,
                y: p.y.as_mut_ptr(),
            });
        }
        let job = Job {
            isa: self.isa,
            rows,
            parts,
            chunks,
        };
        let generation = {
            let mut state = self.lock();
            state.generation += 1;
            state.job = Some(job);
            self.done.store(0, Ordering::Relaxed);
            self.claim.store(state.generation << 32, Ordering::Release);
            self.published.store(state.generation, Ordering::Release);
            if state.sleeping > 0 {
                self.wake.notify_all();
            }
            state.generation
        };
        let mut mine = 0;
        while let Some(c) = self.take(generation, chunks) {
            job.run_chunk(c);
            mine += 1;
        }
        // The helpers' chunks under way: the borrows of `products` end only after them.
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) + mine < chunks {
            spins += 1;
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// The next chunk of job `generation`, if any is left.
    fn take(&self, generation: u64, chunks: usize) -> Option<usize> {
        let mut c = self.claim.load(Ordering::Acquire);
        loop {
            let next = (c & 0xffff_ffff) as usize;
            if c >> 32 != generation || next >= chunks {
                return None;
            }
            match self
                .claim
                .compare_exchange_weak(c, c + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(next),
                Err(now) => c = now,
            }
        }
    }

    /// A helper's life: wait for a job, take its chunks, until the pass is over.
    fn help(&self) {
        let mut seen = 0;
        loop {
            let started = Instant::now();
            let mut spins = 0u32;
            while self.published.load(Ordering::Acquire) == seen {
                spins += 1;
                if spins.is_multiple_of(64) && started.elapsed() > SPIN {
                    break;
                }
                std::hint::spin_loop();
            }
            let job = {
                let mut state = self.lock();
                while state.generation == seen {
                    state.sleeping += 1;
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                    state.sleeping -= 1;
                }
                if state.generation == QUIT {
                    return;
                }
                seen = state.generation;
                state.job
            };
            let Some(job) = job else { continue };
            while let Some(c) = self.take(seen, job.chunks) {
                job.run_chunk(c);
                self.done.fetch_add(1, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(k: usize, n: usize, seed: usize) -> (Vec<u8>, Vec<f32>, Vec<f32>) {
        let w = (0..k * n).map(|i| ((i * 37 + seed) % 251) as u8).collect();
        let s = (0..n).map(|o| 0.01 + (o + seed) as f32 * 1e-4).collect();
        let b = (0..n).map(|o| o as f32 * 0.1 - 3.0).collect();
        (w, s, b)
    }

    #[test]
    fn split_products_equal_one_threads_bit_for_bit() {
        let (k, n) = (384, 1536);
        let mats: Vec<_> = (0..3).map(|i| matrix(k, n, i)).collect();
        let refs: Vec<LinearRef<'_>> = mats
            .iter()
            .map(|(w, s, b)| LinearRef {
                weights: w,
                inputs: k,
                outputs: n,
                scales: s,
                bias: b,
            })
            .collect();
        let isa = Isa::detect();
        for rows in [1, 4, 11, 27] {
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                .collect();
            let alone: Vec<Vec<f32>> = refs
                .iter()
                .map(|m| {
                    let mut y = vec![0f32; rows * n];
                    kernel::linear(isa, &x, rows, m, &mut y);
                    y
                })
                .collect();
            for threads in [2, 3, MAX_THREADS] {
                let mut ys = vec![vec![f32::NAN; rows * n]; 3];
                with_team(isa, threads, 0, |team| {
                    // Several jobs in a row, as a pass hands them over.
                    for _ in 0..3 {
                        let [a, b, c] = &mut ys[..] else {
                            unreachable!()
                        };
                        let mut products = [
                            Product {
                                x: &x,
                                m: refs[0],
                                y: a,
                            },
                            Product {
                                x: &x,
                                m: refs[1],
                                y: b,
                            },
                            Product {
                                x: &x,
                                m: refs[2],
                                y: c,
                            },
                        ];
                        team.run(rows, &mut products);
                    }
                });
                for (got, want) in ys.iter().zip(&alone) {
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{rows} rows on {threads} threads differ");
                }
            }
        }
    }
}
