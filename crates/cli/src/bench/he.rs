//! `psikit bench he`: the HE protocol (APSI design) on loopback TCP.
//!
//! Each case (parameters, server size, label length, threads) runs in its
//! own worker process of this binary with `RAYON_NUM_THREADS` set, so a
//! case's peak memory is its process's `VmHWM` and "one thread" means one
//! per party (the client has a pool of its own, see [`queries`]).
//! The worker builds the database (OPRF, then placement and polynomials,
//! then the plaintext cache), saves and reloads it, starts the service on
//! loopback and queries it with clients of each size, checking matches and
//! labels against the truth. Figures are printed as `name value` lines and
//! tabulated by the parent.
//!
//! Server items are `user{id}@example.com` for ids `0..n`; item `id`'s
//! label is the first `L` bytes of `label{id}` repeated. A client of size
//! `m` holds `m/2` members (spread over the set) and `m - m/2` strangers.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use clap::Args;
use psikit_protocols::common::connect::{runtime, ServerAddr};
use psikit_protocols::common::Limits;
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::presets::apsi_preset;
use psikit_protocols::he_psi::select::{select, Goal, SelectionInput};
use psikit_protocols::he_psi::{HeClient, HeService, HeState};
use psikit_protocols::service::{LocalServer, ServerLimits};

use super::harness::{item, median_of, run_worker, scatter, Metrics};
use super::table::{size, time, TextTable};

/// One benchmark case: which parameters, server size, labels.
#[derive(Clone, Debug)]
struct Case {
    params: String,
    log2: u32,
    label_bytes: usize,
    clients: Vec<u64>,
    /// APSI 0.12 on this machine, one thread (issue 4), where measured:
    /// (client size, online s, up MB, down MB, memory GB).
    apsi: Option<(u64, f64, f64, f64, f64)>,
}

/// The side-by-side cases on APSI's own parameter files.
fn apsi_cases() -> Vec<Case> {
    vec![
        Case {
            params: "256K-1024".into(),
            log2: 16,
            label_bytes: 0,
            clients: CLIENTS.to_vec(),
            apsi: Some((1024, 0.73, 1.07, 0.27, f64::NAN)),
        },
        Case {
            params: "1M-1024-cmp".into(),
            log2: 20,
            label_bytes: 0,
            clients: CLIENTS.to_vec(),
            apsi: Some((1024, 3.26, 2.20, 1.68, 1.4)),
        },
        Case {
            params: "1M-1-32".into(),
            log2: 20,
            label_bytes: 16,
            clients: vec![1, 256],
            apsi: Some((1, 2.67, 1.30, 1.38, 2.1)),
        },
    ]
}

/// Client sizes of the matrix.
const CLIENTS: [u64; 4] = [1, 256, 1024, 4096];

/// Cases on parameters psikit selects itself: the matrix of server sizes,
/// label lengths and client sizes on the default `time` goal (one database
/// per server size and label length, chosen for the largest client), the
/// `comm` goal next to two of APSI's files, and the `comm` goal on the
/// paper's labeled cases (32-byte labels, 4096-item clients; Table 4).
fn auto_cases() -> Vec<Case> {
    let case = |goal: &str, log2, label_bytes, clients: &[u64]| Case {
        params: format!("auto-{goal}"),
        log2,
        label_bytes,
        clients: clients.to_vec(),
        apsi: None,
    };
    let mut cases = Vec::new();
    for log2 in [16, 20, 22] {
        for label_bytes in [0, 16, 32] {
            cases.push(case("time", log2, label_bytes, &CLIENTS));
        }
    }
    cases.push(case("comm", 20, 0, &[1024]));
    cases.push(case("comm", 20, 16, &[1]));
    cases.push(case("comm", 20, 32, &[4096]));
    cases.push(case("comm", 22, 32, &[4096]));
    cases
}

