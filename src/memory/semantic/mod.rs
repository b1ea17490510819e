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

pub mod chunk;
pub mod lexical;
pub mod neural;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, OnceLock};

use axocoatl_store::fsutil::Durability;
use axocoatl_store::semantic::{
    DamagedSlot, LexicalIndex, Records, SemanticDir, StoredRecord, Vectors, LEXICAL_FILE,
    RECORDS_FILE, VECTORS_FILE,
};
use axocoatl_store::Repo;

use crate::clock::Millis;
use crate::error::{Result, RuntimeError};
use crate::memory::embed::{EmbedError, Embedder, DIM, MODEL_TAG};

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

    fn code(self) -> u8 {
        match self {
            SourceKind::Exchange => 1,
            SourceKind::Added => 2,
        }
    }

    fn from_code(code: u8) -> SourceKind {
        match code {
            1 => SourceKind::Exchange,
            _ => SourceKind::Added,
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
    /// The records whose text was indexed (damaged ones are not: see
    /// [`SemanticStore::damage`]).
    pub records: u64,
}

/// Records of one turn's exchange embedded as the turn ends, at most (a few milliseconds);
/// a longer exchange gets its vectors from the next search ([`CATCH_UP`]).
pub const EMBED_NOW: usize = 4;

/// Records missing a vector that a search embeds on the spot (a long exchange, a crash
/// between writing a record and its vector); more than this asks for `axocoatl memory
/// reindex`.
pub const CATCH_UP: u64 = 64;

/// Where the embedder comes from: the process-wide one, loaded at first need, or a given one.
#[derive(Debug)]
enum EmbedderSource {
    Shared,
    Given(Result<&'static Embedder, EmbedError>),
}

/// The semantic memory of one runtime Agent id.
#[derive(Debug)]
pub struct SemanticStore {
    agent_id: String,
    dir: SemanticDir,
    source: EmbedderSource,
    records: Records,
    /// Loaded at first need, for the current model.
    vectors: OnceLock<Vectors>,
    lexical: Option<LexicalIndex>,
    /// Damaged records met by reads so far (skipped), by id: see [`SemanticStore::damage`].
    damaged: Mutex<BTreeMap<RecordId, DamagedSlot>>,
}

fn store_err(e: axocoatl_store::Error) -> RuntimeError {
    RuntimeError::Store(e)
}

fn hit_of(id: RecordId, score: f32, r: StoredRecord) -> Hit {
    Hit {
        id,
        score,
        source: Source {
            turn: r.turn,
            kind: SourceKind::from_code(r.kind),
            at: r.at,
        },
        text: r.text,
    }
}

impl SemanticStore {
    /// Opens the store of runtime Agent id `agent_id` (e.g. `main:coder`), using the
    /// process-wide embedder ([`Embedder::shared`], loaded only when a vector is needed)
    /// when it is available and the lexical path otherwise. Nothing is created on disk
    /// until the first [`add`](Self::add).
    pub fn open(repo: &Repo, agent_id: &str) -> Result<SemanticStore> {
        SemanticStore::open_source(repo, agent_id, EmbedderSource::Shared)
    }

    /// Opens with a given embedder, or with the reason there is none (the lexical path).
    pub fn open_with(
        repo: &Repo,
        agent_id: &str,
        embedder: Result<&'static Embedder, EmbedError>,
    ) -> Result<SemanticStore> {
        SemanticStore::open_source(repo, agent_id, EmbedderSource::Given(embedder))
    }

    fn open_source(repo: &Repo, agent_id: &str, source: EmbedderSource) -> Result<SemanticStore> {
        let dir = SemanticDir::new(repo, agent_id);
        let records = Records::open(&dir.records_path()).map_err(store_err)?;
        Ok(SemanticStore {
            agent_id: agent_id.to_owned(),
            dir,
            source,
            records,
            vectors: OnceLock::new(),
            lexical: None,
            damaged: Mutex::default(),
        })
    }

    /// The runtime Agent id this store belongs to.
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Record `id`, or `None` when it is damaged: readers step over it (it is noted for
    /// [`SemanticStore::damage`]).
    fn read(&self, id: RecordId) -> Result<Option<StoredRecord>> {
        match self.records.read(id).map_err(store_err)? {
            Ok(r) => Ok(Some(r)),
            Err(slot) => {
                self.damaged
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id, slot);
                Ok(None)
            }
        }
    }

    /// Record `id`'s text for the derived data (vectors, lexical index); a damaged record
    /// has none.
    fn text(&self, id: RecordId) -> Result<String> {
        Ok(self.read(id)?.map(|r| r.text).unwrap_or_default())
    }

    /// The damaged records reads met so far (every one, after [`SemanticStore::verify`]),
    /// each said in a sentence naming this store and its file.
    pub fn damage(&self) -> Vec<String> {
        let path = self.records.path().display();
        self.damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|d| {
                format!(
                    "semantic memory of {}: record {} of {path} is damaged ({} bytes at byte {}: {}); it is skipped, and `axocoatl fsck --repair` moves it aside",
                    self.agent_id, d.id, d.len, d.offset, d.reason
                )
            })
            .collect()
    }

    fn damaged_count(&self) -> u64 {
        self.damaged.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// Reads every record (for `memory status` and `reindex`) and returns how many are
    /// damaged; [`SemanticStore::damage`] says which.
    pub fn verify(&self) -> u64 {
        let found = self.records.verify();
        let n = found.len() as u64;
        self.damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(found.into_iter().map(|d| (d.id, d)));
        n
    }

    fn embedder(&self) -> Result<&'static Embedder, EmbedError> {
        match &self.source {
            EmbedderSource::Shared => Embedder::shared(),
            EmbedderSource::Given(e) => e.clone(),
        }
    }

    fn vectors(&self) -> Result<&Vectors> {
        if let Some(v) = self.vectors.get() {
            return Ok(v);
        }
        let v = Vectors::open(&self.dir.file(VECTORS_FILE), MODEL_TAG, DIM).map_err(store_err)?;
        Ok(self.vectors.get_or_init(|| v))
    }

    fn refresh(&mut self) -> Result<()> {
        self.records = Records::open(&self.dir.records_path()).map_err(store_err)?;
        self.vectors = OnceLock::new();
        Ok(())
    }

    /// The path searches take now, and why not neural. Loads the embedder (neural path).
    fn decide(&self) -> Result<(RecallPath, Option<(String, String)>)> {
        let embedder = match self.embedder() {
            Ok(e) => e,
            Err(e) => {
                return Ok((
                    RecallPath::Lexical,
                    Some((e.to_string(), e.hint().to_owned())),
                ))
            }
        };
        let _ = embedder;
        let rows = self.vectors()?.rows() as u64;
        let records = self.records.len();
        if rows + CATCH_UP < records {
            let why = match self.vectors()?.stale() {
                Some(stale) => format!("{stale}; vectors cover {rows} of {records} records"),
                None => format!("vectors cover {rows} of {records} records"),
            };
            return Ok((
                RecallPath::Lexical,
                Some((
                    why,
                    "run `axocoatl memory reindex` to embed them".to_owned(),
                )),
            ));
        }
        Ok((RecallPath::Neural, None))
    }

    /// Retains `records` (chunked; vectors computed on the neural path) and returns the ids
    /// of the records written, in order. Added text is on disk (fsynced) when this returns;
    /// a batch of turn exchanges alone, whose authority is the ledger, is written without
    /// fsync (a power cut can lose the newest of them, as of the daily log). A vector that
    /// could not be computed, and the vectors of an exchange of more than [`EMBED_NOW`]
    /// records, are left for a later search or reindex.
    pub fn add(&mut self, records: &[NewRecord]) -> Result<Vec<RecordId>> {
        let mut stored = Vec::new();
        for r in records {
            for part in chunk::chunks(&r.text, CHUNK_WORDS) {
                stored.push(StoredRecord {
                    text: part.to_owned(),
                    turn: r.source.turn.clone(),
                    kind: r.source.kind.code(),
                    at: r.source.at,
                });
            }
        }
        if stored.is_empty() {
            return Ok(Vec::new());
        }
        // A turn's exchange is written at once and embedded only when it is short: a
        // longer one is embedded by the next search (or `memory reindex`), so a turn's
        // process never stays busy after its answer. Text added by hand is embedded now.
        let exchanges = records
            .iter()
            .all(|r| r.source.kind == SourceKind::Exchange);
        let embed_now = !exchanges || stored.len() <= EMBED_NOW;
        // Embedding is the slow part: done before taking the lock.
        let vectors = match self.embedder() {
            Ok(e) if embed_now => {
                let texts: Vec<&str> = stored.iter().map(|r| r.text.as_str()).collect();
                Some(e.embed(&texts).map_err(embed_err)?)
            }
            _ => None,
        };
        let lock = self.dir.lock().map_err(store_err)?;
        // A pre-1.0 store of this Agent id becomes the start of the current one.
        self.dir.adopt_legacy().map_err(store_err)?;
        let path = self.dir.file(RECORDS_FILE);
        // A turn's exchange is a copy of what the ledger holds durably: written like the
        // daily log, it adds no fsync to a turn. Anything else is the only copy.
        let durability = if exchanges {
            Durability::Cache
        } else {
            Durability::Durable
        };
        let first = Records::append(&path, &stored, durability).map_err(store_err)?;
        // Caches that outlived records lost to a power cut must not speak for the new ones.
        let lpath = self.dir.file(LEXICAL_FILE);
        if LexicalIndex::drop_beyond(&lpath, first).map_err(store_err)? {
            self.lexical = None;
        }
        let vpath = self.dir.file(VECTORS_FILE);
        Vectors::cut(&vpath, DIM, first).map_err(store_err)?;
        if let Some(vectors) = vectors {
            let current = Vectors::open(&vpath, MODEL_TAG, DIM).map_err(store_err)?;
            let rows = current.rows() as u64;
            drop(current);
            if rows == first {
                let rows: Vec<_> = vectors.iter().map(|v| neural::quantize(v)).collect();
                Vectors::append(&vpath, MODEL_TAG, DIM, first as usize, &rows)
                    .map_err(store_err)?;
            }
            // Otherwise earlier records lack vectors: a search catches up or asks for a
            // reindex, and these records are embedded then.
        }
        drop(lock);
        self.refresh()?;
        Ok((first..first + stored.len() as u64).collect())
    }

    /// Embeds the records that lack a vector (at most [`CATCH_UP`]), under the lock.
    fn catch_up(&mut self, embedder: &Embedder) -> Result<()> {
        let rows = self.vectors()?.rows() as u64;
        if rows >= self.records.len() {
            return Ok(());
        }
        let lock = self.dir.lock().map_err(store_err)?;
        self.refresh()?;
        let rows = self.vectors()?.rows() as u64;
        let texts = (rows..self.records.len())
            .map(|id| self.text(id))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = embedder.embed(&refs).map_err(embed_err)?;
        let qrows: Vec<_> = vectors.iter().map(|v| neural::quantize(v)).collect();
        Vectors::append(
            &self.dir.file(VECTORS_FILE),
            MODEL_TAG,
            DIM,
            rows as usize,
            &qrows,
        )
        .map_err(store_err)?;
        drop(lock);
        self.refresh()
    }

    /// The `top_k` records closest to `query`, best first. Damaged records are stepped over
    /// (the next closest take their places) and noted for [`SemanticStore::damage`].
    pub fn search(&mut self, query: &str, top_k: usize) -> Result<Vec<Hit>> {
        if self.records.is_empty() || top_k == 0 || query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let q = match self.decide()?.0 {
            RecallPath::Neural => {
                let embedder = self.embedder().map_err(embed_err)?;
                self.catch_up(embedder)?;
                let q = embedder.embed(&[query]).map_err(embed_err)?;
                Some(neural::quantize(
                    q.first().map(Vec::as_slice).unwrap_or(&[]),
                ))
            }
            RecallPath::Lexical => None,
        };
        let mut k = top_k;
        loop {
            let ranked = match &q {
                Some(q) => {
                    // Rows past the records (a vector file from another history) are not read.
                    let n = self.records.len() as usize;
                    let data = self.vectors()?.data();
                    let rb = axocoatl_store::semantic::vectors::row_bytes(DIM);
                    neural::search(&data[..data.len().min(n * rb)], DIM, q, k)
                }
                None => self.search_lexical(query, k)?,
            };
            let ranked_len = ranked.len();
            let mut hits = Vec::with_capacity(ranked_len);
            for (id, score) in ranked {
                if let Some(r) = self.read(id)? {
                    hits.push(hit_of(id, score, r));
                }
            }
            if hits.len() >= top_k || ranked_len < k {
                hits.truncate(top_k);
                return Ok(hits);
            }
            k += ranked_len - hits.len();
        }
    }

    /// Whether every record is the exchange of one of `turns` (damaged records aside): then
    /// a search leaving those turns out has nothing to find, and needs no query vector.
    /// Reads from the oldest record, which in a store of any age is outside a conversation
    /// window: usually one read.
    pub fn only_of_turns(&self, turns: &HashSet<String>) -> Result<bool> {
        for id in 0..self.records.len() {
            if let Some(r) = self.read(id)? {
                if !r.turn.as_ref().is_some_and(|t| turns.contains(t)) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The records retained after `since` (every record when `None`), oldest first: at most
    /// `max`, the newest. Their `score` is 0 (no query ranked them). Consolidation reads
    /// these.
    pub fn recent(&self, since: Option<Millis>, max: usize) -> Result<Vec<Hit>> {
        let mut out = Vec::new();
        for id in (0..self.records.len()).rev() {
            if out.len() == max {
                break;
            }
            let Some(r) = self.read(id)? else {
                continue;
            };
            if since.is_some_and(|t| r.at <= t) {
                break;
            }
            out.push(hit_of(id, 0.0, r));
        }
        out.reverse();
        Ok(out)
    }

    fn search_lexical(&mut self, query: &str, top_k: usize) -> Result<Vec<(u64, f32)>> {
        let n = self.records.len();
        if self.lexical.is_none() {
            self.lexical = LexicalIndex::open(&self.dir.file(LEXICAL_FILE)).map_err(store_err)?;
        }
        let covered = self.lexical.as_ref().map(|ix| ix.docs()).unwrap_or(0);
        if covered > n || n - covered > (n / 8).max(256) {
            self.rebuild_lexical()?;
        }
        let covered = self.lexical.as_ref().map(|ix| ix.docs()).unwrap_or(0);
        let tail = (covered..n)
            .map(|id| self.text(id))
            .collect::<Result<Vec<_>>>()?;
        Ok(lexical::search(self.lexical.as_ref(), &tail, query, top_k))
    }

    fn rebuild_lexical(&mut self) -> Result<u64> {
        let texts = (0..self.records.len())
            .map(|id| self.text(id))
            .collect::<Result<Vec<_>>>()?;
        let builder = lexical::build(texts.iter().map(String::as_str));
        let path = self.dir.file(LEXICAL_FILE);
        builder.write(&path).map_err(store_err)?;
        self.lexical = LexicalIndex::open(&path).map_err(store_err)?;
        Ok(builder.docs())
    }

    /// Which path is in use, why, and how many records there are. On the neural path this
    /// loads the embedder, to say truthfully whether it works.
    pub fn status(&self) -> Result<Status> {
        let (path, why) = self.decide()?;
        let indexed = match path {
            RecallPath::Neural => self.vectors()?.rows() as u64,
            RecallPath::Lexical => match &self.lexical {
                Some(ix) => ix.docs(),
                None => LexicalIndex::open(&self.dir.file(LEXICAL_FILE))
                    .map_err(store_err)?
                    .map(|ix| ix.docs())
                    .unwrap_or(0),
            },
        }
        .min(self.records.len());
        let (reason, hint) = match why {
            Some((r, h)) => (Some(r), Some(h)),
            None => (None, None),
        };
        Ok(Status {
            path,
            reason,
            hint,
            records: self.records.len(),
            indexed,
        })
    }

    /// The one-time warning about the path in use: `Some` the first time the store is used
    /// on the lexical path (and again after it was used on the neural path), `None`
    /// otherwise. The runtime shows it (e.g. as a turn warning); the store remembers in its
    /// directory that it was given.
    pub fn path_warning(&mut self) -> Result<Option<String>> {
        let status = self.status()?;
        let announced = self.dir.announced_path();
        if announced == status.path.as_str() {
            return Ok(None);
        }
        self.dir
            .set_announced_path(status.path.as_str())
            .map_err(store_err)?;
        Ok(match status.path {
            RecallPath::Neural => None,
            RecallPath::Lexical => Some(format!(
                "semantic memory of {} uses the lexical fallback (BM25): {}; {}",
                self.agent_id,
                status.reason.unwrap_or_default(),
                status.hint.unwrap_or_default()
            )),
        })
    }

    /// Rebuilds the derived data for the path in use from the records' text: every vector
    /// (neural) or the term index (lexical). On the neural path the vectors are replaced as
    /// a whole, so a search running meanwhile sees the old ones or the new ones.
    pub fn reindex(&mut self) -> Result<Reindexed> {
        match self.embedder() {
            Ok(embedder) => {
                let texts = (0..self.records.len())
                    .map(|id| self.text(id))
                    .collect::<Result<Vec<_>>>()?;
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let vectors = embedder.embed(&refs).map_err(embed_err)?;
                let rows: Vec<_> = vectors.iter().map(|v| neural::quantize(v)).collect();
                let lock = self.dir.lock().map_err(store_err)?;
                // Records appended while embedding get their vectors from the next search.
                Vectors::rewrite(&self.dir.file(VECTORS_FILE), MODEL_TAG, DIM, &rows)
                    .map_err(store_err)?;
                drop(lock);
                self.refresh()?;
                Ok(Reindexed {
                    path: RecallPath::Neural,
                    records: (rows.len() as u64).saturating_sub(self.damaged_count()),
                })
            }
            Err(_) => {
                let records = if self.records.is_empty() {
                    0
                } else {
                    self.rebuild_lexical()?
                };
                Ok(Reindexed {
                    path: RecallPath::Lexical,
                    records: records.saturating_sub(self.damaged_count()),
                })
            }
        }
    }
}

fn embed_err(e: EmbedError) -> RuntimeError {
    RuntimeError::Invalid {
        hint: e.hint().into(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests;
