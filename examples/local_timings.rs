//! The `local` provider's figures for `bench/local_vs_llama_cpp.sh`, in one process: load,
//! prompt and generation tokens/s, time to first token and peak RSS, on the prompts that
//! script gives llama.cpp too. Built in release (`cargo build --release --example
//! local_timings`).
//!
//!   local_timings MODEL --prompts        # the two rendered prompts, NUL-separated
//!   local_timings MODEL [--threads N] [--busy N]
//!
//! `--busy N` keeps N threads spinning beside the model (a machine whose cores are taken).
#![expect(clippy::print_stdout, reason = "an example that reports on stdout")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::{Cancel, ChatRequest, Message, Provider, Role, Sampling};

const GEN_TOKENS: u32 = 128;
const GEN_PROMPT: &str = "Write a long story about a dragon who learns to cook.";

/// A prompt of about 600 tokens.
fn long_prompt() -> String {
    let mut s = String::from("Summarise the following notes in one sentence.\n\n");
    for i in 0..24 {
        s.push_str(&format!(
            "Note {i}: the river rose after the storm, the bridge was closed for repairs, and the \
             town council met to plan the new road.\n"
        ));
    }
    s
}

fn request(prompt: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: "local".into(),
        messages: vec![Message::new(Role::User, prompt)],
        tools: Vec::new(),
        sampling: Sampling {
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            ..Sampling::default()
        },
    }
}

fn arg(args: &[String], name: &str) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(model) = args.get(1).map(PathBuf::from) else {
        println!("usage: local_timings MODEL [--prompts] [--threads N] [--busy N]");
        std::process::exit(2);
    };
    let threads = arg(&args, "--threads").max(1);
    let busy = arg(&args, "--busy");
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..busy)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let mut p = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: model,
        threads: Some(threads),
        context_size: None,
        ready_dir: None,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    if args.iter().any(|a| a == "--prompts") {
        for text in [long_prompt(), GEN_PROMPT.to_string()] {
            let rendered = p
                .render_prompt(&[Message::new(Role::User, text)])
                .unwrap_or_else(|e| panic!("{e}"));
            print!("{rendered}\0");
        }
        return;
    }
    let cancel = Cancel::new();
    let mut run = |req: ChatRequest| {
        p.clear_cache();
        let cpu = cpu_seconds();
        p.chat(&req, &cancel, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        (p.last_timings(), cpu_seconds() - cpu)
    };
    run(request("Hi", 2));
    let (prompt, prompt_cpu) = run(request(&long_prompt(), 1));
    let (generation, generation_cpu) = run(request(GEN_PROMPT, GEN_TOKENS));
    // The generation call's CPU time less its prompt's reading, at the rate just measured.
    let reading = generation.prompt_read as f64 * prompt_cpu / prompt.prompt_read.max(1) as f64;
    let generation_cpu = (generation_cpu - reading).max(1e-9);
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        let _ = s.join();
    }
    let rate = |n: usize, d: std::time::Duration| n as f64 / d.as_secs_f64().max(1e-9);
    println!(
        "load_s={:.3} prompt_tokens={} prompt_tok_s={:.1} prompt_tok_per_cpu_s={:.1} gen_tokens={} gen_tok_s={:.1} gen_tok_per_cpu_s={:.1} ttft_s={:.3} max_rss_mib={:.1} kernels={}",
        p.load_time().as_secs_f64(),
        prompt.prompt_tokens,
        rate(prompt.prompt_read, prompt.prompt),
        prompt.prompt_read as f64 / prompt_cpu.max(1e-9),
        generation.generated_tokens,
        rate(
            generation.generated_tokens.saturating_sub(1),
            generation.generation
        ),
        generation.generated_tokens.saturating_sub(1) as f64 / generation_cpu,
        generation.first_token.as_secs_f64(),
        max_rss_mib(),
        p.kernels()
    );
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (nanoseconds): the
/// model computes on the calling thread, and this time does not grow while other work on a
/// busy machine holds the core.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// The process's peak resident set, from `/proc/self/status`.
fn max_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
