//! Property tests of the configuration reader: whatever the bytes, it never panics, and
//! every refusal is a diagnostic with a position inside the text.
//!
//! Each property runs `AXOCOATL_PROPTEST_CASES` cases (default 2,500; `scripts/soak.sh`
//! raises it). Failures are not persisted to files: the seed is in the failure message.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

use super::{load, load_str, Diagnostic};

const DEFAULT_CASES: u32 = 2_500;

fn cases() -> u32 {
    std::env::var("AXOCOATL_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The diagnostics of a refusal point into the text: line and column at least 1, and no
/// further than one past its last line and its longest line.
fn check_positions(text: &str, result: &Result<super::Loaded, Vec<Diagnostic>>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let breaks = text.matches('\n').count() + text.matches('\r').count();
    let widest = text
        .split(['\n', '\r'])
        .map(|line| line.chars().count())
        .max()
        .unwrap_or(0);
    match result {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                assert!(!warning.is_error(), "{warning}");
            }
        }
        Err(diagnostics) => {
            assert!(!diagnostics.is_empty(), "a refusal without a diagnostic");
            assert!(diagnostics.iter().any(Diagnostic::is_error));
            for d in diagnostics {
                assert!(d.line >= 1 && d.column >= 1, "{d}");
                assert!(d.line <= breaks + 2, "line past the text: {d}\n{text:?}");
                assert!(
                    d.column <= widest + 2,
                    "column past the text: {d}\n{text:?}"
                );
                assert!(!d.message.is_empty(), "{d}");
            }
        }
    }
}

/// Pieces that YAML and the schema give meaning to, so that random text gets past the
/// syntax often enough to exercise structure and validation too.
fn token() -> impl Strategy<Value = String> {
    let words = prop::sample::select(vec![
        "agents",
        "providers",
        "workflows",
        "automations",
        "consolidation",
        "checkpoint",
        "default_agent",
        "default_session",
        "id",
        "name",
        "provider",
        "model",
        "kind",
        "system_prompt",
        "tools",
        "depends_on",
        "role",
        "sampling",
        "temperature",
        "top_p",
        "max_tokens",
        "response_format",
        "token_budget",
        "per_call",
        "per_execution",
        "overflow_policy",
        "memory",
        "recall",
        "core",
        "blocks",
        "label",
        "limit",
        "shared",
        "base_url",
        "api_key_env",
        "timeout_secs",
        "deadline_secs",
        "max_retries",
        "script",
        "schedule",
        "request",
        "entry_point",
        "workers",
        "mcp_servers",
        "command",
        "args",
        "env",
        "startup_timeout_secs",
        "tool_timeout_secs",
        "mcp__a__b",
        "max_parallel",
        "activation_threshold",
        "activation_decay",
        "passive_inject",
        "min_score",
        "top_k",
        "max_session_messages",
        "idle_threshold_secs",
        "interval_secs",
        "workspace",
        "sandbox",
        "enabled",
        "keep",
        "policy",
        "local",
        "ollama",
        "openai",
        "coordinator",
        "worker",
        "autonomous",
        "json",
        "text",
        "abort",
        "warn",
        "true",
        "false",
        "null",
        "~",
        "0",
        "-1",
        "3.5",
        "1e9",
        "0x1F",
        ".inf",
        "a",
        "b",
    ]);
    let punctuation = prop::sample::select(vec![
        ": ",
        ":",
        "- ",
        "-",
        "[",
        "]",
        "{",
        "}",
        ", ",
        ",",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "\"",
        "'",
        "|",
        ">",
        "# c",
        "\n",
        "\n  ",
        "\n    ",
        "\n- ",
        "  ",
        "\t",
        "---\n",
        "...\n",
        "? ",
        "!!str ",
        "%YAML 1.2\n",
        "\u{feff}",
        "\0",
        "\r\n",
        "\\",
        "é",
        "😀",
        "\u{202e}",
    ]);
    prop_oneof![
        3 => words.prop_map(str::to_string),
        3 => punctuation.prop_map(str::to_string),
        1 => "[a-z_]{1,12}",
        1 => any::<String>().prop_map(|s| s.chars().take(8).collect()),
    ]
}

