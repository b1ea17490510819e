//! Attachments: immutable, content-addressed files selected as context for turns.
//!
//! The bytes and their extracted text live in the object store (identical content once).
//! The ledger holds the relations: a reference is added to a session with a scope, pinned
//! by every turn that uses it (in the turn's begin record), consumed after the first turn
//! that pins it when it is once-scoped, and removed from future selection on request.
//! Nothing is ever rewritten: a removed or consumed reference stays readable for history.

pub mod ocr;
mod pdf;
mod pdf_text;
mod render;
mod sniff;
mod tiff;

use std::collections::HashMap;
use std::path::PathBuf;

use axocoatl_store::extracted::{self, Extracted, OcrInfo};

use axocoatl_store::layout::check_session_name;
use axocoatl_store::ledger::record::{
    AttachmentAdded, AttachmentRemoved, AttachmentScope, SessionCreated,
};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;

use crate::clock;
use crate::error::Result;
use crate::history::{Projection, Scope, Want};
use crate::ids;
use crate::provider::Cancel;

pub use crate::error::{size_text, AttachError};
pub use crate::relations::{scope_str, Attachments, Reference, State};
pub use render::{
    check_images, check_selection, consume, reads_images, render_user_message, user_message,
};
pub use sniff::{
    is_image, is_ocr_image, safe_name, Kind, Prepared, DOCUMENT_CAP, IMAGE_CAP, SUPPORTED, TEXT_CAP,
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
    /// What OCR read, when it did.
    pub ocr: Option<OcrInfo>,
    /// The text was read before, for the same content and languages: it was not read again.
    pub text_reused: bool,
    /// What was not read of the file, and why.
    pub notes: Vec<String>,
}

/// An attachment's text as the model reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    /// No text is stored (an image that OCR did not read).
    None,
    Plain(String),
    Ocr(OcrInfo, String),
}

impl Text {
    /// Decodes a text object's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Text, String> {
        Ok(match extracted::decode(bytes)? {
            Extracted::Plain(t) => Text::Plain(t.to_owned()),
            Extracted::Ocr(info, t) => Text::Ocr(info, t.to_owned()),
        })
    }

    pub fn text(&self) -> &str {
        match self {
            Text::None => "",
            Text::Plain(t) | Text::Ocr(_, t) => t,
        }
    }

    pub fn ocr(&self) -> Option<&OcrInfo> {
        match self {
            Text::Ocr(info, _) => Some(info),
            _ => None,
        }
    }
}

/// How the text of the files `add` attaches is read: OCR's settings, and the stop that ends
/// a reading early (Ctrl-C, SIGTERM, `serve` ending).
pub struct Reading<'a> {
    pub ocr: ocr::Settings,
    pub cancel: &'a Cancel,
}

/// The text objects that OCR wrote before, by the object they were read from (any session):
/// the same content is never read twice with the same languages.
struct Earlier {
    by_object: HashMap<String, Vec<(String, bool)>>,
}

impl Earlier {
    fn load(repo: &Repo) -> Result<Earlier> {
        let projection = Projection::of(repo, Scope::Attachments, Want::VIEWS)?;
        let mut by_object: HashMap<String, Vec<(String, bool)>> = HashMap::new();
        for r in projection.attachments.all() {
            if let Some(t) = &r.text_object {
                by_object
                    .entry(r.object.clone())
                    .or_default()
                    .push((t.clone(), r.text_truncated));
            }
        }
        Ok(Earlier { by_object })
    }

    /// An earlier OCR text of `object` read with `languages`: its object, what OCR said,
    /// and whether it was cut.
    fn find(&self, repo: &Repo, object: &str, languages: &str) -> Option<(String, OcrInfo, bool)> {
        for (text, cut) in self.by_object.get(object)? {
            let Ok(bytes) = repo.objects().get(text) else {
                continue;
            };
            if let Ok(Extracted::Ocr(info, _)) = extracted::decode(&bytes) {
                if info.languages == languages {
                    return Some((text.clone(), info, *cut));
                }
            }
        }
        None
    }
}

/// A file read whole: its bytes and its text object.
struct Ready {
    p: Prepared,
    object: String,
    read: ocr::Read,
    /// The text object was written before (same content, same OCR languages).
    reused: Option<String>,
}

