//! `psikit bench psi`: balanced PSI (VOLE-PSI, and RR16 for comparison) on
//! loopback TCP, one process per party (`two_party`), next to the VOLE-PSI
//! paper's figures and libPSI's KKRT measured on this machine.

use std::time::Instant;

use anyhow::{ensure, Result};
use clap::Args;
use psikit_protocols::common::two_party::Protocol;

use super::table::{num, size, time, TextTable};
use super::two_party::{med, med_both, run_all, Config, Mode, Run};

/// Issue targets at n = 2^20, one thread per party: (mode, total seconds,
/// bits per item), and peak memory of both parties.
const TARGET_LOG2: u32 = 20;
const TARGETS: [(Mode, f64, f64); 3] = [
    (Mode::SemiHonest, 0.6, 260.0),
    (Mode::Malicious, 0.8, 310.0),
    (Mode::LowComm, 0.6, 170.0),
];
const TARGET_PEAK_BYTES: f64 = 1e9;

/// Options of `psikit bench psi`.
#[derive(Args, Clone, Debug)]
pub struct PsiBenchArgs {
    /// Set sizes (both parties) as powers of two [default: 16,20; --quick:
    /// 8,12].
    #[arg(long, value_delimiter = ',')]
    log2: Option<Vec<u32>>,
    /// Thread counts per party.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Runs per configuration; medians are reported [default: 3; --quick: 1].
    #[arg(long)]
    runs: Option<usize>,
    /// Security modes to run: semi-honest, malicious, low-comm (VOLE-PSI's
    /// low-communication mode), or several.
    #[arg(long, value_delimiter = ',', default_values_t = [Mode::SemiHonest, Mode::Malicious])]
    modes: Vec<Mode>,
    /// Also run RR16 (semi-honest) on the same sets, for comparison.
    #[arg(long)]
    with_rr16: bool,
    /// A fast smoke run.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

pub fn run(a: &PsiBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    let sizes = a
        .log2
        .clone()
        .unwrap_or(if a.quick { vec![8, 12] } else { vec![16, 20] });
    ensure!(
        sizes.iter().all(|&l| (1..=26).contains(&l)),
        "set sizes must be 2^1 to 2^26"
    );
    ensure!(
        a.threads.iter().all(|&t| t >= 1),
        "thread counts must be at least 1"
    );
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 }).max(1);
    say.line(format!(
        "# psikit bench psi: {runs} run(s) per row, medians; two processes on loopback TCP"
    ));
    say.line(
        "# bigger sets: --log2 24 --threads 2 --runs 1 (about 16x the 2^20 time and memory)\n",
    );
    let started = Instant::now();
    let mut protocols = vec![Protocol::Vole];
    if a.with_rr16 {
        protocols.push(Protocol::Rr16);
    }
    let mut configs = Vec::new();
    for &protocol in &protocols {
        // RR16 is there for comparison, in its semi-honest mode.
        let modes = match protocol {
            Protocol::Vole => a.modes.clone(),
            Protocol::Rr16 => vec![Mode::SemiHonest],
        };
        for &mode in &modes {
            for &log2 in &sizes {
                for &threads in &a.threads {
                    configs.push(Config {
                        protocol,
                        mode,
                        log2,
                        threads,
                    });
                }
            }
        }
    }
    let results = run_all(&configs, runs)?;
    super::table::finish(say, "psi", render(&results), started)
}

fn render(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = TextTable::new(&[
        "protocol",
        "mode",
        "n",
        "threads/party",
        "total",
        "receiver → sender",
        "sender → receiver",
        "bits/item",
        "CPU s (S / R)",
        "peak sender",
        "peak receiver",
    ]);
    for (cfg, runs) in results {
        let n = (1u64 << cfg.log2) as f64;
        t.row(vec![
            format!("{:?}", cfg.protocol),
            cfg.mode.to_string(),
            format!("2^{}", cfg.log2),
            cfg.threads.to_string(),
            time(med_both(runs, f64::max, "total")),
            size(med(runs, true, "sent")),
            size(med(runs, false, "sent")),
            num(med_both(runs, |a, b| (a + b) * 8.0 / n, "sent"), 0),
            format!(
                "{} / {}",
                num(med(runs, false, "cpu"), 2),
                num(med(runs, true, "cpu"), 2)
            ),
            size(med(runs, false, "peak")),
            size(med(runs, true, "peak")),
        ]);
    }
    let mut out = format!(
        "## Balanced PSI on loopback\n\nTotal = the slower party, from connection to output; \
         bits/item = both directions × 8 / n. Peak memory is each process's VmHWM (including \
         its generated set).\n\n{}",
        t.render()
    );
    out.push_str(&substrate(results));
    out.push_str(&reference());
    out.push_str(&targets(results));
    out
}

