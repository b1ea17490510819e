//! OpenTelemetry traces of turns, as a real OTLP receiver stores them: a loopback HTTP
//! server that takes `POST /v1/traces` and decodes the bodies with the official protobuf
//! definitions (`opentelemetry-proto`'s prost types, and their OTLP JSON mapping).

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use crate::common::env::{wait_until, TestEnv};
use crate::common::fake_http::{closed_port_url, FakeServer, Recorded, Reply};
use crate::common::ollama::{ollama_call, ollama_text};
use crate::common::procs::Serve;

/// Output with the loopback servers' ports (a new one each run) normalized.
fn ports(s: &str) -> String {
    let re = regex::Regex::new(r"127\.0\.0\.1:\d+").expect("re");
    re.replace_all(s, "127.0.0.1:[PORT]").into_owned()
}

/// A receiver that answers every export with 200 and an empty response message.
fn receiver() -> FakeServer {
    FakeServer::responding(|_| Reply::new(200).header("Content-Type", "application/x-protobuf"))
}

/// Every export request the receiver got, decoded by its media type.
fn received(server: &FakeServer) -> Vec<ExportTraceServiceRequest> {
    server.requests().iter().map(decode).collect()
}

fn decode(r: &Recorded) -> ExportTraceServiceRequest {
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/traces");
    match r.header("content-type") {
        Some("application/x-protobuf") => {
            ExportTraceServiceRequest::decode(&r.body[..]).expect("an OTLP protobuf export request")
        }
        Some("application/json") => {
            serde_json::from_slice(&r.body).expect("an OTLP JSON export request")
        }
        other => panic!("unexpected content type {other:?}"),
    }
}

