//! docs/json.md, the reference of every `--json` output, rendered from the JSON Schemas of
//! the types in [`crate::json`] (schemars, with serialization's view of optional fields).
//! `axocoatl util generate` writes it beside man/ and completions/, and
//! `tests/cli/docs_sync.rs` fails when the committed file differs.

use std::collections::BTreeSet;
use std::fmt::Write;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::json::*;

/// One output: the commands that print it, what one line is, and its type.
struct Output {
    commands: &'static str,
    lines: &'static str,
    schema: fn(&mut SchemaGenerator) -> Value,
}

fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    g.subschema_for::<T>().to_value()
}

const OUTPUTS: &[Output] = &[
    Output {
        commands: "send --json, retry --json",
        lines: "one event per line, `turn.begun` first and `turn.ended` last (or one `error` \
                when the command failed before its turn ended)",
        schema: of::<SendLine<'static>>,
    },
    Output {
        commands: "history --json",
        lines: "one turn per line",
        schema: of::<TurnJson<'static>>,
    },
    Output {
        commands: "show --json",
        lines: "one turn, with its model calls",
        schema: of::<ShowJson<'static>>,
    },
    Output {
        commands: "export --format json",
        lines: "one pretty-printed document; `complete` is false (and the exit code 1) when \
                ledger records could not be read",
        schema: of::<ExportJson<'static>>,
    },
    Output {
        commands: "usage --json",
        lines: "one line per group, then the total (`total: true`)",
        schema: of::<UsageRowJson<'static>>,
    },
    Output {
        commands: "usage --prices --json",
        lines: "one line per row of the price table, in the order rows are tried",
        schema: of::<PriceJson<'static>>,
    },
    Output {
        commands: "sessions --json",
        lines: "one line per session",
        schema: of::<SessionJson<'static>>,
    },
    Output {
        commands: "sessions new --json, sessions switch --json, sessions rm --json, sessions rename --json",
        lines: "the action",
        schema: of::<SessionActionJson<'static>>,
    },
    Output {
        commands: "stop --json",
        lines: "the request",
        schema: of::<StopJson<'static>>,
    },
    Output {
        commands: "attach add --json, attach list --json, attach rm --json",
        lines: "one line per reference",
        schema: of::<ReferenceJson<'static>>,
    },
    Output {
        commands: "rewind --json",
        lines: "the rewind",
        schema: of::<RewindJson<'static>>,
    },
    Output {
        commands: "fsck --json",
        lines: "one line per finding, pre-1.0 inputs, then the summary",
        schema: of::<FsckLine<'static>>,
    },
    Output {
        commands: "import --json",
        lines: "one line per 0.1.x checkpoint directory and per other pre-1.0 input, then the \
                summary",
        schema: of::<ImportLine<'static>>,
    },
    Output {
        commands: "init --json",
        lines: "the repository",
        schema: of::<InitJson<'static>>,
    },
    Output {
        commands: "repo --json",
        lines: "the repository commands use here, and how it was found",
        schema: of::<RepoJson<'static>>,
    },
    Output {
        commands: "validate --json",
        lines: "one line per diagnostic, then the summary",
        schema: of::<ValidateLine<'static>>,
    },
    Output {
        commands: "agents list --json, agents status --json",
        lines: "one line per actor, then (`status`) one per automation of serve's schedule",
        schema: of::<AgentsLine<'static>>,
    },
    Output {
        commands: "mcp list --json",
        lines: "one line per server",
        schema: of::<McpServerLine<'static>>,
    },
    Output {
        commands: "memory core --json, memory core show --json",
        lines: "one line per core block",
        schema: of::<CoreBlockJson<'static>>,
    },
    Output {
        commands: "memory core show LABEL --json",
        lines: "the block",
        schema: of::<CoreValueJson<'static>>,
    },
    Output {
        commands: "memory core set --json, memory core append --json, memory core replace --json",
        lines: "the block after the edit",
        schema: of::<CoreEditJson<'static>>,
    },
    Output {
        commands: "memory log --json",
        lines: "one line per record of the daily log, oldest first",
        schema: of::<LogRecordJson<'static>>,
    },
    Output {
        commands: "memory search --json",
        lines: "one line per record found, closest first",
        schema: of::<HitJson<'static>>,
    },
    Output {
        commands: "memory add --json",
        lines: "the records added",
        schema: of::<MemoryAddJson<'static>>,
    },
    Output {
        commands: "memory status --json",
        lines: "the agent's memory tiers",
        schema: of::<MemoryStatusJson<'static>>,
    },
    Output {
        commands: "memory reindex --json",
        lines: "the reindex",
        schema: of::<ReindexJson<'static>>,
    },
    Output {
        commands: "memory consolidate --json",
        lines: "one line per agent consolidated",
        schema: of::<ConsolidateJson<'static>>,
    },
    Output {
        commands: "automations list --json",
        lines: "one line per automation",
        schema: of::<crate::automations::StatusJson<'static>>,
    },
    Output {
        commands: "automations runs --json, automations tick --json, automations run --json",
        lines: "one line per run record",
        schema: of::<crate::automations::RunJson<'static>>,
    },
    Output {
        commands: "export -o FILE --json",
        lines: "one line: what the export wrote",
        schema: of::<crate::json::ExportSummaryJson<'static>>,
    },
    Output {
        commands: "models list --json",
        lines: "one line per known model",
        schema: of::<crate::json::ModelJson<'static>>,
    },
    Output {
        commands: "models fetch --json",
        lines: "one line per model fetched",
        schema: of::<crate::json::FetchJson<'static>>,
    },
];

