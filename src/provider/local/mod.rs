//! `local`: a GGUF model run in-process on the CPU by axocoatl's own engine
//! (`axocoatl-infer`: the file mapped and its 4- and 8-bit weights run as they are), so the
//! runtime answers with no server and no network (the starter config's default,
//! SmolLM2-135M-Instruct).
//!
//! What it does and does not do:
//! - GGUF files of the llama architecture with a byte-level BPE vocabulary (SmolLM, SmolLM2,
//!   Llama 3); the tokenizer and the chat template come from the file itself.
//! - At most the positions the model was trained for (and 32,768); when a conversation does
//!   not fit, the oldest
//!   non-system messages are dropped (reported as a warning), and a last message that alone
//!   does not fit is an error.
//! - `response_format: json` constrains decoding so the reply is always one parseable object,
//!   and a JSON Schema (`send --schema`) so that it is always a value of the schema
//!   ([`schema_mask`]), within `max_tokens`.
//! - No tools: a 135M model cannot call them reliably, so a request with tools is refused.
//! - Sampling defaults: temperature 0.2, top_p 0.9 (SmolLM2's recommendation), a fixed seed so
//!   the same request gives the same reply, at most 512 new tokens, and a 1.1 repeat penalty
//!   over the last 64 tokens outside JSON mode (as Ollama does) since small models loop
//!   (with a schema too, among the tokens the schema allows).
//! - The attention cache of the conversation is kept: a call whose prompt starts with the
//!   tokens of the one before (the next turn of a conversation) reads only what is new, and
//!   with [`Provider::keep_conversation`] the cache is saved for the next process too (the
//!   engine keeps it beside the conversation's checkpoint).

mod json_mask;
mod model;
pub mod schema_mask;
mod template;
mod tokenizer;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axocoatl_infer::{Cache, Model, MAX_CONTEXT};
use rand::distr::Distribution;
use rand::SeedableRng;

use self::json_mask::JsonState;
pub use self::model::{ready_copies, remove_stale_copies, DEFAULT_THREADS};
use self::schema_mask::{SchemaMask, Vocab};
use self::template::{ChatTemplate, Segment};
use self::tokenizer::{GgufTokenizer, Utf8Stream};
use super::{
    CallUsage, Cancel, ChatRequest, Completion, ConversationCache, Event, Message, Provider,
    ProviderError, ResponseFormat, Role,
};

/// The command that downloads the default model, named in errors.
pub const FETCH_COMMAND: &str = "`axocoatl models fetch`";
pub const DEFAULT_MAX_TOKENS: usize = 512;
const DEFAULT_TEMPERATURE: f64 = 0.2;
const DEFAULT_TOP_P: f64 = 0.9;
const SEED: u64 = 299_792_458;
const REPEAT_PENALTY: f32 = 1.1;
const REPEAT_WINDOW: usize = 64;
/// Prompt tokens per forward pass and thread: large enough that each weight is read from
/// memory once for many tokens, small enough that cancellation is seen within ~100 ms (each
/// thread's share of a pass is 16 tokens' work, whatever the number of threads).
const PROMPT_CHUNK: usize = 16;
/// Prompts of at least this many tokens report their reading as progress.
const LONG_PROMPT: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalOptions {
    /// The provider's configured name (for messages).
    pub name: String,
    pub model_path: PathBuf,
    /// Compute threads for the whole process (see [`DEFAULT_THREADS`]).
    pub threads: Option<usize>,
    /// Positions of prompt plus reply; at most what the model was trained for (and 32,768).
    pub context_size: Option<usize>,
    /// Where earlier builds kept ready-to-run copies of model files (their weights widened
    /// to Q8_0). This engine runs the file as it is: a load removes the copies it finds there.
    pub ready_dir: Option<PathBuf>,
}

/// Timings of the last call, for benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Tokens of the prompt, and how many of them were read (the others came from the
    /// attention cache).
    pub prompt_tokens: usize,
    pub prompt_read: usize,
    pub prompt: Duration,
    pub generated_tokens: usize,
    pub generation: Duration,
    /// From the call's start to its first token.
    pub first_token: Duration,
    /// Of `generation`, the time spent working out which tokens a schema (or JSON mode)
    /// allows.
    pub constraint: Duration,
}

