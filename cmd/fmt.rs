//! Formatting shared by several commands.

use std::collections::HashMap;

use axocoatl::history::TurnView;
use axocoatl::workspace::Workspace;
use axocoatl_store::ledger::record::{Usage, UsageDetail};

use crate::ui::Ui;

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

/// What `show` says of a turn's prompt cache and cost beside its usage: a `cache:` line when
/// a cache wrote or read, a `cost:` line when a call cost something or had no price (a
/// free model's, and a turn from before costs were recorded, say nothing).
pub fn cache_cost_lines(u: &Usage, d: &UsageDetail) -> Vec<String> {
    let mut lines = Vec::new();
    if d.cache_write_tokens > 0 || d.cache_read_tokens > 0 {
        lines.push(format!(
            "cache: {} prompt tokens written to the provider's cache, {} read from it",
            d.cache_write_tokens, d.cache_read_tokens
        ));
    }
    if d.calls == 0 {
        return lines;
    }
    let cost = axocoatl::cost::usd(d.cost_nanos);
    // Calls without a cost: no price, or (for a priced model) no reported usage.
    let unpriced = d.priced_calls < u.calls.max(d.calls);
    if unpriced && d.priced_calls == 0 {
        lines.push(
            "cost: unknown (no price for the model, or no usage reported; a price goes under `prices:` in the configuration)"
                .to_string(),
        );
    } else if unpriced || (!u.complete && d.cost_nanos > 0) {
        lines.push(format!(
            "cost: at least {cost} (some calls had no price or no reported usage)"
        ));
    } else if d.cost_nanos > 0 {
        lines.push(format!("cost: {cost}"));
    }
    lines
}

/// The first line of `s`, cut to `max` characters with an ellipsis. Control characters
/// are escaped so a request cannot move the cursor.
pub fn first_line(s: &str, max: usize) -> String {
    // Read only as far as the cut (`lines()` looked for the end of a whole output first).
    let line = s.trim_start();
    // Printable ASCII up to the cut (most text): copied as it is.
    let head = &line.as_bytes()[..line.len().min(max.saturating_add(1))];
    if head.iter().all(|b| (b' '..=b'~').contains(b)) {
        return if line.len() <= max {
            line.to_owned()
        } else {
            format!("{}…", &line[..max])
        };
    }
    // A line ends at `\n` or `\r\n`, as `str::lines` ends it.
    let mut chars = line.chars().peekable();
    let until_eol = std::iter::from_fn(move || match chars.next()? {
        '\n' => None,
        '\r' if chars.peek() == Some(&'\n') => None,
        c => Some(c),
    });
    cut(until_eol, max)
}

/// The first `max` of `chars`, then an ellipsis if there are more; control characters
/// escaped.
fn cut(chars: impl Iterator<Item = char>, max: usize) -> String {
    let mut out = String::new();
    for (i, ch) in chars.enumerate() {
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
pub fn warn_problems<P: std::fmt::Display>(
    ui: &mut Ui,
    problems: &[P],
    unknown_kinds: u64,
) -> std::io::Result<()> {
    for problem in problems {
        ui.warn(&format!(
            "{problem}; what is shown lacks it (run `axocoatl fsck`)"
        ))?;
    }
    if unknown_kinds > 0 {
        ui.warn(&format!(
            "skipped {} ledger record{} of a kind this axocoatl does not know (written by a newer version?)",
            unknown_kinds,
            if unknown_kinds == 1 { "" } else { "s" }
        ))?;
    }
    Ok(())
}

/// The configured `name` of each agent, for people (empty when the configuration does not
/// load: names are never needed to list what the ledger holds).
#[derive(Debug, Default)]
pub struct AgentNames(HashMap<String, String>);

impl AgentNames {
    pub fn of(ws: &Workspace) -> AgentNames {
        let Ok(config) = ws.config() else {
            return AgentNames::default();
        };
        AgentNames(
            config
                .agents
                .iter()
                .filter_map(|a| Some((a.id.clone(), a.name.clone()?)))
                .collect(),
        )
    }

    pub fn get(&self, agent: &str) -> Option<&str> {
        self.0.get(agent).map(String::as_str)
    }

    /// `id (Name)` when the agent has a name, else `id`.
    pub fn label(&self, agent: &str) -> String {
        match self.get(agent) {
            Some(name) => format!("{agent} ({})", safe(name)),
            None => agent.to_owned(),
        }
    }
}

/// A recorded error and its hints: lines starting with `hint: ` (as provider errors end)
/// are hints; the rest is the error.
pub fn split_hints(error: &str) -> (String, Vec<&str>) {
    let mut detail = Vec::new();
    let mut hints = Vec::new();
    for line in error.lines() {
        match line.strip_prefix("hint: ") {
            Some(hint) => hints.push(hint),
            None => detail.push(line),
        }
    }
    (detail.join("\n"), hints)
}

/// The diff a `write_file` or `edit_file` result carries after its first line, if any.
pub fn tool_diff<'a>(tool: &str, output: &'a str) -> Option<&'a str> {
    if !matches!(tool, "write_file" | "edit_file") {
        return None;
    }
    let (_, rest) = output.split_once('\n')?;
    (rest.starts_with("--- ") || rest.starts_with("[no diff")).then_some(rest)
}

/// One line of a unified diff, coloured as `git diff` colours it when `paint` paints.
pub fn diff_line(line: &str, paint: impl Fn(&str, &str) -> String) -> String {
    let line = safe(line);
    let code = if line.starts_with("+++ ") || line.starts_with("--- ") {
        "1"
    } else if line.starts_with("@@") {
        "36"
    } else if line.starts_with('+') {
        "32"
    } else if line.starts_with('-') {
        "31"
    } else {
        return line;
    };
    paint(code, &line)
}

#[cfg(test)]
mod tests {
    use super::first_line;

    /// The first line as `str::lines` ends it, cut and escaped: what `first_line` gave
    /// before it stopped reading at the cut.
    fn by_lines(s: &str, max: usize) -> String {
        super::cut(s.trim_start().lines().next().unwrap_or("").chars(), max)
    }

    #[test]
    fn first_line_ends_where_lines_ends_it() {
        let pieces = [
            "a", "é", " ", "\n", "\r", "\r\n", "\t", "\u{1b}", "xy", "~", "\u{7f}",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let mut s = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for k in 0..(seed % 12) {
                s.push_str(pieces[((seed >> (k * 5)) % pieces.len() as u64) as usize]);
            }
            for max in [0, 1, 3, 5, 40] {
                assert_eq!(first_line(&s, max), by_lines(&s, max), "{s:?} {max}");
            }
        }
    }
}
