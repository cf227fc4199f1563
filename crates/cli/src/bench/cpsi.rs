//! `psikit bench cpsi`: circuit PSI on loopback TCP, one process per party
//! (`two_party::spawn_pair`), per step (hashing, OPPRF, triples, equality,
//! application), next to the EPC paper's tables and volePSI's circuit PSI
//! measured on this machine.

use std::time::Instant;

use anyhow::{bail, ensure, Result};
use clap::{Args, ValueEnum};
use psikit_protocols::common::connect::runtime;
use psikit_protocols::cpsi::facade;
use psikit_protocols::cpsi::{
    AppKind, Choices, Epc, Input, OtKind, Output, Reveal, Side, Spelling, Sums,
};
use psikit_protocols::NoProgress;

use super::cpu::CpuSnapshot;
use super::harness::{item, Metrics};
use super::table::{num, size, time, TextTable};
use super::two_party::{med, med_both, spawn_pair, worker_channel, Run};
use crate::cpsi_cmd::words;

/// Options of `psikit bench cpsi`.
#[derive(Args, Clone, Debug)]
pub struct CpsiBenchArgs {
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
    /// OT extensions feeding the equality test.
    #[arg(long, value_delimiter = ',', default_values_t = [OtKind::Silent, OtKind::Iknp],
          value_parser = words(&OtKind::ALL, OtKind::word, None))]
    ot: Vec<OtKind>,
    /// Equality-preserving compression settings: auto, off, or bits.
    #[arg(long, value_delimiter = ',', default_values_t = [Epc::Auto, Epc::Off])]
    epc: Vec<Epc>,
    /// Applications ("shares" is the base circuit PSI).
    #[arg(long, value_delimiter = ',', default_values_t = [BenchApp::Shares])]
    apps: Vec<BenchApp>,
    /// A fast smoke run.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// An application of `--apps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchApp {
    Shares,
    Cardinality,
    Sum,
    /// The sum with the inner product of 32-bit values.
    Product,
    Threshold,
    Union,
}

impl std::fmt::Display for BenchApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchApp::Product => f.write_str("product"),
            _ => self.kind().fmt(f),
        }
    }
}

impl BenchApp {
    fn kind(self) -> AppKind {
        match self {
            BenchApp::Shares => AppKind::Shares,
            BenchApp::Cardinality => AppKind::Cardinality,
            BenchApp::Sum | BenchApp::Product => AppKind::Sum,
            BenchApp::Threshold => AppKind::Threshold,
            BenchApp::Union => AppKind::Union,
        }
    }

    /// What the `side` party of a run on sets of `n` chooses: the
    /// threshold is the expected cardinality, `n/2`; the sums take one
    /// value column at each party; the union is learned by the send
    /// party, so that `receive` stays the cuckoo side whose steps the
    /// tables show.
    fn choices(self, side: Side, n: u64) -> Choices {
        let mut c = Choices::new(side, self.kind());
        match self {
            BenchApp::Threshold => c.threshold = Some(n / 2),
            BenchApp::Sum => c.value_columns = 1,
            BenchApp::Product => (c.value_columns, c.inner_product) = (1, true),
            BenchApp::Union => c.reveal_to = Reveal::Sender,
            BenchApp::Shares | BenchApp::Cardinality => {}
        }
        c
    }
}

