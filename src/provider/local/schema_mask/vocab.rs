//! The vocabulary as the mask walks it: every token's bytes in a trie (tokens sharing a
//! prefix are tried once for that prefix, and a refused prefix prunes all of them), and
//! the tokens of plain string text apart, with their length in characters.
//!
//! Inside a string most of a vocabulary is plain text (no quote, no backslash, no control
//! byte, whole UTF-8 characters), which any string takes while it has room: those tokens
//! are allowed from a table, and only the others are tried byte by byte.

/// A token that is not plain string text.
pub const NOT_PLAIN: u32 = u32::MAX;

/// A token's bytes and id, as the trie is built from them.
type Entry<'t> = (&'t [u8], u32);

/// A prefix tree of token bytes.
#[derive(Debug, Default)]
pub struct Trie {
    /// Per node: its first edge and edge count in `edges`, its first token and token count
    /// in `tokens`.
    nodes: Vec<(u32, u32, u32, u32)>,
    /// (byte, child node), each node's edges sorted by byte.
    edges: Vec<(u8, u32)>,
    /// Token ids, grouped by the node where their bytes end.
    tokens: Vec<u32>,
}

impl Trie {
    fn build(mut entries: Vec<Entry<'_>>) -> Trie {
        entries.sort();
        let mut trie = Trie::default();
        trie.node(&entries, 0);
        trie
    }

    /// Builds the node for `entries` (sorted, all sharing their first `depth` bytes) and its
    /// subtree; returns its index.
    fn node(&mut self, entries: &[Entry<'_>], depth: usize) -> u32 {
        let index = self.nodes.len() as u32;
        self.nodes.push((0, 0, 0, 0));
        let ending = entries.iter().take_while(|(b, _)| b.len() == depth).count();
        let token_start = self.tokens.len() as u32;
        self.tokens
            .extend(entries[..ending].iter().map(|&(_, id)| id));
        let rest = &entries[ending..];
        let mut groups: Vec<(u8, &[Entry<'_>])> = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            let b = rest[i].0[depth];
            let n = rest[i..].iter().take_while(|(t, _)| t[depth] == b).count();
            groups.push((b, &rest[i..i + n]));
            i += n;
        }
        let children: Vec<(u8, u32)> = groups
            .into_iter()
            .map(|(b, group)| (b, self.node(group, depth + 1)))
            .collect();
        let edge_start = self.edges.len() as u32;
        self.edges.extend_from_slice(&children);
        self.nodes[index as usize] = (
            edge_start,
            children.len() as u32,
            token_start,
            ending as u32,
        );
        index
    }

    pub const ROOT: u32 = 0;

    pub fn edges(&self, node: u32) -> &[(u8, u32)] {
        let (start, len, _, _) = self.nodes[node as usize];
        &self.edges[start as usize..(start + len) as usize]
    }

    pub fn tokens(&self, node: u32) -> &[u32] {
        let (_, _, start, len) = self.nodes[node as usize];
        &self.tokens[start as usize..(start + len) as usize]
    }
}

/// A vocabulary, indexed for the mask.
#[derive(Debug)]
pub struct Vocab {
    size: usize,
    /// Characters of each plain-text token, or [`NOT_PLAIN`].
    plain: Vec<u32>,
    /// The plain-text tokens' ids.
    plain_ids: Vec<u32>,
    /// Every token with bytes.
    pub all: Trie,
    /// The tokens with bytes that are not plain text.
    pub special: Trie,
    /// The tokens that end a reply.
    pub stops: Vec<u32>,
}

impl Vocab {
    /// `tokens[id]`: the token's bytes (empty for a control token); `stops`: the ids that
    /// end a reply.
    pub fn new(tokens: &[&[u8]], stops: &[u32]) -> Vocab {
        let plain: Vec<u32> = tokens.iter().map(|t| plain_chars(t)).collect();
        let with_bytes = || {
            tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.is_empty())
                .map(|(id, t)| (*t, id as u32))
        };
        let all = Trie::build(with_bytes().collect());
        let special = Trie::build(
            with_bytes()
                .filter(|&(_, id)| plain[id as usize] == NOT_PLAIN)
                .collect(),
        );
        let plain_ids = (0..tokens.len() as u32)
            .filter(|&id| plain[id as usize] != NOT_PLAIN)
            .collect();
        Vocab {
            size: tokens.len(),
            plain,
            plain_ids,
            all,
            special,
            stops: stops.to_vec(),
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Marks in `out` (one flag per token) the tokens with bytes whose every byte `step`
    /// takes, from `start` on: the trie is walked once, so a prefix is stepped through once
    /// for every token that starts with it and a refused byte prunes them all. A token
    /// without bytes is never marked.
    pub fn allowed_by<S: Copy>(
        &self,
        start: S,
        step: impl Fn(&mut S, u8) -> bool,
        out: &mut Vec<bool>,
    ) {
        out.clear();
        out.resize(self.size, false);
        let mut stack = vec![(Trie::ROOT, start)];
        while let Some((node, state)) = stack.pop() {
            for &(b, child) in self.all.edges(node) {
                let mut next = state;
                if step(&mut next, b) {
                    for &id in self.all.tokens(child) {
                        out[id as usize] = true;
                    }
                    stack.push((child, next));
                }
            }
        }
    }

    /// The plain-text tokens with their characters.
    pub fn plain_tokens(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.plain_ids
            .iter()
            .map(|&id| (id, self.plain[id as usize]))
    }
}

/// Characters of `bytes` when it is plain string text: printable ASCII but `"` and `\`,
/// and whole UTF-8 characters.
fn plain_chars(bytes: &[u8]) -> u32 {
    if bytes.is_empty() {
        return NOT_PLAIN;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return NOT_PLAIN;
    };
    if text
        .chars()
        .any(|c| c == '"' || c == '\\' || (c as u32) < 0x20)
    {
        return NOT_PLAIN;
    }
    text.chars().count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trie_groups_tokens_by_prefix() {
        let tokens: Vec<&[u8]> = vec![
            b"ab",
            b"a",
            b"",
            b"b\"",
            b"abc",
            "\u{e9}".as_bytes(),
            b"\xC3",
        ];
        let v = Vocab::new(&tokens, &[2]);
        let root = v.all.edges(Trie::ROOT);
        assert_eq!(
            root.iter().map(|e| e.0).collect::<Vec<_>>(),
            [b'a', b'b', 0xC3]
        );
        let a = root[0].1;
        assert_eq!(v.all.tokens(a), &[1]);
        let ab = v.all.edges(a)[0].1;
        assert_eq!(v.all.tokens(ab), &[0]);
        assert_eq!(v.all.tokens(v.all.edges(ab)[0].1), &[4]);
        let plain: Vec<(u32, u32)> = v.plain_tokens().collect();
        assert_eq!(plain, [(0, 2), (1, 1), (4, 3), (5, 1)]);
        let special: Vec<u8> = v.special.edges(Trie::ROOT).iter().map(|e| e.0).collect();
        assert_eq!(special, [b'b', 0xC3]);
    }
}
