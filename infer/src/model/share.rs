//! How the parts of a pass's step that split without changing a bit run: the rows of a matrix
//! product and the heads of the attention. Each part's values are computed by the same
//! instructions whichever thread computes them, so sharing them never changes a result.
//!
//! A prompt's pass shares whole groups of tokens between threads and runs each step's parts
//! [`Alone`]. A single token (generation) has no groups to share, so a [`Gang`] hands the parts
//! of each step to the pool's workers: each thread takes the parts of its own run in order, then
//! what is left of the others' runs (see [`take`]), and the step waits only for the parts a
//! worker took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::kernel::{self, Isa, MatRef};
use crate::pool::Pool;
use crate::quant::Acts;

/// A part's work: its index, its share of the output and a scratch buffer of its thread.
pub(super) type Part<'f> = dyn Fn(usize, &mut [f32], &mut Vec<f32>) + Sync + 'f;

pub(super) trait Share {
    /// Runs `part(i, out_i, scratch)` for each part `i` of `out` cut into runs of `width`
    /// values (the last may be shorter).
    fn parts(&mut self, out: &mut [f32], width: usize, part: &Part<'_>);

    /// `kernel::matmul`, its rows shared when `x` is one row (a batch's rows are interleaved
    /// in `out`, and a batch's pass shares its groups instead).
    fn matmul(&mut self, isa: Isa, w: &MatRef<'_>, x: &Acts, out: &mut [f32]) {
        if x.rows != 1 {
            kernel::matmul(isa, w, x, out);
            return;
        }
        self.parts(&mut out[..w.rows], ROWS, &|i, out, _| {
            kernel::matmul(isa, &w.rows_from(i * ROWS, out.len()), x, out);
        });
    }
}

/// Rows of a matrix product a part takes: 32 rows of 576 values are ~3 µs of work, so taking
/// one costs a few percent of it at most.
const ROWS: usize = 32;

/// Every part on the calling thread, in order.
#[derive(Default)]
pub(super) struct Alone {
    scratch: Vec<f32>,
}

impl Share for Alone {
    fn parts(&mut self, out: &mut [f32], width: usize, part: &Part<'_>) {
        Alone::parts_with(out, width, part, &mut self.scratch);
    }

    fn matmul(&mut self, isa: Isa, w: &MatRef<'_>, x: &Acts, out: &mut [f32]) {
        kernel::matmul(isa, w, x, out);
    }
}

impl Alone {
    fn parts_with(out: &mut [f32], width: usize, part: &Part<'_>, scratch: &mut Vec<f32>) {
        for (i, out) in out.chunks_mut(width).enumerate() {
            part(i, out, scratch);
        }
    }
}

/// The calling thread and `helpers` workers of a pool, sharing the parts of each step.
pub(super) struct Gang<'p> {
    pool: &'p mut Pool,
    helpers: usize,
    scratch: Vec<Mutex<Vec<f32>>>,
    /// Each thread's run of parts, `[first, end)` packed as `first << 32 | end`.
    ranges: Vec<AtomicU64>,
}

impl<'p> Gang<'p> {
    pub(super) fn new(pool: &'p mut Pool, helpers: usize) -> Self {
        Gang {
            pool,
            helpers,
            scratch: (0..=helpers).map(|_| Mutex::default()).collect(),
            ranges: (0..=helpers).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn pack(first: usize, end: usize) -> u64 {
    ((first as u64) << 32) | end as u64
}

fn unpack(v: u64) -> (usize, usize) {
    ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
}

/// The next part for thread `me`: the first left of its own run, else the last left of
/// another's. Each thread starts with an equal run of neighbouring parts and goes through it
/// in order, so it reads its share of a matrix front to back, as one thread would read the
/// whole (the memory system sees one stream per thread: handing out parts one after the
/// other from a single counter, which interleaves the threads' parts, generated 110 tokens/s
/// where this does 170 on 2 cores). A thread done with its run takes from the end of
/// another's, so a thread the system is not running holds back only the part it took.
fn take(ranges: &[AtomicU64], me: usize) -> Option<usize> {
    let n = ranges.len();
    for k in 0..n {
        let range = &ranges[(me + k) % n];
        let mut v = range.load(Ordering::Acquire);
        loop {
            let (first, end) = unpack(v);
            if first >= end {
                break;
            }
            let (next, part) = if k == 0 {
                (pack(first + 1, end), first)
            } else {
                (pack(first, end - 1), end - 1)
            };
            match range.compare_exchange_weak(v, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(part),
                Err(now) => v = now,
            }
        }
    }
    None
}

/// `out` as the threads of a [`Gang`] see it: each writes the runs whose index [`take`] gave
/// it.
struct Runs {
    base: *mut f32,
    len: usize,
    width: usize,
}

#[expect(
    unsafe_code,
    reason = "threads write disjoint runs of one buffer, each run handed out once by `take`"
)]
// SAFETY: `Runs` is only used through `Runs::run`, whose callers take distinct indices.
unsafe impl Sync for Runs {}

impl Runs {
    /// Run `i`.
    ///
    /// # Safety
    /// No other reference to run `i` may exist while the returned one lives.
    #[expect(unsafe_code, reason = "see `Runs`")]
    #[expect(
        clippy::mut_from_ref,
        reason = "each run is handed out once; the safety contract says so"
    )]
    unsafe fn run(&self, i: usize) -> &mut [f32] {
        let start = i * self.width;
        let len = self.width.min(self.len - start);
        // SAFETY: `start + len <= self.len`, within the buffer `Gang::parts` borrows mutably
        // for as long as `Runs` lives; the caller holds the only reference to this run.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(start), len) }
    }
}

