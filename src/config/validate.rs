//! The semantic rules of `axocoatl.yaml`, checked on the typed config. Positions come from
//! the YAML tree, so each error points at the key or value to change. The rules about how
//! agents refer to each other live in `relations.rs`.

use std::collections::HashMap;
use std::path::Path;

use super::diag::{suggestion, Diagnostic, Severity};
use super::resolve::{lookup_provider, needs_model};
use super::tree::{Locator, Pos, Seg};
use super::types::{
    split_mcp_tool_name, AgentConfig, AgentRole, Config, McpServerConfig, OverflowPolicy,
    ProviderConfig, ProviderKind, SandboxMode, DEFAULT_MAX_STEPS, MAX_COMMAND_MB,
};

/// A path into the document: `at!["agents", 2, "token_budget", "per_call"]`.
macro_rules! at {
    ($($seg:expr),* $(,)?) => { &[$($crate::config::tree::Seg::from($seg)),*][..] };
}
pub(crate) use at;

mod consolidation;
mod mcp;
use mcp::{mcp_server_entry, mcp_servers_of, mcp_tool_entry};

/// Collects diagnostics with positions looked up in the document.
pub(crate) struct Checker<'a> {
    pub file: &'a Path,
    pub loc: &'a Locator<'a>,
    pub out: Vec<Diagnostic>,
}

impl Checker<'_> {
    /// The position of the value at `path` (or of where it would go).
    pub fn value(&self, path: &[Seg]) -> Pos {
        self.loc.value(path)
    }

    /// The position of the key at the end of `path`.
    pub fn key(&self, path: &[Seg]) -> Pos {
        self.loc.key(path)
    }

    pub fn has(&self, path: &[Seg]) -> bool {
        self.loc.has(path)
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>, hint: impl Into<String>) {
        let d = Diagnostic::new(Severity::Error, self.file, pos, message, Some(hint.into()));
        self.out.push(d);
    }

    pub fn warning(&mut self, pos: Pos, message: impl Into<String>, hint: impl Into<String>) {
        let d = Diagnostic::new(
            Severity::Warning,
            self.file,
            pos,
            message,
            Some(hint.into()),
        );
        self.out.push(d);
    }

    /// Reports `name` at `pos` if it is not a valid id or session name.
    pub fn name(&mut self, pos: Pos, what: &str, name: &str) {
        if let Err(problem) = check_name(name) {
            self.error(
                pos,
                format!("{what} `{name}` is not valid: {problem}"),
                "use only letters, digits, `-`, `_` and `.`, not starting with `.` or `-`",
            );
        }
    }

    /// Reports each id that appeared before, pointing at the repeat.
    pub fn unique<'s>(&mut self, what: &str, section: &str, ids: impl Iterator<Item = &'s str>) {
        let mut first: HashMap<&str, usize> = HashMap::new();
        for (i, id) in ids.enumerate() {
            if let Some(&earlier) = first.get(id) {
                let line = self.value(at![section, earlier]).line;
                self.error(
                    self.value(at![section, i, "id"]),
                    format!("{what} id `{id}` is already used on line {line}"),
                    format!("give each {what} a unique id"),
                );
            } else {
                first.insert(id, i);
            }
        }
    }
}

/// Checks an agent id, workflow id or session name: letters, digits, `-`, `_`, `.`, not
/// starting with `.` or `-`. `:` in particular is reserved: it joins runtime ids.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if let Some(first) = name.chars().next().filter(|c| matches!(c, '.' | '-')) {
        return Err(format!("it starts with `{first}`"));
    }
    match name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        Some(':') => Err("it contains `:`, which separates the parts of runtime ids".into()),
        Some(c) if c.is_whitespace() => Err("it contains whitespace".into()),
        Some(c) => Err(format!("it contains `{c}`")),
        None => Ok(()),
    }
}

/// Parses an automation schedule: 5 cron fields, or 6 with seconds first (7 with a year),
/// or a nickname (`@daily`). The error names the field at fault.
pub fn parse_schedule(expr: &str) -> Result<croner::Cron, String> {
    crate::schedule::parse_cron(expr)
}

