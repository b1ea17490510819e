//! The process's exporter: one background thread that posts queued spans over OTLP/HTTP
//! (ureq), in batches: after [`BATCH_DELAY`] from the first span of a batch, when
//! [`MAX_BATCH`] spans wait, or at once when [`flush`] asks.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::spans::{Content, Span};
use super::{otlp, settings, Settings};
use crate::config::Config;

/// How long a long-lived process collects spans before posting them.
pub const BATCH_DELAY: Duration = Duration::from_secs(1);
/// Spans that are posted at once without waiting for [`BATCH_DELAY`].
pub const MAX_BATCH: usize = 512;
/// Spans kept while the endpoint does not take them; past this the oldest are dropped.
pub const MAX_QUEUE: usize = 16 * 1024;
/// The longest one post may take (a long-lived process; a one-shot one stops waiting at
/// its flush bound).
const POST_TIMEOUT: Duration = Duration::from_secs(10);

enum Msg {
    Spans(Vec<Span>),
    Flush(SyncSender<()>),
}

pub(super) struct Exporter {
    tx: Mutex<Sender<Msg>>,
    content: Content,
    endpoint: String,
}

/// The state of this process's exporter: off, on, or a warning about why it is off.
static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();
/// The warning [`flush`] reports next (set by the exporter thread or by the settings).
static WARNING: Mutex<Option<String>> = Mutex::new(None);

fn warn(message: String) {
    tracing::warn!("{message}");
    if let Ok(mut w) = WARNING.lock() {
        w.get_or_insert(message);
    }
}

/// The exporter of this process, started with the first turn that ends while traces are
/// on (`None`: they are off).
pub(super) fn get(config: &Config) -> Option<&'static Exporter> {
    EXPORTER
        .get_or_init(|| match settings(config) {
            Ok(Some(s)) => Some(Exporter::start(s)),
            Ok(None) => None,
            Err(why) => {
                warn(why);
                None
            }
        })
        .as_ref()
}

impl Exporter {
    fn start(settings: Settings) -> Exporter {
        let (tx, rx) = mpsc::channel();
        let content = settings.content.clone();
        let endpoint = settings.endpoint.clone();
        let spawned = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || run(rx, settings));
        if let Err(e) = spawned {
            warn(format!(
                "traces are not exported: cannot start the exporter thread: {e}"
            ));
        }
        Exporter {
            tx: Mutex::new(tx),
            content,
            endpoint,
        }
    }

    pub fn content(&self) -> &Content {
        &self.content
    }

    pub fn queue(&self, spans: Vec<Span>) {
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(Msg::Spans(spans));
        }
    }
}

/// Asks the exporter to post what it holds and waits at most `bound`.
pub(super) fn flush(bound: Duration) -> Option<String> {
    if let Some(Some(exporter)) = EXPORTER.get() {
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let sent = exporter
            .tx
            .lock()
            .map(|tx| tx.send(Msg::Flush(done_tx)).is_ok())
            .unwrap_or(false);
        if sent && done_rx.recv_timeout(bound).is_err() {
            warn(format!(
                "traces were not exported to {}: it did not answer within {} ms; they are dropped",
                exporter.endpoint,
                bound.as_millis()
            ));
        }
    }
    WARNING.lock().ok().and_then(|mut w| w.take())
}

fn run(rx: Receiver<Msg>, settings: Settings) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(POST_TIMEOUT))
        .user_agent(concat!("axocoatl/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut poster = Poster {
        agent,
        settings,
        failing: false,
    };
    let mut batch: Vec<Span> = Vec::new();
    let mut since: Option<Instant> = None;
    loop {
        let wait = since.map_or(Duration::from_secs(3600), |t| {
            BATCH_DELAY.saturating_sub(t.elapsed())
        });
        match rx.recv_timeout(wait) {
            Ok(Msg::Spans(spans)) => {
                batch.extend(spans);
                since.get_or_insert_with(Instant::now);
                if batch.len() > MAX_QUEUE {
                    let over = batch.len() - MAX_QUEUE;
                    batch.drain(..over);
                    warn(format!(
                        "{over} spans were dropped: {} does not take them as fast as turns end",
                        poster.settings.endpoint
                    ));
                }
                if batch.len() >= MAX_BATCH {
                    poster.post(&mut batch);
                    since = None;
                }
            }
            Ok(Msg::Flush(done)) => {
                poster.post(&mut batch);
                since = None;
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {
                poster.post(&mut batch);
                since = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                poster.post(&mut batch);
                return;
            }
        }
    }
}

struct Poster {
    agent: ureq::Agent,
    settings: Settings,
    /// The last post failed (and said so): the next failure is not said again.
    failing: bool,
}

impl Poster {
    /// Posts `batch` (emptied whatever happens: a failed batch is dropped, not retried, so
    /// that a dead endpoint costs one timeout per batch and no memory).
    fn post(&mut self, batch: &mut Vec<Span>) {
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::take(batch);
        let req = otlp::request(&spans, &self.settings.resource);
        let (body, media_type) = otlp::encode(&req, self.settings.protocol);
        let mut request = self
            .agent
            .post(&self.settings.endpoint)
            .header("Content-Type", media_type);
        for (k, v) in &self.settings.headers {
            request = request.header(k, v);
        }
        let failure = match request.send(&body[..]) {
            Ok(resp) if resp.status().is_success() => None,
            Ok(resp) => Some(format!("it answered HTTP {}", resp.status().as_u16())),
            Err(e) => Some(e.to_string()),
        };
        match failure {
            None => self.failing = false,
            Some(why) if !self.failing => {
                self.failing = true;
                warn(format!(
                    "traces were not exported to {}: {why}; {} spans dropped (turns are recorded as always)",
                    self.settings.endpoint,
                    spans.len()
                ));
            }
            Some(_) => {}
        }
    }
}
