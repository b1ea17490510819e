//! The fallback token estimate (no tokenizer) against the local model's real tokenizer:
//! never below the real count, and within 2× of it, on varied text.
#![cfg(feature = "local")]

use std::path::PathBuf;

use axocoatl::budget::estimate_text;
use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::Provider;

fn model_path() -> PathBuf {
    axocoatl::config::local_model_path(&|k| std::env::var(k).ok())
        .expect("HOME or AXOCOATL_MODEL is set")
}

const PROMPTS: &[&str] = &[
    "Summarize the README in three bullet points.",
    "What is the capital of France, and why did it become the capital?",
    "Please review this change carefully and report any bugs you find.",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{v:?}\");\n}",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY name;",
    "{\"agents\": [{\"id\": \"coder\", \"provider\": \"ollama\", \"token_budget\": {\"per_call\": 8192}}]}",
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]",
    "id,name,score\n1,alice,93.5\n2,bob,88.25\n3,carol,79\n",
    "日本語のテキストをトークンに分割すると、文字ごとに多くのトークンが必要になります。",
    "中文文本通常需要比英文更多的标记。这是一个测试句子。",
    "한국어 문장도 테스트합니다. 토큰 수를 세어 봅시다.",
    "Emoji test: 🎉🚀🔥 launch day! 👍🏽 and 👨‍👩‍👧‍👦 family.",
    "Ünïcödé àccénts: naïve café, façade, jalapeño, Straße.",
    "Привет, мир! Это проверка кириллицы.",
    "The year 2026 had 365 days; 1234567890 is a long number; 3.14159 is pi.",
    "git diff --stat HEAD~3..HEAD -- src/ | tail -n 20 && cargo test --workspace",
    "   lots    of     spaces     between      words    and\ttabs\tand\nnewlines\n\n\n",
    "https://example.com/path/to/resource?query=value&other=1#fragment",
    "A",
];

#[test]
fn the_fallback_estimate_is_never_below_the_real_count_and_within_2x() {
    let path = model_path();
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-model.sh",
        path.display()
    );
    let local = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: path,
        threads: Some(1),
        context_size: None,
        ready_dir: None,
    })
    .expect("load");
    assert_eq!(PROMPTS.len(), 20);
    let mut report = Vec::new();
    for p in PROMPTS {
        let real = local.count_tokens(p).expect("tokenizer") as u64;
        let est = estimate_text(p);
        let ok = est >= real && est <= 2 * real.max(1);
        report.push(format!(
            "{} {real:>4} real {est:>4} estimated  {p:?}",
            if ok { "ok " } else { "BAD" }
        ));
    }
    let report = report.join("\n");
    assert!(!report.contains("BAD"), "{report}");
}
