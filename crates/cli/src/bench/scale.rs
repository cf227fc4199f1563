//! `psikit bench scale`: sharded HE databases too large for this machine,
//! simulated one shard at a time, and a cost model of the whole database
//! checked against real sharded databases that fit.
//!
//! Shards are statistically alike (the items an OPRF puts in them are
//! pseudorandom), so a database of `2^L` rows in `S` shards is measured on
//! one sample shard of `2^L / S` rows: random 64-byte values from a CSPRNG
//! stand in for its OPRF outputs, the parameters are the ones the
//! selection chooses for the whole database in `S` shards, and one query
//! goes through the sans-IO cores (the client's and the shard's, through
//! `he_psi::shard::probe`) with every message encoded as a server sends
//! it, so bytes are exact; then the same query is sent to the shard served on loopback,
//! as the router sends it, and timed to its done message. The client
//! holds half members of the shard (whose matches and labels are checked)
//! and half random strangers.
//!
//! The model ([`model::predict`]) composes the per-shard figures into a query's
//! latency on `M` machines of `c` cores, the memory per machine and the
//! build's core-hours. It is checked against real queries of whole sharded
//! databases built here (shard servers and the router on loopback, real
//! OPRF of the client's items by the router): the same model, fed with a
//! sample shard of the checked database and this machine's loopback
//! bandwidth, predicts their latency.
//!
//! Each measurement runs in its own worker process with `RAYON_NUM_THREADS`
//! set (as `psikit bench he` does), so "one thread" means one and the peak
//! memory is the worker's own.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use psikit_protocols::common::connect::{runtime, ServerAddr};
use psikit_protocols::common::oprf_stage::{self, OutputBatch};
use psikit_protocols::common::Limits;
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::select::{select, SelectionInput};
use psikit_protocols::he_psi::shard::probe::{Found, ShardProbe};
use psikit_protocols::he_psi::shard::{ShardInfo, ShardRouter};
use psikit_protocols::he_psi::sharded;
use psikit_protocols::he_psi::{HeClient, HeService, HeState};
use psikit_protocols::oprf::{self, Output};
use psikit_protocols::service::{LocalServer, ServerLimits};
use rand::rngs::{OsRng, StdRng};
use rand::{RngCore, SeedableRng};

use super::harness::{item, median_of, run_worker, Metrics};
use super::he::{check, client_ids, label};
use model::{check_table, prediction_table, shard_table, Measured};

mod args;
mod model;

pub use args::{ScaleBenchArgs, ScaleWorkerArgs};

pub fn run(a: &ScaleBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    ensure!(
        a.gbps > 0.0 && a.cores > 0 && a.client_threads > 0,
        "bandwidth, cores and client threads must be positive"
    );
    let checks = a
        .check
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| parse_check(c))
        .collect::<Result<Vec<_>>>()?;
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    let started = Instant::now();
    say.line("# psikit bench scale: sample shards of simulated databases, then the check");
    say.line(format!(
        "# {} client items, {}-byte labels, shards of 2^{} rows, {} run(s), medians\n",
        a.clients, a.label_bytes, a.shard_log2, a.runs
    ));
    let mut samples = Vec::new();
    for &log2 in &a.log2 {
        let shards = 1u32 << log2.saturating_sub(a.shard_log2);
        for &t in &a.threads {
            samples.push(sample(a, work.path(), log2, shards, t)?);
        }
    }
    let mut checked = Vec::new();
    for &(log2, shards) in &checks {
        let s = sample(a, work.path(), log2, shards, 1)?;
        let whole = worker_run(a, work.path(), log2, shards, 2, true)?;
        checked.push((s, whole));
    }
    say.line("## Sample shards (per shard)\n");
    say.line(shard_table(&samples, &checked));
    let bw = a.gbps * 1e9 / 8.0;
    say.line(format!(
        "## Predictions: {} cores per machine, {} Gbit/s, {} client items, {} client threads\n",
        a.cores, a.gbps, a.clients, a.client_threads
    ));
    say.line(prediction_table(&samples, a, bw));
    if !checked.is_empty() {
        say.line(
            "## Check: whole sharded databases on this machine (1 machine, 2 cores, loopback)\n",
        );
        say.line(check_table(&checked));
    }
    say.line(format!(
        "(benchmark took {:.0} s; bigger: --shard-log2 22 --log2 26,28,30 --check 20:16,22:16)",
        started.elapsed().as_secs_f64()
    ));
    say.result(&serde_json::json!({
        "benchmark": "psikit bench scale",
        "tables": super::table::collected(),
    }))
}

