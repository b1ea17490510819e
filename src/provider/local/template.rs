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

use std::collections::BTreeMap;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

/// ChatML, for GGUF files that carry no template.
pub const CHATML: &str =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' \
     + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}\
     {% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

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
        let mut env = Environment::new();
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
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos.as_str(),
                eos_token => self.eos.as_str(),
                tools => Value::from(()),
            })
            .map_err(|e| format!("chat template failed to render: {e}"))
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
        return match method {
            "strip" => Ok(Value::from(s.trim_matches(trim))),
            "lstrip" => Ok(Value::from(s.trim_start_matches(trim))),
            "rstrip" => Ok(Value::from(s.trim_end_matches(trim))),
            "upper" => Ok(Value::from(s.to_uppercase())),
            "lower" => Ok(Value::from(s.to_lowercase())),
            "startswith" => Ok(Value::from(arg(0).is_some_and(|p| s.starts_with(p)))),
            "endswith" => Ok(Value::from(arg(0).is_some_and(|p| s.ends_with(p)))),
            "replace" => match (arg(0), arg(1)) {
                (Some(from), Some(to)) => Ok(Value::from(s.replace(from, to))),
                _ => Err(Error::from(ErrorKind::MissingArgument)),
            },
            "split" => Ok(match arg(0) {
                Some(sep) => s.split(sep).map(Value::from).collect(),
                None => s.split_whitespace().map(Value::from).collect(),
            }),
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
}