const HEAD: &str = "\
<!-- Generated by `axocoatl util generate --out .` from the types in cmd/json.rs (and \
src/turn.rs for a turn's events); do not edit (tests/cli/docs_sync.rs fails when this \
file and the types differ). -->

# `--json` reference

Every `--json` output is one JSON object per line (JSON Lines), so `jq` and scripts read it
line by line; `export --format json` is one pretty-printed document. Field names never
change meaning; new fields may be added, so ignore the ones you do not know. Times are
RFC 3339 UTC strings unless noted; `null` means absent. A field marked *optional* is left
out when it does not apply; every other field is always there.

";

/// The whole of docs/json.md.
pub fn reference() -> String {
    let mut settings = SchemaSettings::draft2020_12().for_serialize();
    settings.meta_schema = None;
    let mut g = settings.into_generator();
    let roots: Vec<Value> = OUTPUTS.iter().map(|o| (o.schema)(&mut g)).collect();
    let defs = g.take_definitions(true);
    let r = Renderer { defs: &defs };

    let mut out = String::from(HEAD);
    out.push_str("| command | prints |\n|---|---|\n");
    for o in OUTPUTS {
        let _ = writeln!(
            out,
            "| [{}](#{}) | {} |",
            code_list(o.commands),
            anchor(o.commands),
            o.lines
        );
    }
    // Objects that fields refer to: every definition reached from a field, in name order.
    let mut shared = BTreeSet::new();
    for (o, root) in OUTPUTS.iter().zip(&roots) {
        let _ = write!(out, "\n## {}\n\n", code_list(o.commands));
        let schema = r.resolve(root);
        let _ = write!(out, "Prints {}.\n\n", o.lines);
        r.shapes(schema, &mut out, &mut shared);
    }
    let mut done = BTreeSet::new();
    let mut pending: Vec<String> = shared.iter().cloned().collect();
    let mut sections = Vec::new();
    while let Some(name) = pending.pop() {
        if !done.insert(name.clone()) {
            continue;
        }
        let Some(schema) = defs.get(&name) else {
            continue;
        };
        let mut text = String::new();
        let mut more = BTreeSet::new();
        if let Some(d) = description(schema) {
            let _ = write!(text, "{d}\n\n");
        }
        r.shapes(schema, &mut text, &mut more);
        pending.extend(more.into_iter().filter(|m| !done.contains(m)));
        sections.push((name, text));
    }
    sections.sort();
    if !sections.is_empty() {
        out.push_str("\n## Objects\n\nObjects that the fields above refer to.\n");
        for (name, text) in sections {
            let _ = write!(out, "\n### {name}\n\n{text}");
        }
    }
    out
}

struct Renderer<'a> {
    defs: &'a Map<String, Value>,
}

