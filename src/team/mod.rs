//! Teams: what a coordinator's turn plans and what a multi-agent session decides, as pure
//! rules the engine (`crate::engine`, its coordinate step) runs.
//!
//! - [`plan`]: HTN decomposition. Method 1 is the coordinator model's plan as JSON
//!   ([`plan::schema`]), validated ([`plan::validate`]: known workers, no cycles, bounded
//!   count) with one repair round; method 2 ([`plan::fallback`]) is one subtask per declared
//!   worker in `depends_on` order. [`plan::Progress`] says which subtasks may start.
//! - [`lattice`]: who answers a turn of a multi-agent session.
//!
//! Nothing here touches the ledger, a provider or a thread: the engine does, so these rules
//! are tested on their own.

pub mod lattice;
pub mod plan;

pub use plan::{Method, Subtask, ADHOC, MAX_SUBTASKS};
