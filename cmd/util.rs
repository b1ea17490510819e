//! `axocoatl util`: hidden maintenance commands (generated docs, ledger tools for tests and
//! benchmarks).

use std::io::Write;
use std::path::{Path, PathBuf};

use axocoatl::workspace::open_options;
use axocoatl_store::ledger::record::Note;
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;
use clap::{Args, CommandFactory, Subcommand};
use clap_complete::env::EnvCompleter;

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::json::{CheckpointJson, UsageJson};
use crate::ui::Ui;

/// Maintenance commands.
#[derive(Debug, Args)]
pub struct UtilArgs {
    #[command(subcommand)]
    pub command: UtilCommand,
}

#[derive(Debug, Subcommand)]
pub enum UtilCommand {
    /// Write man pages, shell completions and the `--json` reference (man/, completions/ and
    /// docs/json.md of the source tree).
    Generate {
        /// The directory that receives man/, completions/ and docs/json.md.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Append test records to the ledger, printing each sequence number once it is durable.
    LedgerAppend {
        /// How many records.
        #[arg(long, default_value_t = 1)]
        count: u64,
        /// Payload bytes per record.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// A tag put at the start of each payload.
        #[arg(long, default_value = "")]
        tag: String,
        /// Print `SEQ TAG:INDEX` after each durable append.
        #[arg(long)]
        print: bool,
        /// Records per append call (one fsync each).
        #[arg(long, default_value_t = 1)]
        batch: u64,
    },
    /// Print every record as `SEQ KIND [TEXT]`; damage is reported on stderr.
    LedgerDump,
    /// Make the embedder's ready-to-run file when it is missing, stale or damaged (as the
    /// first command needing the embedder would), and print which engine runs and from
    /// which file (`models fetch` makes it too). The memory benchmark runs it.
    Embedder,
    /// Print the checkpoints of SESSION:AGENT, newest first, as JSON Lines.
    Checkpoints { session: String, agent: String },
    /// An actor of `axocoatl serve` (started by serve only: its configuration comes as one
    /// JSON line on stdin; `ready` or `error JSON` on stdout).
    Actor {
        #[arg(long)]
        session: String,
        #[arg(long)]
        agent: String,
        #[arg(long)]
        socket: PathBuf,
        /// The pid of the serve that starts it.
        #[arg(long)]
        parent: u32,
        /// Its logs (on stderr, shared with serve): serve's format.
        #[arg(long, value_enum, default_value = "text")]
        log_format: crate::serve::LogFormat,
    },
}

pub fn run(args: UtilArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    match args.command {
        UtilCommand::Generate { out } => {
            let out = if out.is_absolute() {
                out
            } else {
                g.cwd()?.join(out)
            };
            generate(&out)?;
            writeln!(
                ui.out,
                "wrote {}, {} and {}",
                out.join("man").display(),
                out.join("completions").display(),
                out.join("docs/json.md").display()
            )?;
            Ok(exit::OK)
        }
        UtilCommand::Actor {
            session,
            agent,
            socket,
            parent,
            log_format,
        } => {
            crate::serve::init_logs(log_format, ui.err_color);
            actor(g, ui, session, agent, socket, parent)
        }
        UtilCommand::LedgerAppend {
            count,
            size,
            tag,
            print,
            batch,
        } => ledger_append(g, ui, count, size, &tag, print, batch),
        UtilCommand::Embedder => embedder(ui),
        UtilCommand::LedgerDump => ledger_dump(g, ui),
        UtilCommand::Checkpoints { session, agent } => checkpoints(g, ui, &session, &agent),
    }
}

/// `util ledger-append`: `count` notes of `size` bytes tagged `tag`, `batch` at a time.
fn ledger_append(
    g: &GlobalArgs,
    ui: &mut Ui,
    count: u64,
    size: usize,
    tag: &str,
    print: bool,
    batch: u64,
) -> CliResult {
    let root = g.locator()?.find_repo()?;
    let repo = Repo::open(&root, &open_options())?;
    let mut i = 0;
    while i < count {
        let n = batch.min(count - i);
        let records: Vec<Record> = (i..i + n)
            .map(|k| {
                let mut text = format!("{tag}:{k}:");
                while text.len() < size {
                    text.push((b'a' + (text.len() % 26) as u8) as char);
                }
                Record::Note(Note { text })
            })
            .collect();
        let appended = repo.ledger().append(&records)?;
        if print {
            for (k, a) in (i..i + n).zip(&appended) {
                writeln!(ui.out, "{} {tag}:{k}", a.seq)?;
            }
            ui.out.flush()?;
        }
        i += n;
    }
    Ok(exit::OK)
}

/// `util ledger-dump`: every record's sequence number and kind (a note's text too).
fn ledger_dump(g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let root = g.locator()?.find_repo()?;
    let repo = Repo::open(&root, &open_options())?;
    let mut damaged = false;
    for entry in repo.ledger().scan_all() {
        match entry {
            Ok(e) => match &e.record {
                Some(Record::Note(n)) => writeln!(ui.out, "{} Note {}", e.seq, n.text)?,
                Some(r) => writeln!(ui.out, "{} {}", e.seq, r.kind_name())?,
                None => writeln!(ui.out, "{} unknown-kind-{}", e.seq, e.kind)?,
            },
            Err(err) => {
                damaged = true;
                ui.warn(&err.to_string())?;
            }
        }
    }
    Ok(if damaged { exit::ERROR } else { exit::OK })
}

/// `util checkpoints`: the agent's checkpoint files, valid or not, one JSON line each.
fn checkpoints(g: &GlobalArgs, ui: &mut Ui, session: &str, agent: &str) -> CliResult {
    let root = g.locator()?.find_repo()?;
    let repo = Repo::open(&root, &open_options())?;
    let (good, bad) = axocoatl::checkpoint::load_all(&repo, session, agent);
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    for c in good {
        let s = &c.snapshot;
        ui.json_line(&CheckpointJson::Valid {
            file: name(&c.file.path),
            valid: true,
            ledger_seq: s.ledger_seq,
            head_turn: s.head_turn.as_deref(),
            in_flight: s.in_flight,
            messages: s.messages.len(),
            roles: s
                .messages
                .iter()
                .map(|m| format!("{:?}", m.role).to_lowercase())
                .collect(),
            usage: UsageJson::from(&s.usage),
        })?;
    }
    for (file, reason) in &bad {
        ui.json_line(&CheckpointJson::Invalid {
            file: name(&file.path),
            valid: false,
            reason,
        })?;
    }
    Ok(exit::OK)
}

/// `util embedder`: loads the embedder (making its ready-to-run file if need be).
fn embedder(ui: &mut Ui) -> CliResult {
    use axocoatl::memory::embed::{Embedder, Engine, ModelFiles, EMBED_DIR_ENV};
    let files = ModelFiles::from_env().ok_or_else(|| {
        CliError::new(
            axocoatl::ErrorKind::Failure,
            format!("no model directory: neither {EMBED_DIR_ENV} nor HOME is set"),
        )
    })?;
    let start = std::time::Instant::now();
    let embedder = Embedder::load(&files)
        .map_err(|e| CliError::new(axocoatl::ErrorKind::Failure, e.to_string()).hint(e.hint()))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    match embedder.engine() {
        Engine::Fast => {
            let how = if embedder.made_ready_file() {
                "made"
            } else {
                "mapped"
            };
            writeln!(
                ui.out,
                "fast engine: {} ({how} in {ms:.0} ms)",
                files.ready.display()
            )?;
            Ok(exit::OK)
        }
        Engine::Reference { why } => {
            writeln!(ui.out, "reference engine: {}", files.model.display())?;
            ui.warn(&format!("the fast engine is not in use: {why}"))?;
            Ok(exit::ERROR)
        }
    }
}

/// Renders every man page and completion script into `out/man` and `out/completions`, and
/// the `--json` reference into `out/docs/json.md`.
pub fn generate(out: &Path) -> CliResult<()> {
    let man = out.join("man");
    let comp = out.join("completions");
    for d in [&man, &comp] {
        std::fs::create_dir_all(d).map_err(|e| CliError::io("create", d, e))?;
    }
    // Generated files name the version alone: the commit and date of `--version` would
    // change them at every build.
    let cmd = crate::Cli::command().version(env!("CARGO_PKG_VERSION"));
    write_man(&man, &cmd, "axocoatl", true)?;
    // What `COMPLETE=<shell> axocoatl` prints: scripts that ask the binary to complete,
    // so agents, sessions and turn ids come from the repository (cmd/complete.rs).
    let shells: [(&dyn EnvCompleter, &str); 3] = [
        (&clap_complete::env::Bash, "axocoatl.bash"),
        (&clap_complete::env::Zsh, "_axocoatl"),
        (&clap_complete::env::Fish, "axocoatl.fish"),
    ];
    for (shell, name) in shells {
        let mut buf = Vec::new();
        shell
            .write_registration("COMPLETE", "axocoatl", "axocoatl", "axocoatl", &mut buf)
            .map_err(|e| CliError::io("render the completions in", Path::new(name), e))?;
        write(&comp.join(name), &buf)?;
    }
    let docs = out.join("docs");
    std::fs::create_dir_all(&docs).map_err(|e| CliError::io("create", &docs, e))?;
    write(
        &docs.join("json.md"),
        crate::json_ref::reference().as_bytes(),
    )?;
    Ok(())
}

fn write_man(dir: &Path, cmd: &clap::Command, name: &str, top: bool) -> CliResult<()> {
    if cmd.is_hide_set() {
        return Ok(());
    }
    let cmd = cmd
        .clone()
        .name(name.to_owned())
        .version(env!("CARGO_PKG_VERSION"));
    crate::manpage::write(&dir.join(format!("{name}.1")), &cmd, name, top)?;
    for sub in cmd.get_subcommands() {
        write_man(dir, sub, &format!("{name}-{}", sub.get_name()), false)?;
    }
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> CliResult<()> {
    std::fs::write(path, bytes).map_err(|e| CliError::io("write", path, e))
}

fn actor(
    g: &GlobalArgs,
    ui: &mut Ui,
    session: String,
    agent: String,
    socket: PathBuf,
    parent: u32,
) -> CliResult {
    use axocoatl::serve::{actor, wire};
    let started = (|| -> axocoatl::Result<()> {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(axocoatl::RuntimeError::io("read", "standard input"))?;
        let config = serde_json::from_str(&line).map_err(|e| axocoatl::RuntimeError::Invalid {
            message: format!("the configuration from serve does not parse: {e}"),
            hint: "actors are started by `axocoatl serve` only".into(),
        })?;
        let ws = g.open().map_err(|e| axocoatl::RuntimeError::Invalid {
            message: e.message,
            hint: e.hints.join("; ").into(),
        })?;
        let args = actor::ActorArgs {
            session,
            agent,
            socket,
            parent,
        };
        actor::run(ws, config, args, &mut ui.out)
    })();
    match started {
        Ok(()) => Ok(exit::OK),
        Err(e) => {
            let line = wire::line(&wire::WireError::from(&e));
            ui.out.write_all(b"error ")?;
            ui.out.write_all(&line)?;
            ui.out.flush()?;
            Ok(exit::ERROR)
        }
    }
}
