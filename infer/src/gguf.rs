//! GGUF files: the header, the metadata and the tensor directory, read from a mapped file.
//!
//! A model file is input from anywhere (a download, a path in a configuration), so nothing
//! in it is trusted: every count and length is checked against the bytes that remain before
//! anything is allocated for it, arrays nest at most four deep, and every tensor
//! must lie inside the file.

use std::collections::HashMap;

use crate::Error;

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;
/// Arrays of arrays deeper than this are refused (no model file nests more than two).
const MAX_DEPTH: usize = 4;
/// Dimensions a tensor may have.
const MAX_DIMS: usize = 4;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    /// The value as a `u32`, when it is a whole number that fits.
    pub fn to_u32(&self) -> Option<u32> {
        match *self {
            Value::U8(x) => Some(u32::from(x)),
            Value::U16(x) => Some(u32::from(x)),
            Value::U32(x) => Some(x),
            Value::U64(x) => u32::try_from(x).ok(),
            Value::I8(x) => u32::try_from(x).ok(),
            Value::I16(x) => u32::try_from(x).ok(),
            Value::I32(x) => u32::try_from(x).ok(),
            Value::I64(x) => u32::try_from(x).ok(),
            _ => None,
        }
    }

    /// The value as an `f32`, when it is a number.
    pub fn to_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(x) => Some(x),
            Value::F64(x) => Some(x as f32),
            _ => self.to_u32().map(|x| x as f32),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor of the directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Dimensions, innermost first (`dims[0]` is the length of a row).
    pub dims: Vec<u64>,
    /// The GGML type number.
    pub kind: u32,
    /// Where its bytes start, from the start of the file.
    pub start: usize,
    /// How many bytes it has (known for the types this crate reads, 0 for others).
    pub len: usize,
}

impl TensorInfo {
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// The parsed header of a GGUF file.
#[derive(Debug)]
pub struct Gguf {
    pub version: u32,
    pub metadata: HashMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
}

impl Gguf {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// A metadata string.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A metadata whole number.
    pub fn u32(&self, key: &str) -> Option<u32> {
        self.get(key).and_then(Value::to_u32)
    }
}

/// Bytes per block and elements per block of the GGML types whose size this crate knows
/// (the ones it runs, repacks or widens); `None` for the others.
pub fn type_size(kind: u32) -> Option<(usize, usize)> {
    Some(match kind {
        0 => (4, 1),   // F32
        1 => (2, 1),   // F16
        2 => (18, 32), // Q4_0
        3 => (20, 32), // Q4_1
        6 => (22, 32), // Q5_0
        7 => (24, 32), // Q5_1
        8 => (34, 32), // Q8_0
        10..=15 => {
            // Q2_K .. Q8_K: super-blocks of 256 values.
            let k = crate::kquant::KQuant::from_ggml(kind)?;
            (k.block_bytes(), crate::kquant::QK_K)
        }
        30 => (2, 1), // BF16
        _ => return None,
    })
}

/// The name llama.cpp gives a GGML type number, for messages.
pub fn type_name(kind: u32) -> String {
    let name = match kind {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        8 => "Q8_0",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        28 => "F64",
        29 => "IQ1_M",
        30 => "BF16",
        _ => return format!("type {kind}"),
    };
    name.to_string()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(Error::Format(format!(
                "the file ends inside {what} (at byte {})",
                self.at
            )));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of things of at least `min_size` bytes each, checked against what remains.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, Error> {
        let n = self.u64(what)?;
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(min_size.max(1)) <= self.remaining() => Ok(n),
            _ => Err(Error::Format(format!(
                "{what} says {n}, more than the file holds"
            ))),
        }
    }

    fn string(&mut self, what: &str) -> Result<String, Error> {
        let n = self.count(1, what)?;
        let bytes = self.take(n, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Error::Format(format!("{what} is not UTF-8")))
    }

