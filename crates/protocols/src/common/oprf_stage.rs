//! The OPRF stage of a server build split into stages, so that an engine
//! (psikit's Ray pipeline, `python/psikit/scale.py`) can spread it over
//! machines: a sharded HE database and a filter state built on a cluster
//! share it.
//!
//! 1. [`create_key`] makes the server's OPRF key once, in an owner-only
//!    file;
//! 2. workers load it once ([`load_key`]), evaluate batches of rows
//!    ([`evaluate`]), sort the outputs into one [`OutputBatch`] per shard
//!    (a filter has one shard) and [`Spool`] them to files;
//! 3. the next stage reads a shard's files back ([`Spool::read_shard`]).
//!
//! OPRF outputs are pseudorandom values only the key's holder can compute,
//! so batches may be stored on a shared file system; the key never leaves
//! its file.
//!
//! Why files and not the engine's shuffle: each worker writes every
//! shard's rows in large files of its own (no shuffle of millions of small
//! records, no copy through the engine's object store), and the stage
//! that builds a shard reads exactly its files, wherever it runs.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use psikit_primitives::oprf::{Output, ServerKey, OUTPUT_LEN};
use psikit_transport::{Reader, Writer};

use super::files::write_atomic;
use crate::error::Error;
use crate::keyfile;

/// Keys evaluated between two progress reports: a cancelled job stops
/// within a fraction of a second, and each batch still keeps both cores
/// busy (the OPRF's chunks are at most 256 items).
const OPRF_BATCH: usize = 1 << 13;
/// A worker writes its buffered rows once they reach this many bytes.
const SPOOL_FLUSH_BYTES: usize = 64 << 20;
/// The name ending of spooled batch files.
const SPOOL_SUFFIX: &str = ".batch";

/// Makes a fresh OPRF key in the owner-only file `path` (its directory is
/// created); refuses to replace a key already there.
pub fn create_key(path: &Path) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    keyfile::write_secret(path, &key.to_bytes())
}

/// Reads the key [`create_key`] made.
pub fn load_key(path: &Path) -> Result<ServerKey, Error> {
    Ok(ServerKey::from_bytes(&keyfile::read_secret(path)?)?)
}

/// The OPRF outputs of `keys` under `key`, over both cores; `progress`
/// hears the number done after each batch, and an error it returns (a
/// cancelled job) ends the evaluation.
pub fn evaluate(
    key: &ServerKey,
    keys: &[&[u8]],
    progress: &mut dyn FnMut(usize) -> Result<(), Error>,
) -> Result<Vec<Output>, Error> {
    let mut outputs = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(OPRF_BATCH) {
        outputs.extend(key.evaluate_batch(chunk)?);
        progress(outputs.len())?;
    }
    Ok(outputs)
}

/// Evaluated rows: OPRF outputs and their labels (empty for unlabeled
/// rows), in the order they were read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputBatch {
    pub outputs: Vec<Output>,
    pub labels: Vec<Vec<u8>>,
}

const BATCH_MAGIC: &[u8; 8] = b"PSIKSHB1";