fn parse_check(text: &str) -> Result<(u32, u32)> {
    let (log2, shards) = text
        .split_once(':')
        .with_context(|| format!("--check takes log2:shards, got {text:?}"))?;
    Ok((log2.parse()?, shards.parse()?))
}

fn sample(a: &ScaleBenchArgs, work: &Path, log2: u32, shards: u32, t: usize) -> Result<Measured> {
    worker_run(a, work, log2, shards, t, false)
}

fn worker_run(
    a: &ScaleBenchArgs,
    work: &Path,
    log2: u32,
    shards: u32,
    threads: usize,
    whole: bool,
) -> Result<Measured> {
    let kind = if whole { "whole" } else { "sample" };
    eprintln!("scale {kind}: 2^{log2} rows in {shards} shard(s), {threads} thread(s)");
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let dir = work.join(format!("{kind}-{log2}-{shards}-{threads}"));
    let mut cmd = Command::new(&exe);
    cmd.args(["bench", "scale-worker", "--log2", &log2.to_string()])
        .args(["--shards", &shards.to_string()])
        .args(["--clients", &a.clients.to_string()])
        .args(["--label-bytes", &a.label_bytes.to_string()])
        .args(["--runs", &a.runs.max(1).to_string()])
        .args(["--samples", &a.samples.max(1).to_string()])
        .arg("--dir")
        .arg(&dir)
        .env("RAYON_NUM_THREADS", threads.to_string());
    if whole {
        cmd.arg("--whole");
    }
    let out = run_worker(&mut cmd)?;
    // The worker's explanation of the parameters, for the record.
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).ok();
    Ok(Measured {
        log2,
        shards,
        threads,
        m: Metrics::decode(&String::from_utf8_lossy(&out.stdout))?,
    })
}

// ---------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------

/// Entry point of the hidden `psikit bench scale-worker`.
pub fn worker(a: &ScaleWorkerArgs) -> Result<()> {
    let mut m = Metrics::default();
    let params = choose(a, &mut m)?;
    if a.whole {
        whole(a, &params, &mut m)?;
    } else {
        oprf_costs(a, &params, &mut m)?;
        for index in 0..a.samples.min(a.shards) {
            sample_shard(a, &params, index, &mut m)?;
        }
    }
    m.set_peak_memory("peak_bytes");
    print!("{}", m.encode());
    Ok(())
}

/// The selection for the whole database in its shards.
fn choose(a: &ScaleWorkerArgs, m: &mut Metrics) -> Result<PsiParams> {
    let input = SelectionInput {
        shards: a.shards,
        ..SelectionInput::new(1u64 << a.log2, a.clients, a.label_bytes)
    };
    let t = Instant::now();
    let selection = select(&input)?;
    m.set("select_secs", t.elapsed().as_secs_f64());
    m.set("est.server_secs", selection.estimate.server_ms / 1e3);
    m.set("est.fpp_log2", selection.fpp_log2);
    m.set("est.up_bytes", selection.estimate.bytes_up as f64);
    m.set("est.down_bytes", selection.estimate.bytes_down as f64);
    eprintln!("{selection}");
    Ok(selection.params)
}

/// Rows of one shard.
fn shard_rows(a: &ScaleWorkerArgs) -> usize {
    1usize << a.log2.saturating_sub(a.shards.ilog2())
}

/// `n` random OPRF outputs and labels of `label_bytes` from a CSPRNG.
fn random_rows(rng: &mut StdRng, n: usize, label_bytes: usize) -> OutputBatch {
    let mut outputs = vec![[0u8; oprf::OUTPUT_LEN]; n];
    outputs.iter_mut().for_each(|o| rng.fill_bytes(o));
    let labels = (0..n)
        .map(|_| {
            let mut l = vec![0u8; label_bytes];
            rng.fill_bytes(&mut l);
            l
        })
        .collect();
    OutputBatch { outputs, labels }
}

