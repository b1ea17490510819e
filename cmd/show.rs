//! `axocoatl show`

use std::io::Write;

use axocoatl::attach::{self, Text};
use axocoatl::clock;
use axocoatl::history::{self, TurnView};
use axocoatl::query;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;

use crate::ctx::GlobalArgs;
use crate::error::CliResult;
use crate::exit;
use crate::fmt::{safe, state, usage_text, AgentNames};
use crate::json::{OcrJson, PinTextJson, ShowJson, TurnJson};
use crate::ui::Ui;

/// Show one turn whole: request, context references, output, tool events, state, usage.
///
/// Examples:
///   axocoatl show 3f2a9c1e
///   axocoatl show 3f2a --json
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ShowArgs {
    /// The turn id, or a unique prefix of at least 4 characters.
    #[arg(add = ArgValueCandidates::new(crate::complete::turns))]
    pub turn: String,
    /// Print the turn as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ShowArgs, g: &GlobalArgs, ui: &mut Ui) -> CliResult {
    let ws = g.open()?;
    let t = query::show(ws.repo(), &args.turn)?;
    let output = query::full_output(ws.repo(), &t)?;
    let names = AgentNames::of(&ws);
    let texts = t
        .attachments
        .iter()
        .map(|a| attach::stored_text(ws.repo(), a.text_object.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    if args.json {
        ui.json_line(&ShowJson {
            turn: TurnJson::new(&t, &output, names.get(&t.agent))
                .with_cost(&t)
                .shown_as(ws.shown_session(&t.session)),
            calls: &t.calls,
            stop_requested: t.stop_requested,
            attachment_texts: t
                .attachments
                .iter()
                .zip(&texts)
                .map(|(a, text)| PinTextJson {
                    reference: &a.reference,
                    text: match (text, &a.text_object) {
                        (Text::Ocr(..), _) => "ocr",
                        (_, Some(_)) => "extracted",
                        (_, None) => "none",
                    },
                    ocr: text.ocr().map(OcrJson::from),
                })
                .collect(),
        })?;
        return Ok(exit::OK);
    }
    let mut o = head(ui, &t, &names, ws.shown_session(&t.session), &texts);
    body(ui, &mut o, &t, &output);
    ui.out.write_all(o.as_bytes())?;
    Ok(exit::OK)
}

/// Who, when, what state, and the request with its context and attachments.
fn head(ui: &Ui, t: &TurnView, names: &AgentNames, session: &str, texts: &[Text]) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "turn     {}", t.turn);
    let _ = writeln!(o, "session  {session}");
    let _ = writeln!(o, "agent    {}", names.label(&t.agent));
    let mut st = state(ui, t, 0);
    if t.superseded {
        st.push_str(" (superseded by a rewind)");
    }
    if t.stop_requested && t.state != history::ViewState::Stopped {
        st.push_str(" (a stop was requested)");
    }
    let _ = writeln!(o, "state    {st}");
    let _ = writeln!(o, "started  {}", clock::rfc3339(t.started_at));
    if let Some(end) = t.ended_at {
        let _ = writeln!(o, "ended    {}", clock::rfc3339(end));
    }
    if let Some(r) = &t.retry_of {
        let _ = writeln!(o, "retry of {r}");
    }
    if let Some(origin) = &t.origin {
        let _ = writeln!(
            o,
            "origin   automation {} occurrence {} ({}, {} {})",
            origin.automation,
            clock::rfc3339(origin.occurrence),
            origin.trigger,
            origin.runner,
            origin.pid
        );
    }
    if let Some(x) = &t.overrides {
        if let Some(model) = &x.model {
            let _ = writeln!(o, "model    {} (this turn only)", safe(model));
        }
        if !x.options.is_empty() {
            let options: Vec<String> = x.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(o, "options  {} (this turn only)", safe(&options.join(" ")));
        }
        if let Some(system) = &x.system {
            let _ = writeln!(
                o,
                "\nsystem prompt (this turn only):\n{}",
                indent(&safe(system))
            );
        }
    }
    let _ = writeln!(o, "\nrequest:\n{}", indent(&safe(&t.request)));
    if !t.context.is_empty() {
        let _ = writeln!(o, "\ncontext:");
        for c in &t.context {
            let stored = c
                .object
                .as_deref()
                .map(|h| format!(", object {h}"))
                .unwrap_or_default();
            let _ = writeln!(o, "  - {} ({} bytes{stored})", safe(&c.label), c.len);
        }
    }
    if !t.attachments.is_empty() {
        let _ = writeln!(o, "\nattachments:");
        for (a, text) in t.attachments.iter().zip(texts) {
            let ocr = match text {
                Text::Ocr(info, _) => format!("; {}", crate::attach::ocr_summary(info)),
                Text::None if attach::is_image(&a.media_type) => "; not read by OCR".into(),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "  - {} {} ({}, {} bytes{ocr})",
                a.reference,
                a.name.escape_debug(),
                a.media_type,
                a.size
            );
        }
    }
    o
}

