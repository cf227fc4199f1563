//! `psikit bench filter`: performance figures of the filter protocol (DH
//! OPRF + cuckoo filter), checked against the targets of the issue.
//!
//! # How a run is organised
//! The parent process (`psikit bench filter`) runs one *worker* process of
//! this same binary per (server size, thread count), sizes in increasing
//! order. Each worker runs with `RAYON_NUM_THREADS` set to its thread
//! count, so every rayon batch in it (server setup, the service's query
//! evaluation on its blocking thread, the client's blind and finalize)
//! uses exactly that many threads. An in-process `ThreadPool::install`
//! would not reach the service's `spawn_blocking` evaluation, and a fresh
//! process per size also gives a peak-memory figure per size instead of a
//! high-water mark that only grows. Server and client still share the
//! worker process, as in `psikit demo`.
//!
//! The first worker of each size (the one with the most threads) is the
//! *primary*: it also measures the figures that do not depend on threads
//! (filter size, false positives, deltas) and caches the set's tags so
//! that workers with fewer threads can time the OPRF on a sample instead of
//! recomputing millions of tags. Workers hand their figures back as
//! `name value` lines in a file; the parent prints the tables and, with
//! `--json`, writes them as JSON.
//!
//! Items are synthetic (`user{id}@example.com`); server ids are `0..n`.
//! Client item `j` is a server item when `j` is even (ids spread over the
//! set by a multiplicative permutation) and a fresh id `n + j` otherwise, so
//! every query's truth is known and every query is checked against it.
//! Set items are never printed.
//!
//! This module holds the command line, the parent that runs the workers and
//! the worker's entry point; [`setup`] measures the server setup,
//! [`online`](mod@online) the loopback phase (queries, false positives,
//! deltas) and [`report`] prints the tables.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;
use rand::rngs::OsRng;
use rand::RngCore;

use super::cpu::{record_cpu, CpuSnapshot};
use super::harness::Metrics;
use online::online;
use report::{json_report, print_footer, print_header, render_all};
use setup::{bench_key, check_thread_env, eval_cost, record_filter, server_tags, timed_build};

mod online;
mod report;
mod setup;

/// Blinded elements per timing of `blind_evaluate_batch`.
const EVAL_ITEMS: u64 = 1 << 14;
/// Ids with this remainder mod 100 are removed by the 1% update.
const REMOVED_RESIDUE: u64 = 37;
/// Load from other processes below which the machine counts as quiet.
const QUIET_CORES: f64 = 0.25;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

/// Options of `psikit bench filter`.
#[derive(Args, Clone, Debug)]
pub(super) struct FilterBenchArgs {
    /// Server set sizes as powers of two [default: 16,20,22; --quick: 12].
    #[arg(long, value_delimiter = ',')]
    server_log2: Option<Vec<u32>>,
    /// Client set sizes [default: 1,1024,65536; --quick: 1,256].
    #[arg(long, value_delimiter = ',')]
    client_sizes: Option<Vec<u64>>,
    /// Thread counts to measure (each in its own process).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Runs per measurement; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// A measurement whose first run takes longer than this many seconds
    /// divided by --repeats is not repeated (the tables show the run count).
    #[arg(long, default_value_t = 40.0)]
    budget_secs: f64,
    /// Random tags looked up per filter to count false positives: 2^N
    /// [default: 27; --quick: 20].
    #[arg(long)]
    fp_lookups_log2: Option<u32>,
    /// Before each timed measurement, wait up to this many seconds for a
    /// second in which other processes use less than a quarter core (for
    /// shared machines; 0 = never wait).
    #[arg(long, default_value_t = 0.0)]
    quiet_wait_secs: f64,
    /// Small smoke run (server 2^12, clients 1 and 256) taking seconds.
    #[arg(long)]
    quick: bool,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Options of one worker process; built by the parent, not by users.
#[derive(Args, Clone, Debug)]
pub(super) struct WorkerArgs {
    #[arg(long)]
    server_log2: u32,
    #[arg(long)]
    threads: usize,
    #[arg(long, value_delimiter = ',')]
    client_sizes: Vec<u64>,
    #[arg(long)]
    repeats: usize,
    #[arg(long)]
    budget_secs: f64,
    #[arg(long)]
    fp_lookups_log2: u32,
    #[arg(long)]
    quiet_wait_secs: f64,
    /// Also measure the thread-independent figures and cache the tags.
    #[arg(long)]
    primary: bool,
    /// Seed of the (benchmark-only) OPRF key shared by all workers.
    #[arg(long)]
    seed: u64,
    /// Directory shared by the workers (tag cache, saved states).
    #[arg(long)]
    work_dir: PathBuf,
    /// File the figures are written to.
    #[arg(long)]
    out: PathBuf,
}

impl WorkerArgs {
    /// Server set size.
    fn n(&self) -> u64 {
        1 << self.server_log2
    }

