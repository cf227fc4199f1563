//! The local passes of a job: the input read once into item keys (its
//! digest taken on the way), the keys split into the agreed buckets, and
//! a bucket loaded, its duplicates merged and padded to its capacity.
//! Memory is a batch of rows, a buffer per open bucket file, then one
//! bucket: never the input.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc;

use psikit_io::{KeyReader, KeySpec, ReadStats, RowBatch, RowKeyer};
use psikit_primitives::sha256;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::journal::{InputSummary, JobDir};
use super::spool::{item_key, ItemKey, Record, SpoolReader, SpoolWriter};
use super::terms::{Agreed, JobId};
use crate::balanced::Role;
use crate::common::{advance, Progress};
use crate::error::Error;

/// Records per batch of the split pass.
const BATCH: usize = 1 << 16;
/// Rows per batch of the first pass: each row is a reused CSV record of
/// about 170 bytes, and two batches are in flight.
const ROW_BATCH: usize = 1 << 14;
/// Bucket files written at once by a split pass (open files, and their
/// buffers: 256 × 64 KiB).
const OPEN_BUCKETS: u64 = 256;
const BUCKET_BUFFER: usize = 64 << 10;

/// A reader that hashes every byte that goes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// The first pass: every row's item key into the job's key file, and the
/// input's digest and counts. A CSV file is hashed as it is read; a
/// Parquet file (read through its own reader, not as a stream) is hashed
/// in a pass of its own.
pub fn spool_input(
    path: &Path,
    spec: &KeySpec,
    keyed: bool,
    dir: &JobDir,
    progress: &dyn Progress,
) -> Result<InputSummary, Error> {
    let summary = spool_file(path, spec, keyed, &dir.keys_path(), 0, progress)?;
    dir.set_input(&summary)?;
    Ok(summary)
}

/// The first pass over one file into the key file `out`, each row's id
/// `row_base` plus its data row number (a cluster job's part `p` has
/// `row_base = p << PART_SHIFT`).
pub fn spool_file(
    path: &Path,
    spec: &KeySpec,
    keyed: bool,
    out: &Path,
    row_base: u64,
    progress: &dyn Progress,
) -> Result<InputSummary, Error> {
    progress.stage("reading the input", None);
    let name = path.display().to_string();
    let ((stats, longest_key), digest) = match psikit_io::is_parquet(path)? {
        true => {
            let digest = input_digest(path)?;
            let reader = KeyReader::open(path, spec)?;
            let (stats, longest, _) = spool_keys(reader, spec, keyed, out, row_base, progress)?;
            ((stats, longest), digest)
        }
        false => {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            let hashing = Hashing {
                inner: file,
                hash: Sha256::new(),
            };
            let reader = KeyReader::with_name(hashing, spec, name)?;
            let (stats, longest, hashing) =
                spool_keys(reader, spec, keyed, out, row_base, progress)?;
            let hashing = hashing.ok_or(Error::Internal("a CSV reader's byte source"))?;
            ((stats, longest), hashing.hash.finalize().into())
        }
    };
    let summary = InputSummary {
        digest,
        rows_read: stats.rows_read,
        rows: stats.items(),
        longest_key,
    };
    Ok(summary)
}

