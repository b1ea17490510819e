//! The schema as OpenAI's strict structured output takes it (`response_format: {type:
//! json_schema, json_schema: {strict: true, …}}`).
//!
//! Strict mode has rules of its own: every object lists all its properties as required and
//! allows no others, string lengths are not expressed, and the top level is an object. The
//! schema sent follows them; what it can no longer say (a property made required, a length)
//! is still checked, as every reply is, against the schema as given. A top level that is not
//! an object is sent wrapped as the property [`WRAP_KEY`] of one, and the reply unwrapped.

use serde_json::{json, Map, Value};

/// The property a wrapped top level is sent as.
pub const WRAP_KEY: &str = "value";

/// Keywords strict mode refuses: dropped from the schema sent (the reply is still checked
/// against them).
const DROPPED: &[&str] = &["minLength", "maxLength", "default", "examples", "$schema"];

/// The schema sent to a strict server.
#[derive(Clone, Debug, PartialEq)]
pub struct Strict {
    pub schema: Value,
    /// The reply is `{"value": …}`: take the value out.
    pub wrapped: bool,
}

/// `schema` under strict mode's rules.
pub fn openai(schema: &Value) -> Strict {
    let mut sent = schema.clone();
    let wrapped = !is_plain_object(&sent);
    if wrapped {
        let mut inner = sent;
        let mut root = Map::new();
        if let Value::Object(map) = &mut inner {
            for key in ["$defs", "definitions"] {
                if let Some(defs) = map.remove(key) {
                    root.insert(key.into(), defs);
                }
            }
        }
        rebase_refs(&mut inner);
        for defs in root.values_mut() {
            rebase_refs(defs);
        }
        root.insert("type".into(), json!("object"));
        root.insert("properties".into(), json!({ WRAP_KEY: inner }));
        sent = Value::Object(root);
    }
    tighten(&mut sent);
    Strict {
        schema: sent,
        wrapped,
    }
}

/// The reply's value, out of its wrapping when it was wrapped (else as it is).
pub fn unwrap(strict: &Strict, reply: Value) -> Value {
    match reply {
        Value::Object(mut map) if strict.wrapped && map.len() == 1 => {
            map.remove(WRAP_KEY).unwrap_or(Value::Object(map))
        }
        other => other,
    }
}

fn is_plain_object(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("object")) && schema.get("anyOf").is_none()
}

/// References to the old top level point into the wrapping property (those to `$defs`
/// follow the definitions to the new top level).
fn rebase_refs(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                let keeps = ["#/$defs/", "#/definitions/"]
                    .iter()
                    .any(|p| target.starts_with(p));
                if !keeps {
                    let rest = target.trim_start_matches('#').to_owned();
                    *target = format!("#/properties/{WRAP_KEY}{rest}");
                }
            }
            for (key, child) in map.iter_mut() {
                if key != "enum" && key != "const" {
                    rebase_refs(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rebase_refs),
        _ => {}
    }
}

/// Every object: all properties required, no others; keywords strict mode refuses, gone.
fn tighten(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    for key in DROPPED {
        map.remove(*key);
    }
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    };
    if is_object {
        let names: Vec<Value> = map
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().map(|k| json!(k)).collect())
            .unwrap_or_default();
        map.entry("properties").or_insert_with(|| json!({}));
        map.insert("required".into(), Value::Array(names));
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(tighten);
        }
    }
    if let Some(items) = map.get_mut("items") {
        tighten(items);
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.iter_mut().for_each(tighten);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_require_every_property_and_allow_no_other() {
        let s = openai(&json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2},
                "pets": {"type": "array", "items": {"type": "object", "properties": {"kind": {"type": "string"}}}}
            },
            "required": ["name"],
            "additionalProperties": {"type": "string"}
        }));
        assert!(!s.wrapped);
        assert_eq!(
            s.schema,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "pets": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"kind": {"type": "string"}},
                        "required": ["kind"],
                        "additionalProperties": false
                    }}
                },
                "required": ["name", "pets"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_top_level_that_is_not_an_object_is_wrapped_with_its_references() {
        let s = openai(&json!({
            "type": "array",
            "items": {"anyOf": [{"$ref": "#/$defs/leaf"}, {"$ref": "#"}]},
            "$defs": {"leaf": {"type": "integer"}}
        }));
        assert!(s.wrapped);
        assert_eq!(
            s.schema,
            json!({
                "$defs": {"leaf": {"type": "integer"}},
                "type": "object",
                "properties": {"value": {
                    "type": "array",
                    "items": {"anyOf": [{"$ref": "#/$defs/leaf"}, {"$ref": "#/properties/value"}]}
                }},
                "required": ["value"],
                "additionalProperties": false
            })
        );
        assert_eq!(unwrap(&s, json!({"value": [1]})), json!([1]));
        let plain = openai(&json!({"type": "object"}));
        assert_eq!(unwrap(&plain, json!({"value": 1})), json!({"value": 1}));
    }
}
