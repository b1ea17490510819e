//! The effects a turn's tools left in the world: files its file tools changed, commands it
//! ran, MCP tools it called (whose effects axocoatl cannot know). Stop and rewind roll
//! none of them back and retry may do them again; these functions name them, so the
//! messages of those commands can.

use crate::catalog::{tool_named, Access};
use crate::error::Result;
use crate::history::{Projection, Scope, TurnView, Want};
use crate::workspace::Workspace;

/// One tool call of a turn whose effect outlives the turn.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Effect {
    /// The turn that made the call.
    pub turn: String,
    /// The tool: `write_file`, `edit_file`, `run_command` or an MCP server's tool.
    pub tool: String,
    /// What it acted on: the path written, the command run (its first line, cut at 80
    /// characters); empty when the arguments do not say.
    pub target: String,
}

impl Effect {
    /// `write_file notes.md`, `run_command \`make test\``.
    pub fn describe(&self) -> String {
        match (self.tool.as_str(), self.target.is_empty()) {
            (_, true) => self.tool.clone(),
            ("run_command", false) => format!("run_command `{}`", self.target),
            (_, false) => format!("{} {}", self.tool, self.target),
        }
    }
}

/// The calls of turn `t` that changed files (a file tool's call that succeeded), ran
/// commands (every `run_command` call: a failing command may have done part of its work)
/// or called an MCP tool, in the order they started.
pub fn of_turn(t: &TurnView) -> Vec<Effect> {
    t.tools
        .iter()
        .filter_map(|call| {
            let access = tool_named(&call.name).map(|n| n.access);
            let lasting = match access {
                Some(Access::Write) => !call.is_error,
                Some(Access::Exec) => true,
                Some(Access::Read | Access::Memory) => false,
                // Not a built-in tool: an MCP server's.
                None => crate::config::split_mcp_tool_name(&call.name).is_some(),
            };
            lasting.then(|| Effect {
                turn: t.turn.clone(),
                tool: call.name.clone(),
                target: target_of(&call.name, &call.arguments),
            })
        })
        .collect()
}

/// The effects of the turns `ids` of `session`, turn by turn in the order given.
pub fn of_turns(ws: &Workspace, session: &str, ids: &[String]) -> Result<Vec<Effect>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let projection = Projection::of(ws.repo(), Scope::Session(session), Want::VIEWS)?;
    Ok(ids
        .iter()
        .filter_map(|id| projection.turn(id))
        .flat_map(of_turn)
        .collect())
}

/// The effects of the one turn `prefix` names (a whole id or a unique prefix).
pub fn of_turn_named(ws: &Workspace, prefix: &str) -> Result<Vec<Effect>> {
    let projection = Projection::of(ws.repo(), Scope::Prefix(prefix), Want::VIEWS)?;
    Ok(of_turn(projection.resolve(prefix)?))
}

/// Up to `n` effects described, and how many more there are: `write_file a.txt,
/// run_command \`make\` and 3 more`.
pub fn list(effects: &[Effect], n: usize) -> String {
    let mut text: Vec<String> = effects.iter().take(n).map(Effect::describe).collect();
    if effects.len() > n {
        text.push(format!("and {} more", effects.len() - n));
    }
    text.join(", ")
}

/// What a call acted on, from its arguments (JSON text; a bounded argument that was cut
/// does not parse and says nothing).
fn target_of(tool: &str, arguments: &str) -> String {
    let Ok(args) = serde_json::from_str::<serde_json::Value>(arguments) else {
        return String::new();
    };
    let key = match tool {
        "run_command" => "command",
        "write_file" | "edit_file" => "path",
        _ => return String::new(),
    };
    let text = args[key].as_str().unwrap_or("");
    let first = text.lines().next().unwrap_or("");
    let mut short: String = first.chars().take(80).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}
