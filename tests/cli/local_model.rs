//! The `local` provider against the real SmolLM2-135M-Instruct GGUF.
//!
//! The model is not in the repository: `scripts/fetch-model.sh` downloads it (CI runs it
//! first). Without it these tests fail, on purpose: a skipped model test looks like a pass.
#![cfg(feature = "local")]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use axocoatl::provider::local::{CacheUse, LocalOptions, LocalProvider};
use axocoatl::provider::{
    Cancel, ChatRequest, ConversationCache, Event, Message, Provider, ProviderError,
    ResponseFormat, Role, Sampling, ToolSchema,
};

fn model_path() -> PathBuf {
    axocoatl::config::local_model_path(&|k| std::env::var(k).ok())
        .expect("HOME or AXOCOATL_MODEL is set")
}

fn load(context_size: Option<usize>) -> LocalProvider {
    let path = model_path();
    assert!(
        path.is_file(),
        "the model file {} is missing: run scripts/fetch-model.sh first (or set AXOCOATL_MODEL)",
        path.display()
    );
    LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: path,
        threads: None,
        context_size,
        ready_dir: None,
    })
    .unwrap_or_else(|e| panic!("loading the model: {e}"))
}

/// One model for the whole test binary; tests take turns.
fn provider() -> MutexGuard<'static, LocalProvider> {
    static P: OnceLock<Mutex<LocalProvider>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(load(None)))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A second load with a small context, for the overflow tests.
fn small_context() -> MutexGuard<'static, LocalProvider> {
    static P: OnceLock<Mutex<LocalProvider>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(load(Some(160))))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn request(messages: Vec<Message>, sampling: Sampling) -> ChatRequest {
    ChatRequest {
        model: "smollm2".into(),
        messages,
        tools: Vec::new(),
        sampling,
    }
}

fn user(text: &str) -> Message {
    Message::new(Role::User, text)
}

fn greedy(max_tokens: u32) -> Sampling {
    Sampling {
        temperature: Some(0.0),
        max_tokens: Some(max_tokens),
        ..Sampling::default()
    }
}

/// Runs a call, collecting the streamed deltas and warnings.
fn run(
    p: &mut LocalProvider,
    req: &ChatRequest,
) -> (
    Result<axocoatl::provider::Completion, ProviderError>,
    String,
    Vec<String>,
) {
    let mut streamed = String::new();
    let mut warnings = Vec::new();
    let result = p.chat(req, &Cancel::new(), &mut |e| match e {
        Event::Delta(d) => streamed.push_str(&d),
        Event::Warning(w) => warnings.push(w),
        Event::ToolCall(c) => panic!("unexpected tool call {c:?}"),
    });
    (result, streamed, warnings)
}

#[test]
fn answers_a_prompt() {
    let mut p = provider();
    let req = request(vec![user("What is the capital of France?")], greedy(40));
    let (result, streamed, _) = run(&mut p, &req);
    let done = result.unwrap_or_else(|e| panic!("chat failed: {e}"));
    let text = &done.message.content;
    assert!(!text.trim().is_empty(), "empty answer");
    assert_eq!(
        &streamed, text,
        "streamed deltas differ from the final message"
    );
    // A 135M model's facts are shaky and its greedy path shifts with float rounding, so
    // only ask for words.
    assert!(text.split_whitespace().count() >= 2, "{text}");
    assert_eq!(done.message.role, Role::Assistant);
    let prompt = done.usage.prompt_tokens.unwrap_or(0);
    let completion = done.usage.completion_tokens.unwrap_or(0);
    assert!(prompt > 0 && completion > 0, "{:?}", done.usage);
    assert!(done.usage.reported());
    assert!(matches!(
        done.finish_reason.as_deref(),
        Some("stop" | "length")
    ));

    // Greedy decoding is reproducible.
    let (again, _, _) = run(&mut p, &req);
    assert_eq!(again.map(|c| c.message.content).ok().as_ref(), Some(text));
}

#[test]
fn default_sampling_answers_and_respects_max_tokens() {
    let mut p = provider();
    let sampling = Sampling {
        max_tokens: Some(8),
        ..Sampling::default()
    };
    let req = request(vec![user("Write a long story about a dragon.")], sampling);
    let (result, _, _) = run(&mut p, &req);
    let done = result.unwrap_or_else(|e| panic!("chat failed: {e}"));
    assert_eq!(done.usage.completion_tokens, Some(8));
    assert_eq!(done.finish_reason.as_deref(), Some("length"));
    assert!(!done.message.content.is_empty());
}

