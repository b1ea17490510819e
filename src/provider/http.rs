//! Shared HTTP plumbing of the `ollama`, `openai` and `anthropic` adapters: one streaming
//! POST with timeouts, cancellation, typed errors and a bounded retry.
//!
//! `ureq` reads block, so the request runs on a worker thread that feeds a channel; the
//! caller's thread waits on that channel in [`CANCEL_POLL`] slices, which is what lets a
//! stop take effect even while a server is silent. A cancelled call abandons its worker: the
//! worker ends by itself at its next read (the per-read timeout bounds how long that takes).
//!
//! Retries happen only before any byte of a successful response arrived: on connection
//! errors and HTTP 429 (and the statuses an adapter adds, Anthropic's 529 "overloaded"). Once output began, a failure is the caller's to report, never hidden
//! by a second request that could produce a different answer.

use std::fmt;
use std::io::Read;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use super::{Cancel, ProviderError, CANCEL_POLL};

/// Where and how an HTTP adapter talks to its server.
#[derive(Clone)]
pub struct HttpOptions {
    /// The provider's name as configured (for messages).
    pub name: String,
    /// E.g. `http://127.0.0.1:11434` (ollama) or `https://api.openai.com/v1` (openai).
    pub base_url: String,
    /// The model used when a request names none.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when set (OpenAI and hosted endpoints); never
    /// printed, never part of an error.
    pub api_key: Option<String>,
    /// The longest silence tolerated from the server (zero: no limit).
    pub timeout: Duration,
    /// How long establishing a connection may take (zero: no limit).
    pub connect_timeout: Duration,
    /// Extra attempts after a connection error or HTTP 429 (529 too for Anthropic), before
    /// any output.
    pub max_retries: u32,
    /// The longest a whole call may take, retries included, however steadily the server
    /// sends (`None`: no limit; the silence timeout still applies).
    pub deadline: Option<Duration>,
    /// The environment variable the API key is read from (for hints: never the key).
    pub key_env: Option<String>,
    /// Where `base_url` came from (`OLLAMA_HOST`, an entry's `base_url`, the default), for
    /// the hint of a refused connection.
    pub base_url_from: Option<String>,
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpOptions")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("deadline", &self.deadline)
            .field("key_env", &self.key_env)
            .field("base_url_from", &self.base_url_from)
            .finish()
    }
}

/// First wait before a retry; doubles per attempt up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A server's `Retry-After` is honoured up to this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);
/// How much of an error body is kept for the message.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;
const ERROR_MESSAGE_CHARS: usize = 500;
const READ_BUFFER: usize = 64 * 1024;
/// How many read buffers may wait between the reading thread and the caller. A bounded
/// queue makes a server that sends faster than the caller consumes wait for it (TCP
/// backpressure) instead of filling memory.
const QUEUE_DEPTH: usize = 8;

/// The longest line (one NDJSON object, one SSE field or event) read: past it the call
/// fails rather than buffer a server's endless line. Generous: a server that ignores
/// `stream: true` sends its whole answer as one line.
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;
/// The most output one call may produce (text plus tool calls): far past any model's
/// output limit, and past the ledger's record limit, so large outputs stay testable.
pub const MAX_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// Whether the line handler wants more lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    /// The protocol's end marker was seen: stop reading.
    Stop,
}

/// How a stream ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The handler returned [`Flow::Stop`].
    Stopped,
    /// The server ended the body; the adapter decides whether that was complete.
    Eof,
}

/// What the worker thread reports.
enum Msg {
    /// A 2xx answer: body chunks follow.
    Ok,
    /// A non-2xx answer with (the start of) its body.
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body: String,
    },
    Chunk(Vec<u8>),
    Eof,
    Failed(Failure),
}

enum Failure {
    /// No connection (refused, unresolvable host, connect timeout, reset before headers).
    Connect(String),
    /// A read waited longer than the read timeout.
    Timeout,
    /// The connection broke after the response began.
    Broken(String),
}

