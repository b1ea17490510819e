//! The model's byte-level BPE tokenizer, rebuilt from GGUF metadata.
//!
//! GGUF files of GPT-2-style vocabularies carry the tokens, the merges and each token's type,
//! plus a pre-tokenizer name (`tokenizer.ggml.pre`). candle's generic rebuild assumes GPT-2's
//! pre-tokenizer (prefix space, digits grouped), which gives wrong ids for SmolLM2 ("smollm":
//! every digit alone, byte-level regex split, no prefix space). We assemble the `tokenizers`
//! pipeline ourselves (the crate the embedder's reference engine builds too).
//!
//! Decoding does not go through `tokenizers`: each id maps to its raw bytes, so the JSON mask
//! can check byte continuations and the stream can hold back a UTF-8 character split across
//! tokens.

use std::collections::HashMap;

use axocoatl_infer::gguf::{Gguf as Content, Value};
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// GGUF token types (llama.cpp's `llama_token_type`).
const TYPE_CONTROL: u32 = 3;
const TYPE_USER_DEFINED: u32 = 4;

/// Pre-tokenizers we reproduce (llama.cpp's names). Others would tokenize silently wrong, so
/// they are refused.
const GPT2_STYLE: &[&str] = &["gpt2", "default"];
const DIGITS_SPLIT: &[&str] = &["smollm"];
const LLAMA3: &[&str] = &["llama-bpe", "llama3", "smaug-bpe"];
/// Llama 3's split (its tokenizer.json), before the byte-level mapping.
const LLAMA3_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub struct GgufTokenizer {
    /// Parses special tokens (`<|im_start|>`) in text: for the chat template's own text.
    with_specials: Tokenizer,
    /// Treats special-token text as plain text: for message contents, so a message cannot
    /// smuggle in control tokens.
    plain: Tokenizer,
    /// Raw bytes of every id; empty for control tokens.
    bytes: Vec<Vec<u8>>,
    control: Vec<bool>,
    /// Ids that end a reply: eos, eot, `<|im_end|>`, `<|endoftext|>` where present.
    stop: Vec<u32>,
    pub bos: Option<String>,
    pub eos: Option<String>,
}

impl GgufTokenizer {
    pub fn from_gguf(ct: &Content) -> Result<GgufTokenizer, String> {
        let model = string_value(ct, "tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(format!(
                "tokenizer model `{model}` is not supported (only byte-level BPE, `gpt2`)"
            ));
        }
        let pre = match ct.get("tokenizer.ggml.pre") {
            Some(v) => v
                .as_str()
                .ok_or("metadata `tokenizer.ggml.pre` is not a string")?
                .to_string(),
            None => "default".to_string(),
        };
        let tokens = string_array(ct, "tokenizer.ggml.tokens")?;
        let merges = string_array(ct, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_string(), b.to_string())),
                None => Err(format!("invalid merge `{m}` in tokenizer.ggml.merges")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let types = match ct.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .as_array()
                .ok_or("metadata `tokenizer.ggml.token_type` is not an array")?
                .iter()
                .map(to_u32)
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![1; tokens.len()],
        };
        if types.len() != tokens.len() {
            return Err(
                "tokenizer.ggml.token_type and tokenizer.ggml.tokens differ in length".into(),
            );
        }

        let pre_tokenizer = pre_tokenizer(&pre)?;

        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| format!("cannot build the BPE model: {e}"))?;
        let mut with_specials = Tokenizer::new(bpe);
        with_specials.with_pre_tokenizer(Some(pre_tokenizer));
        let added: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, &ty)| ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED)
            .map(|(t, &ty)| AddedToken::from(t.clone(), ty == TYPE_CONTROL))
            .collect();
        with_specials
            .add_special_tokens(added)
            .map_err(|e| format!("cannot register special tokens: {e}"))?;
        let mut plain = with_specials.clone();
        plain.set_encode_special_tokens(true);

        let unicode_to_byte = unicode_to_byte();
        let bytes = tokens
            .iter()
            .zip(&types)
            .map(|(t, &ty)| match ty {
                TYPE_CONTROL => Vec::new(),
                // llama.cpp stores user-defined tokens as plain text, not byte-mapped.
                TYPE_USER_DEFINED => t.as_bytes().to_vec(),
                _ => token_bytes(t, &unicode_to_byte),
            })
            .collect();
        let control: Vec<bool> = types.iter().map(|&ty| ty == TYPE_CONTROL).collect();

        let id_of = |key: &str| ct.get(key).and_then(|v| to_u32(v).ok());
        let mut stop: Vec<u32> = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
            .iter()
            .filter_map(|k| id_of(k))
            .chain(
                ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"]
                    .iter()
                    .filter_map(|t| with_specials.token_to_id(t)),
            )
            .filter(|&id| (id as usize) < tokens.len())
            .collect();
        stop.sort_unstable();
        stop.dedup();
        let name_of = |key: &str| id_of(key).and_then(|id| tokens.get(id as usize).cloned());

        Ok(GgufTokenizer {
            bos: name_of("tokenizer.ggml.bos_token_id"),
            eos: name_of("tokenizer.ggml.eos_token_id"),
            with_specials,
            plain,
            bytes,
            control,
            stop,
        })
    }

    /// Token ids of `text`, special tokens written in it recognised as such.
    pub fn encode_with_specials(&self, text: &str) -> Result<Vec<u32>, String> {
        encode(&self.with_specials, text)
    }

    /// Token ids of `text` as plain text: `<|im_end|>` in it is just characters.
    pub fn encode_plain(&self, text: &str) -> Result<Vec<u32>, String> {
        encode(&self.plain, text)
    }

    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// The raw bytes a token stands for (empty for control tokens and unknown ids).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], |b| b.as_slice())
    }

    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// Whether `id` ends the reply. Any control token does: none of them is visible text, and
    /// a small model that starts a new turn (`<|im_start|>`) has finished its own.
    pub fn is_stop(&self, id: u32) -> bool {
        self.stop.contains(&id) || self.is_control(id)
    }

    /// Text of a sequence of ids, control tokens skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The pre-tokenizer llama.cpp calls `pre`: SmolLM's splits every digit off, then all of them
