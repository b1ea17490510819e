//! The threads a model shares a forward pass with: started at the first pass that asks for
//! them, and joined when the model is dropped.
//!
//! [`Pool::run`] hands the calling thread and `helpers` workers one job and returns once no
//! worker is inside it. A worker woken after the job's work was all taken finds no job and
//! waits again, so the caller never waits for a thread that has not started; the job decides
//! how its work is shared (the forward pass hands out its items from a counter).
//!
//! Between jobs a worker watches for the next one for at most [`SPIN`], then sleeps on a
//! condition variable. Generating a token runs about a hundred short jobs a few microseconds
//! apart, and waking a sleeping thread costs ~50 µs on a 2-core virtual machine, more than
//! most of those jobs; a bounded watch keeps the worker at hand through a token and lets it
//! sleep between turns. It never waits unboundedly spinning: a thread that spins while it waits
//! takes a core from the work it waits for, which is what collapses an engine whose workers
//! busy-wait on a machine whose cores are busy.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker (or a caller waiting for its workers) watches before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(200);

/// A job as the workers see it: called with the thread's index (the caller is 0).
type Job = dyn Fn(usize) + Sync + 'static;

#[derive(Default)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Workers wait here for a job (or for the pool's end).
    wake: Condvar,
    /// The caller waits here for the workers inside its job to leave it.
    left: Condvar,
    /// `State::epoch`, and `State::active`, as the last lock left them: what a watching
    /// thread reads without the lock (it takes the lock before it acts on a change).
    epoch: AtomicU64,
    active: AtomicUsize,
}

#[derive(Default)]
struct State {
    /// The job of the [`Pool::run`] under way, while its work may still be taken.
    job: Option<&'static Job>,
    /// Counts the jobs handed out, so that a worker takes each at most once.
    epoch: u64,
    /// Workers `1..=helpers` take the current job.
    helpers: usize,
    /// Workers inside the current job.
    active: usize,
    /// What a worker's panic inside the job carried, raised again by the caller.
    panic: Option<Box<dyn Any + Send>>,
    /// Workers asleep on `wake`, and whether the caller sleeps on `left`: a notification
    /// is a system call, made only for a sleeper.
    sleepers: usize,
    caller_asleep: bool,
    quit: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // The state is consistent between statements (no code that can panic runs under the
    // lock), so a poisoned lock holds nothing half-written.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// Runs `job(0)` on the calling thread and `job(i)` on workers `i` in `1..=helpers` that
    /// wake before the job is over, starting the workers that do not exist yet (as many as
    /// the system lets it: a job runs whatever number of workers joins it). Returns when
    /// `job(0)` has returned and no worker is inside the job; a panic of a worker is raised
    /// again here.
    #[expect(
        unsafe_code,
        reason = "the job borrows from the caller's stack; workers use it only until `run` \
                  returns, which `Finish` waits for"
    )]
    pub(crate) fn run<'j>(&mut self, helpers: usize, job: &'j (dyn Fn(usize) + Sync + 'j)) {
        self.start_workers(helpers);
        // SAFETY: the reference is made `'static` only to be stored in the shared state,
        // where workers copy it. `Finish` (below) runs on return and on unwinding from
        // `job(0)`: it removes the reference from the state and waits, under the same lock,
        // until no worker that copied it is still inside the job (`active == 0`). A worker
        // copies it only under that lock while it is in the state, and counts itself in
        // `active` at that moment. So no worker uses the reference after `run` returns, while
        // `job` is borrowed, and `&mut self` keeps two runs from sharing the state.
        let job: &'static Job =
            unsafe { std::mem::transmute::<&'j (dyn Fn(usize) + Sync + 'j), &'static Job>(job) };
        let sleepers = {
            let mut state = lock(&self.shared.state);
            state.job = Some(job);
            state.epoch += 1;
            state.helpers = helpers;
            self.shared.epoch.store(state.epoch, Ordering::Release);
            state.sleepers
        };
        if sleepers > 0 {
            self.shared.wake.notify_all();
        }
        let finish = Finish(&self.shared);
        job(0);
        drop(finish);
        if let Some(payload) = lock(&self.shared.state).panic.take() {
            panic::resume_unwind(payload);
        }
    }

    fn start_workers(&mut self, helpers: usize) {
        while self.workers.len() < helpers {
            let shared = Arc::clone(&self.shared);
            let index = self.workers.len() + 1;
            let spawned = std::thread::Builder::new()
                .name(format!("axocoatl-infer-{index}"))
                .spawn(move || work(&shared, index));
            match spawned {
                Ok(handle) => self.workers.push(handle),
                // Out of threads: the job runs on the workers there are.
                Err(_) => break,
            }
        }
    }
}

