//! The llama architecture's forward pass over a mapped GGUF file.

use std::fs::File;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use crate::cache::Cache;
use crate::config::Config;
use crate::gguf::{self, Gguf, TensorInfo};
use crate::kernel::{Isa, MatRef};
use crate::quant::{self, Acts, Kind};
use crate::Error;

mod pass;
mod share;

use self::pass::Pass;
use self::share::{Alone, Gang, Share, Workers};

/// Where a matrix's bytes are: in the mapped file, or widened at load.
#[derive(Clone, Copy, Debug)]
enum Src {
    Mapped { start: usize, len: usize },
    Owned(usize),
}

#[derive(Clone, Copy, Debug)]
struct Mat {
    kind: Kind,
    rows: usize,
    cols: usize,
    src: Src,
}

struct Layer {
    attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    q: Mat,
    k: Mat,
    v: Mat,
    o: Mat,
    gate: Mat,
    up: Mat,
    down: Mat,
}

/// A model ready to run: the mapped file, its parsed header and the layout of its weights.
pub struct Model {
    map: memmap2::Mmap,
    gguf: Gguf,
    owned: Vec<Vec<u8>>,
    config: Config,
    embedding: Mat,
    output: Mat,
    output_norm: Vec<f32>,
    layers: Vec<Layer>,
    /// `base^(-2j / head_dim)` for each pair `j` of a head's values.
    inv_freq: Vec<f32>,
    isa: Isa,
    /// The threads that share a pass with the caller (see [`Model::forward_threads`]).
    workers: Mutex<Workers>,
}

impl Model {
    /// Maps and checks the GGUF file at `path`.
    pub fn open(path: &Path) -> Result<Model, Error> {
        let file = File::open(path)?;
        let map = map(&file)?;
        Model::from_map(map, Isa::detect())
    }

    /// The same, with the kernels of `isa` (tests compare the plain ones with the fastest).
    pub fn open_with(path: &Path, isa: Isa) -> Result<Model, Error> {
        Model::from_map(map(&File::open(path)?)?, isa)
    }

