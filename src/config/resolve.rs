//! From an agent's `provider:` name to a concrete endpoint, with the conventional defaults of
//! each built-in kind. API keys stay in the environment: only the variable's name is resolved.

use std::path::{Path, PathBuf};

use super::types::{AgentConfig, AgentRole, Config, ProviderConfig, ProviderKind};

/// The model the `local` provider runs when an agent names none.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2-135m-instruct";
/// The file name of the default local model in the model cache.
pub const DEFAULT_LOCAL_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const DEFAULT_OLLAMA_URL: &str = "http://127.0.0.1:11434";
pub const DEFAULT_OPENAI_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_OPENAI_KEY_ENV: &str = "OPENAI_API_KEY";
pub const DEFAULT_ANTHROPIC_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The model name reported by a script provider when the agent names none.
const SCRIPT_MODEL: &str = "script";

/// Everything a provider adapter needs to reach its model.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedProvider {
    /// The agent's `provider:` value: an entry of `providers:` or a built-in kind.
    pub name: String,
    pub kind: ProviderKind,
    pub model: String,
    pub base_url: Option<String>,
    /// Where `base_url` came from, as a clause for messages ("set by OLLAMA_HOST",
    /// the entry's `base_url`, the kind's default).
    pub base_url_from: Option<String>,
    /// The name of the environment variable holding the API key; never the key.
    pub api_key_env: Option<String>,
    pub timeout_secs: u64,
    pub connect_timeout_secs: u64,
    pub max_retries: u32,
    /// The longest a whole call may take (`None`: no limit).
    pub deadline_secs: Option<u64>,
    pub model_path: Option<PathBuf>,
    /// Where a `local` provider keeps its ready-to-run copies of model files (see
    /// [`local_ready_dir`]); `None` when no cache directory is known.
    pub ready_dir: Option<PathBuf>,
    pub threads: Option<usize>,
    pub context_size: Option<usize>,
    pub script: Option<PathBuf>,
}

/// The kind behind a provider name, and its `providers:` entry when it has one.
pub(crate) fn lookup_provider<'a>(
    config: &'a Config,
    name: &str,
) -> Option<(ProviderKind, Option<&'a ProviderConfig>)> {
    match config.providers.get(name) {
        Some(entry) => Some((entry.kind, Some(entry))),
        None => ProviderKind::from_builtin(name).map(|kind| (kind, None)),
    }
}

/// Whether an agent on this kind of provider must name its model.
pub(crate) fn needs_model(kind: ProviderKind) -> bool {
    matches!(
        kind,
        ProviderKind::Ollama | ProviderKind::Openai | ProviderKind::Anthropic
    )
}

