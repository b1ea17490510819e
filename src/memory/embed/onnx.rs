//! The ONNX model run by tract, and its tokenizer.
//!
//! The model's weights are stored as int8 initializers, each dequantized in the graph by a
//! `Cast` to float and a `Mul` by a float scale. tract keeps such a pair as two ops that run
//! on every call (about 30 ms of a call here), so before tract sees the graph each pair whose
//! inputs are both constants is replaced by one f32 initializer holding their product.

use std::path::Path;
use std::sync::Arc;

use tract_onnx::pb::{self, tensor_proto::DataType};
use tract_onnx::prelude::*;

use super::{EmbedError, ModelFiles, DIM};

/// Longest input in tokens: sentence-transformers' `max_seq_length` for this model. Semantic
/// memory chunks text well below it.
pub const MAX_TOKENS: usize = 256;

pub(super) struct Model {
    plan: Arc<TypedRunnableModel>,
    tokenizer: tokenizers::Tokenizer,
}

fn load_err(path: &Path) -> impl Fn(String) -> EmbedError + '_ {
    move |reason| EmbedError::Load {
        path: path.to_owned(),
        reason,
    }
}

impl Model {
    pub(super) fn load(files: &ModelFiles) -> Result<Model, EmbedError> {
        let mut tokenizer = tokenizers::Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| load_err(&files.tokenizer)(e.to_string()))?;
        // The file pads every input to 128 tokens (and cuts there): pad a batch to its
        // longest input instead, and cut at the model's own limit.
        tokenizer.with_padding(Some(tokenizers::PaddingParams {
            strategy: tokenizers::PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| load_err(&files.tokenizer)(e.to_string()))?;
        let err = load_err(&files.model);
        // Shapes come from tract's own inference, not from the file's declarations (which
        // name the attention mask [batch, 1, seq, seq]; see below).
        let onnx = tract_onnx::onnx().with_ignore_value_info(true);
        let mut proto = onnx
            .proto_model_for_path(&files.model)
            .map_err(|e| err(format!("{e:#}")))?;
        let graph = proto
            .graph
            .as_mut()
            .ok_or_else(|| err("the file holds no graph".to_owned()))?;
        fold_dequantization(graph).map_err(&err)?;
        let plan = onnx
            .model_for_proto_model(&proto)
            .and_then(|m| m.into_typed())
            .and_then(|mut m| {
                // Decluttering proves the causal part of the attention mask (`position >= 0`)
                // always true and shunts `And(mask, that)` to the mask, [batch, 1, 1, seq],
                // leaving the facts downstream at the broadcast [batch, 1, seq, seq]. Facts
                // are recomputed from the graph as it now is before optimizing, so no kernel
                // is planned for a shape the tensors do not have.
                m.declutter()?;
                m.refresh_output_facts()?;
                m.into_optimized()
            })
            .and_then(|m| m.into_runnable())
            .map_err(|e| err(format!("{e:#}")))?;
        Ok(Model { plan, tokenizer })
    }

    /// Unit vectors, one per text.
    pub(super) fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Run(format!("tokenizing: {e}")))?;
        let batch = encodings.len();
        let seq = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(batch * seq);
        let mut mask = Vec::with_capacity(batch * seq);
        let mut types = Vec::with_capacity(batch * seq);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&v| i64::from(v)));
            mask.extend(e.get_attention_mask().iter().map(|&v| i64::from(v)));
            types.extend(e.get_type_ids().iter().map(|&v| i64::from(v)));
        }
        let tensor = |data: Vec<i64>| -> Result<TValue, EmbedError> {
            Tensor::from_shape(&[batch, seq], &data)
                .map(|t| t.into_tvalue())
                .map_err(|e| EmbedError::Run(format!("{e:#}")))
        };
        let outputs = self
            .plan
            .run(tvec![tensor(ids)?, tensor(mask.clone())?, tensor(types)?])
            .map_err(|e| EmbedError::Run(format!("{e:#}")))?;
        let hidden = outputs
            .first()
            .ok_or_else(|| EmbedError::Run("the model gave no output".to_owned()))?;
        let view = hidden
            .to_plain_array_view::<f32>()
            .map_err(|e| EmbedError::Run(format!("{e:#}")))?;
        if view.shape() != [batch, seq, DIM] {
            return Err(EmbedError::Run(format!(
                "the model's output has shape {:?}, expected [{batch}, {seq}, {DIM}]",
                view.shape()
            )));
        }
        let flat = view
            .as_slice()
            .ok_or_else(|| EmbedError::Run("the model's output is not contiguous".to_owned()))?;
        Ok((0..batch)
            .map(|b| {
                mean_pool(
                    &flat[b * seq * DIM..(b + 1) * seq * DIM],
                    &mask[b * seq..(b + 1) * seq],
                )
            })
            .collect())
    }
}

