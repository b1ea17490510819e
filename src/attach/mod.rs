//! Attachments: immutable, content-addressed files selected as context for turns.
//!
//! The bytes and their extracted text live in the object store (identical content once).
//! The ledger holds the relations: a reference is added to a session with a scope, pinned
//! by every turn that uses it (in the turn's begin record), consumed after the first turn
//! that pins it when it is once-scoped, and removed from future selection on request.
//! Nothing is ever rewritten: a removed or consumed reference stays readable for history.

mod render;
mod sniff;

use std::path::PathBuf;

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{
    AttachmentAdded, AttachmentRemoved, AttachmentScope, SessionCreated,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;

use crate::clock;
use crate::error::Result;
use crate::history;
use crate::ids;

pub use crate::error::{size_text, AttachError};
pub use crate::relations::{scope_str, Attachments, Reference, State};
pub use render::{
    check_images, check_selection, consume, reads_images, render_user_message, user_message,
};
pub use sniff::{
    is_image, safe_name, Kind, Prepared, DOCUMENT_CAP, IMAGE_CAP, SUPPORTED, TEXT_CAP,
};

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
) -> Result<Vec<Added>> {
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
pub fn remove(repo: &Repo, prefix: &str) -> Result<Reference> {
    let projection = history::project_reference(repo, prefix)?;
    let r = projection.attachments.resolve(prefix)?;
    if r.state != State::Selected {
        return Err(AttachError::NotSelected {
            reference: r.reference.clone(),
            state: r.state.as_str(),
        }
        .into());
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
pub fn bytes(repo: &Repo, r: &Reference) -> Result<Vec<u8>> {
    Ok(repo.objects().get(&r.object)?)
}

/// The extracted text of a reference, verified against its hash.
pub fn text(repo: &Repo, r: &Reference) -> Result<Vec<u8>> {
    match &r.text_object {
        Some(h) => Ok(repo.objects().get(h)?),
        None => Err(AttachError::NoText {
            reference: r.reference.clone(),
            name: r.name.clone(),
        }
        .into()),
    }
}

/// The references of `session`, in the order they were added: the selected ones, or with
/// `all` also those consumed by a turn or removed.
pub fn list(repo: &Repo, session: &str, all: bool) -> Result<Vec<Reference>> {
    let projection = history::project_session(repo, session)?;
    Ok(projection
        .attachments
        .of_session(session)
        .filter(|r| all || r.state == State::Selected)
        .cloned()
        .collect())
}

/// The reference `prefix` names, with its original bytes or, with `text`, its extracted
/// text (verified against their hash).
pub fn cat(repo: &Repo, prefix: &str, text: bool) -> Result<(Reference, Vec<u8>)> {
    let projection = history::project_reference(repo, prefix)?;
    let r = projection.attachments.resolve(prefix)?;
    let bytes = if text {
        self::text(repo, r)?
    } else {
        self::bytes(repo, r)?
    };
    Ok((r.clone(), bytes))
}
