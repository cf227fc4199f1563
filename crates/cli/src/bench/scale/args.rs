//! The command lines of `psikit bench scale` and of its workers, read by
//! the runs, the workers and the model's tables.

use std::path::PathBuf;

use clap::Args;

/// Options of `psikit bench scale`.
#[derive(Args, Clone, Debug)]
pub struct ScaleBenchArgs {
    /// Total rows (log2) of the simulated databases.
    #[arg(long, value_delimiter = ',', default_values_t = [26u32, 28, 30])]
    pub(super) log2: Vec<u32>,
    /// Rows per shard (log2): a database of 2^L rows has 2^(L - this)
    /// shards. 2^20 (about 0.4 GB served, unlabeled) builds in seconds;
    /// 22 and 24 are the sizes to recommend, and take minutes per shard.
    #[arg(long, default_value_t = 20)]
    pub(super) shard_log2: u32,
    /// Sample shards built per database (they are statistically alike).
    #[arg(long, default_value_t = 1)]
    pub(super) samples: u32,
    /// Client items per query.
    #[arg(long, default_value_t = 1024)]
    pub(super) clients: u64,
    /// Label bytes per row (0: unlabeled).
    #[arg(long, default_value_t = 0)]
    pub(super) label_bytes: usize,
    /// Query runs per measurement; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub(super) runs: usize,
    /// Threads of the sample shards' workers (the model uses the 1-thread
    /// figures: CPU time).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
    pub(super) threads: Vec<usize>,
    /// Machine counts of the predictions.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 4, 16, 64])]
    pub(super) machines: Vec<u32>,
    /// Cores per machine in the predictions (each as fast as this one's).
    #[arg(long, default_value_t = 16)]
    pub(super) cores: u32,
    /// Threads the client decrypts with in the predictions (the client
    /// decrypts packages in parallel; a laptop or phone has 4 or more).
    #[arg(long, default_value_t = 4)]
    pub(super) client_threads: u32,
    /// Network bandwidth of the predictions, Gbit/s (a data centre: the
    /// router's link carries S copies of the query and every answer).
    #[arg(long, default_value_t = 10.0)]
    pub(super) gbps: f64,
    /// Whole sharded databases to build and query for the check, as
    /// `log2:shards` (empty: no check).
    #[arg(long, value_delimiter = ',', default_values = ["20:1", "20:4", "20:16"])]
    pub(super) check: Vec<String>,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// One measurement in its own process.
#[derive(Args, Clone, Debug)]
pub struct ScaleWorkerArgs {
    /// Total rows (log2) of the database.
    #[arg(long)]
    pub(super) log2: u32,
    #[arg(long)]
    pub(super) shards: u32,
    #[arg(long)]
    pub(super) clients: u64,
    #[arg(long)]
    pub(super) label_bytes: usize,
    #[arg(long)]
    pub(super) runs: usize,
    /// Build and query the whole database through its router (the check)
    /// instead of sample shards.
    #[arg(long)]
    pub(super) whole: bool,
    #[arg(long, default_value_t = 1)]
    pub(super) samples: u32,
    /// Where the shards are saved.
    #[arg(long)]
    pub(super) dir: PathBuf,
}
