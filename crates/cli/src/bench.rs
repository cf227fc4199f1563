//! `psikit bench`: performance figures of the PSI protocols, checked
//! against the targets of the issue. `psikit bench filter` (the default, in
//! [`filter`]) measures the filter protocol (DH OPRF + cuckoo filter),
//! `psikit bench rr16` (in [`rr16`]) the RR16 protocol, `psikit bench psi`
//! (in [`psi`]) VOLE-PSI, `psikit bench cpsi` (in [`cpsi`]) circuit PSI,
//! `psikit bench job` (in [`job`]) balanced PSI as a bucketed job,
//! `psikit bench he` (in [`he`]) the HE protocol, `psikit bench scale`
//! (in [`scale`]) sharded HE databases up to 2^30 rows and their cost
//! model, and `psikit bench load` (in [`load`]) one server under many clients,
//! `psikit bench incremental` (in [`incremental`]) matching again after a
//! small change;
//! the two-party ones run through [`two_party`]. What every benchmark shares (figures, CPU
//! accounting, tables) is in [`harness`], [`cpu`] and [`table`].

use anyhow::Result;
use clap::{Args, Subcommand};

#[cfg(feature = "filter")]
use filter::{run_filter, run_worker, FilterBenchArgs, WorkerArgs};

#[cfg(feature = "cpsi")]
mod cpsi;
mod cpu;
#[cfg(feature = "filter")]
mod filter;
mod harness;
#[cfg(feature = "he")]
mod he;
#[cfg(feature = "filter")]
mod incremental;
#[cfg(feature = "two-party")]
mod job;
#[cfg(all(feature = "filter", feature = "he"))]
mod load;
#[cfg(feature = "vole")]
mod psi;
#[cfg(feature = "rr16")]
mod rr16;
#[cfg(feature = "he")]
mod scale;
mod table;
#[cfg(feature = "two-party")]
mod two_party;

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
    /// Balanced PSI: VOLE-PSI (and RR16 with --with-rr16).
    #[cfg(feature = "vole")]
    Psi(psi::PsiBenchArgs),
    /// Internal: one party of one two-party run in its own process.
    #[cfg(feature = "two-party")]
    #[command(hide = true)]
    TwoPartyWorker(two_party::WorkerArgs),
    /// Balanced PSI as a bucketed, resumable job (psikit psi --job-dir),
    /// from CSV files to matched rows.
    #[cfg(feature = "two-party")]
    Job(job::JobBenchArgs),
    /// Internal: one party of one job run in its own process.
    #[cfg(feature = "two-party")]
    #[command(hide = true)]
    JobWorker(job::JobWorkerArgs),
    /// Circuit PSI and its applications (cardinality, sum, threshold, union).
    #[cfg(feature = "cpsi")]
    Cpsi(cpsi::CpsiBenchArgs),
    /// Internal: one party of one circuit-PSI run in its own process.
    #[cfg(feature = "cpsi")]
    #[command(hide = true)]
    CpsiWorker(cpsi::CpsiWorkerArgs),
    /// Unbalanced labeled PSI from homomorphic encryption (APSI design).
    #[cfg(feature = "he")]
    He(he::HeBenchArgs),
    /// Internal: one HE case in its own process.
    #[cfg(feature = "he")]
    #[command(hide = true)]
    HeWorker(he::HeWorkerArgs),
    /// Sharded HE databases of 2^26-2^30 rows simulated on sample shards,
    /// a cost model of their queries and builds, and its check.
    #[cfg(feature = "he")]
    Scale(scale::ScaleBenchArgs),
    /// Internal: one scale measurement in its own process.
    #[cfg(feature = "he")]
    #[command(hide = true)]
    ScaleWorker(scale::ScaleWorkerArgs),
    /// Balanced incremental matching through the filter protocol: a full
    /// run, then a run after a small change on each side.
    #[cfg(feature = "filter")]
    Incremental(incremental::IncrementalBenchArgs),
    /// Many concurrent clients (filter and HE) and hostile ones against
    /// one server.
    #[cfg(all(feature = "filter", feature = "he"))]
    Load(load::LoadBenchArgs),
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
        #[cfg(feature = "vole")]
        Some(BenchProtocol::Psi(a)) => psi::run(&a),
        #[cfg(feature = "two-party")]
        Some(BenchProtocol::TwoPartyWorker(w)) => two_party::worker(&w),
        #[cfg(feature = "two-party")]
        Some(BenchProtocol::Job(a)) => job::run(&a),
        #[cfg(feature = "two-party")]
        Some(BenchProtocol::JobWorker(w)) => job::worker(&w),
        #[cfg(feature = "cpsi")]
        Some(BenchProtocol::Cpsi(a)) => cpsi::run(&a),
        #[cfg(feature = "cpsi")]
        Some(BenchProtocol::CpsiWorker(w)) => cpsi::worker(&w),
        #[cfg(feature = "he")]
        Some(BenchProtocol::He(a)) => he::run(&a),
        #[cfg(feature = "he")]
        Some(BenchProtocol::HeWorker(w)) => he::worker(&w),
        #[cfg(feature = "he")]
        Some(BenchProtocol::Scale(a)) => scale::run(&a),
        #[cfg(feature = "he")]
        Some(BenchProtocol::ScaleWorker(w)) => scale::worker(&w),
        #[cfg(feature = "filter")]
        Some(BenchProtocol::Incremental(a)) => incremental::run(&a),
        #[cfg(all(feature = "filter", feature = "he"))]
        Some(BenchProtocol::Load(a)) => load::run(&a),
    }
}
