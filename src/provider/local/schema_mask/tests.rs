//! The mask against a stand-in vocabulary: every byte as a token of its own, pieces of JSON
//! and words as longer ones. Random walks through the allowed tokens (any choice the mask
//! leaves, as a model sampling at a high temperature would) must end in a value the
//! schema's validator accepts, within the budget, for every supported keyword.

use serde_json::{json, Value};

use super::*;
use crate::schema::{check, Validator};

const STOP: u32 = 256;

fn pieces() -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.push(Vec::new()); // STOP: a control token
    for piece in [
        "name",
        "age",
        " the",
        "\":",
        "\": ",
        "\", \"",
        "{\"",
        "\"}",
        "[",
        "],",
        "]}",
        "true",
        "false",
        "null",
        "12",
        "3.5",
        "-7",
        "0.",
        " ",
        "  ",
        "\n",
        "\n  ",
        "\u{e9}",
        "\u{1F600}",
        "hello world",
        "\\n",
        "\\u00e9",
        "\\ud83d",
        "\": \"",
        ",\n",
        "\",",
        "1,",
        "a\"",
        "\"a",
        "red",
        "green",
        "kids",
        "\"kids\":[",
        "{}",
        "[]",
        "\"\"",
        "tags",
        "0",
        "00",
        "1e5",
        "\u{e9}t\u{e9}",
        "x\\\"y",
        "b\":1}",
    ] {
        tokens.push(piece.as_bytes().to_vec());
    }
    // Pieces of one character split across tokens (a euro sign).
    tokens.push(b"\xE2\x82".to_vec());
    tokens.push(b"\xAC".to_vec());
    tokens
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random reply under the mask with `budget` tokens: its text, or why it went wrong.
fn walk(
    schema: &Value,
    vocab: &Vocab,
    tokens: &[Vec<u8>],
    seed: u64,
    budget: usize,
) -> Result<String, String> {
    let mut mask = SchemaMask::new(schema)?;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut allowed = vec![false; vocab.size()];
    let mut text = Vec::new();
    for step in 0..budget {
        mask.allowed(vocab, budget - step, &mut allowed);
        let ids: Vec<usize> = (0..allowed.len()).filter(|&i| allowed[i]).collect();
        if ids.is_empty() {
            return Err(format!(
                "no token allowed after {:?}",
                String::from_utf8_lossy(&text)
            ));
        }
        // A model ends a top-level number sooner or later: take the stop often when offered.
        let id = if allowed[STOP as usize] && rng.below(3) == 0 {
            STOP as usize
        } else {
            ids[rng.below(ids.len())]
        };
        if id == STOP as usize {
            return String::from_utf8(text).map_err(|e| e.to_string());
        }
        if !mask.advance(&tokens[id]) {
            return Err(format!(
                "token {:?} refused after being allowed",
                tokens[id]
            ));
        }
        text.extend_from_slice(&tokens[id]);
        if mask.is_done() {
            return String::from_utf8(text).map_err(|e| e.to_string());
        }
    }
    if mask.can_end() {
        return String::from_utf8(text).map_err(|e| e.to_string());
    }
    Err(format!(
        "cut at {budget} tokens: {:?}",
        String::from_utf8_lossy(&text)
    ))
}

fn schemas() -> Vec<Value> {
    vec![
        crate::schema::concise::parse("name, age int, tags [str], ok bool?, level low|high")
            .expect("concise"),
        json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 18, "maximum": 120},
            "x": {"type": "number", "minimum": -2.5, "maximum": 3.75}
        }, "required": ["n", "x"]}),
        json!({"type": "string", "minLength": 3, "maxLength": 5}),
        json!({"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3}),
        json!({"enum": ["red", "green", 1, null, {"a": [1]}, 12]}),
        json!({"const": "fixed"}),
        json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["b"], "additionalProperties": false}
        ]}),
        json!({"type": ["string", "null"], "maxLength": 4}),
        json!({"type": "object", "properties": {"v": {"type": "integer", "nullable": true}}, "required": ["v"]}),
        json!({
            "$defs": {"node": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 3},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
            }, "required": ["name", "kids"], "additionalProperties": false}},
            "$ref": "#/$defs/node"
        }),
        json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}),
        json!({"type": "object"}),
        json!({"type": "integer", "minimum": -5, "maximum": 5}),
        json!({"type": "number"}),
        json!({}),
        json!({"type": "object", "properties": {"a\"b": {"type": "string"}, "kids": {"type": "boolean"}, "age": true}, "required": ["a\"b"], "additionalProperties": false}),
        json!({"type": "array", "items": {"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}, "minItems": 1}),
        json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}, "required": ["s"], "additionalProperties": {"type": "boolean"}}),
        json!({"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string", "maxLength": 1}, {"type": "null"}]}),
        // Past the branches followed at once, the smallest value is still reachable.
        json!({"anyOf": (0..10).map(|i| json!({"type": "object", "properties": {format!("long_key_{i}"): {"type": "string", "minLength": 12}}, "required": [format!("long_key_{i}")], "additionalProperties": false})).chain([json!({"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"], "additionalProperties": false})]).collect::<Vec<_>>()}),
        json!({"anyOf": (0..12).map(|i| json!({"type": "object", "properties": {format!("k{i}"): {"type": "integer"}}, "required": [format!("k{i}")], "additionalProperties": false})).collect::<Vec<_>>()}),
    ]
}

