//! `psikit bench`: performance figures of the filter protocol (DH OPRF +
//! cuckoo filter), checked against the targets of the issue; `psikit bench
//! rr16` (in [`rr16`]) measures the RR16 protocol.
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

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use clap::{Args, Subcommand};
use psikit_primitives::oprf::{self, ServerKey};
use psikit_protocols::filter_psi::{
    tag_from_output, ClientCache, FilterConfig, FilterService, QueryOutcome, ServerState, SyncKind,
    SyncOutcome, Tag,
};
use psikit_protocols::service::{LocalServer, Router, ServerLimits};
use psikit_transport::net::connect;
use psikit_transport::{Channel, Frame, Limits};
use rand::rngs::{OsRng, StdRng};
use rand::{Rng, RngCore, SeedableRng};

use crate::args::runtime;
use crate::report;
use psikit_protocols::common::connect::loopback_pair;

mod he;
mod rr16;

/// Issue target: server OPRF throughput per core.
const TARGET_OPRF_PER_CORE: f64 = 15_000.0;
/// Issue target: filter bits per item at most this times the formula's.
const TARGET_FILTER_RATIO: f64 = 1.10;
/// Issue target: a 1024-item query over loopback, in seconds.
const TARGET_QUERY_SECS: f64 = 0.150;
/// Client size the latency target is stated for.
const TARGET_QUERY_ITEMS: u64 = 1024;
/// Load factor at which the issue states the space target.
const FORMULA_LOAD: f64 = 0.95;
/// False-positive exponent of the extra filter built to count false
/// positives (2^-30 gives an expected count below one).
const WEAK_FPR_LOG2: u32 = 12;
/// Items per OPRF batch during setup, as `tags_from_reader` does.
const SETUP_BATCH: usize = 1 << 16;
/// OPRF throughput sample of workers that reuse cached tags.
const OPRF_SAMPLE: u64 = 1 << 18;
/// A worker that can reuse cached tags samples the OPRF when its full run
/// would exceed this many items per thread.
const FULL_OPRF_MAX_PER_THREAD: u64 = 1 << 20;
/// Blinded elements per timing of `blind_evaluate_batch`.
const EVAL_ITEMS: u64 = 1 << 14;
/// Client items of the check query after an update.
const CHECK_QUERY_ITEMS: u64 = 1024;
/// Largest filter the benchmark clients accept.
const MAX_FILTER_BYTES: u64 = 1 << 34;
/// Frame round trips timed for the loopback baseline.
const PING_ROUNDS: usize = 50;
/// Ids with this remainder mod 100 are removed by the 1% update.
const REMOVED_RESIDUE: u64 = 37;
/// Clock ticks per second of /proc CPU times (Linux USER_HZ).
const CLOCK_TICKS: f64 = 100.0;

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    protocol: Option<BenchProtocol>,
    /// Without a protocol, benchmarks the filter protocol.
    #[command(flatten)]
    filter: FilterBenchArgs,
}

#[derive(Subcommand)]
enum BenchProtocol {
    /// Unbalanced PSI: DH OPRF + cuckoo filter (the default).
    Filter(FilterBenchArgs),
    /// Internal: one (server size, threads) measurement in its own process.
    #[command(hide = true)]
    FilterWorker(WorkerArgs),
    /// Malicious-secure PSI (RR16) and its semi-honest variant.
    Rr16(rr16::Rr16BenchArgs),
    /// Internal: one party of one RR16 run in its own process.
    #[command(hide = true)]
    Rr16Worker(rr16::Rr16WorkerArgs),
    /// Unbalanced labeled PSI from homomorphic encryption (APSI design).
    He(he::HeBenchArgs),
    /// Internal: one HE case in its own process.
    #[command(hide = true)]
    HeWorker(he::HeWorkerArgs),
}

/// Options of `psikit bench filter`.
#[derive(Args, Clone, Debug)]
struct FilterBenchArgs {
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
struct WorkerArgs {
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

/// Entry point of `psikit bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    match a.protocol {
        None => run_filter(&a.filter),
        Some(BenchProtocol::Filter(f)) => run_filter(&f),
        Some(BenchProtocol::FilterWorker(w)) => run_worker(&w),
        Some(BenchProtocol::Rr16(a)) => rr16::run(&a),
        Some(BenchProtocol::Rr16Worker(w)) => rr16::worker(&w),
        Some(BenchProtocol::He(a)) => he::run(&a),
        Some(BenchProtocol::HeWorker(w)) => he::worker(&w),
    }
}

// ---------------------------------------------------------------------------
// Figures passed from workers to the parent
// ---------------------------------------------------------------------------

/// Named figures of one worker (seconds, bytes, counts), kept sorted.
#[derive(Default, Debug, Clone)]
struct Metrics(BTreeMap<String, f64>);

impl Metrics {
    fn set(&mut self, key: impl Into<String>, value: f64) {
        self.0.insert(key.into(), value);
    }

    fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    /// Records the process's peak memory so far, if the OS reports it.
    fn set_peak_memory(&mut self, key: &str) {
        if let Some(bytes) = report::peak_memory() {
            self.set(key, bytes as f64);
        }
    }

    /// `name value` lines (f64 `Display` round-trips exactly).
    fn encode(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    }