/// The OPRF's costs on this worker's threads: the router's evaluation
/// per row (the build's OPRF stage) and a client's whole OPRF round of
/// `clients` items (blinding, evaluation, finalization) without the
/// network.
fn oprf_costs(a: &ScaleWorkerArgs, params: &PsiParams, m: &mut Metrics) -> Result<()> {
    let router = HeState::create(params.clone(), a.label_bytes, false)?;
    let rows: Vec<Vec<u8>> = (0..1u64 << 14).map(item).collect();
    let t = Instant::now();
    router.evaluate(rows.iter().map(Vec::as_slice), &mut |_| Ok(()))?;
    m.set(
        "oprf.row_secs",
        t.elapsed().as_secs_f64() / rows.len() as f64,
    );
    let keys: Vec<Vec<u8>> = (0..a.clients).map(item).collect();
    let t = Instant::now();
    let (blinds, blinded) = oprf::blind_batch(&keys, &mut OsRng)?;
    let evaluated = router.key()?.blind_evaluate_batch(&blinded);
    oprf::finalize_batch(&keys, &blinds, &evaluated)?;
    m.set("oprf.query_secs", t.elapsed().as_secs_f64());
    Ok(())
}

/// Builds sample shard `index` from random rows, saves and reloads it as
/// a server does (with the plaintext cache), then queries it.
fn sample_shard(
    a: &ScaleWorkerArgs,
    params: &PsiParams,
    index: u32,
    m: &mut Metrics,
) -> Result<()> {
    let p = format!("s{index}.");
    let rows = shard_rows(a);
    let mut rng = StdRng::from_rng(OsRng)?;
    let batch = random_rows(&mut rng, rows, a.label_bytes);
    let info = ShardInfo::new([7; 32], index, a.shards, 0);
    let mut state = HeState::create_shard(params.clone(), a.label_bytes, info)?;
    let labels: Vec<&[u8]> = batch.labels.iter().map(Vec::as_slice).collect();
    let t = Instant::now();
    let stats = state.insert_evaluated(&batch.outputs, &labels)?;
    m.set(format!("{p}build_secs"), t.elapsed().as_secs_f64());
    ensure!(
        stats.inserted == rows,
        "inserted {} of {rows}",
        stats.inserted
    );
    let dir = a.dir.join(format!("shard-{index}"));
    state.save(&dir)?;
    drop(state);
    m.set(
        format!("{p}file_bytes"),
        std::fs::metadata(dir.join("he.db"))?.len() as f64,
    );
    let t = Instant::now();
    let service = Arc::new(HeService::open(&dir, true, ServerLimits::default())?);
    m.set(format!("{p}load_secs"), t.elapsed().as_secs_f64());
    let state = service.snapshot();
    let mem = state.memory();
    m.set(format!("{p}rows"), rows as f64);
    m.set(
        format!("{p}served_bytes"),
        (mem.data_bytes + mem.cache_bytes) as f64,
    );
    m.set(format!("{p}bundles"), mem.bundles as f64);
    let counts = state.bundle_counts();
    m.set(
        format!("{p}max_bundles_per_index"),
        counts.iter().copied().max().unwrap_or(0) as f64,
    );
    // Half the client are members spread over the shard, half strangers.
    let members = (a.clients / 2).min(rows as u64) as usize;
    let mut client: Vec<Output> = (0..members)
        .map(|k| batch.outputs[k * (rows / members.max(1))])
        .collect();
    let mut truth: Vec<Option<&[u8]>> = (0..members)
        .map(|k| Some(&batch.labels[k * (rows / members.max(1))][..]))
        .collect();
    client.extend(random_rows(&mut rng, a.clients as usize - members, 0).outputs);
    truth.resize(client.len(), None);
    query_shard(a, service, &client, &truth, &p, m)
}

