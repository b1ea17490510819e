//! man/ and completions/ are generated from the clap definitions, and docs/json.md (the
//! `--json` reference) from the output types of cmd/json.rs, and all are committed: this test
//! regenerates them and fails when they drift.

#[test]
fn man_pages_completions_and_the_json_reference_are_in_sync() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(crate::common::env::bin())
        .args(["util", "generate", "--out"])
        .arg(tmp.path())
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut drift = Vec::new();
    for dir in ["man", "completions"] {
        let fresh = list(&tmp.path().join(dir));
        let committed = list(&root.join(dir));
        if fresh.keys().collect::<Vec<_>>() != committed.keys().collect::<Vec<_>>() {
            drift.push(format!(
                "{dir}/: files differ: {:?} vs {:?}",
                fresh.keys(),
                committed.keys()
            ));
        }
        for (name, bytes) in &fresh {
            if committed.get(name) != Some(bytes) {
                drift.push(format!("{dir}/{name}"));
            }
        }
    }
    let fresh = std::fs::read(tmp.path().join("docs/json.md")).expect("generated docs/json.md");
    if std::fs::read(root.join("docs/json.md")).ok().as_ref() != Some(&fresh) {
        drift.push("docs/json.md".into());
    }
    assert!(
        drift.is_empty(),
        "generated docs are out of date: {drift:?}\nre-run: cargo run -- util generate --out ."
    );
}

fn list(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            out.insert(
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            );
        }
    }
    out
}
