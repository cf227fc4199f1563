//! How psikit writes the files it keeps (states, databases, caches): never
//! half-written, never mixed with a concurrent writer's.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use rand::RngCore;

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
    let tmp = temporary_name(path);
    let written = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        write(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    sync_dir(path);
    Ok(())
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