/// The VOLE-PSI runs' parts: the silent VOLE and the OKVS.
fn substrate(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = TextTable::new(&[
        "mode",
        "n",
        "threads/party",
        "VOLE length",
        "VOLE time (R)",
        "VOLE/s per core",
        "VOLE bits/correlation",
        "OKVS encode (R) per item",
        "OKVS decode (S) per item",
    ]);
    for (cfg, runs) in results.iter().filter(|(c, _)| c.protocol == Protocol::Vole) {
        let n = (1u64 << cfg.log2) as f64;
        let len = med(runs, true, "vole_len");
        let vole = med(runs, true, "vole");
        let per_core = match (len, vole) {
            (Some(l), Some(v)) if v > 0.0 => format!("{:.2e}", l / v / cfg.threads as f64),
            _ => "-".into(),
        };
        let bits = match (len, med(runs, true, "vole_bytes")) {
            (Some(l), Some(b)) if l > 0.0 => format!("{:.1}", b * 8.0 / l),
            _ => "-".into(),
        };
        let per_item = |v: Option<f64>| v.map_or("-".into(), |s| format!("{:.0} ns", s * 1e9 / n));
        t.row(vec![
            cfg.mode.to_string(),
            format!("2^{}", cfg.log2),
            cfg.threads.to_string(),
            num(len, 0),
            time(vole),
            per_core,
            bits,
            per_item(med(runs, true, "okvs_encode")),
            per_item(med(runs, false, "okvs_decode")),
        ]);
    }
    format!(
        "\n## VOLE-PSI parts (silent VOLE, OKVS)\n\nVOLE time is the receiver's, base OTs \
         included; bits/correlation counts both directions up to the end of the VOLE.\n\n{}",
        t.render()
    )
}

/// Published and locally measured figures to compare with.
fn reference() -> String {
    let mut t = TextTable::new(&["source", "n", "threads", "time", "communication"]);
    for row in [
        [
            "RR22 paper, Table 2, semi-honest (LAN)",
            "2^20",
            "1",
            "0.37 s",
            "251 bits/item (33 MB)",
        ],
        [
            "RR22 paper, Table 2, malicious (LAN)",
            "2^20",
            "1",
            "0.44 s",
            "302 bits/item",
        ],
        ["libPSI KKRT measured here", "2^20", "1", "3.4 s", "114 MB"],
        [
            "psikit RR16 semi-honest (docs/benchmarks.md)",
            "2^20",
            "1",
            "18 s",
            "3.1 GB",
        ],
    ] {
        t.row(row.iter().map(|s| s.to_string()).collect());
    }
    format!("\n## Reference figures\n\n{}", t.render())
}

/// The targets at n = 2^20, one thread per party, for each mode
/// that ran.
fn targets(results: &[(Config, Vec<Run>)]) -> String {
    let check = |v: Option<f64>, limit: f64| match v {
        Some(v) if v <= limit => "met",
        Some(_) => "MISSED",
        None => "-",
    };
    let n = (1u64 << TARGET_LOG2) as f64;
    let mut out = String::new();
    for (mode, total_secs, bits_per_item) in TARGETS {
        let goal = Config {
            protocol: Protocol::Vole,
            mode,
            log2: TARGET_LOG2,
            threads: 1,
        };
        let Some((_, runs)) = results.iter().find(|(c, _)| *c == goal) else {
            continue;
        };
        let total = med_both(runs, f64::max, "total");
        let bits = med_both(runs, |a, b| (a + b) * 8.0 / n, "sent");
        let peak = med_both(runs, |a, b| a + b, "peak");
        out.push_str(&format!(
            "\n## Targets (n = 2^20, {}, 1 thread per party)\n\n\
             * total {} (target <= {total_secs} s): {}\n\
             * {:.0} bits per item (target <= {bits_per_item}): {}\n\
             * peak memory of both parties {:.2} GB (target <= 1 GB): {}\n",
            goal.mode,
            time(total),
            check(total, total_secs),
            bits.unwrap_or(0.0),
            check(bits, bits_per_item),
            peak.unwrap_or(0.0) / 1e9,
            check(peak, TARGET_PEAK_BYTES),
        ));
    }
    if out.is_empty() {
        return "\n(targets need --log2 20 with --threads 1)\n".into();
    }
    out
}