    fn from_map(map: memmap2::Mmap, isa: Isa) -> Result<Model, Error> {
        let gguf = gguf::parse(&map)?;
        let config = Config::read(&gguf)?;
        let mut owned = Vec::new();
        let mut loader = Loader {
            map: &map,
            gguf: &gguf,
            owned: &mut owned,
        };
        let c = &config;
        let (e, q, kv, ff) = (
            c.embedding,
            c.heads * c.head_dim,
            c.kv_width(),
            c.feed_forward,
        );
        let embedding = loader.matrix("token_embd.weight", c.vocab, e)?;
        let output = match gguf.tensor("output.weight") {
            Some(_) => loader.matrix("output.weight", c.vocab, e)?,
            None => embedding,
        };
        let output_norm = loader.vector("output_norm.weight", e)?;
        let mut layers = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let name = |n: &str| format!("blk.{i}.{n}.weight");
            layers.push(Layer {
                attn_norm: loader.vector(&name("attn_norm"), e)?,
                ffn_norm: loader.vector(&name("ffn_norm"), e)?,
                q: loader.matrix(&name("attn_q"), q, e)?,
                k: loader.matrix(&name("attn_k"), kv, e)?,
                v: loader.matrix(&name("attn_v"), kv, e)?,
                o: loader.matrix(&name("attn_output"), e, q)?,
                gate: loader.matrix(&name("ffn_gate"), ff, e)?,
                up: loader.matrix(&name("ffn_up"), ff, e)?,
                down: loader.matrix(&name("ffn_down"), e, ff)?,
            });
        }
        let inv_freq = (0..c.head_dim / 2)
            .map(|j| 1.0 / c.rope_base.powf((2 * j) as f32 / c.head_dim as f32))
            .collect();
        Ok(Model {
            map,
            gguf,
            owned,
            config,
            embedding,
            output,
            output_norm,
            layers,
            inv_freq,
            isa,
            workers: Mutex::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The file's metadata and tensor directory (the tokenizer and the chat template read it).
    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    /// The bytes of the file's header: everything before the first tensor.
    pub fn header_bytes(&self) -> &[u8] {
        let first = self.gguf.tensors.iter().map(|t| t.start).min();
        &self.map[..first.unwrap_or(self.map.len())]
    }

    /// The kernels in use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// How many matrices were converted at load: widened to Q8_0, or Q4_K repacked as Q4_1
    /// (0 for files of Q4_0, Q4_1, Q8_0).
    pub fn widened(&self) -> usize {
        self.owned.len()
    }

    fn mat(&self, m: &Mat) -> MatRef<'_> {
        let bytes = match m.src {
            Src::Mapped { start, len } => &self.map[start..start + len],
            Src::Owned(i) => &self.owned[i],
        };
        MatRef {
            kind: m.kind,
            rows: m.rows,
            cols: m.cols,
            bytes,
        }
    }

    /// Reads `tokens` after the positions `cache` holds, adding their keys and values to it;
    /// with `logits`, fills it with the scores of the vocabulary for the last token's next.
    pub fn forward(
        &self,
        cache: &mut Cache,
        tokens: &[u32],
        logits: Option<&mut Vec<f32>>,
    ) -> Result<(), Error> {
        self.forward_threads(cache, tokens, logits, 1)
    }

    /// [`Model::forward`] on up to `threads` threads. A batch's threads each take whole groups
    /// of its tokens through whole layers, meeting about once per layer (see the module
    /// `pass`), so a batch of `n` tokens keeps at most `n / 8` threads busy. A single token
    /// (generation) shares the rows of each matrix product and the heads of the attention
    /// instead, when its recent tokens were faster that way (see the module `share`). The
    /// threads beside the caller live as long as the model. The results are the same, bit for
    /// bit, whatever the number of threads; while another pass holds the threads, this one
    /// runs on the calling thread alone.
    pub fn forward_threads(
        &self,
        cache: &mut Cache,
        tokens: &[u32],
        logits: Option<&mut Vec<f32>>,
        threads: usize,
    ) -> Result<(), Error> {
        let c = &self.config;
        cache.check_shape(c)?;
        let start = cache.len();
        if start + tokens.len() > c.context {
            return Err(Error::Input(format!(
                "{} positions are more than the model's context of {}",
                start + tokens.len(),
                c.context
            )));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(Error::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.vocab
            )));
        }
        if tokens.is_empty() {
            return Ok(());
        }
        let one = tokens.len() == 1;
        let pass = Pass::new(self, cache, tokens, threads);
        let mut workers = (threads > 1 && (one || pass.threads() > 1))
            .then(|| self.workers.try_lock().ok())
            .flatten();
        match workers.as_deref_mut() {
            // A single token has no groups to share: its steps' parts are shared instead, when
            // the pace of the last tokens says it is faster.
            Some(Workers { pool, pace }) if one => {
                let started = Instant::now();
                let shared = pace.share();
                if shared {
                    let mut gang = Gang::new(pool, threads - 1);
                    pass.run_sharing(0, &mut gang);
                    self.finish(pass.finish(), cache, tokens, logits, &mut gang);
                } else {
                    pass.run(0);
                    self.finish(pass.finish(), cache, tokens, logits, &mut Alone::default());
                }
                pace.record(shared, started.elapsed());
            }
            Some(Workers { pool, .. }) => {
                pool.run(pass.threads() - 1, &|i| pass.run(i));
                self.finish(pass.finish(), cache, tokens, logits, &mut Alone::default());
            }
            None => {
                pass.run(0);
                self.finish(pass.finish(), cache, tokens, logits, &mut Alone::default());
            }
        }
        Ok(())
    }

    /// Adds the keys and values of a pass (as [`Pass::finish`] returns them) to `cache`; with
    /// `logits`, fills it with the scores of the vocabulary after the pass's last token.
    fn finish(
        &self,
        (kv, last): (Vec<pass::Kv>, Vec<f32>),
        cache: &mut Cache,
        tokens: &[u32],
        logits: Option<&mut Vec<f32>>,
        share: &mut dyn Share,
    ) {
        let c = &self.config;
        let groups = kv.len() / c.layers;
        for (l, layer) in kv.chunks(groups).enumerate() {
            for group in layer {
                cache.push_kv(l, &group.keys, &group.values);
            }
        }
        cache.push_tokens(tokens);
        if let Some(logits) = logits {
            let mut normed = vec![0f32; c.embedding];
            pass::rms_norm(&last, &self.output_norm, c.rms_eps, &mut normed);
            let mut acts = Acts::default();
            acts.quantize(&normed, 1, c.embedding);
            logits.clear();
            logits.resize(c.vocab, 0.0);
            share.matmul(self.isa, &self.mat(&self.output), &acts, logits);
        }
    }

    /// `(cos, sin)` of every pair of every new position.
    fn rope_table(&self, start: usize, n: usize) -> Vec<(f32, f32)> {
        let mut out = Vec::with_capacity(n * self.inv_freq.len());
        for p in start..start + n {
            for &f in &self.inv_freq {
                let theta = p as f32 * f;
                out.push((theta.cos(), theta.sin()));
            }
        }
        out
    }
}