/// One party of one run, in its own process.
#[derive(Args, Clone, Debug)]
pub struct CpsiWorkerArgs {
    #[arg(long, value_parser = words(&OtKind::ALL, OtKind::word, None))]
    ot: OtKind,
    #[arg(long, value_enum)]
    app: BenchApp,
    #[arg(long)]
    epc: Epc,
    #[arg(long)]
    log2: u32,
    /// Run the receiver (connects to --connect); otherwise the sender.
    #[arg(long)]
    receiver: bool,
    #[arg(long)]
    connect: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Config {
    ot: OtKind,
    epc: Epc,
    app: BenchApp,
    log2: u32,
    threads: usize,
}

/// Issue targets at 2^20, one thread per party: the base circuit PSI at
/// most 10 s and 600 MB; a low-communication configuration (silent OT) at
/// most 134 MB and 25 s; every application but the inner product within
/// 10% of the base time (issue 29; the inner product's cost is stated).
const TARGET_LOG2: u32 = 20;

/// Entry point of the hidden `psikit bench cpsi-worker`.
pub fn worker(a: &CpsiWorkerArgs) -> Result<()> {
    psikit_protocols::memory::reuse_freed_memory();
    let n = 1u64 << a.log2;
    let ids: Vec<u64> = match a.receiver {
        true => (n / 2..n / 2 + n).collect(),
        false => (0..n).collect(),
    };
    let keys: Vec<Vec<u8>> = ids.iter().map(|&id| item(id)).collect();
    let product = a.app == BenchApp::Product;
    let values: Vec<Vec<u64>> = matches!(a.app, BenchApp::Sum | BenchApp::Product)
        .then_some(ids)
        .into_iter()
        .collect();
    let side = match a.receiver {
        true => Side::Receive,
        false => Side::Send,
    };
    let choices = Choices {
        ot: a.ot,
        epc: a.epc,
        ..a.app.choices(side, n)
    };
    let (role, cfg) = choices.resolve(Spelling::Flags)?;
    let mut m = Metrics::default();
    runtime()?.block_on(async {
        let mut ch = worker_channel(a.receiver, a.connect.as_deref()).await?;
        let cpu = CpuSnapshot::now();
        let t = Instant::now();
        let input = Input {
            keys: &keys,
            values: &values,
        };
        let out = facade::run_on(&mut ch, role, input, &cfg, &NoProgress).await?;
        m.set("total", t.elapsed().as_secs_f64());
        check(&out.output, n, product)?;
        let p = &out.phases;
        for (name, step) in [
            ("hashing", p.hashing),
            ("opprf", p.opprf),
            ("epc", p.epc),
            ("triples", p.triples),
            ("equality", p.equality),
            ("application", p.application),
        ] {
            m.set(name, step.time.as_secs_f64());
            m.set(format!("{name}_bytes"), step.bytes as f64);
        }
        let s = &p.silent;
        m.set("silent_base", s.base.as_secs_f64());
        m.set("silent_trees", s.trees.as_secs_f64());
        m.set("silent_code", s.code.as_secs_f64());
        m.set("silent_other", s.other.as_secs_f64());
        m.set("sent", out.bytes_sent as f64);
        m.set("bins", p.bins as f64);
        m.set("tag_bits", f64::from(p.tag_bits));
        m.set("compared_bits", f64::from(p.compared_bits));
        if let Some(c) = cpu {
            m.set("cpu", c.since().own);
        }
        anyhow::Ok(())
    })?;
    m.set_peak_memory("peak");
    print!("{}", m.encode());
    Ok(())
}

/// Checks a party's output against the known truth: the intersection is
/// ids `n/2..n`, each party's value is its id.
fn check(out: &Output, n: u64, product: bool) -> Result<()> {
    let half = n / 2;
    let sum: u64 = (half..n).sum();
    let squares = (half..n).fold(0u64, |t, id| t.wrapping_add(id * id));
    match out {
        Output::Shares(_) | Output::Cardinality(None) | Output::Sum(None) => {}
        Output::SumWithheld(min) => bail!("no minimum intersection was set, yet {min}"),
        Output::Threshold(None) | Output::Union(None) => {}
        Output::Cardinality(Some(c)) => ensure!(*c == half, "cardinality {c}, not {half}"),
        Output::Sum(Some(s)) => ensure!(
            *s == Sums {
                cardinality: half,
                sender_values: vec![sum],
                receiver_values: vec![sum],
                inner_product: product.then_some(squares),
            },
            "wrong sums {s:?}"
        ),
        Output::Threshold(Some(b)) => ensure!(*b, "the threshold n/2 is met"),
        Output::Union(Some(items)) => ensure!(
            items.len() as u64 == n - half,
            "union: {} items, not {}",
            items.len(),
            n - half
        ),
    }
    Ok(())
}

pub fn run(a: &CpsiBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    let sizes = a
        .log2
        .clone()
        .unwrap_or(if a.quick { vec![8, 12] } else { vec![16, 20] });
    ensure!(
        sizes.iter().all(|&l| (1..=24).contains(&l)),
        "set sizes must be 2^1 to 2^24"
    );
    ensure!(
        a.threads.iter().all(|&t| t >= 1),
        "thread counts must be at least 1"
    );
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 }).max(1);
    say.line(format!(
        "# psikit bench cpsi: {runs} run(s) per row, medians; two processes on loopback TCP"
    ));
    say.line("# bigger sets: --log2 24 --threads 2 --runs 1 --ot iknp (about 16x the 2^20 time and memory)\n");
    let started = Instant::now();
    let exe = std::env::current_exe()?;
    let mut results = Vec::new();
    let mut configs = Vec::new();
    for &log2 in &sizes {
        for &ot in &a.ot {
            for &epc in &a.epc {
                for &app in &a.apps {
                    for &threads in &a.threads {
                        configs.push(Config {
                            ot,
                            epc,
                            app,
                            log2,
                            threads,
                        });
                    }
                }
            }
        }
    }
    for cfg in configs {
        let mut done = Vec::new();
        for r in 0..runs {
            eprintln!(
                "cpsi {} epc {} {} n=2^{}, {} thread(s): run {}/{runs}",
                cfg.ot,
                cfg.epc,
                cfg.app,
                cfg.log2,
                cfg.threads,
                r + 1
            );
            done.push(one_run(&exe, cfg)?);
        }
        results.push((cfg, done));
    }
    super::table::finish(say, "cpsi", render(&results), started)
}