impl OutputBatch {
    pub fn len(&self) -> usize {
        self.outputs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Appends one row.
    pub fn push(&mut self, output: Output, label: &[u8]) {
        self.outputs.push(output);
        self.labels.push(label.to_vec());
    }

    /// The batch's size in [`OutputBatch::to_bytes`]'s format.
    pub fn encoded_len(&self) -> usize {
        12 + self.outputs.len() * (OUTPUT_LEN + 4) + self.labels.iter().map(Vec::len).sum::<usize>()
    }

    /// The longest label's length.
    pub fn longest_label(&self) -> usize {
        self.labels.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// `PSIKSHB1`, the row count (u32), then per row the output and the
    /// label (u32 length and bytes).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        w.bytes(BATCH_MAGIC).count(self.outputs.len());
        for (output, label) in self.outputs.iter().zip(&self.labels) {
            w.bytes(output).var_bytes(label);
        }
        w.into_bytes()
    }

    /// Reads [`OutputBatch::to_bytes`]'s format, refusing labels longer than
    /// `max_label_bytes` and anything malformed.
    pub fn from_bytes(bytes: &[u8], max_label_bytes: usize) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        if &r.array::<8>("batch magic")? != BATCH_MAGIC {
            return Err(Error::StateFile(
                "not a batch of OPRF outputs (bad magic)".into(),
            ));
        }
        let rows = r.count(u64::from(u32::MAX), OUTPUT_LEN + 4, "batch rows")?;
        let mut batch = Self {
            outputs: Vec::with_capacity(rows),
            labels: Vec::with_capacity(rows),
        };
        for _ in 0..rows {
            batch.outputs.push(r.array("OPRF output")?);
            let label = r.var_bytes(max_label_bytes as u64, "label")?;
            batch.labels.push(label.to_vec());
        }
        r.finish()?;
        Ok(batch)
    }
}

/// A worker's evaluated rows on their way to the shards: buffered per
/// shard and written, once they reach a few tens of MiB and at
/// [`Spool::flush`], as files `dir/shard-I/WORKER-N.batch` (each written
/// atomically, so a reader never sees half a file).
pub struct Spool {
    dir: PathBuf,
    worker: String,
    pending: Vec<OutputBatch>,
    pending_bytes: usize,
    files: u64,
}

