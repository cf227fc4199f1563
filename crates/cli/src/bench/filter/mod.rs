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
//! This module holds the parent that runs the workers and the worker's
//! entry point; [`args`] the command lines and the plan they resolve to,
//! [`settings`] the fixed settings, [`setup`] measures the server setup,
//! [`online`](mod@online) the loopback phase (queries, false positives,
//! deltas) and [`report`] prints the tables.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use rand::rngs::OsRng;
use rand::RngCore;

use super::cpu::{record_cpu, CpuSnapshot};
use super::harness::Metrics;
use online::online;
use report::{json_report, print_footer, print_header, render_all, RunResult};
use setup::{bench_key, check_thread_env, eval_cost, record_filter, server_tags, timed_build};

mod args;
mod online;
mod report;
mod settings;
mod setup;

pub(crate) use args::{FilterBenchArgs, WorkerArgs};

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
