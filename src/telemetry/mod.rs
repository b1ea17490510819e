//! OpenTelemetry traces of turns (see `docs/telemetry.md`).
//!
//! When an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, or `telemetry.otlp_endpoint` in the configuration), every
//! turn that ends becomes one trace ([`spans`]): the engine calls [`turn_ended`] after the
//! terminal record, which reads the turn's records back from where it began and queues its
//! spans for a background exporter ([`exporter`]) that posts them over OTLP/HTTP. Nothing
//! here fails or waits for a turn: a one-shot command calls [`flush`] after its output is
//! written and waits at most [`FLUSH_BOUND`]; a long-lived process (`serve`, its actors)
//! sends in batches. An endpoint that cannot be reached is one warning per process (and
//! again only after a success).
//!
//! `export --format otlp` ([`backfill`]) writes the same spans for past turns.

pub mod spans;

#[cfg(feature = "otlp")]
mod exporter;
#[cfg(feature = "otlp")]
pub mod otlp;

use std::collections::HashMap;
use std::time::Duration;

#[cfg(feature = "otlp")]
use axocoatl_store::ledger::Record;
use axocoatl_store::ledger::{Damaged, Position};
use axocoatl_store::Repo;

use crate::config::{Config, ProviderKind};
use crate::error::Result;

pub use spans::Content;

/// The longest a one-shot command waits, after its output is written, for its spans to
/// reach the endpoint. Past it the spans are dropped with a warning.
pub const FLUSH_BOUND: Duration = Duration::from_millis(1000);

/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: `true` puts requests, answers and
/// tool arguments and results in the spans.
pub const CAPTURE_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// How spans are encoded on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (OTLP's default).
    Protobuf,
    /// `http/json`.
    Json,
}

/// Where and how traces go.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The full URL spans are posted to (`…/v1/traces`).
    pub endpoint: String,
    pub protocol: Protocol,
    pub headers: Vec<(String, String)>,
    pub resource: Vec<(String, String)>,
    pub content: Content,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The settings of this process: `Ok(None)` when traces are off, `Err` with a warning when
/// they are asked for in a way this build cannot do.
pub fn settings(config: &Config) -> std::result::Result<Option<Settings>, String> {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let endpoint = if let Some(url) = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        url
    } else if let Some(base) = env("OTEL_EXPORTER_OTLP_ENDPOINT") {
        format!("{}/v1/traces", base.trim_end_matches('/'))
    } else if let Some(url) = &config.telemetry.otlp_endpoint {
        with_traces_path(url)
    } else {
        return Ok(None);
    };
    let protocol = env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .or_else(|| config.telemetry.protocol.clone());
    let protocol = match protocol.as_deref() {
        None | Some("http/protobuf") => Protocol::Protobuf,
        Some("http/json") => Protocol::Json,
        Some(other) => {
            return Err(format!(
                "traces are not exported: OTLP protocol {other:?} is not supported (use http/protobuf or http/json)"
            ))
        }
    };
    if !cfg!(feature = "otlp") {
        return Err(
            "traces are not exported: this build has no OTLP export (the `otlp` feature)".into(),
        );
    }
    let mut headers = parse_pairs(env("OTEL_EXPORTER_OTLP_HEADERS").as_deref());
    for (k, v) in parse_pairs(env("OTEL_EXPORTER_OTLP_TRACES_HEADERS").as_deref()) {
        headers.retain(|(h, _)| !h.eq_ignore_ascii_case(&k));
        headers.push((k, v));
    }
    Ok(Some(Settings {
        endpoint,
        protocol,
        headers,
        resource: resource(),
        content: content(config),
    }))
}

/// A configured URL without a path gets OTLP's traces path.
fn with_traces_path(url: &str) -> String {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    match after_scheme.split_once('/') {
        Some((_, path)) if !path.is_empty() => url.to_owned(),
        _ => format!("{}/v1/traces", url.trim_end_matches('/')),
    }
}

