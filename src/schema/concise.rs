//! The concise form of a schema: `'name, age int, tags [str]'` for the JSON Schema of an
//! object whose properties are all required and which allows no other.
//!
//! ```text
//! fields  := field (SEP field)*        SEP: a comma, or a newline when the text has one
//! field   := NAME [TYPE] [: DESCRIPTION]
//! TYPE    := str | int | float | bool | [TYPE] | {fields} | word|word|…   then ? for "or null"
//! ```
//!
//! A field without a type is a string. `[TYPE]` is a list of TYPE, `{…}` an object of its
//! own fields (separated by commas), `a|b|c` one of those strings, and a `?` after a type
//! also allows `null`. A description runs to the end of its field: to the next comma, or to
//! the end of its line when the fields are on lines of their own (then it may hold commas).
//! Names are letters, digits, `_`, `-`, `.` and `$`, or a JSON string in double quotes.
//!
//! [`parse`] gives the JSON Schema and [`render`] gives the concise form back of a JSON Schema
//! that has one, so the two round-trip: `render(parse(t))` is `t` in canonical spelling.

use serde_json::{json, Map, Value};

use super::SchemaError;

/// The JSON Schema the concise form `text` stands for.
pub fn parse(text: &str) -> Result<Value, SchemaError> {
    let mut p = Parser {
        chars: text.char_indices().collect(),
        at: 0,
        text,
        depth: 0,
    };
    let lines = p.top_level_newline();
    let fields = p.fields(None, lines)?;
    if fields.is_empty() {
        return Err(SchemaError::new(
            "the concise schema names no field",
            "e.g. 'name, age int, tags [str]'",
        ));
    }
    Ok(object(fields))
}

/// The types the concise form names, as it spells them.
const TYPES: &[(&str, &str)] = &[
    ("str", "string"),
    ("string", "string"),
    ("int", "integer"),
    ("integer", "integer"),
    ("float", "number"),
    ("number", "number"),
    ("num", "number"),
    ("bool", "boolean"),
    ("boolean", "boolean"),
];

fn object(fields: Vec<(String, Value)>) -> Value {
    let required: Vec<Value> = fields.iter().map(|(n, _)| json!(n)).collect();
    let properties: Map<String, Value> = fields.into_iter().collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

struct Parser<'t> {
    chars: Vec<(usize, char)>,
    at: usize,
    text: &'t str,
    /// Lists and objects open around the position.
    depth: usize,
}

