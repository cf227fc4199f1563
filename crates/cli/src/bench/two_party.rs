//! What the balanced two-party benchmarks (`psikit bench rr16`, `psikit
//! bench psi`) share: every run starts two worker processes of this binary
//! (`psikit bench two-party-worker`), a sender and a receiver, each with
//! `RAYON_NUM_THREADS` set to the thread count, so "one thread per party"
//! means exactly that and each party's peak memory is its own process's
//! `VmHWM`. The sender listens on an ephemeral port and announces it on its
//! first output line; the parent then starts the receiver. Each worker
//! times the protocol from the established connection to its output and
//! prints its figures as `name value` lines.
//!
//! Items are `user{id}@example.com`; the sender holds ids `0..n`, the
//! receiver `n/2..3n/2`, so the intersection (`n/2` items) is known and
//! every run is checked against it.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use psikit_protocols::balanced::{self, Outcome, Phases, Protocol, Role, Settings};
use psikit_protocols::common::connect::{runtime, Peer, ServerAddr};
use psikit_protocols::common::{Channel, Limits};
use psikit_protocols::NoProgress;

use super::cpu::CpuSnapshot;
use super::harness::{item, median_of, Metrics};
use crate::psi_cmd::protocol_parser;

/// One party of one run, in its own process.
#[derive(Args, Clone, Debug)]
pub struct WorkerArgs {
    #[arg(long, value_parser = protocol_parser())]
    protocol: Protocol,
    /// Run the receiver (connects to --connect); otherwise the sender.
    #[arg(long)]
    receiver: bool,
    #[arg(long)]
    log2: u32,
    #[arg(long)]
    malicious: bool,
    #[arg(long)]
    low_comm: bool,
    /// The sender's address (receiver only).
    #[arg(long)]
    connect: Option<String>,
}

/// One run's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub protocol: Protocol,
    pub mode: Mode,
    pub log2: u32,
    pub threads: usize,
}

/// A security mode of `--modes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    SemiHonest,
    Malicious,
    /// VOLE-PSI's low-communication mode (semi-honest).
    LowComm,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::SemiHonest => "semi-honest",
            Mode::Malicious => "malicious",
            Mode::LowComm => "low-comm",
        })
    }
}

/// The figures of one run: (sender, receiver).
pub type Run = (Metrics, Metrics);

/// Starts the sender, then the receiver on the sender's port, and collects
/// both parties' figures.
pub fn one_run(exe: &Path, cfg: Config) -> Result<Run> {
    let protocol = cfg.protocol.to_string();
    let mut args: Vec<String> = ["bench", "two-party-worker", "--protocol", &protocol]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--log2".into(), cfg.log2.to_string()]);
    match cfg.mode {
        Mode::SemiHonest => {}
        Mode::Malicious => args.push("--malicious".into()),
        Mode::LowComm => args.push("--low-comm".into()),
    }
    spawn_pair(exe, &args, cfg.threads)
}

/// Runs a worker pair: `args` plus nothing for the sender, which announces
/// `listening <addr>` first, and plus `--receiver --connect <addr>` for
/// the receiver; each with `RAYON_NUM_THREADS = threads`. Returns both
/// parties' figures.
pub fn spawn_pair(exe: &Path, args: &[String], threads: usize) -> Result<Run> {
    let worker = |connect: Option<&str>| -> Result<Child> {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env("RAYON_NUM_THREADS", threads.to_string())
            .stdout(Stdio::piped());
        if let Some(addr) = connect {
            cmd.args(["--receiver", "--connect", addr]);
        }
        cmd.spawn()
            .with_context(|| format!("cannot start {}", exe.display()))
    };
    let mut sender = worker(None)?;
    let mut out = BufReader::new(sender.stdout.take().context("no sender stdout")?);
    let mut first = String::new();
    out.read_line(&mut first)?;
    let Some(addr) = first.trim().strip_prefix("listening ") else {
        let _ = sender.kill();
        bail!("the sender worker did not announce its address");
    };
    let receiver = worker(Some(addr))?;
    let receiver_out = receiver.wait_with_output()?;
    let mut rest = String::new();
    out.read_to_string(&mut rest)?;
    let sender_status = sender.wait()?;
    ensure!(receiver_out.status.success(), "the receiver worker failed");
    ensure!(sender_status.success(), "the sender worker failed");
    Ok((
        Metrics::decode(&rest)?,
        Metrics::decode(&String::from_utf8_lossy(&receiver_out.stdout))?,
    ))
}