/// The mean of the token vectors under the attention mask, L2-normalized (as
/// sentence-transformers' Pooling + Normalize modules compute it).
fn mean_pool(hidden: &[f32], mask: &[i64]) -> Vec<f32> {
    let mut sum = vec![0f32; DIM];
    let mut count = 0f32;
    for (t, &m) in mask.iter().enumerate() {
        if m == 0 {
            continue;
        }
        count += 1.0;
        for (s, h) in sum.iter_mut().zip(&hidden[t * DIM..(t + 1) * DIM]) {
            *s += h;
        }
    }
    let count = count.max(1e-9);
    sum.iter_mut().for_each(|s| *s /= count);
    let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    sum.iter_mut().for_each(|s| *s /= norm);
    sum
}

/// Replaces every `Cast(int8 constant → float)` → `Mul(·, float constant)` pair by one f32
/// initializer named like the `Mul`'s output. Returns the number of pairs folded.
fn fold_dequantization(graph: &mut pb::GraphProto) -> Result<usize, String> {
    use std::collections::HashMap;
    let mut uses: HashMap<String, usize> = HashMap::new();
    for n in &graph.node {
        for i in &n.input {
            *uses.entry(i.clone()).or_default() += 1;
        }
    }
    let init_index: HashMap<String, usize> = graph
        .initializer
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let producer: HashMap<String, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.output.iter().map(move |o| (o.clone(), i)))
        .collect();
    let mut folded = Vec::new();
    let mut drop_nodes = Vec::new();
    let mut drop_inits = Vec::new();
    for (mul_index, mul) in graph.node.iter().enumerate() {
        if mul.op_type != "Mul" || mul.input.len() != 2 || mul.output.len() != 1 {
            continue;
        }
        for (cast_side, scale_side) in [(0, 1), (1, 0)] {
            let Some(&cast_index) = producer.get(&mul.input[cast_side]) else {
                continue;
            };
            let cast = &graph.node[cast_index];
            let to_float = cast
                .attribute
                .iter()
                .any(|a| a.name == "to" && a.i == DataType::Float as i64);
            if cast.op_type != "Cast" || !to_float || uses.get(&cast.output[0]) != Some(&1) {
                continue;
            }
            let (Some(&q_index), Some(&s_index)) = (
                init_index.get(&cast.input[0]),
                init_index.get(&mul.input[scale_side]),
            ) else {
                continue;
            };
            let (q, s) = (&graph.initializer[q_index], &graph.initializer[s_index]);
            if q.data_type != DataType::Int8 as i32 || s.data_type != DataType::Float as i32 {
                continue;
            }
            let weights = dequantize(q, s).map_err(|e| format!("folding {}: {e}", q.name))?;
            folded.push(pb::TensorProto {
                name: mul.output[0].clone(),
                dims: q.dims.clone(),
                data_type: DataType::Float as i32,
                raw_data: weights.iter().flat_map(|v| v.to_le_bytes()).collect(),
                ..Default::default()
            });
            drop_nodes.extend([cast_index, mul_index]);
            if uses.get(&q.name) == Some(&1) {
                drop_inits.push(q_index);
            }
            if uses.get(&s.name) == Some(&1) {
                drop_inits.push(s_index);
            }
            break;
        }
    }
    let count = folded.len();
    let mut index = 0;
    graph.node.retain(|_| {
        index += 1;
        !drop_nodes.contains(&(index - 1))
    });
    let mut index = 0;
    graph.initializer.retain(|_| {
        index += 1;
        !drop_inits.contains(&(index - 1))
    });
    graph.initializer.extend(folded);
    Ok(count)
}

