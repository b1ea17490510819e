//! Tests of the real model (fetched by scripts/fetch-model.sh, as scripts/test.sh does).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use super::*;

fn embedder() -> &'static Embedder {
    match Embedder::shared() {
        Ok(e) => e,
        Err(e) => panic!("{e}: run scripts/fetch-model.sh first (or set {EMBED_DIR_ENV})"),
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

const SENTENCES: &[&str] = &[
    "The cat sat on the mat.",
    "A kitten was resting on the rug.",
    "Quarterly revenue grew by twelve percent.",
    "Ünïcode façade — naïve café, 東京 and emoji 🙂 survive tokenization.",
    "short",
    "The build server in the basement runs Debian and has two cores; its disk does a few \
     hundred fsyncs per second, and the nightly job that rebuilds the search index starts at \
     three in the morning, after the backups.",
];

#[test]
fn vectors_are_unit_length_and_similar_texts_are_closer() {
    let e = embedder();
    let v = e.embed(SENTENCES).expect("embed");
    assert_eq!(v.len(), SENTENCES.len());
    for x in &v {
        assert_eq!(x.len(), DIM);
        assert!((dot(x, x) - 1.0).abs() < 1e-4);
    }
    assert!(
        dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2,
        "cat/kitten vs revenue"
    );
    // Batching and padding do not change a vector.
    let alone = e.embed(&[SENTENCES[0]]).expect("embed");
    assert!(dot(&alone[0], &v[0]) > 0.9999);
    assert!(e.embed(&[]).expect("empty").is_empty());
}

/// The python of scripts/ort-venv.sh, or why there is none.
fn reference_python() -> Result<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/ort-venv.sh"))
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run scripts/ort-venv.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "scripts/ort-venv.sh failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
#[expect(clippy::print_stderr, reason = "a skipped comparison says why")]
fn vectors_match_onnxruntime() {
    let e = embedder();
    let python = match reference_python() {
        Ok(p) => p,
        Err(reason) => {
            eprintln!("skipped: no onnxruntime to compare with ({reason})");
            return;
        }
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let request = serde_json::json!({
        "model": e.files().model,
        "tokenizer": e.files().tokenizer,
        "texts": SENTENCES,
        "batch": 4,
    });
    let mut child = Command::new(python)
        .arg(root.join("scripts/ort_embed.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run ort_embed.py");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(request.to_string().as_bytes())
        .expect("write request");
    let out = child.wait_with_output().expect("ort_embed.py");
    assert!(out.status.success(), "ort_embed.py failed");
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let theirs: Vec<Vec<f32>> = serde_json::from_value(reply["vectors"].clone()).expect("vectors");
    let ours = e.embed(SENTENCES).expect("embed");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        let cos = dot(a, b);
        assert!(cos >= 0.999, "sentence {i}: cosine {cos} with onnxruntime");
    }
}
