//! `psikit demo`: runs the protocols end to end on generated data over
//! loopback TCP and checks every result against the plaintext truth.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use psikit_io::{
    read_rows, write_overlapping_pair, write_synthetic_csv, Column, KeyReader, KeySpec, Normalize,
    Table,
};
use psikit_primitives::oprf::ServerKey;
use psikit_protocols::filter_psi::{
    tags_from_reader, ClientCache, FilterConfig, FilterService, ServerLimits, ServerState, SyncKind,
};
use psikit_protocols::rr16::{run_receiver, run_sender, Rr16Config};
use psikit_protocols::service::{self, Services};
use psikit_transport::net::{connect, Listener};
use psikit_transport::{Channel, Limits};

use crate::args::runtime;
use crate::filter_cmd::print_query;
use crate::matches::unique_keys;
use crate::report;
use crate::rr16_cmd::print_run;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Unbalanced PSI: DH OPRF + updatable cuckoo filter.
    Filter,
    /// Malicious-secure PSI: OT extension + garbled Bloom filter (RR16).
    Rr16,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Which protocol to demonstrate (default: all).
    pub protocol: Option<Protocol>,
    /// Server set size.
    #[arg(long, default_value_t = 1 << 16)]
    pub server_items: u64,
    /// Client set size.
    #[arg(long, default_value_t = 1024)]
    pub client_items: u64,
    /// How many client items are in the server's set.
    #[arg(long, default_value_t = 100)]
    pub overlap: u64,
    /// Keep generated files here instead of a temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
}

pub fn run(a: DemoArgs) -> Result<()> {
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let dir = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let all = a.protocol.is_none();
    if all || a.protocol == Some(Protocol::Filter) {
        filter_demo(&a, &dir.join("filter"))?;
    }
    if all || a.protocol == Some(Protocol::Rr16) {
        rr16_demo(&a, &dir.join("rr16"))?;
    }
    println!("\ndemo passed: every result matched the plaintext intersection");
    Ok(())
}

fn email_spec() -> KeySpec {
    let mut spec = KeySpec::new(vec![Column::Name("email".into())]);
    spec.normalize = Normalize::parse("trim,lower").unwrap_or_default();
    spec
}

/// The `id` column of the client rows whose key matched.
fn matched_ids(
    table: &Table,
    rows_of_key: &[Vec<usize>],
    matches: &[bool],
) -> Result<BTreeSet<u64>> {
    let mut ids = BTreeSet::new();
    for (rows, _) in rows_of_key.iter().zip(matches).filter(|(_, m)| **m) {
        for &r in rows {
            let field = table.rows[r].record.get(0).context("row without id")?;
            ids.insert(std::str::from_utf8(field)?.parse()?);
        }
    }
    Ok(ids)
}

fn tags_of_file(key: &ServerKey, path: &Path, spec: &KeySpec) -> Result<Vec<[u8; 16]>> {
    let mut reader = KeyReader::open(path, spec)?;
    Ok(tags_from_reader(key, &mut reader, &mut |_| {})?)
}