    /// Parses what [`Metrics::encode`] wrote.
    fn decode(text: &str) -> Result<Self> {
        let mut m = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (key, value) = line
                .split_once(' ')
                .with_context(|| format!("malformed figure line {line:?}"))?;
            let value: f64 = value
                .parse()
                .with_context(|| format!("malformed value of {key}"))?;
            m.set(key, value);
        }
        Ok(m)
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
fn run_filter(args: &FilterBenchArgs) -> Result<()> {
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

/// What is measured and how, before the tables.
fn print_header(plan: &Plan) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let sizes: Vec<String> = plan.server_log2.iter().map(|k| format!("2^{k}")).collect();
    let clients: Vec<String> = plan.client_sizes.iter().map(u64::to_string).collect();
    let threads: Vec<String> = plan.threads.iter().map(usize::to_string).collect();
    println!("psikit bench filter: unbalanced PSI, DH OPRF (RFC 9497 ristretto255-SHA512) + cuckoo filter");
    println!(
        "server sets {}; client sets {}; threads {}; {cpus} logical CPUs available",
        sizes.join(", "),
        clients.join(", "),
        threads.join(", ")
    );
    println!(
        "each (server size, threads) pair runs in its own process with RAYON_NUM_THREADS set; \
         server and client share that process and talk over loopback TCP"
    );
    println!(
        "figures are medians of up to {} runs; a measurement whose first run exceeds {:.0} s / {} runs once (see the runs columns)",
        plan.repeats, plan.budget_secs, plan.repeats
    );
    if plan.quiet_wait_secs > 0.0 {
        println!(
            "before each measurement, waited up to {:.0} s for other processes to use < {QUIET_CORES} cores",
            plan.quiet_wait_secs
        );
    }
    println!();
}

/// How to go further than the default sizes, with a time estimate.
fn print_footer(runs: &[RunResult], elapsed: Duration) {
    println!("total benchmark time: {}", report::secs(elapsed));
    let best = runs
        .iter()
        .filter_map(|r| Some((r.threads, oprf_rate(&r.m)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    println!("larger sizes, e.g. 2^24 (one size, most threads, fewer repeats):");
    println!("  psikit bench filter --server-log2 24 --client-sizes 1,1024 --threads 2 --repeats 1 --fp-lookups-log2 24");
    if let Some((threads, rate)) = best {
        let setup = (1u64 << 24) as f64 / rate;
        println!(
            "  (its setup alone takes about {:.0} min at the {threads}-thread rate measured here; \
             memory grows about linearly with the set)",
            setup / 60.0
        );
    }
}

/// Every table, in the order of the list.
fn render_all(plan: &Plan, runs: &[RunResult]) -> String {
    let primaries: Vec<&RunResult> = runs.iter().filter(|r| r.primary).collect();
    let sections = [
        ("1. Server setup", setup_table(runs)),
        ("2. Filter size", filter_table(&primaries)),
        (
            "3. Sync transfer: full filter and 1% deltas",
            sync_table(&primaries),
        ),
        (
            "4. False positives: random 16-byte tags looked up in the filter",
            fp_table(&primaries),
        ),
        (
            "5. Client online latency over loopback TCP",
            query_table(plan, runs),
        ),
        (
            "6. Server CPU per query item (ServerKey::blind_evaluate_batch)",
            eval_table(runs),
        ),
        (
            "7. Peak memory (VmHWM of the worker process)",
            memory_table(runs),
        ),
    ];
    let mut out = String::new();
    for (title, body) in sections {
        let _ = writeln!(out, "## {title}\n\n{body}");
    }
    out.push_str(&targets_summary(runs));
    out
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

/// A table printed as aligned Markdown (readable as text, pastable in docs).
struct TextTable {
    rows: Vec<Vec<String>>,
}

impl TextTable {
    fn new(head: &[&str]) -> Self {
        Self {
            rows: vec![head.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders with every column padded to its widest cell.
    fn render(&self) -> String {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = |c: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..cols).map(width).collect();
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let pad = |r: &Vec<String>| {
            let cells = (0..cols).map(|c| {
                let s = r.get(c).map_or("", String::as_str);
                format!("{s:<w$}", w = widths[c])
            });
            line(cells.collect())
        };
        let mut out = pad(&self.rows[0]);
        out.push_str(&line(widths.iter().map(|&w| "-".repeat(w)).collect()));
        for r in &self.rows[1..] {
            out.push_str(&pad(r));
        }
        out
    }
}

/// A time for humans: µs below a millisecond, then ms, then s.
fn time(secs: Option<f64>) -> String {
    match secs {
        None => "-".into(),
        Some(s) if s < 1e-3 => format!("{:.0} µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{s:.2} s"),
    }
}

/// A byte count for humans.
fn size(bytes: Option<f64>) -> String {
    bytes.map_or("-".into(), |b| report::bytes(b.round() as u64))
}

/// An integer with thousands separators.
fn count(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// A number with `digits` decimals.
fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// "met" or "MISSED" for a target check.
fn verdict(ok: Option<bool>) -> String {
    match ok {
        Some(true) => "met".into(),
        Some(false) => "MISSED".into(),
        None => "-".into(),
    }
}

/// OPRF items per second of a run (all its threads together).
fn oprf_rate(m: &Metrics) -> Option<f64> {
    Some(m.get("oprf.sample_items")? / m.get("oprf.sample.secs")?)
}

/// OPRF items per CPU-second of this process (item generation included,
/// under 1% of it).
fn oprf_cpu_rate(m: &Metrics) -> Option<f64> {
    let items = m.get("oprf.sample_items")? * m.get("oprf.runs")?;
    Some(items / m.get("oprf.cpu_secs")?)
}

/// Average cores other processes used during a measurement, as a cell.
fn others(v: Option<f64>) -> String {
    num(v, 2)
}

/// Table 1: OPRF and filter build time, throughput per core.
fn setup_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "OPRF, all items",
        "OPRF items/s",
        "items/s/core",
        "target ≥ 15,000/core",
        "items per CPU-s",
        "others (cores)",
        "runs",
        "filter build",
        "runs",
    ]);
    for r in runs {
        let rate = oprf_rate(&r.m);
        let per_core = rate.map(|v| v / r.threads as f64);
        let mut oprf = time(r.m.get("oprf.secs"));
        if r.m.get("oprf.extrapolated") == Some(1.0) {
            let sample = r.m.get("oprf.sample_items").unwrap_or(0.0) as u64;
            let _ = write!(oprf, " (est. from 2^{} sample)", sample.max(1).ilog2());
        }
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            oprf,
            count(rate),
            count(per_core),
            verdict(per_core.map(|v| v >= TARGET_OPRF_PER_CORE)),
            count(oprf_cpu_rate(&r.m)),
            others(r.m.get("oprf.other_cores")),
            count(r.m.get("oprf.runs")),
            time(r.m.get("build.secs")),
            count(r.m.get("build.runs")),
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\nitems/s/core = wall-clock rate / threads; items per CPU-s = items / CPU time of the \
         process, which other processes cannot inflate; others = average cores busy with other \
         processes of this machine during the OPRF timing (2 cores in all). Filter build is \
         single-threaded (dedup + cuckoo inserts).\n",
    );
    out
}

/// Table 2: filter size against the cuckoo-filter formula.
fn filter_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "filter (table)",
        "bytes/item",
        "bits/item",
        "load",
        "fingerprint",
        "formula @0.95",
        "ratio",
        "target ≤ 1.10",
        "formula @load",
        "ratio",
    ]);
    for r in runs {
        let m = &r.m;
        let ratio = |f: Option<f64>| Some(m.get("filter.bits_per_item")? / f?);
        let at95 = m.get("filter.formula_095");
        let at_load = m.get("filter.formula_load");
        t.row(vec![
            format!("2^{}", r.server_log2),
            size(m.get("filter.table_bytes")),
            num(m.get("filter.bits_per_item").map(|b| b / 8.0), 2),
            num(m.get("filter.bits_per_item"), 2),
            num(m.get("filter.load"), 3),
            format!(
                "{} bits x {}",
                num(m.get("filter.fingerprint_bits"), 0),
                num(m.get("filter.bucket_size"), 0)
            ),
            num(at95, 2),
            num(ratio(at95), 3),
            verdict(ratio(at95).map(|x| x <= TARGET_FILTER_RATIO)),
            num(at_load, 2),
            num(ratio(at_load), 3),
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\nformula: (log2(1/eps) + log2(2b)) / alpha bits per item, eps = 2^-30, b = 4; \
         the filter is built at load 0.90 to leave room for insertions.\n",
    );
    out
}

/// One delta column pair: size and percentage of the full filter.
fn delta_cells(m: &Metrics, which: &str) -> [String; 2] {
    let body = m.get(&format!("delta.{which}.body"));
    let full = m.get("sync.full_body");
    let mut bytes = size(body);
    if m.get(&format!("delta.{which}.is_delta")) == Some(0.0) {
        bytes.push_str(" (sent as full)");
    }
    let pct = body.zip(full).map(|(b, f)| 100.0 * b / f);
    [bytes, pct.map_or("-".into(), |p| format!("{p:.2}%"))]
}

/// Table 3: full filter download and the three 1% deltas.
fn sync_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "full filter",
        "on the wire",
        "download",
        "-1% +1% delta",
        "of full",
        "+1% only",
        "of full",
        "-1% only",
        "of full",
        "changed slots (-1% +1%)",
        "update time",
    ]);
    for r in runs {
        let m = &r.m;
        let [both, both_pct] = delta_cells(m, "both");
        let [ins, ins_pct] = delta_cells(m, "insert");
        let [del, del_pct] = delta_cells(m, "delete");
        t.row(vec![
            format!("2^{}", r.server_log2),
            size(m.get("sync.full_body")),
            size(m.get("sync.full_wire")),
            time(m.get("sync.full_secs")),
            both,
            both_pct,
            ins,
            ins_pct,
            del,
            del_pct,
            count(m.get("delta.both.changed_slots")),
            time(m.get("delta.both.update_secs")),
        ]);
    }
    let mut out = t.render();
    if let Some(r) = runs.first() {
        let _ = writeln!(
            out,
            "\n1% = ids ≡ {REMOVED_RESIDUE} mod 100 removed ({} items at 2^{}) and as many new ids inserted; \
             each delta is measured from the same base filter by a client that then checks the server's digest.",
            count(r.m.get("delta.removed")),
            r.server_log2
        );
    }
    out
}

/// Table 4: measured against expected false positives.
fn fp_table(runs: &[&RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "filter fpr",
        "bits/item",
        "lookups",
        "measured FP",
        "expected FP",
        "measured rate",
        "expected rate",
        "consistency",
        "time",
    ]);
    for r in runs {
        for which in ["default", "weak"] {
            let g = |k: &str| r.m.get(&format!("fp.{which}.{k}"));
            let (lookups, measured, expected) = (g("lookups"), g("measured"), g("expected"));
            t.row(vec![
                format!("2^{}", r.server_log2),
                format!("2^-{}", num(g("fpr_log2"), 0)),
                num(g("bits_per_item"), 2),
                lookups.map_or("-".into(), |l| format!("2^{}", l.log2().round())),
                count(measured),
                small_num(expected),
                rate_pow2(measured.zip(lookups).map(|(x, l)| x / l)),
                rate_pow2(expected.zip(lookups).map(|(x, l)| x / l)),
                consistency(measured, expected),
                time(g("secs")),
            ]);
        }
    }
    let mut out = t.render();
    out.push_str(
        "\nexpected = lookups x estimated_fpr() = lookups x (1 - (1 - 2^-f)^(2 b load)); \
         consistency: z = (measured - expected) / sqrt(expected) when at least 5 are expected \
         (|z| < 2 is consistent), else the Poisson probability of a count at least (or at most) \
         the measured one; random tags are exactly what OPRF outputs of non-members look like.\n",
    );
    out
}

