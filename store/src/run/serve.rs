//! serve's lock (`run/serve.lock`): held by the one `serve` of a repository for its whole
//! life. Its note names the holder's pid, so a second `serve` says whom to stop.

use crate::layout::SERVE_LOCK;
use crate::lock::{self, Lock};
use crate::{Repo, Result};

/// The serve lock if it is free now, with this process's pid in its note.
pub fn try_take(repo: &Repo) -> Result<Option<Lock>> {
    let Some(mut lock) = Lock::try_acquire(&repo.path(SERVE_LOCK))? else {
        return Ok(None);
    };
    lock.write_note(&format!("pid {}\n", std::process::id()))?;
    Ok(Some(lock))
}

/// Whether a `serve` holds the lock.
pub fn held(repo: &Repo) -> Result<bool> {
    Ok(Lock::try_acquire(&repo.path(SERVE_LOCK))?.is_none())
}

/// The pid the lock's note names (the running serve's), read without taking it.
pub fn holder(repo: &Repo) -> Option<u32> {
    lock::peek_note(&repo.path(SERVE_LOCK))
        .ok()
        .and_then(|n| n.trim().strip_prefix("pid ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_named_while_it_holds_the_lock() {
        let (_dir, repo) = crate::repo::scratch();
        assert!(!held(&repo).expect("probe"));
        let lock = try_take(&repo).expect("take").expect("free");
        assert!(held(&repo).expect("probe"));
        assert_eq!(holder(&repo), Some(std::process::id()));
        assert!(try_take(&repo).expect("take").is_none());
        drop(lock);
        assert!(!held(&repo).expect("probe"));
    }
}
