//! Opens the provider an agent resolves to.

use std::time::Duration;

use crate::config::{ProviderKind, ResolvedProvider};
use crate::provider::redact::Redacting;
use crate::provider::{Provider, ProviderError};

/// Builds the adapter for a resolved provider. API keys are read from the environment here
/// and live only in memory.
pub fn open(resolved: &ResolvedProvider) -> Result<Box<dyn Provider>, ProviderError> {
    let api_key = resolved
        .api_key_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.is_empty());
    let http = || {
        let api_key = api_key.clone();
        super::http::HttpOptions {
            name: resolved.name.clone(),
            base_url: resolved.base_url.clone().unwrap_or_default(),
            model: resolved.model.clone(),
            api_key,
            timeout: Duration::from_secs(resolved.timeout_secs),
            connect_timeout: Duration::from_secs(resolved.connect_timeout_secs),
            max_retries: resolved.max_retries,
            deadline: resolved.deadline_secs.map(Duration::from_secs),
            key_env: resolved.api_key_env.clone(),
            base_url_from: resolved.base_url_from.clone(),
        }
    };
    // The key never leaves the adapter: not in streamed text, messages, tool calls or errors.
    let redacting = |inner: Box<dyn Provider>| Redacting::wrap(inner, api_key.as_deref());
    match resolved.kind {
        ProviderKind::Ollama => Ok(redacting(Box::new(super::ollama::OllamaProvider::new(
            http(),
        )))),
        ProviderKind::Openai => Ok(redacting(Box::new(super::openai::OpenAiProvider::new(
            http(),
        )))),
        ProviderKind::Anthropic => Ok(redacting(Box::new(
            super::anthropic::AnthropicProvider::new(http()),
        ))),
        ProviderKind::Script => {
            let path = resolved
                .script
                .as_deref()
                .ok_or_else(|| ProviderError::Config {
                    provider: resolved.name.clone(),
                    detail: "a script provider needs `script: FILE`".into(),
                })?;
            Ok(Box::new(super::script::ScriptProvider::from_file(
                &resolved.name,
                path,
            )?))
        }
        ProviderKind::Local => open_local(resolved),
    }
}

#[cfg(feature = "local")]
fn open_local(resolved: &ResolvedProvider) -> Result<Box<dyn Provider>, ProviderError> {
    let model_path = resolved
        .model_path
        .clone()
        .ok_or_else(|| ProviderError::Config {
            provider: resolved.name.clone(),
            detail: "no model file configured (set `model_path`)".into(),
        })?;
    Ok(Box::new(super::local::LocalProvider::load(
        super::local::LocalOptions {
            name: resolved.name.clone(),
            model_path,
            threads: resolved.threads,
            context_size: resolved.context_size,
            ready_dir: resolved.ready_dir.clone(),
        },
    )?))
}

#[cfg(not(feature = "local"))]
fn open_local(resolved: &ResolvedProvider) -> Result<Box<dyn Provider>, ProviderError> {
    Err(ProviderError::Unsupported {
        provider: resolved.name.clone(),
        detail: "this axocoatl was built without the `local` feature; rebuild with it or point the agent at ollama or openai".into(),
    })
}
