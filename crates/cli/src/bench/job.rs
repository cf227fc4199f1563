//! `psikit bench job`: balanced PSI run as a bucketed, resumable job
//! (`psikit_protocols::jobs`, what `psikit psi --job-dir` runs) on
//! loopback TCP, one process per party (`two_party::spawn_pair`), from
//! the CSV files to the matched rows: the job's passes (read, split,
//! buckets, output), each party's peak memory and spool on disk, the
//! buckets' shape and the traffic.
//!
//! The inputs are generated once per size (the synthetic `id,email,name`
//! rows of `psikit_protocols::io`, keyed by email): the sender holds ids
//! `0..n`, the receiver `n/2..3n/2`, so the receiver must match exactly
//! `n/2` rows; every run is checked against it. With `--cpsi cardinality`
//! or `--cpsi sum` the buckets run circuit PSI instead (the sum over the
//! `id` column on both sides), its result opened once over the job and
//! checked too.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;
use psikit_protocols::balanced::{Protocol, Role, Settings};
use psikit_protocols::io::{write_synthetic_csv, Column, KeySpec, Normalize};
use psikit_protocols::jobs::{self, JobInput, JobOptions, JobProtocol, DEFAULT_MEMORY};
use psikit_protocols::Progress;

use super::cpu::CpuSnapshot;
use super::harness::Metrics;
use super::table::{count, num, size, time, TextTable};
use super::two_party::{med, med_both, spawn_pair, worker_peer, Run};
use crate::psi_cmd::{parse_bytes, protocol_parser};
use crate::report;

/// The seed of the generated rows.
const SEED: u64 = 1;

/// Options of `psikit bench job`.
#[derive(Args, Clone, Debug)]
pub struct JobBenchArgs {
    /// Rows per side as powers of two.
    #[arg(long = "log2", visible_alias = "sizes", value_delimiter = ',',
          default_values_t = [20u32, 22])]
    sizes: Vec<u32>,
    /// Thread counts per party.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize])]
    threads: Vec<usize>,
    /// Buckets run at once (lane counts to compare) [default: psikit psi's].
    #[arg(long, value_delimiter = ',')]
    lanes: Vec<u8>,
    /// Runs per configuration; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The protocol each bucket runs.
    #[arg(long, default_value = "vole", value_parser = protocol_parser())]
    protocol: Protocol,
    /// Malicious security (default: semi-honest).
    #[arg(long)]
    malicious: bool,
    /// Run circuit PSI's cardinality or sum (of the `id` column on both
    /// sides) on the buckets instead of --protocol.
    #[arg(long, value_parser = ["cardinality", "sum"])]
    cpsi: Option<String>,
    /// Each party's memory budget (e.g. 4G, 512M); it sizes the buckets.
    #[arg(long, default_value = "4G", value_parser = parse_bytes)]
    memory: u64,
    /// The most items per bucket, instead of what --memory allows.
    #[arg(long)]
    bucket_items: Option<u64>,
    /// Where to generate the inputs and keep the job directories (a
    /// temporary directory is made in it) [default: the system's].
    #[arg(long)]
    work_dir: Option<PathBuf>,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// One party of one job run, in its own process.
#[derive(Args, Clone, Debug)]
pub struct JobWorkerArgs {
    #[arg(long, value_parser = protocol_parser())]
    protocol: Protocol,
    #[arg(long)]
    malicious: bool,
    #[arg(long)]
    cpsi: Option<String>,
    #[arg(long)]
    log2: u32,
    /// The directory of both inputs (`sender.csv`, `receiver.csv`).
    #[arg(long)]
    inputs: PathBuf,
    /// This run's directory: each party's job directory and the
    /// receiver's output go in it.
    #[arg(long)]
    run_dir: PathBuf,
    /// Memory budget in bytes.
    #[arg(long, default_value_t = DEFAULT_MEMORY)]
    memory: u64,
    #[arg(long)]
    bucket_items: Option<u64>,
    #[arg(long)]
    lanes: u8,
    /// Run the receiver (connects to --connect); otherwise the sender.
    #[arg(long)]
    receiver: bool,
    /// The sender's address (receiver only).
    #[arg(long)]
    connect: Option<String>,
}

