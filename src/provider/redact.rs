//! Keeps the configured API key out of everything a provider reports.
//!
//! A server may echo the key back: in an error body, or in the answer itself (a proxy that
//! reflects headers, a model asked to repeat its prompt). [`Redacting`] wraps an adapter and
//! replaces the key's value with `<redacted>` in the streamed text, the final message, tool
//! calls, warnings and errors, so nothing downstream (the terminal, the ledger, checkpoints)
//! ever sees it. A key cut across two streamed pieces is caught too: the end of a piece
//! that could be the start of the key is held back until the next piece shows whether it is.

use serde_json::Value;

use super::{Cancel, ChatRequest, Completion, Event, Provider, ProviderError, ToolCall};

/// What a key is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Keys shorter than this are placeholders (`none`, `x`, `sk-1`) that local servers accept;
/// replacing every occurrence of them would mangle ordinary output and hide nothing.
pub const MIN_REDACTED_KEY: usize = 8;

/// An adapter whose reports never contain `key`.
pub struct Redacting {
    inner: Box<dyn Provider>,
    key: String,
}

impl Redacting {
    /// Wraps `inner` when `key` is long enough to be a secret; otherwise returns it as is.
    pub fn wrap(inner: Box<dyn Provider>, key: Option<&str>) -> Box<dyn Provider> {
        match key {
            Some(key) if key.len() >= MIN_REDACTED_KEY => Box::new(Redacting {
                inner,
                key: key.to_string(),
            }),
            _ => inner,
        }
    }
}

impl Provider for Redacting {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        let key = self.key.as_str();
        let mut stream = StreamRedactor::new(key);
        let result = self.inner.chat(request, cancel, &mut |event| match event {
            Event::Delta(text) => {
                let text = stream.push(&text);
                if !text.is_empty() {
                    on_event(Event::Delta(text));
                }
            }
            Event::ToolCall(call) => on_event(Event::ToolCall(redact_call(call, key))),
            Event::Warning(text) => on_event(Event::Warning(redact(&text, key))),
        });
        match result {
            Ok(mut completion) => {
                let tail = stream.finish();
                if !tail.is_empty() {
                    on_event(Event::Delta(tail));
                }
                let message = &mut completion.message;
                message.content = redact(&message.content, key);
                message.tool_calls = std::mem::take(&mut message.tool_calls)
                    .into_iter()
                    .map(|call| redact_call(call, key))
                    .collect();
                completion.finish_reason = completion.finish_reason.map(|r| redact(&r, key));
                Ok(completion)
            }
            // A held-back tail is dropped: it may be the start of the key.
            Err(error) => Err(redact_error(error, key)),
        }
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.inner.count_tokens(text)
    }

    fn supports_tools(&self) -> bool {
        self.inner.supports_tools()
    }

    fn keep_conversation(&mut self, cache: Option<Box<dyn super::ConversationCache>>) {
        self.inner.keep_conversation(cache)
    }
}

/// `text` with every occurrence of `key` replaced.
pub fn redact(text: &str, key: &str) -> String {
    if key.is_empty() {
        return text.to_string();
    }
    text.replace(key, REDACTED)
}

fn redact_call(call: ToolCall, key: &str) -> ToolCall {
    ToolCall {
        id: redact(&call.id, key),
        name: redact(&call.name, key),
        arguments: redact_value(call.arguments, key),
    }
}

/// Every string and object key of a JSON value, redacted (serde_json bounds the depth).
fn redact_value(value: Value, key: &str) -> Value {
    match value {
        Value::String(s) => Value::String(redact(&s, key)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| redact_value(item, key))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (redact(&k, key), redact_value(v, key)))
                .collect(),
        ),
        other => other,
    }
}

fn redact_error(error: ProviderError, key: &str) -> ProviderError {
    let r = |s: String| redact(&s, key);
    match error {
        ProviderError::Cancelled => ProviderError::Cancelled,
        ProviderError::Connect {
            provider,
            url,
            detail,
            hint,
        } => ProviderError::Connect {
            provider,
            url: r(url),
            detail: r(detail),
            hint: hint.map(r),
        },
        ProviderError::Http {
            provider,
            url,
            status,
            message,
            hint,
        } => ProviderError::Http {
            provider,
            url: r(url),
            status,
            message: r(message),
            hint: hint.map(r),
        },
        ProviderError::Timeout {
            provider,
            url,
            secs,
        } => ProviderError::Timeout {
            provider,
            url: r(url),
            secs,
        },
        ProviderError::Deadline {
            provider,
            url,
            secs,
        } => ProviderError::Deadline {
            provider,
            url: r(url),
            secs,
        },
        ProviderError::TooLarge {
            provider,
            url,
            what,
        } => ProviderError::TooLarge {
            provider,
            url: r(url),
            what: r(what),
        },
        ProviderError::Malformed {
            provider,
            url,
            detail,
        } => ProviderError::Malformed {
            provider,
            url: r(url),
            detail: r(detail),
        },
        ProviderError::Unsupported { provider, detail } => ProviderError::Unsupported {
            provider,
            detail: r(detail),
        },
        ProviderError::Model { provider, detail } => ProviderError::Model {
            provider,
            detail: r(detail),
        },
        ProviderError::Config { provider, detail } => ProviderError::Config {
            provider,
            detail: r(detail),
        },
    }
}

