//! JSON Schemas of tool arguments, generated from their Rust types.
//!
//! schemars writes optional fields as `"type": ["integer", "null"]` and adds `$schema`,
//! `title` and integer `format`s. Models and servers (llama.cpp grammars, OpenAI function
//! schemas) do best with the plain subset, so those are simplified away: an optional field
//! is simply absent from `required`.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

use super::Context;

/// The schema of `A`, whatever the agent.
pub fn of<A: JsonSchema>(_cx: &Context<'_>) -> Value {
    generate::<A>()
}

pub fn generate<A: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<A>().to_value();
    simplify(&mut value);
    // The type's own doc comment: the tool's description says it to the model.
    if let Some(map) = value.as_object_mut() {
        map.remove("description");
    }
    value
}

fn simplify(v: &mut Value) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    map.remove("$schema");
    map.remove("title");
    map.remove("format");
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if kept.len() == 1 {
            map.insert("type".into(), kept[0].clone());
        }
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for p in props.values_mut() {
            simplify(p);
        }
    }
    if let Some(items) = map.get_mut("items") {
        simplify(items);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Arguments of a test tool.
    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// The path.
        path: String,
        /// The first line.
        offset: Option<u64>,
    }

    #[test]
    fn optional_fields_are_plain_and_not_required() {
        let v = generate::<Args>();
        assert_eq!(v["type"], "object");
        assert_eq!(v["required"], json!(["path"]));
        assert_eq!(
            v["properties"]["offset"],
            json!({"type": "integer", "description": "The first line.", "minimum": 0})
        );
        assert_eq!(
            v["properties"]["path"],
            json!({"type": "string", "description": "The path."})
        );
        assert!(v.get("$schema").is_none() && v.get("title").is_none());
    }
}