/// Every row of `reader` into the job's key file; returns the counts, the
/// longest encoded key and the reader's byte source. Two stages overlap: a thread reads batch
/// after batch of rows (the CSV parse, and the digest of the bytes, are
/// sequential), while this one keys the last batch's rows on the rayon
/// pool (normalising, encoding and hashing each key: most of the work)
/// and writes them. Batches go back to the reader to be refilled, so two
/// batches of rows are all the pass holds.
fn spool_keys<R: Read + Send>(
    mut reader: KeyReader<R>,
    spec: &KeySpec,
    keyed: bool,
    out: &Path,
    row_base: u64,
    progress: &dyn Progress,
) -> Result<(ReadStats, u64, Option<R>), Error> {
    let columns = u8::try_from(spec.value_columns.len())
        .map_err(|_| Error::Internal("value columns per row"))?;
    let mut out = SpoolWriter::create(out, 1 << 20, columns, keyed)?;
    let keyer = reader.keyer();
    let (full, filled) = mpsc::sync_channel::<RowBatch>(1);
    let (empty, emptied) = mpsc::sync_channel::<RowBatch>(2);
    for _ in 0..2 {
        empty
            .send(RowBatch::new())
            .map_err(|_| Error::Internal("the reader's batches"))?;
    }
    std::thread::scope(|scope| {
        let parser = scope.spawn(move || -> Result<_, Error> {
            // A closed channel: the writer stopped, and says why.
            while let Ok(mut batch) = emptied.recv() {
                if reader.next_rows(ROW_BATCH, &mut batch)? == 0 || full.send(batch).is_err() {
                    break;
                }
            }
            Ok((reader.stats(), reader.into_inner()))
        });
        let written = write_keys(&filled, &empty, &keyer, &mut out, row_base, progress);
        drop((filled, empty));
        let parsed = parser
            .join()
            .map_err(|_| Error::Internal("the input's parser panicked"))?;
        let (skipped, longest) = written?;
        parsed.map(|(stats, inner)| {
            let stats = ReadStats {
                rows_skipped: skipped,
                ..stats
            };
            (stats, longest, inner)
        })
    })
    .and_then(|done| {
        out.finish()?;
        Ok(done)
    })
}

/// One row keyed: its item key, values and encoded key, or `None` for a
/// row whose key is empty (skipped).
type Keyed = Option<(ItemKey, Vec<u64>, Vec<u8>)>;

/// The keying stage of [`spool_keys`]: each batch's rows keyed in
/// parallel, written in row order (the first error in row order is the
/// one reported, as a row-by-row read would); returns the rows skipped and
/// the longest encoded key.
fn write_keys(
    batches: &mpsc::Receiver<RowBatch>,
    recycle: &mpsc::SyncSender<RowBatch>,
    keyer: &RowKeyer,
    out: &mut SpoolWriter,
    row_base: u64,
    progress: &dyn Progress,
) -> Result<(u64, u64), Error> {
    let (mut skipped, mut longest) = (0, 0);
    for batch in batches {
        let first = batch.first_row();
        let keyed: Vec<psikit_io::Result<Keyed>> = batch
            .records()
            .par_iter()
            .enumerate()
            .map(|(i, record)| {
                let row = first + i as u64;
                let Some(key) = keyer.key(row, record)? else {
                    return Ok(None);
                };
                let mut values = Vec::new();
                keyer.values(row, record, &mut values)?;
                Ok(Some((item_key(&key), values, key)))
            })
            .collect();
        for (i, keyed) in keyed.into_iter().enumerate() {
            match keyed? {
                Some((key, values, encoded)) => {
                    let row = row_base + first + i as u64;
                    longest = longest.max(encoded.len() as u64);
                    let encoded = if out.keyed() { &encoded[..] } else { &[] };
                    out.push(&Record { key, row }, &values, encoded)?;
                }
                None => skipped += 1,
            }
        }
        let rows_read = first - 1 + batch.len() as u64;
        advance(progress, rows_read)?;
        // The reader may have ended: then the batch is not needed.
        let _ = recycle.send(batch);
    }
    Ok((skipped, longest))
}

/// The input's digest, to check a resumed job reads the same input.
pub fn input_digest(path: &Path) -> Result<[u8; 32], Error> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hash = Sha256::new();
    io::copy(&mut file, &mut hash).map_err(|e| Error::io(path, e))?;
    Ok(hash.finalize().into())
}

/// Domain label of the bucket hash.
const BUCKET_LABEL: &[u8; 20] = b"psikit job bucket v1";

/// A uniform 64-bit word mapped onto `0..buckets` (multiply and shift).
fn onto(word: u64, buckets: u64) -> u64 {
    ((u128::from(word) * u128::from(buckets)) >> 64) as u64
}

/// Records whose bucket hashes run together.
const HASH_BATCH: usize = 256;

