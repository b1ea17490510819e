//! A serde deserializer over the positioned YAML tree. It resolves plain scalars like YAML
//! 1.2's core schema, gives every error the position and path of the value at fault, and
//! reports unknown keys without stopping, so one run lists all of them.

use std::cell::RefCell;
use std::fmt;

use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeSeed, Expected, IntoDeserializer, Unexpected, Visitor};

use super::diag::{closest, suggestion};
use super::tree::{shorten, Entry, Kind, Node, Pos, Scalar};

/// A structural error: wrong type, missing or unknown key, unknown value.
#[derive(Debug)]
pub(crate) struct DeError {
    pub pos: Option<Pos>,
    /// Where in the document, like `agents[0].sampling`; empty at the top level.
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

impl DeError {
    fn new(message: String, hint: Option<String>) -> DeError {
        DeError {
            pos: None,
            path: String::new(),
            message,
            hint,
        }
    }

    fn at(mut self, pos: Pos, path: &str) -> DeError {
        if self.pos.is_none() {
            self.pos = Some(pos);
            self.path = path.to_string();
        }
        self
    }

    /// The message with its path in front: `agents[0].model: expected …`.
    pub fn full_message(&self) -> String {
        if self.path.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.path, self.message)
        }
    }

    /// An unknown key in the mapping at `path`, with a did-you-mean among `fields`.
    pub fn unknown_key(key: &str, key_pos: Pos, path: &str, fields: &[&str]) -> DeError {
        let hint = if let Some(found) = closest(key, fields.iter().copied()) {
            format!("did you mean `{found}`?")
        } else if let Some(home) = home_of(key).filter(|home| !path.ends_with(home)) {
            format!("`{key}` belongs under `{home}`")
        } else {
            suggestion(key, fields.iter().copied(), "keys here")
        };
        let message = format!("unknown key `{}`", shorten(key));
        DeError {
            pos: Some(key_pos),
            path: path.to_string(),
            message,
            hint: Some(hint),
        }
    }
}

/// Where a key that is often put at the wrong level belongs.
fn home_of(key: &str) -> Option<&'static str> {
    Some(match key {
        "temperature" | "top_p" | "max_tokens" | "response_format" => "sampling",
        "per_execution" | "per_call" | "overflow_policy" => "token_budget",
        "passive_inject" | "top_k" | "min_score" => "memory.recall",
        "blocks" => "memory.core",
        "max_session_messages" | "recall" | "core" => "memory",
        "kind"
        | "base_url"
        | "api_key_env"
        | "timeout_secs"
        | "connect_timeout_secs"
        | "max_retries"
        | "deadline_secs"
        | "model_path"
        | "threads"
        | "context_size"
        | "script" => "an entry of `providers:`",
        "idle_threshold_secs" | "interval_secs" => "consolidation",
        "schedule" | "request" => "an entry of `automations:`",
        "entry_point" | "workers" | "members" | "max_parallel" => "an entry of `workflows:`",
        "policy" | "keep" => "checkpoint",
        "processes" | "memory_mb" | "file_size_mb" | "cpu_secs" => "command_limits",
        "otlp_endpoint" | "capture_content" => "telemetry",
        "command" | "args" | "env" | "startup_timeout_secs" | "tool_timeout_secs" => {
            "an entry of `mcp_servers:`"
        }
        _ => return None,
    })
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full_message())
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::new(msg.to_string(), None)
    }

    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        if let Some(e) = too_large(&unexp, exp) {
            return e;
        }
        let (expected, hint) = expected_words(exp);
        DeError::new(
            format!("expected {expected}, found {}", unexpected_words(&unexp)),
            Some(hint),
        )
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Self::invalid_type(unexp, exp)
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let all: Vec<String> = expected.iter().map(|v| format!("`{v}`")).collect();
        let hint = match closest(variant, expected.iter().copied()) {
            Some(found) => format!("did you mean `{found}`? (one of {})", all.join(", ")),
            None => format!("use one of {}", all.join(", ")),
        };
        DeError::new(format!("unknown value `{}`", shorten(variant)), Some(hint))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let hint = suggestion(field, expected.iter().copied(), "keys here");
        DeError::new(format!("unknown key `{}`", shorten(field)), Some(hint))
    }

    fn missing_field(field: &'static str) -> Self {
        let hint = match field {
            "id" => "add `id: <name>` to this entry (letters, digits, `-`, `_`, `.`)".to_string(),
            "provider" => "add `provider: local` (or `ollama`, `openai`, `script`, or an entry of `providers:`) to this entry".to_string(),
            "kind" => "add `kind: ollama` (or `openai`, `anthropic`, `local`, `script`) to this entry".to_string(),
            "entry_point" => "add `entry_point: <coordinator agent id>` to this entry".to_string(),
            "schedule" => "add a cron schedule, e.g. `schedule: \"0 9 * * 1-5\"`, to this entry".to_string(),
            "request" => "add `request: <what to ask on each run>` to this entry".to_string(),
            "label" => "add `label: <name>` to this block".to_string(),
            "command" => "add `command: <program>` (and `args: [...]`) to this MCP server: the program that speaks MCP on its stdin and stdout".to_string(),
            _ => format!("add `{field}:` to this entry"),
        };
        DeError::new(format!("missing required key `{field}`"), Some(hint))
    }

    fn duplicate_field(field: &'static str) -> Self {
        DeError::new(
            format!("`{field}` is given twice (once under another spelling)"),
            Some("keep only one of them".into()),
        )
    }
}

