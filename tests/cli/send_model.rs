//! `send -m`: a model the provider cannot run is refused before the turn, so the ledger
//! never names a model that did not answer.

use crate::common::env::TestEnv;
use crate::common::fake_http::FakeServer;
use crate::common::ollama::{ollama_env, ollama_text};

const LOCAL: &str = "providers:\n  box: {kind: ollama, base_url: \"http://127.0.0.1:9\"}\nagents:\n  - id: assistant\n    provider: local\n";

#[test]
fn an_unknown_provider_is_a_usage_error_with_the_list_and_a_suggestion() {
    let env = TestEnv::with_config(LOCAL);
    let r = env.run(&["send", "-m", "nope:foo", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    snap!("unknown_provider", env.snap(&r));
    let r = env.run(&["send", "-m", "olama:llama3.2", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("did you mean `-m ollama:llama3.2`?"),
        "{}",
        r.stderr
    );
    // Nothing began: no turn names either model.
    let h = env.run(&["history", "--all", "--json"]);
    assert_eq!(h.stdout, "", "{}", h.stderr);
}

#[test]
fn the_local_provider_says_which_model_it_runs() {
    let env = TestEnv::with_config(LOCAL);
    let r = env.run(&["send", "-m", "llama3.2", "hi"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    snap!("local_runs_one_model", env.snap(&r));
    // chat and retry check the same way.
    let r = env.run(&["chat", "-m", "llama3.2"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("`-m ollama:llama3.2`"), "{}", r.stderr);
}

#[test]
fn a_model_tag_of_a_server_provider_still_goes_to_it() {
    let server = FakeServer::with([ollama_text("ok")]);
    let env = ollama_env(&server);
    let r = env.run(&["send", "-m", "qwen2.5:7b", "hi"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(server.only_request().json()["model"], "qwen2.5:7b");
}
