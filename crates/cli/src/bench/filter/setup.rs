//! The filter worker's setup phase (OPRF of the server set with the tag
//! cache, filter build, server evaluation cost) and the timing helpers
//! (repeats, medians, quiet waits) every phase of the worker uses.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use psikit_protocols::filter_psi::{tag_from_output, FilterConfig, ServerState, Tag};
use psikit_protocols::oprf::{self, ServerKey};
use rand::rngs::OsRng;

use super::args::WorkerArgs;
use super::settings::{EVAL_ITEMS, QUIET_CORES};
use crate::bench::cpu::{record_cpu, CpuSnapshot};
use crate::bench::harness::{item, median_of, Metrics};

/// Load factor at which the issue states the space target.
const FORMULA_LOAD: f64 = 0.95;
/// Items per OPRF batch during setup, as `tags_from_reader` does.
const SETUP_BATCH: usize = 1 << 13;
/// OPRF throughput sample of workers that reuse cached tags.
const OPRF_SAMPLE: u64 = 1 << 18;
/// A worker that can reuse cached tags samples the OPRF when its full run
/// would exceed this many items per thread.
const FULL_OPRF_MAX_PER_THREAD: u64 = 1 << 20;

/// Waits (up to `--quiet-wait-secs`) for a one-second window in which
/// other processes use less than [`QUIET_CORES`]; adds the time waited to
/// `worker.quiet_wait_secs`.
pub(super) fn wait_for_quiet(a: &WorkerArgs, m: &mut Metrics) {
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

/// A worker's thread count must be what rayon's global pool will use.
pub(super) fn check_thread_env(threads: usize) -> Result<()> {
    let env = std::env::var("RAYON_NUM_THREADS").unwrap_or_default();
    ensure!(
        env == threads.to_string(),
        "this internal command needs RAYON_NUM_THREADS={threads} (found {env:?}); run `psikit bench filter`"
    );
    Ok(())
}

/// The benchmark's OPRF key, derived from the parent's seed so that all
/// workers of a run (and the tag cache) agree. Benchmark use only.
pub(super) fn bench_key(seed: u64) -> Result<ServerKey> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    Ok(ServerKey::derive(&bytes, b"psikit bench")?)
}

/// Prints a progress line on stderr.
pub(super) fn progress(a: &WorkerArgs, what: &str) {
    eprintln!("{}: {what}", a.label());
}

/// Whether to start another run of a measurement: always the first; then
/// up to `repeats` runs while `repeats` runs as long as the first fit the
/// budget.
pub(super) fn another_run(done: &[Duration], a: &WorkerArgs) -> bool {
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
pub(super) fn median(durations: &[Duration]) -> f64 {
    median_of(durations.iter().map(Duration::as_secs_f64)).unwrap_or(f64::NAN)
}

/// Tags of the items with these ids, in batches of [`SETUP_BATCH`] like
/// `tags_from_reader`. Returns the time spent in the OPRF and tag
/// derivation only (generating the items is not counted).
pub(super) fn oprf_tags(
    key: &ServerKey,
    ids: impl IntoIterator<Item = u64>,
) -> Result<(Duration, Vec<Tag>)> {
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
pub(super) fn tag_cache(a: &WorkerArgs) -> PathBuf {
    a.work_dir.join(format!("tags-{}.bin", a.server_log2))
}

/// The server set's tags, timing the OPRF: over the whole set, or over a
/// sample when cached tags exist and the whole set would take too long on
/// this many threads (the setup time is then extrapolated).
pub(super) fn server_tags(key: &ServerKey, a: &WorkerArgs, m: &mut Metrics) -> Result<Vec<Tag>> {
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
pub(super) fn load_tags(path: &Path, n: u64, key: &ServerKey) -> Result<Vec<Tag>> {
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
pub(super) fn timed_build(a: &WorkerArgs, tags: Vec<Tag>, m: &mut Metrics) -> Result<ServerState> {
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
pub(super) fn record_filter(state: &ServerState, prefix: &str, m: &mut Metrics) {
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
pub(super) fn eval_cost(key: &ServerKey, a: &WorkerArgs, m: &mut Metrics) -> Result<()> {
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