/// The semantic rules of each entry (the loader adds `costs` and `relations`); returns
/// errors and warnings in document order of discovery.
pub(crate) fn validate(config: &Config, loc: &Locator<'_>, file: &Path) -> Vec<Diagnostic> {
    let mut c = Checker {
        file,
        loc,
        out: Vec::new(),
    };
    if config.agents.is_empty() {
        c.error(
            c.key(at!["agents"]),
            "no agents are defined",
            "add an agent under `agents:` (`axocoatl init` writes a starter config)",
        );
    }
    c.unique(
        "agent",
        "agents",
        config.agents.iter().map(|a| a.id.as_str()),
    );
    for (i, agent) in config.agents.iter().enumerate() {
        agent_fields(&mut c, config, i, agent);
    }
    for (name, provider) in &config.providers {
        provider_entry(&mut c, name, provider);
    }
    for (name, server) in &config.mcp_servers {
        mcp_server_entry(&mut c, name, server);
        if !config.agents.iter().any(|a| a.mcp_servers.contains(name)) {
            c.warning(
                c.key(at!["mcp_servers", name.as_str()]),
                format!("MCP server `{name}` is not listed by any agent, so it never starts"),
                format!("add `mcp_servers: [{name}]` to the agents that should use its tools"),
            );
        }
    }
    servers_in_a_writable_workspace(&mut c, config);
    other_sections(&mut c, config);
    c.out
}

/// An MCP server program (or a file in its `args:`) inside a workspace an agent can write:
/// the write tools refuse it and commands find it read-only, but what it imports or reads
/// from its directory is not protected, and that runs outside the sandbox.
fn servers_in_a_writable_workspace(c: &mut Checker<'_>, config: &Config) {
    let Some(writer) = config
        .agents
        .iter()
        .find(|a| a.sandbox != SandboxMode::ReadOnly)
    else {
        return;
    };
    let dir = match c.file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let workspace = real(&match &config.workspace {
        Some(w) => dir.join(w),
        None => dir.to_path_buf(),
    });
    for (name, server) in &config.mcp_servers {
        if !config.agents.iter().any(|a| a.mcp_servers.contains(name)) {
            continue;
        }
        let mut files = Vec::new();
        if let Some(program) = server.program_path(dir) {
            files.push((
                at!["mcp_servers", name.as_str(), "command"].to_vec(),
                server.command.as_str(),
                program,
            ));
        }
        for (i, file) in server.file_args(dir) {
            files.push((
                at!["mcp_servers", name.as_str(), "args", i].to_vec(),
                server.args[i].as_str(),
                file,
            ));
        }
        for (at, shown, file) in files {
            if !real(&file).starts_with(&workspace) {
                continue;
            }
            let (id, sandbox) = (&writer.id, writer.sandbox.as_str());
            let message = if file.exists() {
                format!("MCP server `{name}`: `{shown}` lies inside the workspace, which agent `{id}` can write (sandbox: {sandbox}); agents' tools and commands find that file read-only, but not what it imports or reads from its directory, and the server runs outside the sandbox")
            } else {
                format!("MCP server `{name}`: `{shown}` does not exist, and lies inside the workspace, which agent `{id}` can write (sandbox: {sandbox}); a command could create it, and the server would run it outside the sandbox")
            };
            c.warning(
                c.value(&at),
                message,
                "move the server's files out of the workspace, or set `workspace:` to a directory that does not hold them",
            );
        }
    }
}

/// `path` with its symlinks resolved as far as it exists.
fn real(path: &Path) -> std::path::PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => real(parent).join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

