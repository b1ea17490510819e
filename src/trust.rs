//! Which repositories and configuration files are trusted: those this user owns and no one
//! else can write, and those the user allows by name (git's `safe.directory`).
//!
//! A repository's configuration names programs axocoatl starts as the user (MCP servers),
//! servers it sends the user's messages and keys to (`base_url`), and its ledger receives
//! every turn. One that another local user planted above the working directory (in a shared
//! `/tmp`, a shared project tree, an extracted archive) would run their programs as the user
//! and receive the user's requests. So a repository (its `.axocoatl` directory) or a
//! configuration file is refused when it is owned by another user (root's own too, unless
//! the user is root) or writable by others: by every user, or by a group that is not the
//! user's own (effective) group. Discovered, explicit (`--repo`, `AXOCOATL_DIR`, `-C`) and
//! home repositories alike.
//!
//! The user allows a shared one in `AXOCOATL_SAFE_DIRECTORIES` (paths separated by `:`) or
//! in `${XDG_CONFIG_HOME:-~/.config}/axocoatl/safe-directories` (one path a line, `#`
//! comments): a path names the directory that holds `.axocoatl` (or `.axocoatl` itself,
//! or a configuration file's directory or the file); `DIR/*` names everything beneath DIR;
//! `*` alone allows every repository. The file is read only when it is needed, and only when
//! the user owns it and no one else can write it.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, RuntimeError};

/// The allow-list in the environment: paths separated by `:`.
pub const SAFE_ENV: &str = "AXOCOATL_SAFE_DIRECTORIES";
/// The allow-list file's name in `${XDG_CONFIG_HOME:-~/.config}/axocoatl/`.
pub const SAFE_FILE: &str = "safe-directories";

/// Why a file or directory is not trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Distrust {
    /// Another user owns it.
    Owner { uid: u32 },
    /// Every user may write it.
    WorldWritable { mode: u32 },
    /// The members of group `gid`, which is not the user's own, may write it.
    GroupWritable { mode: u32, gid: u32 },
}

/// This process's effective user and group.
#[expect(unsafe_code, reason = "geteuid and getegid: libc has no safe wrapper")]
fn me() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Why `meta` (of a file or directory, symbolic links followed) is not trusted by the user
/// `uid` in group `gid`, or `None` when it is.
pub fn judge(meta: &Metadata, uid: u32, gid: u32) -> Option<Distrust> {
    let mode = meta.mode() & 0o7777;
    if meta.uid() != uid {
        return Some(Distrust::Owner { uid: meta.uid() });
    }
    if mode & 0o002 != 0 {
        return Some(Distrust::WorldWritable { mode });
    }
    if mode & 0o020 != 0 && meta.gid() != gid {
        return Some(Distrust::GroupWritable {
            mode,
            gid: meta.gid(),
        });
    }
    None
}

/// A user's name from the password file, for messages (`None` when it is not there).
fn user_name(uid: u32) -> Option<String> {
    name_in("/etc/passwd", uid)
}

fn group_name(gid: u32) -> Option<String> {
    name_in("/etc/group", gid)
}

/// The name of id `id` in a file of `name:x:id:...` lines.
fn name_in(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let found: u32 = fields.nth(1)?.parse().ok()?;
        (found == id).then(|| name.to_owned())
    })
}

fn who(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

impl Distrust {
    /// Completes "… is …": who owns it, or who else may write it.
    pub fn describe(&self, me: u32) -> String {
        match self {
            Distrust::Owner { uid } => {
                format!("owned by {}, not by you ({})", who(*uid), who(me))
            }
            Distrust::WorldWritable { mode } => {
                format!("writable by every user (mode {mode:04o})")
            }
            Distrust::GroupWritable { mode, gid } => {
                let group = group_name(*gid)
                    .map(|n| format!("gid {gid} ({n})"))
                    .unwrap_or_else(|| format!("gid {gid}"));
                format!("writable by the members of group {group} (mode {mode:04o})")
            }
        }
    }
}

/// What a refused path is, for the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    Repository,
    Configuration,
}

