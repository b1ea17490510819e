//! Running the binary as another, unprivileged user (`setpriv --reuid 65534`), for tests of
//! what another local user can do and of behaviour that differs for root.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::env::{bin, with_program, wrapped, TestEnv};

/// The unprivileged user.
pub const NOBODY: u32 = 65534;

#[expect(unsafe_code, reason = "geteuid: libc has no safe wrapper")]
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Gives `path` and everything in it to the unprivileged user.
pub fn chown_nobody(path: &Path) {
    let status = Command::new("chown")
        .arg("-R")
        .arg(format!("{NOBODY}:{NOBODY}"))
        .arg(path)
        .status()
        .expect("chown");
    assert!(status.success());
}

/// The binary where the unprivileged user can run it: a hard link (or a copy) in a
/// root-owned, world-readable directory of the test (the build may lie where only root may
/// enter), removed with it.
pub fn reachable_bin(env: &TestEnv) -> PathBuf {
    let dir = env.tmp.path().join("bin-of-another-user");
    let path = dir.join("axocoatl");
    if !path.exists() {
        std::fs::create_dir_all(&dir).expect("bin dir");
        chmod(&dir, 0o755);
        if std::fs::hard_link(bin(), &path).is_err() {
            std::fs::copy(bin(), &path).expect("copy the binary");
        }
    }
    path
}

/// `env.cmd(args)` (its environment, in its directory unless `dir`), run by the
/// unprivileged user. The test directory must be one that user can enter.
pub fn as_nobody(env: &TestEnv, dir: Option<&Path>, args: &[&str]) -> Command {
    let mut c = env.cmd(args);
    if let Some(dir) = dir {
        c.current_dir(dir);
    }
    let c = with_program(&c, &reachable_bin(env));
    let nobody = NOBODY.to_string();
    wrapped(
        &c,
        "setpriv",
        &[
            "--reuid",
            &nobody,
            "--regid",
            &nobody,
            "--clear-groups",
            "--",
        ],
    )
}