fn agent_fields(c: &mut Checker<'_>, config: &Config, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    c.name(c.value(at!["agents", i, "id"]), "agent id", id);

    provider_of(c, config, i, agent);

    mcp_servers_of(c, config, i, agent);
    for (j, tool) in agent.tools.iter().enumerate() {
        let earlier = agent.tools[..j].contains(tool);
        if tool.trim().is_empty() || earlier {
            let what = if earlier {
                "is listed twice"
            } else {
                "is empty"
            };
            c.error(
                c.value(at!["agents", i, "tools", j]),
                format!("agent `{id}`: tool `{tool}` {what}"),
                "list each tool once by name",
            );
        } else if let Some((server, name)) = split_mcp_tool_name(tool) {
            mcp_tool_entry(c, config, i, j, agent, server, name);
        } else if !crate::catalog::is_known_tool(tool) {
            let known: Vec<&str> = crate::catalog::TOOL_NAMES.iter().map(|t| t.name).collect();
            let hint = match known.iter().min_by_key(|t| strsim::levenshtein(t, tool)) {
                Some(near) if strsim::levenshtein(near, tool) <= 3 => {
                    format!("did you mean `{near}`? known tools: {}", known.join(", "))
                }
                _ => format!("known tools: {}", known.join(", ")),
            };
            c.error(
                c.value(at!["agents", i, "tools", j]),
                format!("agent `{id}`: unknown tool `{tool}`"),
                &hint,
            );
        } else if crate::catalog::tool_named(tool)
            .is_some_and(|t| !t.access.permitted(agent.sandbox))
        {
            c.error(
                c.value(at!["agents", i, "tools", j]),
                format!(
                    "agent `{id}`: tool `{tool}` writes the workspace, but the agent's sandbox is read-only"
                ),
                "set `sandbox: workspace-write` on this agent, or remove the tool from its list",
            );
        }
    }
    sandbox_and_steps(c, i, agent);

    for (key, value) in [
        ("activation_threshold", agent.activation_threshold),
        ("activation_decay", agent.activation_decay),
    ] {
        if let Some(v) = value.filter(|v| !(v.is_finite() && *v >= 0.0)) {
            c.error(
                c.value(at!["agents", i, key]),
                format!("agent `{id}`: {key} must be a number of 0 or more (got {v})"),
                format!("set a non-negative `{key}`, or remove it to use the default"),
            );
        }
    }

    sampling_and_budget(c, i, agent);
    budget_floor(c, config, i, agent);
    memory(c, config, i, agent);
    consolidation::agent(c, i, agent);
}

/// The agent's provider: an entry of `providers:` or a built-in kind, with a `model` when
/// its kind needs one, and (script) a script file.
fn provider_of(c: &mut Checker<'_>, config: &Config, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    match lookup_provider(config, &agent.provider) {
        None => {
            let names = super::resolve::provider_names(config);
            c.error(
                c.value(at!["agents", i, "provider"]),
                format!(
                    "agent `{id}`: provider `{}` is neither an entry of `providers:` nor a built-in kind",
                    agent.provider
                ),
                suggestion(&agent.provider, names.iter().copied(), "providers"),
            );
        }
        Some((kind, entry)) => {
            let model_missing = agent.model.as_deref().is_none_or(|m| m.trim().is_empty());
            if needs_model(kind) && model_missing {
                c.error(
                    c.value(at!["agents", i, "model"]),
                    format!(
                        "agent `{id}`: provider `{}`{} needs a `model`",
                        agent.provider,
                        kind_note(&agent.provider, kind)
                    ),
                    "add `model: <name>` to this agent, e.g. `model: qwen2.5-coder:14b`",
                );
            }
            if kind == ProviderKind::Script && entry.is_none() {
                c.error(
                    c.value(at!["agents", i, "provider"]),
                    format!("agent `{id}`: the built-in `script` provider has no script file"),
                    "define an entry under `providers:` with `kind: script` and `script: FILE`, and name that entry here",
                );
            }
        }
    }
}