/// The bucket of every record's item key, on the rayon pool: a hash keyed
/// by the job id (fixed only once both inputs are), `SHA-256(label ||
/// job id || key)`, mapped onto `0..buckets` by its first 8 bytes. The
/// message (52 bytes) fits one SHA-256 block, so we pad it ourselves and
/// run the compression function on a batch at once
/// (`psikit_primitives::sha256` interleaves two with the SHA extensions):
/// about a quarter of the streaming interface's cost on a message this
/// short. A test compares it with the streaming hash.
fn buckets_of(job_id: &JobId, records: &[Record], buckets: u64) -> Vec<u64> {
    const LEN: usize = BUCKET_LABEL.len() + 16 + 16;
    let mut template = [0u8; 64];
    template[..20].copy_from_slice(BUCKET_LABEL);
    template[20..36].copy_from_slice(job_id);
    template[LEN] = 0x80;
    template[56..].copy_from_slice(&(LEN as u64 * 8).to_be_bytes());
    let mut out = vec![0u64; records.len()];
    out.par_chunks_mut(HASH_BATCH)
        .zip(records.par_chunks(HASH_BATCH))
        .for_each(|(out, records)| {
            let mut blocks = [template; HASH_BATCH];
            for (block, r) in blocks.iter_mut().zip(records) {
                block[36..LEN].copy_from_slice(&r.key);
            }
            let mut states = [[0u32; 8]; HASH_BATCH];
            let n = records.len();
            sha256::compress_from_iv(&blocks[..n], &mut states[..n]);
            for (b, state) in out.iter_mut().zip(&states) {
                // The digest's first 8 bytes: its first two words, big-endian.
                let mut word = [0u8; 8];
                word[..4].copy_from_slice(&state[0].to_be_bytes());
                word[4..].copy_from_slice(&state[1].to_be_bytes());
                *b = onto(u64::from_le_bytes(word), buckets);
            }
        });
    out
}

/// The second pass: the key file split into the agreed buckets, at most
/// [`OPEN_BUCKETS`] files per pass over it.
pub fn split(dir: &JobDir, agreed: &Agreed, progress: &dyn Progress) -> Result<(), Error> {
    let buckets = agreed.shape.buckets;
    progress.stage("splitting into buckets", Some(buckets));
    let inputs = dir.spool_paths()?;
    if let ([keys], 1) = (&inputs[..], buckets) {
        // The key file is the one bucket: a second name, no copy (the key
        // file stays for a later split under another job id).
        let path = dir.bucket_path(0);
        let _ = std::fs::remove_file(&path);
        std::fs::hard_link(keys, &path).map_err(|e| Error::io(&path, e))?;
        return dir.set_split(agreed);
    }
    let mut first = 0;
    while first < buckets {
        let end = (first + OPEN_BUCKETS).min(buckets);
        let mut writers = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let mut keys = SpoolReader::open(input)?;
            if i == 0 {
                let columns =
                    u8::try_from(keys.columns()).map_err(|_| Error::Internal("columns"))?;
                let create = |b| {
                    let path = dir.bucket_path(b);
                    SpoolWriter::create(&path, BUCKET_BUFFER, columns, keys.keyed())
                };
                writers = (first..end).map(create).collect::<Result<Vec<_>, _>>()?;
            }
            split_into(&mut keys, agreed, first..end, &mut writers)?;
            keys.finish()?;
        }
        for w in writers {
            w.finish()?;
        }
        advance(progress, end)?;
        first = end;
    }
    dir.set_split(agreed)
}

/// One key file's records of the buckets `range` into their writers, a
/// batch at a time: their buckets (a hash each) on the rayon pool, then
/// each written to its file in order.
fn split_into(
    keys: &mut SpoolReader,
    agreed: &Agreed,
    range: std::ops::Range<u64>,
    writers: &mut [SpoolWriter],
) -> Result<(), Error> {
    let (k, keyed) = (keys.columns(), keys.keyed());
    if writers.first().is_some_and(|w| w.keyed() != keyed) {
        return Err(Error::Internal("key files of one job, keyed and not"));
    }
    let (mut records, mut values) = (Vec::with_capacity(BATCH), Vec::new());
    let mut encoded: Vec<Vec<u8>> = Vec::new();
    loop {
        records.clear();
        values.clear();
        encoded.clear();
        while records.len() < BATCH {
            let Some(record) = keys.next()? else { break };
            records.push(record);
            values.extend_from_slice(keys.values());
            if keyed {
                encoded.push(keys.key().to_vec());
            }
        }
        if records.is_empty() {
            return Ok(());
        }
        let ids = buckets_of(&agreed.job_id, &records, agreed.shape.buckets);
        for (i, (record, b)) in records.iter().zip(ids).enumerate() {
            if range.contains(&b) {
                let key = encoded.get(i).map_or(&[][..], Vec::as_slice);
                let w = &mut writers[(b - range.start) as usize];
                w.push(record, &values[i * k..(i + 1) * k], key)?;
            }
        }
    }
}