impl Share for Gang<'_> {
    #[expect(unsafe_code, reason = "see `Runs`")]
    fn parts(&mut self, out: &mut [f32], width: usize, part: &Part<'_>) {
        let count = out.len().div_ceil(width);
        if count <= 1 || self.helpers == 0 {
            let mut scratch = self.scratch[0]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            return Alone::parts_with(out, width, part, &mut scratch);
        }
        let runs = Runs {
            base: out.as_mut_ptr(),
            len: out.len(),
            width,
        };
        let threads = self.ranges.len();
        for (k, range) in self.ranges.iter().enumerate() {
            range.store(
                pack(k * count / threads, (k + 1) * count / threads),
                Ordering::Relaxed,
            );
        }
        let (scratch, ranges) = (&self.scratch, &self.ranges[..]);
        // The pool's lock hands the ranges to the workers with the job.
        self.pool.run(self.helpers, &|thread| {
            let mut scratch = scratch[thread]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            while let Some(i) = take(ranges, thread) {
                // SAFETY: `take` gives each index once, so this thread holds the only
                // reference to run `i`; `out` stays borrowed until `run` returns, after every
                // thread has left the job.
                part(i, unsafe { runs.run(i) }, &mut scratch);
            }
        });
    }
}

/// The pool of a model's workers, and the pace of its last generated tokens.
#[derive(Default)]
pub(super) struct Workers {
    pub pool: Pool,
    pub pace: Pace,
}

/// Whether a token's steps are shared: by the pace of the last tokens each way. On idle
/// cores sharing is faster (1.6-1.8× on 2 cores); on cores other processes keep busy, the
/// system runs each thread part of the time, and a thread waiting for the other (the caller
/// for a worker's part, a worker for the next step) spends its time spinning or gets the core
/// after the others: 2 threads generated at 0.7-0.9× of one there. So each token runs the
/// way whose recent tokens were faster, and every [`PROBE`]th token runs the other way, to see
/// whether the machine changed.
#[derive(Default)]
pub(super) struct Pace {
    /// Recent times of a token, shared and alone, in seconds (0 before the first).
    shared: f64,
    alone: f64,
    tokens: u32,
    /// Tests choose the way.
    #[cfg(test)]
    pub fixed: Option<bool>,
}

/// How often a token runs the way that was slower.
const PROBE: u32 = 64;

impl Pace {
    /// Whether this token's steps are shared.
    pub(super) fn share(&mut self) -> bool {
        #[cfg(test)]
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        self.tokens = self.tokens.wrapping_add(1);
        if self.shared == 0.0 || self.alone == 0.0 {
            // The first token shares; the second runs alone.
            return self.shared == 0.0;
        }
        let faster = self.shared <= self.alone;
        if self.tokens.is_multiple_of(PROBE) {
            !faster
        } else {
            faster
        }
    }

