//! Semantic memory (Tier 4): recall by similarity over retained source text.
//!
//! One store per runtime Agent id, under `memory/semantic/v1/<component>/`. Records hold the
//! retained text (a turn's exchange, what `axocoatl memory add` is given), chunked so that
//! each fits the embedder's window, with where it came from. The records are the authority;
//! vectors and the lexical index beside them are caches derived from the text.
//!
//! Two paths read the same records:
//! - **neural** (default): the query is embedded by [`Embedder`] and compared with every
//!   record's vector (int8-quantized, memory-mapped); scores are cosines.
//! - **lexical** (fallback when the model files are absent or the `embeddings` feature is
//!   off): BM25 over the records' words, with an `fst` term dictionary; scores are BM25
//!   divided by its upper bound for the query, so they fall in `[0, 1]` and one `min_score`
//!   serves both paths.
//!
//! [`SemanticStore::status`] says which path is in use and why; switching paths needs no
//! rebuild of the text, only [`SemanticStore::reindex`].

use axocoatl_store::Repo;

use crate::clock::Millis;
use crate::error::{Result, RuntimeError};
use crate::memory::embed::{EmbedError, Embedder};

/// A record's number in its store: 0, 1, 2, … in the order records were added.
pub type RecordId = u64;

/// What produced a record's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A completed turn's exchange (request and answer).
    Exchange,
    /// Text given to `axocoatl memory add` (or a tool that adds a fact).
    Added,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Exchange => "exchange",
            SourceKind::Added => "added",
        }
    }
}

/// Where a record's text came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The turn whose exchange this is; `None` for text added outside a turn.
    pub turn: Option<String>,
    pub kind: SourceKind,
    /// When the text was retained.
    pub at: Millis,
}

/// Text to retain. Long text is split into several records (chunks of at most
/// [`CHUNK_WORDS`] words, cut at sentence ends where possible), each with this source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    pub text: String,
    pub source: Source,
}

/// Most words in one record: about 160 MiniLM tokens, inside its 256-token window.
pub const CHUNK_WORDS: usize = 120;

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub id: RecordId,
    /// Cosine similarity (neural) or normalized BM25 in `[0, 1]` (lexical); higher is closer.
    pub score: f32,
    pub text: String,
    pub source: Source,
}

/// Which path answers searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecallPath {
    Neural,
    Lexical,
}

impl RecallPath {
    pub fn as_str(self) -> &'static str {
        match self {
            RecallPath::Neural => "neural",
            RecallPath::Lexical => "lexical",
        }
    }
}

/// What [`SemanticStore::status`] reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub path: RecallPath,
    /// Why the lexical path is in use (`None` on the neural path).
    pub reason: Option<String>,
    /// What to do about `reason`.
    pub hint: Option<String>,
    /// Records in the store.
    pub records: u64,
    /// Records that have a vector of the current model (neural path); records covered by
    /// the lexical index (lexical path).
    pub indexed: u64,
}

/// What [`SemanticStore::reindex`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reindexed {
    pub path: RecallPath,
    pub records: u64,
}

/// The semantic memory of one runtime Agent id.
#[derive(Debug)]
pub struct SemanticStore {
    agent_id: String,
    embedder: Result<&'static Embedder, EmbedError>,
}

fn not_yet(what: &str) -> RuntimeError {
    RuntimeError::NotSupported(format!("semantic memory {what}"))
}

impl SemanticStore {
    /// Opens (creating on first write) the store of runtime Agent id `agent_id` (e.g.
    /// `main:coder`), using the process-wide embedder when it is available and the lexical
    /// path otherwise.
    pub fn open(repo: &Repo, agent_id: &str) -> Result<SemanticStore> {
        SemanticStore::open_with(repo, agent_id, Embedder::shared())
    }

    /// Opens with a given embedder, or with the reason there is none (the lexical path).
    pub fn open_with(
        repo: &Repo,
        agent_id: &str,
        embedder: Result<&'static Embedder, EmbedError>,
    ) -> Result<SemanticStore> {
        let _ = repo;
        Ok(SemanticStore {
            agent_id: agent_id.to_owned(),
            embedder,
        })
    }

    /// The runtime Agent id this store belongs to.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Retains `records` durably (chunked; vectors computed on the neural path) and returns
    /// the ids of the records written, in order.
    pub fn add(&mut self, records: &[NewRecord]) -> Result<Vec<RecordId>> {
        let _ = records;
        Err(not_yet("add"))
    }

    /// The `top_k` records closest to `query`, best first.
    pub fn search(&mut self, query: &str, top_k: usize) -> Result<Vec<Hit>> {
        let _ = (query, top_k);
        Err(not_yet("search"))
    }

    /// Which path is in use, why, and how many records there are.
    pub fn status(&self) -> Result<Status> {
        let _ = &self.embedder;
        Err(not_yet("status"))
    }

    /// The one-time warning about the path in use: `Some` the first time the store is used
    /// on the lexical path (and again after it changes path), `None` otherwise. The runtime
    /// shows it (e.g. as a turn warning); the store remembers that it was given.
    pub fn path_warning(&mut self) -> Result<Option<String>> {
        Err(not_yet("path warning"))
    }

    /// Rebuilds the derived data for the path in use from the records' text: every vector
    /// (neural) or the term index (lexical).
    pub fn reindex(&mut self) -> Result<Reindexed> {
        Err(not_yet("reindex"))
    }
}
