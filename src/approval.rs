//! Approvals, the parts every layer needs: which calls an agent's `approvals:` policy
//! holds for a person, what a turn that waits has saved to go on from, whether a turn's
//! records say it waits, and the `on_approval_request:` program. The commands over them
//! (`approvals`, `approve`) are in `crate::approvals`; the pause and the continuation are
//! the engine's.
//!
//! A turn waits from its `ApprovalRequested` records (appended durably, with the saved
//! state in an object) until each held call has started (`ToolStarted`, appended when it
//! runs or is answered with its denial): neither running nor ended, it holds its session
//! whether or not a process is alive, and ends only by its decisions, a stop or its
//! timeout.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axocoatl_store::ledger::record::{ApprovalDecided, Decision, Millis, TurnState, Usage};
use axocoatl_store::ledger::{Entry, Record};
use axocoatl_store::Repo;
use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{CkMessage, CkToolCall};
use crate::config::{split_mcp_tool_name, ApprovalHook, ApprovalPolicy, ApprovalRule, WRITE_TOOLS};
use crate::error::{Result, RuntimeError};
use crate::fold::{ApprovalView, TurnView};

/// An agent's `approvals:`, ready to match calls.
#[derive(Debug, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

#[derive(Debug)]
struct Rule {
    /// As the ledger and `show` name it.
    shown: String,
    tools: Tools,
    /// The command (`run_command`) or the path (file writes) must match.
    glob: Option<(Arg, GlobMatcher)>,
}

#[derive(Debug)]
enum Tools {
    Any,
    Named(String),
    /// Every tool of an MCP server.
    Server(String),
    /// `write_file` and `edit_file` (a `path:` rule without `tool:`).
    Writes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    Command,
    Path,
}

impl Policy {
    /// `policy` compiled. A pattern that does not compile (`validate` refuses it) holds
    /// every call of its tool: a mistake never lets a call through.
    pub fn of(policy: &ApprovalPolicy) -> Policy {
        let rules = match policy {
            ApprovalPolicy::Never => Vec::new(),
            ApprovalPolicy::Always => vec![Rule {
                shown: "always".into(),
                tools: Tools::Any,
                glob: None,
            }],
            ApprovalPolicy::Rules(rules) => rules.iter().map(Rule::of).collect(),
        };
        Policy { rules }
    }

    /// Whether some call may wait.
    pub fn asks(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The rule that holds a call of `tool` with `arguments`, if one does. Paths are
    /// matched as given (without `.` parts) and as `resolve` finds them in the workspace
    /// (through symlinks, relative to its root), so neither spelling slips past a rule.
    pub fn rule_for(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        resolve: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        self.rules
            .iter()
            .find(|r| r.holds(tool, arguments, resolve))
            .map(|r| r.shown.clone())
    }
}

impl Rule {
    fn of(rule: &ApprovalRule) -> Rule {
        let tools = match (rule.tool.as_deref(), &rule.command, &rule.path) {
            (Some("*"), _, _) => Tools::Any,
            (Some(t), _, _) if crate::catalog::is_known_tool(t) => Tools::Named(t.to_owned()),
            (Some(t), _, _) => match t.split_once('.') {
                Some((server, "*")) => Tools::Server(server.to_owned()),
                Some((server, name)) => Tools::Named(crate::config::mcp_tool_name(server, name)),
                None => Tools::Named(t.to_owned()),
            },
            (None, Some(_), _) => Tools::Named("run_command".into()),
            (None, None, _) => Tools::Writes,
        };
        let glob = match (&rule.command, &rule.path) {
            (Some(c), _) => Some((Arg::Command, c)),
            (None, Some(p)) => Some((Arg::Path, p)),
            (None, None) => None,
        }
        .map(|(arg, pattern)| {
            let compiled = GlobBuilder::new(pattern)
                .literal_separator(arg == Arg::Path)
                .build()
                .or_else(|_| GlobBuilder::new("*").build());
            (arg, compiled.map(|g| g.compile_matcher()))
        });
        Rule {
            shown: rule.to_string(),
            tools,
            glob: glob.and_then(|(arg, m)| m.ok().map(|m| (arg, m))),
        }
    }

