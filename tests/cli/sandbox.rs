//! A command that tries to leave its sandbox, through the real binary: serve's and the
//! actors' control sockets, provider keys in its environment and in other processes'
//! `/proc/<pid>/environ`, descriptors it was not given, device nodes, and processes that
//! outlive their call (kill -9 of `send`, of an actor, of serve). Each as root and, where
//! the mechanism differs (a user namespace instead of none), as an unprivileged user
//! (`setpriv --reuid 65534`).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::env::{bin, wait_until, with_program, wrapped, TestEnv};
use crate::common::procs::{actor, json_lines, kill, marker, running_with, tool_results, Serve};

const NOBODY: u32 = 65534;

/// The python of the system (readable by every user, unlike a per-user install).
fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn skipped(why: &str) {
    eprintln!("skipped: {why}");
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

#[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// The script of a model that runs each command (one tool round each) when a request
/// contains `key`, then answers `done`.
fn replies(turns: &[(&str, Vec<String>)]) -> String {
    let mut s = String::from("replies:\n");
    for (key, commands) in turns {
        for c in commands {
            let args = json!({"command": c, "timeout_secs": 120});
            s += &format!(
                "  - match: {key}\n    tool_calls: [{{name: run_command, arguments: {args}}}]\n"
            );
        }
        s += &format!("  - match: {key}\n    text: done\n");
    }
    s
}

/// A repository whose agent `coder` (in `sandbox`) follows `turns`; `providers` is added to
/// the `providers:` section.
fn scripted(sandbox: &str, turns: &[(&str, Vec<String>)], providers: &str) -> TestEnv {
    let env = TestEnv::with_config(&format!(
        "providers:\n  canned: {{kind: script, script: replies.yaml}}\n{providers}agents:\n  - id: coder\n    provider: canned\n    sandbox: {sandbox}\n"
    ));
    env.write("replies.yaml", &replies(turns));
    env
}

/// Where [`reachable_bin`] puts the binary, inside the test directory.
const NOBODY_BIN_DIR: &str = "bin-for-nobody";

/// Hands the whole test directory to the unprivileged user (all but the binary of
/// [`reachable_bin`], which may share its inode with the build's and stays root's).
fn give_to_nobody(env: &TestEnv) {
    let status = Command::new("find")
        .arg(env.tmp.path())
        .arg("-path")
        .arg(env.tmp.path().join(NOBODY_BIN_DIR))
        .args(["-prune", "-o", "-exec", "chown"])
        .arg(format!("{NOBODY}:{NOBODY}"))
        .args(["{}", "+"])
        .status()
        .expect("chown");
    assert!(status.success());
    std::fs::set_permissions(env.tmp.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
}

/// The binary under test where the unprivileged user can run it. The build may lie where
/// only root may enter (as root, `.ci/run` builds under `~/.cache`), and serve starts its
/// actors from its own path: a hard link to it (a copy across file systems) in a
/// root-owned, world-readable directory of the test, removed with it.
fn reachable_bin(env: &TestEnv) -> std::path::PathBuf {
    let dir = env.tmp.path().join(NOBODY_BIN_DIR);
    let path = dir.join("axocoatl");
    if !path.exists() {
        std::fs::create_dir_all(&dir).expect("bin dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        if std::fs::hard_link(bin(), &path).is_err() {
            std::fs::copy(bin(), &path).expect("copy the binary");
        }
    }
    path
}

/// `cmd` run as the unprivileged user, with the same arguments, environment and directory.
fn as_nobody(cmd: &Command) -> Command {
    let nobody = NOBODY.to_string();
    let before = [
        "--reuid",
        &nobody,
        "--regid",
        &nobody,
        "--clear-groups",
        "--",
    ];
    wrapped(cmd, "setpriv", &before)
}

/// `env.cmd(args)`, as root or as the unprivileged user (running [`reachable_bin`]).
fn command(env: &TestEnv, nobody: bool, args: &[&str]) -> Command {
    let c = env.cmd(args);
    if nobody {
        as_nobody(&with_program(&c, &reachable_bin(env)))
    } else {
        c
    }
}

/// `agents status --json` (as the user serve runs as: root must not make files in a
/// repository that belongs to another user).
fn status(env: &TestEnv, nobody: bool) -> Vec<Value> {
    let r = command(env, nobody, &["agents", "status", "--json"])
        .output()
        .expect("status");
    assert!(r.status.success());
    json_lines(&String::from_utf8_lossy(&r.stdout))
}

/// The outputs of `send --json`'s tool results.
fn outputs(stdout: &str) -> Vec<String> {
    tool_results(&json_lines(stdout))
        .iter()
        .map(|r| r["output"].as_str().unwrap_or("").to_owned())
        .collect()
}

fn wait_gone(marker: &str, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !running_with(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = running_with(marker);
    for pid in &left {
        kill(*pid, libc::SIGKILL);
    }
    assert_eq!(left, Vec::<u32>::new(), "processes survived {after}");
}

/// Commands that start processes meant to outlive their call: in the group, in a new
/// session, double-forked; the last one keeps the call running.
fn lingering(m: &str) -> String {
    format!(
        "echo \"$TMPDIR\" > tmpdir.txt; sleep {m}1 & setsid sleep {m}2 & (setsid sh -c 'sleep {m}3 &' &); sleep {m}4"
    )
}

/// The sockets of `env`'s serve and actors, once its actor for `coder` is up.
fn control_sockets(env: &TestEnv, nobody: bool) -> Vec<std::path::PathBuf> {
    wait_until("the actor is up", || {
        actor(&status(env, nobody), "coder")["state"] == "idle"
    });
    let mut sockets = vec![env.repo().join("run/serve.sock")];
    for e in std::fs::read_dir(env.repo().join("run/actors")).expect("actors") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "sock") {
            sockets.push(p);
        }
    }
    assert!(sockets.len() >= 2, "{sockets:?}");
    sockets
}

/// A command tries serve's and the actors' sockets of its own repository (out of its view)
/// and another repository's serve (in view, by its path), asking each to widen the agent's
/// sandbox; neither answers, and both agents keep their sandbox.
#[test]
fn control_sockets_of_serve_and_actors_are_out_of_reach() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        let env = scripted(
            "workspace-write",
            &[(
                "knock",
                vec![format!(
                    "ls -A .axocoatl/run; {} probe.py $(cat sockets.txt)",
                    python()
                )],
            )],
            "",
        );
        let other = scripted("workspace-write", &[], "");
        // Connects to each socket given, asks for `sandbox: full-access` and prints what
        // happened.
        env.write(
            "probe.py",
            "import socket, sys\nline = b'{\"op\": \"set\", \"agent\": \"coder\", \"key\": \"sandbox\", \"value\": \"full-access\"}\\n'\nfor p in sys.argv[1:]:\n    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect(p)\n    except OSError as e:\n        print('refused', type(e).__name__)\n        continue\n    try:\n        s.sendall(line)\n        reply = s.recv(4096)\n    except OSError:\n        reply = b''\n    print('connected; reply', reply)\n",
        );
        let config = std::fs::read(env.work.join("axocoatl.yaml")).expect("config");
        if nobody {
            give_to_nobody(&env);
            give_to_nobody(&other);
        }
        let serve = Serve::start_command(command(&env, nobody, &["serve"]));
        let other_serve = Serve::start_command(command(&other, nobody, &["serve"]));
        let own = control_sockets(&env, nobody);
        let theirs = control_sockets(&other, nobody);
        let list: Vec<String> = own
            .iter()
            .chain(&theirs[..1])
            .map(|p| p.display().to_string())
            .collect();
        env.write("sockets.txt", &list.join(" "));
        let r = command(&env, nobody, &["send", "--json", "knock"])
            .output()
            .expect("send");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}");
        let out = &outputs(&stdout)[0];
        assert!(!out.contains(".sock"), "the command saw run/: {out}");
        assert_eq!(
            out.matches("refused FileNotFoundError").count(),
            own.len(),
            "nobody={nobody}: {out}"
        );
        // The other repository's serve is in view, and hangs up without an answer.
        assert_eq!(out.matches("connected; reply b''").count(), 1, "{out}");
        other_serve.wait_log("refused a connection from a sandboxed command");
        // The same line from outside the sandbox is answered (and would have worked).
        let mut s = std::os::unix::net::UnixStream::connect(&theirs[0]).expect("connect");
        std::io::Write::write_all(
            &mut s,
            b"{\"op\": \"set\", \"agent\": \"coder\", \"key\": \"sandbox\", \"value\": \"full-access\"}\n",
        )
        .expect("write");
        let mut reply = String::new();
        BufReader::new(s).read_line(&mut reply).expect("reply");
        assert!(reply.contains("done"), "{reply}");
        assert_eq!(
            std::fs::read(env.work.join("axocoatl.yaml")).expect("config"),
            config
        );
        assert_eq!(serve.terminate(), 0);
        assert_eq!(other_serve.terminate(), 0);
    }
}

