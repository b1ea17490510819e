//! The one integration-test binary: every test of the real `axocoatl` binary, its protocols
//! and its crash behaviour, as modules (as cargo and jj do), so the runtime and its heavy
//! dependencies are linked once for all of them.

#[macro_use]
mod common;

mod approvals;
mod automations;
mod bounds;
mod budget_calls;
mod budget_estimate;
mod cli_attach;
mod cli_budget;
mod cli_more;
mod cli_repo;
mod cli_rewind;
mod cli_turns;
mod config_validate;
mod cost;
mod cut_output;
mod docs_examples;
mod docs_sync;
mod docs_voice;
mod effects;
mod embedder;
mod engine;
mod everyday;
#[cfg(feature = "sqlite")]
mod export_sqlite;
mod follow;
mod home_repo;
mod hostile_input;
mod layers;
mod ledger_crash;
mod ledger_index;
mod legacy;
mod local_kept;
mod local_kquant;
mod local_model;
mod local_schema;
mod local_session;
mod local_templates;
mod mcp;
mod memory;
mod memory_turns;
mod models;
mod ocr;
mod piped_context;
mod provider_anthropic;
mod provider_contract;
mod provider_ollama;
mod provider_openai;
mod provider_script;
mod reach;
mod sandbox;
mod sandbox_files;
mod schema;
mod send_model;
mod send_new;
mod serve;
mod serve_limits;
mod serve_memory;
mod session_names;
mod store_faults;
mod store_fixture;
mod store_props;
mod store_repair;
mod teams;
#[cfg(feature = "otlp")]
mod telemetry;
mod tool_arguments;
mod tools;
mod trust;
#[cfg(all(feature = "sqlite", feature = "otlp"))]
mod turn_agreement;
mod turn_refs;
