//! `psikit bench load`: many concurrent clients against one `psikit serve`
//! holding a filter state and an HE database, with hostile clients mixed
//! in; every legitimate answer is checked against the truth.
//!
//! The server is this binary's `serve` in its own process (set up with
//! `filter setup` and `he db build`, as a user would), so its peak memory
//! is its own `VmHWM`. Clients are threads of this process, each opening
//! its own connection through the protocols' blocking entries (which retry
//! a "server busy" answer with backoff). Hostile clients hold half-open
//! connections, trickle a frame one byte at a time, announce oversized
//! frames or send garbage, for the whole run.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use psikit_protocols::common::connect::ServerAddr;
use psikit_protocols::filter_psi::FilterClient;
use psikit_protocols::he_psi::{facade as he, presets::apsi_preset};
use psikit_protocols::NoProgress;

use super::harness::item;
use super::table::{size, TextTable};
use crate::report;

/// Options of `psikit bench load`.
#[derive(Args, Clone, Debug)]
pub struct LoadBenchArgs {
    /// Legitimate clients, all started at once (half filter, half HE).
    #[arg(long, default_value_t = 256)]
    clients: usize,
    /// Hostile clients running alongside them.
    #[arg(long, default_value_t = 32)]
    hostile: usize,
    /// Items in the server's filter set (its HE database holds 4,096).
    #[arg(long, default_value_t = 1 << 16)]
    server_items: u64,
    /// Items per client query.
    #[arg(long, default_value_t = 64)]
    client_items: u64,
    /// The server's connection limit (`psikit serve --max-connections`;
    /// default: the server's own). Below the number of clients, the extra
    /// ones are told "busy" and retry with backoff.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Run the server as in production: its admin listener scraped every
    /// second and JSON log events at info level written to a file (else
    /// no admin listener and errors only), to measure what they cost.
    #[arg(long)]
    ops: bool,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// Items of the HE database: small, so that 128 HE queries take seconds.
const HE_ITEMS: u64 = 4096;
/// The APSI parameter preset of the HE database.
const HE_PRESET: &str = "256K-1024";

/// A running `psikit serve`, killed on drop.
struct Server {
    child: Child,
    addr: String,
    /// Its admin listener's address, with `--ops`.
    admin: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one legitimate client saw.
struct Outcome {
    he: bool,
    latency: Duration,
    error: Option<String>,
}

pub fn run(a: &LoadBenchArgs) -> Result<()> {
    let say = a.json.say();
    super::table::collect();
    ensure!(a.clients >= 2, "--clients must be at least 2");
    ensure!(
        a.server_items >= 2 * a.client_items && HE_ITEMS >= 2 * a.client_items,
        "the server sets must be at least twice --client-items"
    );
    let dir = tempfile::tempdir()?;
    say.line(format!(
        "# psikit bench load: {} clients ({} filter, {} HE) and {} hostile, one server \
         (filter 2^{:.0} items, HE {HE_ITEMS} items, {HE_PRESET}), connection limit {}",
        a.clients,
        a.clients - a.clients / 2,
        a.clients / 2,
        a.hostile,
        (a.server_items as f64).log2(),
        a.max_connections
            .map_or("the server's default".into(), |m| m.to_string())
    ));
    let server = start_server(dir.path(), a)?;
    let idle_peak = report::peak_memory_of(&server.child.id().to_string());
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = (server.admin.clone()).map(|admin| {
        let stop = stop.clone();
        thread::spawn(move || scrape(&admin, &stop))
    });
    let hostile: Vec<_> = (0..a.hostile)
        .map(|i| {
            let (addr, stop) = (server.addr.clone(), stop.clone());
            thread::spawn(move || hostile_client(i, &addr, &stop))
        })
        .collect();
    let started = Instant::now();
    let clients: Vec<_> = (0..a.clients)
        .map(|i| {
            let (addr, a) = (server.addr.clone(), a.clone());
            thread::spawn(move || legitimate_client(i, &addr, &a))
        })
        .collect();
    let outcomes: Vec<Outcome> = clients
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))
        })
        .collect::<Result<_>>()?;
    let wall = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for h in hostile {
        let _ = h.join();
    }
    let peak = report::peak_memory_of(&server.child.id().to_string());
    say.line(render(&outcomes, wall, idle_peak, peak));
    if let Some(scraper) = scraper {
        let scrapes = scraper.join().unwrap_or(0);
        let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
        say.line(format!(
            "ops: metrics scraped {scrapes} times, {} JSON log events",
            log.lines().count()
        ));
    }
    let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.error.as_ref()).collect();
    if let Some(first) = failed.first() {
        bail!(
            "{} of {} clients failed; first: {first}",
            failed.len(),
            outcomes.len()
        );
    }
    say.result(&serde_json::json!({
        "benchmark": "psikit bench load",
        "tables": super::table::collected(),
        "wall_s": wall.as_secs_f64(),
        "queries_per_s": outcomes.len() as f64 / wall.as_secs_f64(),
        "server_peak_bytes": peak,
    }))
}