/// A budget no call fits: each call reserves at least the schemas of the agent's built-in
/// tools and its completion bound, so a smaller `per_call` (or `per_execution`) refuses
/// every call. A warning (the estimate is the fallback one, and MCP tools add to it).
fn budget_floor(c: &mut Checker<'_>, config: &Config, i: usize, agent: &AgentConfig) {
    let Some(budget) = &agent.token_budget else {
        return;
    };
    let Some((key, limit)) = [
        ("per_call", budget.per_call),
        ("per_execution", budget.per_execution),
    ]
    .into_iter()
    .filter_map(|(key, v)| v.filter(|&v| v > 0).map(|v| (key, v)))
    .min_by_key(|&(_, v)| v) else {
        return;
    };
    let completion = agent.sampling.max_tokens.map(u64::from);
    if completion.is_some_and(|m| m > limit) {
        return; // an error already says so
    }
    // The local model calls no tools: none are advertised.
    let local =
        lookup_provider(config, &agent.provider).is_some_and(|(k, _)| k == ProviderKind::Local);
    let tools: Vec<&crate::catalog::ToolName> = crate::catalog::TOOL_NAMES
        .iter()
        .filter(|_| !local)
        .filter(|t| {
            if agent.tools.is_empty() {
                t.access.in_baseline(agent.sandbox)
            } else {
                agent.tools.iter().any(|a| a == t.name) && t.access.permitted(agent.sandbox)
            }
        })
        // A coordinator's own calls advertise no memory tools.
        .filter(|t| {
            agent.role != AgentRole::Coordinator || t.access != crate::catalog::Access::Memory
        })
        .collect();
    let schemas: u64 = tools.iter().map(|t| t.schema_tokens).sum();
    let (answer, why) = match completion {
        Some(m) => (m, "sampling.max_tokens"),
        None => (
            u64::from(crate::catalog::DEFAULT_COMPLETION_BOUND),
            "the bound reserved when sampling.max_tokens is not set",
        ),
    };
    let floor = schemas + answer;
    if floor <= limit {
        return;
    }
    let id = agent.id.as_str();
    let n = tools.len();
    let hint = if schemas >= limit {
        format!("raise {key} to at least {floor}, or list fewer tools under `tools:`")
    } else {
        format!("raise {key} to at least {floor}, or set a smaller `sampling.max_tokens`")
    };
    c.warning(
        c.value(at!["agents", i, "token_budget", key]),
        format!(
            "agent `{id}`: token_budget.{key} ({limit}) can never be met: every call reserves at least {floor} tokens, {schemas} estimated for the schemas of its {n} built-in tool{} and {answer} for the answer ({why})",
            if n == 1 { "" } else { "s" }
        ),
        hint,
    );
}

/// An automation's schedule, once it parses: one that never fires is an error naming its
/// fields; one that fires more than once a minute is a warning.
pub(crate) fn schedule_checks(c: &mut Checker<'_>, i: usize, id: &str, expr: &str) {
    let pos = c.value(at!["automations", i, "schedule"]);
    if let Some(problem) = crate::schedule::never_fires(expr, crate::clock::now()) {
        c.error(
            pos,
            format!("automation `{id}`: schedule `{expr}` never fires: {problem}"),
            "fix the fields it names (`axocoatl automations list` shows the next occurrences of a schedule that fires)",
        );
    } else if let Some(n) = crate::schedule::per_minute(expr) {
        c.warning(
            pos,
            format!("automation `{id}`: schedule `{expr}` fires up to {n} times a minute: each occurrence is a turn"),
            "use 5 fields (`minute hour day-of-month month day-of-week`) to run at most once a minute; with `catch_up: all`, `catch_up_max_runs` bounds the runs after a pause",
        );
    }
}

fn sandbox_and_steps(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    if agent.sandbox == SandboxMode::FullAccess {
        c.warning(
            c.value(at!["agents", i, "sandbox"]),
            format!("agent `{id}`: sandbox `full-access` runs its commands unconfined: they can write anywhere and use the network"),
            "use `sandbox: workspace-write` (writes confined to the workspace, no network) unless its commands need more",
        );
    }
    command_limits(c, i, agent);
    if agent.max_steps == Some(0) {
        c.error(
            c.value(at!["agents", i, "max_steps"]),
            format!("agent `{id}`: max_steps must be at least 1"),
            format!("set the number of model calls a turn may make, or remove it for the default ({DEFAULT_MAX_STEPS})"),
        );
    }
}

