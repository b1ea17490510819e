//! `mcp_servers:`, the entries and each agent's list of them: names that exist, once;
//! tools a server is said to offer; programs and environment variable names.

#[allow(unused_imports)]
use super::*;

/// An agent's `mcp_servers:` list: each names an entry of `mcp_servers:`, once.
pub(super) fn mcp_servers_of(c: &mut Checker<'_>, config: &Config, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    for (j, server) in agent.mcp_servers.iter().enumerate() {
        let pos = c.value(at!["agents", i, "mcp_servers", j]);
        if agent.mcp_servers[..j].contains(server) {
            c.error(
                pos,
                format!("agent `{id}`: MCP server `{server}` is listed twice"),
                "list each server once",
            );
        } else if !config.mcp_servers.contains_key(server) {
            c.error(
                pos,
                format!("agent `{id}`: `{server}` is not an entry of `mcp_servers:`"),
                suggestion(
                    server,
                    config.mcp_servers.keys().map(String::as_str),
                    "MCP servers",
                ),
            );
        }
    }
    if !agent.mcp_servers.is_empty()
        && lookup_provider(config, &agent.provider).is_some_and(|(k, _)| k == ProviderKind::Local)
    {
        c.warning(
            c.key(at!["agents", i, "mcp_servers"]),
            format!("agent `{id}`: its provider runs the local model, which cannot call tools, so its MCP servers are never started"),
            "use an `ollama` or `openai` provider for an agent that calls MCP tools",
        );
    }
}

/// `mcp__<server>__<tool>` in an agent's `tools:`: the server must be one the agent lists.
/// Whether the server has that tool is known only once it runs (`axocoatl mcp list`).
pub(super) fn mcp_tool_entry(
    c: &mut Checker<'_>,
    config: &Config,
    i: usize,
    j: usize,
    agent: &AgentConfig,
    server: &str,
    name: &str,
) {
    let id = agent.id.as_str();
    let pos = c.value(at!["agents", i, "tools", j]);
    let tool = &agent.tools[j];
    if server.is_empty() || name.is_empty() {
        c.error(
            pos,
            format!("agent `{id}`: `{tool}` is not an MCP tool name"),
            "write `mcp__<server>__<tool>`, e.g. `mcp__files__read_file` (`axocoatl mcp list` shows each server's tools)",
        );
    } else if !agent.mcp_servers.iter().any(|s| s == server) {
        let hint = if config.mcp_servers.contains_key(server) {
            format!("add `{server}` to this agent's `mcp_servers:`")
        } else {
            suggestion(
                server,
                config.mcp_servers.keys().map(String::as_str),
                "MCP servers",
            )
        };
        c.error(
            pos,
            format!("agent `{id}`: tool `{tool}` belongs to MCP server `{server}`, which this agent does not list in `mcp_servers:`"),
            hint,
        );
    }
}

pub(super) fn mcp_server_entry(c: &mut Checker<'_>, name: &str, server: &McpServerConfig) {
    let field = |key: &str| at!["mcp_servers", name, key].to_vec();
    let name_ok = !name.is_empty()
        && !name.contains("__")
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
    if !name_ok {
        c.error(
            c.key(at!["mcp_servers", name]),
            format!(
                "MCP server name `{name}` is not valid: its tools are named `mcp__{name}__<tool>`"
            ),
            "use only letters, digits, `-` and single `_` (no `__`)",
        );
    }
    if server.command.trim().is_empty() {
        c.error(
            c.value(&field("command")),
            format!("MCP server `{name}`: `command` is empty"),
            "name the program that speaks MCP on its stdin and stdout, e.g. `command: npx` with `args: [-y, some-mcp-server]`",
        );
    }
    for (key, zero) in [
        (
            "startup_timeout_secs",
            server.startup_timeout_secs == Some(0),
        ),
        ("tool_timeout_secs", server.tool_timeout_secs == Some(0)),
    ] {
        if zero {
            c.error(
                c.value(&field(key)),
                format!("MCP server `{name}`: {key} must be positive"),
                format!("set a positive number of seconds, or remove `{key}` for the default"),
            );
        }
    }
    for var in server.env.keys() {
        let is_name = var.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_')
            && var
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if !is_name {
            c.error(
                c.key(at!["mcp_servers", name, "env", var.as_str()]),
                format!("MCP server `{name}`: `{var}` is not an environment variable name"),
                "use letters, digits and `_`, not starting with a digit",
            );
        }
    }
}