/// Redacts a text that arrives in pieces. What it returns, piece by piece and then
/// [`StreamRedactor::finish`], adds up to [`redact`] of the whole text.
struct StreamRedactor<'k> {
    key: &'k str,
    /// Text not yet returned: at most a proper prefix of the key.
    held: String,
}

impl<'k> StreamRedactor<'k> {
    fn new(key: &'k str) -> StreamRedactor<'k> {
        StreamRedactor {
            key,
            held: String::new(),
        }
    }

    /// The redacted text that can be returned now that `piece` arrived.
    fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let text = std::mem::take(&mut self.held);
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(self.key) {
            out.push_str(&rest[..at]);
            out.push_str(REDACTED);
            rest = &rest[at + self.key.len()..];
        }
        // Only text after the last replacement can start a key (never the placeholder).
        let keep = partial_key_at_end(rest, self.key);
        let (now, later) = rest.split_at(rest.len() - keep);
        out.push_str(now);
        self.held = later.to_string();
        out
    }

    /// The text still held back (it is not the whole key).
    fn finish(self) -> String {
        self.held
    }
}

/// The length of the longest end of `text` that is a proper, non-empty start of `key`.
fn partial_key_at_end(text: &str, key: &str) -> usize {
    let Some(&first) = key.as_bytes().first() else {
        return 0;
    };
    let bytes = text.as_bytes();
    let from = bytes.len().saturating_sub(key.len() - 1);
    // Candidate starts are the bytes equal to the key's first byte; the earliest match is
    // the longest.
    let mut at = from;
    while let Some(offset) = memchr::memchr(first, &bytes[at..]) {
        let start = at + offset;
        if key.as_bytes().starts_with(&bytes[start..]) {
            return bytes.len() - start;
        }
        at = start + 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789";

    fn streamed(pieces: &[&str]) -> String {
        let mut redactor = StreamRedactor::new(KEY);
        let mut out: String = pieces.iter().map(|p| redactor.push(p)).collect();
        out.push_str(&redactor.finish());
        out
    }

    #[test]
    fn a_key_split_across_pieces_is_redacted() {
        let text = format!("key: {KEY}, again {KEY}!");
        for cut in 0..text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let (a, b) = text.split_at(cut);
            assert_eq!(streamed(&[a, b]), redact(&text, KEY), "cut at {cut}");
        }
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(streamed(&pieces), "key: <redacted>, again <redacted>!");
    }

    #[test]
    fn held_back_text_is_only_a_start_of_the_key() {
        let mut redactor = StreamRedactor::new(KEY);
        assert_eq!(redactor.push("say sk-li"), "say ");
        assert_eq!(redactor.push("ve? no"), "sk-live? no");
        assert_eq!(redactor.push("ñ sk"), "ñ ");
        assert_eq!(redactor.finish(), "sk");
    }

    #[test]
    fn overlapping_starts_match_plain_replacement() {
        let key = "aab-secret";
        let text = "aaab-secretaab-secreaab-secret";
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            let mut redactor = StreamRedactor::new(key);
            let mut out = redactor.push(a);
            out.push_str(&redactor.push(b));
            out.push_str(&redactor.finish());
            assert_eq!(out, redact(text, key), "cut at {cut}");
        }
    }

    #[test]
    fn tool_call_arguments_and_errors_are_redacted() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "echo".into(),
            arguments: serde_json::json!({"text": format!("x{KEY}"), KEY: [KEY, 1]}),
        };
        let call = redact_call(call, KEY);
        assert!(!call.arguments.to_string().contains(KEY), "{call:?}");
        let error = redact_error(
            ProviderError::Model {
                provider: "p".into(),
                detail: format!("bad key {KEY}"),
            },
            KEY,
        );
        assert_eq!(error.to_string(), "p: bad key <redacted>");
    }
}