fn one_run(exe: &std::path::Path, cfg: Config) -> Result<Run> {
    let args: Vec<String> = vec![
        "bench".into(),
        "cpsi-worker".into(),
        "--ot".into(),
        cfg.ot.to_string(),
        "--app".into(),
        cfg.app.to_string(),
        "--epc".into(),
        cfg.epc.to_string(),
        "--log2".into(),
        cfg.log2.to_string(),
    ];
    spawn_pair(exe, &args, cfg.threads)
}

/// The columns naming a configuration, first in every table.
const CONFIG_COLUMNS: [&str; 5] = ["OT", "EPC", "app", "n", "thr"];

/// A table whose first columns name the configuration, then `columns`.
fn config_table(columns: &[&str]) -> TextTable {
    TextTable::new(&[&CONFIG_COLUMNS[..], columns].concat())
}

/// A row of a [`config_table`]: `cfg`'s cells, then `cells`.
fn config_row(cfg: &Config, cells: Vec<String>) -> Vec<String> {
    let mut row = vec![
        cfg.ot.to_string(),
        cfg.epc.to_string(),
        cfg.app.to_string(),
        format!("2^{}", cfg.log2),
        cfg.threads.to_string(),
    ];
    row.extend(cells);
    row
}

/// Estimated time on a link of `bits_per_s`: the loopback time plus the
/// traffic's transfer time (both directions share the link).
fn at_link(runs: &[Run], bits_per_s: f64) -> Option<f64> {
    let total = med_both(runs, f64::max, "total")?;
    let bytes = med_both(runs, |a, b| a + b, "sent")?;
    Some(total + bytes * 8.0 / bits_per_s)
}

fn render(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = config_table(&[
        "total",
        "hashing",
        "OPPRF",
        "EPC step",
        "triples",
        "equality",
        "app step",
        "traffic",
        "at 1 Gbit/s",
        "at 100 Mbit/s",
        "CPU s (S / R)",
        "peak S / R",
    ]);
    for (cfg, runs) in results {
        t.row(config_row(
            cfg,
            vec![
                time(med_both(runs, f64::max, "total")),
                time(med(runs, true, "hashing")),
                time(med(runs, true, "opprf")),
                time(med(runs, true, "epc")),
                time(med(runs, true, "triples")),
                time(med(runs, true, "equality")),
                time(med(runs, true, "application")),
                size(med_both(runs, |a, b| a + b, "sent")),
                time(at_link(runs, 1e9)),
                time(at_link(runs, 1e8)),
                format!(
                    "{} / {}",
                    num(med(runs, false, "cpu"), 2),
                    num(med(runs, true, "cpu"), 2)
                ),
                format!(
                    "{} / {}",
                    size(med(runs, false, "peak")),
                    size(med(runs, true, "peak"))
                ),
            ],
        ));
    }
    let mut out = format!(
        "## Circuit PSI on loopback\n\nTotal = the slower party, from connection to output; \
         steps as the receiver timed them; traffic = both directions; the link estimates add \
         traffic × 8 / bandwidth to the loopback time. Peak memory is each process's VmHWM.\n\n{}",
        t.render()
    );
    out.push_str(&steps_traffic(results));
    out.push_str(&silent_split(results));
    out.push_str(&reference());
    out.push_str(&targets(results));
    out
}

fn steps_traffic(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = config_table(&[
        "bins M",
        "tag bits",
        "compared bits",
        "OPPRF",
        "EPC step",
        "triples",
        "equality",
        "app step",
    ]);
    for (cfg, runs) in results {
        let mb = |k: &str| size(med(runs, true, &format!("{k}_bytes")));
        t.row(config_row(
            cfg,
            vec![
                num(med(runs, true, "bins"), 0),
                num(med(runs, true, "tag_bits"), 0),
                num(med(runs, true, "compared_bits"), 0),
                mb("opprf"),
                mb("epc"),
                mb("triples"),
                mb("equality"),
                mb("application"),
            ],
        ));
    }
    format!("\n## Traffic per step (both directions)\n\n{}", t.render())
}

