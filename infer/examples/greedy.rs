//! Greedy generation from token ids, with timings: a check of the engine on a real model
//! without the rest of axocoatl.
//!
//!   cargo run --release -p axocoatl-infer --example greedy -- MODEL N [--threads T] [--batch B] ID...
//!
//! The prompt is read in batches of B tokens (16 unless given), and tokens generated, on T
//! threads (1 unless given). It prints a BLAKE3 hash of the prompt's scores and of the cache, so
//! that two builds, or two thread counts, can be compared bit for bit.
#![expect(clippy::print_stdout, reason = "an example that reports on stdout")]

use std::time::Instant;

use axocoatl_infer::{Cache, Model};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().collect();
    let mut option = |name: &str, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        match args.iter().position(|a| a == name) {
            Some(i) if i + 1 < args.len() => {
                let value = args[i + 1].parse()?;
                args.drain(i..i + 2);
                Ok(value)
            }
            _ => Ok(default),
        }
    };
    let threads = option("--threads", 1)?.max(1);
    let batch = option("--batch", 16)?.max(1);
    if args.len() < 4 {
        println!("usage: greedy MODEL N [--threads T] [--batch B] ID...");
        return Ok(());
    }
    let started = Instant::now();
    let model = Model::open(std::path::Path::new(&args[1]))?;
    let load = started.elapsed();
    let n: usize = args[2].parse()?;
    let prompt: Vec<u32> = args[3..]
        .iter()
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let mut cache = Cache::new(model.config());
    let mut logits = Vec::new();
    let t = Instant::now();
    for (i, chunk) in prompt.chunks(batch).enumerate() {
        let last = (i + 1) * batch >= prompt.len();
        model.forward_threads(&mut cache, chunk, last.then_some(&mut logits), threads)?;
    }
    let prompt_time = t.elapsed();
    let bits: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    println!("prompt scores: blake3 {}", blake3::hash(&bits));
    println!(
        "cache: blake3 {}",
        blake3::hash(&cache.to_bytes(&[0; 32], usize::MAX))
    );
    let mut top: Vec<(usize, f32)> = logits.iter().copied().enumerate().collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("top of the prompt's last position: {:?}", &top[..5]);
    let t = Instant::now();
    let mut out = Vec::new();
    for _ in 0..n {
        let mut best = 0;
        for (i, s) in logits.iter().enumerate() {
            if *s > logits[best] {
                best = i;
            }
        }
        out.push(best as u32);
        model.forward_threads(&mut cache, &[best as u32], Some(&mut logits), threads)?;
    }
    let gen_time = t.elapsed();
    println!("{out:?}");
    let bits: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    println!("last scores: blake3 {}", blake3::hash(&bits));
    println!(
        "cache after generation: blake3 {}",
        blake3::hash(&cache.to_bytes(&[0; 32], usize::MAX))
    );
    println!(
        "load {:.3} s, prompt {} tokens {:.1} tok/s ({threads} threads, batches of {batch}), generation {:.1} tok/s, {}",
        load.as_secs_f64(),
        prompt.len(),
        prompt.len() as f64 / prompt_time.as_secs_f64(),
        n as f64 / gen_time.as_secs_f64(),
        model.isa().name()
    );
    Ok(())
}