/// Sets up both states with this binary and starts `serve` on a free port.
fn start_server(dir: &Path, a: &LoadBenchArgs) -> Result<Server> {
    let exe = std::env::current_exe()?;
    let filter_csv = dir.join("filter.csv");
    write_items(&filter_csv, 0..a.server_items, false)?;
    let he_csv = dir.join("he.csv");
    write_items(&he_csv, 0..HE_ITEMS, true)?;
    let params = dir.join("params.json");
    std::fs::write(&params, apsi_preset(HE_PRESET).context("the HE preset")?)?;
    let (filter_state, he_state) = (dir.join("filter-state"), dir.join("he-state"));
    run_quiet(
        Command::new(&exe)
            .args(["filter", "setup", "--key", "email", "--input"])
            .arg(&filter_csv)
            .arg("--state")
            .arg(&filter_state),
    )?;
    run_quiet(
        Command::new(&exe)
            .args(["he", "db", "build", "--key", "email", "--label", "label"])
            .arg("--csv")
            .arg(&he_csv)
            .arg("--params")
            .arg(&params)
            .arg("--state")
            .arg(&he_state),
    )?;
    let mut serve = Command::new(&exe);
    serve.args(["serve", "--listen", "127.0.0.1:0"]);
    if let Some(m) = a.max_connections {
        serve.arg("--max-connections").arg(m.to_string());
    }
    let stderr = match a.ops {
        true => {
            serve.args(["--admin-listen", "127.0.0.1:0", "--log-format", "json"]);
            Stdio::from(std::fs::File::create(dir.join("serve.log"))?)
        }
        false => {
            serve.args(["--log-level", "error"]);
            Stdio::null()
        }
    };
    let mut child = serve
        .arg("--filter-state")
        .arg(&filter_state)
        .arg("--he-state")
        .arg(&he_state)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .context("starting psikit serve")?;
    let mut lines = BufReader::new(child.stdout.take().context("the server's output")?);
    // "psikit: serving ... on 127.0.0.1:PORT (...)", once per service,
    // then "psikit: admin on http://ADDR" with --ops.
    let (mut addr, mut admin) = (None, None);
    while addr.is_none() || (a.ops && admin.is_none()) {
        let mut line = String::new();
        if lines.read_line(&mut line)? == 0 {
            bail!("the server ended before announcing its addresses");
        }
        for word in line.split_whitespace() {
            match word.strip_prefix("http://") {
                Some(at) => admin = Some(at.to_string()),
                None if word.starts_with("127.0.0.1:") => addr = Some(word.to_string()),
                None => {}
            }
        }
    }
    // Keep reading whatever else it prints, so it never writes to a closed
    // pipe.
    thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let addr = addr.context("no address announced")?;
    Ok(Server { child, addr, admin })
}

/// Reads `/metrics` from the admin listener at `admin` every second until
/// `stop`, as Prometheus would; returns the scrapes that succeeded.
fn scrape(admin: &str, stop: &AtomicBool) -> usize {
    let mut scrapes = 0;
    while !stop.load(Ordering::Relaxed) {
        let got = TcpStream::connect(admin).and_then(|mut s| {
            write!(s, "GET /metrics HTTP/1.0\r\n\r\n")?;
            let mut text = String::new();
            std::io::Read::read_to_string(&mut s, &mut text)?;
            Ok(text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"))
        });
        scrapes += usize::from(got.unwrap_or(false));
        thread::sleep(Duration::from_secs(1));
    }
    scrapes
}

/// A CSV of `email` (and `label`) for the item ids.
fn write_items(path: &Path, ids: std::ops::Range<u64>, labels: bool) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{}", if labels { "email,label" } else { "email" })?;
    for id in ids {
        let email = String::from_utf8(item(id))?;
        match labels {
            true => writeln!(out, "{email},label{id}")?,
            false => writeln!(out, "{email}")?,
        }
    }
    out.flush()?;
    Ok(())
}

