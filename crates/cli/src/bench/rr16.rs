//! `psikit bench rr16`: RR16 (malicious, and its semi-honest variant) on
//! loopback TCP, next to the paper's figures and libPSI's. Runs go through
//! the shared two-party runner (`two_party`: one process per party).

use std::time::Instant;

use anyhow::{ensure, Result};
use clap::Args;
use psikit_protocols::common::two_party::Protocol;

use super::table::{count, num, size, time, TextTable};
use super::two_party::{med, med_both, run_all, Config, Mode, Run};

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
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

pub fn run(a: &Rr16BenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
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
    let modes: &[Mode] = if a.malicious_only {
        &[Mode::Malicious]
    } else {
        &[Mode::Malicious, Mode::SemiHonest]
    };
    say.line(format!(
        "# psikit bench rr16: {runs} run(s) per row, medians; two processes on loopback TCP"
    ));
    say.line("# bigger sets: --log2 22 (about 4x the 2^20 time and memory)\n");
    let started = Instant::now();
    let mut configs = Vec::new();
    for &mode in modes {
        for &log2 in &sizes {
            for &threads in &a.threads {
                configs.push(Config {
                    protocol: Protocol::Rr16,
                    mode,
                    log2,
                    threads,
                });
            }
        }
    }
    let results = run_all(&configs, runs)?;
    super::table::finish(say, "rr16", render(&results), started)
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
            cfg.mode.to_string(),
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
        protocol: Protocol::Rr16,
        mode: Mode::Malicious,
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
