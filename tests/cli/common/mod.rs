//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod anthropic;
#[macro_use]
pub mod env;
pub mod fake_http;
pub mod ollama;
pub mod procs;
