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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_script_arguments_scripts_and_models_are_listed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        std::fs::write(dir.join("server.py"), "").expect("write");
        let config: Config = crate::config::read_yaml(
            "mcp_servers:\n  py: {command: python3, args: [server.py, -u, missing.py]}\n  bin: {command: ./bin/srv}\n  npx: {command: npx, args: [-y, some-server]}\nproviders:\n  s: {kind: script, script: replies.yaml}\n  l: {kind: local, model_path: /models/m.gguf}\n  o: {kind: ollama}\nagents: []\n",
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
                Path::new("/models/m.gguf"),
                dir.join("replies.yaml").as_path(),
            ]
        );
        assert!(files[0].1.contains("program of MCP server `bin`"));
        assert!(files[1].1.contains("`args:` of MCP server `py`"));
        assert!(files[2].1.contains("model file of provider `l`"));
        assert!(files[3].1.contains("script of provider `s`"));
    }
}