    fn holds(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
        resolve: &dyn Fn(&str) -> Option<String>,
    ) -> bool {
        let named = match &self.tools {
            Tools::Any => true,
            Tools::Named(n) => n == tool,
            Tools::Server(s) => split_mcp_tool_name(tool).is_some_and(|(server, _)| server == s),
            Tools::Writes => WRITE_TOOLS.contains(&tool),
        };
        if !named {
            return false;
        }
        let Some((arg, glob)) = &self.glob else {
            return true;
        };
        let key = match arg {
            Arg::Command => "command",
            Arg::Path => "path",
        };
        let Some(text) = arguments.get(key).and_then(|v| v.as_str()) else {
            // Arguments without it (or not an object): the tool refuses them, but what it
            // would do cannot be told, so the call waits.
            return true;
        };
        match arg {
            Arg::Command => command_forms(text).iter().any(|c| glob.is_match(c)),
            Arg::Path => path_forms(text, resolve).iter().any(|p| glob.is_match(p)),
        }
    }
}

/// A command as a pattern sees it: whole, and each of its pieces between shell separators
/// (`;`, `&&`, `||`, `|`, `&`, newlines, `$(`, backquotes), each with its runs of blanks
/// made one space. A pattern is a convenience, not a boundary: a command can always be
/// spelled so that no pattern but `*` matches it (list `run_command` to hold them all).
fn command_forms(command: &str) -> Vec<String> {
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut forms = vec![squeeze(command)];
    let pieces = command.split([';', '&', '|', '\n', '`', '(', ')']);
    for piece in pieces {
        let p = squeeze(piece.trim_start_matches('$'));
        if !p.is_empty() && !forms.contains(&p) {
            forms.push(p);
        }
    }
    forms
}

/// A path as a pattern sees it: as given without `.` parts and repeated slashes, and as
/// it resolves in the workspace.
fn path_forms(path: &str, resolve: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let lexical: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let mut forms = vec![lexical.join("/")];
    if let Some(resolved) = resolve(path) {
        if !forms.contains(&resolved) {
            forms.push(resolved);
        }
    }
    forms
}

/// The version of [`Saved`] this build writes.
pub const SAVED_VERSION: u32 = 1;

/// What a waiting turn goes on from: stored as an object (durable before the request that
/// names it is appended), JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub version: u32,
    /// The turn's messages after its user message, as the model saw them.
    pub messages: Vec<CkMessage>,
    /// The calls of the last response that have not run, in order.
    pub pending: Vec<CkToolCall>,
    /// The visible output so far.
    pub output: String,
    pub usage: Usage,
    /// Tokens counted against `per_execution` so far.
    pub budget_used: u64,
    /// Model calls made so far (against `max_steps`).
    pub steps: u32,
    /// The cache tokens and cost of the calls so far (the turn's own, and its workers'),
    /// and the cost counted against `per_execution_usd` (absent from a state saved by a
    /// build before costs were kept: none).
    #[serde(default)]
    pub detail: axocoatl_store::ledger::record::UsageDetail,
    #[serde(default)]
    pub handed: axocoatl_store::ledger::record::UsageDetail,
    #[serde(default)]
    pub cost_used: u64,
}

impl Saved {
    /// Stores it; returns the object's name.
    pub fn store(&self, repo: &Repo) -> Result<String> {
        let bytes = serde_json::to_vec(self).map_err(|e| {
            RuntimeError::Internal(format!("cannot encode a waiting turn's state: {e}"))
        })?;
        Ok(repo.objects().put(&bytes)?)
    }

    /// Reads the state `object` holds.
    pub fn load(repo: &Repo, object: &str) -> Result<Saved> {
        let bytes = repo.objects().get(object)?;
        let saved: Saved = serde_json::from_slice(&bytes).map_err(|e| RuntimeError::Invalid {
            message: format!(
                "the saved state of the waiting turn (object {object}) does not read: {e}"
            ),
            hint: crate::error::Next::Fsck,
        })?;
        if saved.version != SAVED_VERSION {
            return Err(RuntimeError::NotSupported(format!(
                "a waiting turn saved by another build (state version {})",
                saved.version
            )));
        }
        Ok(saved)
    }
}

