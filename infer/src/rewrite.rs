//! Writing GGUF files: a model's metadata and tensors, and the same model with its matrices
//! quantized to another format. The engine never writes a model file; tests and benchmarks
//! use this to make k-quant and Q8_0 files of a model they have in another format.

use std::io::Write;

use crate::gguf::{self, Gguf, Value};
use crate::kquant::{self, encode, KQuant};
use crate::quant::{self, Kind};
use crate::Error;

/// A tensor to write: its name, dimensions (innermost first) and GGML type.
#[derive(Clone, Debug)]
pub struct Planned {
    pub name: String,
    pub dims: Vec<u64>,
    pub kind: u32,
}

fn value_type(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Array(items) => {
            // An empty array keeps no element type: written as one of u8.
            let inner = items.first().map_or(0, value_type);
            out.extend_from_slice(&inner.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// The bytes a tensor of `dims` in GGML type `kind` takes.
pub fn tensor_bytes(dims: &[u64], kind: u32) -> Result<usize, Error> {
    let (bytes, per) = gguf::type_size(kind).ok_or_else(|| {
        Error::Unsupported(format!("{} has no known size", gguf::type_name(kind)))
    })?;
    let n: u64 = dims.iter().product();
    if dims.first().is_none_or(|d| !d.is_multiple_of(per as u64)) {
        return Err(Error::Format(format!(
            "rows of {dims:?} do not divide into {} blocks",
            gguf::type_name(kind)
        )));
    }
    Ok((n / per as u64) as usize * bytes)
}

/// Writes a GGUF file (version 3, tensors aligned to 32 bytes): `metadata` in its order,
/// then `tensors`, whose bytes `data(i)` gives for each in turn.
pub fn write_gguf(
    out: &mut impl Write,
    metadata: &[(String, Value)],
    tensors: &[Planned],
    mut data: impl FnMut(usize) -> Result<Vec<u8>, Error>,
) -> Result<(), Error> {
    const ALIGN: usize = 32;
    let mut head = b"GGUF".to_vec();
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    let metadata: Vec<_> = metadata
        .iter()
        .filter(|(k, _)| k != "general.alignment")
        .collect();
    head.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (key, value) in metadata {
        put_string(&mut head, key);
        head.extend_from_slice(&value_type(value).to_le_bytes());
        put_value(&mut head, value);
    }
    let mut offset = 0usize;
    let mut sizes = Vec::with_capacity(tensors.len());
    for t in tensors {
        put_string(&mut head, &t.name);
        head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            head.extend_from_slice(&d.to_le_bytes());
        }
        head.extend_from_slice(&t.kind.to_le_bytes());
        head.extend_from_slice(&(offset as u64).to_le_bytes());
        let size = tensor_bytes(&t.dims, t.kind)?;
        sizes.push(size);
        offset += size.div_ceil(ALIGN) * ALIGN;
    }
    head.resize(head.len().div_ceil(ALIGN) * ALIGN, 0);
    out.write_all(&head)?;
    for (i, &size) in sizes.iter().enumerate() {
        let bytes = data(i)?;
        if bytes.len() != size {
            return Err(Error::Format(format!(
                "tensor {} has {} bytes, not {size}",
                tensors[i].name,
                bytes.len()
            )));
        }
        out.write_all(&bytes)?;
        out.write_all(&vec![0; size.div_ceil(ALIGN) * ALIGN - size])?;
    }
    Ok(())
}

/// The values of a row of GGML type `kind`, widened to f32.
pub fn row_values(kind: u32, row: &[u8], out: &mut [f32]) -> Result<(), Error> {
    match KQuant::from_ggml(kind) {
        Some(k) => kquant::dequantize_row(k, row, out)
            .map_err(|b| Error::Format(format!("block {} is damaged", b.index))),
        None => quant::widen_row(kind, row, out)
            .ok_or_else(|| Error::Unsupported(gguf::type_name(kind))),
    }
}

/// Quantizes `values` (a multiple of the format's block) to the GGML type `kind`: Q8_0, or a
/// k-quant.
pub fn quantize(kind: u32, values: &[f32], out: &mut Vec<u8>) -> Result<(), Error> {
    match KQuant::from_ggml(kind) {
        Some(k) => encode::quantize_row(k, values, out),
        None if kind == Kind::Q8_0.ggml() => quant::quantize_q8_0(values, out),
        None => {
            return Err(Error::Unsupported(format!(
                "writing {} is not supported (Q8_0 and the k-quants are)",
                gguf::type_name(kind)
            )))
        }
    }
    Ok(())
}

/// What [`requantize`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requantized {
    /// Matrices written in the new format.
    pub converted: usize,
    /// Matrices kept as they were: their rows do not divide into the format's blocks (as
    /// llama.cpp keeps another format for them).
    pub kept: usize,
}

/// Writes the model `src` (the bytes of a GGUF file) with every matrix quantized to `kind`
/// (Q8_0 or a k-quant) whose rows divide into its blocks; everything else is copied.
pub fn requantize(src: &[u8], kind: u32, out: &mut impl Write) -> Result<Requantized, Error> {
    let g: Gguf = gguf::parse(src)?;
    let (_, per) =
        gguf::type_size(kind).ok_or_else(|| Error::Unsupported(gguf::type_name(kind)))?;
    let mut metadata: Vec<(String, Value)> = g.metadata.clone().into_iter().collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    let mut done = Requantized::default();
    let planned: Vec<Planned> = g
        .tensors
        .iter()
        .map(|t| {
            let matrix = t.dims.len() == 2;
            let fits = t.dims[0].is_multiple_of(per as u64);
            done.converted += usize::from(matrix && fits);
            done.kept += usize::from(matrix && !fits);
            Planned {
                name: t.name.clone(),
                dims: t.dims.clone(),
                kind: if matrix && fits { kind } else { t.kind },
            }
        })
        .collect();
    write_gguf(out, &metadata, &planned, |i| {
        let (t, p) = (&g.tensors[i], &planned[i]);
        let bytes = &src[t.start..t.start + t.len];
        if p.kind == t.kind {
            return Ok(bytes.to_vec());
        }
        if gguf::type_size(t.kind).is_none() {
            return Err(Error::Unsupported(format!(
                "tensor {} is stored as {}, which cannot be read",
                t.name,
                gguf::type_name(t.kind)
            )));
        }
        let cols = t.dims[0] as usize;
        let rows = (t.elements() / t.dims[0]) as usize;
        let mut values = vec![0f32; cols];
        let mut out = Vec::with_capacity(tensor_bytes(&p.dims, p.kind)?);
        for row in bytes.chunks_exact(t.len / rows) {
            row_values(t.kind, row, &mut values)?;
            quantize(p.kind, &values, &mut out)?;
        }
        Ok(out)
    })?;
    Ok(done)
}