/// One server endpoint and the agent that talks to it.
pub(crate) struct HttpClient {
    pub(crate) opts: HttpOptions,
    agent: ureq::Agent,
    /// What the hint of a refused connection tells people to run (`ollama serve`).
    start_hint: Option<&'static str>,
    /// The header the API key goes in: `None` for `Authorization: Bearer <key>`, else the
    /// header whose value is the key itself (Anthropic's `x-api-key`).
    key_header: Option<&'static str>,
    /// Headers sent with every request (Anthropic's `anthropic-version`).
    headers: Vec<(&'static str, &'static str)>,
    /// The statuses retried before any output, like a lost connection.
    retry_statuses: &'static [u16],
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

impl HttpClient {
    pub(crate) fn new(opts: HttpOptions) -> HttpClient {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(nonzero(opts.connect_timeout))
            .timeout_per_read(nonzero(opts.timeout))
            .timeout_per_write(nonzero(opts.timeout))
            .user_agent(concat!("axocoatl/", env!("CARGO_PKG_VERSION")))
            .build();
        HttpClient {
            opts,
            agent: config.into(),
            start_hint: None,
            key_header: None,
            headers: Vec::new(),
            retry_statuses: &[429],
        }
    }

    /// Sends the API key as the value of `header` instead of `Authorization: Bearer`.
    pub(crate) fn with_key_header(mut self, header: &'static str) -> HttpClient {
        self.key_header = Some(header);
        self
    }

    /// Sends `name: value` with every request.
    pub(crate) fn with_header(mut self, name: &'static str, value: &'static str) -> HttpClient {
        self.headers.push((name, value));
        self
    }

    /// Retries these statuses (before any output) instead of HTTP 429 alone.
    pub(crate) fn retrying(mut self, statuses: &'static [u16]) -> HttpClient {
        self.retry_statuses = statuses;
        self
    }

    /// `request` with the API key (when there is one) and the fixed headers.
    fn authorized<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if let Some(key) = self.opts.api_key.as_deref().filter(|k| !k.is_empty()) {
            request = match self.key_header {
                Some(header) => request.header(header, key),
                None => request.header("Authorization", format!("Bearer {key}")),
            };
        }
        for (name, value) in &self.headers {
            request = request.header(*name, *value);
        }
        request
    }

    /// Says how to start the server in the hint of a refused connection.
    pub(crate) fn with_start_hint(mut self, how: &'static str) -> HttpClient {
        self.start_hint = Some(how);
        self
    }

