//! `psikit bench rr16`: RR16 (malicious, and its semi-honest variant) on
//! loopback TCP, next to the paper's figures and libPSI's.
//!
//! Every run starts two worker processes of this binary, a sender and a
//! receiver, each with `RAYON_NUM_THREADS` set to the thread count, so "one
//! thread per party" means exactly that and each party's peak memory is its
//! own process's `VmHWM`. The sender listens on an ephemeral port and
//! announces it on its first output line; the parent then starts the
//! receiver. Each worker times the protocol from the established
//! connection to its output and prints its figures as `name value` lines.
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
use psikit_protocols::common::connect::{runtime, Limits, Peer, ServerAddr};
use psikit_protocols::rr16::{run_receiver, run_sender, Rr16Config};

use super::cpu::CpuSnapshot;
use super::harness::{item, median_of, Metrics};
use super::table::{count, num, size, time, TextTable};

/// Issue targets for n = 2^20, malicious, one thread per party.
const TARGET_LOG2: u32 = 20;
const TARGET_TOTAL_SECS: f64 = 20.0;
const TARGET_PEAK_BYTES: f64 = 4e9;
const TARGET_COMM_BYTES: f64 = 4_970e6;

/// Options of `psikit bench rr16`.
#[derive(Args, Clone, Debug)]
pub struct Rr16BenchArgs {
    /// Set sizes (both parties) as powers of two [default: 8,12,16,20;
    /// --quick: 8,12].
    #[arg(long, value_delimiter = ',')]
    log2: Option<Vec<u32>>,
    /// Thread counts per party.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Runs per configuration; medians are reported [default: 3; --quick: 1].
    #[arg(long)]
    runs: Option<usize>,
    /// Skip the semi-honest variant.
    #[arg(long)]
    malicious_only: bool,
    /// A fast smoke run.
    #[arg(long)]
    quick: bool,
}

/// One party of one run, in its own process.
#[derive(Args, Clone, Debug)]
pub struct Rr16WorkerArgs {
    /// Run the receiver (connects to --connect); otherwise the sender.
    #[arg(long)]
    receiver: bool,
    #[arg(long)]
    log2: u32,
    #[arg(long)]
    semi_honest: bool,
    /// The sender's address (receiver only).
    #[arg(long)]
    connect: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Config {
    malicious: bool,
    log2: u32,
    threads: usize,
}

impl Config {
    fn mode(&self) -> &'static str {
        if self.malicious {
            "malicious"
        } else {
            "semi-honest"
        }
    }
}

/// The figures of one run: (sender, receiver).
type Run = (Metrics, Metrics);

pub fn run(a: &Rr16BenchArgs) -> Result<()> {
    let sizes = a.log2.clone().unwrap_or(if a.quick {
        vec![8, 12]
    } else {
        vec![8, 12, 16, 20]
    });
    ensure!(
        sizes.iter().all(|&l| (1..=24).contains(&l)),
        "set sizes must be 2^1 to 2^24"
    );
    ensure!(
        a.threads.iter().all(|&t| t >= 1),
        "thread counts must be at least 1"
    );
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 }).max(1);
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let modes: &[bool] = if a.malicious_only {
        &[true]
    } else {
        &[true, false]
    };
    println!("# psikit bench rr16: {runs} run(s) per row, medians; two processes on loopback TCP");
    println!("# bigger sets: --log2 22 (about 4x the 2^20 time and memory)\n");
    let started = Instant::now();
    let mut results: Vec<(Config, Vec<Run>)> = Vec::new();
    for &malicious in modes {
        for &log2 in &sizes {
            for &threads in &a.threads {
                let cfg = Config {
                    malicious,
                    log2,
                    threads,
                };
                let mut done = Vec::new();
                for r in 0..runs {
                    eprintln!(
                        "rr16 {} n=2^{log2}, {threads} thread(s) per party: run {}/{runs}",
                        cfg.mode(),
                        r + 1
                    );
                    done.push(one_run(&exe, cfg)?);
                }
                results.push((cfg, done));
            }
        }
    }
    println!("{}", render(&results));
    println!("(benchmark took {:.0} s)", started.elapsed().as_secs_f64());
    Ok(())
}

