//! The byte-level recognizer of a [`Grammar`]: where a JSON document is after the bytes fed
//! so far, and which byte may come next.
//!
//! A position is a small `Copy` [`State`]: up to [`MAX_ALTS`] cursors (an `anyOf` is followed
//! down each branch until the bytes tell them apart), each a lexical position plus the index
//! of its innermost open container in an [`Arena`] of frames. Frames are never changed in
//! place: a container that moves on (a key seen, an item added) is a new frame, so a mask
//! can try every token from the same position and throw away what it appended.

use super::grammar::{
    object_min, Grammar, Node, NodeId, Typed, ANY, BOOLS, INFINITE, NULL, T_ALL, T_ARR, T_BOOL,
    T_INT, T_NULL, T_NUM, T_OBJ, T_STR,
};
use super::numbers::{self, NumRule, NUM_MAX};

mod cost;
use cost::*;

/// Cursors followed at once (branches of `anyOf` not yet told apart).
pub const MAX_ALTS: usize = 8;
/// Nesting of containers.
const MAX_DEPTH: u8 = 64;
/// Whitespace in a row between tokens of the document.
const MAX_WHITESPACE: u8 = 12;
/// The longest key.
const MAX_KEY: u16 = 256;

/// The frame under every top-level value.
const ROOT: u32 = 0;

/// An open object or array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frame {
    parent: u32,
    /// The container's node: a typed node, or [`ANY`].
    node: NodeId,
    array: bool,
    depth: u8,
    /// Object: bit `i` set when the declared property `i` has been written.
    seen: u64,
    /// Array: items started; object: undeclared keys written.
    count: u32,
    /// Object: the newest undeclared key's entry in [`Arena::keys`] (0: none).
    extras: u32,
}

/// Frames and undeclared keys' hashes, appended as the document goes.
#[derive(Clone, Debug)]
pub struct Arena {
    frames: Vec<Frame>,
    /// (hash of an undeclared key, the entry before it).
    keys: Vec<(u64, u32)>,
}

impl Default for Arena {
    fn default() -> Arena {
        let root = Frame {
            parent: ROOT,
            node: ANY,
            array: false,
            depth: 0,
            seen: 0,
            count: 0,
            extras: 0,
        };
        Arena {
            frames: vec![root],
            keys: vec![(0, 0)],
        }
    }
}

impl Arena {
    /// How far it has grown (to roll back to).
    pub fn mark(&self) -> (usize, usize) {
        (self.frames.len(), self.keys.len())
    }

    pub fn roll_back(&mut self, mark: (usize, usize)) {
        self.frames.truncate(mark.0);
        self.keys.truncate(mark.1);
    }

    fn frame(&self, i: u32) -> &Frame {
        &self.frames[i as usize]
    }

    fn push(&mut self, f: Frame) -> u32 {
        self.frames.push(f);
        (self.frames.len() - 1) as u32
    }
}

/// Inside a string: plain text, after a backslash, in `\uXXXX`, or inside a multi-byte
/// character (`left` continuation bytes to come, the next in `lo..=hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    Plain,
    Escape,
    Hex { read: u8, d: bool },
    Utf8 { left: u8, lo: u8, hi: u8 },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lex {
    /// A value of the node starts here.
    Value(NodeId),
    Str {
        node: NodeId,
        chars: u32,
        sub: Sub,
    },
    /// A key of the open object: the declared keys `lo..hi` still match the `pos` bytes so
    /// far; `free`: an undeclared key is still possible (`hash` of its bytes).
    Key {
        lo: u8,
        hi: u8,
        pos: u16,
        free: bool,
        hash: u64,
        sub: Sub,
    },
    Num {
        node: NodeId,
        len: u8,
        buf: [u8; NUM_MAX],
    },
    /// The literals `lo..hi` of a literals node match the `pos` bytes so far.
    Lit {
        node: NodeId,
        lo: u16,
        hi: u16,
        pos: u16,
    },
    /// After `{`: a key or `}`.
    ObjStart,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a key: `:`, then a value of the node.
    Colon(NodeId),
    /// After `[`: an item or `]`.
    ArrStart,
    /// After a value inside a container: `,` or its closing bracket.
    After,
    /// The top-level value is complete.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cursor {
    frame: u32,
    lex: Lex,
    ws: u8,
}

