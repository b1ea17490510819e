//! The axocoatl runtime: configuration, providers, the turn engine and the projections of
//! the ledger. It never parses command lines and never prints to the terminal.

pub mod config;
pub mod provider;
