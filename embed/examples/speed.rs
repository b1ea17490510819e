#![allow(clippy::print_stdout, clippy::unwrap_used)]
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let m = axocoatl_embed::Model::open(std::path::Path::new(&path)).unwrap();
    println!("open {:.2} ms kernel {}", t.elapsed().as_secs_f64() * 1e3, axocoatl_embed::Model::kernel_name());
    let q = "which backup check does the garden server need? (3)";
    let ex = "User: which backup check does the garden server need? (3)\nAssistant: ok";
    println!("tokens {} {}", m.tokenizer().encode(q).len(), m.tokenizer().encode(ex).len());
    let t = Instant::now();
    m.embed(&[q]).unwrap();
    println!("first query {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
    for text in [q, ex] {
        let mut ts: Vec<f64> = (0..30).map(|_| { let t = Instant::now(); m.embed(&[text]).unwrap(); t.elapsed().as_secs_f64() * 1e3 }).collect();
        ts.sort_by(f64::total_cmp);
        println!("warm median {:.2} ms best {:.2}", ts[15], ts[0]);
    }
    let long = "The build server in the basement runs Debian and has two cores; its disk does a few hundred fsyncs per second. ".repeat(10);
    let t = Instant::now();
    let n = m.tokenizer().encode(&long).len();
    m.embed(&[&long]).unwrap();
    println!("long {} tokens {:.2} ms", n, t.elapsed().as_secs_f64() * 1e3);
}
