//! The converter from the ONNX model and its `tokenizer.json` to the ready-to-run file of
//! `axocoatl-embed`, run once per installed model (see [`super::Embedder::load`]).
//!
//! The ONNX file is read through tract's protobuf types, the same reading the reference
//! engine starts from. Every weight is found by what the graph does with it, not by its
//! place in the file: a matrix is the second input of the `MatMul` whose output the layer's
//! named bias is added to; a table is what a `Gather` of the token ids (or of the token types,
//! or of the positions) reads. Each int8 weight comes with its `Cast` → `Mul` by a scale, and
//! is kept int8 with that scale. The tokenizer's settings are read from `tokenizer.json` and
//! anything this converter does not reproduce (another normalizer, pre-tokenizer, model or
//! template) is refused, so the caller stays on the reference engine.

use std::collections::HashMap;

use axocoatl_embed::format::{Config, Layer, Linear, Norm, Parts, Table};
use tract_onnx::pb::{self, tensor_proto::DataType};
use tract_onnx::prelude::Framework;

use super::onnx::MAX_TOKENS;
use super::{EmbedError, ModelFiles};

/// The graph, indexed.
struct Graph<'a> {
    graph: &'a pb::GraphProto,
    init: HashMap<&'a str, &'a pb::TensorProto>,
    producer: HashMap<&'a str, &'a pb::NodeProto>,
    readers: HashMap<&'a str, Vec<&'a pb::NodeProto>>,
}

/// An int8 weight and its scale, as the graph dequantizes it.
struct Quantized<'a> {
    q: &'a pb::TensorProto,
    scale: &'a pb::TensorProto,
}

fn dims(t: &pb::TensorProto) -> Vec<usize> {
    t.dims.iter().map(|&d| d.max(0) as usize).collect()
}

fn floats(t: &pb::TensorProto) -> Result<Vec<f32>, String> {
    if t.data_type != DataType::Float as i32 {
        return Err(format!("{} is not f32", t.name));
    }
    let values: Vec<f32> = if t.raw_data.is_empty() {
        t.float_data.clone()
    } else {
        t.raw_data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    sized(t, values)
}

fn int8s(t: &pb::TensorProto) -> Result<Vec<i8>, String> {
    if t.data_type != DataType::Int8 as i32 {
        return Err(format!("{} is not int8", t.name));
    }
    let values: Vec<i8> = if t.raw_data.is_empty() {
        t.int32_data.iter().map(|&v| v as i8).collect()
    } else {
        t.raw_data.iter().map(|&b| b as i8).collect()
    };
    sized(t, values)
}

/// `values` when they are as many as `t`'s shape holds.
fn sized<T>(t: &pb::TensorProto, values: Vec<T>) -> Result<Vec<T>, String> {
    let n: usize = dims(t).iter().product();
    if values.len() != n {
        return Err(format!(
            "{} holds {} values for shape {:?}",
            t.name,
            values.len(),
            t.dims
        ));
    }
    Ok(values)
}

fn ints(t: &pb::TensorProto) -> Vec<i64> {
    if t.raw_data.is_empty() {
        t.int64_data.clone()
    } else {
        t.raw_data
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                i64::from_le_bytes(b)
            })
            .collect()
    }
}

impl<'a> Graph<'a> {
    fn of(graph: &'a pb::GraphProto) -> Graph<'a> {
        let mut g = Graph {
            graph,
            init: HashMap::new(),
            producer: HashMap::new(),
            readers: HashMap::new(),
        };
        for t in &graph.initializer {
            g.init.insert(t.name.as_str(), t);
        }
        for n in &graph.node {
            for o in &n.output {
                g.producer.insert(o.as_str(), n);
            }
            for i in &n.input {
                g.readers.entry(i.as_str()).or_default().push(n);
            }
        }
        g
    }

    /// The initializer whose name ends with `suffix` (there must be one only).
    fn named(&self, suffix: &str) -> Result<&'a pb::TensorProto, String> {
        let mut found = self.init.iter().filter(|(n, _)| n.ends_with(suffix));
        match (found.next(), found.next()) {
            (Some((_, t)), None) => Ok(t),
            (None, _) => Err(format!("no weight named …{suffix}")),
            _ => Err(format!("several weights named …{suffix}")),
        }
    }

