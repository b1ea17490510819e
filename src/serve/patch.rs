//! `agents set ID KEY=VALUE`: an in-memory patch of one agent's configuration. The YAML
//! file is never written; the patch lives as long as the `serve` process.

use serde_json::Value;

use crate::config::{AgentConfig, AgentRole, Config};
use crate::error::{Result, RuntimeError};

/// Keys that say what an agent is, not how it behaves: changing them in memory would make
/// `serve` disagree with every other command about the agent.
const FIXED: &[&str] = &["id", "role", "depends_on"];

/// The value a `KEY=VALUE` argument means: YAML (a number, a list, `null`), else the text.
fn parse_value(text: &str) -> Value {
    crate::config::read_yaml::<Value>(text, "the value")
        .ok()
        .filter(|v| !v.is_null() || text.trim() == "null" || text.trim() == "~")
        .unwrap_or_else(|| Value::String(text.to_owned()))
}

/// Agent `agent` of `config` with `key` (dotted, e.g. `sampling.temperature`) set to `value`.
pub fn patched(config: &Config, agent: &str, key: &str, value: &str) -> Result<AgentConfig> {
    let current = config
        .agent(agent)
        .ok_or_else(|| RuntimeError::UnknownAgent {
            id: agent.to_owned(),
            known: config.agents.iter().map(|a| a.id.clone()).collect(),
        })?;
    let first = key.split('.').next().unwrap_or(key);
    if FIXED.contains(&first) {
        return Err(RuntimeError::Refused {
            message: format!("`{first}` of agent {agent:?} cannot be set in memory"),
            hint: crate::error::Next::RestartServe,
        });
    }
    let invalid = |detail: String| {
        RuntimeError::Invalid {
        message: format!("cannot set {key} of agent {agent:?}: {detail}"),
        hint: "KEY is a field of the agent as in axocoatl.yaml (e.g. model, system_prompt, sampling.temperature)".into(),
    }
    };
    let tree = serde_json::to_value(current).map_err(|e| invalid(e.to_string()))?;
    let parsed = parse_value(value);
    let first_try = set_path(tree.clone(), key, parsed.clone())
        .map_err(&invalid)
        .and_then(|t| serde_json::from_value::<AgentConfig>(t).map_err(|e| invalid(e.to_string())));
    let agent_config = match first_try {
        Ok(a) => a,
        // `model: 1234` is the text "1234" when the field wants text.
        Err(_) if !parsed.is_string() => {
            let t = set_path(tree, key, Value::String(value.to_owned())).map_err(&invalid)?;
            serde_json::from_value(t).map_err(|e| invalid(e.to_string()))?
        }
        Err(e) => return Err(e),
    };
    if agent_config.role == AgentRole::Worker {
        return Err(super::worker_refusal(agent));
    }
    Ok(agent_config)
}

fn set_path(mut tree: Value, key: &str, value: Value) -> std::result::Result<Value, String> {
    let mut at = &mut tree;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            return Err("an empty key".into());
        }
        let Value::Object(map) = at else {
            return Err(format!("{} is not a mapping", parts[..i].join(".")));
        };
        if i + 1 == parts.len() {
            map.insert((*part).to_owned(), value);
            break;
        }
        at = map
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Default::default()));
        if at.is_null() {
            *at = Value::Object(Default::default());
        }
    }
    Ok(tree)
}

/// Replaces agent `agent_config.id` in `config`.
pub fn apply(config: &mut Config, agent_config: AgentConfig) {
    if let Some(slot) = config.agents.iter_mut().find(|a| a.id == agent_config.id) {
        *slot = agent_config;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        crate::config::load_str(
            std::path::Path::new("axocoatl.yaml"),
            "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n    system_prompt: old\n",
        )
        .expect("config")
        .config
    }

    #[test]
    fn a_patch_sets_text_numbers_and_nested_keys() {
        let c = config();
        let a = patched(&c, "a", "system_prompt", "Be brief.").expect("set");
        assert_eq!(a.system_prompt.as_deref(), Some("Be brief."));
        let a = patched(&c, "a", "sampling.temperature", "0.25").expect("set");
        assert_eq!(a.sampling.temperature, Some(0.25));
        let a = patched(&c, "a", "model", "1234").expect("set");
        assert_eq!(a.model.as_deref(), Some("1234"));
    }

    #[test]
    fn fixed_and_unknown_keys_are_refused() {
        let c = config();
        assert!(matches!(
            patched(&c, "a", "id", "b"),
            Err(RuntimeError::Refused { .. })
        ));
        assert!(matches!(
            patched(&c, "a", "colour", "blue"),
            Err(RuntimeError::Invalid { .. })
        ));
        assert!(matches!(
            patched(&c, "nobody", "model", "x"),
            Err(RuntimeError::UnknownAgent { .. })
        ));
    }
}