impl Spool {
    /// The spool of worker `worker` (a name unique among the workers, made
    /// of letters, digits, `-` and `_`) for `shards` shards under `dir`.
    pub fn new(dir: &Path, worker: &str, shards: u32) -> Result<Self, Error> {
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if worker.is_empty() || worker.len() > 64 || !worker.chars().all(valid) {
            return Err(Error::Config(format!(
                "a spool worker's name must be 1 to 64 letters, digits, '-' or '_', got {worker:?}"
            )));
        }
        for shard in 0..shards {
            let sub = Self::shard_dir(dir, shard);
            fs::create_dir_all(&sub).map_err(|e| Error::io(&sub, e))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            worker: worker.to_owned(),
            pending: (0..shards).map(|_| OutputBatch::default()).collect(),
            pending_bytes: 0,
            files: 0,
        })
    }

    fn shard_dir(dir: &Path, shard: u32) -> PathBuf {
        dir.join(format!("shard-{shard}"))
    }

    /// Adds one batch per shard (in shard order).
    pub fn push(&mut self, batches: Vec<OutputBatch>) -> Result<(), Error> {
        if batches.len() != self.pending.len() {
            return Err(Error::Misuse("a spool takes one batch per shard"));
        }
        for (pending, batch) in self.pending.iter_mut().zip(batches) {
            self.pending_bytes += batch.encoded_len();
            pending.outputs.extend(batch.outputs);
            pending.labels.extend(batch.labels);
        }
        if self.pending_bytes >= SPOOL_FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes every shard's buffered rows to a file of their own.
    pub fn flush(&mut self) -> Result<(), Error> {
        for (shard, pending) in self.pending.iter_mut().enumerate() {
            if pending.is_empty() {
                continue;
            }
            let name = format!("{}-{}{SPOOL_SUFFIX}", self.worker, self.files);
            let path = Self::shard_dir(&self.dir, shard as u32).join(name);
            let bytes = std::mem::take(pending).to_bytes();
            write_atomic(&path, |out| out.write_all(&bytes))?;
            self.files += 1;
        }
        self.pending_bytes = 0;
        Ok(())
    }

    /// Every batch spooled under `dir` for shard `shard`, by every worker.
    pub fn read_shard(
        dir: &Path,
        shard: u32,
        max_label_bytes: usize,
    ) -> Result<Vec<OutputBatch>, Error> {
        let sub = Self::shard_dir(dir, shard);
        let mut paths = Vec::new();
        for entry in fs::read_dir(&sub).map_err(|e| Error::io(&sub, e))? {
            let path = entry.map_err(|e| Error::io(&sub, e))?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            // Temporary files of an interrupted write start with a dot.
            if name.is_some_and(|n| !n.starts_with('.') && n.ends_with(SPOOL_SUFFIX)) {
                paths.push(path);
            }
        }
        paths.sort();
        (paths.iter())
            .map(|path| {
                let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
                OutputBatch::from_bytes(&bytes, max_label_bytes)
                    .map_err(|e| Error::StateFile(format!("{}: {e}", path.display())))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_damaged_ones_are_refused() {
        let batch = OutputBatch {
            outputs: vec![[1; 64], [2; 64]],
            labels: vec![b"gold".to_vec(), Vec::new()],
        };
        let bytes = batch.to_bytes();
        assert_eq!(bytes.len(), batch.encoded_len());
        assert_eq!(OutputBatch::from_bytes(&bytes, 4).unwrap(), batch);
        assert!(
            OutputBatch::from_bytes(&bytes, 3).is_err(),
            "a label over the room"
        );
        let cut = &bytes[..bytes.len() - 1];
        assert!(OutputBatch::from_bytes(cut, 4).is_err(), "cut short");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            OutputBatch::from_bytes(&longer, 4).is_err(),
            "trailing bytes"
        );
        let mut bad = bytes;
        bad[0] ^= 1;
        assert!(OutputBatch::from_bytes(&bad, 4).is_err(), "bad magic");
        // A count far beyond the bytes present allocates nothing.
        let mut huge = BATCH_MAGIC.to_vec();
        huge.extend(u32::MAX.to_be_bytes());
        assert!(OutputBatch::from_bytes(&huge, 4).is_err());
    }

    #[test]
    fn a_spool_gives_each_shard_the_rows_every_worker_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let row = |i: u8| ([i; 64], vec![i; usize::from(i % 3)]);
        let mut want = [OutputBatch::default(), OutputBatch::default()];
        for worker in ["w-0", "w_1"] {
            let mut spool = Spool::new(dir.path(), worker, 2).unwrap();
            for round in 0..3u8 {
                let mut batches = vec![OutputBatch::default(), OutputBatch::default()];
                for i in 0..5u8 {
                    let (output, label) = row(round * 10 + i);
                    batches[usize::from(i % 2)].push(output, &label);
                    want[usize::from(i % 2)].push(output, &label);
                }
                spool.push(batches).unwrap();
            }
            spool.flush().unwrap();
        }
        for (shard, want) in want.iter().enumerate() {
            let read = Spool::read_shard(dir.path(), shard as u32, 2).unwrap();
            let mut got: Vec<(Output, Vec<u8>)> = (read.iter())
                .flat_map(|b| b.outputs.iter().copied().zip(b.labels.iter().cloned()))
                .collect();
            let mut want: Vec<(Output, Vec<u8>)> = want
                .outputs
                .iter()
                .copied()
                .zip(want.labels.clone())
                .collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "shard {shard}");
        }
        assert!(
            Spool::new(dir.path(), "../x", 2).is_err(),
            "a name that is a path"
        );
        assert!(
            Spool::read_shard(dir.path(), 0, 0).is_err(),
            "labels over the room"
        );
    }

    #[test]
    fn a_staged_key_is_made_once_and_evaluates_as_the_oprf() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router").join("oprf.key");
        create_key(&path).unwrap();
        assert!(
            create_key(&path).is_err(),
            "an existing key is never replaced"
        );
        let key = load_key(&path).unwrap();
        let keys: Vec<&[u8]> = vec![b"a", b"b"];
        let mut reports = Vec::new();
        let outputs = evaluate(&key, &keys, &mut |n| {
            reports.push(n);
            Ok(())
        })
        .unwrap();
        assert_eq!(outputs, key.evaluate_batch(&keys).unwrap());
        assert_eq!(reports, vec![2]);
    }
}