fn filter_demo(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("== filter: unbalanced PSI, DH OPRF (RFC 9497 ristretto255) + cuckoo filter ==");
    std::fs::create_dir_all(dir)?;
    let (server_csv, client_csv) = (dir.join("server.csv"), dir.join("client.csv"));
    let plan = write_overlapping_pair(
        &server_csv,
        &client_csv,
        a.server_items,
        a.client_items,
        a.overlap,
        a.seed,
    )?;
    println!(
        "generated {} server rows and {} client rows ({} in common) in {}",
        a.server_items,
        a.client_items,
        a.overlap,
        dir.display()
    );
    let spec = email_spec();

    // Server set-up.
    let t = Instant::now();
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let tags = tags_of_file(&key, &server_csv, &spec)?;
    let (state, _) = ServerState::build(key, tags, FilterConfig::default())?;
    let f = state.filter();
    println!(
        "server setup: {} items in {}; filter {} ({:.1} bits/item, load {:.2}, false positives per item {})",
        state.len(),
        report::secs(t.elapsed()),
        report::bytes(f.size_bytes()),
        f.bits_per_item(),
        f.load_factor(),
        report::prob(f.estimated_fpr())
    );
    let state_dir = dir.join("state");
    state.save(&state_dir)?;
    let service = Arc::new(FilterService::new(state, ServerLimits::default()));

    runtime()?.block_on(async {
        let listener = Listener::bind("127.0.0.1:0", None, Limits::default()).await?;
        let addr = listener.local_addr()?.to_string();
        let services = Arc::new(Services {
            filter: Some(service.clone()),
            ..Services::default()
        });
        let server = tokio::spawn(service::run(listener, services, 64));
        println!("server listening on {addr}");

        let table = read_rows(&client_csv, &spec)?;
        let (keys, rows_of_key) = unique_keys(&table);
        let mut ch = connect(&addr, None, Limits::default()).await?;
        let mut cache = None;
        let sync = ClientCache::sync(&mut cache, &mut ch, 1 << 32).await?;
        ensure!(
            sync.kind == SyncKind::Full,
            "first sync should download the full filter"
        );
        println!(
            "client sync: full filter, {}",
            report::bytes(sync.body_bytes)
        );
        let mut cache = cache.context("no filter")?;

        let expected: BTreeSet<u64> = plan.common_ids.iter().copied().collect();
        let out = cache.query(&mut ch, &keys).await?;
        print_query(&out);
        check(
            "initial query",
            &matched_ids(&table, &rows_of_key, &out.matches)?,
            &expected,
        )?;

        // Update: remove 1% of the server's items (some of them shared with
        // the client) and add 1% (some of them client items).
        let (removed, added) = update_plan(a, &plan.common_ids, &plan.client_ids);
        let (add_csv, remove_csv) = (dir.join("add.csv"), dir.join("remove.csv"));
        write_synthetic_csv(&add_csv, added.iter().copied(), a.seed)?;
        write_synthetic_csv(&remove_csv, removed.iter().copied(), a.seed)?;
        let mut state = ServerState::load(&state_dir)?;
        let t = Instant::now();
        let add = tags_of_file(state.key(), &add_csv, &spec)?;
        let remove = tags_of_file(state.key(), &remove_csv, &spec)?;
        let upd = state.update(add, remove)?;
        state.save(&state_dir)?;
        service.publish(state);
        println!(
            "server update: +{} -{} items in {}, {} filter slots changed, epoch {}",
            upd.added,
            upd.removed,
            report::secs(t.elapsed()),
            upd.changed_slots,
            upd.epoch
        );

        // The client's filter is now stale: the server must say so.
        match cache.query(&mut ch, &keys).await {
            Err(e) if e.is_stale() => {
                println!("client query with the old filter: refused as stale ({e})")
            }
            Err(e) => bail!("expected a stale-filter error, got: {e}"),
            Ok(_) => bail!("the server answered a query against a stale filter"),
        }
        let mut c = Some(cache);
        let sync = ClientCache::sync(&mut c, &mut ch, 1 << 32).await?;
        ensure!(
            sync.kind == SyncKind::Delta,
            "expected a delta, got {:?}",
            sync.kind
        );
        println!(
            "client sync: delta {} ({:.2}% of the full filter)",
            report::bytes(sync.body_bytes),
            100.0 * sync.body_bytes as f64 / service.snapshot().full_filter_bytes() as f64
        );
        cache = c.context("no filter")?;
        let out = cache.query(&mut ch, &keys).await?;
        print_query(&out);
        let mut expected: BTreeSet<u64> = expected.difference(&removed).copied().collect();
        let client_ids: BTreeSet<u64> = plan.client_ids.iter().copied().collect();
        expected.extend(added.intersection(&client_ids));
        check(
            "query after update",
            &matched_ids(&table, &rows_of_key, &out.matches)?,
            &expected,
        )?;
        drop(ch);
        server.abort();
        Ok(())
    })
}

