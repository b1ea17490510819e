//! Per-call overrides: `send -m MODEL`, `--system TEXT`, `-o KEY=VALUE`. They change the
//! agent a turn goes to for that turn alone, are checked with the words the configuration's
//! own checks use, and are recorded with the turn (`TurnOverrides`) so `show` displays them
//! and `retry` reuses them.

use serde::{Deserialize, Serialize};

use crate::config::{self, AgentConfig, Config, ResponseFormat};
use crate::error::{Result, RuntimeError};

/// The sampling keys `-o` accepts, as `sampling:` names them.
pub const OPTION_KEYS: &[&str] = &["temperature", "top_p", "max_tokens", "response_format"];

/// What a person changed for one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Overrides {
    /// A model of the agent's provider, or `PROVIDER:MODEL`.
    #[serde(default)]
    pub model: Option<String>,
    /// Replaces the agent's system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// Sampling options (`temperature`, `0.2`), in the order given; a later one of the same
    /// key wins.
    #[serde(default)]
    pub options: Vec<(String, String)>,
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.model.is_none() && self.system.is_none() && self.options.is_empty()
    }

    /// `self` with what `newer` sets laid over it (a retry's own flags over the original
    /// turn's).
    pub fn merged(&self, newer: &Overrides) -> Overrides {
        let mut options = self.options.clone();
        for (key, value) in &newer.options {
            options.retain(|(k, _)| k != key);
            options.push((key.clone(), value.clone()));
        }
        Overrides {
            model: newer.model.clone().or_else(|| self.model.clone()),
            system: newer.system.clone().or_else(|| self.system.clone()),
            options,
        }
    }

    /// Splits `-o KEY=VALUE`; the key is checked when the overrides are applied.
    pub fn parse_option(text: &str) -> std::result::Result<(String, String), String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_owned(), value.trim().to_owned()))
            }
            _ => Err(format!(
                "expected KEY=VALUE (keys: {}), e.g. temperature=0.2",
                OPTION_KEYS.join(", ")
            )),
        }
    }

    /// `agent` as this turn uses it: the model (and provider), system prompt and sampling
    /// replaced. Errors say what to change on the command line, in the configuration's
    /// own words for a value it would refuse.
    pub fn apply(&self, config: &Config, agent: &AgentConfig) -> Result<AgentConfig> {
        let mut patched = agent.clone();
        if let Some(model) = &self.model {
            let (provider, model) = split_model(config, model);
            let model = model.trim();
            if model.is_empty() {
                return Err(invalid(
                    format!(
                        "-m {:?} names no model",
                        self.model.as_deref().unwrap_or("")
                    ),
                    "give a model, e.g. `-m llama3.2` or `-m ollama:llama3.2`".into(),
                ));
            }
            if provider.is_none() {
                no_unknown_provider(config, agent, text_of(&self.model))?;
            }
            if let Some(provider) = provider {
                patched.provider = provider.to_owned();
            }
            runs_model(
                config,
                agent,
                &patched.provider,
                model,
                text_of(&self.model),
            )?;
            patched.model = Some(model.to_owned());
        }
        if let Some(system) = &self.system {
            patched.system_prompt = Some(system.clone());
        }
        for (key, value) in &self.options {
            set_option(&mut patched, key, value)?;
        }
        if let Some(p) = config::sampling_problems(&patched).into_iter().next() {
            let given = self
                .options
                .iter()
                .rev()
                .find(|(k, _)| k == p.key)
                .map(|(k, v)| format!("-o {k}={v}: "))
                .unwrap_or_default();
            return Err(invalid(format!("{given}{}", p.message), p.hint));
        }
        Ok(patched)
    }
}

/// `PROVIDER:MODEL` when the part before the first `:` names a provider (an entry of
/// `providers:` or a built-in kind); else the whole text is a model of the agent's
/// provider (Ollama's `llama3.2:3b` keeps its tag).
fn split_model<'a>(config: &Config, text: &'a str) -> (Option<&'a str>, &'a str) {
    match text.split_once(':') {
        Some((provider, model)) if config::lookup_provider(config, provider).is_some() => {
            (Some(provider), model)
        }
        _ => (None, text),
    }
}

fn text_of(model: &Option<String>) -> &str {
    model.as_deref().unwrap_or("")
}