#[expect(
    unsafe_code,
    reason = "mapping the model file read-only: model files are installed by rename and a \
              running model never writes to its file"
)]
fn map(file: &File) -> Result<memmap2::Mmap, Error> {
    // SAFETY: the map is read-only and private to this process; model files are replaced by
    // rename (`models fetch`), never written in place, so its bytes do not change under us.
    Ok(unsafe { memmap2::Mmap::map(file) }?)
}

/// Lets the kernel drop the pages of `len` bytes at `start` of `map` from this process: the
/// bytes of a matrix converted at load, which nothing reads again. Without this they stay
/// in the process's memory beside the converted copy (a whole Q6_K model would take its
/// file's size on top of the copy's).
#[cfg(unix)]
#[expect(
    unsafe_code,
    reason = "madvise(MADV_DONTNEED) on the read-only file mapping after a matrix is converted"
)]
fn release(map: &memmap2::Mmap, start: usize, len: usize) {
    // SAFETY: the map is a private, read-only mapping of a file that is never written in
    // place (see `map`), so no page of it was ever modified: a dropped page that is touched
    // again (a neighbouring tensor sharing its first or last page) is read back from the
    // file with the same bytes. No reference into the range outlives the conversion.
    let done =
        unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
    // A refusal leaves the pages where they are, which costs memory and nothing else.
    drop(done);
}

#[cfg(not(unix))]
fn release(_map: &memmap2::Mmap, _start: usize, _len: usize) {}

/// Finds tensors by name, checks their shapes, and converts the formats the kernels do not run.
struct Loader<'a> {
    map: &'a memmap2::Mmap,
    gguf: &'a Gguf,
    owned: &'a mut Vec<Vec<u8>>,
}