    /// `base_url` joined with `path` (exactly one slash between them).
    pub(crate) fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.opts.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }

    /// Replaces the API key wherever it appears, e.g. in a server message that echoes it.
    pub(crate) fn redact(&self, text: &str) -> String {
        match self.opts.api_key.as_deref() {
            Some(key) if !key.is_empty() => text.replace(key, "<redacted>"),
            _ => text.to_string(),
        }
    }

    pub(crate) fn malformed(&self, url: &str, detail: impl fmt::Display) -> ProviderError {
        ProviderError::Malformed {
            provider: self.opts.name.clone(),
            url: url.to_string(),
            detail: self.redact(&detail.to_string()),
        }
    }

    /// POSTs `body` as JSON to `url` and hands each line of the streamed answer (without its
    /// line ending) to `on_line`, as it arrives. A last line without a line ending is handed
    /// over at the end of the body too.
    pub(crate) fn stream_lines(
        &self,
        url: &str,
        body: &serde_json::Value,
        accept: &str,
        cancel: &Cancel,
        on_line: &mut dyn FnMut(&str) -> Result<Flow, ProviderError>,
    ) -> Result<StreamEnd, ProviderError> {
        let payload =
            serde_json::to_vec(body).map_err(|e| self.malformed(url, format!("request: {e}")))?;
        let limits = Limits {
            deadline: self.opts.deadline.map(|d| Instant::now() + d),
        };
        let mut attempt: u32 = 0;
        loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            match self.open(url, &payload, accept, cancel, &limits) {
                Ok(rx) => return self.read_lines(url, rx, cancel, &limits, on_line),
                Err((err, retry_after)) => {
                    let retryable = match &err {
                        ProviderError::Connect { .. } => true,
                        ProviderError::Http { status, .. } => self.retry_statuses.contains(status),
                        _ => false,
                    };
                    if !retryable || attempt >= self.opts.max_retries {
                        return Err(err);
                    }
                    let backoff = FIRST_BACKOFF
                        .saturating_mul(1u32 << attempt.min(16))
                        .min(MAX_BACKOFF);
                    let wait = retry_after.map_or(backoff, |r| r.min(MAX_RETRY_AFTER));
                    if limits.left().is_some_and(|left| left <= wait) {
                        return Err(self.deadline_error(url));
                    }
                    sleep_cancellable(wait, cancel)?;
                    attempt += 1;
                }
            }
        }
    }

    /// Sends the request on a worker thread and waits for the response head. On a 2xx the
    /// channel that will carry the body is returned.
    fn open(
        &self,
        url: &str,
        payload: &[u8],
        accept: &str,
        cancel: &Cancel,
        limits: &Limits,
    ) -> Result<Receiver<Msg>, (ProviderError, Option<Duration>)> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_DEPTH);
        let agent = self.agent.clone();
        let request = self.authorized(
            agent
                .post(url)
                .header("Content-Type", "application/json")
                .header("Accept", accept),
        );
        let payload = payload.to_vec();
        let spawned = thread::Builder::new()
            .name("axocoatl-http".to_string())
            .spawn(move || worker(request, payload, tx));
        if let Err(e) = spawned {
            return Err((
                self.connect_error(url, format!("cannot start a thread: {e}")),
                None,
            ));
        }
        // Connecting has its own limit (enforced by ureq); the head must follow within the
        // read timeout. Zero means no limit.
        let head_silence = if self.opts.timeout.is_zero() {
            Duration::ZERO
        } else {
            self.opts.timeout.saturating_add(self.opts.connect_timeout)
        };
        match self
            .wait(url, &rx, cancel, head_silence, limits)
            .map_err(|e| (e, None))?
        {
            Msg::Ok => Ok(rx),
            Msg::Status {
                status,
                retry_after,
                body,
            } => Err((
                ProviderError::Http {
                    provider: self.opts.name.clone(),
                    url: url.to_string(),
                    status,
                    message: self.redact(&server_message(status, &body)),
                    hint: self.status_hint(status),
                },
                retry_after,
            )),
            Msg::Failed(Failure::Connect(detail)) => Err((self.connect_error(url, detail), None)),
            Msg::Failed(Failure::Timeout) => Err((self.timeout_error(url), None)),
            Msg::Failed(Failure::Broken(detail)) => Err((self.malformed(url, detail), None)),
            Msg::Chunk(_) | Msg::Eof => {
                Err((self.malformed(url, "body before the response head"), None))
            }
        }
    }

    /// Cuts the body into lines as chunks arrive and hands each over. A line is copied only
    /// when it spans chunks; one longer than [`MAX_LINE_BYTES`] fails the call.
    fn read_lines(
        &self,
        url: &str,
        rx: Receiver<Msg>,
        cancel: &Cancel,
        limits: &Limits,
        on_line: &mut dyn FnMut(&str) -> Result<Flow, ProviderError>,
    ) -> Result<StreamEnd, ProviderError> {
        let mut pending: Vec<u8> = Vec::new();
        loop {
            match self.wait(url, &rx, cancel, self.opts.timeout, limits)? {
                Msg::Chunk(bytes) => {
                    let mut rest = &bytes[..];
                    while let Some(end) = memchr::memchr(b'\n', rest) {
                        let (line, tail) = rest.split_at(end + 1);
                        rest = tail;
                        let flow = if pending.is_empty() {
                            self.hand_over(url, line, on_line)?
                        } else {
                            self.check_line(url, pending.len() + line.len())?;
                            pending.extend_from_slice(line);
                            let flow = self.hand_over(url, &pending, on_line)?;
                            pending.clear();
                            // A long line's buffer is not kept for the short ones after it.
                            pending.shrink_to(READ_BUFFER);
                            flow
                        };
                        if flow == Flow::Stop {
                            return Ok(StreamEnd::Stopped);
                        }
                    }
                    self.check_line(url, pending.len() + rest.len())?;
                    pending.extend_from_slice(rest);
                }
                Msg::Eof => {
                    if !pending.is_empty() && self.hand_over(url, &pending, on_line)? == Flow::Stop
                    {
                        return Ok(StreamEnd::Stopped);
                    }
                    return Ok(StreamEnd::Eof);
                }
                Msg::Failed(Failure::Timeout) => return Err(self.timeout_error(url)),
                Msg::Failed(Failure::Connect(detail) | Failure::Broken(detail)) => {
                    return Err(
                        self.malformed(url, format!("connection broke mid-stream: {detail}"))
                    )
                }
                Msg::Ok | Msg::Status { .. } => {
                    return Err(self.malformed(url, "a second response head"))
                }
            }
        }
    }

    fn check_line(&self, url: &str, len: usize) -> Result<(), ProviderError> {
        if len > MAX_LINE_BYTES {
            return Err(self.too_large(
                url,
                format!(
                    "a line longer than {} without a line break",
                    crate::config::human_size(MAX_LINE_BYTES as u64)
                ),
            ));
        }
        Ok(())
    }

    fn hand_over(
        &self,
        url: &str,
        line: &[u8],
        on_line: &mut dyn FnMut(&str) -> Result<Flow, ProviderError>,
    ) -> Result<Flow, ProviderError> {
        let text = std::str::from_utf8(line)
            .map_err(|_| self.malformed(url, "a line that is not UTF-8"))?;
        on_line(text.trim_end_matches(['\n', '\r']))
    }

    /// The next message from the worker, or `Cancelled` / `Timeout` when those come first.
    fn wait(
        &self,
        url: &str,
        rx: &Receiver<Msg>,
        cancel: &Cancel,
        silence: Duration,
        limits: &Limits,
    ) -> Result<Msg, ProviderError> {
        let started = Instant::now();
        loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            if limits.left() == Some(Duration::ZERO) {
                return Err(self.deadline_error(url));
            }
            let slice = limits
                .left()
                .map_or(CANCEL_POLL, |left| left.min(CANCEL_POLL));
            match rx.recv_timeout(slice) {
                Ok(msg) => return Ok(msg),
                Err(RecvTimeoutError::Timeout) => {
                    if !silence.is_zero() && started.elapsed() > silence {
                        return Err(self.timeout_error(url));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.malformed(url, "the HTTP worker stopped unexpectedly"))
                }
            }
        }
    }

    fn connect_error(&self, url: &str, detail: String) -> ProviderError {
        let start = self
            .start_hint
            .map(|how| format!(" (`{how}` starts it)"))
            .unwrap_or_default();
        let from = self
            .opts
            .base_url_from
            .as_deref()
            .map(|from| format!(" That address is {from}."))
            .unwrap_or_default();
        ProviderError::Connect {
            provider: self.opts.name.clone(),
            url: url.to_string(),
            detail: self.redact(&detail),
            hint: Some(format!(
                "is the server at {} running?{start}{from}",
                self.opts.base_url.trim_end_matches('/')
            )),
        }
    }

    /// What to do about an HTTP error status, when it is a common mistake: a missing or
    /// refused API key.
    fn status_hint(&self, status: u16) -> Option<String> {
        if !matches!(status, 401 | 403) {
            return None;
        }
        let has_key = self.opts.api_key.as_deref().is_some_and(|k| !k.is_empty());
        Some(match (&self.opts.key_env, has_key) {
            (Some(var), false) => format!(
                "{var} is not set (or is empty): export it with the server's API key, or name another variable with `api_key_env` in a `providers:` entry"
            ),
            (Some(var), true) => {
                format!("the server refused the API key in {var}: check that it is current and allowed to use this model")
            }
            (None, _) => "the server wants an API key: name the variable holding it with `api_key_env` in a `providers:` entry".to_string(),
        })
    }

    /// The models the server lists at `path` (`api/tags`, `models`), as `names` reads them
    /// from its JSON; `None` when the list cannot be had. Bounded like any call: the
    /// connect and read timeouts apply, and at most 1 MiB is read.
    pub(crate) fn list_models(
        &self,
        path: &str,
        names: fn(&serde_json::Value) -> Vec<String>,
    ) -> Option<Vec<String>> {
        let mut response = self
            .authorized(self.agent.get(self.url(path)))
            .call()
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let value: serde_json::Value = response
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_json()
            .ok()?;
        let mut list = names(&value);
        list.sort();
        list.dedup();
        Some(list)
    }

    fn deadline_error(&self, url: &str) -> ProviderError {
        ProviderError::Deadline {
            provider: self.opts.name.clone(),
            url: url.to_string(),
            secs: self.opts.deadline.unwrap_or_default().as_secs_f64().ceil() as u64,
        }
    }

    /// The server sent more than a bound allows (`what` says which); the call fails.
    pub(crate) fn too_large(&self, url: &str, what: String) -> ProviderError {
        ProviderError::TooLarge {
            provider: self.opts.name.clone(),
            url: url.to_string(),
            what,
        }
    }

    /// Fails once `used` bytes of output pass [`MAX_OUTPUT_BYTES`].
    pub(crate) fn check_output(&self, url: &str, used: usize) -> Result<(), ProviderError> {
        if used > MAX_OUTPUT_BYTES {
            return Err(self.too_large(
                url,
                format!(
                    "more than {} of output in one answer",
                    crate::config::human_size(MAX_OUTPUT_BYTES as u64)
                ),
            ));
        }
        Ok(())
    }

    fn timeout_error(&self, url: &str) -> ProviderError {
        ProviderError::Timeout {
            provider: self.opts.name.clone(),
            url: url.to_string(),
            secs: self.opts.timeout.as_secs_f64().ceil() as u64,
        }
    }
}

