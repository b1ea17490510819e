//! The ONNX model run by tract, and its tokenizer.
//!
//! The model's weights are stored as int8 initializers, each dequantized in the graph by a
//! `Cast` to float and a `Mul` by a float scale. tract keeps such a pair as two ops that run
//! on every call (about 30 ms of a call here), so before tract sees the graph each pair whose
//! inputs are both constants is replaced by one f32 initializer holding their product.
//!
//! One pair is not folded: the word embeddings (30,522 rows of 384, half of all weights),
//! which the graph only reads with a `Gather` of the token ids. Dequantizing that table took
//! half of every load (a quarter of a second in all, and 94 MB of memory written) to use a
//! few dozen rows, so the `Gather` becomes an input of the graph, and each call looks the
//! rows up in the int8 table and scales them itself: the same products, bit for bit.

use std::collections::HashMap;
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
    /// Fed to the graph after its three inputs, in this order.
    lookups: Vec<Lookup>,
}

/// A dequantized table the graph only reads with a `Gather` of one of its inputs (axis 0),
/// answered outside the graph: the `Gather`'s output is an input of the graph instead.
#[derive(Debug, PartialEq)]
struct Lookup {
    /// Which of the graph's inputs (0: token ids, 1: attention mask, 2: token types) holds
    /// the row numbers.
    indices: usize,
    /// `rows × width` int8 values.
    table: Vec<u8>,
    width: usize,
    /// One scale per row, or one for every row.
    scales: Vec<f32>,
}

impl Lookup {
    /// The rows `ids`, dequantized, one after another.
    fn rows(&self, ids: &[i64]) -> Result<Vec<f32>, EmbedError> {
        let rows = self.table.len() / self.width.max(1);
        let mut out = Vec::with_capacity(ids.len() * self.width);
        for &id in ids {
            let r = usize::try_from(id)
                .ok()
                .filter(|&r| r < rows)
                .ok_or_else(|| EmbedError::Run(format!("token id {id} is not below {rows}")))?;
            let scale = self.scales[if self.scales.len() == 1 { 0 } else { r }];
            let row = &self.table[r * self.width..(r + 1) * self.width];
            out.extend(row.iter().map(|&v| f32::from(v as i8) * scale));
        }
        Ok(out)
    }
}

fn load_err(path: &Path) -> impl Fn(String) -> EmbedError + '_ {
    move |reason| EmbedError::Load {
        path: path.to_owned(),
        reason,
    }
}

impl Model {
    pub(super) fn load(files: &ModelFiles) -> Result<Model, EmbedError> {
        Model::load_with(files, true)
    }

    /// Loads with the lookup tables (see the module's documentation) looked up outside the
    /// graph, or folded into it like every other weight.
    pub(super) fn load_with(files: &ModelFiles, lookups: bool) -> Result<Model, EmbedError> {
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
        let lookups = fold_dequantization(graph, lookups).map_err(&err)?;
        let model = onnx.model_for_proto_model(&proto);
        // tract has copied the weights: their protobuf copy is freed before optimizing,
        // which allocates as much again for the packed weights.
        drop(proto);
        let plan = model
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
        Ok(Model {
            plan,
            tokenizer,
            lookups,
        })
    }