/// Options of `psikit bench he`.
#[derive(Args, Clone, Debug)]
pub struct HeBenchArgs {
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    threads: Vec<usize>,
    /// Query runs per client size; medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Only the cases on these APSI parameter files (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Server sizes (log2) to run; 22 takes about 5 minutes and up to
    /// 10 GB per case, so it is not in the default.
    #[arg(long, value_delimiter = ',', default_values_t = [16u32, 20])]
    log2: Vec<u32>,
    /// A fast smoke run: the 2^16 cases, one thread, one run.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// One case in its own process.
#[derive(Args, Clone, Debug)]
pub struct HeWorkerArgs {
    /// An APSI parameter file shipped with psikit, by name, or
    /// `auto-time` / `auto-comm` for psikit's own selection.
    #[arg(long)]
    params: String,
    #[arg(long)]
    log2: u32,
    #[arg(long)]
    label_bytes: usize,
    #[arg(long, value_delimiter = ',')]
    clients: Vec<u64>,
    #[arg(long)]
    runs: usize,
    /// Where to save and reload the database.
    #[arg(long)]
    dir: PathBuf,
}

pub fn run(a: &HeBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    let mut cases = apsi_cases();
    cases.extend(auto_cases());
    let threads = if a.quick { vec![1] } else { a.threads.clone() };
    let runs = if a.quick { 1 } else { a.runs.max(1) };
    let sizes = if a.quick { vec![16] } else { a.log2.clone() };
    cases.retain(|c| sizes.contains(&c.log2));
    if let Some(only) = &a.only {
        cases.retain(|c| only.contains(&c.params));
    }
    ensure!(!cases.is_empty(), "no benchmark case selected");
    let exe = std::env::current_exe().context("cannot find the psikit executable")?;
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    say.line("# psikit bench he: server and client in one process per case, loopback TCP");
    say.line(format!("# {runs} query run(s) per client size, medians\n"));
    let started = Instant::now();
    let mut results = Vec::new();
    for case in &cases {
        for &t in &threads {
            eprintln!("he {} n=2^{}, {t} thread(s)", case.params, case.log2);
            let dir = work.path().join(format!(
                "{}-{}-{}-{t}",
                case.params, case.log2, case.label_bytes
            ));
            let out = run_worker(
                Command::new(&exe)
                    .args(["bench", "he-worker", "--params", &case.params])
                    .args(["--log2", &case.log2.to_string()])
                    .args(["--label-bytes", &case.label_bytes.to_string()])
                    .args(["--clients", &join(&case.clients)])
                    .args(["--runs", &runs.to_string()])
                    .arg("--dir")
                    .arg(&dir)
                    .env("RAYON_NUM_THREADS", t.to_string()),
            )?;
            let m = Metrics::decode(&String::from_utf8_lossy(&out.stdout))?;
            results.push((case.clone(), t, m));
        }
    }
    super::table::finish(say, "he", render(&results), started)
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

/// The label of server item `id`: `label{id}` repeated to `len` bytes.
pub(super) fn label(id: u64, len: usize) -> Vec<u8> {
    format!("label{id}").bytes().cycle().take(len).collect()
}

/// Entry point of the hidden `psikit bench he-worker`.
pub fn worker(a: &HeWorkerArgs) -> Result<()> {
    let n = 1u64 << a.log2;
    let mut m = Metrics::default();
    let params = case_params(a, n, &mut m)?;
    build(&params, n, a, &mut m)?;
    let state = reload(a, &mut m)?;
    m.set_peak_memory("build.peak_bytes");
    queries(state, n, a, &mut m)?;
    m.set_peak_memory("peak_bytes");
    print!("{}", m.encode());
    Ok(())
}

/// The case's parameters: a shipped APSI file, or psikit's selection for
/// the case's largest client (whose explanation goes to stderr).
fn case_params(a: &HeWorkerArgs, n: u64, m: &mut Metrics) -> Result<PsiParams> {
    let goal = match a.params.as_str() {
        "auto-time" => Goal::Time,
        "auto-comm" => Goal::Comm,
        name => {
            let json = apsi_preset(name).with_context(|| format!("no preset {name}"))?;
            return Ok(PsiParams::from_apsi_json(json)?);
        }
    };
    let clients = a.clients.iter().copied().max().unwrap_or(1);
    let mut input = SelectionInput::new(n, clients, a.label_bytes);
    input.goal = goal;
    let t = Instant::now();
    let selection = select(&input)?;
    m.set("select_secs", t.elapsed().as_secs_f64());
    eprintln!("{selection}");
    Ok(selection.params)
}

/// Builds the database, timing each phase, and saves it.
fn build(params: &PsiParams, n: u64, a: &HeWorkerArgs, m: &mut Metrics) -> Result<()> {
    let mut state = HeState::create(params.clone(), a.label_bytes, true)?;
    let keys: Vec<Vec<u8>> = (0..n).map(item).collect();
    let labels: Vec<Vec<u8>> = (0..n).map(|id| label(id, a.label_bytes)).collect();
    let t = Instant::now();
    let outputs = state.evaluate(keys.iter().map(Vec::as_slice), &mut |_| Ok(()))?;
    m.set("build.oprf_secs", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let refs: Vec<&[u8]> = labels.iter().map(Vec::as_slice).collect();
    drop(keys);
    let stats = state.insert_evaluated(&outputs, &refs)?;
    m.set("build.db_secs", t.elapsed().as_secs_f64());
    ensure!(
        stats.inserted as u64 == n,
        "inserted {} of {n}",
        stats.inserted
    );
    let mem = state.memory();
    m.set("db.bundles", mem.bundles as f64);
    m.set("db.data_bytes", mem.data_bytes as f64);
    m.set("db.cache_bytes", mem.cache_bytes as f64);
    m.set(
        "db.max_bundles_per_index",
        state.bundle_counts().into_iter().max().unwrap_or(0) as f64,
    );
    let t = Instant::now();
    state.save(&a.dir)?;
    m.set("db.save_secs", t.elapsed().as_secs_f64());
    let file = std::fs::metadata(a.dir.join("he.db"))?.len();
    m.set("db.file_bytes", file as f64);
    Ok(())
}

/// Loads the saved database back (the path a restarted server takes).
fn reload(a: &HeWorkerArgs, m: &mut Metrics) -> Result<HeState> {
    let t = Instant::now();
    let state = HeState::load(&a.dir, true)?;
    m.set("db.load_secs", t.elapsed().as_secs_f64());
    Ok(state)
}

/// Client `j`'s id against a server set `0..n`: even `j` are members.
pub(super) fn client_ids(size: u64, n: u64) -> Vec<(u64, bool)> {
    (0..size)
        .map(|j| {
            if j % 2 == 0 {
                (scatter(j / 2, n), true)
            } else {
                (n + j, false)
            }
        })
        .collect()
}

/// Serves `state` on loopback and queries it with each client size. The
/// client is another machine: it runs on a rayon pool of its own, as large
/// as the server's, and its own runtime. On the server's pool its
/// decryption would queue behind the server's evaluation (with one
/// thread, in series with it), which no deployment does.
fn queries(state: HeState, n: u64, a: &HeWorkerArgs, m: &mut Metrics) -> Result<()> {
    let server_rt = runtime()?;
    let service = Arc::new(HeService::new(state, ServerLimits::default()));
    let server = server_rt.block_on(LocalServer::serving(service))?;
    let addr = server.addr().to_string();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(rayon::current_num_threads())
        .thread_name(|i| format!("client-{i}"))
        .build()
        .context("cannot start the client's thread pool")?;
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?;
    let queried = pool.install(|| client_rt.block_on(client_queries(&addr, n, a, m)));
    server_rt.block_on(async move { drop(server) });
    queried
}

/// Each client size's queries against the service at `addr`.
async fn client_queries(addr: &str, n: u64, a: &HeWorkerArgs, m: &mut Metrics) -> Result<()> {
    let limits = Limits::default();
    for &size in &a.clients {
        let ids = client_ids(size, n);
        let keys: Vec<Vec<u8>> = ids.iter().map(|&(id, _)| item(id)).collect();
        let mut ch = ServerAddr {
            addr: addr.to_owned(),
            tls: None,
            limits,
        }
        .connect()
        .await?;
        let client = HeClient::connect(&mut ch).await?;
        let mut runs = Vec::new();
        let mut failed = 0u32;
        for _ in 0..a.runs {
            let (up0, down0) = (ch.bytes_sent(), ch.bytes_received());
            let t = Instant::now();
            let out = client.query(&mut ch, &keys).await?;
            let total = t.elapsed();
            // A wrong result is reported in the table (and on stderr), not
            // hidden by aborting the other cases' figures.
            if let Err(e) = check(&out.matches, &ids, a.label_bytes) {
                eprintln!("he bench: |Y| = {size}: {e}");
                failed += 1;
            }
            runs.push((
                total,
                out.times,
                ch.bytes_sent() - up0,
                ch.bytes_received() - down0,
                out.rounds,
            ));
        }
        record(m, size, &runs);
        m.set(format!("q{size}.failed_runs"), f64::from(failed));
        m.set(format!("q{size}.fpp_log2"), client.fpp_log2(size));
    }
    Ok(())
}

type QueryRun = (
    Duration,
    psikit_protocols::he_psi::client::QueryTimes,
    u64,
    u64,
    usize,
);

fn record(m: &mut Metrics, size: u64, runs: &[QueryRun]) {
    let med = |f: &dyn Fn(&QueryRun) -> f64| median_of(runs.iter().map(f)).unwrap_or(f64::NAN);
    m.set(format!("q{size}.total_secs"), med(&|r| r.0.as_secs_f64()));
    m.set(
        format!("q{size}.oprf_secs"),
        med(&|r| r.1.oprf.as_secs_f64()),
    );
    m.set(
        format!("q{size}.encrypt_secs"),
        med(&|r| r.1.encrypt.as_secs_f64()),
    );
    m.set(
        format!("q{size}.server_secs"),
        med(&|r| r.1.server.as_secs_f64()),
    );
    m.set(
        format!("q{size}.decrypt_secs"),
        med(&|r| r.1.decrypt.as_secs_f64()),
    );
    m.set(
        format!("q{size}.waiting_secs"),
        med(&|r| r.1.waiting.as_secs_f64()),
    );
    m.set(format!("q{size}.up_bytes"), med(&|r| r.2 as f64));
    m.set(format!("q{size}.down_bytes"), med(&|r| r.3 as f64));
    m.set(format!("q{size}.rounds"), med(&|r| r.4 as f64));
}

/// Every member found with its label, no stranger reported.
pub(super) fn check(
    matches: &[psikit_protocols::Match],
    ids: &[(u64, bool)],
    label_bytes: usize,
) -> Result<()> {
    let members = ids.iter().filter(|(_, member)| *member).count();
    ensure!(
        matches.len() == members,
        "{} matches, expected {members}",
        matches.len()
    );
    for mt in matches {
        let (id, member) = ids[mt.index];
        ensure!(member, "a non-member was reported");
        if label_bytes > 0 {
            ensure!(
                mt.label.as_deref() == Some(&label(id, label_bytes)[..]),
                "wrong label"
            );
        }
    }
    Ok(())
}

fn render(results: &[(Case, usize, Metrics)]) -> String {
    let mut out = String::new();
    let mut build = TextTable::new(&[
        "params",
        "n",
        "label",
        "thr",
        "OPRF",
        "DB build",
        "save",
        "load",
        "bundles",
        "data",
        "cache",
        "per 2^20 items",
        "file",
        "peak",
    ]);
    for (c, t, m) in results {
        let per_m = |k: &str| {
            m.get(k)
                .map(|v| v * (1u64 << 20) as f64 / (1u64 << c.log2) as f64)
        };
        build.row(vec![
            c.params.clone(),
            format!("2^{}", c.log2),
            format!("{}", c.label_bytes),
            t.to_string(),
            time(m.get("build.oprf_secs")),
            time(m.get("build.db_secs")),
            time(m.get("db.save_secs")),
            time(m.get("db.load_secs")),
            format!("{}", m.get("db.bundles").unwrap_or(0.0)),
            size(m.get("db.data_bytes")),
            size(m.get("db.cache_bytes")),
            size(
                per_m("db.data_bytes")
                    .zip(per_m("db.cache_bytes"))
                    .map(|(a, b)| a + b),
            ),
            size(m.get("db.file_bytes")),
            size(m.get("peak_bytes")),
        ]);
    }
    out.push_str("## Database\n\n");
    out.push_str(&build.render());
    let mut q = TextTable::new(&[
        "params",
        "n",
        "label",
        "thr",
        "|Y|",
        "server eval",
        "up",
        "down",
        "encrypt",
        "decrypt",
        "waiting",
        "OPRF",
        "total",
        "rounds",
        "FPP",
        "check",
        "APSI online / up / down",
    ]);
    for (c, t, m) in results {
        for &size in &c.clients {
            let g = |k: &str| m.get(&format!("q{size}.{k}"));
            let apsi = match c.apsi {
                Some((s, on, up, down, _)) if s == size && *t == 1 => {
                    format!("{on:.2} s / {up:.2} MB / {down:.2} MB")
                }
                _ => String::new(),
            };
            q.row(vec![
                c.params.clone(),
                format!("2^{}", c.log2),
                format!("{}", c.label_bytes),
                t.to_string(),
                size.to_string(),
                time(g("server_secs")),
                size_mb(g("up_bytes")),
                size_mb(g("down_bytes")),
                time(g("encrypt_secs")),
                time(g("decrypt_secs")),
                time(g("waiting_secs")),
                time(g("oprf_secs")),
                time(g("total_secs")),
                format!("{}", g("rounds").unwrap_or(0.0)),
                g("fpp_log2").map_or(String::new(), |v| format!("2^{v:.1}")),
                match g("failed_runs") {
                    Some(f) if f > 0.0 => format!("FAILED in {f} run(s)"),
                    _ => "ok".into(),
                },
                apsi,
            ]);
        }
    }
    out.push_str("\n## Queries\n\n");
    out.push_str(&q.render());
    out
}

fn size_mb(bytes: Option<f64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.2} MB", b / 1e6))
}