/// How deeply lists and objects may nest (as JSON Schema's own check allows).
const MAX_DEPTH: usize = 32;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).map(|&(_, c)| c)
    }

    fn error(&self, what: &str) -> SchemaError {
        let offset = self.chars.get(self.at).map_or(self.text.len(), |&(i, _)| i);
        let column = self.text[..offset].chars().count() + 1;
        let found = match self.peek() {
            Some(c) => format!("`{c}`"),
            None => "the end".into(),
        };
        SchemaError::new(
            format!("concise schema, column {column}: {what}, found {found}"),
            "e.g. 'name, age int, tags [str], address {street, city}, level low|high, note str?' (docs/schema.md)",
        )
    }

    /// Whether the top level separates fields by newlines: it has one outside brackets.
    fn top_level_newline(&self) -> bool {
        let mut depth = 0i32;
        let mut quoted = false;
        for &(_, c) in &self.chars {
            match c {
                '"' => quoted = !quoted,
                '[' | '{' if !quoted => depth += 1,
                ']' | '}' if !quoted => depth -= 1,
                '\n' if !quoted && depth == 0 => return true,
                _ => {}
            }
        }
        false
    }

    fn skip_blanks(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n') {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    /// Fields up to `close` (or the end), separated by commas or newlines; `lines`: a
    /// description runs to the end of its line (commas and all).
    fn fields(
        &mut self,
        close: Option<char>,
        lines: bool,
    ) -> Result<Vec<(String, Value)>, SchemaError> {
        let ends_field = |c: char| c == ',' || c == '\n' || Some(c) == close;
        let mut out: Vec<(String, Value)> = Vec::new();
        loop {
            // Blank entries (two separators in a row, a trailing one) are skipped.
            self.skip_blanks(true);
            match self.peek() {
                None if close.is_none() => return Ok(out),
                None => return Err(self.error(&format!("expected `{}`", close.unwrap_or('}')))),
                Some(c) if Some(c) == close => return Ok(out),
                Some(',') => {
                    self.at += 1;
                    continue;
                }
                _ => {}
            }
            let name = self.name()?;
            if out.iter().any(|(n, _)| *n == name) {
                return Err(self.error(&format!("field {name:?} is named twice")));
            }
            self.skip_blanks(false);
            let mut schema = match self.peek() {
                Some(c) if c != ':' && !ends_field(c) => self.kind()?,
                _ => json!({"type": "string"}),
            };
            self.skip_blanks(false);
            if self.peek() == Some(':') {
                self.at += 1;
                let text = self.description(lines, close);
                if !text.is_empty() {
                    if let Value::Object(map) = &mut schema {
                        map.insert("description".into(), json!(text));
                    }
                }
            }
            self.skip_blanks(false);
            match self.peek() {
                Some(c) if !ends_field(c) => {
                    return Err(self.error("expected a separator after the field"))
                }
                _ => {}
            }
            out.push((name, schema));
        }
    }

    fn name(&mut self) -> Result<String, SchemaError> {
        if self.peek() == Some('"') {
            let start = self.chars[self.at].0;
            let mut end = self.at + 1;
            let mut escaped = false;
            while let Some(&(_, c)) = self.chars.get(end) {
                end += 1;
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => break,
                    _ => escaped = false,
                }
            }
            let stop = self.chars.get(end).map_or(self.text.len(), |&(i, _)| i);
            let name: String = serde_json::from_str(&self.text[start..stop])
                .map_err(|_| self.error("expected a quoted name in JSON's spelling"))?;
            self.at = end;
            return Ok(name);
        }
        let word = self.word();
        if word.is_empty() {
            return Err(self.error("expected a field name"));
        }
        Ok(word)
    }

    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek() {
            if c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '$') {
                word.push(c);
                self.at += 1;
            } else {
                break;
            }
        }
        word
    }

    /// A type, with its `?`.
    fn kind(&mut self) -> Result<Value, SchemaError> {
        if !matches!(self.peek(), Some('[' | '{')) {
            return self.kind_inner();
        }
        if self.depth >= MAX_DEPTH {
            return Err(self.error(&format!("lists and objects nest deeper than {MAX_DEPTH}")));
        }
        self.depth += 1;
        let schema = self.kind_inner();
        self.depth -= 1;
        schema
    }

    fn kind_inner(&mut self) -> Result<Value, SchemaError> {
        let mut schema = match self.peek() {
            Some('[') => {
                self.at += 1;
                self.skip_blanks(true);
                if self.peek() == Some(']') {
                    return Err(self.error("expected the type of the list's items, e.g. [str]"));
                }
                let items = self.kind()?;
                self.skip_blanks(true);
                if self.peek() != Some(']') {
                    return Err(self.error("expected `]`"));
                }
                self.at += 1;
                json!({"type": "array", "items": items})
            }
            Some('{') => {
                self.at += 1;
                let fields = self.fields(Some('}'), false)?;
                self.at += 1;
                if fields.is_empty() {
                    return Err(self.error("an object needs at least one field"));
                }
                object(fields)
            }
            _ => self.named_or_enum()?,
        };
        if self.peek() == Some('?') {
            self.at += 1;
            nullable(&mut schema);
        }
        Ok(schema)
    }

    fn named_or_enum(&mut self) -> Result<Value, SchemaError> {
        let word = self.word();
        if word.is_empty() {
            return Err(
                self.error("expected a type (str, int, float, bool, [TYPE], {FIELDS}, a|b)")
            );
        }
        if self.peek() != Some('|') {
            return match TYPES.iter().find(|(name, _)| *name == word) {
                Some((_, t)) => Ok(json!({"type": t})),
                None => {
                    self.at -= word.chars().count();
                    Err(self.error(&format!(
                        "unknown type `{word}` (str, int, float, bool, [TYPE], {{FIELDS}}, or choices a|b)"
                    )))
                }
            };
        }
        let mut words = vec![word];
        while self.peek() == Some('|') {
            self.at += 1;
            let next = self.word();
            if next.is_empty() {
                return Err(self.error("expected a choice after `|`"));
            }
            words.push(next);
        }
        Ok(json!({"type": "string", "enum": words}))
    }

    /// The text of a description, up to the field's end (its line's, with `lines`), trimmed.
    fn description(&mut self, lines: bool, close: Option<char>) -> String {
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if c == '\n' || Some(c) == close || (!lines && c == ',') {
                break;
            }
            text.push(c);
            self.at += 1;
        }
        text.trim().to_owned()
    }
}

