//! Durable identifiers: 16 lowercase hex digits (64 bits).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The length of an id in hex digits.
pub const ID_LEN: usize = 16;

/// Makes ids reproducible (tests): with it set, the n-th id a process makes is the hash of
/// the seed and n. Each process must get its own seed, or ids repeat.
pub const SEED_ENV: &str = "AXOCOATL_ID_SEED";

/// A fresh id, unique with overwhelming probability: the hash of the time, the process id,
/// a per-process counter and a per-process random key (or of `AXOCOATL_ID_SEED` and the
/// counter, when set).
pub fn new_id() -> String {
    if let Some(seed) = std::env::var_os(SEED_ENV) {
        return seeded(
            &seed.to_string_lossy(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
        );
    }
    let mut h = RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let a = h.finish();
    let digest = blake3::hash(&[a.to_le_bytes(), (nanos as u64).to_le_bytes()].concat());
    digest.to_hex()[..ID_LEN].to_string()
}

/// The `n`-th id of a process whose `AXOCOATL_ID_SEED` is `seed`.
pub fn seeded(seed: &str, n: u64) -> String {
    blake3::hash(format!("{seed}:{n}").as_bytes()).to_hex()[..ID_LEN].to_string()
}

/// Whether `s` could be (a prefix of) an id.
pub fn is_id_prefix(s: &str) -> bool {
    !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_distinct_hex() {
        let a = super::new_id();
        let b = super::new_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
        assert!(super::is_id_prefix(&a));
    }
}