/// Tools, output (whole: `output` is read from its object when it was too long for one
/// record), error, warnings and usage.
fn body(ui: &Ui, o: &mut String, t: &TurnView, output: &str) {
    use std::fmt::Write as _;
    if !t.tools.is_empty() {
        let _ = writeln!(o, "\ntools:");
        for x in &t.tools {
            let result = match (&x.output, x.is_error, x.exit_code) {
                (None, _, _) => "(no result recorded)".to_string(),
                (Some(out), _, Some(code)) => {
                    format!("exit {code}: {}", crate::fmt::first_line(out, 100))
                }
                (Some(out), true, None) => {
                    format!("error: {}", crate::fmt::first_line(out, 100))
                }
                (Some(out), false, None) => crate::fmt::first_line(out, 100),
            };
            let _ = writeln!(
                o,
                "  - {} {} → {result}",
                x.name,
                crate::fmt::first_line(&x.arguments, 100)
            );
            if let Some(diff) = x
                .output
                .as_deref()
                .and_then(|out| crate::fmt::tool_diff(&x.name, out))
            {
                for line in diff.lines() {
                    let _ = writeln!(
                        o,
                        "      {}",
                        crate::fmt::diff_line(line, |c, t| ui.paint(c, t))
                    );
                }
            }
        }
    }
    team(o, t);
    let whole = t.output_object.is_some();
    for (agent, text) in &t.outputs {
        let label = if t.outputs.len() > 1 {
            format!("output ({agent})")
        } else {
            "output".to_string()
        };
        let text = if whole && t.outputs.len() == 1 {
            output
        } else {
            text
        };
        let _ = writeln!(o, "\n{label}:\n{}", indent(&safe(text)));
    }
    if t.outputs.is_empty() && !output.is_empty() {
        let _ = writeln!(o, "\noutput:\n{}", indent(&safe(output)));
    }
    if let Some(e) = &t.error {
        let (detail, hints) = crate::fmt::split_hints(e);
        let _ = writeln!(o, "\nerror: {}", safe(&detail));
        for hint in hints {
            let _ = writeln!(o, "hint: {}", safe(hint));
        }
    }
    for w in &t.warnings {
        let _ = writeln!(o, "warning: {}", safe(w));
    }
    if let Some(u) = &t.usage {
        let _ = writeln!(o, "\nusage: {}", usage_text(u));
        for line in crate::fmt::cache_cost_lines(u, &t.detail) {
            let _ = writeln!(o, "{line}");
        }
    }
}

/// A coordinator's plan and each worker's subtask with its output; a multi-agent turn's
/// activations and why each agent answered or not.
fn team(o: &mut String, t: &TurnView) {
    use std::fmt::Write as _;
    if !t.activation.is_empty() {
        let _ = writeln!(o, "\nactivation:");
        for a in &t.activation {
            let _ = writeln!(o, "  - {}: {}", a.agent, safe(&a.reason));
        }
    }
    if let Some(plan) = &t.plan {
        let _ = writeln!(o, "\nplan ({}):", plan.method);
        for s in &plan.subtasks {
            let worker = match &s.role {
                Some(role) => format!(
                    "{} \"{}\"",
                    s.worker,
                    crate::fmt::first_line(&safe(role), 60)
                ),
                None => s.worker.clone(),
            };
            let deps = if s.depends_on.is_empty() {
                String::new()
            } else {
                format!(" after {}", s.depends_on.join(", "))
            };
            let _ = writeln!(
                o,
                "  - {} [{worker}]{deps}: {}",
                s.id,
                crate::fmt::first_line(&safe(&s.task), 100)
            );
        }
        for r in &plan.rejected {
            let _ = writeln!(o, "  rejected proposal: {}", safe(r));
        }
    }
    for s in &t.subtasks {
        let usage = s
            .usage
            .as_ref()
            .map(|u| format!(", {}", usage_text(u)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "\nsubtask {} [{}] {}{usage}:",
            s.subtask,
            s.worker,
            s.state.as_str()
        );
        if let Some(e) = &s.error {
            let _ = writeln!(o, "  error: {}", safe(e));
        }
        if !s.output.is_empty() {
            let _ = writeln!(o, "{}", indent(&safe(&s.output)));
        }
    }
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
