//! Secret key files: created readable by the owner only, and refused when
//! anyone else can read them (as ssh does for private keys).

use std::fs;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use crate::error::Error;

/// Key files end with a SHA-256 digest of the secret, so a damaged key
/// is refused instead of silently becoming another key.
const MAGIC: &[u8; 8] = b"PSIKKEY2";
/// Key files of earlier builds (no digest); still read.
const MAGIC_UNDIGESTED: &[u8; 8] = b"PSIKKEY1";

/// Writes `secret` to a new file at `path` with mode 0600. Fails if the file
/// exists, so a key is never silently replaced.
pub fn write_secret(path: &Path, secret: &[u8]) -> Result<(), Error> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(|e| Error::io(path, e))?;
    f.write_all(&encode(secret))
        .map_err(|e| Error::io(path, e))?;
    f.sync_all().map_err(|e| Error::io(path, e))
}

/// Writes `secret` to `path` unless the file exists, in which case it must
/// hold the same secret: state saved next to another key would be paired
/// with it on load (every OPRF output would differ, every query would
/// silently miss), so that is refused.
pub fn write_or_match(path: &Path, secret: &[u8]) -> Result<(), Error> {
    if !path.exists() {
        return write_secret(path, secret);
    }
    let existing = read_secret(path)?;
    match bool::from(subtle::ConstantTimeEq::ct_eq(existing.as_slice(), secret)) {
        true => Ok(()),
        false => Err(Error::StateFile(format!(
            "{} holds the OPRF key of another database or filter state; use an empty directory",
            path.display()
        ))),
    }
}

/// A public digest of a secret key, stored beside what depends on the key
/// so that a state is never loaded under another key. SHA-256 with a
/// label: it reveals nothing usable about a uniformly random key.
#[cfg(feature = "filter")]
pub fn digest(secret: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"psikit oprf key digest v1")
        .chain_update(secret)
        .finalize()
        .into()
}

/// A key file's contents: magic, the secret, its digest.
pub(crate) fn encode(secret: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut out = Zeroizing::new(Vec::with_capacity(MAGIC.len() + secret.len() + 32));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(secret);
    out.extend_from_slice(&Sha256::digest(secret));
    out
}

/// Reads a key written by [`write_secret`], refusing files that group or
/// others may read.
pub fn read_secret(path: &Path) -> Result<Zeroizing<Vec<u8>>, Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(Error::StateFile(format!(
                "{} is accessible by other users (mode {:o}); run: chmod 600 {}",
                path.display(),
                mode & 0o777,
                path.display()
            )));
        }
    }
    let bytes = Zeroizing::new(fs::read(path).map_err(|e| Error::io(path, e))?);
    let secret =
        decode(&bytes).map_err(|why| Error::StateFile(format!("{}: {why}", path.display())))?;
    Ok(Zeroizing::new(secret.to_vec()))
}

/// The secret in a key file's contents (either format), or why the
/// contents are not a key file.
pub(crate) fn decode(bytes: &[u8]) -> Result<&[u8], &'static str> {
    if let Some(secret) = bytes.strip_prefix(MAGIC_UNDIGESTED.as_slice()) {
        return Ok(secret);
    }
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("not a psikit key file")?;
    let split = body.len().checked_sub(32).ok_or("truncated key file")?;
    let (secret, digest) = body.split_at(split);
    if Sha256::digest(secret).as_slice() != digest {
        return Err("damaged key file: its digest does not match");
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_file_round_trip_permissions_and_no_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        write_secret(&p, &[7; 32]).unwrap();
        assert_eq!(read_secret(&p).unwrap().as_slice(), &[7; 32]);
        assert!(write_secret(&p, &[8; 32]).is_err());
        // Any flipped byte, or a cut, is refused.
        let good = fs::read(&p).unwrap();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 1;
            fs::write(&p, &bad).unwrap();
            assert!(read_secret(&p).is_err(), "flip at {at} undetected");
        }
        fs::write(&p, &good[..good.len() - 1]).unwrap();
        assert!(read_secret(&p).is_err());
        // A key file of an earlier build (no digest) still reads.
        fs::write(&p, [b"PSIKKEY1".as_slice(), &[9; 32]].concat()).unwrap();
        assert_eq!(read_secret(&p).unwrap().as_slice(), &[9; 32]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
            let err = read_secret(&p).unwrap_err().to_string();
            assert!(err.contains("chmod 600"), "{err}");
        }
    }
}