/// Reference ids computed from the GGUF vocabulary by a plain-Python BPE (digits split,
/// GPT-2 byte-level regex, no prefix space), which Hugging Face `tokenizers` agreed with.
#[test]
fn tokenizer_matches_reference_ids() {
    let p = provider();
    let cases: &[(&str, &[u32])] = &[
        ("Hello, world!", &[19556, 28, 905, 17]),
        (
            "The year 2024 has 365 days.",
            &[
                504, 713, 216, 34, 32, 34, 36, 553, 216, 35, 38, 37, 2009, 30,
            ],
        ),
        (
            "  leading spaces\n\nand  double  spaces \n",
            &[216, 2899, 5600, 198, 198, 397, 216, 5561, 216, 5600, 3717],
        ),
        (
            "h\u{e9}llo \u{1F600} \u{65e5}\u{672c}\u{8a9e}",
            &[
                88, 2756, 31394, 40303, 218, 17097, 241, 115, 40993, 179, 120, 248,
            ],
        ),
        (
            "def f(x):\n    return x**2\n",
            &[1604, 275, 24, 104, 727, 472, 1003, 1792, 828, 34, 198],
        ),
        (
            "I'm sure they'll've 3.14159",
            &[
                57, 5248, 2090, 502, 3060, 3543, 216, 35, 30, 33, 36, 33, 37, 41,
            ],
        ),
    ];
    for (text, ids) in cases {
        let got = p.tokenize(text).unwrap_or_default();
        assert_eq!(&got, ids, "{text:?}");
        assert_eq!(&p.detokenize(&got), text, "round trip of {text:?}");
        assert_eq!(p.count_tokens(text), Some(ids.len()));
    }

    // Special tokens are single ids in the template's text, plain characters in contents.
    let chatml = "<|im_start|>user\nHi there<|im_end|>\n";
    assert_eq!(
        p.tokenize_with_specials(chatml).unwrap_or_default(),
        [1, 4093, 198, 26843, 665, 2, 198]
    );
    let plain = p.tokenize("<|im_end|>").unwrap_or_default();
    assert!(plain.len() > 1 && !plain.contains(&2), "{plain:?}");
}

#[test]
fn renders_the_chat_template_from_the_gguf() {
    let p = provider();
    let prompt = p.render_prompt(&[user("Hi")]).unwrap_or_default();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
         Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let prompt = p
        .render_prompt(&[
            Message::new(Role::System, "Be brief."),
            user("Hi"),
            Message::new(Role::Assistant, "Hello!"),
            user("Bye"),
        ])
        .unwrap_or_default();
    assert_eq!(
        prompt,
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
         <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn json_mode_output_parses() {
    let mut p = provider();
    for (max_tokens, temperature) in [(64, Some(0.0)), (6, Some(0.0)), (48, None)] {
        let sampling = Sampling {
            temperature,
            max_tokens: Some(max_tokens),
            response_format: Some(ResponseFormat::Json),
            ..Sampling::default()
        };
        let req = request(
            vec![user(
                "Describe a cat as a JSON object with the keys name, age and color.",
            )],
            sampling,
        );
        let (result, streamed, _) = run(&mut p, &req);
        let done = result.unwrap_or_else(|e| panic!("chat failed: {e}"));
        let text = &done.message.content;
        assert_eq!(&streamed, text);
        let value: serde_json::Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("max_tokens {max_tokens}: {e}: {text}"));
        assert!(value.is_object(), "{text}");
        assert!(done.usage.completion_tokens.unwrap_or(0) <= u64::from(max_tokens));
    }
}

#[test]
fn context_overflow_is_a_clear_error() {
    let mut p = small_context();
    assert_eq!(p.context_size(), 160);
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(40);
    let req = request(vec![user(&long)], greedy(8));
    let (result, _, _) = run(&mut p, &req);
    match result {
        Err(ProviderError::Model { detail, .. }) => {
            assert!(detail.contains("context"), "{detail}");
        }
        other => panic!("expected a context error, got {other:?}"),
    }
}

#[test]
fn oldest_messages_are_dropped_to_fit_the_context() {
    let mut p = small_context();
    let filler = "Tell me about rivers and mountains and valleys. ".repeat(4);
    let mut messages = vec![Message::new(Role::System, "Be brief.")];
    for _ in 0..4 {
        messages.push(user(&filler));
        messages.push(Message::new(Role::Assistant, "Rivers flow into the sea."));
    }
    messages.push(user("What is two plus two?"));
    let (result, _, warnings) = run(&mut p, &request(messages, greedy(8)));
    let done = result.unwrap_or_else(|e| panic!("chat failed: {e}"));
    assert!(
        warnings.iter().any(|w| w.contains("dropped")),
        "{warnings:?}"
    );
    let prompt = done.usage.prompt_tokens.unwrap_or(0);
    let completion = done.usage.completion_tokens.unwrap_or(0);
    assert!(prompt + completion <= 160, "{:?}", done.usage);
}

#[test]
fn missing_model_file_names_the_path_and_the_fetch_script() {
    let path = std::env::temp_dir().join("axocoatl-no-such-model.gguf");
    let err = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: path.clone(),
        threads: None,
        context_size: None,
        ready_dir: None,
    })
    .err();
    match err {
        Some(ProviderError::Config { detail, .. }) => {
            assert!(detail.contains(&path.display().to_string()), "{detail}");
            assert!(detail.contains("`axocoatl models fetch`"), "{detail}");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_gguf_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("junk.gguf");
    std::fs::write(&path, b"not a model at all").unwrap_or_else(|e| panic!("{e}"));
    let err = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: path,
        threads: None,
        context_size: None,
        ready_dir: None,
    })
    .err();
    assert!(
        matches!(&err, Some(ProviderError::Model { detail, .. }) if detail.contains("GGUF")),
        "{err:?}"
    );
}

