//! What a front end states for a job (its input, its options) and what a
//! job reports back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use psikit_io::KeySpec;
use sha2::{Digest, Sha256};

use super::capacity::Shape;
use super::journal::InputSummary;
use super::kind::JobProtocol;
use super::terms::JobId;
use crate::balanced::{Protocol, Role, Settings};
use crate::error::Error;

/// The default memory budget of a job party.
pub const DEFAULT_MEMORY: u64 = 4 << 30;

/// A job's input: a CSV file and how its keys (and, for circuit PSI's
/// sums, its value columns) are read.
#[derive(Clone, Debug)]
pub struct JobInput {
    pub path: PathBuf,
    pub spec: KeySpec,
}

/// Where a job lives when its front end names no directory: a hidden
/// directory beside the output, or in the current directory for a side
/// without one, named after the role, the input and the output, so that
/// the same command with `--resume` finds it again. A front end removes
/// it once the job has ended well: it is scratch space (the spool, about
/// 48 bytes per row), not a result.
pub fn default_dir(role: Role, input: &Path, output: Option<&Path>) -> Result<PathBuf, Error> {
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| Error::io(p, e));
    let word = match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
    };
    let mut hash = Sha256::new();
    hash.update(b"psikit default job directory v1\0");
    hash.update(word);
    for path in [Some(input), output].into_iter().flatten() {
        hash.update([0]);
        hash.update(absolute(path)?.as_os_str().as_encoded_bytes());
    }
    let base = match output {
        Some(out) => absolute(out)?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        None => absolute(Path::new("."))?,
    };
    let name = format!(".psikit-job-{word}-{}", hex::encode(&hash.finalize()[..8]));
    Ok(base.join(name))
}

/// Removes a job directory made by [`default_dir`] once its job has ended
/// with the peer's end confirmed (it holds item-key hashes and row
/// numbers: scratch a front end must not leave behind).
pub fn remove_scratch(dir: &Path) -> Result<(), Error> {
    std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, e))
}

/// How many buckets a job runs at once by default: one per eight cores,
/// within 1..=4. A bucket's protocol spreads over the cores itself, so a
/// second lane pays where one bucket leaves cores or time idle: on a link
/// with a long round trip (measured with one core per party at 100 ms
/// RTT: 1.4x faster buckets with 2 lanes, 1.55x with 4; even at 20 ms; 7%
/// slower with none, docs/benchmarks.md) or on many cores (not measured
/// here). Ask for more with `lanes` on slow links.
pub fn default_lanes() -> u8 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 8).clamp(1, 4) as u8
}

/// How one party runs a job; both must choose the same protocol, terms
/// and key encoding (the hello compares them).
#[derive(Clone, Debug)]
pub struct JobOptions {
    /// What runs on each bucket.
    pub protocol: JobProtocol,
    /// Where the job keeps its journal and spool files.
    pub job_dir: PathBuf,
    /// Continue the job the directory holds (else it must hold none).
    pub resume: bool,
    /// This party's memory budget in bytes: it sizes the buckets.
    pub memory: u64,
    /// The most items per bucket, instead of the memory budget's.
    pub max_bucket_items: Option<u64>,
    /// How many buckets run at once (each over a connection of its own,
    /// sharing the memory budget); the peer's count caps it.
    pub lanes: u8,
    /// Largest peer input accepted, in rows.
    pub max_peer_rows: u64,
    /// How long to keep reconnecting after the link drops.
    pub retry_for: Duration,
    /// The longest wait for the peer's next message.
    pub idle_timeout: Duration,
    /// Where to write this side's matched rows (the receiver's, or the
    /// sender's with `reveal`); `None` to count them only. Circuit PSI's
    /// shares (both sides) and union (its learner) need one.
    pub output: Option<PathBuf>,
    /// Also hand this side's matched rows back in
    /// [`JobOutcome::rows`] (8 bytes per match in memory), for a front end
    /// that returns rows rather than a file (Python).
    pub return_rows: bool,
}

