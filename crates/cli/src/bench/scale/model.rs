//! The cost model of `psikit bench scale`: a sample shard's figures
//! composed into a whole sharded database's query latency, memory per
//! machine and build core-hours ([`predict`]), and the tables that print
//! the samples, the predictions and the check, all from `Measured`
//! configurations (one worker's figures each).

use super::args::ScaleBenchArgs;
use crate::bench::harness::{median_of, Metrics};
use crate::bench::table::{size, time, TextTable};

/// One measured configuration: total rows, shards, worker threads.
pub(super) struct Measured {
    pub(super) log2: u32,
    pub(super) shards: u32,
    pub(super) threads: usize,
    pub(super) m: Metrics,
}

/// What one shard costs, from a sample shard's worker (1 thread).
struct ShardCost {
    rows: f64,
    /// The shard's answer to one query as the router sees it (served on
    /// loopback: reading the query, evaluation, streaming the packages),
    /// evaluation on one thread, seconds.
    serve: f64,
    /// Units rayon spreads a shard's evaluation over: bundle indices times
    /// bundles per index (the powers only over the indices).
    units: f64,
    packages: f64,
    up: f64,
    down: f64,
    decrypt_per_package: f64,
    encrypt: f64,
    served: f64,
    /// Filling the bin bundles, one thread, per row.
    fill_per_row: f64,
    oprf_per_row: f64,
    oprf_query: f64,
}

impl ShardCost {
    /// Medians over the worker's sample shards.
    fn of(m: &Metrics) -> Option<Self> {
        let med = |key: &str| {
            median_of(
                m.0.iter()
                    .filter(|(k, _)| is_sample_key(k, key))
                    .map(|(_, v)| *v),
            )
        };
        let rows = med("rows")?;
        let bundles = med("bundles")?;
        Some(Self {
            rows,
            serve: med("served_secs")?,
            units: bundles.max(1.0),
            packages: med("packages")?,
            up: med("up_bytes")?,
            down: med("down_bytes")?,
            decrypt_per_package: med("decrypt_secs_per_package")?,
            encrypt: med("encrypt_secs")?,
            served: med("served_bytes")?,
            fill_per_row: med("build_secs")? / rows,
            oprf_per_row: m.get("oprf.row_secs")?,
            oprf_query: m.get("oprf.query_secs")?,
        })
    }
}

/// Whether `name` is figure `key` of a sample shard (`s<index>.<key>`).
fn is_sample_key(name: &str, key: &str) -> bool {
    name.split_once('.').is_some_and(|(shard, rest)| {
        rest == key
            && shard
                .strip_prefix('s')
                .is_some_and(|i| i.parse::<u32>().is_ok())
    })
}

/// Where the model places a sharded database.
struct Deployment {
    machines: u32,
    cores: u32,
    /// Network bandwidth, bytes per second.
    bw: f64,
    client_threads: u32,
}

/// The model's figures for one deployment.
struct Prediction {
    latency: f64,
    /// Of which: the shards' answers.
    eval: f64,
    /// Of which: bytes over the network.
    transfer: f64,
    /// Of which: the client's decryption of every package.
    gather: f64,
    memory_per_machine: f64,
    build_core_hours: f64,
}

