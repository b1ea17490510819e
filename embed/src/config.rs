//! The encoder's shape and the tokenizer's settings, as the file's header keeps them and
//! the tokenizer and the forward pass read them.

/// Columns of every matrix are a multiple of this (the widest kernel's block).
pub const COLUMN_BLOCK: usize = 32;

/// The encoder's shape and the tokenizer's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    /// Most tokens of one text, `[CLS]` and `[SEP]` included; longer texts are cut.
    pub max_tokens: usize,
    /// A word of more characters is one unknown token.
    pub max_word_chars: usize,
    pub cls: u32,
    pub sep: u32,
    pub unk: u32,
    /// BERT normalizer: lowercase the text.
    pub lowercase: bool,
    /// BERT normalizer: decompose (NFD) and drop nonspacing marks.
    pub strip_accents: bool,
    /// BERT normalizer: drop control characters, turn whitespace into spaces.
    pub clean_text: bool,
    /// BERT normalizer: put spaces around CJK ideographs.
    pub chinese_chars: bool,
    /// Epsilon of every layer norm.
    pub norm_eps: f32,
}

impl Config {
    pub(crate) fn to_words(self) -> [u32; 16] {
        let flags = u32::from(self.lowercase)
            | u32::from(self.strip_accents) << 1
            | u32::from(self.clean_text) << 2
            | u32::from(self.chinese_chars) << 3;
        [
            self.hidden as u32,
            self.layers as u32,
            self.heads as u32,
            self.ffn as u32,
            self.vocab as u32,
            self.max_positions as u32,
            self.type_vocab as u32,
            self.max_tokens as u32,
            self.max_word_chars as u32,
            self.cls,
            self.sep,
            self.unk,
            flags,
            self.norm_eps.to_bits(),
            0,
            0,
        ]
    }

    pub(crate) fn from_words(w: &[u32; 16]) -> Config {
        Config {
            hidden: w[0] as usize,
            layers: w[1] as usize,
            heads: w[2] as usize,
            ffn: w[3] as usize,
            vocab: w[4] as usize,
            max_positions: w[5] as usize,
            type_vocab: w[6] as usize,
            max_tokens: w[7] as usize,
            max_word_chars: w[8] as usize,
            cls: w[9],
            sep: w[10],
            unk: w[11],
            lowercase: w[12] & 1 != 0,
            strip_accents: w[12] & 2 != 0,
            clean_text: w[12] & 4 != 0,
            chinese_chars: w[12] & 8 != 0,
            norm_eps: f32::from_bits(w[13]),
        }
    }

    /// Why this shape cannot be run, if it cannot: sizes the kernels and the file's
    /// fields cannot hold.
    pub fn check(&self) -> std::result::Result<(), String> {
        let c = self;
        if c.hidden == 0 || c.heads == 0 || !c.hidden.is_multiple_of(c.heads) {
            return Err(format!(
                "hidden size {} is not a multiple of {} heads",
                c.hidden, c.heads
            ));
        }
        if !c.hidden.is_multiple_of(COLUMN_BLOCK)
            || !c.ffn.is_multiple_of(COLUMN_BLOCK)
            || c.ffn == 0
        {
            return Err(format!(
                "hidden size {} and feed-forward size {} must be multiples of {COLUMN_BLOCK}",
                c.hidden, c.ffn
            ));
        }
        if c.layers == 0 || c.layers > 64 || c.hidden > 8192 || c.ffn > 32768 {
            return Err(format!(
                "{} layers of {} ({} feed-forward) is not a sentence encoder",
                c.layers, c.hidden, c.ffn
            ));
        }
        if c.max_tokens < 3 || c.max_tokens > c.max_positions || c.type_vocab == 0 {
            return Err(format!(
                "window of {} tokens for {} positions, {} token types",
                c.max_tokens, c.max_positions, c.type_vocab
            ));
        }
        let ids = [c.cls, c.sep, c.unk];
        if c.vocab == 0 || c.vocab > 1 << 24 || ids.iter().any(|&i| i as usize >= c.vocab) {
            return Err(format!(
                "special token ids {ids:?} for a vocabulary of {}",
                c.vocab
            ));
        }
        if !(c.norm_eps >= 0.0 && c.norm_eps < 1.0) {
            return Err(format!("layer norm epsilon {}", c.norm_eps));
        }
        Ok(())
    }
}
