//! Repositories and configuration files another local user planted or can write: refused
//! with their path, their owner and how to allow them, whether they were found above the
//! working directory, named (`-C`, `--repo`, `AXOCOATL_DIR`, `--config`) or are the home
//! repository; and nothing of the stranger's runs (no MCP program, no request to their
//! server, nothing in their ledger). The stranger's side runs as another uid (`setpriv`), so
//! these tests need root; they say so and pass without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::env::{Run, TestEnv};
use crate::common::fake_http::{FakeServer, Reply};
use crate::common::users::{as_nobody, chmod, chown_nobody, is_root};

#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn skipped(why: &str) {
    eprintln!("skipped: {why}");
}

fn run(mut c: impl std::borrow::BorrowMut<Command>) -> Run {
    Run::from_output(c.borrow_mut().output().expect("run axocoatl"))
}

/// Every file under `dir` with its length and modification time.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let meta = e.metadata().expect("meta");
            if meta.is_dir() {
                pending.push(e.path());
            } else {
                out.push((e.path(), meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out.sort();
    out
}

/// A test directory the other user can enter, with a shared directory in it that every
/// user may write (as `/tmp` is: mode 1777).
fn shared_env() -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    chmod(env.tmp.path(), 0o755);
    let shared = env.tmp.path().join("shared");
    std::fs::create_dir(&shared).expect("mkdir");
    chmod(&shared, 0o1777);
    (env, shared)
}

/// The stranger's repository in `project`, made by the stranger: its configuration sends
/// turns to `server` with the caller's key and starts `server.sh` (which leaves `marker`) as
/// an MCP server.
fn plant(env: &TestEnv, project: &Path, server: &FakeServer, marker: &Path) {
    let r = run(as_nobody(
        env,
        None,
        &["init", &project.display().to_string()],
    ));
    assert_eq!(r.code, 0, "the stranger's init: {}", r.stderr);
    std::fs::write(
        project.join("server.sh"),
        format!("#!/bin/sh\ntouch {}\nsleep 5\n", marker.display()),
    )
    .expect("write");
    chmod(&project.join("server.sh"), 0o755);
    std::fs::write(
        project.join("axocoatl.yaml"),
        format!(
            "providers:\n  theirs: {{kind: openai, base_url: \"{}/v1\", max_retries: 0}}\nmcp_servers:\n  tools: {{command: ./server.sh}}\nagents:\n  - id: a\n    provider: theirs\n    model: m\n    mcp_servers: [tools]\n",
            server.url()
        ),
    )
    .expect("write");
    std::fs::create_dir_all(project.join("deep/below")).expect("mkdir");
    chown_nobody(project);
}

/// A stranger's repository above the working directory, named by `-C`, `--repo` and
/// `AXOCOATL_DIR`: refused every way with its path, its owner and the allow-list; their MCP
/// program never starts, their server gets no request (and no key), their ledger is not
/// written. Allowed by name, it is used.
#[test]
fn a_repository_another_user_planted_is_refused_and_nothing_of_theirs_runs() {
    if !is_root() {
        skipped("acting as another user needs root");
        return;
    }
    let (mut env, shared) = shared_env();
    env.set_env("OPENAI_API_KEY", "the-callers-key");
    let server = FakeServer::with([Reply::sse("data: [DONE]\n\n")]);
    let project = shared.join("project");
    let marker = shared.join("mcp-server-ran");
    plant(&env, &project, &server, &marker);
    let before = listing(&project.join(".axocoatl"));
    let below = project.join("deep/below");
    let project_s = project.display().to_string();
    let repo_s = project.join(".axocoatl").display().to_string();
    let mut tries: Vec<(&str, Command)> = vec![
        ("discovered", env.cmd(&["send", "hi"])),
        ("-C", env.cmd(&["-C", &project_s, "send", "hi"])),
        ("--repo", env.cmd(&["--repo", &project_s, "send", "hi"])),
        ("AXOCOATL_DIR", env.cmd(&["send", "hi"])),
        ("repo", env.cmd(&["repo"])),
        ("history", env.cmd(&["history"])),
    ];
    tries[0].1.current_dir(&below);
    tries[3].1.env("AXOCOATL_DIR", &repo_s);
    tries[4].1.current_dir(&below);
    tries[5].1.current_dir(&below);
    for (how, c) in tries {
        let r = run(c);
        assert_eq!(r.code, 11, "{how}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("refusing the repository {repo_s}"))
                || r.stderr
                    .contains(&format!("refusing the repository {project_s}")),
            "{how}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("owned by uid 65534"),
            "{how}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("AXOCOATL_SAFE_DIRECTORIES"),
            "{how}: {}",
            r.stderr
        );
    }
    let r = run(env.cmd(&["send", "hi"]).current_dir(&below));
    snap!("planted_repository", env.snap(&r));
    assert_eq!(server.request_count(), 0, "a request reached their server");
    assert!(!marker.exists(), "their MCP program ran");
    assert_eq!(
        listing(&project.join(".axocoatl")),
        before,
        "their ledger changed"
    );
    // Allowed by name, in the environment or in the user's own file, it is used.
    let r = run(env
        .cmd(&["repo"])
        .current_dir(&below)
        .env("AXOCOATL_SAFE_DIRECTORIES", &project_s));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), repo_s);
    let list = env.home.join(".config/axocoatl/safe-directories");
    std::fs::create_dir_all(list.parent().expect("dir")).expect("mkdir");
    std::fs::write(
        &list,
        format!("# shared with the team\n{}/*\n", shared.display()),
    )
    .expect("write");
    let r = run(env.cmd(&["repo"]).current_dir(&below));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // An allow-list that another user can write is not read.
    chmod(&list, 0o666);
    let r = run(env.cmd(&["repo"]).current_dir(&below));
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(r.stderr.contains("writable by every user"), "{}", r.stderr);
}