impl Renderer<'_> {
    /// `schema`, or the definition it refers to.
    fn resolve<'v>(&'v self, schema: &'v Value) -> &'v Value {
        match ref_name(schema).and_then(|n| self.defs.get(n)) {
            Some(d) => d,
            None => schema,
        }
    }

    /// The tables of `schema`: one for an object, one per alternative of an enum.
    fn shapes(&self, schema: &Value, out: &mut String, shared: &mut BTreeSet<String>) {
        let alternatives = schema
            .get("oneOf")
            .or_else(|| schema.get("anyOf"))
            .and_then(Value::as_array);
        if schema.get("properties").is_some() || schema.get("allOf").is_some() {
            self.table(schema, out, shared);
            if let Some(alts) = alternatives {
                out.push_str("\nwith the fields of one of:\n");
                for alt in alts {
                    self.alternative(alt, out, shared);
                }
            }
            return;
        }
        match alternatives {
            Some(alts) => {
                for alt in alts {
                    let inner = self.resolve(alt);
                    // An alternative that is itself a choice (a line that is one of the
                    // turn's events): its alternatives, in place.
                    if inner.get("oneOf").is_some() && inner.get("properties").is_none() {
                        self.shapes(inner, out, shared);
                    } else {
                        self.alternative(alt, out, shared);
                    }
                }
            }
            None => {
                let _ = writeln!(out, "{}", self.type_of(schema, shared));
            }
        }
    }

    fn alternative(&self, alt: &Value, out: &mut String, shared: &mut BTreeSet<String>) {
        let props = self.properties(alt);
        let tag = props
            .iter()
            .find(|(name, s)| name == "type" && s.get("const").is_some())
            .and_then(|(_, s)| s.get("const"))
            .and_then(Value::as_str);
        out.push('\n');
        match tag {
            Some(t) => {
                let _ = writeln!(out, "**`\"type\": \"{t}\"`**");
            }
            None if props.is_empty() => {
                let _ = writeln!(out, "- {}", self.type_of(alt, shared));
                return;
            }
            None => {
                let names: Vec<String> = props
                    .iter()
                    .filter(|(_, s)| s.get("const").is_none())
                    .take(1)
                    .map(|(n, _)| format!("`{n}`"))
                    .collect();
                let _ = writeln!(out, "**with {}**", names.join(", "));
            }
        }
        if let Some(d) = description(alt).or_else(|| description(self.resolve(alt))) {
            let _ = writeln!(out, "\n{d}");
        }
        out.push('\n');
        self.table(alt, out, shared);
    }

    /// Every property of an object schema, those of the definition it refers to and of its
    /// `allOf` parts included, in order.
    fn properties(&self, schema: &Value) -> Vec<(String, Value)> {
        let mut props = Vec::new();
        if let Some(def) = ref_name(schema).and_then(|n| self.defs.get(n)) {
            props.extend(self.properties(def));
        }
        if let Some(p) = schema.get("properties").and_then(Value::as_object) {
            props.extend(p.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            props.extend(self.properties(self.resolve(part)));
        }
        props
    }

    fn required(&self, schema: &Value) -> BTreeSet<String> {
        let mut req: BTreeSet<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        if let Some(def) = ref_name(schema).and_then(|n| self.defs.get(n)) {
            req.extend(self.required(def));
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            req.extend(self.required(self.resolve(part)));
        }
        req
    }

    fn table(&self, schema: &Value, out: &mut String, shared: &mut BTreeSet<String>) {
        let props = self.properties(schema);
        if props.is_empty() {
            return;
        }
        let required = self.required(schema);
        out.push_str("| field | type | meaning |\n|---|---|---|\n");
        for (name, field) in &props {
            let optional = if required.contains(name) {
                ""
            } else {
                " (optional)"
            };
            let meaning = description(field)
                .or_else(|| description(self.resolve(field)).filter(|_| ref_name(field).is_none()))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| `{name}`{optional} | {} | {} |",
                cell(&self.type_of(field, shared)),
                cell(&meaning)
            );
        }
    }

    /// A field's type in words: `string`, `integer or null`, `array of [PinJson](#pinjson)`.
    fn type_of(&self, s: &Value, shared: &mut BTreeSet<String>) -> String {
        if let Some(name) = ref_name(s) {
            shared.insert(name.to_owned());
            return format!("[{name}](#{})", name.to_lowercase());
        }
        if let Some(c) = s.get("const") {
            return format!("`{c}`");
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            let values: Vec<String> = e.iter().map(|v| format!("`{v}`")).collect();
            return format!("one of {}", values.join(", "));
        }
        if let Some(alts) = s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Value::as_array)
        {
            let parts: Vec<String> = alts.iter().map(|a| self.type_of(a, shared)).collect();
            return parts.join(" or ");
        }
        let kinds: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return "any JSON value".into(),
        };
        let words: Vec<String> = kinds
            .iter()
            .map(|k| match *k {
                "array" => match s.get("items") {
                    Some(items) => format!("array of {}", self.type_of(items, shared)),
                    None => "array".into(),
                },
                "object" => "object".into(),
                other => other.into(),
            })
            .collect();
        words.join(" or ")
    }
}

fn ref_name(s: &Value) -> Option<&str> {
    s.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

fn description(s: &Value) -> Option<String> {
    let d = s.get("description")?.as_str()?;
    Some(d.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `send --json, retry --json` → `` `send --json`, `retry --json` ``.
fn code_list(commands: &str) -> String {
    commands
        .split(", ")
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The anchor a Markdown renderer gives the heading [`code_list`] makes of `commands`
/// (GitHub's rule: lowercase, spaces to `-`, punctuation but `-` and `_` dropped).
fn anchor(commands: &str) -> String {
    code_list(commands)
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