impl What {
    fn noun(self) -> &'static str {
        match self {
            What::Repository => "repository",
            What::Configuration => "configuration file",
        }
    }
}

/// The user's allow-list: the environment's and the file's entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Every,
    Exact(PathBuf),
    Beneath(PathBuf),
}

impl Entry {
    fn parse(text: &str) -> Option<Entry> {
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            return None;
        }
        if text == "*" {
            return Some(Entry::Every);
        }
        let canonical = |p: &str| {
            let p = Path::new(p);
            p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
        };
        match text.strip_suffix("/*") {
            Some(dir) => Some(Entry::Beneath(canonical(if dir.is_empty() {
                "/"
            } else {
                dir
            }))),
            None => Some(Entry::Exact(canonical(text))),
        }
    }

    fn allows(&self, path: &Path) -> bool {
        match self {
            Entry::Every => true,
            Entry::Exact(p) => p == path,
            Entry::Beneath(dir) => path.starts_with(dir),
        }
    }
}

/// Where the allow-list file is: `$XDG_CONFIG_HOME/axocoatl/safe-directories`, else
/// `~/.config/axocoatl/safe-directories`.
pub fn allow_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let dir = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        })?;
    Some(dir.join("axocoatl").join(SAFE_FILE))
}

impl Allowed {
    /// The allow-list of `env` (the process environment in use): `AXOCOATL_SAFE_DIRECTORIES`
    /// and the file. A file another user owns or can write is refused, with why.
    pub fn read(env: &dyn Fn(&str) -> Option<String>) -> Result<Allowed> {
        let mut entries: Vec<Entry> = env(SAFE_ENV)
            .unwrap_or_default()
            .split(':')
            .filter_map(Entry::parse)
            .collect();
        if let Some(file) = allow_file(env) {
            entries.extend(read_allow_file(&file)?);
        }
        Ok(Allowed { entries })
    }

    /// Whether any of `paths` (canonical) is allowed.
    fn allows(&self, paths: &[&Path]) -> bool {
        self.entries
            .iter()
            .any(|e| paths.iter().any(|p| e.allows(p)))
    }
}

/// The entries of the allow-list file at `path` (none when it does not exist). It is the
/// user's own configuration: one that another user owns or can write is refused.
fn read_allow_file(path: &Path) -> Result<Vec<Entry>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(RuntimeError::io("read", path)(e)),
    };
    let meta = file.metadata().map_err(RuntimeError::io("read", path))?;
    let (uid, gid) = me();
    if let Some(why) = judge(&meta, uid, gid) {
        return Err(RuntimeError::Refused {
            message: format!(
                "the list of allowed repositories {} is {}",
                path.display(),
                why.describe(uid)
            ),
            hint: format!(
                "it is read only when it is yours alone: `chown {uid} {p}` and `chmod go-w {p}`, or remove it",
                p = path.display()
            )
            .into(),
        });
    }
    let mut text = String::new();
    file.take(1 << 20)
        .read_to_string(&mut text)
        .map_err(RuntimeError::io("read", path))?;
    Ok(text.lines().filter_map(Entry::parse).collect())
}

/// The refusal of `path` (a repository or a configuration file) for `why`.
fn refusal(what: What, path: &Path, why: &Distrust, uid: u32) -> RuntimeError {
    let dir = path.parent().unwrap_or(path);
    RuntimeError::Refused {
        message: format!(
            "refusing the {} {}: it is {}",
            what.noun(),
            path.display(),
            why.describe(uid)
        ),
        hint: format!(
            "another user's {} could run programs as you and receive your messages and keys. If you trust it, allow its directory {}: in {SAFE_ENV} (paths separated by `:`) or as a line of ~/.config/axocoatl/{SAFE_FILE}; else use a repository of your own",
            what.noun(),
            dir.display()
        )
        .into(),
    }
}

