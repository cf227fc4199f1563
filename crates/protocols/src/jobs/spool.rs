//! A job's spool files: the item keys of its input, then the same split
//! into buckets. Each file is `magic | k | records | count | SHA-256`,
//! each record an item key, the data row it came from and the row's `k`
//! values (circuit PSI's value columns, none for the balanced protocols,
//! `k` one byte), and in a keyed file (circuit PSI's union, whose result
//! is keys) the encoded key itself, length-prefixed; files appear whole
//! (written under a temporary name, then renamed) and are checked against
//! their digest when read, so a crash or a damaged disk never feeds a
//! bucket a half-written or altered file.
//!
//! Written by hand because the format is this simple and is read at disk
//! speed by the bucket pipeline; a general container (Arrow IPC, Parquet)
//! would bring its own integrity story and nothing the pipeline uses.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
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

const MAGIC: &[u8; 8] = b"PSIKSPL2";
/// A keyed spool file's magic.
const MAGIC_KEYED: &[u8; 8] = b"PSIKSPL3";
const RECORD_BYTES: usize = 24;
const VALUE_BYTES: usize = 8;
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
    columns: usize,
    keyed: bool,
}

impl SpoolWriter {
    /// A new spool file at `path` of records with `columns` values each
    /// (and their encoded keys if `keyed`), written through a buffer of
    /// `buffer` bytes.
    pub fn create(path: &Path, buffer: usize, columns: u8, keyed: bool) -> Result<Self, Error> {
        let mut this = Self {
            file: AtomicFile::with_buffer(path, buffer)?,
            hash: Sha256::new(),
            count: 0,
            columns: usize::from(columns),
            keyed,
        };
        this.put(if keyed { MAGIC_KEYED } else { MAGIC })?;
        this.put(&[columns])?;
        Ok(this)
    }

    /// Whether records carry their encoded keys.
    pub fn keyed(&self) -> bool {
        self.keyed
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.hash.update(bytes);
        self.file
            .writer()
            .write_all(bytes)
            .map_err(|e| Error::Job(format!("writing a spool file: {e}")))
    }

    /// Appends a record, its values (as many as the file's columns) and,
    /// in a keyed file, its encoded key (empty otherwise).
    pub fn push(&mut self, record: &Record, values: &[u64], key: &[u8]) -> Result<(), Error> {
        if values.len() != self.columns {
            return Err(Error::Internal("a spool record's values and its columns"));
        }
        if !self.keyed && !key.is_empty() {
            return Err(Error::Internal("a key in a spool file without keys"));
        }
        let len =
            u16::try_from(key.len()).map_err(|_| Error::Internal("a spooled key's length"))?;
        let mut bytes = [0u8; RECORD_BYTES];
        bytes[..16].copy_from_slice(&record.key);
        bytes[16..].copy_from_slice(&record.row.to_le_bytes());
        self.count += 1;
        self.put(&bytes)?;
        for v in values {
            self.put(&v.to_le_bytes())?;
        }
        if self.keyed {
            self.put(&len.to_le_bytes())?;
            self.put(key)?;
        }
        Ok(())
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
    /// Records in the file (from its length, or a keyed file's trailer)
    /// and left to read.
    records: u64,
    left: u64,
    columns: usize,
    keyed: bool,
    /// The values of the record last read.
    values: Vec<u64>,
    /// The encoded key of the record last read (keyed files).
    key: Vec<u8>,
    path: PathBuf,
}

impl SpoolReader {
    pub fn open(path: &Path) -> Result<Self, Error> {
        let damaged = |why: &str| Error::Job(format!("{}: {why}", path.display()));
        let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let mut head = [0u8; 9];
        file.read_exact(&mut head)
            .map_err(|_| damaged("not a whole spool file"))?;
        let keyed = match &head[..8] {
            m if m == MAGIC => false,
            m if m == MAGIC_KEYED => true,
            _ => return Err(damaged("not a psikit spool file")),
        };
        let columns = usize::from(head[8]);
        let record = (RECORD_BYTES + VALUE_BYTES * columns) as u64;
        let body = len
            .checked_sub((head.len() + TRAILER_BYTES) as u64)
            .ok_or_else(|| damaged("not a whole spool file"))?;
        let records = match keyed {
            // Records of their own lengths: the trailer's count (checked
            // with the digest at the end) bounds what is read.
            true => file
                .seek(SeekFrom::Start(len - TRAILER_BYTES as u64))
                .and_then(|_| {
                    let mut count = [0u8; 8];
                    file.read_exact(&mut count)
                        .map(|()| u64::from_le_bytes(count))
                })
                .and_then(|count| file.seek(SeekFrom::Start(head.len() as u64)).map(|_| count))
                .map_err(|e| Error::io(path, e))?
                .min(body / (record + 2)),
            false if body % record == 0 => body / record,
            false => return Err(damaged("not a whole spool file")),
        };
        Ok(Self {
            input: BufReader::with_capacity(1 << 20, file),
            hash: Sha256::new().chain_update(head),
            records,
            left: records,
            columns,
            keyed,
            values: Vec::with_capacity(columns),
            key: Vec::new(),
            path: path.to_owned(),
        })
    }

