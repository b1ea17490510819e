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

pub struct Ui {
    pub out: Box<dyn Write>,
    pub err: Box<dyn Write>,
    /// Whether stdout gets ANSI colors.
    pub color: bool,
    pub err_color: bool,
    /// Whether stdout is a terminal (for highlighting and prompts).
    pub out_is_terminal: bool,
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
            out: Box::new(io::stdout()),
            err: Box::new(io::stderr()),
            color: pick(out_tty),
            err_color: pick(err_tty),
            out_is_terminal: out_tty,
        }
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

    /// Writes one JSON value as a line.
    pub fn json_line(&mut self, value: &serde_json::Value) -> io::Result<()> {
        writeln!(self.out, "{value}")
    }

    pub fn warn(&mut self, message: &str) -> io::Result<()> {
        let label = self.paint_err("33;1", "warning");
        writeln!(self.err, "{label}: {message}")
    }
}
