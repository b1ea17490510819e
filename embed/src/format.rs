//! The ready-to-run model file: written once by [`write()`], mapped by [`Model::open`].
//!
//! All numbers little-endian. A 256-byte header, then four sections, each starting at a
//! multiple of 64 bytes:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `AXOEMBED` |
//! | 8..12 | format version (u32) |
//! | 12..16 | header length: 256 |
//! | 16..80 | [`Config`]: 16 u32 (the last two reserved, 0) |
//! | 80..112 | the source's fingerprint (32 bytes chosen by the writer's caller: which model and tokenizer files this was made from) |
//! | 112..208 | four sections, each offset (u64), length (u64), CRC-32C (u32) and 4 zero bytes |
//! | 208..252 | reserved (0) |
//! | 252..256 | CRC-32C of bytes 0..252 |
//!
//! Sections, in this order:
//! 1. **matrices**: the position-embedding table's int8 rows, then per layer the int8
//!    weights of query, key, value, attention output, feed-forward up and down, each
//!    `in × out` row-major (`x · W`), each at a multiple of 64 bytes. CRC over the section.
//! 2. **vectors**: f32 values: the position table's row scales, the token-type table, the
//!    embeddings' layer norm (gain, bias), then per layer the scale (one per output column)
//!    and bias of each of the six matrices in the same order, and both layer norms. CRC over
//!    the section.
//! 3. **vocabulary**: the WordPiece vocabulary sorted by bytes, for binary search: its count
//!    (u32), the count of added tokens (u32), then the vocabulary's string offsets (count + 1
//!    u32) and ids (count u32), the added tokens' offsets and ids likewise, then the strings.
//!    Added tokens (`[CLS]`, `[SEP]`, …) are matched in the raw text before normalization.
//!    CRC over the section.
//! 4. **words**: the word-embedding table, one row per token id: `hidden` int8 values, the
//!    row's f32 scale and the CRC-32C of both (4 bytes). Only the rows of the tokens met are
//!    read, and each is checked when read; the section's CRC field is 0.
//!
//! A file that does not check is never used: the caller writes it again.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

pub use crate::config::{Config, COLUMN_BLOCK};
use crate::tokenize::Tokenizer;
use crate::{Error, Result};

pub const MAGIC: &[u8; 8] = b"AXOEMBED";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: usize = 256;
/// Bytes of the source fingerprint in the header.
pub const SOURCE_LEN: usize = 32;
const ALIGN: usize = 64;
const SECTIONS: usize = 4;
/// A matrix `x · W` with int8 weights, one scale per output column, and a bias.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    /// `inputs × outputs`, row-major.
    pub weights: Vec<i8>,
    pub scales: Vec<f32>,
    pub bias: Vec<f32>,
}

/// Gain and bias of a layer norm.
#[derive(Clone, Debug, PartialEq)]
pub struct Norm {
    pub gain: Vec<f32>,
    pub bias: Vec<f32>,
}

/// An int8 embedding table with one scale per row.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// `rows × hidden`, row-major.
    pub values: Vec<i8>,
    pub scales: Vec<f32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Layer {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub output: Linear,
    pub attention_norm: Norm,
    pub up: Linear,
    pub down: Linear,
    pub output_norm: Norm,
}