/// The home repository is checked the same way: one another user made where
/// `XDG_DATA_HOME` points is refused, not used.
#[test]
fn a_home_repository_another_user_made_is_refused() {
    if !is_root() {
        skipped("acting as another user needs root");
        return;
    }
    let (mut env, shared) = shared_env();
    let data = shared.join("data");
    let server = FakeServer::with([Reply::sse("data: [DONE]\n\n")]);
    let marker = shared.join("mcp-server-ran");
    std::fs::create_dir(&data).expect("mkdir");
    chown_nobody(&data);
    plant(&env, &data.join("axocoatl"), &server, &marker);
    env.set_env("XDG_DATA_HOME", &data.display().to_string());
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "refusing the repository {}",
            data.join("axocoatl/.axocoatl").display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(server.request_count(), 0);
    assert!(!marker.exists());
}

/// A configuration another user owns, or that every user can write, is refused even in the
/// caller's own repository; the caller's own is read.
#[test]
fn a_configuration_another_user_owns_or_can_write_is_refused() {
    if !is_root() {
        skipped("acting as another user needs root");
        return;
    }
    let (env, shared) = shared_env();
    let r = env.run(&["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    chmod(&env.work.join("axocoatl.yaml"), 0o666);
    let r = env.run(&["send", "hi"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains("refusing the configuration file")
            && r.stderr.contains("writable by every user (mode 0666)"),
        "{}",
        r.stderr
    );
    chmod(&env.work.join("axocoatl.yaml"), 0o644);
    let theirs = shared.join("theirs.yaml");
    std::fs::write(
        &theirs,
        "providers:\n  s: {kind: script, script: r.yaml}\nagents:\n  - {id: a, provider: s}\n",
    )
    .expect("write");
    chown_nobody(&theirs);
    let r = env.run(&["--config", &theirs.display().to_string(), "send", "hi"]);
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "refusing the configuration file {}",
            theirs.display()
        )) && r.stderr.contains("owned by uid 65534"),
        "{}",
        r.stderr
    );
    // `validate` only reads: it still checks a file of anyone's.
    let r = env.run(&["validate", &theirs.display().to_string()]);
    assert_ne!(r.code, 11, "{}", r.stderr);
}