fn nullable(schema: &mut Value) {
    if let Some(t) = schema.get("type").cloned() {
        schema["type"] = json!([t, "null"]);
    }
    if let Some(Value::Array(choices)) = schema.get_mut("enum") {
        choices.push(Value::Null);
    }
}

/// The concise form of `schema`, when it has one: an object whose properties are all
/// required, no others allowed, each of a type the concise form can say.
pub fn render(schema: &Value) -> Option<String> {
    let fields = fields_of(schema, true)?;
    let lines = fields.iter().any(|(_, _, d)| d.is_some());
    let rendered: Vec<String> = fields
        .into_iter()
        .map(|(name, kind, desc)| match desc {
            Some(d) => format!("{name}{kind}: {d}"),
            None => format!("{name}{kind}"),
        })
        .collect();
    Some(rendered.join(if lines { "\n" } else { ", " }))
}

/// Each field: its name as written, its type (with a leading space; empty for a plain
/// string) and its description.
fn fields_of(schema: &Value, top: bool) -> Option<Vec<(String, String, Option<String>)>> {
    let map = schema.as_object()?;
    let allowed = ["type", "properties", "required", "additionalProperties"];
    if map.keys().any(|k| !allowed.contains(&k.as_str()))
        || map.get("type")? != "object"
        || map.get("additionalProperties")? != &Value::Bool(false)
    {
        return None;
    }
    let properties = map.get("properties")?.as_object()?;
    let required: Vec<&str> = map
        .get("required")?
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect::<Option<_>>()?;
    if properties.is_empty()
        || required.len() != properties.len()
        || !properties.keys().zip(&required).all(|(a, b)| a == b)
    {
        return None;
    }
    let mut out = Vec::new();
    for (name, prop) in properties {
        let mut prop = prop.as_object()?.clone();
        let desc = match prop.remove("description") {
            Some(Value::String(d)) if description_fits(&d, top) => Some(d),
            Some(_) => return None,
            None => None,
        };
        let kind = type_of(&Value::Object(prop))?;
        let kind = if kind == "str" {
            String::new()
        } else {
            format!(" {kind}")
        };
        out.push((name_of(name), kind, desc));
    }
    Some(out)
}

/// A description that reads back the same: not empty, no separator of its level inside.
fn description_fits(d: &str, top: bool) -> bool {
    let trimmed = d.trim();
    trimmed == d
        && !d.is_empty()
        && !d.contains(['\n', '{', '}', '[', ']', '"'])
        && (top || !d.contains(','))
}

