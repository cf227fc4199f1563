//! A job's directory (`--job-dir`): what the job agreed, the spooled
//! input, the buckets and each committed bucket's result. Every file is
//! written atomically and sealed with a SHA-256 digest; a bucket is
//! committed by its result file appearing, so after a crash the journal
//! holds exactly the buckets whose results were whole on disk.
//!
//! ```text
//! job               the agreement and this side's terms (after the hello)
//! input             the input's digest and row counts (after the first pass)
//! keys.spool        every row's item key (after the first pass)
//! parts             a cluster job's input parts (`cluster.rs`): the input's
//!                   files, or workers' copies in rows/NNNNNN.csv; each
//!                   part's keys in spool/NNNNNN
//! buckets/NNNNN     the bucket files, then `buckets/split` once all are whole
//! results/NNNNN     each committed bucket's matched rows (circuit PSI:
//!                   this side's shares of the bucket's aggregates)
//! opened            circuit PSI's opened result (before the end is told)
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use psikit_transport::{DecodeError, Reader, Writer};

use super::capacity::{Shape, MAX_BUCKETS};
use super::kind::JobKind;
use super::terms::{Agreed, JobHello};
use crate::balanced::Role;
use crate::common::files::{read_sealed, write_sealed};
use crate::common::state_dir::{lock, StateLock};
use crate::common::two_party::flag;
use crate::error::Error;

const JOB_MAGIC: &[u8; 8] = b"PSIKJOB2";
const INPUT_MAGIC: &[u8; 8] = b"PSIKINP2";
const SPLIT_MAGIC: &[u8; 8] = b"PSIKSPT1";
const RESULT_MAGIC: &[u8; 8] = b"PSIKRES1";
const PARTS_MAGIC: &[u8; 8] = b"PSIKPRT2";
#[cfg(feature = "cpsi")]
const OPENED_MAGIC: &[u8; 8] = b"PSIKOPN1";

/// Bits of a row id that number the row within its part: a row id is
/// `part << PART_SHIFT | row` (a one-machine job's input is part 0).
pub const PART_SHIFT: u32 = 40;
/// The most parts a cluster job's input has (one per spooling worker).
pub const MAX_PARTS: u64 = 1 << 16;

/// What the first pass learned of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputSummary {
    /// SHA-256 of the input file's bytes.
    pub digest: [u8; 32],
    /// Data rows read.
    pub rows_read: u64,
    /// Rows that hold a key (the job's row count).
    pub rows: u64,
    /// Bytes of the longest encoded key: the width of circuit PSI's union
    /// slots, one for the whole job (a bucket's own longest would show).
    pub longest_key: u64,
}

/// One part of a cluster job's input: a file of the input itself, or a
/// worker's copy of its share (`rows/NNNNNN.csv`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub path: PathBuf,
    /// Its data rows.
    pub rows_read: u64,
    /// SHA-256 of its bytes, checked again when a job resumes.
    pub digest: [u8; 32],
}

/// The longest part path a job directory records.
const MAX_PART_PATH: u64 = 4096;

/// This side's terms as the job directory records them: what a resumed
/// command must state again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnTerms {
    pub role: Role,
    pub kind: JobKind,
    pub key_format: String,
}

impl OwnTerms {
    pub fn of(hello: &JobHello) -> Self {
        Self {
            role: hello.role,
            kind: hello.kind,
            key_format: hello.key_format.clone(),
        }
    }
}

/// An open job directory, locked against a second command (or, in a
/// cluster job's workers, shared with its driver, which holds the lock).
pub struct JobDir {
    root: PathBuf,
    _lock: Option<StateLock>,
}

