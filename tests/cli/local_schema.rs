//! The `local` provider decoding under a JSON Schema, against the real SmolLM2 GGUF: every
//! supported keyword constrains it, so every reply validates, within `max_tokens`.
//!
//! Like `local_model.rs`, these fail without the model file (`scripts/fetch-model.sh`).
#![cfg(feature = "local")]

use std::sync::{Mutex, MutexGuard, OnceLock};

use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::{Cancel, ChatRequest, Message, Provider, Role, Sampling};
use axocoatl::schema::{check, Validator};
use serde_json::{json, Value};

fn provider() -> MutexGuard<'static, LocalProvider> {
    static P: OnceLock<Mutex<LocalProvider>> = OnceLock::new();
    P.get_or_init(|| {
        let path = axocoatl::config::local_model_path(&|k| std::env::var(k).ok())
            .expect("HOME or AXOCOATL_MODEL is set");
        assert!(
            path.is_file(),
            "the model file {} is missing: run scripts/fetch-model.sh first",
            path.display()
        );
        let p = LocalProvider::load(LocalOptions {
            name: "local".into(),
            model_path: path,
            threads: None,
            context_size: None,
            ready_dir: None,
        })
        .unwrap_or_else(|e| panic!("loading the model: {e}"));
        Mutex::new(p)
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

fn ask(prompt: &str, schema: &Value, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "smollm2".into(),
        messages: vec![Message::new(Role::User, prompt)],
        tools: Vec::new(),
        sampling: Sampling {
            max_tokens: Some(max_tokens),
            schema: Some(std::sync::Arc::new(schema.clone())),
            ..Sampling::default()
        },
    }
}

/// (prompt, schema): each supported keyword, alone and together.
fn cases() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Invent a person.",
            axocoatl::schema::concise::parse("name, age int, tags [str], alive bool, note str?")
                .expect("concise"),
        ),
        (
            "Rate this movie from 1 to 5 and say how sure you are.",
            json!({"type": "object", "properties": {
                "stars": {"type": "integer", "minimum": 1, "maximum": 5},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1}
            }, "required": ["stars", "confidence"], "additionalProperties": false}),
        ),
        (
            "Give a short code for a color.",
            json!({"type": "string", "minLength": 3, "maxLength": 6}),
        ),
        (
            "List some prime numbers.",
            json!({"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 2, "maxItems": 4}),
        ),
        (
            "Is this a bug, a feature or a question: the app crashes on start.",
            json!({"enum": ["bug", "feature", "question"]}),
        ),
        ("Say ok.", json!({"const": {"ok": true}})),
        (
            "Describe a shape.",
            json!({"anyOf": [
                {"type": "object", "properties": {"circle": {"type": "number", "minimum": 0}}, "required": ["circle"], "additionalProperties": false},
                {"type": "object", "properties": {"square": {"type": "number", "minimum": 0}}, "required": ["square"], "additionalProperties": false}
            ]}),
        ),
        (
            "Name a city, or nothing.",
            json!({"type": ["string", "null"], "maxLength": 12}),
        ),
        (
            "Describe a small family tree.",
            json!({
                "$defs": {"person": {"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 10},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/person"}, "maxItems": 2}
                }, "required": ["name", "children"], "additionalProperties": false}},
                "$ref": "#/$defs/person"
            }),
        ),
        (
            "Count the words of each of these: red apple, big blue sky.",
            json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}),
        ),
        (
            "Pick a number between -3 and 3.",
            json!({"type": "integer", "minimum": -3, "maximum": 3}),
        ),
        ("Say anything as JSON.", json!({})),
    ]
}

#[test]
fn every_supported_keyword_constrains_the_local_model() {
    let mut p = provider();
    for (prompt, schema) in cases() {
        let schema = check(schema).expect("supported");
        let validator = Validator::new(&schema).expect("valid");
        let done = p
            .chat(&ask(prompt, &schema, 64), &Cancel::new(), &mut |_| {})
            .unwrap_or_else(|e| panic!("{schema}: {e}"));
        let text = &done.message.content;
        let value: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("{schema}: not JSON ({e}): {text:?}"));
        let violations = validator.violations(&value);
        assert!(violations.is_empty(), "{schema}: {text} {violations:?}");
        assert!(
            done.usage.completion_tokens.unwrap_or(0) <= 64,
            "{:?}",
            done.usage
        );
    }
}

#[test]
fn a_value_ends_the_reply_and_a_tight_budget_still_finishes_it() {
    let mut p = provider();
    let schema = check(json!({"enum": ["bug", "feature", "question"]})).expect("ok");
    let done = p
        .chat(
            &ask("Classify: the app crashes.", &schema, 64),
            &Cancel::new(),
            &mut |_| {},
        )
        .expect("chat");
    // The closing quote of a choice is the last token: no budget is spent after it.
    assert_eq!(done.finish_reason.as_deref(), Some("stop"));
    assert!(
        done.usage.completion_tokens.unwrap_or(99) <= 12,
        "{:?}",
        done.usage
    );
    let text = done.message.content.trim_end();
    assert!(text.ends_with('"') && text.len() <= 14, "{text:?}");
    // Four required strings of at least 5 characters need 57 bytes: at 60 tokens the
    // model must close each string and the object in time.
    let tight = check(json!({"type": "object", "properties": {
        "a": {"type": "string", "minLength": 5}, "b": {"type": "string", "minLength": 5},
        "c": {"type": "string", "minLength": 5}, "d": {"type": "string", "minLength": 5}
    }, "required": ["a", "b", "c", "d"], "additionalProperties": false}))
    .expect("ok");
    let done = p
        .chat(
            &ask("Write four long sentences.", &tight, 60),
            &Cancel::new(),
            &mut |_| {},
        )
        .expect("chat");
    let value: Value = serde_json::from_str(&done.message.content).expect("complete JSON");
    assert!(
        Validator::new(&tight)
            .expect("valid")
            .violations(&value)
            .is_empty(),
        "{value}"
    );
}

#[test]
fn a_budget_below_the_smallest_value_is_refused_before_decoding() {
    let mut p = provider();
    let schema = check(json!({"type": "string", "minLength": 40})).expect("ok");
    let e = p
        .chat(&ask("hi", &schema, 10), &Cancel::new(), &mut |_| {})
        .expect_err("42 bytes do not fit in 10 tokens");
    assert!(
        e.to_string()
            .contains("the schema's smallest value takes 42 tokens"),
        "{e}"
    );
}