    /// A token took `wall`, `shared` or not.
    pub(super) fn record(&mut self, shared: bool, wall: Duration) {
        let recent = if shared {
            &mut self.shared
        } else {
            &mut self.alone
        };
        let t = wall.as_secs_f64();
        // A weighted mean of the last few tokens: one token's time on a busy machine swings 3×.
        *recent = if *recent == 0.0 {
            t
        } else {
            0.75 * *recent + 0.25 * t
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    /// Runs parts of `len` values of width `width` on `helpers` workers; each part writes its
    /// index and notes the thread that ran it. `slow` makes worker 1 sleep in its first part.
    fn run(pool: &mut Pool, helpers: usize, len: usize, width: usize, slow: bool) -> Vec<usize> {
        let mut gang = Gang::new(pool, helpers);
        let mut out = vec![f32::NAN; len];
        let by = Mutex::new(vec![usize::MAX; len.div_ceil(width)]);
        let slept = AtomicBool::new(false);
        gang.parts(&mut out, width, &|i, part, _| {
            let thread = (0..=helpers)
                .find(|&t| std::thread::current().name() == thread_name(t).as_deref())
                .unwrap_or(0);
            if slow {
                // Parts long enough for a worker to start and join.
                std::thread::sleep(Duration::from_micros(100));
                if thread == 1 && !slept.swap(true, Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
            part.fill(i as f32);
            let mut by = by.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(by[i], usize::MAX, "part {i} ran twice");
            by[i] = thread;
        });
        for (v, want) in out.iter().zip((0..len).map(|v| (v / width) as f32)) {
            assert_eq!(
                *v, want,
                "a value was written by the wrong part or not at all"
            );
        }
        by.into_inner().unwrap_or_else(PoisonError::into_inner)
    }

    fn thread_name(t: usize) -> Option<String> {
        (t > 0).then(|| format!("axocoatl-infer-{t}"))
    }

    #[test]
    fn every_part_runs_once_whatever_the_workers() {
        let mut pool = Pool::default();
        for helpers in [0, 1, 2, 3] {
            for (len, width) in [(1000, 7), (64, 32), (5, 32), (96, 32), (9 * 64, 64)] {
                let by = run(&mut pool, helpers, len, width, false);
                assert!(by.iter().all(|&t| t <= helpers));
            }
        }
    }

    #[test]
    fn the_caller_takes_the_parts_of_a_worker_that_does_not_run() {
        let mut pool = Pool::default();
        // Worker 1 sleeps 300 ms in its first part, longer than the rest of the work (200
        // parts of ~100 µs); the caller does its own run, then everything of the worker's but
        // the part it holds.
        let mut ran = false;
        for _ in 0..20 {
            let by = run(&mut pool, 1, 2000, 10, true);
            let of_worker = by.iter().filter(|&&t| t == 1).count();
            if of_worker > 0 {
                assert_eq!(
                    of_worker, 1,
                    "the sleeping worker took only one part: {by:?}"
                );
                ran = true;
                break;
            }
        }
        assert!(ran, "the worker never joined a job in 20 tries");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_pace_shares_a_token_when_its_recent_tokens_were_faster_that_way() {
        let mut pace = Pace::default();
        assert!(pace.share(), "the first token shares");
        pace.record(true, ms(6));
        assert!(!pace.share(), "the second runs alone");
        pace.record(false, ms(10));
        let mut ways = Vec::new();
        for _ in 0..200 {
            let shared = pace.share();
            ways.push(shared);
            pace.record(shared, ms(if shared { 6 } else { 10 }));
        }
        let alone = ways.iter().filter(|&&s| !s).count();
        assert!(
            (2..=4).contains(&alone),
            "one token in {PROBE} tries the slower way: {alone}"
        );
        // The machine gets busy: shared tokens now take 15 ms, and the pace turns within a
        // few tokens.
        let mut turned = None;
        for n in 0..10 {
            let shared = pace.share();
            if !shared {
                turned = Some(n);
                break;
            }
            pace.record(true, ms(15));
        }
        assert!(
            turned.is_some_and(|n| n <= 4),
            "turned after {turned:?} tokens"
        );
        // And back, at a probe, once sharing is fast again.
        let mut back = None;
        for n in 0..2 * PROBE {
            let shared = pace.share();
            pace.record(shared, ms(if shared { 5 } else { 10 }));
            if shared && back.is_none() {
                back = Some(n);
            }
        }
        assert!(
            back.is_some_and(|n| n <= PROBE),
            "came back after {back:?} tokens"
        );
        assert!(pace.share(), "sharing again");
    }
}