    fn readers(&self, value: &str) -> &[&'a pb::NodeProto] {
        self.readers.get(value).map(Vec::as_slice).unwrap_or(&[])
    }

    /// `value` as `Mul(Cast(int8 initializer → f32), f32 initializer)`.
    fn quantized(&self, value: &str) -> Option<Quantized<'a>> {
        let mul = self.producer.get(value)?;
        if mul.op_type != "Mul" || mul.input.len() != 2 {
            return None;
        }
        for (c, s) in [(0, 1), (1, 0)] {
            let Some(cast) = self.producer.get(mul.input[c].as_str()) else {
                continue;
            };
            if cast.op_type != "Cast" || cast.input.len() != 1 {
                continue;
            }
            let (Some(q), Some(scale)) = (
                self.init.get(cast.input[0].as_str()),
                self.init.get(mul.input[s].as_str()),
            ) else {
                continue;
            };
            if q.data_type == DataType::Int8 as i32 && scale.data_type == DataType::Float as i32 {
                return Some(Quantized { q, scale });
            }
        }
        None
    }

    /// The table a `Gather` of graph input `indices` reads, int8 with one scale per row.
    fn table_of_gather(&self, gather: &pb::NodeProto) -> Result<Table, String> {
        let q = self
            .quantized(&gather.input[0])
            .ok_or_else(|| format!("{} is not an int8 table with scales", gather.input[0]))?;
        let d = dims(q.q);
        let s = floats(q.scale)?;
        if d.len() != 2 || s.len() != d[0] {
            return Err(format!(
                "the table {} of shape {d:?} has {} scales, not one per row",
                gather.input[0],
                s.len()
            ));
        }
        Ok(Table {
            values: int8s(q.q)?,
            scales: s,
        })
    }

    /// The `Gather` reading graph input `input` (the token ids or types).
    fn gather_of_input(&self, input: &str) -> Result<&'a pb::NodeProto, String> {
        self.readers(input)
            .iter()
            .find(|n| n.op_type == "Gather" && n.input.get(1).map(String::as_str) == Some(input))
            .copied()
            .ok_or_else(|| format!("no Gather reads the input {input}"))
    }

    /// The matrix whose product the bias named `…bias_suffix` is added to.
    fn linear(&self, bias_suffix: &str) -> Result<Linear, String> {
        let bias_t = self.named(bias_suffix)?;
        let add = self
            .readers(&bias_t.name)
            .iter()
            .find(|n| n.op_type == "Add")
            .ok_or_else(|| format!("nothing adds {}", bias_t.name))?;
        let product = add
            .input
            .iter()
            .find(|i| **i != bias_t.name)
            .ok_or_else(|| format!("{} is added to itself", bias_t.name))?;
        let matmul = self
            .producer
            .get(product.as_str())
            .filter(|n| n.op_type == "MatMul" && n.input.len() == 2)
            .ok_or_else(|| format!("{} is not added to a matrix product", bias_t.name))?;
        let w = self
            .quantized(&matmul.input[1])
            .ok_or_else(|| format!("the weights of {} are not int8 with scales", bias_t.name))?;
        let d = dims(w.q);
        let scales = floats(w.scale)?;
        let bias = floats(bias_t)?;
        if d.len() != 2 || bias.len() != d[1] {
            return Err(format!("the weights of {} have shape {d:?}", bias_t.name));
        }
        // One scale per output column (shape [1, out] or [out]), or one for all.
        let scales = match scales.len() {
            1 => vec![scales[0]; d[1]],
            n if n == d[1] && dims(w.scale).iter().rev().skip(1).all(|&x| x == 1) => scales,
            _ => {
                return Err(format!(
                    "the weights of {} have scales of shape {:?}, not one per output",
                    bias_t.name, w.scale.dims
                ))
            }
        };
        Ok(Linear {
            weights: int8s(w.q)?,
            scales,
            bias,
        })
    }

    fn norm(&self, prefix: &str) -> Result<Norm, String> {
        Ok(Norm {
            gain: floats(self.named(&format!("{prefix}.weight"))?)?,
            bias: floats(self.named(&format!("{prefix}.bias"))?)?,
        })
    }

    /// The width of an attention head: the last entry of the shape the query is reshaped
    /// to (`[batch, seq, -1, head]`).
    fn head_width(&self, query_bias_suffix: &str) -> Result<usize, String> {
        let bias = self.named(query_bias_suffix)?;
        let add = self
            .readers(&bias.name)
            .iter()
            .find(|n| n.op_type == "Add")
            .ok_or("nothing adds the query bias")?;
        let reshape = self
            .readers(&add.output[0])
            .iter()
            .find(|n| n.op_type == "Reshape")
            .ok_or("the query is not split into heads by a Reshape")?;
        let shape = reshape.input.get(1).ok_or("a Reshape without a shape")?;
        let last = match self.init.get(shape.as_str()) {
            Some(t) => ints(t).last().copied(),
            None => {
                let concat = self
                    .producer
                    .get(shape.as_str())
                    .filter(|n| n.op_type == "Concat")
                    .ok_or("the heads' shape is not a constant or a Concat")?;
                let last = concat.input.last().ok_or("an empty Concat")?;
                self.init
                    .get(last.as_str())
                    .and_then(|t| ints(t).last().copied())
            }
        };
        match last {
            Some(w) if w > 0 => Ok(w as usize),
            _ => Err("the heads' width is not a constant".to_owned()),
        }
    }

    fn norm_eps(&self) -> Result<f32, String> {
        let mut eps = None;
        for n in &self.graph.node {
            if n.op_type == "LayerNormalization" {
                let e = n
                    .attribute
                    .iter()
                    .find(|a| a.name == "epsilon")
                    .map_or(1e-5, |a| a.f);
                if eps.is_some_and(|x| x != e) {
                    return Err("layer norms of different epsilons".to_owned());
                }
                eps = Some(e);
            }
        }
        eps.ok_or_else(|| "no LayerNormalization in the graph".to_owned())
    }
}

