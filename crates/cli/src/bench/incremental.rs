//! `psikit bench incremental`: balanced incremental matching through the
//! filter protocol. Two parties of `2^log2` items each match once in full
//! (the key holder builds its filter, the other party downloads it and
//! queries every item, keeping a tag cache), then each side changes a
//! percentage of its items and they match again: the key holder updates
//! its filter (a delta), the other party syncs the delta and asks only for
//! its new items. The table compares the two runs' time and bytes.
//!
//! Both parties run in this process over loopback TCP, from items in
//! memory (reading and writing files is the same in both runs and left
//! out), on the global rayon pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use clap::Args;
use psikit_protocols::common::connect::{runtime, ServerAddr};
use psikit_protocols::filter_psi::{
    tags_for_items, FilterClient, FilterConfig, FilterService, ServerState,
};
use psikit_protocols::oprf::ServerKey;
use psikit_protocols::service::{LocalServer, Router, ServerLimits, Service};
use psikit_protocols::{io, NoProgress};
use rand::rngs::OsRng;

use super::harness::item;
use super::table::{finish, TextTable};
use crate::report;

/// Options of `psikit bench incremental`.
#[derive(Args, Clone, Debug)]
pub struct IncrementalBenchArgs {
    /// Each party holds 2^LOG2 items, half of them shared (24 takes
    /// about 20 minutes here; 20 a minute).
    #[arg(long, default_value_t = 20)]
    log2: u32,
    /// Percentage of each party's items replaced before the second run.
    #[arg(long, default_value_t = 1.0)]
    change_percent: f64,
    #[command(flatten)]
    pub json: crate::args::JsonArgs,
}

/// The key holder's work in one run, by phase.
#[derive(Default)]
struct KeyHolder {
    /// Its items' OPRF (for an update, the added and the removed ones).
    oprf: Duration,
    /// Building the filter, or updating it and the sorted tags.
    filter: Duration,
    /// Writing the state file (atomically, synced).
    save: Duration,
    /// The server reading the state file: its first load, or the reload
    /// after the update.
    load: Duration,
}

impl KeyHolder {
    fn total(&self) -> Duration {
        self.oprf + self.filter + self.save + self.load
    }
}

/// One of a [`KeyHolder`]'s phases (or their total), for the table.
type Phase = fn(&KeyHolder) -> Duration;

/// Runs `work`, adding its time to `phase`.
fn timed<T>(phase: &mut Duration, work: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = work();
    *phase += t.elapsed();
    out
}

/// One run's costs.
struct Run {
    server: KeyHolder,
    /// The other party's sync and query, wall time.
    client: Duration,
    sent: u64,
    received: u64,
    /// Items the key holder evaluated for the query (the canary included).
    evaluated: u64,
}

/// The two parties' sets: ids, the key holder's `0..n` and the other's
/// `n/2..3n/2`; a change replaces `m` of each (the key holder's first `m`,
/// the other's last `m`) with new ids, half of the other's new ones among
/// the key holder's.
struct Sets {
    server: Vec<u64>,
    client: Vec<u64>,
}

impl Sets {
    fn new(n: u64) -> Self {
        Self {
            server: (0..n).collect(),
            client: (n / 2..n / 2 + n).collect(),
        }
    }

    /// Replaces `m` items on each side; returns the key holder's removed
    /// and added ids.
    fn change(&mut self, m: u64) -> (Vec<u64>, Vec<u64>) {
        let n = self.server.len() as u64;
        let removed: Vec<u64> = self.server.drain(..m as usize).collect();
        let added: Vec<u64> = (0..m).map(|j| 4 * n + j).collect();
        self.server.extend(&added);
        self.client.truncate(self.client.len() - m as usize);
        // Half the new ones the key holder just added, half unknown to it.
        self.client
            .extend((0..m).map(|j| if j % 2 == 0 { 4 * n + j } else { 8 * n + j }));
        (removed, added)
    }

    fn truth(&self) -> usize {
        let held: std::collections::HashSet<u64> = self.server.iter().copied().collect();
        self.client.iter().filter(|id| held.contains(id)).count()
    }
}

fn items(ids: &[u64]) -> Vec<io::Item> {
    ids.iter()
        .map(|&id| io::Item {
            key: item(id),
            row: id + 1,
        })
        .collect()
}

fn keys(ids: &[u64]) -> Vec<Vec<u8>> {
    ids.iter().map(|&id| item(id)).collect()
}

