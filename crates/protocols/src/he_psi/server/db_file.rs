//! Saving and loading a sender database.
//!
//! Layout (little-endian): magic `PSIKHEDB`, format version (u32), the
//! parameters as APSI JSON (u32 length + bytes), the maximum label length
//! (u32), the key format (u32 length + bytes), the label columns' names
//! (u32 count, each u32 length + bytes), the item count (u64), the number
//! of bundle indices (u32), then
//! per bundle index its bundle count (u32) and each bundle's bin counts
//! (u16), entry felts (u32) and coefficients (u32), and last a SHA-256 of
//! everything before it. Coefficients are stored rather than recomputed so
//! that loading costs one read, not a rebuild. The OPRF key is never in this
//! file (it lives in its own owner-only key file).
//!
//! Files are written to a temporary name and renamed, so a crash never
//! leaves a half-written database under the real name. Loading checks the
//! checksum and every size and value range before use.

use std::fs;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::common::files::write_atomic;
use crate::error::Error;
use crate::he_psi::common::shape::DbShape;
use crate::he_psi::params::PsiParams;
use crate::he_psi::server::bundle::BinBundle;
use crate::he_psi::server::sender_db::SenderDb;

const MAGIC: &[u8; 8] = b"PSIKHEDB";
/// Bumped whenever the layout changes; older files are refused, except
/// the two below.
pub const FORMAT_VERSION: u32 = 3;
/// The format before the label columns' names were recorded (read as
/// unknown).
const UNNAMED_VERSION: u32 = 2;
/// The format before the key format was recorded (read as unknown).
const UNFORMATTED_VERSION: u32 = 1;
/// Longest parameter JSON accepted from a file.
const MAX_PARAMS_JSON: usize = 1 << 16;

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.hash.update(bytes);
        self.inner.write_all(bytes)
    }

    fn put_u32s(&mut self, vals: &[u32]) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(vals.len().min(1 << 16) * 4);
        for chunk in vals.chunks(1 << 16) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
            self.put(&buf)?;
        }
        Ok(())
    }
}

/// Writes `db` to `path` atomically.
pub fn save(db: &SenderDb, path: &Path) -> Result<(), Error> {
    write_atomic(path, |out| write_to(db, out))
}

/// Writes the file's contents (body, then its digest) to `out`.
pub(crate) fn write_to<W: Write>(db: &SenderDb, out: W) -> std::io::Result<()> {
    let mut w = Hashing {
        inner: out,
        hash: Sha256::new(),
    };
    write_body(db, &mut w)?;
    let digest = w.hash.finalize();
    w.inner.write_all(&digest)
}

fn write_body<W: Write>(db: &SenderDb, w: &mut Hashing<W>) -> std::io::Result<()> {
    let json = db.params().to_apsi_json();
    w.put(MAGIC)?;
    w.put(&FORMAT_VERSION.to_le_bytes())?;
    w.put(&(json.len() as u32).to_le_bytes())?;
    w.put(json.as_bytes())?;
    w.put(&(db.shape().max_label_bytes as u32).to_le_bytes())?;
    w.put(&(db.key_format().len() as u32).to_le_bytes())?;
    w.put(db.key_format().as_bytes())?;
    w.put(&(db.label_columns().len() as u32).to_le_bytes())?;
    for name in db.label_columns() {
        w.put(&(name.len() as u32).to_le_bytes())?;
        w.put(name.as_bytes())?;
    }
    w.put(&(db.len() as u64).to_le_bytes())?;
    w.put(&(db.bundles().len() as u32).to_le_bytes())?;
    for bundles in db.bundles() {
        w.put(&(bundles.len() as u32).to_le_bytes())?;
        for bundle in bundles {
            let (counts, felts, coeffs) = bundle.parts();
            let counts: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
            w.put(&counts)?;
            w.put_u32s(felts)?;
            w.put_u32s(coeffs)?;
        }
    }
    Ok(())
}

