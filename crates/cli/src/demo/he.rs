//! The HE protocol's demo: a labeled database, checked queries before and
//! after an update.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use psikit_protocols::common::connect::{runtime, ServerAddr};
use psikit_protocols::he_psi::facade::{self as he_facade, BuildOptions};
use psikit_protocols::he_psi::params::PsiParams;
use psikit_protocols::he_psi::select::SelectionInput;
use psikit_protocols::he_psi::HeService;
use psikit_protocols::io::{
    decode_label, read_rows, synthetic_row, write_overlapping_pair, write_synthetic_csv,
    ByteRecord, Column, KeySpec, MatchWriter, OverlapPlan, Table,
};
use psikit_protocols::service::{LocalServer, ServerLimits, Service};
use psikit_protocols::{Match, NoProgress};

use super::args::DemoArgs;
use super::common::{check, email_spec};
use crate::{he_cmd, report};

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
pub(super) fn run(a: &DemoArgs, dir: &Path) -> Result<()> {
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
        let server = LocalServer::serving(service.clone()).await?;
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
    he_cmd::print_state(crate::report::Say::default(), &done.state, dir)?;
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
    let (keys, rows_of_key) = table.unique_keys();
    let mut ch = ServerAddr::plain(addr).connect().await?;
    let session = he_facade::query(&mut ch, &keys, &Default::default(), &NoProgress).await?;
    he_cmd::print_session(crate::report::Say::default(), &session);
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
