//! A loopback HTTP/1.1 server that speaks real protocols byte for byte, for tests.
//!
//! Std only. It binds `127.0.0.1:0`, answers each request with the next canned [`Reply`]
//! from a queue (a `500` naming the request when the queue is empty), and records every
//! request (method, path, headers, body) for assertions. Bodies are sent the way streaming
//! servers send them: chunked transfer encoding (the default, as Ollama and OpenAI do), or
//! `Connection: close` framing, or a plain `Content-Length`; with optional pauses between
//! chunks, a stall (silence with the connection held open until the server is dropped) or
//! an abrupt close mid-body.
//!
//! ```ignore
//! let server = FakeServer::start();
//! server.push(Reply::ndjson(include_str!("../fixtures/providers/ollama_text.ndjson")));
//! // ... point a provider at server.url() ...
//! assert_eq!(server.requests()[0].path, "/api/chat");
//! ```

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How a reply's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`, one HTTP chunk per [`Reply::chunk`].
    Chunked,
    /// `Connection: close`: the body ends when the connection closes.
    Close,
    /// `Content-Length` of all chunks together.
    Length,
}

#[derive(Clone, Debug)]
enum Step {
    Send(Vec<u8>),
    /// The same bytes sent this many times, one write (and chunk) each.
    Repeat(Vec<u8>, usize),
    Sleep(Duration),
    /// Hold the connection open and say nothing until the server is dropped.
    Stall,
    /// Close the connection without finishing the body.
    Close,
}

/// A canned response.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    steps: Vec<Step>,
    framing: Framing,
    /// Never answer at all (not even a status line).
    silent: bool,
}

impl Reply {
    /// A response with this status, chunked framing and no body yet.
    pub fn new(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            steps: Vec::new(),
            framing: Framing::Chunked,
            silent: false,
        }
    }

    /// Accepts the request and never sends a byte.
    pub fn silent() -> Reply {
        Reply {
            silent: true,
            ..Reply::new(200)
        }
    }

    /// A `200` NDJSON stream (`application/x-ndjson`), one chunk per line, as Ollama sends.
    pub fn ndjson(body: &str) -> Reply {
        Reply::new(200)
            .header("Content-Type", "application/x-ndjson")
            .chunks_of(body, "\n")
    }

    /// A `200` server-sent events stream, one chunk per event (events end with a blank line).
    pub fn sse(body: &str) -> Reply {
        Reply::new(200)
            .header("Content-Type", "text/event-stream; charset=utf-8")
            .chunks_of(body, "\n\n")
    }

    /// A complete JSON response with `Content-Length`, e.g. an error body.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply::new(status)
            .header("Content-Type", "application/json")
            .framing(Framing::Length)
            .chunk(body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn framing(mut self, framing: Framing) -> Reply {
        self.framing = framing;
        self
    }

    /// Appends a piece of the body, sent (and flushed) as one write.
    pub fn chunk(mut self, bytes: impl AsRef<[u8]>) -> Reply {
        self.steps.push(Step::Send(bytes.as_ref().to_vec()));
        self
    }

    /// Appends `bytes` sent `times` times, one chunk each (a long stream without holding
    /// it all in memory).
    pub fn repeated(mut self, bytes: impl AsRef<[u8]>, times: usize) -> Reply {
        self.steps
            .push(Step::Repeat(bytes.as_ref().to_vec(), times));
        self
    }

    /// Appends `body` cut after each `separator`, one chunk per piece.
    pub fn chunks_of(mut self, body: &str, separator: &str) -> Reply {
        for piece in body.split_inclusive(separator) {
            self = self.chunk(piece);
        }
        self
    }

    /// A pause before whatever comes next.
    pub fn delay(mut self, pause: Duration) -> Reply {
        self.steps.push(Step::Sleep(pause));
        self
    }

    /// Pauses of `pause` between all chunks added so far.
    pub fn paced(mut self, pause: Duration) -> Reply {
        let mut steps = Vec::new();
        for step in self.steps {
            if matches!(step, Step::Send(_) | Step::Repeat(..)) && !steps.is_empty() {
                steps.push(Step::Sleep(pause));
            }
            steps.push(step);
        }
        self.steps = steps;
        self
    }

    /// After what was added so far: silence, with the connection held open, until the
    /// server is dropped.
    pub fn stall(mut self) -> Reply {
        self.steps.push(Step::Stall);
        self
    }

    /// After what was added so far: close the connection, leaving the body unfinished.
    pub fn close(mut self) -> Reply {
        self.steps.push(Step::Close);
        self
    }
}

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON (panics with the body when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_slice(&self.body) {
            Ok(v) => v,
            Err(e) => panic!("request body is not JSON ({e}): {}", self.body_text()),
        }
    }
}

/// Computes the reply to a request from the request itself.
type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

