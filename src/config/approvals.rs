//! `approvals:`, `approval_timeout:` and `on_approval_request:`: which tool calls of an
//! agent wait for a person, how long, and who hears about it. The types, their YAML forms
//! and their checks; `crate::approval` applies them to calls.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::types::{AgentConfig, AgentRole, Config};
use super::validate::{at, Checker};

/// Which tool calls of an agent wait for a person's approval before they run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ApprovalPolicy {
    /// No call waits (the default).
    #[default]
    Never,
    /// Every tool call waits.
    Always,
    /// A call waits when one of the rules matches it.
    Rules(Vec<ApprovalRule>),
}

impl ApprovalPolicy {
    /// Whether some call may wait.
    pub fn asks(&self) -> bool {
        match self {
            ApprovalPolicy::Never => false,
            ApprovalPolicy::Always => true,
            ApprovalPolicy::Rules(rules) => !rules.is_empty(),
        }
    }
}

/// One rule of `approvals:`: a tool (a built-in's name, an MCP server's `server.tool`, or
/// `server.*`), optionally only when its command (`run_command`) or the path it writes
/// (`write_file`, `edit_file`) matches a glob. `command:` alone means `run_command`;
/// `path:` alone means both file-writing tools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalRule {
    pub tool: Option<String>,
    pub command: Option<String>,
    pub path: Option<String>,
}

impl fmt::Display for ApprovalRule {
    /// The rule as `show` and the ledger name it: `run_command`, `command: git push*`,
    /// `write_file path: src/**`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = &self.tool {
            parts.push(t.clone());
        }
        if let Some(c) = &self.command {
            parts.push(format!("command: {c}"));
        }
        if let Some(p) = &self.path {
            parts.push(format!("path: {p}"));
        }
        f.write_str(&parts.join(" "))
    }
}

/// The tools a `path:` rule without `tool:` holds.
pub const WRITE_TOOLS: [&str; 2] = ["write_file", "edit_file"];

impl Serialize for ApprovalPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ApprovalPolicy::Never => s.serialize_str("never"),
            ApprovalPolicy::Always => s.serialize_str("always"),
            ApprovalPolicy::Rules(rules) => {
                let mut seq = s.serialize_seq(Some(rules.len()))?;
                for r in rules {
                    seq.serialize_element(r)?;
                }
                seq.end()
            }
        }
    }
}

