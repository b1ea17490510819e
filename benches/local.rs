//! Speed of the `local` provider on the real SmolLM2 GGUF: load time, prompt tokens/s and
//! generation tokens/s, per thread count, idle and with the cores kept busy by other work;
//! then the same prompts through llama.cpp's `llama-server` when one is on PATH.
//!
//!   scripts/fetch-model.sh && cargo bench --bench local
//!
//! The compute thread count is fixed once per process, so each configuration runs in a child
//! process (this binary re-run with `--child <threads> <busy>`).
#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axocoatl::provider::local::{LocalOptions, LocalProvider};
use axocoatl::provider::{Cancel, ChatRequest, Message, Provider, ResponseFormat, Role, Sampling};

const GEN_TOKENS: u32 = 128;
const GEN_PROMPT: &str = "Write a long story about a dragon who learns to cook.";

fn model_path() -> PathBuf {
    axocoatl::config::local_model_path(&|k| std::env::var(k).ok())
        .expect("HOME or AXOCOATL_MODEL is set")
}

/// A prompt of roughly 600 tokens.
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

fn json_request() -> ChatRequest {
    let mut req = request(
        "Describe three cats as a JSON object: for each its name, age and color.",
        GEN_TOKENS,
    );
    req.sampling.response_format = Some(ResponseFormat::Json);
    req
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let threads = args.get(i + 1).and_then(|t| t.parse().ok()).unwrap_or(1);
        let busy = args.get(i + 2).and_then(|t| t.parse().ok()).unwrap_or(0);
        child(threads, busy);
        return;
    }
    let path = model_path();
    if !path.is_file() {
        println!(
            "model {} missing: run scripts/fetch-model.sh",
            path.display()
        );
        std::process::exit(1);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("local provider, {} ({cores} cores)", path.display());
    println!(
        "{:<26} {:>9} {:>14} {:>14}",
        "configuration", "load s", "prompt tok/s", "gen tok/s"
    );
    let exe = std::env::current_exe().unwrap_or_default();
    for (threads, busy) in [(1, 0), (2, 0), (1, cores), (2, cores)] {
        let out = Command::new(&exe)
            .args(["--child", &threads.to_string(), &busy.to_string()])
            .stderr(Stdio::inherit())
            .output();
        match out {
            Ok(o) => print!("{}", String::from_utf8_lossy(&o.stdout)),
            Err(e) => println!("threads {threads}: cannot run child: {e}"),
        }
    }
    llama_server(&path);
}

/// One configuration: `threads` compute threads while `busy` spinning threads compete.
fn child(threads: usize, busy: usize) {
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
    let label = if busy > 0 {
        format!("{threads} thread(s), {busy} busy")
    } else {
        format!("{threads} thread(s), idle")
    };
    let loaded = LocalProvider::load(LocalOptions {
        name: "local".into(),
        model_path: model_path(),
        threads: Some(threads),
        context_size: None,
        ready_dir: None,
    });
    let mut p = match loaded {
        Ok(p) => p,
        Err(e) => {
            println!("{label}: {e}");
            return;
        }
    };
    let cancel = Cancel::new();
    // Warm-up first: first-use packing of weights happens there, not in the figures.
    let calls = [
        (request("Hi", 4), "warm-up"),
        (request(&long_prompt(), 1), "prompt"),
        (request(GEN_PROMPT, GEN_TOKENS), "generation"),
        (json_request(), "json"),
    ];
    let mut timings = Vec::new();
    for (req, what) in &calls {
        match p.chat(req, &cancel, &mut |_| {}) {
            Ok(_) => timings.push(p.last_timings()),
            Err(e) => {
                println!("{label}: {what} call failed: {e}");
                return;
            }
        }
    }
    let (pp, tg, json) = (timings[1], timings[2], timings[3]);
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        let _ = s.join();
    }
    println!(
        "{label:<26} {:>9.2} {:>14.1} {:>14.1}   ({} prompt, {} generated tokens; JSON mode \
         {:.1} tok/s; {} tensors widened; {} kernels)",
        p.load_time().as_secs_f64(),
        rate(pp.prompt_tokens, pp.prompt),
        rate(tg.generated_tokens, tg.generation),
        pp.prompt_tokens,
        tg.generated_tokens,
        rate(json.generated_tokens, json.generation),
        p.widened_tensors(),
        p.kernels()
    );
}

fn rate(tokens: usize, time: Duration) -> f64 {
    tokens as f64 / time.as_secs_f64().max(1e-9)
}

/// The same two calls through `llama-server`, read from its own `timings`.
fn llama_server(path: &std::path::Path) {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("llama-server"))
            .find(|p| p.is_file())
    });
    let Some(server) = found else {
        println!("llama-server: not on PATH, comparison skipped");
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(18080, |a| a.port());
    for threads in [1, 2] {
        let started = Instant::now();
        let child = Command::new(&server)
            .arg("-m")
            .arg(path)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", &threads.to_string(), "-c", "4096"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                println!("llama-server: cannot start {}: {e}", server.display());
                return;
            }
        };
        let base = format!("http://127.0.0.1:{port}");
        let ready = wait_ready(&base, &mut child);
        let load = started.elapsed().as_secs_f64();
        if let Err(e) = ready {
            println!("llama-server: {e}");
            stop(child);
            return;
        }
        let warm = chat(&base, "Hi", 4);
        let pp = chat(&base, &long_prompt(), 1);
        let tg = chat(&base, GEN_PROMPT, GEN_TOKENS);
        match (warm, pp, tg) {
            (Ok(_), Ok(pp), Ok(tg)) => println!(
                "{:<26} {:>9.2} {:>14.1} {:>14.1}   ({} prompt, {} generated tokens; load = until /health)",
                format!("llama-server, {threads} thread(s)"),
                load,
                pp.0,
                tg.1,
                pp.2,
                tg.3
            ),
            (a, b, c) => println!("llama-server: {:?}", a.err().or(b.err()).or(c.err())),
        }
        stop(child);
    }
}

fn wait_ready(base: &str, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let mut log = String::new();
            if let Some(err) = child.stderr.take() {
                for line in BufReader::new(err).lines().map_while(Result::ok).take(20) {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
            return Err(format!("exited with {status}:\n{log}"));
        }
        if ureq::get(&format!("{base}/health")).call().is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("not ready after 60 s".into())
}

/// (prompt tok/s, generation tok/s, prompt tokens, generated tokens).
fn chat(base: &str, prompt: &str, max_tokens: u32) -> Result<(f64, f64, u64, u64), String> {
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "cache_prompt": false,
    });
    let mut resp = ureq::post(&format!("{base}/v1/chat/completions"))
        .send_json(&body)
        .map_err(|e| e.to_string())?;
    let v: serde_json::Value = resp.body_mut().read_json().map_err(|e| e.to_string())?;
    let t = &v["timings"];
    Ok((
        t["prompt_per_second"].as_f64().unwrap_or(0.0),
        t["predicted_per_second"].as_f64().unwrap_or(0.0),
        t["prompt_n"].as_u64().unwrap_or(0),
        t["predicted_n"].as_u64().unwrap_or(0),
    ))
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
