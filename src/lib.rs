//! The axocoatl runtime: configuration, providers, the turn engine and the projections of
//! the ledger. It never parses command lines and never prints to the terminal.
//!
//! Modules depend on each other in one direction only (`tests/cli/layers.rs` checks there
//! is no import circle), from the leaves up:
//!
//! - leaves: `clock`, `ids`, `catalog` (tool names and attachment types lower layers quote),
//!   `progress` (slow steps reported to whoever draws them), `ocr_data` (where OCR's
//!   language data is);
//! - `config`, `provider`, `error` (one error type with a kind per exit code), `budget`,
//!   `cost` (the price table, the cost of a call, cost budgets), `overrides` (a turn's own
//!   model, system prompt and sampling);
//! - `turn` (what a turn is to the rest: events, outcome, origin, the memory traits), `tools`
//!   (the `Tool` trait and the `Toolbox` registry);
//! - `session` (turn locks, orphans), `relations` (attachment state), `history` and
//!   `search` (projections of the ledger), `checkpoint`, `attach`, `conversation`;
//! - `rewind`, then `workspace` (opening a repository recovers orphans and rewinds);
//! - `team` (the rules of coordinator plans and multi-agent activation), then `engine` (the
//!   turn pipeline: its module documentation follows one `send` to the bytes and names the seams
//!   features plug into),
//!   `control` (stop), and what commands call: `sessions`, `usage`, `query`;
//! - `orchestration` (a coordinator's private pass state) is a leaf that orphan recovery
//!   clears;
//! - `telemetry` (traces of turns: the engine reports each turn that ends) sits below
//!   `engine`; `export` (the ledger as a SQLite database) beside `query`.

// These docs are for the people working on the runtime: CI builds them with
// `--document-private-items`, where links to private items (the engine's steps) resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod attach;
pub mod automation;
pub mod bounded;
pub mod budget;
pub mod catalog;
pub mod checkpoint;
mod child;
pub mod clock;
pub mod config;
pub mod control;
pub mod conversation;
pub mod cost;
pub mod engine;
pub mod error;
pub mod export;
pub mod history;
pub mod ids;
pub mod legacy;
pub mod mcp;
/// `axocoatl mcp serve`: this repository as an MCP server (apart from `mcp`, the client side
/// the engine uses, so that the engine and the server side do not import each other).
#[cfg(feature = "mcp")]
pub mod mcp_serve;
#[cfg(not(feature = "mcp"))]
#[path = "mcp_serve_off.rs"]
pub mod mcp_serve;
pub mod memory;
pub mod models;
pub mod ocr_data;
pub mod orchestration;
pub mod overrides;
pub mod progress;
pub mod provider;
pub mod query;
pub mod relations;
pub mod rewind;
pub mod schedule;
mod scratch;
pub mod search;
pub mod serve;
pub mod session;
pub mod sessions;
pub mod team;
pub mod telemetry;
pub mod tools;
pub mod turn;
pub mod usage;
pub mod workspace;

pub use error::{ErrorKind, Result, RuntimeError};