/// Reads the text of every file: plain text as it is, a PDF's text layer, and OCR of
/// images and of PDF pages without a text layer (once per content and languages).
fn read_all(repo: &Repo, paths: &[PathBuf], reading: &Reading<'_>) -> Result<Vec<Ready>> {
    let mut reader = ocr::Reader::new(reading.ocr.clone(), reading.cancel);
    let languages = reading.ocr.language_key();
    let mut earlier: Option<Earlier> = None;
    let mut out: Vec<Ready> = Vec::with_capacity(paths.len());
    for path in paths {
        let mut p = sniff::prepare(path)?;
        let object = axocoatl_store::objects::hash(&p.bytes);
        if p.kind != Kind::Text && reader.enabled() {
            if let Some(same) = out
                .iter()
                .find(|r| r.object == object && r.read.ocr.is_some())
            {
                let read = ocr::Read {
                    object: same.read.object.clone(),
                    text_len: same.read.text_len,
                    truncated: same.read.truncated,
                    ocr: same.read.ocr.clone(),
                    notes: Vec::new(),
                };
                let reused = same.reused.clone();
                out.push(Ready {
                    p,
                    object,
                    read,
                    reused,
                });
                continue;
            }
            let known = match &earlier {
                Some(e) => e,
                None => earlier.insert(Earlier::load(repo)?),
            };
            if let Some((text, info, cut)) = known.find(repo, &object, &languages) {
                let read = ocr::Read {
                    object: None,
                    text_len: info.text_len as usize,
                    truncated: cut,
                    ocr: Some(info),
                    notes: Vec::new(),
                };
                out.push(Ready {
                    p,
                    object,
                    read,
                    reused: Some(text),
                });
                continue;
            }
        }
        let read = match p.kind {
            Kind::Text => ocr::Read::plain(p.text.take().unwrap_or_default()),
            Kind::Pdf => reader.pdf(&p.name, &p.bytes)?,
            Kind::Image => reader.image(&p.name, &p.media_type, &p.bytes)?,
        };
        out.push(Ready {
            p,
            object,
            read,
            reused: None,
        });
    }
    Ok(out)
}

/// Attaches `paths` to `session` with `scope`. Every file is checked and read (its text
/// extracted, images read by OCR) before anything is stored, so one refused file leaves
/// the repository unchanged.
pub fn add(
    repo: &Repo,
    session: &str,
    paths: &[PathBuf],
    scope: AttachmentScope,
    reading: &Reading<'_>,
) -> Result<Vec<Added>> {
    check_session_name(session)?;
    let prepared = read_all(repo, paths, reading)?;
    let projection = Projection::of(repo, Scope::Session(session), Want::VIEWS)?;
    let mut records = Vec::new();
    if !projection.sessions.contains_key(session) {
        records.push(Record::SessionCreated(SessionCreated {
            session: session.to_owned(),
            at: clock::now(),
        }));
    }
    let mut out: Vec<Added> = Vec::with_capacity(prepared.len());
    for Ready {
        p,
        object: _,
        read,
        reused,
    } in prepared
    {
        let object = repo.objects().put(&p.bytes)?;
        let text_reused = reused.is_some();
        let text_object = match (reused, &read.object) {
            (Some(hash), _) => Some(hash),
            (None, Some(bytes)) => Some(repo.objects().put(bytes)?),
            (None, None) => None,
        };
        let same = |r: &Reference| r.name == p.name && r.object == object && r.scope == scope;
        let earlier = out.iter().map(|a| &a.reference).find(|r| same(r));
        if let Some(r) =
            earlier.or_else(|| projection.attachments.selected(session).find(|r| same(r)))
        {
            out.push(Added {
                reference: r.clone(),
                reused: true,
                text_len: read.text_len,
                ocr: read.ocr,
                text_reused,
                notes: read.notes,
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
            text_truncated: read.truncated,
            at,
        };
        out.push(Added {
            reference: Reference::added(&added),
            reused: false,
            text_len: read.text_len,
            ocr: read.ocr,
            text_reused,
            notes: read.notes,
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
    let projection = Projection::of(repo, Scope::Reference(prefix), Want::VIEWS)?;
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

/// The extracted text of a reference (without the header of OCR text), verified against
/// its hash.
pub fn text(repo: &Repo, r: &Reference) -> Result<Vec<u8>> {
    match stored_text(repo, r.text_object.as_deref())? {
        Text::None => Err(AttachError::NoText {
            reference: r.reference.clone(),
            name: r.name.clone(),
        }
        .into()),
        t => Ok(t.text().as_bytes().to_vec()),
    }
}

/// The text a text object holds (verified against its hash), decoded.
pub fn stored_text(repo: &Repo, text_object: Option<&str>) -> Result<Text> {
    let Some(hash) = text_object else {
        return Ok(Text::None);
    };
    let bytes = repo.objects().get(hash)?;
    Text::decode(&bytes).map_err(|detail| {
        AttachError::BadText {
            object: hash.to_owned(),
            detail,
        }
        .into()
    })
}

/// The references of `session`, in the order they were added: the selected ones, or with
/// `all` also those consumed by a turn or removed.
pub fn list(repo: &Repo, session: &str, all: bool) -> Result<Vec<Reference>> {
    let projection = Projection::of(repo, Scope::Session(session), Want::VIEWS)?;
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
    let projection = Projection::of(repo, Scope::Reference(prefix), Want::VIEWS)?;
    let r = projection.attachments.resolve(prefix)?;
    let bytes = if text {
        self::text(repo, r)?
    } else {
        self::bytes(repo, r)?
    };
    Ok((r.clone(), bytes))
}