/// A non-negative number with two decimals, or two significant digits
/// when it is below 0.01.
fn small_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x > 0.0 && x < 0.01 => format!("{x:.1e}"),
        other => num(other, 2),
    }
}

/// How well a measured count fits a Poisson expectation: a z-score when
/// the expectation is large enough for the normal approximation, else
/// the probability of a count at least as large.
fn consistency(measured: Option<f64>, expected: Option<f64>) -> String {
    match (measured, expected) {
        (Some(x), Some(e)) if e >= 5.0 => format!("z = {:.2}", (x - e) / e.sqrt()),
        (Some(x), Some(e)) if x >= e => {
            format!("P(≥{x:.0}) = {:.0}%", 100.0 * poisson_tail(x, e))
        }
        (Some(x), Some(e)) => {
            let at_most = 1.0 - poisson_tail(x + 1.0, e);
            format!("P(≤{x:.0}) = {:.0}%", 100.0 * at_most)
        }
        _ => "-".into(),
    }
}

/// P(X ≥ k) for X ~ Poisson(lambda), for small k.
fn poisson_tail(k: f64, lambda: f64) -> f64 {
    let mut term = (-lambda).exp();
    let mut below = 0.0;
    for i in 0..k.max(0.0) as u64 {
        below += term;
        term *= lambda / (i + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// A probability as a power of two ("0" when zero).
fn rate_pow2(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p <= 0.0 => "0".into(),
        Some(p) => format!("2^{:.2}", p.log2()),
    }
}

/// Table 5: query latency split into its phases, and bytes each way.
fn query_table(plan: &Plan, runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "client items",
        "blind",
        "round trip",
        "finalize",
        "total",
        "target 1024 < 150 ms",
        "sent",
        "received",
        "runs",
        "others (cores)",
    ]);
    for r in runs {
        for &y in &plan.client_sizes {
            let g = |k: &str| r.m.get(&format!("query.{y}.{k}"));
            let target =
                (y == TARGET_QUERY_ITEMS).then(|| g("total").map(|s| s < TARGET_QUERY_SECS));
            t.row(vec![
                format!("2^{}", r.server_log2),
                r.threads.to_string(),
                y.to_string(),
                time(g("blind")),
                time(g("round_trip")),
                time(g("finalize")),
                time(g("total")),
                target.map_or(String::new(), verdict),
                size(g("sent")),
                size(g("received")),
                count(g("runs")),
                others(g("other_cores")),
            ]);
        }
    }
    let mut out = t.render();
    let small = median_of(runs.iter().filter_map(|r| r.m.get("loopback.small_rtt")));
    let big = median_of(runs.iter().filter_map(|r| r.m.get("loopback.32k_rtt")));
    let _ = writeln!(
        out,
        "\nthe run with the median total is shown; round trip = send, server evaluation, receive. \
         Loopback baseline (echo of one frame): {} for 1 byte, {} for 32 KiB (a 1024-item request).",
        time(small),
        time(big)
    );
    out
}

/// Median of some values, if any.
fn median_of(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 0 {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// Table 6: server evaluation cost per blinded element.
fn eval_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "wall time per item",
        "CPU time per item (x threads)",
        "items/s",
        "runs",
    ]);
    for r in runs {
        let per = r.m.get("eval.secs_per_item");
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            num(per.map(|s| s * 1e6), 1) + " µs",
            num(per.map(|s| s * 1e6 * r.threads as f64), 1) + " µs",
            count(per.map(|s| 1.0 / s)),
            count(r.m.get("eval.runs")),
        ]);
    }
    let mut out = t.render();
    let _ = writeln!(
        out,
        "\nbatches of {EVAL_ITEMS} blinded elements; the cost does not depend on the server set size."
    );
    out
}

