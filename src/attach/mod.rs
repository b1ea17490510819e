//! Attachments: immutable, content-addressed files selected as context for turns.
//!
//! The bytes and their extracted text live in the object store (identical content once).
//! The ledger holds the relations: a reference is added to a session with a scope, pinned
//! by every turn that uses it (in the turn's begin record), consumed after the first turn
//! that pins it when it is once-scoped, and removed from future selection on request.
//! Nothing is ever rewritten: a removed or consumed reference stays readable for history.

mod render;
mod sniff;

use std::collections::HashMap;
use std::path::PathBuf;

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{
    AttachmentAdded, AttachmentPin, AttachmentRemoved, AttachmentScope, Millis, SessionCreated,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;
use serde::Serialize;

use crate::clock;
use crate::error::RuntimeError;
use crate::history;
use crate::ids;

pub use render::{check_images, check_selection, consume, reads_images, user_message};
pub use sniff::{
    is_image, safe_name, Kind, Prepared, DOCUMENT_CAP, IMAGE_CAP, SUPPORTED, TEXT_CAP,
};

/// Why an attachment command could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("{name}: {} is over the {} cap for {what}", size_text(*size), size_text(*cap))]
    TooLarge {
        name: String,
        size: u64,
        cap: u64,
        what: &'static str,
    },
    #[error("{name}: unsupported type{}", detected.as_ref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Unsupported {
        name: String,
        detected: Option<String>,
    },
    #[error("{name}: cannot extract the text of this PDF: {detail}")]
    Pdf { name: String, detail: String },
    #[error("{path} is not a regular file")]
    NotAFile { path: String },
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no attachment reference matches {prefix:?}")]
    NotFound { prefix: String },
    #[error("{prefix:?} matches several attachment references: {}", candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("attachment {reference} is not selected: it was {}", state.as_str())]
    NotSelected { reference: String, state: State },
    #[error("attachment {reference} ({name}) is an image and has no extracted text")]
    NoText { reference: String, name: String },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl From<axocoatl_store::Error> for AttachError {
    fn from(e: axocoatl_store::Error) -> Self {
        AttachError::Runtime(e.into())
    }
}

/// A size for messages: exact bytes, and KiB/MiB when that is easier to read.
pub fn size_text(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    match n {
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= MIB => format!("{:.1} MiB ({n} bytes)", n as f64 / MIB as f64),
        n if n >= KIB && n % KIB == 0 => format!("{} KiB", n / KIB),
        n if n >= KIB => format!("{:.1} KiB ({n} bytes)", n as f64 / KIB as f64),
        n => format!("{n} bytes"),
    }
}

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
    fn added(a: &AttachmentAdded) -> Reference {
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

/// A reference `add` returns.
#[derive(Clone, Debug)]
pub struct Added {
    pub reference: Reference,
    /// The same file (name and content) was already selected with this scope: nothing new
    /// was recorded.
    pub reused: bool,
    /// The length of the extracted text before the 256 KiB cut.
    pub text_len: usize,
}

/// Attaches `paths` to `session` with `scope`. Every file is checked and read before
/// anything is stored, so one refused file leaves the repository unchanged.
pub fn add(
    repo: &Repo,
    session: &str,
    paths: &[PathBuf],
    scope: AttachmentScope,
) -> Result<Vec<Added>, AttachError> {
    check_session_name(session)?;
    let mut prepared = Vec::with_capacity(paths.len());
    for path in paths {
        prepared.push(sniff::prepare(path)?);
    }
    let projection = history::project_session(repo, session)?;
    let mut records = Vec::new();
    if !projection.sessions.contains_key(session) {
        records.push(Record::SessionCreated(SessionCreated {
            session: session.to_owned(),
            at: clock::now(),
        }));
    }
    let mut out: Vec<Added> = Vec::with_capacity(prepared.len());
    for p in prepared {
        let object = repo.objects().put(&p.bytes)?;
        let text_object = match &p.text {
            Some(t) => Some(repo.objects().put(t.as_bytes())?),
            None => None,
        };
        let same = |r: &Reference| r.name == p.name && r.object == object && r.scope == scope;
        let earlier = out.iter().map(|a| &a.reference).find(|r| same(r));
        if let Some(r) =
            earlier.or_else(|| projection.attachments.selected(session).find(|r| same(r)))
        {
            out.push(Added {
                reference: r.clone(),
                reused: true,
                text_len: p.text_len,
            });
            continue;
        }
        let at = clock::now();
        let added = AttachmentAdded {
            reference: ids::new_id(),
            session: session.to_owned(),
            name: p.name,
            media_type: p.media_type,
            size: p.bytes.len() as u64,
            scope,
            object,
            text_object,
            text_truncated: p.text_truncated,
            at,
        };
        out.push(Added {
            reference: Reference::added(&added),
            reused: false,
            text_len: p.text_len,
        });
        records.push(Record::AttachmentAdded(added));
    }
    if records
        .iter()
        .any(|r| matches!(r, Record::AttachmentAdded(_)))
    {
        repo.ledger().append(&records)?;
    }
    Ok(out)
}

/// Takes a reference out of future selection. Turns that pinned it keep it.
pub fn remove(repo: &Repo, prefix: &str) -> Result<Reference, AttachError> {
    let projection = history::project_reference(repo, prefix)?;
    let r = projection.attachments.resolve(prefix)?;
    if r.state != State::Selected {
        return Err(AttachError::NotSelected {
            reference: r.reference.clone(),
            state: r.state,
        });
    }
    let at = clock::now();
    repo.ledger()
        .append(&[Record::AttachmentRemoved(AttachmentRemoved {
            reference: r.reference.clone(),
            session: r.session.clone(),
            at,
        })])?;
    let mut r = r.clone();
    r.state = State::Removed;
    r.removed_at = Some(at);
    Ok(r)
}

/// The original bytes of a reference, verified against their hash.
pub fn bytes(repo: &Repo, r: &Reference) -> Result<Vec<u8>, AttachError> {
    Ok(repo.objects().get(&r.object)?)
}

/// The extracted text of a reference, verified against its hash.
pub fn text(repo: &Repo, r: &Reference) -> Result<Vec<u8>, AttachError> {
    match &r.text_object {
        Some(h) => Ok(repo.objects().get(h)?),
        None => Err(AttachError::NoText {
            reference: r.reference.clone(),
            name: r.name.clone(),
        }),
    }
}

impl From<AttachError> for RuntimeError {
    fn from(e: AttachError) -> Self {
        match e {
            AttachError::Runtime(r) => r,
            AttachError::Read { path, source } => RuntimeError::Io {
                what: format!("cannot read {path}"),
                source,
            },
            e @ (AttachError::TooLarge { .. }
            | AttachError::Unsupported { .. }
            | AttachError::Pdf { .. }) => RuntimeError::Refused {
                message: e.to_string(),
                hint: format!("supported: {SUPPORTED}"),
            },
            e => RuntimeError::Invalid {
                message: e.to_string(),
                hint: "`axocoatl attach list --all` lists the references".into(),
            },
        }
    }
}
