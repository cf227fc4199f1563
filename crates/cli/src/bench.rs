//! `psikit bench`: performance figures of the PSI protocols, checked
//! against the targets of the issue. `psikit bench filter` (the default, in
//! [`filter`]) measures the filter protocol (DH OPRF + cuckoo filter),
//! `psikit bench rr16` (in [`rr16`]) the RR16 protocol and `psikit bench he`
//! (in [`he`]) the HE protocol. What every benchmark shares (figures, CPU
//! accounting, tables) is in [`harness`], [`cpu`] and [`table`].

use anyhow::Result;
use clap::{Args, Subcommand};

#[cfg(feature = "filter")]
use filter::{run_filter, run_worker, FilterBenchArgs, WorkerArgs};

mod cpu;
#[cfg(feature = "filter")]
mod filter;
mod harness;
#[cfg(feature = "he")]
mod he;
#[cfg(feature = "rr16")]
mod rr16;
mod table;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    protocol: Option<BenchProtocol>,
    /// Without a protocol, benchmarks the filter protocol.
    #[cfg(feature = "filter")]
    #[command(flatten)]
    filter: FilterBenchArgs,
}

#[derive(Subcommand)]
enum BenchProtocol {
    /// Unbalanced PSI: DH OPRF + cuckoo filter (the default).
    #[cfg(feature = "filter")]
    Filter(FilterBenchArgs),
    /// Internal: one (server size, threads) measurement in its own process.
    #[cfg(feature = "filter")]
    #[command(hide = true)]
    FilterWorker(WorkerArgs),
    /// Malicious-secure PSI (RR16) and its semi-honest variant.
    #[cfg(feature = "rr16")]
    Rr16(rr16::Rr16BenchArgs),
    /// Internal: one party of one RR16 run in its own process.
    #[cfg(feature = "rr16")]
    #[command(hide = true)]
    Rr16Worker(rr16::Rr16WorkerArgs),
    /// Unbalanced labeled PSI from homomorphic encryption (APSI design).
    #[cfg(feature = "he")]
    He(he::HeBenchArgs),
    /// Internal: one HE case in its own process.
    #[cfg(feature = "he")]
    #[command(hide = true)]
    HeWorker(he::HeWorkerArgs),
}

/// Entry point of `psikit bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    match a.protocol {
        #[cfg(feature = "filter")]
        None => run_filter(&a.filter),
        #[cfg(not(feature = "filter"))]
        None => anyhow::bail!("name the protocol to benchmark (see psikit bench --help)"),
        #[cfg(feature = "filter")]
        Some(BenchProtocol::Filter(f)) => run_filter(&f),
        #[cfg(feature = "filter")]
        Some(BenchProtocol::FilterWorker(w)) => run_worker(&w),
        #[cfg(feature = "rr16")]
        Some(BenchProtocol::Rr16(a)) => rr16::run(&a),
        #[cfg(feature = "rr16")]
        Some(BenchProtocol::Rr16Worker(w)) => rr16::worker(&w),
        #[cfg(feature = "he")]
        Some(BenchProtocol::He(a)) => he::run(&a),
        #[cfg(feature = "he")]
        Some(BenchProtocol::HeWorker(w)) => he::worker(&w),
    }
}
