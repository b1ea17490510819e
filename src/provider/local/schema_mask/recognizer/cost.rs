//! What it costs to finish a value from where a cursor is: the fewest bytes that close it
//! (the mask keeps every token that leaves room for them within the budget).

use super::*;

/// The fewest bytes that finish the document from cursor `c`: its lexical position and
/// what its innermost container needs after it, then what each enclosing container needs
/// once the value inside it is complete.
pub(super) fn cursor_close(c: &Cursor, g: &Grammar, arena: &Arena) -> u32 {
    cursor_cost(c, g, arena, false)
}

/// [`cursor_close`], with a key's dearest candidate when `dearest`.
pub(super) fn cursor_cost(c: &Cursor, g: &Grammar, arena: &Arena, dearest: bool) -> u32 {
    let f = arena.frame(c.frame);
    let in_container = c.frame != ROOT;
    let after = |f: &Frame| if in_container { after_value(f, g) } else { 0 };
    let here = match c.lex {
        Lex::Done => return 0,
        Lex::Value(node) => g.min(node).saturating_add(after(f)),
        Lex::Str { node, chars, sub } => {
            let (min, _) = str_rule(g, node);
            (sub_close(sub) + min.saturating_sub(chars) + 1).saturating_add(after(f))
        }
        Lex::Num { node, len, buf } => {
            let rule = num_rule(g, node);
            numbers::close(&buf[..usize::from(len)], &rule)
                .map_or(INFINITE, |n| n as u32)
                .saturating_add(after(f))
        }
        Lex::Lit { node, lo, hi, pos } => literals(g, node)[usize::from(lo)..usize::from(hi)]
            .iter()
            .map(|l| (l.len() - usize::from(pos)) as u32)
            .min()
            .unwrap_or(INFINITE)
            .saturating_add(after(f)),
        Lex::Key {
            lo,
            hi,
            pos,
            free,
            sub,
            ..
        } => key_close(f, g, (lo, hi, pos), (free, sub), dearest),
        Lex::Colon(node) => (1 + g.min(node)).saturating_add(after_value(f, g)),
        Lex::ObjStart => match missing(f, g) {
            0 => 1,
            m => object_min(typed_or_any(g, f), m, &g.min_bytes) - 1,
        },
        Lex::ObjKey => match missing(f, g) {
            0 => cheapest_entry(f, g).saturating_add(1),
            m => object_min(typed_or_any(g, f), m, &g.min_bytes) - 1,
        },
        Lex::ArrStart => {
            let (min, _) = items_rule(g, f);
            let n = if f.count > 0 {
                min.saturating_sub(f.count).max(1)
            } else {
                min
            };
            let item = typed(g, f.node).map_or(1, |t| g.min(t.items));
            if n == 0 {
                1
            } else {
                item.saturating_add(1).saturating_mul(n)
            }
        }
        Lex::After => after_value(f, g),
    };
    let mut total = here;
    let mut at = f.parent;
    if in_container {
        while at != ROOT {
            let a = arena.frame(at);
            total = total.saturating_add(after_value(a, g));
            at = a.parent;
        }
    }
    total.min(INFINITE)
}

/// The typed node of a frame (an object of any keys has none: treated as declaring none).
pub(super) fn typed_or_any<'g>(g: &'g Grammar, f: &Frame) -> &'g Typed {
    static EMPTY: std::sync::OnceLock<Typed> = std::sync::OnceLock::new();
    typed(g, f.node).unwrap_or_else(|| {
        EMPTY.get_or_init(|| Typed {
            types: T_ALL,
            min_len: 0,
            max_len: None,
            num: NumRule::default(),
            items: ANY,
            min_items: 0,
            max_items: None,
            props: Vec::new(),
            required: 0,
            additional: Some(ANY),
        })
    })
}

/// The required properties of object `f` not written yet.
pub(super) fn missing(f: &Frame, g: &Grammar) -> u64 {
    typed(g, f.node).map_or(0, |t| t.required & !f.seen)
}

/// What a container needs once a value inside it is complete: its missing entries or
/// items, each after a comma, and its closing bracket.
pub(super) fn after_value(f: &Frame, g: &Grammar) -> u32 {
    if f.array {
        let (min, _) = items_rule(g, f);
        let item = typed(g, f.node).map_or(1, |t| g.min(t.items));
        let left = min.saturating_sub(f.count);
        return item
            .saturating_add(1)
            .saturating_mul(left)
            .saturating_add(1);
    }
    match missing(f, g) {
        0 => 1,
        m => object_min(typed_or_any(g, f), m, &g.min_bytes),
    }
}

/// The cheapest entry an object may still take (after a `,`: a key must come).
pub(super) fn cheapest_entry(f: &Frame, g: &Grammar) -> u32 {
    let t = typed_or_any(g, f);
    let declared = t
        .props
        .iter()
        .enumerate()
        .filter(|(i, _)| f.seen >> i & 1 == 0)
        .map(|(_, p)| (p.key.len() as u32 + 3).saturating_add(g.min(p.node)))
        .min()
        .unwrap_or(INFINITE);
    let extra = t
        .additional
        .map_or(INFINITE, |a| 3u32.saturating_add(g.min(a)));
    declared.min(extra)
}

/// Inside a key of object `f`: finish it (a declared one of `lo..hi`, or an undeclared one
/// when `free`), its colon and value, and the rest of the object after that entry.
/// `dearest`: the most that finishing may need once more bytes of the key narrow its
/// candidates (the dearest candidate still open), instead of the fewest.
pub(super) fn key_close(
    f: &Frame,
    g: &Grammar,
    (lo, hi, pos): (u8, u8, u16),
    (free, sub): (bool, Sub),
    dearest: bool,
) -> u32 {
    let t = typed_or_any(g, f);
    let rest = |seen: u64| {
        let after = Frame { seen, ..*f };
        after_value(&after, g)
    };
    let declared = (usize::from(lo)..usize::from(hi))
        .filter(|&i| f.seen >> i & 1 == 0)
        .map(|i| {
            let p = &t.props[i];
            let key = (p.key.len() as u32).saturating_sub(u32::from(pos)) + 2;
            key.saturating_add(g.min(p.node))
                .saturating_add(rest(f.seen | 1 << i))
        });
    let extra = free.then(|| {
        let value = g.min(t.additional.unwrap_or(ANY));
        (sub_close(sub) + 2)
            .saturating_add(value)
            .saturating_add(rest(f.seen))
    });
    let costs = declared.chain(extra);
    if dearest { costs.max() } else { costs.min() }.unwrap_or(INFINITE)
}