fn run_quiet(cmd: &mut Command) -> Result<()> {
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// Client `i`: even clients query the filter, odd ones the HE database,
/// each with half members (ids spread by `i`) and half strangers, and
/// checks the answer (labels too).
fn legitimate_client(i: usize, addr: &str, a: &LoadBenchArgs) -> Outcome {
    let he = i % 2 == 1;
    let members = if he { HE_ITEMS } else { a.server_items };
    let half = a.client_items / 2;
    let ids: Vec<u64> = (0..a.client_items)
        .map(|j| match j < half {
            true => (i as u64 * 7919 + j * 104_729) % members,
            false => 1 << 40 | (i as u64) << 20 | j,
        })
        .collect();
    let keys: Vec<Vec<u8>> = ids.iter().map(|&id| item(id)).collect();
    let server = ServerAddr::plain(addr);
    let t = Instant::now();
    let error = match he {
        false => check_filter(&server, &keys, half),
        true => check_he(&server, &keys, &ids, half),
    }
    .err()
    .map(|e| format!("client {i}: {e}"));
    Outcome {
        he,
        latency: t.elapsed(),
        error,
    }
}

fn check_filter(server: &ServerAddr, keys: &[Vec<u8>], half: u64) -> Result<()> {
    let mut client = FilterClient::in_memory(1 << 30);
    let out = client.query_blocking(server, keys, &NoProgress)?;
    let found = out.outcome.matches;
    // Members must match; a stranger may match only by a false positive.
    ensure!(
        found[..half as usize].iter().all(|&m| m),
        "a member was not found"
    );
    Ok(())
}

fn check_he(server: &ServerAddr, keys: &[Vec<u8>], ids: &[u64], half: u64) -> Result<()> {
    let session = he::query_blocking(server, keys, &Default::default(), &NoProgress)?;
    let mut found = vec![false; keys.len()];
    for m in &session.matches {
        found[m.index] = true;
        if m.index < half as usize {
            let want = format!("label{}", ids[m.index]);
            let label = m.label.as_deref().map(he::label_fields);
            ensure!(
                label.as_ref().and_then(|f| f.first()).map(Vec::as_slice) == Some(want.as_bytes()),
                "a wrong label"
            );
        }
    }
    ensure!(
        found[..half as usize].iter().all(|&m| m),
        "a member was not found"
    );
    Ok(())
}

/// Hostile client `i` until `stop`: by `i % 4`, a half-open connection,
/// a frame trickled a byte every 100 ms, an oversized length prefix, or
/// random bytes; each reconnects when the server drops it.
fn hostile_client(i: usize, addr: &str, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect(addr) else {
            thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        let payload: Vec<u8> = match i % 4 {
            0 => Vec::new(),
            1 => vec![0, 0, 0, 9, 1, 1, 1, 0, 0, 0, 0, 0, 0],
            2 => vec![0xff; 16],
            _ => (0..4096u32)
                .map(|k| (k.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
        };
        let trickle = i % 4 == 1;
        let mut alive = true;
        if trickle {
            for b in &payload {
                if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                    alive = false;
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        } else {
            alive = s.write_all(&payload).is_ok();
        }
        // Hold the connection until the server drops it or the run ends.
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 256];
        while alive && !stop.load(Ordering::Relaxed) {
            match std::io::Read::read(&mut s, &mut buf) {
                Ok(0) => alive = false,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => alive = false,
            }
        }
    }
}

fn render(
    outcomes: &[Outcome],
    wall: Duration,
    idle_peak: Option<u64>,
    peak: Option<u64>,
) -> String {
    let mut t = TextTable::new(&["service", "clients", "failed", "p50", "p99", "max"]);
    for (name, he) in [("filter", false), ("HE", true)] {
        let mut lat: Vec<Duration> = outcomes
            .iter()
            .filter(|o| o.he == he)
            .map(|o| o.latency)
            .collect();
        lat.sort();
        let failed = outcomes
            .iter()
            .filter(|o| o.he == he && o.error.is_some())
            .count();
        let pct = |p: usize| lat.get((lat.len() * p / 100).min(lat.len().saturating_sub(1)));
        let show = |d: Option<&Duration>| d.map_or("-".into(), |d| report::secs(*d));
        t.row(vec![
            name.into(),
            lat.len().to_string(),
            failed.to_string(),
            show(pct(50)),
            show(pct(99)),
            show(lat.last()),
        ]);
    }
    let mem = |m: Option<u64>| m.map_or("-".into(), |b| size(Some(b as f64)));
    format!(
        "## Load: legitimate clients, all started at once\n\n{}\nall done in {} ({:.1} \
         queries/s); server peak memory {} (after set-up and start: {})",
        t.render(),
        report::secs(wall),
        outcomes.len() as f64 / wall.as_secs_f64(),
        mem(peak),
        mem(idle_peak)
    )
}
