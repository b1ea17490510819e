//! The attention cache of one conversation: the tokens read so far and, for every layer, the
//! keys and values of each (in half precision, as llama.cpp keeps them).
//!
//! A prompt that starts with the tokens the cache holds reads only the rest
//! ([`Cache::reuse`]). Saved as bytes ([`Cache::to_bytes`]) the cache carries the fingerprint
//! of the model it was made with and a BLAKE3 hash of all of it; [`Cache::from_bytes`]
//! refuses bytes whose hash, fingerprint or shape differ, so a damaged, stale or planted file
//! is never read as keys and values. The cache is never the authority: a caller that finds
//! none, or a refused one, reads the whole prompt.

use crate::config::Config;
use crate::Error;

const MAGIC: &[u8; 8] = b"AXKVCAC1";
const VERSION: u32 = 1;
/// Magic, version, fingerprint, layers, width, tokens.
const HEADER: usize = 8 + 4 + 32 + 4 + 4 + 4;
const HASH: usize = 32;

pub struct Cache {
    tokens: Vec<u32>,
    /// Per layer: keys, then values, `tokens.len() × kv_width` each.
    layers: Vec<(Vec<u16>, Vec<u16>)>,
    kv_width: usize,
}

impl Cache {
    /// An empty cache for a model of shape `config`.
    pub fn new(config: &Config) -> Cache {
        Cache {
            tokens: Vec::new(),
            layers: (0..config.layers)
                .map(|_| (Vec::new(), Vec::new()))
                .collect(),
            kv_width: config.kv_width(),
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tokens whose keys and values are held, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Keeps the first `n` positions.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.tokens.len() {
            return;
        }
        self.tokens.truncate(n);
        for (k, v) in &mut self.layers {
            k.truncate(n * self.kv_width);
            v.truncate(n * self.kv_width);
        }
    }

    /// Keeps the longest start this cache shares with `prompt`, short of its last token
    /// (whose reading gives the scores of the next), and returns how many tokens that is:
    /// the prompt's reading starts there.
    pub fn reuse(&mut self, prompt: &[u32]) -> usize {
        let shared = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        self.truncate(shared);
        shared
    }

    /// Bytes a saved cache of `tokens` positions takes.
    pub fn saved_size(config: &Config, tokens: usize) -> usize {
        HEADER + tokens * Cache::per_token(config.layers, config.kv_width()) + HASH
    }

    fn per_token(layers: usize, kv_width: usize) -> usize {
        4 + layers * kv_width * 2 * 2
    }

    /// The cache as bytes, its first positions only when all of them would take more than
    /// `max_bytes` (a shorter start is still a start a later prompt can reuse).
    pub fn to_bytes(&self, fingerprint: &[u8; 32], max_bytes: usize) -> Vec<u8> {
        let per = Cache::per_token(self.layers.len(), self.kv_width);
        let n = self
            .tokens
            .len()
            .min(max_bytes.saturating_sub(HEADER + HASH) / per);
        let w = self.kv_width;
        let mut out = Vec::with_capacity(HEADER + n * per + HASH);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(fingerprint);
        out.extend_from_slice(&(self.layers.len() as u32).to_le_bytes());
        out.extend_from_slice(&(w as u32).to_le_bytes());
        out.extend_from_slice(&(n as u32).to_le_bytes());
        for t in &self.tokens[..n] {
            out.extend_from_slice(&t.to_le_bytes());
        }
        for (k, v) in &self.layers {
            for x in k[..n * w].iter().chain(&v[..n * w]) {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        let hash = blake3::hash(&out);
        out.extend_from_slice(hash.as_bytes());
        out
    }

    /// A cache saved by [`Cache::to_bytes`] for this model (`config`, `fingerprint`), after
    /// checking its hash; an error says why the bytes are refused.
    pub fn from_bytes(
        bytes: &[u8],
        config: &Config,
        fingerprint: &[u8; 32],
    ) -> Result<Cache, Error> {
        let bad = |why: &str| Err(Error::Format(format!("attention cache: {why}")));
        if bytes.len() < HEADER + HASH || &bytes[..8] != MAGIC {
            return bad("not an attention cache");
        }
        let (body, hash) = bytes.split_at(bytes.len() - HASH);
        if blake3::hash(body).as_bytes() != hash {
            return bad("its hash does not match (damaged)");
        }
        let word =
            |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        if word(8) != VERSION {
            return bad("another version");
        }
        if &body[12..44] != fingerprint {
            return bad("made with another model file");
        }
        let (layers, w, n) = (word(44) as usize, word(48) as usize, word(52) as usize);
        if layers != config.layers || w != config.kv_width() {
            return bad("made for another shape of model");
        }
        if body.len() != HEADER + n * Cache::per_token(layers, w) || n > config.context {
            return bad("its length does not match its count of tokens");
        }
        let mut at = HEADER;
        let tokens: Vec<u32> = (0..n).map(|i| word(at + 4 * i)).collect();
        if tokens.iter().any(|&t| t as usize >= config.vocab) {
            return bad("a token beyond the vocabulary");
        }
        at += 4 * n;
        let mut halves = |count: usize| {
            let out: Vec<u16> = body[at..at + 2 * count]
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect();
            at += 2 * count;
            out
        };
        let layers = (0..layers)
            .map(|_| (halves(n * w), halves(n * w)))
            .collect();
        Ok(Cache {
            tokens,
            layers,
            kv_width: w,
        })
    }

    pub(crate) fn check_shape(&self, config: &Config) -> Result<(), Error> {
        if self.layers.len() != config.layers || self.kv_width != config.kv_width() {
            return Err(Error::Input(
                "the attention cache was made for another model".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn push_tokens(&mut self, tokens: &[u32]) {
        self.tokens.extend_from_slice(tokens);
    }

    /// Adds the keys and values of new positions to layer `l` (the positions are counted by
    /// [`Cache::push_tokens`] once every layer has them).
    pub(crate) fn push_kv(&mut self, l: usize, k: &[u16], v: &[u16]) {
        let (keys, values) = &mut self.layers[l];
        keys.extend_from_slice(k);
        values.extend_from_slice(v);
    }

    pub(crate) fn layer(&self, l: usize) -> (&[u16], &[u16]) {
        let (k, v) = &self.layers[l];
        (k, v)
    }
}
