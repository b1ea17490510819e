//! What a SCHEMA argument names: inline JSON Schema, a stored schema's id, a file of JSON
//! Schema, or the concise form, tried in that order.

use std::io::Read;
use std::path::{Path, PathBuf};

use axocoatl_store::objects::Objects;
use serde_json::Value;

use super::{concise, Schema, SchemaError};

/// The largest schema file read.
pub const SCHEMA_FILE_LIMIT: u64 = 1 << 20;

/// How many hex digits an id given as SCHEMA may have: a prefix of 8 or more, up to the
/// whole hash.
pub const ID_HEX: std::ops::RangeInclusive<usize> = 8..=64;

/// Why a SCHEMA could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Invalid(#[from] SchemaError),
    #[error("no stored schema has the id {id}")]
    NotFound { id: String },
    #[error("{id} is the start of several stored schemas' ids: {}", candidates.join(", "))]
    Ambiguous { id: String, candidates: Vec<String> },
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("store: {0}")]
    Store(#[from] axocoatl_store::Error),
}

/// The schema `text` names, files read relative to `base`.
pub fn resolve(text: &str, base: &Path, objects: &Objects) -> Result<Schema, ResolveError> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        let value: Value = serde_json::from_str(trimmed).map_err(|e| {
            SchemaError::new(
                format!("the inline schema is not JSON: {e}"),
                "give JSON Schema (`{\"type\": \"object\", …}`), a file, or the concise form ('name, age int')",
            )
        })?;
        return Ok(Schema::new(value)?);
    }
    let path = base.join(trimmed);
    let is_id = ID_HEX.contains(&trimmed.len())
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if is_id && !path.is_file() {
        return stored(trimmed, objects);
    }
    if path.is_file() {
        let value = read_file(&path)?;
        return Schema::new(value)
            .map_err(|e| ResolveError::Invalid(e.within(&path.display().to_string())));
    }
    // Text that reads as a path is a missing file, not a concise form.
    if looks_like_path(trimmed) {
        return Err(ResolveError::Io {
            path,
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
    }
    Ok(Schema::new(concise::parse(trimmed)?)?)
}

/// The schema of an agent's `output_schema:`: the text forms as [`resolve`] takes them, or
/// JSON Schema written out in YAML.
pub fn resolve_value(
    value: &Value,
    base: &Path,
    objects: &Objects,
) -> Result<Schema, ResolveError> {
    match value {
        Value::String(text) => resolve(text, base, objects),
        other => Ok(Schema::new(other.clone())?),
    }
}

fn looks_like_path(text: &str) -> bool {
    text.contains('/') || text.ends_with(".json")
}

/// The JSON of a schema file, read up to [`SCHEMA_FILE_LIMIT`].
pub fn read_file(path: &Path) -> Result<Value, ResolveError> {
    let io = |source| ResolveError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(SCHEMA_FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > SCHEMA_FILE_LIMIT {
        return Err(SchemaError::new(
            format!(
                "{} is larger than {} KiB",
                path.display(),
                SCHEMA_FILE_LIMIT >> 10
            ),
            "a schema file holds one JSON Schema",
        )
        .into());
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        SchemaError::new(
            format!("{} is not JSON: {e}", path.display()),
            "a schema file holds one JSON Schema (the concise form is given on the command line)",
        )
        .into()
    })
}

/// The stored schema whose id starts with `id`.
fn stored(id: &str, objects: &Objects) -> Result<Schema, ResolveError> {
    let mut found = Vec::new();
    for hash in objects.with_prefix(id)? {
        // Other objects (attachments) share the hash space: only a schema counts.
        let Ok(bytes) = objects.get(&hash) else {
            continue;
        };
        let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if let Ok(schema) = Schema::new(value) {
            if schema.id == hash {
                found.push(schema);
            }
        }
    }
    match found.len() {
        0 => Err(ResolveError::NotFound { id: id.to_owned() }),
        1 => Ok(found.remove(0)),
        _ => Err(ResolveError::Ambiguous {
            id: id.to_owned(),
            candidates: found.into_iter().map(|s| s.id).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_form_of_a_schema_argument() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(&dir.path().join("objects"));
        let inline = resolve(r#"{"type": "array"}"#, dir.path(), &objects).expect("inline");
        assert_eq!(inline.value, json!({"type": "array"}));
        std::fs::write(dir.path().join("s.json"), r#"{"type": "string"}"#).expect("write");
        let file = resolve("s.json", dir.path(), &objects).expect("file");
        assert_eq!(file.value, json!({"type": "string"}));
        let short = resolve("name, age int", dir.path(), &objects).expect("concise");
        assert_eq!(short.value["required"], json!(["name", "age"]));
        objects.put(&short.bytes()).expect("store");
        let again = resolve(&short.id[..10], dir.path(), &objects).expect("by id");
        assert_eq!(again, short);
        assert!(matches!(
            resolve("0123456789ab", dir.path(), &objects),
            Err(ResolveError::NotFound { .. })
        ));
        assert!(matches!(
            resolve("missing.json", dir.path(), &objects),
            Err(ResolveError::Io { .. })
        ));
        let e = resolve("{not json", dir.path(), &objects).expect_err("bad inline");
        assert!(e.to_string().contains("not JSON"), "{e}");
        std::fs::write(dir.path().join("bad.json"), r#"{"format": "date"}"#).expect("write");
        let e = resolve("bad.json", dir.path(), &objects).expect_err("refused");
        assert!(e.to_string().contains("`format` at the top level"), "{e}");
        assert!(e.to_string().contains("bad.json"), "{e}");
    }

    #[test]
    fn a_huge_file_is_refused_after_its_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.json");
        let mut text = String::from("[");
        while text.len() as u64 <= SCHEMA_FILE_LIMIT {
            text.push_str("1,");
        }
        text.push_str("1]");
        std::fs::write(&path, text).expect("write");
        let e = read_file(&path).expect_err("too big");
        assert!(e.to_string().contains("larger than 1024 KiB"), "{e}");
    }
}
