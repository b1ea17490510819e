//! Writes a GGUF model with its matrices quantized to another format (Q8_0 or a k-quant),
//! for trying and measuring the engine on the formats people download.
//!
//!   cargo run --release -p axocoatl-infer --example requantize -- IN.gguf OUT.gguf Q6_K
//!
//! Matrices whose rows do not divide into the format's blocks (256 values for the
//! k-quants) keep their format, as llama.cpp keeps another one for them.
#![expect(clippy::print_stdout, reason = "an example that reports on stdout")]

use std::io::BufWriter;

use axocoatl_infer::gguf;
use axocoatl_infer::rewrite::requantize;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output, kind] = args.as_slice() else {
        println!("usage: requantize IN.gguf OUT.gguf Q8_0|Q2_K|Q3_K|Q4_K|Q5_K|Q6_K|Q8_K");
        std::process::exit(2);
    };
    let Some(ggml) = (0..40).find(|&k| gguf::type_name(k) == *kind) else {
        return Err(format!("unknown type {kind}").into());
    };
    let bytes = std::fs::read(input)?;
    let mut out = BufWriter::new(std::fs::File::create(output)?);
    let done = requantize(&bytes, ggml, &mut out)?;
    println!(
        "{output}: {} matrices in {kind}, {} kept as they were",
        done.converted, done.kept
    );
    Ok(())
}
