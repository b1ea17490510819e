//! `axocoatl schemas`

use std::io::Write;

use axocoatl::clock;
use axocoatl::schema::{concise, Schema};
use clap::{Args, Subcommand};

use crate::ctx::GlobalArgs;
use crate::error::{CliError, CliResult};
use crate::exit;
use crate::json::{SchemaListJson, SchemaShowJson};
use crate::ui::Ui;

/// List the JSON Schemas turns had to match; show one as JSON Schema.
///
/// Each schema a turn used (`send --schema`, an agent's output_schema) is stored once,
/// named by the hash of its JSON: that id, or its first 8 or more characters, is a SCHEMA
/// that `send --schema` takes. The list shows the concise form of a schema that has one.
/// `show` prints any SCHEMA (an id, a file, inline JSON Schema, the concise form) as the
/// JSON Schema it stands for, refusing a keyword outside the supported subset by name.
///
/// Examples:
///   axocoatl schemas
///   axocoatl schemas show 5e1f0a2b
///   axocoatl schemas show 'name, age int, tags [str]' > person.json
///   axocoatl schemas show person.json --concise
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SchemasArgs {
    #[command(subcommand)]
    pub command: Option<SchemasCommand>,
    /// Print JSON Lines, one object per schema.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SchemasCommand {
    /// Print SCHEMA as JSON Schema (or in its concise form).
    Show {
        /// A stored schema's id, a file, inline JSON Schema or the concise form.
        schema: String,
        /// Print the concise form instead (refused when the schema has none).
        #[arg(long, conflicts_with = "json")]
        concise: bool,
        /// Print one JSON object: the id, the concise form and the schema.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: SchemasArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    match args.command {
        None => list(&ws, args.json, ui),
        Some(SchemasCommand::Show {
            schema,
            concise,
            json,
        }) => {
            let dir = std::env::current_dir()
                .map_err(|e| CliError::io("read", std::path::Path::new("."), e))?;
            let s = axocoatl::schemas::resolve(&ws, &schema, &dir)?;
            show(&s, concise, json || args.json, ui)
        }
    }
}

fn list(ws: &axocoatl::workspace::Workspace, json: bool, ui: &mut Ui) -> CliResult {
    let listing = axocoatl::schemas::list(ws)?;
    crate::fmt::warn_problems(ui, &listing.problems, 0)?;
    for (object, why) in &listing.missing {
        ui.warn(&format!("schema {object} cannot be read: {why}"))?;
    }
    for e in &listing.schemas {
        if json {
            ui.json_line(&SchemaListJson {
                id: &e.schema.id,
                turns: e.turns,
                first_used: clock::rfc3339(e.first_used),
                last_used: clock::rfc3339(e.last_used),
                last_turn: &e.last_turn,
                concise: e.concise.as_deref(),
                schema: &e.schema.value,
            })?;
            continue;
        }
        let turns = if e.turns == 1 { "turn " } else { "turns" };
        writeln!(
            ui.out,
            "{}  {:>5} {turns}  {}  {}",
            Schema::short_id(&e.schema.id),
            e.turns,
            clock::short(e.last_used),
            summary(e)
        )?;
    }
    if listing.schemas.is_empty() && !json {
        writeln!(
            ui.err,
            "no schemas yet: `axocoatl send --schema SCHEMA` stores the one it uses"
        )?;
    }
    Ok(
        if listing.problems.is_empty() && listing.missing.is_empty() {
            exit::OK
        } else {
            exit::ERROR
        },
    )
}

/// One line about a schema: its concise form (newlines as `; `), else its title, else its
/// top-level type.
fn summary(e: &axocoatl::schemas::SchemaEntry) -> String {
    if let Some(c) = &e.concise {
        return crate::fmt::first_line(&c.replace('\n', "; "), 80);
    }
    let v = &e.schema.value;
    if let Some(title) = v.get("title").and_then(|t| t.as_str()) {
        return crate::fmt::first_line(title, 80);
    }
    match v.get("type") {
        Some(t) => format!("JSON Schema ({})", t.to_string().trim_matches('"')),
        None => "JSON Schema".into(),
    }
}

fn show(s: &Schema, as_concise: bool, json: bool, ui: &mut Ui) -> CliResult {
    let short = concise::render(&s.value);
    if json {
        ui.json_line(&SchemaShowJson {
            id: &s.id,
            concise: short.as_deref(),
            schema: &s.value,
        })?;
        return Ok(exit::OK);
    }
    if as_concise {
        let Some(text) = short else {
            return Err(CliError::usage(
                "this schema has no concise form (it uses more than the concise form says)",
            )
            .hint("print it as JSON Schema: leave out --concise"));
        };
        writeln!(ui.out, "{text}")?;
        return Ok(exit::OK);
    }
    let text = serde_json::to_string_pretty(&s.value)
        .map_err(|e| CliError::internal(format!("a schema failed to print: {e}")))?;
    writeln!(ui.out, "{text}")?;
    writeln!(ui.err, "schema {}", s.id)?;
    Ok(exit::OK)
}