/// Where the attention cache a call started from came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheUse {
    /// Nothing reused: the whole prompt was read.
    None,
    /// The cache this provider kept from its previous call.
    Memory,
    /// The cache saved by an earlier process (verified before use).
    Saved,
}

pub struct LocalProvider {
    name: String,
    path: PathBuf,
    model: Model,
    /// The attention cache of the conversation last continued.
    cache: Cache,
    /// Where that cache is saved between processes, when the caller gave a place.
    saved: Option<Box<dyn ConversationCache>>,
    fingerprint: [u8; 32],
    tokenizer: GgufTokenizer,
    template: ChatTemplate,
    context: usize,
    threads: usize,
    load_time: Duration,
    removed: Vec<PathBuf>,
    timings: Timings,
    cache_use: CacheUse,
    /// The vocabulary indexed for schema-constrained decoding, made at its first use.
    schema_vocab: Option<Arc<Vocab>>,
}

impl LocalProvider {
    pub fn load(opts: LocalOptions) -> Result<LocalProvider, ProviderError> {
        let started = Instant::now();
        let config = |detail: String| ProviderError::Config {
            provider: opts.name.clone(),
            detail,
        };
        let path = &opts.model_path;
        if !path.is_file() {
            let what = if path.exists() {
                "is not a file"
            } else {
                "does not exist"
            };
            return Err(config(format!(
                "model file {} {what}; run {FETCH_COMMAND} to download the default model \
                 (SmolLM2-135M-Instruct, 98 MB), or set model_path to a GGUF file",
                path.display()
            )));
        }
        if opts.threads == Some(0) {
            return Err(config("threads must be at least 1".into()));
        }
        match opts.context_size {
            Some(0) => return Err(config("context_size must be at least 1".into())),
            Some(n) if n > MAX_CONTEXT => {
                return Err(config(format!(
                    "context_size {n} is larger than the {MAX_CONTEXT} positions the local \
                     provider supports"
                )))
            }
            _ => {}
        }
        let threads = opts.threads.unwrap_or(DEFAULT_THREADS);

        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        crate::progress::report(crate::progress::Progress::LoadingModel { model: &file });
        let loaded =
            model::load(path, opts.ready_dir.as_deref()).map_err(|detail| ProviderError::Model {
                provider: opts.name.clone(),
                detail: format!("cannot load {}: {detail}", path.display()),
            });
        crate::progress::report(crate::progress::Progress::Done);
        let loaded = loaded?;
        let trained = loaded.model.config().context;
        let context = opts.context_size.unwrap_or(trained).min(trained);
        let cache = Cache::new(loaded.model.config());
        Ok(LocalProvider {
            name: opts.name,
            path: opts.model_path,
            model: loaded.model,
            cache,
            saved: None,
            fingerprint: loaded.fingerprint,
            tokenizer: loaded.tokenizer,
            template: loaded.template,
            context,
            threads,
            load_time: started.elapsed(),
            removed: loaded.removed,
            timings: Timings::default(),
            cache_use: CacheUse::None,
            schema_vocab: None,
        })
    }

    pub fn model_path(&self) -> &std::path::Path {
        &self.path
    }

    /// Positions available to prompt plus reply.
    pub fn context_size(&self) -> usize {
        self.context
    }

