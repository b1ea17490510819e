//! The files a configuration makes axocoatl run, or read as code, outside any sandbox: MCP
//! server programs and the files named in their arguments, a script provider's replies, a
//! local provider's model (whose chat template axocoatl runs). No agent tool may change
//! them, and commands find them read-only, as they find the configuration file itself.

use std::path::{Path, PathBuf};

use super::types::{Config, McpServerConfig, ProviderKind};

/// One such file: where it is, and what it is, for the refusal a tool gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedFile {
    /// Absolute when the configuration's directory is.
    pub path: PathBuf,
    /// E.g. "the program of MCP server `files`, which axocoatl starts outside the sandbox".
    pub what: String,
}

/// The program an MCP server's `command` starts: a name is looked up in `PATH`; a relative
/// path is taken from the configuration file's directory `dir`.
pub fn mcp_program(command: &str, dir: &Path) -> PathBuf {
    let p = Path::new(command);
    if command.contains('/') && p.is_relative() {
        dir.join(p)
    } else {
        p.to_path_buf()
    }
}

impl McpServerConfig {
    /// The program when `command` is a path rather than a name looked up in `PATH`.
    pub fn program_path(&self, dir: &Path) -> Option<PathBuf> {
        self.command
            .contains('/')
            .then(|| mcp_program(&self.command, dir))
    }

    /// The arguments that name existing files (the server starts in `dir`): the script a
    /// `python3` or `node` runs, a configuration it reads.
    pub fn file_args(&self, dir: &Path) -> Vec<(usize, PathBuf)> {
        self.args
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.is_empty() && !a.starts_with('-'))
            .map(|(i, a)| (i, dir.join(a)))
            .filter(|(_, p)| p.is_file())
            .collect()
    }
}

/// Every file `config` (read from a file in `dir`) makes axocoatl run or read as code.
pub fn trusted_files(config: &Config, dir: &Path) -> Vec<TrustedFile> {
    let mut out = Vec::new();
    for (name, server) in &config.mcp_servers {
        if let Some(program) = server.program_path(dir) {
            out.push(TrustedFile {
                path: program,
                what: format!(
                    "the program of MCP server `{name}`, which axocoatl starts outside the sandbox"
                ),
            });
        }
        for (_, arg) in server.file_args(dir) {
            out.push(TrustedFile {
                path: arg,
                what: format!(
                    "a file in the `args:` of MCP server `{name}`, which axocoatl starts outside the sandbox"
                ),
            });
        }
    }
    if let Some(hook) = &config.on_approval_request {
        let what = "`on_approval_request`, which axocoatl runs outside the sandbox";
        if let Some(program) = hook.program_path(dir) {
            out.push(TrustedFile {
                path: program,
                what: format!("the program of {what}"),
            });
        }
        for (_, arg) in hook.file_args(dir) {
            out.push(TrustedFile {
                path: arg,
                what: format!("a file in the `args:` of {what}"),
            });
        }
    }
    for (name, provider) in &config.providers {
        let (file, what) = match provider.kind {
            ProviderKind::Script => (&provider.script, "the script of provider"),
            ProviderKind::Local => (&provider.model_path, "the model file of provider"),
            _ => continue,
        };
        if let Some(file) = file {
            out.push(TrustedFile {
                path: dir.join(file),
                what: format!("{what} `{name}`, which axocoatl reads as the model"),
            });
        }
    }
    out
}