/// The key column of the generated files, as `psikit psi --column email
/// --normalize trim,lower` reads it.
fn email_spec() -> Result<KeySpec> {
    let mut spec = KeySpec::new(vec![Column::Name("email".into())]);
    spec.normalize = Normalize::parse("trim,lower")?;
    Ok(spec)
}

/// The job's progress as the benchmark watches it: at the start of every
/// stage, the size of the job directory. The largest is at the start of
/// the bucket stage, right after the split: the key file and every bucket
/// file are on disk, and no bucket has run.
struct SpoolWatch {
    dir: PathBuf,
    largest: AtomicU64,
}

impl Progress for SpoolWatch {
    fn stage(&self, _: &str, _: Option<u64>) {
        self.largest
            .fetch_max(dir_bytes(&self.dir), Ordering::Relaxed);
    }

    fn advance(&self, _: u64) {}
}

/// Bytes of the files under `dir` (what cannot be read counts nothing).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Entry point of the hidden `psikit bench job-worker`.
pub fn worker(a: &JobWorkerArgs) -> Result<()> {
    // As `psikit psi`, which the worker stands for.
    psikit_protocols::memory::reuse_freed_memory();
    let n = 1u64 << a.log2;
    let (role, name) = match a.receiver {
        true => (Role::Receiver, "receiver"),
        false => (Role::Sender, "sender"),
    };
    let mut spec = email_spec()?;
    let protocol = match a.cpsi.as_deref() {
        None => JobProtocol::Balanced(Settings {
            malicious: a.malicious,
            key_format: spec.key_format(),
            ..Settings::new(a.protocol)
        }),
        Some(app) => circuit(app, &mut spec)?,
    };
    let balanced = matches!(protocol, JobProtocol::Balanced(_));
    let job_dir = a.run_dir.join(name);
    let opts = JobOptions {
        memory: a.memory,
        max_bucket_items: a.bucket_items,
        lanes: a.lanes,
        output: (a.receiver && balanced).then(|| a.run_dir.join("matches.csv")),
        ..JobOptions::new(protocol, job_dir.clone())
    };
    let input = JobInput {
        path: a.inputs.join(format!("{name}.csv")),
        spec,
    };
    let peer = worker_peer(a.receiver, a.connect.as_deref())?;
    let watch = SpoolWatch {
        dir: job_dir,
        largest: AtomicU64::new(0),
    };
    let cpu = CpuSnapshot::now();
    let t = Instant::now();
    let out = jobs::run_blocking(
        &peer,
        role,
        &input,
        &opts,
        |addr| println!("listening {addr}"),
        &watch,
    )?;
    let wall = t.elapsed().as_secs_f64();
    ensure!(
        out.input.rows == n,
        "the {name} read {} rows, not the {n} generated",
        out.input.rows
    );
    if a.receiver && !balanced {
        check_circuit(&out, n)?;
    }
    if a.receiver && balanced {
        // Receiver ids n/2..3n/2 against sender ids 0..n.
        ensure!(
            out.matched_rows == Some(n / 2),
            "WRONG RESULT: the receiver matched {} rows; the inputs share {}",
            out.matched_rows.map_or("no".into(), |m| m.to_string()),
            n / 2
        );
    }
    let mut m = Metrics::default();
    m.set("wall", wall);
    let t = &out.times;
    for (key, d) in [("read", t.read), ("split", t.split), ("buckets", t.buckets)] {
        m.set(key, d.as_secs_f64());
    }
    if let Some(rows) = out.matched_rows {
        m.set("output", t.output.as_secs_f64());
        m.set("matched", rows as f64);
    }
    m.set("sent", out.bytes_sent as f64);
    m.set("received", out.bytes_received as f64);
    m.set("bucket_count", out.shape.buckets as f64);
    m.set("sender_capacity", out.shape.sender_capacity as f64);
    m.set("receiver_capacity", out.shape.receiver_capacity as f64);
    m.set("reconnects", f64::from(out.reconnects));
    m.set("spool", watch.largest.load(Ordering::Relaxed) as f64);
    if let Some(c) = cpu {
        m.set("cpu", c.since().own);
    }
    m.set_peak_memory("peak");
    print!("{}", m.encode());
    Ok(())
}