/// The graph's three inputs: token ids, attention mask, token types (by name).
fn input_names(graph: &pb::GraphProto) -> Result<[String; 2], String> {
    let names: Vec<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
    let find = |want: &str| {
        names
            .iter()
            .find(|n| **n == want)
            .map(|n| n.to_string())
            .ok_or_else(|| format!("the graph has no input {want} (it has {names:?})"))
    };
    Ok([find("input_ids")?, find("token_type_ids")?])
}

/// What `tokenizer.json` says, when it is BERT's tokenizer as [`axocoatl_embed::Tokenizer`]
/// runs it.
struct TokenizerSettings {
    vocab: Vec<(String, u32)>,
    added: Vec<(String, u32)>,
    unk: u32,
    cls: u32,
    sep: u32,
    max_word_chars: usize,
    lowercase: bool,
    strip_accents: bool,
    clean_text: bool,
    chinese_chars: bool,
}

fn tokenizer_settings(json: &serde_json::Value) -> Result<TokenizerSettings, String> {
    let get = |v: &serde_json::Value, path: &[&str]| -> serde_json::Value {
        path.iter()
            .fold(v.clone(), |v, k| v.get(k).cloned().unwrap_or_default())
    };
    let ty = |v: &serde_json::Value| get(v, &["type"]).as_str().unwrap_or("").to_owned();
    let normalizer = get(json, &["normalizer"]);
    if ty(&normalizer) != "BertNormalizer" {
        return Err(format!(
            "normalizer {:?} is not BertNormalizer",
            ty(&normalizer)
        ));
    }
    let flag = |k: &str, default: bool| get(&normalizer, &[k]).as_bool().unwrap_or(default);
    let lowercase = flag("lowercase", true);
    let strip_accents = get(&normalizer, &["strip_accents"])
        .as_bool()
        .unwrap_or(lowercase);
    if ty(&get(json, &["pre_tokenizer"])) != "BertPreTokenizer" {
        return Err("the pre-tokenizer is not BertPreTokenizer".to_owned());
    }
    let model = get(json, &["model"]);
    if ty(&model) != "WordPiece"
        || get(&model, &["continuing_subword_prefix"]).as_str() != Some("##")
    {
        return Err("the model is not WordPiece with `##` continuations".to_owned());
    }
    let vocab_map = get(&model, &["vocab"]);
    let vocab: Vec<(String, u32)> = vocab_map
        .as_object()
        .ok_or("the WordPiece vocabulary is not a map")?
        .iter()
        .map(|(k, v)| {
            v.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .map(|id| (k.clone(), id))
                .ok_or_else(|| format!("token {k:?} has no id"))
        })
        .collect::<Result<_, _>>()?;
    let id_of = |token: &str| {
        vocab
            .iter()
            .find(|(t, _)| t == token)
            .map(|(_, id)| *id)
            .ok_or_else(|| format!("{token:?} is not in the vocabulary"))
    };
    let unk = id_of(get(&model, &["unk_token"]).as_str().unwrap_or("[UNK]"))?;
    let max_word_chars = get(&model, &["max_input_chars_per_word"])
        .as_u64()
        .unwrap_or(100) as usize;
    // The template of a single text must be `[CLS] $A [SEP]` (all of type 0).
    let post = get(json, &["post_processor"]);
    let single = get(&post, &["single"]);
    let items = single.as_array().ok_or("no template for a single text")?;
    let special = |i: usize| -> Option<String> {
        let s = items.get(i)?.get("SpecialToken")?;
        (s.get("type_id")?.as_u64()? == 0).then(|| s.get("id")?.as_str().map(str::to_owned))?
    };
    let sequence_a = items
        .get(1)
        .and_then(|i| i.get("Sequence"))
        .is_some_and(|s| s.get("id").and_then(|v| v.as_str()) == Some("A"));
    let (Some(cls), Some(sep)) = (special(0), special(2)) else {
        return Err("the template of a single text is not [CLS] $A [SEP]".to_owned());
    };
    if ty(&post) != "TemplateProcessing" || items.len() != 3 || !sequence_a {
        return Err("the template of a single text is not [CLS] $A [SEP]".to_owned());
    }
    let mut added = Vec::new();
    for t in get(json, &["added_tokens"])
        .as_array()
        .into_iter()
        .flatten()
    {
        let content = t.get("content").and_then(|c| c.as_str()).unwrap_or("");
        let id = t.get("id").and_then(|c| c.as_u64()).unwrap_or(u64::MAX);
        let set = |k: &str| t.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
        if set("normalized") || set("single_word") || set("lstrip") || set("rstrip") {
            return Err(format!(
                "added token {content:?} is matched in a way not supported"
            ));
        }
        let id = u32::try_from(id).map_err(|_| format!("added token {content:?} has no id"))?;
        added.push((content.to_owned(), id));
    }
    Ok(TokenizerSettings {
        cls: id_of(&cls)?,
        sep: id_of(&sep)?,
        vocab,
        added,
        unk,
        max_word_chars,
        lowercase,
        strip_accents,
        clean_text: flag("clean_text", true),
        chinese_chars: flag("handle_chinese_chars", true),
    })
}