/// A reader that hashes what passes through it.
struct Checked<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Checked<R> {
    fn take(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        (&mut self.inner).take(n as u64).read_to_end(&mut buf)?;
        if buf.len() != n {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.hash.update(&buf);
        Ok(buf)
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> std::io::Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(&b);
        Ok(u64::from_le_bytes(a))
    }

    fn u32s(&mut self, n: usize) -> std::io::Result<Vec<u32>> {
        let mut out = Vec::with_capacity(n);
        let mut left = n;
        while left > 0 {
            let step = left.min(1 << 16);
            let bytes = self.take(step * 4)?;
            out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            left -= step;
        }
        Ok(out)
    }
}

/// Loads a database written by [`save`].
pub fn load(path: &Path) -> Result<SenderDb, Error> {
    let file = fs::File::open(path).map_err(|e| Error::io(path, e))?;
    read_from(BufReader::with_capacity(1 << 20, file), path)
}

/// Reads a database written by [`write_to`] from `input`; `path` names it
/// in errors.
pub(crate) fn read_from<R: Read>(input: R, path: &Path) -> Result<SenderDb, Error> {
    let mut r = Checked {
        inner: input,
        hash: Sha256::new(),
    };
    let bad = |what: &str| Error::StateFile(format!("{}: {what}", path.display()));
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => bad("truncated"),
        _ => Error::io(path, e),
    };
    if r.take(MAGIC.len()).map_err(io)? != MAGIC {
        return Err(bad("not a psikit HE sender database"));
    }
    let version = r.u32().map_err(io)?;
    if ![FORMAT_VERSION, UNNAMED_VERSION, UNFORMATTED_VERSION].contains(&version) {
        return Err(bad(&format!(
            "format version {version}; this build reads version {FORMAT_VERSION}"
        )));
    }
    let json_len = r.u32().map_err(io)? as usize;
    if json_len > MAX_PARAMS_JSON {
        return Err(bad("parameter block too large"));
    }
    let json = String::from_utf8(r.take(json_len).map_err(io)?)
        .map_err(|_| bad("parameters are not UTF-8"))?;
    let params = PsiParams::from_apsi_json(&json)?;
    let max_label = r.u32().map_err(io)? as usize;
    let shape = DbShape::new(&params, max_label)?;
    let string = |r: &mut Checked<_>, max: u64, what: &str| -> Result<String, Error> {
        let len = r.u32().map_err(io)? as u64;
        if len > max {
            return Err(bad(&format!("{what} too long")));
        }
        String::from_utf8(r.take(len as usize).map_err(io)?)
            .map_err(|_| bad(&format!("{what} is not UTF-8")))
    };
    let key_format = match version {
        UNFORMATTED_VERSION => String::new(),
        _ => string(&mut r, psikit_io::MAX_KEY_FORMAT, "key format")?,
    };
    let mut label_columns = Vec::new();
    if version == FORMAT_VERSION {
        let count = r.u32().map_err(io)? as usize;
        if count > psikit_io::MAX_LABEL_COLUMNS {
            return Err(bad("too many label columns"));
        }
        for _ in 0..count {
            label_columns.push(string(
                &mut r,
                psikit_io::MAX_LABEL_NAME,
                "label column name",
            )?);
        }
    }
    let items = r.u64().map_err(io)?;
    if r.u32().map_err(io)? as usize != shape.bundle_idx_count() {
        return Err(bad("bundle index count does not match the parameters"));
    }
    let mut bundles = Vec::with_capacity(shape.bundle_idx_count());
    for _ in 0..shape.bundle_idx_count() {
        let count = r.u32().map_err(io)?;
        let mut here = Vec::new();
        for _ in 0..count {
            here.push(
                read_bundle(&mut r, &shape)
                    .map_err(io)?
                    .ok_or_else(|| bad("corrupt bin bundle"))?,
            );
        }
        bundles.push(here);
    }
    let digest = r.hash.clone().finalize();
    let mut stored = [0u8; 32];
    r.inner.read_exact(&mut stored).map_err(io)?;
    if stored[..] != digest[..] {
        return Err(bad("checksum mismatch (the file is corrupt)"));
    }
    // The digest ends the file: bytes after it are damage the digest
    // does not cover.
    if r.inner.read(&mut [0u8; 1]).map_err(io)? != 0 {
        return Err(bad("bytes after the checksum (the file is corrupt)"));
    }
    let items = usize::try_from(items).map_err(|_| bad("item count too large"))?;
    Ok(SenderDb::from_parts(
        params,
        shape,
        bundles,
        items,
        (key_format, label_columns),
    ))
}

fn read_bundle<R: Read>(r: &mut Checked<R>, shape: &DbShape) -> std::io::Result<Option<BinBundle>> {
    let (nc, nf, nk) = BinBundle::sizes(shape);
    let counts: Vec<u16> = r
        .take(nc * 2)?
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    let felts = r.u32s(nf)?;
    let coeffs = r.u32s(nk)?;
    Ok(BinBundle::from_parts(shape, counts, felts, coeffs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::he_psi::server::sender_db::tests::{random_outputs, small_db};
    use crate::he_psi::server::sender_db::DbEntry;
    use rand::SeedableRng;

    fn sample_db() -> SenderDb {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let outs = random_outputs(&mut rng, 300);
        let entries: Vec<DbEntry> = outs
            .iter()
            .map(|o| DbEntry {
                oprf: *o,
                label: b"label",
            })
            .collect();
        let mut db = small_db(8);
        db.insert_or_assign(&entries).unwrap();
        db
    }

    #[test]
    fn save_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("he.db");
        let db = sample_db();
        save(&db, &path).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.params(), db.params());
        assert_eq!(back.shape(), db.shape());
        assert_eq!(back.len(), db.len());
        assert_eq!(back.bundles(), db.bundles());
    }

    #[test]
    fn corrupt_truncated_and_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("he.db");
        save(&sample_db(), &path).unwrap();
        let good = fs::read(&path).unwrap();

        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        fs::write(&path, &flipped).unwrap();
        let err = load(&path).err().unwrap().to_string();
        assert!(err.contains("checksum") || err.contains("corrupt"), "{err}");

        fs::write(&path, [&good[..], b"x"].concat()).unwrap();
        let err = load(&path).err().unwrap().to_string();
        assert!(err.contains("after the checksum"), "{err}");

        fs::write(&path, &good[..good.len() - 40]).unwrap();
        assert!(load(&path).err().unwrap().to_string().contains("truncated"));

        let mut versioned = good.clone();
        versioned[8] = 9;
        fs::write(&path, &versioned).unwrap();
        assert!(load(&path).err().unwrap().to_string().contains("version"));

        fs::write(&path, b"not a database at all").unwrap();
        assert!(load(&path)
            .err()
            .unwrap()
            .to_string()
            .contains("not a psikit"));
    }
}
