//! The `local` provider's figures for `bench/local_vs_llama_cpp.sh`, in one process: load,
//! prompt and generation tokens/s, time to first token and peak RSS, on the prompts that
//! script gives llama.cpp too. Built in release (`cargo build --release --example
//! local_timings`).
//!
//!   local_timings MODEL --prompts        # the two rendered prompts, NUL-separated
//!   local_timings MODEL [--threads N] [--busy N]
//!
//! `--busy N` keeps N processes spinning beside the model (a machine whose cores are taken);
//! they are processes, as on llama.cpp's side, so that the CPU time printed is the model's
//! alone: `prompt_tok_per_cpu_s` and `gen_tok_per_cpu_s` count the CPU time of this whole
//! process (every thread the model computes on), as `getrusage(RUSAGE_SELF)` reports it.
#![expect(clippy::print_stdout, reason = "an example that reports on stdout")]

use std::path::PathBuf;
use std::process::{Child, Command};

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
    if args.get(1).is_some_and(|a| a == "--spin") {
        spin();
    }
    let Some(model) = args.get(1).map(PathBuf::from) else {
        println!("usage: local_timings MODEL [--prompts] [--threads N] [--busy N]");
        std::process::exit(2);
    };
    let threads = arg(&args, "--threads").max(1);
    let spinners = Spinners::start(arg(&args, "--busy"));
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
    drop(spinners);
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

/// CPU time of this process so far, every thread of it (user and system).
#[expect(
    unsafe_code,
    reason = "getrusage into a zeroed struct: libc has no safe wrapper"
)]
fn cpu_seconds() -> f64 {
    // SAFETY: `rusage` is plain data, valid zeroed; getrusage writes it whole or fails.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return 0.0;
        }
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Processes that keep a core busy each, killed when dropped.
struct Spinners(Vec<Child>);

impl Spinners {
    fn start(n: usize) -> Spinners {
        let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
        Spinners(
            (0..n)
                .map(|_| {
                    Command::new(&exe)
                        .arg("--spin")
                        .spawn()
                        .unwrap_or_else(|e| panic!("{e}"))
                })
                .collect(),
        )
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Spins until the process that started this one is gone.
fn spin() -> ! {
    let parent = std::os::unix::process::parent_id();
    let mut x = 0u64;
    loop {
        for _ in 0..10_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    }
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