/// Everything the ready-to-run file holds, read from the model files.
pub(super) fn parts(files: &ModelFiles) -> Result<Parts, EmbedError> {
    let model_err = |reason: String| EmbedError::Load {
        path: files.model.clone(),
        reason,
    };
    let tok_err = |reason: String| EmbedError::Load {
        path: files.tokenizer.clone(),
        reason,
    };
    let json: serde_json::Value = std::fs::read(&files.tokenizer)
        .map_err(|e| tok_err(e.to_string()))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| tok_err(e.to_string())))?;
    let tok = tokenizer_settings(&json).map_err(tok_err)?;
    let proto = tract_onnx::onnx()
        .proto_model_for_path(&files.model)
        .map_err(|e| model_err(format!("{e:#}")))?;
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| model_err("the file holds no graph".to_owned()))?;
    graph_parts(graph, tok).map_err(model_err)
}

fn graph_parts(graph: &pb::GraphProto, tok: TokenizerSettings) -> Result<Parts, String> {
    let g = Graph::of(graph);
    let [ids, types] = input_names(graph)?;
    let word_gather = g.gather_of_input(&ids)?;
    let words = g.table_of_gather(word_gather)?;
    let type_gather = g.gather_of_input(&types)?;
    let token_types = match g.init.get(type_gather.input[0].as_str()) {
        Some(t) => floats(t)?,
        None => {
            let t = g.table_of_gather(type_gather)?;
            let h = t.values.len() / t.scales.len().max(1);
            t.values
                .iter()
                .enumerate()
                .map(|(i, &q)| f32::from(q) * t.scales[i / h.max(1)])
                .collect()
        }
    };
    let position_gather = g
        .graph
        .node
        .iter()
        .find(|n| {
            n.op_type == "Gather"
                && g.quantized(&n.input[0])
                    .is_some_and(|q| q.q.name.contains("position_embeddings"))
        })
        .ok_or("no Gather reads the position embeddings")?;
    let positions = g.table_of_gather(position_gather)?;
    let hidden = words.values.len() / words.scales.len().max(1);
    let layers = (0..)
        .take_while(|l| {
            g.named(&format!("encoder.layer.{l}.attention.self.query.bias"))
                .is_ok()
        })
        .count();
    let head = g.head_width("encoder.layer.0.attention.self.query.bias")?;
    let mut out = Vec::with_capacity(layers);
    for l in 0..layers {
        let p = format!("encoder.layer.{l}");
        out.push(Layer {
            query: g.linear(&format!("{p}.attention.self.query.bias"))?,
            key: g.linear(&format!("{p}.attention.self.key.bias"))?,
            value: g.linear(&format!("{p}.attention.self.value.bias"))?,
            output: g.linear(&format!("{p}.attention.output.dense.bias"))?,
            attention_norm: g.norm(&format!("{p}.attention.output.LayerNorm"))?,
            up: g.linear(&format!("{p}.intermediate.dense.bias"))?,
            down: g.linear(&format!("{p}.output.dense.bias"))?,
            output_norm: g.norm(&format!("{p}.output.LayerNorm"))?,
        });
    }
    let ffn = out.first().map_or(0, |l| l.up.bias.len());
    let config = Config {
        hidden,
        layers,
        heads: hidden / head.max(1),
        ffn,
        vocab: words.scales.len(),
        max_positions: positions.scales.len(),
        type_vocab: token_types.len() / hidden.max(1),
        max_tokens: MAX_TOKENS.min(positions.scales.len()),
        max_word_chars: tok.max_word_chars,
        cls: tok.cls,
        sep: tok.sep,
        unk: tok.unk,
        lowercase: tok.lowercase,
        strip_accents: tok.strip_accents,
        clean_text: tok.clean_text,
        chinese_chars: tok.chinese_chars,
        norm_eps: g.norm_eps()?,
    };
    if hidden % head.max(1) != 0 {
        return Err(format!(
            "heads of {head} do not divide the hidden size {hidden}"
        ));
    }
    let parts = Parts {
        config,
        words,
        positions,
        token_types,
        embedding_norm: g.norm("embeddings.LayerNorm")?,
        layers: out,
        vocab: tok.vocab,
        added: tok.added,
    };
    parts.check().map_err(|e| e.to_string())?;
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("json")
    }

    const BERT: &str = r###"{
        "added_tokens": [{"id": 0, "content": "[PAD]", "normalized": false, "single_word": false, "lstrip": false, "rstrip": false}],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4}}
    }"###;

    #[test]
    fn berts_tokenizer_settings_are_read() {
        let s = tokenizer_settings(&json(BERT)).expect("settings");
        assert_eq!((s.unk, s.cls, s.sep, s.max_word_chars), (1, 2, 3, 100));
        assert!(s.lowercase && s.strip_accents && s.clean_text && s.chinese_chars);
        assert_eq!(s.vocab.len(), 5);
        assert_eq!(s.added, vec![("[PAD]".to_owned(), 0)]);
    }

    #[test]
    fn other_tokenizers_are_refused() {
        for (from, to) in [
            ("BertNormalizer", "NFC"),
            ("BertPreTokenizer", "Whitespace"),
            ("\"WordPiece\"", "\"BPE\""),
            ("\"##\"", "\"@@\""),
            ("\"normalized\": false", "\"normalized\": true"),
            ("\"id\": \"A\"", "\"id\": \"B\""),
        ] {
            let changed = BERT.replace(from, to);
            assert_ne!(changed, BERT);
            assert!(
                tokenizer_settings(&json(&changed)).is_err(),
                "{from} → {to} accepted"
            );
        }
    }
}
