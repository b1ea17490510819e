//! Faults found from the outside, through the real binary: a damaged `HEAD`, a missing
//! `run/`, stray temporary files, a torn roll-over, a file size limit.

use crate::common::env::TestEnv;

fn repo_with_turns() -> TestEnv {
    let env = TestEnv::new();
    assert_eq!(env.run(&["init"]).code, 0);
    assert_eq!(env.run(&["util", "ledger-append", "--count", "3"]).code, 0);
    env
}

/// a corrupt or missing HEAD names the file and the fix, and fsck reports it.
#[test]
fn a_missing_or_corrupt_head_names_the_file_and_the_fix() {
    let env = repo_with_turns();
    let head = env.repo().join("HEAD");
    std::fs::remove_file(&head).expect("rm");
    let r = env.run(&["history"]);
    assert_eq!(r.code, 1);
    snap!("head_missing", env.snap(&r));
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 9);
    snap!("head_missing_fsck", env.snap(&fsck));
    std::fs::write(&head, b"\xff\xfe\x00garbage").expect("write");
    let r = env.run(&["history"]);
    assert_eq!(r.code, 1);
    snap!("head_corrupt", env.snap(&r));
    let repair = env.run(&["fsck", "--repair"]);
    assert_eq!(repair.code, 0, "{}", repair.stdout);
    snap!("head_repaired", env.snap(&repair));
    assert_eq!(env.run(&["history"]).code, 0);
}

/// without `run/`, writes recreate it; fsck reports it missing.
#[test]
fn a_missing_run_directory_is_recreated_and_reported() {
    let env = repo_with_turns();
    std::fs::remove_dir_all(env.repo().join("run")).expect("rm");
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 9, "{}", fsck.stdout);
    assert!(
        fsck.stdout.contains("run: missing-directory"),
        "{}",
        fsck.stdout
    );
    let r = env.run(&["util", "ledger-append", "--count", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(env.repo().join("run").is_dir());
    std::fs::remove_dir_all(env.repo().join("run")).expect("rm");
    let repair = env.run(&["fsck", "--repair"]);
    assert_eq!(repair.code, 0, "{}", repair.stdout);
    assert!(env.repo().join("run/sessions").is_dir());
}

/// stray temporary files of killed writers are reported and collected.
#[test]
fn stray_temporary_files_are_reported_and_collected() {
    let env = repo_with_turns();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    let stray = env
        .repo()
        .join(format!("objects/.tmp-{}-Ab12Cd", pid_max + 1));
    std::fs::write(&stray, vec![0u8; 4096]).expect("write");
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "a stray file is a warning: {}", fsck.stdout);
    let shown = env
        .snap(&fsck)
        .replace(&format!(".tmp-{}-", pid_max + 1), ".tmp-[PID]-");
    snap!("stray_fsck", shown);
    env.write("a.txt", "attached\n");
    let r = env.run(&["attach", "add", "a.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!stray.exists(), "the next object write collects it");
}

/// Through the binary: a 0-byte newest segment (a roll-over killed before its
/// header was written, by an older build) neither bricks reads nor writes nor fsck.
#[test]
fn a_zero_byte_newest_segment_is_a_torn_tail() {
    let env = repo_with_turns();
    std::fs::write(env.repo().join("ledger/v1/000000000002.seg"), b"").expect("write");
    let dump = env.run(&["util", "ledger-dump"]);
    assert_eq!(dump.code, 0, "{}", dump.stderr);
    assert_eq!(dump.stdout.lines().count(), 3);
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 9);
    snap!("torn_segment_fsck", env.snap(&fsck));
    let r = env.run(&["util", "ledger-append", "--count", "1"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
    std::fs::write(env.repo().join("ledger/v1/000000000002.seg"), b"AXO").expect("write");
    let repair = env.run(&["fsck", "--repair"]);
    assert_eq!(repair.code, 0, "{}", repair.stdout);
    snap!("torn_segment_repair", env.snap(&repair));
}

/// past `ulimit -f` a write fails with EFBIG and a path instead of SIGXFSZ
/// killing the process without a word.
#[test]
fn a_file_size_limit_is_an_error_with_the_path() {
    let env = repo_with_turns();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -f 16 && exec {} util ledger-append --size 50000",
            crate::common::env::bin()
        ))
        .current_dir(&env.work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1");
    let out = cmd.output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not killed by SIGXFSZ: {stderr}"
    );
    assert!(stderr.contains("ledger/v1/000000000001.seg"), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(
        stderr.contains("hint: a file size limit was reached (`ulimit -f`)"),
        "{stderr}"
    );
    // Nothing half-written is left behind.
    let fsck = env.run(&["fsck"]);
    assert_eq!(fsck.code, 0, "{}", fsck.stdout);
}