    fn value(&mut self, kind: u32, depth: usize, key: &str) -> Result<Value, Error> {
        Ok(match kind {
            0 => Value::U8(self.array::<1>(key)?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array(key)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => Value::Bool(self.array::<1>(key)?[0] != 0),
            8 => Value::String(self.string(key)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(Error::Format(format!(
                        "metadata `{key}` nests arrays more than {MAX_DEPTH} deep"
                    )));
                }
                let inner = self.u32(key)?;
                let min = match inner {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    other => {
                        return Err(Error::Format(format!(
                            "metadata `{key}` has values of unknown type {other}"
                        )))
                    }
                };
                let n = self.count(min, key)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(inner, depth + 1, key)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            other => {
                return Err(Error::Format(format!(
                    "metadata `{key}` has a value of unknown type {other}"
                )))
            }
        })
    }
}

/// Reads the header, metadata and tensor directory of the GGUF file `bytes`.
pub fn parse(bytes: &[u8]) -> Result<Gguf, Error> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4, "the magic number").ok() != Some(MAGIC.as_slice()) {
        return Err(Error::Format(
            "not a GGUF file (no GGUF magic number)".into(),
        ));
    }
    let version = r.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(Error::Format(format!(
            "GGUF version {version} is not supported (2 and 3 are)"
        )));
    }
    // A tensor entry is at least a name length, a dimension count, a type and an offset.
    let n_tensors = r.count(8 + 4 + 4 + 8, "the tensor count")?;
    let n_keys = r.count(8 + 4 + 1, "the metadata count")?;
    let mut metadata = HashMap::with_capacity(n_keys);
    for _ in 0..n_keys {
        let key = r.string("a metadata key")?;
        let kind = r.u32(&key)?;
        let value = r.value(kind, 0, &key)?;
        metadata.insert(key, value);
    }
    let alignment = match metadata.get("general.alignment") {
        Some(v) => match v.to_u32() {
            Some(a) if a > 0 && a.is_power_of_two() => u64::from(a),
            _ => {
                return Err(Error::Format(
                    "general.alignment is not a power of two".into(),
                ))
            }
        },
        None => DEFAULT_ALIGNMENT,
    };
    let mut raw = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = r.string("a tensor name")?;
        let n_dims = r.u32(&name)? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(Error::Format(format!(
                "tensor {name} has {n_dims} dimensions"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            dims.push(r.u64(&name)?);
        }
        let kind = r.u32(&name)?;
        let offset = r.u64(&name)?;
        raw.push((name, dims, kind, offset));
    }
    let data_start = (r.at as u64).div_ceil(alignment) * alignment;
    let mut tensors = Vec::with_capacity(raw.len());
    for (name, dims, kind, offset) in raw {
        let elements = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| Error::Format(format!("tensor {name} is too large")))?;
        let len = match type_size(kind) {
            Some((block_bytes, block_len)) => {
                if !dims[0].is_multiple_of(block_len as u64) {
                    return Err(Error::Format(format!(
                        "tensor {name}: rows of {} values do not divide into {} blocks of {block_len}",
                        dims[0],
                        type_name(kind)
                    )));
                }
                (elements / block_len as u64)
                    .checked_mul(block_bytes as u64)
                    .ok_or_else(|| Error::Format(format!("tensor {name} is too large")))?
            }
            None => 0,
        };
        let start = data_start
            .checked_add(offset)
            .filter(|s| {
                s.checked_add(len)
                    .is_some_and(|end| end <= bytes.len() as u64)
            })
            .ok_or_else(|| {
                Error::Format(format!(
                    "tensor {name} lies beyond the end of the file (the file is cut short?)"
                ))
            })?;
        tensors.push(TensorInfo {
            name,
            dims,
            kind,
            start: start as usize,
            len: len as usize,
        });
    }
    Ok(Gguf {
        version,
        metadata,
        tensors,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A GGUF writer for tests: metadata values and tensors of raw bytes.
    #[derive(Default)]
    pub struct Builder {
        meta: Vec<(String, u32, Vec<u8>)>,
        tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
    }

    fn string_bytes(s: &str) -> Vec<u8> {
        let mut out = (s.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(s.as_bytes());
        out
    }

    impl Builder {
        pub fn u32(mut self, key: &str, v: u32) -> Self {
            self.meta.push((key.into(), 4, v.to_le_bytes().to_vec()));
            self
        }
        pub fn f32(mut self, key: &str, v: f32) -> Self {
            self.meta.push((key.into(), 6, v.to_le_bytes().to_vec()));
            self
        }
        pub fn string(mut self, key: &str, v: &str) -> Self {
            self.meta.push((key.into(), 8, string_bytes(v)));
            self
        }
        pub fn strings(mut self, key: &str, v: &[&str]) -> Self {
            let mut bytes = 8u32.to_le_bytes().to_vec();
            bytes.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for s in v {
                bytes.extend(string_bytes(s));
            }
            self.meta.push((key.into(), 9, bytes));
            self
        }
        pub fn tensor(mut self, name: &str, dims: &[u64], kind: u32, data: Vec<u8>) -> Self {
            self.tensors.push((name.into(), dims.to_vec(), kind, data));
            self
        }
        pub fn build(self) -> Vec<u8> {
            let mut out = b"GGUF".to_vec();
            out.extend_from_slice(&3u32.to_le_bytes());
            out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
            out.extend_from_slice(&(self.meta.len() as u64).to_le_bytes());
            for (k, kind, v) in &self.meta {
                out.extend(string_bytes(k));
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(v);
            }
            let mut offset = 0u64;
            let mut offsets = Vec::new();
            for (name, dims, kind, data) in &self.tensors {
                out.extend(string_bytes(name));
                out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
                for d in dims {
                    out.extend_from_slice(&d.to_le_bytes());
                }
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
                offsets.push(offset);
                offset += (data.len() as u64).div_ceil(32) * 32;
            }
            while !out.len().is_multiple_of(32) {
                out.push(0);
            }
            for (_, _, _, data) in &self.tensors {
                out.extend_from_slice(data);
                while !out.len().is_multiple_of(32) {
                    out.push(0);
                }
            }
            out
        }
    }

    #[test]
    fn reads_what_the_builder_writes() {
        let bytes = Builder::default()
            .string("general.architecture", "llama")
            .u32("llama.block_count", 2)
            .strings("tokenizer.ggml.tokens", &["a", "b"])
            .tensor("w", &[4], 0, vec![0; 16])
            .build();
        let g = parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.string("general.architecture"), Some("llama"));
        assert_eq!(g.u32("llama.block_count"), Some(2));
        let t = g.tensor("w").unwrap_or_else(|| panic!("no tensor"));
        assert_eq!((t.len, t.dims.as_slice()), (16, [4u64].as_slice()));
        assert_eq!(&bytes[t.start..t.start + 16], &[0; 16]);
    }

    #[test]
    fn hostile_counts_and_cut_files_are_errors_not_allocations() {
        let good = Builder::default()
            .strings("k", &["x"])
            .tensor("w", &[32], 8, vec![0; 34])
            .build();
        // Every prefix of a good file that cuts its tensor short is refused cleanly.
        let end = parse(&good)
            .map(|g| g.tensors[0].start + g.tensors[0].len)
            .unwrap_or_else(|e| panic!("{e}"));
        for cut in 0..end {
            if let Ok(g) = parse(&good[..cut]) {
                panic!("a file cut at {cut} parsed: {g:?}");
            }
        }
        // A metadata count of 2^60.
        let mut huge = good.clone();
        huge[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(parse(&huge).is_err());
        // A tensor whose offset points past the end.
        let mut far = good;
        let name = [1, 0, 0, 0, 0, 0, 0, 0, b'w'];
        let entry = far
            .windows(name.len())
            .position(|w| w == name)
            .unwrap_or_else(|| panic!("no tensor entry"));
        // The name, one dimension count, one dimension and the type come before the offset.
        let at = entry + name.len() + 4 + 8 + 4;
        far[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(parse(&far).is_err());
    }
}
