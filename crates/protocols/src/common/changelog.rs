//! A large file kept current by small ones, so that changing 1% of a big
//! state writes about 1% of it.
//!
//! The *base* is written whole by its owner (atomically, ending with the
//! SHA-256 of everything before it). Each later change goes to a numbered
//! *change file* beside it, `<base>.1`, `<base>.2`, ..., written
//! atomically and sealed ([`write_sealed_as`]):
//!
//! ```text
//! PSIKCHG\0 | digest it follows (32) | the owner's body | SHA-256 of all that
//! ```
//!
//! The digest a change follows is the base's for `.1` and the previous
//! change file's seal for the others, so the files form a chain from the
//! base. Reading follows the chain and stops at the first number that is
//! missing or follows something else: a crash between a new base's rename
//! and the removal of the old change files leaves changes that the new
//! base already holds, and they are skipped (and removed by the next
//! write). A change file whose seal does not match is an error, never
//! skipped. The owner writes a new base ([`ChangeLog::restart`]) once the
//! changes pass a quarter of the base ([`ChangeLog::has_room`]), so reading
//! never costs more than 1.25 times the base.

use std::fs;
use std::path::{Path, PathBuf};

use super::files::{read_sealed, seal, write_atomic, write_atomic_private, write_sealed_as};
use crate::error::Error;

const MAGIC: &[u8; 8] = b"PSIKCHG\0";

/// Changes may reach this fraction of the base's size before the owner
/// writes a new base.
const ROOM_DIVISOR: u64 = 4;

/// Bytes a change file adds to its body.
const OVERHEAD: u64 = 8 + 32 + 32;

/// A log positioned after the changes read, and their bodies in order.
pub type Followed = (ChangeLog, Vec<Vec<u8>>);

/// The change files of one base: which exist, and where the next goes.
#[derive(Debug, Clone)]
pub struct ChangeLog {
    base: PathBuf,
    base_digest: [u8; 32],
    base_len: u64,
    private: bool,
    /// The number of the next change file.
    next: u64,
    /// What the next change follows.
    last: [u8; 32],
    /// Bytes of the change files so far.
    bytes: u64,
}

impl ChangeLog {
    /// The bodies of the changes that follow the base at `base` (its
    /// digest `base_digest`, `base_len` bytes), in order, and the log
    /// positioned after them. `private` change files are owner-only.
    pub fn read(
        base: &Path,
        base_digest: [u8; 32],
        base_len: u64,
        private: bool,
    ) -> Result<Followed, Error> {
        let mut log = Self::empty(base, base_digest, base_len, private);
        let bodies = log.follow()?;
        Ok((log, bodies))
    }

    /// A log with no change yet after its base.
    fn empty(base: &Path, base_digest: [u8; 32], base_len: u64, private: bool) -> Self {
        Self {
            base: base.to_path_buf(),
            base_digest,
            base_len,
            private,
            next: 1,
            last: base_digest,
            bytes: 0,
        }
    }

    /// The changes written since this log's last one, and the log
    /// positioned after them, if its base is still the file on disk;
    /// `None` when the base was written again (read it whole instead).
    pub fn read_more(&self) -> Result<Option<Followed>, Error> {
        if self.base_on_disk() != Some(self.base_digest) {
            return Ok(None);
        }
        let mut log = self.clone();
        let bodies = log.follow()?;
        Ok(Some((log, bodies)))
    }

    /// Reads change files from the next number on, while they follow.
    fn follow(&mut self) -> Result<Vec<Vec<u8>>, Error> {
        let mut bodies = Vec::new();
        while let Some(sealed) = read_sealed(&self.path(self.next), MAGIC)? {
            let Some((follows, body)) = sealed.split_first_chunk::<32>() else {
                return Err(Error::StateFile(format!(
                    "{} is too short for a change",
                    self.path(self.next).display()
                )));
            };
            if *follows != self.last {
                break;
            }
            self.last = seal(MAGIC, &sealed);
            self.bytes += sealed.len() as u64 + OVERHEAD - 32;
            self.next += 1;
            bodies.push(body.to_vec());
        }
        Ok(bodies)
    }

