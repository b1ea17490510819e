//! What decoding under a JSON Schema costs the `local` provider: generation tokens/s with a
//! schema beside the same prompt unconstrained, over the same number of tokens (the
//! constrained reply's length: a reply that ends early must not be compared with a longer
//! one, whose later tokens attend over more context). Goal: the constraint costs at most
//! 10% of generation tokens/s (constrained / unconstrained ≥ 0.90).
//!
//!   scripts/fetch-model.sh && cargo bench --bench schema
//!
//! Each figure is the median of ROUNDS runs (greedy, or sampled from a fixed seed: every run
//! of a case generates the same tokens), the constrained and unconstrained runs taken in turn
//! so a change of the machine's load falls on both alike; "tokens" is what each generated
//! (constrained/unconstrained); `AXOCOATL_BENCH_ROUNDS` changes it (default 3).
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::sync::Arc;
use std::time::Duration;

use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::{Cancel, ChatRequest, Message, Provider, ResponseFormat, Role, Sampling};
use serde_json::{json, Value};

const MAX_TOKENS: u32 = 160;

fn cases() -> Vec<(&'static str, &'static str, Option<Value>)> {
    let concise = |t: &str| axocoatl::schema::concise::parse(t).expect("concise");
    vec![
        (
            "concise object",
            "Invent a character for a short story: name, age, hobbies and a long biography.",
            Some(concise("name, age int, hobbies [str], biography")),
        ),
        (
            "array of objects",
            "List the planets of the solar system with their order from the sun.",
            Some(
                json!({"type": "array", "items": {"type": "object", "properties": {
                "planet": {"type": "string"}, "order": {"type": "integer", "minimum": 1, "maximum": 9}
            }, "required": ["planet", "order"], "additionalProperties": false}}),
            ),
        ),
        (
            "numbers and enums",
            "Give the weather for five cities: temperature, humidity and the sky.",
            Some(
                json!({"type": "array", "items": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 20},
                "celsius": {"type": "number", "minimum": -50, "maximum": 60},
                "humidity": {"type": "number", "minimum": 0, "maximum": 1},
                "sky": {"enum": ["clear", "cloudy", "rain", "snow"]}
            }, "required": ["city", "celsius", "humidity", "sky"], "additionalProperties": false}, "maxItems": 5}),
            ),
        ),
        (
            "recursive $ref",
            "Describe a family tree of three generations.",
            Some(json!({"$defs": {"p": {"type": "object", "properties": {
                "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/p"}}
            }, "required": ["name", "children"], "additionalProperties": false}}, "$ref": "#/$defs/p"})),
        ),
        (
            "JSON mode (no schema)",
            "Describe three cats as a JSON object: for each its name, age and color.",
            None,
        ),
        (
            "JSON mode, sampled",
            "Describe three cats as a JSON object: for each its name, age and color.",
            None,
        ),
    ]
}

/// The temperature of a case: greedy, but for the sampled one (which masks the vocabulary at
/// every token, where greedy decoding checks the highest scores first).
fn temperature(case: &str) -> f64 {
    if case.ends_with("sampled") {
        0.8
    } else {
        0.0
    }
}

fn request(prompt: &str, max_tokens: u32, temperature: f64) -> ChatRequest {
    ChatRequest {
        model: "local".into(),
        messages: vec![Message::new(Role::User, prompt)],
        tools: Vec::new(),
        sampling: Sampling {
            temperature: Some(temperature),
            max_tokens: Some(max_tokens),
            ..Sampling::default()
        },
    }
}

/// One figure of `rounds` runs: the median generation rate, the tokens generated, and the
/// median share of generation time spent in the schema's mask.
struct Figure {
    rate: f64,
    tokens: usize,
    mask_share: f64,
}

/// One run of `req`: its generation rate, tokens, and the mask's share of generation time.
fn run(p: &mut LocalProvider, req: &ChatRequest) -> (f64, usize, f64) {
    if let Err(e) = p.chat(req, &Cancel::new(), &mut |_| {}) {
        println!("call failed: {e}");
        std::process::exit(1);
    }
    let t = p.last_timings();
    let generation = t.generation.max(Duration::from_nanos(1)).as_secs_f64();
    (
        t.generated_tokens as f64 / generation,
        t.generated_tokens,
        t.constraint.as_secs_f64() / generation,
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `constrained` and the same prompt unconstrained over as many tokens, `rounds` times each,
/// taken in turn so that a change in the machine's load falls on both alike.
fn measure(
    p: &mut LocalProvider,
    constrained: &ChatRequest,
    prompt: &str,
    rounds: usize,
) -> (Figure, Figure) {
    let (mut with, mut without, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    let (mut tokens, mut plain_tokens) = (0, 0);
    for _ in 0..rounds {
        let (rate, n, share) = run(p, constrained);
        with.push(rate);
        shares.push(share);
        tokens = n;
        let temperature = constrained.sampling.temperature.unwrap_or(0.0);
        let (rate, n, _) = run(p, &request(prompt, tokens.max(1) as u32, temperature));
        without.push(rate);
        plain_tokens = n;
    }
    (
        Figure {
            rate: median(with),
            tokens,
            mask_share: median(shares),
        },
        Figure {
            rate: median(without),
            tokens: plain_tokens,
            mask_share: 0.0,
        },
    )
}

fn main() {
    let path = axocoatl::config::local_model_path(&|k| std::env::var(k).ok())
        .expect("HOME or AXOCOATL_MODEL is set");
    if !path.is_file() {
        println!(
            "model {} missing: run scripts/fetch-model.sh",
            path.display()
        );
        std::process::exit(1);
    }
    let rounds = std::env::var("AXOCOATL_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let mut p = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: path.clone(),
        threads: None,
        context_size: None,
        ready_dir: None,
    })
    .unwrap_or_else(|e| {
        println!("cannot load {}: {e}", path.display());
        std::process::exit(1)
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "schema-constrained decoding, {} ({} threads, {cores} cores), median of {rounds}",
        path.display(),
        p.threads()
    );
    println!("goal: constrained / unconstrained generation tokens/s >= 0.90 (the mask <= 10%)");
    println!(
        "{:<24} {:>9} {:>16} {:>11} {:>7} {:>11}",
        "case", "tokens", "constrained t/s", "plain t/s", "ratio", "mask share"
    );
    // Warm-up: first-use packing of weights happens here, not in the figures.
    let _ = p.chat(&request("Hi", 4, 0.0), &Cancel::new(), &mut |_| {});
    for (name, prompt, schema) in cases() {
        let mut constrained = request(prompt, MAX_TOKENS, temperature(name));
        match schema {
            Some(s) => {
                let checked = axocoatl::schema::check(s).expect("a supported schema");
                constrained.sampling.schema = Some(Arc::new(checked));
            }
            None => constrained.sampling.response_format = Some(ResponseFormat::Json),
        }
        let (with, without) = measure(&mut p, &constrained, prompt, rounds);
        let ratio = with.rate / without.rate;
        let met = if ratio >= 0.90 { "met" } else { "NOT met" };
        let share = format!("{:.1}%", with.mask_share * 100.0);
        println!(
            "{name:<24} {:>9} {:>16.1} {:>11.1} {ratio:>7.3} {share:>11}  {met}",
            format!("{}/{}", with.tokens, without.tokens),
            with.rate,
            without.rate
        );
    }
}