fn name_of(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'));
    if plain {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

fn type_of(schema: &Value) -> Option<String> {
    let map = schema.as_object()?;
    let (base, null) = match map.get("type")? {
        Value::String(t) => (t.as_str(), false),
        Value::Array(ts) if ts.len() == 2 && ts[1] == "null" => (ts[0].as_str()?, true),
        _ => return None,
    };
    let q = if null { "?" } else { "" };
    let keys = |want: &[&str]| map.keys().all(|k| want.contains(&k.as_str()));
    let text = match base {
        "string" if map.contains_key("enum") => {
            if !keys(&["type", "enum"]) {
                return None;
            }
            let choices = map.get("enum")?.as_array()?;
            let words: Vec<&str> = choices
                .iter()
                .take(choices.len() - usize::from(null))
                .map(|c| c.as_str().filter(|w| is_word(w)))
                .collect::<Option<_>>()?;
            if words.len() < 2 || (null && choices.last() != Some(&Value::Null)) {
                return None;
            }
            words.join("|")
        }
        "array" if keys(&["type", "items"]) => format!("[{}]", type_of(map.get("items")?)?),
        "object" => {
            let fields = fields_of(&object_without_null(schema)?, false)?;
            let inner: Vec<String> = fields
                .into_iter()
                .map(|(n, k, d)| match d {
                    Some(d) => format!("{n}{k}: {d}"),
                    None => format!("{n}{k}"),
                })
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        _ if keys(&["type"]) => TYPES
            .iter()
            .find(|(_, t)| *t == base)
            .map(|(short, _)| (*short).to_owned())?,
        _ => return None,
    };
    Some(format!("{text}{q}"))
}

/// A nullable object's schema with `type: object`, for rendering its fields.
fn object_without_null(schema: &Value) -> Option<Value> {
    let mut s = schema.clone();
    s["type"] = json!("object");
    Some(s)
}

fn is_word(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_the_documentation() {
        let schema = parse("name, age int, tags [str]").expect("parses");
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["name", "age", "tags"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn every_form_round_trips_to_json_schema_and_back() {
        for text in [
            "name",
            "name, age int, tags [str]",
            "title, score float?, done bool",
            "level low|mid|high, mood happy|sad?",
            "address {street, city, zip int?}, points [{x float, y float}]",
            "matrix [[int]], maybe [str]?",
            "\"first name\", \"a,b\" int",
            "name: the full name, as written\nage int: in years",
            "owner {name: who owns it, since int}",
        ] {
            let schema = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(super::super::check(schema.clone()).is_ok(), "{text}");
            let back = render(&schema).unwrap_or_else(|| panic!("no concise form: {text}"));
            assert_eq!(back, text, "render");
            assert_eq!(parse(&back).expect("again"), schema, "{text}");
        }
    }

    #[test]
    fn spellings_are_made_canonical() {
        let schema = parse(" name string ,age integer,, ok boolean, x number ,").expect("ok");
        assert_eq!(
            render(&schema).as_deref(),
            Some("name, age int, ok bool, x float")
        );
        let schema = parse("a\n\nb int: one, two\n").expect("lines");
        assert_eq!(render(&schema).as_deref(), Some("a\nb int: one, two"));
    }

    #[test]
    fn mistakes_name_their_column() {
        for (text, want) in [
            ("name, age integr", "column 11: unknown type `integr`"),
            ("name, , age [", "column 14: expected a type"),
            ("a {b", "expected `}`"),
            ("a, a", "field \"a\" is named twice"),
            ("tags []", "expected the type of the list's items"),
            ("x low|", "expected a choice after `|`"),
            ("", "names no field"),
            (
                format!("a {}", "[".repeat(100_000)).as_str(),
                "nest deeper than 32",
            ),
            (
                format!("a {}", "{b ".repeat(100_000)).as_str(),
                "nest deeper than 32",
            ),
            ("a int int", "expected a separator"),
        ] {
            let e = parse(text).expect_err(text).message;
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn json_schemas_outside_the_concise_subset_have_no_concise_form() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}, "required": ["a"], "additionalProperties": false}),
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "object", "properties": {"a": {"enum": [1, 2]}}, "required": ["a"], "additionalProperties": false}),
        ] {
            assert_eq!(render(&schema), None, "{schema}");
        }
    }
}
