//! The YAML document as a tree of nodes that remember their line and column, so every
//! diagnostic (structural or semantic) can point at the key or value to change.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
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
    /// For a list section some of whose items did not deserialize (`agents`), the index in
    /// the document of each item the typed configuration kept, in order: the checks index
    /// the typed list, and their positions must be those of the same items.
    pub kept: HashMap<String, Vec<usize>>,
}

impl Locator<'_> {
    /// `path` with the index into a typed list that dropped items turned into the index of
    /// the same item in the document.
    fn in_document<'p>(&self, path: &'p [Seg]) -> std::borrow::Cow<'p, [Seg]> {
        if let [Seg::Key(section), Seg::Index(i), rest @ ..] = path {
            if let Some(&at) = self.kept.get(section).and_then(|kept| kept.get(*i)) {
                let mut mapped = vec![Seg::Key(section.clone()), Seg::Index(at)];
                mapped.extend_from_slice(rest);
                return std::borrow::Cow::Owned(mapped);
            }
        }
        std::borrow::Cow::Borrowed(path)
    }

    /// The position of the value at `path`, or of the deepest part of it that exists
    /// (a missing key is reported where it belongs).
    pub fn value(&self, path: &[Seg]) -> Pos {
        let path = self.in_document(path);
        let mut node = self.root;
        for seg in path.iter() {
            match node.get(seg) {
                Some(next) => node = next,
                None => break,
            }
        }
        node.pos
    }

    /// The position of the key at the end of `path` (for a list item, the item itself).
    pub fn key(&self, path: &[Seg]) -> Pos {
        let path = self.in_document(path);
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
        let path = self.in_document(path);
        let mut node = self.root;
        for seg in path.iter() {
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

/// How deeply collections may nest. The schema needs six levels; the limit keeps every
/// walk over the tree (building, deserializing, dropping) far from the stack's end.
pub(crate) const MAX_DEPTH: usize = 64;

/// How much memory (roughly, in bytes) aliases may add by repeating anchored values. A real
/// configuration repeats a few small values; an "alias bomb" (each level repeating the one
/// before it several times) would need gigabytes and is refused at the alias that crosses
/// this.
pub(crate) const ALIAS_EXPANSION_LIMIT: usize = 16 * 1024 * 1024;

/// How many values (scalars, lists, mappings) a document may hold, aliases included: a
/// configuration has hundreds; the limit bounds the memory of a large flat file.
pub(crate) const MAX_NODES: usize = 1_000_000;

/// What one node costs in the alias budget besides its text.
const NODE_COST: usize = std::mem::size_of::<Node>();

/// Parses YAML text. A syntax error, or input past a limit, is fatal and comes back alone.
/// `file` names the file in the problem a second document makes (`axocoatl.yaml`).
pub(crate) fn parse(text: &str, file: &str) -> Result<Parsed, Problem> {
    let mut builder = Builder::new(text);
    // Event by event rather than `Parser::load`, which recurses once per nesting level:
    // this loop is flat, and it can stop at the first limit crossed.
    let mut parser = Parser::new_from_str(text);
    loop {
        match parser.next_token() {
            Ok((Event::StreamEnd, _)) => break,
            Ok((event, marker)) => builder.on_event(event, marker),
            Err(error) => return Err(syntax_problem(text, &error, builder.open_flow())),
        }
        if let Some(fatal) = builder.fatal.take() {
            return Err(fatal);
        }
    }
    if let Some(pos) = builder.extra_document {
        builder.problems.push(Problem {
            pos,
            message: format!("a second YAML document starts here; {file} holds exactly one"),
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
        /// The budget spent when the collection started, to price an alias to it.
        cost_at_start: usize,
        items: Vec<Node>,
        flow: Option<char>,
    },
    Map {
        pos: Pos,
        anchor: usize,
        cost_at_start: usize,
        entries: Vec<Entry>,
        /// Each key's first line, so a duplicate is found without a scan of the entries.
        seen: HashMap<String, usize>,
        key: Option<(String, Pos)>,
        flow: Option<char>,
    },
}

/// Character offsets to byte offsets, in O(1) per lookup after one pass over the text: a
/// marker counts characters, and a lookup from the start for every collection would make
/// a large flat file quadratic.
struct CharIndex {
    /// The byte offset of every `STRIDE`-th character.
    every: Vec<usize>,
}

impl CharIndex {
    const STRIDE: usize = 256;

    fn new(text: &str) -> CharIndex {
        let every = text
            .char_indices()
            .step_by(Self::STRIDE)
            .map(|(byte, _)| byte)
            .collect();
        CharIndex { every }
    }

    /// The character at character offset `index`.
    fn char_at(&self, text: &str, index: usize) -> Option<char> {
        let from = *self.every.get(index / Self::STRIDE)?;
        text.get(from..)?.chars().nth(index % Self::STRIDE)
    }
}

struct Builder<'t> {
    text: &'t str,
    chars: CharIndex,
    stack: Vec<Frame>,
    /// Each anchored node and what it cost to build.
    anchors: HashMap<usize, (Node, usize)>,
    /// Roughly the memory spent on nodes so far, and how much of it aliases added.
    cost: usize,
    nodes: usize,
    alias_cost: usize,
    root: Option<Node>,
    documents: usize,
    extra_document: Option<Pos>,
    problems: Vec<Problem>,
    /// A limit crossed: parsing stops with this.
    fatal: Option<Problem>,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Builder<'t> {
        Builder {
            text,
            chars: CharIndex::new(text),
            stack: Vec::new(),
            anchors: HashMap::new(),
            cost: 0,
            nodes: 0,
            alias_cost: 0,
            root: None,
            documents: 0,
            extra_document: None,
            problems: Vec::new(),
            fatal: None,
        }
    }

    /// `[` or `{` when a collection starts with one at `marker` (a flow collection).
    fn flow_bracket(&self, marker: &Marker) -> Option<char> {
        self.chars
            .char_at(self.text, marker.index())
            .filter(|c| matches!(c, '[' | '{'))
    }

    /// Counts a value against [`MAX_NODES`]; false (and fatal) past it.
    fn count(&mut self, pos: Pos) -> bool {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.fatal = Some(Problem {
                pos,
                message: format!("more than {MAX_NODES} values by here: refused"),
                hint: Some(
                    "check the path: this is not a configuration of a reasonable size".into(),
                ),
            });
            return false;
        }
        true
    }

    /// Opens a collection, unless that would nest deeper than [`MAX_DEPTH`].
    fn open(&mut self, frame: Frame, pos: Pos) {
        if !self.count(pos) {
            return;
        }
        if self.stack.len() >= MAX_DEPTH {
            self.fatal = Some(Problem {
                pos,
                message: format!("lists and mappings nest more than {MAX_DEPTH} levels deep here"),
                hint: Some(
                    "a configuration needs a few levels: check the indentation, or the brackets, around here"
                        .into(),
                ),
            });
            return;
        }
        self.cost += NODE_COST;
        self.stack.push(frame);
    }

    /// Repeats the node anchored as `id`, unless that would take the aliases past
    /// [`ALIAS_EXPANSION_LIMIT`] (checked before anything is copied).
    fn alias(&mut self, id: usize, pos: Pos) {
        if !self.count(pos) {
            return;
        }
        let Some(cost) = self.anchors.get(&id).map(|(_, cost)| *cost) else {
            self.problems.push(Problem {
                pos,
                message: "this alias refers to an anchor that is not defined before it".into(),
                hint: Some("define `&name` before using `*name`".into()),
            });
            // Keep keys and values paired.
            let null = Scalar {
                value: String::new(),
                plain: true,
            };
            self.finish(Node {
                pos,
                kind: Kind::Scalar(null),
            });
            return;
        };
        if !self.spend_on_aliases(cost, pos) {
            return;
        }
        let Some(node) = self.anchors.get(&id).map(|(node, _)| node.clone()) else {
            return;
        };
        self.cost += cost;
        self.finish(node);
    }

    /// The innermost flow collection still open, when parsing fails.
    fn open_flow(&self) -> Option<(Pos, char)> {
        self.stack.iter().rev().find_map(|frame| match frame {
            Frame::Seq { pos, flow, .. } | Frame::Map { pos, flow, .. } => flow.map(|c| (*pos, c)),
        })
    }

    /// Adds a built node to its parent and, when it carries an anchor, keeps a copy for the
    /// aliases to come; `cost` is what building it spent. The copy counts against the alias
    /// budget too: anchors nested around a large value would copy it once per level.
    fn finish_anchored(&mut self, node: Node, anchor: usize, cost: usize, pos: Pos) {
        if anchor != 0 {
            if !self.spend_on_aliases(cost, pos) {
                return;
            }
            self.anchors.insert(anchor, (node.clone(), cost));
        }
        self.finish(node);
    }

    /// Counts `cost` of copying against [`ALIAS_EXPANSION_LIMIT`]; false (and fatal) past it.
    fn spend_on_aliases(&mut self, cost: usize, pos: Pos) -> bool {
        if self.alias_cost.saturating_add(cost) > ALIAS_EXPANSION_LIMIT {
            self.fatal = Some(Problem {
                pos,
                message: format!(
                    "anchors and aliases (`&name`, `*name`) copy more than {} MiB of values by here: refused (an alias bomb?)",
                    ALIAS_EXPANSION_LIMIT >> 20
                ),
                hint: Some(
                    "write the repeated values out, or use fewer aliases of large anchored values"
                        .into(),
                ),
            });
            return false;
        }
        self.alias_cost += cost;
        true
    }

    fn finish(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, key, seen, ..
            }) => match key.take() {
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
                    if let Some(first_line) = seen.get(&name) {
                        self.problems.push(Problem {
                            pos: key_pos,
                            message: format!(
                                "duplicate key `{}` (first defined on line {first_line})",
                                shorten(&name)
                            ),
                            hint: Some(
                                "keep one of them: a key may appear only once in a mapping".into(),
                            ),
                        });
                    } else {
                        seen.insert(name.clone(), key_pos.line);
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

impl Builder<'_> {
    fn on_event(&mut self, event: Event, marker: Marker) {
        let pos = Pos::from_marker(marker);
        match event {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents == 2 {
                    self.extra_document = Some(pos);
                }
                // Anchors are per document.
                self.anchors.clear();
            }
            Event::Scalar(value, style, anchor, _tag) => {
                if !self.count(pos) {
                    return;
                }
                let cost = NODE_COST + value.len();
                self.cost += cost;
                let node = Node {
                    pos,
                    kind: Kind::Scalar(Scalar {
                        value,
                        plain: style == TScalarStyle::Plain,
                    }),
                };
                self.finish_anchored(node, anchor, cost, pos);
            }
            Event::SequenceStart(anchor, _) => {
                let flow = self.flow_bracket(&marker);
                let frame = Frame::Seq {
                    pos,
                    anchor,
                    cost_at_start: self.cost,
                    items: Vec::new(),
                    flow,
                };
                self.open(frame, pos);
            }
            Event::MappingStart(anchor, _) => {
                let flow = self.flow_bracket(&marker);
                let frame = Frame::Map {
                    pos,
                    anchor,
                    cost_at_start: self.cost,
                    entries: Vec::new(),
                    seen: HashMap::new(),
                    key: None,
                    flow,
                };
                self.open(frame, pos);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor, cost_at_start) = match self.stack.pop() {
                    Some(Frame::Seq {
                        pos,
                        anchor,
                        cost_at_start,
                        items,
                        ..
                    }) => (
                        Node {
                            pos,
                            kind: Kind::Seq(items),
                        },
                        anchor,
                        cost_at_start,
                    ),
                    Some(Frame::Map {
                        pos,
                        anchor,
                        cost_at_start,
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
                            cost_at_start,
                        )
                    }
                    None => return,
                };
                // The frame itself was counted when it opened.
                let cost = self.cost - cost_at_start;
                let pos = node.pos;
                self.finish_anchored(node, anchor, cost, pos);
            }
            Event::Alias(id) => self.alias(id, pos),
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}

/// A key or value as quoted in a message: long ones are cut (a message is read by a person).
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