/// The model files axocoatl reads wherever the configuration leaves them to the
/// environment: the model of a `local` provider without `model_path` (`AXOCOATL_MODEL`),
/// as a file; and, as directories, the model cache (`${XDG_CACHE_HOME:-~/.cache}/axocoatl/
/// models`: the default local model, its ready-to-run copies, the default embedder) and the
/// embedder's directory `embed_dir` when it lies elsewhere (`AXOCOATL_EMBED_DIR`).
/// `(files, directories)`.
pub fn model_places(
    env: &dyn Fn(&str) -> Option<String>,
    embed_dir: Option<&Path>,
) -> (Vec<TrustedFile>, Vec<TrustedFile>) {
    let env = |key: &str| env(key).filter(|v| !v.trim().is_empty());
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    if let Some(model) = env("AXOCOATL_MODEL") {
        files.push(TrustedFile {
            path: PathBuf::from(model),
            what: "the model file of the `local` provider (AXOCOATL_MODEL), which axocoatl reads as the model".into(),
        });
    }
    let cache =
        super::resolve::local_ready_dir(&env).and_then(|r| r.parent().map(Path::to_path_buf));
    if let Some(cache) = &cache {
        dirs.push(TrustedFile {
            path: cache.clone(),
            what: "the model cache (the local model, its ready-to-run copies, the embedder), which axocoatl reads as models".into(),
        });
    }
    if let Some(dir) = embed_dir.filter(|d| cache.as_ref().is_none_or(|c| !d.starts_with(c))) {
        dirs.push(TrustedFile {
            path: dir.to_path_buf(),
            what: "the embedder's directory, whose files axocoatl runs as semantic memory's model"
                .into(),
        });
    }
    (files, dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_script_arguments_scripts_and_models_are_listed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::write(dir.join("server.py"), "").expect("write");
        std::fs::write(dir.join("hook.cfg"), "").expect("write");
        let config: Config = crate::config::read_yaml(
            "mcp_servers:\n  py: {command: python3, args: [server.py, -u, missing.py]}\n  bin: {command: ./bin/srv}\n  npx: {command: npx, args: [-y, some-server]}\nproviders:\n  s: {kind: script, script: replies.yaml}\n  l: {kind: local, model_path: /models/m.gguf}\n  o: {kind: ollama}\nagents: []\non_approval_request: {command: ./notify.sh, args: [hook.cfg]}\n",
            "axocoatl.yaml",
        )
        .expect("config");
        let files: Vec<(PathBuf, String)> = trusted_files(&config, dir)
            .into_iter()
            .map(|f| (f.path, f.what))
            .collect();
        let paths: Vec<&Path> = files.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(
            paths,
            [
                dir.join("./bin/srv").as_path(),
                dir.join("server.py").as_path(),
                dir.join("./notify.sh").as_path(),
                dir.join("hook.cfg").as_path(),
                Path::new("/models/m.gguf"),
                dir.join("replies.yaml").as_path(),
            ]
        );
        assert!(files[0].1.contains("program of MCP server `bin`"));
        assert!(files[1].1.contains("`args:` of MCP server `py`"));
        assert!(files[2].1.contains("program of `on_approval_request`"));
        assert!(files[3].1.contains("`args:` of `on_approval_request`"));
        assert!(files[4].1.contains("model file of provider `l`"));
        assert!(files[5].1.contains("script of provider `s`"));
    }

    #[test]
    fn models_found_through_the_environment_are_listed() {
        let (files, dirs) = model_places(
            &|k| match k {
                "HOME" => Some("/home/u".into()),
                "AXOCOATL_MODEL" => Some("/srv/m.gguf".into()),
                _ => None,
            },
            Some(Path::new("/srv/embed")),
        );
        let paths = |l: &[TrustedFile]| l.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
        assert_eq!(paths(&files), [PathBuf::from("/srv/m.gguf")]);
        assert_eq!(
            paths(&dirs),
            [
                PathBuf::from("/home/u/.cache/axocoatl/models"),
                PathBuf::from("/srv/embed")
            ]
        );
        // The default embedder is in the cache already.
        let (files, dirs) = model_places(
            &|k| (k == "HOME").then(|| "/home/u".into()),
            Some(Path::new("/home/u/.cache/axocoatl/models/all-MiniLM-L6-v2")),
        );
        assert!(files.is_empty());
        assert_eq!(
            paths(&dirs),
            [PathBuf::from("/home/u/.cache/axocoatl/models")]
        );
    }
}
