//! Links the `axocoatl` binary as a position-dependent executable on Linux.
//!
//! A position-independent executable is relocated at every start: for this binary that is
//! ~29,000 pointers in ~560 KiB of tables, each page copied on write, ~0.3 ms of a `send`
//! whose whole budget beyond its two disk flushes is 3 ms. Linked at a fixed address, the
//! tables are used as mapped. Shared libraries, heap and stack keep their randomized
//! addresses. Set `AXOCOATL_PIE=1` at build time to keep a PIE (and its ASLR) instead.
fn main() {
    println!("cargo:rerun-if-env-changed=AXOCOATL_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    let keep_pie = std::env::var_os("AXOCOATL_PIE").is_some_and(|v| v != "0" && !v.is_empty());
    if linux && gnu && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
