//! A small line editor for `chat`: on a terminal, the keys people expect from a shell
//! prompt (arrows, Home/End, Backspace/Delete, Ctrl-A/E/U/K/W, history with Up/Down,
//! Ctrl-C to drop the line, Ctrl-D to leave); elsewhere (piped stdin), plain lines.
//!
//! The terminal is put in raw mode only while a line is read, and restored before the line
//! is returned (and on drop), so a turn's output and Ctrl-C behave as usual between prompts.

use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The terminal's settings from before the first raw mode, for [`restore_terminal`].
static COOKED: OnceLock<libc::termios> = OnceLock::new();
/// Whether the terminal is in raw mode now.
static RAW: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back as it was when it is in raw mode. Async-signal-safe (an atomic swap
/// and `tcsetattr`, which POSIX lists as safe): a signal handler that ends the process at the
/// prompt calls it first, or the shell would be left without echo or line editing.
#[expect(
    unsafe_code,
    reason = "tcsetattr: restores the termios RawMode::enter saved, on the same descriptor"
)]
pub fn restore_terminal() {
    if RAW.swap(false, Ordering::SeqCst) {
        if let Some(cooked) = COOKED.get() {
            // SAFETY: tcsetattr reads a termios that lives for the whole process.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, cooked);
            }
        }
    }
}

/// What reading a line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    Line(String),
    /// Ctrl-C at the prompt: the line was dropped.
    Dropped,
    /// Ctrl-D on an empty line, or the end of stdin.
    End,
    /// A line of piped input that is not UTF-8: what is wrong with it (the line is read,
    /// the next one comes next).
    NotUtf8(String),
}

pub struct LineEditor {
    history: Vec<String>,
    terminal: bool,
}

impl LineEditor {
    pub fn new() -> LineEditor {
        LineEditor {
            history: Vec::new(),
            terminal: io::stdin().is_terminal() && io::stderr().is_terminal(),
        }
    }

    /// Reads one line after `prompt` (written to stderr).
    pub fn read(&mut self, prompt: &str) -> io::Result<Input> {
        if !self.terminal {
            return read_plain(prompt);
        }
        let raw = RawMode::enter()?;
        let result = self.edit(prompt);
        drop(raw);
        let mut err = io::stderr();
        writeln!(err)?;
        err.flush()?;
        if let Ok(Input::Line(line)) = &result {
            if !line.trim().is_empty() && self.history.last() != Some(line) {
                self.history.push(line.clone());
            }
        }
        result
    }

    fn edit(&mut self, prompt: &str) -> io::Result<Input> {
        let mut state = Editing {
            line: Vec::new(),
            cursor: 0,
            recalled: self.history.len(),
            draft: Vec::new(),
        };
        let mut err = io::stderr();
        let mut stdin = io::stdin().lock();
        redraw(&mut err, prompt, &state)?;
        loop {
            let Some(byte) = read_byte(&mut stdin)? else {
                return Ok(if state.line.is_empty() {
                    Input::End
                } else {
                    Input::Line(state.text())
                });
            };
            match byte {
                b'\r' | b'\n' => return Ok(Input::Line(state.text())),
                0x03 => {
                    write!(err, "^C")?;
                    return Ok(Input::Dropped);
                }
                0x04 if state.line.is_empty() => return Ok(Input::End),
                0x04 => state.delete(),
                0x01 => state.cursor = 0,
                0x05 => state.cursor = state.line.len(),
                0x02 => state.cursor = state.cursor.saturating_sub(1),
                0x06 => state.cursor = (state.cursor + 1).min(state.line.len()),
                0x15 => {
                    state.line.drain(..state.cursor);
                    state.cursor = 0;
                }
                0x0b => state.line.truncate(state.cursor),
                0x17 => state.delete_word(),
                0x7f | 0x08 => state.backspace(),
                0x1b => self.escape(&mut stdin, &mut state)?,
                b if b < 0x20 => {}
                b => {
                    let c = read_char(&mut stdin, b)?;
                    state.line.insert(state.cursor, c);
                    state.cursor += 1;
                }
            }
            redraw(&mut err, prompt, &state)?;
        }
    }

    /// An escape sequence: arrows, Home/End, Delete.
    fn escape(&self, stdin: &mut impl Read, state: &mut Editing) -> io::Result<()> {
        let Some(b'[' | b'O') = read_byte(stdin)? else {
            return Ok(());
        };
        let mut code = Vec::new();
        while let Some(b) = read_byte(stdin)? {
            code.push(b);
            if b.is_ascii_alphabetic() || b == b'~' {
                break;
            }
        }
        match code.as_slice() {
            b"A" => self.recall(state, -1),
            b"B" => self.recall(state, 1),
            b"C" => state.cursor = (state.cursor + 1).min(state.line.len()),
            b"D" => state.cursor = state.cursor.saturating_sub(1),
            b"H" | b"1~" => state.cursor = 0,
            b"F" | b"4~" => state.cursor = state.line.len(),
            b"3~" => state.delete(),
            _ => {}
        }
        Ok(())
    }