/// Everything the file holds, as the converter gathers it.
#[derive(Clone, Debug, PartialEq)]
pub struct Parts {
    pub config: Config,
    pub words: Table,
    pub positions: Table,
    /// `type_vocab × hidden` f32.
    pub token_types: Vec<f32>,
    pub embedding_norm: Norm,
    pub layers: Vec<Layer>,
    /// WordPiece vocabulary: string and id (continuation pieces start with `##`).
    pub vocab: Vec<(String, u32)>,
    /// Tokens matched verbatim in the raw text before normalization (`[CLS]`, …).
    pub added: Vec<(String, u32)>,
}

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Where each matrix is within the matrices section, and where each vector is within the
/// vectors section (counted in f32), for a config: the one layout both the writer and the
/// reader follow.
#[derive(Clone, Debug, PartialEq)]
struct Layout {
    positions: usize,
    /// Per layer, the six matrices' byte offsets (query, key, value, output, up, down).
    matrices: Vec<[usize; 6]>,
    matrices_len: usize,
    position_scales: usize,
    token_types: usize,
    embedding_norm: [usize; 2],
    /// Per layer: scale and bias of each matrix, then both norms (gain, bias).
    vectors: Vec<LayerVectors>,
    vectors_len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct LayerVectors {
    scales: [usize; 6],
    biases: [usize; 6],
    attention_norm: [usize; 2],
    output_norm: [usize; 2],
}

/// Inputs and outputs of the six matrices of a layer.
fn shapes(c: &Config) -> [(usize, usize); 6] {
    let (h, f) = (c.hidden, c.ffn);
    [(h, h), (h, h), (h, h), (h, h), (h, f), (f, h)]
}

impl Layout {
    fn of(c: &Config) -> Layout {
        let mut at = 0;
        let positions = at;
        at = align(at + c.max_positions * c.hidden);
        let mut matrices = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            let mut m = [0; 6];
            for (slot, (i, o)) in m.iter_mut().zip(shapes(c)) {
                *slot = at;
                at = align(at + i * o);
            }
            matrices.push(m);
        }
        let matrices_len = at;
        let mut v = 0;
        let mut take = |n: usize| {
            let start = v;
            v += n;
            start
        };
        let position_scales = take(c.max_positions);
        let token_types = take(c.type_vocab * c.hidden);
        let embedding_norm = [take(c.hidden), take(c.hidden)];
        let mut vectors = Vec::with_capacity(c.layers);
        for _ in 0..c.layers {
            let mut scales = [0; 6];
            let mut biases = [0; 6];
            for (k, (_, o)) in shapes(c).into_iter().enumerate() {
                scales[k] = take(o);
                biases[k] = take(o);
            }
            let attention_norm = [take(c.hidden), take(c.hidden)];
            let output_norm = [take(c.hidden), take(c.hidden)];
            vectors.push(LayerVectors {
                scales,
                biases,
                attention_norm,
                output_norm,
            });
        }
        Layout {
            positions,
            matrices,
            matrices_len,
            position_scales,
            token_types,
            embedding_norm,
            vectors,
            vectors_len: v,
        }
    }
}

/// Bytes of one row of the words section.
pub fn word_row_bytes(hidden: usize) -> usize {
    hidden + 8
}

fn crc(bytes: &[u8]) -> u32 {
    if bytes.len() < 256 {
        crc32c::crc32c(bytes)
    } else {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
    }
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::Unsupported(what.into())
}

impl Parts {
    /// Why these parts do not make a file, if they do not: sizes that disagree with the
    /// config, ids outside the vocabulary, non-finite values.
    pub fn check(&self) -> Result<()> {
        let c = &self.config;
        c.check().map_err(unsupported)?;
        let want = |what: &str, len: usize, expected: usize| {
            if len == expected {
                Ok(())
            } else {
                Err(unsupported(format!(
                    "{what} has {len} values, expected {expected}"
                )))
            }
        };
        want(
            "the word table",
            self.words.values.len(),
            c.vocab * c.hidden,
        )?;
        want("the word scales", self.words.scales.len(), c.vocab)?;
        want(
            "the position table",
            self.positions.values.len(),
            c.max_positions * c.hidden,
        )?;
        want(
            "the position scales",
            self.positions.scales.len(),
            c.max_positions,
        )?;
        want(
            "the token-type table",
            self.token_types.len(),
            c.type_vocab * c.hidden,
        )?;
        want(
            "the embedding norm",
            self.embedding_norm.gain.len(),
            c.hidden,
        )?;
        want(
            "the embedding norm",
            self.embedding_norm.bias.len(),
            c.hidden,
        )?;
        want("the layers", self.layers.len(), c.layers)?;
        for (l, layer) in self.layers.iter().enumerate() {
            for (m, (i, o)) in layer.linears().into_iter().zip(shapes(c)) {
                want(&format!("layer {l}'s weights"), m.weights.len(), i * o)?;
                want(&format!("layer {l}'s scales"), m.scales.len(), o)?;
                want(&format!("layer {l}'s biases"), m.bias.len(), o)?;
            }
            for n in [&layer.attention_norm, &layer.output_norm] {
                want(&format!("layer {l}'s norm"), n.gain.len(), c.hidden)?;
                want(&format!("layer {l}'s norm"), n.bias.len(), c.hidden)?;
            }
        }
        if self.vocab.len() != c.vocab {
            return Err(unsupported(format!(
                "the tokenizer has {} words for a table of {} rows",
                self.vocab.len(),
                c.vocab
            )));
        }
        let mut seen = vec![false; c.vocab];
        for (word, id) in &self.vocab {
            let slot = seen.get_mut(*id as usize).ok_or_else(|| {
                unsupported(format!("token {word:?} has id {id}, past the table"))
            })?;
            if std::mem::replace(slot, true) {
                return Err(unsupported(format!("two tokens have id {id}")));
            }
        }
        for (word, id) in &self.added {
            if *id as usize >= c.vocab || word.is_empty() {
                return Err(unsupported(format!("added token {word:?} with id {id}")));
            }
        }
        if !self.floats().all(f32::is_finite) {
            return Err(unsupported("a weight is not a finite number"));
        }
        Ok(())
    }

