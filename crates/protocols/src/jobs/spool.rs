//! A job's spool files: the item keys of its input, then the same split
//! into buckets. Each file is `magic | records | count | SHA-256`, each
//! record an item key and the data row it came from; files appear whole
//! (written under a temporary name, then renamed) and are checked against
//! their digest when read, so a crash or a damaged disk never feeds a
//! bucket a half-written or altered file.
//!
//! Written by hand because the format is this simple and is read at disk
//! speed by the bucket pipeline; a general container (Arrow IPC, Parquet)
//! would bring its own integrity story and nothing the pipeline uses.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::common::files::AtomicFile;
use crate::error::Error;

/// An item as the bucketed protocols see it: a 128-bit hash of the
/// encoded key (two distinct keys among 2^40 collide with probability
/// below 2^-48).
pub type ItemKey = [u8; 16];

/// One spooled row: its item key and 1-based data row number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    pub key: ItemKey,
    pub row: u64,
}

const MAGIC: &[u8; 8] = b"PSIKSPL1";
const RECORD_BYTES: usize = 24;
const TRAILER_BYTES: usize = 8 + 32;

/// The item key of an encoded key (`psikit_io` item bytes),
/// domain-separated from every other hash in psikit.
pub fn item_key(key: &[u8]) -> ItemKey {
    let digest = Sha256::new()
        .chain_update(b"psikit job item v1")
        .chain_update((key.len() as u64).to_le_bytes())
        .chain_update(key)
        .finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// Writes a spool file record by record.
pub struct SpoolWriter {
    file: AtomicFile,
    hash: Sha256,
    count: u64,
}

impl SpoolWriter {
    /// A new spool file at `path`, written through a buffer of `buffer`
    /// bytes.
    pub fn create(path: &Path, buffer: usize) -> Result<Self, Error> {
        let mut this = Self {
            file: AtomicFile::with_buffer(path, buffer)?,
            hash: Sha256::new(),
            count: 0,
        };
        this.put(MAGIC)?;
        Ok(this)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.hash.update(bytes);
        self.file
            .writer()
            .write_all(bytes)
            .map_err(|e| Error::Job(format!("writing a spool file: {e}")))
    }

    pub fn push(&mut self, record: &Record) -> Result<(), Error> {
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[..16].copy_from_slice(&record.key);
        bytes[16..].copy_from_slice(&record.row.to_le_bytes());
        self.count += 1;
        self.put(&bytes)
    }

    /// Seals the file (count and digest) and makes it appear; returns the
    /// record count.
    pub fn finish(mut self) -> Result<u64, Error> {
        let count = self.count;
        self.put(&count.to_le_bytes())?;
        let digest = self.hash.clone().finalize();
        self.file
            .writer()
            .write_all(&digest)
            .map_err(|e| Error::Job(format!("writing a spool file: {e}")))?;
        self.file.commit()?;
        Ok(count)
    }
}

/// Reads a spool file record by record; [`finish`](Self::finish) checks
/// the count and digest, so a caller commits nothing it read before that.
pub struct SpoolReader {
    input: BufReader<File>,
    hash: Sha256,
    /// Records in the file (from its length) and left to read.
    records: u64,
    left: u64,
    path: PathBuf,
}

impl SpoolReader {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let damaged = |why: &str| Error::Job(format!("{}: {why}", path.display()));
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let body = len
            .checked_sub((MAGIC.len() + TRAILER_BYTES) as u64)
            .filter(|b| b % RECORD_BYTES as u64 == 0)
            .ok_or_else(|| damaged("not a whole spool file"))?;
        let mut input = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        input
            .read_exact(&mut magic)
            .map_err(|e| Error::io(path, e))?;
        if &magic != MAGIC {
            return Err(damaged("not a psikit spool file"));
        }
        let records = body / RECORD_BYTES as u64;
        Ok(Self {
            input,
            hash: Sha256::new().chain_update(MAGIC),
            records,
            left: records,
            path: path.to_owned(),
        })
    }

    /// Records left to read.
    pub fn len(&self) -> u64 {
        self.left
    }

    pub fn next(&mut self) -> Result<Option<Record>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut bytes = [0u8; RECORD_BYTES];
        self.input
            .read_exact(&mut bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.hash.update(bytes);
        self.left -= 1;
        let (key, row) = bytes.split_at(16);
        Ok(Some(Record {
            key: key
                .try_into()
                .map_err(|_| Error::Internal("record split"))?,
            row: u64::from_le_bytes(
                row.try_into()
                    .map_err(|_| Error::Internal("record split"))?,
            ),
        }))
    }

    /// Checks the trailer once every record was read.
    pub fn finish(mut self) -> Result<(), Error> {
        let damaged = |why: &str| Error::Job(format!("{}: {why}", self.path.display()));
        if self.left != 0 {
            return Err(damaged("records left unread"));
        }
        let mut trailer = [0u8; TRAILER_BYTES];
        self.input
            .read_exact(&mut trailer)
            .map_err(|e| Error::io(&self.path, e))?;
        let (count, digest) = trailer.split_at(8);
        self.hash.update(count);
        if self.hash.clone().finalize().as_slice() != digest {
            return Err(damaged("damaged: its digest does not match its contents"));
        }
        if count != self.records.to_le_bytes() {
            return Err(damaged("its record count does not match its records"));
        }
        Ok(())
    }

    /// Every record of the file, checked.
    pub fn read_all(path: &Path) -> Result<Vec<Record>, Error> {
        let mut reader = Self::open(path)?;
        let mut records = Vec::with_capacity(usize::try_from(reader.len()).unwrap_or(0));
        while let Some(r) = reader.next()? {
            records.push(r);
        }
        reader.finish()?;
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        let records: Vec<Record> = (0..1000u64)
            .map(|i| Record {
                key: item_key(&i.to_le_bytes()),
                row: i + 1,
            })
            .collect();
        let mut w = SpoolWriter::create(&path, 4096).expect("create");
        for r in &records {
            w.push(r).expect("push");
        }
        assert_eq!(w.finish().expect("finish"), 1000);
        assert_eq!(SpoolReader::read_all(&path).expect("read"), records);

        let mut bytes = std::fs::read(&path).expect("bytes");
        bytes[100] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let err = SpoolReader::read_all(&path).unwrap_err().to_string();
        assert!(err.contains("digest"), "{err}");
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).expect("write");
        let err = SpoolReader::read_all(&path).unwrap_err().to_string();
        assert!(err.contains("not a whole"), "{err}");
    }
}
