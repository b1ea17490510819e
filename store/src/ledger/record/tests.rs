//! The record table's tests: a sample of every kind encodes and decodes.

use super::*;

fn bounded(text: &str) -> Bounded {
    Bounded {
        inline: text.into(),
        object: None,
        len: text.len() as u64,
    }
}

/// One record of every kind, with fields that differ from each other.
pub(crate) fn one_of_each() -> Vec<Record> {
    let t = "0123456789abcdef".to_string();
    let s = "sess-ü".to_string();
    let records = vec![
        Record::SessionCreated(SessionCreated {
            session: s.clone(),
            at: 1,
        }),
        Record::TurnBegun(TurnBegun {
            turn: t.clone(),
            session: s.clone(),
            agent: "a".into(),
            mode: "single".into(),
            request: "r".repeat(300),
            inline_context: vec![InlineContext {
                label: "stdin".into(),
                text: bounded("ctx"),
            }],
            attachments: vec![],
            retry_of: Some("x".into()),
            pid: 7,
            at: -5,
            schema: Some(SchemaUse {
                object: "ab".repeat(32),
                retries: 2,
            }),
        }),
        Record::TurnEnded(TurnEnded {
            turn: t.clone(),
            session: s.clone(),
            state: TurnState::Failed,
            error: Some("e".into()),
            usage: Usage::ZERO,
            at: 3,
        }),
        Record::AgentOutput(AgentOutput {
            turn: t.clone(),
            agent: "a".into(),
            text: "out".into(),
            at: 4,
        }),
        Record::AgentOutputBounded(AgentOutputBounded {
            turn: t.clone(),
            agent: "a".into(),
            text: bounded("out"),
            at: 4,
        }),
        Record::ToolStarted(ToolStarted {
            turn: t.clone(),
            agent: "a".into(),
            call_id: "c".into(),
            name: "n".into(),
            arguments: bounded("{}"),
            at: 5,
        }),
        Record::ToolResult(ToolResult {
            turn: t.clone(),
            agent: "a".into(),
            call_id: "c".into(),
            name: "n".into(),
            is_error: false,
            output: bounded("o"),
            at: 6,
        }),
        Record::ToolFinished(ToolFinished {
            turn: t.clone(),
            agent: "a".into(),
            call_id: "c".into(),
            name: "run_command".into(),
            is_error: true,
            output: bounded("o"),
            exit_code: Some(2),
            duration_ms: 12,
            at: 6,
        }),
        Record::ModelCall(ModelCall {
            turn: t.clone(),
            agent: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            reserved_tokens: 9,
            prompt_tokens: Some(1),
            completion_tokens: None,
            finish_reason: None,
            at: 7,
        }),
        Record::StopRequested(StopRequested {
            turn: t.clone(),
            session: s.clone(),
            pid: 1,
            at: 8,
        }),
        Record::RewindBoundary(RewindBoundary {
            session: s.clone(),
            agent: "a".into(),
            target: t.clone(),
            at: 9,
        }),
        Record::Warning(Warning {
            turn: Some(t.clone()),
            session: s.clone(),
            code: "c".into(),
            message: "m".into(),
            at: 10,
        }),
        Record::Warning(Warning {
            turn: None,
            session: s.clone(),
            code: "c".into(),
            message: "m".into(),
            at: 10,
        }),
        Record::AttachmentAdded(AttachmentAdded {
            reference: "ref1".into(),
            session: s.clone(),
            name: "f.txt".into(),
            media_type: "text/plain".into(),
            size: 3,
            scope: AttachmentScope::Once,
            object: "o".into(),
            text_object: None,
            text_truncated: false,
            at: 11,
        }),
        Record::AttachmentRemoved(AttachmentRemoved {
            reference: "ref1".into(),
            session: s.clone(),
            at: 12,
        }),
        Record::AttachmentConsumed(AttachmentConsumed {
            reference: "ref1".into(),
            session: s.clone(),
            turn: t.clone(),
            at: 13,
        }),
        Record::Note(Note { text: "n".into() }),
        Record::TurnOrigin(TurnOrigin {
            turn: t.clone(),
            session: s.clone(),
            automation: "brief".into(),
            occurrence: 60_000,
            trigger: "schedule".into(),
            runner: "tick".into(),
            pid: 2,
            at: 14,
        }),
        Record::LegacyImportBegun(LegacyImportBegun {
            session: s.clone(),
            agent: "a".into(),
            source: "checkpoints/s%3aa/3.json".into(),
            digest: "d".into(),
            format: "json".into(),
            turns: 2,
            at: 15,
        }),
        Record::LegacyImportEnded(LegacyImportEnded {
            session: s.clone(),
            agent: "a".into(),
            digest: "d".into(),
            turns: 2,
            at: 16,
        }),
        Record::PlanMade(PlanMade {
            turn: t.clone(),
            coordinator: "lead".into(),
            method: "model-repaired".into(),
            subtasks: vec![PlannedSubtask {
                id: "s1".into(),
                worker: "adhoc".into(),
                role: Some("critic".into()),
                task: "check".into(),
                depends_on: vec!["s0".into()],
            }],
            rejected: vec!["unknown worker `x`".into()],
            at: 15,
        }),
        Record::SubtaskStarted(SubtaskStarted {
            turn: t.clone(),
            subtask: "s1".into(),
            worker: "w".into(),
            at: 16,
        }),
        Record::SubtaskEnded(SubtaskEnded {
            turn: t.clone(),
            session: s.clone(),
            coordinator: "lead".into(),
            subtask: "s1".into(),
            worker: "w".into(),
            state: TurnState::Stopped,
            error: None,
            output: bounded("partial"),
            usage: Usage::ZERO,
            at: 17,
        }),
        Record::ActivationDecided(ActivationDecided {
            turn: t.clone(),
            session: s.clone(),
            agents: vec![AgentActivation {
                agent: "b".into(),
                decayed: 250,
                relevance: -1,
                mentioned: true,
                activation: 2000,
                threshold: 500,
                answered: true,
                reason: "mentioned".into(),
            }],
            at: 18,
        }),
        Record::SessionAgents(SessionAgents {
            session: s.clone(),
            agents: vec!["a".into(), "b".into()],
            at: 19,
        }),
        Record::TurnOverrides(TurnOverrides {
            turn: t.clone(),
            session: s.clone(),
            model: Some("ollama:llama3.2".into()),
            system: None,
            options: vec![("temperature".into(), "0.2".into())],
            at: 20,
        }),
        Record::ModelCallCost(ModelCallCost {
            turn: t.clone(),
            agent: "a".into(),
            provider: "claude".into(),
            model: "claude-haiku-4-5".into(),
            reserved_tokens: 90,
            prompt_tokens: Some(80),
            completion_tokens: Some(5),
            cache_write_tokens: Some(0),
            cache_read_tokens: Some(70),
            cost_nanos: None,
            finish_reason: Some("end_turn".into()),
            at: 21,
        }),
        Record::UsageCost(UsageCost {
            turn: t.clone(),
            session: s.clone(),
            agent: "w".into(),
            subtask: Some("s1".into()),
            counted_at: 17,
            detail: UsageDetail {
                calls: 1,
                cache_write_tokens: 3,
                cache_read_tokens: 70,
                priced_calls: 0,
                cost_nanos: 0,
            },
            at: 22,
        }),
        Record::TurnWorkdir(TurnWorkdir {
            turn: t.clone(),
            session: s.clone(),
            dir: "/home/ü/src".into(),
            at: 23,
        }),
        Record::ApprovalRequested(ApprovalRequested {
            turn: t.clone(),
            session: s.clone(),
            agent: "a".into(),
            call_id: "call_1".into(),
            tool: "run_command".into(),
            arguments: bounded("{\"command\":\"make\"}"),
            rule: "run_command".into(),
            state: "ab".repeat(32),
            expires_at: Some(21),
            pid: 3,
            at: 21,
        }),
        Record::ApprovalDecided(ApprovalDecided {
            turn: t.clone(),
            session: s.clone(),
            call_id: "call_1".into(),
            decision: Decision::Denied,
            reason: Some("not now".into()),
            by: "alice via approve".into(),
            pid: 4,
            at: 22,
        }),
    ];
    let kinds: std::collections::BTreeSet<Kind> = records.iter().map(|r| r.kind_of()).collect();
    assert_eq!(kinds.len(), Kind::ALL.len(), "a sample of every kind");
    records
}

