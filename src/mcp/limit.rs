//! The size of one MCP message. The SDK drops a line longer than [`MESSAGE_LIMIT`] without
//! a word to either side, so a call answered with more would wait for its timeout and a
//! request of more would never be answered. Both sides name such a message at once:
//! - the client ([`super::tap`]) fails the call the oversized answer was for, as soon as the
//!   answer passes the limit;
//! - `mcp serve` reads its stdin through a [`RequestGuard`], which cuts an oversized request
//!   at the limit and puts in its place a call the server answers with an error naming the
//!   limit, under the request's own id.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// The most bytes of one MCP message (one JSON line), as the SDK reads them.
pub const MESSAGE_LIMIT: usize = 16 << 20;

/// The tool name of the call a [`RequestGuard`] puts in place of an oversized request: a
/// name no tool has (it holds a `/`).
pub const OVERSIZED_CALL: &str = "axocoatl/oversized-request";

/// The id (a number or a string) of the JSON object whose first bytes are `prefix`, when
/// its top level names one there.
pub fn top_level_id(prefix: &[u8]) -> Option<Value> {
    value_at(top_level(prefix, b"\"id\"")?)
}

/// Whether the top level of the JSON object whose first bytes are `prefix` has the key
/// `name` there.
pub fn has_top_level_key(prefix: &[u8], name: &str) -> bool {
    top_level(prefix, format!("\"{name}\"").as_bytes()).is_some()
}