impl Loader<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo, Error> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| Error::Format(format!("tensor {name} is missing")))
    }

    /// A matrix of `rows` rows of `cols` values.
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Mat, Error> {
        let t = self.info(name)?;
        if t.dims != [cols as u64, rows as u64] {
            return Err(Error::Format(format!(
                "tensor {name} has dimensions {:?}, not [{cols}, {rows}]",
                t.dims
            )));
        }
        if let Some(kind) = Kind::from_ggml(t.kind) {
            return Ok(Mat {
                kind,
                rows,
                cols,
                src: Src::Mapped {
                    start: t.start,
                    len: t.len,
                },
            });
        }
        let bytes = &self.map[t.start..t.start + t.len];
        let (kind, widened) = crate::widen::convert(name, t.kind, bytes, rows, cols)?;
        release(self.map, t.start, t.len);
        self.owned.push(widened);
        Ok(Mat {
            kind,
            rows,
            cols,
            src: Src::Owned(self.owned.len() - 1),
        })
    }

    /// A vector of `len` values (a norm's weights), widened to f32.
    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, Error> {
        let t = self.info(name)?;
        if t.dims != [len as u64] {
            return Err(Error::Format(format!(
                "tensor {name} has dimensions {:?}, not [{len}]",
                t.dims
            )));
        }
        let mut out = vec![0f32; len];
        match t.kind {
            0 | 1 | 30 => {
                quant::widen_row(t.kind, &self.map[t.start..t.start + t.len], &mut out);
                Ok(out)
            }
            other => Err(Error::Unsupported(format!(
                "tensor {name} is stored as {}; norms in F32, F16 or BF16 are supported",
                gguf::type_name(other)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::tests::Builder;
    use std::sync::PoisonError;

    /// A small random llama model in the formats the engine runs and widens.
    pub(crate) fn tiny_model(dir: &Path) -> std::path::PathBuf {
        let (e, ff, vocab, kv) = (64usize, 96usize, 40usize, 32usize);
        let mut seed = 7u32;
        let mut random = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    ((seed >> 16) as f32 / 32_768.0 - 1.0) * 0.5
                })
                .collect()
        };
        let q8 = |v: Vec<f32>| {
            let mut out = Vec::new();
            quant::quantize_q8_0(&v, &mut out);
            out
        };
        let f32s = |v: Vec<f32>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let f16s = |v: Vec<f32>| {
            v.iter()
                .flat_map(|&x| quant::f32_to_f16(x).to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let mut b = Builder::default()
            .string("general.architecture", "llama")
            .u32("llama.block_count", 2)
            .u32("llama.embedding_length", e as u32)
            .u32("llama.feed_forward_length", ff as u32)
            .u32("llama.attention.head_count", 4)
            .u32("llama.attention.head_count_kv", 2)
            .u32("llama.context_length", 256)
            .u32("llama.rope.dimension_count", 16)
            .f32("llama.rope.freq_base", 10_000.0)
            .f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
            .tensor(
                "token_embd.weight",
                &[e as u64, vocab as u64],
                8,
                q8(random(e * vocab)),
            )
            .tensor("output_norm.weight", &[e as u64], 0, f32s(vec![1.0; e]));
        for l in 0..2 {
            let name = |n: &str| format!("blk.{l}.{n}.weight");
            let norm = f32s(random(e).iter().map(|v| 1.0 + v).collect());
            b = b
                .tensor(&name("attn_norm"), &[e as u64], 0, norm.clone())
                .tensor(&name("ffn_norm"), &[e as u64], 0, norm)
                .tensor(&name("attn_q"), &[e as u64, e as u64], 8, q8(random(e * e)))
                .tensor(
                    &name("attn_k"),
                    &[e as u64, kv as u64],
                    8,
                    q8(random(e * kv)),
                )
                .tensor(
                    &name("attn_v"),
                    &[e as u64, kv as u64],
                    1,
                    f16s(random(e * kv)),
                )
                .tensor(
                    &name("attn_output"),
                    &[e as u64, e as u64],
                    8,
                    q8(random(e * e)),
                )
                .tensor(
                    &name("ffn_gate"),
                    &[e as u64, ff as u64],
                    8,
                    q8(random(e * ff)),
                )
                .tensor(
                    &name("ffn_up"),
                    &[e as u64, ff as u64],
                    0,
                    f32s(random(e * ff)),
                )
                .tensor(
                    &name("ffn_down"),
                    &[ff as u64, e as u64],
                    8,
                    q8(random(e * ff)),
                );
        }
        let path = dir.join("tiny.gguf");
        std::fs::write(&path, b.build()).unwrap_or_else(|e| panic!("{e}"));
        path
    }

    fn logits_of(model: &Model, cache: &mut Cache, tokens: &[u32]) -> Vec<f32> {
        let mut logits = Vec::new();
        model
            .forward(cache, tokens, Some(&mut logits))
            .unwrap_or_else(|e| panic!("{e}"));
        logits
    }

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-3 * (1.0 + x.abs()))
    }

    #[test]
    fn batches_token_by_token_and_a_reused_prefix_give_the_same_scores() {
        let dir = tempfile_dir();
        let model = Model::open(&tiny_model(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(model.widened(), 4, "the f16 and f32 matrices are widened");
        let prompt: Vec<u32> = vec![3, 17, 5, 5, 39, 0, 12, 8, 21];
        let whole = logits_of(&model, &mut Cache::new(model.config()), &prompt);

        let mut one_by_one = Cache::new(model.config());
        let mut last = Vec::new();
        for t in &prompt {
            last = logits_of(&model, &mut one_by_one, &[*t]);
        }
        assert!(close(&whole, &last));

        // A cache of another conversation that shares the first four tokens.
        let mut cache = Cache::new(model.config());
        logits_of(&model, &mut cache, &[3, 17, 5, 5, 1, 2, 3]);
        let start = cache.reuse(&prompt);
        assert_eq!((start, cache.len()), (4, 4));
        let reused = logits_of(&model, &mut cache, &prompt[start..]);
        assert!(close(&whole, &reused));

        let plain =
            Model::open_with(&tiny_model(dir.path()), Isa::Plain).unwrap_or_else(|e| panic!("{e}"));
        let by_plain = logits_of(&plain, &mut Cache::new(plain.config()), &prompt);
        assert!(close(&whole, &by_plain));
    }

    /// Reads `prompt` in batches of `batch` tokens on `threads` threads: the last scores and
    /// the cache as bytes.
    fn read(model: &Model, prompt: &[u32], batch: usize, threads: usize) -> (Vec<f32>, Vec<u8>) {
        let mut cache = Cache::new(model.config());
        let mut logits = Vec::new();
        for chunk in prompt.chunks(batch) {
            model
                .forward_threads(&mut cache, chunk, Some(&mut logits), threads)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        (logits, cache.to_bytes(&[0; 32], usize::MAX))
    }

    #[test]
    fn the_thread_count_and_the_batches_change_no_bit_of_the_scores_or_the_cache() {
        let dir = tempfile_dir();
        let path = tiny_model(dir.path());
        let prompt: Vec<u32> = (0..117u32).map(|i| (i * 7 + i / 5) % 40).collect();
        for isa in [Isa::Plain, Isa::detect()] {
            let model = Model::open_with(&path, isa).unwrap_or_else(|e| panic!("{e}"));
            // One thread, one token at a time: what generation does.
            let (one_by_one, cache) = read(&model, &prompt, 1, 1);
            for (batch, threads) in [
                (16, 1),
                (117, 1),
                (1, 2),
                (16, 2),
                (48, 2),
                (40, 3),
                (117, 3),
            ] {
                let (logits, bytes) = read(&model, &prompt, batch, threads);
                assert!(
                    logits == one_by_one && bytes == cache,
                    "{}: batches of {batch} on {threads} threads differ",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn tokens_read_one_at_a_time_on_shared_steps_change_no_bit() {
        let dir = tempfile_dir();
        let path = tiny_model(dir.path());
        let prompt: Vec<u32> = (0..60u32).map(|i| (i * 11 + i / 3) % 40).collect();
        for isa in [Isa::Plain, Isa::detect()] {
            let model = Model::open_with(&path, isa).unwrap_or_else(|e| panic!("{e}"));
            let (alone, cache) = read(&model, &prompt, 1, 1);
            for (threads, shared) in [(2, true), (3, true), (2, false), (4, true)] {
                model
                    .workers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pace
                    .fixed = Some(shared);
                let (logits, bytes) = read(&model, &prompt, 1, threads);
                assert!(
                    logits == alone && bytes == cache,
                    "{}: {threads} threads, shared {shared}, differ",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn passes_from_two_threads_at_once_share_the_model() {
        let dir = tempfile_dir();
        let model = Model::open(&tiny_model(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        let prompt: Vec<u32> = (0..64u32).map(|i| (i * 11) % 40).collect();
        let alone = read(&model, &prompt, 32, 2);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| read(&model, &prompt, 32, 2));
            let b = s.spawn(|| read(&model, &prompt, 32, 2));
            (a.join(), b.join())
        });
        let (a, b) = (
            a.unwrap_or_else(|_| panic!()),
            b.unwrap_or_else(|_| panic!()),
        );
        assert!(a == alone && b == alone);
    }

    #[test]
    fn a_saved_cache_reads_back_only_when_whole_and_for_its_model() {
        let dir = tempfile_dir();
        let model = Model::open(&tiny_model(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        let mut cache = Cache::new(model.config());
        logits_of(&model, &mut cache, &[1, 2, 3, 4, 5]);
        let print = [9u8; 32];
        let bytes = cache.to_bytes(&print, usize::MAX);
        assert_eq!(bytes.len(), Cache::saved_size(model.config(), 5));
        let mut back =
            Cache::from_bytes(&bytes, model.config(), &print).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.tokens(), [1, 2, 3, 4, 5]);
        let prompt = [1, 2, 3, 4, 5, 6];
        let start = back.reuse(&prompt);
        let from_saved = logits_of(&model, &mut back, &prompt[start..]);
        let fresh = logits_of(&model, &mut Cache::new(model.config()), &prompt);
        assert!(close(&from_saved, &fresh));

        // One flipped byte, another model, a cut file: refused.
        let mut flipped = bytes.clone();
        flipped[70] ^= 1;
        assert!(Cache::from_bytes(&flipped, model.config(), &print).is_err());
        assert!(Cache::from_bytes(&bytes, model.config(), &[8u8; 32]).is_err());
        assert!(Cache::from_bytes(&bytes[..bytes.len() - 1], model.config(), &print).is_err());
        // Bounded: a limit keeps the first positions that fit.
        let small = cache.to_bytes(&print, Cache::saved_size(model.config(), 2) + 10);
        let back =
            Cache::from_bytes(&small, model.config(), &print).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.tokens(), [1, 2]);
    }

    #[test]
    fn tokens_beyond_the_vocabulary_or_the_context_are_refused() {
        let dir = tempfile_dir();
        let model = Model::open(&tiny_model(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        let mut cache = Cache::new(model.config());
        assert!(model.forward(&mut cache, &[40], None).is_err());
        assert!(model.forward(&mut cache, &vec![1; 257], None).is_err());
        assert!(cache.is_empty());
    }

    fn tempfile_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"))
    }
}