    /// Compute threads for reading prompts and generating (see [`DEFAULT_THREADS`]).
    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    /// The kernels the engine runs on this CPU (`avx2`, `plain`).
    pub fn kernels(&self) -> &'static str {
        self.model.isa().name()
    }

    /// How many weight matrices were converted at load (formats the kernels do not run as
    /// they are: Q4_K repacked as Q4_1, the others widened to Q8_0; none for Q4_0, Q4_1 and
    /// Q8_0 files).
    pub fn widened_tensors(&self) -> usize {
        self.model.widened()
    }

    /// The stale ready-to-run copies of earlier builds this load removed.
    pub fn removed_copies(&self) -> &[PathBuf] {
        &self.removed
    }

    pub fn last_timings(&self) -> Timings {
        self.timings
    }

    /// Where the last call's attention cache came from.
    pub fn last_cache_use(&self) -> CacheUse {
        self.cache_use
    }

    /// Forgets the attention cache held in memory (the saved one stays).
    pub fn clear_cache(&mut self) {
        self.cache.truncate(0);
    }

    /// Token ids of `text` as plain text (special-token spellings are not special).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, ProviderError> {
        self.tokenizer
            .encode_plain(text)
            .map_err(|e| self.model_error(e))
    }

    /// Token ids of `text` with special tokens (`<|im_start|>`) recognised.
    pub fn tokenize_with_specials(&self, text: &str) -> Result<Vec<u32>, ProviderError> {
        self.tokenizer
            .encode_with_specials(text)
            .map_err(|e| self.model_error(e))
    }

    /// Text of token ids, control tokens skipped.
    pub fn detokenize(&self, ids: &[u32]) -> String {
        self.tokenizer.decode(ids)
    }

    /// The prompt the model's chat template makes of `messages`, cue for the reply included.
    pub fn render_prompt(&self, messages: &[Message]) -> Result<String, ProviderError> {
        let pairs: Vec<(&str, &str)> = messages
            .iter()
            .map(|m| (role_name(m.role), m.content.as_str()))
            .collect();
        self.template
            .render_text(&pairs, true)
            .map_err(|e| self.model_error(e))
    }

    /// The mask of `schema` over this model's vocabulary, for a reply of at most `budget`
    /// tokens.
    fn schema_constraint(
        &mut self,
        schema: &serde_json::Value,
        budget: usize,
    ) -> Result<SchemaConstraint, ProviderError> {
        let mask = SchemaMask::new(schema).map_err(|detail| ProviderError::Unsupported {
            provider: self.name.clone(),
            detail: format!("the local model cannot follow this schema: {detail}"),
        })?;
        if mask.min_tokens() > budget {
            return Err(self.model_error(format!(
                "the schema's smallest value takes {} tokens but the reply may have {budget} \
                 (max_tokens, or what the context leaves): raise max_tokens",
                mask.min_tokens()
            )));
        }
        let vocab = self.vocab();
        Ok(SchemaConstraint {
            allowed: vec![false; vocab.size()],
            mask,
            vocab,
            budget,
            spent: Duration::ZERO,
        })
    }

    /// The vocabulary indexed for the masks (built at the first constrained reply, then
    /// kept with the model).
    fn vocab(&mut self) -> Arc<Vocab> {
        let tokenizer = &self.tokenizer;
        self.schema_vocab
            .get_or_insert_with(|| {
                let n = tokenizer.vocab_size() as u32;
                // A control token's bytes are empty: the masks never allow it.
                let tokens: Vec<&[u8]> = (0..n).map(|id| tokenizer.token_bytes(id)).collect();
                let stops: Vec<u32> = (0..n).filter(|&id| tokenizer.is_stop(id)).collect();
                Arc::new(Vocab::new(&tokens, &stops))
            })
            .clone()
    }

    fn model_error(&self, detail: String) -> ProviderError {
        ProviderError::Model {
            provider: self.name.clone(),
            detail,
        }
    }

    fn engine_error(&self, e: axocoatl_infer::Error) -> ProviderError {
        self.model_error(format!("inference failed: {e}"))
    }

    /// Token ids of the prompt, after dropping as few of the oldest non-system messages as
    /// make room for `reserve` new tokens; and how many were dropped.
    fn prompt(
        &self,
        messages: &[Message],
        reserve: usize,
    ) -> Result<(Vec<u32>, usize), ProviderError> {
        if messages.is_empty() {
            return Err(self.model_error("the request has no messages".into()));
        }
        let contents = messages
            .iter()
            .map(|m| self.tokenizer.encode_plain(&m.content))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.model_error(e))?;
        let pinned = messages
            .iter()
            .take_while(|m| m.role == Role::System)
            .count();
        // The last message always stays.
        let droppable = messages.len().saturating_sub(pinned + 1);
        let build = |dropped: usize| -> Result<Vec<u32>, ProviderError> {
            let kept: Vec<usize> = (0..pinned)
                .chain(pinned + dropped..messages.len())
                .collect();
            let pairs: Vec<(&str, &str)> = kept
                .iter()
                .map(|&i| (role_name(messages[i].role), messages[i].content.as_str()))
                .collect();
            let segments = self
                .template
                .render(&pairs, true)
                .map_err(|e| self.model_error(e))?;
            let mut ids = Vec::new();
            for segment in segments {
                match segment {
                    Segment::Template(text) => ids.extend(
                        self.tokenizer
                            .encode_with_specials(&text)
                            .map_err(|e| self.model_error(e))?,
                    ),
                    Segment::Content(j) => {
                        if let Some(c) = kept.get(j).and_then(|&i| contents.get(i)) {
                            ids.extend_from_slice(c);
                        }
                    }
                }
            }
            Ok(ids)
        };
        let fits = |ids: &Vec<u32>| ids.len() + reserve <= self.context;
        let all = build(0)?;
        if fits(&all) || droppable == 0 {
            return Ok((all, 0));
        }
        // Fewest drops that fit; the prompt shrinks as messages go.
        let (mut lo, mut hi) = (1, droppable);
        let mut best = build(hi)?;
        if !fits(&best) {
            return Ok((best, hi));
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ids = build(mid)?;
            if fits(&ids) {
                hi = mid;
                best = ids;
            } else {
                lo = mid + 1;
            }
        }
        Ok((best, hi))
    }

    /// Starts the attention cache at the longest start of `prompt` it can reuse: the cache
    /// kept in memory from the previous call, or the one saved by an earlier process when
    /// that shares more (it is verified first; a damaged, stale or foreign one is ignored).
    /// Returns how many tokens of the prompt are already read.
    fn reuse_cache(&mut self, prompt: &[u32]) -> usize {
        let in_memory = self.cache.reuse(prompt);
        self.cache_use = if in_memory > 0 {
            CacheUse::Memory
        } else {
            CacheUse::None
        };
        if in_memory + 1 >= prompt.len() {
            return in_memory;
        }
        let Some(bytes) = self.saved.as_ref().and_then(|s| s.load()) else {
            return in_memory;
        };
        match Cache::from_bytes(&bytes, self.model.config(), &self.fingerprint) {
            Ok(mut saved) => {
                let from_saved = saved.reuse(prompt);
                if from_saved > in_memory {
                    self.cache = saved;
                    self.cache_use = CacheUse::Saved;
                    return from_saved;
                }
                in_memory
            }
            Err(_) => in_memory,
        }
    }

    /// Reads what of `prompt` the attention cache does not hold (in chunks, reporting
    /// progress when it is long): the scores of the token after it.
    fn read_prompt(&mut self, prompt: &[u32], cancel: &Cancel) -> Result<Vec<f32>, ProviderError> {
        let started = Instant::now();
        let start = self.reuse_cache(prompt);
        let rest = &prompt[start..];
        let mut logits = Vec::new();
        // A prompt this long takes a second or more on a laptop: its reading is reported.
        let long = rest.len() >= LONG_PROMPT;
        let per_pass = PROMPT_CHUNK.saturating_mul(self.threads);
        let chunks = rest.len().div_ceil(per_pass);
        for (i, chunk) in rest.chunks(per_pass).enumerate() {
            if cancel.is_cancelled() {
                if long {
                    crate::progress::report(crate::progress::Progress::Done);
                }
                return Err(ProviderError::Cancelled);
            }
            if long {
                crate::progress::report(crate::progress::Progress::ReadingPrompt {
                    done: i * per_pass,
                    total: rest.len(),
                });
            }
            let want = (i + 1 == chunks).then_some(&mut logits);
            let threads = self.threads;
            self.model
                .forward_threads(&mut self.cache, chunk, want, threads)
                .map_err(|e| self.engine_error(e))?;
        }
        if long {
            crate::progress::report(crate::progress::Progress::Done);
        }
        if logits.is_empty() {
            return Err(self.model_error("empty prompt".into()));
        }
        self.timings = Timings {
            prompt_tokens: prompt.len(),
            prompt_read: rest.len(),
            prompt: started.elapsed(),
            ..Timings::default()
        };
        Ok(logits)
    }

    fn generate(
        &mut self,
        prompt: &[u32],
        budget: usize,
        sampler: &mut Sampler,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(String, usize, &'static str), ProviderError> {
        let call_started = Instant::now();
        let mut logits = self.read_prompt(prompt, cancel)?;
        let started = Instant::now();
        let mut text = String::new();
        let mut stream = Utf8Stream::default();
        let mut generated: Vec<u32> = Vec::new();
        let mut first_token = None;
        let mut emit = |bytes: &[u8], text: &mut String, stream: &mut Utf8Stream| {
            let piece = stream.push(bytes);
            if !piece.is_empty() {
                text.push_str(&piece);
                on_event(Event::Delta(piece));
            }
        };
        let finish = loop {
            if cancel.is_cancelled() {
                return Err(ProviderError::Cancelled);
            }
            let next = sampler.pick(&mut logits, &self.tokenizer, &generated);
            first_token.get_or_insert_with(|| call_started.elapsed());
            let Some(next) = next else {
                break "stop";
            };
            if self.tokenizer.is_stop(next) {
                break "stop";
            }
            generated.push(next);
            let bytes = self.tokenizer.token_bytes(next);
            sampler.advance(bytes);
            emit(bytes, &mut text, &mut stream);
            if sampler.json_done() {
                break "stop";
            }
            if generated.len() >= budget {
                break "length";
            }
            let threads = self.threads;
            self.model
                .forward_threads(&mut self.cache, &[next], Some(&mut logits), threads)
                .map_err(|e| self.engine_error(e))?;
        };
        if let Some(closing) = sampler.json_closing() {
            emit(&closing, &mut text, &mut stream);
        }
        let rest = stream.finish();
        if !rest.is_empty() {
            text.push_str(&rest);
            on_event(Event::Delta(rest));
        }
        self.timings.generated_tokens = generated.len();
        self.timings.constraint = sampler.constraint_time();
        self.timings.generation = started.elapsed();
        self.timings.first_token = first_token.unwrap_or_default();
        if let Some(saved) = &self.saved {
            saved.save(&self.cache.to_bytes(&self.fingerprint, saved.limit()));
        }
        Ok((text, generated.len(), finish))
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn chat(
        &mut self,
        request: &ChatRequest,
        cancel: &Cancel,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<Completion, ProviderError> {
        if !request.tools.is_empty() {
            return Err(ProviderError::Unsupported {
                provider: self.name.clone(),
                detail: "the local model cannot call tools (a 135M model does not produce tool \
                         calls reliably); point agents that need tools at an ollama or openai \
                         provider"
                    .into(),
            });
        }
        if request.messages.iter().any(|m| !m.images.is_empty()) {
            return Err(ProviderError::Unsupported {
                provider: self.name.clone(),
                detail: "the local model cannot read images".into(),
            });
        }
        let s = &request.sampling;
        let max_tokens = s
            .max_tokens
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .max(1);
        // Rendering runs the model file's own template, bounded by its fuel: a stop asked
        // for before or during it ends the call here.
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let (prompt, dropped) = self.prompt(&request.messages, max_tokens.min(self.context / 2))?;
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        if prompt.len() >= self.context {
            return Err(self.model_error(format!(
                "the prompt is {} tokens but the model's context holds {} (context_size), even \
                 after dropping the {dropped} oldest message(s): shorten the system prompt or the \
                 last message, or use a provider with a larger context",
                prompt.len(),
                self.context
            )));
        }
        if dropped > 0 {
            on_event(Event::Warning(format!(
                "{}: dropped the {dropped} oldest message(s) to fit the {}-token context",
                self.name, self.context
            )));
        }
        let budget = max_tokens.min(self.context - prompt.len());
        let json = s.response_format == Some(ResponseFormat::Json);
        let mut sampler = Sampler::new(s.temperature, s.top_p, json.then(|| self.vocab()));
        if let Some(schema) = &s.schema {
            sampler.schema = Some(self.schema_constraint(schema, budget)?);
        }
        let (text, generated, finish) =
            self.generate(&prompt, budget, &mut sampler, cancel, on_event)?;
        Ok(Completion {
            message: Message::new(Role::Assistant, text),
            usage: CallUsage {
                prompt_tokens: Some(prompt.len() as u64),
                completion_tokens: Some(generated as u64),
                ..CallUsage::default()
            },
            finish_reason: Some(finish.to_string()),
        })
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        self.tokenizer.encode_plain(text).ok().map(|ids| ids.len())
    }

    fn supports_tools(&self) -> bool {
        false
    }

    fn keep_conversation(&mut self, cache: Option<Box<dyn ConversationCache>>) {
        self.saved = cache;
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Picks each next token: masks (JSON), repeat penalty, then greedy or seeded sampling (the
/// arithmetic and random stream of candle's `LogitsProcessor`, which earlier builds used: the
/// same request still gets the same reply).
struct Sampler {
    rng: rand::rngs::StdRng,
    temperature: Option<f64>,
    top_p: Option<f64>,
    json: Option<JsonConstraint>,
    schema: Option<SchemaConstraint>,
}

/// JSON mode's grammar over one reply: where the reply is in it, the vocabulary its mask
/// walks, and the masks of the last states it was in.
struct JsonConstraint {
    state: JsonState,
    vocab: Arc<Vocab>,
    /// The mask of a state is the same whenever the reply is in it again, and a reply comes
    /// back to the same states (inside a string at the same depth, after a value's comma): up
    /// to [`KEPT_MASKS`] of them are kept, the oldest replaced first.
    masks: Vec<(JsonState, Vec<bool>)>,
    /// The slot the next new mask replaces once every slot is taken.
    oldest: usize,
    /// Time spent in the grammar so far.
    spent: Duration,
}

/// Masks kept in JSON mode (a mask is a flag per token: 48 KiB each for SmolLM2's 49,152).
const KEPT_MASKS: usize = 32;

impl JsonConstraint {
    /// The tokens the grammar allows from the current state: a kept mask, or the vocabulary's
    /// trie walked once with the grammar (control tokens have no bytes there), which allows
    /// what testing each token's bytes in turn would, at a fraction of its cost.
    fn allowed(&mut self) -> &[bool] {
        let state = self.state;
        let slot = match self.masks.iter().position(|(s, _)| *s == state) {
            Some(slot) => slot,
            None => {
                let slot = if self.masks.len() < KEPT_MASKS {
                    self.masks.push((state, Vec::new()));
                    self.masks.len() - 1
                } else {
                    let slot = self.oldest;
                    self.oldest = (slot + 1) % KEPT_MASKS;
                    slot
                };
                let (kept, mask) = &mut self.masks[slot];
                *kept = state;
                self.vocab.allowed_by(state, |s, b| s.push(b), mask);
                slot
            }
        };
        &self.masks[slot].1
    }
}

/// A schema's mask over the vocabulary, for one reply.
struct SchemaConstraint {
    mask: SchemaMask,
    vocab: Arc<Vocab>,
    allowed: Vec<bool>,
    /// The most tokens the reply may have.
    budget: usize,
    /// Time spent in the mask so far.
    spent: Duration,
}

/// The repeat penalty over the last [`REPEAT_WINDOW`] tokens.
fn penalize_repeats(scores: &mut [f32], recent: &[u32]) {
    let start = recent.len().saturating_sub(REPEAT_WINDOW);
    let mut seen = recent[start..].to_vec();
    seen.sort_unstable();
    seen.dedup();
    for id in seen {
        if let Some(s) = scores.get_mut(id as usize) {
            *s = if *s >= 0.0 {
                *s / REPEAT_PENALTY
            } else {
                *s * REPEAT_PENALTY
            };
        }
    }
}

impl Sampler {
    /// `json`: JSON mode, with the vocabulary its mask walks.
    fn new(temperature: Option<f64>, top_p: Option<f64>, json: Option<Arc<Vocab>>) -> Sampler {
        let temperature = temperature.unwrap_or(DEFAULT_TEMPERATURE);
        // 0 (or nonsense) means greedy; top_p of 1 or more means no nucleus cut.
        let temperature = (temperature.is_finite() && temperature >= 1e-7).then_some(temperature);
        let top_p = top_p.unwrap_or(DEFAULT_TOP_P).clamp(0.0, 1.0);
        let top_p = (top_p > 0.0 && top_p < 1.0).then_some(top_p);
        Sampler {
            rng: rand::rngs::StdRng::seed_from_u64(SEED),
            temperature,
            top_p,
            json: json.map(|vocab| JsonConstraint {
                state: JsonState::new(),
                vocab,
                masks: Vec::new(),
                oldest: 0,
                spent: Duration::ZERO,
            }),
            schema: None,
        }
    }

    /// The next token, or `None` when no token may follow.
    fn pick(
        &mut self,
        scores: &mut [f32],
        tokenizer: &GgufTokenizer,
        recent: &[u32],
    ) -> Option<u32> {
        let vocab = tokenizer.vocab_size().min(scores.len());
        scores[vocab..].fill(f32::NEG_INFINITY);
        if let Some(c) = &mut self.schema {
            let remaining = c.budget.saturating_sub(recent.len()).max(1);
            let started = Instant::now();
            c.mask.allowed(&c.vocab, remaining, &mut c.allowed);
            c.spent += started.elapsed();
            if !keep_allowed(&mut scores[..vocab], &c.allowed) {
                return None;
            }
            // Among what the schema allows, repeating is discouraged as in plain text: a
            // small model otherwise fills a list with one item again and again.
            penalize_repeats(scores, recent);
        } else if let Some(j) = &mut self.json {
            let started = Instant::now();
            // Greedy decoding checks the highest scores first (the same pick, without
            // walking the vocabulary; a control token's bytes are empty, so it is refused).
            let bytes_of = |id| tokenizer.token_bytes(id);
            let greedy = self.temperature.is_none();
            if let Some(id) = greedy
                .then(|| j.state.greedy(&mut scores[..vocab], bytes_of, argmax))
                .flatten()
            {
                j.spent += started.elapsed();
                return Some(id);
            }
            let any = keep_allowed(&mut scores[..vocab], j.allowed());
            j.spent += started.elapsed();
            if !any {
                return None;
            }
        } else {
            penalize_repeats(scores, recent);
        }
        let Some(temperature) = self.temperature else {
            return Some(argmax(scores));
        };
        let mut probs = softmax(scores, temperature);
        if let Some(p) = self.top_p {
            nucleus(&mut probs, p as f32);
        }
        let index = rand::distr::weighted::WeightedIndex::new(&probs).ok()?;
        Some(index.sample(&mut self.rng) as u32)
    }

    fn advance(&mut self, bytes: &[u8]) {
        if let Some(j) = &mut self.json {
            j.state.feed(bytes);
        }
        if let Some(c) = &mut self.schema {
            c.mask.advance(bytes);
        }
    }

    /// Time spent in JSON mode's grammar or the schema's mask so far.
    fn constraint_time(&self) -> Duration {
        self.json.as_ref().map_or(Duration::ZERO, |j| j.spent)
            + self.schema.as_ref().map_or(Duration::ZERO, |c| c.spent)
    }

    /// The JSON document or the schema's value is complete: the reply ends.
    fn json_done(&self) -> bool {
        self.json.as_ref().is_some_and(|j| j.state.is_done())
            || self.schema.as_ref().is_some_and(|c| c.mask.is_done())
    }

    /// In JSON mode, what completes the document when generation stopped early.
    fn json_closing(&self) -> Option<Vec<u8>> {
        self.json
            .as_ref()
            .map(|j| j.state.closing())
            .filter(|c| !c.is_empty())
    }
}

/// Leaves the scores of the tokens `allowed` and rules out the others; false when none is
/// left.
fn keep_allowed(scores: &mut [f32], allowed: &[bool]) -> bool {
    for (score, &ok) in scores.iter_mut().zip(allowed) {
        if !ok {
            *score = f32::NEG_INFINITY;
        }
    }
    !scores.iter().all(|s| *s == f32::NEG_INFINITY)
}

/// The first highest score's index.
fn argmax(scores: &[f32]) -> u32 {
    let mut best = 0;
    for (i, s) in scores.iter().enumerate() {
        if *s > scores[best] {
            best = i;
        }
    }
    best as u32
}

/// Probabilities of `scores / temperature`.
fn softmax(scores: &[f32], temperature: f64) -> Vec<f32> {
    let scale = (1.0 / temperature) as f32;
    let max = scores
        .iter()
        .fold(f32::NEG_INFINITY, |m, &s| m.max(s * scale));
    let mut probs: Vec<f32> = scores.iter().map(|&s| (s * scale - max).exp()).collect();
    let sum: f32 = probs.iter().sum();
    for p in &mut probs {
        *p /= sum;
    }
    probs
}

/// Keeps the most likely tokens until their probabilities add up to `top_p`; zeroes the rest.
fn nucleus(probs: &mut [f32], top_p: f32) {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&i, &j| probs[j].total_cmp(&probs[i]));
    let mut cumulative = 0.0;
    for i in order {
        if cumulative >= top_p {
            probs[i] = 0.0;
        } else {
            cumulative += probs[i];
        }
    }
}