impl Serialize for ApprovalRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let (Some(tool), None, None) = (&self.tool, &self.command, &self.path) {
            return s.serialize_str(tool);
        }
        let mut map = s.serialize_map(None)?;
        for (key, value) in [
            ("tool", &self.tool),
            ("command", &self.command),
            ("path", &self.path),
        ] {
            if let Some(v) = value {
                map.serialize_entry(key, v)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ApprovalPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ApprovalPolicy;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`never`, `always`, or a list of tools and rules")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApprovalPolicy, E> {
                match v {
                    "never" => Ok(ApprovalPolicy::Never),
                    "always" => Ok(ApprovalPolicy::Always),
                    other => Err(E::custom(format!(
                        "expected `never`, `always` or a list, found `{other}` (to ask before one tool, write `[{other}]`)"
                    ))),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<ApprovalPolicy, E> {
                Ok(ApprovalPolicy::Never)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ApprovalPolicy, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element::<ApprovalRule>()? {
                    rules.push(rule);
                }
                Ok(ApprovalPolicy::Rules(rules))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for ApprovalRule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ApprovalRule;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool name, or a map of `tool`, `command` and `path`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApprovalRule, E> {
                Ok(ApprovalRule {
                    tool: Some(v.to_owned()),
                    ..ApprovalRule::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ApprovalRule, A::Error> {
                let mut rule = ApprovalRule::default();
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.as_str() {
                        "tool" => &mut rule.tool,
                        "command" => &mut rule.command,
                        "path" => &mut rule.path,
                        other => {
                            return Err(de::Error::unknown_field(
                                other,
                                &["tool", "command", "path"],
                            ))
                        }
                    };
                    *slot = Some(map.next_value::<String>()?);
                }
                if rule == ApprovalRule::default() {
                    return Err(de::Error::custom(
                        "an empty rule: give `tool`, `command` or `path`",
                    ));
                }
                Ok(rule)
            }
        }
        d.deserialize_any(V)
    }
}

/// `approval_timeout:`: how long a call waits for a decision, as seconds or with a unit
/// (`90s`, `30m`, `12h`, `2d`). When it passes, the turn ends `failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApprovalTimeout {
    pub secs: u64,
}

impl ApprovalTimeout {
    /// `30m`, `2h`: the largest whole unit.
    pub fn text(self) -> String {
        let s = self.secs;
        match s {
            s if s > 0 && s % 86_400 == 0 => format!("{}d", s / 86_400),
            s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
            s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        }
    }

    /// Parses `90`, `90s`, `30m`, `12h`, `2d`.
    pub fn parse(text: &str) -> Result<ApprovalTimeout, String> {
        let t = text.trim();
        let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("`{text}` is not a duration"))?;
        let scale = match unit.trim() {
            "" | "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            other => return Err(format!("unknown unit `{other}` in `{text}`")),
        };
        let secs = n
            .checked_mul(scale)
            .filter(|s| *s <= MAX_TIMEOUT_SECS)
            .ok_or_else(|| format!("`{text}` is longer than 10 years"))?;
        Ok(ApprovalTimeout { secs })
    }
}

/// Ten years: a longer timeout is a mistake (and would overflow milliseconds soon after).
const MAX_TIMEOUT_SECS: u64 = 10 * 365 * 86_400;

impl Serialize for ApprovalTimeout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

impl<'de> Deserialize<'de> for ApprovalTimeout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ApprovalTimeout;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration: seconds, or a number with s, m, h or d (`30m`)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ApprovalTimeout, E> {
                ApprovalTimeout::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ApprovalTimeout, E> {
                Err(E::custom(format!("{v} is not a duration (it is negative)")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApprovalTimeout, E> {
                ApprovalTimeout::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// Seconds the `on_approval_request:` program may run when `timeout_secs` is unset.
pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 10;

/// `on_approval_request:`: a program told of every request that waits (the request as
/// JSON on its stdin), run outside any sandbox, so a person hears about it (mail, a chat
/// message, a phone notification).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalHook {
    /// The program: a name looked up in `PATH`, or a path (relative to the config file).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Its whole environment besides `PATH` and `HOME`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl ApprovalHook {
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs.unwrap_or(DEFAULT_HOOK_TIMEOUT_SECS)
    }

    /// The program when `command` is a path rather than a name looked up in `PATH`.
    pub fn program_path(&self, dir: &Path) -> Option<PathBuf> {
        self.command
            .contains('/')
            .then(|| super::trusted::mcp_program(&self.command, dir))
    }

    /// The arguments that name existing files (the program runs in `dir`).
    pub fn file_args(&self, dir: &Path) -> Vec<(usize, PathBuf)> {
        self.args
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.is_empty() && !a.starts_with('-'))
            .map(|(i, a)| (i, dir.join(a)))
            .filter(|(_, p)| p.is_file())
            .collect()
    }
}

/// An agent's `approvals:` and `approval_timeout:`.
pub(super) fn check_agent(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    if agent.approvals.asks() && agent.role != AgentRole::Autonomous {
        c.error(
            c.value(at!["agents", i, "approvals"]),
            format!(
                "agent `{id}`: approvals for a {} are not supported yet",
                if agent.role == AgentRole::Worker {
                    "worker"
                } else {
                    "coordinator"
                }
            ),
            "set `approvals:` on an autonomous agent: a coordinator's pass cannot wait for a person yet",
        );
    }
    if agent.approval_timeout.is_some() && !agent.approvals.asks() {
        c.warning(
            c.value(at!["agents", i, "approval_timeout"]),
            format!(
                "agent `{id}`: `approval_timeout` has no effect: no call of it waits for approval"
            ),
            "add `approvals:` to the agent, or remove `approval_timeout`",
        );
    }
    if agent.approval_timeout.is_some_and(|t| t.secs == 0) {
        c.error(
            c.value(at!["agents", i, "approval_timeout"]),
            format!("agent `{id}`: approval_timeout must be positive"),
            "give how long a call may wait, e.g. `approval_timeout: 30m`, or remove it to wait without end",
        );
    }
    let ApprovalPolicy::Rules(rules) = &agent.approvals else {
        return;
    };
    for (j, rule) in rules.iter().enumerate() {
        check_rule(c, i, j, agent, rule);
    }
}

fn check_rule(c: &mut Checker<'_>, i: usize, j: usize, agent: &AgentConfig, rule: &ApprovalRule) {
    let id = agent.id.as_str();
    let here = |key: Option<&str>| {
        let mut path = at!["agents", i, "approvals", j].to_vec();
        if let Some(k) = key {
            path.push(k.into());
        }
        path
    };
    let pos = c.value(&here(None));
    if let Some(tool) = &rule.tool {
        if let Err(problem) = check_tool(tool, agent) {
            let pos = if rule.command.is_some() || rule.path.is_some() {
                c.value(&here(Some("tool")))
            } else {
                pos
            };
            c.error(
                pos,
                format!("agent `{id}`: approvals: {problem}"),
                tool_hint(),
            );
            return;
        }
    }
    for (key, glob, tools) in [
        ("command", &rule.command, &["run_command"][..]),
        ("path", &rule.path, &WRITE_TOOLS[..]),
    ] {
        let Some(glob) = glob else { continue };
        if let Some(tool) = rule.tool.as_deref().filter(|t| !tools.contains(t)) {
            c.error(
                c.value(&here(Some(key))),
                format!(
                    "agent `{id}`: approvals: `{key}:` applies to {} only, not to `{tool}`",
                    tools.join(" and ")
                ),
                format!(
                    "leave out `tool:` (a `{key}:` rule holds {}), or remove `{key}:`",
                    tools.join(" and ")
                ),
            );
        }
        if let Err(e) = globset::Glob::new(glob) {
            c.error(
                c.value(&here(Some(key))),
                format!(
                    "agent `{id}`: approvals: `{glob}` is not a valid pattern: {}",
                    e.kind()
                ),
                "use `*` for any text, `**` for any directories, `?` for one character",
            );
        }
    }
    if rule.command.is_some() && rule.path.is_some() {
        c.error(
            pos,
            format!("agent `{id}`: approvals: a rule has `command:` or `path:`, not both"),
            "write them as two rules",
        );
    }
}

/// A tool name of a rule: a built-in tool, an MCP server's `server.tool` or `server.*`
/// (the server listed by the agent), or `*`.
fn check_tool(tool: &str, agent: &AgentConfig) -> Result<(), String> {
    if tool == "*" || crate::catalog::is_known_tool(tool) {
        return Ok(());
    }
    match tool.split_once('.') {
        Some((server, name)) if !server.is_empty() && !name.is_empty() => {
            if agent.mcp_servers.iter().any(|s| s == server) {
                Ok(())
            } else {
                Err(format!(
                    "`{tool}` names MCP server `{server}`, which the agent does not list in `mcp_servers:`"
                ))
            }
        }
        _ => Err(format!("unknown tool `{tool}`")),
    }
}

fn tool_hint() -> String {
    let known: Vec<&str> = crate::catalog::TOOL_NAMES.iter().map(|t| t.name).collect();
    format!(
        "name a tool ({}), an MCP server's tool as `server.tool` or `server.*`, or `*`",
        known.join(", ")
    )
}

/// `on_approval_request:`.
pub(super) fn check_hook(c: &mut Checker<'_>, config: &Config) {
    let Some(hook) = &config.on_approval_request else {
        return;
    };
    if hook.command.trim().is_empty() {
        c.error(
            c.value(at!["on_approval_request", "command"]),
            "on_approval_request: `command` is empty",
            "name the program to run with each request on its stdin, e.g. `command: ./notify.sh`",
        );
    }
    if hook.timeout_secs == Some(0) {
        c.error(
            c.value(at!["on_approval_request", "timeout_secs"]),
            "on_approval_request: timeout_secs must be positive",
            "set a positive number of seconds, or remove it for the default (10)",
        );
    }
    if !config.agents.iter().any(|a| a.approvals.asks()) {
        c.warning(
            c.key(at!["on_approval_request"]),
            "on_approval_request never runs: no agent has `approvals:`",
            "add `approvals:` to the agents whose calls should wait for a person",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_with_and_without_units() {
        for (text, secs) in [
            ("90", 90),
            ("90s", 90),
            ("30m", 1800),
            ("2h", 7200),
            ("1d", 86_400),
        ] {
            assert_eq!(
                ApprovalTimeout::parse(text),
                Ok(ApprovalTimeout { secs }),
                "{text}"
            );
        }
        assert_eq!(ApprovalTimeout { secs: 1800 }.text(), "30m");
        assert_eq!(ApprovalTimeout { secs: 90 }.text(), "90s");
        for bad in ["", "m", "3w", "-1", "99999999999d", "1.5h"] {
            assert!(ApprovalTimeout::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn policies_read_as_words_lists_and_maps() {
        let p: ApprovalPolicy = crate::config::read_yaml("always", "t.yaml").expect("always");
        assert_eq!(p, ApprovalPolicy::Always);
        let p: ApprovalPolicy = crate::config::read_yaml(
            "[run_command, {command: 'git push*'}, {tool: write_file, path: 'src/**'}]",
            "t.yaml",
        )
        .expect("rules");
        let ApprovalPolicy::Rules(rules) = &p else {
            panic!("rules: {p:?}")
        };
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[1].command.as_deref(), Some("git push*"));
        assert_eq!(rules[2].to_string(), "write_file path: src/**");
        let back: ApprovalPolicy =
            crate::config::read_yaml(&serde_json::to_string(&p).expect("write"), "t.yaml")
                .expect("read");
        assert_eq!(back, p);
        assert!(crate::config::read_yaml::<ApprovalPolicy>("run_command", "t.yaml").is_err());
        assert!(crate::config::read_yaml::<ApprovalPolicy>("[{tools: x}]", "t.yaml").is_err());
        assert!(crate::config::read_yaml::<ApprovalPolicy>("[{}]", "t.yaml").is_err());
    }
}
