//! Terminal output: every command writes through a `Ui`, never with `println!`.

use std::io::{self, IsTerminal, Write};

use clap::ValueEnum;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

/// A `--json` line that did not serialize, carried in an I/O error: a bug, which the command
/// line reports as an internal error (exit 70).
#[derive(Debug)]
pub struct Unserializable(pub serde_json::Error);

impl std::fmt::Display for Unserializable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot serialize a --json line: {}", self.0)
    }
}

impl std::error::Error for Unserializable {}

pub struct Ui {
    pub out: Box<dyn Write>,
    pub err: Box<dyn Write>,
    /// Whether stdout gets ANSI colors.
    pub color: bool,
    pub err_color: bool,
    /// Whether stdout is a terminal (for highlighting and prompts).
    pub out_is_terminal: bool,
    /// Whether stderr is a terminal (for progress notes meant for people).
    pub err_is_terminal: bool,
    /// A turn's JSON value (`send --schema`) is printed on one line (`--compact`).
    pub compact_values: bool,
}

impl Ui {
    pub fn new(choice: ColorChoice) -> Ui {
        let out_tty = io::stdout().is_terminal();
        let err_tty = io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let pick = |tty: bool| match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        Ui {
            out: Box::new(Named {
                inner: io::stdout(),
                name: "standard output",
            }),
            err: Box::new(Named {
                inner: io::stderr(),
                name: "standard error",
            }),
            color: pick(out_tty),
            err_color: pick(err_tty),
            out_is_terminal: out_tty,
            err_is_terminal: err_tty,
            compact_values: false,
        }
    }

    /// Buffers standard output in blocks of 64 KiB instead of lines, for a command that
    /// prints a listing and exits (`history -s` beside 1M turns made 2,000 writes for 1,000
    /// turns). The caller flushes it before reporting an error and before exiting.
    pub fn buffer_out(&mut self) {
        self.out = Box::new(Named {
            inner: io::BufWriter::with_capacity(1 << 16, io::stdout()),
            name: "standard output",
        });
    }

    pub fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn paint_err(&self, code: &str, text: &str) -> String {
        if self.err_color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Writes one value as a line of JSON (every `--json` output is a type in `json.rs`).
    /// Writes `value` as one line of JSON. A value that does not serialize is a bug (every
    /// `--json` output is a type of `crate::json`): an internal error, never a line left out.
    pub fn json_line<T: serde::Serialize>(&mut self, value: &T) -> io::Result<()> {
        let line = serde_json::to_string(value).map_err(|e| io::Error::other(Unserializable(e)))?;
        writeln!(self.out, "{line}")
    }

    pub fn warn(&mut self, message: &str) -> io::Result<()> {
        let label = self.paint_err("33;1", "warning");
        writeln!(self.err, "{label}: {message}")
    }
}

/// A terminal stream whose errors say which stream failed (every I/O error names its path).
struct Named<W> {
    inner: W,
    name: &'static str,
}

impl<W: Write> Named<W> {
    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("cannot write to {}: {e}", self.name))
    }
}

impl<W: Write> Write for Named<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.named(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|e| self.named(e))
    }
}
