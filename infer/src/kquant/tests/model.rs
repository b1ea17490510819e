//! Whole models of k-quant matrices through the engine.

use std::path::{Path, PathBuf};

use super::values;
use crate::gguf::tests::Builder;
use crate::kernel::Isa;
use crate::kquant::encode::quantize_row;
use crate::kquant::{dequantize_row, KQuant, QK_K};
use crate::{gguf, Cache, Error, Model};

const E: usize = 256;
const FF: usize = 512;
const KV: usize = 128;
const VOCAB: usize = 40;

/// How a test stores each matrix: `(GGML type, bytes)` from its values.
type Store<'a> = &'a dyn Fn(&[f32]) -> (u32, Vec<u8>);

/// A small llama model (every row a multiple of 256 values) with its matrices stored by
/// `store`; the same seed gives the same values whatever the store.
fn model(dir: &Path, file: &str, store: Store<'_>) -> PathBuf {
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut seed = 11;
    let mut matrix = |rows: usize, cols: usize| {
        seed += 1;
        let v: Vec<f32> = values(rows * cols, seed).iter().map(|v| v * 0.05).collect();
        store(&v)
    };
    let (kind, bytes) = matrix(VOCAB, E);
    let mut b = Builder::default()
        .string("general.architecture", "llama")
        .u32("llama.block_count", 2)
        .u32("llama.embedding_length", E as u32)
        .u32("llama.feed_forward_length", FF as u32)
        .u32("llama.attention.head_count", 4)
        .u32("llama.attention.head_count_kv", 2)
        .u32("llama.context_length", 128)
        .tensor("token_embd.weight", &[E as u64, VOCAB as u64], kind, bytes)
        .tensor("output_norm.weight", &[E as u64], 0, f32s(&[1.0; E]));
    for l in 0..2 {
        let name = |n: &str| format!("blk.{l}.{n}.weight");
        b = b
            .tensor(&name("attn_norm"), &[E as u64], 0, f32s(&[1.0; E]))
            .tensor(&name("ffn_norm"), &[E as u64], 0, f32s(&[1.0; E]));
        for (n, rows, cols) in [
            ("attn_q", E, E),
            ("attn_k", KV, E),
            ("attn_v", KV, E),
            ("attn_output", E, E),
            ("ffn_gate", FF, E),
            ("ffn_up", FF, E),
            ("ffn_down", E, FF),
        ] {
            let (kind, bytes) = matrix(rows, cols);
            b = b.tensor(&name(n), &[cols as u64, rows as u64], kind, bytes);
        }
    }
    let path = dir.join(file);
    std::fs::write(&path, b.build()).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// The matrix in `kind`.
fn as_kind(kind: KQuant) -> impl Fn(&[f32]) -> (u32, Vec<u8>) {
    move |v| {
        let mut out = Vec::new();
        quantize_row(kind, v, &mut out);
        (kind.ggml(), out)
    }
}

/// The values the matrix holds in `kind`, stored as F32.
fn through(kind: KQuant) -> impl Fn(&[f32]) -> (u32, Vec<u8>) {
    move |v| {
        let (_, bytes) = as_kind(kind)(v);
        let mut back = vec![0f32; v.len()];
        dequantize_row(kind, &bytes, &mut back).unwrap_or_else(|b| panic!("{b:?}"));
        (0, back.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

fn logits(model: &Model) -> Vec<f32> {
    let mut logits = Vec::new();
    let mut cache = Cache::new(model.config());
    model
        .forward(&mut cache, &[3, 17, 5, 5, 39, 0, 12], Some(&mut logits))
        .unwrap_or_else(|e| panic!("{e}"));
    logits
}

fn open(path: &Path, isa: Isa) -> Model {
    Model::open_with(path, isa).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_k_quant_model_runs_as_its_values_do() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for kind in KQuant::ALL {
        let k = model(dir.path(), "k.gguf", &as_kind(kind));
        let f = model(dir.path(), "f32.gguf", &through(kind));
        let (k, f) = (open(&k, Isa::detect()), open(&f, Isa::detect()));
        assert_eq!(k.widened(), 15, "{kind:?}: every matrix converted");
        let (from_k, from_f) = (logits(&k), logits(&f));
        assert!(from_k.iter().all(|v| v.is_finite()));
        if kind == KQuant::Q4K {
            // Repacked as Q4_1 rather than widened to Q8_0 as the F32 file is: close.
            let top = from_f.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (a, b) in from_k.iter().zip(&from_f) {
                assert!((a - b).abs() <= 0.03 * (1.0 + top), "{a} vs {b}");
            }
        } else {
            // Widened to the very Q8_0 blocks the F32 file of the same values widens to.
            assert_eq!(from_k, from_f, "{kind:?}");
        }
    }
}

#[test]
fn a_q4_k_model_gives_the_same_scores_on_every_kernel() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = model(dir.path(), "q4k.gguf", &as_kind(KQuant::Q4K));
    let (plain, fast) = (
        logits(&open(&path, Isa::Plain)),
        logits(&open(&path, Isa::detect())),
    );
    for (p, f) in plain.iter().zip(&fast) {
        assert!((p - f).abs() <= 1e-3 * (1.0 + p.abs()), "{p} vs {f}");
    }
}

#[test]
fn hostile_k_quant_tensors_are_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A row that does not divide into super-blocks of 256.
    let bytes = Builder::default()
        .tensor("w", &[96, 2], KQuant::Q4K.ggml(), vec![0; 2 * 144])
        .build();
    let err = gguf::parse(&bytes).map_or_else(|e| e.to_string(), |_| String::new());
    assert!(err.contains("256"), "{err}");
    // A tensor cut short by the end of the file.
    for kind in KQuant::ALL {
        let good = Builder::default()
            .tensor(
                "w",
                &[QK_K as u64, 2],
                kind.ggml(),
                vec![0; 2 * kind.block_bytes()],
            )
            .build();
        let t = gguf::parse(&good).unwrap_or_else(|e| panic!("{e}")).tensors[0].clone();
        assert_eq!(t.len, 2 * kind.block_bytes());
        assert!(
            gguf::parse(&good[..t.start + t.len - 1]).is_err(),
            "{kind:?}"
        );
    }
    // A model whose matrix has a NaN scale in its second row: refused at load, naming it.
    let path = model(dir.path(), "nan.gguf", &|v: &[f32]| {
        let (kind, mut bytes) = as_kind(KQuant::Q6K)(v);
        // ffn_gate (and ffn_up, ffn_down) of FF · E values: the first super-block of row 1.
        let row = E / QK_K * KQuant::Q6K.block_bytes();
        if v.len() == FF * E {
            bytes[row + 208..row + 210].copy_from_slice(&[0x00, 0x7e]);
        }
        (kind, bytes)
    });
    match Model::open(&path) {
        Err(Error::Format(e)) => assert!(e.contains("ffn_gate") && e.contains("row 1"), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a NaN scale loaded"),
    }
}

#[test]
fn a_requantized_file_is_the_model_quantized_tensor_by_tensor() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let f32s = |v: &[f32]| {
        (
            0,
            v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
    };
    let source = model(dir.path(), "f32.gguf", &f32s);
    let bytes = std::fs::read(&source).unwrap_or_else(|e| panic!("{e}"));
    for kind in [KQuant::Q6K.ggml(), KQuant::Q3K.ggml(), 8] {
        let mut out = Vec::new();
        let done =
            crate::rewrite::requantize(&bytes, kind, &mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((done.converted, done.kept), (15, 0));
        let path = dir.path().join("requantized.gguf");
        std::fs::write(&path, &out).unwrap_or_else(|e| panic!("{e}"));
        let g = gguf::parse(&out).unwrap_or_else(|e| panic!("{e}"));
        let original = gguf::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.metadata, original.metadata);
        assert_eq!(
            g.tensor("blk.1.ffn_down.weight").map(|t| t.kind),
            Some(kind)
        );
        assert_eq!(g.tensor("output_norm.weight").map(|t| t.kind), Some(0));
        // The same blocks as quantizing each matrix by hand: the same scores.
        let by_hand = match KQuant::from_ggml(kind) {
            Some(k) => model(dir.path(), "by-hand.gguf", &as_kind(k)),
            None => source.clone(),
        };
        let (a, b) = (open(&path, Isa::detect()), open(&by_hand, Isa::detect()));
        assert_eq!(logits(&a), logits(&b), "{}", gguf::type_name(kind));
    }
}

#[test]
fn an_i_quant_file_is_refused_naming_the_tensor_and_its_type() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // IQ4_XS (type 23): a size this crate does not know, so no bytes are read.
    let path = model(dir.path(), "iq4_xs.gguf", &|_: &[f32]| (23, Vec::new()));
    match Model::open(&path) {
        Err(Error::Unsupported(e)) => assert!(
            e.contains("token_embd.weight") && e.contains("IQ4_XS") && e.contains("not run yet"),
            "{e}"
        ),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an IQ4_XS file loaded"),
    }
}