/// Table 7: peak memory after each phase.
fn memory_table(runs: &[RunResult]) -> String {
    let mut t = TextTable::new(&[
        "server",
        "threads",
        "after setup",
        "after client sync",
        "after queries",
        "at the end",
    ]);
    for r in runs {
        let end = if r.primary {
            size(r.m.get("mem.final"))
        } else {
            "(no update phase)".into()
        };
        t.row(vec![
            format!("2^{}", r.server_log2),
            r.threads.to_string(),
            size(r.m.get("mem.after_setup")),
            size(r.m.get("mem.after_sync")),
            size(r.m.get("mem.after_queries")),
            end,
        ]);
    }
    let mut out = t.render();
    out.push_str(
        "\none process per row, so each row is that size alone; it holds the server state (tags, filter, \
         serialized filter), the client's filter copy, and benchmark scratch (generated items, a spare \
         copy of the tags while repeated builds are timed). \"At the end\" adds the false-positive \
         filter and two more client copies used for the delta measurements.\n",
    );
    out
}

/// One line per target: worst measured value and whether it is met.
fn targets_summary(runs: &[RunResult]) -> String {
    format!(
        "## Targets\n\n{}\n{}\n{}\n\naverage cores used by other processes during each worker: {}\n\n",
        oprf_target_line(runs),
        filter_target_line(runs),
        query_target_line(runs),
        load_summary(runs)
    )
}

/// The OPRF target against the slowest run, on the wall clock and per
/// CPU-second.
fn oprf_target_line(runs: &[RunResult]) -> String {
    let worst_rate = runs
        .iter()
        .filter_map(|r| Some(oprf_rate(&r.m)? / r.threads as f64))
        .min_by(f64::total_cmp);
    let worst_cpu = runs
        .iter()
        .filter_map(|r| oprf_cpu_rate(&r.m))
        .min_by(f64::total_cmp);
    format!(
        "- OPRF ≥ 15,000 items/s per core: lowest {} items/s/core on the wall clock, {}; \
         lowest {} items per CPU-second, {}",
        count(worst_rate),
        verdict(worst_rate.map(|v| v >= TARGET_OPRF_PER_CORE)),
        count(worst_cpu),
        verdict(worst_cpu.map(|v| v >= TARGET_OPRF_PER_CORE))
    )
}

/// The filter-size target against the largest ratio measured.
fn filter_target_line(runs: &[RunResult]) -> String {
    let worst_ratio = runs
        .iter()
        .filter_map(|r| Some(r.m.get("filter.bits_per_item")? / r.m.get("filter.formula_095")?))
        .max_by(f64::total_cmp);
    format!(
        "- filter within 10% of the formula at load 0.95: highest ratio {}, {}",
        num(worst_ratio, 3),
        verdict(worst_ratio.map(|v| v <= TARGET_FILTER_RATIO))
    )
}

/// The query-latency target for every run that measured 1024 items.
fn query_target_line(runs: &[RunResult]) -> String {
    let key = format!("query.{TARGET_QUERY_ITEMS}.total");
    let query: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            let s = r.m.get(&key)?;
            let ok = verdict(Some(s < TARGET_QUERY_SECS));
            let (k, t) = (r.server_log2, r.threads);
            Some(format!("2^{k} x {t}t: {} {ok}", time(Some(s))))
        })
        .collect();
    let shown = if query.is_empty() {
        "not measured (no 1024-item client set)".to_string()
    } else {
        query.join("; ")
    };
    format!("- 1024-item query over loopback < 150 ms: {shown}")
}

/// Load from other processes during each worker, and any quiet waits.
fn load_summary(runs: &[RunResult]) -> String {
    let cells: Vec<String> = runs
        .iter()
        .map(|r| {
            let cores = r.m.get("worker.other_cores");
            let mut cell = format!("2^{} x {}t: {}", r.server_log2, r.threads, others(cores));
            if let Some(w) = r.m.get("worker.quiet_wait_secs").filter(|w| *w >= 1.0) {
                let _ = write!(cell, " (waited {w:.0} s for quiet)");
            }
            cell
        })
        .collect();
    cells.join("; ")
}

/// The figures as JSON: the plan plus every run's named figures.
fn json_report(plan: &Plan, runs: &[RunResult], elapsed: Duration) -> String {
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = String::from("{\n");
    let _ = writeln!(s, "  \"benchmark\": \"psikit bench filter\",");
    let _ = writeln!(s, "  \"available_parallelism\": {cpus},");
    let _ = writeln!(
        s,
        "  \"server_log2\": {},",
        list(plan.server_log2.iter().map(u32::to_string).collect())
    );
    let _ = writeln!(
        s,
        "  \"client_sizes\": {},",
        list(plan.client_sizes.iter().map(u64::to_string).collect())
    );
    let _ = writeln!(
        s,
        "  \"threads\": {},",
        list(plan.threads.iter().map(usize::to_string).collect())
    );
    let _ = writeln!(s, "  \"repeats\": {},", plan.repeats);
    let _ = writeln!(s, "  \"budget_secs\": {},", json_number(plan.budget_secs));
    let _ = writeln!(s, "  \"fp_lookups_log2\": {},", plan.fp_lookups_log2);
    let _ = writeln!(
        s,
        "  \"total_secs\": {},",
        json_number(elapsed.as_secs_f64())
    );
    let bodies: Vec<String> = runs.iter().map(json_run).collect();
    let _ = writeln!(s, "  \"runs\": [\n{}\n  ]\n}}", bodies.join(",\n"));
    s
}

/// One run as a JSON object.
fn json_run(r: &RunResult) -> String {
    let figures: Vec<String> =
        r.m.0
            .iter()
            .map(|(k, v)| format!("        \"{k}\": {}", json_number(*v)))
            .collect();
    format!(
        "    {{\n      \"server_log2\": {},\n      \"threads\": {},\n      \"primary\": {},\n      \"figures\": {{\n{}\n      }}\n    }}",
        r.server_log2,
        r.threads,
        r.primary,
        figures.join(",\n")
    )
}

/// A JSON number, or `null` for values JSON cannot represent.
fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

// ---------------------------------------------------------------------------
// Synthetic data
// ---------------------------------------------------------------------------

/// The synthetic item with this id.
fn item(id: u64) -> Vec<u8> {
    format!("user{id}@example.com").into_bytes()
}

/// Spreads `t < n` over `0..n` (`n` a power of two): an odd multiplier is a
/// bijection modulo `n`.
fn scatter(t: u64, n: u64) -> u64 {
    t.wrapping_mul(0x9E37_79B9_7F4A_7C15) & (n - 1)
}

/// Id of client item `j` against a server set `0..n`, and whether it is a
/// server item: even `j` are members, odd `j` (and any beyond `2n`) are
/// fresh ids `n + j`.
fn client_id(j: u64, n: u64) -> (u64, bool) {
    if j % 2 == 0 && j / 2 < n {
        (scatter(j / 2, n), true)
    } else {
        (n + j, false)
    }
}

/// Client set of `size` items and the truth of each.
fn client_set(n: u64, size: u64) -> (Vec<Vec<u8>>, Vec<bool>) {
    (0..size)
        .map(|j| {
            let (id, member) = client_id(j, n);
            (item(id), member)
        })
        .unzip()
}

/// The 1% update: ids removed from `0..n` and ids added (`n + 3t`, as
/// many as removed, so some odd client items become members).
struct UpdatePlan {
    removed: Vec<u64>,
    added: Vec<u64>,
}