    /// Prefix of this worker's progress lines.
    fn label(&self) -> String {
        format!("bench 2^{} x {} thread(s)", self.server_log2, self.threads)
    }

    /// The command line that starts this worker.
    fn to_argv(&self) -> Vec<OsString> {
        let sizes: Vec<String> = self.client_sizes.iter().map(u64::to_string).collect();
        let mut argv: Vec<String> = vec![
            "bench".into(),
            "filter-worker".into(),
            "--server-log2".into(),
            self.server_log2.to_string(),
            "--threads".into(),
            self.threads.to_string(),
            "--client-sizes".into(),
            sizes.join(","),
            "--repeats".into(),
            self.repeats.to_string(),
            "--budget-secs".into(),
            self.budget_secs.to_string(),
            "--fp-lookups-log2".into(),
            self.fp_lookups_log2.to_string(),
            "--quiet-wait-secs".into(),
            self.quiet_wait_secs.to_string(),
            "--seed".into(),
            self.seed.to_string(),
        ];
        if self.primary {
            argv.push("--primary".into());
        }
        let mut argv: Vec<OsString> = argv.into_iter().map(OsString::from).collect();
        argv.extend(["--work-dir".into(), self.work_dir.clone().into_os_string()]);
        argv.extend(["--out".into(), self.out.clone().into_os_string()]);
        argv
    }
}

/// What to measure, after defaults and `--quick` are applied.
#[derive(Clone, Debug)]
struct Plan {
    server_log2: Vec<u32>,
    client_sizes: Vec<u64>,
    threads: Vec<usize>,
    repeats: usize,
    budget_secs: f64,
    fp_lookups_log2: u32,
    quiet_wait_secs: f64,
}

impl FilterBenchArgs {
    /// Resolves defaults (explicit flags win over `--quick`) and validates.
    fn plan(&self) -> Result<Plan> {
        let (sizes, clients, lookups) = if self.quick {
            (vec![12], vec![1, 256], 20)
        } else {
            (vec![16, 20, 22], vec![1, 1024, 65536], 27)
        };
        let mut plan = Plan {
            server_log2: self.server_log2.clone().unwrap_or(sizes),
            client_sizes: self.client_sizes.clone().unwrap_or(clients),
            threads: self.threads.clone(),
            repeats: self.repeats,
            budget_secs: self.budget_secs,
            fp_lookups_log2: self.fp_lookups_log2.unwrap_or(lookups),
            quiet_wait_secs: self.quiet_wait_secs,
        };
        plan.server_log2.sort_unstable();
        plan.server_log2.dedup();
        plan.threads.sort_unstable();
        plan.threads.dedup();
        plan.client_sizes.sort_unstable();
        plan.client_sizes.dedup();
        plan.validate()?;
        Ok(plan)
    }
}

impl Plan {
    /// Rejects sizes the benchmark cannot run meaningfully.
    fn validate(&self) -> Result<()> {
        let in_range = |v: &[u64], lo: u64, hi: u64| v.iter().all(|x| (lo..=hi).contains(x));
        let sizes: Vec<u64> = self.server_log2.iter().map(|&k| u64::from(k)).collect();
        let threads: Vec<u64> = self.threads.iter().map(|&t| t as u64).collect();
        ensure!(
            !sizes.is_empty() && in_range(&sizes, 8, 30),
            "--server-log2 values must be between 8 and 30"
        );
        ensure!(
            !self.client_sizes.is_empty() && in_range(&self.client_sizes, 1, 1 << 22),
            "--client-sizes values must be between 1 and 2^22"
        );
        ensure!(
            !threads.is_empty() && in_range(&threads, 1, 256),
            "--threads values must be between 1 and 256"
        );
        ensure!(
            (1..=100).contains(&self.repeats),
            "--repeats must be between 1 and 100"
        );
        ensure!(
            self.budget_secs.is_finite() && self.budget_secs > 0.0,
            "--budget-secs must be positive"
        );
        ensure!(
            (10..=34).contains(&self.fp_lookups_log2),
            "--fp-lookups-log2 must be between 10 and 34"
        );
        ensure!(
            (0.0..=3600.0).contains(&self.quiet_wait_secs),
            "--quiet-wait-secs must be between 0 and 3600"
        );
        Ok(())
    }
}

/// The figures of one worker and what it measured.
#[derive(Debug)]
struct RunResult {
    server_log2: u32,
    threads: usize,
    primary: bool,
    m: Metrics,
}

// ---------------------------------------------------------------------------
// Parent: runs the workers, prints the tables
// ---------------------------------------------------------------------------

/// `psikit bench filter`: runs every worker, then prints the figures.
pub(super) fn run_filter(args: &FilterBenchArgs) -> Result<()> {
    let plan = args.plan()?;
    let started = Instant::now();
    print_header(&plan);
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let seed = OsRng.next_u64();
    let mut runs = Vec::new();
    for &log2 in &plan.server_log2 {
        // Most threads first: the primary computes and caches the tags.
        for (i, &threads) in plan.threads.iter().rev().enumerate() {
            let w = WorkerArgs {
                server_log2: log2,
                threads,
                client_sizes: plan.client_sizes.clone(),
                repeats: plan.repeats,
                budget_secs: plan.budget_secs,
                fp_lookups_log2: plan.fp_lookups_log2,
                quiet_wait_secs: plan.quiet_wait_secs,
                primary: i == 0,
                seed,
                work_dir: work.path().to_path_buf(),
                out: work.path().join(format!("figures-{log2}-{threads}.txt")),
            };
            runs.push(spawn_worker(&exe, &w)?);
        }
    }
    runs.sort_by_key(|r| (r.server_log2, r.threads));
    print!("{}", render_all(&plan, &runs));
    if let Some(path) = &args.json {
        std::fs::write(path, json_report(&plan, &runs, started.elapsed()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("figures written to {}", path.display());
    }
    print_footer(&runs, started.elapsed());
    Ok(())
}

/// Runs one worker process and reads back its figures.
fn spawn_worker(exe: &Path, w: &WorkerArgs) -> Result<RunResult> {
    eprintln!("{}: starting", w.label());
    let status = Command::new(exe)
        .args(w.to_argv())
        .env("RAYON_NUM_THREADS", w.threads.to_string())
        .status()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    ensure!(status.success(), "{} failed ({status})", w.label());
    let text = std::fs::read_to_string(&w.out)
        .with_context(|| format!("cannot read {}", w.out.display()))?;
    Ok(RunResult {
        server_log2: w.server_log2,
        threads: w.threads,
        primary: w.primary,
        m: Metrics::decode(&text)?,
    })
}

// ---------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------

/// One worker: setup, filter figures, server cost, the online phase over
/// loopback and, for the primary, false positives and deltas.
pub(super) fn run_worker(a: &WorkerArgs) -> Result<()> {
    check_thread_env(a.threads)?;
    let mut m = Metrics::default();
    let start = CpuSnapshot::now();
    let key = bench_key(a.seed)?;
    let tags = server_tags(&key, a, &mut m)?;
    let state = timed_build(a, tags, &mut m)?;
    record_filter(&state, "filter", &mut m);
    m.set_peak_memory("mem.after_setup");
    eval_cost(&key, a, &mut m)?;
    online(a, state, &mut m)?;
    m.set_peak_memory("mem.final");
    record_cpu(&mut m, "worker", start);
    std::fs::write(&a.out, m.encode()).with_context(|| format!("cannot write {}", a.out.display()))
}
