//! The repository from the outside: init, discovery, format checks, permissions, help.

use std::os::unix::fs::PermissionsExt;

use crate::common::env::TestEnv;

const COMMANDS: &[&str] = &[
    "init", "validate", "send", "stop", "retry", "rewind", "sessions", "history", "show", "export",
    "usage", "fsck",
];

#[test]
fn help_of_every_command() {
    let env = TestEnv::new();
    snap!("help", env.snap(&env.run(&["--help"])));
    for c in COMMANDS {
        snap!(format!("help_{c}"), env.snap(&env.run(&[c, "--help"])));
    }
}

#[test]
fn clap_definitions_are_consistent() {
    // The same check clap runs in debug builds, on the real binary's definition.
    let r = TestEnv::new().run(&["util", "--help"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn init_creates_the_layout_and_a_valid_starter_config() {
    let env = TestEnv::new();
    snap!("init", env.snap(&env.run(&["init"])));
    for dir in [
        "ledger/v1",
        "objects",
        "checkpoints/v1",
        "memory/core/v1",
        "memory/core/shared/v1",
        "memory/daily_log/v1",
        "memory/semantic/v1",
        "automation/runs-v1",
        "run",
        "tmp",
    ] {
        assert!(env.repo().join(dir).is_dir(), "{dir}");
    }
    assert_eq!(
        std::fs::read_to_string(env.repo().join("HEAD")).expect("HEAD"),
        "main\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.repo().join("format")).expect("format"),
        "axocoatl repository\nformat 1\n"
    );
    let v = env.run(&["validate"]);
    assert_eq!(v.code, 0, "{}", v.stderr);
    snap!("init_again", env.snap(&env.run(&["init"])));
}

#[test]
fn init_keeps_an_existing_config() {
    let env = TestEnv::new();
    env.write("axocoatl.yaml", "agents: []\n");
    let r = env.run(&["init"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Kept the existing configuration"));
    assert_eq!(
        std::fs::read_to_string(env.work.join("axocoatl.yaml")).expect("read"),
        "agents: []\n"
    );
}

#[test]
fn discovery_from_a_subdirectory_and_overrides() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init", "proj"]).code, 0);
    let sub = env.work.join("proj/a/b");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let r = env.run_in(&sub, &["sessions"]);
    snap!("discover_subdir", env.snap(&r));
    // -C
    snap!("dash_c", env.snap(&env.run(&["-C", "proj/a", "sessions"])));
    // --repo and AXOCOATL_DIR, from a directory with no repository above it
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let r = env.run_in(&elsewhere, &["--repo", "../work/proj", "sessions"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let mut with_env = env.cmd(&["sessions"]);
    with_env
        .current_dir(&elsewhere)
        .env("AXOCOATL_DIR", env.work.join("proj/.axocoatl"));
    let out = with_env.output().expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No repository there (-C: no home repository to fall back to).
    snap!(
        "no_repo",
        env.snap(&env.run_in(&elsewhere, &["-C", ".", "history"]))
    );
}

#[test]
fn a_newer_format_is_refused_and_nothing_is_written() {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    std::fs::write(env.repo().join("format"), "axocoatl repository\nformat 2\n").expect("write");
    let before = listing(&env.repo());
    let r = env.run(&["history"]);
    snap!("newer_format", env.snap(&r));
    assert_eq!(listing(&env.repo()), before, "nothing written");
    std::fs::write(env.repo().join("format"), "something else\n").expect("write");
    snap!("bad_format_marker", env.snap(&env.run(&["fsck"])));
}

fn listing(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    walk(dir, &mut |p, meta| {
        out.push((
            p.display().to_string(),
            if meta.is_file() { meta.len() } else { 0 },
        ))
    });
    out.sort();
    out
}

fn walk(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path, &std::fs::Metadata)) {
    for e in std::fs::read_dir(dir).expect("ls") {
        let e = e.expect("entry");
        let meta = std::fs::symlink_metadata(e.path()).expect("stat");
        f(&e.path(), &meta);
        if meta.is_dir() {
            walk(&e.path(), f);
        }
    }
}

#[test]
fn everything_is_owner_only_under_a_permissive_umask() {
    let env = TestEnv::new();
    let sh = |script: &str| {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("umask 000; {script}"))
            .current_dir(&env.work)
            .env("AXOCOATL_NOW", crate::common::env::PINNED_NOW)
            .env("HOME", &env.home)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let bin = crate::common::env::bin();
    sh(&format!("{bin} init"));
    sh(&format!("{bin} util ledger-append --count 20 --size 100"));
    sh(&format!("{bin} sessions new other"));
    sh(&format!("{bin} fsck"));
    let mut seen = 0;
    walk(&env.repo(), &mut |p, meta| {
        seen += 1;
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{}", p.display());
        } else {
            assert_eq!(mode, 0o600, "{}", p.display());
        }
    });
    assert!(seen > 20, "{seen}");
}