impl UpdatePlan {
    fn new(n: u64) -> Self {
        let removed: Vec<u64> = (0..n).filter(|id| id % 100 == REMOVED_RESIDUE).collect();
        let added = (0..removed.len() as u64).map(|t| n + 3 * t).collect();
        Self { removed, added }
    }

    /// Whether client item `j` is a server item after the update.
    fn member_after(&self, j: u64, n: u64) -> bool {
        match client_id(j, n) {
            (id, true) => id % 100 != REMOVED_RESIDUE,
            (_, false) => j % 3 == 0 && j / 3 < self.added.len() as u64,
        }
    }
}

/// Fails unless every match equals the truth. A false positive happens
/// with probability about |Y| x 2^-30 per query, so a mismatch is a bug.
fn check_matches(what: &str, got: &[bool], truth: &[bool]) -> Result<()> {
    ensure!(
        got.len() == truth.len(),
        "{what}: {} answers for {} items",
        got.len(),
        truth.len()
    );
    let extra = got.iter().zip(truth).filter(|(g, t)| **g && !**t).count();
    let missing = got.iter().zip(truth).filter(|(g, t)| !**g && **t).count();
    ensure!(
        extra == 0 && missing == 0,
        "{what}: {missing} members missed and {extra} non-members matched \
         (false positives have probability ~|Y| x 2^-30 per query; a repeat is a bug)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// CPU accounting: own CPU time, and what other processes used meanwhile
// ---------------------------------------------------------------------------

/// CPU seconds used so far by this process (all threads) and by the whole
/// machine, from /proc. The machine shares its two cores with other work,
/// so every timing is reported with how much of the CPU others took.
#[derive(Clone, Copy)]
struct CpuSnapshot {
    own: f64,
    busy: f64,
    steal: f64,
    at: Instant,
}

/// CPU use between two snapshots.
#[derive(Clone, Copy, Default)]
struct CpuUse {
    /// CPU seconds of this process.
    own: f64,
    /// Average cores busy with other processes of this machine; `None` for
    /// windows too short for /proc's 10 ms ticks to tell.
    others: Option<f64>,
    /// Average cores taken by the hypervisor (steal time).
    steal: Option<f64>,
}

/// Shortest window whose load from other processes is reported.
const MIN_LOAD_WINDOW_SECS: f64 = 1.0;

impl CpuSnapshot {
    /// Reads /proc; `None` where it is not available.
    fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the parenthesised command name; utime and stime are
        // fields 14 and 15 of the line, i.e. 12th and 13th after it.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
        let own = (ticks(11)? + ticks(12)?) / CLOCK_TICKS;
        let all = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<f64> = all
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal ...
        let busy = [0, 1, 2, 5, 6]
            .iter()
            .filter_map(|&i| cpu.get(i))
            .sum::<f64>();
        Some(Self {
            own,
            busy: busy / CLOCK_TICKS,
            steal: cpu.get(7).copied().unwrap_or(0.0) / CLOCK_TICKS,
            at: Instant::now(),
        })
    }

    /// CPU use since this snapshot (zeros if /proc is unavailable).
    fn since(&self) -> CpuUse {
        let Some(now) = Self::now() else {
            return CpuUse::default();
        };
        let wall = now.at.duration_since(self.at).as_secs_f64();
        let own = now.own - self.own;
        let long = wall >= MIN_LOAD_WINDOW_SECS;
        CpuUse {
            own,
            others: long.then(|| ((now.busy - self.busy - own) / wall).max(0.0)),
            steal: long.then(|| (now.steal - self.steal) / wall),
        }
    }
}

/// Records CPU use since `start` under `<prefix>.cpu_secs`,
/// `<prefix>.other_cores` and `<prefix>.steal_cores`.
fn record_cpu(m: &mut Metrics, prefix: &str, start: Option<CpuSnapshot>) {
    let Some(start) = start else { return };
    let used = start.since();
    m.set(format!("{prefix}.cpu_secs"), used.own);
    if let (Some(others), Some(steal)) = (used.others, used.steal) {
        m.set(format!("{prefix}.other_cores"), others);
        m.set(format!("{prefix}.steal_cores"), steal);
    }
}

/// Load from other processes below which the machine counts as quiet.
const QUIET_CORES: f64 = 0.25;

/// Waits (up to `--quiet-wait-secs`) for a one-second window in which
/// other processes use less than [`QUIET_CORES`]; adds the time waited to
/// `worker.quiet_wait_secs`.
fn wait_for_quiet(a: &WorkerArgs, m: &mut Metrics) {
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < a.quiet_wait_secs {
        let Some(window) = CpuSnapshot::now() else {
            return;
        };
        std::thread::sleep(Duration::from_secs(1));
        if window.since().others.is_some_and(|c| c < QUIET_CORES) {
            break;
        }
    }
    let waited = m.get("worker.quiet_wait_secs").unwrap_or(0.0);
    m.set(
        "worker.quiet_wait_secs",
        waited + started.elapsed().as_secs_f64(),
    );
}

// ---------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------

/// One worker: setup, filter figures, server cost, the online phase over
/// loopback and, for the primary, false positives and deltas.
fn run_worker(a: &WorkerArgs) -> Result<()> {
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

/// A worker's thread count must be what rayon's global pool will use.
fn check_thread_env(threads: usize) -> Result<()> {
    let env = std::env::var("RAYON_NUM_THREADS").unwrap_or_default();
    ensure!(
        env == threads.to_string(),
        "this internal command needs RAYON_NUM_THREADS={threads} (found {env:?}); run `psikit bench filter`"
    );
    Ok(())
}

/// The benchmark's OPRF key, derived from the parent's seed so that all
/// workers of a run (and the tag cache) agree. Benchmark use only.
fn bench_key(seed: u64) -> Result<ServerKey> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    Ok(ServerKey::derive(&bytes, b"psikit bench")?)
}

/// Prints a progress line on stderr.
fn progress(a: &WorkerArgs, what: &str) {
    eprintln!("{}: {what}", a.label());
}

/// Whether to start another run of a measurement: always the first; then
/// up to `repeats` runs while `repeats` runs as long as the first fit the
/// budget.
fn another_run(done: &[Duration], a: &WorkerArgs) -> bool {
    match done.first() {
        None => true,
        Some(first) => {
            done.len() < a.repeats && first.as_secs_f64() * a.repeats as f64 <= a.budget_secs
        }
    }
}

/// Runs a timed measurement as often as [`another_run`] allows.
fn repeat_timed(
    a: &WorkerArgs,
    mut run: impl FnMut() -> Result<Duration>,
) -> Result<Vec<Duration>> {
    let mut done = Vec::new();
    while another_run(&done, a) {
        done.push(run()?);
    }
    Ok(done)
}

/// Records the median of timed runs under `<prefix>.secs`, with their
/// count and spread (min and max go to the JSON only).
fn record_runs(m: &mut Metrics, prefix: &str, runs: &[Duration]) {
    let secs = runs.iter().map(Duration::as_secs_f64);
    m.set(format!("{prefix}.secs"), median(runs));
    m.set(format!("{prefix}.runs"), runs.len() as f64);
    m.set(
        format!("{prefix}.min_secs"),
        secs.clone().fold(f64::INFINITY, f64::min),
    );
    m.set(format!("{prefix}.max_secs"), secs.fold(0.0, f64::max));
}

/// Median of the durations (mean of the middle two for an even count).
fn median(durations: &[Duration]) -> f64 {
    median_of(durations.iter().map(Duration::as_secs_f64)).unwrap_or(f64::NAN)
}

/// Tags of the items with these ids, in batches of [`SETUP_BATCH`] like
/// `tags_from_reader`. Returns the time spent in the OPRF and tag
/// derivation only (generating the items is not counted).
fn oprf_tags(key: &ServerKey, ids: impl IntoIterator<Item = u64>) -> Result<(Duration, Vec<Tag>)> {
    let mut ids = ids.into_iter();
    let mut tags = Vec::with_capacity(ids.size_hint().0);
    let mut spent = Duration::ZERO;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(SETUP_BATCH);
    loop {
        batch.clear();
        batch.extend(ids.by_ref().take(SETUP_BATCH).map(item));
        if batch.is_empty() {
            return Ok((spent, tags));
        }
        let t = Instant::now();
        let outputs = key.evaluate_batch(&batch)?;
        tags.extend(outputs.iter().map(tag_from_output));
        spent += t.elapsed();
    }
}

/// Path of the cached tags of a server size.
fn tag_cache(a: &WorkerArgs) -> PathBuf {
    a.work_dir.join(format!("tags-{}.bin", a.server_log2))
}

/// The server set's tags, timing the OPRF: over the whole set, or over a
/// sample when cached tags exist and the whole set would take too long on
/// this many threads (the setup time is then extrapolated).
fn server_tags(key: &ServerKey, a: &WorkerArgs, m: &mut Metrics) -> Result<Vec<Tag>> {
    let n = a.n();
    let cache = tag_cache(a);
    if n > FULL_OPRF_MAX_PER_THREAD * a.threads as u64 && cache.exists() {
        let tags = load_tags(&cache, n, key)?;
        let sample = OPRF_SAMPLE.min(n);
        progress(a, &format!("OPRF throughput on a sample of {sample} items"));
        wait_for_quiet(a, m);
        let cpu = CpuSnapshot::now();
        let runs = repeat_timed(a, || Ok(oprf_tags(key, 0..sample)?.0))?;
        record_cpu(m, "oprf", cpu);
        record_oprf(m, sample, &runs);
        m.set("oprf.secs", median(&runs) * n as f64 / sample as f64);
        m.set("oprf.extrapolated", 1.0);
        return Ok(tags);
    }
    progress(a, &format!("OPRF of all {n} server items"));
    let mut tags = None;
    wait_for_quiet(a, m);
    let cpu = CpuSnapshot::now();
    let runs = repeat_timed(a, || {
        let (spent, computed) = oprf_tags(key, 0..n)?;
        tags.get_or_insert(computed);
        Ok(spent)
    })?;
    record_cpu(m, "oprf", cpu);
    record_oprf(m, n, &runs);
    m.set("oprf.secs", median(&runs));
    let tags = tags.context("no OPRF run")?;
    if a.primary {
        save_tags(&cache, &tags)?;
    }
    Ok(tags)
}

/// Records OPRF timings of `items` items (`oprf.sample_*`); the caller
/// sets `oprf.secs` for the whole set.
fn record_oprf(m: &mut Metrics, items: u64, runs: &[Duration]) {
    record_runs(m, "oprf.sample", runs);
    m.set("oprf.sample_items", items as f64);
    m.set("oprf.runs", runs.len() as f64);
}

/// Writes tags for the other workers of this size.
fn save_tags(path: &Path, tags: &[Tag]) -> Result<()> {
    let bytes: Vec<u8> = tags.iter().flatten().copied().collect();
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads cached tags and spot-checks them against the key.
fn load_tags(path: &Path, n: u64, key: &ServerKey) -> Result<Vec<Tag>> {
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    ensure!(raw.len() as u64 == 16 * n, "tag cache has the wrong length");
    let tags: Vec<Tag> = raw
        .chunks_exact(16)
        .map(|c| Tag::try_from(c).context("short tag"))
        .collect::<Result<_>>()?;
    let probes = [0, n / 3, n / 2, n - 1];
    let (_, expect) = oprf_tags(key, probes)?;
    for (&id, want) in probes.iter().zip(&expect) {
        ensure!(
            tags.get(id as usize) == Some(want),
            "tag cache does not match the key"
        );
    }
    Ok(tags)
}

/// Builds the server state (dedup + cuckoo filter) as often as the budget
/// allows, keeping the last one.
fn timed_build(a: &WorkerArgs, tags: Vec<Tag>, m: &mut Metrics) -> Result<ServerState> {
    progress(a, "building the filter");
    wait_for_quiet(a, m);
    let mut state = None;
    let runs = repeat_timed(a, || {
        state = None;
        let input = tags.clone();
        let key = bench_key(a.seed)?;
        let t = Instant::now();
        let (built, duplicates) = ServerState::build(key, input, FilterConfig::default())?;
        let spent = t.elapsed();
        ensure!(duplicates == 0, "synthetic items must be distinct");
        state = Some(built);
        Ok(spent)
    })?;
    record_runs(m, "build", &runs);
    state.context("no build run")
}

/// Size figures of a state's filter under `prefix`, with the formula.
fn record_filter(state: &ServerState, prefix: &str, m: &mut Metrics) {
    let f = state.filter();
    let p = f.params();
    let fpr_log2 = f64::from(state.config().fpr_log2);
    let formula = |load: f64| (fpr_log2 + (2.0 * f64::from(p.bucket_size)).log2()) / load;
    let mut put = |k: &str, v: f64| m.set(format!("{prefix}.{k}"), v);
    put("items", state.len() as f64);
    put("table_bytes", f.size_bytes() as f64);
    put("bits_per_item", f.bits_per_item());
    put("load", f.load_factor());
    put("fingerprint_bits", f64::from(p.fingerprint_bits));
    put("bucket_size", f64::from(p.bucket_size));
    put("num_buckets", p.num_buckets as f64);
    put("fpr_log2", fpr_log2);
    put("estimated_fpr", f.estimated_fpr());
    put("formula_095", formula(FORMULA_LOAD));
    put("formula_load", formula(f.load_factor()));
}

/// Server cost per query element: `blind_evaluate_batch` on this many
/// threads.
fn eval_cost(key: &ServerKey, a: &WorkerArgs, m: &mut Metrics) -> Result<()> {
    progress(a, "timing blind_evaluate_batch");
    let items: Vec<Vec<u8>> = (0..EVAL_ITEMS).map(|i| item(a.n() + i)).collect();
    let (_, blinded) = oprf::blind_batch(&items, &mut OsRng)?;
    wait_for_quiet(a, m);
    let runs = repeat_timed(a, || {
        let t = Instant::now();
        let evaluated = key.blind_evaluate_batch(&blinded);
        let spent = t.elapsed();
        ensure!(evaluated.len() == blinded.len(), "missing evaluations");
        Ok(spent)
    })?;
    record_runs(m, "eval", &runs);
    m.set("eval.secs_per_item", median(&runs) / EVAL_ITEMS as f64);
    Ok(())
}

// ---------------------------------------------------------------------------
// Online phase over loopback TCP
// ---------------------------------------------------------------------------

/// A client connection and its cached filter.
struct BenchClient {
    ch: Channel,
    cache: Option<ClientCache>,
}

impl BenchClient {
    async fn connect(addr: &str) -> Result<Self> {
        let ch = connect(addr, None, Limits::default()).await?;
        Ok(Self { ch, cache: None })
    }

    /// Syncs; returns the outcome, bytes received on the wire and time.
    async fn sync(&mut self) -> Result<(SyncOutcome, u64, Duration)> {
        let before = self.ch.bytes_received();
        let t = Instant::now();
        let out = ClientCache::sync(&mut self.cache, &mut self.ch, MAX_FILTER_BYTES).await?;
        Ok((out, self.ch.bytes_received() - before, t.elapsed()))
    }

    /// Queries the items; returns the outcome and its wall time.
    async fn query(&mut self, items: &[Vec<u8>]) -> Result<(QueryOutcome, Duration)> {
        let cache = self.cache.as_ref().context("query before sync")?;
        let t = Instant::now();
        let out = cache.query(&mut self.ch, items).await?;
        Ok((out, t.elapsed()))
    }
}

/// Starts the real service on 127.0.0.1:0.
async fn start_server(service: Arc<FilterService>) -> Result<LocalServer> {
    let mut router = Router::new(ServerLimits::default());
    router.register(service)?;
    Ok(LocalServer::start(router, Limits::default()).await?)
}

/// Serves the state, downloads the filter, runs the queries and, for the
/// primary, the false-positive and delta measurements.
fn online(a: &WorkerArgs, state: ServerState, m: &mut Metrics) -> Result<()> {
    let state_dir = a.work_dir.join(format!("state-{}", a.server_log2));
    if a.primary {
        state.save(&state_dir)?;
    }
    let service = Arc::new(FilterService::new(state, ServerLimits::default()));
    let rt = runtime()?;
    let server = rt.block_on(start_server(service.clone()))?;
    let addr = server.addr().to_string();
    let mut client = rt.block_on(full_sync(&addr, a, m))?;
    m.set_peak_memory("mem.after_sync");
    rt.block_on(loopback_baseline(m))?;
    for &size in &a.client_sizes {
        rt.block_on(query_figures(&mut client, size, a, m))?;
    }
    m.set_peak_memory("mem.after_queries");
    if a.primary {
        fp_figures(&service.snapshot().state, a, m)?;
        rt.block_on(delta_figures(&addr, &service, &state_dir, client, a, m))?;
    }
    drop(server);
    rt.shutdown_background();
    Ok(())
}

/// Connects a client and downloads the full filter.
async fn full_sync(addr: &str, a: &WorkerArgs, m: &mut Metrics) -> Result<BenchClient> {
    progress(a, "client downloads the filter");
    let mut client = BenchClient::connect(addr).await?;
    let (out, wire, secs) = client.sync().await?;
    ensure!(
        out.kind == SyncKind::Full,
        "first sync must be a full download"
    );
    m.set("sync.full_body", out.body_bytes as f64);
    m.set("sync.full_wire", wire as f64);
    m.set("sync.full_secs", secs.as_secs_f64());
    Ok(client)
}

/// Round trip of a bare frame over loopback TCP, for scale.
async fn loopback_baseline(m: &mut Metrics) -> Result<()> {
    let (mut client, mut server) = loopback_pair(Limits::default()).await?;
    let echo = tokio::spawn(async move {
        while let Some(frame) = server.recv_or_eof().await? {
            server.send(&frame).await?;
        }
        Ok::<_, psikit_transport::TransportError>(())
    });
    for (name, len) in [("small", 1), ("32k", 32 << 10)] {
        let frame = Frame::new(200, 1, vec![0u8; len]);
        let mut rtts = Vec::with_capacity(PING_ROUNDS);
        for _ in 0..PING_ROUNDS {
            let t = Instant::now();
            client.send(&frame).await?;
            let back = client.recv().await?;
            rtts.push(t.elapsed());
            ensure!(back.payload.len() == len, "echo changed the frame");
        }
        m.set(format!("loopback.{name}_rtt"), median(&rtts));
    }
    drop(client);
    echo.await??;
    Ok(())
}

/// Times queries of `size` client items (checked against the truth) and
/// records the phases of the run with the median total.
async fn query_figures(
    client: &mut BenchClient,
    size: u64,
    a: &WorkerArgs,
    m: &mut Metrics,
) -> Result<()> {
    progress(a, &format!("queries of {size} items"));
    let (items, truth) = client_set(a.n(), size);
    let mut walls = Vec::new();
    let mut outcomes = Vec::new();
    wait_for_quiet(a, m);
    let cpu = CpuSnapshot::now();
    while another_run(&walls, a) {
        let (out, wall) = client.query(&items).await?;
        check_matches(&format!("query of {size} items"), &out.matches, &truth)?;
        walls.push(wall);
        outcomes.push(out);
    }
    record_cpu(m, &format!("query.{size}"), cpu);
    let mut order: Vec<usize> = (0..walls.len()).collect();
    order.sort_by_key(|&i| walls[i]);
    let mid = order[(order.len() - 1) / 2];
    let out = &outcomes[mid];
    let mut put = |k: &str, v: f64| m.set(format!("query.{size}.{k}"), v);
    put("blind", out.blind_time.as_secs_f64());
    put("round_trip", out.round_trip_time.as_secs_f64());
    put("finalize", out.finalize_time.as_secs_f64());
    put("total", walls[mid].as_secs_f64());
    put("sent", out.bytes_sent as f64);
    put("received", out.bytes_received as f64);
    put("runs", walls.len() as f64);
    put("matches", out.matches.iter().filter(|x| **x).count() as f64);
    Ok(())
}

// ---------------------------------------------------------------------------
// False positives
// ---------------------------------------------------------------------------

/// Counts false positives of the served filter and of a 2^-12 filter for
/// the same items, against the expected counts.
fn fp_figures(state: &ServerState, a: &WorkerArgs, m: &mut Metrics) -> Result<()> {
    let lookups = 1u64 << a.fp_lookups_log2;
    progress(
        a,
        &format!("2^{} random lookups in the filter", a.fp_lookups_log2),
    );
    wait_for_quiet(a, m);
    record_fp(state, "default", lookups, a.threads, m)?;
    let key = bench_key(a.seed)?;
    let tags = load_tags(&tag_cache(a), a.n(), &key)?;
    let config = FilterConfig {
        fpr_log2: WEAK_FPR_LOG2,
        ..FilterConfig::default()
    };
    let (weak, _) = ServerState::build(key, tags, config)?;
    progress(
        a,
        &format!(
            "2^{} random lookups in a 2^-{WEAK_FPR_LOG2} filter",
            a.fp_lookups_log2
        ),
    );
    record_fp(&weak, "weak", lookups, a.threads, m)
}

/// Looks up `lookups` random tags and records measured and expected false
/// positives under `fp.<which>`.
fn record_fp(
    state: &ServerState,
    which: &str,
    lookups: u64,
    threads: usize,
    m: &mut Metrics,
) -> Result<()> {
    let t = Instant::now();
    let hits = count_false_positives(state, lookups, threads)?;
    let f = state.filter();
    let mut put = |k: &str, v: f64| m.set(format!("fp.{which}.{k}"), v);
    put("secs", t.elapsed().as_secs_f64());
    put("lookups", lookups as f64);
    put("measured", hits as f64);
    put("expected", lookups as f64 * f.estimated_fpr());
    put("fpr_log2", f64::from(state.config().fpr_log2));
    put("bits_per_item", f.bits_per_item());
    Ok(())
}

/// Random-tag lookups split over `threads` OS threads; returns the hits.
fn count_false_positives(state: &ServerState, lookups: u64, threads: usize) -> Result<u64> {
    let threads = threads.max(1) as u64;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let share = lookups / threads + u64::from(i < lookups % threads);
                s.spawn(move || random_hits(state, share))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("lookup thread panicked")))
            .sum()
    })
}