fn reference(r: &Record) -> Option<&str> {
    match r {
        Record::AttachmentAdded(a) => Some(&a.reference),
        Record::AttachmentRemoved(a) => Some(&a.reference),
        Record::AttachmentConsumed(a) => Some(&a.reference),
        _ => None,
    }
}

#[test]
fn views_read_the_same_fields_as_decoding() {
    for record in one_of_each() {
        let body = record.encode_body(Vec::new()).expect("encode");
        let view = RecordView::new(record.kind(), &body);
        assert_eq!(view.kind(), Some(record.kind_of()));
        assert_eq!(view.turn(), record.turn().map(str::as_bytes), "{record:?}");
        assert_eq!(
            view.session(),
            record.session().map(str::as_bytes),
            "{record:?}"
        );
        assert_eq!(view.reference(), reference(&record).map(str::as_bytes));
        assert_eq!(view.decode(), Ok(Some(record.clone())));
    }
}

#[test]
fn kinds_round_trip_and_unknown_tags_are_none() {
    for &k in Kind::ALL {
        assert_eq!(Kind::of(k.tag()), Some(k));
    }
    assert_eq!(Kind::of(0), None);
    assert_eq!(Kind::of(999), None);
    let v = RecordView::new(999, b"\x03abc");
    assert_eq!((v.turn(), v.session()), (None, None));
    assert_eq!(v.decode(), Ok(None));
}

#[test]
fn views_of_damaged_bodies_answer_none_or_a_slice_never_panic() {
    for record in one_of_each() {
        let body = record.encode_body(Vec::new()).expect("encode");
        for cut in 0..body.len().min(40) {
            let v = RecordView::new(record.kind(), &body[..cut]);
            let _ = (v.turn(), v.session(), v.reference(), v.decode());
        }
    }
}
