//! The ceiling of generation on this machine: generating a token reads every weight of the
//! model once, so no engine generates faster than the memory its threads read from can hand
//! them the model file. This reads the file's bytes from memory (loaded once, so the disk is
//! not measured) on 1 and 2 threads, and prints the read speed and the tokens per second it
//! allows.
//!
//!   cargo run --release -p axocoatl-infer --example read_ceiling -- MODEL [PASSES]
#![expect(clippy::print_stdout, reason = "an example that reports on stdout")]

use std::hint::black_box;
use std::time::Instant;

/// Sums `bytes` as little-endian u64 words, with several sums so the loop is limited by the
/// loads rather than by one chain of additions.
fn read(bytes: &[u8]) -> u64 {
    let mut sums = [0u64; 8];
    let mut chunks = bytes.chunks_exact(64);
    for chunk in &mut chunks {
        for (s, word) in sums.iter_mut().zip(chunk.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            *s = s.wrapping_add(u64::from_le_bytes(w));
        }
    }
    let rest: u64 = chunks.remainder().iter().map(|&b| u64::from(b)).sum();
    sums.iter().fold(rest, |a, &s| a.wrapping_add(s))
}

/// Seconds for `threads` threads to read `bytes` once, `passes` times over (the fastest pass).
fn fastest(bytes: &[u8], threads: usize, passes: usize) -> f64 {
    let per = bytes.len().div_ceil(threads);
    let mut best = f64::INFINITY;
    for _ in 0..passes {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for part in bytes.chunks(per) {
                scope.spawn(move || black_box(read(black_box(part))));
            }
        });
        best = best.min(started.elapsed().as_secs_f64());
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        println!("usage: read_ceiling MODEL [PASSES]");
        return Ok(());
    };
    let passes: usize = args.get(2).map_or(Ok(20), |p| p.parse())?;
    let bytes = std::fs::read(path)?;
    let mb = bytes.len() as f64 / 1e6;
    for threads in [1, 2] {
        let secs = fastest(&bytes, threads, passes.max(1));
        println!(
            "threads={threads} read_gb_s={:.1} model_mb={mb:.1} ceiling_tok_s={:.0}",
            mb / 1e3 / secs,
            1.0 / secs
        );
    }
    Ok(())
}