/// `--cpsi APP`'s protocol; the sum takes the `id` column.
#[cfg(feature = "cpsi")]
fn circuit(app: &str, spec: &mut KeySpec) -> Result<JobProtocol> {
    use psikit_protocols::cpsi::{App, CpsiConfig};
    let app = if app == "sum" {
        App::Sum
    } else {
        App::Cardinality
    };
    if app == App::Sum {
        spec.value_columns = vec![Column::Name("id".into())];
    }
    Ok(JobProtocol::Circuit {
        config: CpsiConfig {
            key_format: spec.key_format(),
            ..CpsiConfig::new(app)
        },
        value_columns: u8::from(app == App::Sum),
    })
}

#[cfg(not(feature = "cpsi"))]
fn circuit(_: &str, _: &mut KeySpec) -> Result<JobProtocol> {
    anyhow::bail!("this psikit was built without circuit PSI")
}

/// The receiver's circuit PSI result: ids `n/2..n` in common, whose sum
/// both sides' `id` columns give.
#[cfg(feature = "cpsi")]
fn check_circuit(out: &jobs::JobOutcome, n: u64) -> Result<()> {
    use psikit_protocols::cpsi::Output;
    let ids = (n / 2)..n;
    let output = out.circuit.as_ref();
    let ok = match output {
        Some(Output::Cardinality(Some(c))) => *c == n / 2,
        Some(Output::Sum(Some(s))) => {
            let sum = ids.sum::<u64>();
            s.cardinality == n / 2 && s.sender_values == [sum] && s.receiver_values == [sum]
        }
        _ => false,
    };
    ensure!(
        ok,
        "WRONG RESULT: the receiver's circuit PSI result {output:?}, with {} ids in common",
        n / 2
    );
    Ok(())
}

#[cfg(not(feature = "cpsi"))]
fn check_circuit(_: &jobs::JobOutcome, _: u64) -> Result<()> {
    Ok(())
}

/// One benchmarked configuration.
#[derive(Clone, Copy, Debug)]
struct Config {
    log2: u32,
    threads: usize,
    lanes: u8,
}

