//! Every reply is checked against the whole schema with the `jsonschema` crate (a maintained
//! validator that passes the JSON Schema test suite), whatever produced it: constrained
//! decoding, a server's structured output, or a model that was only asked.

use serde_json::Value;

use super::SchemaError;

/// The most violations one reply lists (a reply of a hundred wrong items says the first).
pub const MAX_VIOLATIONS: usize = 20;

/// Where a reply breaks the schema, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The JSON pointer of the value at fault in the reply (empty: the reply itself).
    pub pointer: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "(the value)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.message)
    }
}

/// A compiled schema.
pub struct Validator(jsonschema::Validator);

impl Validator {
    pub fn new(schema: &Value) -> Result<Validator, SchemaError> {
        jsonschema::validator_for(schema)
            .map(Validator)
            .map_err(|e| {
                SchemaError::new(
                    format!("not a valid JSON Schema: {e}"),
                    "see the supported JSON Schema in docs/schema.md",
                )
            })
    }

    /// The violations of `value`, at most [`MAX_VIOLATIONS`], in document order.
    pub fn violations(&self, value: &Value) -> Vec<Violation> {
        let mut found: Vec<Violation> = self
            .0
            .iter_errors(value)
            .take(MAX_VIOLATIONS)
            .map(|e| Violation {
                pointer: e.instance_path().to_string(),
                message: e.to_string(),
            })
            .collect();
        found.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        found
    }
}

/// The JSON value of a reply: the whole text, or the inside of one fenced `json` block when
/// a model that was only asked wrapped it in one. A reply that is not JSON is one
/// violation at the top.
pub fn parse_reply(text: &str) -> Result<Value, Violation> {
    let trimmed = text.trim();
    let inner = fenced(trimmed).unwrap_or(trimmed);
    serde_json::from_str(inner).map_err(|e| Violation {
        pointer: String::new(),
        message: if inner.is_empty() {
            "the reply is empty, not a JSON value".into()
        } else {
            format!("the reply is not JSON: {e}")
        },
    })
}

fn fenced(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let body = rest.split_once('\n')?.1;
    body.trim_end().strip_suffix("```").map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn violations_name_the_pointer_of_each_value_at_fault() {
        let v = Validator::new(&json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["name"],
            "additionalProperties": false
        }))
        .expect("valid");
        let found = v.violations(&json!({"age": -1, "tags": ["a", 2], "x": 1}));
        let pointers: Vec<&str> = found.iter().map(|v| v.pointer.as_str()).collect();
        assert_eq!(pointers, ["", "", "/age", "/tags/1"], "{found:?}");
        assert!(found
            .iter()
            .any(|v| v.message.contains("\"name\" is a required property")));
        assert!(v.violations(&json!({"name": "x", "age": 3})).is_empty());
    }

    #[test]
    fn replies_parse_whole_or_from_one_fence() {
        assert_eq!(parse_reply(" {\"a\": 1}\n"), Ok(json!({"a": 1})));
        assert_eq!(parse_reply("```json\n[1, 2]\n```"), Ok(json!([1, 2])));
        let e = parse_reply("Sure! {\"a\": 1}").expect_err("prose");
        assert!(e.message.starts_with("the reply is not JSON"), "{e}");
        assert_eq!(e.to_string().split(':').next(), Some("(the value)"));
        assert!(parse_reply("").is_err());
    }
}
