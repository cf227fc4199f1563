//! What every family's demo shares: the key column of the generated files,
//! the ids of matched rows, and the check of a result against the plaintext
//! truth.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use psikit_protocols::common::connect::Peer;
use psikit_protocols::common::Limits;
use psikit_protocols::io::{Column, KeySpec, Normalize, Table};

/// The sending party's side of a demo run: a free loopback port, plain
/// TCP, default limits (it tells the receiver the port once bound).
pub(super) fn loopback_listener() -> Peer {
    Peer::Listen {
        addr: "127.0.0.1:0".into(),
        tls: None,
        limits: Limits::default(),
        accept_timeout: None,
    }
}

pub(super) fn email_spec() -> KeySpec {
    let mut spec = KeySpec::new(vec![Column::Name("email".into())]);
    spec.normalize = Normalize::parse("trim,lower").unwrap_or_default();
    spec
}

/// The `id` column of the client rows whose key matched.
pub(super) fn matched_ids(
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

pub(super) fn check(what: &str, got: &BTreeSet<u64>, expected: &BTreeSet<u64>) -> Result<()> {
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
