//! The checkpoint envelope (see [`crate::checkpoint`]): magic, version, payload length and
//! checksum around a payload the runtime owns. Shared by the checkpoints and the reader of
//! pre-1.0 ones ([`crate::legacy::checkpoint`]), which meets older versions of it.

use crate::ledger::frame_le::{le_u32, le_u64};

pub const MAGIC: &[u8; 8] = b"AXOCKPT1";
pub const ENVELOPE_VERSION: u32 = 1;
pub const ENVELOPE_LEN: usize = 24;
/// Encoded snapshots above this are refused.
pub const MAX_CHECKPOINT: usize = 64 << 20;

pub fn encode_envelope(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ENVELOPE_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&ENVELOPE_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crate::ledger::frame_le::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Checks an envelope and returns its payload; the error says what is wrong.
pub fn decode_envelope(bytes: &[u8]) -> std::result::Result<&[u8], String> {
    let (version, payload) = split_envelope(bytes)?;
    if version != ENVELOPE_VERSION {
        return Err(format!(
            "envelope version {version}, this build reads {ENVELOPE_VERSION}"
        ));
    }
    Ok(payload)
}

/// Checks an envelope of any version (magic, length, checksum): its version and payload.
pub fn split_envelope(bytes: &[u8]) -> std::result::Result<(u32, &[u8]), String> {
    if bytes.len() < ENVELOPE_LEN || &bytes[0..8] != MAGIC {
        return Err("not a checkpoint (bad magic)".into());
    }
    let version = le_u32(&bytes[8..12]);
    let len = le_u64(&bytes[12..20]);
    if len != (bytes.len() - ENVELOPE_LEN) as u64 {
        return Err(format!(
            "payload length {len} but {} bytes follow the envelope",
            bytes.len() - ENVELOPE_LEN
        ));
    }
    let payload = &bytes[ENVELOPE_LEN..];
    if crate::ledger::frame_le::crc32c(payload) != le_u32(&bytes[20..24]) {
        return Err("payload checksum mismatch".into());
    }
    Ok((version, payload))
}