pub fn run(a: &IncrementalBenchArgs) -> Result<()> {
    ensure!((4..=26).contains(&a.log2), "--log2 must be 4 to 26");
    ensure!(
        a.change_percent > 0.0 && a.change_percent <= 50.0,
        "--change-percent must be above 0 and at most 50"
    );
    let started = Instant::now();
    super::table::collect();
    let say = a.json.say();
    let n = 1u64 << a.log2;
    let m = ((n as f64 * a.change_percent / 100.0) as u64).max(2);
    let dir = tempfile::tempdir()?;
    let mut sets = Sets::new(n);
    say.line(format!(
        "two parties of 2^{} items, then {}% changed on each side ({m} items)",
        a.log2, a.change_percent
    ));

    let mut setup = KeyHolder::default();
    let key = ServerKey::generate(&mut OsRng);
    let tags = timed(&mut setup.oprf, || {
        tags_for_items(&key, &items(&sets.server))
    })?;
    let build = || ServerState::build(key, tags, FilterConfig::default());
    let (mut state, _) = timed(&mut setup.filter, build)?;
    timed(&mut setup.save, || state.save(dir.path()))?;
    let open = || FilterService::open(dir.path(), ServerLimits::default());
    let service = Arc::new(timed(&mut setup.load, open)?);

    let rt = runtime()?;
    let mut router = Router::new(ServerLimits::default());
    router.register(service.clone())?;
    let server = rt.block_on(LocalServer::start(router, Default::default()))?;
    let addr = ServerAddr {
        addr: server.addr().to_string(),
        tls: None,
        limits: Default::default(),
    };
    let mut client = FilterClient::in_memory(1 << 34).with_tag_cache(&dir.path().join("tags"))?;
    let full = client_run(&rt, &mut client, &addr, &sets, setup)?;

    let (removed, added) = sets.change(m);
    let mut update = KeyHolder::default();
    let add = timed(&mut update.oprf, || {
        tags_for_items(state.key(), &items(&added))
    })?;
    let remove = timed(&mut update.oprf, || {
        tags_for_items(state.key(), &items(&removed))
    })?;
    timed(&mut update.filter, || state.update(add, remove))?;
    timed(&mut update.save, || state.save(dir.path()))?;
    timed(&mut update.load, || service.reload())?;
    let changed = client_run(&rt, &mut client, &addr, &sets, update)?;
    finish(say, "incremental", report(a, &full, &changed), started)
}

/// The other party's query (a sync, then the items), checked against the
/// truth; the filter's false positives (2^-30 per item) are allowed.
fn client_run(
    rt: &tokio::runtime::Runtime,
    client: &mut FilterClient,
    addr: &ServerAddr,
    sets: &Sets,
    server: KeyHolder,
) -> Result<Run> {
    let keys = keys(&sets.client);
    let t = Instant::now();
    let done = rt.block_on(client.query_at(addr, &keys, &NoProgress))?;
    let spent = t.elapsed();
    let (found, truth) = (
        done.outcome.matches.iter().filter(|m| **m).count(),
        sets.truth(),
    );
    ensure!(
        found >= truth && found <= truth + 2,
        "found {found} matches, the truth is {truth}"
    );
    Ok(Run {
        server,
        client: spent,
        sent: done.outcome.bytes_sent,
        received: done.outcome.bytes_received
            + done.syncs.iter().map(|s| s.body_bytes).sum::<u64>(),
        evaluated: keys.len() as u64 - done.outcome.cached + 1,
    })
}

fn report(a: &IncrementalBenchArgs, full: &Run, changed: &Run) -> String {
    let mut table = TextTable::new(&[
        "",
        "full run",
        &format!("after a {}% change", a.change_percent),
        "ratio",
    ]);
    let mut row = |name: &str, x: f64, y: f64, cell: &dyn Fn(f64) -> String| {
        let ratio = format!("{:.2}%", 100.0 * y / x.max(f64::MIN_POSITIVE));
        table.row(vec![name.to_string(), cell(x), cell(y), ratio]);
    };
    let time = |s: f64| report::secs(Duration::from_secs_f64(s));
    let size = |b: f64| report::bytes(b as u64);
    let count = |c: f64| format!("{c:.0}");
    let secs = |d: Duration| d.as_secs_f64();
    let phases: [(&str, Phase); 5] = [
        ("key holder: OPRF", |k| k.oprf),
        ("key holder: filter build / update", |k| k.filter),
        ("key holder: state file written", |k| k.save),
        ("key holder: state file loaded by the server", |k| k.load),
        ("key holder: all", KeyHolder::total),
    ];
    for (name, phase) in phases {
        row(
            name,
            secs(phase(&full.server)),
            secs(phase(&changed.server)),
            &time,
        );
    }
    row(
        "other party: sync + query (wall)",
        secs(full.client),
        secs(changed.client),
        &time,
    );
    row(
        "both, time",
        secs(full.server.total() + full.client),
        secs(changed.server.total() + changed.client),
        &time,
    );
    row(
        "bytes to the key holder",
        full.sent as f64,
        changed.sent as f64,
        &size,
    );
    row(
        "bytes from the key holder (filter or delta, answers)",
        full.received as f64,
        changed.received as f64,
        &size,
    );
    row(
        "items the key holder evaluated for the query",
        full.evaluated as f64,
        changed.evaluated as f64,
        &count,
    );
    table.render()
}
