//! The YAML document as a tree of nodes that remember their line and column, so every
//! diagnostic (structural or semantic) can point at the key or value to change.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, ScanError, TScalarStyle};

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub const START: Pos = Pos { line: 1, column: 1 };

    fn from_marker(marker: Marker) -> Pos {
        // yaml-rust2 counts lines from 1 and columns from 0.
        Pos {
            line: marker.line().max(1),
            column: marker.col() + 1,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Where the value starts; for a block mapping, its first key.
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Clone, Debug)]
pub(crate) struct Scalar {
    pub value: String,
    /// Plain (unquoted) scalars are resolved to null, booleans and numbers; the others are strings.
    pub plain: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

impl Node {
    pub fn is_null(&self) -> bool {
        match &self.kind {
            Kind::Scalar(s) => {
                s.plain && matches!(s.value.as_str(), "" | "~" | "null" | "Null" | "NULL")
            }
            _ => false,
        }
    }

    pub fn entry(&self, key: &str) -> Option<&Entry> {
        match &self.kind {
            Kind::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    pub fn get(&self, seg: &Seg) -> Option<&Node> {
        match (seg, &self.kind) {
            (Seg::Key(key), Kind::Map(_)) => self.entry(key).map(|e| &e.value),
            (Seg::Index(i), Kind::Seq(items)) => items.get(*i),
            _ => None,
        }
    }
}

/// One step of a path into the document: `agents`, `[2]`, `token_budget`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

impl From<&str> for Seg {
    fn from(key: &str) -> Seg {
        Seg::Key(key.to_string())
    }
}

impl From<&String> for Seg {
    fn from(key: &String) -> Seg {
        Seg::Key(key.clone())
    }
}

impl From<usize> for Seg {
    fn from(index: usize) -> Seg {
        Seg::Index(index)
    }
}

/// Positions of paths in a parsed document.
pub(crate) struct Locator<'a> {
    pub root: &'a Node,
}

impl Locator<'_> {
    /// The position of the value at `path`, or of the deepest part of it that exists
    /// (a missing key is reported where it belongs).
    pub fn value(&self, path: &[Seg]) -> Pos {
        let mut node = self.root;
        for seg in path {
            match node.get(seg) {
                Some(next) => node = next,
                None => break,
            }
        }
        node.pos
    }

    /// The position of the key at the end of `path` (for a list item, the item itself).
    pub fn key(&self, path: &[Seg]) -> Pos {
        let Some((last, parent)) = path.split_last() else {
            return self.root.pos;
        };
        let mut node = self.root;
        for seg in parent {
            match node.get(seg) {
                Some(next) => node = next,
                None => return node.pos,
            }
        }
        match last {
            Seg::Key(key) => node.entry(key).map_or(node.pos, |e| e.key_pos),
            Seg::Index(_) => node.get(last).map_or(node.pos, |n| n.pos),
        }
    }

    /// Whether the document spells out `path` (as opposed to relying on a default).
    pub fn has(&self, path: &[Seg]) -> bool {
        let mut node = self.root;
        for seg in path {
            match node.get(seg) {
                Some(next) => node = next,
                None => return false,
            }
        }
        true
    }
}

/// A problem found while reading the YAML itself.
#[derive(Clone, Debug)]
pub(crate) struct Problem {
    pub pos: Pos,
    pub message: String,
    pub hint: Option<String>,
}

/// The document's root (None when the stream holds no document), and the non-fatal problems
/// found while building it (duplicate keys, extra documents).
pub(crate) struct Parsed {
    pub root: Option<Node>,
    pub problems: Vec<Problem>,
}

/// Parses YAML text. A syntax error is fatal and comes back alone.
pub(crate) fn parse(text: &str) -> Result<Parsed, Problem> {
    let mut builder = Builder::new(text);
    let mut parser = Parser::new_from_str(text);
    if let Err(error) = parser.load(&mut builder, true) {
        return Err(syntax_problem(text, &error, builder.open_flow()));
    }
    if let Some(pos) = builder.extra_document {
        builder.problems.push(Problem {
            pos,
            message: "a second YAML document starts here; axocoatl.yaml holds exactly one".into(),
            hint: Some(
                "remove the `---` line and everything after it, or merge the two documents".into(),
            ),
        });
    }
    Ok(Parsed {
        root: builder.root,
        problems: builder.problems,
    })
}

/// The parser's message, at the position a person would fix: the unclosed bracket, the tab,
/// or the start of the badly indented line.
fn syntax_problem(text: &str, error: &ScanError, open_flow: Option<(Pos, char)>) -> Problem {
    let info = error.info();
    let mut pos = Pos::from_marker(*error.marker());
    if let Some((open, bracket)) = open_flow.filter(|_| !info.contains("quoted scalar")) {
        let close = if bracket == '[' { ']' } else { '}' };
        return Problem {
            pos: open,
            message: format!(
                "invalid YAML: this `{bracket}` is never closed (parsing stopped at line {}, column {}: {info})",
                pos.line, pos.column
            ),
            hint: Some(format!("close it with `{close}`, and separate its items with commas")),
        };
    }
    let hint = if info.contains("tab") {
        pos = first_tab(text, pos).unwrap_or(pos);
        "indent with spaces: YAML does not allow tab characters in indentation"
    } else if info.contains("quoted scalar") {
        "close the quote that starts here (a quoted value must end with the same quote character)"
    } else if info.contains("mapping values are not allowed") {
        "check this line's indentation against the line above; quote a value that itself contains `: `"
    } else if info.contains("did not find expected") {
        pos.column = first_non_blank(text, pos.line).unwrap_or(pos.column);
        "check the indentation: keys of one mapping, and `-` items of one list, must start in the same column"
    } else {
        "fix the YAML syntax at this position"
    };
    Problem {
        pos,
        message: format!("invalid YAML: {info}"),
        hint: Some(hint.into()),
    }
}

/// The first tab at or after `from`.
fn first_tab(text: &str, from: Pos) -> Option<Pos> {
    text.lines()
        .enumerate()
        .skip(from.line - 1)
        .find_map(|(i, line)| {
            let skip = if i + 1 == from.line {
                from.column - 1
            } else {
                0
            };
            let column = line.chars().skip(skip).position(|c| c == '\t')?;
            Some(Pos {
                line: i + 1,
                column: skip + column + 1,
            })
        })
}

fn first_non_blank(text: &str, line: usize) -> Option<usize> {
    let line = text.lines().nth(line.checked_sub(1)?)?;
    line.chars().position(|c| c != ' ').map(|i| i + 1)
}

enum Frame {
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
        flow: Option<char>,
    },
    Map {
        pos: Pos,
        anchor: usize,
        entries: Vec<Entry>,
        key: Option<(String, Pos)>,
        flow: Option<char>,
    },
}