/// What follows the key `quoted` (with its quotes) and its colon at the top level of the
/// JSON object whose first bytes are `prefix`.
fn top_level<'a>(prefix: &'a [u8], quoted: &[u8]) -> Option<&'a [u8]> {
    let mut depth = 0i32;
    let mut i = 0;
    while i < prefix.len() {
        match prefix[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b'"' => {
                let end = string_end(prefix, i)?;
                if depth == 1 && &prefix[i..=end] == quoted {
                    let rest = &prefix[end + 1..];
                    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                    if rest[colon] == b':' {
                        return Some(&rest[colon + 1..]);
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Where the string starting at `start` (a `"`) ends (its closing `"`).
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A number or string at the start of `bytes` (after whitespace).
fn value_at(bytes: &[u8]) -> Option<Value> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &bytes[start..];
    let end = if rest.first() == Some(&b'"') {
        string_end(rest, 0)? + 1
    } else {
        rest.iter()
            .position(|b| !(b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')))
            .unwrap_or(rest.len())
    };
    match serde_json::from_slice::<Value>(&rest[..end]).ok()? {
        v @ (Value::Number(_) | Value::String(_)) => Some(v),
        _ => None,
    }
}

/// Bytes of an oversized request kept to find its id.
const PREFIX_KEPT: usize = 64 << 10;

/// `mcp serve`'s stdin as the SDK reads it: lines pass unchanged up to [`MESSAGE_LIMIT`];
/// one longer is cut there (the SDK drops the piece as unparsable), followed by a call of
/// [`OVERSIZED_CALL`] with the request's id, and the rest of it is skipped.
pub struct RequestGuard<R> {
    inner: R,
    /// Bytes of the current line passed on.
    line: usize,
    prefix: Vec<u8>,
    skipping: bool,
    /// Processed bytes the reader has not taken yet.
    out: VecDeque<u8>,
    scratch: Vec<u8>,
    /// Requests found oversized (and whether each had an id to answer).
    pub oversized: Vec<bool>,
}

impl<R> RequestGuard<R> {
    pub fn new(inner: R) -> RequestGuard<R> {
        RequestGuard {
            inner,
            line: 0,
            prefix: Vec::new(),
            skipping: false,
            out: VecDeque::new(),
            scratch: vec![0; 64 << 10],
            oversized: Vec::new(),
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        // A line passes while it stays this short: the SDK takes a line of at most the
        // limit, newline included.
        let most = MESSAGE_LIMIT - 1;
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let part = &bytes[..newline.unwrap_or(bytes.len())];
            if self.skipping {
                if let Some(i) = newline {
                    self.skipping = false;
                    self.line = 0;
                    bytes = &bytes[i + 1..];
                } else {
                    bytes = &[];
                }
                continue;
            }
            if self.line + part.len() > most {
                let room = most - self.line;
                self.out.extend(&part[..room]);
                self.keep_prefix(&part[..room]);
                self.cut();
                bytes = &bytes[room..];
                continue;
            }
            self.out.extend(part);
            self.keep_prefix(part);
            self.line += part.len();
            match newline {
                Some(i) => {
                    self.out.push_back(b'\n');
                    self.line = 0;
                    self.prefix.clear();
                    bytes = &bytes[i + 1..];
                }
                None => bytes = &[],
            }
        }
    }

    fn keep_prefix(&mut self, part: &[u8]) {
        let room = PREFIX_KEPT.saturating_sub(self.prefix.len());
        self.prefix.extend_from_slice(&part[..room.min(part.len())]);
    }

    /// Ends the oversized line here, and puts the call that answers it next.
    fn cut(&mut self) {
        self.out.push_back(b'\n');
        let id = top_level_id(&self.prefix);
        if let Some(id) = &id {
            let call = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": OVERSIZED_CALL, "arguments": {}},
            });
            self.out.extend(call.to_string().as_bytes());
            self.out.push_back(b'\n');
        }
        match &id {
            Some(id) => {
                tracing::warn!(%id, limit = MESSAGE_LIMIT, "a request longer than the limit of one MCP message was cut and is answered with an error")
            }
            None => tracing::warn!(
                limit = MESSAGE_LIMIT,
                "a message without an id longer than the limit of one MCP message was dropped"
            ),
        }
        self.oversized.push(id.is_some());
        self.prefix.clear();
        self.line = 0;
        self.skipping = true;
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for RequestGuard<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.out.is_empty() {
                let n = this.out.len().min(buf.remaining());
                let (a, b) = this.out.as_slices();
                let from_a = n.min(a.len());
                buf.put_slice(&a[..from_a]);
                buf.put_slice(&b[..n - from_a]);
                this.out.drain(..n);
                return Poll::Ready(Ok(()));
            }
            let mut scratch = std::mem::take(&mut this.scratch);
            let mut read = ReadBuf::new(&mut scratch);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let filled = read.filled().len();
            let result = match polled {
                Poll::Ready(Ok(())) if filled == 0 => Some(Poll::Ready(Ok(()))),
                Poll::Ready(Ok(())) => {
                    this.feed(&scratch[..filled]);
                    None
                }
                other => Some(other),
            };
            this.scratch = scratch;
            if let Some(r) = result {
                return r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_id_of_a_message_is_found_in_its_first_bytes() {
        assert_eq!(
            top_level_id(br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"#),
            Some(json!(42))
        );
        assert_eq!(
            top_level_id(br#"{"method":"x","params":{"id":1,"s":"\"id\":2"}, "id" : "a\"b","#),
            Some(json!("a\"b"))
        );
        assert_eq!(
            top_level_id(br#"{"method":"notifications/x","params":{"id":3"#),
            None
        );
        assert_eq!(top_level_id(br#"{"id":{"#), None);
        assert!(has_top_level_key(
            br#"{"jsonrpc":"2.0","method":"sampling/x","#,
            "method"
        ));
        assert!(!has_top_level_key(
            br#"{"id":1,"result":{"method":"x","text":"\"method\": 1"}"#,
            "method"
        ));
    }

    #[test]
    fn an_oversized_request_is_cut_and_answered_under_its_id() {
        let mut g = RequestGuard::new(tokio::io::empty());
        g.feed(b"{\"id\":1}\n{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":\"");
        let big = vec![b'x'; MESSAGE_LIMIT];
        g.feed(&big);
        g.feed(b"\"}\n{\"id\":2}\n");
        let out: Vec<u8> = g.out.iter().copied().collect();
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        assert_eq!(lines[0], b"{\"id\":1}");
        assert_eq!(lines[1].len(), MESSAGE_LIMIT - 1, "cut within the limit");
        let call: Value = serde_json::from_slice(lines[2]).expect("json");
        assert_eq!(call["id"], 7);
        assert_eq!(call["params"]["name"], OVERSIZED_CALL);
        assert_eq!(lines[3], b"{\"id\":2}");
        assert_eq!(g.oversized, vec![true]);
    }
}