#[test]
fn tools_are_refused_and_not_advertised() {
    let mut p = provider();
    assert!(!p.supports_tools());
    let mut req = request(vec![user("What time is it?")], greedy(8));
    req.tools.push(ToolSchema {
        name: "clock".into(),
        description: "Reads the clock".into(),
        parameters: serde_json::json!({"type": "object"}),
    });
    let (result, _, _) = run(&mut p, &req);
    assert!(
        matches!(result, Err(ProviderError::Unsupported { .. })),
        "{result:?}"
    );
}

#[test]
fn cancellation_stops_the_stream() {
    let mut p = provider();
    let req = request(vec![user("Count from one to one hundred.")], greedy(200));
    let cancel = Cancel::new();
    let mut deltas = 0;
    let result = p.chat(&req, &cancel, &mut |e| {
        if let Event::Delta(_) = e {
            deltas += 1;
            if deltas == 3 {
                cancel.cancel();
            }
        }
    });
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(deltas, 3);

    let cancelled = Cancel::new();
    cancelled.cancel();
    let result = p.chat(&req, &cancelled, &mut |_| {});
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
}

/// The prompt is evaluated in small chunks, so a stop lands quickly even during a long
/// prompt: well before the whole prompt could have been evaluated. Both durations are taken
/// in the same run, so a loaded machine slows them alike (no absolute time is asserted).
#[test]
fn cancellation_is_prompt_during_a_long_prompt() {
    let mut p = provider();
    // A whole prompt of the same length (other words, so no cached prefix is reused).
    let baseline = "The lake froze after the frost and the road was shut. ".repeat(20);
    let started = std::time::Instant::now();
    let full = p.chat(
        &request(vec![user(&baseline)], greedy(1)),
        &Cancel::new(),
        &mut |_| {},
    );
    let whole_prompt = started.elapsed();
    assert!(full.is_ok(), "{full:?}");

    let long = "The river rose after the storm and the bridge was closed. ".repeat(20);
    let req = request(vec![user(&long)], greedy(8));
    let cancel = Cancel::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            cancel.cancel();
            std::time::Instant::now()
        })
    };
    let started = std::time::Instant::now();
    let result = p.chat(&req, &cancel, &mut |_| {});
    let returned = std::time::Instant::now();
    let cancelled_at = canceller
        .join()
        .unwrap_or_else(|_| panic!("canceller panicked"));
    assert!(
        matches!(result, Err(ProviderError::Cancelled)),
        "{result:?}"
    );
    // Without chunks the stop would wait for the rest of the prompt (about the whole of it).
    let latency = returned.saturating_duration_since(cancelled_at);
    let ran = returned.saturating_duration_since(started);
    assert!(
        ran < whole_prompt && latency * 2 < whole_prompt,
        "stopped {latency:?} after the cancel, {ran:?} in all; a whole prompt takes {whole_prompt:?}"
    );
}

