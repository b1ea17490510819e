//! The on-disk repository of axocoatl: every byte under `.axocoatl/`.
//!
//! This crate owns the layout and its format marker, the append-only ledger, the
//! content-addressed objects, checkpoints, memory files, automation run records and locks.
//! It never talks to models, never parses command lines and never prints. FORMAT.md at the
//! root of the source tree describes every file byte by byte, with its version history.
//!
//! # Layout
//!
//! ```text
//! .axocoatl/
//!   format                      magic + format version ([`layout::FORMAT_VERSION`]): written
//!                               last by [`repo::init`], checked first by [`Repo::open`]
//!   HEAD                        the current session
//!   ledger/v1/NNNNNNNNNNNN.seg  the ledger: append-only segments of checksummed frames
//!   ledger/v1/index/            per-segment indexes and merged term indexes (caches)
//!   objects/ab/cdef…            content-addressed blobs (BLAKE3)
//!   checkpoints/v1/<component>/ conversation caches in a checksummed envelope
//!   memory/                     core blocks, the daily log, semantic records (each `v1/`)
//!   automation/runs-v1/<id>/    one record per automation occurrence
//!   run/                        locks: one per session, the ledger's append lock, serve's
//! ```
//!
//! # Guarantees
//!
//! - **The ledger is the authority.** Everything else under `.axocoatl/` (indexes,
//!   checkpoints, vectors) is a cache that can be rebuilt from it and is checked before use.
//! - **Appends are durable in order.** [`ledger::Ledger::append`] frames records under a
//!   short `flock` and `fdatasync`s after releasing it; [`ledger::Ledger::append_lazy`]
//!   defers the flush to the next durable append. A crash leaves at most a torn tail, which
//!   readers ignore and the next appender truncates.
//! - **Damage is reported, never skipped silently.** A record that fails its checksum is
//!   named with its file and byte offset ([`ledger::Damaged`]), the walk goes on at the next
//!   intact record, and [`fsck`] lists it.
//! - **Files appear whole.** New files are written to a temporary file, synced and renamed
//!   into place ([`fsutil::write_atomic`]); everything is owner-only.
//! - **Unknown is not wrong.** A record kind this build does not know is skipped with a
//!   warning; a format version it does not know is refused before anything is written.
//!
//! # Example
//!
//! ```
//! use axocoatl_store::ledger::record::SessionCreated;
//! use axocoatl_store::ledger::Record;
//! use axocoatl_store::repo::{init, OpenOptions};
//! use axocoatl_store::Repo;
//!
//! let dir = tempfile::tempdir()?;
//! let root = init(dir.path())?; // `dir/.axocoatl`, format marker written last
//! let repo = Repo::open(&root, &OpenOptions::default())?;
//! let created = Record::SessionCreated(SessionCreated { session: "main".into(), at: 0 });
//! repo.ledger().append(&[created.clone()])?; // durable when it returns
//!
//! let walked = repo.ledger().read_all()?;
//! assert!(walked.damaged.is_empty());
//! assert_eq!(walked.entries.len(), 1);
//! assert_eq!(walked.entries[0].record, Some(created));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// Contributors' docs: CI builds them with `--document-private-items`, where links to private
// items resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod automation;
pub mod checkpoint;
pub mod civil;
pub mod envelope;
pub mod error;
pub mod extracted;
pub mod failpoint;
pub mod findings;
pub mod fsck;
pub mod fsutil;
pub mod heads;
pub mod index;
pub mod layout;
pub mod ledger;
pub mod legacy;
pub mod lock;
pub mod memory;
pub mod names;
pub mod objects;
pub mod repo;
pub mod run;
pub mod search;
pub mod semantic;

#[cfg(test)]
mod props;

pub use error::{Error, Result};
pub use repo::Repo;