/// A query of `clients` items against `shards` shards spread over
/// `machines` machines of `cores` cores, bytes at `bw` bytes/s:
///
/// * the router's OPRF round of the client's items, then the client's
///   encryption (both measured, at the client size);
/// * the upload: the query once to the router, then `S` copies through
///   the router's link (`up · (S + 1) / bw`);
/// * the shards' answers: a machine serves `k = ceil(S/M)` shards, which
///   answer concurrently on its cores, so they share `k` times one shard's
///   single-thread answer as the router sees it (evaluation plus serving:
///   reading the query, the server's tasks, streaming the packages); a
///   machine with more cores than units of work (bundle indices times
///   bundles) keeps the rest idle: `serve_1 · k / min(c, k · units)`;
/// * the download: every shard's packages through the router's link
///   (`S · down / bw`), and the client decrypting them on its `t` threads
///   (`S · packages · decrypt / t`).
///
/// The terms are added: streaming overlaps the download and decryption
/// with the evaluation, so this is an upper bound the check measures.
/// Memory per machine is `k` served shards; the build costs the OPRF of
/// every row plus the bundle filling, in core-hours.
fn predict(s: &ShardCost, shards: u32, at: &Deployment) -> Prediction {
    let s_f = f64::from(shards);
    let k = f64::from(shards.div_ceil(at.machines.max(1)));
    let eval = s.serve * k / f64::from(at.cores).min(k * s.units);
    let transfer = s.up * (s_f + 1.0) / at.bw + s_f * s.down / at.bw;
    let gather = s_f * s.packages * s.decrypt_per_package / f64::from(at.client_threads);
    let rows = s.rows * s_f;
    Prediction {
        latency: s.oprf_query + s.encrypt + transfer + eval + gather,
        eval,
        transfer,
        gather,
        memory_per_machine: s.served * k,
        build_core_hours: rows * (s.oprf_per_row + s.fill_per_row) / 3600.0,
    }
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

pub(super) fn shard_table(samples: &[Measured], checked: &[(Measured, Measured)]) -> String {
    let mut t = TextTable::new(&[
        "database",
        "shards",
        "thr",
        "rows/shard",
        "bundles",
        "build",
        "load",
        "served",
        "file",
        "eval",
        "served",
        "packages",
        "up/shard",
        "down/shard",
        "decrypt/pkg",
        "FPP",
        "peak",
    ]);
    for s in samples.iter().chain(checked.iter().map(|(s, _)| s)) {
        let m = &s.m;
        let c = ShardCost::of(m);
        t.row(vec![
            format!("2^{}", s.log2),
            s.shards.to_string(),
            s.threads.to_string(),
            c.as_ref().map_or("-".into(), |c| format!("{}", c.rows)),
            m.get("s0.bundles").map_or("-".into(), |b| format!("{b}")),
            time(m.get("s0.build_secs")),
            time(m.get("s0.load_secs")),
            size(m.get("s0.served_bytes")),
            size(m.get("s0.file_bytes")),
            time(m.get("s0.eval_secs")),
            time(m.get("s0.served_secs")),
            m.get("s0.packages").map_or("-".into(), |p| format!("{p}")),
            size(m.get("s0.up_bytes")),
            size(m.get("s0.down_bytes")),
            time(m.get("s0.decrypt_secs_per_package")),
            m.get("est.fpp_log2")
                .map_or("-".into(), |f| format!("2^{f:.1}")),
            size(m.get("peak_bytes")),
        ]);
    }
    t.render()
}

pub(super) fn prediction_table(samples: &[Measured], a: &ScaleBenchArgs, bw: f64) -> String {
    let mut t = TextTable::new(&[
        "database",
        "shards",
        "machines",
        "latency",
        "shards' answers",
        "transfer",
        "gather",
        "up",
        "down",
        "memory/machine",
        "build core-h",
    ]);
    for s in samples.iter().filter(|s| s.threads == 1) {
        let Some(c) = ShardCost::of(&s.m) else {
            continue;
        };
        for &machines in &a.machines {
            let at = Deployment {
                machines,
                cores: a.cores,
                bw,
                client_threads: a.client_threads,
            };
            let p = predict(&c, s.shards, &at);
            t.row(vec![
                format!("2^{}", s.log2),
                s.shards.to_string(),
                machines.to_string(),
                time(Some(p.latency)),
                time(Some(p.eval)),
                time(Some(p.transfer)),
                time(Some(p.gather)),
                size(Some(c.up * f64::from(s.shards))),
                size(Some(c.down * f64::from(s.shards))),
                size(Some(p.memory_per_machine)),
                format!("{:.2}", p.build_core_hours),
            ]);
        }
    }
    t.render()
}

pub(super) fn check_table(checked: &[(Measured, Measured)]) -> String {
    let mut t = TextTable::new(&[
        "database",
        "shards",
        "predicted",
        "measured",
        "ratio",
        "pred. shards",
        "meas. server",
        "pred. down",
        "meas. down",
        "build (2 thr)",
    ]);
    for (s, w) in checked {
        let Some(c) = ShardCost::of(&s.m) else {
            continue;
        };
        // This machine: its 2 cores serve every shard, and the client
        // decrypts on the same 2.
        let at = Deployment {
            machines: 1,
            cores: 2,
            bw: w.m.get("loopback_bytes_per_sec").unwrap_or(f64::INFINITY),
            client_threads: 2,
        };
        let p = predict(&c, s.shards, &at);
        let measured = w.m.get("whole.total");
        t.row(vec![
            format!("2^{}", s.log2),
            s.shards.to_string(),
            time(Some(p.latency)),
            time(measured),
            measured.map_or("-".into(), |m| format!("{:.2}", p.latency / m)),
            time(Some(p.eval)),
            time(w.m.get("whole.server")),
            size(Some(c.down * f64::from(s.shards))),
            size(w.m.get("whole.down")),
            time(w.m.get("whole.build_secs")),
        ]);
    }
    t.render()
}
