//! The one integration-test binary: every test of the real `axocoatl` binary, its protocols
//! and its crash behaviour, as modules (as cargo and jj do), so the runtime and its heavy
//! dependencies are linked once for all of them.

#[macro_use]
mod common;

mod budget_estimate;
mod cli_attach;
mod cli_budget;
mod cli_more;
mod cli_repo;
mod cli_rewind;
mod cli_turns;
mod config_validate;
mod docs_sync;
mod ledger_crash;
mod local_model;
mod memory;
mod provider_ollama;
mod provider_openai;
mod provider_script;
<<<<<<< HEAD
mod store_faults;
=======
mod tools;
>>>>>>> 937cd8c (tools: end-to-end tests through the binary against loopback Ollama and OpenAI tool calls (read/edit/run loop, allowlist, escapes, Landlock, timeout, stop and Ctrl-C, read-only, max_steps, output cap, rebuilt tool rounds); validate: write tools in read-only allowlists, missing workspace, full-access warning, max_steps; starter config documents workspace, sandbox, max_steps; tool results searchable)
