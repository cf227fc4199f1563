//! `psikit demo`: runs the protocols end to end on generated data over
//! loopback TCP and checks every result against the plaintext truth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use psikit_protocols::common::connect::{Limits, Peer, ServerAddr};
use psikit_protocols::filter_psi::{self, FilterClient, FilterConfig, FilterService, SyncKind};
use psikit_protocols::he_psi::facade::{self as he_facade, BuildOptions};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::select::SelectionInput;
use psikit_protocols::he_psi::HeService;
use psikit_protocols::io::{
    decode_label, read_rows, synthetic_row, write_overlapping_pair, write_synthetic_csv,
    ByteRecord, Column, KeySpec, MatchWriter, Normalize, OverlapPlan, Table,
};
use psikit_protocols::rr16::{self, Rr16Config};
use psikit_protocols::service::{LocalServer, Router, ServerLimits, Service};
use psikit_protocols::{Match, NoProgress};

use crate::args::runtime;
use crate::filter_cmd::print_query;
use crate::he_cmd;
use crate::matches::unique_keys;
use crate::report;
use crate::rr16_cmd::print_run;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Unbalanced PSI: DH OPRF + updatable cuckoo filter.
    Filter,
    /// Malicious-secure PSI: OT extension + garbled Bloom filter (RR16).
    Rr16,
    /// Unbalanced labeled PSI: homomorphic encryption (APSI design).
    He,
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
    /// Server set size of the HE demo.
    #[arg(long, default_value_t = 4096)]
    pub he_server_items: u64,
    /// Client set size of the HE demo.
    #[arg(long, default_value_t = 256)]
    pub he_client_items: u64,
    /// How many HE client items are in the server's set.
    #[arg(long, default_value_t = 64)]
    pub he_overlap: u64,
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
    if all || a.protocol == Some(Protocol::He) {
        he_demo(&a, &dir.join("he"))?;
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

    // Server set-up, through the state directory as `psikit filter setup`
    // does (the demo's own directory: replaced if there).
    let state_dir = dir.join("state");
    let t = Instant::now();
    let done = filter_psi::setup(
        &server_csv,
        &spec,
        FilterConfig::default(),
        &state_dir,
        true,
        &NoProgress,
    )?;
    let f = done.state.filter();
    println!(
        "server setup: {} items in {}; filter {} ({:.1} bits/item, load {:.2}, false positives per item {})",
        done.state.len(),
        report::secs(t.elapsed()),
        report::bytes(f.size_bytes()),
        f.bits_per_item(),
        f.load_factor(),
        report::prob(f.estimated_fpr())
    );
    let service = Arc::new(FilterService::open(&state_dir, ServerLimits::default())?);

    runtime()?.block_on(async {
        let mut router = Router::new(ServerLimits::default());
        router.register(service.clone())?;
        let server = LocalServer::start(router, Limits::default()).await?;
        let addr = server.addr().to_string();
        println!("server listening on {addr}");

        let table = read_rows(&client_csv, &spec)?;
        let (keys, rows_of_key) = unique_keys(&table);
        let mut ch = server.connect(Limits::default()).await?;
        let mut client = FilterClient::in_memory(1 << 32);
        let sync = client.sync(&mut ch).await?;
        ensure!(
            sync.kind == SyncKind::Full,
            "first sync should download the full filter"
        );
        println!(
            "client sync: full filter, {}",
            report::bytes(sync.body_bytes)
        );

        let expected: BTreeSet<u64> = plan.common_ids.iter().copied().collect();
        let out = client.query_synced(&mut ch, &keys).await?;
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
        let t = Instant::now();
        let (state, upd) =
            filter_psi::update(&state_dir, &spec, Some(&add_csv), Some(&remove_csv))?;
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
        match client.query_synced(&mut ch, &keys).await {
            Err(e) if e.is_stale() => {
                println!("client query with the old filter: refused as stale ({e})")
            }
            Err(e) => bail!("expected a stale-filter error, got: {e}"),
            Ok(_) => bail!("the server answered a query against a stale filter"),
        }
        let sync = client.sync(&mut ch).await?;
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
        let out = client.query_synced(&mut ch, &keys).await?;
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
        drop(server);
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
            // The sender listens on a free port and tells the receiver
            // where, as two parties on two machines would.
            let (port_tx, port_rx) = tokio::sync::oneshot::channel::<String>();
            let listen = Peer::Listen {
                addr: "127.0.0.1:0".into(),
                tls: None,
                limits: Limits::default(),
            };
            let (keys, cfg2) = (sender_keys.clone(), cfg.clone());
            let sender = tokio::spawn(async move {
                rr16::facade::send(&listen, &keys, &cfg2, |addr| {
                    let _ = port_tx.send(addr.to_string());
                })
                .await
            });
            let addr = port_rx.await.context("the sender did not listen")?;
            let connect = Peer::Connect(ServerAddr::plain(addr));
            let receiver = rr16::facade::receive(&connect, &receiver_keys, &cfg, |_| {}).await?;
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

/// The HE demo's parameters: APSI's 256K-1024 set (n 4096, shipped as a
/// preset), quick to build and query at the demo's size.
const HE_DEMO_PARAMS: &str = "256K-1024";
/// Label room of the HE demo: an `id,name` record plus an update's suffix.
const HE_DEMO_LABEL_BYTES: usize = 40;
/// Suffix an update gives the labels it changes.
const RELABEL_SUFFIX: &str = " v2";

/// Labeled HE PSI over loopback TCP: a database whose labels are the
/// server rows' `id,name`, a query checked for matches and labels, then an
/// update (removals, new labels, additions) and a second checked query.
fn he_demo(a: &DemoArgs, dir: &Path) -> Result<()> {
    println!("\n== he: unbalanced labeled PSI, homomorphic encryption (APSI design, BFV) ==");
    std::fs::create_dir_all(dir)?;
    let (server_csv, client_csv) = (dir.join("server.csv"), dir.join("client.csv"));
    let (n, m, overlap) = (a.he_server_items, a.he_client_items, a.he_overlap);
    let plan = write_overlapping_pair(&server_csv, &client_csv, n, m, overlap, a.seed)?;
    println!(
        "generated {n} server rows (label: their id,name columns) and {m} client rows ({overlap} in common)"
    );
    let mut spec = email_spec();
    spec.label_columns = vec![Column::Name("id".into()), Column::Name("name".into())];
    let state_dir = dir.join("state");
    he_build(&server_csv, &spec, &state_dir)?;
    let service = Arc::new(HeService::open(&state_dir, true, ServerLimits::default())?);
    let mut expected: BTreeMap<u64, String> = plan
        .common_ids
        .iter()
        .map(|&id| (id, synthetic_row(a.seed, id).name))
        .collect();
    runtime()?.block_on(async {
        let mut router = Router::new(ServerLimits::default());
        router.register(service.clone())?;
        let server = LocalServer::start(router, Limits::default()).await?;
        let addr = server.addr().to_string();
        println!("server listening on {addr}");
        let client = read_rows(&client_csv, &email_spec())?;
        he_query(&addr, &client, "initial query", &expected).await?;

        let t = Instant::now();
        let (removed, relabelled) = he_update(a, dir, &plan, &spec, &state_dir)?;
        // As a running server's watcher does when the file changes.
        service
            .reload()?
            .context("the updated database was not reloaded")?;
        println!(
            "server update in {}: removed {}, relabelled or added {}",
            report::secs(t.elapsed()),
            removed.len(),
            relabelled.len()
        );
        expected.retain(|id, _| !removed.contains(id));
        let client_ids: BTreeSet<u64> = plan.client_ids.iter().copied().collect();
        for &id in relabelled.intersection(&client_ids) {
            let name = synthetic_row(a.seed, id).name + RELABEL_SUFFIX;
            expected.insert(id, name);
        }
        he_query(&addr, &client, "query after update", &expected).await?;
        drop(server);
        Ok(())
    })
}

/// Builds and saves the demo's database, as `psikit he db build` does.
fn he_build(csv: &Path, spec: &KeySpec, dir: &Path) -> Result<()> {
    let json = psikit_protocols::he_psi::presets::apsi_preset(HE_DEMO_PARAMS)
        .context("the demo's parameter set is missing")?;
    let options = BuildOptions {
        params: Some(PsiParams::from_apsi_json(json)?),
        max_label_bytes: Some(HE_DEMO_LABEL_BYTES),
        capacity: None,
        workload: SelectionInput::new(0, 0, 0),
        force: true,
    };
    let t = Instant::now();
    let done = he_facade::build(csv, spec, dir, options, &NoProgress)?;
    println!(
        "server setup: OPRF and bin bundles in {}",
        report::secs(t.elapsed())
    );
    he_cmd::print_state(&done.state, dir)?;
    Ok(())
}

/// Removes half the common items, relabels a quarter of them and adds ten
/// client-only items, through the state directory as `he db update` does.
/// Returns the ids removed and (re)labelled.
fn he_update(
    a: &DemoArgs,
    dir: &Path,
    plan: &OverlapPlan,
    spec: &KeySpec,
    state_dir: &Path,
) -> Result<(BTreeSet<u64>, BTreeSet<u64>)> {
    let removed: BTreeSet<u64> = plan.common_ids.iter().step_by(2).copied().collect();
    let mut relabelled: BTreeSet<u64> =
        plan.common_ids.iter().skip(1).step_by(4).copied().collect();
    let client_only = plan
        .client_ids
        .iter()
        .filter(|&&id| id >= a.he_server_items);
    relabelled.extend(client_only.take(10));
    let (remove_csv, add_csv) = (dir.join("remove.csv"), dir.join("add.csv"));
    write_synthetic_csv(&remove_csv, removed.iter().copied(), a.seed)?;
    write_relabelled(&add_csv, &relabelled, a.seed)?;
    let done = he_facade::update(
        state_dir,
        spec,
        Some(&add_csv),
        Some(&remove_csv),
        &NoProgress,
    )?;
    let gone = done.removed.map_or(0, |s| s.removed);
    ensure!(gone == removed.len(), "removed {gone} items");
    Ok((removed, relabelled))
}

/// Synthetic rows of `ids` with the relabel suffix on their names.
fn write_relabelled(path: &Path, ids: &BTreeSet<u64>, seed: u64) -> Result<()> {
    let header = ByteRecord::from(vec!["id", "email", "name"]);
    let mut out = MatchWriter::create(path, Some(&header), &[])?;
    for &id in ids {
        let row = synthetic_row(seed, id);
        let name = row.name + RELABEL_SUFFIX;
        let record = ByteRecord::from(vec![id.to_string(), row.email, name]);
        out.write_row::<&[u8]>(&record, &[])?;
    }
    out.finish()?;
    Ok(())
}

/// One client session against the demo server, checked against the
/// expected matches (`id` to name in the label).
async fn he_query(
    addr: &str,
    table: &Table,
    what: &str,
    expected: &BTreeMap<u64, String>,
) -> Result<()> {
    let (keys, rows_of_key) = unique_keys(table);
    let mut ch = ServerAddr::plain(addr).connect().await?;
    let session = he_facade::query(&mut ch, &keys, None).await?;
    he_cmd::print_session(&session);
    let got = he_labels(table, &rows_of_key, &session.matches)?;
    let want: BTreeSet<u64> = expected.keys().copied().collect();
    check(what, &got.keys().copied().collect(), &want)?;
    let wrong = expected
        .iter()
        .filter(|(id, name)| got.get(id) != Some(name));
    let wrong = wrong.count();
    ensure!(
        wrong == 0,
        "{what}: {wrong} labels differ from the server's"
    );
    println!("{what}: all {} labels equal to the server's", got.len());
    Ok(())
}

/// Matched client ids with the name in their label, checking that each
/// label is an `id,name` record whose id is the client row's own.
fn he_labels(
    table: &Table,
    rows_of_key: &[Vec<usize>],
    matches: &[Match],
) -> Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for m in matches {
        let label = m.label.as_deref().context("a match without a label")?;
        let fields = decode_label(label).context("a label that is not a CSV record")?;
        let [id, name] = &fields[..] else {
            bail!("a label with {} fields instead of id,name", fields.len());
        };
        for &r in rows_of_key.get(m.index).context("a match out of range")? {
            let row_id = table.rows[r].record.get(0).context("row without id")?;
            ensure!(row_id == id.as_slice(), "a label belongs to another item");
            let id: u64 = std::str::from_utf8(id)?.parse()?;
            out.insert(id, String::from_utf8(name.clone())?);
        }
    }
    Ok(out)
}
