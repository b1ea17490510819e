//! The shape of a llama model, read from its GGUF metadata and held to bounds a hostile
//! file cannot exceed.

use crate::gguf::{self, Gguf};
use crate::quant::BLOCK;
use crate::Error;

/// Positions one conversation may hold.
pub const MAX_CONTEXT: usize = 32_768;
/// Bounds a hostile file's shape must keep (the largest llama models are within them).
const MAX_LAYERS: usize = 512;
const MAX_WIDTH: usize = 65_536;
const MAX_VOCAB: usize = 1 << 20;

/// The shape of a llama model, from its metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub layers: usize,
    pub embedding: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub feed_forward: usize,
    pub vocab: usize,
    pub rope_base: f32,
    pub rms_eps: f32,
    /// Positions the model was trained for (at most [`MAX_CONTEXT`]).
    pub context: usize,
}

impl Config {
    /// Values of one position's keys (or values) in one layer.
    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    pub(crate) fn read(g: &Gguf) -> Result<Config, Error> {
        let arch = g.string("general.architecture").unwrap_or_default();
        if arch != "llama" {
            return Err(Error::Unsupported(format!(
                "architecture `{arch}` is not supported (the local provider runs GGUF files of \
                 the llama architecture with a byte-level BPE vocabulary, such as SmolLM2 and \
                 Llama 3)"
            )));
        }
        let need = |key: &str| -> Result<usize, Error> {
            g.u32(key)
                .map(|v| v as usize)
                .ok_or_else(|| Error::Format(format!("metadata `{key}` is missing")))
        };
        let embedding = need("llama.embedding_length")?;
        let heads = need("llama.attention.head_count")?;
        let kv_heads = g
            .u32("llama.attention.head_count_kv")
            .map_or(heads, |v| v as usize);
        let vocab = match g.tensor("token_embd.weight") {
            Some(t) if t.dims.len() == 2 => t.dims[1] as usize,
            _ => return Err(Error::Format("tensor token_embd.weight is missing".into())),
        };
        let config = Config {
            layers: need("llama.block_count")?,
            embedding,
            heads,
            kv_heads,
            head_dim: embedding.checked_div(heads).unwrap_or(0),
            feed_forward: need("llama.feed_forward_length")?,
            vocab,
            rope_base: g
                .get("llama.rope.freq_base")
                .and_then(gguf::Value::to_f32)
                .unwrap_or(10_000.0),
            rms_eps: g
                .get("llama.attention.layer_norm_rms_epsilon")
                .and_then(gguf::Value::to_f32)
                .unwrap_or(1e-5),
            context: g
                .u32("llama.context_length")
                .map_or(4096, |v| v as usize)
                .min(MAX_CONTEXT),
        };
        config.check(g)?;
        Ok(config)
    }

    fn check(&self, g: &Gguf) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Format(format!("the model's shape: {what}")));
        if self.layers == 0 || self.layers > MAX_LAYERS {
            return bad(format!("{} layers", self.layers));
        }
        for (name, v) in [
            ("embedding_length", self.embedding),
            ("feed_forward_length", self.feed_forward),
        ] {
            if v == 0 || v > MAX_WIDTH || !v.is_multiple_of(BLOCK) {
                return bad(format!("{name} {v} (a multiple of {BLOCK} is needed)"));
            }
        }
        if self.heads == 0
            || self.kv_heads == 0
            || !self.embedding.is_multiple_of(self.heads)
            || !self.heads.is_multiple_of(self.kv_heads)
            || !self.head_dim.is_multiple_of(2)
        {
            return bad(format!(
                "{} heads and {} key/value heads over {} values",
                self.heads, self.kv_heads, self.embedding
            ));
        }
        if let Some(rope) = g.u32("llama.rope.dimension_count") {
            if rope as usize != self.head_dim {
                return Err(Error::Unsupported(format!(
                    "rotary embeddings over {rope} of {} values per head are not supported yet",
                    self.head_dim
                )));
            }
        }
        if self.vocab == 0 || self.vocab > MAX_VOCAB {
            return bad(format!("a vocabulary of {}", self.vocab));
        }
        if g.get("llama.expert_count")
            .and_then(gguf::Value::to_u32)
            .is_some_and(|n| n > 1)
        {
            return Err(Error::Unsupported(
                "mixture-of-experts models are not supported yet".into(),
            ));
        }
        Ok(())
    }
}