/// Hits among `count` uniformly random tags.
fn random_hits(state: &ServerState, count: u64) -> u64 {
    let mut rng = StdRng::from_entropy();
    let filter = state.filter();
    (0..count)
        .filter(|_| filter.contains(&rng.gen::<u128>().to_le_bytes()))
        .count() as u64
}

// ---------------------------------------------------------------------------
// Deltas
// ---------------------------------------------------------------------------

/// Applies one update to a fresh copy of the saved base state and
/// publishes it; returns the changed buckets and the update time.
fn publish_update(
    service: &FilterService,
    state_dir: &Path,
    add: Vec<Tag>,
    remove: Vec<Tag>,
) -> Result<(u64, Duration)> {
    let mut state = ServerState::load(state_dir)?;
    let t = Instant::now();
    let report = state.update(add, remove)?;
    let spent = t.elapsed();
    ensure!(!report.rebuilt, "a 1% update must not rebuild the filter");
    service.publish(state);
    Ok((report.changed_slots, spent))
}

/// Syncs a client that holds the base filter to the published update and
/// records the transfer under `delta.<which>`.
async fn record_delta(client: &mut BenchClient, which: &str, m: &mut Metrics) -> Result<()> {
    let (out, wire, secs) = client.sync().await?;
    let mut put = |k: &str, v: f64| m.set(format!("delta.{which}.{k}"), v);
    put("body", out.body_bytes as f64);
    put("wire", wire as f64);
    put("secs", secs.as_secs_f64());
    put("is_delta", f64::from(u8::from(out.kind == SyncKind::Delta)));
    Ok(())
}