/// `-m X:Y` where X is no provider: for a provider that runs whatever model it is named
/// (Ollama's `llama3.2:3b`, an OpenAI fine-tune `ft:gpt-4o:org`), the whole text is its
/// model; a provider that answers with one fixed model (`local`, `script`) has no model
/// of that name, so X was meant as a provider, and is not one.
fn no_unknown_provider(config: &Config, agent: &AgentConfig, text: &str) -> Result<()> {
    let Some((prefix, rest)) = text.split_once(':') else {
        return Ok(());
    };
    let fixed = config::lookup_provider(config, &agent.provider)
        .is_some_and(|(kind, _)| !config::takes_any_model(kind));
    if !fixed {
        return Ok(());
    }
    let names = config::provider_names(config);
    let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    Err(invalid(
        format!(
            "-m {text}: there is no provider `{prefix}` (providers: {})",
            listed.join(", ")
        ),
        match config::closest(prefix, names.iter().copied()) {
            Some(found) => format!("did you mean `-m {found}:{rest}`?"),
            None => format!("give PROVIDER:MODEL, e.g. `-m ollama:{rest}` for a model of Ollama"),
        },
    ))
}

/// A provider that answers with one fixed model (`local` runs one GGUF file, `script`
/// replays a file) cannot run another: a turn would be answered by that model while its
/// records named the one asked for.
fn runs_model(
    config: &Config,
    agent: &AgentConfig,
    provider: &str,
    model: &str,
    text: &str,
) -> Result<()> {
    let Some((kind, _)) = config::lookup_provider(config, provider) else {
        return Ok(());
    };
    if config::takes_any_model(kind) {
        return Ok(());
    }
    // The name the provider runs under: the agent's own `model` when the provider is its
    // own, else the kind's default.
    let own = (provider == agent.provider)
        .then(|| agent.model.as_deref().map(str::trim))
        .flatten()
        .filter(|m| !m.is_empty());
    let runs = own.unwrap_or(match kind {
        config::ProviderKind::Local => config::DEFAULT_LOCAL_MODEL,
        _ => "script",
    });
    if model == runs {
        return Ok(());
    }
    Err(match kind {
        config::ProviderKind::Local => invalid(
            format!(
                "-m {text}: provider `{provider}` runs the model {runs} in this process, not {model}"
            ),
            format!(
                "run {model} on Ollama with `-m ollama:{model}`; another GGUF file runs through a `providers:` entry of `kind: local` with its `model_path`"
            ),
        ),
        _ => invalid(
            format!(
                "-m {text}: provider `{provider}` replays its script ({runs}); it runs no model {model}"
            ),
            format!("name a provider that runs {model}, e.g. `-m ollama:{model}`, or leave out -m"),
        ),
    })
}

fn set_option(agent: &mut AgentConfig, key: &str, value: &str) -> Result<()> {
    let bad = |what: &str, example: &str| {
        invalid(
            format!("-o {key}={value}: {key} must be {what}"),
            format!("e.g. -o {key}={example}"),
        )
    };
    let s = &mut agent.sampling;
    match key {
        "temperature" => s.temperature = Some(value.parse().map_err(|_| bad("a number", "0.2"))?),
        "top_p" => s.top_p = Some(value.parse().map_err(|_| bad("a number", "0.9"))?),
        "max_tokens" => {
            s.max_tokens = Some(value.parse().map_err(|e: std::num::ParseIntError| {
                match e.kind() {
                    std::num::IntErrorKind::PosOverflow => invalid(
                        format!(
                            "-o {key}={value}: {value} tokens is more than max_tokens can be (at most {})",
                            u32::MAX
                        ),
                        format!("e.g. -o {key}=1024 (a model's window is far smaller)"),
                    ),
                    _ => bad("a whole number of tokens", "1024"),
                }
            })?)
        }
        "response_format" => {
            s.response_format = Some(match value {
                "text" => ResponseFormat::Text,
                "json" => ResponseFormat::Json,
                _ => return Err(bad("`text` or `json`", "json")),
            })
        }
        "schema" | "output_schema" | "schema_retries" => {
            return Err(invalid(
                format!("-o {key}={value}: a schema is not a sampling option"),
                "give it with --schema SCHEMA (and --schema-retries N), or `output_schema:` on \
                 the agent"
                    .into(),
            ))
        }
        _ => {
            return Err(invalid(
                format!("-o {key}={value}: unknown sampling option `{key}`"),
                config::suggestion(key, OPTION_KEYS.iter().copied(), "options"),
            ))
        }
    }
    Ok(())
}