/// A whole number past what the key's integer type holds: said as too large, not as "not a
/// whole number".
fn too_large(unexp: &Unexpected<'_>, exp: &dyn Expected) -> Option<DeError> {
    let max = integer_max(&exp.to_string())?;
    let over = match *unexp {
        Unexpected::Unsigned(n) => n > max,
        Unexpected::Signed(n) => n > 0 && n.unsigned_abs() > max,
        Unexpected::Float(f) => f.fract() == 0.0 && f > max as f64,
        _ => false,
    };
    over.then(|| {
        DeError::new(
            format!(
                "{} is too large: this key takes at most {max}",
                unexpected_words(unexp)
            ),
            Some(format!("write a whole number up to {max}")),
        )
    })
}

/// The largest value of an integer type named as serde names it (`u32`), if it is one.
fn integer_max(name: &str) -> Option<u64> {
    Some(match name {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        "u64" | "usize" => u64::MAX,
        "i8" => i8::MAX as u64,
        "i16" => i16::MAX as u64,
        "i32" => i32::MAX as u64,
        "i64" | "isize" => i64::MAX as u64,
        _ => return None,
    })
}

fn expected_words(exp: &dyn Expected) -> (String, String) {
    let raw = exp.to_string();
    let (words, hint) = match raw.as_str() {
        "u8" | "u16" | "u32" | "u64" | "usize" => (
            "a whole number (0 or more)",
            "write a whole number without quotes",
        ),
        "i8" | "i16" | "i32" | "i64" | "isize" => {
            ("a whole number", "write a whole number without quotes")
        }
        "f32" | "f64" => ("a number", "write a number without quotes, like `0.7`"),
        "a boolean" => ("`true` or `false`", "write `true` or `false`"),
        "a sequence" => ("a list", "write a list: `[a, b]`, or one `- item` per line"),
        "a map" => (
            "a mapping",
            "write `key: value` lines indented under this key",
        ),
        "path string" => ("a path", "write a file path"),
        "a string" => (
            "a single value",
            "write a single value (quote it if it has special characters)",
        ),
        other if other.starts_with("struct ") => (
            "a mapping",
            "write `key: value` lines indented under this key",
        ),
        other => return (other.to_string(), format!("write {other} here")),
    };
    (words.to_string(), hint.to_string())
}

fn unexpected_words(unexp: &Unexpected<'_>) -> String {
    match unexp {
        Unexpected::Bool(b) => format!("`{b}`"),
        Unexpected::Unsigned(n) => format!("the number {n}"),
        Unexpected::Signed(n) => format!("the number {n}"),
        Unexpected::Float(n) => format!("the number {n:?}"),
        Unexpected::Str(s) => format!("the text `{}`", shorten(s)),
        Unexpected::Unit => "nothing (an empty value)".to_string(),
        Unexpected::Seq => "a list".to_string(),
        Unexpected::Map => "a mapping".to_string(),
        other => other.to_string(),
    }
}

/// A plain scalar resolved by the core schema; quoted scalars are always text.
enum Resolved<'a> {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Text(&'a str),
}

fn resolve(scalar: &Scalar) -> Resolved<'_> {
    let v = scalar.value.as_str();
    if !scalar.plain {
        return Resolved::Text(v);
    }
    match v {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    let int = if let Some(hex) = v.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = v.strip_prefix("0o") {
        i128::from_str_radix(oct, 8).ok()
    } else if v
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'-' || b == b'+')
    {
        v.parse::<i128>().ok()
    } else {
        None
    };
    if let Some(n) = int {
        if let Ok(u) = u64::try_from(n) {
            return Resolved::Unsigned(u);
        }
        if let Ok(i) = i64::try_from(n) {
            return Resolved::Signed(i);
        }
    }
    let looks_numeric = v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
    if looks_numeric {
        if let Ok(f) = v.parse::<f64>() {
            return Resolved::Float(f);
        }
    }
    Resolved::Text(v)
}

/// Deserializes one node. Unknown keys go to `unknown` and are skipped.
pub(crate) struct De<'a> {
    pub node: &'a Node,
    pub path: String,
    pub unknown: &'a RefCell<Vec<DeError>>,
}

