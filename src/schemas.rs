//! `axocoatl schemas`: the JSON Schemas turns were asked to match, each stored once as an
//! object whose hash is its id (usable as `send --schema ID`).

use std::collections::HashMap;
use std::path::Path;

use axocoatl_store::ledger::record::Millis;
use axocoatl_store::ledger::Damaged;
use serde_json::Value;

use crate::error::{Result, RuntimeError};
use crate::fold::{begins_turn, TurnView};
use crate::schema::{self, Schema};
use crate::workspace::Workspace;

/// A schema and the turns that used it.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaEntry {
    pub schema: Schema,
    pub turns: u64,
    pub first_used: Millis,
    pub last_used: Millis,
    /// The newest turn that used it.
    pub last_turn: String,
    /// Its concise form, when it has one.
    pub concise: Option<String>,
}

/// Every stored schema a turn used, the most recently used first.
#[derive(Debug, Default)]
pub struct Listing {
    pub schemas: Vec<SchemaEntry>,
    /// Records that could not be read, and schemas whose object is missing or damaged.
    pub problems: Vec<Damaged>,
    pub missing: Vec<(String, String)>,
}

/// The schemas turns used, read from the ledger's begin records (only those of turns with a
/// schema are kept) and from their objects.
pub fn list(ws: &Workspace) -> Result<Listing> {
    let repo = ws.repo();
    // Only the begin records of turns with a schema are kept.
    let walked = repo.ledger().walk(&mut |view| {
        begins_turn(view.tag)
            && matches!(view.decode(), Ok(Some(r)) if TurnView::schema_of(&r).is_some())
    })?;
    let mut used: HashMap<String, (u64, Millis, Millis, String)> = HashMap::new();
    for entry in walked.entries {
        let Some(record) = entry.record else { continue };
        let Ok(t) = TurnView::start(record, entry.pos, entry.seq) else {
            continue;
        };
        let Some(s) = t.schema else { continue };
        let at = t.started_at;
        let e = used.entry(s.object).or_insert((0, at, at, t.turn.clone()));
        e.0 += 1;
        e.1 = e.1.min(at);
        if at >= e.2 {
            e.2 = at;
            e.3 = t.turn;
        }
    }
    let mut listing = Listing {
        problems: walked.damaged,
        ..Listing::default()
    };
    for (object, (turns, first_used, last_used, last_turn)) in used {
        match load(repo.objects(), &object) {
            Ok(schema) => listing.schemas.push(SchemaEntry {
                concise: schema::concise::render(&schema.value),
                schema,
                turns,
                first_used,
                last_used,
                last_turn,
            }),
            Err(why) => listing.missing.push((object, why)),
        }
    }
    listing.schemas.sort_by(|a, b| {
        b.last_used
            .cmp(&a.last_used)
            .then(a.schema.id.cmp(&b.schema.id))
    });
    listing.missing.sort();
    Ok(listing)
}

fn load(
    objects: &axocoatl_store::objects::Objects,
    object: &str,
) -> std::result::Result<Schema, String> {
    let bytes = objects.get(object).map_err(|e| e.to_string())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))?;
    Schema::new(value).map_err(|e| e.message)
}

/// The schema SCHEMA names (a stored id, a file relative to `dir`, inline JSON Schema or
/// the concise form), as `send --schema` would use it.
pub fn resolve(ws: &Workspace, text: &str, dir: &Path) -> Result<Schema> {
    schema::resolve(text, dir, ws.repo().objects()).map_err(RuntimeError::from)
}