#[test]
fn provider_keys_stay_out_of_commands_and_other_processes() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        let look = "env | grep -c value-; grep -l -e llm-auth-value -e sk-openai-value /proc/[0-9]*/environ 2>/dev/null; echo end".to_string();
        let mut env = scripted(
            "workspace-write",
            &[("look", vec![look])],
            "  other: {kind: openai, base_url: \"http://127.0.0.1:9/v1\", api_key_env: LLM_AUTH}\n",
        );
        env.set_env("LLM_AUTH", "llm-auth-value-1");
        env.set_env("OPENAI_API_KEY", "sk-openai-value-2");
        if nobody {
            give_to_nobody(&env);
        }
        let r = command(&env, nobody, &["send", "--json", "look"])
            .output()
            .expect("send");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}");
        let out = &outputs(&stdout)[0];
        assert_eq!(out, "0\nend\n[exit code 0]", "nobody={nobody}");
    }
}

/// `cmd` with `outside` opened for appending as descriptor 9 (not close-on-exec), by a
/// shell that then execs it.
fn with_descriptor(cmd: &Command, outside: &std::path::Path) -> Command {
    let script = format!("exec \"$0\" \"$@\" 9>>'{}'", outside.display());
    wrapped(cmd, "sh", &["-c", &script])
}