/// apply GPT-2's byte-level regex without a prefix space (unlike candle's generic rebuild).
fn pre_tokenizer(pre: &str) -> Result<PreTokenizerWrapper, String> {
    if DIGITS_SPLIT.contains(&pre) {
        Ok(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])
        .into())
    } else if GPT2_STYLE.contains(&pre) {
        Ok(ByteLevel::new(false, true, true).into())
    } else if LLAMA3.contains(&pre) {
        let split = Split::new(
            SplitPattern::Regex(LLAMA3_REGEX.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| format!("pre-tokenizer `{pre}`: {e}"))?;
        Ok(Sequence::new(vec![
            split.into(),
            ByteLevel::new(false, true, false).into(),
        ])
        .into())
    } else {
        Err(format!(
            "pre-tokenizer `{pre}` is not supported by the local provider (supported: {})",
            [DIGITS_SPLIT, GPT2_STYLE, LLAMA3].concat().join(", ")
        ))
    }
}

fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>, String> {
    tokenizer
        .encode_fast(text, false)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| format!("cannot tokenize: {e}"))
}

/// Turns token bytes into text as they stream, holding back a character split across tokens.
#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text completed by `bytes`; an invalid sequence becomes U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next token.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is still held back, at the end of the stream.
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// GPT-2's reversible byte-to-character map, inverted: vocabularies spell byte 0x20 as 'Ġ'.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            u32::from(b)
        } else {
            shifted += 1;
            255 + shifted
        };
        if let Some(c) = char::from_u32(c) {
            map.insert(c, b);
        }
    }
    map
}

fn token_bytes(token: &str, map: &HashMap<char, u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    for c in token.chars() {
        match map.get(&c) {
            Some(&b) => out.push(b),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

fn to_u32(v: &Value) -> Result<u32, String> {
    v.to_u32()
        .ok_or_else(|| format!("expected a whole number, found {v:?}"))
}

fn string_value(ct: &Content, key: &str) -> Result<String, String> {
    match ct.get(key) {
        Some(v) => v
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("metadata `{key}` is not a string")),
        None => Err(format!("metadata `{key}` is missing")),
    }
}

fn string_array(ct: &Content, key: &str) -> Result<Vec<String>, String> {
    let values = ct
        .get(key)
        .ok_or_else(|| format!("metadata `{key}` is missing"))?
        .as_array()
        .ok_or_else(|| format!("metadata `{key}` is not an array"))?;
    values
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("metadata `{key}`: not a string"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_covers_every_byte_once() {
        let map = unicode_to_byte();
        assert_eq!(map.len(), 256);
        assert_eq!(map.get(&'Ġ'), Some(&b' '));
        assert_eq!(map.get(&'Ċ'), Some(&b'\n'));
        assert_eq!(map.get(&'A'), Some(&b'A'));
    }

    fn splits(pre: &str, text: &str) -> Vec<String> {
        use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
        let mut s = PreTokenizedString::from(text);
        let pt = pre_tokenizer(pre).unwrap_or_else(|e| panic!("{e}"));
        pt.pre_tokenize(&mut s).unwrap_or_else(|e| panic!("{e}"));
        s.get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(s, _, _)| s.to_string())
            .collect()
    }

    #[test]
    fn pre_tokenizers_split_like_their_models() {
        let text = "Hello'Ve world 123\n\n  foo";
        assert_eq!(
            splits("smollm", text),
            ["Hello", "'", "Ve", "Ġworld", "Ġ", "1", "2", "3", "ĊĊĠ", "Ġfoo"]
        );
        assert_eq!(
            splits("llama-bpe", text),
            ["Hello", "'Ve", "Ġworld", "Ġ", "123", "ĊĊ", "Ġ", "Ġfoo"]
        );
        assert!(pre_tokenizer("qwen2").is_err());
    }

    #[test]
    fn utf8_stream_holds_back_split_characters() {
        let mut s = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(s.push(b"caf"), "caf");
        assert_eq!(s.push(&e[..1]), "");
        assert_eq!(s.push(&e[1..]), "é");
        assert_eq!(s.push(&[0xFF, b'x']), "\u{FFFD}x");
        assert_eq!(s.push(&[0xE2, 0x82]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }
}
