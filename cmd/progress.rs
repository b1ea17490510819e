//! Draws the runtime's progress reports (`axocoatl::progress`) on one line of stderr,
//! rewritten in place and cleared when the step ends. Installed only for a terminal, never
//! under `--json` or `--quiet`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axocoatl::progress::Progress;

/// Whether a progress line is on the screen (to be cleared).
static DRAWN: AtomicBool = AtomicBool::new(false);
/// When the line was last drawn: reports closer together than [`REDRAW`] are skipped.
static LAST: Mutex<Option<Instant>> = Mutex::new(None);
const REDRAW: Duration = Duration::from_millis(100);

/// Starts drawing progress on stderr.
pub fn install() {
    axocoatl::progress::report_to(draw);
}

/// The ledger's note about building its indexes, on stderr (the repository is opened with
/// it on a terminal: see `IndexOptions::report_builds`).
pub fn index_build(m: &str) {
    clear();
    let _ = writeln!(std::io::stderr(), "axocoatl: {m}");
}

/// The text of a progress line.
pub fn text(p: &Progress<'_>) -> Option<String> {
    Some(match *p {
        Progress::LoadingModel { model } => format!("loading model {model}…"),
        Progress::ReadingPrompt { done, total } => format!(
            "reading the prompt: {done}/{total} tokens ({}%)",
            done * 100 / total.max(1)
        ),
        Progress::Importing { done, total } => {
            format!("importing pre-1.0 state: {done}/{total} checkpoint directories")
        }
        Progress::Done => return None,
    })
}

fn draw(p: &Progress<'_>) {
    match text(p) {
        Some(line) => {
            let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
            let steady = matches!(
                p,
                Progress::ReadingPrompt { .. } | Progress::Importing { .. }
            );
            if steady && last.is_some_and(|at| at.elapsed() < REDRAW) {
                return;
            }
            *last = Some(Instant::now());
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[K{line}");
            let _ = err.flush();
            DRAWN.store(true, Ordering::SeqCst);
        }
        None => clear(),
    }
}

/// Removes the progress line, if one is drawn.
pub fn clear() {
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = None;
    if DRAWN.swap(false, Ordering::SeqCst) {
        let mut err = std::io::stderr();
        let _ = write!(err, "\r\x1b[K");
        let _ = err.flush();
    }
}