/// A prompt read on 3 threads (passes of 48 tokens, each thread taking groups of 8 through
/// whole layers) gives the answer one thread gives, and so does the next turn read from the
/// attention cache those threads filled.
#[test]
fn a_prompt_read_on_three_threads_answers_as_on_one() {
    let mut three = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: model_path(),
        threads: Some(3),
        context_size: None,
        ready_dir: None,
    })
    .unwrap_or_else(|e| panic!("loading the model: {e}"));
    assert_eq!(three.threads(), 3);
    let notes = "Note: the river rose after the storm and the bridge was closed for repairs.\n";
    let first = request(
        vec![user(&format!("{}Summarise the notes.", notes.repeat(8)))],
        greedy(16),
    );
    let answer = |p: &mut LocalProvider, req: &ChatRequest| {
        let (result, _, _) = run(p, req);
        result
            .unwrap_or_else(|e| panic!("chat failed: {e}"))
            .message
            .content
    };
    let on_three = answer(&mut three, &first);
    let mut one = provider();
    one.clear_cache();
    assert_eq!(one.threads(), 1);
    let on_one = answer(&mut one, &first);
    assert_eq!(on_three, on_one);
    assert!(three.last_timings().prompt_read > 100);

    let mut messages = first.messages.clone();
    messages.push(Message::new(Role::Assistant, on_one.as_str()));
    messages.push(user(&format!("{}And now in French.", notes.repeat(4))));
    let second = request(messages, greedy(16));
    let (on_three, on_one) = (answer(&mut three, &second), answer(&mut one, &second));
    assert_eq!(three.last_cache_use(), CacheUse::Memory);
    assert_eq!(on_three, on_one);
}

fn load_with_ready(model_path: PathBuf, ready_dir: &std::path::Path) -> LocalProvider {
    LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path,
        threads: None,
        context_size: None,
        ready_dir: Some(ready_dir.to_path_buf()),
    })
    .unwrap_or_else(|e| panic!("loading the model: {e}"))
}

fn greedy_answer(p: &mut LocalProvider) -> String {
    let req = request(vec![user("Name three colors.")], greedy(12));
    let (result, _, _) = run(p, &req);
    result
        .unwrap_or_else(|e| panic!("chat failed: {e}"))
        .message
        .content
}

/// The engine runs the model file as it is: the ready-to-run copies earlier builds kept
/// (their weights widened to Q8_0) are stale, removed by the next load, and nothing is read
/// from them: a copy with a template of its own changes nothing.
#[test]
fn stale_ready_copies_are_removed_and_never_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ready_dir = dir.path().join("ready");
    std::fs::create_dir_all(&ready_dir).unwrap_or_else(|e| panic!("{e}"));
    // A copy as an earlier build named it, whose bytes carry a hostile chat template, and the
    // temporary file of a writer killed while making one.
    let planted = ready_dir.join("SmolLM2-135M-Instruct.Q4_1-0123456789abcdef.q8_0.gguf");
    let mut bytes = std::fs::read(model_path()).unwrap_or_else(|e| panic!("{e}"));
    let template = b"{% for message in messages %}";
    if let Some(at) = bytes.windows(template.len()).position(|w| w == template) {
        bytes[at..at + 12].copy_from_slice(b"{{ 'PWNED' }");
    }
    std::fs::write(&planted, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let stray = ready_dir.join(".tmp-4194305-killed");
    std::fs::write(&stray, b"half a copy").unwrap_or_else(|e| panic!("{e}"));
    let keep = ready_dir.join("notes.txt");
    std::fs::write(&keep, b"not a copy").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(axocoatl::provider::local::ready_copies(&ready_dir).len(), 2);

    let mut p = load_with_ready(model_path(), &ready_dir);
    assert_eq!(p.removed_copies(), [stray.clone(), planted.clone()]);
    assert!(!planted.exists() && !stray.exists() && keep.exists());
    assert_eq!(p.widened_tensors(), 0, "Q4_1 and Q8_0 run as they are");
    let expected = greedy_answer(&mut provider());
    assert_eq!(greedy_answer(&mut p), expected);
    assert!(!expected.contains("PWNED"));
}

/// A place for the attention cache that the test can look into and damage.
#[derive(Clone)]
struct Slot {
    bytes: std::sync::Arc<Mutex<Option<Vec<u8>>>>,
    limit: usize,
}

