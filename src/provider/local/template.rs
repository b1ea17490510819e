//! The model's own chat template (`tokenizer.chat_template`, Jinja), rendered with minijinja.
//!
//! Rendering follows Hugging Face's `apply_chat_template`: `trim_blocks` and `lstrip_blocks`,
//! `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and `raise_exception`, plus
//! the handful of Python string and dict methods that templates commonly call.
//!
//! Message contents are passed to the template as placeholders, and the rendered text is
//! returned as segments: the template's own text (which spells special tokens such as
//! `<|im_start|>`) and references to contents, so that the tokenizer can parse special tokens in
//! the former and never in the latter. Templates that transform a content (`| trim`) see the
//! placeholder, so the content goes in verbatim.
//!
//! A template comes from a model file, which anyone may have made: it is a program, and is
//! run as one that may be hostile. Its source is at most [`SOURCE_LIMIT`] bytes; each render
//! has [`FUEL`] (minijinja's budget for instructions and for the data a template creates, so
//! nested loops and a string doubled in a loop stop in milliseconds instead of running until
//! killed or allocating until the process aborts) and writes at most [`OUTPUT_LIMIT`] bytes.

use std::collections::BTreeMap;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// ChatML, for GGUF files that carry no template.
pub const CHATML: &str =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' \
     + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}\
     {% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The largest template source accepted. Real templates are a few KiB (SmolLM2's is 0.4
/// KiB, Llama 3.1's with tools 4 KiB); a larger one is refused when the model loads.
pub const SOURCE_LIMIT: usize = 1 << 20;

/// minijinja's fuel for one render: about one fuel per instruction and one per 64 bytes of
/// data created, so at most about a million steps or 61 MiB of strings and lists (a
/// render of SmolLM2's template costs about 30 fuel per message, so this covers tens of
/// thousands of messages; a hostile template runs out within tens of milliseconds).
pub const FUEL: u64 = 1_000_000;

/// The most bytes one render may write. Contents are rendered as short placeholders, so this
/// is the template's own text: 1 MiB of it is more tokens than the 4096 positions the local
/// provider runs with (a token of a byte-level BPE vocabulary is a few bytes on average).
pub const OUTPUT_LIMIT: usize = 1 << 20;

const PLACEHOLDER_OPEN: char = '\u{E000}';
const PLACEHOLDER_CLOSE: char = '\u{E001}';

/// A piece of rendered prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// Text written by the template itself; special tokens in it are meant.
    Template(String),
    /// The content of `messages[i]`, verbatim.
    Content(usize),
}

pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    pub fn new(source: &str, bos: Option<&str>, eos: Option<&str>) -> Result<ChatTemplate, String> {
        if source.len() > SOURCE_LIMIT {
            return Err(format!(
                "the chat template is {} bytes, more than the {} KiB a chat template may be \
                 (tokenizer.chat_template of the model file): use another model file",
                source.len(),
                SOURCE_LIMIT >> 10
            ));
        }
        let mut env = Environment::new();
        env.set_fuel(Some(FUEL));
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| format!("chat template: {e}"))?;
        env.set_syntax(syntax);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.set_unknown_method_callback(python_method);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| format!("chat template does not parse: {e}"))?;
        Ok(ChatTemplate {
            env,
            bos: bos.unwrap_or_default().to_string(),
            eos: eos.unwrap_or_default().to_string(),
        })
    }

    /// Renders `messages` (role, content) to segments, ending with the assistant's cue when
    /// `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[(&str, &str)],
        add_generation_prompt: bool,
    ) -> Result<Vec<Segment>, String> {
        let placeholders: Vec<(&str, String)> = messages
            .iter()
            .enumerate()
            .map(|(i, (role, content))| {
                // An empty content stays empty: templates test it (`if message.content`).
                let text = if content.is_empty() {
                    String::new()
                } else {
                    format!("{PLACEHOLDER_OPEN}{i}{PLACEHOLDER_CLOSE}")
                };
                (*role, text)
            })
            .collect();
        let rendered = self.render_raw(&placeholders, add_generation_prompt)?;
        Ok(split_placeholders(&rendered, messages.len()))
    }

    /// The prompt as one string, contents in place (for tests and diagnostics).
    pub fn render_text(
        &self,
        messages: &[(&str, &str)],
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let segments = self.render(messages, add_generation_prompt)?;
        Ok(segments
            .iter()
            .map(|s| match s {
                Segment::Template(t) => t.as_str(),
                Segment::Content(i) => messages.get(*i).map_or("", |m| m.1),
            })
            .collect())
    }

    fn render_raw(
        &self,
        messages: &[(&str, String)],
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|(role, content)| {
                let mut m = BTreeMap::new();
                m.insert("role".to_string(), Value::from(*role));
                m.insert("content".to_string(), Value::from(content.as_str()));
                Value::from(m)
            })
            .collect();
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| format!("chat template: {e}"))?;
        let mut out = BoundedOutput::default();
        let rendered = template.render_captured_to(
            minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos.as_str(),
                eos_token => self.eos.as_str(),
                tools => Value::from(()),
            },
            &mut out,
        );
        match rendered {
            Ok(_) => String::from_utf8(out.bytes)
                .map_err(|_| "chat template failed to render: its output is not UTF-8".into()),
            Err(_) if out.over => Err(format!(
                "the chat template wrote more than the {} KiB a prompt's template text may be \
                 (tokenizer.chat_template of the model file is broken or hostile): use \
                 another model file",
                OUTPUT_LIMIT >> 10
            )),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(format!(
                "the chat template did more work than a chat template may (a budget of {FUEL} \
                 steps or {} MiB of data; tokenizer.chat_template of the model file is \
                 broken or hostile): use another model file",
                (FUEL * 64) >> 20
            )),
            Err(e) => Err(format!("chat template failed to render: {e}")),
        }
    }
}