/// An agent's `command_limits:`: each at least 1, byte sizes within range; a warning when
/// its sandbox is `full-access`, whose commands run without them.
fn command_limits(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    let given = [
        ("processes", agent.command_limits.processes),
        ("memory_mb", agent.command_limits.memory_mb),
        ("file_size_mb", agent.command_limits.file_size_mb),
        ("cpu_secs", agent.command_limits.cpu_secs),
    ];
    for ((key, value), (_, _, default)) in given.into_iter().zip(agent.command_limits.effective()) {
        let pos = c.value(at!["agents", i, "command_limits", key]);
        match value {
            Some(0) => c.error(
                pos,
                format!("agent `{id}`: command_limits.{key} must be at least 1"),
                format!("set a positive number, or remove `{key}` for the default ({default})"),
            ),
            Some(n) if key.ends_with("_mb") && n > MAX_COMMAND_MB => c.error(
                pos,
                format!("agent `{id}`: command_limits.{key} is too large ({n}; at most {MAX_COMMAND_MB})"),
                format!("set a number of MiB up to {MAX_COMMAND_MB}, or remove `{key}` for the default ({default})"),
            ),
            _ => {}
        }
    }
    if agent.sandbox == SandboxMode::FullAccess && c.has(at!["agents", i, "command_limits"]) {
        c.warning(
            c.key(at!["agents", i, "command_limits"]),
            format!("agent `{id}`: command_limits apply to sandboxed commands only; with `sandbox: full-access` its commands run without them"),
            "use `sandbox: workspace-write` for limited commands, or remove `command_limits`",
        );
    }
}

/// ` (kind openai)` when the provider's name does not already say its kind.
fn kind_note(name: &str, kind: ProviderKind) -> String {
    if name == kind.as_str() {
        String::new()
    } else {
        format!(" (kind {})", kind.as_str())
    }
}

/// A problem with a sampling value: the key, the message and the hint. The same words
/// serve the YAML (with its position) and `send -o` (with the option).
pub(crate) struct SamplingProblem {
    pub key: &'static str,
    pub message: String,
    pub hint: String,
}

/// What is wrong with `agent`'s sampling values, alone and against its token budget.
pub(crate) fn sampling_problems(agent: &AgentConfig) -> Vec<SamplingProblem> {
    let id = agent.id.as_str();
    let s = &agent.sampling;
    let mut out = Vec::new();
    let mut problem = |key, message: String, hint: String| {
        out.push(SamplingProblem { key, message, hint });
    };
    if let Some(t) = s.temperature.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        problem(
            "temperature",
            format!("agent `{id}`: temperature must be 0 or more (got {t})"),
            "use 0 for focused output up to about 1 for varied output, or remove it for the provider default".into(),
        );
    }
    if let Some(p) = s.top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
        problem(
            "top_p",
            format!("agent `{id}`: top_p must be greater than 0 and at most 1 (got {p})"),
            "use a value like 0.9, or remove it for the provider default".into(),
        );
    }
    if s.max_tokens == Some(0) {
        problem(
            "max_tokens",
            format!("agent `{id}`: max_tokens must be at least 1"),
            "set a positive completion limit, or remove it for the provider default".into(),
        );
    }
    let call = agent.token_budget.as_ref().and_then(|b| b.per_call);
    if let (Some(max), Some(call)) = (s.max_tokens, call) {
        if u64::from(max) > call && call > 0 {
            problem(
                "max_tokens",
                format!("agent `{id}`: sampling.max_tokens ({max}) exceeds token_budget.per_call ({call}), so no call could fit"),
                format!("lower max_tokens to at most {call}, or raise per_call"),
            );
        }
    }
    out
}