    fn floats(&self) -> impl Iterator<Item = f32> + '_ {
        let tables = [
            &self.words.scales,
            &self.positions.scales,
            &self.token_types,
        ]
        .into_iter()
        .chain([&self.embedding_norm.gain, &self.embedding_norm.bias]);
        let layers = self.layers.iter().flat_map(|l| {
            l.linears()
                .into_iter()
                .flat_map(|m| [&m.scales, &m.bias])
                .chain([
                    &l.attention_norm.gain,
                    &l.attention_norm.bias,
                    &l.output_norm.gain,
                    &l.output_norm.bias,
                ])
        });
        tables.chain(layers).flat_map(|v| v.iter().copied())
    }
}

impl Layer {
    fn linears(&self) -> [&Linear; 6] {
        [
            &self.query,
            &self.key,
            &self.value,
            &self.output,
            &self.up,
            &self.down,
        ]
    }
}

fn put_f32s(out: &mut [u8], at: usize, values: &[f32]) {
    for (i, v) in values.iter().enumerate() {
        let o = (at + i) * 4;
        out[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
}

fn put_i8s(out: &mut [u8], at: usize, values: &[i8]) {
    for (o, &v) in out[at..at + values.len()].iter_mut().zip(values) {
        *o = v as u8;
    }
}

fn sections_of(parts: &Parts) -> [Vec<u8>; SECTIONS] {
    let c = &parts.config;
    let layout = Layout::of(c);
    let mut matrices = vec![0u8; layout.matrices_len];
    put_i8s(&mut matrices, layout.positions, &parts.positions.values);
    let mut vectors = vec![0u8; layout.vectors_len * 4];
    put_f32s(
        &mut vectors,
        layout.position_scales,
        &parts.positions.scales,
    );
    put_f32s(&mut vectors, layout.token_types, &parts.token_types);
    put_f32s(
        &mut vectors,
        layout.embedding_norm[0],
        &parts.embedding_norm.gain,
    );
    put_f32s(
        &mut vectors,
        layout.embedding_norm[1],
        &parts.embedding_norm.bias,
    );
    for (l, layer) in parts.layers.iter().enumerate() {
        let v = layout.vectors[l];
        for (k, m) in layer.linears().into_iter().enumerate() {
            put_i8s(&mut matrices, layout.matrices[l][k], &m.weights);
            put_f32s(&mut vectors, v.scales[k], &m.scales);
            put_f32s(&mut vectors, v.biases[k], &m.bias);
        }
        put_f32s(
            &mut vectors,
            v.attention_norm[0],
            &layer.attention_norm.gain,
        );
        put_f32s(
            &mut vectors,
            v.attention_norm[1],
            &layer.attention_norm.bias,
        );
        put_f32s(&mut vectors, v.output_norm[0], &layer.output_norm.gain);
        put_f32s(&mut vectors, v.output_norm[1], &layer.output_norm.bias);
    }
    let vocab = vocab_section(&parts.vocab, &parts.added);
    let rb = word_row_bytes(c.hidden);
    let mut words = vec![0u8; c.vocab * rb];
    for (r, row) in words.chunks_exact_mut(rb).enumerate() {
        put_i8s(
            row,
            0,
            &parts.words.values[r * c.hidden..(r + 1) * c.hidden],
        );
        row[c.hidden..c.hidden + 4].copy_from_slice(&parts.words.scales[r].to_le_bytes());
        let sum = crc(&row[..c.hidden + 4]);
        row[c.hidden + 4..].copy_from_slice(&sum.to_le_bytes());
    }
    [matrices, vectors, vocab, words]
}

fn vocab_section(vocab: &[(String, u32)], added: &[(String, u32)]) -> Vec<u8> {
    let mut sorted: Vec<&(String, u32)> = vocab.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = Vec::new();
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    out.extend_from_slice(&(added.len() as u32).to_le_bytes());
    let mut strings = Vec::new();
    for list in [sorted, added.iter().collect()] {
        let mut offsets = Vec::with_capacity(list.len() + 1);
        for (s, _) in &list {
            offsets.push(strings.len() as u32);
            strings.extend_from_slice(s.as_bytes());
        }
        offsets.push(strings.len() as u32);
        for o in offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        for (_, id) in &list {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out.extend_from_slice(&strings);
    out
}

/// Writes `parts` to `path` (created or truncated), with `source` naming what it was made
/// from. Not fsynced, and not atomic: the caller writes to a name of its own and renames
/// (the file is a cache of the model files, checked whenever it is opened).
pub fn write(path: &Path, parts: &Parts, source: &[u8; SOURCE_LEN]) -> Result<()> {
    parts.check()?;
    let sections = sections_of(parts);
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
    for (i, w) in parts.config.to_words().iter().enumerate() {
        header[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_le_bytes());
    }
    header[80..112].copy_from_slice(source);
    let mut at = HEADER_LEN;
    for (i, s) in sections.iter().enumerate() {
        let sum = if i == WORDS { 0 } else { crc(s) };
        let h = 112 + 24 * i;
        header[h..h + 8].copy_from_slice(&(at as u64).to_le_bytes());
        header[h + 8..h + 16].copy_from_slice(&(s.len() as u64).to_le_bytes());
        header[h + 16..h + 20].copy_from_slice(&sum.to_le_bytes());
        at = align(at + s.len());
    }
    let sum = crc(&header[..252]);
    header[252..256].copy_from_slice(&sum.to_le_bytes());
    let file = File::create(path).map_err(Error::io(path))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    w.write_all(&header).map_err(Error::io(path))?;
    let mut written = HEADER_LEN;
    for s in &sections {
        let pad = align(written) - written;
        w.write_all(&[0u8; ALIGN][..pad]).map_err(Error::io(path))?;
        w.write_all(s).map_err(Error::io(path))?;
        written += pad + s.len();
    }
    w.flush().map_err(Error::io(path))?;
    Ok(())
}

const MATRICES: usize = 0;
const VECTORS: usize = 1;
const VOCAB: usize = 2;
const WORDS: usize = 3;

/// A mapped, checked model file.
pub struct Model {
    path: PathBuf,
    map: Mmap,
    config: Config,
    source: [u8; SOURCE_LEN],
    /// Byte ranges of the four sections.
    sections: [(usize, usize); SECTIONS],
    layout: Layout,
    /// The vectors section, decoded (a few hundred kilobytes).
    vectors: Vec<f32>,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The matrix views of one layer.
#[derive(Clone, Copy)]
pub(crate) struct LinearRef<'a> {
    pub weights: &'a [u8],
    pub inputs: usize,
    pub outputs: usize,
    pub scales: &'a [f32],
    pub bias: &'a [f32],
}

#[derive(Clone, Copy)]
pub(crate) struct NormRef<'a> {
    pub gain: &'a [f32],
    pub bias: &'a [f32],
}

pub(crate) struct LayerRef<'a> {
    /// Query, key, value, attention output, up, down.
    pub linears: [LinearRef<'a>; 6],
    pub attention_norm: NormRef<'a>,
    pub output_norm: NormRef<'a>,
}

impl Model {
    /// Maps and checks the file at `path`: its header, and the checksums of every section
    /// but the word table's (whose rows are checked when read).
    pub fn open(path: &Path) -> Result<Model> {
        let file = File::open(path).map_err(Error::io(path))?;
        #[expect(
            unsafe_code,
            reason = "mapping a file that is replaced by rename, never written in place"
        )]
        // SAFETY: the file is only ever replaced by a rename, never written in place, so the
        // bytes under this view do not change.
        let map = unsafe { Mmap::map(&file) }.map_err(Error::io(path))?;
        let damaged = |why: String| Error::damaged(path, why);
        if map.len() < HEADER_LEN || &map[0..8] != MAGIC {
            return Err(damaged("not a model file (no AXOEMBED header)".into()));
        }
        let version = le_u32(&map, 8);
        if version != VERSION || le_u32(&map, 12) as usize != HEADER_LEN {
            return Err(damaged(format!(
                "format version {version}, this axocoatl reads {VERSION}"
            )));
        }
        if crc(&map[..252]) != le_u32(&map, 252) {
            return Err(damaged("the header does not check".into()));
        }
        let mut words = [0u32; 16];
        for (i, w) in words.iter_mut().enumerate() {
            *w = le_u32(&map, 16 + 4 * i);
        }
        let config = Config::from_words(&words);
        config.check().map_err(&damaged)?;
        let mut source = [0u8; SOURCE_LEN];
        source.copy_from_slice(&map[80..112]);
        let layout = Layout::of(&config);
        let expected = [
            layout.matrices_len,
            layout.vectors_len * 4,
            0,
            config.vocab * word_row_bytes(config.hidden),
        ];
        let mut sections = [(0usize, 0usize); SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            let h = 112 + 24 * i;
            let (at, len) = (le_u64(&map, h), le_u64(&map, h + 8));
            let end = at.checked_add(len).filter(|&e| e <= map.len() as u64);
            let (Some(end), Ok(at)) = (end, usize::try_from(at)) else {
                return Err(damaged(format!("section {i} lies past the file's end")));
            };
            if at % ALIGN != 0 || (expected[i] != 0 && len as usize != expected[i]) {
                return Err(damaged(format!("section {i} has the wrong place or size")));
            }
            *s = (at, end as usize);
            if i != WORDS && crc(&map[at..end as usize]) != le_u32(&map, h + 16) {
                return Err(damaged(format!("section {i} does not check")));
            }
        }
        let (vs, ve) = sections[VECTORS];
        let vectors: Vec<f32> = map[vs..ve]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let (ts, te) = sections[VOCAB];
        let tokenizer = Tokenizer::from_section(&map[ts..te], &config).map_err(damaged)?;
        Ok(Model {
            path: path.to_owned(),
            map,
            config,
            source,
            sections,
            layout,
            vectors,
            tokenizer,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The fingerprint the writer was given.
    pub fn source(&self) -> &[u8; SOURCE_LEN] {
        &self.source
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn vector(&self, at: usize, len: usize) -> &[f32] {
        &self.vectors[at..at + len]
    }

    fn matrix(&self, at: usize, len: usize) -> &[u8] {
        let s = self.sections[MATRICES].0 + at;
        &self.map[s..s + len]
    }

    pub(crate) fn layer(&self, l: usize) -> LayerRef<'_> {
        let c = &self.config;
        let v = self.layout.vectors[l];
        let m = &self.layout.matrices[l];
        let sh = shapes(c);
        let linears = std::array::from_fn(|k| {
            let (i, o) = sh[k];
            LinearRef {
                weights: self.matrix(m[k], i * o),
                inputs: i,
                outputs: o,
                scales: self.vector(v.scales[k], o),
                bias: self.vector(v.biases[k], o),
            }
        });
        let norm = |n: [usize; 2]| NormRef {
            gain: self.vector(n[0], c.hidden),
            bias: self.vector(n[1], c.hidden),
        };
        LayerRef {
            linears,
            attention_norm: norm(v.attention_norm),
            output_norm: norm(v.output_norm),
        }
    }

    pub(crate) fn embedding_norm(&self) -> NormRef<'_> {
        let h = self.config.hidden;
        NormRef {
            gain: self.vector(self.layout.embedding_norm[0], h),
            bias: self.vector(self.layout.embedding_norm[1], h),
        }
    }

    /// Row 0 of the token-type table (every token of a single text has type 0).
    pub(crate) fn token_type(&self) -> &[f32] {
        self.vector(self.layout.token_types, self.config.hidden)
    }

    /// Adds the dequantized position row `p` to `out`.
    pub(crate) fn add_position(&self, p: usize, out: &mut [f32]) {
        let h = self.config.hidden;
        let row = self.matrix(self.layout.positions + p * h, h);
        let scale = self.vectors[self.layout.position_scales + p];
        for (o, &q) in out.iter_mut().zip(row) {
            *o += f32::from(q as i8) * scale;
        }
    }

    /// Writes the dequantized word row `id` to `out`, after checking its CRC.
    pub(crate) fn word(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let h = self.config.hidden;
        let rb = word_row_bytes(h);
        let id = id as usize;
        if id >= self.config.vocab {
            return Err(Error::damaged(
                &self.path,
                format!("token id {id} is past the word table"),
            ));
        }
        let at = self.sections[WORDS].0 + id * rb;
        let row = &self.map[at..at + rb];
        if crc(&row[..h + 4]) != le_u32(row, h + 4) {
            return Err(Error::damaged(
                &self.path,
                format!("row {id} of the word table does not check"),
            ));
        }
        let scale = f32::from_le_bytes([row[h], row[h + 1], row[h + 2], row[h + 3]]);
        for (o, &q) in out.iter_mut().zip(&row[..h]) {
            *o = f32::from(q as i8) * scale;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "format_tests.rs"]
pub(crate) mod tests;