    /// How many tables are looked up outside the graph.
    #[cfg(test)]
    pub(super) fn lookups(&self) -> usize {
        self.lookups.len()
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
        let given = [&ids, &mask, &types];
        let mut inputs = TVec::new();
        for data in given {
            inputs.push(input(&[batch, seq], data)?);
        }
        for l in &self.lookups {
            inputs.push(input(&[batch, seq, l.width], &l.rows(given[l.indices])?)?);
        }
        let outputs = self
            .plan
            .run(inputs)
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

/// A graph input of `shape` holding `data`.
fn input<T: Datum + Copy>(shape: &[usize], data: &[T]) -> Result<TValue, EmbedError> {
    Tensor::from_shape(shape, data)
        .map(|t| t.into_tvalue())
        .map_err(|e| EmbedError::Run(format!("{e:#}")))
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

/// Where each value of a graph is made and read, and its initializers by name.
struct Wiring {
    /// How many node inputs read each value.
    uses: HashMap<String, usize>,
    /// A node reading each value (the only one where `uses` is 1).
    user: HashMap<String, usize>,
    /// The node making each value.
    producer: HashMap<String, usize>,
    /// Initializer name → its position.
    init: HashMap<String, usize>,
}

impl Wiring {
    fn of(graph: &pb::GraphProto) -> Wiring {
        let mut w = Wiring {
            uses: HashMap::new(),
            user: HashMap::new(),
            producer: HashMap::new(),
            init: HashMap::new(),
        };
        for (index, n) in graph.node.iter().enumerate() {
            for i in &n.input {
                *w.uses.entry(i.clone()).or_default() += 1;
                w.user.insert(i.clone(), index);
            }
            for o in &n.output {
                w.producer.insert(o.clone(), index);
            }
        }
        for (i, t) in graph.initializer.iter().enumerate() {
            w.init.insert(t.name.clone(), i);
        }
        w
    }

    fn used_once(&self, value: &str) -> bool {
        self.uses.get(value) == Some(&1)
    }
}

/// A `Cast(int8 initializer → float)` → `Mul(·, float initializer)` pair: node and
/// initializer positions.
struct Pair {
    cast: usize,
    mul: usize,
    q: usize,
    s: usize,
}

/// Every dequantizing pair of `graph`, in node order.
fn pairs(graph: &pb::GraphProto, w: &Wiring) -> Vec<Pair> {
    let mut out = Vec::new();
    for (mul_index, mul) in graph.node.iter().enumerate() {
        if mul.op_type != "Mul" || mul.input.len() != 2 || mul.output.len() != 1 {
            continue;
        }
        for (cast_side, scale_side) in [(0, 1), (1, 0)] {
            let Some(&cast) = w.producer.get(&mul.input[cast_side]) else {
                continue;
            };
            let node = &graph.node[cast];
            let to_float = node
                .attribute
                .iter()
                .any(|a| a.name == "to" && a.i == DataType::Float as i64);
            if node.op_type != "Cast" || !to_float || !w.used_once(&node.output[0]) {
                continue;
            }
            let (Some(&q), Some(&s)) = (
                w.init.get(&node.input[0]),
                w.init.get(&mul.input[scale_side]),
            ) else {
                continue;
            };
            let int8 = graph.initializer[q].data_type == DataType::Int8 as i32;
            let float = graph.initializer[s].data_type == DataType::Float as i32;
            if int8 && float {
                out.push(Pair {
                    cast,
                    mul: mul_index,
                    q,
                    s,
                });
                break;
            }
        }
    }
    out
}

/// The `Gather` that makes `pair` a [`Lookup`], if one does: the only reader of the
/// product, on axis 0, of row numbers from graph input `inputs[indices]`, and the table read
/// by nothing else. Returns the gather's node, `indices` and the input that replaces it.
fn gather_of(
    graph: &pb::GraphProto,
    w: &Wiring,
    inputs: &[&pb::ValueInfoProto],
    pair: &Pair,
) -> Option<(usize, usize, pb::ValueInfoProto)> {
    let product = &graph.node[pair.mul].output[0];
    let q = &graph.initializer[pair.q];
    if !w.used_once(product) || !w.used_once(&q.name) {
        return None;
    }
    let g = *w.user.get(product)?;
    let gather = &graph.node[g];
    let is_lookup = gather.op_type == "Gather"
        && gather.input.len() == 2
        && gather.input[0] == *product
        && gather.output.len() == 1
        && gather
            .attribute
            .iter()
            .all(|a| a.name != "axis" || a.i == 0);
    if !is_lookup {
        return None;
    }
    let indices = inputs.iter().position(|i| i.name == gather.input[1])?;
    let value = lookup_input(
        &gather.output[0],
        inputs[indices],
        q,
        &graph.initializer[pair.s],
    )?;
    Some((g, indices, value))
}

/// Replaces every dequantizing pair ([`Pair`]) by one f32 initializer named like the
/// `Mul`'s output, except a pair read only by a [`Lookup`] (when `lookups_allowed`): there
/// the `Gather` becomes an input of the graph (after the others, in the returned order).
fn fold_dequantization(
    graph: &mut pb::GraphProto,
    lookups_allowed: bool,
) -> Result<Vec<Lookup>, String> {
    let w = Wiring::of(graph);
    // The graph's inputs as tract numbers them: initializers listed as inputs are not.
    let inputs: Vec<&pb::ValueInfoProto> = graph
        .input
        .iter()
        .filter(|i| !w.init.contains_key(&i.name))
        .collect();
    let mut folded = Vec::new();
    let mut gathers = Vec::new();
    let mut drop_nodes = Vec::new();
    let mut drop_inits = Vec::new();
    for pair in pairs(graph, &w) {
        drop_nodes.extend([pair.cast, pair.mul]);
        for i in [pair.q, pair.s] {
            if w.used_once(&graph.initializer[i].name) {
                drop_inits.push(i);
            }
        }
        if let Some((g, indices, value)) = lookups_allowed
            .then(|| gather_of(graph, &w, &inputs, &pair))
            .flatten()
        {
            drop_nodes.push(g);
            gathers.push((indices, pair, value));
            continue;
        }
        let (q, s) = (&graph.initializer[pair.q], &graph.initializer[pair.s]);
        let raw_data = dequantize(q, s).map_err(|e| format!("folding {}: {e}", q.name))?;
        folded.push(pb::TensorProto {
            name: graph.node[pair.mul].output[0].clone(),
            dims: q.dims.clone(),
            data_type: DataType::Float as i32,
            raw_data,
            ..Default::default()
        });
    }
    let mut lookups = Vec::new();
    for (indices, pair, value) in gathers {
        let q = &mut graph.initializer[pair.q];
        let width = q.dims[1] as usize;
        // The table's bytes move into the lookup (nothing else reads them).
        let table = std::mem::take(&mut q.raw_data);
        let scales = scale_values(&graph.initializer[pair.s]);
        graph.input.push(value);
        lookups.push(Lookup {
            indices,
            table,
            width,
            scales,
        });
    }
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
    Ok(lookups)
}

/// The graph input standing for `Gather(q * s, indices)` named `name`, when that can be
/// looked up row by row: `q` a `rows × width` table given as raw bytes, `s` one scale per
/// row (`rows × 1`) or one in all, `indices` of a known rank. Its shape is the indices'
/// followed by `width`.
fn lookup_input(
    name: &str,
    indices: &pb::ValueInfoProto,
    q: &pb::TensorProto,
    s: &pb::TensorProto,
) -> Option<pb::ValueInfoProto> {
    use pb::type_proto::Value;
    let rows = *q.dims.first()?;
    let width = *q.dims.get(1)?;
    let per_row = s.dims == [rows, 1];
    let one = s.dims.iter().product::<i64>() == 1;
    if q.dims.len() != 2 || q.raw_data.len() as i64 != rows * width || !(per_row || one) {
        return None;
    }
    let Some(Value::TensorType(t)) = indices.r#type.as_ref()?.value.as_ref() else {
        return None;
    };
    let mut shape = t.shape.clone()?;
    shape.dim.push(pb::tensor_shape_proto::Dimension {
        value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(width)),
        ..Default::default()
    });
    Some(pb::ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(pb::TypeProto {
            value: Some(Value::TensorType(pb::type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(shape),
            })),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The values of an f32 initializer.
fn scale_values(s: &pb::TensorProto) -> Vec<f32> {
    if s.raw_data.is_empty() {
        return s.float_data.clone();
    }
    s.raw_data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `q * s` with `s` broadcast onto `q`'s shape (NumPy rules), as the little-endian bytes of
/// an f32 tensor's `raw_data`: each weight is written once, into a buffer of its final size
/// (a float vector turned into bytes afterwards wrote every weight twice more).
fn dequantize(q: &pb::TensorProto, s: &pb::TensorProto) -> Result<Vec<u8>, String> {
    let q_dims: Vec<usize> = q.dims.iter().map(|&d| d as usize).collect();
    let n: usize = q_dims.iter().product();
    let unpacked: Vec<u8>;
    let q_values: &[u8] = if !q.raw_data.is_empty() {
        &q.raw_data
    } else {
        unpacked = q.int32_data.iter().map(|&v| v as i8 as u8).collect();
        &unpacked
    };
    let s_values = scale_values(s);
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
    let mut out = vec![0u8; n * 4];
    let mut coord = vec![0usize; outer.len()];
    for (row, dst) in q_values
        .chunks_exact(inner)
        .zip(out.chunks_exact_mut(inner * 4))
    {
        let base: usize = coord.iter().zip(&s_strides).map(|(c, st)| c * st).sum();
        let dst = dst.chunks_exact_mut(4);
        if inner_stride == 0 {
            let scale = s_values[base];
            for (d, &v) in dst.zip(row) {
                d.copy_from_slice(&(f32::from(v as i8) * scale).to_le_bytes());
            }
        } else {
            let scales = &s_values[base..base + inner];
            for ((d, &v), &sc) in dst.zip(row).zip(scales) {
                d.copy_from_slice(&(f32::from(v as i8) * sc).to_le_bytes());
            }
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
            f32_bytes(&[10.0, 20.0, 30.0, -100.0, -200.0, -300.0])
        );
        let by_col = tensor("s", &[1, 3], DataType::Float, f32_bytes(&[1.0, 2.0, 3.0]));
        assert_eq!(
            dequantize(&q, &by_col).expect("ok"),
            f32_bytes(&[1.0, 4.0, 9.0, -1.0, -4.0, -9.0])
        );
        // Weights given as int32 values rather than raw bytes.
        let q32 = pb::TensorProto {
            int32_data: vec![1, 2, 3, -1, -2, -3],
            raw_data: Vec::new(),
            ..q.clone()
        };
        assert_eq!(
            dequantize(&q32, &by_row).expect("ok"),
            f32_bytes(&[10.0, 20.0, 30.0, -100.0, -200.0, -300.0])
        );
        let bad = tensor("s", &[2], DataType::Float, f32_bytes(&[1.0, 2.0]));
        assert!(dequantize(&q, &bad).is_err());
    }

    fn node(op: &str, inputs: &[&str], output: &str) -> pb::NodeProto {
        let attribute = match op {
            "Cast" => vec![pb::AttributeProto {
                name: "to".to_owned(),
                i: DataType::Float as i64,
                ..Default::default()
            }],
            _ => Vec::new(),
        };
        pb::NodeProto {
            op_type: op.to_owned(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_owned()],
            attribute,
            ..Default::default()
        }
    }

    #[test]
    fn cast_mul_pairs_become_one_initializer() {
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
        assert_eq!(fold_dequantization(&mut graph, true), Ok(Vec::new()));
        assert_eq!(graph.node.len(), 1);
        assert_eq!(graph.node[0].op_type, "MatMul");
        assert_eq!(graph.initializer.len(), 1);
        assert_eq!(graph.initializer[0].name, "w");
        assert_eq!(graph.initializer[0].raw_data, f32_bytes(&[1.5, -1.5]));
    }

    /// A graph input named `name` of shape `[batch, seq]` and type `dt`.
    fn input(name: &str, dt: DataType) -> pb::ValueInfoProto {
        use pb::tensor_shape_proto::{dimension::Value as Dim, Dimension};
        let dim = |d: &str| Dimension {
            value: Some(Dim::DimParam(d.to_owned())),
            ..Default::default()
        };
        pb::ValueInfoProto {
            name: name.to_owned(),
            r#type: Some(pb::TypeProto {
                value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                    elem_type: dt as i32,
                    shape: Some(pb::TensorShapeProto {
                        dim: vec![dim("batch"), dim("seq")],
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A 3 × 2 int8 table with one scale per row, read by `Gather(table, indices)`.
    fn table_graph(gather_axis: i64) -> pb::GraphProto {
        let mut gather = node("Gather", &["table", "types"], "emb");
        gather.attribute.push(pb::AttributeProto {
            name: "axis".to_owned(),
            i: gather_axis,
            ..Default::default()
        });
        pb::GraphProto {
            input: vec![
                input("ids", DataType::Int64),
                input("types", DataType::Int64),
            ],
            node: vec![
                node("Cast", &["table_q"], "table_f"),
                node("Mul", &["table_f", "table_scale"], "table"),
                gather,
                node("Add", &["emb", "emb"], "y"),
            ],
            initializer: vec![
                tensor(
                    "table_q",
                    &[3, 2],
                    DataType::Int8,
                    vec![1, 2, 3, 4, 0xff, 0xfe],
                ),
                tensor(
                    "table_scale",
                    &[3, 1],
                    DataType::Float,
                    f32_bytes(&[1.0, 10.0, 0.5]),
                ),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_table_read_by_a_gather_of_an_input_is_looked_up_outside_the_graph() {
        let mut graph = table_graph(0);
        let lookups = fold_dequantization(&mut graph, true).expect("fold");
        assert_eq!(
            lookups,
            vec![Lookup {
                indices: 1,
                table: vec![1, 2, 3, 4, 0xff, 0xfe],
                width: 2,
                scales: vec![1.0, 10.0, 0.5],
            }]
        );
        // Cast, Mul and Gather are gone with both initializers; the Gather's output is the
        // last input, of the indices' shape and the table's width.
        assert_eq!(graph.node.len(), 1);
        assert_eq!(graph.node[0].op_type, "Add");
        assert!(graph.initializer.is_empty());
        let names: Vec<&str> = graph.input.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["ids", "types", "emb"]);
        let mut expected = input("emb", DataType::Float);
        if let Some(pb::type_proto::Value::TensorType(t)) =
            expected.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            t.shape
                .as_mut()
                .expect("shape")
                .dim
                .push(pb::tensor_shape_proto::Dimension {
                    value: Some(pb::tensor_shape_proto::dimension::Value::DimValue(2)),
                    ..Default::default()
                });
        }
        assert_eq!(graph.input[2], expected);
        // The rows are what the folded table holds, in the order asked.
        assert_eq!(
            lookups[0].rows(&[2, 0, 1]).expect("rows"),
            [-0.5, -1.0, 1.0, 2.0, 30.0, 40.0]
        );
        assert!(lookups[0].rows(&[3]).is_err());
        assert!(lookups[0].rows(&[-1]).is_err());
    }

    #[test]
    fn a_gather_on_another_axis_leaves_the_table_folded() {
        let mut graph = table_graph(1);
        assert_eq!(fold_dequantization(&mut graph, true), Ok(Vec::new()));
        assert_eq!(graph.input.len(), 2);
        assert_eq!(graph.initializer.len(), 1);
        assert_eq!(graph.initializer[0].name, "table");
        assert_eq!(
            graph.initializer[0].raw_data,
            f32_bytes(&[1.0, 2.0, 30.0, 40.0, -0.5, -1.0])
        );
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
