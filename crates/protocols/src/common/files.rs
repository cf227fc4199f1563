//! How psikit writes the files it keeps (states, databases, caches): never
//! half-written, never mixed with a concurrent writer's.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::Error;

/// Writes `path` atomically: `write` fills a new temporary file in the
/// same directory (a name of its own, so concurrent writers never share
/// one), which is flushed to disk and renamed over `path`; the directory
/// is synced so the rename survives a crash. Readers see the old file or
/// the new one, never a mix; a failed write leaves the old file and
/// removes the temporary one.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    fill_and_commit(AtomicFile::create(path)?, path, write)
}

/// [`write_atomic`] for a file only its owner may read (mode 0600 on
/// Unix from the moment it exists): caches that hold hashes of a party's
/// items.
pub fn write_atomic_private(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    fill_and_commit(AtomicFile::open(path, 1 << 20, true)?, path, write)
}

fn fill_and_commit(
    mut file: AtomicFile,
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), Error> {
    match write(file.writer()) {
        Ok(()) => file.commit(),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// The digest that ends a sealed file: SHA-256 of its magic and body.
pub fn seal(magic: &[u8; 8], body: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(magic)
        .chain_update(body)
        .finalize()
        .into()
}

/// Writes `magic | body | seal(magic, body)` atomically.
pub fn write_sealed(path: &Path, magic: &[u8; 8], body: &[u8]) -> Result<(), Error> {
    write_sealed_as(path, magic, body, false)
}

/// [`write_sealed`], owner-only when `private` (see [`write_atomic_private`]).
pub fn write_sealed_as(
    path: &Path,
    magic: &[u8; 8],
    body: &[u8],
    private: bool,
) -> Result<(), Error> {
    let digest = seal(magic, body);
    let file = AtomicFile::open(path, 1 << 20, private)?;
    fill_and_commit(file, path, |w| {
        use std::io::Write;
        w.write_all(magic)?;
        w.write_all(body)?;
        w.write_all(&digest)
    })
}

/// The body of a sealed file, `None` if there is none; a damaged file
/// (another magic, a digest that does not match) is an error, never read
/// as something else.
pub fn read_sealed(path: &Path, magic: &[u8; 8]) -> Result<Option<Vec<u8>>, Error> {
    let mut bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let damaged = || {
        Error::StateFile(format!(
            "{} is damaged (its digest does not match)",
            path.display()
        ))
    };
    if bytes.len() < 40 || &bytes[..8] != magic {
        return Err(damaged());
    }
    let body_end = bytes.len() - 32;
    if seal(magic, &bytes[8..body_end]) != bytes[body_end..] {
        return Err(damaged());
    }
    bytes.truncate(body_end);
    bytes.drain(..8);
    Ok(Some(bytes))
}

/// A file written in several steps that appears at its path only whole
/// ([`commit`](Self::commit)), as [`write_atomic`] does for one closure:
/// how the long-running jobs write their spool files and outputs.
/// Dropped without a commit, it removes its temporary file.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Starts writing what will become `path`, through a 1 MiB buffer.
    pub fn create(path: &Path) -> Result<Self, Error> {
        Self::with_buffer(path, 1 << 20)
    }

    /// [`create`](Self::create) with a buffer of `bytes` (many files open
    /// at once each take a small one).
    pub fn with_buffer(path: &Path, bytes: usize) -> Result<Self, Error> {
        Self::open(path, bytes, false)
    }

    fn open(path: &Path, bytes: usize, private: bool) -> Result<Self, Error> {
        let tmp = temporary_name(path);
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        let file = options.open(&tmp).map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_owned(),
            tmp,
            out: Some(BufWriter::with_capacity(bytes, file)),
        })
    }

    /// Where to write the contents.
    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.out
            .as_mut()
            .expect("an uncommitted file has its writer")
    }

    /// Flushes the contents to disk and renames them over the path; the
    /// directory is synced so the rename survives a crash.
    pub fn commit(mut self) -> Result<(), Error> {
        let out = self.out.take().expect("an uncommitted file has its writer");
        let done = out
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .and_then(|()| fs::rename(&self.tmp, &self.path));
        done.map_err(|e| Error::io(&self.path, e))?;
        sync_dir(&self.path);
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// `dir/.name.<random>.tmp` next to `path`.
fn temporary_name(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let unique = rand::rngs::OsRng.next_u64();
    path.with_file_name(format!(".{}.{unique:016x}.tmp", name.unwrap_or_default()))
}

/// Makes a rename in `path`'s directory durable; best effort, since some
/// file systems cannot sync a directory.
fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        write_atomic(&path, |w| w.write_all(b"one")).expect("first");
        write_atomic(&path, |w| w.write_all(b"second")).expect("second");
        assert_eq!(fs::read(&path).expect("read"), b"second");
        let failed = write_atomic(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read(&path).expect("read"), b"second", "old file kept");
        let names: Vec<_> = fs::read_dir(dir.path()).expect("ls").collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }

    #[test]
    fn concurrent_writers_each_land_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cache");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(path, |w| w.write_all(&[t; 4096])).expect("write");
                    }
                });
            }
        });
        let bytes = fs::read(&path).expect("read");
        assert_eq!(bytes.len(), 4096);
        assert!(
            bytes.iter().all(|&b| b == bytes[0]),
            "one writer's file, whole"
        );
    }
}