#[test]
fn descriptors_of_the_caller_do_not_reach_commands() {
    for (nobody, sandbox) in [
        (false, "workspace-write"),
        (false, "full-access"),
        (true, "workspace-write"),
    ] {
        if sandbox != "full-access" && !sandbox_available() {
            continue;
        }
        let env = scripted(
            sandbox,
            &[("write", vec!["echo escaped >&9; echo rc=$?".into()])],
            "",
        );
        let outside = env.tmp.path().join("outside.txt");
        std::fs::write(&outside, "").expect("outside");
        if nobody {
            give_to_nobody(&env);
        }
        let r = with_descriptor(
            &command(&env, nobody, &["send", "--json", "write"]),
            &outside,
        )
        .output()
        .expect("send");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}");
        let out = &outputs(&stdout)[0];
        assert!(
            out.contains("Bad file descriptor") && out.contains("rc=2"),
            "{sandbox}: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(&outside).expect("read"),
            "",
            "{sandbox}"
        );
    }
}

/// A command makes no device (root's capabilities are gone; Landlock grants MAKE_BLOCK
/// nowhere), and neither limits nor signals a process outside its sandbox: not its
/// parent's `RLIMIT_FSIZE`, not a process it started, not this test's process. As root and
/// as the unprivileged user (whose own processes a command could limit and kill before).
#[test]
fn a_command_cannot_make_a_device_or_limit_processes_outside() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        if !nobody && !is_root() {
            skipped("root's capabilities are what the first half checks");
            continue;
        }
        let disk = "mknod disk b 7 0; ls disk; grep CapBnd /proc/self/status".to_string();
        let limit = format!(
            "sleep 30 & prlimit --pid $! --fsize=0; echo rc=$?; kill $!; kill -0 {} && echo ESCAPED signal; {} -c 'import os, resource; resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (0, 0))'",
            std::process::id(),
            python()
        );
        let env = scripted("workspace-write", &[("try", vec![disk, limit])], "");
        if nobody {
            give_to_nobody(&env);
        }
        let r = command(&env, nobody, &["send", "--json", "try"])
            .output()
            .expect("send");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}");
        let out = outputs(&stdout);
        // Landlock refuses first (no MAKE_BLOCK anywhere); without it CAP_MKNOD is gone too.
        assert!(
            out[0].contains("mknod: disk: Permission denied"),
            "nobody={nobody}: {}",
            out[0]
        );
        assert!(
            out[0].contains("CapBnd:\t0000000000000000"),
            "nobody={nobody}: {}",
            out[0]
        );
        assert!(!env.work.join("disk").exists());
        assert!(
            out[1].contains("rc=1") && out[1].contains("PermissionError"),
            "nobody={nobody}: {}",
            out[1]
        );
        assert!(!out[1].contains("ESCAPED"), "nobody={nobody}: {}", out[1]);
    }
}