#[test]
fn every_random_reply_validates_within_its_budget() {
    let tokens = pieces();
    let refs: Vec<&[u8]> = tokens.iter().map(Vec::as_slice).collect();
    let vocab = Vocab::new(&refs, &[STOP]);
    for schema in schemas() {
        let checked = check(schema.clone()).expect("supported");
        let validator = Validator::new(&checked).expect("valid");
        let min = SchemaMask::new(&checked).expect("compiles").min_tokens();
        for seed in 0..40u64 {
            let budget = match seed % 4 {
                0 => min,
                1 => min + 3,
                2 => min + 25,
                _ => 200,
            };
            let text = walk(&checked, &vocab, &tokens, seed, budget)
                .unwrap_or_else(|e| panic!("{schema}, seed {seed}, budget {budget}: {e}"));
            let value: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{schema}, seed {seed}: {text:?}: {e}"));
            let violations = validator.violations(&value);
            assert!(
                violations.is_empty(),
                "{schema}, seed {seed}: {text} {violations:?}"
            );
        }
    }
}

#[test]
fn the_smallest_values_are_counted_exactly() {
    for (schema, smallest) in [
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}, "required": ["a"]}),
            r#"{"a":"xx"}"#,
        ),
        (
            json!({"type": "array", "items": {"type": "integer", "minimum": 10}, "minItems": 2}),
            "[10,10]",
        ),
        (json!({"enum": ["abc", 7]}), "7"),
        (json!({"type": ["boolean", "null"]}), "null"),
    ] {
        let mask = SchemaMask::new(&check(schema.clone()).expect("ok")).expect("compiles");
        assert_eq!(mask.min_tokens(), smallest.len(), "{schema}");
    }
}

#[test]
fn keys_are_declared_once_and_objects_close_when_complete() {
    let schema = check(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["b"]
    }))
    .expect("ok");
    let feed = |text: &str| {
        let mut m = SchemaMask::new(&schema).expect("compiles");
        m.advance(text.as_bytes()).then_some(m)
    };
    assert!(feed(r#"{"a":1}"#).is_none(), "b is required");
    assert!(feed(r#"{"a":1,"a":2"#).is_none(), "a twice");
    assert!(feed(r#"{"c":1"#).is_none(), "undeclared");
    assert!(
        feed(r#"{"b":1,"a":2,"#).is_none(),
        "nothing left to declare"
    );
    assert!(feed(r#"{ "b" : 1 , "a" : 2 }"#).is_some_and(|m| m.is_done()));
    assert!(feed(r#"[1]"#).is_none());
    assert!(feed(r#"{"b":01"#).is_none());
    assert!(feed(r#"{"b":1.5"#).is_none(), "integer");
    let any = check(json!({"type": "array"})).expect("ok");
    let mut m = SchemaMask::new(&any).expect("compiles");
    assert!(!m.advance(b"[1,]"));
    let mut m = SchemaMask::new(&any).expect("compiles");
    assert!(m.advance(b"[1, {\"x\": [true, null, \"\\u00e9\"]}, -2.5]") && m.is_done());
}

#[test]
fn what_the_local_model_cannot_follow_is_said() {
    let wide: serde_json::Map<String, Value> = (0..70)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let e = SchemaMask::new(&json!({"type": "object", "properties": wide})).expect_err("wide");
    assert!(e.contains("70 properties"), "{e}");
    // Many branches are fine: those of single values are one list (each value reachable).
    let branches: Vec<Value> = (0..20).map(|i| json!({"const": format!("v{i}")})).collect();
    let schema = json!({"anyOf": branches});
    for i in 0..20 {
        let mut m = SchemaMask::new(&schema).expect("many branches");
        let value = format!("\"v{i}\"");
        assert!(m.advance(value.as_bytes()) && m.can_end(), "{value}");
    }
    let mut m = SchemaMask::new(&schema).expect("many branches");
    assert!(!m.advance(b"\"v20\""), "a value no branch lists");
}

/// The tokens a mask allows are exactly those whose bytes the recognizer takes (the plain
/// text table and the trie agree with byte-by-byte feeding).
#[test]
fn the_fast_paths_agree_with_feeding_each_token() {
    let tokens = pieces();
    let refs: Vec<&[u8]> = tokens.iter().map(Vec::as_slice).collect();
    let vocab = Vocab::new(&refs, &[STOP]);
    let schema = check(json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 6}, "age": {"type": "integer"}
    }, "required": ["name"], "additionalProperties": {"type": "string"}}))
    .expect("ok");
    for prefix in [
        "",
        "{",
        "{\"",
        "{\"na",
        "{\"name\": \"ab",
        "{\"name\": \"abcde",
        "{\"x",
        "{\"x\":\"\u{e9}",
    ] {
        let mut mask = SchemaMask::new(&schema).expect("compiles");
        assert!(mask.advance(prefix.as_bytes()), "{prefix}");
        let mut allowed = vec![false; vocab.size()];
        mask.allowed(&vocab, 1000, &mut allowed);
        for (id, bytes) in tokens.iter().enumerate() {
            if id == STOP as usize {
                continue;
            }
            let mut probe = SchemaMask::new(&schema).expect("compiles");
            probe.advance(prefix.as_bytes());
            let takes = !bytes.is_empty() && probe.advance(bytes);
            assert_eq!(
                allowed[id],
                takes,
                "{prefix:?} then {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
