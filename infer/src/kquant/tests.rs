use super::encode::quantize_row;
use super::*;
use crate::quant::{self, Kind};

/// The fixture's blocks: `(type, block bytes, the values gguf-py dequantizes them to)`.
fn fixture() -> Vec<(KQuant, Vec<u8>, Vec<f32>)> {
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    };
    include_str!("fixture.txt")
        .lines()
        .map(|line| {
            let mut parts = line.split(' ');
            let mut next = || parts.next().unwrap_or_else(|| panic!("short line"));
            let kind = match next() {
                "Q2_K" => KQuant::Q2K,
                "Q3_K" => KQuant::Q3K,
                "Q4_K" => KQuant::Q4K,
                "Q5_K" => KQuant::Q5K,
                "Q6_K" => KQuant::Q6K,
                other => panic!("type {other}"),
            };
            let block = hex(next());
            let values = hex(next())
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (kind, block, values)
        })
        .collect()
}

#[test]
fn dequantizes_every_k_quant_as_gguf_py_does() {
    let blocks = fixture();
    for kind in &KQuant::ALL[..5] {
        assert_eq!(
            blocks.iter().filter(|b| b.0 == *kind).count(),
            4,
            "{kind:?}"
        );
    }
    for (kind, block, want) in blocks {
        assert_eq!(block.len(), kind.block_bytes());
        let mut got = [0f32; QK_K];
        dequantize_row(kind, &block, &mut got).unwrap_or_else(|b| panic!("{kind:?} {b:?}"));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // The same operations in the same order: the same bits.
            assert_eq!(g.to_bits(), w.to_bits(), "{kind:?} value {i}: {g} vs {w}");
        }
    }
}

#[test]
fn q8_k_blocks_are_their_scale_times_their_bytes() {
    let mut block = vec![0u8; KQuant::Q8K.block_bytes()];
    block[..4].copy_from_slice(&0.25f32.to_le_bytes());
    for i in 0..QK_K {
        block[4 + i] = (i as u8).wrapping_mul(37);
    }
    let mut got = [0f32; QK_K];
    dequantize_row(KQuant::Q8K, &block, &mut got).unwrap_or_else(|b| panic!("{b:?}"));
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, 0.25 * f32::from((i as u8).wrapping_mul(37) as i8));
    }
}

/// Reproducible values in about ±1, with some runs of zeros and of one sign.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let v = ((s >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 2.0;
            match (i / 64) % 4 {
                0 => 0.0,
                1 => v.abs(),
                _ => v * (1.0 + (i % 7) as f32),
            }
        })
        .collect()
}

#[test]
fn the_quantizers_write_blocks_that_come_back_within_a_step() {
    let x = values(4 * QK_K, 3);
    // The worst error of each format, in units of the largest value its scale covers.
    for (kind, tolerance) in [
        (KQuant::Q2K, 0.40),
        (KQuant::Q3K, 0.30),
        (KQuant::Q4K, 0.08),
        (KQuant::Q5K, 0.04),
        (KQuant::Q6K, 0.03),
        (KQuant::Q8K, 0.005),
    ] {
        let mut bytes = Vec::new();
        quantize_row(kind, &x, &mut bytes);
        assert_eq!(bytes.len(), 4 * kind.block_bytes());
        let mut back = vec![0f32; x.len()];
        dequantize_row(kind, &bytes, &mut back).unwrap_or_else(|b| panic!("{kind:?} {b:?}"));
        // Q8_K has one scale for its 256 values; the others one for each 16 or 32.
        let scaled = if kind == KQuant::Q8K { QK_K } else { 32 };
        for (sub, (b, v)) in back.chunks(scaled).zip(x.chunks(scaled)).enumerate() {
            let range = v.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (b, v) in b.iter().zip(v) {
                assert!(
                    (b - v).abs() <= tolerance * range + 1e-6,
                    "{kind:?} sub-block {sub}: {b} for {v} (range {range})"
                );
            }
        }
    }
}

