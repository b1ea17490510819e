//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod env;
pub mod fake_http;
