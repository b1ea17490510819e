//! Providers kept loaded across the turns of one process.
//!
//! Opening a `local` provider loads its model file (about a second for the default model);
//! opening any other costs nothing worth keeping. A process that runs many turns (`chat`, a
//! `serve` actor) holds a [`Kept`]: each turn takes a provider from it ([`Kept::open`]) and
//! gives it back when done ([`Held`] does, when dropped), so only the first turn pays the
//! load. A provider is taken again only for the same resolved provider (its configuration,
//! overrides included) and the same model file: a file replaced or rewritten since (its
//! length, times, device and inode) is loaded again. Turns that run at once (a coordinator's
//! workers) each take their own; the idle ones kept are at most [`KEPT_IDLE`], the least
//! recently used let go first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::config::{ProviderKind, ResolvedProvider};
use crate::provider::{Provider, ProviderError};

/// Idle providers a process keeps. Two: a chat that alternates between two local models
/// keeps both; more would hold the memory of models no turn uses.
pub const KEPT_IDLE: usize = 2;

/// Providers kept loaded for the next turn of this process.
#[derive(Default)]
pub struct Kept {
    idle: Mutex<Vec<Idle>>,
    loads: AtomicU64,
}

struct Idle {
    resolved: ResolvedProvider,
    stamp: Stamp,
    provider: Box<dyn Provider>,
}

/// What identifies a model file as it is now: its length, change and modification times,
/// device and inode (`models fetch` installs by rename, and any write in place changes the
/// change time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
    dev: u64,
    ino: u64,
}

