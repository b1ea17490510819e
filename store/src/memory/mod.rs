//! Agent memory on disk, every tier but the semantic store: core memory blocks
//! (`memory/core/v1/`, `memory/core/shared/v1/`) and the daily log (`memory/daily_log/v1/`).
//!
//! Every tier belongs to one runtime Agent id (`{session}:{agent}`, or
//! `{session}:{coordinator}:worker:{worker}` for a declared Worker), stored under its
//! portable [`component`](crate::layout::component); only core blocks marked `shared: true`
//! live outside it, in one file per label.

pub mod core;
pub mod daily_log;
pub mod fsck;

pub use self::core::{CoreFile, CoreMemory, CORE_VERSION};
pub use self::daily_log::{DailyLog, LogKind, LogRecord};