#[test]
fn q4_k_repacked_as_q4_1_holds_the_same_values() {
    let mut rows: Vec<Vec<u8>> = fixture()
        .into_iter()
        .filter(|b| b.0 == KQuant::Q4K)
        .map(|b| b.1)
        .collect();
    let mut encoded = Vec::new();
    quantize_row(KQuant::Q4K, &values(2 * QK_K, 9), &mut encoded);
    rows.push(encoded);
    for row in rows {
        let n = row.len() / KQuant::Q4K.block_bytes() * QK_K;
        let mut want = vec![0f32; n];
        dequantize_row(KQuant::Q4K, &row, &mut want).unwrap_or_else(|b| panic!("{b:?}"));
        let mut q41 = Vec::new();
        q4k_to_q4_1(&row, &mut q41).unwrap_or_else(|b| panic!("{b:?}"));
        assert_eq!(q41.len(), n / BLOCK * Kind::Q4_1.block_bytes());
        let mut got = vec![0f32; n];
        quant::dequantize_row(Kind::Q4_1, &q41, &mut got);
        for (block, (g, w)) in got.chunks(BLOCK).zip(want.chunks(BLOCK)).enumerate() {
            let range = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (g, w) in g.iter().zip(w) {
                // The scale and the minimum rounded to half precision: 2^-11 of each.
                assert!(
                    (g - w).abs() <= range * 2.0 / 2048.0 + 1e-7,
                    "block {block}: {g} vs {w}"
                );
            }
        }
    }
}

/// Where each type keeps its scales, and how wide they are.
fn scale_fields(kind: KQuant) -> &'static [(usize, usize)] {
    match kind {
        KQuant::Q2K => &[(80, 2), (82, 2)],
        KQuant::Q3K => &[(108, 2)],
        KQuant::Q4K | KQuant::Q5K => &[(0, 2), (2, 2)],
        KQuant::Q6K => &[(208, 2)],
        KQuant::Q8K => &[(0, 4)],
    }
}

#[test]
fn hostile_scales_are_refused_not_run() {
    let x = values(2 * QK_K, 5);
    for kind in KQuant::ALL {
        let mut good = Vec::new();
        quantize_row(kind, &x, &mut good);
        let mut out = vec![0f32; x.len()];
        for &(at, width) in scale_fields(kind) {
            // NaN, infinity, and the largest finite scale (whose values a Q8_0 block cannot
            // hold, except for a type whose largest value times it still fits).
            let patches: [&[u8]; 3] = if width == 2 {
                [&[0x00, 0x7e], &[0x00, 0x7c], &[0xff, 0x7b]]
            } else {
                [
                    &[0, 0, 0xc0, 0x7f],
                    &[0, 0, 0x80, 0x7f],
                    &[0xff, 0xff, 0x7f, 0x7f],
                ]
            };
            for (p, patch) in patches.iter().enumerate() {
                let mut bad = good.clone();
                let second = kind.block_bytes() + at;
                bad[second..second + width].copy_from_slice(patch);
                let result = dequantize_row(kind, &bad, &mut out);
                if p < 2 {
                    assert_eq!(
                        result,
                        Err(BadBlock { index: 1 }),
                        "{kind:?} at {at}: {patch:?}"
                    );
                } else if result.is_ok() {
                    assert!(out.iter().all(|v| v.abs() <= MAX_Q8_0), "{kind:?} at {at}");
                }
            }
        }
    }
    // A Q4_K scale times a 6-bit sub-scale beyond half precision: refused by the repacking.
    let mut q4k = Vec::new();
    quantize_row(KQuant::Q4K, &x, &mut q4k);
    q4k[KQuant::Q4K.block_bytes()..][..2].copy_from_slice(&[0xff, 0x7b]);
    assert_eq!(
        q4k_to_q4_1(&q4k, &mut Vec::new()),
        Err(BadBlock { index: 1 })
    );
    let mut nan = q4k.clone();
    nan[2..4].copy_from_slice(&[0x00, 0x7e]);
    assert_eq!(
        q4k_to_q4_1(&nan, &mut Vec::new()),
        Err(BadBlock { index: 0 })
    );
}

mod model;