    /// Records left to read.
    pub fn len(&self) -> u64 {
        self.left
    }

    /// Values per record.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// The values of the record [`next`](Self::next) last returned.
    pub fn values(&self) -> &[u64] {
        &self.values
    }

    /// Whether the records carry their encoded keys.
    pub fn keyed(&self) -> bool {
        self.keyed
    }

    /// The encoded key of the record [`next`](Self::next) last returned
    /// (empty in a file without keys).
    pub fn key(&self) -> &[u8] {
        &self.key
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
        self.values.clear();
        for _ in 0..self.columns {
            let mut word = [0u8; VALUE_BYTES];
            self.input
                .read_exact(&mut word)
                .map_err(|e| Error::io(&self.path, e))?;
            self.hash.update(word);
            self.values.push(u64::from_le_bytes(word));
        }
        self.key.clear();
        if self.keyed {
            let mut len = [0u8; 2];
            self.input
                .read_exact(&mut len)
                .map_err(|e| Error::io(&self.path, e))?;
            self.hash.update(len);
            self.key.resize(usize::from(u16::from_le_bytes(len)), 0);
            self.input
                .read_exact(&mut self.key)
                .map_err(|e| Error::io(&self.path, e))?;
            self.hash.update(&self.key);
        }
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

    /// Every record of the file, checked, with their values.
    pub fn read_all(path: &Path) -> Result<Spooled, Error> {
        let mut reader = Self::open(path)?;
        let n = usize::try_from(reader.len()).unwrap_or(0);
        let columns = reader.columns();
        let mut records = Vec::with_capacity(n);
        let mut values = Vec::with_capacity(n * columns);
        let mut keys = Vec::with_capacity(if reader.keyed() { n } else { 0 });
        while let Some(r) = reader.next()? {
            records.push(r);
            values.extend_from_slice(reader.values());
            if reader.keyed() {
                keys.push(reader.key().to_vec());
            }
        }
        reader.finish()?;
        Ok(Spooled {
            records,
            values,
            columns,
            keys,
        })
    }
}

/// A whole spool file.
#[derive(Debug, PartialEq, Eq)]
pub struct Spooled {
    pub records: Vec<Record>,
    /// `columns` values per record, in the records' order.
    pub values: Vec<u64>,
    pub columns: usize,
    /// Each record's encoded key, in a keyed file (else empty).
    pub keys: Vec<Vec<u8>>,
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
        let values: Vec<u64> = (0..2000u64).map(|v| v * 7).collect();
        let mut w = SpoolWriter::create(&path, 4096, 2, false).expect("create");
        for (r, v) in records.iter().zip(values.chunks(2)) {
            w.push(r, v, &[]).expect("push");
        }
        assert!(
            w.push(&records[0], &[1], &[]).is_err(),
            "two values a record"
        );
        assert!(w.push(&records[0], &[1, 2], b"k").is_err(), "no keys here");
        assert_eq!(w.finish().expect("finish"), 1000);
        let read = SpoolReader::read_all(&path).expect("read");
        let mut want = Spooled {
            records,
            values,
            columns: 2,
            keys: Vec::new(),
        };
        assert_eq!(read, want);

        // Keyed: each record's key, of its own length, comes back.
        let keyed = dir.path().join("k");
        want.keys = (0..1000usize).map(|i| vec![i as u8; i % 37]).collect();
        let mut w = SpoolWriter::create(&keyed, 4096, 2, true).expect("create");
        for ((r, v), k) in want
            .records
            .iter()
            .zip(want.values.chunks(2))
            .zip(&want.keys)
        {
            w.push(r, v, k).expect("push");
        }
        assert_eq!(w.finish().expect("finish"), 1000);
        assert_eq!(SpoolReader::read_all(&keyed).expect("read"), want);
        let mut bytes = std::fs::read(&keyed).expect("bytes");
        let at = bytes.len() - 40;
        bytes[at] ^= 1;
        std::fs::write(&keyed, &bytes).expect("write");
        assert!(SpoolReader::read_all(&keyed).is_err(), "a count that lies");

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