pub fn run(a: &JobBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    ensure!(
        a.sizes.iter().all(|&l| (1..=32).contains(&l)),
        "sizes must be 2^1 to 2^32 rows"
    );
    ensure!(
        a.threads.iter().all(|&t| t >= 1),
        "thread counts must be at least 1"
    );
    ensure!(
        a.lanes.iter().all(|l| (1..=jobs::MAX_LANES).contains(l)),
        "lane counts must be 1 to {}",
        jobs::MAX_LANES
    );
    let lanes = match a.lanes.is_empty() {
        true => vec![jobs::default_lanes()],
        false => a.lanes.clone(),
    };
    ensure!(
        a.bucket_items != Some(0),
        "--bucket-items must be at least 1"
    );
    let runs = a.runs.max(1);
    let mode = match a.malicious {
        true => "malicious",
        false => "semi-honest",
    };
    let what = match &a.cpsi {
        Some(app) => format!("circuit PSI {app}"),
        None => a.protocol.name().to_string(),
    };
    say.line(format!(
        "# psikit bench job: {what} {mode} as a bucketed job, --memory {}{} per party; {runs} \
         run(s) per row, medians; two processes on loopback TCP",
        report::bytes(a.memory),
        a.bucket_items
            .map_or(String::new(), |b| format!(", --bucket-items {b}")),
    ));
    if let Some(load) = load_average() {
        say.line(format!(
            "# load average at the start (1, 5, 15 min): {load}"
        ));
    }
    say.line("");
    let started = Instant::now();
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let work = match &a.work_dir {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("cannot create a temporary directory")?;
    let mut results = Vec::new();
    let mut csv_bytes_per_row = None;
    for &log2 in &a.sizes {
        let inputs = work.path().join(format!("2^{log2}"));
        csv_bytes_per_row = Some(generate(&inputs, log2)?);
        for (&threads, &lanes) in a
            .threads
            .iter()
            .flat_map(|t| lanes.iter().map(move |l| (t, l)))
        {
            let cfg = Config {
                log2,
                threads,
                lanes,
            };
            let mut done = Vec::new();
            for r in 0..runs {
                eprintln!(
                    "job {what} {mode} n=2^{log2}, {threads} thread(s) per party, {lanes} \
                     lane(s): run {}/{runs}",
                    r + 1
                );
                let run_dir = work
                    .path()
                    .join(format!("run-2^{log2}-{threads}-{lanes}-{r}"));
                done.push(one_run(&exe, a, cfg, &inputs, &run_dir)?);
                // Each run's spool and output go; the inputs stay for the next.
                std::fs::remove_dir_all(&run_dir)
                    .with_context(|| format!("cannot remove {}", run_dir.display()))?;
            }
            results.push((cfg, done));
        }
        std::fs::remove_dir_all(&inputs)
            .with_context(|| format!("cannot remove {}", inputs.display()))?;
    }
    say.line(render(&results, a.memory));
    if let Some(load) = load_average() {
        say.line(format!("# load average at the end (1, 5, 15 min): {load}"));
    }
    say.line(format!(
        "(benchmark took {:.0} s)",
        started.elapsed().as_secs_f64()
    ));
    say.line(format!(
        "\nBigger inputs: --log2 26,28 --runs 1 (time about linear in n; each party's memory \
         stays within --memory, which sets the bucket size). Disk: the two inputs ({:.0} B per \
         row each) and each party's spool (48 B per row) while it runs; --work-dir DIR puts \
         them on a disk with room.",
        csv_bytes_per_row.unwrap_or(0.0)
    ));
    say.result(&serde_json::json!({
        "benchmark": "psikit bench job",
        "tables": super::table::collected(),
    }))
}

/// Writes the two inputs of 2^log2 rows each into `dir`; returns the
/// sender file's bytes per row.
fn generate(dir: &Path, log2: u32) -> Result<f64> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let n = 1u64 << log2;
    let t = Instant::now();
    let sender = dir.join("sender.csv");
    write_synthetic_csv(&sender, 0..n, SEED)?;
    write_synthetic_csv(dir.join("receiver.csv"), n / 2..n / 2 + n, SEED)?;
    let bytes = std::fs::metadata(&sender)
        .with_context(|| format!("cannot read {}", sender.display()))?
        .len();
    eprintln!(
        "generated two inputs of 2^{log2} rows sharing 2^{} ({} each) in {:.1} s",
        log2.saturating_sub(1),
        report::bytes(bytes),
        t.elapsed().as_secs_f64()
    );
    Ok(bytes as f64 / n as f64)
}

fn one_run(
    exe: &Path,
    a: &JobBenchArgs,
    cfg: Config,
    inputs: &Path,
    run_dir: &Path,
) -> Result<Run> {
    let mut args: Vec<String> = vec![
        "bench".into(),
        "job-worker".into(),
        "--protocol".into(),
        a.protocol.to_string(),
        "--log2".into(),
        cfg.log2.to_string(),
        "--inputs".into(),
        inputs.display().to_string(),
        "--run-dir".into(),
        run_dir.display().to_string(),
        "--memory".into(),
        a.memory.to_string(),
        "--lanes".into(),
        cfg.lanes.to_string(),
    ];
    if a.malicious {
        args.push("--malicious".into());
    }
    if let Some(app) = &a.cpsi {
        args.extend(["--cpsi".into(), app.clone()]);
    }
    if let Some(b) = a.bucket_items {
        args.extend(["--bucket-items".into(), b.to_string()]);
    }
    spawn_pair(exe, &args, cfg.threads)
}

/// The 1, 5 and 15 minute load averages, if the OS reports them.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(" "))
}

