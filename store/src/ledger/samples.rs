//! One record of every kind, for what must cover them all: the frozen records of the
//! format fixture, and the tests that compare a search through the term indexes with a
//! scan. [`sample`] names every kind (a kind added to `records!` does not build until it
//! has a sample), and [`TURN_ORDER`] appends them in an order a turn could have.

use super::record::*;

/// Every kind, in the order [`turn_of_every_kind`] appends them: the session's, then a
/// turn from its begin to its end, then what follows a turn.
pub const TURN_ORDER: [Kind; 27] = [
    Kind::SessionCreated,
    Kind::SessionAgents,
    Kind::LegacyImportBegun,
    Kind::AttachmentAdded,
    Kind::TurnBegun,
    Kind::TurnOrigin,
    Kind::TurnOverrides,
    Kind::AttachmentConsumed,
    Kind::ActivationDecided,
    Kind::PlanMade,
    Kind::SubtaskStarted,
    Kind::ModelCall,
    Kind::ModelCallCost,
    Kind::ToolStarted,
    Kind::ToolResult,
    Kind::ToolFinished,
    Kind::AgentOutput,
    Kind::AgentOutputBounded,
    Kind::Warning,
    Kind::StopRequested,
    Kind::SubtaskEnded,
    Kind::TurnEnded,
    Kind::UsageCost,
    Kind::AttachmentRemoved,
    Kind::LegacyImportEnded,
    Kind::Note,
    Kind::RewindBoundary,
];

/// A record of `kind` for turn `turn` of `session` at `at`, with `text()` in each of its
/// free-text fields (a fresh one each).
pub fn sample(
    kind: Kind,
    turn: &str,
    session: &str,
    at: Millis,
    text: &mut dyn FnMut() -> String,
) -> Record {
    let f = Fields {
        t: turn.to_owned(),
        s: session.to_owned(),
        agent: "agent".to_owned(),
        reference: format!("{turn}-ref"),
        digest: "0".repeat(64),
        at,
    };
    // Every kind named here (no wildcard): a new kind does not build without a sample.
    match kind {
        Kind::SessionCreated
        | Kind::SessionAgents
        | Kind::LegacyImportBegun
        | Kind::LegacyImportEnded
        | Kind::Note
        | Kind::RewindBoundary => session_sample(kind, f, text),
        Kind::TurnBegun
        | Kind::TurnEnded
        | Kind::UsageCost
        | Kind::TurnOrigin
        | Kind::TurnOverrides => turn_sample(kind, f, text),
        Kind::AgentOutput | Kind::AgentOutputBounded | Kind::Warning | Kind::StopRequested => {
            output_sample(kind, f, text)
        }
        Kind::ModelCall
        | Kind::ModelCallCost
        | Kind::ToolStarted
        | Kind::ToolResult
        | Kind::ToolFinished => call_sample(kind, f, text),
        Kind::AttachmentAdded | Kind::AttachmentRemoved | Kind::AttachmentConsumed => {
            attachment_sample(kind, f, text)
        }
        Kind::PlanMade | Kind::SubtaskStarted | Kind::SubtaskEnded | Kind::ActivationDecided => {
            team_sample(kind, f, text)
        }
    }
}

/// What the samples of one call of [`sample`] share.
struct Fields {
    t: String,
    s: String,
    agent: String,
    reference: String,
    digest: String,
    at: Millis,
}

fn bounded(text: String) -> Bounded {
    Bounded {
        len: text.len() as u64,
        inline: text,
        object: None,
    }
}