fn sampling_and_budget(c: &mut Checker<'_>, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    for p in sampling_problems(agent) {
        c.error(
            c.value(at!["agents", i, "sampling", p.key]),
            p.message,
            p.hint,
        );
    }

    let Some(budget) = &agent.token_budget else {
        return;
    };
    for (key, value) in [
        ("per_execution", budget.per_execution),
        ("per_call", budget.per_call),
    ] {
        if value == Some(0) {
            c.error(
                c.value(at!["agents", i, "token_budget", key]),
                format!("agent `{id}`: token_budget.{key} must be positive"),
                format!("set a positive token count, or remove `{key}` for no limit"),
            );
        }
    }
    if let (Some(call), Some(execution)) = (budget.per_call, budget.per_execution) {
        if call > execution {
            c.error(
                c.value(at!["agents", i, "token_budget", "per_call"]),
                format!("agent `{id}`: token_budget.per_call ({call}) exceeds per_execution ({execution})"),
                format!("lower per_call to at most {execution}, or raise per_execution"),
            );
        }
    }
    if budget.overflow_policy == OverflowPolicy::Summarize {
        c.warning(
            c.value(at!["agents", i, "token_budget", "overflow_policy"]),
            format!("agent `{id}`: overflow_policy `summarize` is a deprecated spelling of `warn`"),
            "write `overflow_policy: warn`; it behaves the same and does not summarize spent tokens",
        );
    }
}

fn memory(c: &mut Checker<'_>, config: &Config, i: usize, agent: &AgentConfig) {
    let id = agent.id.as_str();
    let m = &agent.memory;
    if m.max_session_messages == 0 {
        c.error(
            c.value(at!["agents", i, "memory", "max_session_messages"]),
            format!("agent `{id}`: memory.max_session_messages must be at least 1"),
            "set a positive number of messages to keep in the live conversation (default 100)",
        );
    }
    if m.recall.top_k == 0 {
        c.error(
            c.value(at!["agents", i, "memory", "recall", "top_k"]),
            format!("agent `{id}`: memory.recall.top_k must be at least 1"),
            "set `passive_inject: false` to turn passive recall off instead",
        );
    }
    let score = m.recall.min_score;
    if !(0.0..=1.0).contains(&score) {
        c.error(
            c.value(at!["agents", i, "memory", "recall", "min_score"]),
            format!("agent `{id}`: memory.recall.min_score must be between 0 and 1 (got {score})"),
            "use a similarity threshold like 0.15",
        );
    }
    if agent.role == AgentRole::Coordinator {
        for key in ["recall", "core"] {
            if c.has(at!["agents", i, "memory", key]) {
                c.warning(
                    c.key(at!["agents", i, "memory", key]),
                    format!("agent `{id}`: a coordinator does not use memory.{key}"),
                    "move memory settings to its workers; a coordinator keeps only its conversation",
                );
            }
        }
    }

    let blocks = &m.core.blocks;
    for (j, block) in blocks.iter().enumerate() {
        let field = |c: &Checker<'_>, key: &str| {
            c.value(at!["agents", i, "memory", "core", "blocks", j, key])
        };
        c.name(field(c, "label"), "core block label", &block.label);
        if let Some(k) = blocks[..j].iter().position(|b| b.label == block.label) {
            let line = c
                .value(at!["agents", i, "memory", "core", "blocks", k])
                .line;
            c.error(
                field(c, "label"),
                format!(
                    "agent `{id}`: core block label `{}` is already used on line {line}",
                    block.label
                ),
                "give each core block a unique label",
            );
        }
        if block.limit == 0 {
            c.error(
                field(c, "limit"),
                format!("agent `{id}`: core block `{}` has limit 0", block.label),
                "set a positive character limit (default 2000)",
            );
        }
        if block.shared {
            let other = config.agents[..i].iter().find_map(|a| {
                let same = a
                    .memory
                    .core
                    .blocks
                    .iter()
                    .find(|b| b.shared && b.label == block.label)?;
                (same.limit != block.limit).then_some((a.id.as_str(), same.limit))
            });
            if let Some((other, limit)) = other {
                c.warning(
                    field(c, "limit"),
                    format!(
                        "agent `{id}`: shared block `{}` has limit {} here but {limit} in agent `{other}`",
                        block.label, block.limit
                    ),
                    "give a shared block the same limit everywhere: agents share its contents",
                );
            }
        }
    }
}

