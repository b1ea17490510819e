//! The on-disk repository of axocoatl.
//!
//! This crate owns every byte under `.axocoatl/`: the layout and format marker, the
//! append-only ledger, the content-addressed objects, checkpoints, memory files and locks.
//! It never talks to models, never parses command lines and never prints.

pub mod automation;
pub mod checkpoint;
pub mod civil;
pub mod error;
pub mod extracted;
pub mod failpoint;
pub mod fsck;
pub mod fsutil;
pub mod layout;
pub mod ledger;
pub mod legacy;
pub mod lock;
pub mod memory;
pub mod names;
pub mod objects;
pub mod repo;
pub mod semantic;

#[cfg(test)]
mod props;

pub use error::{Error, Result};
pub use repo::Repo;