struct Shared {
    queue: Mutex<VecDeque<Reply>>,
    /// When set, answers every request the queue has no reply for.
    responder: Mutex<Option<Responder>>,
    requests: Mutex<Vec<Recorded>>,
    shutdown: AtomicBool,
    /// Body bytes written to clients so far.
    sent: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The server. Dropping it stops it, ending stalls and closing connections.
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FakeServer {
    pub fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            responder: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            sent: AtomicU64::new(0),
        });
        let accept_shared = shared.clone();
        let accept = thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_shared.shutdown.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let conn_shared = accept_shared.clone();
                thread::spawn(move || serve(stream, &conn_shared));
            }
        });
        FakeServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// A server with these replies queued.
    pub fn with(replies: impl IntoIterator<Item = Reply>) -> FakeServer {
        let server = FakeServer::start();
        for reply in replies {
            server.push(reply);
        }
        server
    }

    /// A server whose replies depend on the request: `respond` computes each (for requests
    /// that arrive in any order, e.g. from parallel workers).
    pub fn responding(respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeServer {
        let server = FakeServer::start();
        *lock(&server.shared.responder) = Some(Arc::new(respond));
        server
    }

    /// Queues the reply to the next request.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.queue).push_back(reply);
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// How many body bytes the server has written so far (a client that stops reading
    /// holds it back: TCP backpressure).
    pub fn bytes_sent(&self) -> u64 {
        self.shared.sent.load(Ordering::SeqCst)
    }

    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// The only request received (panics when there were none or several).
    pub fn only_request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(
            requests.len(),
            1,
            "expected exactly one request: {requests:#?}"
        );
        requests[0].clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// A URL where nothing listens: a port that was bound and released.
pub fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    drop(listener);
    format!("http://{addr}")
}

const POLL: Duration = Duration::from_millis(10);

fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = stream.set_nodelay(true);
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer, shared) else {
            return;
        };
        let label = format!("{} {}", request.method, request.path);
        lock(&shared.requests).push(request.clone());
        let queued = lock(&shared.queue).pop_front();
        let responder = lock(&shared.responder).clone();
        let reply = queued
            .or_else(|| responder.map(|r| r(&request)))
            .unwrap_or_else(|| {
                Reply::json(
                    500,
                    &format!(r#"{{"error":"fake_http: no canned reply left for {label}"}}"#),
                )
            });
        if reply.silent {
            wait_for_shutdown(shared);
            return;
        }
        match respond(&mut stream, &reply, shared) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn wait_for_shutdown(shared: &Shared) {
    while !shared.shutdown.load(Ordering::SeqCst) {
        thread::sleep(POLL);
    }
}

/// Sends the reply; `Ok(true)` when the connection may carry another request.
fn respond(stream: &mut TcpStream, reply: &Reply, shared: &Shared) -> io::Result<bool> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.framing {
        Framing::Chunked => head.push_str("Transfer-Encoding: chunked\r\n"),
        Framing::Close => head.push_str("Connection: close\r\n"),
        Framing::Length => {
            let length: usize = reply
                .steps
                .iter()
                .map(|s| match s {
                    Step::Send(bytes) => bytes.len(),
                    Step::Repeat(bytes, times) => bytes.len() * times,
                    _ => 0,
                })
                .sum();
            head.push_str(&format!("Content-Length: {length}\r\n"));
        }
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()?;
    for step in &reply.steps {
        match step {
            Step::Send(bytes) => send_piece(stream, reply.framing, bytes, shared)?,
            Step::Repeat(bytes, times) => {
                for _ in 0..*times {
                    if shared.shutdown.load(Ordering::SeqCst) {
                        return Ok(false);
                    }
                    send_piece(stream, reply.framing, bytes, shared)?;
                }
            }
            Step::Sleep(pause) => {
                let mut left = *pause;
                while !left.is_zero() && !shared.shutdown.load(Ordering::SeqCst) {
                    let step = left.min(POLL);
                    thread::sleep(step);
                    left -= step;
                }
            }
            Step::Stall => {
                wait_for_shutdown(shared);
                return Ok(false);
            }
            Step::Close => return Ok(false),
        }
    }
    if reply.framing == Framing::Chunked {
        stream.write_all(b"0\r\n\r\n")?;
        stream.flush()?;
    }
    Ok(reply.framing != Framing::Close)
}

/// One piece of a body: a chunk of its own under chunked framing.
fn send_piece(
    stream: &mut TcpStream,
    framing: Framing,
    bytes: &[u8],
    shared: &Shared,
) -> io::Result<()> {
    if framing == Framing::Chunked {
        if bytes.is_empty() {
            return Ok(()); // an empty chunk would end the body
        }
        stream.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
        stream.write_all(bytes)?;
        stream.write_all(b"\r\n")?;
    } else {
        stream.write_all(bytes)?;
    }
    stream.flush()?;
    shared.sent.fetch_add(bytes.len() as u64, Ordering::SeqCst);
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Reads more bytes into `buffer`; `Ok(0)` at end of stream. Read timeouts only serve to
/// notice a shutdown.
fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>, shared: &Shared) -> io::Result<usize> {
    let mut chunk = [0u8; 4096];
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return Ok(0);
        }
        match stream.read(&mut chunk) {
            Ok(n) => {
                buffer.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request (head and body); `None` when the client closed the connection.
fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>, shared: &Shared) -> Option<Recorded> {
    let head_end = loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            break at;
        }
        if fill(stream, buffer, shared).ok()? == 0 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    buffer.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(stream, buffer, shared)?
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < length {
            if fill(stream, buffer, shared).ok()? == 0 {
                return None;
            }
        }
        buffer.drain(..length).collect()
    };
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

fn read_chunked(stream: &mut TcpStream, buffer: &mut Vec<u8>, shared: &Shared) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(at) = find(buffer, b"\r\n") {
                break at;
            }
            if fill(stream, buffer, shared).ok()? == 0 {
                return None;
            }
        };
        let size_text = String::from_utf8_lossy(&buffer[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        buffer.drain(..line_end + 2);
        while buffer.len() < size + 2 {
            if fill(stream, buffer, shared).ok()? == 0 {
                return None;
            }
        }
        body.extend(buffer.drain(..size));
        buffer.drain(..2);
        if size == 0 {
            return Some(body);
        }
    }
}