/// A render's output, refused past [`OUTPUT_LIMIT`].
#[derive(Default)]
struct BoundedOutput {
    bytes: Vec<u8>,
    over: bool,
}

impl std::io::Write for BoundedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > OUTPUT_LIMIT {
            self.over = true;
            return Err(std::io::Error::other(
                "the chat template's output is too long",
            ));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Cuts rendered text at the placeholders `\u{E000}<i>\u{E001}` with `i < n`.
fn split_placeholders(rendered: &str, n: usize) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = rendered;
    while let Some(start) = rest.find(PLACEHOLDER_OPEN) {
        let after = &rest[start + PLACEHOLDER_OPEN.len_utf8()..];
        let index = after.find(PLACEHOLDER_CLOSE).and_then(|end| {
            let i: usize = after[..end].parse().ok()?;
            (i < n).then_some((i, end))
        });
        match index {
            Some((i, end)) => {
                text.push_str(&rest[..start]);
                if !text.is_empty() {
                    out.push(Segment::Template(std::mem::take(&mut text)));
                }
                out.push(Segment::Content(i));
                rest = &after[end + PLACEHOLDER_CLOSE.len_utf8()..];
            }
            None => {
                text.push_str(&rest[..start + PLACEHOLDER_OPEN.len_utf8()]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        out.push(Segment::Template(text));
    }
    out
}

/// The Python `str` and `dict` methods chat templates call (`message.content.strip()`).
fn python_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let arg = |i: usize| args.get(i).and_then(|a| a.as_str());
    if let Some(s) = value.as_str() {
        let chars: Option<Vec<char>> = arg(0).map(|a| a.chars().collect());
        let trim = |c: char| {
            chars
                .as_ref()
                .map_or(c.is_whitespace(), |set| set.contains(&c))
        };
        // What a method creates is paid for before it is made (fuel counts 64 bytes as one):
        // a `replace` or `split` of a long string could otherwise allocate far more than the
        // render's budget before the engine charges for its result.
        let pay = |bytes: usize| state.consume_fuel(bytes as u64 / 64 + 1);
        return match method {
            "strip" => Ok(Value::from(s.trim_matches(trim))),
            "lstrip" => Ok(Value::from(s.trim_start_matches(trim))),
            "rstrip" => Ok(Value::from(s.trim_end_matches(trim))),
            "upper" | "lower" => {
                // Case mapping makes at most three bytes of one (`ß` → `SS`, `İ` → `i̇`).
                pay(s.len().saturating_mul(3))?;
                Ok(Value::from(if method == "upper" {
                    s.to_uppercase()
                } else {
                    s.to_lowercase()
                }))
            }
            "startswith" => Ok(Value::from(arg(0).is_some_and(|p| s.starts_with(p)))),
            "endswith" => Ok(Value::from(arg(0).is_some_and(|p| s.ends_with(p)))),
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => {
                    let found = if from.is_empty() {
                        s.chars().count() + 1
                    } else {
                        s.matches(from).count()
                    };
                    pay(s.len().saturating_add(found.saturating_mul(to.len())))?;
                    Ok(Value::from(s.replace(from, to)))
                }
                _ => Err(Error::from(ErrorKind::MissingArgument)),
            },
            "split" => {
                // Python refuses an empty separator.
                if arg(0) == Some("") {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "split: empty separator",
                    ));
                }
                let pieces = match arg(0) {
                    Some(sep) => s.matches(sep).count() + 1,
                    None => s.split_whitespace().count(),
                };
                // A value in a list takes 24 bytes, a string of its own more.
                pay(s.len().saturating_add(pieces.saturating_mul(64)))?;
                Ok(match arg(0) {
                    Some(sep) => s.split(sep).map(Value::from).collect(),
                    None => s.split_whitespace().map(Value::from).collect(),
                })
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        };
    }
    if value.kind() == ValueKind::Map {
        return match method {
            "items" => state.apply_filter("items", std::slice::from_ref(value)),
            "keys" => Ok(value.try_iter()?.collect()),
            "values" => Ok(value
                .try_iter()?
                .map(|k| value.get_item(&k).unwrap_or_default())
                .collect()),
            "get" => {
                let key = args.first().cloned().unwrap_or_default();
                let found = value.get_item(&key)?;
                Ok(if found.is_undefined() {
                    args.get(1).cloned().unwrap_or_default()
                } else {
                    found
                })
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        };
    }
    Err(Error::from(ErrorKind::UnknownMethod))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders_with_placeholders_split_out() -> Result<(), String> {
        let t = ChatTemplate::new(CHATML, None, None)?;
        let segments = t.render(&[("user", "hi <|im_end|>")], true)?;
        assert_eq!(
            segments,
            vec![
                Segment::Template("<|im_start|>user\n".into()),
                Segment::Content(0),
                Segment::Template("<|im_end|>\n<|im_start|>assistant\n".into()),
            ]
        );
        Ok(())
    }

    #[test]
    fn raise_exception_is_an_error() -> Result<(), String> {
        let t = ChatTemplate::new("{{ raise_exception('no system role') }}", None, None)?;
        let err = t.render(&[("system", "x")], true).err().unwrap_or_default();
        assert!(err.contains("no system role"), "{err}");
        Ok(())
    }

    #[test]
    fn python_methods_work() -> Result<(), String> {
        let t = ChatTemplate::new(
            "{{ messages[0]['role'].upper() }}|{{ ' x '.strip() }}|{{ messages[0].get('nope', 'd') }}",
            None,
            None,
        )?;
        assert_eq!(t.render_text(&[("user", "x")], false)?, "USER|x|d");
        Ok(())
    }

    /// Renders `source` for one message: the error it ends with.
    fn hostile(source: &str) -> String {
        let t = match ChatTemplate::new(source, None, None) {
            Ok(t) => t,
            Err(e) => return e,
        };
        match t.render(&[("user", "hi")], true) {
            Ok(segments) => panic!("{source} rendered: {} segments", segments.len()),
            Err(e) => e,
        }
    }

    #[test]
    fn hostile_templates_end_with_a_clear_error() {
        let work = "more work than a chat template may";
        for (source, says) in [
            // Ten billion iterations.
            (
                "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
                work,
            ),
            // A string doubled 40 times: a terabyte.
            (
                "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
                work,
            ),
            ("{{ 'x' * 100000000000 }}", work),
            // Methods of our own pay before they allocate.
            ("{% set s = 'x' * 1000000 %}{{ s.replace('', s) }}", work),
            ("{% set s = 'x' * 1000000 %}{{ s.upper().upper() ~ s.split('x')|length }}", ""),
            ("{{ 'ab'.split('') }}", "empty separator"),
            // Output past the bound, each piece cheap.
            (
                "{% for i in range(1000) %}{% for j in range(1000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}{% endfor %}",
                "KiB a prompt's template text may be",
            ),
            // Endless recursion: minijinja's depth limit, not the thread's stack.
            (
                "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                "recursion",
            ),
        ] {
            let err = hostile(source);
            assert!(err.contains(says), "{source}: {err}");
        }
        let huge = format!("{{# {} #}}", "x".repeat(SOURCE_LIMIT));
        assert!(hostile(&huge).contains("more than the 1024 KiB"));
    }

    /// SmolLM2-135M-Instruct's own template, as its GGUF file carries it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// The fuel a render of `messages` uses.
    fn fuel(t: &ChatTemplate, messages: &[(&str, String)]) -> u64 {
        let template = t.env.get_template("chat").expect("template");
        let messages: Vec<Value> = messages
            .iter()
            .map(|(role, content)| {
                let mut m = BTreeMap::new();
                m.insert("role".to_string(), Value::from(*role));
                m.insert("content".to_string(), Value::from(content.as_str()));
                Value::from(m)
            })
            .collect();
        let captured = template
            .render_captured_to(
                minijinja::context! { messages => messages, add_generation_prompt => true },
                std::io::sink(),
            )
            .expect("renders");
        captured.state().fuel_levels().expect("fuel is on").0
    }

    #[test]
    fn the_budget_covers_long_conversations() -> Result<(), String> {
        for source in [CHATML, SMOLLM2] {
            let t = ChatTemplate::new(source, None, None)?;
            let messages: Vec<(&str, &str)> = (0..10_000)
                .map(|i| (if i % 2 == 0 { "user" } else { "assistant" }, "x"))
                .collect();
            let segments = t.render(&messages, true)?;
            assert_eq!(
                segments
                    .iter()
                    .filter(|s| matches!(s, Segment::Content(_)))
                    .count(),
                10_000
            );
            // What the module documentation says a message costs: about 30 fuel (its
            // placeholder is a few bytes; the template's own work is the cost).
            let placeholder = |i: usize| format!("{PLACEHOLDER_OPEN}{i}{PLACEHOLDER_CLOSE}");
            let few: Vec<(&str, String)> = (0..10).map(|i| ("user", placeholder(i))).collect();
            let many: Vec<(&str, String)> = (0..110).map(|i| ("user", placeholder(i))).collect();
            let per_message = (fuel(&t, &many) - fuel(&t, &few)) / 100;
            assert!(
                (10..=40).contains(&per_message),
                "{per_message} fuel a message"
            );
        }
        Ok(())
    }
}