/// The limits of one call, fixed when it starts.
struct Limits {
    deadline: Option<Instant>,
}

impl Limits {
    /// Time left before the deadline (zero once past it); `None` without a deadline.
    fn left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// Waits `total`, returning `Cancelled` as soon as the flag is set.
pub(crate) fn sleep_cancellable(total: Duration, cancel: &Cancel) -> Result<(), ProviderError> {
    let until = Instant::now() + total;
    loop {
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        thread::sleep((until - now).min(CANCEL_POLL));
    }
}

/// Runs on the worker thread. A failed `send` means the caller gave up: stop quietly.
fn worker(
    request: ureq::RequestBuilder<ureq::typestate::WithBody>,
    payload: Vec<u8>,
    tx: SyncSender<Msg>,
) {
    let response = match request.send(&payload[..]) {
        Ok(response) => response,
        Err(e) => {
            let _ = tx.send(Msg::Failed(classify_send_error(e)));
            return;
        }
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut reader = response
        .into_body()
        .into_with_config()
        .limit(if (200..300).contains(&status) {
            u64::MAX
        } else {
            ERROR_BODY_LIMIT
        })
        .reader();
    if !(200..300).contains(&status) {
        let mut body = Vec::new();
        // A partial error body still says more than none.
        let _ = reader.read_to_end(&mut body);
        let body = String::from_utf8_lossy(&body).into_owned();
        let _ = tx.send(Msg::Status {
            status,
            retry_after,
            body,
        });
        return;
    }
    if tx.send(Msg::Ok).is_err() {
        return;
    }
    let mut buf = vec![0u8; READ_BUFFER];
    loop {
        let msg = match reader.read(&mut buf) {
            Ok(0) => Msg::Eof,
            Ok(n) => Msg::Chunk(buf[..n].to_vec()),
            Err(e) => Msg::Failed(classify_read_error(e)),
        };
        let last = !matches!(msg, Msg::Chunk(_));
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

/// A body read that failed: ureq reports its own per-read timeout as an `io::Error` of kind
/// `Other` wrapping `ureq::Error::Timeout`, which is a timeout all the same.
fn classify_read_error(e: std::io::Error) -> Failure {
    let ureq_timeout = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
    if e.kind() == std::io::ErrorKind::TimedOut || ureq_timeout {
        Failure::Timeout
    } else {
        Failure::Broken(io_detail(&e))
    }
}

fn classify_send_error(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            Failure::Connect(format!("{e}"))
        }
        ureq::Error::Timeout(_) => Failure::Timeout,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => Failure::Timeout,
        // The OS's own words ("Connection refused (os error 111)"), without ureq's `io: `
        // prefix (which an error wrapped twice repeated).
        ureq::Error::Io(io) => Failure::Connect(io_detail(&io)),
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed | ureq::Error::Tls(_) => {
            Failure::Connect(format!("{e}"))
        }
        other => Failure::Broken(format!("{other}")),
    }
}

/// An I/O error's message, unwrapping the ureq errors it may carry.
fn io_detail(io: &std::io::Error) -> String {
    match io
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
    {
        Some(ureq::Error::Io(inner)) => io_detail(inner),
        _ => {
            let text = io.to_string();
            let mut rest = text.as_str();
            while let Some(tail) = rest.strip_prefix("io: ") {
                rest = tail;
            }
            rest.to_string()
        }
    }
}

/// The hint for a model the server does not have: what it has, and the closest name.
pub(crate) fn missing_model_hint(model: &str, available: Option<&[String]>) -> String {
    let Some(available) = available else {
        return format!("check that the server has a model named `{model}`");
    };
    if available.is_empty() {
        return "the server lists no models".to_string();
    }
    let closest = available
        .iter()
        .map(|name| (strsim::jaro_winkler(model, name), name))
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!("did you mean `{name}`? "))
        .unwrap_or_default();
    const SHOWN: usize = 20;
    let mut list = available
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if available.len() > SHOWN {
        list.push_str(&format!(" and {} more", available.len() - SHOWN));
    }
    format!("{closest}the server has: {list}")
}

/// The server's own words from an error body: `{"error": "..."}` (Ollama),
/// `{"error": {"message": "..."}}` (OpenAI and most compatible servers), else the text.
pub(crate) fn server_message(status: u16, body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| match v.get("error") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(obj @ serde_json::Value::Object(_)) => obj
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .or_else(|| Some(obj.to_string())),
            _ => v
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string),
        });
    let text = from_json.unwrap_or_else(|| body.trim().to_string());
    if text.is_empty() {
        return ureq::http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_string();
    }
    truncate_chars(&text, ERROR_MESSAGE_CHARS)
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Standard base64 with padding (RFC 4648), for images.
pub(crate) fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for group in data.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The parts of a chat body both HTTP protocols share: the model (the request's, else the
/// provider's default), the messages in the adapter's shape, streaming on, and tools in the
/// function-tool shape both Ollama and OpenAI use.
pub(crate) fn base_body(
    default_model: &str,
    request: &super::ChatRequest,
    message_json: impl Fn(&super::Message) -> serde_json::Value,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::{json, Value};
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(message_json).collect()),
    );
    body.insert("stream".into(), json!(true));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_said_once_without_prefixes() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let twice = std::io::Error::other(ureq::Error::Io(std::io::Error::other(ureq::Error::Io(
            refused,
        ))));
        assert_eq!(io_detail(&twice), "connection refused");
        let prefixed = std::io::Error::other("io: io: reset");
        assert_eq!(io_detail(&prefixed), "reset");
    }

    #[test]
    fn the_missing_model_hint_lists_and_guesses() {
        let have = ["llama3.2:latest".to_string(), "qwen2.5:7b".to_string()];
        assert_eq!(
            missing_model_hint("llama3.3", Some(&have)),
            "did you mean `llama3.2:latest`? the server has: llama3.2:latest, qwen2.5:7b"
        );
        assert_eq!(
            missing_model_hint("zzz", Some(&have)),
            "the server has: llama3.2:latest, qwen2.5:7b"
        );
        assert_eq!(
            missing_model_hint("m", None),
            "check that the server has a model named `m`"
        );
        let many: Vec<String> = (0..25).map(|i| format!("m{i}")).collect();
        assert!(missing_model_hint("x", Some(&many)).ends_with(" and 5 more"));
    }

    #[test]
    fn a_per_read_timeout_of_ureq_is_a_timeout() {
        let e = ureq::Error::Timeout(ureq::Timeout::PerRead).into_io();
        assert!(matches!(classify_read_error(e), Failure::Timeout));
        let e = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert!(matches!(classify_read_error(e), Failure::Timeout));
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(matches!(classify_read_error(e), Failure::Broken(_)));
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn server_messages_are_extracted() {
        assert_eq!(
            server_message(404, r#"{"error":"model \"x\" not found"}"#),
            "model \"x\" not found"
        );
        assert_eq!(
            server_message(
                429,
                r#"{"error":{"message":"slow down","type":"requests"}}"#
            ),
            "slow down"
        );
        assert_eq!(server_message(502, "bad gateway\n"), "bad gateway");
        assert_eq!(server_message(503, ""), "Service Unavailable");
    }

    #[test]
    fn debug_never_shows_the_key() {
        let opts = HttpOptions {
            name: "p".into(),
            base_url: "http://x".into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            max_retries: 0,
            deadline: None,
            key_env: Some("KEY".into()),
            base_url_from: None,
        };
        assert!(!format!("{opts:?}").contains("sk-secret"));
        let client = HttpClient::new(opts);
        assert!(!format!("{client:?}").contains("sk-secret"));
        assert_eq!(client.redact("key sk-secret!"), "key <redacted>!");
        assert_eq!(client.url("/chat/completions"), "http://x/chat/completions");
    }
}