fn spans(reqs: &[ExportTraceServiceRequest]) -> Vec<Span> {
    reqs.iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| s.spans.clone())
        .collect()
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => format!("{s:?}"),
        Some(any_value::Value::IntValue(n)) => n.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::ArrayValue(a)) => format!(
            "[{}]",
            a.values
                .iter()
                .map(|v| text(&Some(v.clone())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

fn attr<'a>(s: &'a Span, key: &str) -> Option<&'a AnyValue> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
}

fn attrs_text(attrs: &[KeyValue], indent: &str) -> String {
    let sorted: BTreeMap<&str, String> = attrs
        .iter()
        .map(|kv| (kv.key.as_str(), text(&kv.value)))
        .collect();
    sorted
        .iter()
        .map(|(k, v)| format!("{indent}{k} = {v}\n"))
        .collect()
}

/// The traces as a tree: resource, then each trace's spans under their parents (siblings
/// in the order they started, then by name and attributes), with their kind, status and
/// attributes. Checks what a receiver relies on: one trace id per turn, every parent in the
/// trace, ends not before starts.
fn render(reqs: &[ExportTraceServiceRequest]) -> String {
    let mut out = String::new();
    if let Some(resource) = reqs
        .first()
        .and_then(|r| r.resource_spans.first())
        .and_then(|r| r.resource.as_ref())
    {
        out.push_str("resource\n");
        out.push_str(&attrs_text(&resource.attributes, "  "));
    }
    if let Some(scope) = reqs
        .first()
        .and_then(|r| r.resource_spans.first())
        .and_then(|r| r.scope_spans.first())
        .and_then(|s| s.scope.as_ref())
    {
        out.push_str(&format!("scope {} {}\n", scope.name, scope.version));
    }
    let all = spans(reqs);
    let mut by_trace: BTreeMap<Vec<u8>, Vec<&Span>> = BTreeMap::new();
    for s in &all {
        assert_eq!(s.trace_id.len(), 16);
        assert_eq!(s.span_id.len(), 8);
        assert!(s.end_time_unix_nano >= s.start_time_unix_nano, "{}", s.name);
        by_trace.entry(s.trace_id.clone()).or_default().push(s);
    }
    // Traces in the order their turns' spans arrived.
    let mut order: Vec<&Vec<u8>> = Vec::new();
    for s in &all {
        if !order.contains(&&s.trace_id) {
            order.push(&s.trace_id);
        }
    }
    for trace in order {
        let spans = &by_trace[trace];
        let ids: Vec<&Vec<u8>> = spans.iter().map(|s| &s.span_id).collect();
        let mut children: HashMap<Vec<u8>, Vec<&Span>> = HashMap::new();
        for s in spans {
            if !s.parent_span_id.is_empty() {
                assert!(
                    ids.contains(&&s.parent_span_id),
                    "{}: parent outside the trace",
                    s.name
                );
            }
            children
                .entry(s.parent_span_id.clone())
                .or_default()
                .push(s);
        }
        out.push_str("trace\n");
        tree(&mut out, &children, &[], 1);
    }
    out
}

fn tree(out: &mut String, children: &HashMap<Vec<u8>, Vec<&Span>>, parent: &[u8], depth: usize) {
    // By start time; spans that start in the same millisecond (a scripted model answers at
    // once) in the order they were sent, which is the ledger's.
    let mut kids: Vec<(usize, &Span)> = children
        .get(parent)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .collect();
    kids.sort_by_key(|(sent, s)| (s.start_time_unix_nano, *sent));
    for (_, s) in kids {
        let indent = "  ".repeat(depth);
        let status = s.status.clone().unwrap_or_default();
        let status = match status.code {
            2 => format!("error: {}", status.message),
            1 => "ok".to_owned(),
            _ => "unset".to_owned(),
        };
        let kind = match s.kind {
            1 => "internal",
            3 => "client",
            k => panic!("unexpected span kind {k}"),
        };
        out.push_str(&format!("{indent}{} ({kind}, {status})\n", s.name));
        out.push_str(&attrs_text(&s.attributes, &format!("{indent}  | ")));
        tree(out, children, &s.span_id, depth + 1);
    }
}

const SCRIPT_CONFIG: &str = "providers:
  s: {kind: script, script: replies.yaml}
agents:
  - id: coder
    provider: s
    tools: [read_file, run_command]
";

const REPLIES: &str = r#"replies:
  - match: "needle"
    tool_calls: [{name: read_file, arguments: {path: fact.txt}, id: call_fact}]
    usage: {prompt_tokens: 30, completion_tokens: 4}
  - match: "needle"
    text: "The fact file says quasar."
    usage: {prompt_tokens: 40, completion_tokens: 6}
  - match: "hello"
    text: "Hello there."
    usage: {prompt_tokens: 5, completion_tokens: 2}
"#;

fn script_env(server: &FakeServer) -> TestEnv {
    let mut env = TestEnv::with_config(SCRIPT_CONFIG);
    env.write("replies.yaml", REPLIES);
    env.write("fact.txt", "quasar lives here\n");
    env.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url());
    env
}

