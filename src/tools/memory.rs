//! The core memory tools (core_memory_append, core_memory_replace, core_memory_set): typed
//! arguments here, the edit itself (limits, locking, the daily log) in `crate::memory::core`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::handler::Handler;
use super::{Context, ToolOutput};
use crate::memory::CoreEdit;

/// The schema of `A` with `label` limited to the agent's blocks.
pub fn schema<A: JsonSchema>(cx: &Context<'_>) -> Value {
    let mut v = super::schema::generate::<A>();
    let labels: Vec<&str> = cx.memory.blocks.iter().map(|b| b.label.as_str()).collect();
    v["properties"]["label"] =
        json!({"type": "string", "enum": labels, "description": "The core memory block"});
    v
}

// The arguments of the memory tools carry no field descriptions: their schemas are sent on
// every call of every agent, and the tool descriptions say enough.
#[derive(Deserialize, JsonSchema)]
pub struct Append {
    label: String,
    content: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Replace {
    label: String,
    old: String,
    new: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Set {
    label: String,
    value: String,
}

impl Handler for Append {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        edit(cx, &self.label, CoreEdit::Append(&self.content))
    }
}

impl Handler for Replace {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        let edit_ = CoreEdit::Replace {
            old: &self.old,
            new: &self.new,
        };
        edit(cx, &self.label, edit_)
    }
}

impl Handler for Set {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        edit(cx, &self.label, CoreEdit::Set(&self.value))
    }
}

/// Arguments of `recall_search`.
#[derive(Deserialize, JsonSchema)]
pub struct RecallSearch {
    query: String,
    /// How many passages (1-20; default: the agent's recall.top_k).
    #[serde(default)]
    top_k: Option<u32>,
    /// Also search the exchanges of turns a rewind superseded (default: false).
    #[serde(default)]
    include_superseded: bool,
}

/// Arguments of `recall_timeframe`.
#[derive(Deserialize, JsonSchema)]
pub struct RecallTimeframe {
    /// YYYY-MM-DD (from the start of that UTC day) or an RFC 3339 time.
    from: String,
    /// YYYY-MM-DD (to the end of that UTC day) or an RFC 3339 time.
    to: String,
    /// Only records containing this text.
    #[serde(default)]
    query: Option<String>,
}

impl Handler for RecallSearch {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        reply(
            cx.memory
                .run_search_tool(&self.query, self.top_k, self.include_superseded),
        )
    }
}

impl Handler for RecallTimeframe {
    fn run(self, cx: &Context<'_>) -> ToolOutput {
        reply(
            cx.memory
                .run_timeframe_tool(&self.from, &self.to, self.query.as_deref()),
        )
    }
}

fn reply(r: Result<String, String>) -> ToolOutput {
    match r {
        Ok(text) => ToolOutput::ok(text),
        Err(text) => ToolOutput::err(text),
    }
}

fn edit(cx: &Context<'_>, label: &str, edit: CoreEdit<'_>) -> ToolOutput {
    match cx.memory.edit(label, edit, cx.turn) {
        Ok(done) => ToolOutput::ok(format!(
            "block {:?} now holds {} of its {} characters",
            done.label, done.chars, done.limit
        )),
        Err(e) => ToolOutput::err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::Fixture;
    use crate::config::SandboxMode;
    use serde_json::json;

    #[test]
    fn blocks_are_edited_within_their_limits() {
        let f = Fixture::new(SandboxMode::ReadOnly);
        let set = f.call("core_memory_set", json!({"label": "human", "value": "Ana"}));
        assert_eq!(
            set.text,
            "block \"human\" now holds 3 of its 2000 characters"
        );
        f.call(
            "core_memory_append",
            json!({"label": "human", "content": "likes tea"}),
        );
        let rep = f.call(
            "core_memory_replace",
            json!({"label": "human", "old": "tea", "new": "coffee"}),
        );
        assert!(!rep.is_error, "{}", rep.text);
        assert_eq!(
            f.memory().core.get("human", false).expect("get"),
            "Ana\nlikes coffee"
        );
        assert!(
            f.call("core_memory_set", json!({"label": "nope", "value": "x"}))
                .is_error
        );
        let long = "x".repeat(3000);
        assert!(
            f.call("core_memory_set", json!({"label": "human", "value": long}))
                .is_error
        );
        let schema = (crate::tools::spec("core_memory_set").expect("spec").schema)(&f.cx());
        assert_eq!(
            schema["properties"]["label"]["enum"],
            json!(["persona", "human", "project"])
        );
    }
}
