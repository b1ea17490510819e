//! Attachment relations: which references a session has, their scope, and whether each is
//! still selected, consumed by a turn or removed, projected from the ledger. Part of every
//! history projection; `crate::attach` stores new references and renders them for turns.

use std::collections::HashMap;

use axocoatl_store::ledger::record::{AttachmentAdded, AttachmentPin, AttachmentScope, Millis};
use axocoatl_store::ledger::Record;
use serde::Serialize;

use crate::error::AttachError;
use crate::ids;

/// Where a reference stands for future turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Goes along with the next turn of its session (every turn, when session-scoped).
    Selected,
    /// Once-scoped and used by a turn.
    Consumed,
    /// Taken out of the selection before it was consumed.
    Removed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Selected => "selected",
            State::Consumed => "consumed",
            State::Removed => "removed",
        }
    }
}

pub fn scope_str(scope: AttachmentScope) -> &'static str {
    match scope {
        AttachmentScope::Once => "once",
        AttachmentScope::Session => "session",
    }
}

/// One reference, as the ledger says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reference {
    pub reference: String,
    pub session: String,
    pub name: String,
    pub media_type: String,
    pub size: u64,
    #[serde(serialize_with = "ser_scope")]
    pub scope: AttachmentScope,
    pub state: State,
    pub object: String,
    pub text_object: Option<String>,
    pub text_truncated: bool,
    pub added_at: Millis,
    /// The turn that consumed a once-scoped reference.
    pub consumed_by: Option<String>,
    pub removed_at: Option<Millis>,
    /// Every turn that pinned it, in ledger order.
    pub used_by: Vec<String>,
}

fn ser_scope<S: serde::Serializer>(scope: &AttachmentScope, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(scope_str(*scope))
}

impl Reference {
    /// A reference as its add record leaves it: selected, used by no turn yet.
    pub(crate) fn added(a: &AttachmentAdded) -> Reference {
        Reference {
            reference: a.reference.clone(),
            session: a.session.clone(),
            name: a.name.clone(),
            media_type: a.media_type.clone(),
            size: a.size,
            scope: a.scope,
            state: State::Selected,
            object: a.object.clone(),
            text_object: a.text_object.clone(),
            text_truncated: a.text_truncated,
            added_at: a.at,
            consumed_by: None,
            removed_at: None,
            used_by: Vec::new(),
        }
    }

    /// The pin a turn records for this reference.
    pub fn pin(&self) -> AttachmentPin {
        AttachmentPin {
            reference: self.reference.clone(),
            name: self.name.clone(),
            media_type: self.media_type.clone(),
            size: self.size,
            object: self.object.clone(),
            text_object: self.text_object.clone(),
        }
    }
}

/// Every attachment reference, projected from the ledger (part of `history::Projection`).
#[derive(Clone, Debug, Default)]
pub struct Attachments {
    /// In ledger order.
    refs: Vec<Reference>,
    index: HashMap<String, usize>,
}

impl Attachments {
    /// Folds one ledger record in.
    pub fn apply(&mut self, record: &Record) {
        match record {
            Record::AttachmentAdded(a) => {
                self.index.insert(a.reference.clone(), self.refs.len());
                self.refs.push(Reference::added(a));
            }
            Record::TurnBegun(b) => {
                for pin in &b.attachments {
                    if let Some(r) = self.get_mut(&pin.reference) {
                        r.used_by.push(b.turn.clone());
                        // The pin is the authority: a crash between the begin record and
                        // the consumption record still consumes a once-scoped reference.
                        if r.scope == AttachmentScope::Once {
                            consume_ref(r, &b.turn);
                        }
                    }
                }
            }
            Record::AttachmentConsumed(c) => {
                if let Some(r) = self.get_mut(&c.reference) {
                    consume_ref(r, &c.turn);
                }
            }
            Record::AttachmentRemoved(x) => {
                if let Some(r) = self.get_mut(&x.reference) {
                    r.removed_at.get_or_insert(x.at);
                    if r.state == State::Selected {
                        r.state = State::Removed;
                    }
                }
            }
            _ => {}
        }
    }

    fn get_mut(&mut self, reference: &str) -> Option<&mut Reference> {
        let i = *self.index.get(reference)?;
        self.refs.get_mut(i)
    }

    pub fn get(&self, reference: &str) -> Option<&Reference> {
        self.index.get(reference).map(|&i| &self.refs[i])
    }

    /// Every reference, in the order they were added.
    pub fn all(&self) -> impl Iterator<Item = &Reference> {
        self.refs.iter()
    }

    /// Every reference of `session`, in the order they were added.
    pub fn of_session<'a>(&'a self, session: &'a str) -> impl Iterator<Item = &'a Reference> {
        self.refs.iter().filter(move |r| r.session == session)
    }

    /// What the next turn of `session` uses.
    pub fn selected<'a>(&'a self, session: &'a str) -> impl Iterator<Item = &'a Reference> {
        self.of_session(session)
            .filter(|r| r.state == State::Selected)
    }

    /// The pins of the next turn of `session`.
    pub fn selection(&self, session: &str) -> Vec<AttachmentPin> {
        self.selected(session).map(Reference::pin).collect()
    }

    /// Resolves a reference id or a unique prefix of at least 4 characters.
    pub fn resolve(&self, prefix: &str) -> Result<&Reference, AttachError> {
        let p = prefix.trim().to_ascii_lowercase();
        if let Some(r) = self.get(&p) {
            return Ok(r);
        }
        let not_found = || AttachError::NotFound {
            prefix: prefix.to_owned(),
        };
        if p.len() < 4 || !ids::is_id_prefix(&p) {
            return Err(not_found());
        }
        let found: Vec<&Reference> = self
            .refs
            .iter()
            .filter(|r| r.reference.starts_with(&p))
            .collect();
        match found.as_slice() {
            [] => Err(not_found()),
            [one] => Ok(one),
            many => Err(AttachError::Ambiguous {
                prefix: prefix.to_owned(),
                candidates: many.iter().map(|r| r.reference.clone()).collect(),
            }),
        }
    }
}

fn consume_ref(r: &mut Reference, turn: &str) {
    if r.consumed_by.is_none() {
        r.consumed_by = Some(turn.to_owned());
    }
    if r.state == State::Selected {
        r.state = State::Consumed;
    }
}