    /// The log of a base just written whole (digest `base_digest`,
    /// `base_len` bytes): the old base's change files are removed.
    pub fn restart(
        base: &Path,
        base_digest: [u8; 32],
        base_len: u64,
        private: bool,
    ) -> Result<Self, Error> {
        for (_, path) in change_files(base)? {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(&path, e))
                }
                _ => {}
            }
        }
        Ok(Self::empty(base, base_digest, base_len, private))
    }

    /// Whether `more` bytes of changes may still be appended, or the
    /// owner should write a new base: they may while the changes stay
    /// within a quarter of the base, and while the files on disk are the
    /// ones this log follows (the base unchanged, no change file past
    /// ours: another writer would otherwise be overwritten).
    pub fn has_room(&self, more: u64) -> bool {
        let within = self.bytes + more + OVERHEAD <= self.base_len / ROOM_DIVISOR;
        within && self.base_on_disk() == Some(self.base_digest) && !self.path(self.next).exists()
    }

    /// Writes the next change.
    pub fn append(&mut self, body: &[u8]) -> Result<(), Error> {
        let mut sealed = Vec::with_capacity(32 + body.len());
        sealed.extend_from_slice(&self.last);
        sealed.extend_from_slice(body);
        write_sealed_as(&self.path(self.next), MAGIC, &sealed, self.private)?;
        self.last = seal(MAGIC, &sealed);
        self.bytes += sealed.len() as u64 + OVERHEAD - 32;
        self.next += 1;
        Ok(())
    }

    /// How many changes follow the base.
    pub fn len(&self) -> u64 {
        self.next - 1
    }

    /// Whether no change follows the base.
    pub fn is_empty(&self) -> bool {
        self.next == 1
    }

    /// The base file this log belongs to.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// The digest at the end of the base file now on disk, if readable.
    fn base_on_disk(&self) -> Option<[u8; 32]> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = fs::File::open(&self.base).ok()?;
        file.seek(SeekFrom::End(-32)).ok()?;
        let mut digest = [0u8; 32];
        file.read_exact(&mut digest).ok()?;
        Some(digest)
    }

    fn path(&self, number: u64) -> PathBuf {
        change_path(&self.base, number)
    }
}

fn change_path(base: &Path, number: u64) -> PathBuf {
    let mut name = base.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{number}"));
    base.with_file_name(name)
}

/// Saves a state kept as `base` and the change files of `log`: its
/// `pending` changes as change files while they fit (unless `whole`),
/// else the whole state (`encode`), written atomically, with a fresh log.
/// `private` files are owner-only.
pub fn save(
    log: &mut Option<ChangeLog>,
    base: &Path,
    pending: &[Vec<u8>],
    whole: bool,
    private: bool,
    encode: impl FnOnce() -> Vec<u8>,
) -> Result<(), Error> {
    use std::io::Write;
    let more = pending.iter().map(|c| c.len() as u64).sum();
    match log {
        Some(log) if !whole && log.base() == base && log.has_room(more) => {
            for change in pending {
                log.append(change)?;
            }
        }
        _ => {
            let bytes = encode();
            match private {
                true => write_atomic_private(base, |w| w.write_all(&bytes))?,
                false => write_atomic(base, |w| w.write_all(&bytes))?,
            }
            let len = bytes.len() as u64;
            *log = Some(ChangeLog::restart(
                base,
                trailing_digest(&bytes),
                len,
                private,
            )?);
        }
    }
    Ok(())
}

/// The digest a base ends with, what its first change follows (zeros for
/// a file too short to have one, which no change follows).
pub fn trailing_digest(base: &[u8]) -> [u8; 32] {
    let mut digest = [0u8; 32];
    if let Some(tail) = base.len().checked_sub(32).and_then(|at| base.get(at..)) {
        digest.copy_from_slice(tail);
    }
    digest
}

/// The base and its change files now on disk, in order: what a watcher
/// stamps to see that the state changed.
pub fn files(base: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut files = vec![base.to_path_buf()];
    files.extend(change_files(base)?.into_iter().map(|(_, p)| p));
    Ok(files)
}