/// Where each party's silent extensions (the OPRF's VOLE and the random
/// OTs after it) spent their time.
fn silent_split(results: &[(Config, Vec<Run>)]) -> String {
    let mut t = config_table(&[
        "base OTs (S / R)",
        "trees (S / R)",
        "code (S / R)",
        "rest (S / R)",
    ]);
    for (cfg, runs) in results {
        let both = |k: &str| {
            format!(
                "{} / {}",
                time(med(runs, false, k)),
                time(med(runs, true, k))
            )
        };
        t.row(config_row(
            cfg,
            vec![
                both("silent_base"),
                both("silent_trees"),
                both("silent_code"),
                both("silent_other"),
            ],
        ));
    }
    format!(
        "\n## Silent extensions, per party (the OPRF's VOLE and the random OTs; rest = \
         sending, waiting on the peer)\n\n{}",
        t.render()
    )
}

fn reference() -> String {
    let mut t = TextTable::new(&["source", "n", "threads", "time", "communication"]);
    for row in [
        [
            "EPC paper Table 7, KK-CGS-C w/ EPC (base)",
            "2^20",
            "1",
            "23.4 s",
            "555 MB",
        ],
        [
            "EPC paper Table 7, Silent-RS-C (no EPC)",
            "2^20",
            "1",
            "154 s",
            "255 MB",
        ],
        [
            "EPC paper Table 7, IKNP-RS-C w/ EPC",
            "2^20",
            "1",
            "25.0 s",
            "1019 MB",
        ],
        [
            "EPC paper Table 8, PSI-Ca (ours)",
            "2^20",
            "1",
            "24.8 s",
            "582 MB",
        ],
        [
            "Private Join and Compute (paper Table 8)",
            "2^20",
            "1",
            "776 s",
            "84 MB",
        ],
        [
            "volePSI circuit PSI measured here",
            "2^20",
            "1",
            "36.0 s",
            "134 MB",
        ],
    ] {
        t.row(row.iter().map(|s| s.to_string()).collect());
    }
    format!("\n## Reference figures\n\n{}", t.render())
}

fn targets(results: &[(Config, Vec<Run>)]) -> String {
    let at_target = |c: &Config| c.log2 == TARGET_LOG2 && c.threads == 1;
    let total = |runs: &[Run]| med_both(runs, f64::max, "total");
    let bytes = |runs: &[Run]| med_both(runs, |a, b| a + b, "sent");
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    // (configuration, seconds, bytes) of each base run at the target size.
    let bases: Vec<(Config, f64, f64)> = results
        .iter()
        .filter(|(c, _)| at_target(c) && c.app == BenchApp::Shares)
        .filter_map(|(c, runs)| Some((*c, total(runs)?, bytes(runs)?)))
        .collect();
    let name = |c: &Config| format!("{}, EPC {}", c.ot, c.epc);
    let mut out = String::new();
    // The base target is one configuration meeting both limits: the
    // fastest within 600 MB (else the fastest of all, to show the miss).
    let within = bases.iter().filter(|(_, _, b)| *b <= 600e6);
    let fastest = |x: &&(Config, f64, f64), y: &&(Config, f64, f64)| x.1.total_cmp(&y.1);
    if let Some((c, secs, b)) = within.min_by(fastest).or(bases.iter().min_by(fastest)) {
        out.push_str(&format!(
            "* base circuit PSI, fastest within 600 MB ({}): {secs:.1} s (<= 10 s: {}), {:.0} MB (<= 600 MB: {})\n",
            name(c),
            verdict(*secs <= 10.0),
            b / 1e6,
            verdict(*b <= 600e6)
        ));
    }
    let silent = bases.iter().filter(|(c, _, _)| c.ot == OtKind::Silent);
    if let Some((c, secs, b)) = silent.min_by(|x, y| x.2.total_cmp(&y.2)) {
        out.push_str(&format!(
            "* low communication, lightest silent ({}): {:.0} MB (<= 134 MB: {}), {secs:.1} s (<= 25 s: {})\n",
            name(c),
            b / 1e6,
            verdict(*b <= 134e6),
            verdict(*secs <= 25.0)
        ));
    }
    for (c, runs) in results
        .iter()
        .filter(|(c, _)| at_target(c) && c.app != BenchApp::Shares)
    {
        let base = bases
            .iter()
            .find(|(b, _, _)| b.ot == c.ot && b.epc == c.epc);
        if let (Some((_, base, _)), Some(secs)) = (base, total(runs)) {
            let bar = match c.app {
                BenchApp::Product => "no bar: its cost is stated".to_string(),
                _ => format!("<= 10%: {}", verdict(secs <= base * 1.10)),
            };
            out.push_str(&format!(
                "* {} ({}): {secs:.1} s, {:+.0}% over its base ({bar})\n",
                c.app,
                name(c),
                (secs / base - 1.0) * 100.0,
            ));
        }
    }
    match out.is_empty() {
        true => "\n(targets need --log2 20 with --threads 1 and --apps shares)\n".into(),
        false => format!("\n## Targets (n = 2^20, 1 thread per party)\n\n{out}"),
    }
}
