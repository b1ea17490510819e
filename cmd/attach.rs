//! `axocoatl attach`

use std::io::Write;
use std::path::PathBuf;

use axocoatl::attach::{self, AttachError, Reference, Text};
use axocoatl::provider::Cancel;
use axocoatl::RuntimeError;
use axocoatl_store::extracted::OcrInfo;
use axocoatl_store::ledger::record::AttachmentScope;
use clap::{Args, Subcommand, ValueEnum};

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::safe;
use crate::json::{ReferenceJson, TextJson};
use crate::ui::Ui;

/// Attach files as context: immutable references that go along with turns.
///
/// A file's bytes are stored once in the repository (identical content is shared) and its
/// text is extracted (plain text, Markdown, source code, JSON, CSV, PDF; capped at 256 KiB).
/// OCR (Tesseract) reads the text of images and of PDF pages without a text layer, once,
/// when they are attached; the model is told it is OCR text and its mean confidence.
/// A once-scoped reference goes along with the next turn of its session and is then
/// consumed; a session-scoped one goes along with every turn until `attach rm`. Removing a
/// reference never changes a turn that already used it: `show` and `export` still list it
/// and `attach cat` still returns it.
///
/// Images (PNG, JPEG, GIF, WebP; TIFF and BMP as OCR text only) up to 10 MiB, other
/// documents up to 25 MiB. Images go to providers that read images (ollama, openai); others
/// get their OCR text, and refuse the turn for an image without any.
///
/// Examples:
///   axocoatl attach add report.pdf                 the next turn only
///   axocoatl attach add --scope session spec.md    every turn until removed
///   axocoatl send --attach screenshot.png "what is wrong here?"
///   axocoatl attach list --all
///   axocoatl attach cat 3f2a --text | less
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AttachArgs {
    #[command(subcommand)]
    pub command: AttachCommand,
}

#[derive(Debug, Subcommand)]
pub enum AttachCommand {
    Add(AddArgs),
    List(ListArgs),
    Rm(RmArgs),
    Cat(CatArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    /// The next turn of the session, then consumed.
    Once,
    /// Every turn of the session until removed.
    Session,
}

impl From<ScopeArg> for AttachmentScope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Once => AttachmentScope::Once,
            ScopeArg::Session => AttachmentScope::Session,
        }
    }
}

/// Attach files to a session; prints one reference id per file.
///
/// The type comes from the file's content, not its name. Every file is checked and read
/// before anything is stored: one refused file (too large, unsupported, over
/// attachments.ocr.max_pixels, OCR past its time limit) attaches none. A file that is
/// already selected with the same name, content and scope is not attached twice. Content
/// read by OCR before (same languages) is not read again. Ctrl-C stops OCR.
///
/// Examples:
///   axocoatl attach add notes.md data.csv
///   axocoatl attach add --scope session -s review design.pdf
///   REF=$(axocoatl attach add diagram.png)
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AddArgs {
    /// The files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// How long the references stay selected.
    #[arg(long, value_enum, default_value_t = ScopeArg::Once)]
    pub scope: ScopeArg,
    /// The session [default: HEAD].
    #[arg(short, long)]
    pub session: Option<String>,
    /// Print one JSON object per reference.
    #[arg(long)]
    pub json: bool,
}

/// List the references selected for the next turn of a session.
///
/// Columns: reference, scope, state, size, media type, name. `--all` adds the references
/// that were consumed by a turn or removed.
///
/// Examples:
///   axocoatl attach list
///   axocoatl attach list -s review --all --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListArgs {
    /// The session [default: HEAD].
    #[arg(short, long)]
    pub session: Option<String>,
    /// Also the consumed and removed references.
    #[arg(long)]
    pub all: bool,
    /// Print JSON Lines, one object per reference.
    #[arg(long)]
    pub json: bool,
}