struct Builder<'t> {
    text: &'t str,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    documents: usize,
    extra_document: Option<Pos>,
    problems: Vec<Problem>,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Builder<'t> {
        Builder {
            text,
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            documents: 0,
            extra_document: None,
            problems: Vec::new(),
        }
    }

    /// `[` or `{` when a collection starts with one at `marker` (a flow collection).
    fn flow_bracket(&self, marker: &Marker) -> Option<char> {
        let line = self.text.lines().nth(marker.line().checked_sub(1)?)?;
        line.chars()
            .nth(marker.col())
            .filter(|c| matches!(c, '[' | '{'))
    }

    /// The innermost flow collection still open, when parsing fails.
    fn open_flow(&self) -> Option<(Pos, char)> {
        self.stack.iter().rev().find_map(|frame| match frame {
            Frame::Seq { pos, flow, .. } | Frame::Map { pos, flow, .. } => flow.map(|c| (*pos, c)),
        })
    }

    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => {
                    let name = match node.kind {
                        Kind::Scalar(s) => s.value,
                        _ => {
                            self.problems.push(Problem {
                                pos: node.pos,
                                message: "a key must be a plain name, not a list or mapping".into(),
                                hint: Some("write `name: value`".into()),
                            });
                            String::from("?")
                        }
                    };
                    *key = Some((name, node.pos));
                }
                Some((name, key_pos)) => {
                    if let Some(first) = entries.iter().find(|e| e.key == name) {
                        self.problems.push(Problem {
                            pos: key_pos,
                            message: format!(
                                "duplicate key `{name}` (first defined on line {})",
                                first.key_pos.line
                            ),
                            hint: Some(
                                "keep one of them: a key may appear only once in a mapping".into(),
                            ),
                        });
                    } else {
                        entries.push(Entry {
                            key: name,
                            key_pos,
                            value: node,
                        });
                    }
                }
            },
        }
    }
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, event: Event, marker: Marker) {
        let pos = Pos::from_marker(marker);
        match event {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents == 2 {
                    self.extra_document = Some(pos);
                }
            }
            Event::Scalar(value, style, anchor, _tag) => {
                let node = Node {
                    pos,
                    kind: Kind::Scalar(Scalar {
                        value,
                        plain: style == TScalarStyle::Plain,
                    }),
                };
                self.finish(node, anchor);
            }
            Event::SequenceStart(anchor, _) => {
                let flow = self.flow_bracket(&marker);
                self.stack.push(Frame::Seq {
                    pos,
                    anchor,
                    items: Vec::new(),
                    flow,
                });
            }
            Event::MappingStart(anchor, _) => {
                let flow = self.flow_bracket(&marker);
                self.stack.push(Frame::Map {
                    pos,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                    flow,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        pos, anchor, items, ..
                    }) => (
                        Node {
                            pos,
                            kind: Kind::Seq(items),
                        },
                        anchor,
                    ),
                    Some(Frame::Map {
                        pos,
                        anchor,
                        entries,
                        ..
                    }) => {
                        // A block mapping's start marker is unreliable; its first key is where it is.
                        let pos = entries.first().map_or(pos, |e| e.key_pos);
                        (
                            Node {
                                pos,
                                kind: Kind::Map(entries),
                            },
                            anchor,
                        )
                    }
                    None => return,
                };
                self.finish(node, anchor);
            }
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(node) => {
                    let node = node.clone();
                    self.finish(node, 0);
                }
                None => {
                    self.problems.push(Problem {
                        pos,
                        message: "this alias refers to an anchor that is not defined before it"
                            .into(),
                        hint: Some("define `&name` before using `*name`".into()),
                    });
                    // Keep keys and values paired.
                    let null = Scalar {
                        value: String::new(),
                        plain: true,
                    };
                    self.finish(
                        Node {
                            pos,
                            kind: Kind::Scalar(null),
                        },
                        0,
                    );
                }
            },
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}
