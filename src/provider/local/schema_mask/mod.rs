//! Constrained decoding for a JSON Schema (`send --schema`): before each sampled token, the
//! mask says which tokens of the vocabulary may come next, so the reply is a value of the
//! schema, within the token budget.
//!
//! The mask is driven by token text alone: [`Vocab`] holds each token's bytes, [`SchemaMask`]
//! a position in the schema's [`Grammar`], and [`SchemaMask::allowed`] fills one flag per
//! token. How the logits are computed is no concern of it; the sampler sets the scores of
//! refused tokens to minus infinity and feeds the chosen token's bytes back
//! ([`SchemaMask::advance`]).
//!
//! **Within budget.** A token is allowed only when the fewest bytes that finish the document
//! after it ([`State::min_close`]) fit in the tokens left after it (every byte of a finishing
//! text has a token of its own in a byte-level vocabulary), so a reply is cut by
//! `max_tokens` only when the schema's smallest value does not fit at all. One token may
//! raise that count a lot (`{` of an object with many required properties), so every token
//! the trie walk allows is checked; plain string text never raises it, and is checked only
//! when the tokens left come close.
//!
//! **Cost.** Inside strings, where most of a reply is, plain-text tokens are allowed from a
//! table and only the few others are walked; elsewhere a walk of the vocabulary's trie
//! prunes a whole subtree at its first refused byte.

mod grammar;
mod numbers;
mod recognizer;
mod vocab;

#[cfg(test)]
mod tests;

pub use grammar::Grammar;
pub use recognizer::State;
pub use vocab::Vocab;

use recognizer::Arena;
use vocab::Trie;

/// When the tokens left are within this many of what finishing needs, each plain-text
/// token is checked to leave enough.
const TIGHT_MARGIN: usize = 8;

/// Where a reply is in the schema's grammar.
#[derive(Debug)]
pub struct SchemaMask {
    grammar: Grammar,
    state: State,
    arena: Arena,
}

impl SchemaMask {
    /// The mask of a JSON Schema (checked by `crate::schema::check`); an error says what the
    /// local model cannot constrain.
    pub fn new(schema: &serde_json::Value) -> Result<SchemaMask, String> {
        let grammar = Grammar::compile(schema)?;
        let state = State::new(&grammar);
        Ok(SchemaMask {
            grammar,
            state,
            arena: Arena::default(),
        })
    }

    /// The fewest bytes (so at most tokens) of a value of the schema.
    pub fn min_tokens(&self) -> usize {
        self.grammar.min(self.grammar.root) as usize
    }

    /// Sets `allowed[id]` for each token that may come next, with `remaining` tokens left
    /// for the reply (this one included).
    pub fn allowed(&mut self, vocab: &Vocab, remaining: usize, allowed: &mut [bool]) {
        allowed.fill(false);
        let g = &self.grammar;
        let need = self.state.min_close(g, &self.arena) as usize;
        let tight = need + TIGHT_MARGIN >= remaining;
        if self.state.can_end(g) {
            for &id in &vocab.stops {
                if let Some(a) = allowed.get_mut(id as usize) {
                    *a = true;
                }
            }
        }
        let mark = self.arena.mark();
        // Plain text is taken from the table when no plain token can leave too little room
        // to finish (or, in a string value, checked with the arithmetic of its length);
        // else the whole vocabulary is walked and each token checked.
        let in_plain = self.state.in_plain_text();
        let bounded = in_plain && (self.state.plain_bound(g, &self.arena) as usize) < remaining;
        let strings = in_plain && self.state.in_string_value();
        let trie = if bounded || strings {
            let room = self.state.plain_room(g);
            for (id, chars) in vocab.plain_tokens() {
                let fits = bounded
                    || !tight
                    || (self.state.min_close_after_plain(chars, g, &self.arena) as usize)
                        < remaining;
                if chars <= room && fits {
                    allowed[id as usize] = true;
                }
            }
            &vocab.special
        } else {
            &vocab.all
        };
        let mut walk = Walk {
            g,
            arena: &mut self.arena,
            trie,
            allowed,
            remaining,
        };
        walk.node(Trie::ROOT, &self.state);
        self.arena.roll_back(mark);
    }

    /// Feeds a chosen token's bytes; false when the grammar refuses them (the mask was not
    /// followed).
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        match self.state.feed(bytes, &self.grammar, &mut self.arena) {
            Some(next) => {
                self.state = next;
                true
            }
            None => false,
        }
    }

    /// The value is complete and nothing may follow it.
    pub fn is_done(&self) -> bool {
        self.state.is_done()
    }

    /// The reply may end here.
    pub fn can_end(&self) -> bool {
        self.state.can_end(&self.grammar)
    }
}

/// One walk of a trie from a position.
struct Walk<'w> {
    g: &'w Grammar,
    arena: &'w mut Arena,
    trie: &'w Trie,
    allowed: &'w mut [bool],
    remaining: usize,
}

impl Walk<'_> {
    fn node(&mut self, node: u32, state: &State) {
        for &(b, child) in self.trie.edges(node) {
            let mark = self.arena.mark();
            if let Some(next) = state.step(b, self.g, self.arena) {
                let tokens = self.trie.tokens(child);
                if !tokens.is_empty()
                    && (next.min_close(self.g, self.arena) as usize) < self.remaining
                {
                    for &id in tokens {
                        self.allowed[id as usize] = true;
                    }
                }
                self.node(child, &next);
            }
            self.arena.roll_back(mark);
        }
    }
}