/// One query of a shard, `a.runs` times, first through the sans-IO cores
/// (the client's encryption, the shard's evaluation on this worker's
/// threads, the client's decryption; bytes as the messages are framed on
/// the wire), then served: the same query sent to the shard's `HeService`
/// on loopback, as the router sends it, which adds what a real shard does
/// besides evaluating (reading the query from the network, the server's
/// tasks, streaming the packages back). Both go through the facade's
/// narrow entry for this, [`ShardProbe`]. Checks every answer: the members
/// (`truth[i]` holds member `i`'s label) and only they are found.
fn query_shard(
    a: &ScaleWorkerArgs,
    service: Arc<HeService>,
    client: &[Output],
    truth: &[Option<&[u8]>],
    p: &str,
    m: &mut Metrics,
) -> Result<()> {
    let probe = ShardProbe::new(service.snapshot())?;
    let (mut encrypt, mut eval, mut decrypt) = (Vec::new(), Vec::new(), Vec::new());
    let (mut up, mut down, mut packages) = (0, 0, 0);
    for _ in 0..a.runs.max(1) {
        let run = probe.run_cores(client)?;
        check_found(&run.found, truth)?;
        encrypt.push(run.encrypt.as_secs_f64());
        eval.push(run.eval.as_secs_f64());
        decrypt.push(run.decrypt.as_secs_f64() / run.packages.max(1) as f64);
        (up, down, packages) = (run.up_bytes, run.down_bytes, run.packages);
    }
    let served = runtime()?.block_on(served(a, service, &probe, client, truth))?;
    let med = |v: &[f64]| median_of(v.iter().copied()).unwrap_or(f64::NAN);
    m.set(format!("{p}encrypt_secs"), med(&encrypt));
    m.set(format!("{p}eval_secs"), med(&eval));
    m.set(format!("{p}served_secs"), med(&served));
    m.set(format!("{p}decrypt_secs_per_package"), med(&decrypt));
    m.set(format!("{p}packages"), packages as f64);
    m.set(format!("{p}up_bytes"), up as f64);
    m.set(format!("{p}down_bytes"), down as f64);
    m.set(format!("{p}members"), truth.iter().flatten().count() as f64);
    Ok(())
}

/// The served runs of [`query_shard`]: seconds from sending the query to
/// the shard's done message, each answer checked.
async fn served(
    a: &ScaleWorkerArgs,
    service: Arc<HeService>,
    probe: &ShardProbe,
    client: &[Output],
    truth: &[Option<&[u8]>],
) -> Result<Vec<f64>> {
    let server = LocalServer::serving(service).await?;
    let addr = ServerAddr {
        addr: server.addr().to_string(),
        tls: None,
        limits: Limits::default(),
    };
    let mut times = Vec::new();
    for _ in 0..a.runs.max(1) {
        let run = probe.run_served(&addr, client).await?;
        times.push(run.time.as_secs_f64());
        check_found(&run.found, truth)?;
    }
    Ok(times)
}

/// Every member placed in the query found with its label, nothing else.
fn check_found(found: &Found, truth: &[Option<&[u8]>]) -> Result<()> {
    let expected = truth
        .iter()
        .enumerate()
        .filter(|(i, t)| t.is_some() && !found.leftovers.contains(i))
        .count();
    let found = &found.matches;
    ensure!(
        found.len() == expected,
        "{} matches, expected {expected}",
        found.len()
    );
    for mt in found {
        let want = truth[mt.index].context("a stranger was reported")?;
        if !want.is_empty() {
            ensure!(mt.label.as_deref() == Some(want), "wrong label");
        }
    }
    Ok(())
}

