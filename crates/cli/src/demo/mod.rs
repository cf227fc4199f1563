//! `psikit demo`: runs the protocols end to end on generated data over
//! loopback TCP and checks every result against the plaintext truth. One
//! file per protocol family, each built only with its feature.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use psikit_protocols::io::{Column, KeySpec, Normalize, Table};

#[cfg(feature = "cpsi")]
mod cpsi;
#[cfg(feature = "filter")]
mod filter;
#[cfg(feature = "he")]
mod he;
#[cfg(feature = "vole")]
mod psi;
#[cfg(feature = "rr16")]
mod rr16;
#[cfg(feature = "two-party")]
mod two_party;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Unbalanced PSI: DH OPRF + updatable cuckoo filter.
    #[cfg(feature = "filter")]
    Filter,
    /// Balanced PSI: silent VOLE + OKVS (VOLE-PSI).
    #[cfg(feature = "vole")]
    Psi,
    /// Malicious-secure PSI: OT extension + garbled Bloom filter (RR16).
    #[cfg(feature = "rr16")]
    Rr16,
    /// Circuit PSI: cardinality, sum, threshold, union and shares.
    #[cfg(feature = "cpsi")]
    Cpsi,
    /// Unbalanced labeled PSI: homomorphic encryption (APSI design).
    #[cfg(feature = "he")]
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
    #[cfg(feature = "filter")]
    if all || a.protocol == Some(Protocol::Filter) {
        filter::run(&a, &dir.join("filter"))?;
    }
    #[cfg(feature = "vole")]
    if all || a.protocol == Some(Protocol::Psi) {
        psi::run(&a, &dir.join("psi"))?;
    }
    #[cfg(feature = "rr16")]
    if all || a.protocol == Some(Protocol::Rr16) {
        rr16::run(&a, &dir.join("rr16"))?;
    }
    #[cfg(feature = "cpsi")]
    if all || a.protocol == Some(Protocol::Cpsi) {
        cpsi::run(&a, &dir.join("cpsi"))?;
    }
    #[cfg(feature = "he")]
    if all || a.protocol == Some(Protocol::He) {
        he::run(&a, &dir.join("he"))?;
    }
    println!("\ndemo passed: every result matched the plaintext computation");
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
