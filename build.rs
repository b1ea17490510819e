//! Links the `axocoatl` binary as a position-dependent executable on Linux, and names the
//! build for `--version`.
//!
//! A position-independent executable is relocated at every start: for this binary that is
//! ~29,000 pointers in ~560 KiB of tables, each page copied on write, ~0.3 ms of a `send`
//! whose whole budget beyond its two disk flushes is 3 ms. Linked at a fixed address, the
//! tables are used as mapped. Shared libraries, heap and stack keep their randomized
//! addresses. Set `AXOCOATL_PIE=1` at build time to keep a PIE (and its ASLR) instead.
//!
//! `--version` says the commit and the build date (`AXOCOATL_BUILD`): the commit from git
//! when the sources are a checkout (nothing when they are a tarball without git, or git is
//! not installed), the date from `SOURCE_DATE_EPOCH` when set (reproducible builds), else
//! today's. A release build runs this again when the checkout moves to another commit; a
//! debug build does not, since that would rebuild the whole library at every commit: its
//! `--version` names the commit it was first built at.
fn main() {
    println!("cargo:rerun-if-env-changed=AXOCOATL_PIE");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let gnu = std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    let keep_pie = std::env::var_os("AXOCOATL_PIE").is_some_and(|v| v != "0" && !v.is_empty());
    if linux && gnu && !keep_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        for watched in ["HEAD", "packed-refs"] {
            rerun_if_git_path_changes(watched);
        }
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            rerun_if_git_path_changes(&head);
        }
    }
    let date = build_date();
    let build = match commit {
        Some(commit) => format!("commit {commit}, built {date}"),
        None => format!("built {date}"),
    };
    println!("cargo:rustc-env=AXOCOATL_BUILD={build}");
}

/// What `git ARGS` prints in the package's directory, when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Reruns this script when the git file `name` (`HEAD`, a branch's ref) changes. A path
/// that does not exist is not watched: cargo would rerun the script at every build.
fn rerun_if_git_path_changes(name: &str) {
    if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", name]) {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

/// `YYYY-MM-DD` (UTC) of `SOURCE_DATE_EPOCH`, else of now.
fn build_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