impl JobOptions {
    pub fn new(protocol: JobProtocol, job_dir: PathBuf) -> Self {
        Self {
            protocol,
            job_dir,
            resume: false,
            memory: DEFAULT_MEMORY,
            max_bucket_items: None,
            lanes: default_lanes(),
            max_peer_rows: 1 << 40,
            retry_for: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(600),
            output: None,
            return_rows: false,
        }
    }

    /// The most items per bucket this side runs: the memory budget over
    /// the peak bytes per padded bucket item, within the protocol's
    /// largest set. The bytes are measured (`psikit bench job`,
    /// docs/benchmarks.md) with a margin: VOLE-PSI's receiver peaks at
    /// about 380 B per item in one bucket, up to 560 B with the next
    /// bucket loading beside the running one. RR16's is an estimate from
    /// its one-shot runs (its garbled Bloom filter and OTs dominate), and
    /// so is circuit PSI's (its sender peaks at 565 MiB for 2^20 items,
    /// docs/benchmarks.md; values and the next bucket add to it). Each
    /// lane holds its own running and loading bucket, so the lanes share
    /// the budget.
    pub fn bucket_limit(&self) -> u64 {
        let (per_item, protocol_max): (u64, u64) = match &self.protocol {
            JobProtocol::Balanced(s) => (
                match (s.protocol, s.malicious) {
                    (Protocol::Vole, false) => 560,
                    (Protocol::Vole, true) => 640,
                    (Protocol::Rr16, _) => 2048,
                },
                Settings::new(s.protocol).max_peer_items,
            ),
            #[cfg(feature = "cpsi")]
            JobProtocol::Circuit { .. } => (
                1024,
                crate::cpsi::CpsiConfig::new(crate::cpsi::App::Cardinality).max_set_size,
            ),
        };
        self.max_bucket_items
            .unwrap_or(self.memory / per_item / u64::from(self.lanes.max(1)))
            .clamp(1, protocol_max)
    }
}

/// Where a job's time went.
#[derive(Clone, Copy, Debug, Default)]
pub struct JobTimes {
    /// The first pass over the input (or checking its digest on resume).
    pub read: Duration,
    pub split: Duration,
    /// The buckets' runs, waits for the peer included.
    pub buckets: Duration,
    /// Writing the matched rows.
    pub output: Duration,
}

/// What a party's job did.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    pub job_id: JobId,
    pub shape: Shape,
    pub input: InputSummary,
    /// Buckets this process ran (the others were committed on both sides
    /// before it started).
    pub buckets_run: u64,
    /// Matched rows of this side's input, when it learns them.
    pub matched_rows: Option<u64>,
    /// Their data row numbers (1-based, sorted), with
    /// [`JobOptions::return_rows`].
    pub rows: Option<Vec<u64>>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Each bucket this process ran with its bytes both ways, by bucket:
    /// the same for every bucket, whatever its real fill (padding), except
    /// that with `reveal` the receiver sends the bucket's matches.
    pub bucket_bytes: Vec<(u64, u64)>,
    /// Circuit PSI's result, opened once over the whole job (`None` in
    /// it at a party it is not revealed to).
    #[cfg(feature = "cpsi")]
    pub circuit: Option<crate::cpsi::Output>,
    /// Circuit PSI's shares or union: the rows written to the output (the
    /// bins, or the union's keys).
    #[cfg(feature = "cpsi")]
    pub written: Option<u64>,
    /// Connections made again after the link dropped.
    pub reconnects: u32,
    /// Whether the peer was heard ending the job. If the link dropped in
    /// the last exchange and the peer did not come back within a short
    /// wait, this side's output is still whole; the peer, if it lacked a
    /// bucket, failed and both sides rerun with `--resume`.
    pub end_confirmed: bool,
    pub times: JobTimes,
}

impl JobOutcome {
    /// The job's id as users see it (hex).
    pub fn id(&self) -> String {
        hex::encode(self.job_id)
    }
}