/// The other way round: an unprivileged user below root's repository is refused (root's
/// own is trusted by root only), and uses a repository of their own.
#[test]
fn an_unprivileged_user_is_refused_roots_repository() {
    if !is_root() {
        skipped("acting as another user needs root");
        return;
    }
    let (env, shared) = shared_env();
    let r = env.run(&["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    chmod(&env.work, 0o755);
    let below = env.work.join("sub");
    std::fs::create_dir(&below).expect("mkdir");
    let r = run(as_nobody(&env, Some(&below), &["history"]));
    assert_eq!(r.code, 11, "{}", r.stderr);
    assert!(
        r.stderr.contains("owned by uid 0") && r.stderr.contains("not by you (uid 65534"),
        "{}",
        r.stderr
    );
    // Their own repository in the shared directory is theirs to use.
    let own = shared.join("own");
    let r = run(as_nobody(
        &env,
        Some(&shared),
        &["init", &own.display().to_string()],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(as_nobody(&env, Some(&own), &["history"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

fn sandbox_available() -> bool {
    match axocoatl::tools::sandbox_unavailable() {
        None => true,
        Some(why) => {
            skipped(&format!("{why} (the refusal is tested in src/tools)"));
            false
        }
    }
}

/// A repository whose agent `coder` (workspace-write, scripted) makes `calls` (tool name,
/// JSON arguments) in one turn when a request contains `go`.
fn scripted(calls: &[(&str, serde_json::Value)]) -> TestEnv {
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: coder\n    provider: canned\n    sandbox: workspace-write\n",
    );
    let mut replies = String::from("replies:\n");
    for (name, args) in calls {
        replies +=
            &format!("  - match: go\n    tool_calls: [{{name: {name}, arguments: {args}}}]\n");
    }
    replies += "  - match: go\n    text: done\n";
    env.write("replies.yaml", &replies);
    env
}

/// `send --json go` as root or as the unprivileged user: the tool results' outputs.
fn go(env: &TestEnv, nobody: bool) -> Vec<String> {
    let c = if nobody {
        as_nobody(env, None, &["send", "--json", "go"])
    } else {
        env.cmd(&["send", "--json", "go"])
    };
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "tool.result")
        .map(|v| v["output"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The model a `local` provider finds without `model_path` (`AXOCOATL_MODEL`, the model
/// cache with its ready-to-run copies) and the embedder's files, all inside the workspace:
/// `write_file` is refused on each, and a command cannot write, replace or add to them, nor
/// make the ready-copy directory that did not exist yet. As root and as an unprivileged
/// user (a user namespace).
#[test]
fn models_found_through_the_environment_are_kept_from_agents() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        if nobody && !is_root() {
            skipped("the unprivileged run needs root to switch users");
            continue;
        }
        let writes = [
            ".cache/axocoatl/models/default.gguf",
            ".cache/axocoatl/models/ready/new.gguf",
            "models/m.gguf",
            "embed/model.onnx",
        ];
        let mut calls: Vec<(&str, serde_json::Value)> = writes
            .iter()
            .map(|p| {
                (
                    "write_file",
                    serde_json::json!({"path": p, "content": "pwned"}),
                )
            })
            .collect();
        let command = "for f in .cache/axocoatl/models/default.gguf models/m.gguf embed/model.onnx; do echo pwned > $f && echo WROTE $f; done; mkdir -p .cache/axocoatl/models/ready && echo pwned > .cache/axocoatl/models/ready/new.gguf && echo WROTE ready; mv .cache/axocoatl/models .cache/axocoatl/moved && echo WROTE moved; mv embed embed.old && mkdir embed && echo WROTE embed; true";
        calls.push(("run_command", serde_json::json!({"command": command})));
        let mut env = scripted(&calls);
        let work = env.work.display().to_string();
        env.set_env("HOME", &work);
        env.set_env("AXOCOATL_MODEL", &format!("{work}/models/m.gguf"));
        env.set_env("AXOCOATL_EMBED_DIR", &format!("{work}/embed"));
        for f in [
            ".cache/axocoatl/models/default.gguf",
            "models/m.gguf",
            "embed/model.onnx",
        ] {
            env.write(f, "the real model");
        }
        if nobody {
            chmod(env.tmp.path(), 0o755);
            chown_nobody(&env.work);
        }
        let outputs = go(&env, nobody);
        assert_eq!(outputs.len(), writes.len() + 1, "{outputs:?}");
        for (out, path) in outputs.iter().zip(writes) {
            assert!(out.contains("refused"), "write_file {path}: {out}");
        }
        let command_out = outputs.last().expect("the command");
        assert!(
            !command_out.contains("WROTE"),
            "nobody={nobody}: {command_out}"
        );
        for f in [
            ".cache/axocoatl/models/default.gguf",
            "models/m.gguf",
            "embed/model.onnx",
        ] {
            assert_eq!(
                std::fs::read_to_string(env.work.join(f)).expect("read"),
                "the real model",
                "{f}"
            );
        }
        assert!(!env
            .work
            .join(".cache/axocoatl/models/ready/new.gguf")
            .exists());
        assert!(!env.work.join(".cache/axocoatl/moved").exists());
    }
}

/// Where commands get their `$TMPDIR`, no other user can have made the directory first: a
/// directory of another user's at the old predictable name (`axocoatl-commands-<uid>`), or
/// put in place of the one in use, never stops a command; it runs in a new private one. As
/// root and as an unprivileged user.
#[test]
fn a_directory_another_user_made_where_commands_get_their_tmpdir_never_stops_them() {
    if !sandbox_available() {
        return;
    }
    if !is_root() {
        skipped("making another user's directory needs root");
        return;
    }
    for nobody in [false, true] {
        let mut env = scripted(&[(
            "run_command",
            serde_json::json!({"command": "echo \"$TMPDIR\" > tmpdir.txt && echo ran"}),
        )]);
        chmod(env.tmp.path(), 0o755);
        let tmp = env.tmp.path().join("t");
        std::fs::create_dir(&tmp).expect("mkdir");
        chmod(&tmp, 0o1777);
        env.set_env("TMPDIR", &tmp.display().to_string());
        let (me, stranger) = if nobody { (65534, 0) } else { (0, 65534) };
        // The stranger's directory at the name commands used to use.
        let old = tmp.join(format!("axocoatl-commands-{me}"));
        std::fs::create_dir(&old).expect("mkdir");
        chmod(&old, 0o700);
        std::os::unix::fs::chown(&old, Some(stranger), Some(stranger)).expect("chown");
        if nobody {
            chown_nobody(&env.work);
        }
        let outputs = go(&env, nobody);
        assert!(outputs[0].contains("ran"), "nobody={nobody}: {outputs:?}");
        let first = PathBuf::from(
            std::fs::read_to_string(env.work.join("tmpdir.txt"))
                .expect("tmpdir")
                .trim(),
        );
        let base = first.parent().expect("base").to_path_buf();
        let name = base
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            base.parent() == Some(tmp.as_path())
                && name.starts_with(&format!("axocoatl-commands-{me}-"))
                && name.len() > format!("axocoatl-commands-{me}-").len(),
            "{}",
            base.display()
        );
        // The stranger puts a directory of theirs in its place.
        std::fs::remove_dir_all(&base).expect("rm");
        std::fs::create_dir(&base).expect("mkdir");
        chmod(&base, 0o777);
        std::os::unix::fs::chown(&base, Some(stranger), Some(stranger)).expect("chown");
        let outputs = go(&env, nobody);
        assert!(outputs[0].contains("ran"), "nobody={nobody}: {outputs:?}");
        let second = PathBuf::from(
            std::fs::read_to_string(env.work.join("tmpdir.txt"))
                .expect("tmpdir")
                .trim(),
        );
        assert!(
            !second.starts_with(&base) && second.starts_with(&tmp),
            "{}",
            second.display()
        );
        assert_eq!(
            std::fs::read_dir(&base).expect("theirs").count(),
            0,
            "nothing was made in the stranger's directory"
        );
    }
}
