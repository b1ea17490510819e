//! Rebuilding the conversation sent to the model from the session's ledger.

use axocoatl_store::ledger::record::Bounded;
use axocoatl_store::Repo;

use crate::error::Result;
use crate::history::{TurnView, ViewState};
use crate::provider::{Message, Role};

/// The user message for a request and its inline context.
pub fn render_user_message(request: &str, context: &[(String, String)]) -> String {
    let mut out = request.to_owned();
    for (label, text) in context {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("<context source=\"{label}\">\n{text}\n</context>"));
    }
    out
}

fn full_text(repo: &Repo, b: &Bounded) -> Result<String> {
    match &b.object {
        Some(hash) => Ok(String::from_utf8_lossy(&repo.objects().get(hash)?).into_owned()),
        None => Ok(b.inline.clone()),
    }
}

/// The messages of earlier turns that the model sees: turns not superseded by a rewind that
/// completed, or stopped with some output (the partial answer is what the user saw). Failed
/// and interrupted turns are left out. At most `max_messages`, newest kept, whole turns only.
pub fn prior_messages<'a>(
    repo: &Repo,
    turns: impl Iterator<Item = &'a TurnView>,
    max_messages: usize,
) -> Result<Vec<Message>> {
    let mut pairs: Vec<&TurnView> = turns
        .filter(|t| !t.superseded)
        .filter(|t| match t.state {
            ViewState::Completed => true,
            ViewState::Stopped => !t.output.is_empty(),
            _ => false,
        })
        .collect();
    let keep = max_messages / 2;
    if pairs.len() > keep {
        pairs.drain(..pairs.len() - keep);
    }
    let mut out = Vec::with_capacity(pairs.len() * 2);
    for t in pairs {
        let mut context = Vec::with_capacity(t.inline_context.len());
        for c in &t.inline_context {
            context.push((c.label.clone(), full_text(repo, &c.text)?));
        }
        out.push(Message::new(Role::User, render_user_message(&t.request, &context)));
        out.push(Message::new(Role::Assistant, t.output.clone()));
    }
    Ok(out)
}