/// `k1=v1,k2=v2` with percent-encoded values (OTLP's headers and resource attributes).
fn parse_pairs(text: Option<&str>) -> Vec<(String, String)> {
    text.unwrap_or_default()
        .split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_owned(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The resource every span of this process belongs to: `service.name` (from
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` or `axocoatl`), `service.version`, and
/// the other pairs of `OTEL_RESOURCE_ATTRIBUTES`.
pub fn resource() -> Vec<(String, String)> {
    let mut attrs = parse_pairs(env("OTEL_RESOURCE_ATTRIBUTES").as_deref());
    let name = env("OTEL_SERVICE_NAME")
        .or_else(|| {
            attrs
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| "axocoatl".into());
    attrs.retain(|(k, _)| k != "service.name" && k != "service.version");
    let mut out = vec![
        ("service.name".to_owned(), name),
        (
            "service.version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
    ];
    out.extend(attrs);
    out
}

/// What spans may carry: content when asked for (the environment variable wins over the
/// configuration), the configured providers' keys to redact from it, and each provider's
/// system name.
pub fn content(config: &Config) -> Content {
    let capture = match env(CAPTURE_ENV) {
        Some(v) => v.eq_ignore_ascii_case("true"),
        None => config.telemetry.capture_content,
    };
    let redact = config
        .providers
        .values()
        .filter_map(|p| p.api_key_env.as_deref())
        .filter_map(|name| std::env::var(name).ok())
        .filter(|key| key.len() >= crate::provider::redact::MIN_REDACTED_KEY)
        .collect();
    let mut systems: HashMap<String, String> = config
        .providers
        .iter()
        .map(|(name, p)| (name.clone(), system(p.kind).to_owned()))
        .collect();
    for kind in [
        ProviderKind::Ollama,
        ProviderKind::Openai,
        ProviderKind::Anthropic,
        ProviderKind::Local,
        ProviderKind::Script,
    ] {
        systems
            .entry(kind.as_str().to_owned())
            .or_insert_with(|| system(kind).to_owned());
    }
    Content {
        capture,
        redact,
        systems,
    }
}

/// `gen_ai.provider.name` of a provider kind: the API it speaks.
fn system(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Ollama => "ollama",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Local => "axocoatl.local",
        ProviderKind::Script => "axocoatl.script",
    }
}

/// Traces turn `turn`, which began at or after `from` and whose terminal record is
/// durable: when traces are on, its spans are queued for export. Never fails and never
/// waits for the network; what goes wrong is reported by [`flush`] (and logged).
pub fn turn_ended(config: &Config, repo: &Repo, from: Position, turn: &str) {
    #[cfg(feature = "otlp")]
    {
        let Some(exporter) = exporter::get(config) else {
            return;
        };
        let entries: Vec<(u64, Record)> = repo
            .ledger()
            .scan(from)
            .flatten()
            .filter_map(|e| {
                let r = e.record?;
                (r.turn() == Some(turn)).then_some((e.seq, r))
            })
            .collect();
        let refs: Vec<(u64, &Record)> = entries.iter().map(|(s, r)| (*s, r)).collect();
        if let Some(spans) = spans::turn_spans(&refs, exporter.content()) {
            exporter.queue(spans);
        }
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (repo, from, turn);
        if let Err(why) = settings(config) {
            exporter_off::note(why);
        }
    }
}

/// Waits at most `bound` for the queued spans to be exported; returns the warning to show
/// when some could not be (once per process, and again only after a success).
pub fn flush(bound: Duration) -> Option<String> {
    #[cfg(feature = "otlp")]
    {
        exporter::flush(bound)
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = bound;
        exporter_off::take()
    }
}

#[cfg(not(feature = "otlp"))]
mod exporter_off {
    use std::sync::Mutex;

    static NOTE: Mutex<Option<Option<String>>> = Mutex::new(None);

    pub fn note(why: String) {
        if let Ok(mut n) = NOTE.lock() {
            n.get_or_insert(Some(why));
        }
    }

    pub fn take() -> Option<String> {
        NOTE.lock()
            .ok()
            .and_then(|mut n| n.as_mut().and_then(Option::take))
    }
}

/// What `export --format otlp` wrote.
#[derive(Debug, Default)]
pub struct Backfill {
    pub turns: u64,
    pub spans: u64,
    /// Turns left out because they have not ended.
    pub running: u64,
    pub damaged: Vec<Damaged>,
}

/// Writes the traces of the ended turns of `session` (every session with `None`) to `out`
/// as OTLP JSON, one export request (one turn's trace) per line: the file format of
/// OpenTelemetry's file exporter, which the Collector's `otlpjsonfile` receiver reads.
pub fn backfill(
    repo: &Repo,
    config: &Config,
    session: Option<&str>,
    out: &mut dyn std::io::Write,
) -> Result<Backfill> {
    #[cfg(feature = "otlp")]
    {
        use crate::history::{Projection, Scope, Want};
        let mut projection = Projection::of(repo, Scope::session_or_repo(session), Want::RECORDS)?;
        let mut records = std::mem::take(&mut projection.records);
        let content = content(config);
        let resource = resource();
        let mut done = Backfill {
            damaged: projection.problems,
            ..Backfill::default()
        };
        for t in projection
            .turns
            .iter()
            .filter(|t| session.is_none_or(|s| t.session == s))
        {
            let entries = records.remove(&t.turn).unwrap_or_default();
            let refs: Vec<(u64, &Record)> = entries
                .iter()
                .filter_map(|e| e.record.as_ref().map(|r| (e.seq, r)))
                .collect();
            let Some(spans) = spans::turn_spans(&refs, &content) else {
                done.running += 1;
                continue;
            };
            let req = otlp::request(&spans, &resource);
            let (mut line, _) = otlp::encode(&req, Protocol::Json);
            line.push(b'\n');
            out.write_all(&line)
                .map_err(crate::error::RuntimeError::io("write", "the OTLP export"))?;
            done.turns += 1;
            done.spans += spans.len() as u64;
        }
        Ok(done)
    }
    #[cfg(not(feature = "otlp"))]
    {
        let _ = (repo, config, session, out);
        Err(crate::error::RuntimeError::NotSupported(
            "`export --format otlp` in a build without the `otlp` feature".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_url_without_a_path_gets_the_traces_path() {
        assert_eq!(
            with_traces_path("http://localhost:4318"),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            with_traces_path("http://localhost:4318/"),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            with_traces_path("http://localhost:6006/v1/traces"),
            "http://localhost:6006/v1/traces"
        );
    }

    #[test]
    fn header_pairs_are_split_and_percent_decoded() {
        assert_eq!(
            parse_pairs(Some("Authorization=Bearer%20abc, x-a = 1,bad,=v")),
            vec![
                ("Authorization".to_owned(), "Bearer abc".to_owned()),
                ("x-a".to_owned(), "1".to_owned())
            ]
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
