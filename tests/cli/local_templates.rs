//! Hostile chat templates in a model file: the real SmolLM2 GGUF rewritten with another
//! `tokenizer.chat_template`. A template that loops for ever or doubles a string until the
//! machine runs out of memory ends its turn with a clear error; it never hangs past `stop`
//! or aborts the process.

#![cfg(feature = "local")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::{Cancel, ChatRequest, Message, Provider, ProviderError, Role, Sampling};

use crate::common::env::TestEnv;

fn model_path() -> PathBuf {
    let path = axocoatl::config::local_model_path(&|k| std::env::var(k).ok()).expect("HOME");
    assert!(
        path.is_file(),
        "{} missing: run scripts/fetch-model.sh",
        path.display()
    );
    path
}

const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// Reads GGUF values past their ends, for the rewrite below.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let piece = &self.bytes[self.at..self.at + n];
        self.at += n;
        piece
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("8 bytes"))
    }

    fn string(&mut self) -> String {
        let n = self.u64() as usize;
        String::from_utf8(self.take(n).to_vec()).expect("UTF-8")
    }

    /// Skips a value of GGUF type `ty`.
    fn skip_value(&mut self, ty: u32) {
        match ty {
            0 | 1 | 7 => self.at += 1,
            2 | 3 => self.at += 2,
            4..=6 => self.at += 4,
            10..=12 => self.at += 8,
            8 => {
                let n = self.u64() as usize;
                self.at += n;
            }
            9 => {
                let item = self.u32();
                let count = self.u64();
                for _ in 0..count {
                    self.skip_value(item);
                }
            }
            other => panic!("GGUF value type {other}"),
        }
    }
}

fn gguf_string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// Writes the GGUF `from` to `to` with `template` as its chat template: the header rewritten,
/// the tensor data copied as it is (its offsets are relative to where the data starts).
pub fn with_template(from: &Path, to: &Path, template: &str) {
    let bytes = std::fs::read(from).expect("read the model");
    let mut c = Cursor {
        bytes: &bytes,
        at: 0,
    };
    assert_eq!(c.take(4), b"GGUF");
    let version = c.u32();
    let tensors = c.u64();
    let kvs = c.u64();
    let mut header = Vec::new();
    let mut alignment = 32u64;
    let mut kept = 0u64;
    for _ in 0..kvs {
        let start = c.at;
        let key = c.string();
        let ty = c.u32();
        let value_at = c.at;
        c.skip_value(ty);
        if key == "general.alignment" {
            alignment = u64::from(u32::from_le_bytes(
                bytes[value_at..value_at + 4].try_into().expect("u32"),
            ));
        }
        if key != TEMPLATE_KEY {
            header.extend(&bytes[start..c.at]);
            kept += 1;
        }
    }
    let infos = c.at;
    for _ in 0..tensors {
        let _name = c.string();
        let dims = c.u32();
        c.at += 8 * dims as usize + 4 + 8;
    }
    let infos = &bytes[infos..c.at];
    let data = (c.at as u64).div_ceil(alignment) * alignment;

    let mut out = Vec::with_capacity(bytes.len() + template.len());
    out.extend(b"GGUF");
    out.extend(version.to_le_bytes());
    out.extend(tensors.to_le_bytes());
    out.extend((kept + 1).to_le_bytes());
    out.extend(&header);
    gguf_string(&mut out, TEMPLATE_KEY);
    out.extend(8u32.to_le_bytes());
    gguf_string(&mut out, template);
    out.extend(infos);
    out.resize(
        (out.len() as u64).div_ceil(alignment) as usize * alignment as usize,
        0,
    );
    out.extend(&bytes[data as usize..]);
    std::fs::write(to, out).expect("write the model");
}

/// Nested loops of ten billion iterations in all.
const LOOPS: &str = "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}{{ '<|im_start|>assistant\n' }}";
/// A string doubled 40 times: a terabyte.
const DOUBLING: &str = "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";

/// Runs `cmd`, killing it past `limit` (a hang is a failure, reported as `None`).
fn bounded(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child.wait_with_output().expect("output"))
}

#[test]
fn a_hostile_template_ends_the_turn_with_a_clear_error() {
    let env = TestEnv::with_config(
        "agents:\n  - id: a\n    provider: local\n    sampling: {max_tokens: 4}\n",
    );
    let model = model_path();
    for (name, template) in [("loops", LOOPS), ("doubling", DOUBLING)] {
        let hostile = env.work.join(format!("{name}.gguf"));
        with_template(&model, &hostile, template);
        // 4 GiB of address space: a template that allocates without bound aborts the
        // process (the test fails) rather than taking the machine.
        let mut cmd = env.cmd_limited(4 << 20, &["send", "--json", "-s", name, "hi"]);
        cmd.env("AXOCOATL_MODEL", &hostile);
        let out = bounded(cmd, Duration::from_secs(120))
            .unwrap_or_else(|| panic!("{name}: the turn did not end within 120 s"));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(3), "{name}: {stdout}{stderr}");
        let last: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a line")).expect("JSON");
        assert_eq!(last["state"], "failed", "{name}: {last}");
        let error = last["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("more work than a chat template may")
                && error.contains("use another model file"),
            "{name}: {error}"
        );
    }
}

#[test]
fn a_stopped_call_does_not_render_the_template() {
    let dir = tempfile::tempdir().expect("dir");
    let hostile = dir.path().join("loops.gguf");
    with_template(&model_path(), &hostile, LOOPS);
    let mut p = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: hostile,
        threads: None,
        context_size: None,
        ready_dir: None,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let request = ChatRequest {
        model: String::new(),
        messages: vec![Message::new(Role::User, "hi")],
        tools: Vec::new(),
        sampling: Sampling::default(),
    };
    let cancel = Cancel::new();
    cancel.cancel();
    let stopped = p.chat(&request, &cancel, &mut |_| {});
    assert!(
        matches!(stopped, Err(ProviderError::Cancelled)),
        "{stopped:?}"
    );
    let failed = p.chat(&request, &Cancel::new(), &mut |_| {});
    assert!(
        matches!(&failed, Err(ProviderError::Model { detail, .. }) if detail.contains("more work than a chat template may")),
        "{failed:?}"
    );
}