/// `<base>.<number>` files beside `base`, by number.
fn change_files(base: &Path) -> Result<Vec<(u64, PathBuf)>, Error> {
    let dir = match base.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Some(stem) = base.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let number = name.to_str()?.strip_prefix(stem)?.strip_prefix('.')?;
            let valid = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
            Some((number.parse().ok().filter(|_| valid)?, entry.path()))
        })
        .collect();
    found.sort_unstable();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::files::write_atomic;
    use std::io::Write;

    /// Writes a base whose last 32 bytes are its digest.
    fn base(path: &Path, content: &[u8]) -> [u8; 32] {
        let digest = seal(b"testbase", content);
        write_atomic(path, |w| {
            w.write_all(content)?;
            w.write_all(&digest)
        })
        .expect("base");
        digest
    }

    #[test]
    fn changes_are_read_back_in_order_until_the_chain_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let digest = base(&path, &[1; 4000]);
        let (mut log, none) = ChangeLog::read(&path, digest, 4032, false).expect("read");
        assert!(none.is_empty() && log.is_empty());
        assert!(log.has_room(100));
        log.append(b"one").expect("append");
        log.append(b"two").expect("append");
        let (again, bodies) = ChangeLog::read(&path, digest, 4032, false).expect("read");
        assert_eq!(bodies, vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(again.len(), 2);
        assert_eq!(files(&path).expect("files").len(), 3);
        // No room past a quarter of the base, nor once a change file past
        // this log's exists (another writer's).
        assert!(!log.has_room(1000));
        let mut stale = again.clone();
        stale.next -= 1;
        assert!(!stale.has_room(1));
    }

    #[test]
    fn a_reader_reads_only_the_changes_it_has_not_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let digest = base(&path, &[1; 4000]);
        let (mut writer, _) = ChangeLog::read(&path, digest, 4032, false).expect("read");
        writer.append(b"one").expect("append");
        let (reader, _) = ChangeLog::read(&path, digest, 4032, false).expect("read");
        writer.append(b"two").expect("append");
        writer.append(b"three").expect("append");
        let (reader, more) = reader.read_more().expect("read").expect("same base");
        assert_eq!(more, vec![b"two".to_vec(), b"three".to_vec()]);
        assert_eq!(reader.len(), 3);
        let (_, none) = reader.read_more().expect("read").expect("same base");
        assert!(none.is_empty());
        // A new base: the reader must read it whole.
        base(&path, &[2; 4000]);
        assert!(reader.read_more().expect("read").is_none());
    }

    #[test]
    fn a_new_base_skips_and_then_removes_the_old_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let old = base(&path, &[1; 400]);
        let (mut log, _) = ChangeLog::read(&path, old, 432, false).expect("read");
        log.append(b"kept in the new base").expect("append");
        // A crash after the new base's rename, before the restart.
        let new = base(&path, &[2; 400]);
        let (_, bodies) = ChangeLog::read(&path, new, 432, false).expect("read");
        assert!(bodies.is_empty(), "the old base's change is not replayed");
        let mut log = ChangeLog::restart(&path, new, 432, false).expect("restart");
        assert_eq!(files(&path).expect("files"), vec![path.clone()]);
        log.append(b"after").expect("append");
        let (_, bodies) = ChangeLog::read(&path, new, 432, false).expect("read");
        assert_eq!(bodies, vec![b"after".to_vec()]);
    }

    #[test]
    fn a_damaged_change_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let digest = base(&path, &[1; 400]);
        let (mut log, _) = ChangeLog::read(&path, digest, 432, false).expect("read");
        log.append(b"change").expect("append");
        let change = change_path(&path, 1);
        let mut bytes = fs::read(&change).expect("read");
        bytes[45] ^= 1;
        fs::write(&change, &bytes).expect("write");
        assert!(ChangeLog::read(&path, digest, 432, false).is_err());
        fs::write(&change, &bytes[..20]).expect("write");
        assert!(ChangeLog::read(&path, digest, 432, false).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn private_changes_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cache");
        let digest = base(&path, &[1; 400]);
        let (mut log, _) = ChangeLog::read(&path, digest, 432, true).expect("read");
        log.append(b"hashes").expect("append");
        let mode = fs::metadata(change_path(&path, 1))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