/// Remove a reference from future selection.
///
/// The ledger records the removal; turns that already used the reference keep it.
///
/// Examples:
///   axocoatl attach rm 3f2a9c1e
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct RmArgs {
    /// The reference id, or a unique prefix of at least 4 characters.
    #[arg(value_name = "REF", add = clap_complete::engine::ArgValueCandidates::new(crate::complete::references))]
    pub reference: String,
    /// Print the removed reference as a JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Write a reference's original bytes (or its extracted text) to stdout.
///
/// Works for every reference, including consumed and removed ones. The bytes are verified
/// against their hash first. Binary content is not written to a terminal: redirect it.
///
/// Examples:
///   axocoatl attach cat 3f2a > copy.pdf
///   axocoatl attach cat 3f2a --text | less
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CatArgs {
    /// The reference id, or a unique prefix of at least 4 characters.
    #[arg(value_name = "REF", add = clap_complete::engine::ArgValueCandidates::new(crate::complete::references))]
    pub reference: String,
    /// The extracted text instead of the original bytes.
    #[arg(long)]
    pub text: bool,
}

pub fn run(args: AttachArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    match args.command {
        AttachCommand::Add(a) => add(a, g, ui),
        AttachCommand::List(a) => list(a, g, ui),
        AttachCommand::Rm(a) => rm(a, g, ui),
        AttachCommand::Cat(a) => cat(a, g, ui),
    }
}

/// The line `send` prints on stderr for each attachment a turn pinned.
pub fn pin_line(a: &axocoatl_store::ledger::record::AttachmentPin) -> String {
    format!(
        "attachment {} {} ({}, {})",
        a.reference,
        safe(&a.name),
        a.media_type,
        attach::size_text(a.size)
    )
}

/// What OCR read: `OCR (tesseract 5.3.0, eng): 42 words, mean confidence 91%`.
pub fn ocr_summary(info: &OcrInfo) -> String {
    let pages = if info.of_pages > 1 {
        format!(" of {} of {} pages", info.pages, info.of_pages)
    } else {
        String::new()
    };
    let found = match info.confidence {
        Some(c) => format!(
            "{} word{}, mean confidence {c}%",
            info.words,
            if info.words == 1 { "" } else { "s" }
        ),
        None => "no text found".to_owned(),
    };
    format!("OCR{pages} ({}, {}): {found}", info.engine, info.languages)
}

fn truncation_warning(ui: &mut Ui, a: &attach::Added) -> std::io::Result<()> {
    ui.warn(&format!(
        "{}: the extracted text ({}) was cut to {}",
        safe(&a.reference.name),
        attach::size_text(a.text_len as u64),
        attach::size_text(attach::TEXT_CAP as u64)
    ))
}

fn add(args: AddArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.session_or_head(args.session.as_deref())?;
    let scope = AttachmentScope::from(args.scope);
    let cancel = Cancel::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The first signal stops OCR (nothing is attached); a second ends the process.
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, cancel.flag());
        let _ = signal_hook::flag::register(sig, cancel.flag());
    }
    let reading = attach::Reading {
        ocr: attach::ocr::Settings::of(&ws.config()?.attachments.ocr),
        cancel: &cancel,
    };
    let added = attach::add(ws.repo(), &session, &args.files, scope, &reading)?;
    for a in &added {
        let r = &a.reference;
        if args.json {
            ui.json_line(&ReferenceJson {
                reused: Some(a.reused),
                text_reused: Some(a.text_reused),
                notes: Some(&a.notes),
                ..ReferenceJson::new(r, &TextJson::of_ocr(a.ocr.as_ref(), r))
            })?;
            continue;
        }
        writeln!(ui.out, "{}", r.reference)?;
        let until = match r.scope {
            AttachmentScope::Once => "for the next turn only",
            AttachmentScope::Session => "for every turn until `axocoatl attach rm`",
        };
        if a.reused {
            writeln!(
                ui.err,
                "{} is already selected as {} in session {session} {until}",
                safe(&r.name),
                r.reference
            )?;
        } else {
            writeln!(
                ui.err,
                "attached {} ({}, {}) to session {session} {until}",
                safe(&r.name),
                r.media_type,
                attach::size_text(r.size)
            )?;
        }
        if let Some(info) = &a.ocr {
            let again = if a.text_reused {
                " (read before: the same content is not read again)"
            } else {
                ""
            };
            writeln!(ui.err, "{}: {}{again}", safe(&r.name), ocr_summary(info))?;
        }
        for note in &a.notes {
            ui.warn(&format!("{}: {note}", safe(&r.name)))?;
        }
        if r.text_truncated && !a.reused {
            truncation_warning(ui, a)?;
        }
    }
    Ok(exit::OK)
}