/// One bucket, ready to run: its distinct item keys padded with dummies
/// to the capacity, their values, and where each key's rows are.
pub struct Bucket {
    /// The protocol's input: distinct item keys, then dummies.
    pub keys: Vec<Vec<u8>>,
    /// Per value column, one value per key: the sum (mod 2^64) of its
    /// rows' values, as a one-shot run adds them; 0 for dummies. (Only
    /// circuit PSI reads values; a balanced job's input has none.)
    #[cfg_attr(not(feature = "cpsi"), allow(dead_code))]
    pub values: Vec<Vec<u64>>,
    /// The bucket's records sorted by key.
    records: Vec<Record>,
    /// `records[starts[i]..starts[i + 1]]` are distinct key `i`'s rows.
    starts: Vec<usize>,
    /// The encoded key of each distinct item, from a keyed spool (circuit
    /// PSI's union); empty otherwise. Dummies have none.
    #[cfg_attr(not(feature = "cpsi"), allow(dead_code))]
    pub encoded: Vec<Vec<u8>>,
}

impl Bucket {
    /// Loads bucket `bucket` and pads it to `capacity` items (refusing an
    /// overflow: an event of probability below 2^-40 for honest input,
    /// which must never run unpadded).
    pub fn load(path: &Path, bucket: u64, role: Role, capacity: u64) -> Result<Self, Error> {
        let spooled = SpoolReader::read_all(path)?;
        let (records, flat, k) = (spooled.records, spooled.values, spooled.columns);
        let mut spooled_keys = spooled.keys;
        let mut encoded = Vec::new();
        // Sorted by key with each record's place in the file, for its values.
        let mut sorted: Vec<(Record, usize)> = records.into_iter().zip(0..).collect();
        sorted.sort_unstable();
        let mut starts = Vec::new();
        let mut keys = Vec::new();
        let mut values: Vec<Vec<u64>> = vec![Vec::new(); k];
        for (i, (r, at)) in sorted.iter().enumerate() {
            if i == 0 || sorted[i - 1].0.key != r.key {
                starts.push(i);
                keys.push(r.key.to_vec());
                values.iter_mut().for_each(|column| column.push(0u64));
                if let Some(key) = spooled_keys.get_mut(*at) {
                    encoded.push(std::mem::take(key));
                }
            }
            for (column, v) in values.iter_mut().zip(&flat[at * k..(at + 1) * k]) {
                if let Some(sum) = column.last_mut() {
                    *sum = sum.wrapping_add(*v);
                }
            }
        }
        let records: Vec<Record> = sorted.into_iter().map(|(r, _)| r).collect();
        starts.push(records.len());
        let distinct = keys.len() as u64;
        if distinct > capacity {
            return Err(Error::Job(format!(
                "bucket {bucket} holds {distinct} distinct items, more than its capacity \
                 {capacity} (probability below 2^-40 for input independent of the job id); \
                 the job stops rather than run a bucket whose size would show"
            )));
        }
        keys.extend((distinct..capacity).map(|i| dummy(role, bucket, i)));
        for column in &mut values {
            column.resize(keys.len(), 0);
        }
        Ok(Self {
            keys,
            values,
            records,
            starts,
            encoded,
        })
    }

    /// The first input row of item `item` (its key's smallest row number),
    /// or `None` for a padding dummy.
    #[cfg(feature = "cpsi")]
    pub fn first_row(&self, item: usize) -> Option<u64> {
        let start = *self.starts.get(item)?;
        // The last start closes the last distinct key's rows.
        (item + 1 < self.starts.len()).then(|| self.records[start].row)
    }