/// A YAML document shaped like a configuration: mappings and lists of schema keys and
/// scalars, nested, written in block or flow style.
fn document() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "agents",
        "providers",
        "id",
        "provider",
        "model",
        "kind",
        "sampling",
        "temperature",
        "token_budget",
        "per_call",
        "per_execution",
        "memory",
        "core",
        "blocks",
        "label",
        "limit",
        "tools",
        "depends_on",
        "role",
        "base_url",
        "deadline_secs",
        "unknown_key",
        "checkpoint",
        "keep",
        "script",
        "name",
        "mcp_servers",
        "command",
        "args",
        "env",
        "startup_timeout_secs",
        "tool_timeout_secs",
        "workflows",
        "entry_point",
        "workers",
        "attachments",
        "ocr",
        "languages",
        "max_pixels",
        "timeout_secs",
    ]);
    let scalar = prop_oneof![
        prop::sample::select(vec![
            "local",
            "ollama",
            "openai",
            "script",
            "a",
            "b",
            "0",
            "7",
            "0.5",
            "-3",
            "true",
            "null",
            "\"quoted\"",
            "'single'",
            "http://x",
            "abort",
            "worker",
            "coordinator",
            "mcp__a__b",
            "python3",
            "\"\"",
        ])
        .prop_map(str::to_string),
        "[a-z]{1,6}",
    ];
    let leaf = scalar.prop_map(Yaml::Scalar);
    let tree = leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Yaml::Seq),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|entries| {
                Yaml::Map(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                )
            }),
        ]
    });
    (tree, any::<bool>()).prop_map(|(tree, flow)| {
        let mut out = String::new();
        if flow {
            tree.flow(&mut out);
            out.push('\n');
        } else {
            tree.block(&mut out, 0);
        }
        out
    })
}

#[derive(Clone, Debug)]
enum Yaml {
    Scalar(String),
    Seq(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    fn flow(&self, out: &mut String) {
        match self {
            Yaml::Scalar(s) => out.push_str(s),
            Yaml::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.flow(out);
                }
                out.push(']');
            }
            Yaml::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(": ");
                    v.flow(out);
                }
                out.push('}');
            }
        }
    }

    fn block(&self, out: &mut String, indent: usize) {
        let pad = " ".repeat(indent);
        match self {
            Yaml::Scalar(_) => {
                out.push_str(&pad);
                self.flow(out);
                out.push('\n');
            }
            Yaml::Seq(items) if items.is_empty() => out.push_str(&format!("{pad}[]\n")),
            Yaml::Map(entries) if entries.is_empty() => out.push_str(&format!("{pad}{{}}\n")),
            Yaml::Seq(items) => {
                for item in items {
                    out.push_str(&format!("{pad}-\n"));
                    item.block(out, indent + 2);
                }
            }
            Yaml::Map(entries) => {
                for (k, v) in entries {
                    out.push_str(&format!("{pad}{k}:\n"));
                    v.block(out, indent + 2);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let result = load_str(Path::new("t.yaml"), &text);
        check_positions(&text, &result);
    }

    #[test]
    fn arbitrary_files_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("axocoatl.yaml");
        std::fs::write(&file, &bytes).expect("write");
        let result = load(&file);
        match std::str::from_utf8(bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes)) {
            Ok(text) => check_positions(text, &result),
            // Not UTF-8: the one diagnostic points at the first bad byte.
            Err(_) => {
                let diagnostics = result.expect_err("not UTF-8 is refused");
                prop_assert_eq!(diagnostics.len(), 1);
                prop_assert!(diagnostics[0].message.contains("not UTF-8"));
            }
        }
    }

    #[test]
    fn yaml_ish_text_never_panics(tokens in prop::collection::vec(token(), 0..120)) {
        let text: String = tokens.concat();
        let result = load_str(Path::new("t.yaml"), &text);
        check_positions(&text, &result);
    }

    #[test]
    fn configuration_shaped_documents_never_panic(text in document()) {
        let result = load_str(Path::new("t.yaml"), &text);
        check_positions(&text, &result);
    }
}