/// One turn folded from its records as they are read under the ledger's append lock (what
/// [`axocoatl_store::ledger::Ledger::append_decided`] hands its caller): whether it waits,
/// the calls it holds, and what its model calls reported. The fold decides what each
/// record means ([`crate::fold`]); this answers the questions a decision, a stop or an
/// expiry asks of it before appending.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnWait(Option<TurnView>);

impl TurnWait {
    /// The turn `turn` folded from `entries` (records of other turns are skipped).
    pub fn of(turn: &str, entries: impl IntoIterator<Item = Entry>) -> TurnWait {
        TurnWait(crate::fold::fold_turns(entries, |id| id == turn).pop())
    }

    /// Its begin record was read.
    pub fn begun(&self) -> bool {
        self.0.is_some()
    }

    /// How it ended, when its terminal record was read.
    pub fn ended(&self) -> Option<TurnState> {
        self.0.as_ref().and_then(TurnView::terminal)
    }

    /// The calls held for approval, in the order they were requested.
    pub fn held(&self) -> &[ApprovalView] {
        self.0.as_ref().map_or(&[], |t| &t.approvals)
    }

    /// What its model calls reported (for the terminal record of a turn ended while it
    /// waits).
    pub fn usage(&self) -> Usage {
        self.0.as_ref().map_or(Usage::ZERO, TurnView::calls_usage)
    }

    /// Begun, not ended, and a held call has not started: the turn waits.
    pub fn waiting(&self) -> bool {
        self.begun() && self.ended().is_none() && self.pending().next().is_some()
    }

    /// The held calls that have not started, in order.
    pub fn pending(&self) -> impl DoubleEndedIterator<Item = &ApprovalView> {
        self.held().iter().filter(|a| !a.started)
    }

    /// The pending calls no one has decided yet.
    pub fn undecided(&self) -> impl DoubleEndedIterator<Item = &ApprovalView> {
        self.pending().filter(|a| a.decision.is_none())
    }

    /// When the first undecided request expires, if one does.
    pub fn expires_at(&self) -> Option<Millis> {
        self.undecided().filter_map(|a| a.expires_at).min()
    }

    /// The records that end the turn because an undecided request expired at `now`: one
    /// `Expired` decision per undecided request, then `failed`.
    pub fn expiry(&self, now: Millis) -> Option<Vec<Record>> {
        let t = self.0.as_ref()?;
        let first = self
            .undecided()
            .filter(|a| a.expires_at.is_some_and(|e| e <= now))
            .min_by_key(|a| a.expires_at)?;
        let waited = first
            .expires_at
            .unwrap_or(now)
            .saturating_sub(first.requested_at)
            .max(0)
            / 1000;
        let mut records: Vec<Record> = self
            .undecided()
            .map(|a| {
                Record::ApprovalDecided(ApprovalDecided {
                    turn: t.turn.clone(),
                    session: t.session.clone(),
                    call_id: a.call_id.clone(),
                    decision: Decision::Expired,
                    reason: None,
                    by: "approval_timeout".into(),
                    pid: std::process::id(),
                    at: now,
                })
            })
            .collect();
        records.push(Record::TurnEnded(
            axocoatl_store::ledger::record::TurnEnded {
                turn: t.turn.clone(),
                session: t.session.clone(),
                state: TurnState::Failed,
                error: Some(format!(
                    "no decision on call {} ({}) within {} (approval_timeout)",
                    first.call_id,
                    first.tool,
                    crate::config::ApprovalTimeout {
                        secs: waited as u64
                    }
                    .text()
                )),
                usage: self.usage(),
                at: now,
            },
        ));
        Some(records)
    }
}

/// Who answers, for the decision's record: the user's name and how they answered
/// (`alice via approve`).
pub fn answered_by(channel: &str) -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "a user without $USER".to_owned());
    format!("{user} via {channel}")
}

/// The most of the program's stderr kept for the warning it may cause.
const HOOK_OUTPUT: u64 = 4096;