impl Stamp {
    fn of(resolved: &ResolvedProvider) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(resolved.model_path.as_deref()?).ok()?;
        Some(Stamp {
            len: meta.len(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// A provider a turn uses: given back to its [`Kept`] when dropped (unless a panic is
/// unwinding through the turn, which may have left it half way through a call).
pub struct Held {
    provider: Option<Box<dyn Provider>>,
    home: Option<(Arc<Kept>, ResolvedProvider, Stamp)>,
}

impl Held {
    /// A provider no one keeps (dropped with the turn).
    pub fn own(provider: Box<dyn Provider>) -> Held {
        Held {
            provider: Some(provider),
            home: None,
        }
    }
}

impl AsMut<dyn Provider + 'static> for Held {
    fn as_mut(&mut self) -> &mut (dyn Provider + 'static) {
        match &mut self.provider {
            Some(p) => p.as_mut(),
            // Taken only by `drop`.
            None => unreachable!("a held provider is there until it is dropped"),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let (Some(provider), Some((kept, resolved, stamp))) =
            (self.provider.take(), self.home.take())
        else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        kept.give_back(Idle {
            resolved,
            stamp,
            provider,
        });
    }
}

/// Whether a provider of this kind is worth keeping: its opening loads a model.
fn worth_keeping(resolved: &ResolvedProvider) -> bool {
    resolved.kind == ProviderKind::Local
}

impl Kept {
    pub fn new() -> Arc<Kept> {
        Arc::new(Kept::default())
    }

    /// The provider `resolved` names: one kept from an earlier turn when it is the same
    /// provider on the same model file, else a new one (which is kept after the turn when
    /// it loaded a model).
    pub fn open(self: &Arc<Self>, resolved: &ResolvedProvider) -> Result<Held, ProviderError> {
        if !worth_keeping(resolved) {
            return super::open(resolved).map(Held::own);
        }
        let Some(stamp) = Stamp::of(resolved) else {
            // No model file to stamp: opening says what is wrong with it.
            return super::open(resolved).map(Held::own);
        };
        let found = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.iter()
                .position(|i| i.resolved == *resolved && i.stamp == stamp)
                .map(|at| idle.remove(at))
        };
        let provider = match found {
            Some(i) => i.provider,
            None => {
                let started = Instant::now();
                let provider = super::open(resolved)?;
                let loads = self.loads.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::info!(
                    provider = %resolved.name,
                    model = %resolved.model_path.as_deref().unwrap_or_else(|| std::path::Path::new("")).display(),
                    load_ms = started.elapsed().as_millis() as u64,
                    loads,
                    "loaded the local model"
                );
                provider
            }
        };
        Ok(Held {
            provider: Some(provider),
            home: Some((self.clone(), resolved.clone(), stamp)),
        })
    }

    /// How many providers this process loaded through it.
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// How many idle providers it holds.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn give_back(&self, back: Idle) {
        let let_go = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let stale = |i: &Idle| i.resolved == back.resolved;
            // One idle provider per resolved provider: another turn's, or one of a file
            // since replaced, goes.
            let mut gone: Vec<Idle> = Vec::new();
            let mut at = 0;
            while at < idle.len() {
                if stale(&idle[at]) {
                    gone.push(idle.remove(at));
                } else {
                    at += 1;
                }
            }
            idle.push(back);
            while idle.len() > KEPT_IDLE {
                gone.push(idle.remove(0));
            }
            gone
        };
        // Weights are freed outside the lock.
        drop(let_go);
    }
}

/// Opens `resolved` from `kept` when the process keeps providers, else on its own.
pub fn open_in(
    kept: Option<&Arc<Kept>>,
    resolved: &ResolvedProvider,
) -> Result<Held, ProviderError> {
    match kept {
        Some(k) => k.open(resolved),
        None => super::open(resolved).map(Held::own),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Cancel, ChatRequest, Completion, Event};

    struct Counting(u32);

    impl Provider for Counting {
        fn name(&self) -> &str {
            "counting"
        }

        fn chat(
            &mut self,
            _: &ChatRequest,
            _: &Cancel,
            _: &mut dyn FnMut(Event),
        ) -> Result<Completion, ProviderError> {
            self.0 += 1;
            Err(ProviderError::Cancelled)
        }
    }

    fn resolved(name: &str, path: &std::path::Path) -> ResolvedProvider {
        let yaml = format!(
            "providers:\n  {name}: {{kind: local, model_path: {:?}}}\nagents:\n  - {{id: a, provider: {name}}}\n",
            path.display().to_string()
        );
        let config = crate::config::load_str(std::path::Path::new("t.yaml"), &yaml)
            .expect("valid")
            .config;
        let agent = config.agents.first().expect("agent");
        config
            .resolve_provider(agent, &|_| None, std::path::Path::new("/"))
            .expect("resolves")
    }

    /// Puts `provider` in `kept` as if a turn had loaded it for `r`.
    fn held(kept: &Arc<Kept>, r: &ResolvedProvider, provider: Counting) -> Held {
        Held {
            provider: Some(Box::new(provider)),
            home: Some((kept.clone(), r.clone(), Stamp::of(r).expect("stamp"))),
        }
    }

    #[test]
    fn a_provider_given_back_is_taken_again_for_the_same_file_only() {
        let dir = tempfile::tempdir().expect("dir");
        let (a, b) = (dir.path().join("a.gguf"), dir.path().join("b.gguf"));
        std::fs::write(&a, b"a").expect("write");
        std::fs::write(&b, b"b").expect("write");
        let kept = Kept::new();
        let ra = resolved("local", &a);
        drop(held(&kept, &ra, Counting(7)));
        assert_eq!(kept.idle(), 1);
        let found = {
            let stamp = Stamp::of(&ra).expect("stamp");
            let idle = kept.idle.lock().expect("lock");
            idle.iter().any(|i| i.resolved == ra && i.stamp == stamp)
        };
        assert!(found);
        // Three resolved providers given back: the least recently used goes.
        drop(held(&kept, &resolved("other", &a), Counting(0)));
        drop(held(&kept, &resolved("local", &b), Counting(0)));
        assert_eq!(kept.idle(), KEPT_IDLE);
        assert!(!kept
            .idle
            .lock()
            .expect("lock")
            .iter()
            .any(|i| i.resolved == ra));
        // The same file rewritten: its stamp differs, nothing kept matches it.
        let rb = resolved("local", &b);
        let before = Stamp::of(&rb).expect("stamp");
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&b, b"B").expect("rewrite");
        assert_ne!(Stamp::of(&rb), Some(before));
        // A panicking turn's provider is not given back.
        let kept2 = Kept::new();
        let h = held(&kept2, &ra, Counting(0));
        let _ = std::thread::spawn(move || {
            let _h = h;
            panic!("mid-call");
        })
        .join();
        assert_eq!(kept2.idle(), 0);
    }
}
