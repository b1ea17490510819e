//! The files of running processes under `run/`: each session's turn lock with the note of
//! its active turn, the marks of active sessions, rewinds left pending, serve's lock, and
//! the note naming where commands get their temporary directories.
//! Locks are `flock(2)` locks the kernel releases when their holder dies; notes are what a
//! holder tells the others (which turn, which pid). The runtime decides what a held lock
//! means to a command (wait, queue, refuse, recover); these modules only read and write the
//! files.

pub mod pending_rewind;
pub mod scratch;
pub mod serve;
pub mod session;
pub mod stream;
