//! Step 3 for a turn of a multi-agent session: the agents the lattice activation rule
//! picked (`crate::team::lattice`, decided and recorded when the turn began) answer one
//! after another, in `depends_on` order, each with its own provider, model, sampling,
//! budget, tools and memory (`{session}:{agent}`), each seeing the session's shared
//! conversation, the request and the earlier answers of this turn. Each answer is recorded
//! as that agent's output (per-Agent output records).

use super::converse::{self, Conversant, Tally, TurnCx, TurnError};
use super::coordinate::Pass;
use crate::error::RuntimeError;
use crate::provider::{self, Message, ProviderError, Role};
use crate::turn::TurnEvent;

type Sink<'s> = dyn FnMut(TurnEvent<'_>) + 's;

/// Runs the answering agents over `transcript` (the shared conversation and this turn's
/// user message). Returns each answer as `(agent, text)`, in order, with how the turn
/// ended; `tally` gets the usage of every call and the answers joined as the output.
pub(crate) fn run(
    pass: &Pass<'_>,
    transcript: &mut Vec<Message>,
    tally: &mut Tally,
    cx: &TurnCx<'_>,
    sink: &mut Sink<'_>,
) -> (Vec<(String, String)>, Result<(), TurnError>) {
    let (config, p, dir, config_dir) = (pass.config, pass.p, pass.dir, pass.config_dir);
    let mut answers: Vec<(String, String)> = Vec::new();
    let Some(multi) = &p.multi else {
        return (answers, Ok(()));
    };
    let shared = transcript.clone();
    let mut end = Ok(());
    for (agent, reason) in &multi.answering {
        if cx.cancel.is_cancelled() {
            end = Err(TurnError::Provider(ProviderError::Cancelled));
            break;
        }
        sink(TurnEvent::Answering {
            turn: cx.turn.into(),
            agent: agent.id.as_str().into(),
            reason: reason.as_str().into(),
        });
        let mut own = Tally {
            budget_used: 0,
            ..Tally::default()
        };
        let mut messages = shared.clone();
        if !answers.is_empty() {
            let mut earlier = String::from("Answers so far in this turn:");
            for (who, text) in &answers {
                earlier.push_str(&format!("\n\n@{who}:\n{text}"));
            }
            earlier.push_str(&format!("\n\nNow answer as {}.", agent.id));
            messages.push(Message::new(Role::User, earlier));
        }
        let from = messages.len();
        let result = (|| {
            let env = |k: &str| std::env::var(k).ok();
            let resolved = config
                .resolve_provider(agent, &env, config_dir)
                .map_err(|message| {
                    TurnError::Runtime(RuntimeError::Invalid {
                        message,
                        hint: format!("check the provider of agent {:?}", agent.id).into(),
                    })
                })?;
            let mut model = provider::open(&resolved).map_err(TurnError::Provider)?;
            let mut conv = Conversant::for_agent(cx.repo, agent, &p.session, &resolved.model, dir)?
                .priced(config, &resolved);
            let end =
                converse::converse(&mut conv, model.as_mut(), &mut messages, &mut own, cx, sink);
            // Each agent keeps its answer in its own memory tiers.
            converse::observe_end(&mut conv, cx, &own, &end, sink)?;
            end
        })();
        tally.absorb(&own);
        if !tally.output.is_empty() && !own.output.is_empty() {
            tally.output.push('\n');
        }
        tally.output.push_str(&own.output);
        transcript.extend(messages.drain(from..));
        answers.push((agent.id.clone(), own.output));
        if result.is_err() {
            end = result;
            break;
        }
    }
    (answers, end)
}