/// Where the document is: the cursors still alive.
#[derive(Clone, Copy, Debug)]
pub struct State {
    n: u8,
    alts: [Cursor; MAX_ALTS],
}

impl State {
    pub fn new(g: &Grammar) -> State {
        let start = Cursor {
            frame: ROOT,
            lex: Lex::Value(g.root),
            ws: 0,
        };
        State {
            n: 1,
            alts: [start; MAX_ALTS],
        }
    }

    pub fn cursors(&self) -> &[Cursor] {
        &self.alts[..usize::from(self.n)]
    }

    /// `b` fed; `None` when no cursor takes it.
    pub fn step(&self, b: u8, g: &Grammar, arena: &mut Arena) -> Option<State> {
        let mut next = State {
            n: 0,
            alts: self.alts,
        };
        for c in self.cursors() {
            step(*c, b, g, arena, &mut |c| next.add(c));
        }
        (next.n > 0).then_some(next)
    }

    /// `bytes` fed in turn.
    pub fn feed(&self, bytes: &[u8], g: &Grammar, arena: &mut Arena) -> Option<State> {
        let mut s = *self;
        for &b in bytes {
            s = s.step(b, g, arena)?;
        }
        Some(s)
    }

    fn add(&mut self, c: Cursor) {
        // Past the cap, further branches are dropped: what is left still only generates
        // valid values.
        if usize::from(self.n) < MAX_ALTS && !self.cursors().contains(&c) {
            self.alts[usize::from(self.n)] = c;
            self.n += 1;
        }
    }

    /// The top-level value is complete and nothing may follow.
    pub fn is_done(&self) -> bool {
        self.cursors().iter().any(|c| c.lex == Lex::Done)
    }

    /// The document may end here (a top-level number needs no closing byte).
    pub fn can_end(&self, g: &Grammar) -> bool {
        self.cursors().iter().any(|c| match c.lex {
            Lex::Done => true,
            Lex::Num { node, len, buf } if c.frame == ROOT => {
                numbers::complete(&buf[..usize::from(len)], &num_rule(g, node))
            }
            Lex::Lit { node, lo, hi, pos } if c.frame == ROOT => literals(g, node)
                [usize::from(lo)..usize::from(hi)]
                .iter()
                .any(|l| l.len() == usize::from(pos)),
            _ => false,
        })
    }

    /// Whether every cursor is in plain string text at a character boundary: then a token of
    /// plain text of `k` characters is taken iff [`State::plain_room`] is at least `k`.
    pub fn in_plain_text(&self) -> bool {
        self.cursors().iter().all(|c| match c.lex {
            Lex::Str { sub, .. } => sub == Sub::Plain,
            Lex::Key { free, sub, .. } => free && sub == Sub::Plain,
            _ => false,
        })
    }

