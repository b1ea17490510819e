//! Content-addressed, immutable blobs: `objects/ab/cdef…` named by the BLAKE3 hash of their
//! bytes. Identical content is stored once; every read verifies the hash.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::{create_dir_private, write_atomic_via, Durability};
use crate::{Error, Result};

#[derive(Clone, Debug)]
pub struct Objects {
    dir: PathBuf,
}

/// The hash of some bytes, as objects are named: 64 lowercase hex digits.
pub fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Whether `s` looks like an object hash.
pub fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Objects {
    pub fn new(dir: &Path) -> Objects {
        Objects {
            dir: dir.to_owned(),
        }
    }

    pub fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(&hash[..2]).join(&hash[2..])
    }

    /// Stores `bytes` durably (it is written before a ledger record refers to it) and
    /// returns its hash. Storing content that is already there writes nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<String> {
        let hash = hash(bytes);
        let path = self.path(&hash);
        if path.exists() {
            return Ok(hash);
        }
        let fan = self.dir.join(&hash[..2]);
        create_dir_private(&fan)?;
        // The temporary file lives in `objects/`, where the next put finds it if this
        // process dies mid-write (not in one of 256 fan-out directories).
        write_atomic_via(&self.dir, &path, bytes, Durability::Durable)?;
        Ok(hash)
    }

    /// Reads an object and checks its hash.
    pub fn get(&self, hash: &str) -> Result<Vec<u8>> {
        if !is_hash(hash) {
            return Err(Error::ObjectMissing {
                hash: hash.to_owned(),
            });
        }
        let path = self.path(hash);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::ObjectMissing {
                    hash: hash.to_owned(),
                })
            }
            Err(e) => return Err(Error::io("read", path)(e)),
        };
        let actual = self::hash(&bytes);
        if actual != hash {
            return Err(Error::ObjectDamaged {
                hash: hash.to_owned(),
                actual,
            });
        }
        Ok(bytes)
    }

    pub fn contains(&self, hash: &str) -> bool {
        is_hash(hash) && self.path(hash).exists()
    }

    /// The stored objects whose hash starts with `prefix` (at least 2 hex digits), sorted.
    pub fn with_prefix(&self, prefix: &str) -> Result<Vec<String>> {
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if prefix.len() < 2 || prefix.len() > 64 || !prefix.bytes().all(hex) {
            return Ok(Vec::new());
        }
        let dir = self.dir.join(&prefix[..2]);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("list", dir)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(Error::io("list", dir.clone()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let hash = format!("{}{name}", &prefix[..2]);
            if hash.starts_with(prefix) && is_hash(&hash) {
                out.push(hash);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Every stored object's hash (for fsck), sorted.
    pub fn list(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let fans = match fs::read_dir(&self.dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io("list", self.dir.clone())(e)),
        };
        for fan in fans {
            let fan = fan.map_err(Error::io("list", self.dir.clone()))?;
            let prefix = fan.file_name().to_string_lossy().into_owned();
            if prefix.len() != 2 || !fan.path().is_dir() {
                continue;
            }
            let dir = fan.path();
            for entry in fs::read_dir(&dir).map_err(Error::io("list", dir.clone()))? {
                let entry = entry.map_err(Error::io("list", dir.clone()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(crate::fsutil::TMP_PREFIX) {
                    continue;
                }
                out.push(format!("{prefix}{name}"));
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_content_is_stored_once_and_verified() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(dir.path());
        let a = objects.put(b"hello").expect("put");
        let b = objects.put(b"hello").expect("put");
        assert_eq!(a, b);
        assert_eq!(objects.list().expect("list"), vec![a.clone()]);
        assert_eq!(objects.get(&a).expect("get"), b"hello");
        fs::write(objects.path(&a), b"HELLO").expect("damage");
        assert!(matches!(objects.get(&a), Err(Error::ObjectDamaged { .. })));
    }

    #[test]
    fn objects_are_found_by_a_prefix_of_their_hash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = Objects::new(dir.path());
        let a = objects.put(b"one").expect("put");
        let b = objects.put(b"two").expect("put");
        assert_eq!(objects.with_prefix(&a[..8]).expect("find"), vec![a.clone()]);
        assert_eq!(objects.with_prefix(&b).expect("find"), vec![b.clone()]);
        assert!(objects.with_prefix("zz").expect("not hex").is_empty());
        assert!(objects.with_prefix(&a[..1]).expect("short").is_empty());
        let fan = objects.with_prefix(&a[..2]).expect("fan");
        assert!(fan.contains(&a));
    }
}
