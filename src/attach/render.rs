//! Attachments in a turn: checking the selection under the session lock, the user message
//! the model reads, and consumption after the turn has begun.

use axocoatl_store::ledger::record::{AttachmentConsumed, AttachmentPin, AttachmentScope};
use axocoatl_store::ledger::Record;
use axocoatl_store::Repo;

use super::{is_image, is_ocr_image, stored_text, Attachments, State, Text};
use crate::clock;
use crate::config::{ProviderKind, ResolvedProvider};
use crate::error::{Result, RuntimeError};
use crate::provider::{Image, Message, Role};

/// Checks that every pin is a reference still selected in `session` (a concurrent turn may
/// have consumed a once-scoped one, or `attach rm` removed it) and returns the once-scoped
/// references, which the turn consumes.
pub fn check_selection(
    attachments: &Attachments,
    session: &str,
    pins: &[AttachmentPin],
) -> Result<Vec<String>> {
    let mut once = Vec::new();
    for pin in pins {
        let current = attachments
            .get(&pin.reference)
            .filter(|r| r.session == session);
        let Some(r) = current.filter(|r| r.state == State::Selected && r.pin() == *pin) else {
            let why = match current {
                Some(r) if r.state != State::Selected => r.state.as_str(),
                _ => "not selected in this session",
            };
            return Err(RuntimeError::Refused {
                message: format!(
                    "attachment {} ({}) is {why}; the turn did not begin",
                    pin.reference, pin.name
                ),
                hint: crate::error::Next::ShowSelection {
                    session: session.to_owned(),
                },
            });
        };
        if r.scope == AttachmentScope::Once {
            once.push(r.reference.clone());
        }
    }
    Ok(once)
}

/// Records that `turn` consumed the once-scoped `references`. Called after the turn's
/// begin record is durable.
pub fn consume(repo: &Repo, session: &str, turn: &str, references: &[String]) -> Result<()> {
    if references.is_empty() {
        return Ok(());
    }
    let at = clock::now();
    let records: Vec<Record> = references
        .iter()
        .map(|reference| {
            Record::AttachmentConsumed(AttachmentConsumed {
                reference: reference.clone(),
                session: session.to_owned(),
                turn: turn.to_owned(),
                at,
            })
        })
        .collect();
    repo.ledger().append(&records)?;
    Ok(())
}

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

/// Escapes a value for an attribute of the `<attachment>` tag.
fn attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// How the model is told where an attachment's text comes from: nothing for plain text,
/// and for OCR text the engine's languages and mean confidence.
fn text_source(t: &Text) -> String {
    let Some(info) = t.ocr() else {
        return String::new();
    };
    let what = if info.of_pages > 1 && info.pages < info.of_pages {
        format!(
            "text layer and OCR of {} of {} pages",
            info.pages, info.of_pages
        )
    } else {
        "OCR".to_owned()
    };
    let confidence = match info.confidence {
        Some(c) => format!("mean confidence {c}%"),
        None => "no words found".to_owned(),
    };
    format!(" text=\"{what}, {}, {confidence}\"", attr(&info.languages))
}

/// The user message of a turn: the request, its inline context, then each attachment
/// (its extracted text in an `<attachment>` block, saying when it is OCR text and with
/// what mean confidence; an image without text as an empty tag). With `images`, the
/// bytes of images that providers take go along (the turn being sent); rebuilt earlier
/// turns carry only the text, as checkpoints do.
pub fn user_message(
    repo: &Repo,
    request: &str,
    context: &[(String, String)],
    pins: &[AttachmentPin],
    images: bool,
) -> Result<Message> {
    let mut content = render_user_message(request, context);
    let mut sent = Vec::new();
    for pin in pins {
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        let mut attrs = format!(
            "name=\"{}\" type=\"{}\" size=\"{}\"",
            attr(&pin.name),
            attr(&pin.media_type),
            pin.size
        );
        let text = stored_text(repo, pin.text_object.as_deref())?;
        if is_image(&pin.media_type) || is_ocr_image(&pin.media_type) {
            attrs.push_str(" image=\"true\"");
            if images && is_image(&pin.media_type) {
                sent.push(Image {
                    media_type: pin.media_type.clone(),
                    data: repo.objects().get(&pin.object)?,
                });
            }
        }
        attrs.push_str(&text_source(&text));
        match &text {
            Text::None => content.push_str(&format!("<attachment {attrs}/>")),
            Text::Ocr(_, t) if t.is_empty() => content.push_str(&format!("<attachment {attrs}/>")),
            t => content.push_str(&format!(
                "<attachment {attrs}>\n{}\n</attachment>",
                t.text()
            )),
        }
    }
    let mut message = Message::new(Role::User, content);
    message.images = sent;
    Ok(message)
}

/// Whether a provider kind passes images to its models.
pub fn reads_images(kind: ProviderKind) -> bool {
    match kind {
        ProviderKind::Ollama | ProviderKind::Openai | ProviderKind::Anthropic => true,
        ProviderKind::Local | ProviderKind::Script => false,
    }
}

/// Before the turn begins: a provider that cannot read images gets the text OCR read in
/// them instead of the images; an image with no such text is refused (never dropped
/// silently).
pub fn check_images(
    repo: &Repo,
    message: &mut Message,
    pins: &[AttachmentPin],
    provider: &ResolvedProvider,
) -> Result<()> {
    if message.images.is_empty() || reads_images(provider.kind) {
        return Ok(());
    }
    let mut names = Vec::new();
    for p in pins.iter().filter(|p| is_image(&p.media_type)) {
        let text = stored_text(repo, p.text_object.as_deref())?;
        if text.text().trim().is_empty() {
            names.push(format!("{} ({})", p.name, p.reference));
        }
    }
    if names.is_empty() {
        message.images.clear();
        return Ok(());
    }
    Err(RuntimeError::Refused {
        message: format!(
            "provider {:?} ({}) cannot read images, and the selection has {} without text that OCR read: {}",
            provider.name,
            provider.kind.as_str(),
            if names.len() == 1 { "one" } else { "several" },
            names.join(", ")
        ),
        hint: crate::error::Next::ImagesNeedAVisionProvider,
    })
}
