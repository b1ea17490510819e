//! A look at every line a server writes to stdout, on its way to the SDK.
//!
//! The SDK ignores lines that are not JSON and answers misshapen messages with an error to
//! the server, so a server that prints logs to stdout, or answers a call with a malformed
//! result, would leave the call waiting until its timeout. The tap notes both: lines that
//! are not JSON (said to the user once per call or startup), and answers whose shape is
//! invalid (the call they answer fails at once, naming what is wrong).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Notify;

use super::limit::{top_level_id, MESSAGE_LIMIT};
use super::process::cut;

/// Lines longer than this are not looked at: the SDK drops them (silently), and the tap
/// fails the call such an answer was for.
const LINE_LIMIT: usize = MESSAGE_LIMIT;

#[derive(Default)]
pub struct Tap {
    state: Mutex<TapState>,
    /// Woken when a malformed answer arrives.
    pub malformed: Notify,
}

#[derive(Default)]
struct TapState {
    /// Lines that are not JSON, and the first of them.
    garbage: u64,
    first_garbage: Option<String>,
    /// Malformed answers: (request id, what is wrong).
    bad_answers: Vec<(Value, String)>,
    /// Answers past [`LINE_LIMIT`], by request id (`None`: no id in their first bytes).
    oversized: Vec<Option<Value>>,
}

impl Tap {
    /// Lines that are not JSON since the last call, and the first of them, cleared.
    pub fn take_garbage(&self) -> Option<(u64, String)> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = std::mem::take(&mut s.garbage);
        let first = s.first_garbage.take();
        (n > 0).then(|| (n, first.unwrap_or_default()))
    }

    /// What is wrong with the answer to request `id`, if it arrived malformed.
    pub fn bad_answer(&self, id: &Value) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.bad_answers
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, why)| why.clone())
    }

    /// Whether the answer to request `id` passed the limit of one message (an answer
    /// whose id could not be read counts for the first call that asks).
    pub fn oversized(&self, id: &Value) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match s
            .oversized
            .iter()
            .position(|o| o.as_ref().is_none_or(|o| o == id))
        {
            Some(i) => {
                s.oversized.remove(i);
                true
            }
            None => false,
        }
    }

    /// A message passed the limit: an answer (it has an id and no method in its first
    /// bytes) fails its call at once.
    fn too_long(&self, prefix: &[u8]) {
        if super::limit::has_top_level_key(prefix, "method") {
            return; // a request or notification of the server's, no answer
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.oversized.push(top_level_id(prefix));
        drop(s);
        self.malformed.notify_waiters();
    }

    fn line(&self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) => {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                s.garbage += 1;
                if s.first_garbage.is_none() {
                    s.first_garbage = Some(cut(String::from_utf8_lossy(line).trim(), 120));
                }
                return;
            }
        };
        if let Some((id, why)) = malformed_answer(&value) {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.bad_answers.push((id, why));
            drop(s);
            self.malformed.notify_waiters();
        }
    }
}

/// An answer (a message with an `id` and no `method`) whose shape no MCP result or error
/// has: `(its id, what is wrong)`.
fn malformed_answer(v: &Value) -> Option<(Value, String)> {
    let obj = v.as_object()?;
    if obj.contains_key("method") {
        return None;
    }
    let id = obj.get("id")?.clone();
    let why = match (obj.get("result"), obj.get("error")) {
        (Some(result), None) => result_problem(result)?,
        (None, Some(error)) => {
            let ok = error.get("code").is_some_and(Value::is_i64)
                && error.get("message").is_some_and(Value::is_string);
            if ok {
                return None;
            }
            "its `error` lacks an integer `code` or a string `message`".to_owned()
        }
        (Some(_), Some(_)) => "it has both `result` and `error`".to_owned(),
        (None, None) => "it has neither `result` nor `error`".to_owned(),
    };
    Some((id, why))
}

fn result_problem(result: &Value) -> Option<String> {
    let Some(obj) = result.as_object() else {
        return Some(format!("its `result` is {}, not an object", kind(result)));
    };
    if let Some(content) = obj.get("content") {
        let Some(blocks) = content.as_array() else {
            return Some(format!("`result.content` is {}, not a list", kind(content)));
        };
        if let Some(i) = blocks
            .iter()
            .position(|b| !b.get("type").is_some_and(Value::is_string))
        {
            return Some(format!("`result.content[{i}]` has no `type`"));
        }
    }
    if obj.get("isError").is_some_and(|e| !e.is_boolean()) {
        return Some("`result.isError` is not true or false".to_owned());
    }
    None
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The server's stdout, passed through unchanged, each line shown to the [`Tap`].
pub struct TapReader<R> {
    inner: R,
    tap: Arc<Tap>,
    line: Vec<u8>,
    /// The current line passed [`LINE_LIMIT`]: skipped until its end.
    skipping: bool,
}

impl<R> TapReader<R> {
    pub fn new(inner: R, tap: Arc<Tap>) -> TapReader<R> {
        TapReader {
            inner,
            tap,
            line: Vec::new(),
            skipping: false,
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => (bytes, &[][..]),
            };
            if !self.skipping {
                if self.line.len() + part.len() >= LINE_LIMIT {
                    let room = LINE_LIMIT.saturating_sub(self.line.len());
                    self.line.extend_from_slice(&part[..room.min(part.len())]);
                    // Its id (and whether it is an answer) is in its first bytes.
                    self.tap
                        .too_long(&self.line[..self.line.len().min(64 << 10)]);
                    self.line.clear();
                    self.skipping = true;
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if newline.is_some() {
                if !self.skipping {
                    self.tap.line(&self.line);
                }
                self.line.clear();
                self.skipping = false;
            }
            bytes = rest;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = buf.filled()[before..].to_vec();
                this.feed(&fresh);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fed(chunks: &[&[u8]]) -> Arc<Tap> {
        let tap = Arc::new(Tap::default());
        let mut r = TapReader::new(tokio::io::empty(), tap.clone());
        for c in chunks {
            r.feed(c);
        }
        tap
    }

    #[test]
    fn lines_that_are_not_json_are_counted_across_chunks() {
        let tap = fed(&[
            b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\nstarting up",
            b" now\n\n  \nready\n",
        ]);
        assert_eq!(tap.take_garbage(), Some((2, "starting up now".to_owned())));
        assert_eq!(tap.take_garbage(), None);
    }

    #[test]
    fn malformed_answers_are_found_by_id() {
        let tap = fed(&[
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":"oops"}}"#,
            b"\n",
            br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"ok"}]}}"#,
            b"\n",
            br#"{"jsonrpc":"2.0","id":"s","error":{"message":"no code"}}"#,
            b"\n",
        ]);
        assert_eq!(
            tap.bad_answer(&json!(3)).as_deref(),
            Some("`result.content` is a string, not a list")
        );
        assert_eq!(tap.bad_answer(&json!(4)), None);
        assert!(tap
            .bad_answer(&json!("s"))
            .is_some_and(|w| w.contains("integer `code`")));
        assert_eq!(tap.take_garbage(), None);
    }

    #[test]
    fn requests_and_notifications_are_not_answers() {
        assert_eq!(
            malformed_answer(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            None
        );
        assert_eq!(
            malformed_answer(&json!({"jsonrpc": "2.0", "id": 1, "result": 5})),
            Some((json!(1), "its `result` is a number, not an object".into()))
        );
    }
}