impl JobDir {
    /// Opens (creating) `root` and takes its lock.
    pub fn open(root: &Path) -> Result<Self, Error> {
        let lock = lock(root)?;
        for sub in ["buckets", "results"] {
            let dir = root.join(sub);
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        Ok(Self {
            root: root.to_owned(),
            _lock: Some(lock),
        })
    }

    /// A cluster job's directory as its workers see it, without the lock
    /// its driver holds: they write their parts, read the agreement and
    /// the buckets and commit results, each file written atomically.
    pub fn shared(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            _lock: None,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn keys_path(&self) -> PathBuf {
        self.root.join("keys.spool")
    }

    /// Part `part`'s rows, as a CSV file with a header (a cluster job).
    pub fn part_rows_path(&self, part: u64) -> PathBuf {
        self.root.join("rows").join(format!("{part:06}.csv"))
    }

    /// Part `part`'s item keys (a cluster job).
    pub fn part_spool_path(&self, part: u64) -> PathBuf {
        self.root.join("spool").join(format!("{part:06}"))
    }

    /// The key files the split reads: the one of a one-machine job, or
    /// every part's of a cluster job.
    pub fn spool_paths(&self) -> Result<Vec<PathBuf>, Error> {
        Ok(match self.parts()? {
            None => vec![self.keys_path()],
            Some(parts) => (0..parts.len() as u64)
                .map(|p| self.part_spool_path(p))
                .collect(),
        })
    }

    /// A cluster job's parts, in part order.
    pub fn parts(&self) -> Result<Option<Vec<Part>>, Error> {
        let Some(body) = read_sealed(&self.root.join("parts"), PARTS_MAGIC)? else {
            return Ok(None);
        };
        let mut r = Reader::new(&body);
        let n = r.count(MAX_PARTS, 8 + 32 + 4, "parts")?;
        let parts = (0..n)
            .map(|_| {
                Ok(Part {
                    rows_read: r.u64("part rows")?,
                    digest: r.array("part digest")?,
                    path: PathBuf::from(r.string(MAX_PART_PATH, "part path")?),
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        r.finish()?;
        Ok(Some(parts))
    }

    pub fn set_parts(&self, parts: &[Part]) -> Result<(), Error> {
        let mut w = Writer::with_capacity(64 * parts.len() + 8);
        w.count(parts.len());
        for p in parts {
            let path = p
                .path
                .to_str()
                .filter(|s| s.len() as u64 <= MAX_PART_PATH)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "{}: a part's path must be UTF-8, at most {MAX_PART_PATH} bytes",
                        p.path.display()
                    ))
                })?;
            w.u64(p.rows_read).bytes(&p.digest).string(path);
        }
        write_sealed(&self.root.join("parts"), PARTS_MAGIC, &w.into_bytes())
    }

    pub fn bucket_path(&self, bucket: u64) -> PathBuf {
        self.root.join("buckets").join(format!("{bucket:05}"))
    }

    fn result_path(&self, bucket: u64) -> PathBuf {
        self.root.join("results").join(format!("{bucket:05}"))
    }

    /// Whether the directory already holds a job (an agreement or input).
    pub fn is_started(&self) -> bool {
        self.root.join("job").exists() || self.root.join("input").exists()
    }

    pub fn input(&self) -> Result<Option<InputSummary>, Error> {
        let Some(body) = read_sealed(&self.root.join("input"), INPUT_MAGIC)? else {
            return Ok(None);
        };
        let mut r = Reader::new(&body);
        let summary = InputSummary {
            digest: r.array("digest")?,
            rows_read: r.u64("rows read")?,
            rows: r.u64("rows")?,
            longest_key: r.u64("longest key")?,
        };
        r.finish()?;
        Ok(Some(summary))
    }

    pub fn set_input(&self, s: &InputSummary) -> Result<(), Error> {
        let mut w = Writer::with_capacity(64);
        w.bytes(&s.digest)
            .u64(s.rows_read)
            .u64(s.rows)
            .u64(s.longest_key);
        write_sealed(&self.root.join("input"), INPUT_MAGIC, &w.into_bytes())
    }

    /// The stored agreement, the terms this side stated with it, and
    /// whether the peer confirmed it stored the job too.
    pub fn agreement(&self) -> Result<Option<(Agreed, OwnTerms, bool)>, Error> {
        let Some(body) = read_sealed(&self.root.join("job"), JOB_MAGIC)? else {
            return Ok(None);
        };
        let mut r = Reader::new(&body);
        let agreed = Agreed {
            job_id: r.array("job id")?,
            shape: Shape {
                buckets: bounded(r.u64("buckets")?, 1, MAX_BUCKETS, "buckets")?,
                sender_capacity: r.u64("sender capacity")?,
                receiver_capacity: r.u64("receiver capacity")?,
            },
            peer_rows: r.u64("peer rows")?,
        };
        let role = match r.u8("role")? {
            0 => Role::Sender,
            1 => Role::Receiver,
            other => return Err(DecodeError::invalid("role", other).into()),
        };
        let terms = OwnTerms {
            role,
            kind: JobKind::read(&mut r)?,
            key_format: r.string(psikit_io::MAX_KEY_FORMAT, "key format")?,
        };
        let confirmed = flag(&mut r, "confirmed")?;
        r.finish()?;
        Ok(Some((agreed, terms, confirmed)))
    }

    pub fn set_agreement(&self, a: &Agreed, t: &OwnTerms, confirmed: bool) -> Result<(), Error> {
        let mut w = Writer::with_capacity(128);
        w.bytes(&a.job_id)
            .u64(a.shape.buckets)
            .u64(a.shape.sender_capacity)
            .u64(a.shape.receiver_capacity)
            .u64(a.peer_rows)
            .u8(match t.role {
                Role::Sender => 0,
                Role::Receiver => 1,
            });
        t.kind.write(&mut w);
        w.string(&t.key_format).u8(u8::from(confirmed));
        write_sealed(&self.root.join("job"), JOB_MAGIC, &w.into_bytes())
    }

    /// Whether every bucket file of the job was written.
    pub fn is_split(&self, agreed: &Agreed) -> Result<bool, Error> {
        let Some(body) = read_sealed(&self.root.join("buckets").join("split"), SPLIT_MAGIC)? else {
            return Ok(false);
        };
        let mut w = Writer::with_capacity(32);
        w.bytes(&agreed.job_id).u64(agreed.shape.buckets);
        Ok(body == w.into_bytes())
    }

    pub fn set_split(&self, agreed: &Agreed) -> Result<(), Error> {
        let mut w = Writer::with_capacity(32);
        w.bytes(&agreed.job_id).u64(agreed.shape.buckets);
        write_sealed(
            &self.root.join("buckets").join("split"),
            SPLIT_MAGIC,
            &w.into_bytes(),
        )
    }

    /// The committed buckets as a bitmap of `buckets` bits.
    pub fn committed(&self, buckets: u64) -> Result<Vec<u8>, Error> {
        let mut bits = vec![0u8; usize::try_from(buckets.div_ceil(8)).unwrap_or(0)];
        let dir = self.root.join("results");
        for entry in fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let name = entry.file_name();
            let bucket = name.to_str().and_then(|n| n.parse::<u64>().ok());
            if let Some(b) = bucket.filter(|&b| b < buckets) {
                bits[(b / 8) as usize] |= 1 << (b % 8);
            }
        }
        Ok(bits)
    }

    /// Commits a bucket: its matched rows (sorted) on this side, or this
    /// side's shares of its aggregates (circuit PSI).
    pub fn commit(&self, bucket: u64, rows: &[u64]) -> Result<(), Error> {
        let mut w = Writer::with_capacity(8 + 8 * rows.len());
        w.u64(rows.len() as u64);
        for r in rows {
            w.u64(*r);
        }
        write_sealed(&self.result_path(bucket), RESULT_MAGIC, &w.into_bytes())
    }

    /// Takes back a bucket's commit before it runs again: a rerun draws
    /// new randomness (circuit PSI's shares), so a result kept from an
    /// earlier run could pair with the peer's from this one. The peer
    /// cannot commit the rerun before this side starts it, so removing
    /// the file first leaves either both new results or a bucket to run.
    pub fn uncommit(&self, bucket: u64) -> Result<(), Error> {
        let path = self.result_path(bucket);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Whether bucket `bucket` is committed here.
    pub fn is_committed(&self, bucket: u64) -> bool {
        self.result_path(bucket).exists()
    }

    /// Whether every one of `buckets` buckets is committed here.
    pub fn holds_every_bucket(&self, buckets: u64) -> Result<bool, Error> {
        let ones: u64 = self
            .committed(buckets)?
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
        Ok(ones == buckets)
    }

    /// Keeps circuit PSI's opened result before the job's end is told: a
    /// side stopped after the opening whose peer has since ended still
    /// has it when it resumes (an opening run again gives the same result,
    /// the sums being over the same rows).
    #[cfg(feature = "cpsi")]
    pub fn set_opened(&self, output: &crate::cpsi::Output) -> Result<(), Error> {
        let body = opened::encode(output)?;
        write_sealed(&self.root.join("opened"), OPENED_MAGIC, &body)
    }

    /// The result [`JobDir::set_opened`] kept, if any.
    #[cfg(feature = "cpsi")]
    pub fn opened(&self) -> Result<Option<crate::cpsi::Output>, Error> {
        match read_sealed(&self.root.join("opened"), OPENED_MAGIC)? {
            Some(body) => Ok(Some(opened::decode(&body)?)),
            None => Ok(None),
        }
    }

    /// A committed bucket's matched rows (or shares).
    pub fn result(&self, bucket: u64) -> Result<Vec<u64>, Error> {
        let path = self.result_path(bucket);
        let body = read_sealed(&path, RESULT_MAGIC)?
            .ok_or_else(|| Error::Job(format!("{}: missing", path.display())))?;
        let mut r = Reader::new(&body);
        let n = r.u64("rows")?;
        if n.saturating_mul(8) != r.remaining() as u64 {
            return Err(DecodeError::invalid("rows", n).into());
        }
        let rows = (0..n)
            .map(|_| r.u64("row"))
            .collect::<Result<Vec<_>, _>>()?;
        r.finish()?;
        Ok(rows)
    }

    /// Removes the bucket files once the job is done (results stay until
    /// the output is written).
    pub fn remove_spool(&self, agreed: &Agreed) {
        let _ = fs::remove_file(self.keys_path());
        let _ = fs::remove_dir_all(self.root.join("spool"));
        for b in 0..agreed.shape.buckets {
            let _ = fs::remove_file(self.bucket_path(b));
        }
    }
}

/// The `opened` file's body: a tag, then the aggregate's fields (only
/// the results a job opens; shares and the union go to files instead).
#[cfg(feature = "cpsi")]
mod opened {
    use psikit_transport::{DecodeError, Reader, Writer};

    use crate::cpsi::{Output, Sums};
    use crate::error::Error;

    /// More value columns than any job has (they are counted in a `u8`).
    const MAX_COLUMNS: u64 = 256;

    pub(super) fn encode(output: &Output) -> Result<Vec<u8>, Error> {
        let mut w = Writer::new();
        match output {
            Output::Cardinality(c) => {
                w.u8(0);
                optional(&mut w, *c);
            }
            Output::Sum(None) => {
                w.u8(1).u8(0);
            }
            Output::Sum(Some(s)) => {
                w.u8(1).u8(1).u64(s.cardinality);
                for column in [&s.sender_values, &s.receiver_values] {
                    w.u32(column.len() as u32);
                    column.iter().for_each(|v| {
                        w.u64(*v);
                    });
                }
                optional(&mut w, s.inner_product);
            }
            Output::SumWithheld(m) => {
                w.u8(2).u64(*m);
            }
            Output::Threshold(t) => {
                w.u8(3);
                optional(&mut w, t.map(u64::from));
            }
            Output::Shares(_) | Output::Union(_) => {
                return Err(Error::Internal("a job keeps only opened aggregates"))
            }
        }
        Ok(w.into_bytes())
    }

    pub(super) fn decode(body: &[u8]) -> Result<Output, DecodeError> {
        let mut r = Reader::new(body);
        let output = match r.u8("opened result")? {
            0 => Output::Cardinality(read_optional(&mut r)?),
            1 => match r.u8("sum known")? {
                0 => Output::Sum(None),
                1 => {
                    let cardinality = r.u64("cardinality")?;
                    let mut column = || -> Result<Vec<u64>, DecodeError> {
                        let n = r.count(MAX_COLUMNS, 8, "sums")?;
                        (0..n).map(|_| r.u64("sum")).collect()
                    };
                    let (sender_values, receiver_values) = (column()?, column()?);
                    Output::Sum(Some(Sums {
                        cardinality,
                        sender_values,
                        receiver_values,
                        inner_product: read_optional(&mut r)?,
                    }))
                }
                k => return Err(DecodeError::invalid("sum known", k)),
            },
            2 => Output::SumWithheld(r.u64("minimum")?),
            3 => match read_optional(&mut r)? {
                None => Output::Threshold(None),
                Some(t @ (0 | 1)) => Output::Threshold(Some(t == 1)),
                Some(t) => return Err(DecodeError::invalid("threshold", t)),
            },
            k => return Err(DecodeError::invalid("opened result", k)),
        };
        r.finish()?;
        Ok(output)
    }

    fn optional(w: &mut Writer, v: Option<u64>) {
        match v {
            None => w.u8(0),
            Some(v) => w.u8(1).u64(v),
        };
    }

    fn read_optional(r: &mut Reader) -> Result<Option<u64>, DecodeError> {
        match r.u8("known")? {
            0 => Ok(None),
            1 => Ok(Some(r.u64("value")?)),
            k => Err(DecodeError::invalid("known", k)),
        }
    }
}

fn bounded(v: u64, lo: u64, hi: u64, field: &'static str) -> Result<u64, DecodeError> {
    match (lo..=hi).contains(&v) {
        true => Ok(v),
        false => Err(DecodeError::invalid(field, v)),
    }
}
