//! What a tool is to the registry: its argument type, parsed from the model's JSON, and
//! what a call does with it. Each tool's module implements it; the registry lists them.

use serde::de::DeserializeOwned;

use super::{Context, ToolOutput};

/// A tool's arguments, parsed from the model's JSON, and what a call does with them.
pub trait Handler: DeserializeOwned + schemars::JsonSchema {
    fn run(self, cx: &Context<'_>) -> ToolOutput;
}