/// Runs the `on_approval_request:` program with `request` (JSON) on its stdin, in the
/// configuration's directory `dir`, outside any sandbox, with `PATH`, `HOME` and its own
/// `env:` as its whole environment, in a process group of its own that is killed after its
/// timeout. `Err` says why it did not succeed (a warning of the turn, never its failure).
pub fn run_hook(
    hook: &ApprovalHook,
    dir: &Path,
    request: &serde_json::Value,
) -> std::result::Result<(), String> {
    let program = crate::config::mcp_program(&hook.command, dir);
    let mut cmd = Command::new(&program);
    cmd.args(&hook.args)
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for key in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.envs(&hook.env);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| {
        format!(
            "on_approval_request: cannot start {}: {e}",
            program.display()
        )
    })?;
    let pid = child.id() as libc::pid_t;
    if let Some(mut stdin) = child.stdin.take() {
        // Written beside the wait: a request larger than the pipe holds, to a program that
        // does not read it, must not outlast the timeout. A program that does not read its
        // stdin is fine: the write may fail.
        let bytes = serde_json::to_vec(request).unwrap_or_default();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let said = Said::read(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(hook.timeout_secs());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    let Some(status) = status else {
        crate::child::signal_group(pid, libc::SIGKILL);
        let _ = child.wait();
        return Err(format!(
            "on_approval_request: {} did not end within {} s and was killed",
            program.display(),
            hook.timeout_secs()
        ));
    };
    // Whatever it left running in its group goes with it.
    crate::child::signal_group(pid, libc::SIGKILL);
    if status.success() {
        return Ok(());
    }
    let said = said.words(Duration::from_millis(500));
    let said = said.trim();
    Err(format!(
        "on_approval_request: {} ended with {status}{}",
        program.display(),
        if said.is_empty() {
            String::new()
        } else {
            format!(": {}", said.chars().take(300).collect::<String>())
        }
    ))
}

/// What the program writes to `stderr`, its first [`HOOK_OUTPUT`] bytes kept, the rest
/// drained so that it never blocks on a full pipe. [`Said::words`] gives what came.
struct Said {
    kept: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    closed: std::sync::mpsc::Receiver<()>,
}

impl Said {
    fn read(stderr: Option<std::process::ChildStderr>) -> Said {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, closed) = std::sync::mpsc::channel();
        let sink = kept.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            if let Some(mut e) = stderr {
                while let Ok(n @ 1..) = e.read(&mut buf) {
                    if let Ok(mut kept) = sink.lock() {
                        let room = (HOOK_OUTPUT as usize).saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
            let _ = tx.send(());
        });
        Said { kept, closed }
    }

    /// What came once the pipe closed, or after `grace`: a process that left the group
    /// (setsid) may hold it open.
    fn words(self, grace: Duration) -> String {
        let _ = self.closed.recv_timeout(grace);
        let kept = self.kept.lock().map(|k| k.clone()).unwrap_or_default();
        String::from_utf8_lossy(&kept).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(yaml: &str) -> Policy {
        Policy::of(&crate::config::read_yaml(yaml, "t.yaml").expect("policy"))
    }

    #[test]
    fn rules_hold_tools_commands_paths_and_mcp_servers() {
        let p = policy("[{command: 'git push*'}, {path: 'secret/**'}, notes.delete, 'web.*']");
        let none = |_: &str| None;
        let cmd = |c: &str| p.rule_for("run_command", &json!({ "command": c }), &none);
        assert_eq!(
            cmd("git push origin main").as_deref(),
            Some("command: git push*")
        );
        assert_eq!(
            cmd("make && git   push").as_deref(),
            Some("command: git push*")
        );
        assert_eq!(
            cmd("echo $(git push)").as_deref(),
            Some("command: git push*")
        );
        assert_eq!(cmd("git status"), None);
        let write = |t: &str, path: &str| p.rule_for(t, &json!({ "path": path }), &none);
        assert_eq!(
            write("write_file", "./secret//a/b").as_deref(),
            Some("path: secret/**")
        );
        assert_eq!(
            write("edit_file", "secret/x").as_deref(),
            Some("path: secret/**")
        );
        assert_eq!(write("write_file", "src/secret/x"), None);
        assert_eq!(write("read_file", "secret/x"), None);
        assert!(p
            .rule_for("mcp__notes__delete", &json!({}), &none)
            .is_some());
        assert!(p.rule_for("mcp__notes__list", &json!({}), &none).is_none());
        assert!(p.rule_for("mcp__web__fetch", &json!({}), &none).is_some());
        // Arguments that cannot be told apart wait.
        assert!(p
            .rule_for("run_command", &json!("git push"), &none)
            .is_some());
        // A path that resolves into a held directory (a symlink to it) is held too.
        let through_link = |p: &str| p.strip_prefix("link/").map(|rest| format!("secret/{rest}"));
        assert!(p
            .rule_for("write_file", &json!({"path": "link/key"}), &through_link)
            .is_some());
        assert!(!Policy::of(&ApprovalPolicy::Never).asks());
        assert_eq!(
            Policy::of(&ApprovalPolicy::Always)
                .rule_for("read_file", &json!({}), &none)
                .as_deref(),
            Some("always")
        );
    }

    fn hook_in(dir: &Path, script: &str, timeout_secs: u64) -> ApprovalHook {
        let path = dir.join("hook.sh");
        std::fs::write(&path, script).expect("write");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        ApprovalHook {
            command: "./hook.sh".into(),
            args: vec!["to-ops".into()],
            env: [("CHANNEL".to_owned(), "ops".to_owned())].into(),
            timeout_secs: Some(timeout_secs),
        }
    }

    #[test]
    fn the_hook_reads_the_request_on_stdin_and_its_failure_says_why() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let hook = hook_in(
            tmp.path(),
            "#!/bin/sh\ncat > got.json\necho \"$1 $CHANNEL\" > args.txt\n",
            10,
        );
        let request = json!({"turn": "t1", "calls": [{"tool": "run_command"}]});
        assert_eq!(run_hook(&hook, tmp.path(), &request), Ok(()));
        let got = std::fs::read_to_string(tmp.path().join("got.json")).expect("read");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&got).ok(),
            Some(request.clone())
        );
        let args = std::fs::read_to_string(tmp.path().join("args.txt")).expect("read");
        assert_eq!(args, "to-ops ops\n");
        let failing = hook_in(
            tmp.path(),
            "#!/bin/sh\necho no mail server >&2\nexit 3\n",
            10,
        );
        let why = run_hook(&failing, tmp.path(), &request).expect_err("fails");
        assert!(
            why.contains("ended with exit status: 3: no mail server"),
            "{why}"
        );
    }

    #[test]
    fn a_hook_that_neither_reads_a_large_request_nor_ends_is_killed_at_its_timeout() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Past what a pipe holds: a write that waited for the reader would last as long as
        // the program does.
        let hook = hook_in(
            tmp.path(),
            "#!/bin/sh\necho $$ > hook.pid\nexec sleep 30\n",
            1,
        );
        let request = json!({"turn": "t1", "arguments": "x".repeat(1 << 20)});
        let why = run_hook(&hook, tmp.path(), &request).expect_err("killed");
        assert!(
            why.contains("did not end within 1 s and was killed"),
            "{why}"
        );
        if let Ok(pid) = std::fs::read_to_string(tmp.path().join("hook.pid")) {
            let proc = Path::new("/proc").join(pid.trim());
            assert!(!proc.exists(), "the program was left running");
        }
    }

    #[test]
    fn a_failing_hook_whose_escaped_child_holds_its_stderr_is_not_waited_for() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let hook = hook_in(
            tmp.path(),
            "#!/bin/sh\nsetsid sh -c 'echo $$ > child.pid; exec sleep 30' &\nwhile [ ! -s child.pid ]; do sleep 0.05; done\necho no route >&2\nexit 2\n",
            10,
        );
        let why = run_hook(&hook, tmp.path(), &json!({})).expect_err("fails");
        assert!(why.contains("ended with exit status: 2: no route"), "{why}");
        let pid = std::fs::read_to_string(tmp.path().join("child.pid")).expect("pid");
        let proc = Path::new("/proc").join(pid.trim());
        // It returned while the child that left its group still runs.
        assert!(proc.exists(), "run_hook waited for the escaped child");
        let _ = std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status();
    }
}
