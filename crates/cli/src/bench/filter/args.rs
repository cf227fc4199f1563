//! The command lines of `psikit bench filter` and of its workers, and the
//! plan they resolve to, read by the parent, the worker's measurements and
//! the tables.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{ensure, Result};
use clap::Args;

/// Options of `psikit bench filter`.
#[derive(Args, Clone, Debug)]
pub(crate) struct FilterBenchArgs {
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
    pub(super) json: Option<PathBuf>,
}

/// Options of one worker process; built by the parent, not by users.
#[derive(Args, Clone, Debug)]
pub(crate) struct WorkerArgs {
    #[arg(long)]
    pub(super) server_log2: u32,
    #[arg(long)]
    pub(super) threads: usize,
    #[arg(long, value_delimiter = ',')]
    pub(super) client_sizes: Vec<u64>,
    #[arg(long)]
    pub(super) repeats: usize,
    #[arg(long)]
    pub(super) budget_secs: f64,
    #[arg(long)]
    pub(super) fp_lookups_log2: u32,
    #[arg(long)]
    pub(super) quiet_wait_secs: f64,
    /// Also measure the thread-independent figures and cache the tags.
    #[arg(long)]
    pub(super) primary: bool,
    /// Seed of the (benchmark-only) OPRF key shared by all workers.
    #[arg(long)]
    pub(super) seed: u64,
    /// Directory shared by the workers (tag cache, saved states).
    #[arg(long)]
    pub(super) work_dir: PathBuf,
    /// File the figures are written to.
    #[arg(long)]
    pub(super) out: PathBuf,
}

impl WorkerArgs {
    /// Server set size.
    pub(super) fn n(&self) -> u64 {
        1 << self.server_log2
    }

    /// Prefix of this worker's progress lines.
    pub(super) fn label(&self) -> String {
        format!("bench 2^{} x {} thread(s)", self.server_log2, self.threads)
    }

    /// The command line that starts this worker.
    pub(super) fn to_argv(&self) -> Vec<OsString> {
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
pub(super) struct Plan {
    pub(super) server_log2: Vec<u32>,
    pub(super) client_sizes: Vec<u64>,
    pub(super) threads: Vec<usize>,
    pub(super) repeats: usize,
    pub(super) budget_secs: f64,
    pub(super) fp_lookups_log2: u32,
    pub(super) quiet_wait_secs: f64,
}

impl FilterBenchArgs {
    /// Resolves defaults (explicit flags win over `--quick`) and validates.
    pub(super) fn plan(&self) -> Result<Plan> {
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