/// Three 1% updates of the same base filter (both, inserts only, deletes
/// only), each fetched by a client still at the base; then a checked query
/// against the first.
async fn delta_figures(
    addr: &str,
    service: &FilterService,
    state_dir: &Path,
    mut first: BenchClient,
    a: &WorkerArgs,
    m: &mut Metrics,
) -> Result<()> {
    progress(a, "1% updates and deltas");
    let n = a.n();
    let plan = UpdatePlan::new(n);
    let key = bench_key(a.seed)?;
    let (_, remove) = oprf_tags(&key, plan.removed.iter().copied())?;
    let (_, add) = oprf_tags(&key, plan.added.iter().copied())?;
    m.set("delta.removed", plan.removed.len() as f64);
    m.set("delta.added", plan.added.len() as f64);
    let mut inserts_client = BenchClient::connect(addr).await?;
    inserts_client.sync().await?;
    let mut deletes_client = BenchClient::connect(addr).await?;
    deletes_client.sync().await?;

    let (changed, spent) = publish_update(service, state_dir, add.clone(), remove.clone())?;
    m.set("delta.both.changed_slots", changed as f64);
    m.set("delta.both.update_secs", spent.as_secs_f64());
    record_delta(&mut first, "both", m).await?;
    let (items, _) = client_set(n, CHECK_QUERY_ITEMS);
    let truth: Vec<bool> = (0..CHECK_QUERY_ITEMS)
        .map(|j| plan.member_after(j, n))
        .collect();
    let (out, _) = first.query(&items).await?;
    check_matches("query after the update", &out.matches, &truth)?;

    let (changed, _) = publish_update(service, state_dir, add, Vec::new())?;
    m.set("delta.insert.changed_slots", changed as f64);
    record_delta(&mut inserts_client, "insert", m).await?;
    let (changed, _) = publish_update(service, state_dir, Vec::new(), remove)?;
    m.set("delta.delete.changed_slots", changed as f64);
    record_delta(&mut deletes_client, "delete", m).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_sets_have_the_intended_truth() {
        let n = 1 << 10;
        let (items, truth) = client_set(n, 64);
        assert_eq!(truth.iter().filter(|t| **t).count(), 32);
        let server: std::collections::HashSet<Vec<u8>> = (0..n).map(item).collect();
        for (x, t) in items.iter().zip(&truth) {
            assert_eq!(server.contains(x), *t);
        }
        let distinct: std::collections::HashSet<u64> = (0..n).map(|t| scatter(t, n)).collect();
        assert_eq!(distinct.len() as u64, n);
    }

    #[test]
    fn update_truth_follows_the_plan() {
        let n = 1 << 12;
        let plan = UpdatePlan::new(n);
        assert_eq!(plan.removed.len(), plan.added.len());
        let mut server: std::collections::HashSet<u64> = (0..n).collect();
        plan.removed.iter().for_each(|id| {
            server.remove(id);
        });
        server.extend(plan.added.iter().copied());
        for j in 0..2048 {
            let (id, _) = client_id(j, n);
            assert_eq!(server.contains(&id), plan.member_after(j, n), "j = {j}");
        }
    }

    #[test]
    fn metrics_round_trip_and_tables_render() {
        let mut m = Metrics::default();
        m.set("a.b", 1.5);
        m.set("c", 1e-7);
        let back = Metrics::decode(&m.encode()).unwrap();
        assert_eq!(back.0, m.0);
        assert!(Metrics::decode("novalue").is_err());
        assert_eq!(count(Some(1234567.0)), "1,234,567");
        assert!((poisson_tail(1.0, 0.11) - (1.0 - (-0.11f64).exp())).abs() < 1e-12);
        assert_eq!(poisson_tail(0.0, 3.0), 1.0);
        assert_eq!(consistency(Some(110.0), Some(100.0)), "z = 1.00");
        assert_eq!(consistency(Some(0.0), Some(0.11)), "P(≤0) = 90%");
        let mut t = TextTable::new(&["x", "long header"]);
        t.row(vec!["1".into(), "2".into()]);
        assert_eq!(t.render().lines().count(), 3);
    }

    #[test]
    fn check_matches_reports_mismatches() {
        assert!(check_matches("q", &[true, false], &[true, false]).is_ok());
        assert!(check_matches("q", &[true, true], &[true, false]).is_err());
        assert!(check_matches("q", &[true], &[true, false]).is_err());
    }
}