impl Config {
    /// Every environment variable a provider key is read from: each entry's `api_key_env`
    /// and the built-in default, whichever agents use them (commands never see these).
    pub fn key_env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone())
            .chain([
                DEFAULT_OPENAI_KEY_ENV.to_string(),
                DEFAULT_ANTHROPIC_KEY_ENV.to_string(),
            ])
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub fn agent(&self, id: &str) -> Option<&AgentConfig> {
        self.agents.iter().find(|agent| agent.id == id)
    }

    /// `default_agent` if set, else the first autonomous agent.
    pub fn default_agent(&self) -> Option<&AgentConfig> {
        match &self.default_agent {
            Some(id) => self.agent(id),
            None => self
                .agents
                .iter()
                .find(|agent| agent.role == AgentRole::Autonomous),
        }
    }

    /// Resolves `agent.provider` with the defaults of its kind. `env` reads environment
    /// variables (injected for tests); relative paths are taken from `config_dir`.
    pub fn resolve_provider(
        &self,
        agent: &AgentConfig,
        env: &dyn Fn(&str) -> Option<String>,
        config_dir: &Path,
    ) -> Result<ResolvedProvider, String> {
        let name = agent.provider.as_str();
        let (kind, entry) = lookup_provider(self, name).ok_or_else(|| {
            format!(
                "agent `{}`: provider `{name}` is neither an entry of `providers:` nor one of `ollama`, `openai`, `anthropic`, `local`, `script`",
                agent.id
            )
        })?;
        let env = |key: &str| {
            env(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let model = match (agent.model.as_deref().map(str::trim), kind) {
            (Some(model), _) if !model.is_empty() => model.to_string(),
            (_, ProviderKind::Local) => DEFAULT_LOCAL_MODEL.to_string(),
            (_, ProviderKind::Script) => SCRIPT_MODEL.to_string(),
            (_, kind) => {
                return Err(format!(
                    "agent `{}`: provider `{name}` ({}) needs a `model`",
                    agent.id,
                    kind.as_str()
                ))
            }
        };
        let (base_url, base_url_from) = base_url_of(kind, name, entry, &env);
        let default_key = match kind {
            ProviderKind::Openai => Some(DEFAULT_OPENAI_KEY_ENV),
            ProviderKind::Anthropic => Some(DEFAULT_ANTHROPIC_KEY_ENV),
            _ => None,
        };
        let api_key_env = entry
            .and_then(|e| e.api_key_env.clone())
            .or_else(|| default_key.map(str::to_string));
        let model_path = match kind {
            ProviderKind::Local => match entry.and_then(|e| e.model_path.as_ref()) {
                Some(path) => Some(config_dir.join(path)),
                None => local_model_path(&env),
            },
            _ => None,
        };
        let script = match (kind, entry.and_then(|e| e.script.as_ref())) {
            (ProviderKind::Script, Some(script)) => Some(config_dir.join(script)),
            (ProviderKind::Script, None) => {
                return Err(format!(
                    "agent `{}`: provider `{name}` has no `script` file; define a provider with `kind: script` and `script: FILE`",
                    agent.id
                ))
            }
            _ => None,
        };
        Ok(ResolvedProvider {
            name: name.to_string(),
            kind,
            model,
            base_url,
            base_url_from,
            api_key_env,
            timeout_secs: entry
                .and_then(|e| e.timeout_secs)
                .unwrap_or(DEFAULT_TIMEOUT_SECS),
            connect_timeout_secs: entry
                .and_then(|e| e.connect_timeout_secs)
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT_SECS),
            max_retries: entry
                .and_then(|e| e.max_retries)
                .unwrap_or(DEFAULT_MAX_RETRIES),
            deadline_secs: entry.and_then(|e| e.deadline_secs),
            model_path,
            ready_dir: match kind {
                ProviderKind::Local => local_ready_dir(&env),
                _ => None,
            },
            threads: entry.and_then(|e| e.threads),
            context_size: entry.and_then(|e| e.context_size),
            script,
        })
    }
}

/// The base URL of provider `name` of `kind` (none for local and script providers), and
/// where it was set: its entry, the environment, or the default.
fn base_url_of(
    kind: ProviderKind,
    name: &str,
    entry: Option<&ProviderConfig>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Option<String>, Option<String>) {
    let from_entry = entry.and_then(|e| e.base_url.clone()).map(|url| {
        (
            url,
            format!("set by `base_url` of provider `{name}` in the configuration"),
        )
    });
    let (base_url, base_url_from) = match kind {
        ProviderKind::Ollama => from_entry
            .or_else(|| {
                env("OLLAMA_HOST").map(|host| (ollama_url(&host), "set by OLLAMA_HOST".to_string()))
            })
            .unwrap_or_else(|| {
                (
                    DEFAULT_OLLAMA_URL.to_string(),
                    "the default, as OLLAMA_HOST is unset".to_string(),
                )
            }),
        ProviderKind::Openai => from_entry
            .or_else(|| {
                env("OPENAI_BASE_URL").map(|url| (url, "set by OPENAI_BASE_URL".to_string()))
            })
            .unwrap_or_else(|| {
                (
                    DEFAULT_OPENAI_URL.to_string(),
                    "the default, as OPENAI_BASE_URL is unset".to_string(),
                )
            }),
        ProviderKind::Anthropic => from_entry
            .or_else(|| {
                env("ANTHROPIC_BASE_URL").map(|url| (url, "set by ANTHROPIC_BASE_URL".to_string()))
            })
            .unwrap_or_else(|| {
                (
                    DEFAULT_ANTHROPIC_URL.to_string(),
                    "the default, as ANTHROPIC_BASE_URL is unset".to_string(),
                )
            }),
        ProviderKind::Local | ProviderKind::Script => (String::new(), String::new()),
    };
    if base_url.is_empty() {
        (None, None)
    } else {
        (
            Some(base_url.trim_end_matches('/').to_string()),
            Some(base_url_from),
        )
    }
}

/// `OLLAMA_HOST` as Ollama itself reads it: `host`, `host:port` or a URL; the scheme
/// defaults to http and, without a scheme, the port to 11434.
fn ollama_url(host: &str) -> String {
    let host = host.trim_end_matches('/');
    if host.contains("://") {
        return host.to_string();
    }
    let has_port = match host.rsplit_once(':') {
        // `[::1]:11434` has a port, `[::1]` does not.
        Some((left, port)) => {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!left.contains(':') || left.ends_with(']'))
        }
        None => false,
    };
    if has_port {
        format!("http://{host}")
    } else {
        format!("http://{host}:11434")
    }
}

