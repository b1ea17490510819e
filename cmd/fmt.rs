//! Formatting shared by several commands.

use axocoatl::clock;
use axocoatl::history::TurnView;
use axocoatl_store::ledger::record::Usage;
use serde_json::{json, Value};

use crate::ui::Ui;

pub fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total(),
        "calls": u.calls,
        "complete": u.complete,
    })
}

pub fn usage_text(u: &Usage) -> String {
    format!(
        "{} prompt + {} completion tokens in {} call{}{}",
        u.prompt_tokens,
        u.completion_tokens,
        u.calls,
        if u.calls == 1 { "" } else { "s" },
        if u.complete {
            ""
        } else {
            " (incomplete: a provider did not report usage)"
        }
    )
}

/// The first line of `s`, cut to `max` characters with an ellipsis. Control characters
/// are escaped so a request cannot move the cursor.
pub fn first_line(s: &str, max: usize) -> String {
    let line = s.trim_start().lines().next().unwrap_or("");
    let mut out = String::new();
    for (i, ch) in line.chars().enumerate() {
        if i >= max {
            out.push('…');
            break;
        }
        if ch.is_control() {
            out.extend(ch.escape_default());
        } else {
            out.push(ch);
        }
    }
    out
}

/// Escapes control characters (keeping newlines and tabs) in text shown on a terminal.
pub fn safe(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// One turn as the JSON object `history --json` prints.
pub fn turn_json(t: &TurnView) -> Value {
    json!({
        "turn": t.turn,
        "session": t.session,
        "agent": t.agent,
        "state": t.state.as_str(),
        "superseded": t.superseded,
        "request": t.request,
        "output": t.output,
        "error": t.error,
        "started_at": clock::rfc3339(t.started_at),
        "ended_at": t.ended_at.map(clock::rfc3339),
        "usage": t.usage.as_ref().map(usage_json),
        "retry_of": t.retry_of,
        "origin": t.origin.as_ref().map(|o| json!({
            "automation": o.automation,
            "occurrence": clock::rfc3339(o.occurrence),
            "trigger": o.trigger,
            "runner": o.runner,
            "runner_pid": o.pid,
        })),
        "context": t.context,
        "attachments": t.attachments.iter().map(|a| json!({
            "reference": a.reference, "name": a.name, "media_type": a.media_type,
            "size": a.size, "object": a.object, "text_object": a.text_object,
        })).collect::<Vec<_>>(),
        "tools": t.tools,
        "warnings": t.warnings,
    })
}

/// The state word padded to `width`, colored on a terminal.
pub fn state(ui: &Ui, t: &TurnView, width: usize) -> String {
    let word = t.state.as_str();
    let padded = format!("{word:<width$}");
    let code = match word {
        "completed" => "32",
        "running" => "34;1",
        "stopped" => "33",
        _ => "31",
    };
    ui.paint(code, &padded)
}

/// Warns about damage met while projecting (never skipped silently) and about records of
/// kinds this build does not know.
pub fn warn_problems(ui: &mut Ui, p: &axocoatl::history::Projection) -> std::io::Result<()> {
    warn_damaged(ui, &p.problems)?;
    if p.unknown_kinds > 0 {
        ui.warn(&format!(
            "skipped {} ledger record{} of a kind this axocoatl does not know (written by a newer version?)",
            p.unknown_kinds,
            if p.unknown_kinds == 1 { "" } else { "s" }
        ))?;
    }
    Ok(())
}

/// Warns about each record or segment that could not be read: what is shown lacks it.
pub fn warn_damaged(
    ui: &mut Ui,
    damaged: &[axocoatl_store::ledger::Damaged],
) -> std::io::Result<()> {
    for d in damaged {
        ui.warn(&format!(
            "{d}; what is shown lacks it (run `axocoatl fsck`)"
        ))?;
    }
    Ok(())
}