    /// In plain text: the most characters a cursor may still take.
    pub fn plain_room(&self, g: &Grammar) -> u32 {
        self.cursors()
            .iter()
            .map(|c| match c.lex {
                Lex::Str { node, chars, .. } => str_rule(g, node)
                    .1
                    .map_or(u32::MAX, |max| max.saturating_sub(chars)),
                Lex::Key { pos, .. } => u32::from(MAX_KEY.saturating_sub(pos)),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// The fewest bytes that finish the document from here (the closest cursor's).
    pub fn min_close(&self, g: &Grammar, arena: &Arena) -> u32 {
        self.cursors()
            .iter()
            .map(|c| cursor_close(c, g, arena))
            .min()
            .unwrap_or(INFINITE)
    }

    /// In plain text: a bound on [`State::min_close`] after any plain-text token. A string's
    /// never rises; a key's may, as its bytes leave candidates behind, up to its dearest.
    pub fn plain_bound(&self, g: &Grammar, arena: &Arena) -> u32 {
        self.cursors()
            .iter()
            .map(|c| cursor_cost(c, g, arena, true))
            .max()
            .unwrap_or(INFINITE)
    }

    /// Whether every cursor is in a string value (not a key).
    pub fn in_string_value(&self) -> bool {
        self.cursors()
            .iter()
            .all(|c| matches!(c.lex, Lex::Str { .. }))
    }

    /// In plain text: [`State::min_close`] after `k` more characters of it.
    pub fn min_close_after_plain(&self, k: u32, g: &Grammar, arena: &Arena) -> u32 {
        self.cursors()
            .iter()
            .map(|c| match c.lex {
                Lex::Str { node, chars, sub } => cursor_close(
                    &Cursor {
                        lex: Lex::Str {
                            node,
                            chars: chars.saturating_add(k),
                            sub,
                        },
                        ..*c
                    },
                    g,
                    arena,
                ),
                _ => cursor_close(c, g, arena),
            })
            .min()
            .unwrap_or(INFINITE)
    }
}

fn typed(g: &Grammar, node: NodeId) -> Option<&Typed> {
    match g.node(node) {
        Node::Typed(t) => Some(t),
        _ => None,
    }
}

fn literals(g: &Grammar, node: NodeId) -> &[Vec<u8>] {
    match g.node(node) {
        Node::Literals(l) => l,
        _ => &[],
    }
}

fn num_rule(g: &Grammar, node: NodeId) -> NumRule {
    typed(g, node).map_or(NumRule::default(), |t| t.num)
}

/// (minLength, maxLength) of a string node.
fn str_rule(g: &Grammar, node: NodeId) -> (u32, Option<u32>) {
    typed(g, node).map_or((0, None), |t| (t.min_len, t.max_len))
}

fn types(g: &Grammar, node: NodeId) -> u8 {
    match g.node(node) {
        Node::Typed(t) => t.types,
        _ => T_ALL,
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

/// Feeds `b` to `c`, handing each cursor it becomes to `out` (none: refused; several: an
/// `anyOf` entered).
fn step(c: Cursor, b: u8, g: &Grammar, arena: &mut Arena, out: &mut dyn FnMut(Cursor)) {
    let between = matches!(
        c.lex,
        Lex::Value(_) | Lex::ObjStart | Lex::ObjKey | Lex::Colon(_) | Lex::ArrStart | Lex::After
    );
    if between && is_ws(b) {
        if c.ws < MAX_WHITESPACE {
            out(Cursor { ws: c.ws + 1, ..c });
        }
        return;
    }
    let c = Cursor { ws: 0, ..c };
    match c.lex {
        Lex::Value(node) => start_value(c, node, b, g, arena, out),
        Lex::Str { node, chars, sub } => string_value_byte(c, (node, chars, sub), b, g, out),
        Lex::Key { .. } => key_byte(c, b, g, arena, out),
        Lex::Num { node, len, buf } => number_byte(c, (node, len, buf), b, g, arena, out),
        Lex::Lit { node, lo, hi, pos } => literal_byte(c, (node, lo, hi, pos), b, g, arena, out),
        Lex::ObjStart | Lex::ObjKey => {
            let f = *arena.frame(c.frame);
            if b == b'}' && c.lex == Lex::ObjStart && required_met(g, &f) {
                out(close(c, arena));
            } else if b == b'"' {
                if let Some(key) = key_start(g, &f) {
                    out(Cursor { lex: key, ..c });
                }
            }
        }
        Lex::Colon(node) => {
            if b == b':' {
                out(Cursor {
                    lex: Lex::Value(node),
                    ..c
                });
            }
        }
        Lex::ArrStart => {
            let f = *arena.frame(c.frame);
            let (min, _) = items_rule(g, &f);
            if b == b']' {
                // Only right after `[`: after `,` an item must come.
                if min == 0 && f.count == 0 {
                    out(close(c, arena));
                }
                return;
            }
            next_item(f, b, g, arena, out);
        }
        Lex::After => after_value_byte(c, b, g, arena, out),
        Lex::Done => {}
    }
}

/// Inside a string value: its closing quote (once `minLength` is reached) or one more byte
/// of it (a character starting only while `maxLength` leaves room).
fn string_value_byte(
    c: Cursor,
    (node, chars, sub): (NodeId, u32, Sub),
    b: u8,
    g: &Grammar,
    out: &mut dyn FnMut(Cursor),
) {
    let (min, max) = str_rule(g, node);
    if sub == Sub::Plain && b == b'"' {
        if chars >= min {
            out(value_done(c));
        }
        return;
    }
    let starts = sub == Sub::Plain;
    if starts && max.is_some_and(|m| chars >= m) {
        return;
    }
    if let Some(sub) = string_byte(sub, b) {
        let chars = chars + u32::from(starts);
        out(Cursor {
            lex: Lex::Str { node, chars, sub },
            ..c
        });
    }
}

/// Inside a number: one more byte of it while some number in range still starts so, else
/// the number ends (when it is one in range) and `b` goes to what follows.
fn number_byte(
    c: Cursor,
    (node, len, buf): (NodeId, u8, [u8; NUM_MAX]),
    b: u8,
    g: &Grammar,
    arena: &mut Arena,
    out: &mut dyn FnMut(Cursor),
) {
    let rule = num_rule(g, node);
    let len = usize::from(len);
    if len < NUM_MAX {
        let mut next = buf;
        next[len] = b;
        if numbers::viable(&next[..=len], &rule) {
            out(Cursor {
                lex: Lex::Num {
                    node,
                    len: (len + 1) as u8,
                    buf: next,
                },
                ..c
            });
            return;
        }
    }
    if numbers::complete(&buf[..len], &rule) {
        let done = value_done(c);
        step(done, b, g, arena, out);
    }
}

/// Inside a literal: the literals that go on with `b`, else (one having ended) what
/// follows it.
fn literal_byte(
    c: Cursor,
    (node, lo, hi, pos): (NodeId, u16, u16, u16),
    b: u8,
    g: &Grammar,
    arena: &mut Arena,
    out: &mut dyn FnMut(Cursor),
) {
    let lits = literals(g, node);
    let (lo, hi, p) = (usize::from(lo), usize::from(hi), usize::from(pos));
    let range = &lits[lo..hi];
    let first = range.iter().position(|l| l.get(p) == Some(&b));
    if let Some(first) = first {
        let end = range
            .iter()
            .rposition(|l| l.get(p) == Some(&b))
            .unwrap_or(first)
            + 1;
        out(Cursor {
            lex: Lex::Lit {
                node,
                lo: (lo + first) as u16,
                hi: (lo + end) as u16,
                pos: pos + 1,
            },
            ..c
        });
    } else if range.iter().any(|l| l.len() == p) {
        let done = value_done(c);
        step(done, b, g, arena, out);
    }
}

/// After a value in a container: `,` when another entry or item may come, or the closing
/// bracket when the container is complete.
fn after_value_byte(c: Cursor, b: u8, g: &Grammar, arena: &mut Arena, out: &mut dyn FnMut(Cursor)) {
    let f = *arena.frame(c.frame);
    match (f.array, b) {
        (true, b']') if f.count >= items_rule(g, &f).0 => out(close(c, arena)),
        (true, b',') if items_rule(g, &f).1.is_none_or(|m| f.count < m) => out(Cursor {
            lex: Lex::ArrStart,
            ..c
        }),
        (false, b'}') if required_met(g, &f) => out(close(c, arena)),
        (false, b',') if key_start(g, &f).is_some() => out(Cursor {
            lex: Lex::ObjKey,
            ..c
        }),
        _ => {}
    }
}

/// An array's next item starts with `b` (after `[` or `,`: `ArrStart` serves both, a `,`
/// having checked `maxItems`).
fn next_item(f: Frame, b: u8, g: &Grammar, arena: &mut Arena, out: &mut dyn FnMut(Cursor)) {
    let (_, max) = items_rule(g, &f);
    if max.is_some_and(|m| f.count >= m) {
        return;
    }
    let frame = arena.push(Frame {
        count: f.count + 1,
        ..f
    });
    let item = match typed(g, f.node) {
        Some(t) => t.items,
        None => ANY,
    };
    start_value(
        Cursor {
            frame,
            lex: Lex::Value(item),
            ws: 0,
        },
        item,
        b,
        g,
        arena,
        out,
    );
}

/// (minItems, maxItems) of an array frame.
fn items_rule(g: &Grammar, f: &Frame) -> (u32, Option<u32>) {
    typed(g, f.node).map_or((0, None), |t| (t.min_items, t.max_items))
}

fn required_met(g: &Grammar, f: &Frame) -> bool {
    typed(g, f.node).is_none_or(|t| t.required & !f.seen == 0)
}

/// The start of a key of the object `f`, if one may come.
fn key_start(g: &Grammar, f: &Frame) -> Option<Lex> {
    let (n, free) = match typed(g, f.node) {
        Some(t) => {
            let unseen = (0..t.props.len()).any(|i| f.seen >> i & 1 == 0);
            if !unseen && t.additional.is_none() {
                return None;
            }
            (t.props.len(), t.additional.is_some())
        }
        None => (0, true),
    };
    Some(Lex::Key {
        lo: 0,
        hi: n as u8,
        pos: 0,
        free,
        hash: FNV_OFFSET,
        sub: Sub::Plain,
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

fn key_byte(c: Cursor, b: u8, g: &Grammar, arena: &mut Arena, out: &mut dyn FnMut(Cursor)) {
    let Lex::Key {
        lo,
        hi,
        pos,
        free,
        hash,
        sub,
    } = c.lex
    else {
        return;
    };
    let f = *arena.frame(c.frame);
    let t = typed(g, f.node);
    let props = t.map_or(&[][..], |t| t.props.as_slice());
    let unseen = |i: usize| f.seen >> i & 1 == 0;
    if sub == Sub::Plain && b == b'"' {
        let exact = (usize::from(lo)..usize::from(hi))
            .find(|&i| props[i].key.len() == usize::from(pos) && unseen(i));
        if let Some(i) = exact {
            let frame = arena.push(Frame {
                seen: f.seen | 1 << i,
                ..f
            });
            out(Cursor {
                frame,
                lex: Lex::Colon(props[i].node),
                ws: 0,
            });
            return;
        }
        let declared =
            (usize::from(lo)..usize::from(hi)).any(|i| props[i].key.len() == usize::from(pos));
        if free && !declared && !seen_extra(arena, f.extras, hash) {
            let value = t.and_then(|t| t.additional).unwrap_or(ANY);
            arena.keys.push((hash, f.extras));
            let extras = (arena.keys.len() - 1) as u32;
            let frame = arena.push(Frame {
                extras,
                count: f.count + 1,
                ..f
            });
            out(Cursor {
                frame,
                lex: Lex::Colon(value),
                ws: 0,
            });
        }
        return;
    }
    if pos >= MAX_KEY {
        return;
    }
    let Some(next_sub) = string_byte(sub, b) else {
        return;
    };
    // Declared keys whose next byte is `b` (sorted, so a run) and not written yet.
    let p = usize::from(pos);
    let range = &props[usize::from(lo)..usize::from(hi)];
    let (nlo, nhi) = match range.iter().position(|k| k.key.get(p) == Some(&b)) {
        Some(first) => {
            let last = range
                .iter()
                .rposition(|k| k.key.get(p) == Some(&b))
                .unwrap_or(first);
            (usize::from(lo) + first, usize::from(lo) + last + 1)
        }
        None => (0, 0),
    };
    let any_declared = (nlo..nhi).any(unseen);
    // An undeclared key is plain text: no escapes, so equal keys are equal bytes.
    let free = free && b != b'\\' && sub != Sub::Escape && !matches!(sub, Sub::Hex { .. });
    if !any_declared && !free {
        return;
    }
    out(Cursor {
        lex: Lex::Key {
            lo: nlo as u8,
            hi: nhi as u8,
            pos: pos + 1,
            free,
            hash: (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3),
            sub: next_sub,
        },
        ..c
    });
}

fn seen_extra(arena: &Arena, mut at: u32, hash: u64) -> bool {
    while at != 0 {
        let (h, prev) = arena.keys[at as usize];
        if h == hash {
            return true;
        }
        at = prev;
    }
    false
}

/// A value of `node` starts with `b` (not whitespace).
fn start_value(
    c: Cursor,
    node: NodeId,
    b: u8,
    g: &Grammar,
    arena: &mut Arena,
    out: &mut dyn FnMut(Cursor),
) {
    let lit = |node: NodeId, c: Cursor, out: &mut dyn FnMut(Cursor)| {
        let lits = literals(g, node);
        let first = lits.iter().position(|l| l.first() == Some(&b));
        if let Some(first) = first {
            let end = lits
                .iter()
                .rposition(|l| l.first() == Some(&b))
                .unwrap_or(first)
                + 1;
            out(Cursor {
                lex: Lex::Lit {
                    node,
                    lo: first as u16,
                    hi: end as u16,
                    pos: 1,
                },
                ..c
            });
        }
    };
    match g.node(node) {
        Node::AnyOf(branches) => {
            for &branch in branches {
                start_value(c, branch, b, g, arena, out);
            }
            return;
        }
        Node::Literals(_) => return lit(node, c, out),
        Node::Any | Node::Typed(_) => {}
    }
    let t = types(g, node);
    match b {
        b'"' if t & T_STR != 0 => out(Cursor {
            lex: Lex::Str {
                node,
                chars: 0,
                sub: Sub::Plain,
            },
            ..c
        }),
        b'{' | b'[' if t & if b == b'{' { T_OBJ } else { T_ARR } != 0 => {
            let parent = arena.frame(c.frame);
            if parent.depth >= MAX_DEPTH {
                return;
            }
            let array = b == b'[';
            let frame = arena.push(Frame {
                parent: c.frame,
                node,
                array,
                depth: parent.depth + 1,
                seen: 0,
                count: 0,
                extras: 0,
            });
            out(Cursor {
                frame,
                lex: if array { Lex::ArrStart } else { Lex::ObjStart },
                ws: 0,
            });
        }
        b'-' | b'0'..=b'9' if t & (T_INT | T_NUM) != 0 => {
            let rule = num_rule(g, node);
            let mut buf = [0u8; NUM_MAX];
            buf[0] = b;
            if numbers::viable(&buf[..1], &rule) {
                out(Cursor {
                    lex: Lex::Num { node, len: 1, buf },
                    ..c
                });
            }
        }
        b't' | b'f' if t & T_BOOL != 0 => lit(BOOLS, c, out),
        b'n' if t & T_NULL != 0 => lit(NULL, c, out),
        _ => {}
    }
}

/// The value just finished: its container goes on (or the document is complete).
fn value_done(c: Cursor) -> Cursor {
    Cursor {
        frame: c.frame,
        lex: if c.frame == ROOT {
            Lex::Done
        } else {
            Lex::After
        },
        ws: 0,
    }
}

/// The open container closes: its parent's value is done.
fn close(c: Cursor, arena: &mut Arena) -> Cursor {
    let parent = arena.frame(c.frame).parent;
    value_done(Cursor { frame: parent, ..c })
}

/// One byte inside a JSON string: the next sub-state, or `None` when it breaks the string
/// (a control byte, a bad escape, a surrogate `\u`, invalid UTF-8). The closing quote is
/// the caller's.
fn string_byte(at: Sub, b: u8) -> Option<Sub> {
    let utf8 = |left, lo, hi| Some(Sub::Utf8 { left, lo, hi });
    match at {
        Sub::Plain => match b {
            b'\\' => Some(Sub::Escape),
            b'"' | 0x00..=0x1F => None,
            0x20..=0x7F => Some(Sub::Plain),
            0xC2..=0xDF => utf8(1, 0x80, 0xBF),
            0xE0 => utf8(2, 0xA0, 0xBF),
            0xED => utf8(2, 0x80, 0x9F),
            0xE1..=0xEF => utf8(2, 0x80, 0xBF),
            0xF0 => utf8(3, 0x90, 0xBF),
            0xF1..=0xF3 => utf8(3, 0x80, 0xBF),
            0xF4 => utf8(3, 0x80, 0x8F),
            _ => None,
        },
        Sub::Utf8 { left, lo, hi } => {
            if b < lo || b > hi {
                None
            } else if left == 1 {
                Some(Sub::Plain)
            } else {
                utf8(left - 1, 0x80, 0xBF)
            }
        }
        Sub::Escape => match b {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(Sub::Plain),
            b'u' => Some(Sub::Hex { read: 0, d: false }),
            _ => None,
        },
        Sub::Hex { read, d } => {
            if !b.is_ascii_hexdigit()
                || (read == 1 && d && matches!(b, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F'))
            {
                return None;
            }
            if read == 3 {
                Some(Sub::Plain)
            } else {
                Some(Sub::Hex {
                    read: read + 1,
                    d: read == 0 && matches!(b, b'd' | b'D'),
                })
            }
        }
    }
}

/// Bytes that finish a string's current character from `sub`.
fn sub_close(sub: Sub) -> u32 {
    match sub {
        Sub::Plain => 0,
        Sub::Escape => 1,
        Sub::Hex { read, .. } => u32::from(4 - read),
        Sub::Utf8 { left, .. } => u32::from(left),
    }
}