/// The model file of a `local` provider without `model_path`: `$AXOCOATL_MODEL`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/<default model file>` (where
/// `axocoatl models fetch` puts it).
pub fn local_model_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("AXOCOATL_MODEL")
        .map(PathBuf::from)
        .or_else(|| default_model_file(env))
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/<default model file>`.
fn default_model_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    Some(models_cache_dir(env)?.join(DEFAULT_LOCAL_MODEL_FILE))
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/ready`: the `local` provider's
/// ready-to-run copies of model files (Q8_0 weights made once instead of at every load), one
/// per model file used, whatever directory the model file is in. Safe to delete.
pub fn local_ready_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    Some(models_cache_dir(env)?.join("ready"))
}

fn models_cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let cache = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(cache.join("axocoatl").join("models"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(yaml: &str) -> Config {
        crate::config::load_str(Path::new("t.yaml"), yaml)
            .expect("test config is valid")
            .config
    }

    fn resolve(yaml: &str, vars: &[(&str, &str)]) -> ResolvedProvider {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let config = config(yaml);
        let agent = config.agents.first().expect("one agent");
        config
            .resolve_provider(agent, &|key| vars.get(key).cloned(), Path::new("/etc/ax"))
            .expect("resolves")
    }

    const OLLAMA: &str = "agents:\n  - {id: a, provider: ollama, model: m}\n";
    const OPENAI: &str = "agents:\n  - {id: a, provider: openai, model: gpt}\n";
    const LOCAL: &str = "agents:\n  - {id: a, provider: local}\n";

    #[test]
    fn ollama_defaults_to_loopback() {
        let p = resolve(OLLAMA, &[]);
        assert_eq!(p.kind, ProviderKind::Ollama);
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:11434"));
        assert_eq!(p.api_key_env, None);
        assert_eq!(
            (p.timeout_secs, p.connect_timeout_secs, p.max_retries),
            (300, 10, 2)
        );
        assert_eq!(p.model, "m");
    }

    #[test]
    fn ollama_host_is_read_like_ollama_reads_it() {
        let cases = [
            ("gpu-box:8080", "http://gpu-box:8080"),
            ("gpu-box", "http://gpu-box:11434"),
            ("0.0.0.0", "http://0.0.0.0:11434"),
            ("https://ollama.example.com/", "https://ollama.example.com"),
            ("http://10.0.0.2:11434", "http://10.0.0.2:11434"),
            ("[::1]:9999", "http://[::1]:9999"),
            ("[::1]", "http://[::1]:11434"),
            ("  ", "http://127.0.0.1:11434"),
        ];
        for (host, want) in cases {
            let p = resolve(OLLAMA, &[("OLLAMA_HOST", host)]);
            assert_eq!(p.base_url.as_deref(), Some(want), "OLLAMA_HOST={host:?}");
        }
    }

    #[test]
    fn entry_base_url_beats_the_environment() {
        let yaml = "providers:\n  box: {kind: ollama, base_url: \"http://box:1/\", timeout_secs: 5, max_retries: 0}\nagents:\n  - {id: a, provider: box, model: m}\n";
        let p = resolve(yaml, &[("OLLAMA_HOST", "elsewhere:2")]);
        assert_eq!(p.name, "box");
        assert_eq!(p.base_url.as_deref(), Some("http://box:1"));
        assert_eq!(
            (p.timeout_secs, p.connect_timeout_secs, p.max_retries),
            (5, 10, 0)
        );
    }

    #[test]
    fn openai_defaults_and_base_url_env() {
        let p = resolve(OPENAI, &[]);
        assert_eq!(p.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(p.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let p = resolve(OPENAI, &[("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/")]);
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        let yaml = "providers:\n  vllm: {kind: openai, base_url: \"http://gpu:8000/v1\", api_key_env: VLLM_KEY}\nagents:\n  - {id: a, provider: vllm, model: qwen}\n";
        let p = resolve(yaml, &[("OPENAI_BASE_URL", "http://ignored")]);
        assert_eq!(p.base_url.as_deref(), Some("http://gpu:8000/v1"));
        assert_eq!(p.api_key_env.as_deref(), Some("VLLM_KEY"));
    }

    #[test]
    fn anthropic_defaults_and_base_url_env() {
        let yaml = "agents:\n  - {id: a, provider: anthropic, model: claude-haiku-4-5}\n";
        let p = resolve(yaml, &[]);
        assert_eq!(p.kind, ProviderKind::Anthropic);
        assert_eq!(p.base_url.as_deref(), Some("https://api.anthropic.com"));
        assert_eq!(p.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        let p = resolve(yaml, &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")]);
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(
            p.base_url_from.as_deref(),
            Some("set by ANTHROPIC_BASE_URL")
        );
        let yaml = "providers:\n  claude: {kind: anthropic, api_key_env: WORK_KEY}\nagents:\n  - {id: a, provider: claude, model: claude-haiku-4-5}\n";
        assert_eq!(resolve(yaml, &[]).api_key_env.as_deref(), Some("WORK_KEY"));
        let config = config(yaml);
        assert!(config
            .key_env_names()
            .contains(&"ANTHROPIC_API_KEY".to_string()));
    }

    #[test]
    fn local_model_path_defaults() {
        let p = resolve(LOCAL, &[("HOME", "/home/u")]);
        assert_eq!(p.model, DEFAULT_LOCAL_MODEL);
        assert_eq!(p.base_url, None);
        assert_eq!(
            p.model_path,
            Some(PathBuf::from(
                "/home/u/.cache/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        let p = resolve(
            LOCAL,
            &[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/var/cache/u")],
        );
        assert_eq!(
            p.model_path,
            Some(PathBuf::from(
                "/var/cache/u/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        // A relative XDG_CACHE_HOME is invalid by the XDG spec and ignored.
        let p = resolve(LOCAL, &[("HOME", "/home/u"), ("XDG_CACHE_HOME", "cache")]);
        assert_eq!(
            p.model_path,
            Some(PathBuf::from(
                "/home/u/.cache/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf"
            ))
        );
        let p = resolve(
            LOCAL,
            &[("HOME", "/home/u"), ("AXOCOATL_MODEL", "/models/x.gguf")],
        );
        assert_eq!(p.model_path, Some(PathBuf::from("/models/x.gguf")));
        assert_eq!(resolve(LOCAL, &[]).model_path, None);
    }

    #[test]
    fn local_entry_paths_are_relative_to_the_config() {
        let yaml = "providers:\n  tiny: {kind: local, model_path: models/t.gguf, threads: 4, context_size: 2048}\nagents:\n  - {id: a, provider: tiny, model: tiny-model}\n";
        let p = resolve(yaml, &[("AXOCOATL_MODEL", "/ignored.gguf")]);
        assert_eq!(p.model_path, Some(PathBuf::from("/etc/ax/models/t.gguf")));
        assert_eq!((p.threads, p.context_size), (Some(4), Some(2048)));
        assert_eq!(p.model, "tiny-model");
    }

    #[test]
    fn script_path_is_relative_to_the_config() {
        let yaml = "providers:\n  fake: {kind: script, script: replies.yaml}\nagents:\n  - {id: a, provider: fake}\n";
        let p = resolve(yaml, &[]);
        assert_eq!(p.kind, ProviderKind::Script);
        assert_eq!(p.script, Some(PathBuf::from("/etc/ax/replies.yaml")));
        assert_eq!(p.model, "script");
    }

    #[test]
    fn unresolvable_providers_are_errors_not_panics() {
        let config = config(OLLAMA);
        let mut agent = config.agents[0].clone();
        agent.provider = "nope".into();
        let err = config
            .resolve_provider(&agent, &|_| None, Path::new("."))
            .expect_err("unknown");
        assert!(err.contains("`nope`"), "{err}");
        agent.provider = "ollama".into();
        agent.model = None;
        let err = config
            .resolve_provider(&agent, &|_| None, Path::new("."))
            .expect_err("no model");
        assert!(err.contains("needs a `model`"), "{err}");
    }

    #[test]
    fn default_agent_is_explicit_or_first_autonomous() {
        let yaml = "agents:\n  - {id: boss, provider: local, role: coordinator}\n  - {id: w, provider: local, role: worker}\n  - {id: solo, provider: local}\nworkflows:\n  - {id: team, entry_point: boss, workers: [w]}\n";
        let mut config = config(yaml);
        assert_eq!(config.default_agent().map(|a| a.id.as_str()), Some("solo"));
        config.default_agent = Some("boss".into());
        assert_eq!(config.default_agent().map(|a| a.id.as_str()), Some("boss"));
        assert!(config.agent("w").is_some());
        assert!(config.agent("nobody").is_none());
    }
}