    /// Up (-1) and Down (+1) through the lines entered before; below the newest, the line
    /// being written.
    fn recall(&self, state: &mut Editing, step: isize) {
        let at = state.recalled as isize + step;
        if at < 0 || at > self.history.len() as isize {
            return;
        }
        if state.recalled == self.history.len() {
            state.draft = state.line.clone();
        }
        state.recalled = at as usize;
        state.line = match self.history.get(state.recalled) {
            Some(line) => line.chars().collect(),
            None => state.draft.clone(),
        };
        state.cursor = state.line.len();
    }
}

struct Editing {
    line: Vec<char>,
    /// In characters.
    cursor: usize,
    /// The history entry shown (`history.len()`: the line being written).
    recalled: usize,
    /// The line being written, kept while the history is browsed.
    draft: Vec<char>,
}

impl Editing {
    fn text(&self) -> String {
        self.line.iter().collect()
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.line.remove(self.cursor);
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.line.len() {
            self.line.remove(self.cursor);
        }
    }

    fn delete_word(&mut self) {
        let mut start = self.cursor;
        while start > 0 && self.line[start - 1] == ' ' {
            start -= 1;
        }
        while start > 0 && self.line[start - 1] != ' ' {
            start -= 1;
        }
        self.line.drain(start..self.cursor);
        self.cursor = start;
    }
}

/// The prompt and the line, with the cursor put back where it is in the line.
fn redraw(err: &mut impl Write, prompt: &str, state: &Editing) -> io::Result<()> {
    let shown: String = state.line.iter().map(|c| visible(*c)).collect();
    write!(err, "\r{prompt}{shown}\x1b[K")?;
    let after = state.line.len() - state.cursor;
    if after > 0 {
        write!(err, "\x1b[{after}D")?;
    }
    err.flush()
}

/// Control characters (pasted tabs, escapes) are shown as spaces: the line cannot move the
/// cursor.
fn visible(c: char) -> char {
    if c.is_control() {
        ' '
    } else {
        c
    }
}

fn read_byte(input: &mut impl Read) -> io::Result<Option<u8>> {
    let mut b = [0u8; 1];
    loop {
        match input.read(&mut b) {
            Ok(0) => return Ok(None),
            Ok(_) => return Ok(Some(b[0])),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// The character a UTF-8 sequence starting with `first` encodes (U+FFFD when invalid).
fn read_char(input: &mut impl Read, first: u8) -> io::Result<char> {
    let len = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Ok(char::REPLACEMENT_CHARACTER),
    };
    let mut bytes = vec![first];
    for _ in 1..len {
        match read_byte(input)? {
            Some(b) => bytes.push(b),
            None => break,
        }
    }
    Ok(std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.chars().next())
        .unwrap_or(char::REPLACEMENT_CHARACTER))
}

/// A line of piped input, without its line ending; the prompt only on a terminal.
fn read_plain(prompt: &str) -> io::Result<Input> {
    if io::stderr().is_terminal() {
        let mut err = io::stderr();
        write!(err, "{prompt}")?;
        err.flush()?;
    }
    let mut line = Vec::new();
    if io::stdin().lock().read_until(b'\n', &mut line)? == 0 {
        return Ok(Input::End);
    }
    Ok(plain_line(line))
}

/// A line of piped input (its line ending included) as text, or what makes it not text.
fn plain_line(mut line: Vec<u8>) -> Input {
    while line.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
        line.pop();
    }
    match String::from_utf8(line) {
        Ok(text) => Input::Line(text),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let bytes = e.as_bytes();
            let bad = &bytes[at..bytes
                .len()
                .min(at + e.utf8_error().error_len().unwrap_or(1))];
            let hex: Vec<String> = bad.iter().map(|b| format!("{b:#04x}")).collect();
            Input::NotUtf8(format!(
                "byte {} of the line ({}) is not UTF-8",
                at + 1,
                hex.join(" ")
            ))
        }
    }
}

/// The terminal in raw mode (no echo, no line buffering, no signals from keys) until
/// dropped.
struct RawMode {
    saved: libc::termios,
}

impl RawMode {
    #[expect(
        unsafe_code,
        reason = "tcgetattr/tcsetattr: libc has no safe wrapper for switching a terminal to raw mode"
    )]
    fn enter() -> io::Result<RawMode> {
        let mut saved = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the termios we pass; it is read only when the call succeeds.
        let saved = unsafe {
            if libc::tcgetattr(libc::STDIN_FILENO, saved.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            saved.assume_init()
        };
        let mut raw = saved;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
        raw.c_iflag &= !(libc::IXON | libc::ICRNL | libc::BRKINT | libc::INPCK | libc::ISTRIP);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: tcsetattr reads the termios we own.
        COOKED.get_or_init(|| saved);
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        RAW.store(true, Ordering::SeqCst);
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    #[expect(
        unsafe_code,
        reason = "tcsetattr: restores the termios RawMode::enter saved, on the same descriptor"
    )]
    fn drop(&mut self) {
        RAW.store(false, Ordering::SeqCst);
        // SAFETY: tcsetattr reads the termios we own.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.saved);
        }
    }
}