/// Starts the sender, then the receiver on the sender's port, and collects
/// both parties' figures.
fn one_run(exe: &Path, cfg: Config) -> Result<Run> {
    let worker = |receiver: bool, connect: Option<&str>| -> Result<Child> {
        let mut cmd = Command::new(exe);
        cmd.args(["bench", "rr16-worker", "--log2", &cfg.log2.to_string()])
            .env("RAYON_NUM_THREADS", cfg.threads.to_string())
            .stdout(Stdio::piped());
        if receiver {
            cmd.arg("--receiver");
        }
        if !cfg.malicious {
            cmd.arg("--semi-honest");
        }
        if let Some(addr) = connect {
            cmd.args(["--connect", addr]);
        }
        cmd.spawn()
            .with_context(|| format!("cannot start {}", exe.display()))
    };
    let mut sender = worker(false, None)?;
    let mut out = BufReader::new(sender.stdout.take().context("no sender stdout")?);
    let mut first = String::new();
    out.read_line(&mut first)?;
    let Some(addr) = first.trim().strip_prefix("listening ") else {
        let _ = sender.kill();
        bail!("the sender worker did not announce its address");
    };
    let receiver = worker(true, Some(addr))?;
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

/// Entry point of the hidden `psikit bench rr16-worker`.
pub fn worker(a: &Rr16WorkerArgs) -> Result<()> {
    let n = 1u64 << a.log2;
    let ids = if a.receiver { n / 2..n / 2 + n } else { 0..n };
    let items: Vec<Vec<u8>> = ids.map(item).collect();
    let cfg = Rr16Config {
        malicious: !a.semi_honest,
        ..Rr16Config::default()
    };
    let limits = Limits::default();
    let mut m = Metrics::default();
    runtime()?.block_on(async {
        let peer = match &a.connect {
            Some(addr) if a.receiver => Peer::Connect(ServerAddr {
                addr: addr.clone(),
                tls: None,
                limits,
            }),
            None if !a.receiver => Peer::Listen {
                addr: "127.0.0.1:0".into(),
                tls: None,
                limits,
                accept_timeout: None,
            },
            _ => bail!("the receiver needs --connect and the sender must not have it"),
        };
        let mut ch = peer.open(|addr| println!("listening {addr}")).await?;
        let cpu = CpuSnapshot::now();
        let t = Instant::now();
        let (phases, sent, received) = if a.receiver {
            let out = run_receiver(&mut ch, &items, &cfg).await?;
            // Receiver item j has id n/2 + j: a match exactly when j < n/2.
            let wrong = (0..items.len())
                .filter(|&j| out.matches[j] != ((j as u64) < n / 2))
                .count();
            ensure!(wrong == 0, "{wrong} receiver outputs differ from the truth");
            m.set("ots", out.params.n_ot as f64);
            m.set("chunks", out.params.chunks as f64);
            (out.phases, out.bytes_sent, out.bytes_received)
        } else {
            let out = run_sender(&mut ch, &items, &cfg).await?;
            (out.phases, out.bytes_sent, out.bytes_received)
        };
        m.set("total", t.elapsed().as_secs_f64());
        if let Some(c) = cpu {
            let used = c.since();
            m.set("cpu", used.own);
            if let Some(steal) = used.steal {
                m.set("steal_cores", steal);
            }
        }
        m.set("offline", phases.offline.as_secs_f64());
        m.set("online", phases.online.as_secs_f64());
        m.set("sent", sent as f64);
        m.set("received", received as f64);
        anyhow::Ok(())
    })?;
    m.set_peak_memory("peak");
    print!("{}", m.encode());
    Ok(())
}

/// Median over runs of one party's figure.
fn med(runs: &[Run], receiver: bool, key: &str) -> Option<f64> {
    median_of(
        runs.iter()
            .filter_map(|(s, r)| if receiver { r } else { s }.get(key)),
    )
}

/// Median over runs of a figure combining both parties.
fn med_both(runs: &[Run], f: impl Fn(f64, f64) -> f64, key: &str) -> Option<f64> {
    median_of(
        runs.iter()
            .filter_map(|(s, r)| Some(f(s.get(key)?, r.get(key)?))),
    )
}

fn render(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = TextTable::new(&[
        "mode",
        "n",
        "threads/party",
        "OTs",
        "offline",
        "online",
        "total",
        "receiver → sender",
        "sender → receiver",
        "total MB",
        "CPU s (S / R)",
        "peak sender",
        "peak receiver",
        "peak both",
    ]);
    for (cfg, runs) in results {
        let cpu = format!(
            "{} / {}",
            num(med(runs, false, "cpu"), 2),
            num(med(runs, true, "cpu"), 2)
        );
        t.row(vec![
            cfg.mode().into(),
            format!("2^{}", cfg.log2),
            cfg.threads.to_string(),
            count(med(runs, true, "ots")),
            time(med(runs, true, "offline")),
            time(med(runs, true, "online")),
            time(med_both(runs, f64::max, "total")),
            size(med(runs, true, "sent")),
            size(med(runs, false, "sent")),
            num(med_both(runs, |a, b| (a + b) / 1e6, "sent"), 1),
            cpu,
            size(med(runs, false, "peak")),
            size(med(runs, true, "peak")),
            size(med_both(runs, |a, b| a + b, "peak")),
        ]);
    }
    let mut out = format!(
        "## RR16 on loopback\n\nOffline/online are the receiver's phases (offline = OT \
         extension and cut-and-choose, online = everything that needs the sets); total = the \
         slower party, from connection to output. Peak memory is each process's VmHWM \
         (including its generated set). MB = 10^6 bytes, as in the paper.\n\n{}",
        t.render()
    );
    out.push_str(&reference());
    out.push_str(&targets(results));
    out
}

/// The paper's figures (Fig. 6 LAN, 0.2 ms RTT; Fig. 8) and the issue's
/// libPSI measurements on this machine.
fn reference() -> String {
    let mut t = TextTable::new(&["source", "n", "total (online)", "communication", "memory"]);
    for (n, total, comm) in [
        (8, "0.2 s (0.003 s)", "1.9 MB"),
        (12, "0.9 s (0.04 s)", "23 MB"),
        (16, "9.7 s (0.7 s)", "324 MB"),
        (20, "127 s (14 s)", "4,970 MB"),
    ] {
        t.row(vec![
            "paper, Fig. 6 LAN + Fig. 8".into(),
            format!("2^{n}"),
            total.into(),
            comm.into(),
            "-".into(),
        ]);
    }
    t.row(vec![
        "libPSI RR16 here, 1 thread".into(),
        "2^16".into(),
        "2.45 s (0.65 s)".into(),
        "324 MB".into(),
        "-".into(),
    ]);
    t.row(vec![
        "libPSI RR16 here, 1 thread".into(),
        "2^20".into(),
        "70.0 s (22.8 s)".into(),
        "4,970 MB".into(),
        "17.5 GB peak".into(),
    ]);
    format!("\n## Reference figures\n\n{}", t.render())
}

/// The targets at n = 2^20, malicious, one thread per party.
fn targets(results: &[(Config, Vec<Run>)]) -> String {
    let goal = Config {
        malicious: true,
        log2: TARGET_LOG2,
        threads: 1,
    };
    let Some((_, runs)) = results.iter().find(|(c, _)| *c == goal) else {
        return "\n(targets need --log2 20 with --threads 1)\n".into();
    };
    let check = |v: Option<f64>, limit: f64| match v {
        Some(v) if v <= limit => "met",
        Some(_) => "MISSED",
        None => "-",
    };
    let total = med_both(runs, f64::max, "total");
    let peak = med_both(runs, |a, b| a + b, "peak");
    let comm = med_both(runs, |a, b| a + b, "sent");
    format!(
        "\n## Targets (n = 2^20, malicious, 1 thread per party)\n\n\
         * total {} (target < {TARGET_TOTAL_SECS} s): {}\n\
         * peak memory of both parties {:.2} GB (target < 4 GB): {}\n\
         * communication {:.0} MB (target <= 4,970 MB): {}\n",
        time(total),
        check(total, TARGET_TOTAL_SECS),
        peak.unwrap_or(0.0) / 1e9,
        check(peak, TARGET_PEAK_BYTES),
        comm.unwrap_or(0.0) / 1e6,
        check(comm, TARGET_COMM_BYTES),
    )
}