/// The check: the whole database, `shards` shards of random rows plus the
/// client's members (real OPRF outputs of the router's key), every shard
/// served by its own `HeService` and the router on loopback, queried by a
/// real client `a.runs` times.
fn whole(a: &ScaleWorkerArgs, params: &PsiParams, m: &mut Metrics) -> Result<()> {
    let n = 1u64 << a.log2;
    let router_dir = a.dir.join(sharded::ROUTER_DIR);
    oprf_stage::create_key(&sharded::router_key(&router_dir))?;
    let plan = sharded::plan(
        &router_dir,
        a.shards,
        params.clone(),
        a.label_bytes,
        (String::new(), Vec::new()),
    )?;
    let ids = client_ids(a.clients, n);
    let members: Vec<(Vec<u8>, Vec<u8>)> = ids
        .iter()
        .filter(|(_, member)| *member)
        .map(|&(id, _)| (item(id), label(id, a.label_bytes)))
        .collect();
    let rows: Vec<(&[u8], &[u8])> = members.iter().map(|(k, l)| (&k[..], &l[..])).collect();
    let oprf = sharded::ShardOprf::open(&router_dir, a.shards)?;
    let batches = oprf.evaluate(&rows, &psikit_protocols::NoProgress)?;
    let mut rng = StdRng::from_rng(OsRng)?;
    let t = Instant::now();
    let mut built = Vec::new();
    for (index, batch) in (0..a.shards).zip(batches) {
        let filler = random_rows(
            &mut rng,
            shard_rows(a).saturating_sub(batch.outputs.len()),
            a.label_bytes,
        );
        let dir = sharded::shard_dir(&a.dir, index);
        built.push(sharded::build_shard(&plan, index, &[batch, filler], &dir)?);
    }
    sharded::finish(&router_dir, plan, &built)?;
    m.set("whole.build_secs", t.elapsed().as_secs_f64());
    m.set("loopback_bytes_per_sec", loopback_bandwidth()?);
    runtime()?.block_on(serve_and_query(a, &ids, m))
}

async fn serve_and_query(a: &ScaleWorkerArgs, ids: &[(u64, bool)], m: &mut Metrics) -> Result<()> {
    let limits = Limits::default();
    let at = |addr: &str| ServerAddr {
        addr: addr.to_string(),
        tls: None,
        limits,
    };
    let mut servers = Vec::new();
    for index in 0..a.shards {
        let dir = sharded::shard_dir(&a.dir, index);
        let service = HeService::open(&dir, true, ServerLimits::default())?;
        servers.push(LocalServer::serving(Arc::new(service)).await?);
    }
    let addrs = servers.iter().map(|s| at(s.addr())).collect();
    let router = ShardRouter::open(
        &a.dir.join(sharded::ROUTER_DIR),
        addrs,
        ServerLimits::default(),
    )?;
    let router = LocalServer::serving(Arc::new(router)).await?;
    let keys: Vec<Vec<u8>> = ids.iter().map(|&(id, _)| item(id)).collect();
    let mut ch = at(router.addr()).connect().await?;
    let client = HeClient::connect(&mut ch).await?;
    let mut runs = Vec::new();
    for _ in 0..a.runs.max(1) {
        let (up0, down0) = (ch.bytes_sent(), ch.bytes_received());
        let t = Instant::now();
        let out = client.query(&mut ch, &keys).await?;
        let total = t.elapsed().as_secs_f64();
        check(&out.matches, ids, a.label_bytes)?;
        runs.push([
            total,
            out.times.oprf.as_secs_f64(),
            out.times.encrypt.as_secs_f64(),
            out.times.server.as_secs_f64(),
            out.times.decrypt.as_secs_f64(),
            (ch.bytes_sent() - up0) as f64,
            (ch.bytes_received() - down0) as f64,
            out.rounds as f64,
        ]);
    }
    let names = [
        "total", "oprf", "encrypt", "server", "decrypt", "up", "down", "rounds",
    ];
    for (i, name) in names.iter().enumerate() {
        let med = median_of(runs.iter().map(|r| r[i])).unwrap_or(f64::NAN);
        m.set(format!("whole.{name}"), med);
    }
    Ok(())
}

/// Bytes per second one TCP connection carries over loopback here (the
/// check's "network").
fn loopback_bandwidth() -> Result<f64> {
    const TOTAL: usize = 256 << 20;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        while s.read(&mut buf)? > 0 {}
        Ok(())
    });
    let mut s = TcpStream::connect(addr)?;
    let chunk = vec![1u8; 1 << 20];
    let t = Instant::now();
    for _ in 0..TOTAL / chunk.len() {
        s.write_all(&chunk)?;
    }
    drop(s);
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("the loopback reader panicked"))??;
    Ok(TOTAL as f64 / t.elapsed().as_secs_f64())
}
