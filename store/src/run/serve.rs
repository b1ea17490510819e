//! serve's lock (`run/serve.lock`): held by the one `serve` of a repository for its whole
//! life. Its note names the holder's pid, so a second `serve` says whom to stop, and the
//! version of the socket's protocol it speaks, so a command of another build says so before
//! it connects.

use crate::layout::SERVE_LOCK;
use crate::lock::{self, Lock};
use crate::{Repo, Result};

/// Who holds the serve lock, as its note says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// The socket protocol it speaks (`None`: a build from before notes named it).
    pub protocol: Option<u32>,
}

/// The serve lock if it is free now, with this process's pid and `protocol` in its note.
pub fn try_take(repo: &Repo, protocol: u32) -> Result<Option<Lock>> {
    let Some(mut lock) = Lock::try_acquire(&repo.path(SERVE_LOCK))? else {
        return Ok(None);
    };
    lock.write_note(&format!("pid {} protocol {protocol}\n", std::process::id()))?;
    Ok(Some(lock))
}

/// Whether a `serve` holds the lock.
pub fn held(repo: &Repo) -> Result<bool> {
    Ok(Lock::try_acquire(&repo.path(SERVE_LOCK))?.is_none())
}

/// The holder the lock's note names (the running serve), read without taking it; `None`
/// before the holder has written its note (serve is starting).
pub fn holder(repo: &Repo) -> Option<Holder> {
    parse_note(&lock::peek_note(&repo.path(SERVE_LOCK)).ok()?)
}

fn parse_note(note: &str) -> Option<Holder> {
    let mut words = note.split_whitespace();
    let pid = match (words.next(), words.next()) {
        (Some("pid"), Some(pid)) => pid.parse().ok()?,
        _ => return None,
    };
    let protocol = match (words.next(), words.next()) {
        (Some("protocol"), Some(p)) => p.parse().ok(),
        _ => None,
    };
    Some(Holder { pid, protocol })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_named_while_it_holds_the_lock() {
        let (_dir, repo) = crate::repo::scratch();
        assert!(!held(&repo).expect("probe"));
        let lock = try_take(&repo, 7).expect("take").expect("free");
        assert!(held(&repo).expect("probe"));
        assert_eq!(
            holder(&repo),
            Some(Holder {
                pid: std::process::id(),
                protocol: Some(7)
            })
        );
        assert!(try_take(&repo, 7).expect("take").is_none());
        drop(lock);
        assert!(!held(&repo).expect("probe"));
    }

    /// A serve of a build from before notes named the protocol wrote `pid N` alone.
    #[test]
    fn an_older_note_names_no_protocol_and_an_empty_one_no_holder() {
        assert_eq!(
            parse_note("pid 42\n"),
            Some(Holder {
                pid: 42,
                protocol: None
            })
        );
        assert_eq!(parse_note(""), None);
        assert_eq!(parse_note("garbage"), None);
    }
}
