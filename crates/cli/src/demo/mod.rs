//! `psikit demo`: runs the protocols end to end on generated data over
//! loopback TCP and checks every result against the plaintext truth. One
//! file per protocol family, each built only with its feature; the command's
//! arguments in `args.rs`, the helpers every family's demo uses (the key
//! spec, matched ids, the check against the truth) in `common.rs`.

use anyhow::{Context, Result};

mod args;
mod common;
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

pub use args::DemoArgs;
use args::Protocol;

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