fn render(results: &[(Config, Vec<Run>)], memory: u64) -> String {
    let mut t = TextTable::new(&[
        "n",
        "threads/party",
        "lanes",
        "party",
        "wall",
        "read",
        "split",
        "buckets",
        "output",
        "µs/item",
        "CPU s",
        "peak RSS",
        "peak B/item",
        "of --memory",
        "spool on disk",
    ]);
    for (cfg, runs) in results {
        let n = (1u64 << cfg.log2) as f64;
        for (receiver, party) in [(false, "sender"), (true, "receiver")] {
            let m = |key: &str| med(runs, receiver, key);
            t.row(vec![
                format!("2^{}", cfg.log2),
                cfg.threads.to_string(),
                cfg.lanes.to_string(),
                party.into(),
                time(m("wall")),
                time(m("read")),
                time(m("split")),
                time(m("buckets")),
                time(m("output")),
                num(m("wall").map(|s| s * 1e6 / n), 2),
                num(m("cpu"), 2),
                size(m("peak")),
                num(m("peak").map(|b| b / n), 0),
                m("peak").map_or("-".into(), |b| format!("{:.0}%", b * 100.0 / memory as f64)),
                size(m("spool")),
            ]);
        }
    }
    let mut shape = TextTable::new(&[
        "n",
        "threads/party",
        "lanes",
        "buckets",
        "capacity S / R",
        "padded / rows",
        "receiver → sender",
        "sender → receiver",
        "bits/item",
        "matched rows (R)",
    ]);
    for (cfg, runs) in results {
        let n = (1u64 << cfg.log2) as f64;
        let buckets = med(runs, true, "bucket_count");
        let (cap_s, cap_r) = (
            med(runs, true, "sender_capacity"),
            med(runs, true, "receiver_capacity"),
        );
        let padded = match (buckets, cap_s, cap_r) {
            (Some(b), Some(s), Some(r)) => format!("{:.4} / {:.4}", b * s / n, b * r / n),
            _ => "-".into(),
        };
        shape.row(vec![
            format!("2^{}", cfg.log2),
            cfg.threads.to_string(),
            cfg.lanes.to_string(),
            count(buckets),
            format!("{} / {}", count(cap_s), count(cap_r)),
            padded,
            size(med(runs, true, "sent")),
            size(med(runs, false, "sent")),
            num(med_both(runs, |s, r| (s + r) * 8.0 / n, "sent"), 0),
            count(med(runs, true, "matched")),
        ]);
    }
    let reconnects: f64 = results
        .iter()
        .flat_map(|(_, runs)| runs)
        .filter_map(|(s, r)| Some(s.get("reconnects")? + r.get("reconnects")?))
        .sum();
    let mut out = format!(
        "## Bucketed PSI jobs on loopback\n\nn rows per side, the receiver's n/2 of them \
         matched (checked on every run; with circuit PSI its opened result). Wall = the party's whole job, from its CSV file to \
         its output; the sender starts first and its wall includes waiting for the receiver's \
         read pass (the receiver starts once the sender listens, which is after its read), so \
         the receiver's wall is the job's. Buckets = the protocol runs, waits for the peer \
         included; output is the receiver's (the sender learns nothing). µs/item = wall / n. \
         Peak RSS is each process's VmHWM; \"of --memory\" compares it with the budget that \
         sized the buckets. Spool on disk is measured: the files of the party's job directory \
         summed when the bucket stage starts, right after the split (the key file and every \
         bucket file, 24 B per row each, plus 48 B per file and the journal's few small \
         files).\n\n{}",
        t.render()
    );
    out.push_str(&format!(
        "\n## Buckets and traffic\n\nCapacity = each side's padded bucket size (overflow \
         probability at most 2^-40); padded / rows = buckets × capacity / n, the dummies' \
         overhead. bits/item = both directions × 8 / n. Each bucket runs at statistical \
         security σ = 40 + log2(buckets), so that the job's false matches and failures add up \
         to at most 2^-40.\n\n{}",
        shape.render()
    ));
    if reconnects > 0.0 {
        out.push_str(&format!(
            "\n{reconnects:.0} reconnection(s) over all runs: the link dropped on loopback.\n"
        ));
    }
    out
}
