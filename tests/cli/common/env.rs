//! Runs the real `axocoatl` binary in a temporary directory with a clean environment, a
//! pinned clock, and output normalized for snapshots (paths, ids, hashes, times).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

pub const PINNED_NOW: &str = "2026-01-02T03:04:05Z";

pub struct TestEnv {
    pub tmp: tempfile::TempDir,
    /// The working directory commands run in (holds `.axocoatl` after `init`).
    pub work: PathBuf,
    pub home: PathBuf,
    extra_env: Vec<(String, String)>,
    /// Commands made so far: each gets its own id seed, so a test's ids are the same on
    /// every run.
    commands: AtomicU64,
}

/// What a command printed and how it exited.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// What a command run by hand (through [`TestEnv::cmd`]) printed.
    pub fn from_output(o: Output) -> Run {
        Run::from(o)
    }

    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_axocoatl")
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let tmp = tempfile::Builder::new()
            .prefix("axotest")
            .tempdir()
            .expect("tempdir");
        let work = tmp.path().join("work");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::create_dir_all(&home).expect("mkdir");
        TestEnv {
            tmp,
            work,
            home,
            extra_env: Vec::new(),
            commands: AtomicU64::new(0),
        }
    }

    /// A repository with `config` as its axocoatl.yaml.
    pub fn with_config(config: &str) -> TestEnv {
        let env = TestEnv::new();
        let r = env.run(&["init"]);
        assert_eq!(r.code, 0, "init failed: {}", r.stderr);
        env.write("axocoatl.yaml", config);
        env
    }

    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.push((key.to_owned(), value.to_owned()));
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.work.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        p
    }

    pub fn repo(&self) -> PathBuf {
        self.work.join(".axocoatl")
    }

    /// A command with a clean environment: only PATH, HOME, a pinned clock, seeded ids, no
    /// color.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let n = self.commands.fetch_add(1, Ordering::Relaxed);
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.work)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("AXOCOATL_NOW", PINNED_NOW)
            .env("AXOCOATL_ID_SEED", format!("test-{n}"))
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null());
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        c
    }

    /// Like [`TestEnv::cmd`], with the address space limited to `kib` KiB (`ulimit -v`):
    /// a regression that makes a command allocate without bound fails its test instead of
    /// exhausting the machine.
    pub fn cmd_limited(&self, kib: u64, args: &[&str]) -> Command {
        // The clean environment of `cmd`, around a shell that sets the limit first.
        wrapped(
            &self.cmd(args),
            "sh",
            &["-c", &format!("ulimit -v {kib} && exec \"$0\" \"$@\"")],
        )
    }

    pub fn run_limited(&self, kib: u64, args: &[&str]) -> Run {
        Run::from(self.cmd_limited(kib, args).output().expect("run axocoatl"))
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().expect("run axocoatl"))
    }

    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        Run::from(
            self.cmd(args)
                .current_dir(dir)
                .output()
                .expect("run axocoatl"),
        )
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
        Run::from(child.wait_with_output().expect("wait"))
    }

    /// stdout, stderr and exit status together, normalized.
    pub fn snap(&self, r: &Run) -> String {
        format!(
            "exit: {}\n----- stdout -----\n{}----- stderr -----\n{}",
            r.code,
            self.normalize(&r.stdout),
            self.normalize(&r.stderr)
        )
    }

    pub fn normalize(&self, s: &str) -> String {
        let mut out = s.to_owned();
        let root = self.tmp.path().to_string_lossy().into_owned();
        if let Ok(canon) = self.tmp.path().canonicalize() {
            out = out.replace(&*canon.to_string_lossy(), "[ROOT]");
        }
        out = out.replace(&root, "[ROOT]");
        normalize_ids(&out)
    }
}

/// Replaces 64-hex hashes with [HASH], 16-hex ids with [ID1], [ID2], … (numbered in order
/// of first appearance, so a snapshot still says which id is which), times with [TIME] and
/// tool durations with [MS].
pub fn normalize_ids(s: &str) -> String {
    let hash = regex::Regex::new(r"\b[0-9a-f]{64}\b").expect("re");
    let id = regex::Regex::new(r"\b[0-9a-f]{16}\b").expect("re");
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").expect("re");
    let short_time = regex::Regex::new(r"\d{4}-\d\d-\d\d \d\d:\d\d").expect("re");
    let duration = regex::Regex::new(r#""duration_ms":\d+"#).expect("re");
    let s = duration.replace_all(s, r#""duration_ms":[MS]"#);
    let s = hash.replace_all(&s, "[HASH]");
    let mut seen: Vec<String> = Vec::new();
    let s = id.replace_all(&s, |c: &regex::Captures<'_>| {
        let n = match seen.iter().position(|x| *x == c[0]) {
            Some(i) => i + 1,
            None => {
                seen.push(c[0].to_owned());
                seen.len()
            }
        };
        format!("[ID{n}]")
    });
    let s = time.replace_all(&s, "[TIME]");
    short_time.replace_all(&s, "[TIME]").into_owned()
}

/// Snapshot settings shared by every test: files under the top-level `snapshots/`, named
/// `<module>__<name>.snap` (the module of this binary, without the binary's own name).
pub fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s
}

/// `cli::cli_turns` → `cli_turns`: the snapshot prefix of a test module.
pub fn snapshot_prefix(module_path: &str) -> String {
    let mut parts = module_path.split("::");
    parts.next();
    parts.collect::<Vec<_>>().join("__")
}

#[macro_export]
macro_rules! snap {
    ($name:expr, $value:expr) => {{
        let name = format!(
            "{}__{}",
            $crate::common::env::snapshot_prefix(module_path!()),
            $name
        );
        $crate::common::env::settings().bind(|| insta::assert_snapshot!(name, $value))
    }};
}

/// `cmd` run through `program` with `before` as its first arguments, then `cmd`'s program and
/// arguments: with `cmd`'s environment (and only it), its directory, and stdin from /dev/null.
/// A shell that sets a limit first, another user, a descriptor opened around it.
pub fn wrapped(cmd: &Command, program: &str, before: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(before).arg(cmd.get_program());
    with_the_rest_of(cmd, c)
}

/// `cmd` with `program` in place of its own: the same arguments, environment (and only it)
/// and directory, stdin from /dev/null.
pub fn with_program(cmd: &Command, program: &Path) -> Command {
    with_the_rest_of(cmd, Command::new(program))
}

/// `c` given `cmd`'s arguments, environment, directory, and stdin from /dev/null.
fn with_the_rest_of(cmd: &Command, mut c: Command) -> Command {
    c.args(cmd.get_args()).env_clear().stdin(Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        c.current_dir(dir);
    }
    c
}

/// Polls `condition` every 10 ms until it holds (a test waits for a condition, never for a
/// fixed time); panics naming `what` after 30 s.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Reads from `reader` until what was read contains `needle`; returns all of it.
pub fn read_until(reader: &mut impl std::io::Read, needle: &str) -> String {
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).expect("read");
        assert!(
            n > 0,
            "the stream ended after {} bytes without {:?}",
            seen.len(),
            needle.chars().take(40).collect::<String>()
        );
        // Only the new bytes and what a match could straddle need looking at.
        let from = seen.len().saturating_sub(needle.len());
        seen.extend_from_slice(&buf[..n]);
        if memchr_contains(&seen[from..], needle.as_bytes()) {
            return String::from_utf8_lossy(&seen).into_owned();
        }
    }
}

fn memchr_contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}
