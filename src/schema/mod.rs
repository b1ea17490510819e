//! Structured output: the JSON Schema a turn's reply must match (`send --schema`, an agent's
//! `output_schema:`).
//!
//! A schema is given as a file, as inline JSON Schema, as the concise form (`'name, age int,
//! tags [str]'`, see [`concise`]) or as the id of one stored before. Whatever its form, it
//! becomes a JSON Schema of the supported subset ([`check`]: every other keyword is refused,
//! named with where it is), stored once as a content-addressed object whose hash is its id.
//! Every reply is validated against it with the `jsonschema` crate ([`validate`]); the local
//! model is also constrained while it decodes (`provider::local`), Ollama gets it as
//! `format`, and OpenAI-compatible servers get it in strict mode ([`strict`]).
//!
//! This module depends on nothing else of the runtime: the configuration, the providers and
//! the engine all use it.

pub mod concise;
mod keywords;
mod resolve;
pub mod strict;
mod validate;

#[cfg(feature = "local")]
pub(crate) use keywords::resolve_ref;
pub use keywords::{check, ANNOTATIONS, SUPPORTED};
pub use resolve::{read_file, resolve, resolve_value, ResolveError, ID_HEX, SCHEMA_FILE_LIMIT};
pub use validate::{parse_reply, Validator, Violation, MAX_VIOLATIONS};

/// A JSON Schema of the supported subset, checked, with its id.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Schema {
    /// The object id: the BLAKE3 hash of [`Schema::bytes`].
    pub id: String,
    pub value: serde_json::Value,
}

impl Schema {
    /// `value` checked ([`check`]) and named by its hash.
    pub fn new(value: serde_json::Value) -> Result<Schema, SchemaError> {
        let value = check(value)?;
        Validator::new(&value)?;
        let id = axocoatl_store::objects::hash(&Schema::bytes_of(&value));
        Ok(Schema { id, value })
    }

    /// The bytes stored as its object: the JSON Schema, pretty-printed.
    pub fn bytes(&self) -> Vec<u8> {
        Schema::bytes_of(&self.value)
    }

    fn bytes_of(value: &serde_json::Value) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// The short form of its id that listings show (any unique prefix of 8 or more works).
    pub fn short_id(id: &str) -> &str {
        id.get(..12).unwrap_or(id)
    }
}

/// A schema that cannot be used, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaError {
    pub message: String,
    pub hint: String,
}

impl SchemaError {
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> SchemaError {
        SchemaError {
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// The same error with `what` (the schema's file, `--schema`, `output_schema`) in front.
    pub fn within(self, what: &str) -> SchemaError {
        SchemaError {
            message: format!("{what}: {}", self.message),
            hint: self.hint,
        }
    }
}

/// What the hint of a refused keyword lists.
pub fn supported_list() -> String {
    SUPPORTED.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_is_named_by_the_hash_of_its_bytes() {
        let a = Schema::new(json!({"type": "object", "properties": {"x": {"type": "string"}}}))
            .expect("valid");
        let b = Schema::new(a.value.clone()).expect("valid");
        assert_eq!(a.id, b.id);
        assert_eq!(a.id, axocoatl_store::objects::hash(&a.bytes()));
        let c = Schema::new(json!({"type": "string"})).expect("valid");
        assert_ne!(a.id, c.id);
        assert_eq!(Schema::short_id(&a.id).len(), 12);
    }
}
