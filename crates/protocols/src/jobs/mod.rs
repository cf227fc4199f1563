//! Long two-party jobs: a balanced PSI over inputs of 10^8 rows and more,
//! in bounded memory, bucket by bucket over one connection, resumable
//! after a crash or a dropped link. A front end states a [`JobInput`] and
//! [`JobOptions`] and calls [`run`] or [`run_blocking`] (`options.rs`).
//!
//! * **One pass over the input** (`prepare.rs`): each row's key is
//!   normalised, encoded and hashed to a 128-bit item key, spooled to the
//!   job directory with its row number; the input's digest is taken on
//!   the way.
//! * **The hello** (`terms.rs`): both parties state their terms (protocol,
//!   mode, key encoding, row count, the most items they run in a bucket)
//!   and either both start a new job, whose id hashes both their nonces,
//!   or both resume the same one. Every difference is refused on both
//!   sides in the flags' terms.
//! * **Buckets that leak only the set sizes** (`capacity.rs`): items go to
//!   buckets by a hash keyed by the job id; each side pads every bucket
//!   with dummies (which cannot match) to one capacity computed from its
//!   row count and the bucket count, so that an honest overflow has
//!   probability at most 2^-40 (a Chernoff and union bound, computed in
//!   code). An overflow stops the job; a bucket never runs unpadded.
//! * **The pipeline** (`run.rs`, `lanes.rs`): the buckets run through
//!   [`crate::balanced::run_on`] (VOLE-PSI semi-honest or malicious,
//!   RR16) or circuit PSI's shares, over one connection or several lanes
//!   (connections of their own, [`JobOptions::lanes`], each taking every
//!   `lanes`-th bucket), the next bucket of a lane loading while one
//!   runs; each bucket's result is committed atomically to the journal
//!   (`journal.rs`). Circuit PSI's aggregates are opened once over the
//!   job; its shares (`shares.rs`) and union (`union.rs`) are written to
//!   a file bucket by bucket. A dropped link is retried with backoff for
//!   `retry_for` (`link.rs`); a rerun with `resume` continues from the buckets both
//!   sides committed. At the end the matched rows are written from the
//!   input, in file order, as a one-shot run writes them.
//! * **Across clusters** (`cluster.rs`, `relay.rs`): [`ClusterJob`] is a
//!   party's driver whose buckets its own workers run
//!   ([`BucketWorker`]), each bucket over a connection of its own; the
//!   listening party's one address is a relay that hands each bucket
//!   connection to one of its workers (Python's `psikit.scale.psi`).
//!
//! # What a job reveals
//!
//! Beyond the protocol's own output: both sides' row counts (rows with a
//! key, duplicates included), the bucket count and capacities (functions
//! of those counts and the two memory limits), and whether a bucket
//! overflowed (probability at most 2^-40 for honest input). No bucket's
//! real fill: every bucket runs with its side's capacity. Against a
//! malicious peer, the ideal functionality is the protocol's with a peer
//! set of up to buckets × capacity items: an item the peer puts in
//! another bucket than its hash says can never match.

mod capacity;
mod cluster;
#[cfg(test)]
mod cluster_tests;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
mod journal;
pub(crate) mod kind;
mod lanes;
mod link;
mod options;
mod prepare;
mod relay;
mod run;
#[cfg(feature = "cpsi")]
mod shares;
mod spool;
pub(crate) mod terms;
#[cfg(test)]
mod tests;
#[cfg(feature = "cpsi")]
mod union;

pub use capacity::{capacity, overflow_log2, Shape, MAX_BUCKETS, STATISTICAL_BITS};
pub use cluster::{part_rows_path, spool_part, BucketCost, BucketWorker, ClusterJob, Step};
pub use journal::{InputSummary, MAX_PARTS};
pub use kind::JobProtocol;
pub use options::{
    default_dir, default_lanes, remove_scratch, JobInput, JobOptions, JobOutcome, JobTimes,
    DEFAULT_MEMORY,
};
pub use run::{run, run_blocking};
pub use terms::{JobId, MAX_LANES};