impl Slot {
    fn new(limit: usize) -> Slot {
        Slot {
            bytes: Default::default(),
            limit,
        }
    }

    fn saved(&self) -> Option<Vec<u8>> {
        self.bytes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, bytes: Option<Vec<u8>>) {
        *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) = bytes;
    }
}

impl ConversationCache for Slot {
    fn load(&self) -> Option<Vec<u8>> {
        self.saved()
    }
    fn save(&self, bytes: &[u8]) {
        self.set(Some(bytes.to_vec()));
    }
    fn limit(&self) -> usize {
        self.limit
    }
}

/// The first and second turns of one conversation, as the engine sends them.
fn two_turns(p: &mut LocalProvider) -> (ChatRequest, ChatRequest) {
    let first = request(vec![user("Name three colors.")], greedy(16));
    let (result, _, _) = run(p, &first);
    let answer = result.unwrap_or_else(|e| panic!("{e}")).message.content;
    let second = request(
        vec![
            user("Name three colors."),
            Message::new(Role::Assistant, answer),
            user("Which of them is the darkest?"),
        ],
        greedy(16),
    );
    (first, second)
}

fn answer(p: &mut LocalProvider, req: &ChatRequest) -> String {
    let (result, _, _) = run(p, req);
    result.unwrap_or_else(|e| panic!("{e}")).message.content
}

#[test]
fn the_next_turn_reads_only_what_is_new_and_answers_the_same() {
    let mut p = provider();
    p.keep_conversation(None);
    p.clear_cache();
    let (_, second) = two_turns(&mut p);
    let with_cache = answer(&mut p, &second);
    let t = p.last_timings();
    assert_eq!(p.last_cache_use(), CacheUse::Memory);
    assert!(
        t.prompt_read * 2 < t.prompt_tokens,
        "read {} of {} prompt tokens",
        t.prompt_read,
        t.prompt_tokens
    );
    p.clear_cache();
    let without = answer(&mut p, &second);
    assert_eq!(p.last_cache_use(), CacheUse::None);
    assert_eq!(p.last_timings().prompt_read, t.prompt_tokens);
    assert_eq!(
        with_cache, without,
        "the same greedy answer with and without the cache"
    );
}

#[test]
fn a_saved_cache_serves_the_next_process_verified_and_bounded() {
    let mut p = provider();
    let slot = Slot::new(64 << 20);
    p.keep_conversation(Some(Box::new(slot.clone())));
    p.clear_cache();
    let (_, second) = two_turns(&mut p);
    let saved = slot
        .saved()
        .unwrap_or_else(|| panic!("the cache was saved"));

    // Another process: nothing in memory, the saved cache read back.
    p.clear_cache();
    let from_saved = answer(&mut p, &second);
    assert_eq!(p.last_cache_use(), CacheUse::Saved);
    let read = p.last_timings().prompt_read;
    assert!(read * 2 < p.last_timings().prompt_tokens, "read {read}");

    // Damaged (one bit), or missing: not used, the whole prompt read, the same answer.
    let mut damaged = saved.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x10;
    for bytes in [Some(damaged), None] {
        slot.set(bytes);
        p.clear_cache();
        assert_eq!(answer(&mut p, &second), from_saved);
        assert_eq!(p.last_cache_use(), CacheUse::None);
        assert_eq!(p.last_timings().prompt_read, p.last_timings().prompt_tokens);
    }

    // Bounded: with room for 20 positions, the first 20 are saved, and reused.
    // SmolLM2-135M: a position is its token and the keys and values of 30 layers of 3 heads
    // of 64 values, in half precision; the file adds 88 bytes of header and hash.
    let per_position = 4 + 30 * 3 * 64 * 2 * 2;
    let small = Slot::new(88 + 20 * per_position + per_position / 2);
    p.keep_conversation(Some(Box::new(small.clone())));
    p.clear_cache();
    answer(&mut p, &second);
    let kept = small.saved().unwrap_or_default();
    assert!(kept.len() <= small.limit, "{} bytes", kept.len());
    p.clear_cache();
    assert_eq!(answer(&mut p, &second), from_saved);
    assert_eq!(p.last_cache_use(), CacheUse::Saved);
    assert_eq!(
        p.last_timings().prompt_read,
        p.last_timings().prompt_tokens - 20
    );
    p.keep_conversation(None);
}
