//! The supported subset of JSON Schema: what [`check`] lets through, and the one rewrite it
//! makes (`nullable: true` becomes a `"null"` in `type`).
//!
//! Every keyword that constrains a value and is not in [`SUPPORTED`] is refused, named with
//! the JSON pointer of the schema that holds it: a reply could otherwise pass validation on
//! one provider and not another, or the local model could be steered into a value the
//! schema refuses. Annotations ([`ANNOTATIONS`]) constrain nothing and are kept as they are.

use serde_json::{Map, Value};

use super::SchemaError;

/// The keywords that constrain a value, all supported by every provider and by the local
/// model's constrained decoding.
pub const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "nullable",
];

/// Keywords that describe a value without constraining it.
pub const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "$schema",
];

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// The dialects a `$schema` may name: their meaning of the supported keywords is the same.
const DIALECTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
];

/// How deeply schemas may nest in one another.
const MAX_DEPTH: usize = 64;

/// `schema` if it uses only the supported subset, with `nullable` folded into `type`;
/// else why not, the keyword named with where it is.
pub fn check(mut schema: Value) -> Result<Value, SchemaError> {
    let root = schema.clone();
    walk(&mut schema, "", 0)?;
    refs(&schema, &root, "")?;
    Ok(schema)
}

/// Where a schema is, for messages: `at /properties/name`, or `at the top level`.
pub(super) fn place(pointer: &str) -> String {
    if pointer.is_empty() {
        "at the top level".into()
    } else {
        format!("at {pointer}")
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn bad(pointer: &str, what: String) -> SchemaError {
    SchemaError::new(
        format!("{what} ({})", place(pointer)),
        "see the supported JSON Schema in docs/schema.md",
    )
}

fn walk(schema: &mut Value, pointer: &str, depth: usize) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(bad(
            pointer,
            format!("the schema nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        other => {
            return Err(bad(
                pointer,
                format!(
                    "a schema must be an object or true/false, not {}",
                    kind_of(other)
                ),
            ))
        }
    };
    for key in map.keys() {
        if !SUPPORTED.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            return Err(SchemaError::new(
                format!("`{key}` {} is not supported", place(pointer)),
                format!(
                    "the supported keywords are {}; annotations ({}) are kept and constrain nothing",
                    super::supported_list(),
                    ANNOTATIONS.join(", ")
                ),
            ));
        }
    }
    fold_nullable(map, pointer)?;
    check_values(map, pointer)?;
    check_bounds(map, pointer)?;
    for key in ["properties", "$defs", "definitions"] {
        if let Some(children) = map.get_mut(key) {
            let Value::Object(children) = children else {
                return Err(bad(
                    pointer,
                    format!("`{key}` must be an object of schemas"),
                ));
            };
            for (name, child) in children.iter_mut() {
                walk(
                    child,
                    &format!("{pointer}/{key}/{}", escape(name)),
                    depth + 1,
                )?;
            }
        }
    }
    for key in ["additionalProperties", "items"] {
        if let Some(child) = map.get_mut(key) {
            if child.is_array() {
                return Err(bad(
                    pointer,
                    format!("`{key}` as a list (tuple validation) is not supported"),
                ));
            }
            walk(child, &format!("{pointer}/{key}"), depth + 1)?;
        }
    }
    if let Some(branches) = map.get_mut("anyOf") {
        let Value::Array(branches) = branches else {
            return Err(bad(pointer, "`anyOf` must be a list of schemas".into()));
        };
        if branches.is_empty() {
            return Err(bad(pointer, "`anyOf` must list at least one schema".into()));
        }
        for (i, branch) in branches.iter_mut().enumerate() {
            walk(branch, &format!("{pointer}/anyOf/{i}"), depth + 1)?;
        }
    }
    Ok(())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `nullable: true` (OpenAPI's spelling) as a `"null"` in `type`; `nullable` itself goes.
fn fold_nullable(map: &mut Map<String, Value>, pointer: &str) -> Result<(), SchemaError> {
    let Some(nullable) = map.remove("nullable") else {
        return Ok(());
    };
    let Value::Bool(nullable) = nullable else {
        return Err(bad(pointer, "`nullable` must be true or false".into()));
    };
    if !nullable {
        return Ok(());
    }
    match map.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            map.insert("type".into(), Value::Array(vec![t.into(), "null".into()]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push("null".into());
        }
        _ => {}
    }
    Ok(())
}

fn check_values(map: &Map<String, Value>, pointer: &str) -> Result<(), SchemaError> {
    for (key, value) in map {
        let ok = match key.as_str() {
            "type" => type_ok(value),
            "required" => value
                .as_array()
                .is_some_and(|names| names.iter().all(Value::is_string)),
            "enum" => value.as_array().is_some_and(|v| !v.is_empty()),
            "minimum" | "maximum" => value.as_f64().is_some_and(f64::is_finite),
            "minLength" | "maxLength" | "minItems" | "maxItems" => value.is_u64(),
            "$ref" => value.is_string(),
            "$schema" => value.as_str().is_some_and(|s| DIALECTS.contains(&s)),
            _ => true,
        };
        if !ok {
            let want = match key.as_str() {
                "type" => format!("one of {} or a list of them", TYPES.join(", ")),
                "required" => "a list of property names".into(),
                "enum" => "a list of at least one value".into(),
                "minimum" | "maximum" => "a number".into(),
                "$ref" => "a string".into(),
                "$schema" => format!("one of {}", DIALECTS.join(", ")),
                _ => "a whole number, 0 or more".into(),
            };
            return Err(bad(pointer, format!("`{key}` must be {want}")));
        }
    }
    Ok(())
}

fn type_ok(value: &Value) -> bool {
    let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match value {
        Value::String(_) => known(value),
        Value::Array(types) => {
            !types.is_empty()
                && types.iter().all(known)
                && types
                    .iter()
                    .enumerate()
                    .all(|(i, t)| !types[..i].contains(t))
        }
        _ => false,
    }
}

/// A lower bound above its upper bound matches nothing: refused here, by name.
fn check_bounds(map: &Map<String, Value>, pointer: &str) -> Result<(), SchemaError> {
    for (lo, hi) in [
        ("minimum", "maximum"),
        ("minLength", "maxLength"),
        ("minItems", "maxItems"),
    ] {
        let (Some(l), Some(h)) = (
            map.get(lo).and_then(Value::as_f64),
            map.get(hi).and_then(Value::as_f64),
        ) else {
            continue;
        };
        if l > h {
            return Err(bad(
                pointer,
                format!("`{lo}` ({l}) is more than `{hi}` ({h}): nothing matches"),
            ));
        }
    }
    Ok(())
}

/// Every `$ref` is local (`#`, `#/$defs/NAME`, any JSON pointer into the document) and
/// names a schema.
fn refs(schema: &Value, root: &Value, pointer: &str) -> Result<(), SchemaError> {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get("$ref") {
                resolve_ref(root, target).map_err(|why| {
                    SchemaError::new(
                        format!("`$ref` {target:?} {}: {why}", place(pointer)),
                        "only references inside the schema are supported, e.g. \"#/$defs/item\"",
                    )
                })?;
            }
            for (key, child) in map {
                if !ANNOTATIONS.contains(&key.as_str()) && key != "enum" && key != "const" {
                    refs(child, root, &format!("{pointer}/{}", escape(key)))?;
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                refs(item, root, &format!("{pointer}/{i}"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schema a local `$ref` names.
pub(crate) fn resolve_ref<'a>(root: &'a Value, target: &str) -> Result<&'a Value, &'static str> {
    let Some(pointer) = target.strip_prefix('#') else {
        return Err("it is not inside this schema");
    };
    if pointer.contains('%') {
        return Err("percent-encoded references are not supported");
    }
    match root.pointer(pointer) {
        Some(v @ (Value::Object(_) | Value::Bool(_))) => Ok(v),
        Some(_) => Err("it names a value that is not a schema"),
        None => Err("nothing is there"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(schema: Value) -> String {
        check(schema).expect_err("refused").message
    }

    #[test]
    fn the_supported_subset_passes_and_nullable_folds_into_type() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "person",
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 40, "description": "x"},
                "age": {"type": "integer", "minimum": 0, "maximum": 150, "nullable": true},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "minItems": 1},
                "kind": {"enum": ["a", "b"]},
                "v": {"const": 3},
                "any": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["name"],
            "additionalProperties": false,
            "$defs": {"tag": {"type": "string"}}
        });
        let checked = check(schema).expect("supported");
        assert_eq!(
            checked["properties"]["age"]["type"],
            json!(["integer", "null"])
        );
        assert!(checked["properties"]["age"].get("nullable").is_none());
    }

    #[test]
    fn every_other_keyword_is_refused_by_name_and_place() {
        let e = refused(json!({"type": "object", "properties": {"a": {"pattern": "x"}}}));
        assert_eq!(e, "`pattern` at /properties/a is not supported");
        let e = refused(json!({"oneOf": [true]}));
        assert_eq!(e, "`oneOf` at the top level is not supported");
        let e = refused(json!({"items": [{"type": "string"}]}));
        assert!(e.contains("tuple validation"), "{e}");
        let e = refused(json!({"type": "text"}));
        assert!(e.contains("`type` must be one of"), "{e}");
        let e = refused(json!({"minLength": 3, "maxLength": 2}));
        assert!(e.contains("nothing matches"), "{e}");
        let e = refused(json!({"$ref": "https://example.com/s.json"}));
        assert!(e.contains("not inside this schema"), "{e}");
        let e = refused(json!({"$ref": "#/$defs/missing"}));
        assert!(e.contains("nothing is there"), "{e}");
        let e = refused(json!({"properties": {"a/b": {"format": "date"}}}));
        assert!(e.contains("/properties/a~1b"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "array", "items": schema});
        }
        assert!(refused(schema).contains("nests deeper"));
    }
}