/// The sample of `kind`, one of what belongs to a session, not to one turn.
fn session_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields {
        t,
        s,
        agent,
        digest,
        at,
        ..
    } = f;
    match kind {
        Kind::SessionCreated => SessionCreated { session: s, at }.into(),
        Kind::SessionAgents => SessionAgents {
            session: s,
            agents: vec![agent],
            at,
        }
        .into(),
        Kind::LegacyImportBegun => LegacyImportBegun {
            session: s,
            agent,
            source: "checkpoint.json".into(),
            digest,
            format: "json".into(),
            turns: 0,
            at,
        }
        .into(),
        Kind::LegacyImportEnded => LegacyImportEnded {
            session: s,
            agent,
            digest,
            turns: 0,
            at,
        }
        .into(),
        Kind::Note => Note { text: text() }.into(),
        Kind::RewindBoundary => RewindBoundary {
            session: s,
            agent,
            target: t,
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// The sample of `kind`, one of a turn's beginning and end.
fn turn_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields {
        t,
        s,
        agent,
        reference,
        digest,
        at,
        ..
    } = f;
    match kind {
        Kind::TurnBegun => TurnBegun {
            turn: t,
            session: s,
            agent,
            mode: "single".into(),
            request: text(),
            inline_context: vec![InlineContext {
                label: text(),
                text: bounded(text()),
            }],
            attachments: vec![AttachmentPin {
                reference,
                name: text(),
                media_type: "text/plain".into(),
                size: 5,
                object: digest.clone(),
                text_object: None,
            }],
            retry_of: None,
            pid: 1,
            at,
        }
        .into(),
        Kind::TurnEnded => TurnEnded {
            turn: t,
            session: s,
            state: TurnState::Failed,
            error: Some(text()),
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 3,
                calls: 1,
                complete: true,
            },
            at: at + 9,
        }
        .into(),
        Kind::UsageCost => UsageCost {
            turn: t,
            session: s,
            agent,
            subtask: None,
            counted_at: at,
            detail: UsageDetail {
                calls: 1,
                cache_write_tokens: 2,
                cache_read_tokens: 6,
                priced_calls: 1,
                cost_nanos: 24_600,
            },
            at: at + 9,
        }
        .into(),
        Kind::TurnOrigin => TurnOrigin {
            turn: t,
            session: s,
            automation: "nightly".into(),
            occurrence: at,
            trigger: "schedule".into(),
            runner: "tick".into(),
            pid: 3,
            at,
        }
        .into(),
        Kind::TurnOverrides => TurnOverrides {
            turn: t,
            session: s,
            model: Some("ollama:qwen2.5:7b".into()),
            // A fixed text: the numbered texts are the searched fields' (the index tests
            // count them), and an override's system prompt is not searched.
            system: Some("a per-call system prompt".into()),
            options: vec![("temperature".into(), "0.2".into())],
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// The sample of `kind`, one of what a turn says.
fn output_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields {
        t, s, agent, at, ..
    } = f;
    match kind {
        Kind::AgentOutput => AgentOutput {
            turn: t,
            agent,
            text: text(),
            at,
        }
        .into(),
        Kind::AgentOutputBounded => AgentOutputBounded {
            turn: t,
            agent,
            text: bounded(text()),
            at,
        }
        .into(),
        Kind::Warning => Warning {
            turn: Some(t),
            session: s,
            code: "sample".into(),
            message: text(),
            at,
        }
        .into(),
        Kind::StopRequested => StopRequested {
            turn: t,
            session: s,
            pid: 2,
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// The sample of `kind`, one of model and tool calls.
fn call_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields { t, agent, at, .. } = f;
    match kind {
        Kind::ModelCall => ModelCall {
            turn: t,
            agent,
            provider: "canned".into(),
            model: "m".into(),
            reserved_tokens: 100,
            prompt_tokens: Some(10),
            completion_tokens: Some(3),
            finish_reason: Some("stop".into()),
            at,
        }
        .into(),
        Kind::ModelCallCost => ModelCallCost {
            turn: t,
            agent,
            provider: "claude".into(),
            model: "claude-haiku-4-5".into(),
            reserved_tokens: 100,
            prompt_tokens: Some(10),
            completion_tokens: Some(3),
            cache_write_tokens: Some(2),
            cache_read_tokens: Some(6),
            cost_nanos: Some(24_600),
            finish_reason: Some("end_turn".into()),
            at,
        }
        .into(),
        Kind::ToolStarted => ToolStarted {
            turn: t,
            agent,
            call_id: "call-1".into(),
            name: "read_file".into(),
            arguments: bounded(text()),
            at,
        }
        .into(),
        Kind::ToolResult => ToolResult {
            turn: t,
            agent,
            call_id: "call-0".into(),
            name: "list_dir".into(),
            is_error: false,
            output: bounded(text()),
            at,
        }
        .into(),
        Kind::ToolFinished => ToolFinished {
            turn: t,
            agent,
            call_id: "call-1".into(),
            name: "read_file".into(),
            is_error: false,
            output: bounded(text()),
            exit_code: None,
            duration_ms: 12,
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// The sample of `kind`, one of attachments.
fn attachment_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields {
        t,
        s,
        reference,
        digest,
        at,
        ..
    } = f;
    match kind {
        Kind::AttachmentAdded => AttachmentAdded {
            reference,
            session: s,
            name: text(),
            media_type: "text/plain".into(),
            size: 5,
            scope: AttachmentScope::Session,
            object: digest,
            text_object: None,
            text_truncated: false,
            at,
        }
        .into(),
        Kind::AttachmentRemoved => AttachmentRemoved {
            reference,
            session: s,
            at,
        }
        .into(),
        Kind::AttachmentConsumed => AttachmentConsumed {
            reference,
            session: s,
            turn: t,
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// The sample of `kind`, one of coordinators and multi-agent sessions.
fn team_sample(kind: Kind, f: Fields, text: &mut dyn FnMut() -> String) -> Record {
    let Fields {
        t, s, agent, at, ..
    } = f;
    match kind {
        Kind::PlanMade => PlanMade {
            turn: t,
            coordinator: agent,
            method: "fallback".into(),
            subtasks: vec![PlannedSubtask {
                id: "s1".into(),
                worker: "helper".into(),
                role: None,
                task: text(),
                depends_on: vec![],
            }],
            rejected: vec![text()],
            at,
        }
        .into(),
        Kind::SubtaskStarted => SubtaskStarted {
            turn: t,
            subtask: "s1".into(),
            worker: "helper".into(),
            at,
        }
        .into(),
        Kind::SubtaskEnded => SubtaskEnded {
            turn: t,
            session: s,
            coordinator: agent,
            subtask: "s1".into(),
            worker: "helper".into(),
            state: TurnState::Completed,
            error: None,
            output: bounded(text()),
            usage: Usage::ZERO,
            at,
        }
        .into(),
        Kind::ActivationDecided => ActivationDecided {
            turn: t,
            session: s,
            agents: vec![AgentActivation {
                agent,
                decayed: 0,
                relevance: 500,
                mentioned: false,
                activation: 500,
                threshold: 300,
                answered: true,
                reason: text(),
            }],
            at,
        }
        .into(),
        other => unreachable!("{other:?} is sampled elsewhere"),
    }
}

/// A turn of `session` with one record of every kind (see [`TURN_ORDER`]).
pub fn turn_of_every_kind(
    turn: &str,
    session: &str,
    at: Millis,
    text: &mut dyn FnMut() -> String,
) -> Vec<Record> {
    TURN_ORDER
        .iter()
        .map(|&kind| sample(kind, turn, session, at, text))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_turn_order_holds_every_kind_once() {
        let mut order: Vec<Kind> = TURN_ORDER.to_vec();
        order.sort();
        let mut all = Kind::ALL.to_vec();
        all.sort();
        assert_eq!(order, all);
        let mut n = 0;
        let records = turn_of_every_kind("t", "s", 1, &mut || {
            n += 1;
            format!("text {n}")
        });
        for (r, kind) in records.iter().zip(TURN_ORDER) {
            assert_eq!(r.kind_of(), kind);
        }
    }
}