fn list(args: ListArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let session = ws.session_or_head(args.session.as_deref())?;
    let refs = attach::list(ws.repo(), &session, args.all)?;
    if refs.is_empty() && !args.json {
        let what = if args.all {
            "no attachments"
        } else {
            "no attachments selected"
        };
        writeln!(
            ui.err,
            "{what} in session {session} (`axocoatl attach add FILE` attaches one)"
        )?;
    }
    for r in &refs {
        let text = attach::stored_text(ws.repo(), r.text_object.as_deref())?;
        if args.json {
            ui.json_line(&ReferenceJson::new(r, &TextJson::of(&text, r)))?;
            continue;
        }
        let mut line = format!(
            "{}  {:<7}  {:<8}  {:>10}  {:<16}  {}",
            ui.paint("33", &r.reference),
            attach::scope_str(r.scope),
            r.state.as_str(),
            short_size(r.size),
            r.media_type,
            safe(&r.name)
        );
        if let Some(turn) = &r.consumed_by {
            line.push_str(&format!("  (turn {turn})"));
        }
        if r.text_truncated {
            line.push_str("  (text cut to 256 KiB)");
        }
        if let Some(ocr) = ocr_column(&text, r) {
            line.push_str(&format!("  ({ocr})"));
        }
        writeln!(ui.out, "{line}")?;
    }
    Ok(exit::OK)
}

/// Whether OCR read an attachment, for `attach list` and `show`: `OCR eng, mean confidence
/// 91%`, `OCR eng: no text found`, `not read by OCR` (an image without text); nothing for
/// text that is no OCR's.
pub fn ocr_column(text: &Text, r: &Reference) -> Option<String> {
    match text {
        Text::Ocr(info, _) => Some(match info.confidence {
            Some(c) => format!(
                "OCR {}{}, mean confidence {c}%",
                info.languages,
                if info.of_pages > 1 {
                    format!(" of {}/{} pages", info.pages, info.of_pages)
                } else {
                    String::new()
                }
            ),
            None => format!("OCR {}: no text found", info.languages),
        }),
        Text::None if attach::is_image(&r.media_type) || attach::is_ocr_image(&r.media_type) => {
            Some("not read by OCR".into())
        }
        _ => None,
    }
}

/// A size for a column: bytes, KiB or MiB with one decimal.
fn short_size(n: u64) -> String {
    match n {
        n if n >= 1024 * 1024 => format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0)),
        n if n >= 1024 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn rm(args: RmArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let r = attach::remove(ws.repo(), &args.reference)?;
    if args.json {
        let text = attach::stored_text(ws.repo(), r.text_object.as_deref())?;
        ui.json_line(&ReferenceJson::new(&r, &TextJson::of(&text, &r)))?;
    } else {
        writeln!(
            ui.out,
            "removed {} ({}) from session {}; turns that used it keep it",
            r.reference,
            safe(&r.name),
            r.session
        )?;
    }
    Ok(exit::OK)
}

fn cat(args: CatArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let (r, bytes) = attach::cat(ws.repo(), &args.reference, args.text)?;
    if ui.out_is_terminal && !args.text && std::str::from_utf8(&bytes).is_err() {
        return Err(RuntimeError::from(AttachError::Binary {
            reference: r.reference.clone(),
            name: safe(&r.name),
            media_type: r.media_type.clone(),
        })
        .into());
    }
    ui.out.write_all(&bytes)?;
    ui.out.flush()?;
    Ok(exit::OK)
}
