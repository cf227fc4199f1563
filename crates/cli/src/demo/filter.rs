//! The filter protocol's demo: set-up, a checked query, an update and a
//! checked query after a delta sync.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Result};
use psikit_protocols::common::connect::runtime;
use psikit_protocols::common::Limits;
use psikit_protocols::filter_psi::{self, FilterClient, FilterConfig, FilterService, SyncKind};
use psikit_protocols::io::{read_rows, write_overlapping_pair, write_synthetic_csv};
use psikit_protocols::service::{LocalServer, ServerLimits};
use psikit_protocols::NoProgress;

use super::args::DemoArgs;
use super::common::{check, email_spec, matched_ids};
use crate::filter_cmd::print_query;
use crate::report;
use crate::report::Say;

pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
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
        let server = LocalServer::serving(service.clone()).await?;
        let addr = server.addr().to_string();
        println!("server listening on {addr}");

        let table = read_rows(&client_csv, &spec)?;
        let (keys, rows_of_key) = table.unique_keys();
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
        print_query(Say::default(), &out);
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
        let (state, upd) = filter_psi::update(
            &state_dir,
            &spec,
            Some(&add_csv),
            Some(&remove_csv),
            &NoProgress,
        )?;
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
        print_query(Say::default(), &out);
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
