//! Spans as OTLP messages: the official protobuf definitions (`opentelemetry-proto`'s prost
//! types), encoded as protobuf or as OTLP's JSON mapping (hex ids, integers as strings)
//! by the same types.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::SpanKind, status::StatusCode, ResourceSpans, ScopeSpans, Span as ProtoSpan, Status,
};
use prost::Message;

use super::spans::{Kind, Span, Value};
use super::Protocol;

/// The request that exports `spans` from the resource described by `resource`.
pub fn request(spans: &[Span], resource: &[(String, String)]) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: resource
                    .iter()
                    .map(|(k, v)| kv(k, any(any_value::Value::StringValue(v.clone()))))
                    .collect(),
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "axocoatl".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: spans.iter().map(span).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The bytes of a request, and their media type.
pub fn encode(req: &ExportTraceServiceRequest, protocol: Protocol) -> (Vec<u8>, &'static str) {
    match protocol {
        Protocol::Protobuf => (req.encode_to_vec(), "application/x-protobuf"),
        // The generated types serialize to OTLP's JSON mapping; nothing in them can fail.
        Protocol::Json => (
            serde_json::to_vec(req).unwrap_or_default(),
            "application/json",
        ),
    }
}

fn any(v: any_value::Value) -> AnyValue {
    AnyValue { value: Some(v) }
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(value),
        ..Default::default()
    }
}

fn value(v: &Value) -> AnyValue {
    any(match v {
        Value::Str(s) => any_value::Value::StringValue(s.clone()),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Double(x) => any_value::Value::DoubleValue(*x),
        Value::Strs(items) => any_value::Value::ArrayValue(ArrayValue {
            values: items
                .iter()
                .map(|s| any(any_value::Value::StringValue(s.clone())))
                .collect(),
        }),
    })
}

fn nanos(ms: i64) -> u64 {
    (ms.max(0) as u64).saturating_mul(1_000_000)
}

fn span(s: &Span) -> ProtoSpan {
    ProtoSpan {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: s.name.clone(),
        kind: match s.kind {
            Kind::Internal => SpanKind::Internal,
            Kind::Client => SpanKind::Client,
        } as i32,
        start_time_unix_nano: nanos(s.start),
        end_time_unix_nano: nanos(s.end),
        attributes: s.attributes.iter().map(|(k, v)| kv(k, value(v))).collect(),
        status: Some(match &s.error {
            Some(message) => Status {
                message: message.clone(),
                code: StatusCode::Error as i32,
            },
            None => Status {
                message: String::new(),
                code: StatusCode::Unset as i32,
            },
        }),
        ..Default::default()
    }
}
