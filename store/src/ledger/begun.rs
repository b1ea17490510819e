//! `TurnBegun` read by hand: its last field, `schema`, came after its first release, so a
//! body may end before it (every turn begun by an earlier build, and every turn without a
//! schema since, as `schema` is written only when set).
//!
//! Postcard reads a struct as a fixed sequence of fields; a derived decoder fails on a body
//! that ends early. This one reads the released fields, then takes the end of the body
//! where `schema` would start as "no schema". Only the end of input can stop it there: the
//! frame's checksum already vouched for the bytes.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::record::{SchemaUse, TurnBegun};

const FIELDS: &[&str] = &[
    "turn",
    "session",
    "agent",
    "mode",
    "request",
    "inline_context",
    "attachments",
    "retry_of",
    "pid",
    "at",
    "schema",
];

impl<'de> Deserialize<'de> for TurnBegun {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TurnBegun, D::Error> {
        d.deserialize_struct("TurnBegun", FIELDS, BegunVisitor)
    }
}

struct BegunVisitor;

/// The same fields, for self-describing formats (JSON), where a missing field is simply
/// absent.
#[derive(Deserialize)]
struct Fields {
    turn: String,
    session: String,
    agent: String,
    mode: String,
    request: String,
    inline_context: Vec<super::record::InlineContext>,
    attachments: Vec<super::record::AttachmentPin>,
    retry_of: Option<String>,
    pid: u32,
    at: super::record::Millis,
    #[serde(default)]
    schema: Option<SchemaUse>,
}

impl<'de> Visitor<'de> for BegunVisitor {
    type Value = TurnBegun;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the body of a TurnBegun record")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TurnBegun, A::Error> {
        macro_rules! field {
            ($i:expr) => {
                seq.next_element()?
                    .ok_or_else(|| de::Error::invalid_length($i, &self))?
            };
        }
        let turn = field!(0);
        let session = field!(1);
        let agent = field!(2);
        let mode = field!(3);
        let request = field!(4);
        let inline_context = field!(5);
        let attachments = field!(6);
        let retry_of = field!(7);
        let pid = field!(8);
        let at = field!(9);
        // The body ends here when the turn has no schema.
        let schema = seq
            .next_element::<Option<SchemaUse>>()
            .ok()
            .flatten()
            .flatten();
        Ok(TurnBegun {
            turn,
            session,
            agent,
            mode,
            request,
            inline_context,
            attachments,
            retry_of,
            pid,
            at,
            schema,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TurnBegun, A::Error> {
        let f = Fields::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(TurnBegun {
            turn: f.turn,
            session: f.session,
            agent: f.agent,
            mode: f.mode,
            request: f.request,
            inline_context: f.inline_context,
            attachments: f.attachments,
            retry_of: f.retry_of,
            pid: f.pid,
            at: f.at,
            schema: f.schema,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{InlineContext, Record, TurnBegun};
    use super::*;

    /// `TurnBegun` as it was released, before `schema`.
    #[derive(serde::Serialize, Deserialize, Debug, PartialEq)]
    struct Released {
        turn: String,
        session: String,
        agent: String,
        mode: String,
        request: String,
        inline_context: Vec<InlineContext>,
        attachments: Vec<super::super::record::AttachmentPin>,
        retry_of: Option<String>,
        pid: u32,
        at: i64,
    }

    fn released() -> Released {
        Released {
            turn: "t".into(),
            session: "s".into(),
            agent: "a".into(),
            mode: "single".into(),
            request: "hello".into(),
            inline_context: Vec::new(),
            attachments: Vec::new(),
            retry_of: Some("r".into()),
            pid: 9,
            at: 1234,
        }
    }

    fn now(schema: Option<SchemaUse>) -> TurnBegun {
        let r = released();
        TurnBegun {
            turn: r.turn,
            session: r.session,
            agent: r.agent,
            mode: r.mode,
            request: r.request,
            inline_context: r.inline_context,
            attachments: r.attachments,
            retry_of: r.retry_of,
            pid: r.pid,
            at: r.at,
            schema,
        }
    }

    #[test]
    fn a_body_written_before_the_schema_field_reads_without_one() {
        let old = postcard::to_allocvec(&released()).expect("encode");
        assert_eq!(postcard::from_bytes::<TurnBegun>(&old), Ok(now(None)));
        // And a turn without a schema is written with exactly those bytes.
        assert_eq!(postcard::to_allocvec(&now(None)).expect("encode"), old);
    }

    #[test]
    fn a_body_with_a_schema_reads_whole_here_and_without_it_in_a_build_before() {
        let schema = SchemaUse {
            object: "cd".repeat(32),
            retries: 1,
        };
        let new = postcard::to_allocvec(&now(Some(schema.clone()))).expect("encode");
        assert_eq!(
            postcard::from_bytes::<TurnBegun>(&new),
            Ok(now(Some(schema)))
        );
        // An earlier build decodes the released fields and stops there.
        assert_eq!(postcard::from_bytes::<Released>(&new), Ok(released()));
        // A body cut inside the released fields is still an error.
        let old = postcard::to_allocvec(&released()).expect("encode");
        assert!(postcard::from_bytes::<TurnBegun>(&old[..old.len() - 1]).is_err());
    }

    #[test]
    fn its_json_leaves_the_schema_out_when_there_is_none_and_reads_back() {
        let json = Record::TurnBegun(now(None)).body_json();
        assert!(json.get("schema").is_none(), "{json}");
        let back: TurnBegun = serde_json::from_value(json).expect("json");
        assert_eq!(back, now(None));
        let with = now(Some(SchemaUse {
            object: "x".into(),
            retries: 0,
        }));
        let back: TurnBegun =
            serde_json::from_value(Record::TurnBegun(with.clone()).body_json()).expect("json");
        assert_eq!(back, with);
    }
}