fn invalid(message: String, hint: String) -> RuntimeError {
    RuntimeError::Invalid {
        message,
        hint: hint.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        config::load_str(
            std::path::Path::new("a.yaml"),
            "providers:\n  box:\n    kind: ollama\nagents:\n  - id: a\n    provider: local\n    token_budget: {per_call: 100}\n",
        )
        .expect("valid")
        .config
    }

    fn apply(o: &Overrides) -> std::result::Result<AgentConfig, String> {
        let c = config();
        o.apply(&c, &c.agents[0])
            .map_err(|e| match e.next().first() {
                Some(crate::error::Next::Say { text }) => format!("{e} / {text}"),
                other => format!("{e} / {other:?}"),
            })
    }

    fn with(model: Option<&str>, options: &[(&str, &str)]) -> Overrides {
        Overrides {
            model: model.map(Into::into),
            system: None,
            options: options
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    #[test]
    fn models_with_and_without_a_provider() {
        let a = apply(&with(Some("smollm2-135m-instruct"), &[])).expect("ok");
        assert_eq!(
            (a.provider.as_str(), a.model.as_deref()),
            ("local", Some("smollm2-135m-instruct"))
        );
        let a = apply(&with(Some("ollama:llama3.2:3b"), &[])).expect("ok");
        assert_eq!(
            (a.provider.as_str(), a.model.as_deref()),
            ("ollama", Some("llama3.2:3b"))
        );
        let a = apply(&with(Some("box:qwen"), &[])).expect("ok");
        assert_eq!(a.provider, "box");
        assert!(apply(&with(Some("openai:"), &[])).is_err());
    }

    #[test]
    fn a_model_no_provider_can_run_is_refused() {
        // The agent runs on `local`, which has one model.
        let e = apply(&with(Some("llama3.2"), &[])).expect_err("local runs one model");
        assert!(
            e.contains("provider `local` runs the model smollm2-135m-instruct in this process, not llama3.2")
                && e.contains("`-m ollama:llama3.2`"),
            "{e}"
        );
        let e = apply(&with(Some("nope:foo"), &[])).expect_err("no such provider");
        assert!(
            e.contains("there is no provider `nope` (providers: `box`, `ollama`, `openai`, `anthropic`, `local`, `script`)"),
            "{e}"
        );
        let e = apply(&with(Some("olama:llama3.2"), &[])).expect_err("a typo");
        assert!(e.contains("did you mean `-m ollama:llama3.2`?"), "{e}");
        // On a provider that runs any model it is named, `X:Y` is a model (a tag).
        let c = config();
        let mut agent = c.agents[0].clone();
        agent.provider = "box".into();
        agent.model = Some("m".into());
        let a = with(Some("nope:foo"), &[])
            .apply(&c, &agent)
            .expect("a tag");
        assert_eq!(
            (a.provider.as_str(), a.model.as_deref()),
            ("box", Some("nope:foo"))
        );
        // From there, `local:` names the local model or nothing.
        assert!(with(Some("local:smollm2-135m-instruct"), &[])
            .apply(&c, &agent)
            .is_ok());
        assert!(with(Some("local:llama3.2"), &[]).apply(&c, &agent).is_err());
    }

    #[test]
    fn options_are_checked_in_the_configuration_words() {
        let a = apply(&with(
            None,
            &[("temperature", "0.3"), ("response_format", "json")],
        ))
        .expect("ok");
        assert_eq!(a.sampling.temperature, Some(0.3));
        assert_eq!(a.sampling.response_format, Some(ResponseFormat::Json));
        let e = apply(&with(None, &[("temperature", "-1")])).expect_err("negative");
        assert!(e.contains("temperature must be 0 or more (got -1)"), "{e}");
        let e = apply(&with(None, &[("max_tokens", "500")])).expect_err("past per_call");
        assert!(e.contains("exceeds token_budget.per_call (100)"), "{e}");
        let e = apply(&with(None, &[("temprature", "1")])).expect_err("unknown");
        assert!(e.contains("did you mean `temperature`?"), "{e}");
        let e = apply(&with(None, &[("top_p", "high")])).expect_err("not a number");
        assert!(e.contains("top_p must be a number"), "{e}");
        let e = apply(&with(None, &[("schema", "name, age int")])).expect_err("a schema");
        assert!(
            e.contains("not a sampling option / give it with --schema"),
            "{e}"
        );
    }

    #[test]
    fn a_retry_lays_its_own_flags_over_the_original() {
        let original = Overrides {
            model: Some("a".into()),
            system: Some("s".into()),
            options: vec![
                ("temperature".into(), "1".into()),
                ("top_p".into(), "0.5".into()),
            ],
        };
        let newer = with(None, &[("temperature", "0")]);
        let merged = original.merged(&newer);
        assert_eq!(merged.model.as_deref(), Some("a"));
        assert_eq!(
            merged.options,
            vec![
                ("top_p".into(), "0.5".into()),
                ("temperature".into(), "0".into())
            ]
        );
        assert_eq!(
            Overrides::parse_option("temperature=0.2"),
            Ok(("temperature".into(), "0.2".into()))
        );
        assert!(Overrides::parse_option("=1").is_err());
    }
}