/// Ids to remove (1% of the server, including half the common items) and
/// to add (1%, including some client-only items).
fn update_plan(a: &DemoArgs, common: &[u64], client: &[u64]) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let one_percent = (a.server_items / 100).max(1);
    let mut removed: BTreeSet<u64> = common.iter().step_by(2).copied().collect();
    removed.extend((0..a.server_items).step_by(97).take(one_percent as usize));
    let client_only = client.iter().filter(|&&id| id >= a.server_items).take(10);
    let mut added: BTreeSet<u64> = client_only.copied().collect();
    let fresh_start = a.server_items + a.client_items + 1_000;
    added.extend(fresh_start..fresh_start + one_percent);
    (removed, added)
}

fn check(what: &str, got: &BTreeSet<u64>, expected: &BTreeSet<u64>) -> Result<()> {
    // False positives happen with probability ~|Y| * 2^-30: a mismatch is a bug.
    if got != expected {
        bail!(
            "{what}: found {} matches, expected {} ({} missing, {} extra)",
            got.len(),
            expected.len(),
            expected.difference(got).count(),
            got.difference(expected).count()
        );
    }
    println!(
        "{what}: {} matches, equal to the plaintext intersection",
        got.len()
    );
    Ok(())
}

/// Both RR16 modes over loopback TCP on two generated files of the
/// client's size, the receiver's result checked and revealed to the sender.
fn rr16_demo(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== rr16: malicious-secure PSI, OT extension + garbled Bloom filter ==");
    std::fs::create_dir_all(dir)?;
    let (sender_csv, receiver_csv) = (dir.join("sender.csv"), dir.join("receiver.csv"));
    let n = a.client_items.max(1);
    let overlap = a.overlap.min(n);
    let plan = write_overlapping_pair(&sender_csv, &receiver_csv, n, n, overlap, a.seed)?;
    println!("generated two files of {n} rows with {overlap} in common");
    let spec = email_spec();
    let sender_table = read_rows(&sender_csv, &spec)?;
    let receiver_table = read_rows(&receiver_csv, &spec)?;
    let (sender_keys, _) = unique_keys(&sender_table);
    let (receiver_keys, receiver_rows) = unique_keys(&receiver_table);
    let expected: BTreeSet<u64> = plan.common_ids.iter().copied().collect();
    for malicious in [true, false] {
        let cfg = Rr16Config {
            malicious,
            reveal_to_sender: true,
            ..Rr16Config::default()
        };
        let t = Instant::now();
        let (sender_out, receiver_out) = runtime()?.block_on(async {
            let (mut to_sender, mut to_receiver) = loopback_pair(Limits::default()).await?;
            let keys = sender_keys.clone();
            let cfg2 = cfg.clone();
            let sender =
                tokio::spawn(async move { run_sender(&mut to_receiver, &keys, &cfg2).await });
            let receiver = run_receiver(&mut to_sender, &receiver_keys, &cfg).await?;
            anyhow::Ok((sender.await??, receiver))
        })?;
        let mode = if malicious {
            "malicious"
        } else {
            "semi-honest"
        };
        println!("{mode}: done in {}", report::secs(t.elapsed()));
        let r = &receiver_out;
        print_run(
            "  receiver",
            &r.params,
            &r.phases,
            r.bytes_sent,
            r.bytes_received,
        );
        check(
            &format!("{mode} receiver"),
            &matched_ids(&receiver_table, &receiver_rows, &r.matches)?,
            &expected,
        )?;
        let revealed = sender_out.revealed.as_ref().map_or(0, Vec::len);
        ensure!(
            revealed == expected.len(),
            "the sender was told {revealed} matches"
        );
    }
    Ok(())
}

/// A loopback TCP channel pair (client side, server side).
pub async fn loopback_pair(limits: Limits) -> Result<(Channel, Channel)> {
    let listener = Listener::bind("127.0.0.1:0", None, limits).await?;
    let addr = listener.local_addr()?.to_string();
    let accept = tokio::spawn(async move { listener.accept().await?.handshake().await });
    let client = connect(&addr, None, limits).await?;
    let server = accept.await??;
    Ok((client, server))
}