fn provider_entry(c: &mut Checker<'_>, name: &str, p: &ProviderConfig) {
    let field = |key: &str| at!["providers", name, key].to_vec();
    c.name(c.key(at!["providers", name]), "provider name", name);
    let set = [
        ("base_url", p.base_url.is_some()),
        ("api_key_env", p.api_key_env.is_some()),
        ("timeout_secs", p.timeout_secs.is_some()),
        ("connect_timeout_secs", p.connect_timeout_secs.is_some()),
        ("max_retries", p.max_retries.is_some()),
        ("deadline_secs", p.deadline_secs.is_some()),
        ("model_path", p.model_path.is_some()),
        ("threads", p.threads.is_some()),
        ("context_size", p.context_size.is_some()),
        ("script", p.script.is_some()),
    ];
    let applies: &[&str] = match p.kind {
        ProviderKind::Ollama | ProviderKind::Openai | ProviderKind::Anthropic => &[
            "base_url",
            "api_key_env",
            "timeout_secs",
            "connect_timeout_secs",
            "max_retries",
            "deadline_secs",
        ],
        ProviderKind::Local => &["model_path", "threads", "context_size"],
        ProviderKind::Script => &["script"],
    };
    for (key, is_set) in set {
        if is_set && !applies.contains(&key) {
            c.error(
                c.key(&field(key)),
                format!(
                    "provider `{name}`: `{key}` does not apply to kind `{}`",
                    p.kind.as_str()
                ),
                format!(
                    "remove `{key}`, or change `kind` (this kind takes: {})",
                    applies.join(", ")
                ),
            );
        }
    }
    if p.kind == ProviderKind::Script && p.script.is_none() {
        c.error(
            c.value(&field("script")),
            format!("provider `{name}`: kind `script` needs a `script` file"),
            "add `script: replies.yaml` (relative to this config file)",
        );
    }
    if let Some(url) = &p.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            c.error(
                c.value(&field("base_url")),
                format!("provider `{name}`: base_url `{url}` is not an http:// or https:// URL"),
                "write the full URL, e.g. `http://127.0.0.1:11434`",
            );
        }
    }
    if let Some(var) = &p.api_key_env {
        let is_name = var.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_')
            && var
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
        if !is_name {
            // Never echo the value: it may be the key itself.
            c.error(
                c.value(&field("api_key_env")),
                format!("provider `{name}`: api_key_env must be the name of an environment variable, not the key"),
                "put the key in an environment variable (e.g. OPENAI_API_KEY) and write that variable's name here; keys never belong in axocoatl.yaml",
            );
        }
    }
    for (key, zero) in [
        ("timeout_secs", p.timeout_secs == Some(0)),
        ("connect_timeout_secs", p.connect_timeout_secs == Some(0)),
        ("deadline_secs", p.deadline_secs == Some(0)),
        ("threads", p.threads == Some(0)),
        ("context_size", p.context_size == Some(0)),
    ] {
        if zero {
            c.error(
                c.value(&field(key)),
                format!("provider `{name}`: {key} must be positive"),
                format!("set a positive `{key}`, or remove it for the default"),
            );
        }
    }
    if let Some(threads) = p.threads.filter(|&t| t > MAX_THREADS) {
        c.error(
            c.value(&field("threads")),
            format!("provider `{name}`: threads is {threads}, more than {MAX_THREADS}"),
            "set `threads` to at most the machine's cores: a thread beyond them only waits for one",
        );
    }
}

/// The most compute threads a `local` provider may ask for: each one is a thread the model
/// keeps while it is loaded, and a prompt is shared out in groups of 8 tokens.
pub const MAX_THREADS: usize = 256;

/// The OTLP protocols `telemetry.protocol` takes.
pub const OTLP_PROTOCOLS: &[&str] = &["http/protobuf", "http/json"];

