//! The file format's tests: a tiny model written, mapped and read back, and damage found.

use super::*;

/// A small random model: `hidden` 64, 4 heads, feed-forward 128, 2 layers, a vocabulary
/// of single letters and a few words.
pub(crate) fn tiny_parts(seed: u64) -> Parts {
    let mut state = seed | 1;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let words: Vec<String> = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "##s",
        "##ing", ".", ",", "!", "a", "b", "c", "d", "e", "##a", "##b", "##c", "##d", "##e", "é",
        "東", "京", "run", "un", "##run",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let config = Config {
        hidden: 64,
        layers: 2,
        heads: 4,
        ffn: 128,
        vocab: words.len(),
        max_positions: 40,
        type_vocab: 2,
        max_tokens: 32,
        max_word_chars: 20,
        cls: 2,
        sep: 3,
        unk: 1,
        lowercase: true,
        strip_accents: true,
        clean_text: true,
        chinese_chars: true,
        norm_eps: 1e-12,
    };
    let mut int8 = |n: usize| -> Vec<i8> { (0..n).map(|_| (rand() * 254.0) as i8).collect() };
    let words_t = int8(config.vocab * 64);
    let positions_t = int8(40 * 64);
    let mut weights = Vec::new();
    for _ in 0..2 {
        weights.push(
            shapes(&config)
                .iter()
                .map(|&(i, o)| int8(i * o))
                .collect::<Vec<_>>(),
        );
    }
    let mut floats = |n: usize, scale: f32, base: f32| -> Vec<f32> {
        (0..n).map(|_| base + rand() * scale).collect()
    };
    let norm = |f: &mut dyn FnMut(usize, f32, f32) -> Vec<f32>| Norm {
        gain: f(64, 0.2, 1.0),
        bias: f(64, 0.2, 0.0),
    };
    let layers = weights
        .into_iter()
        .map(|ws| {
            let mut lin = ws
                .into_iter()
                .zip(shapes(&config))
                .map(|(w, (i, o))| Linear {
                    weights: w,
                    scales: floats(o, 0.002, 1.5 / (i as f32).sqrt() / 64.0),
                    bias: floats(o, 0.1, 0.0),
                });
            let mut next = || lin.next().expect("six");
            let (query, key, value, output, up, down) =
                (next(), next(), next(), next(), next(), next());
            Layer {
                query,
                key,
                value,
                output,
                attention_norm: norm(&mut floats),
                up,
                down,
                output_norm: norm(&mut floats),
            }
        })
        .collect();
    Parts {
        config,
        words: Table {
            values: words_t,
            scales: floats(config.vocab, 0.001, 0.01),
        },
        positions: Table {
            values: positions_t,
            scales: floats(40, 0.001, 0.005),
        },
        token_types: floats(2 * 64, 0.1, 0.0),
        embedding_norm: norm(&mut floats),
        layers,
        vocab: words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), i as u32))
            .collect(),
        added: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), i as u32))
            .collect(),
    }
}

#[test]
fn a_written_file_opens_with_the_same_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.axoemb");
    let parts = tiny_parts(7);
    write(&path, &parts, &[9; SOURCE_LEN]).expect("write");
    let m = Model::open(&path).expect("open");
    assert_eq!(m.config(), &parts.config);
    assert_eq!(m.source(), &[9; SOURCE_LEN]);
    let l1 = m.layer(1);
    assert_eq!(l1.linears[4].scales, &parts.layers[1].up.scales[..]);
    assert_eq!(l1.linears[5].bias, &parts.layers[1].down.bias[..]);
    assert_eq!(l1.output_norm.gain, &parts.layers[1].output_norm.gain[..]);
    let w: Vec<i8> = l1.linears[5].weights.iter().map(|&b| b as i8).collect();
    assert_eq!(w, parts.layers[1].down.weights);
    assert_eq!(m.token_type(), &parts.token_types[..64]);
    let mut row = vec![0f32; 64];
    m.word(6, &mut row).expect("row");
    let expected: Vec<f32> = parts.words.values[6 * 64..7 * 64]
        .iter()
        .map(|&q| f32::from(q) * parts.words.scales[6])
        .collect();
    assert_eq!(row, expected);
    assert!(m.word(parts.config.vocab as u32, &mut row).is_err());
}

#[test]
fn every_damaged_byte_is_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.axoemb");
    write(&path, &tiny_parts(3), &[0; SOURCE_LEN]).expect("write");
    let good = std::fs::read(&path).expect("read");
    let words_at = {
        let m = Model::open(&path).expect("open");
        m.sections[WORDS].0
    };
    // One flipped bit anywhere: in the header or a checked section the file does not
    // open; in the word table the row it lies in is refused when read.
    let step = good.len() / 397;
    for at in (0..good.len()).step_by(step.max(1)) {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).expect("write");
        match Model::open(&path) {
            Err(Error::Damaged { .. }) => assert!(at < words_at, "byte {at}"),
            Err(e) => panic!("byte {at}: {e}"),
            Ok(m) => {
                // Padding between sections is not covered: nothing reads it.
                if at >= words_at {
                    let row = (at - words_at) / word_row_bytes(64);
                    let mut out = vec![0f32; 64];
                    assert!(
                        m.word(row as u32, &mut out).is_err(),
                        "byte {at} (row {row})"
                    );
                }
            }
        }
    }
    std::fs::write(&path, &good[..good.len() - 1]).expect("write");
    assert!(matches!(Model::open(&path), Err(Error::Damaged { .. })));
    std::fs::write(&path, b"").expect("write");
    assert!(matches!(Model::open(&path), Err(Error::Damaged { .. })));
}

#[test]
fn parts_that_disagree_with_the_config_are_refused() {
    let mut p = tiny_parts(1);
    p.layers[0].up.scales.pop();
    assert!(matches!(p.check(), Err(Error::Unsupported(_))));
    let mut p = tiny_parts(1);
    p.config.hidden = 48;
    assert!(p.check().is_err());
    let mut p = tiny_parts(1);
    p.vocab[3].1 = 4;
    assert!(p.check().is_err(), "two words, one id");
    let mut p = tiny_parts(1);
    p.embedding_norm.bias[0] = f32::NAN;
    assert!(p.check().is_err());
}