impl<'a> De<'a> {
    fn child(&self, node: &'a Node, path: String) -> De<'a> {
        De {
            node,
            path,
            unknown: self.unknown,
        }
    }

    fn fail(&self, err: DeError) -> DeError {
        err.at(self.node.pos, &self.path)
    }

    fn visit_map<'de, V: Visitor<'de>>(
        self,
        entries: &'a [Entry],
        fields: Option<&'static [&'static str]>,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let mut known = Vec::with_capacity(entries.len());
        for entry in entries {
            match fields {
                Some(fields) if !fields.contains(&entry.key.as_str()) => {
                    self.unknown.borrow_mut().push(DeError::unknown_key(
                        &entry.key,
                        entry.key_pos,
                        &self.path,
                        fields,
                    ));
                }
                _ => known.push(entry),
            }
        }
        let access = MapAccess {
            de: &self,
            entries: known.into_iter(),
            value: None,
        };
        visitor.visit_map(access).map_err(|e| self.fail(e))
    }
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> de::Deserializer<'de> for De<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match &self.node.kind {
            Kind::Scalar(scalar) => match resolve(scalar) {
                Resolved::Null => visitor.visit_unit(),
                Resolved::Bool(b) => visitor.visit_bool(b),
                Resolved::Unsigned(n) => visitor.visit_u64(n),
                Resolved::Signed(n) => visitor.visit_i64(n),
                Resolved::Float(n) => visitor.visit_f64(n),
                Resolved::Text(s) => visitor.visit_str(s),
            },
            Kind::Seq(items) => {
                let access = SeqAccess {
                    de: &self,
                    items: items.iter().enumerate(),
                };
                visitor.visit_seq(access)
            }
            Kind::Map(entries) => return self.visit_map(entries, None, visitor),
        };
        result.map_err(|e| self.fail(e))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        // Any non-null scalar is text when text is wanted: `model: 3.10` means "3.10".
        match &self.node.kind {
            Kind::Scalar(scalar) if !self.node.is_null() => {
                visitor.visit_str(&scalar.value).map_err(|e| self.fail(e))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            visitor.visit_none().map_err(|e| self.fail(e))
        } else {
            let (pos, path) = (self.node.pos, self.path.clone());
            visitor.visit_some(self).map_err(|e| e.at(pos, &path))
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            // `tools:` with nothing after it is an empty list.
            let empty: &[Node] = &[];
            let access = SeqAccess {
                de: &self,
                items: empty.iter().enumerate(),
            };
            return visitor.visit_seq(access).map_err(|e| self.fail(e));
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            Kind::Map(entries) => self.visit_map(entries, None, visitor),
            _ if self.node.is_null() => self.visit_map(&[], None, visitor),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match &self.node.kind {
            Kind::Map(entries) => self.visit_map(entries, Some(fields), visitor),
            _ if self.node.is_null() => self.visit_map(&[], Some(fields), visitor),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match &self.node.kind {
            Kind::Scalar(scalar) if !self.node.is_null() => {
                let access: StrDeserializer<'_, DeError> =
                    scalar.value.as_str().into_deserializer();
                visitor.visit_enum(access).map_err(|e| self.fail(e))
            }
            other => {
                let found = match other {
                    Kind::Seq(_) => Unexpected::Seq,
                    Kind::Map(_) => Unexpected::Map,
                    Kind::Scalar(_) => Unexpected::Unit,
                };
                let all: Vec<String> = variants.iter().map(|v| format!("`{v}`")).collect();
                let message = format!(
                    "expected one of {}, found {}",
                    all.join(", "),
                    unexpected_words(&found)
                );
                Err(self.fail(DeError::new(
                    message,
                    Some(format!("write one of {}", all.join(", "))),
                )))
            }
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let (pos, path) = (self.node.pos, self.path.clone());
        visitor
            .visit_newtype_struct(self)
            .map_err(|e| e.at(pos, &path))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct tuple tuple_struct identifier
    }
}

struct SeqAccess<'a, 'b> {
    de: &'b De<'a>,
    items: std::iter::Enumerate<std::slice::Iter<'a, Node>>,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            Some((i, node)) => {
                let path = format!("{}[{i}]", self.de.path);
                seed.deserialize(self.de.child(node, path)).map(Some)
            }
            None => Ok(None),
        }
    }
}

struct MapAccess<'a, 'b> {
    de: &'b De<'a>,
    entries: std::vec::IntoIter<&'a Entry>,
    value: Option<&'a Entry>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(entry);
        let key: StrDeserializer<'_, DeError> = entry.key.as_str().into_deserializer();
        seed.deserialize(key)
            .map(Some)
            .map_err(|e| e.at(entry.key_pos, &self.de.path))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.value.take() {
            Some(entry) => {
                let path = join(&self.de.path, &entry.key);
                seed.deserialize(self.de.child(&entry.value, path))
            }
            None => Err(de::Error::custom("a value without a key")),
        }
    }
}