/// `q * s` with `s` broadcast onto `q`'s shape (NumPy rules).
fn dequantize(q: &pb::TensorProto, s: &pb::TensorProto) -> Result<Vec<f32>, String> {
    let q_dims: Vec<usize> = q.dims.iter().map(|&d| d as usize).collect();
    let n: usize = q_dims.iter().product();
    let q_values: Vec<i8> = if !q.raw_data.is_empty() {
        q.raw_data.iter().map(|&b| b as i8).collect()
    } else {
        q.int32_data.iter().map(|&v| v as i8).collect()
    };
    let s_values: Vec<f32> = if !s.raw_data.is_empty() {
        s.raw_data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        s.float_data.clone()
    };
    if q_values.len() != n {
        return Err(format!("{} values for shape {q_dims:?}", q_values.len()));
    }
    // Right-align the scale's shape with the weights' and find each dimension's stride in
    // the scale (0 where it is broadcast).
    let s_dims: Vec<usize> = s.dims.iter().map(|&d| d as usize).collect();
    if s_dims.len() > q_dims.len() || s_values.len() != s_dims.iter().product::<usize>() {
        return Err(format!(
            "scale of shape {s_dims:?} for weights of shape {q_dims:?}"
        ));
    }
    let pad = q_dims.len() - s_dims.len();
    let mut s_strides = vec![0usize; q_dims.len()];
    let mut stride = 1;
    for k in (0..s_dims.len()).rev() {
        let (sd, qd) = (s_dims[k], q_dims[pad + k]);
        if sd != 1 && sd != qd {
            return Err(format!(
                "scale of shape {s_dims:?} does not broadcast to {q_dims:?}"
            ));
        }
        s_strides[pad + k] = if sd == 1 { 0 } else { stride };
        stride *= sd;
    }
    // Row by row (a row: the last dimension): the scale's offset is found once per row, and
    // the row is one tight loop over either one scale or a matching run of scales. (Element
    // by element, this took about 90 ms of every load.)
    let inner = q_dims.last().copied().unwrap_or(1).max(1);
    let inner_stride = s_strides.last().copied().unwrap_or(0);
    let outer = &q_dims[..q_dims.len().saturating_sub(1)];
    let mut out = Vec::with_capacity(n);
    let mut coord = vec![0usize; outer.len()];
    for row in q_values.chunks_exact(inner) {
        let base: usize = coord.iter().zip(&s_strides).map(|(c, st)| c * st).sum();
        if inner_stride == 0 {
            let scale = s_values[base];
            out.extend(row.iter().map(|&v| f32::from(v) * scale));
        } else {
            let scales = &s_values[base..base + inner];
            out.extend(row.iter().zip(scales).map(|(&v, &sc)| f32::from(v) * sc));
        }
        for k in (0..coord.len()).rev() {
            coord[k] += 1;
            if coord[k] < outer[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, dims: &[i64], dt: DataType, raw: Vec<u8>) -> pb::TensorProto {
        pb::TensorProto {
            name: name.to_owned(),
            dims: dims.to_vec(),
            data_type: dt as i32,
            raw_data: raw,
            ..Default::default()
        }
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn dequantize_broadcasts_rows_and_columns() {
        let q = tensor(
            "q",
            &[2, 3],
            DataType::Int8,
            vec![1, 2, 3, 0xff, 0xfe, 0xfd],
        );
        let by_row = tensor("s", &[2, 1], DataType::Float, f32_bytes(&[10.0, 100.0]));
        assert_eq!(
            dequantize(&q, &by_row).expect("ok"),
            vec![10.0, 20.0, 30.0, -100.0, -200.0, -300.0]
        );
        let by_col = tensor("s", &[1, 3], DataType::Float, f32_bytes(&[1.0, 2.0, 3.0]));
        assert_eq!(
            dequantize(&q, &by_col).expect("ok"),
            vec![1.0, 4.0, 9.0, -1.0, -4.0, -9.0]
        );
        let bad = tensor("s", &[2], DataType::Float, f32_bytes(&[1.0, 2.0]));
        assert!(dequantize(&q, &bad).is_err());
    }

    #[test]
    fn cast_mul_pairs_become_one_initializer() {
        let node = |op: &str, inputs: &[&str], output: &str| pb::NodeProto {
            op_type: op.to_owned(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_owned()],
            attribute: if op == "Cast" {
                vec![pb::AttributeProto {
                    name: "to".to_owned(),
                    i: DataType::Float as i64,
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let mut graph = pb::GraphProto {
            node: vec![
                node("Cast", &["w_q"], "w_f"),
                node("Mul", &["w_f", "w_scale"], "w"),
                node("MatMul", &["x", "w"], "y"),
            ],
            initializer: vec![
                tensor("w_q", &[1, 2], DataType::Int8, vec![3, 0xfd]),
                tensor("w_scale", &[1, 1], DataType::Float, f32_bytes(&[0.5])),
            ],
            ..Default::default()
        };
        assert_eq!(fold_dequantization(&mut graph), Ok(1));
        assert_eq!(graph.node.len(), 1);
        assert_eq!(graph.node[0].op_type, "MatMul");
        assert_eq!(graph.initializer.len(), 1);
        assert_eq!(graph.initializer[0].name, "w");
        assert_eq!(graph.initializer[0].raw_data, f32_bytes(&[1.5, -1.5]));
    }

    #[test]
    fn mean_pool_ignores_padding_and_normalizes() {
        let mut hidden = vec![0f32; 3 * DIM];
        hidden[0] = 3.0;
        hidden[DIM + 1] = 4.0;
        hidden[2 * DIM + 2] = 100.0;
        let v = mean_pool(&hidden, &[1, 1, 0]);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6 && v[2] == 0.0);
    }
}
