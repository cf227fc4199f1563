//! The filter worker's online phase over loopback TCP: the full download,
//! checked queries of each client size and, for the primary, the
//! false-positive counts and the 1% deltas. Also the synthetic client sets
//! and updates whose truth every query is checked against.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use psikit_protocols::common::connect::loopback_pair;
use psikit_protocols::common::connect::{runtime, ServerAddr};
use psikit_protocols::common::{Channel, Frame, Limits};
use psikit_protocols::filter_psi::{
    ClientCache, FilterConfig, FilterService, QueryOutcome, ServerState, SyncKind, SyncOutcome, Tag,
};
use psikit_protocols::service::{LocalServer, ServerLimits};
use psikit_protocols::NoProgress;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::args::WorkerArgs;
use super::settings::REMOVED_RESIDUE;
use super::setup::{
    another_run, bench_key, load_tags, median, oprf_tags, progress, tag_cache, wait_for_quiet,
};
use crate::bench::cpu::{record_cpu, CpuSnapshot};
use crate::bench::harness::{item, scatter, Metrics};

/// False-positive exponent of the extra filter built to count false
/// positives (2^-30 gives an expected count below one).
const WEAK_FPR_LOG2: u32 = 12;
/// Client items of the check query after an update.
const CHECK_QUERY_ITEMS: u64 = 1024;
/// Largest filter the benchmark clients accept.
const MAX_FILTER_BYTES: u64 = 1 << 34;
/// Frame round trips timed for the loopback baseline.
const PING_ROUNDS: usize = 50;

// ---------------------------------------------------------------------------
// Synthetic client sets and updates
// ---------------------------------------------------------------------------

/// Id of client item `j` against a server set `0..n`, and whether it is a
/// server item: even `j` are members, odd `j` (and any beyond `2n`) are
/// fresh ids `n + j`.
fn client_id(j: u64, n: u64) -> (u64, bool) {
    if j.is_multiple_of(2) && j / 2 < n {
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
            (_, false) => j.is_multiple_of(3) && j / 3 < self.added.len() as u64,
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
// Online phase over loopback TCP
// ---------------------------------------------------------------------------

/// A client connection and its cached filter.
struct BenchClient {
    ch: Channel,
    cache: Option<ClientCache>,
}

impl BenchClient {
    async fn connect(addr: &str) -> Result<Self> {
        let ch = ServerAddr::plain(addr).connect().await?;
        Ok(Self { ch, cache: None })
    }

    /// Syncs; returns the outcome, bytes received on the wire and time.
    async fn sync(&mut self) -> Result<(SyncOutcome, u64, Duration)> {
        let before = self.ch.bytes_received();
        let t = Instant::now();
        let out =
            ClientCache::sync(&mut self.cache, &mut self.ch, MAX_FILTER_BYTES, &NoProgress).await?;
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

/// Serves the state, downloads the filter, runs the queries and, for the
/// primary, the false-positive and delta measurements.
pub(super) fn online(a: &WorkerArgs, mut state: ServerState, m: &mut Metrics) -> Result<()> {
    let state_dir = a.work_dir.join(format!("state-{}", a.server_log2));
    if a.primary {
        state.save(&state_dir)?;
    }
    let service = Arc::new(FilterService::new(state, ServerLimits::default()));
    let rt = runtime()?;
    let server = rt.block_on(LocalServer::serving(service.clone()))?;
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
        Ok::<_, psikit_protocols::Error>(())
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
    fn check_matches_reports_mismatches() {
        assert!(check_matches("q", &[true, false], &[true, false]).is_ok());
        assert!(check_matches("q", &[true, true], &[true, false]).is_err());
        assert!(check_matches("q", &[true], &[true, false]).is_err());
    }
}