fn telemetry_section(c: &mut Checker<'_>, t: &super::TelemetryConfig) {
    if let Some(url) = &t.otlp_endpoint {
        let scheme_ok = ["http://", "https://"]
            .iter()
            .any(|p| url.len() > p.len() && url.to_ascii_lowercase().starts_with(p));
        if !scheme_ok || url.chars().any(char::is_whitespace) {
            c.error(
                c.value(at!["telemetry", "otlp_endpoint"]),
                format!("telemetry.otlp_endpoint `{url}` is not an http:// or https:// URL"),
                "give the collector's OTLP/HTTP URL, e.g. http://localhost:4318",
            );
        }
    }
    if let Some(p) = &t.protocol {
        if !OTLP_PROTOCOLS.contains(&p.as_str()) {
            let why = if p == "grpc" {
                "OTLP over gRPC is not supported; collectors take OTLP/HTTP too (port 4318)"
            } else {
                "one of http/protobuf (the default) and http/json"
            };
            c.error(
                c.value(at!["telemetry", "protocol"]),
                format!("telemetry.protocol `{p}` is not supported"),
                why,
            );
        }
    }
}

/// `attachments.ocr`: the language codes, the limits, and (when the section is written)
/// whether each language's data is installed: a missing one is named with its Debian
/// package (a warning: attaching an image then says so too).
fn attachments(c: &mut Checker<'_>, config: &Config) {
    let ocr = &config.attachments.ocr;
    let at_langs = at!["attachments", "ocr", "languages"];
    if ocr.languages.is_empty() {
        c.error(
            c.value(at_langs),
            "attachments.ocr.languages is empty",
            "name at least one Tesseract language, e.g. [eng], or set attachments.ocr.enabled: false",
        );
    }
    let mut bad = false;
    for (i, lang) in ocr.languages.iter().enumerate() {
        let ok = !lang.is_empty()
            && lang.len() <= 64
            && lang
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && !lang.starts_with('-');
        if !ok {
            bad = true;
            c.error(
                c.value(at!["attachments", "ocr", "languages", i]),
                format!("attachments.ocr.languages: {lang:?} is not a Tesseract language code"),
                "use codes such as eng, deu, fra, chi_sim (the names of the .traineddata files)",
            );
        }
    }
    for (key, zero) in [
        ("max_pixels", ocr.max_pixels == 0),
        ("timeout_secs", ocr.timeout_secs == 0),
    ] {
        if zero {
            c.error(
                c.value(at!["attachments", "ocr", key]),
                format!("attachments.ocr.{key} must be positive"),
                "give a positive number, or remove it for the default (max_pixels 50000000, timeout_secs 120)",
            );
        }
    }
    if bad || !ocr.enabled || !c.has(at!["attachments", "ocr"]) {
        return;
    }
    for (i, lang) in ocr.languages.iter().enumerate() {
        if !crate::ocr_data::has_language(lang) {
            c.warning(
                c.value(at!["attachments", "ocr", "languages", i]),
                format!("the OCR language data {lang:?} is not installed: images are attached without their text until it is"),
                format!(
                    "apt-get install {} (or TESSDATA_PREFIX names the directory with {lang}.traineddata)",
                    crate::ocr_data::package_of(lang)
                ),
            );
        }
    }
}

fn other_sections(c: &mut Checker<'_>, config: &Config) {
    attachments(c, config);
    consolidation::section(c, config);
    if config.checkpoint.keep == 0 {
        c.error(
            c.value(at!["checkpoint", "keep"]),
            "checkpoint.keep must be at least 1",
            "keep at least the latest checkpoint: recovery restarts from it (default 3)",
        );
    }
    telemetry_section(c, &config.telemetry);
    if let Some(session) = &config.default_session {
        c.name(c.value(at!["default_session"]), "default_session", session);
    }
    if let Some(ws) = &config.workspace {
        let base = c
            .file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = base.join(ws);
        if !dir.is_dir() {
            let what = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            c.error(
                c.value(at!["workspace"]),
                format!("workspace `{}` {what} ({})", ws.display(), dir.display()),
                "create it, or give the directory agents work in, relative to this file (default: this file's directory)",
            );
        }
    }
}