/// Ends a run: no worker takes the job any more, and the caller waits for those inside it
/// (on return from the caller's part, or when it unwinds).
struct Finish<'a>(&'a Shared);

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let shared = self.0;
        let mut state = lock(&shared.state);
        state.job = None;
        if state.active == 0 {
            return;
        }
        drop(state);
        watch(|| shared.active.load(Ordering::Acquire) == 0);
        let mut state = lock(&shared.state);
        while state.active > 0 {
            state.caller_asleep = true;
            state = shared
                .left
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.caller_asleep = false;
    }
}

/// Watches for `done` for at most [`SPIN`] (its callers look again under the lock).
fn watch(done: impl Fn() -> bool) {
    let started = Instant::now();
    while started.elapsed() < SPIN {
        for _ in 0..64 {
            if done() {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

fn work(shared: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        watch(|| shared.epoch.load(Ordering::Acquire) != seen);
        let job = {
            let mut state = lock(&shared.state);
            loop {
                if state.quit {
                    return;
                }
                if state.epoch != seen {
                    seen = state.epoch;
                    if let Some(job) = state.job.filter(|_| index <= state.helpers) {
                        state.active += 1;
                        shared.active.store(state.active, Ordering::Release);
                        break job;
                    }
                }
                state.sleepers += 1;
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.sleepers -= 1;
            }
        };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| job(index)));
        let mut state = lock(&shared.state);
        state.active -= 1;
        shared.active.store(state.active, Ordering::Release);
        if let Err(payload) = outcome {
            state.panic.get_or_insert(payload);
        }
        if state.active == 0 && state.caller_asleep {
            shared.left.notify_all();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.state).quit = true;
        // A worker watching for a job sees the epoch move and takes the lock, where it finds
        // `quit`.
        self.shared.epoch.fetch_add(1, Ordering::Release);
        self.shared.wake.notify_all();
        for worker in self.workers.drain(..) {
            // A worker catches the panics of jobs: it can only end by returning.
            drop(worker.join());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_job_runs_on_the_caller_and_the_workers_that_join_it() {
        let mut pool = Pool::default();
        for helpers in [2, 0, 1, 3] {
            let items = AtomicUsize::new(0);
            let done: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
            let threads: Vec<AtomicUsize> = (0..=helpers).map(|_| AtomicUsize::new(0)).collect();
            pool.run(helpers, &|i| {
                threads[i].fetch_add(1, Ordering::Relaxed);
                while let Some(d) = done.get(items.fetch_add(1, Ordering::Relaxed)) {
                    d.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(done.iter().all(|d| d.load(Ordering::Relaxed) == 1));
            assert_eq!(threads[0].load(Ordering::Relaxed), 1, "the caller works");
            assert!(threads.iter().all(|t| t.load(Ordering::Relaxed) <= 1));
        }
        assert_eq!(pool.workers.len(), 3, "workers live on between jobs");
    }

    /// Waits (bounded) until `flag` is set by a worker that joined the job.
    fn until(flag: &AtomicBool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !flag.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            flag.load(Ordering::Acquire),
            "the worker never joined the job"
        );
    }

    #[test]
    fn a_job_borrows_from_the_callers_stack_and_run_returns_after_its_workers() {
        let mut pool = Pool::default();
        for round in 1..6 {
            let mut slots = vec![0usize; 2];
            {
                let entered = AtomicBool::new(false);
                let cells: Vec<Mutex<&mut usize>> = slots.iter_mut().map(Mutex::new).collect();
                pool.run(1, &|i| {
                    if i == 0 {
                        until(&entered);
                    } else {
                        entered.store(true, Ordering::Release);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    **cells[i].lock().unwrap_or_else(PoisonError::into_inner) = round * 10 + i;
                });
            }
            assert_eq!(slots, [round * 10, round * 10 + 1]);
        }
    }

    #[test]
    fn a_workers_panic_is_raised_in_the_caller_and_the_pool_still_runs() {
        let mut pool = Pool::default();
        let entered = AtomicBool::new(false);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.run(1, &|i| {
                if i == 0 {
                    until(&entered);
                } else {
                    entered.store(true, Ordering::Release);
                    panic!("worker {i}");
                }
            });
        }));
        let payload = caught
            .err()
            .unwrap_or_else(|| panic!("no panic reached the caller"));
        assert_eq!(
            payload.downcast_ref::<String>().map(String::as_str),
            Some("worker 1")
        );
        let ran = AtomicUsize::new(0);
        pool.run(1, &|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert!(ran.load(Ordering::Relaxed) >= 1);
    }
}