/// `axocoatl stop` from another process ends the turn and everything its command started:
/// `setsid` and double-forked processes too (a pid namespace per command).
#[test]
fn stop_ends_everything_its_command_started() {
    for (nobody, sandbox) in [
        (false, "workspace-write"),
        (false, "full-access"),
        (true, "workspace-write"),
    ] {
        if sandbox != "full-access" && !sandbox_available() {
            continue;
        }
        if sandbox == "full-access" && !axocoatl::tools::full_access_has_pid_namespace() {
            skipped("full-access without a pid namespace: setsid processes are not followed");
            continue;
        }
        let m = marker();
        let env = scripted(sandbox, &[("linger", vec![lingering(&m)])], "");
        if nobody {
            give_to_nobody(&env);
        }
        let mut child = command(&env, nobody, &["send", "--json", "linger"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("send");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let turn = crate::common::procs::turn_until_tool_started(&mut lines);
        wait_until("the command's processes", || running_with(&m).len() >= 4);
        let stop = command(&env, nobody, &["stop", &turn])
            .output()
            .expect("stop");
        assert!(
            stop.status.success(),
            "{}",
            String::from_utf8_lossy(&stop.stderr)
        );
        for _ in lines {}
        assert_eq!(child.wait().expect("wait").code(), Some(4), "{sandbox}");
        wait_gone(&m, &format!("stop ({sandbox}, nobody={nobody})"));
    }
}

/// Starts `send --json` of a turn that runs [`lingering`] processes, waits until they all
/// run; returns the send process.
fn send_lingering(env: &TestEnv, nobody: bool, m: &str) -> std::process::Child {
    let mut child = command(env, nobody, &["send", "--json", "linger"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("send");
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || for _ in BufReader::new(stdout).lines() {});
    wait_until("the command's processes", || running_with(m).len() >= 4);
    child
}

#[test]
fn kill_9_of_send_ends_everything_its_command_started() {
    for (nobody, sandbox) in [
        (false, "workspace-write"),
        (false, "full-access"),
        (true, "workspace-write"),
    ] {
        if sandbox != "full-access" && !sandbox_available() {
            continue;
        }
        let m = marker();
        let env = scripted(sandbox, &[("linger", vec![lingering(&m)])], "");
        if nobody {
            give_to_nobody(&env);
        }
        let mut child = send_lingering(&env, nobody, &m);
        let tmpdir = std::fs::read_to_string(env.work.join("tmpdir.txt")).expect("tmpdir");
        let tmpdir = std::path::PathBuf::from(tmpdir.trim());
        assert!(tmpdir.is_dir());
        assert_eq!(
            std::fs::metadata(&tmpdir)
                .expect("meta")
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        kill(child.id(), libc::SIGKILL);
        let _ = child.wait();
        let pid_namespace =
            sandbox != "full-access" || axocoatl::tools::full_access_has_pid_namespace();
        if pid_namespace {
            wait_gone(&m, &format!("kill -9 of send ({sandbox}, nobody={nobody})"));
        } else {
            // The shell dies with send; processes that left its group are not followed.
            wait_until("the shell to end", || {
                running_with(&format!("{m}4")).is_empty()
            });
            for pid in running_with(&m) {
                kill(pid, libc::SIGKILL);
            }
        }
        // The next open of the repository (or of any other, as in a parallel test) removes
        // the temporary directory it left.
        let r = command(&env, nobody, &["history"])
            .output()
            .expect("history");
        assert!(r.status.success());
        assert!(!tmpdir.exists(), "{} was left behind", tmpdir.display());
    }
}

/// kill -9 of the actor running a command, then of serve, ends everything the command
/// started (long before its `timeout_secs`), as root and as the unprivileged user.
#[test]
fn kill_9_of_an_actor_or_of_serve_ends_its_commands() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        let (first, second) = (marker(), marker());
        let env = scripted(
            "workspace-write",
            &[
                ("first", vec![lingering(&first)]),
                ("second", vec![lingering(&second)]),
            ],
            "",
        );
        if nobody {
            give_to_nobody(&env);
        }
        let serve = Serve::start_command(command(&env, nobody, &["serve"]));
        wait_until("the actor is up", || {
            actor(&status(&env, nobody), "coder")["state"] == "idle"
        });
        let pid = actor(&status(&env, nobody), "coder")["pid"]
            .as_u64()
            .expect("pid") as u32;
        let mut send = command(&env, nobody, &["send", "--json", "first"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("send");
        wait_until("the command's processes", || {
            running_with(&first).len() >= 4
        });
        assert_eq!(kill(pid, libc::SIGKILL), 0);
        wait_gone(&first, &format!("kill -9 of the actor (nobody={nobody})"));
        let _ = send.wait();
        wait_until("the actor is back", || {
            let s = status(&env, nobody);
            let a = actor(&s, "coder");
            a["state"] == "idle" && a["pid"].as_u64() != Some(pid as u64)
        });
        let mut send = command(&env, nobody, &["send", "--json", "second"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("send");
        wait_until("the command's processes", || {
            running_with(&second).len() >= 4
        });
        serve.signal(libc::SIGKILL);
        wait_gone(&second, &format!("kill -9 of serve (nobody={nobody})"));
        let _ = send.wait();
    }
}

#[test]
fn binary_output_is_kept_byte_for_byte() {
    let env = scripted(
        "full-access",
        &[("bytes", vec!["printf 'a\\377b'".into()])],
        "",
    );
    let r = env.run(&["send", "--json", "bytes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = &outputs(&r.stdout)[0];
    assert!(
        out.starts_with("a\u{FFFD}b\n[the output is not valid UTF-8"),
        "{out}"
    );
    let h = env.run(&["history", "--json"]);
    let lines: Vec<Value> = json_lines(&h.stdout);
    let object = lines
        .iter()
        .flat_map(|l| l["tools"].as_array().cloned().unwrap_or_default())
        .find_map(|t| t["output_object"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no output object: {}", h.stdout));
    let objects = axocoatl_store::objects::Objects::new(&env.repo().join("objects"));
    let bytes = objects.get(&object).expect("object");
    assert!(
        bytes.starts_with(b"a\xffb\n[the output is not valid UTF-8"),
        "{bytes:?}"
    );
}

/// An unprivileged user's command is bounded by `RLIMIT_NPROC` in its own user namespace
/// (root's by a pids cgroup: src/tools/escapes.rs); the turn goes on.
#[test]
fn an_unprivileged_fork_bomb_is_bounded() {
    if !sandbox_available() {
        return;
    }
    let forks = format!(
        "{} -c 'import os, time\nn = 0\nfor i in range(100):\n    try:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\n    except OSError as e:\n        print(\"fork refused:\", e.strerror)\n        break\nprint(\"children\", n)'",
        python()
    );
    // Stops by itself at depth 6 (at most 254 processes): a test must not take the machine
    // down when what it tests breaks.
    let bomb = "(b() { [ $1 -gt 0 ] && { b $(($1 - 1)) | b $(($1 - 1)) & }; sleep 5; }; b 6); while :; do :; done".to_string();
    let env = TestEnv::with_config(
        "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: coder\n    provider: canned\n    sandbox: workspace-write\n    command_limits: {processes: 16}\n",
    );
    let mut script = replies(&[("bomb", vec![forks])]);
    let args = json!({"command": bomb, "timeout_secs": 3});
    script = script.replacen(
        "  - match: bomb\n    text: done\n",
        &format!("  - match: bomb\n    tool_calls: [{{name: run_command, arguments: {args}}}]\n  - match: bomb\n    text: done\n"),
        1,
    );
    env.write("replies.yaml", &script);
    give_to_nobody(&env);
    let started = Instant::now();
    let r = command(&env, true, &["send", "--json", "bomb"])
        .output()
        .expect("send");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{stdout}");
    let out = outputs(&stdout);
    assert!(
        out[0].contains("fork refused: Resource temporarily unavailable"),
        "{}",
        out[0]
    );
    let children: u32 = out[0]
        .lines()
        .find_map(|l| l.strip_prefix("children "))
        .and_then(|n| n.parse().ok())
        .expect("children line");
    assert!(children < 16, "{}", out[0]);
    assert!(out[1].contains("Cannot fork"), "{}", out[1]);
    assert!(
        out[1]
            .ends_with("[timed out after 3 s: the command and everything it started were killed]"),
        "{}",
        out[1]
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Every key of `command_limits` in the configuration reaches the command as its soft and
/// hard limit (as root and as the unprivileged user); a write past `file_size_mb` fails and
/// the turn goes on.
#[test]
fn command_limits_of_the_configuration_bound_the_command() {
    if !sandbox_available() {
        return;
    }
    for nobody in [false, true] {
        let look = format!(
            "{} -c 'import resource as r\nfor n in (\"NPROC\", \"AS\", \"FSIZE\", \"CPU\"): print(n, *r.getrlimit(getattr(r, \"RLIMIT_\" + n)))'; head -c 3000000 /dev/zero > big; wc -c < big",
            python()
        );
        let env = TestEnv::with_config(
            "providers:\n  canned: {kind: script, script: replies.yaml}\nagents:\n  - id: coder\n    provider: canned\n    sandbox: workspace-write\n    command_limits: {processes: 40, memory_mb: 512, file_size_mb: 1, cpu_secs: 30}\n",
        );
        env.write("replies.yaml", &replies(&[("look", vec![look])]));
        if nobody {
            give_to_nobody(&env);
        }
        let r = command(&env, nobody, &["send", "--json", "look"])
            .output()
            .expect("send");
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(r.status.code(), Some(0), "{stdout}");
        let out = &outputs(&stdout)[0];
        for line in [
            "NPROC 40 40",
            "AS 536870912 536870912",
            "FSIZE 1048576 1048576",
            "CPU 30 30",
            "1048576",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "nobody={nobody}: no line {line:?} in {out}"
            );
        }
    }
}