#[test]
fn a_turn_with_a_tool_call_is_one_trace() {
    let server = receiver();
    let env = script_env(&server);
    let r = env.run(&["send", "--no-stdin", "find the needle"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    let reqs = received(&server);
    assert_eq!(reqs.len(), 1, "one export request for a one-shot send");
    let all = spans(&reqs);
    assert_eq!(all.len(), 4, "the turn, two model calls and the tool call");
    // Nothing of what was said is in the spans unless asked for.
    let bytes: Vec<u8> = server.requests()[0].body.clone();
    for secret in ["needle", "quasar"] {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "{secret} in a span"
        );
    }
    snap!("tool_call_trace", env.normalize(&render(&reqs)));
    // The turn id leads back to `show`.
    let turn = text(&attr(&all[0], "axocoatl.turn.id").cloned());
    let r = env.run(&["show", turn.trim_matches('"')]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn content_is_in_spans_only_when_asked_and_keys_never_are() {
    let key = "sk-test-0123456789abcdef";
    let server = receiver();
    let model = FakeServer::with([ollama_text(&format!("your key is {key}"))]);
    let mut env = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\", api_key_env: LLM_KEY}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\ntelemetry:\n  otlp_endpoint: {}\n  capture_content: true\n",
        model.url(),
        server.url()
    ));
    env.set_env("LLM_KEY", key);
    let r = env.run(&["send", "--no-stdin", &format!("remember {key} for me")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reqs = received(&server);
    let all = spans(&reqs);
    let root = &all[0];
    let input = text(&attr(root, "gen_ai.input.messages").cloned());
    let output = text(&attr(root, "gen_ai.output.messages").cloned());
    assert!(input.contains("remember <redacted> for me"), "{input}");
    assert!(output.contains("your key is <redacted>"), "{output}");
    let body = String::from_utf8_lossy(&server.requests()[0].body).into_owned();
    assert!(!body.contains(key), "the key is in a span");
    // The environment variable turns capture off again.
    let server2 = receiver();
    let model2 = FakeServer::with([ollama_text("fine")]);
    let mut env2 = TestEnv::with_config(&format!(
        "providers:\n  llm: {{kind: ollama, base_url: \"{}\"}}\nagents:\n  - id: helper\n    provider: llm\n    model: m\ntelemetry: {{otlp_endpoint: \"{}\", capture_content: true}}\n",
        model2.url(),
        server2.url()
    ));
    env2.set_env(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "false",
    );
    assert_eq!(env2.run(&["send", "--no-stdin", "hi"]).code, 0);
    let root = spans(&received(&server2))[0].clone();
    assert!(attr(&root, "gen_ai.input.messages").is_none());
}

const PLAN: &str = r#"{"subtasks":[{"id":"research","worker":"researcher","task":"find facts","depends_on":[]},{"id":"draft","worker":"writer","task":"write it","depends_on":["research"]}]}"#;

/// Ollama answers by model: the coordinator plans (JSON) and aggregates, the researcher
/// reads a file first, the writer answers at once.
fn team_model() -> FakeServer {
    FakeServer::responding(|r: &Recorded| {
        let body = r.json();
        let has_tool_result = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        match body["model"].as_str().unwrap_or("") {
            "lead-m" if body["format"] == "json" => ollama_text(PLAN),
            "lead-m" => ollama_text("FINAL"),
            "r-m" if !has_tool_result => ollama_call("read_file", json!({"path": "fact.txt"})),
            "r-m" => ollama_text("R-RESULT"),
            "w-m" => ollama_text("W-RESULT"),
            _ => Reply::json(500, r#"{"error":"unknown model"}"#),
        }
    })
}

fn team_env(model: &FakeServer, telemetry: &str) -> TestEnv {
    let env = TestEnv::with_config(&format!(
        "providers:
  llm: {{kind: ollama, base_url: \"{}\", timeout_secs: 60}}
agents:
  - id: lead
    provider: llm
    model: lead-m
    role: coordinator
  - id: researcher
    provider: llm
    model: r-m
    role: worker
    tools: [read_file]
  - id: writer
    provider: llm
    model: w-m
    role: worker
workflows:
  - id: crew
    entry_point: lead
    workers: [researcher, writer]
{telemetry}",
        model.url()
    ));
    env.write("fact.txt", "facts\n");
    env
}

#[test]
fn a_coordinator_turn_traces_each_subtask_with_its_workers_calls() {
    let server = receiver();
    let model = team_model();
    let env = team_env(
        &model,
        &format!("telemetry:\n  otlp_endpoint: {}\n", server.url()),
    );
    let r = env.run(&["send", "--no-stdin", "--agent", "lead", "brief me"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let reqs = received(&server);
    let all = spans(&reqs);
    let subtasks: Vec<&Span> = all
        .iter()
        .filter(|s| attr(s, "axocoatl.subtask.id").is_some())
        .collect();
    assert_eq!(subtasks.len(), 2);
    // The researcher's model calls and its tool call are under its subtask.
    let research = subtasks
        .iter()
        .find(|s| text(&attr(s, "axocoatl.subtask.id").cloned()) == "\"research\"")
        .expect("research");
    let under: Vec<&str> = all
        .iter()
        .filter(|s| s.parent_span_id == research.span_id)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(under.len(), 3, "{under:?}");
    assert!(under.contains(&"execute_tool read_file"), "{under:?}");
    snap!("coordinator_trace", env.normalize(&render(&reqs)));
}

#[test]
fn otlp_json_carries_the_same_spans() {
    let proto = receiver();
    let env = script_env(&proto);
    assert_eq!(env.run(&["send", "--no-stdin", "find the needle"]).code, 0);
    let json_receiver = receiver();
    let mut env_json = script_env(&json_receiver);
    env_json.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &json_receiver.url());
    env_json.set_env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    assert_eq!(
        env_json
            .run(&["send", "--no-stdin", "find the needle"])
            .code,
        0
    );
    let req = json_receiver.only_request();
    assert_eq!(req.header("content-type"), Some("application/json"));
    // OTLP JSON: ids in hex, not base64.
    let body = req.json();
    let id = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        .as_str()
        .expect("traceId");
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    assert_eq!(
        env.normalize(&render(&received(&proto))),
        env_json.normalize(&render(&received(&json_receiver)))
    );
}

#[test]
fn export_otlp_writes_the_spans_the_receiver_got() {
    let server = receiver();
    let env = script_env(&server);
    assert_eq!(env.run(&["send", "--no-stdin", "find the needle"]).code, 0);
    assert_eq!(env.run(&["send", "--no-stdin", "hello"]).code, 0);
    let live = received(&server);
    let r = env.run(&["export", "--all", "--format", "otlp", "-o", "traces.jsonl"]);
    snap!("backfill", env.snap(&r));
    let text = std::fs::read_to_string(env.work.join("traces.jsonl")).expect("read");
    let lines: Vec<ExportTraceServiceRequest> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("an OTLP JSON export request per line"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per turn");
    assert_eq!(spans(&lines), spans(&live), "the same spans, ids and all");
}

#[test]
fn an_endpoint_that_cannot_be_reached_is_one_warning() {
    let mut env = TestEnv::with_config(SCRIPT_CONFIG);
    env.write("replies.yaml", REPLIES);
    env.set_env(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        &format!("{}/v1/traces", closed_port_url()),
    );
    let r = env.run(&["send", "--no-stdin", "hello"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Hello there.\n");
    assert_eq!(r.stderr.matches("warning").count(), 1, "{}", r.stderr);
    snap!("unreachable", ports(&env.snap(&r)));
    let r = env.run(&["history", "--json"]);
    assert!(r.stdout.contains("\"completed\""), "{}", r.stdout);
}

#[test]
fn an_endpoint_that_never_answers_costs_the_flush_bound_once() {
    let server = FakeServer::responding(|_| Reply::silent());
    let mut env = TestEnv::with_config(SCRIPT_CONFIG);
    env.write("replies.yaml", REPLIES);
    env.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url());
    let r = env.run(&["send", "--no-stdin", "hello"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "Hello there.\n");
    snap!("silent", ports(&env.snap(&r)));
}

#[test]
fn grpc_is_refused_with_a_warning_and_the_turn_goes_on() {
    let server = receiver();
    let mut env = script_env(&server);
    env.set_env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let r = env.run(&["send", "--no-stdin", "hello"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(server.request_count(), 0);
    snap!("grpc", env.snap(&r));
    let env2 = TestEnv::with_config(&format!(
        "{SCRIPT_CONFIG}telemetry: {{otlp_endpoint: \"localhost:4317\", protocol: grpc}}\n"
    ));
    snap!("grpc_config", env2.snap(&env2.run(&["validate"])));
}

#[test]
fn serve_batches_the_spans_of_its_actors_turns() {
    let server = receiver();
    let env = script_env(&server);
    let serve = Serve::start(&env);
    for text in ["find the needle", "hello"] {
        let r = env.run(&["send", "--no-stdin", text]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    wait_until("the actor's batch", || spans(&received(&server)).len() == 6);
    assert_eq!(serve.terminate(), 0);
    // The same shape as a one-shot send's (the actor's spans are the ledger's too).
    let one_shot = receiver();
    let env2 = script_env(&one_shot);
    assert_eq!(env2.run(&["send", "--no-stdin", "find the needle"]).code, 0);
    assert_eq!(env2.run(&["send", "--no-stdin", "hello"]).code, 0);
    let names = |reqs: &[ExportTraceServiceRequest]| {
        let mut n: Vec<String> = spans(reqs).into_iter().map(|s| s.name).collect();
        n.sort();
        n
    };
    assert_eq!(names(&received(&server)), names(&received(&one_shot)));
}
