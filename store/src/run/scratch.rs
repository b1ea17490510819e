//! The note, one per user, that names the directory under which that user's commands get
//! their temporary directories (`run/scratch/<uid>`): a private directory with a random name
//! in the system's temporary directory, which no other user could have made first. The
//! runtime makes the directory and checks it is the user's own before it trusts a note;
//! these functions only read and write the note.

use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic, Durability};
use crate::layout::SCRATCH_NOTES_DIR;
use crate::Result;

/// The longest note read (a path).
const NOTE_LIMIT: u64 = 4096;

fn note_path(root: &Path, uid: u32) -> PathBuf {
    root.join(SCRATCH_NOTES_DIR).join(uid.to_string())
}

/// The directory the note of user `uid` names, if there is a note that reads as an absolute
/// path.
pub fn read(root: &Path, uid: u32) -> Option<PathBuf> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(note_path(root, uid))
        .ok()?
        .take(NOTE_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    let path = PathBuf::from(text.trim_end_matches('\n'));
    path.is_absolute().then_some(path)
}

/// Notes `dir` for user `uid` (replacing an earlier note). A cache: not synced.
pub fn write(root: &Path, uid: u32, dir: &Path) -> Result<()> {
    let path = note_path(root, uid);
    if !root.is_dir() {
        // Not a repository: nothing is made in its place.
        return Err(crate::Error::NotFound {
            start: root.to_path_buf(),
        });
    }
    create_dir_private(&root.join(SCRATCH_NOTES_DIR))?;
    let mut text = dir.as_os_str().as_encoded_bytes().to_vec();
    text.push(b'\n');
    write_atomic(&path, &text, Durability::Cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_names_a_directory_per_user() {
        let (_dir, repo) = crate::repo::scratch();
        assert_eq!(read(repo.root(), 7), None);
        write(repo.root(), 7, Path::new("/tmp/axocoatl-commands-7-abc")).expect("write");
        assert_eq!(
            read(repo.root(), 7),
            Some(PathBuf::from("/tmp/axocoatl-commands-7-abc"))
        );
        assert_eq!(read(repo.root(), 8), None);
        std::fs::write(note_path(repo.root(), 8), "relative/path\n").expect("write");
        assert_eq!(read(repo.root(), 8), None);
    }
}