/// Entry point of the hidden `psikit bench two-party-worker`.
pub fn worker(a: &WorkerArgs) -> Result<()> {
    // As `psikit psi`, which the worker stands for.
    psikit_protocols::memory::reuse_freed_memory();
    a.protocol.require_built()?;
    let n = 1u64 << a.log2;
    let ids = if a.receiver { n / 2..n / 2 + n } else { 0..n };
    let items: Vec<Vec<u8>> = ids.map(item).collect();
    let settings = Settings {
        malicious: a.malicious,
        low_comm: a.low_comm,
        ..Settings::new(a.protocol)
    };
    let role = match a.receiver {
        true => Role::Receiver,
        false => Role::Sender,
    };
    let mut m = Metrics::default();
    runtime()?.block_on(async {
        let mut ch = worker_channel(a.receiver, a.connect.as_deref()).await?;
        let cpu = CpuSnapshot::now();
        let t = Instant::now();
        let out = balanced::run_on(&mut ch, role, &items, &settings, &NoProgress).await?;
        if a.receiver {
            // Receiver item j has id n/2 + j: a match exactly when j < n/2.
            let matches = out.matches.as_deref().unwrap_or_default();
            let wrong = (0..items.len())
                .filter(|&j| matches.get(j).copied() != Some((j as u64) < n / 2))
                .count();
            ensure!(wrong == 0, "{wrong} receiver outputs differ from the truth");
        }
        figures(&out, &mut m);
        m.set("total", t.elapsed().as_secs_f64());
        if let Some(c) = cpu {
            let used = c.since();
            m.set("cpu", used.own);
            if let Some(steal) = used.steal {
                m.set("steal_cores", steal);
            }
        }
        anyhow::Ok(())
    })?;
    m.set_peak_memory("peak");
    print!("{}", m.encode());
    Ok(())
}

/// A party's figures of its run: traffic, and its family's phases (the
/// one place a benchmark names a family's phases, so the family benches
/// only print them).
fn figures(out: &Outcome, m: &mut Metrics) {
    m.set("sent", out.bytes_sent as f64);
    m.set("received", out.bytes_received as f64);
    match &out.phases {
        #[cfg(feature = "vole")]
        Phases::Vole(p) => {
            m.set("vole", p.vole.as_secs_f64());
            m.set("vole_len", p.vole_len as f64);
            let t = &p.vole_times;
            m.set("vole_base", t.base.as_secs_f64());
            m.set("vole_trees", t.trees.as_secs_f64());
            m.set("vole_code", t.code.as_secs_f64());
            m.set("vole_other", t.other.as_secs_f64());
            m.set("vole_bytes", p.vole_bytes as f64);
            m.set("okvs_encode", p.okvs_encode.as_secs_f64());
            m.set("okvs_decode", p.okvs_decode.as_secs_f64());
            m.set("table", p.table.as_secs_f64());
            m.set("summaries", p.summaries.as_secs_f64());
            m.set("online", p.online.as_secs_f64());
        }
        #[cfg(feature = "rr16")]
        Phases::Rr16 { params, phases } => {
            m.set("ots", params.n_ot as f64);
            m.set("chunks", params.chunks as f64);
            m.set("offline", phases.offline.as_secs_f64());
            m.set("online", phases.online.as_secs_f64());
        }
    }
}

/// A worker's connection: the sender listens on an ephemeral loopback port
/// and announces it (`listening <addr>`), the receiver connects to it.
pub async fn worker_channel(receiver: bool, connect: Option<&str>) -> Result<Channel> {
    let peer = worker_peer(receiver, connect)?;
    Ok(peer.open(|addr| println!("listening {addr}")).await?)
}

/// Where a worker's peer is: the sender listens on an ephemeral loopback
/// port, the receiver connects to the sender's address.
pub fn worker_peer(receiver: bool, connect: Option<&str>) -> Result<Peer> {
    let limits = Limits::default();
    Ok(match connect {
        Some(addr) if receiver => Peer::Connect(ServerAddr {
            addr: addr.to_string(),
            tls: None,
            limits,
        }),
        None if !receiver => Peer::Listen {
            addr: "127.0.0.1:0".into(),
            tls: None,
            limits,
            accept_timeout: None,
        },
        _ => bail!("the receiver needs --connect and the sender must not have it"),
    })
}

/// Median over runs of one party's figure.
pub fn med(runs: &[Run], receiver: bool, key: &str) -> Option<f64> {
    median_of(
        runs.iter()
            .filter_map(|(s, r)| if receiver { r } else { s }.get(key)),
    )
}

/// Median over runs of a figure combining both parties.
pub fn med_both(runs: &[Run], f: impl Fn(f64, f64) -> f64, key: &str) -> Option<f64> {
    median_of(
        runs.iter()
            .filter_map(|(s, r)| Some(f(s.get(key)?, r.get(key)?))),
    )
}

/// Runs every configuration `runs` times.
pub fn run_all(configs: &[Config], runs: usize) -> Result<Vec<(Config, Vec<Run>)>> {
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let mut results = Vec::new();
    for &cfg in configs {
        let mut done = Vec::new();
        for r in 0..runs {
            eprintln!(
                "{:?} {} n=2^{}, {} thread(s) per party: run {}/{runs}",
                cfg.protocol,
                cfg.mode,
                cfg.log2,
                cfg.threads,
                r + 1
            );
            done.push(one_run(&exe, cfg)?);
        }
        results.push((cfg, done));
    }
    Ok(results)
}