/// Checks a file or directory whose metadata is `meta` (links followed), found at `path`:
/// trusted when the user owns it and no one else can write it, or when the allow-list names
/// one of `names` (canonical paths: the repository's directory, the file, its directory).
fn check(what: What, path: &Path, meta: &Metadata, names: &[&Path]) -> Result<()> {
    let (uid, gid) = me();
    let Some(why) = judge(meta, uid, gid) else {
        return Ok(());
    };
    let env = |k: &str| std::env::var(k).ok();
    if Allowed::read(&env)?.allows(names) {
        return Ok(());
    }
    Err(refusal(what, path, &why, uid))
}

/// Checks the repository `root` (its `.axocoatl` directory) before anything in it is read.
pub fn check_repository(root: &Path) -> Result<()> {
    let meta = match std::fs::metadata(root) {
        Ok(m) => m,
        // What is not there is not trusted or refused here: opening it says what is wrong.
        Err(_) => return Ok(()),
    };
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let workdir = canonical.parent().unwrap_or(&canonical);
    check(What::Repository, root, &meta, &[&canonical, workdir])
}

/// Checks a configuration file by the metadata of what was opened (`meta`), so that the
/// file checked is the file read.
pub fn check_configuration(path: &Path, meta: &Metadata) -> Result<()> {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let dir = canonical.parent().unwrap_or(&canonical);
    check(What::Configuration, path, meta, &[&canonical, dir])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_name_exact_directories_trees_or_everything() {
        assert_eq!(Entry::parse("  # a comment"), None);
        assert_eq!(Entry::parse(""), None);
        assert_eq!(Entry::parse("*"), Some(Entry::Every));
        let exact = Entry::parse("/nonexistent/shared").expect("entry");
        assert!(exact.allows(Path::new("/nonexistent/shared")));
        assert!(!exact.allows(Path::new("/nonexistent/shared/sub")));
        let tree = Entry::parse("/nonexistent/shared/*").expect("entry");
        assert!(tree.allows(Path::new("/nonexistent/shared/sub")));
        assert!(tree.allows(Path::new("/nonexistent/shared")));
        assert!(!tree.allows(Path::new("/nonexistent/other")));
    }

    #[test]
    fn the_owner_and_the_write_bits_decide() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let f = tmp.path().join("f");
        std::fs::write(&f, "x").expect("write");
        let meta = |mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).expect("chmod");
            std::fs::metadata(&f).expect("meta")
        };
        let m = meta(0o644);
        let (uid, gid) = (m.uid(), m.gid());
        assert_eq!(judge(&m, uid, gid), None);
        assert_eq!(judge(&m, uid + 1, gid), Some(Distrust::Owner { uid }));
        assert_eq!(
            judge(&meta(0o666), uid, gid),
            Some(Distrust::WorldWritable { mode: 0o666 })
        );
        // The user's own group may write; another group may not.
        assert_eq!(judge(&meta(0o664), uid, gid), None);
        assert_eq!(
            judge(&meta(0o664), uid, gid + 1),
            Some(Distrust::GroupWritable { mode: 0o664, gid })
        );
    }

    #[test]
    fn the_allow_list_is_the_environment_and_the_users_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path();
        let dir = home.join(".config/axocoatl");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(SAFE_FILE), "# shared trees\n/srv/team/*\n").expect("write");
        let home_s = home.display().to_string();
        let env = |k: &str| match k {
            "HOME" => Some(home_s.clone()),
            SAFE_ENV => Some("/nonexistent/a:/nonexistent/b".into()),
            _ => None,
        };
        let allowed = Allowed::read(&env).expect("read");
        assert!(allowed.allows(&[Path::new("/nonexistent/b")]));
        assert!(allowed.allows(&[Path::new("/srv/team/x")]));
        assert!(!allowed.allows(&[Path::new("/srv/other")]));
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join(SAFE_FILE), std::fs::Permissions::from_mode(0o666))
            .expect("chmod");
        let refused = Allowed::read(&env).expect_err("a file others can write is refused");
        assert!(
            refused.to_string().contains("writable by every user"),
            "{refused}"
        );
    }
}