    /// The rows (sorted) of the distinct keys `matches` marks; dummies
    /// never match.
    pub fn matched_rows(&self, matches: &[bool]) -> Vec<u64> {
        let distinct = self.starts.len() - 1;
        let mut rows: Vec<u64> = matches
            .iter()
            .take(distinct)
            .enumerate()
            .filter(|(_, m)| **m)
            .flat_map(|(i, _)| self.records[self.starts[i]..self.starts[i + 1]].iter())
            .map(|r| r.row)
            .collect();
        rows.sort_unstable();
        rows
    }
}

/// A dummy item: 17 bytes, so never equal to a 16-byte item key, and
/// tagged by role, so the two sides' dummies never equal each other.
fn dummy(role: Role, bucket: u64, index: u64) -> Vec<u8> {
    let mut d = Vec::with_capacity(17);
    d.push(match role {
        Role::Sender => 0xd5,
        Role::Receiver => 0xd7,
    });
    d.extend_from_slice(&bucket.to_le_bytes());
    d.extend_from_slice(&index.to_le_bytes());
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket hash through the `Digest` API, one key at a time: the
    /// reference [`buckets_of`] must equal.
    fn bucket_of(job_id: &JobId, key: &ItemKey, buckets: u64) -> u64 {
        let digest = Sha256::new()
            .chain_update(BUCKET_LABEL)
            .chain_update(job_id)
            .chain_update(key)
            .finalize();
        let mut word = [0u8; 8];
        word.copy_from_slice(&digest[..8]);
        onto(u64::from_le_bytes(word), buckets)
    }

    #[test]
    fn buckets_spread_evenly_and_dummies_never_match() {
        let id = [3u8; 16];
        let mut counts = [0u64; 8];
        for i in 0..80_000u64 {
            counts[bucket_of(&id, &item_key(&i.to_le_bytes()), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        let s = dummy(Role::Sender, 1, 2);
        assert_ne!(s, dummy(Role::Receiver, 1, 2));
        assert_ne!(s.len(), item_key(b"x").len());
    }

    #[test]
    fn batched_buckets_are_the_streaming_hash_s() {
        let id = [9u8; 16];
        // More than one batch, a partial last one.
        let records: Vec<Record> = (0..HASH_BATCH as u64 * 3 + 17)
            .map(|i| Record {
                key: item_key(&i.to_le_bytes()),
                row: i,
            })
            .collect();
        for buckets in [1, 2, 7, 64, 1 << 16] {
            let want: Vec<u64> = records
                .iter()
                .map(|r| bucket_of(&id, &r.key, buckets))
                .collect();
            assert_eq!(buckets_of(&id, &records, buckets), want, "{buckets}");
        }
    }

    #[test]
    fn a_bucket_is_padded_to_its_capacity_and_an_overflow_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("b");
        let mut w = SpoolWriter::create(&path, 4096, 1, false).expect("create");
        for row in 1..=10u64 {
            // Rows 1-10 hold five distinct keys, each twice.
            let key = item_key(&(row % 5).to_le_bytes());
            w.push(&Record { key, row }, &[row], &[]).expect("push");
        }
        w.finish().expect("finish");
        let b = Bucket::load(&path, 3, Role::Receiver, 8).expect("fits");
        assert_eq!(b.keys.len(), 8);
        // A key's rows add up (rows r and r + 5), dummies bring 0.
        let mut sums = b.values[0].clone();
        sums.sort_unstable();
        assert_eq!(sums, [0, 0, 0, 7, 9, 11, 13, 15]);
        assert_eq!(b.keys.iter().filter(|k| k.len() == 17).count(), 3);
        let mut matches = vec![false; 8];
        matches[0] = true;
        assert_eq!(b.matched_rows(&matches).len(), 2, "both rows of a key");
        let err = Bucket::load(&path, 3, Role::Receiver, 4)
            .err()
            .expect("overflow");
        assert!(
            err.to_string().contains("bucket 3 holds 5 distinct items"),
            "{err}"
        );
    }
}
