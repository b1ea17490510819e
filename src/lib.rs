//! The axocoatl runtime: configuration, providers, the turn engine and the projections of
//! the ledger. It never parses command lines and never prints to the terminal.

pub mod attach;
pub mod automation;
pub mod budget;
pub mod checkpoint;
pub mod clock;
pub mod config;
pub mod control;
pub mod engine;
pub mod error;
pub mod history;
pub mod ids;
pub mod memory;
pub mod provider;
pub mod rewind;
pub mod schedule;
pub mod search;
pub mod session;
pub mod tools;
pub mod workspace;

pub use error::{Result, RuntimeError};
